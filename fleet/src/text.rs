//! A writer of Prometheus text format 0.0.4 (exposition formats, "Text format details"):
//! `# HELP`/`# TYPE` lines, samples stamped with the simulated time in milliseconds, label
//! values escaped, histograms as cumulative `_bucket`s with `le`, `+Inf`, `_count` and `_sum`.

use std::fmt::Write;

/// One exposition being written.
pub(crate) struct Out {
    /// The text so far.
    pub(crate) text: String,
    /// Every sample's timestamp, milliseconds since the Unix epoch.
    pub(crate) timestamp_ms: i64,
}

impl Out {
    /// `# HELP` and `# TYPE` lines of family `name` of type `kind`.
    pub(crate) fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// One sample line: `name{labels} value timestamp`.
    pub(crate) fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (position, (label, text)) in labels.iter().enumerate() {
                if position > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{label}=\"{}\"", escape(text));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {} {}", number(value), self.timestamp_ms);
    }

    /// A histogram's series for one label set: `buckets` are cumulative counts over `bounds`
    /// (each floored and capped at `count`), then `+Inf`, `_count` (floored) and `_sum`.
    pub(crate) fn histogram(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        bounds: &[f64],
        buckets: &[f64],
        count: f64,
        sum: f64,
    ) {
        let bucket_name = format!("{name}_bucket");
        for (bound, cumulative) in bounds.iter().zip(buckets) {
            let le = number(*bound);
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&bucket_name, &with_le, cumulative.floor().min(count.floor()));
        }
        let mut infinite = labels.to_vec();
        infinite.push(("le", "+Inf"));
        self.sample(&bucket_name, &infinite, count.floor());
        self.sample(&format!("{name}_count"), labels, count.floor());
        self.sample(&format!("{name}_sum"), labels, sum);
    }
}

/// A label value escaped as the text format asks: backslash, double quote, newline.
pub(crate) fn escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// A sample value as the text format writes it (`NaN`, `+Inf`, `-Inf` for the non-finite).
pub(crate) fn number(value: f64) -> String {
    if value.is_finite() {
        format!("{value}")
    } else if value.is_nan() {
        "NaN".to_string()
    } else if value > 0.0 {
        "+Inf".to_string()
    } else {
        "-Inf".to_string()
    }
}
