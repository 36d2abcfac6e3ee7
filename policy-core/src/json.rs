//! JSON in and out. In: a strict parser that refuses duplicate keys (two parsers
//! that disagree on `{"confirmed":false,"confirmed":true}` are a bypass). Out: a
//! canonical writer (sorted keys, no whitespace) so bytes never depend on a
//! map's iteration order or a feature flag elsewhere in the build.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::fmt::{self, Write as _};

/// Text that is empty or JSON white space only (RFC 8259: space, tab, line
/// feed, carriage return). `str::trim` also strips Unicode spaces, which made
/// a context of one no-break space the default, most permissive one.
pub fn is_blank(text: &str) -> bool {
    text.bytes().all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
}

/// Parses JSON text, refusing duplicate object keys, invalid UTF-8, lone
/// surrogates, numbers out of `f64` range and nesting of 128 levels or more.
pub fn parse_strict(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    read_strict(serde_json::de::SliceRead::new(bytes))
}

/// [`parse_strict`] of a text already known to be UTF-8: the same values and
/// errors, without checking each string's UTF-8 again as a reader of bytes
/// does (#17: a catalog's strings are most of its text, and that check a
/// byte loop in the component).
pub fn parse_strict_text(text: &str) -> Result<Value, serde_json::Error> {
    read_strict(serde_json::de::StrRead::new(text))
}

fn read_strict<'de, R: serde_json::de::Read<'de>>(read: R) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::new(read);
    let StrictValue(value) = StrictValue::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// A [`Value`] read by the strict rules of [`parse_strict`], for use inside
/// another `Deserialize` (the call reader).
pub(crate) struct StrictValue(pub(crate) Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let StrictValue(value) = map.next_value()?;
            match out.entry(key) {
                serde_json::map::Entry::Vacant(slot) => {
                    slot.insert(value);
                }
                serde_json::map::Entry::Occupied(taken) => {
                    return Err(de::Error::custom(format_args!(
                        "duplicate key `{}`",
                        truncate_for_message(taken.key())
                    )));
                }
            }
        }
        Ok(Value::Object(out))
    }
}

/// Shortens a key or name for an error message, so a huge input cannot make a
/// huge message. Never used for argument values, which are never echoed.
pub fn truncate_for_message(s: &str) -> Cow<'_, str> {
    const MAX: usize = 64;
    if s.len() <= MAX {
        // Printable ASCII other than quotes and backslash is what
        // `escape_debug` leaves as it is: no copy for it.
        if s.bytes()
            .all(|b| matches!(b, b' '..=b'~') && !matches!(b, b'"' | b'\'' | b'\\'))
        {
            return Cow::Borrowed(s);
        }
        return Cow::Owned(s.escape_debug().to_string());
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", s.get(..end).unwrap_or_default().escape_debug()))
}

/// Writes `value` canonically: object keys sorted by their UTF-8 bytes, no
/// whitespace, numbers and strings as serde_json writes them.
pub fn write_canonical(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => {
            // Writing into a String cannot fail.
            let _ = write!(out, "{n}");
        }
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => write_canonical_object(out, map, |out, _, v| write_canonical(out, v)),
    }
}

/// Writes an object canonically, each member's value by `write_value` (which
/// must write canonical JSON): the catalog writes its `tools` array from text
/// it already has.
pub fn write_canonical_object(
    out: &mut String,
    map: &Map<String, Value>,
    write_value: impl FnMut(&mut String, &str, &Value),
) {
    if maps_iterate_in_key_order() {
        write_members(out, map.iter(), write_value);
    } else {
        let mut entries: Vec<(&String, &Value)> = map.iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        write_members(out, entries.into_iter(), write_value);
    }
}

/// Whether serde_json's `Map` iterates in key order: it does (a `BTreeMap`)
/// unless a build unifies its `preserve_order` feature (the bench does, through
/// Cedar), and then every object is sorted here. Probed once, not per object.
fn maps_iterate_in_key_order() -> bool {
    static IN_KEY_ORDER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *IN_KEY_ORDER.get_or_init(|| {
        let mut probe = Map::new();
        probe.insert("b".to_owned(), Value::Null);
        probe.insert("a".to_owned(), Value::Null);
        probe.keys().map(String::as_str).eq(["a", "b"])
    })
}

fn write_members<'a>(
    out: &mut String,
    members: impl Iterator<Item = (&'a String, &'a Value)>,
    mut write_value: impl FnMut(&mut String, &str, &Value),
) {
    out.push('{');
    for (i, (key, v)) in members.enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_str(out, key);
        out.push(':');
        write_value(out, key, v);
    }
    out.push('}');
}

pub fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(&mut out, value);
    out
}

/// A JSON string literal.
pub fn write_str(out: &mut String, s: &str) {
    // serde_json escapes exactly `"`, `\` and control characters below
    // U+0020; text without them is written as it is, without a temporary.
    if !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        out.reserve(s.len() + 2);
        out.push('"');
        out.push_str(s);
        out.push('"');
        return;
    }
    // serde_json's escaping is the reference; writing a &str cannot fail.
    match serde_json::to_string(s) {
        Ok(quoted) => out.push_str(&quoted),
        Err(_) => out.push_str("\"\""),
    }
}

pub fn write_bool(out: &mut String, b: bool) {
    out.push_str(if b { "true" } else { "false" });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        assert!(parse_strict(br#"{"a":1,"a":2}"#).is_err());
        assert!(parse_strict(br#"{"x":{"confirmed":false,"confirmed":true}}"#).is_err());
        assert!(parse_strict(br#"{"a":1,"b":2}"#).is_ok());
    }

    #[test]
    fn a_short_text_reads_as_escape_debug_writes_it() {
        for text in [
            "plain",
            "a/b~c",
            "quote\"d",
            "it's",
            "back\\slash",
            "tab\t",
            "caf\u{e9}",
            "\u{301}x",
            "",
        ] {
            assert_eq!(truncate_for_message(text), text.escape_debug().to_string(), "{text:?}");
        }
    }

    /// The reader of text and the reader of bytes give the same value or the
    /// same error (message and position) on the same UTF-8 text.
    #[test]
    fn text_and_bytes_read_alike() {
        let deep = "[".repeat(200) + &"]".repeat(200);
        for text in [
            r#"{"tools":[{"name":"caf\u00e9","x":[1,-2,3.5e10,true,null,"\ud83d\ude00 é"]}]}"#,
            r#"{"a":1,"a":2}"#,
            r#"{"x":{"confirmed":false,"confirmed":true}}"#,
            r#""\ud800""#,
            r#""\udc00\ud800""#,
            "1e309",
            "{} trailing",
            "{\"a\":\n  [1,\n  2,,]}",
            "\"tab\tinside\"",
            "\"ctrl\u{1}\"",
            &deep,
            "",
        ] {
            let from_text = parse_strict_text(text).map_err(|e| (e.to_string(), e.line(), e.column()));
            let from_bytes = parse_strict(text.as_bytes()).map_err(|e| (e.to_string(), e.line(), e.column()));
            assert_eq!(from_text, from_bytes, "{text:?}");
        }
    }

    /// The same on 20 000 texts made by up to four edits of a catalog
    /// (inserting, replacing or deleting JSON's punctuation, escapes, digits
    /// and characters of one to four bytes): many broken, over a thousand not.
    #[test]
    fn text_and_bytes_read_alike_on_edited_texts() {
        const PIECES: [&str; 22] = [
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            "\"",
            "\\",
            "\\u00e9",
            "\\ud800",
            "\\n",
            "1",
            "-",
            "e9",
            ".",
            "true",
            "null",
            " ",
            "\u{e9}",
            "\u{20ac}",
            "\u{1f600}",
            "\u{7}",
        ];
        let catalog = r#"{"tools":[{"name":"send","inputSchema":{"type":"object","properties":{"to":{"type":"string","maxLength":64}},"required":["to"]},"annotations":{"readOnlyHint":false}},{"name":"caf\u00e9","x":[1,-2.5e3,null,true]}]}"#;
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |below: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 33) as usize % below
        };
        let mut text = catalog.to_owned();
        let mut read = 0;
        for round in 0..20_000 {
            if round % 4 == 0 {
                text = catalog.to_owned();
            }
            let boundaries: Vec<usize> = (0..=text.len()).filter(|&i| text.is_char_boundary(i)).collect();
            let at = boundaries[next(boundaries.len())];
            let piece = PIECES[next(PIECES.len())];
            match next(3) {
                0 => text.insert_str(at, piece),
                1 => {
                    let end = boundaries.iter().copied().find(|&i| i > at).unwrap_or(at);
                    text.replace_range(at..end, piece);
                }
                _ => {
                    let end = boundaries.iter().copied().find(|&i| i > at).unwrap_or(at);
                    text.replace_range(at..end, "");
                }
            }
            let from_text = parse_strict_text(&text).map_err(|e| (e.to_string(), e.line(), e.column()));
            let from_bytes = parse_strict(text.as_bytes()).map_err(|e| (e.to_string(), e.line(), e.column()));
            read += usize::from(from_text.is_ok());
            assert_eq!(from_text, from_bytes, "{text:?}");
        }
        // Both ways are exercised: values as well as errors.
        assert!(read > 1_000, "only {read} texts were JSON");
    }

    #[test]
    fn hostile_text_is_an_error_not_a_panic() {
        assert!(parse_strict(b"\xff\xfe").is_err());
        assert!(parse_strict(br#""\ud800""#).is_err());
        assert!(parse_strict(b"1e309").is_err());
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        assert!(parse_strict(deep.as_bytes()).is_err());
        assert!(parse_strict(b"{} trailing").is_err());
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        let samples = [
            "",
            "plain",
            "é ü 漢字 🙂",
            "q\"uote",
            "back\\slash",
            "tab\tnl\n",
            "\u{1}\u{1f}",
            "/ \u{7f} \u{2028}",
        ];
        for s in samples {
            let mut out = String::new();
            write_str(&mut out, s);
            assert_eq!(out, serde_json::to_string(s).unwrap_or_default(), "{s:?}");
        }
    }

    #[test]
    fn canonical_sorts_keys_and_drops_whitespace() {
        let v = parse_strict(br#"{ "b": [1, {"d":1,"c":2}], "a": "\u00e9" }"#).unwrap_or_default();
        assert_eq!(canonical(&v), r#"{"a":"é","b":[1,{"c":2,"d":1}]}"#);
    }
}
