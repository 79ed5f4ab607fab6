//! Negative inputs from `../shared/fixtures/exposition/invalid`: every one is rejected, read
//! in the format of the reference parser that rejects it, except the cases listed below.
//!
//! * [`LENIENT`]: bodies epicenter ingests by default, as Prometheus's scraper does, because a
//!   stricter reference parser (client_python's OpenMetrics parser, `expfmt`) enforces a
//!   family-level rule whose violation leaves the data unambiguous. Each case names the rule
//!   it breaks; the test checks the default parse reports a warning of that rule and that
//!   `Validation::Strict` rejects the body.
//! * [`ACCEPTED`]: bodies accepted under both validations, with the reason.
//! * Rows SOURCES.md marks as valid controls (empty expected error) must parse.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

#[path = "support.rs"]
mod support;

use std::collections::BTreeMap;

use epicenter_collector::exposition::{parse, FormatChoice, ParseOptions, Rule, Validation};

/// Why each rule is tolerated by default (and rejected under `--strict`).
fn reason(rule: Rule) -> &'static str {
    match rule {
        Rule::Exemplar => "Prometheus keeps exemplars on any sample (client_golang puts them on _count) and only drops over-long ones; an exemplar that cannot be read is dropped and its sample kept (issue 16)",
        Rule::TypeLabel => "a quantile outside [0,1], a non-canonical le or a stateset sample without its state label is still a readable series",
        Rule::SampleNameForType => "text-format habits (info sample without _info) that Prometheus ingests under the sample's own name",
        Rule::ValueRange => "Prometheus stores negative or NaN counters, info and stateset values as they come; the detector treats them as counter resets/gaps",
        Rule::HistogramStructure => "Prometheus ingests classic buckets one series each without checking +Inf, order or _count agreement",
        Rule::TimestampOrder => "out-of-order samples are handled by storage, not refused by the parser",
        Rule::Interleaved => "Prometheus's parser streams samples and does not require families or metrics to be contiguous",
        Rule::RepeatedMetadata => "a second HELP/TYPE/UNIT with the same meaning changes nothing; the first wins",
        Rule::MetadataAfterSamples => "a late HELP or UNIT does not change how samples were read",
        Rule::ClashingName => "both families are kept; names are the samples' own",
        Rule::UnitForType => "a unit on an info or stateset family is documentation only",
        _ => "not a tolerated rule",
    }
}

/// Cases accepted by default with a warning of the given rule, rejected under Strict.
const LENIENT: &[(&str, Rule)] = &[
    ("client-python-openmetrics-parser/case-83.prom", Rule::Exemplar),
    ("client-python-openmetrics-parser/case-85.prom", Rule::Exemplar),
    ("client-python-openmetrics-parser/case-86.prom", Rule::Exemplar),
    ("client-python-openmetrics-parser/case-87.prom", Rule::Exemplar),
    ("client-python-openmetrics-parser/case-88.prom", Rule::Exemplar),
    ("client-python-openmetrics-parser/case-90.prom", Rule::Exemplar),
    ("client-python-openmetrics-parser/case-91.prom", Rule::Exemplar),
    ("client-python-openmetrics-parser/case-92.prom", Rule::Exemplar),
    ("client-python-openmetrics-parser/case-93.prom", Rule::Exemplar),
    ("client-python-openmetrics-parser/case-94.prom", Rule::Exemplar),
    ("prometheus-om-parser/case-53.prom", Rule::Exemplar),
    ("prometheus-om-parser/case-54.prom", Rule::Exemplar),
    ("client-python-openmetrics-parser/case-100.prom", Rule::Exemplar),
    ("client-python-openmetrics-parser/case-101.prom", Rule::Exemplar),
    ("client-python-openmetrics-parser/case-102.prom", Rule::Exemplar),
    ("client-python-openmetrics-parser/case-103.prom", Rule::TypeLabel),
    (
        "client-python-openmetrics-parser/case-104.prom",
        Rule::SampleNameForType,
    ),
    ("client-python-openmetrics-parser/case-105.prom", Rule::TypeLabel),
    (
        "client-python-openmetrics-parser/case-106.prom",
        Rule::SampleNameForType,
    ),
    ("client-python-openmetrics-parser/case-108.prom", Rule::TypeLabel),
    ("client-python-openmetrics-parser/case-110.prom", Rule::TypeLabel),
    ("client-python-openmetrics-parser/case-111.prom", Rule::TypeLabel),
    ("client-python-openmetrics-parser/case-114.prom", Rule::TypeLabel),
    ("client-python-openmetrics-parser/case-115.prom", Rule::ValueRange),
    ("client-python-openmetrics-parser/case-116.prom", Rule::ValueRange),
    ("client-python-openmetrics-parser/case-117.prom", Rule::ValueRange),
    ("client-python-openmetrics-parser/case-118.prom", Rule::ValueRange),
    ("client-python-openmetrics-parser/case-119.prom", Rule::ValueRange),
    (
        "client-python-openmetrics-parser/case-120.prom",
        Rule::HistogramStructure,
    ),
    ("client-python-openmetrics-parser/case-121.prom", Rule::ValueRange),
    ("client-python-openmetrics-parser/case-122.prom", Rule::ValueRange),
    (
        "client-python-openmetrics-parser/case-123.prom",
        Rule::HistogramStructure,
    ),
    (
        "client-python-openmetrics-parser/case-124.prom",
        Rule::HistogramStructure,
    ),
    (
        "client-python-openmetrics-parser/case-125.prom",
        Rule::HistogramStructure,
    ),
    (
        "client-python-openmetrics-parser/case-126.prom",
        Rule::HistogramStructure,
    ),
    ("client-python-openmetrics-parser/case-127.prom", Rule::ValueRange),
    ("client-python-openmetrics-parser/case-128.prom", Rule::ValueRange),
    ("client-python-openmetrics-parser/case-129.prom", Rule::ValueRange),
    (
        "client-python-openmetrics-parser/case-130.prom",
        Rule::HistogramStructure,
    ),
    ("client-python-openmetrics-parser/case-131.prom", Rule::ValueRange),
    (
        "client-python-openmetrics-parser/case-132.prom",
        Rule::HistogramStructure,
    ),
    (
        "client-python-openmetrics-parser/case-133.prom",
        Rule::HistogramStructure,
    ),
    ("client-python-openmetrics-parser/case-134.prom", Rule::ValueRange),
    ("client-python-openmetrics-parser/case-135.prom", Rule::ValueRange),
    ("client-python-openmetrics-parser/case-136.prom", Rule::ValueRange),
    ("client-python-openmetrics-parser/case-137.prom", Rule::ValueRange),
    ("client-python-openmetrics-parser/case-138.prom", Rule::ValueRange),
    ("client-python-openmetrics-parser/case-139.prom", Rule::ValueRange),
    ("client-python-openmetrics-parser/case-140.prom", Rule::ValueRange),
    ("client-python-openmetrics-parser/case-141.prom", Rule::ValueRange),
    (
        "client-python-openmetrics-parser/case-142.prom",
        Rule::HistogramStructure,
    ),
    (
        "client-python-openmetrics-parser/case-143.prom",
        Rule::HistogramStructure,
    ),
    (
        "client-python-openmetrics-parser/case-144.prom",
        Rule::HistogramStructure,
    ),
    (
        "client-python-openmetrics-parser/case-145.prom",
        Rule::HistogramStructure,
    ),
    (
        "client-python-openmetrics-parser/case-146.prom",
        Rule::HistogramStructure,
    ),
    (
        "client-python-openmetrics-parser/case-147.prom",
        Rule::HistogramStructure,
    ),
    (
        "client-python-openmetrics-parser/case-148.prom",
        Rule::HistogramStructure,
    ),
    (
        "client-python-openmetrics-parser/case-149.prom",
        Rule::HistogramStructure,
    ),
    (
        "client-python-openmetrics-parser/case-150.prom",
        Rule::HistogramStructure,
    ),
    (
        "client-python-openmetrics-parser/case-151.prom",
        Rule::HistogramStructure,
    ),
    ("client-python-openmetrics-parser/case-152.prom", Rule::TypeLabel),
    (
        "client-python-openmetrics-parser/case-153.prom",
        Rule::HistogramStructure,
    ),
    (
        "client-python-openmetrics-parser/case-154.prom",
        Rule::HistogramStructure,
    ),
    (
        "client-python-openmetrics-parser/case-156.prom",
        Rule::HistogramStructure,
    ),
    (
        "client-python-openmetrics-parser/case-158.prom",
        Rule::HistogramStructure,
    ),
    ("client-python-openmetrics-parser/case-159.prom", Rule::Interleaved),
    ("client-python-openmetrics-parser/case-160.prom", Rule::TimestampOrder),
    ("client-python-openmetrics-parser/case-161.prom", Rule::TimestampOrder),
    ("client-python-openmetrics-parser/case-162.prom", Rule::TimestampOrder),
    ("client-python-openmetrics-parser/case-163.prom", Rule::TimestampOrder),
    ("client-python-openmetrics-parser/case-164.prom", Rule::TimestampOrder),
    ("client-python-openmetrics-parser/case-165.prom", Rule::TimestampOrder),
    ("client-python-openmetrics-parser/case-166.prom", Rule::TimestampOrder),
    ("client-python-openmetrics-parser/case-167.prom", Rule::RepeatedMetadata),
    ("client-python-openmetrics-parser/case-169.prom", Rule::ClashingName),
    ("client-python-openmetrics-parser/case-48.prom", Rule::UnitForType),
    ("client-python-openmetrics-parser/case-49.prom", Rule::UnitForType),
    (
        "client-python-openmetrics-parser/case-51.prom",
        Rule::MetadataAfterSamples,
    ),
    (
        "client-python-openmetrics-parser/case-52.prom",
        Rule::MetadataAfterSamples,
    ),
    ("client-python-openmetrics-parser/case-53.prom", Rule::RepeatedMetadata),
    ("client-python-openmetrics-parser/case-54.prom", Rule::RepeatedMetadata),
    ("client-python-openmetrics-parser/case-56.prom", Rule::RepeatedMetadata),
    ("client-python-openmetrics-parser/case-89.prom", Rule::Exemplar),
    ("client-python-openmetrics-parser/case-96.prom", Rule::Exemplar),
    ("client-python-openmetrics-parser/case-97.prom", Rule::Exemplar),
    ("client-python-openmetrics-parser/case-98.prom", Rule::Exemplar),
    ("client-python-openmetrics-parser/case-99.prom", Rule::Exemplar),
    ("prometheus-common-textparser/case-12.prom", Rule::RepeatedMetadata),
    ("prometheus-common-textparser/case-14.prom", Rule::MetadataAfterSamples),
    ("prometheus-common-textparser/case-43.prom", Rule::ValueRange),
    ("prometheus-common-textparser/case-44.prom", Rule::ValueRange),
    ("prometheus-common-textparser/case-45.prom", Rule::ValueRange),
    ("prometheus-common-textparser/case-46.prom", Rule::ValueRange),
];

/// Cases accepted under both validations, and why.
const ACCEPTED: &[(&str, &str)] = &[
    ("prometheus-common-textparser/case-00.prom", "last line without a newline: Prometheus's text parser accepts it and real exporters (redis_exporter 1.27, HikariCP's tracker) end bodies that way"),
    ("prometheus-common-textparser/case-41.prom", "quoted dotted metric name is valid Prometheus 3 UTF-8 syntax; the expected error applies only under legacy name validation"),
    ("prometheus-common-textparser/case-42.prom", "quoted dotted label name is valid Prometheus 3 UTF-8 syntax; the expected error applies only under legacy name validation"),
    ("prometheus-text-parser-nullbyte/case-00.prom", "valid control: NUL inside a label value"),
    ("prometheus-text-parser-nullbyte/case-01.prom", "valid control: NUL inside a label value"),
    ("prometheus-text-parser-nullbyte/case-02.prom", "valid control: NUL inside a label value"),
    ("prometheus-text-parser-nullbyte/case-03.prom", "valid control: NUL inside a label value"),
];

/// The format each folder's reference parser reads.
fn folder_format(folder: &str) -> FormatChoice {
    match folder {
        "prometheus-om-parser" | "client-python-openmetrics-parser" | "openmetrics-spec" => FormatChoice::OpenMetrics,
        "prometheus-text-parser" | "prometheus-text-parser-nullbyte" | "prometheus-common-textparser" => {
            FormatChoice::Text
        }
        other => panic!("unknown folder {other}: say which format its reference parser reads"),
    }
}

#[test]
fn every_invalid_input_is_rejected_unless_listed() {
    let Some(shared) = support::shared_dir("invalid inputs") else {
        return;
    };
    let root = shared.join("fixtures/exposition/invalid");
    let lenient: BTreeMap<&str, Rule> = LENIENT.iter().copied().collect();
    let accepted: BTreeMap<&str, &str> = ACCEPTED.iter().copied().collect();
    let print_table = std::env::var_os("EPICENTER_PRINT_LENIENT").is_some();
    let mut failures = Vec::new();
    let mut counted = (0, 0, 0);
    let mut folders: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    folders.sort();
    for folder in folders {
        let folder_name = folder.file_name().unwrap().to_string_lossy().to_string();
        let format = folder_format(&folder_name);
        let mut files: Vec<_> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        files.sort();
        for file in files {
            let case = format!("{folder_name}/{}", file.file_name().unwrap().to_string_lossy());
            let body = std::fs::read(&file).unwrap();
            let default = parse(
                &body,
                ParseOptions {
                    format,
                    validation: Validation::Prometheus,
                },
            );
            let strict = parse(
                &body,
                ParseOptions {
                    format,
                    validation: Validation::Strict,
                },
            );
            if print_table {
                if let Ok(exposition) = &default {
                    if let Some(warning) = exposition.warnings.first() {
                        println!("    (\"{case}\", Rule::{:?}),", warning.rule);
                    }
                }
            }
            if let Some(why) = accepted.get(case.as_str()) {
                counted.2 += 1;
                if let Err(error) = &default {
                    failures.push(format!("{case}: listed as accepted ({why}) but rejected: {error}"));
                }
                if let Err(error) = &strict {
                    failures.push(format!(
                        "{case}: listed as accepted ({why}) but strict rejects: {error}"
                    ));
                }
            } else if let Some(&rule) = lenient.get(case.as_str()) {
                counted.1 += 1;
                match &default {
                    Ok(exposition) if exposition.warnings.iter().any(|warning| warning.rule == rule) => {}
                    Ok(exposition) => failures.push(format!(
                        "{case}: accepted without a {rule:?} warning: {:?}",
                        exposition.warnings
                    )),
                    Err(error) => failures.push(format!(
                        "{case}: listed as tolerated ({rule:?}: {}) but rejected: {error}",
                        reason(rule)
                    )),
                }
                match &strict {
                    Err(error) if error.rule == rule => {}
                    Err(error) => failures.push(format!(
                        "{case}: strict rejects with {:?} instead of {rule:?}: {error}",
                        error.rule
                    )),
                    Ok(_) => failures.push(format!("{case}: strict accepts a body that breaks {rule:?}")),
                }
            } else {
                counted.0 += 1;
                if let Ok(exposition) = &default {
                    failures.push(format!(
                        "{case}: accepted ({} samples, warnings {:?}) but should be rejected",
                        exposition.sample_count(),
                        exposition.warnings
                    ));
                }
            }
        }
    }
    eprintln!(
        "invalid inputs: {} rejected, {} tolerated by default (rejected by strict), {} accepted with reason",
        counted.0, counted.1, counted.2
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Rows of SOURCES.md whose expected error is empty are valid controls and must parse.
#[test]
fn valid_controls_named_in_sources_are_accepted() {
    let Some(shared) = support::shared_dir("valid controls") else {
        return;
    };
    let root = shared.join("fixtures/exposition");
    let sources = std::fs::read_to_string(root.join("SOURCES.md")).unwrap();
    let controls: Vec<String> = sources
        .lines()
        .filter(|row| {
            row.starts_with("| invalid/") && row.contains("valid control") && row.trim_end().ends_with("| `` |")
        })
        .map(|row| row.split('|').nth(1).unwrap().trim().to_string())
        .collect();
    assert_eq!(
        controls.len(),
        4,
        "SOURCES.md should name 4 valid controls: {controls:?}"
    );
    for control in controls {
        let folder = control.split('/').nth(1).unwrap();
        let body = std::fs::read(root.join(&control)).unwrap();
        let options = ParseOptions {
            format: folder_format(folder),
            validation: Validation::Strict,
        };
        parse(&body, options).unwrap_or_else(|error| panic!("{control}: valid control rejected: {error}"));
    }
}

/// The specification's negative examples are snippets without `# EOF`; with it appended each
/// is still rejected for its own reason (except the timestamp-on-counter example, which the
/// specification calls semantically wrong, not unparseable).
#[test]
fn specification_negative_examples_fail_for_their_own_reason() {
    let Some(shared) = support::shared_dir("spec examples") else {
        return;
    };
    let folder = shared.join("fixtures/exposition/invalid/openmetrics-spec");
    let expectations = [
        ("om-spec-invalid-unit-not-suffix.prom", Some(Rule::UnitNotSuffix)),
        ("om-spec-invalid-interleaved-metrics.prom", Some(Rule::Interleaved)),
        ("om-spec-invalid-interleaved-points.prom", Some(Rule::TimestampOrder)),
        ("om-spec-incorrect-timestamp-on-counter.prom", None),
    ];
    for (file, expected) in expectations {
        let mut body = std::fs::read(folder.join(file)).unwrap();
        body.extend_from_slice(b"# EOF\n");
        let result = parse(
            &body,
            ParseOptions {
                format: FormatChoice::OpenMetrics,
                validation: Validation::Strict,
            },
        );
        match (expected, result) {
            (Some(rule), Err(error)) => assert_eq!(error.rule, rule, "{file}: {error}"),
            (Some(rule), Ok(_)) => panic!("{file}: accepted, expected {rule:?}"),
            (None, result) => assert!(result.is_ok(), "{file}: {:?}", result.err()),
        }
    }
}
