//! The reader toolgate used before `tree.rs`: serde-saphyr's deserializer
//! into the same [`Node`] tree. Kept for the differential tests only
//! (`tests` below, and the fuzz target `yaml_reader` through the feature
//! `yaml-reference`): both readers must agree on every tree and every error
//! position.

use super::{Key, Node, NodeValue};
use crate::error::{Origin, Problem, ProblemCode};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;
use std::fmt;

/// The parser's budgets. The message of a crossed one ([`budget_message`])
/// reads its limit from here.
fn budget() -> serde_saphyr::Budget {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_reader_input_bytes = Some(super::MAX_YAML_BYTES);
    budget.max_depth = 48;
    budget.max_aliases = 1_000;
    budget.max_anchors = 1_000;
    budget.max_nodes = 200_000;
    budget.max_events = 400_000;
    budget.max_documents = 1;
    budget.max_total_scalar_bytes = super::MAX_YAML_BYTES;
    budget.max_recorded_anchor_events = 20_000;
    budget.max_recorded_anchor_bytes = 1024 * 1024;
    budget
}

fn options() -> serde_saphyr::Options {
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget());
    options.strict_booleans = true;
    options.with_snippet = false;
    options
}

/// The old main parse (after the tag and duplicate-key passes).
pub(super) fn parse(text: &str, origin: Origin) -> Result<Node, Problem> {
    let parsed: Result<Spanned<Raw>, _> = serde_saphyr::from_str_with_options(text, options());
    match parsed {
        Ok(spanned) => Ok(Node {
            value: spanned.value.0,
            line: spanned.referenced.line(),
            column: spanned.referenced.column(),
        }),
        Err(err) => {
            let (line, column) = err.location().map(|l| (l.line(), l.column())).unwrap_or((0, 0));
            let message = budget_message(&err).unwrap_or_else(|| first_line(&err.to_string()));
            Err(Problem::new(ProblemCode::Syntax, origin, message).at(line, column))
        }
    }
}

/// What a crossed budget means for the author, with the limit ([`budget`]):
/// the parser's own text is its `Debug` form (`budget breached:
/// RecordedAnchorEvents { recorded_anchor_events: 20001 } …`). The error's
/// position (where the alias, anchor or value that crossed it is) is
/// reported beside it.
fn budget_message(err: &serde_saphyr::Error) -> Option<String> {
    use serde_saphyr::budget::BudgetBreach;
    let limits = budget();
    let mut err = err;
    while let serde_saphyr::Error::AliasError { error, .. } | serde_saphyr::Error::WithSnippet { error, .. } = err {
        err = error;
    }
    let serde_saphyr::Error::Budget { breach, .. } = err else {
        return None;
    };
    let expands = "aliases (`*name`) expand";
    Some(match breach {
        BudgetBreach::RecordedAnchorEvents { .. } => {
            format!(
                "{expands} too far: anchored values would hold more than {} YAML events",
                limits.max_recorded_anchor_events
            )
        }
        BudgetBreach::RecordedAnchorBytes { .. } => {
            format!(
                "{expands} too far: anchored values would hold more than {} bytes",
                limits.max_recorded_anchor_bytes
            )
        }
        BudgetBreach::ScalarBytes { .. } => {
            format!(
                "{expands} too far: the text would be larger than {} bytes",
                limits.max_total_scalar_bytes
            )
        }
        BudgetBreach::Nodes { .. } => format!("the YAML has more than {} values, aliases expanded", limits.max_nodes),
        BudgetBreach::Events { .. } => format!(
            "the YAML has more than {} YAML events, aliases expanded",
            limits.max_events
        ),
        BudgetBreach::Aliases { .. } => format!("the YAML uses more than {} aliases (`*name`)", limits.max_aliases),
        BudgetBreach::Anchors { .. } => format!("the YAML defines more than {} anchors (`&name`)", limits.max_anchors),
        BudgetBreach::Depth { .. } => format!("the YAML nests more than {} levels deep", limits.max_depth),
        BudgetBreach::Documents { .. } => "the text holds more than one YAML document (`---`)".to_owned(),
        BudgetBreach::MergeKeys { .. } => {
            format!("the YAML uses more than {} merge keys (`<<`)", limits.max_merge_keys)
        }
        _ => return None,
    })
}

/// serde-saphyr's message starts with `error: line L column C: `; the
/// position is reported separately, so keep only the message itself.
fn first_line(message: &str) -> String {
    let line = message.lines().next().unwrap_or(message);
    let line = line.strip_prefix("error: ").unwrap_or(line);
    match line.split_once(": ") {
        Some((head, rest)) if head.starts_with("line ") => rest.to_owned(),
        _ => line.to_owned(),
    }
}

struct Raw(NodeValue);

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(RawVisitor).map(Raw)
    }
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = NodeValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<NodeValue, E> {
        Ok(NodeValue::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<NodeValue, E> {
        Ok(NodeValue::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<NodeValue, E> {
        Ok(NodeValue::Number(v.into()))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<NodeValue, E> {
        i64::try_from(v)
            .map(|n| NodeValue::Number(n.into()))
            .map_err(|_| E::custom("integer out of range"))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<NodeValue, E> {
        u64::try_from(v)
            .map(|n| NodeValue::Number(n.into()))
            .map_err(|_| E::custom("integer out of range"))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<NodeValue, E> {
        serde_json::Number::from_f64(v)
            .map(NodeValue::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }
    fn visit_str<E>(self, v: &str) -> Result<NodeValue, E> {
        Ok(NodeValue::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<NodeValue, E> {
        Ok(NodeValue::Str(v))
    }
    fn visit_unit<E>(self) -> Result<NodeValue, E> {
        Ok(NodeValue::Null)
    }
    fn visit_none<E>(self) -> Result<NodeValue, E> {
        Ok(NodeValue::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<NodeValue, D::Error> {
        d.deserialize_any(RawVisitor)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NodeValue, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Raw>>()? {
            items.push(Node {
                value: item.value.0,
                line: item.referenced.line(),
                column: item.referenced.column(),
            });
        }
        Ok(NodeValue::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NodeValue, A::Error> {
        let mut entries: Vec<(Key, Node)> = Vec::new();
        while let Some(key) = map.next_key::<Spanned<String>>()? {
            let value: Spanned<Raw> = map.next_value()?;
            if entries.iter().any(|(k, _)| k.name == key.value) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key `{}`",
                    crate::json::truncate_for_message(&key.value)
                )));
            }
            entries.push((
                Key {
                    name: key.value,
                    line: key.referenced.line(),
                    column: key.referenced.column(),
                },
                Node {
                    value: value.value.0,
                    line: value.referenced.line(),
                    column: value.referenced.column(),
                },
            ));
        }
        Ok(NodeValue::Map(entries))
    }
}

/// Both readers on one text: the same tree with the same positions, or both
/// refusing it. `same_positions`: the errors must be at the same line and
/// column too (every written case); generated texts only need both readers
/// to refuse them. Texts with a tag or a duplicate key are refused before
/// either reader runs, so they are not compared.
pub(super) fn compare(text: &str, same_positions: bool) -> Option<String> {
    if super::keys::refuse_tags_and_duplicate_keys(text, Origin::Policy).is_err() {
        return None;
    }
    let new = super::tree::build(text, Origin::Policy);
    let old = parse(text, Origin::Policy);
    match (&new, &old) {
        (Ok(a), Ok(b)) if a == b => None,
        (Err(a), Err(b)) if !same_positions || (a.line, a.column) == (b.line, b.column) => None,
        _ => Some(format!(
            "text {:?}\n  new: {}\n  old: {}",
            crate::json::truncate_for_message(text),
            describe(&new),
            describe(&old)
        )),
    }
}

fn describe(result: &Result<Node, Problem>) -> String {
    match result {
        Ok(node) => format!("{node:?}").chars().take(600).collect(),
        Err(problem) => format!("error {}:{} {}", problem.line, problem.column, problem.message),
    }
}

#[cfg(test)]
mod tests {
    /// [`super::compare`] with the errors' positions compared.
    fn disagreement(text: &str) -> Option<String> {
        super::compare(text, true)
    }

    fn assert_agree<'a>(texts: impl Iterator<Item = &'a str>) {
        let problems: Vec<String> = texts.filter_map(disagreement).collect();
        report(&problems);
    }

    fn report(problems: &[String]) {
        assert!(
            problems.is_empty(),
            "{} disagreements:\n{}",
            problems.len(),
            problems.join("\n")
        );
    }

    fn vector_texts() -> Vec<String> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors");
        let mut texts = Vec::new();
        let mut dirs = vec![root];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                let Ok(body) = std::fs::read_to_string(&path) else {
                    continue;
                };
                match path.extension().and_then(|e| e.to_str()) {
                    Some("yaml" | "yml") => texts.push(body),
                    Some("json") => {
                        let Ok(value) = serde_json::from_str::<serde_json::Value>(&body) else {
                            continue;
                        };
                        for field in ["policy_text", "catalog_text"] {
                            if let Some(text) = value.get(field).and_then(|t| t.as_str()) {
                                texts.push(text.to_owned());
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        texts
    }

    /// Plain scalar spellings at the edges of the typing rules.
    const SCALARS: &[&str] = &[
        "",
        "~",
        "null",
        "Null",
        "NULL",
        "nULL",
        "true",
        "True",
        "TRUE",
        "tRUE",
        "false",
        "yes",
        "on",
        "y",
        "0",
        "-0",
        "+0",
        "00",
        "01",
        "-01",
        "+01",
        "1",
        "-1",
        "+1",
        "12_3",
        "1__2",
        "_1",
        "1_",
        "0x1F",
        "0X1F",
        "-0x1F",
        "0o17",
        "0O17",
        "0b101",
        "0B101",
        "0b",
        "0x",
        "0o8",
        "0xg",
        "1.5",
        "-1.5",
        "+1.5",
        ".5",
        "5.",
        "1e3",
        "1E3",
        "1e+3",
        "1e-3",
        "-1e3",
        "1e999",
        "-1e999",
        ".inf",
        "-.inf",
        "+.inf",
        ".Inf",
        ".INF",
        ".nan",
        ".NaN",
        ".NAN",
        "-.nan",
        "+.nan",
        "inf",
        "nan",
        "infinity",
        "NaN",
        "1.0",
        "1.00",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "-9223372036854775809",
        "10000000000000000000000000000000000000000",
        "0.1e1",
        "1_000.5",
        "0x_1",
        "0x1_0",
        "-",
        "+",
        "1e",
        "e1",
        "0.",
        "-.5",
        "1:2",
        "12:30:00",
        "2001-12-14",
        "0777",
        "08",
        "0x8000000000000000",
        "0xFFFFFFFFFFFFFFFFF",
        "-0x8000000000000000",
        "-0x8000000000000001",
        "- 1",
        "1 # c",
        "a b",
    ];

    #[test]
    fn both_readers_agree_on_every_vector() {
        let texts = vector_texts();
        assert!(texts.len() > 100, "vectors not found: {}", texts.len());
        assert_agree(texts.iter().map(|t| t.as_ref()));
    }

    #[test]
    fn both_readers_agree_on_scalars() {
        let mut problems = Vec::new();
        for scalar in SCALARS {
            for text in [
                format!("k: {scalar}\n"),
                format!("- {scalar}\n"),
                format!("{scalar}: v\n"),
                format!("[{scalar}]\n"),
                format!("k: '{scalar}'\n"),
                format!("k: \"{scalar}\"\n"),
                format!("{{a: &a {scalar}, b: *a}}\n"),
                format!("a: &a {scalar}\n*a : v\n"),
                format!("k: |\n  {scalar}\n"),
            ] {
                problems.extend(disagreement(&text));
            }
        }
        report(&problems);
    }

    /// Shapes: anchors, aliases, merges, keys, documents, errors.
    const SHAPES: &[&str] = &[
        "# only a comment\n",
        "---\n",
        "---\n...\n",
        "--- 1\n--- 2\n",
        "a: 1\n---\nb: 2\n",
        "a: 1\n...\n",
        "a: &x {p: 1, q: [1, 2]}\nb: *x\n",
        "a: &x [1, {r: 2}]\nb: [*x, *x]\n",
        "base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  y: 3\n",
        "base: &b {x: 1, y: 2}\no: &o {z: 3}\nm:\n  <<: [*b, *o]\n  w: 0\n",
        "m:\n  <<: {x: 1}\n  y: 2\n",
        "m:\n  y: 2\n  <<: {x: 1, y: 5}\n",
        "m:\n  <<: [{x: 1}, {y: 2}]\n",
        "m:\n  <<: {x: {y: [1, {z: 2}]}}\n",
        "b: &b {x: {y: 1}}\nm:\n  <<: [{w: 0}, *b]\n",
        "m:\n  <<: []\n",
        "m:\n  <<: {}\n",
        "m:\n  <<: [~]\n",
        "m:\n  <<: [[{x: 1}]]\n",
        "m:\n  <<: [[1]]\n",
        "m:\n  <<: [{a: 1}, [~, [2]]]\n",
        "m:\n  <<: [x]\n",
        "m:\n  <<: 'x'\n",
        "m:\n  <<: []\n  <<: []\n",
        "m:\n  <<: {<<: {x: 1}}\n",
        "m:\n  <<: 1\n",
        "m:\n  <<: [1]\n",
        "m:\n  <<: ~\n",
        "m:\n  '<<': {x: 1}\n",
        "b: &b {x: 1}\nm: {<<: *b}\n",
        "b: &b {x: 1}\nm: &m {<<: *b, y: 2}\nn: {<<: *m}\n",
        "? [a]\n: 1\n",
        "? {a: 1}\n: 1\n",
        "~: 1\n",
        ": 1\n",
        "null: 1\n",
        "'': 1\n",
        "\"null\": 1\n",
        "1: a\n2: b\n",
        "true: a\n",
        "a: *nope\n",
        "a: &a [*a]\n",
        "a: &a\n  b: *a\n",
        "a: &a 1\na2: &a 2\nb: *a\n",
        "&k .inf : 1\nb: *k\n",
        "&k 1e999 : 1\nb: [*k]\n",
        "&k ~ : 1\n",
        "a: &k .nan\n",
        "a: [1, 2\n",
        "a: {b: 1\n",
        "a:\n\t- 1\n",
        "a: \"\\uD800\"\n",
        "a: 'x\n",
        "- a\nb: 1\n",
        "a: b: c\n",
        "[1, 2]\n",
        "plain text\n",
        "'quoted'\n",
        "&a [1, *a]\n",
        "a: 1\na: 2\n",
        "a: !!str 1\n",
        "%YAML 1.2\n---\na: 1\n",
        "a: >\n  folded\n  text\n",
        "a: \"esc\\tape\"\n",
        "a: &a \"esc\\tape\"\nb: [*a, *a]\n",
        "k: [a, b, ]\n",
        "k: [,]\n",
        "{a: 1, b}\n",
        "- - - 1\n",
        "a:\n  - b:\n      c: [1, {d: e}]\n",
    ];

    #[test]
    fn both_readers_agree_on_shapes() {
        assert_agree(SHAPES.iter().map(|t| t.as_ref()));
    }

    /// Budgets: each limit crossed at a known place, and just under it.
    #[test]
    fn both_readers_agree_on_budgets() {
        let mut texts = Vec::new();
        for n in [99, 100, 101, 150] {
            texts.push(format!("a: &a x\nb: [{}]\n", vec!["*a"; n].join(", ")));
        }
        for n in [5, 9, 10, 11, 12] {
            texts.push(format!("a: [{}]\n", vec!["&x q, *x"; n].join(", ")));
        }
        for depth in [46, 47, 48, 49, 60] {
            texts.push(format!("a: {}{}\n", "[".repeat(depth), "]".repeat(depth)));
            texts.push(format!(
                "a: &d {}{}\nb: [[[*d]]]\n",
                "[".repeat(depth - 4),
                "]".repeat(depth - 4)
            ));
        }
        let mut doubling = String::from("l0: &l0 [x, x]\n");
        for i in 1..20 {
            doubling.push_str(&format!("l{i}: &l{i} [*l{p}, *l{p}]\n", p = i - 1));
            texts.push(doubling.clone());
        }
        let mut nested = String::from("o: &o\n  l0: &l0 [x, x]\n");
        for i in 1..16 {
            nested.push_str(&format!("  l{i}: &l{i} [*l{p}, *l{p}, y]\n", p = i - 1));
            texts.push(nested.clone());
        }
        let mut tens = String::from("a0: [x,x,x,x,x,x,x,x,x,x]\n");
        tens = tens.replace("a0:", "a0: &a0");
        for i in 1..7 {
            tens.push_str(&format!("a{i}: [{}]\n", vec![format!("*a{}", i - 1); 10].join(",")));
            texts.push(tens.replace(&format!("a{i}: ["), &format!("a{i}: &a{i} [")));
        }
        let big = "b".repeat(100_000);
        for n in [80, 83, 84, 90] {
            texts.push(format!("s: &s {big}\nl: [{}]\n", vec!["*s"; n].join(",")));
        }
        let escaped = "\\t".repeat(300_000);
        texts.push(format!("o: &o\n  s: &s \"{escaped}\"\n  l: [*s, *s, *s, *s]\n"));
        let mut wide = String::new();
        for i in 0..1100 {
            wide.push_str(&format!("k{i}: &a{i} v\n"));
        }
        texts.push(wide);
        assert_agree(texts.iter().map(|t| t.as_ref()));
    }
}

#[cfg(test)]
mod generated {
    use proptest::prelude::*;

    /// Pieces YAML is made of, anchors, aliases and merges among them:
    /// random texts of them are mostly broken. A text one reader accepts the
    /// other must accept as the same tree, and a text one refuses the other
    /// must refuse; where a broken text has two faults the readers may name
    /// different ones (the old one read further ahead inside merged mappings
    /// before looking at their entries).
    const PIECES: &[&str] = &[
        "a", "b", "k", ":", ": ", " ", "  ", "\n", "\n  ", "\n    ", "- ", "[", "]", "{", "}", ", ", "&a ", "&b ",
        "*a", "*b", "<<: ", "'q'", "\"e\\t\"", "~", "1", "0x1", "1.5", ".inf", "true", "yes", "# c", "? ", "---\n",
        "...\n", "|\n  t", ">\n  f", "\t", "null", "01", "-1",
    ];

    fn text() -> impl Strategy<Value = String> {
        proptest::collection::vec(proptest::sample::select(PIECES), 1..40).prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4000, failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn both_readers_agree_on_generated_texts(text in text()) {
            let problem = super::compare(&text, false);
            prop_assert!(problem.is_none(), "{}", problem.unwrap_or_default());
        }
    }
}
