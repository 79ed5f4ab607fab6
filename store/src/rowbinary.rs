//! RowBinary, the format (ClickHouse "Formats: RowBinary"): integers and floats
//! little-endian, strings as LEB128 length plus bytes, `Map` as LEB128 count plus key/value
//! pairs, `DateTime64(3)` as Int64 milliseconds. `LowCardinality(String)` is sent as
//! `String`. How epicenter's rows use it is in [`crate::rows`].

use std::collections::BTreeMap;

/// Appends `value` as unsigned LEB128 (the length prefix of strings and maps).
pub(crate) fn leb128(mut value: u64, out: &mut Vec<u8>) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Appends `text` as a RowBinary `String`: LEB128 byte length, then the UTF-8 bytes.
pub(crate) fn string(text: &str, out: &mut Vec<u8>) {
    leb128(text.len() as u64, out);
    out.extend_from_slice(text.as_bytes());
}

/// RowBinary of a series' `samples` columns from `metric` to `labels` (`metric, job,
/// instance, dc, host, service, labels`); the `labels` map holds every label of the series
/// except the metric name; `instance`, `dc`, `host` and `service` are the series' placement
/// (`instance` the label `placement.instance_label` names, else the `instance` label).
pub fn series_columns(
    name: &str,
    labels: &BTreeMap<String, String>,
    instance: &str,
    dc: &str,
    host: &str,
    service: &str,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + labels.iter().map(|(n, v)| n.len() + v.len() + 2).sum::<usize>());
    string(name, &mut out);
    string(labels.get("job").map_or("", String::as_str), &mut out);
    string(instance, &mut out);
    string(dc, &mut out);
    string(host, &mut out);
    string(service, &mut out);
    leb128(labels.len() as u64, &mut out);
    for (name, value) in labels {
        string(name, &mut out);
        string(value, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leb128_matches_the_specification_examples() {
        for (value, expected) in [
            (0u64, vec![0u8]),
            (127, vec![0x7f]),
            (128, vec![0x80, 0x01]),
            (624_485, vec![0xe5, 0x8e, 0x26]),
        ] {
            let mut out = Vec::new();
            leb128(value, &mut out);
            assert_eq!(out, expected, "{value}");
        }
    }
}
