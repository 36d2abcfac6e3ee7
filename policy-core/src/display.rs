//! Characters a person cannot see, and showing untrusted text to a person.
//!
//! One predicate, [`is_invisible`], decides both which tool names are refused
//! at load ([`crate::catalog::check_tool_name`]) and which characters
//! [`escape_for_person`] writes as visible escapes, so what a person approves
//! is exactly what runs.
//!
//! The set is derived from Unicode properties, not listed by hand: general
//! categories come from `unicode-general-category` (already linked into the
//! component by `jsonschema`, so it costs no size), and
//! `Default_Ignorable_Code_Point`, which that crate does not have, is derived
//! below from its definition in `DerivedCoreProperties.txt`.

use unicode_general_category::{GeneralCategory, get_general_category};

/// The Unicode version the general categories (and the tables below) follow.
pub const UNICODE_VERSION: (u64, u64, u64) = unicode_general_category::UNICODE_VERSION;

/// `Other_Default_Ignorable_Code_Point` and `Variation_Selector`, from
/// `PropList.txt`, Unicode 16.0.0 (unchanged since 14.0). Together with
/// general category Cf they make `Default_Ignorable_Code_Point`.
const OTHER_DEFAULT_IGNORABLE_AND_VARIATION_SELECTORS: &[(char, char)] = &[
    ('\u{034F}', '\u{034F}'),   // ODICP: COMBINING GRAPHEME JOINER
    ('\u{115F}', '\u{1160}'),   // ODICP: HANGUL CHOSEONG FILLER, HANGUL JUNGSEONG FILLER
    ('\u{17B4}', '\u{17B5}'),   // ODICP: KHMER VOWEL INHERENT AQ, AA
    ('\u{180B}', '\u{180D}'),   // VS: MONGOLIAN FREE VARIATION SELECTOR ONE..THREE
    ('\u{180F}', '\u{180F}'),   // VS: MONGOLIAN FREE VARIATION SELECTOR FOUR
    ('\u{2065}', '\u{2065}'),   // ODICP: reserved
    ('\u{3164}', '\u{3164}'),   // ODICP: HANGUL FILLER
    ('\u{FE00}', '\u{FE0F}'),   // VS: VARIATION SELECTOR-1..16
    ('\u{FFA0}', '\u{FFA0}'),   // ODICP: HALFWIDTH HANGUL FILLER
    ('\u{FFF0}', '\u{FFF8}'),   // ODICP: reserved
    ('\u{E0000}', '\u{E0000}'), // ODICP: reserved
    ('\u{E0002}', '\u{E001F}'), // ODICP: reserved
    ('\u{E0080}', '\u{E00FF}'), // ODICP: reserved
    ('\u{E0100}', '\u{E01EF}'), // VS: VARIATION SELECTOR-17..256
    ('\u{E01F0}', '\u{E0FFF}'), // ODICP: reserved
];

/// Format characters (Cf) that `DerivedCoreProperties.txt` takes out of
/// `Default_Ignorable_Code_Point` because they should be visible:
/// interlinear annotation characters FFF9..FFFB, Egyptian hieroglyph format
/// controls 13430..13440, and `Prepended_Concatenation_Mark`. They are still
/// refused in tool names (every Cf is), but they are not default-ignorable.
const NOT_DEFAULT_IGNORABLE: &[(char, char)] = &[
    ('\u{0600}', '\u{0605}'),   // PCM: ARABIC NUMBER SIGN..ARABIC NUMBER MARK ABOVE
    ('\u{06DD}', '\u{06DD}'),   // PCM: ARABIC END OF AYAH
    ('\u{070F}', '\u{070F}'),   // PCM: SYRIAC ABBREVIATION MARK
    ('\u{0890}', '\u{0891}'),   // PCM: ARABIC POUND MARK ABOVE, PIASTRE MARK ABOVE
    ('\u{08E2}', '\u{08E2}'),   // PCM: ARABIC DISPUTED END OF AYAH
    ('\u{FFF9}', '\u{FFFB}'),   // INTERLINEAR ANNOTATION ANCHOR..TERMINATOR
    ('\u{110BD}', '\u{110BD}'), // PCM: KAITHI NUMBER SIGN
    ('\u{110CD}', '\u{110CD}'), // PCM: KAITHI NUMBER SIGN ABOVE
    ('\u{13430}', '\u{13440}'), // EGYPTIAN HIEROGLYPH VERTICAL JOINER..MIRROR HORIZONTALLY
];

/// Characters that are none of the above yet render as blank space in
/// common fonts (Hangul fillers and the combining grapheme joiner are
/// already default-ignorable; they are listed there).
const RENDERS_BLANK: &[char] = &[
    '\u{2800}',  // BRAILLE PATTERN BLANK (So)
    '\u{16FE4}', // KHITAN SMALL SCRIPT FILLER (Mn)
    '\u{1D159}', // MUSICAL SYMBOL NULL NOTEHEAD (So)
];

fn in_ranges(c: char, ranges: &[(char, char)]) -> bool {
    ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&c))
}

/// `Default_Ignorable_Code_Point`, as `DerivedCoreProperties.txt` defines it:
/// Other_Default_Ignorable_Code_Point + Cf + Variation_Selector
/// − White_Space − FFF9..FFFB − 13430..13440 − Prepended_Concatenation_Mark.
/// (No White_Space character is Cf, ODICP or a variation selector.)
pub fn is_default_ignorable(c: char) -> bool {
    (get_general_category(c) == GeneralCategory::Format
        || in_ranges(c, OTHER_DEFAULT_IGNORABLE_AND_VARIATION_SELECTORS))
        && !in_ranges(c, NOT_DEFAULT_IGNORABLE)
}

/// A character a person reading a tool name cannot see, or cannot tell from
/// another: general category Cf (format: zero-width, bidi controls, BOM,
/// tags, Egyptian hieroglyph format controls, prepended concatenation
/// marks), Zs (spaces), Zl, Zp, Co (private use: no glyph in the fonts a
/// person reads with, so it renders as nothing or a box easily missed), Cn
/// (unassigned code points and noncharacters, likewise), every
/// `Default_Ignorable_Code_Point`, and characters that render blank (BRAILLE
/// PATTERN BLANK, ...).
pub fn is_invisible(c: char) -> bool {
    matches!(
        get_general_category(c),
        GeneralCategory::Format
            | GeneralCategory::SpaceSeparator
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
            | GeneralCategory::PrivateUse
            | GeneralCategory::Unassigned
    ) || is_default_ignorable(c)
        || RENDERS_BLANK.contains(&c)
}

/// Whether [`escape_for_person`] writes `c` as an escape: the invisible set
/// (but the ordinary space U+0020, which a person reads as what it is) and
/// control characters (Cc). Bidirectional controls, line and paragraph
/// separators are in the invisible set (Cf, Zl, Zp).
pub fn needs_escape(c: char) -> bool {
    c.is_control() || (c != ' ' && is_invisible(c))
}

/// Untrusted text (a tool name, an argument, a reason) as it may be shown to
/// a person who decides on it, in an elicitation prompt or an approval page:
/// every control character and every character of [`is_invisible`] but the
/// plain space becomes a visible `\u{XXXX}` escape (upper-case hex, at least
/// four digits), so a zero-width joiner, a right-to-left override or a
/// Hangul filler cannot hide what will run. A backslash that is followed by
/// `u{` is escaped too (`\u{005C}`), so the text `\u{200B}` typed by someone
/// can never be mistaken for an escaped zero-width space. Everything else,
/// letters of every script included, is kept as it is.
pub fn escape_for_person(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (at, c) in text.char_indices() {
        let typed_escape = c == '\\' && text.get(at + 1..).is_some_and(|rest| rest.starts_with("u{"));
        if needs_escape(c) || typed_escape {
            out.push_str(&format!("\\u{{{:04X}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_chars() -> impl Iterator<Item = char> {
        (0..=0x10FFFF_u32).filter_map(char::from_u32)
    }

    #[test]
    fn default_ignorable_matches_derived_core_properties() {
        // DerivedCoreProperties.txt (14.0 to 16.0): "Total code points: 4174".
        assert_eq!(all_chars().filter(|&c| is_default_ignorable(c)).count(), 4174);
        for c in [
            '\u{00AD}',
            '\u{034F}',
            '\u{061C}',
            '\u{115F}',
            '\u{180E}',
            '\u{200B}',
            '\u{200D}',
            '\u{2060}',
            '\u{2065}',
            '\u{FE0F}',
            '\u{FEFF}',
            '\u{E0001}',
            '\u{E01EF}',
            '\u{E0FFF}',
        ] {
            assert!(is_default_ignorable(c), "{:04X}", u32::from(c));
        }
        for c in [
            '\u{0600}',
            '\u{0890}',
            '\u{FFF9}',
            '\u{13430}',
            '\u{1343F}',
            '\u{110BD}',
            ' ',
            'a',
        ] {
            assert!(!is_default_ignorable(c), "{:04X}", u32::from(c));
        }
    }

    /// The predicate over every code point, against the crate's properties.
    #[test]
    fn invisible_is_exactly_its_definition_over_all_code_points() {
        let mut outside_categories = Vec::new();
        for c in all_chars() {
            let category = get_general_category(c);
            let by_category = matches!(
                category,
                GeneralCategory::Format
                    | GeneralCategory::SpaceSeparator
                    | GeneralCategory::LineSeparator
                    | GeneralCategory::ParagraphSeparator
                    | GeneralCategory::PrivateUse
                    | GeneralCategory::Unassigned
            );
            let expected = by_category || is_default_ignorable(c) || RENDERS_BLANK.contains(&c);
            assert_eq!(is_invisible(c), expected, "U+{:04X}", u32::from(c));
            if by_category {
                // Every format character, space and separator is refused.
                assert!(is_invisible(c));
            }
            if is_invisible(c) && !by_category {
                outside_categories.push(c);
            }
            // Letters, digits and marks of every script stay allowed, apart
            // from the fillers and selectors named in the tables.
            if matches!(
                category,
                GeneralCategory::UppercaseLetter
                    | GeneralCategory::LowercaseLetter
                    | GeneralCategory::TitlecaseLetter
                    | GeneralCategory::DecimalNumber
                    | GeneralCategory::SpacingMark
                    | GeneralCategory::EnclosingMark
                    | GeneralCategory::ConnectorPunctuation
                    | GeneralCategory::DashPunctuation
            ) {
                assert!(!is_invisible(c), "U+{:04X}", u32::from(c));
            }
            // Everything Unicode calls white space is refused.
            if c.is_whitespace() && !c.is_control() {
                assert!(is_invisible(c), "U+{:04X}", u32::from(c));
            }
        }
        // Outside Cf/Zs/Zl/Zp/Co/Cn: only the default-ignorable ODICP and
        // variation selectors (the table's reserved ones are Cn), and the
        // blank-rendering list.
        let table = OTHER_DEFAULT_IGNORABLE_AND_VARIATION_SELECTORS
            .iter()
            .flat_map(|&(lo, hi)| (u32::from(lo)..=u32::from(hi)).filter_map(char::from_u32))
            .filter(|&c| get_general_category(c) != GeneralCategory::Unassigned)
            .count();
        assert_eq!(outside_categories.len(), table + RENDERS_BLANK.len());
    }

    #[test]
    fn the_review_examples_and_the_old_hand_list_are_invisible() {
        let examples = [
            // Private use (BMP and supplementary), unassigned, noncharacters.
            '\u{E000}',
            '\u{F0000}',
            '\u{0378}',
            '\u{FDD0}',
            '\u{FFFF}',
            '\u{10FFFF}',
            '\u{2800}',
            '\u{13430}',
            '\u{13438}',
            '\u{1343F}',
            '\u{0890}',
            '\u{034F}',
        ];
        let fillers = ['\u{115F}', '\u{1160}', '\u{3164}', '\u{FFA0}'];
        let old_list = [
            '\u{00AD}',
            '\u{061C}',
            '\u{17B4}',
            '\u{17B5}',
            '\u{180B}',
            '\u{180F}',
            '\u{200B}',
            '\u{200F}',
            '\u{202A}',
            '\u{202E}',
            '\u{2060}',
            '\u{206F}',
            '\u{FE00}',
            '\u{FE0F}',
            '\u{FEFF}',
            '\u{FFF0}',
            '\u{FFFB}',
            '\u{0600}',
            '\u{0605}',
            '\u{06DD}',
            '\u{070F}',
            '\u{110BD}',
            '\u{1BCA0}',
            '\u{1BCA3}',
            '\u{1D173}',
            '\u{1D17A}',
            '\u{E0000}',
            '\u{E0FFF}',
        ];
        for c in examples.into_iter().chain(fillers).chain(old_list) {
            assert!(is_invisible(c), "U+{:04X}", u32::from(c));
        }
        for c in [
            '\u{00A0}', '\u{2007}', '\u{3000}', '\u{2028}', '\u{2029}', '\u{1680}', '\u{180E}',
        ] {
            assert!(is_invisible(c), "U+{:04X}", u32::from(c));
        }
    }

    #[test]
    fn letters_of_many_scripts_stay_visible() {
        let names = [
            "alterar_plano",
            "consultar_preço",
            "заказ_статус", // Cyrillic
            "Παραγγελία",   // Greek
            "注文を確認",   // CJK, Hiragana
            "주문_조회",    // Hangul syllables
            "طلب_الحالة",   // Arabic letters
            "הזמנה",        // Hebrew
            "आदेश_स्थिति",    // Devanagari, with vowel signs and virama
            "คำสั่งซื้อ",       // Thai, with combining marks
            "ትዕዛዝ",         // Ethiopic
            "ᠮᠣᠩᠭᠣᠯ",       // Mongolian letters
            "𓀀𓁐",           // Egyptian hieroglyphs themselves
            "⠁⠃",           // Braille patterns that are not blank
            "tool-1.v2:x",
        ];
        for name in names {
            assert!(!name.chars().any(is_invisible), "{name}");
            assert_eq!(escape_for_person(name), name);
        }
    }

    #[test]
    fn escape_for_person_shows_every_hidden_character() {
        assert_eq!(escape_for_person("alterar_plano\u{200D}"), "alterar_plano\\u{200D}");
        assert_eq!(escape_for_person("a\u{202E}b\u{2066}"), "a\\u{202E}b\\u{2066}");
        assert_eq!(
            escape_for_person("\u{2800}\u{3164}\u{E0041}"),
            "\\u{2800}\\u{3164}\\u{E0041}"
        );
        assert_eq!(
            escape_for_person("line\nnext\r\u{2028}\u{85}\t"),
            "line\\u{000A}next\\u{000D}\\u{2028}\\u{0085}\\u{0009}"
        );
        assert_eq!(escape_for_person("\u{0}\u{7F}\u{9B}"), "\\u{0000}\\u{007F}\\u{009B}");
        assert_eq!(escape_for_person("a b\u{00A0}c"), "a b\\u{00A0}c");
        assert_eq!(escape_for_person("\u{13430}\u{0890}"), "\\u{13430}\\u{0890}");
        // A typed escape cannot pass for a real one; other backslashes stay.
        assert_eq!(escape_for_person("\\u{200B}"), "\\u{005C}u{200B}");
        assert_eq!(escape_for_person("C:\\dir\\u"), "C:\\dir\\u");
        assert_eq!(escape_for_person("\\\u{200B}"), "\\\\u{200B}");
        assert_eq!(escape_for_person(""), "");
    }

    #[test]
    fn escaped_text_contains_nothing_invisible_and_reads_back() {
        let mut all = String::new();
        for c in all_chars().filter(|c| u32::from(*c) % 7 == 0 || is_invisible(*c) || c.is_control()) {
            all.push(c);
            all.push('\\');
            all.push('u');
        }
        let shown = escape_for_person(&all);
        assert!(!shown.chars().any(|c| c != ' ' && (is_invisible(c) || c.is_control())));
        assert_eq!(unescape(&shown), all);
    }

    /// The inverse, to show the escaping is unambiguous.
    fn unescape(shown: &str) -> String {
        let mut out = String::new();
        let mut rest = shown;
        while let Some(at) = rest.find("\\u{") {
            out.push_str(&rest[..at]);
            let after = &rest[at + 3..];
            let end = after.find('}').unwrap_or_else(|| unreachable!());
            let code = u32::from_str_radix(&after[..end], 16).unwrap_or_else(|e| unreachable!("{e}"));
            out.push(char::from_u32(code).unwrap_or_else(|| unreachable!()));
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        out
    }
}
