//! Helpers shared by the collector's integration tests: where `../shared` is, and a canonical
//! text dump of a parsed body for golden files.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]
#![allow(dead_code, unreachable_pub, reason = "each test crate uses a different subset")]

use std::fmt::Write;
use std::path::PathBuf;

use epicenter_collector::exposition::{Exposition, Sample};

/// The project's `../shared` folder (beside the repository), or `EPICENTER_SHARED`.
///
/// Returns `None` (after saying so on stderr) when it is missing on a user's clone; panics
/// when it is missing in CI (`CI` set), where a missing test input is a failure.
pub fn shared_dir(test: &str) -> Option<PathBuf> {
    let dir = match std::env::var_os("EPICENTER_SHARED") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared")),
    };
    if dir.is_dir() {
        return Some(dir);
    }
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {} is missing; CI must provide ../shared", dir.display());
    }
    let hint = if std::env::var_os("EPICENTER_SHARED").is_some() {
        "EPICENTER_SHARED points at a missing folder"
    } else {
        "set EPICENTER_SHARED to the team's shared/ folder"
    };
    eprintln!(
        "{test}: SKIPPED for lack of test data: {} not found ({hint})",
        dir.display()
    );
    None
}

/// Formats a value exactly: shortest round-trip decimal, `NaN`, `+Inf`, `-Inf`.
pub fn number(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_string()
    } else if value == f64::INFINITY {
        "+Inf".to_string()
    } else if value == f64::NEG_INFINITY {
        "-Inf".to_string()
    } else {
        format!("{value:?}")
    }
}

/// One sample as a canonical line: name, labels in body order, value, timestamp in seconds,
/// exemplar.
pub fn sample_line(exposition: &Exposition<'_>, sample: &Sample<'_>) -> String {
    let mut out = String::new();
    let labels: Vec<String> = exposition
        .labels_in(sample.labels)
        .iter()
        .map(|label| format!("{:?}={:?}", label.name, label.value))
        .collect();
    write!(
        out,
        "{:?}{{{}}} {}",
        sample.name,
        labels.join(","),
        number(sample.value)
    )
    .unwrap();
    if let Some(timestamp) = sample.timestamp {
        write!(out, " @{}", number(timestamp)).unwrap();
    }
    if let Some(exemplar) = &sample.exemplar {
        let labels: Vec<String> = exposition
            .labels_in(exemplar.labels)
            .iter()
            .map(|label| format!("{:?}={:?}", label.name, label.value))
            .collect();
        write!(out, " # {{{}}} {}", labels.join(","), number(exemplar.value)).unwrap();
        if let Some(timestamp) = exemplar.timestamp {
            write!(out, " @{}", number(timestamp)).unwrap();
        }
    }
    out
}

/// FNV-1a, 64 bits: a stable digest that pins text without reproducing it.
pub fn fnv1a(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// A compact golden summary of a parse: per family its type, unit, whether it has HELP, sample
/// count, the first sample in full, and a digest of every sample line and the HELP text, so any
/// change in any value, label, timestamp or exemplar shows as a diff without the golden file
/// transcribing the capture.
pub fn golden_summary(exposition: &Exposition<'_>) -> String {
    let mut out = String::new();
    writeln!(
        out,
        "format {} families={} samples={}",
        exposition.format.as_str(),
        exposition.families.len(),
        exposition.sample_count()
    )
    .unwrap();
    for family in &exposition.families {
        let samples = exposition.samples_of(family);
        let mut all = family.help.as_deref().unwrap_or("").to_string();
        for sample in samples {
            all.push('\n');
            all.push_str(&sample_line(exposition, sample));
        }
        writeln!(
            out,
            "family {:?} type={} unit={:?} help={} samples={} digest={:016x}",
            family.name,
            family.metric_type.as_str(),
            family.unit,
            family.help.is_some(),
            samples.len(),
            fnv1a(&all)
        )
        .unwrap();
        if let Some(first) = samples.first() {
            writeln!(out, "  first {}", sample_line(exposition, first)).unwrap();
        }
    }
    out
}
