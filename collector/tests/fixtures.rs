//! Real captures from `../shared/fixtures/exposition` (outside `invalid/`).
//!
//! * Every capture parses with `auto` format detection. Captures whose SOURCES.md row says
//!   they use OpenMetrics 2.0 draft syntax may instead fail, but only with
//!   [`Rule::OpenMetrics2Syntax`], whose message says so.
//! * Golden files in `tests/golden/` pin the parse of several captures: every family with its
//!   type, unit and sample count, its first sample in full, and a digest of all its samples
//!   (labels, values, timestamps, exemplars) and HELP; a diff is a failure. Regenerate with
//!   `EPICENTER_UPDATE_GOLDEN=1` and review the diff by hand.
//! * Family and sample counts agree with those the Python reference client (prometheus_client)
//!   reported in VALIDATION.md for captures where both count the same things.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

#[path = "support.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use epicenter_collector::exposition::{parse, FormatChoice, ParseOptions, Rule, Validation};

fn fixture_files(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|name| name != "invalid") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|extension| extension == "prom") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(root, &mut files);
    files.sort();
    files
}

/// Files whose SOURCES.md row says "OpenMetrics 2.0 draft" (or "OM 2.0").
fn openmetrics2_files(sources: &str) -> Vec<String> {
    sources
        .lines()
        .filter(|row| row.starts_with("| ") && (row.contains("OpenMetrics 2.0 draft") || row.contains("OM 2.0")))
        .filter_map(|row| row.split('|').nth(1).map(|cell| cell.trim().to_string()))
        .collect()
}

#[test]
fn every_real_capture_parses_with_auto_detection() {
    let Some(shared) = support::shared_dir("fixtures") else {
        return;
    };
    let root = shared.join("fixtures/exposition");
    let sources = std::fs::read_to_string(root.join("SOURCES.md")).unwrap();
    let draft = openmetrics2_files(&sources);
    assert!(
        !draft.is_empty(),
        "SOURCES.md should name the OpenMetrics 2.0 draft captures"
    );
    let files = fixture_files(&root);
    assert!(files.len() >= 60, "expected the real captures under {}", root.display());
    let mut failures = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&root).unwrap().to_string_lossy().to_string();
        let body = std::fs::read(file).unwrap();
        match parse(&body, ParseOptions::default()) {
            Ok(exposition) => {
                assert!(!exposition.families.is_empty(), "{relative}: no families");
            }
            Err(error) if draft.contains(&relative) => {
                assert_eq!(error.rule, Rule::OpenMetrics2Syntax, "{relative}: {error}");
                assert!(error.message.contains("OpenMetrics 2.0"), "{relative}: {error}");
            }
            Err(error) => failures.push(format!("{relative}: {error}")),
        }
    }
    assert!(
        failures.is_empty(),
        "captures that did not parse:\n{}",
        failures.join("\n")
    );
}

/// Captures pinned by golden files: a Redis exporter, HikariCP via Micrometer, PromEx BEAM,
/// the OpenMetrics specification's complete example, client_golang with exemplars and
/// negative buckets, prometheus.erl's histogram, client_python's escaped exemplars, and the
/// UTF-8 quoted-name syntax of Prometheus 3.
const GOLDEN: &[&str] = &[
    "redis_exporter/redis-exporter-v1.27-redis6.2-master-3-replicas.prom",
    "java/datadog-hikaricp-micrometer.prom",
    "beam/promex-beam.prom",
    "openmetrics/om-spec-complete-exposition.prom",
    "openmetrics/client-golang-random-example-exemplars.prom",
    "beam/prometheus-erl-histogram.prom",
    "openmetrics/client-python-om-histogram-exemplars-escaped.prom",
    "edge_cases/prometheus-utf8-quoted-names.prom",
    "edge_cases/common-textparse-escapes-nan-inf-whitespace.prom",
];

#[test]
fn golden_files_pin_the_parse_of_real_captures() {
    let Some(shared) = support::shared_dir("golden") else {
        return;
    };
    let root = shared.join("fixtures/exposition");
    let golden_dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden"));
    let update = std::env::var_os("EPICENTER_UPDATE_GOLDEN").is_some();
    let mut mismatches = Vec::new();
    for relative in GOLDEN {
        let body = std::fs::read(root.join(relative)).unwrap();
        let exposition = parse(&body, ParseOptions::default()).unwrap_or_else(|error| panic!("{relative}: {error}"));
        let actual = support::golden_summary(&exposition);
        let golden = golden_dir.join(relative.replace('/', "__").replace(".prom", ".golden"));
        if update {
            std::fs::write(&golden, &actual).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&golden)
            .unwrap_or_else(|error| panic!("{}: {error} (run with EPICENTER_UPDATE_GOLDEN=1)", golden.display()));
        if expected != actual {
            let first_difference = expected
                .lines()
                .zip(actual.lines())
                .position(|(left, right)| left != right)
                .unwrap_or(expected.lines().count().min(actual.lines().count()));
            mismatches.push(format!(
                "{relative}: differs from {} at line {}:\n  expected: {}\n  actual:   {}",
                golden.display(),
                first_difference + 1,
                expected.lines().nth(first_difference).unwrap_or("<end>"),
                actual.lines().nth(first_difference).unwrap_or("<end>")
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// Values read straight from the capture files by hand, independent of the golden dumps.
#[test]
fn a_few_exact_values_from_real_captures() {
    let Some(shared) = support::shared_dir("exact values") else {
        return;
    };
    let root = shared.join("fixtures/exposition");
    let read = |relative: &str| std::fs::read(root.join(relative)).unwrap();

    // redis_exporter 1.27: `redis_connected_clients 7`, `redis_up 1` is the last line (no LF).
    let body = read("redis_exporter/redis-exporter-v1.27-redis6.2-master-3-replicas.prom");
    let exposition = parse(&body, ParseOptions::default()).unwrap();
    let value_of = |name: &str| {
        let family = exposition.family(name).unwrap_or_else(|| panic!("no family {name}"));
        exposition.samples_of(family)[0].value
    };
    let text = String::from_utf8_lossy(&body);
    let expected_clients: f64 = text
        .lines()
        .find_map(|line| line.strip_prefix("redis_connected_clients "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(value_of("redis_connected_clients"), expected_clients);
    assert_eq!(value_of("redis_up"), 1.0);
    let commands = exposition.family("redis_commands_total").unwrap();
    assert!(exposition
        .samples_of(commands)
        .iter()
        .all(|sample| exposition.label_value(sample, "cmd").is_some()));

    // HikariCP via Micrometer: trailing comma in `{pool="HikariPool-1",}`.
    let body = read("java/datadog-hikaricp-micrometer.prom");
    let exposition = parse(&body, ParseOptions::default()).unwrap();
    let pending = exposition.family("hikaricp_connections_pending").unwrap();
    let sample = &exposition.samples_of(pending)[0];
    assert_eq!(exposition.label_value(sample, "pool").as_deref(), Some("HikariPool-1"));

    // OpenMetrics spec example: counter family without `_total`, `_created` sample, unit.
    let body = read("openmetrics/om-spec-complete-exposition.prom");
    let exposition = parse(
        &body,
        ParseOptions {
            format: FormatChoice::OpenMetrics,
            validation: Validation::Strict,
        },
    )
    .unwrap();
    assert!(exposition.warnings.is_empty());
    for family in &exposition.families {
        for sample in exposition.samples_of(family) {
            assert!(
                sample.name.starts_with(family.name.as_ref()),
                "{} in {}",
                sample.name,
                family.name
            );
        }
    }

    // client_golang random example: exemplar with a timestamp on a negative bucket.
    let body = read("openmetrics/client-golang-random-example-exemplars.prom");
    let exposition = parse(&body, ParseOptions::default()).unwrap();
    let histogram = exposition.family("rpc_durations_histogram_seconds").unwrap();
    let bucket = exposition
        .samples_of(histogram)
        .iter()
        .find(|sample| exposition.label_value(sample, "le").as_deref() == Some("-0.0002899999999999998"))
        .unwrap();
    assert_eq!(bucket.value, 3.0);
    let exemplar = bucket.exemplar.unwrap();
    assert_eq!(exemplar.value, -0.0003825067330956884);
    assert_eq!(exemplar.timestamp, Some(1.7268398142239082e9));
    assert_eq!(exposition.labels_in(exemplar.labels)[0].value, "17783");
}

/// Family and sample counts of text 0.0.4 captures agree with the Python reference parser's
/// counts recorded in VALIDATION.md, for every capture where the two parsers group samples the
/// same way. Where they differ, the reason is listed.
#[test]
fn counts_agree_with_the_python_reference_parser() {
    let Some(shared) = support::shared_dir("reference counts") else {
        return;
    };
    let root = shared.join("fixtures/exposition");
    let validation = std::fs::read_to_string(root.join("VALIDATION.md")).unwrap();
    // Python's text parser counts what it was given differently for these:
    let differs: BTreeMap<&str, &str> = [
        // prometheus_client's text parser starts a new family whenever the sample name changes
        // (13 families for the interleaved summary with a decoy in between); epicenter, like
        // expfmt, keys text families by name and merges the interleaved runs (4 families).
        (
            "edge_cases/common-textparse-evil-summary.prom",
            "interleaved summary runs are one family",
        ),
    ]
    .into_iter()
    .collect();
    let mut compared = 0;
    let mut mismatches = Vec::new();
    for row in validation
        .lines()
        .filter(|row| row.starts_with("| ") && row.contains(".prom"))
    {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (file, flags, text_result, text_detail) = (cells[1], cells[4], cells[5], cells[6]);
        if text_result != "OK" || flags.contains("EOF") || flags.contains("EX") || differs.contains_key(file) {
            continue; // OpenMetrics bodies are counted by python's text parser, not ours
        }
        let numbers: Vec<usize> = text_detail
            .split(|character: char| !character.is_ascii_digit())
            .filter(|part| !part.is_empty())
            .map(|part| part.parse().unwrap())
            .collect();
        let (families, samples) = (numbers[0], numbers[1]);
        let body = std::fs::read(root.join(file)).unwrap();
        let exposition = parse(
            &body,
            ParseOptions {
                format: FormatChoice::Text,
                validation: Validation::Prometheus,
            },
        )
        .unwrap_or_else(|error| panic!("{file}: {error}"));
        compared += 1;
        if exposition.sample_count() != samples {
            mismatches.push(format!(
                "{file}: {} samples, python {samples}",
                exposition.sample_count()
            ));
        }
        if exposition.families.len() != families {
            mismatches.push(format!(
                "{file}: {} families, python {families}",
                exposition.families.len()
            ));
        }
    }
    assert!(compared >= 30, "compared only {compared} captures");
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
