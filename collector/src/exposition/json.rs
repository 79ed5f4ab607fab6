//! The `--json` form of a parsed exposition (`epicenter check metrics --json`), written as it
//! goes so memory stays proportional to the parsed body:
//! `{"format", "families": [{"name", "type", "unit", "help", "samples": [{"name", "labels",
//! "value", "timestamp", "exemplar"}]}], "warnings": [{"line", "column", "rule", "message"}],
//! "warnings_dropped"}`, and with `--lint` a last key `"lint": [{"metric", "rule", "message",
//! "line", "count"}]`. Timestamps are in seconds; non-finite values are the strings "NaN",
//! "+Inf" and "-Inf".

use std::io::Write;

use super::lint::LintFinding;
use super::model::{Exposition, Label};

/// Writes a JSON string (quoted and escaped).
fn json_string(out: &mut impl Write, text: &str) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, text).map_err(std::io::Error::other)
}

/// Writes a number: finite values as JSON numbers, the others as "NaN", "+Inf", "-Inf".
fn json_number(out: &mut impl Write, value: f64) -> std::io::Result<()> {
    if value.is_nan() {
        out.write_all(b"\"NaN\"")
    } else if value == f64::INFINITY {
        out.write_all(b"\"+Inf\"")
    } else if value == f64::NEG_INFINITY {
        out.write_all(b"\"-Inf\"")
    } else {
        serde_json::to_writer(&mut *out, &value).map_err(std::io::Error::other)
    }
}

fn json_optional_number(out: &mut impl Write, value: Option<f64>) -> std::io::Result<()> {
    match value {
        Some(value) => json_number(out, value),
        None => out.write_all(b"null"),
    }
}

fn json_labels(out: &mut impl Write, labels: &[Label<'_>]) -> std::io::Result<()> {
    out.write_all(b"{")?;
    for (index, label) in labels.iter().enumerate() {
        if index > 0 {
            out.write_all(b",")?;
        }
        json_string(out, &label.name)?;
        out.write_all(b":")?;
        json_string(out, &label.value)?;
    }
    out.write_all(b"}")
}

/// Writes `"labels":{…},"value":…,"timestamp":…`: the fields samples and exemplars share.
fn json_point(out: &mut impl Write, labels: &[Label<'_>], value: f64, timestamp: Option<f64>) -> std::io::Result<()> {
    out.write_all(b"\"labels\":")?;
    json_labels(out, labels)?;
    out.write_all(b",\"value\":")?;
    json_number(out, value)?;
    out.write_all(b",\"timestamp\":")?;
    json_optional_number(out, timestamp)
}

/// Streams the `--json` document, one family at a time, so memory stays proportional to the
/// parsed body rather than to a JSON tree:
/// `{"format", "families": [{"name", "type", "unit", "help", "samples": [{"name", "labels",
/// "value", "timestamp", "exemplar"}]}], "warnings": [{"line", "column", "rule", "message"}],
/// "warnings_dropped"}`.
pub fn write_json(exposition: &Exposition<'_>, out: &mut impl Write) -> std::io::Result<()> {
    write_document(exposition, None, out)
}

/// [`write_json`] with the lint findings of `epicenter check metrics --lint` as a last key,
/// `"lint": [{"metric", "rule", "message", "line", "count"}]`, in [`lint`](super::lint)'s
/// order (metric, then message); `rule` is a [`LintRule`](super::LintRule) name such as
/// `"counter_without_total"` and `count` how many lines promtool prints for the finding.
pub fn write_json_with_lint(
    exposition: &Exposition<'_>,
    findings: &[LintFinding],
    out: &mut impl Write,
) -> std::io::Result<()> {
    write_document(exposition, Some(findings), out)
}

fn write_document(
    exposition: &Exposition<'_>,
    findings: Option<&[LintFinding]>,
    out: &mut impl Write,
) -> std::io::Result<()> {
    write!(out, "{{\"format\":\"{}\",\"families\":[", exposition.format.as_str())?;
    for (family_index, family) in exposition.families.iter().enumerate() {
        if family_index > 0 {
            out.write_all(b",")?;
        }
        out.write_all(b"\n{\"name\":")?;
        json_string(out, &family.name)?;
        write!(out, ",\"type\":\"{}\",\"unit\":", family.metric_type.as_str())?;
        match &family.unit {
            Some(unit) => json_string(out, unit)?,
            None => out.write_all(b"null")?,
        }
        out.write_all(b",\"help\":")?;
        match &family.help {
            Some(help) => json_string(out, help)?,
            None => out.write_all(b"null")?,
        }
        out.write_all(b",\"samples\":[")?;
        for (sample_index, sample) in exposition.samples_of(family).iter().enumerate() {
            if sample_index > 0 {
                out.write_all(b",")?;
            }
            out.write_all(b"\n {\"name\":")?;
            json_string(out, &sample.name)?;
            out.write_all(b",")?;
            // Deferred labels are read here; a set that repeats a name (which an eager parse
            // refuses) is written without labels.
            let labels = exposition.labels_of(sample).unwrap_or_default();
            json_point(out, &labels, sample.value, sample.timestamp)?;
            out.write_all(b",\"exemplar\":")?;
            match &sample.exemplar {
                Some(exemplar) => {
                    out.write_all(b"{")?;
                    json_point(
                        out,
                        exposition.labels_in(exemplar.labels),
                        exemplar.value,
                        exemplar.timestamp,
                    )?;
                    out.write_all(b"}")?;
                }
                None => out.write_all(b"null")?,
            }
            out.write_all(b"}")?;
        }
        out.write_all(b"]}")?;
    }
    out.write_all(b"],\n\"warnings\":[")?;
    for (index, warning) in exposition.warnings.iter().enumerate() {
        if index > 0 {
            out.write_all(b",")?;
        }
        let rule = serde_json::to_string(&warning.rule).map_err(std::io::Error::other)?;
        write!(
            out,
            "\n{{\"line\":{},\"column\":{},\"rule\":{rule},\"message\":",
            warning.line, warning.column
        )?;
        json_string(out, &warning.message)?;
        out.write_all(b"}")?;
    }
    write!(out, "],\"warnings_dropped\":{}", exposition.warnings_dropped)?;
    if let Some(findings) = findings {
        out.write_all(b",\n\"lint\":[")?;
        for (index, finding) in findings.iter().enumerate() {
            if index > 0 {
                out.write_all(b",")?;
            }
            out.write_all(b"\n")?;
            serde_json::to_writer(&mut *out, finding).map_err(std::io::Error::other)?;
        }
        out.write_all(b"]")?;
    }
    writeln!(out, "}}")
}
