//! Duplicate keys, as every YAML reader would see them.
//!
//! A mapping that names a key twice is read differently by different tools:
//! toolgate's parser keeps the first of two `<<` merge keys, PyYAML the last,
//! so a reviewer could read a safe policy that is not the one enforced. This
//! pass refuses, in every mapping of a policy or a YAML catalog:
//!
//! - any key written twice, merge keys (`<<`) included;
//! - two keys that are *the same key to some reader*: the same text once
//!   unquoted (`yes` / `"yes"`, `1` / `'1'`), or a plain scalar that YAML 1.1
//!   or YAML 1.2 resolution turns into the same null, boolean or number as
//!   another key (`~` / `null`, `yes` / `on` / `true`, `1` / `0x1` / `1.0` /
//!   `+1` / `0o1`, and, as Python compares them, `yes` / `1`),
//!   or into a value whose text (as a reader that turns keys into strings
//!   writes it: `null`, `true`, `1`, `Infinity`) is the other key's text;
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

/// One thing a scalar key may mean to some YAML reader.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Meaning {
    Text(String),
    Null,
    Bool(bool),
    Int(i128),
    /// A non-integral or out-of-range float, by its bits (every NaN is one).
    Float(u64),
}

/// Every meaning of one key. Two keys are the same key when their
/// meanings share one.
type Identity = Rc<[Meaning]>;

/// Keys, indexed by every meaning: a look-up costs a few tree searches, so
/// a policy with 10 000 tools is not quadratic.
#[derive(Debug, Default)]
struct KeySet {
    keys: Vec<Identity>,
    index: BTreeMap<Meaning, usize>,
}

impl KeySet {
    /// The key already here that is the same key as `key`.
    fn find(&self, key: &[Meaning]) -> Option<&Identity> {
        key.iter()
            .find_map(|m| self.index.get(m))
            .and_then(|&i| self.keys.get(i))
    }

    fn insert(&mut self, key: Identity) {
        for m in key.iter() {
            self.index.entry(m.clone()).or_insert(self.keys.len());
        }
        self.keys.push(key);
    }
}

/// What a node is, as far as keys are concerned.
#[derive(Debug, Clone)]
enum Shape {
    Scalar(Identity),
    /// A mapping's keys after its own merges.
    Map(Rc<[Identity]>),
    /// A sequence's mapping elements (for `<<: [*a, *b]`), with positions,
    /// and where its first element that is not a mapping is.
    Seq(Rc<[(Rc<[Identity]>, Position)]>, Option<Position>),
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
                let shape = Shape::Scalar(meanings(&value, style == ScalarStyle::Plain).into());
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
        let mut merged: Vec<(Identity, Position)> = Vec::new();
        while let Some((key_event, key_span)) = self.next_structural() {
            if matches!(key_event, Event::MappingEnd) {
                break;
            }
            let is_merge = is_merge_key(&key_event);
            let key_at = Position::from(&key_span);
            let key = self.node(key_event, &key_span, depth + 1, true)?;
            if let Shape::Scalar(identity) = key {
                // This reader keys by the text; YAML readers by the value
                // (`0x1F:` is 31 to them, `1e3:` a float to one and text to
                // another): quoted, a key is the same text to all. (A null
                // key is the main parse's to refuse.)
                if identity
                    .iter()
                    .any(|m| matches!(m, Meaning::Bool(_) | Meaning::Int(_) | Meaning::Float(_)))
                {
                    return Err(self.duplicate(
                        key_at,
                        "a mapping key that is a number or a boolean to YAML readers: quote it".to_owned(),
                    ));
                }
                if let Some(first) = written.find(&identity) {
                    let message = if is_merge {
                        "a mapping has two merge keys (`<<`); readers disagree on which wins: merge a list `<<: [*a, *b]` instead".to_owned()
                    } else {
                        format!("duplicate key {}", describe_pair(first, &identity))
                    };
                    return Err(self.duplicate(key_at, message));
                }
                written.insert(identity);
            }
            let Some((value_event, value_span)) = self.next_structural() else {
                break;
            };
            let value = self.node(value_event, &value_span, depth + 1, false)?;
            if is_merge {
                let sources: Vec<(Rc<[Identity]>, Position)> = match value {
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
                    Shape::Scalar(_) | Shape::Other => {
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
                        if let Some(first) = from_this_merge.find(k) {
                            return Err(self.duplicate(
                                at,
                                format!(
                                    "two merged mappings both define {}; readers disagree on which wins: write the key in this mapping",
                                    describe_pair(first, k)
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
        let merge_key = [Meaning::Text("<<".to_owned())];
        let mut keys = KeySet::default();
        for k in written.keys.iter().filter(|k| k.as_ref() != merge_key.as_slice()) {
            keys.insert(k.clone());
        }
        for (m, at) in merged {
            match written.find(&m) {
                None => keys.insert(m),
                // `true: …` over a merged `on: …`: an override to readers
                // that resolve both, two keys to one that does not (this
                // reader's tree keeps both).
                Some(w) if w.first() != m.first() => {
                    return Err(self.duplicate(
                        at,
                        format!(
                            "a merged key is overridden by {}: write it as merged",
                            describe_pair(&m, w)
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(Shape::Map(keys.keys.into()))
    }
}

/// `` `yes` `` or `` `yes` (the same key as `true`) ``, for messages.
fn describe_pair(first: &[Meaning], second: &[Meaning]) -> String {
    let text = |m: &[Meaning]| match m.first() {
        Some(Meaning::Text(t)) => crate::json::truncate_for_message(t).into_owned(),
        _ => String::new(),
    };
    let (a, b) = (text(first), text(second));
    if a == b {
        format!("`{b}`")
    } else {
        format!("`{b}` (the same key as `{a}` to YAML readers)")
    }
}

/// Every meaning a key may have: its text, and for a plain scalar, what
/// YAML 1.1 and 1.2 (core schema) resolution make of it and that value's text.
fn meanings(text: &str, plain: bool) -> Vec<Meaning> {
    let mut out = vec![Meaning::Text(text.to_owned())];
    if !plain {
        return out;
    }
    let mut values = Vec::new();
    resolve(text, &mut values);
    for value in values {
        if let Meaning::Bool(b) = value {
            // Python: True == 1, False == 0 (one dict key).
            push_unique(&mut out, Meaning::Int(i128::from(b)));
        }
        let text = value_text(&value);
        if !text.is_empty() {
            push_unique(&mut out, Meaning::Text(text));
        }
        push_unique(&mut out, value);
    }
    out
}

fn push_unique(out: &mut Vec<Meaning>, m: Meaning) {
    if !out.contains(&m) {
        out.push(m);
    }
}

/// A resolved value's text as a reader that turns keys into strings (a
/// JavaScript object) writes it.
fn value_text(value: &Meaning) -> String {
    match value {
        Meaning::Text(t) => t.clone(),
        Meaning::Null => "null".to_owned(),
        Meaning::Bool(b) => b.to_string(),
        Meaning::Int(n) => n.to_string(),
        // A non-integral finite float keeps only its written text: writing
        // floats the way JavaScript does would cost the component a float
        // formatter for keys no policy uses.
        Meaning::Float(bits) => {
            let f = f64::from_bits(*bits);
            if f.is_nan() {
                "NaN".to_owned()
            } else if f == f64::INFINITY {
                "Infinity".to_owned()
            } else if f == f64::NEG_INFINITY {
                "-Infinity".to_owned()
            } else {
                String::new()
            }
        }
    }
}

/// Whether a plain scalar this reader takes as text resolves to a value
/// (boolean, number, null) in YAML 1.1 or 1.2.
fn text_only_here(text: &str) -> bool {
    let mut values = Vec::new();
    resolve(text, &mut values);
    !values.is_empty() && matches!(super::tree::typed_plain(text), Ok(super::NodeValue::Str(_)))
}

/// YAML 1.1 and YAML 1.2 core-schema resolution of a plain scalar, both
/// (a little generously: a form either version accepts counts).
fn resolve(text: &str, out: &mut Vec<Meaning>) {
    if is_null_spelling(text) {
        out.push(Meaning::Null);
        return;
    }
    match text {
        "true" | "True" | "TRUE" | "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => {
            out.push(Meaning::Bool(true))
        }
        "false" | "False" | "FALSE" | "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => {
            out.push(Meaning::Bool(false))
        }
        _ => numbers(text, out),
    }
}

fn numbers(text: &str, out: &mut Vec<Meaning>) {
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    // `_1`, `--1`: text to every reader.
    if body.starts_with(['_', '+', '-']) {
        return;
    }
    let mut values: Vec<Meaning> = Vec::new();
    match body {
        ".inf" | ".Inf" | ".INF" => values.push(float(f64::INFINITY)),
        ".nan" | ".NaN" | ".NAN" if body.len() == text.len() => values.push(float(f64::NAN)),
        _ => {}
    }
    // Underscores are digit separators in YAML 1.1.
    let digits: String = body.chars().filter(|&c| c != '_').collect();
    let radix_int = |radix: u32, s: &str| -> Option<Meaning> {
        let valid = !s.is_empty() && s.chars().all(|c| c.is_digit(radix));
        valid
            .then(|| i128::from_str_radix(s, radix).ok())
            .flatten()
            .map(Meaning::Int)
    };
    if let Some(hex) = digits.strip_prefix("0x") {
        values.extend(radix_int(16, hex));
    } else if let Some(oct) = digits.strip_prefix("0o") {
        values.extend(radix_int(8, oct));
    } else if let Some(bin) = digits.strip_prefix("0b") {
        values.extend(radix_int(2, bin));
    } else if digits.contains(':') {
        values.extend(sexagesimal(&digits));
    } else if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        // 1.2: decimal; 1.1: a leading 0 means octal.
        values.extend(radix_int(10, &digits));
        if digits.len() > 1 && digits.starts_with('0') {
            values.extend(radix_int(8, &digits));
        }
    } else if digits.bytes().any(|b| b.is_ascii_digit())
        && digits
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        && let Ok(f) = digits.parse::<f64>()
    {
        values.push(float(f));
    }
    for value in values {
        out.push(match value {
            Meaning::Int(n) if negative => Meaning::Int(-n),
            Meaning::Float(bits) if negative => float(-f64::from_bits(bits)),
            v => v,
        });
    }
}

/// YAML 1.1 base 60: `1:30` is 90, `1:30.5` is 90.5.
fn sexagesimal(digits: &str) -> Option<Meaning> {
    let mut parts = digits.split(':');
    let first = parts.next()?;
    // YAML 1.1's base 60 starts with 1-9: `09:30` is text to PyYAML too.
    if first.is_empty() || first.starts_with('0') || !first.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut whole: f64 = first.parse().ok()?;
    let mut fraction = None;
    for part in parts {
        let (minutes, frac) = match part.split_once('.') {
            Some((m, f)) => (m, Some(f)),
            None => (part, None),
        };
        if fraction.is_some() || minutes.is_empty() || minutes.len() > 2 || !minutes.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let m: f64 = minutes.parse().ok()?;
        if m >= 60.0 {
            return None;
        }
        whole = whole * 60.0 + m;
        fraction = frac;
    }
    match fraction {
        Some(f) if !f.is_empty() => format!("0.{f}").parse::<f64>().ok().map(|fr| float(whole + fr)),
        _ => Some(float(whole)),
    }
}

/// Integral floats are the integer (Python: `1.0 == 1`; JavaScript: the same
/// number); every NaN is one.
fn float(f: f64) -> Meaning {
    if f.is_nan() {
        return Meaning::Float(f64::NAN.to_bits());
    }
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e38 {
        // In range: the cast is exact for an integral value below 2^127.
        #[allow(clippy::cast_possible_truncation)]
        return Meaning::Int(f as i128);
    }
    Meaning::Float(f.to_bits())
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
    fn keys_equal_after_resolution_are_refused() {
        // (`yes`, `on`, `1:30`, text here and values to YAML 1.1, and keys
        // that are numbers or booleans, are refused before they can be a
        // duplicate: what is left is text, quoted or not, and null.)
        for (a, b) in [
            ("\"yes\"", "\"yes\""),
            ("\"true\"", "true"),
            ("'1'", "1"),
            ("'1'", "0x1"),
            ("~", "null"),
            ("~", "\"null\""),
            ("NULL", "Null"),
        ] {
            let text = format!("{a}: p\n{b}: q\n");
            assert_eq!(refused_at(&text), (2, 1), "{a} / {b}");
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
            ("x:\n  ~: 2\n  <<: {null: 1}\n", (3, 7)),
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
        assert_eq!(
            refused_at("p: &p {~: 1}\nq: &q {null: 2}\nx:\n  <<: [*p, *q]\n"),
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
