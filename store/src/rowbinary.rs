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

/// Reads an unsigned LEB128 number at `at`, moving `at` past it; None past the end.
fn read_leb128(data: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0_u64;
    let mut shift = 0;
    loop {
        let byte = *data.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
        shift += 7;
        if shift > 63 {
            return None; // longer than a u64's ten bytes: not RowBinary
        }
    }
}

/// Moves `at` past one RowBinary string; None past the end.
fn skip_string(data: &[u8], at: &mut usize) -> Option<()> {
    let length = usize::try_from(read_leb128(data, at)?).ok()?;
    *at = at.checked_add(length).filter(|end| *end <= data.len())?;
    Some(())
}

/// Converts rows of the schema-2 wide `samples` table (`time, metric, job, instance, dc,
/// host, service, labels, value, series_id`, as a spool written by an older epicenter holds
/// them) into `sample_values` rows and one `series` row per series. Returns (values, series,
/// series rows), or None when the bytes are not such rows.
pub fn split_wide_samples(data: &[u8]) -> Option<(Vec<u8>, Vec<u8>, u64)> {
    let mut values = Vec::with_capacity(data.len() / 2);
    let mut series = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut at = 0;
    while at < data.len() {
        let time = data.get(at..at + 8)?;
        at += 8;
        let columns_start = at;
        skip_string(data, &mut at)?;
        let metric = &data[columns_start..at];
        for _ in 0..5 {
            skip_string(data, &mut at)?; // job, instance, dc, host, service
        }
        for _ in 0..read_leb128(data, &mut at)? {
            skip_string(data, &mut at)?;
            skip_string(data, &mut at)?;
        }
        let columns = &data[columns_start..at];
        let value = data.get(at..at + 8)?;
        let id = data.get(at + 8..at + 16)?;
        at += 16;
        values.extend_from_slice(metric);
        values.extend_from_slice(id);
        values.extend_from_slice(time);
        values.extend_from_slice(value);
        if seen.insert(id) {
            series.extend_from_slice(columns);
            series.extend_from_slice(id);
            series.extend_from_slice(time);
            series.extend_from_slice(time);
        }
    }
    Some((values, series, seen.len() as u64))
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
