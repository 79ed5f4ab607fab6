//! OpenMetrics parser conformance: every case of the OpenMetrics project's parser test suite
//! (`../shared/conformance/openmetrics/cases`, or the folder in `EPICENTER_OPENMETRICS_CASES`,
//! e.g. the upstream suite with its held-back cases) is accepted when `shouldParse` is true and
//! rejected when false, under strict OpenMetrics 1.0 validation.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

#[path = "support.rs"]
mod support;

use std::path::PathBuf;

use epicenter_collector::exposition::{parse, FormatChoice, ParseOptions, Validation};

#[test]
fn every_conformance_case_is_accepted_or_rejected_as_the_suite_says() {
    let cases_dir = match std::env::var_os("EPICENTER_OPENMETRICS_CASES") {
        Some(dir) => PathBuf::from(dir),
        None => match support::shared_dir("openmetrics conformance") {
            Some(shared) => shared.join("conformance/openmetrics/cases"),
            None => return,
        },
    };
    let mut case_dirs: Vec<PathBuf> = std::fs::read_dir(&cases_dir)
        .unwrap_or_else(|error| panic!("cannot list {}: {error}", cases_dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .collect();
    case_dirs.sort();
    assert!(
        case_dirs.len() >= 100,
        "expected the suite's cases in {}, found {}",
        cases_dir.display(),
        case_dirs.len()
    );

    let options = ParseOptions {
        format: FormatChoice::OpenMetrics,
        validation: Validation::Strict,
    };
    let mut failures = Vec::new();
    let (mut good, mut bad) = (0, 0);
    for case in &case_dirs {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let spec: serde_json::Value = serde_json::from_slice(&std::fs::read(case.join("test.json")).unwrap()).unwrap();
        assert_eq!(spec["type"], "text", "{name}: only text cases are expected");
        let should_parse = spec["shouldParse"]
            .as_bool()
            .unwrap_or_else(|| panic!("{name}: shouldParse missing"));
        let file = spec["file"].as_str().unwrap_or("metrics");
        let body = std::fs::read(case.join(file)).unwrap();
        match (should_parse, parse(&body, options)) {
            (true, Ok(_)) => good += 1,
            (false, Err(_)) => bad += 1,
            (true, Err(error)) => failures.push(format!("{name}: should parse, got error {error}")),
            (false, Ok(exposition)) => failures.push(format!(
                "{name}: should be rejected, parsed {} families",
                exposition.families.len()
            )),
        }
    }
    eprintln!(
        "openmetrics conformance: {good} valid cases accepted, {bad} invalid cases rejected, {} failures",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        case_dirs.len(),
        failures.join("\n")
    );
}
