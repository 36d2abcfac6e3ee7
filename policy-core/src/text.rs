//! Comparing texts on the hot paths of the component.

/// `a == b`, eight bytes at a time. Why not `==`: on wasm that is
/// compiler-builtins' `memcmp`, a loop over single bytes. Comparing the
/// context of every call that way was 2 % of a decision in the component,
/// and a prepared engine's first load compares its whole catalog (750 KB at
/// 1 000 tools) with the one it was prepared with, in V8's baseline tier.
pub fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let ((a_words, a_rest), (b_words, b_rest)) = (a.as_chunks::<8>(), b.as_chunks::<8>());
    // A plain loop over the words: the size-built component did not inline
    // an iterator over `chunks_exact` here.
    for (x, y) in a_words.iter().zip(b_words) {
        if u64::from_ne_bytes(*x) != u64::from_ne_bytes(*y) {
            return false;
        }
    }
    a_rest == b_rest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_text_is_equality() {
        let texts = [
            "",
            "a",
            "ab",
            "abcdefgh",
            "abcdefgi",
            "abcdefghi",
            "abcdefghj",
            "bbcdefghi",
            "{\"surface\":\"direct\"}",
        ];
        for a in texts {
            for b in texts {
                assert_eq!(same_text(a, b), a == b, "{a:?} {b:?}");
            }
        }
    }
}
