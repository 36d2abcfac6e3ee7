//! How an `evaluate` / `differential` input is cut into its parts.
//!
//! ```text
//! byte 0 < 0xF0:   [fixture]            call bytes  0xFF  context
//! byte 0 >= 0xF0:  [0xF0 + fixture]     policy 0xFF call bytes  0xFF  context
//! ```
//!
//! The fixture is the byte (less `0xF0` in policy mode) modulo the number of
//! fixed rule sets. `0xFF` never occurs in UTF-8, so it is a separator that a
//! policy or context (both text) cannot need; the call is cut off at the
//! *last* `0xFF`, so call bytes may contain `0xFF` themselves (invalid UTF-8
//! is one of the things to fuzz). No separator: the whole rest is the call
//! and the context is empty (the default context). Policy and context are
//! read as lossy UTF-8: the API takes `&str`. In policy mode (1 in 16 first
//! bytes) the policy text is loaded with the chosen fixture's catalog instead
//! of the fixture's own policy.

use std::borrow::Cow;

pub const SEPARATOR: u8 = 0xFF;
pub const POLICY_MODE: u8 = 0xF0;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input<'a> {
    pub fixture: usize,
    pub policy: Option<Cow<'a, str>>,
    pub call: &'a [u8],
    pub context: Cow<'a, str>,
}

impl<'a> Input<'a> {
    /// `None` for an empty input.
    pub fn split(data: &'a [u8], fixtures: usize) -> Option<Input<'a>> {
        let (&first, rest) = data.split_first()?;
        let fixtures = fixtures.max(1);
        let (fixture, policy, rest) = if first >= POLICY_MODE {
            let (policy, rest) = match rest.iter().position(|&b| b == SEPARATOR) {
                Some(i) => (rest.get(..i).unwrap_or_default(), rest.get(i + 1..).unwrap_or_default()),
                None => (rest, &[][..]),
            };
            (
                usize::from(first - POLICY_MODE) % fixtures,
                Some(String::from_utf8_lossy(policy)),
                rest,
            )
        } else {
            (usize::from(first) % fixtures, None, rest)
        };
        let (call, context) = match rest.iter().rposition(|&b| b == SEPARATOR) {
            Some(i) => (rest.get(..i).unwrap_or_default(), rest.get(i + 1..).unwrap_or_default()),
            None => (rest, &[][..]),
        };
        Some(Input {
            fixture,
            policy,
            call,
            context: String::from_utf8_lossy(context),
        })
    }

    /// The bytes that [`Input::split`] reads back as these parts (for seeds
    /// and tests). `fixture` must be below `0xF0`.
    pub fn encode(fixture: usize, policy: Option<&str>, call: &[u8], context: &str) -> Vec<u8> {
        let index = u8::try_from(fixture)
            .ok()
            .filter(|&i| i < POLICY_MODE)
            .unwrap_or_else(|| panic!("fixture index {fixture} does not fit the input format"));
        let mut out = Vec::with_capacity(call.len() + context.len() + 2);
        match policy {
            None => out.push(index),
            Some(policy) => {
                out.push(POLICY_MODE + index % 0x10);
                out.extend_from_slice(policy.as_bytes());
                out.push(SEPARATOR);
            }
        }
        out.extend_from_slice(call);
        out.push(SEPARATOR);
        out.extend_from_slice(context.as_bytes());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_and_split_agree() {
        let call = b"{\"name\":\"x\xff\"}";
        let data = Input::encode(3, None, call, "{}");
        let input = Input::split(&data, 15).unwrap();
        assert_eq!(
            (input.fixture, input.policy, input.call, &*input.context),
            (3, None, &call[..], "{}")
        );
        let data = Input::encode(14, Some("version: 1\n"), call, "");
        let input = Input::split(&data, 15).unwrap();
        assert_eq!(input.fixture, 14);
        assert_eq!(input.policy.as_deref(), Some("version: 1\n"));
        assert_eq!(input.call, &call[..]);
        assert_eq!(&*input.context, "");
        assert_eq!(Input::split(b"", 15), None);
        let bare = Input::split(b"\x01{}", 15).unwrap();
        assert_eq!((bare.call, &*bare.context), (&b"{}"[..], ""));
    }
}
