//! Durations and sizes as Prometheus users write them in YAML.
//!
//! Durations follow Prometheus's `model.ParseDuration`: one or more `<integer><unit>` parts in
//! decreasing unit order, units `y` (365 d), `w`, `d`, `h`, `m`, `s`, `ms`, e.g. `15s`,
//! `1m30s`, `500ms`; `0` alone means zero. Sizes follow Prometheus's `body_size_limit`
//! (alecthomas/units `Base2Bytes`): an integer with `B`, `KB`/`KiB`, `MB`/`MiB`, `GB`/`GiB`,
//! `TB`/`TiB`, all 1024-based, or a bare integer of bytes.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// A duration read from `15s`, `1m30s`, `500ms`. Wraps [`std::time::Duration`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PromDuration(pub Duration);

/// A size in bytes read from `10MiB`, `512KB`, `1048576`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(pub u64);

/// Parses a Prometheus duration. Errors name what was expected.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.is_empty() {
        return Err("empty duration; write e.g. 15s, 1m30s or 500ms".to_string());
    }
    // (suffix, milliseconds), longest suffix first where one is a prefix of another.
    const UNITS: [(&str, u128); 7] = [
        ("y", 365 * 24 * 3600 * 1000),
        ("w", 7 * 24 * 3600 * 1000),
        ("d", 24 * 3600 * 1000),
        ("h", 3600 * 1000),
        ("ms", 1),
        ("m", 60 * 1000),
        ("s", 1000),
    ];
    let order = |unit: &str| {
        ["y", "w", "d", "h", "m", "s", "ms"]
            .iter()
            .position(|candidate| *candidate == unit)
    };
    let mut total_ms: u128 = 0;
    let mut rest = text;
    let mut last_order: Option<usize> = None;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!("invalid duration '{text}': expected a number before '{rest}'"));
        }
        let number: u128 = rest[..digits]
            .parse()
            .map_err(|_| format!("invalid duration '{text}': number too large"))?;
        rest = &rest[digits..];
        let Some((unit, unit_ms)) = UNITS.iter().find(|(unit, _)| rest.starts_with(unit)) else {
            return Err(format!(
                "invalid duration '{text}': unit must be one of y, w, d, h, m, s, ms"
            ));
        };
        let position = order(unit);
        if last_order.is_some_and(|last| position <= Some(last)) {
            return Err(format!(
                "invalid duration '{text}': units must go from largest to smallest, each once"
            ));
        }
        last_order = position;
        total_ms = number
            .checked_mul(*unit_ms)
            .and_then(|part| total_ms.checked_add(part))
            .filter(|total| *total <= u128::from(u64::MAX))
            .ok_or_else(|| format!("invalid duration '{text}': too long"))?;
        rest = &rest[unit.len()..];
    }
    Ok(Duration::from_millis(total_ms as u64))
}

/// Parses a size: bytes, or an integer with a 1024-based unit.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err(format!("invalid size '{text}': write e.g. 10MiB, 512KB or 1048576"));
    }
    let number: u64 = text[..digits]
        .parse()
        .map_err(|_| format!("invalid size '{text}': number too large"))?;
    let multiplier: u64 = match &text[digits..] {
        "" | "B" => 1,
        "KB" | "KiB" => 1 << 10,
        "MB" | "MiB" => 1 << 20,
        "GB" | "GiB" => 1 << 30,
        "TB" | "TiB" => 1 << 40,
        unit => {
            return Err(format!(
                "invalid size '{text}': unknown unit '{unit}' (B, KiB, MiB, GiB, TiB; KB, MB, GB, TB are read as 1024-based, as Prometheus does)"
            ))
        }
    };
    number
        .checked_mul(multiplier)
        .ok_or_else(|| format!("invalid size '{text}': too large"))
}

impl fmt::Display for PromDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ms = self.0.as_millis();
        if ms == 0 {
            return write!(f, "0s");
        }
        for (unit, unit_ms) in [
            ("d", 86_400_000u128),
            ("h", 3_600_000),
            ("m", 60_000),
            ("s", 1000),
            ("ms", 1),
        ] {
            if ms >= unit_ms {
                write!(f, "{}{unit}", ms / unit_ms)?;
                ms %= unit_ms;
            }
        }
        Ok(())
    }
}

impl<'de> Deserialize<'de> for PromDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DurationVisitor;
        impl Visitor<'_> for DurationVisitor {
            type Value = PromDuration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as 15s, 1m30s or 500ms")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<PromDuration, E> {
                parse_duration(text).map(PromDuration).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<PromDuration, E> {
                if value == 0 {
                    Ok(PromDuration(Duration::ZERO))
                } else {
                    Err(E::custom(format!(
                        "a bare number ({value}) is not a duration; add a unit, e.g. {value}s"
                    )))
                }
            }
        }
        deserializer.deserialize_any(DurationVisitor)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SizeVisitor;
        impl Visitor<'_> for SizeVisitor {
            type Value = ByteSize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size such as 10MiB, 512KB or a number of bytes")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<ByteSize, E> {
                parse_size(text).map(ByteSize).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(value))
            }
        }
        deserializer.deserialize_any(SizeVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_prometheus_writes_them() {
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1h1m1s1ms"), Ok(Duration::from_millis(3_661_001)));
        assert_eq!(parse_duration("2w"), Ok(Duration::from_secs(14 * 86_400)));
        assert_eq!(parse_duration("1y"), Ok(Duration::from_secs(365 * 86_400)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        for bad in ["", "15", "s", "1.5s", "1s1m", "1m1m", "-1s", "1x", "15 s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        assert_eq!(PromDuration(Duration::from_millis(90_500)).to_string(), "1m30s500ms");
    }

    #[test]
    fn sizes_are_1024_based() {
        assert_eq!(parse_size("10MiB"), Ok(10 * 1024 * 1024));
        assert_eq!(parse_size("512KB"), Ok(512 * 1024));
        assert_eq!(parse_size("1048576"), Ok(1_048_576));
        assert_eq!(parse_size("2GB"), Ok(2 * 1024 * 1024 * 1024));
        for bad in ["", "MiB", "10 MiB", "10mb", "1.5MiB", "99999999999999999999"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }
}
