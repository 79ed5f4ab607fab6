//! Number grammar shared by both formats.
//!
//! OpenMetrics 1.0 ABNF (`realnumber`, `number`): an optional sign, decimal digits with an
//! optional fraction and exponent, or case-insensitive `inf`/`infinity` (signed) and `nan`.
//! Prometheus's text parser uses Go's `strconv.ParseFloat` but rejects hex floats and `_`
//! digit separators (prometheus `model/textparse`), which leaves the same grammar. Validation
//! is ours; the decimal-to-binary conversion is the standard library's (correctly rounded).

/// Parses a sample or exemplar value: a decimal number, `±Inf`/`±Infinity` or `NaN` (any
/// case). Returns `None` for anything else (hex, `_`, empty, trailing garbage).
#[inline]
pub(crate) fn parse_value(token: &str) -> Option<f64> {
    let bytes = token.as_bytes();
    // Fast path: up to 15 plain digits are exact in f64 and cover most counters and gauges.
    if !bytes.is_empty() && bytes.len() <= 15 && bytes.iter().all(u8::is_ascii_digit) {
        let mut integer: u64 = 0;
        for &digit in bytes {
            integer = integer * 10 + u64::from(digit - b'0');
        }
        return Some(integer as f64);
    }
    if starts_decimal(bytes) {
        // A decimal that overflows f64 (`1e400`) is an error, as Go's ParseFloat reports a
        // range error for it; only the spelled-out infinities mean infinity.
        return token.parse().ok().filter(|value: &f64| value.is_finite());
    }
    special(bytes)
}

/// Whether `bytes` is a decimal number if anything: its first byte after an optional sign is a
/// digit or `.`. For such text the standard library's float grammar (`f64::from_str`: digits
/// with an optional fraction, or a fraction alone, then an optional exponent; its `inf` and
/// `nan` forms start with a letter) is exactly the decimal form of OpenMetrics' `number`, so
/// `from_str` validates and converts in one pass (`is_decimal`, kept for the tests, is the
/// grammar spelled out).
#[inline]
fn starts_decimal(bytes: &[u8]) -> bool {
    let first = match bytes {
        [b'+' | b'-', rest @ ..] => rest.first(),
        _ => bytes.first(),
    };
    matches!(first, Some(b'0'..=b'9' | b'.'))
}

/// Parses an OpenMetrics timestamp or exemplar timestamp: a decimal number (no NaN or Inf),
/// in seconds.
#[inline]
pub(crate) fn parse_decimal(token: &str) -> Option<f64> {
    if starts_decimal(token.as_bytes()) {
        token.parse().ok().filter(|value: &f64| value.is_finite())
    } else {
        None
    }
}

/// Parses a text 0.0.4 timestamp: an optionally signed integer of milliseconds.
#[inline]
pub(crate) fn parse_millis(token: &str) -> Option<i64> {
    let digits = token
        .strip_prefix('-')
        .or_else(|| token.strip_prefix('+'))
        .unwrap_or(token);
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    token.parse().ok()
}

/// `[+-]? (digits [. digits*] | . digits) ([eE] [+-]? digits)?`
#[cfg(test)]
fn is_decimal(bytes: &[u8]) -> bool {
    let mut index = 0;
    if matches!(bytes.first(), Some(b'+' | b'-')) {
        index = 1;
    }
    let integer_start = index;
    while index < bytes.len() && bytes[index].is_ascii_digit() {
        index += 1;
    }
    let mut digit_count = index - integer_start;
    if index < bytes.len() && bytes[index] == b'.' {
        index += 1;
        let fraction_start = index;
        while index < bytes.len() && bytes[index].is_ascii_digit() {
            index += 1;
        }
        digit_count += index - fraction_start;
    }
    if digit_count == 0 {
        return false;
    }
    if index < bytes.len() && (bytes[index] == b'e' || bytes[index] == b'E') {
        index += 1;
        if matches!(bytes.get(index), Some(b'+' | b'-')) {
            index += 1;
        }
        let exponent_start = index;
        while index < bytes.len() && bytes[index].is_ascii_digit() {
            index += 1;
        }
        if index == exponent_start {
            return false;
        }
    }
    index == bytes.len()
}

fn special(bytes: &[u8]) -> Option<f64> {
    let (negative, rest) = match bytes.first() {
        Some(b'+') => (false, &bytes[1..]),
        Some(b'-') => (true, &bytes[1..]),
        _ => (false, bytes),
    };
    if rest.eq_ignore_ascii_case(b"inf") || rest.eq_ignore_ascii_case(b"infinity") {
        return Some(if negative { f64::NEG_INFINITY } else { f64::INFINITY });
    }
    if rest.len() == bytes.len() && bytes.eq_ignore_ascii_case(b"nan") {
        return Some(f64::NAN);
    }
    None
}

/// Writes `value` the way OpenMetrics' canonical numbers want it: shortest round-trip decimal,
/// `+Inf`, `-Inf`, `NaN`.
pub(crate) fn format_value(value: f64, out: &mut String) {
    use std::fmt::Write;
    if value.is_nan() {
        out.push_str("NaN");
    } else if value == f64::INFINITY {
        out.push_str("+Inf");
    } else if value == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else if value.fract() == 0.0 && value.abs() < 1e15 {
        // Integral values as exporters print counts: `7`, not `7.0` (exact below 2^53).
        if value == 0.0 && value.is_sign_negative() {
            out.push_str("-0");
        } else {
            let _ = write!(out, "{}", value as i64);
        }
    } else {
        // `{:?}` is Rust's shortest representation that parses back to the same f64.
        let _ = write!(out, "{value:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_follow_the_grammar() {
        assert_eq!(parse_value("1"), Some(1.0));
        assert_eq!(parse_value("-1.5e3"), Some(-1500.0));
        assert_eq!(parse_value(".5"), Some(0.5));
        assert_eq!(parse_value("5."), Some(5.0));
        assert_eq!(parse_value("0000000000000000000000000000000000000000001"), Some(1.0));
        assert_eq!(parse_value("9223372036854775808"), Some(9223372036854775808.0));
        assert_eq!(parse_value("+Inf"), Some(f64::INFINITY));
        assert_eq!(parse_value("-infinity"), Some(f64::NEG_INFINITY));
        assert!(parse_value("NaN").unwrap().is_nan());
        assert!(parse_value("nan").unwrap().is_nan());
        for bad in [
            "", "+", ".", "1e", "0x1", "0x1p-3", "1_2", "true", "-NaN", "1.1.1", "0b1", "1 ",
        ] {
            assert_eq!(parse_value(bad), None, "{bad:?}");
        }
    }

    /// Every token of up to five bytes from an alphabet of digits, signs, `.`, `e`/`E` and the
    /// letters of `inf`/`nan`/hex, plus longer spelled-out cases: `parse_value` accepts exactly
    /// the grammar written out (`is_decimal` or a special), and a decimal's value is the
    /// standard library's.
    #[test]
    fn values_are_accepted_exactly_by_the_grammar() {
        let alphabet: &[u8] = b"09.eE+-inafx_ ";
        let mut tokens: Vec<String> = [
            "1e400",
            "-1e400",
            "1e-400",
            "1.e5",
            "+.5e-3",
            "-.e1",
            "9007199254740993",
            "1E+06",
            "0.30000000000000004",
            "Infinity",
            "+INF",
            "-nan",
            "+NaN",
            "infinityx",
            "1e+",
            "e5",
        ]
        .iter()
        .map(|token| token.to_string())
        .collect();
        let mut frontier = vec![String::new()];
        for _ in 0..5 {
            let mut next = Vec::new();
            for prefix in &frontier {
                for &byte in alphabet {
                    let mut token = prefix.clone();
                    token.push(byte as char);
                    next.push(token);
                }
            }
            tokens.extend(next.iter().cloned());
            frontier = next;
        }
        let mut accepted = 0;
        for token in &tokens {
            let bytes = token.as_bytes();
            let grammar = if is_decimal(bytes) {
                token.parse::<f64>().ok().filter(|value| value.is_finite())
            } else {
                special(bytes)
            };
            let parsed = parse_value(token);
            assert_eq!(parsed.map(f64::to_bits), grammar.map(f64::to_bits), "{token:?}");
            let timestamp = is_decimal(bytes)
                .then(|| token.parse::<f64>().ok().filter(|value| value.is_finite()))
                .flatten();
            assert_eq!(
                parse_decimal(token).map(f64::to_bits),
                timestamp.map(f64::to_bits),
                "{token:?}"
            );
            accepted += usize::from(parsed.is_some());
        }
        // Not vacuous: over half a million tokens, several hundred of them numbers.
        assert!(
            tokens.len() > 500_000 && accepted > 500,
            "{} tokens, {accepted} accepted",
            tokens.len()
        );
    }

    #[test]
    fn timestamps_reject_non_finite() {
        assert_eq!(parse_decimal("1.5e3"), Some(1500.0));
        assert_eq!(parse_decimal("000"), Some(0.0));
        assert_eq!(parse_decimal("Inf"), None);
        assert_eq!(parse_decimal("NaN"), None);
        assert_eq!(parse_millis("-123456"), Some(-123456));
        assert_eq!(parse_millis("2.72"), None);
        assert_eq!(parse_millis("1_2"), None);
    }

    #[test]
    fn formatting_round_trips() {
        for value in [
            0.1,
            1e-5,
            1e23,
            -0.0,
            0.0,
            7.0,
            -3.0,
            1e15,
            123456789012345.0,
            -0.0003825067330956884,
            17.0,
            f64::MAX,
            f64::MIN_POSITIVE,
        ] {
            let mut text = String::new();
            format_value(value, &mut text);
            assert_eq!(parse_value(&text).map(f64::to_bits), Some(value.to_bits()), "{text}");
        }
    }
}
