//! Writing families back out as text 0.0.4 or OpenMetrics 1.0.
//!
//! Used by the fleet simulator's exporters and by round-trip tests. Numbers use the shortest
//! representation that parses back to the same `f64` (`+Inf`, `-Inf`, `NaN` spelled as in
//! the OpenMetrics canonical numbers); names that are not plain identifiers are quoted the
//! Prometheus 3 way (`{"my.metric"}`).

use std::fmt::Write;

use super::model::{Exposition, Family, Format, Label, MetricType};
use super::number::format_value;
use super::syntax::{is_plain_label_name, is_plain_metric_name};

/// Renders `exposition` in `format`.
///
/// Text 0.0.4 has no `UNIT`, exemplars, `info`, `stateset` or `gaugehistogram`: units and
/// exemplars are left out and those types are written as `untyped`. Timestamps are written as
/// integer milliseconds in text and as seconds in OpenMetrics. OpenMetrics output ends with
/// `# EOF`.
pub fn render(exposition: &Exposition<'_>, format: Format) -> String {
    let mut out = String::with_capacity(exposition.samples.len() * 64 + 64);
    for family in &exposition.families {
        render_family(exposition, family, format, &mut out);
    }
    if format == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

fn render_family(exposition: &Exposition<'_>, family: &Family<'_>, format: Format, out: &mut String) {
    let type_name = match (format, family.metric_type) {
        (Format::Text, MetricType::Unknown | MetricType::Info | MetricType::StateSet | MetricType::GaugeHistogram) => {
            "untyped"
        }
        (_, metric_type) => metric_type.as_str(),
    };
    {
        out.push_str("# TYPE ");
        write_metadata_name(&family.name, out);
        out.push(' ');
        out.push_str(type_name);
        out.push('\n');
    }
    if format == Format::OpenMetrics {
        if let Some(unit) = &family.unit {
            out.push_str("# UNIT ");
            write_metadata_name(&family.name, out);
            out.push(' ');
            out.push_str(unit);
            out.push('\n');
        }
    }
    if let Some(help) = &family.help {
        out.push_str("# HELP ");
        write_metadata_name(&family.name, out);
        out.push(' ');
        for character in help.chars() {
            match character {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '"' if format == Format::OpenMetrics => out.push_str("\\\""),
                other => out.push(other),
            }
        }
        out.push('\n');
    }
    for sample in exposition.samples_of(family) {
        // Deferred labels are read here (a set that repeats a name is written without labels).
        let read = exposition.labels_of(sample).unwrap_or_default();
        let labels: &[Label<'_>] = &read;
        if is_plain_metric_name(&sample.name) {
            out.push_str(&sample.name);
            if !labels.is_empty() {
                write_labels(labels, None, out);
            }
        } else {
            write_labels(labels, Some(&sample.name), out);
        }
        out.push(' ');
        format_value(sample.value, out);
        if let Some(timestamp) = sample.timestamp {
            out.push(' ');
            match format {
                Format::Text => {
                    let _ = write!(out, "{}", sample.timestamp_ms().unwrap_or(0));
                }
                Format::OpenMetrics => format_value(timestamp, out),
            }
        }
        if let (Format::OpenMetrics, Some(exemplar)) = (format, &sample.exemplar) {
            out.push_str(" # ");
            write_labels(exposition.labels_in(exemplar.labels), None, out);
            out.push(' ');
            format_value(exemplar.value, out);
            if let Some(timestamp) = exemplar.timestamp {
                out.push(' ');
                format_value(timestamp, out);
            }
        }
        out.push('\n');
    }
}

fn write_metadata_name(name: &str, out: &mut String) {
    if is_plain_metric_name(name) {
        out.push_str(name);
    } else {
        write_quoted(name, out);
    }
}

fn write_labels(labels: &[Label<'_>], quoted_metric_name: Option<&str>, out: &mut String) {
    out.push('{');
    let mut first = true;
    if let Some(name) = quoted_metric_name {
        write_quoted(name, out);
        first = false;
    }
    for label in labels {
        if !first {
            out.push(',');
        }
        first = false;
        if is_plain_label_name(&label.name) {
            out.push_str(&label.name);
        } else {
            write_quoted(&label.name, out);
        }
        out.push('=');
        write_quoted(&label.value, out);
    }
    out.push('}');
}

fn write_quoted(text: &str, out: &mut String) {
    out.push('"');
    for character in text.chars() {
        match character {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            other => out.push(other),
        }
    }
    out.push('"');
}
