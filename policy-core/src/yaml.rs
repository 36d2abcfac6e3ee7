//! YAML into a small tree that remembers where every value and key came from.
//!
//! Typed deserialization (`#[derive(Deserialize)]`) would let a quoted `"true"`
//! become a boolean; reading the untyped tree first keeps the YAML's own types,
//! and converting it by hand gives every error a line and column. The tree is
//! built from granit-parser's events (`yaml/tree.rs`, no unsafe) under
//! budgets: alias bombs, deep nesting and huge documents stop with an error,
//! not with the host's memory.

use crate::error::{Origin, Problem, ProblemCode};
use serde_json::Value;

mod keys;
use tree::leading_zero_decimal;
#[cfg(any(test, feature = "yaml-reference"))]
mod reference;
mod tree;

/// How the tree builder and the reader it replaced (serde-saphyr, feature
/// `yaml-reference`) disagree on a text, if they do: a different tree, or
/// one accepting what the other refuses (where both refuse, a broken text
/// may have two faults and they may name different ones). For the fuzz
/// target `yaml_reader`; not part of the engine.
#[cfg(feature = "yaml-reference")]
#[doc(hidden)]
pub fn disagreement_with_reference(text: &str) -> Option<String> {
    reference::compare(text, false)
}

/// Where an event starts: 1-based line and column, as every problem reports.
#[derive(Debug, Clone, Copy)]
struct Position {
    line: u64,
    column: u64,
}

impl From<&granit_parser::Span> for Position {
    fn from(span: &granit_parser::Span) -> Self {
        Position {
            line: span.start.line() as u64,
            column: span.start.col() as u64 + 1,
        }
    }
}

/// YAML tags (`!custom false`, `!!binary …`, `!!str`) are refused: an
/// untyped reader drops an unknown tag and decodes a known one, so a tagged
/// value could mean something other than what a reviewer reads.
const TAGS_REFUSED: &str = "YAML tags (`!name`, `!!type`) are not accepted: write the plain value";

fn is_tagged(event: &granit_parser::Event<'_>) -> bool {
    use granit_parser::Event;
    matches!(
        event,
        Event::Scalar(.., Some(_)) | Event::SequenceStart(.., Some(_)) | Event::MappingStart(.., Some(_))
    )
}

/// A merge key: `<<` written plain (quoted, it is an ordinary key).
fn is_merge_key(event: &granit_parser::Event<'_>) -> bool {
    matches!(event, granit_parser::Event::Scalar(text, granit_parser::ScalarStyle::Plain, _, _) if text == "<<")
}

/// The plain spellings of null (YAML 1.1 and 1.2 agree on these).
fn is_null_spelling(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

/// Largest YAML document accepted, in bytes.
pub const MAX_YAML_BYTES: usize = 8 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub value: NodeValue,
    pub line: u64,
    pub column: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum NodeValue {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Key, Node)>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub name: String,
    pub line: u64,
    pub column: u64,
}

impl Node {
    pub fn kind(&self) -> &'static str {
        match self.value {
            NodeValue::Null => "null",
            NodeValue::Bool(_) => "a boolean",
            NodeValue::Number(_) => "a number",
            NodeValue::Str(_) => "a string",
            NodeValue::Seq(_) => "a list",
            NodeValue::Map(_) => "a mapping",
        }
    }

    /// The same value as JSON (for schemas written in YAML).
    pub fn to_json(&self) -> Value {
        match &self.value {
            NodeValue::Null => Value::Null,
            NodeValue::Bool(b) => Value::Bool(*b),
            NodeValue::Number(n) => Value::Number(n.clone()),
            NodeValue::Str(s) => Value::String(s.clone()),
            NodeValue::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeValue::Map(entries) => {
                Value::Object(entries.iter().map(|(k, v)| (k.name.clone(), v.to_json())).collect())
            }
        }
    }
}

/// `text` without its byte-order mark: one, at the very start. Any other is
/// refused with the characters read two ways (`refuse_misread_characters`).
pub fn without_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Why an entry of a `requires` or `scopes` list is refused, if it is: empty,
/// holding characters a reviewer does not see (`requires: [amount<U+200B>]`
/// would require another argument than the one read), or listed before.
pub fn refused_entry(entry: &str, earlier: &[String], what: &str) -> Option<(ProblemCode, String)> {
    if entry.is_empty() {
        Some((ProblemCode::InvalidValue, format!("`{what}` entries must not be empty")))
    } else if entry.chars().any(crate::display::needs_escape) {
        Some((
            ProblemCode::InvalidValue,
            format!("`{what}` entries must not hold invisible or control characters"),
        ))
    } else if earlier.iter().any(|e| e == entry) {
        Some((
            ProblemCode::Duplicate,
            format!(
                "`{}` is listed twice in `{what}`",
                crate::json::truncate_for_message(entry)
            ),
        ))
    } else {
        None
    }
}

/// Parses one YAML document. An empty document is `null`.
pub fn parse(text: &str, origin: Origin) -> Result<Node, Problem> {
    if text.len() > MAX_YAML_BYTES {
        return Err(Problem::new(
            ProblemCode::TooLarge,
            origin,
            format!("document is larger than {MAX_YAML_BYTES} bytes"),
        ));
    }
    let text = without_bom(text);
    if text.trim().is_empty() {
        return Ok(Node {
            value: NodeValue::Null,
            line: 1,
            column: 1,
        });
    }
    // Tags, then any key twice in one mapping, merge keys and resolved
    // spellings included (`yaml/keys.rs`), with its position.
    let keys_checked = keys::refuse_tags_and_duplicate_keys(text, origin)?;
    let node = tree::build(text, origin)?;
    if let keys::Checked::Unfinished(problem) = keys_checked {
        return Err(problem);
    }
    // Last, so a text the parser refuses keeps that error and position.
    if let Some(problem) = refuse_misread_characters(text, origin) {
        return Err(problem);
    }
    Ok(node)
}

/// A character that makes the text read, or display, differently from how
/// the parser reads it, anywhere (comments included): a YAML 1.2 parser reads
/// NEL, LS and PS inside a comment as comment, where YAML 1.1 readers
/// (PyYAML, yamllint) and editors see a new line, so a line a reviewer sees
/// could be dropped; bidirectional embeddings, overrides and isolates
/// reorder what is displayed; a lone carriage return in a file of line feeds
/// makes a terminal draw the rest of the line over its start; a byte-order
/// mark anywhere but first.
fn refuse_misread_characters(text: &str, origin: Origin) -> Option<Problem> {
    let has_line_feed = text.contains('\n');
    let (mut line, mut column) = (1u64, 1u64);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let message = match c {
            '\u{85}' | '\u{2028}' | '\u{2029}' => {
                "U+0085/U+2028/U+2029 break lines for YAML 1.1 and editors, not here: use a line feed"
            }
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {
                "a bidirectional control: the text displays in another order than it reads"
            }
            // granit-parser skips one at a line's start; PyYAML and js-yaml
            // make it part of the key that follows (`\ufefftool_policies`).
            '\u{feff}' => "a byte-order mark after the start",
            '\r' if has_line_feed && chars.peek() != Some(&'\n') => {
                "a lone carriage return among line feeds: a terminal draws the rest over the line"
            }
            '\n' | '\r' => {
                if c == '\n' || chars.peek() != Some(&'\n') {
                    line += 1;
                    column = 1;
                }
                continue;
            }
            _ => {
                column += 1;
                continue;
            }
        };
        return Some(Problem::new(ProblemCode::Syntax, origin, message).at(line, column));
    }
    None
}

/// Reading helpers that turn a wrong shape into a positioned problem.
#[derive(Debug)]
pub struct Reader {
    pub origin: Origin,
}

impl Reader {
    pub fn error(&self, node_line: u64, node_column: u64, code: ProblemCode, message: impl Into<String>) -> Problem {
        Problem::new(code, self.origin, message).at(node_line, node_column)
    }

    pub fn wrong_type(&self, node: &Node, what: &str, expected: &str) -> Problem {
        self.error(
            node.line,
            node.column,
            ProblemCode::InvalidValue,
            format!("`{what}` must be {expected}, found {}", node.kind()),
        )
    }

    pub fn map<'a>(&self, node: &'a Node, what: &str) -> Result<&'a [(Key, Node)], Problem> {
        match &node.value {
            NodeValue::Map(entries) => Ok(entries),
            _ => Err(self.wrong_type(node, what, "a mapping")),
        }
    }

    pub fn bool(&self, node: &Node, what: &str) -> Result<bool, Problem> {
        match node.value {
            NodeValue::Bool(b) => Ok(b),
            _ => Err(self.wrong_type(node, what, "true or false (unquoted)")),
        }
    }

    pub fn string<'a>(&self, node: &'a Node, what: &str) -> Result<&'a str, Problem> {
        match &node.value {
            NodeValue::Str(s) => Ok(s),
            _ => Err(self.wrong_type(node, what, "a string")),
        }
    }

    pub fn string_list(&self, node: &Node, what: &str) -> Result<Vec<String>, Problem> {
        let NodeValue::Seq(items) = &node.value else {
            return Err(self.wrong_type(node, what, "a list of strings"));
        };
        let mut out: Vec<String> = Vec::with_capacity(items.len());
        for item in items {
            let s = self.string(item, what)?;
            if let Some((code, message)) = refused_entry(s, &out, what) {
                return Err(self.error(item.line, item.column, code, message));
            }
            out.push(s.to_owned());
        }
        Ok(out)
    }

    pub fn unknown_key(&self, key: &Key, expected: &[&str]) -> Problem {
        self.error(
            key.line,
            key.column,
            ProblemCode::UnknownKey,
            format!(
                "unknown key `{}`; expected one of: {}",
                crate::json::truncate_for_message(&key.name),
                expected.join(", ")
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_true_stays_a_string() {
        let node = parse("a: \"true\"\nb: true\n", Origin::Policy).unwrap_or_else(|e| unreachable!("{e}"));
        let NodeValue::Map(entries) = node.value else {
            unreachable!()
        };
        assert_eq!(entries[0].1.value, NodeValue::Str("true".into()));
        assert_eq!(entries[1].1.value, NodeValue::Bool(true));
        assert_eq!((entries[1].0.line, entries[1].0.column), (2, 1));
    }

    #[test]
    fn duplicate_keys_and_alias_bombs_are_errors_with_positions() {
        let dup = parse("a: 1\na: 2\n", Origin::Policy)
            .err()
            .unwrap_or_else(|| unreachable!());
        assert_eq!(dup.line, 2);
        let mut bomb = String::from("a: &a [x,x,x,x,x,x,x,x,x,x]\n");
        for i in 1..12 {
            bomb.push_str(&format!(
                "a{i}: &a{i} [{}]\n",
                vec![
                    if i == 1 {
                        "*a".to_string()
                    } else {
                        format!("*a{}", i - 1)
                    };
                    10
                ]
                .join(",")
            ));
        }
        let err = parse(&bomb, Origin::Policy).err().unwrap_or_else(|| unreachable!());
        assert_eq!(err.code, ProblemCode::Syntax);
        assert!(err.line > 0);
    }

    /// A crossed budget is worded for the author, with its limit, at the
    /// alias or anchor that crossed it.
    #[test]
    fn crossed_budgets_say_which_limit() {
        use tree::limits;
        let aliases: String = (0..=limits::ALIASES).map(|_| "*a, ").collect();
        let many_aliases = format!("a: &a x\nb: [{aliases}]\n");
        let err = parse(&many_aliases, Origin::Policy)
            .err()
            .unwrap_or_else(|| unreachable!());
        assert_eq!(err.code, ProblemCode::Syntax);
        assert_eq!(err.message, "the YAML uses more than 1000 aliases (`*name`)");
        assert_eq!((err.line, err.column), (2, 5 + 4 * limits::ALIASES as u32), "{err}");

        // Each level holds the previous one twice: the anchored values
        // recorded for replay double at every level.
        let mut bomb = String::from("l0: &l0 [x, x]\n");
        for i in 1..20 {
            bomb.push_str(&format!("l{i}: &l{i} [*l{p}, *l{p}]\n", p = i - 1));
        }
        let err = parse(&bomb, Origin::Policy).err().unwrap_or_else(|| unreachable!());
        assert_eq!(
            err.message,
            "aliases (`*name`) expand too far: anchored values would hold more than 20000 YAML events"
        );
        // At the second alias of `l11`, whose replay records the 20 001st event.
        assert_eq!((err.line, err.column), (12, 18), "{err}");

        let anchors: String = (0..=limits::ANCHORS).map(|i| format!("k{i}: &a{i} v\n")).collect();
        let err = parse(&anchors, Origin::Policy).err().unwrap_or_else(|| unreachable!());
        assert_eq!(err.message, "the YAML defines more than 1000 anchors (`&name`)");
        // At the value the 1 001st anchor names (`k1000: &a1000 v`).
        assert_eq!((err.line, err.column), (1 + limits::ANCHORS as u32, 15), "{err}");
    }

    #[test]
    fn deep_nesting_is_refused() {
        let deep = format!("a: {}{}\n", "[".repeat(100), "]".repeat(100));
        let err = parse(&deep, Origin::Policy).err().unwrap_or_else(|| unreachable!());
        assert!(err.line > 0 && err.column > 0, "{err}");
    }
}
