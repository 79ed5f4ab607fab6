//! RowBinary encoding of sample and scrape rows (ClickHouse "Formats: RowBinary"): integers
//! and floats little-endian, strings as LEB128 length plus bytes, `Map` as LEB128 count plus
//! key/value pairs, `DateTime64(3)` as Int64 milliseconds. `LowCardinality(String)` is sent
//! as `String`.

use crate::relabel::Labels;
use crate::scrape::{Placement, SampleRow, ScrapeReport};

fn leb128(mut value: u64, out: &mut Vec<u8>) {
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

fn string(text: &str, out: &mut Vec<u8>) {
    leb128(text.len() as u64, out);
    out.extend_from_slice(text.as_bytes());
}

/// RowBinary of a series' `samples` columns from `metric` to `labels` (`metric, job,
/// instance, dc, host, service, labels`); the `labels` map holds every label of the series
/// except the metric name.
pub fn series_columns(name: &str, labels: &Labels, placement: &Placement) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + labels.iter().map(|(n, v)| n.len() + v.len() + 2).sum::<usize>());
    string(name, &mut out);
    string(labels.get("job").map_or("", String::as_str), &mut out);
    string(labels.get("instance").map_or("", String::as_str), &mut out);
    string(&placement.dc, &mut out);
    string(&placement.host, &mut out);
    string(&placement.service, &mut out);
    leb128(labels.len() as u64, &mut out);
    for (name, value) in labels {
        string(name, &mut out);
        string(value, &mut out);
    }
    out
}

/// Appends `rows` in `samples` column order ([`super::schema::SAMPLE_COLUMNS`]): the time,
/// the series' pre-encoded columns ([`crate::scrape::Series::encoded_columns`]), the value and the series id.
pub fn encode_samples(rows: &[SampleRow], out: &mut Vec<u8>) {
    for row in rows {
        out.extend_from_slice(&row.timestamp_ms.to_le_bytes());
        out.extend_from_slice(row.series.encoded_columns());
        out.extend_from_slice(&row.value.to_le_bytes());
        out.extend_from_slice(&row.series.id.to_le_bytes());
    }
}

/// Appends `reports` in `scrapes` column order ([`super::schema::SCRAPE_COLUMNS`]).
pub fn encode_scrapes(reports: &[ScrapeReport], out: &mut Vec<u8>) {
    for report in reports {
        out.extend_from_slice(&report.timestamp_ms.to_le_bytes());
        string(&report.job, out);
        string(&report.instance, out);
        string(&report.placement.dc, out);
        string(&report.placement.host, out);
        string(&report.placement.service, out);
        out.push(u8::from(report.up));
        out.extend_from_slice(&report.duration_seconds.to_le_bytes());
        out.extend_from_slice(&report.samples_scraped.to_le_bytes());
        out.extend_from_slice(&report.samples_post_metric_relabeling.to_le_bytes());
        out.extend_from_slice(&report.series_added.to_le_bytes());
        string(report.error.as_deref().unwrap_or(""), out);
    }
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
