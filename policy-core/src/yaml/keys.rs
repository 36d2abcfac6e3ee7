//! Duplicate keys, as every YAML reader would see them.
//!
//! A mapping that names a key twice is read differently by different tools:
//! toolgate's parser keeps the first of two `<<` merge keys, PyYAML the last,
//! so a reviewer could read a safe policy that is not the one enforced. This
//! pass refuses, in every mapping of a policy or a YAML catalog:
//!
//! - any key written twice, quoted or not, merge keys (`<<`) included;
//! - a plain key that YAML 1.1 or YAML 1.2 resolution turns into a null, a
//!   boolean or a number (`~`, `true`, `1`, `0x1F`, `1e3`, `.inf`): this
//!   reader keys by the text, YAML readers by the value (`0x1F` is 31 to
//!   them, `true` is Python's `True`, and `yes` / `1` are one key to
//!   Python), so such a key is refused where it is written and every key
//!   left means its text to every reader;
//! - a key that two mappings merged by one `<<: [*a, *b]` both define (which
//!   one wins is where readers disagree); the same anchor listed twice is
//!   one mapping, not two.
//!
//! A key written in a mapping still overrides a merged one: YAML's merge-key
//! rule as the common readers apply it, and how merges are used
//! (docs/policy-format.md names a reader that differs).
//!
//! Runs before the main parse, so every duplicate is reported at its line
//! and column (the main parse names some without a position). Aliases are
//! not expanded here; the keys that merges copy are counted, and past a
//! bound (or past a depth) the pass stops and leaves the verdict to the main
//! parse's budgets: if the main parse then accepts the document, the load
//! still fails with this pass's problem (fail closed).
//!
//! The same walk over the parser's events refuses, anywhere in the text and
//! before any duplicate (one parse of the text for every check), what YAML
//! readers read two ways: tags; an anchor name defined twice (an alias means
//! the later one to YAML 1.2, PyYAML refuses the text); an anchor on `<<`
//! (an alias of it is a merge to PyYAML, a plain key here); a plain number
//! with a leading zero (`010`: 8 to YAML 1.1, 10 to YAML 1.2); and a list
//! inside a merge list (`<<: [[*a], *b]`: flattened by some readers, refused
//! by others, and it would hide two merged mappings defining one key).

use super::{Position, TAGS_REFUSED, is_merge_key, is_null_spelling, is_tagged};
use crate::error::{Origin, Problem, ProblemCode};
use granit_parser::{Event, ScalarStyle, Span};
use std::collections::BTreeMap;
use std::rc::Rc;

/// A key, by its text: the keys that some reader would key by another
/// value are refused (module docs), so the text is what every reader keys by.
type Key = Rc<str>;

/// Keys in the order written, and a look-up that keeps a policy with 10 000
/// tools from being quadratic.
#[derive(Debug, Default)]
struct KeySet {
    keys: Vec<Key>,
    index: std::collections::BTreeSet<Key>,
}

impl KeySet {
    fn contains(&self, key: &str) -> bool {
        self.index.contains(key)
    }

    fn insert(&mut self, key: Key) {
        if self.index.insert(key.clone()) {
            self.keys.push(key);
        }
    }
}

/// What a plain scalar resolves to, to some YAML reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    Text,
    Null,
    /// A boolean or a number.
    Value,
}

/// What a node is, as far as keys are concerned.
#[derive(Debug, Clone)]
enum Shape {
    Scalar(Key, Reading),
    /// A mapping's keys after its own merges.
    Map(Rc<[Key]>),
    /// A sequence's mapping elements (for `<<: [*a, *b]`), with positions,
    /// and where its first element that is not a mapping is.
    Seq(Rc<[(Rc<[Key]>, Position)]>, Option<Position>),
    Other,
}

/// Keys copied by merges, across the document: a bound on this pass's work.
const MAX_MERGED_KEYS: usize = 1_000_000;
/// Deeper than the main parse allows (48, `yaml.rs`), so every document the
/// main parse accepts is checked whole; only a guard for the recursion.
const MAX_DEPTH: usize = 64;
const _: () = assert!(MAX_DEPTH > 48);

/// How far the pass got without finding a duplicate.
#[derive(Debug)]
pub enum Checked {
    /// Every mapping was checked.
    All,
    /// The pass stopped at a bound (merge work, depth): this problem fails
    /// the load unless the main parse refuses the document first.
    Unfinished(Problem),
}

/// Why the walk stopped early.
enum Stop {
    Duplicate(Problem),
    Bound(Problem),
}

struct Checker<'input, I> {
    events: I,
    origin: Origin,
    anchors: BTreeMap<usize, Shape>,
    merged_keys: usize,
    /// Events read, and whether the parser has stopped (end or error).
    seen: usize,
    ended: bool,
    /// The first thing refused on sight (see [`refuse_tags_and_duplicate_keys`]).
    refused: Option<Problem>,
    /// Every anchor name defined so far.
    anchor_names: std::collections::BTreeSet<String>,
    _input: std::marker::PhantomData<&'input ()>,
}

/// Tags are looked for up to the tree builder's event budget, which refuses
/// longer texts (and any tag it meets) itself.
const TAG_SCAN_EVENTS: usize = super::tree::limits::EVENTS + 1;

/// Refuses YAML tags (`!custom false`, `!!binary …`, `!!str`), anywhere in
/// the text and before any duplicate key: a tagged value could mean
/// something other than what a reviewer reads (an untyped reader drops an
/// unknown tag, decodes a known one), and the formats need none. Then
/// refuses duplicate keys (module docs). One pass over the parser's events
/// for both; syntax errors are the main parse's to report, this pass stops
/// quietly at one.
pub fn refuse_tags_and_duplicate_keys(text: &str, origin: Origin) -> Result<Checked, Problem> {
    let options = granit_parser::options! { emit_anchor_events: true };
    let mut checker = Checker {
        events: granit_parser::Parser::new_from_str_with_options(text, options),
        origin,
        anchors: BTreeMap::new(),
        merged_keys: 0,
        seen: 0,
        ended: false,
        refused: None,
        anchor_names: std::collections::BTreeSet::new(),
        _input: std::marker::PhantomData,
    };
    let walked = checker.walk();
    // A tag after where the key walk stopped is still refused first.
    while checker.refused.is_none() && !checker.ended && checker.seen <= TAG_SCAN_EVENTS {
        checker.next_event();
    }
    match (checker.refused, walked) {
        (Some(tag), _) => Err(tag),
        (None, Ok(())) => Ok(Checked::All),
        (None, Err(Stop::Duplicate(problem))) => Err(problem),
        (None, Err(Stop::Bound(problem))) => Ok(Checked::Unfinished(problem)),
    }
}

fn is_node_start(event: &Event<'_>) -> bool {
    matches!(
        event,
        Event::Scalar(..) | Event::SequenceStart(..) | Event::MappingStart(..) | Event::Alias(_)
    )
}

impl<'input, I> Checker<'input, I>
where
    I: Iterator<Item = Result<(Event<'input>, Span), granit_parser::ScanError>>,
{
    fn walk(&mut self) -> Result<(), Stop> {
        while let Some((event, span)) = self.next_event() {
            if is_node_start(&event) {
                self.node(event, &span, 0, false)?;
            }
        }
        Ok(())
    }

    fn next_event(&mut self) -> Option<(Event<'input>, Span)> {
        if self.ended {
            return None;
        }
        let Some(Ok((event, span))) = self.events.next() else {
            self.ended = true;
            return None;
        };
        self.seen += 1;
        if self.refused.is_none() && self.seen <= TAG_SCAN_EVENTS {
            let at = Position::from(&span);
            self.refused = self
                .read_two_ways(&event)
                .map(|(code, message)| Problem::new(code, self.origin, message).at(at.line, at.column));
        }
        Some((event, span))
    }

    /// Why `event` is refused on sight, if it is: it means one thing to some
    /// YAML readers and another to others.
    fn read_two_ways(&mut self, event: &Event<'input>) -> Option<(ProblemCode, &'static str)> {
        let syntax = |message| Some((ProblemCode::Syntax, message));
        match event {
            _ if is_tagged(event) => syntax(TAGS_REFUSED),
            Event::Anchor(_, name) if !self.anchor_names.insert(name.to_string()) => {
                syntax("an anchor name defined twice: readers disagree on which one an alias means")
            }
            Event::Scalar(text, ScalarStyle::Plain, anchor, _) if *anchor != 0 && text == "<<" => {
                syntax("an anchor on `<<`: its alias is a merge to some readers, a key to others")
            }
            Event::Scalar(text, ScalarStyle::Plain, ..)
                if super::leading_zero_decimal(text.strip_prefix(['+', '-']).unwrap_or(text)) =>
            {
                syntax("a leading zero: `010` is 8 to YAML 1.1 and 10 to YAML 1.2: drop the zero or quote it")
            }
            // `no`, `on`, `y`, `0_10`, `1:20`: text to this reader, a
            // boolean or a number to YAML 1.1 readers (PyYAML).
            Event::Scalar(text, ScalarStyle::Plain, ..) if text_only_here(text) => Some((
                ProblemCode::InvalidValue,
                "a boolean or number to YAML 1.1 readers: quote it",
            )),
            _ => None,
        }
    }

    /// The next node or collection end, skipping presentation events.
    fn next_structural(&mut self) -> Option<(Event<'input>, Span)> {
        while let Some((event, span)) = self.next_event() {
            if is_node_start(&event) || matches!(event, Event::SequenceEnd | Event::MappingEnd) {
                return Some((event, span));
            }
            if matches!(event, Event::StreamEnd | Event::DocumentEnd) {
                return None;
            }
        }
        None
    }

    fn duplicate(&self, at: Position, message: String) -> Stop {
        Stop::Duplicate(Problem::new(ProblemCode::Syntax, self.origin, message).at(at.line, at.column))
    }

    fn bound(&self, at: Position, message: &str) -> Stop {
        Stop::Bound(Problem::new(ProblemCode::Syntax, self.origin, message).at(at.line, at.column))
    }

    fn remember(&mut self, anchor: usize, shape: &Shape) {
        if anchor != 0 {
            self.anchors.insert(anchor, shape.clone());
        }
    }

    /// Reads one node whose first event is `event`. `as_key`: a scalar's
    /// meanings are worked out (for keys and anchored scalars only).
    fn node(&mut self, event: Event<'input>, span: &Span, depth: usize, as_key: bool) -> Result<Shape, Stop> {
        if depth > MAX_DEPTH {
            return Err(self.bound(Position::from(span), "the YAML nests too deeply"));
        }
        match event {
            Event::Scalar(value, style, anchor, _) => {
                if !as_key && anchor == 0 {
                    return Ok(Shape::Other);
                }
                let reading = match style {
                    ScalarStyle::Plain => reading(&value),
                    _ => Reading::Text,
                };
                let shape = Shape::Scalar(Rc::from(value.as_ref()), reading);
                self.remember(anchor, &shape);
                Ok(shape)
            }
            Event::Alias(id) => Ok(self.anchors.get(&id).cloned().unwrap_or(Shape::Other)),
            Event::SequenceStart(_, anchor, _) => {
                let mut maps = Vec::new();
                let mut not_a_mapping = None;
                while let Some((child, at)) = self.next_structural() {
                    if matches!(child, Event::SequenceEnd) {
                        break;
                    }
                    match self.node(child, &at, depth + 1, false)? {
                        Shape::Map(keys) => maps.push((keys, Position::from(&at))),
                        _ => not_a_mapping = not_a_mapping.or(Some(Position::from(&at))),
                    }
                }
                let shape = Shape::Seq(maps.into(), not_a_mapping);
                self.remember(anchor, &shape);
                Ok(shape)
            }
            Event::MappingStart(_, anchor, _) => {
                let shape = self.mapping(depth)?;
                self.remember(anchor, &shape);
                Ok(shape)
            }
            _ => Ok(Shape::Other),
        }
    }

    fn mapping(&mut self, depth: usize) -> Result<Shape, Stop> {
        let mut written = KeySet::default();
        let mut merged: Vec<(Key, Position)> = Vec::new();
        while let Some((key_event, key_span)) = self.next_structural() {
            if matches!(key_event, Event::MappingEnd) {
                break;
            }
            let is_merge = is_merge_key(&key_event);
            let key_at = Position::from(&key_span);
            let key = self.node(key_event, &key_span, depth + 1, true)?;
            if let Shape::Scalar(key, reading) = key {
                // This reader keys by the text; YAML readers by the value
                // (`0x1F:` is 31 to them, `1e3:` a float to one and text to
                // another): quoted, a key is the same text to all.
                match reading {
                    Reading::Text => {}
                    // As the main parse says it, first (`~` and `null` are
                    // one key to YAML readers, two texts here).
                    Reading::Null => {
                        return Err(self.duplicate(key_at, "a mapping key is null: write the key as text".to_owned()));
                    }
                    Reading::Value => {
                        return Err(self.duplicate(
                            key_at,
                            "a mapping key that is a number or a boolean to YAML readers: quote it".to_owned(),
                        ));
                    }
                }
                if written.contains(&key) {
                    let message = if is_merge {
                        "a mapping has two merge keys (`<<`); readers disagree on which wins: merge a list `<<: [*a, *b]` instead".to_owned()
                    } else {
                        format!("duplicate key {}", quoted(&key))
                    };
                    return Err(self.duplicate(key_at, message));
                }
                written.insert(key);
            }
            let Some((value_event, value_span)) = self.next_structural() else {
                break;
            };
            let value = self.node(value_event, &value_span, depth + 1, false)?;
            if is_merge {
                let sources: Vec<(Rc<[Key]>, Position)> = match value {
                    Shape::Map(keys) => vec![(keys, Position::from(&value_span))],
                    // Anything else is refused by PyYAML, flattened or
                    // skipped by others (a list in the list), or dropped
                    // (`<<: ~`) by this parser's tree.
                    Shape::Seq(_, Some(at)) => {
                        return Err(self.duplicate(
                            at,
                            "a merge list holds only mappings; readers disagree on anything else: list the mappings"
                                .to_owned(),
                        ));
                    }
                    Shape::Seq(maps, None) => maps.to_vec(),
                    Shape::Scalar(..) | Shape::Other => {
                        return Err(self.duplicate(
                            Position::from(&value_span),
                            "a merge key (`<<`) takes a mapping or a list of mappings; readers disagree on anything else".to_owned(),
                        ));
                    }
                };
                let mut from_this_merge = KeySet::default();
                for (i, (keys, at)) in sources.iter().enumerate() {
                    // The same anchored mapping merged twice is one source:
                    // the same node, which no reader can read two ways.
                    if sources.iter().take(i).any(|(earlier, _)| Rc::ptr_eq(earlier, keys)) {
                        continue;
                    }
                    let at = *at;
                    self.merged_keys = self.merged_keys.saturating_add(keys.len());
                    if self.merged_keys > MAX_MERGED_KEYS {
                        return Err(self.bound(at, "too many keys copied by merge keys (`<<`)"));
                    }
                    for k in keys.iter() {
                        if from_this_merge.contains(k) {
                            return Err(self.duplicate(
                                at,
                                format!(
                                    "two merged mappings both define {}; readers disagree on which wins: write the key in this mapping",
                                    quoted(k)
                                ),
                            ));
                        }
                    }
                    for k in keys.iter() {
                        from_this_merge.insert(k.clone());
                    }
                }
                let at = Position::from(&value_span);
                merged.extend(from_this_merge.keys.into_iter().map(|k| (k, at)));
            }
        }
        // The mapping's keys as a merge source elsewhere: its written keys
        // (not `<<`), and the merged keys it does not override.
        let mut keys = KeySet::default();
        for k in written.keys.iter().filter(|k| k.as_ref() != "<<") {
            keys.insert(k.clone());
        }
        for (k, _) in merged {
            if !written.contains(&k) {
                keys.insert(k);
            }
        }
        Ok(Shape::Map(keys.keys.into()))
    }
}

/// A key in a message.
fn quoted(key: &str) -> String {
    format!("`{}`", crate::json::truncate_for_message(key))
}

/// What a plain scalar resolves to in YAML 1.1 or 1.2 (core schema), the
/// most typed of the two.
fn reading(text: &str) -> Reading {
    if is_null_spelling(text) {
        Reading::Null
    } else if resolves_to_a_value(text) {
        Reading::Value
    } else {
        Reading::Text
    }
}

/// Whether a plain scalar this reader takes as text is a boolean or a
/// number in YAML 1.1 or 1.2.
fn text_only_here(text: &str) -> bool {
    resolves_to_a_value(text) && matches!(super::tree::typed_plain(text), Ok(super::NodeValue::Str(_)))
}

/// Whether YAML 1.1 or YAML 1.2 core-schema resolution makes a boolean or a
/// number of a plain scalar (a little generously: a form either version
/// accepts counts, whatever its size).
fn resolves_to_a_value(text: &str) -> bool {
    if matches!(
        text,
        "true"
            | "True"
            | "TRUE"
            | "y"
            | "Y"
            | "yes"
            | "Yes"
            | "YES"
            | "on"
            | "On"
            | "ON"
            | "false"
            | "False"
            | "FALSE"
            | "n"
            | "N"
            | "no"
            | "No"
            | "NO"
            | "off"
            | "Off"
            | "OFF"
    ) {
        return true;
    }
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    // `_1`, `--1`: text to every reader.
    if body.starts_with(['_', '+', '-']) {
        return false;
    }
    if matches!(body, ".inf" | ".Inf" | ".INF") || matches!(text, ".nan" | ".NaN" | ".NAN") {
        return true;
    }
    // Underscores are digit separators in YAML 1.1.
    let digits: String = body.chars().filter(|&c| c != '_').collect();
    let all_in = |radix: u32, s: &str| !s.is_empty() && s.chars().all(|c| c.is_digit(radix));
    if let Some(hex) = digits.strip_prefix("0x") {
        all_in(16, hex)
    } else if let Some(oct) = digits.strip_prefix("0o") {
        all_in(8, oct)
    } else if let Some(bin) = digits.strip_prefix("0b") {
        all_in(2, bin)
    } else if digits.contains(':') {
        sexagesimal(&digits)
    } else {
        all_in(10, &digits)
            || (digits.bytes().any(|b| b.is_ascii_digit())
                && digits
                    .bytes()
                    .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
                && digits.parse::<f64>().is_ok())
    }
}

/// YAML 1.1 base 60: `1:30` (90), `1:30.5` (90.5).
fn sexagesimal(digits: &str) -> bool {
    let mut parts = digits.split(':');
    // YAML 1.1's base 60 starts with 1-9: `09:30` is text to PyYAML too.
    let Some(first) = parts.next() else { return false };
    if first.is_empty() || first.starts_with('0') || !first.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let mut fraction = false;
    for part in parts {
        let (minutes, frac) = match part.split_once('.') {
            Some((m, f)) => (m, Some(f)),
            None => (part, None),
        };
        if fraction || minutes.is_empty() || minutes.len() > 2 || !minutes.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        if !minutes.parse::<u8>().is_ok_and(|m| m < 60) {
            return false;
        }
        fraction = frac.is_some();
        if let Some(f) = frac
            && !f.is_empty()
            && format!("0.{f}").parse::<f64>().is_err()
        {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<(), Problem> {
        match refuse_tags_and_duplicate_keys(text, Origin::Policy)? {
            Checked::All => Ok(()),
            Checked::Unfinished(problem) => Err(problem),
        }
    }

    fn refused_at(text: &str) -> (u32, u32) {
        let e = check(text).err().unwrap_or_else(|| unreachable!("accepted: {text}"));
        assert_eq!(e.code, ProblemCode::Syntax);
        (e.line, e.column)
    }

    #[test]
    fn same_text_twice_is_refused_at_the_second() {
        assert_eq!(refused_at("a: 1\nb: 2\na: 3\n"), (3, 1));
        assert_eq!(refused_at("x:\n  <<: {a: 1}\n  <<: {b: 2}\n"), (3, 3));
        assert_eq!(refused_at("{\"a\": 1, 'a': 2}"), (1, 10));
        assert_eq!(refused_at("&k a: 1\n*k : 2\n"), (2, 1));
    }

    #[test]
    fn the_same_text_quoted_or_not_is_one_key() {
        // (`yes`, `on`, `1:30`, text here and values to YAML 1.1, and keys
        // that are null, numbers or booleans, are refused before they can
        // be a duplicate: what is left is text, quoted or not.)
        for (a, b) in [
            ("\"yes\"", "\"yes\""),
            ("'a'", "a"),
            ("\"x y\"", "x y"),
            ("'~'", "\"~\""),
        ] {
            let text = format!("{a}: p\n{b}: q\n");
            assert_eq!(refused_at(&text), (2, 1), "{a} / {b}");
        }
    }

    /// `~` and `null` are one key to YAML readers and two texts to this
    /// one: a null key is refused where it is written, as the main parse
    /// refuses it, alias or merged mapping.
    #[test]
    fn a_null_key_is_refused_where_it_is() {
        for (text, at) in [
            ("~: p\nnull: q\n", (1, 1)),
            ("a: x\nNULL: p\n", (2, 1)),
            ("x:\n  a: 2\n  <<: {null: 1}\n", (3, 8)),
            ("a: &n ~\n*n : b\n", (2, 1)),
        ] {
            let e = check(text).err().unwrap_or_else(|| unreachable!("accepted: {text}"));
            assert_eq!((e.code, e.line, e.column), (ProblemCode::Syntax, at.0, at.1), "{text}");
            assert!(e.message.contains("a mapping key is null"), "{text}: {}", e.message);
        }
    }

    /// This reader keys by the text, YAML readers by the value (`0x1F` is
    /// 31 to them, `true` is Python's `True`): a key that is a number or a
    /// boolean to any of them is refused where it is written, alias or not.
    #[test]
    fn a_key_that_is_a_number_or_a_boolean_is_refused_where_it_is() {
        for (text, at) in [
            ("1: p\n", (1, 1)),
            ("0x1F: p\n", (1, 1)),
            ("true: p\n", (1, 1)),
            ("1e3: p\n", (1, 1)),
            ("1.0: p\n", (1, 1)),
            (".inf: p\n", (1, 1)),
            (".nan: p\n", (1, 1)),
            ("-0: p\n", (1, 1)),
            ("x:\n  +1: p\n", (2, 3)),
            ("x: {a: 1, 0o7: 2}\n", (1, 11)),
            ("a: &n 5\n*n : b\n", (2, 1)),
        ] {
            assert_eq!(refused_at(text), at, "{text}");
        }
        let fine = "'1': p\n\"0x1F\": q\n'true': r\nv1: s\n1a: t\nx: 5\n";
        assert!(check(fine).is_ok(), "{fine}");
    }

    /// What YAML readers read two ways is refused where it is written,
    /// before any duplicate: a leading-zero number (key or value), an anchor
    /// name defined twice, an anchor on `<<`, a merge of anything but
    /// mappings (a list inside a merge list, `<<: ~`, a scalar).
    #[test]
    fn what_readers_read_two_ways_is_refused_where_it_is() {
        for (text, at) in [
            ("010: x\n8: y\n", (1, 1)),
            ("a: 010\n", (1, 4)),
            ("a: -07\n", (1, 4)),
            ("a: &x 1\nb: &x 2\nc: *x\n", (2, 4)),
            ("a: {k: 1}\nb:\n  &m <<: *a\n", (3, 6)),
            ("a: &a {k: 1}\nb: &b {k: 2}\nc:\n  <<: [[*a], *b]\n", (4, 8)),
            ("a: &a {k: 1}\nl: &l [*a]\nc:\n  <<: [*l]\n", (4, 8)),
            ("c:\n  <<: ~\n  k: 1\n", (2, 7)),
            ("c:\n  <<: \n  k: 1\n", (2, 5)),
            ("c:\n  <<: 5\n", (2, 7)),
            ("a: &a {k: 1}\nc:\n  <<: [*a, 5]\n", (3, 12)),
            ("a: &a x\nc:\n  <<: *a\n", (3, 7)),
        ] {
            assert_eq!(refused_at(text), at, "{text}");
        }
        for fine in ["a: 0\nb: 0.5\nc: '010'\nd: 10\n", "a: &a {k: 1}\nc:\n  <<: [*a]\n"] {
            assert!(refuse_tags_and_duplicate_keys(fine, Origin::Policy).is_ok(), "{fine}");
        }
    }

    /// A plain scalar that is text to this reader and a boolean or a number
    /// to YAML 1.1 readers (PyYAML) is refused where it is, key or value.
    #[test]
    fn text_that_yaml_1_1_reads_as_a_value_is_refused_where_it_is() {
        for (text, at) in [
            ("yes: p\n", (1, 1)),
            ("a: [p, y]\n", (1, 8)),
            ("a: no\n", (1, 4)),
            ("a: Off\n", (1, 4)),
            ("a: 1:30\n", (1, 4)),
            ("a: 0_10\n", (1, 4)),
            ("true: p\non: q\n", (2, 1)),
            ("x:\n  <<: {on: 1}\n  true: 2\n", (2, 8)),
        ] {
            let e = check(text).err().unwrap_or_else(|| unreachable!("accepted: {text}"));
            assert_eq!(
                (e.code, e.line, e.column),
                (ProblemCode::InvalidValue, at.0, at.1),
                "{text}"
            );
        }
        let fine = "a: 'yes'\nb: \"no\"\nc: true\nd: 1_000\ne: x:y\nf: 12:75\ng: yess\nh: 09:30\ni: _1\nj: --1\n";
        assert!(check(fine).is_ok(), "{fine}");
    }

    #[test]
    fn different_keys_stay_different() {
        for (a, b) in [
            ("\"yes\"", "'true'"),
            ("'1'", "'01'"),
            ("'~'", "''"),
            ("a", "A"),
            ("alterar_plano", "alterar-plano"),
            ("v1", "v2"),
            ("'1'", "'2'"),
            ("'0.1'", "'0.10001'"),
            ("x:y", "x"),
        ] {
            let text = format!("{a}: p\n{b}: q\n");
            assert!(check(&text).is_ok(), "{a} / {b}");
        }
    }

    #[test]
    fn a_written_key_may_override_a_merged_one() {
        assert!(check("base: &b {a: 1, b: 2}\nx:\n  <<: *b\n  a: 3\n").is_ok());
        assert!(check("base: &b {a: 1, b: 2}\nx:\n  a: 3\n  <<: *b\n").is_ok());
        assert!(check("p: &p {a: 1}\nq: &q {b: 1}\nx:\n  <<: [*p, *q]\n").is_ok());
        // Nested merges: the anchored mapping's keys include what it merged.
        assert!(check("p: &p {a: 1}\nq: &q {<<: *p, b: 1}\nx:\n  <<: *q\n  a: 2\n").is_ok());
    }

    #[test]
    fn a_key_two_merged_mappings_define_is_refused() {
        assert_eq!(refused_at("p: &p {a: 1}\nq: &q {a: 2}\nx:\n  <<: [*p, *q]\n"), (4, 12));
        // Also when the overlap comes from a nested merge, or by resolution.
        assert_eq!(
            refused_at("p: &p {a: 1}\nq: &q {<<: *p, b: 1}\nx:\n  <<: [*q, *p]\n"),
            (4, 12)
        );
        // The same anchor twice is one source.
        assert!(check("p: &p {a: 1}\nx:\n  <<: [*p, *p]\n").is_ok());
        // Even when the mapping writes the key itself.
        assert_eq!(
            refused_at("p: &p {a: 1}\nq: &q {a: 2}\nx:\n  a: 0\n  <<: [*p, *q]\n"),
            (5, 12)
        );
    }

    #[test]
    fn merge_bombs_stop() {
        let mut text = String::from("a0: &a0 {");
        for i in 0..2000 {
            text.push_str(&format!("k{i}: 1, "));
        }
        text.push_str("z: 1}\n");
        for i in 0..600 {
            text.push_str(&format!("m{i}: {{<<: *a0}}\n"));
        }
        let unfinished = refuse_tags_and_duplicate_keys(&text, Origin::Policy);
        assert!(matches!(unfinished, Ok(Checked::Unfinished(_))), "{unfinished:?}");
        // The main parse accepts it (within its budgets): the load still fails.
        assert_eq!(
            crate::yaml::parse(&text, Origin::Policy).err().map(|e| e.code),
            Some(ProblemCode::Syntax)
        );
    }

    #[test]
    fn duplicates_the_main_parse_reports_without_a_position_get_one() {
        let e = crate::yaml::parse("a: x\n'1': a\n\"1\": b\n", Origin::Policy)
            .err()
            .unwrap_or_else(|| unreachable!());
        assert_eq!((e.code, e.line, e.column), (ProblemCode::Syntax, 3, 1));
    }
}
