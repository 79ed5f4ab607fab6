//! OpenMetrics 1.0 text for epicenter's own `/metrics`, written from the same gathered families
//! the text 0.0.4 encoder writes, and the choice between the two from a scraper's `Accept`
//! header. The `prometheus` crate (0.14, in Cargo.lock) encodes text 0.0.4 and protobuf only.
//!
//! Sources followed: the OpenMetrics 1.0 specification, "Text format" (ABNF, escapes in label
//! values and `HELP`, the closing `# EOF`), "Metric types" (a counter family `foo` has the
//! sample `foo_total`; a histogram has cumulative `_bucket{le=…}` samples ending with
//! `le="+Inf"`, `_count` equal to it, and `_sum`; a summary has `{quantile=…}`, `_count`,
//! `_sum`), "UNIT" (a suffix of the family name) and "Canonical numbers" (`le="1.0"`, not
//! `le="1"`); content negotiation as Prometheus's scraper does it (its `Accept` header lists
//! OpenMetrics first, text 0.0.4 after it, with quality values as in RFC 9110 §12.5.1).

use std::fmt::Write;

use prometheus::proto::{LabelPair, MetricFamily, MetricType};

/// `Content-Type` of an OpenMetrics 1.0 answer.
pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// `Content-Type` of a Prometheus text 0.0.4 answer.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Whether an `Accept` header asks for OpenMetrics rather than text 0.0.4: it names
/// `application/openmetrics-text` (version `1.0.0`, `0.0.1` or none) with a quality above 0 and
/// at least as high as the best it gives text (`text/plain`, `text/*`, `*/*`). No header, or a
/// header naming neither, means text 0.0.4.
///
/// ```
/// use epicenter_web::openmetrics::wants_openmetrics;
///
/// // Prometheus 2.42's scrape header.
/// let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
/// assert!(wants_openmetrics(Some(prometheus)));
/// assert!(!wants_openmetrics(Some("text/plain;version=0.0.4;q=1, application/openmetrics-text;q=0.5")));
/// assert!(!wants_openmetrics(Some("application/openmetrics-text;q=0")));
/// assert!(!wants_openmetrics(None));
/// ```
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    let Some(accept) = accept else { return false };
    let mut best_openmetrics = 0.0f64;
    let mut best_text = 0.0f64;
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let media_type = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let mut quality = 1.0f64;
        let mut version: Option<String> = None;
        for parameter in parts {
            let Some((name, value)) = parameter.split_once('=') else {
                continue;
            };
            let value = value.trim().trim_matches('"');
            match name.trim().to_ascii_lowercase().as_str() {
                // A quality that does not parse counts as 0 (the range is ignored).
                "q" => quality = value.parse::<f64>().ok().filter(|q| q.is_finite()).unwrap_or(0.0),
                "version" => version = Some(value.to_string()),
                _ => {}
            }
        }
        match media_type.as_str() {
            "application/openmetrics-text"
                if version
                    .as_deref()
                    .is_none_or(|version| version == "1.0.0" || version == "0.0.1") =>
            {
                best_openmetrics = best_openmetrics.max(quality);
            }
            "text/plain" | "text/*" | "*/*" => best_text = best_text.max(quality),
            _ => {}
        }
    }
    best_openmetrics > 0.0 && best_openmetrics >= best_text
}

/// `families` (as [`prometheus::Registry::gather`] returns them) as OpenMetrics 1.0 text,
/// ending with `# EOF`. Families without metrics are left out, as the text encoder leaves them
/// out, and so are untyped ones, which it cannot write. A counter family named `foo_total` is
/// written as family `foo` with the sample `foo_total` (a counter not named `…_total` gets the
/// suffix on its sample, as `client_golang` does); families named `…_seconds` or `…_bytes` get
/// a `# UNIT` line; histograms get a `le="+Inf"` bucket equal to their count; timestamps are
/// written in seconds.
pub fn encode(families: &[MetricFamily]) -> String {
    let mut out = String::with_capacity(families.len() * 256);
    // Untyped families are left out too: the text encoder cannot write them (the registry's
    // own metrics never are), and the crate deprecates reading their values.
    let written = families
        .iter()
        .filter(|family| !family.get_metric().is_empty() && family.get_field_type() != MetricType::UNTYPED);
    for family in written {
        write_family(family, &mut out);
    }
    out.push_str("# EOF\n");
    out
}

fn write_family(family: &MetricFamily, out: &mut String) {
    let kind = family.get_field_type();
    let name = match kind {
        MetricType::COUNTER => family.name().strip_suffix("_total").unwrap_or(family.name()),
        _ => family.name(),
    };
    let type_name = match kind {
        MetricType::COUNTER => "counter",
        MetricType::GAUGE => "gauge",
        MetricType::SUMMARY => "summary",
        MetricType::HISTOGRAM => "histogram",
        MetricType::UNTYPED => return,
    };
    let _ = writeln!(out, "# TYPE {name} {type_name}");
    if let Some(unit) = ["seconds", "bytes"]
        .into_iter()
        .find(|unit| name.strip_suffix(unit).is_some_and(|stem| stem.ends_with('_')))
    {
        let _ = writeln!(out, "# UNIT {name} {unit}");
    }
    if !family.help().is_empty() {
        let _ = write!(out, "# HELP {name} ");
        escape(family.help(), out);
        out.push('\n');
    }
    for metric in family.get_metric() {
        let labels = metric.get_label();
        let timestamp_ms = metric.timestamp_ms();
        let mut sample = |suffix: &str, extra: Option<(&str, &str)>, value: f64| {
            write_sample(out, name, suffix, labels, extra, value, timestamp_ms);
        };
        match kind {
            MetricType::COUNTER => sample("_total", None, metric.get_counter().get_value()),
            MetricType::GAUGE => sample("", None, metric.get_gauge().get_value()),
            // Left out by `encode`.
            MetricType::UNTYPED => {}
            MetricType::SUMMARY => {
                let summary = metric.get_summary();
                for quantile in summary.get_quantile() {
                    let q = canonical(quantile.quantile());
                    sample("", Some(("quantile", &q)), quantile.value());
                }
                sample("_sum", None, summary.sample_sum());
                sample("_count", None, summary.sample_count() as f64);
            }
            MetricType::HISTOGRAM => {
                let histogram = metric.get_histogram();
                let mut has_infinite_bucket = false;
                for bucket in histogram.get_bucket() {
                    let bound = bucket.upper_bound();
                    has_infinite_bucket |= bound == f64::INFINITY;
                    let le = canonical(bound);
                    sample("_bucket", Some(("le", &le)), bucket.cumulative_count() as f64);
                }
                let count = histogram.get_sample_count() as f64;
                if !has_infinite_bucket {
                    sample("_bucket", Some(("le", "+Inf")), count);
                }
                sample("_count", None, count);
                sample("_sum", None, histogram.get_sample_sum());
            }
        }
    }
}

/// One sample line: `<family><suffix>{labels[,extra]} <value>[ <timestamp in seconds>]`.
fn write_sample(
    out: &mut String,
    family: &str,
    suffix: &str,
    labels: &[LabelPair],
    extra: Option<(&str, &str)>,
    value: f64,
    timestamp_ms: i64,
) {
    out.push_str(family);
    out.push_str(suffix);
    let pairs = labels.iter().map(|pair| (pair.name(), pair.value())).chain(extra);
    let mut first = true;
    for (name, label_value) in pairs {
        out.push(if first { '{' } else { ',' });
        first = false;
        out.push_str(name);
        out.push_str("=\"");
        escape(label_value, out);
        out.push('"');
    }
    if !first {
        out.push('}');
    }
    out.push(' ');
    out.push_str(&number(value));
    // The protobuf default 0 means "no timestamp", as the text encoder reads it.
    if timestamp_ms != 0 {
        out.push(' ');
        out.push_str(&number(timestamp_ms as f64 / 1000.0));
    }
    out.push('\n');
}

/// A label value or `HELP` text with OpenMetrics's three escapes: `\\`, `\"`, `\n`.
fn escape(text: &str, out: &mut String) {
    for character in text.chars() {
        match character {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            other => out.push(other),
        }
    }
}

/// A sample value: `NaN`, `+Inf`, `-Inf`, integers below 2^53 without a fraction, anything else
/// in the shortest form that reads back as the same `f64`.
fn number(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_string()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else if value.fract() == 0.0 && value.abs() < 9_007_199_254_740_992.0 {
        format!("{}", value as i64)
    } else {
        format!("{value:?}")
    }
}

/// A bound or quantile as a label value in OpenMetrics's canonical form: `1.0`, `0.005`,
/// `+Inf` (Rust's shortest round-trip form keeps a `.0` on whole numbers).
fn canonical(value: f64) -> String {
    if value.is_infinite() || value.is_nan() {
        number(value)
    } else {
        format!("{value:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::{Histogram, HistogramOpts, IntCounterVec, Opts, Registry};

    /// The exact text for one counter with an escaped label value and one histogram: the
    /// `_total` moves from the family name to the sample, `le` values are canonical, a `+Inf`
    /// bucket is added, a `_seconds` family gets its `UNIT`, and the body ends with `# EOF`.
    #[test]
    fn counters_and_histograms_are_written_as_openmetrics_wants() {
        let registry = Registry::new();
        let counter = IntCounterVec::new(Opts::new("jobs_done_total", "Jobs \"done\".\nAll."), &["job"]).unwrap();
        counter.with_label_values(&["a\\b"]).inc_by(3);
        let histogram =
            Histogram::with_opts(HistogramOpts::new("wait_seconds", "Waits, seconds.").buckets(vec![0.005, 1.0, 2.5]))
                .unwrap();
        histogram.observe(0.5);
        histogram.observe(2.0);
        registry.register(Box::new(counter)).unwrap();
        registry.register(Box::new(histogram)).unwrap();
        assert_eq!(
            encode(&registry.gather()),
            "# TYPE jobs_done counter\n\
             # HELP jobs_done Jobs \\\"done\\\".\\nAll.\n\
             jobs_done_total{job=\"a\\\\b\"} 3\n\
             # TYPE wait_seconds histogram\n\
             # UNIT wait_seconds seconds\n\
             # HELP wait_seconds Waits, seconds.\n\
             wait_seconds_bucket{le=\"0.005\"} 0\n\
             wait_seconds_bucket{le=\"1.0\"} 1\n\
             wait_seconds_bucket{le=\"2.5\"} 2\n\
             wait_seconds_bucket{le=\"+Inf\"} 2\n\
             wait_seconds_count 2\n\
             wait_seconds_sum 2.5\n\
             # EOF\n"
        );
    }

    #[test]
    fn numbers_are_spelled_as_openmetrics_spells_them() {
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(f64::NEG_INFINITY), "-Inf");
        assert_eq!(number(42.0), "42");
        assert_eq!(number(-0.25), "-0.25");
        assert_eq!(number(1e300), "1e300");
        assert_eq!(canonical(1.0), "1.0");
        assert_eq!(canonical(f64::INFINITY), "+Inf");
    }

    #[test]
    fn the_accept_header_decides() {
        // Prometheus 3 with its default scrape_protocols.
        assert!(wants_openmetrics(Some(
            "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1"
        )));
        // `scrape_protocols: [PrometheusText0.0.4]`, curl, a browser.
        assert!(!wants_openmetrics(Some("text/plain;version=0.0.4;q=1,*/*;q=0.1")));
        assert!(!wants_openmetrics(Some("*/*")));
        assert!(!wants_openmetrics(Some("text/html,application/xhtml+xml,*/*;q=0.8")));
        // A version epicenter cannot write is not OpenMetrics it can answer with.
        assert!(!wants_openmetrics(Some("application/openmetrics-text;version=2.0.0")));
        assert!(wants_openmetrics(Some("Application/OpenMetrics-Text")));
    }
}
