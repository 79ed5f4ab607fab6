//! Issue 16: `epicenter check metrics --lint` finds what `promtool check metrics` (Prometheus
//! 2.42, Debian's prometheus package, which scripts/test installs) finds, on every real capture
//! in `../shared/fixtures/exposition` (all folders but `invalid/`, which holds parser test
//! cases rather than captures).
//!
//! For each file the two tools' findings are compared as multisets of (metric, message):
//! promtool prints a finding once per occurrence, epicenter once with a count
//! (`LintFinding::count`), expanded here. Where promtool cannot read a file, the test asserts
//! promtool's exact error and epicenter's exact findings, with the reason, in [`REFUSED`]; the
//! one file promtool reads but reads differently is in [`READ_DIFFERENTLY`]. Without the data
//! or promtool the test says SKIPPED, except in CI (`CI` set), where that is a failure.
//!
//! `cargo test --test cli_check_metrics_lint -- --nocapture` prints each file's counts and the
//! totals.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// (metric, message) → how many times the tool prints it.
type Findings = BTreeMap<(String, String), u32>;

const NO_HELP: &str = "no help text";

/// A file promtool refuses: its error (after `error while linting: `), what epicenter finds
/// in it (`None`: epicenter refuses it too), and why the two differ.
struct Refused {
    file: &'static str,
    promtool_error: &'static str,
    epicenter: Option<&'static [(&'static str, &'static str, u32)]>,
    why: &'static str,
}

/// Files promtool 2.42 cannot read, and what epicenter makes of each.
const REFUSED: &[Refused] = &[
    Refused {
        file: "edge_cases/client-python-om-escaping.prom",
        promtool_error: r#"text format parsing error in line 1: invalid escape sequence '\"'"#,
        epicenter: Some(&[]),
        why: "OpenMetrics allows \\\" in HELP; expfmt 0.39 does not",
    },
    Refused {
        file: "edge_cases/client-python-om-timestamps-seconds-nanos.prom",
        promtool_error: r#"text format parsing error in line 2: unknown metric type "unknown""#,
        epicenter: Some(&[]),
        why: "OpenMetrics type `unknown` (text's `untyped`)",
    },
    Refused {
        file: "edge_cases/client-python-om2-native-histogram-exemplars.prom",
        promtool_error: "text format parsing error in line 3: expected '=' after label name, found ':'",
        epicenter: None,
        why: "OpenMetrics 2.0 draft native histograms: neither tool reads them",
    },
    Refused {
        file: "edge_cases/client-python-om2-native-histogram-utf8-stress.prom",
        promtool_error: "text format parsing error in line 1: invalid metric name in comment",
        epicenter: None,
        why: "OpenMetrics 2.0 draft native histograms: neither tool reads them",
    },
    Refused {
        file: "edge_cases/client-python-utf8-quoted-counter.prom",
        promtool_error: "text format parsing error in line 1: invalid metric name in comment",
        epicenter: Some(&[]),
        why: "Prometheus 3 quoted UTF-8 names, after 2.42",
    },
    Refused {
        file: "edge_cases/common-textparse-escaped-quoted-names.prom",
        promtool_error: "text format parsing error in line 2: invalid metric name in comment",
        epicenter: Some(&[(
            "my\"noncompliant\nmetric\\",
            r#"counter metrics should have "_total" suffix"#,
            1,
        )]),
        why: "Prometheus 3 quoted UTF-8 names, after 2.42",
    },
    Refused {
        file: "edge_cases/common-textparse-utf8-labels-and-values.prom",
        promtool_error: "text format parsing error in line 1: invalid metric name in comment",
        epicenter: Some(&[]),
        why: "Prometheus 3 quoted UTF-8 names, after 2.42",
    },
    Refused {
        file: "edge_cases/prometheus-openmetrics-kitchen-sink.prom",
        promtool_error: r"text format parsing error in line 8: invalid escape sequence '\ '",
        epicenter: Some(&[
            ("_metric_starting_with_underscore", NO_HELP, 1),
            ("foo_total", r#"non-histogram metrics should not have "le" label"#, 2),
            ("ggh", NO_HELP, 1),
            ("ggh_count", NO_HELP, 1),
            ("gh", NO_HELP, 1),
            ("hh", NO_HELP, 1),
            ("hhh", NO_HELP, 1),
            ("ii", NO_HELP, 1),
            ("null_byte_metric", NO_HELP, 1),
            ("smr_seconds", NO_HELP, 1),
            ("some:aggregate:rate5m", "metric names should not contain ':'", 1),
            ("some:aggregate:rate5m", NO_HELP, 1),
            ("ss", NO_HELP, 1),
            ("testmetric", NO_HELP, 1),
        ]),
        why: "OpenMetrics (HELP escapes, exemplars, info, stateset, gaugehistogram); epicenter names \
              counter `foo` by its samples, `foo_total`",
    },
    Refused {
        file: "edge_cases/prometheus-openmetrics-utf8-quoted.prom",
        promtool_error: "text format parsing error in line 1: invalid metric name in comment",
        epicenter: Some(&[
            (
                "Heizölrückstoßabdämpfung 10€ metric with \"interesting\" {character\nchoices}",
                NO_HELP,
                1,
            ),
            ("http.status", NO_HELP, 1),
            ("quotedexemplar2_count", NO_HELP, 1),
            ("quotedexemplar_count", NO_HELP, 1),
        ]),
        why: "Prometheus 3 quoted UTF-8 names in OpenMetrics, after 2.42",
    },
    Refused {
        file: "edge_cases/prometheus-promparse-kitchen-sink.prom",
        promtool_error: r#"text format parsing error in line 26: unexpected end of label value "2.0""#,
        epicenter: Some(&[
            ("_metric_starting_with_underscore", NO_HELP, 1),
            ("null_byte_metric", NO_HELP, 1),
            ("some:aggregate:rate5m", "metric names should not contain ':'", 1),
            ("some:aggregate:rate5m", NO_HELP, 1),
            ("some_counter_total", "metric name should not include type 'counter'", 1),
            ("testmetric", NO_HELP, 1),
            ("wind_speed", NO_HELP, 1),
        ]),
        why: "labels without a comma between them, which Prometheus's scraper reads (epicenter warns: label_separator)",
    },
    Refused {
        file: "edge_cases/prometheus-utf8-quoted-names.prom",
        promtool_error: "text format parsing error in line 1: invalid metric name in comment",
        epicenter: Some(&[(
            "Heizölrückstoßabdämpfung 10€ metric with \"interesting\" {character\nchoices}",
            NO_HELP,
            1,
        )]),
        why: "Prometheus 3 quoted UTF-8 names, after 2.42",
    },
    Refused {
        file: "java/client-java-jvm-metrics-docs.prom",
        promtool_error: r#"text format parsing error in line 110: unknown metric type "info""#,
        epicenter: Some(&[("jvm_runtime_info", NO_HELP, 1)]),
        why: "client_java 1.x prints `# TYPE jvm_runtime info` in text; grouped as expfmt groups text, \
              the sample jvm_runtime_info is a family of its own, without HELP",
    },
    Refused {
        file: "java/datadog-resilience4j-micrometer.prom",
        promtool_error: r#"text format parsing error in line 40: second HELP line for metric name "resilience4j_circuitbreaker_calls_seconds""#,
        epicenter: Some(&[("resilience4j_circuitbreaker_calls_seconds_sum", NO_HELP, 1)]),
        why: "a second HELP for one family, which Prometheus's scraper reads (epicenter warns: repeated_metadata)",
    },
    Refused {
        file: "openmetrics/client-golang-random-example-exemplars.prom",
        promtool_error: r##"text format parsing error in line 19: expected integer as timestamp, got "#""##,
        epicenter: Some(&[(
            "rpc_durations_histogram_seconds",
            "metric name should not include type 'histogram'",
            1,
        )]),
        why: "OpenMetrics exemplars",
    },
    Refused {
        file: "openmetrics/client-java-exemplars-tail-sampling.prom",
        promtool_error: r##"text format parsing error in line 5: expected integer as timestamp, got "#""##,
        epicenter: Some(&[]),
        why: "OpenMetrics exemplars",
    },
    Refused {
        file: "openmetrics/client-java-it-debug-openmetrics.prom",
        promtool_error: r#"text format parsing error in line 1: unknown metric type "info""#,
        epicenter: Some(&[]),
        why: "OpenMetrics type info",
    },
    Refused {
        file: "openmetrics/client-python-om-histogram-exemplars-escaped.prom",
        promtool_error: r##"text format parsing error in line 3: expected integer as timestamp, got "#""##,
        epicenter: Some(&[]),
        why: "OpenMetrics exemplars",
    },
    Refused {
        file: "openmetrics/client-python-om-info.prom",
        promtool_error: r#"text format parsing error in line 2: unknown metric type "info""#,
        epicenter: Some(&[]),
        why: "OpenMetrics type info",
    },
    Refused {
        file: "openmetrics/client-python-om-stateset.prom",
        promtool_error: r#"text format parsing error in line 2: unknown metric type "stateset""#,
        epicenter: Some(&[]),
        why: "OpenMetrics type stateset",
    },
    Refused {
        file: "openmetrics/om-spec-histogram-exemplars.prom",
        promtool_error: r##"text format parsing error in line 3: expected integer as timestamp, got "#""##,
        epicenter: Some(&[("foo", NO_HELP, 1)]),
        why: "OpenMetrics exemplars",
    },
    Refused {
        file: "openmetrics/om-spec-info-entity.prom",
        promtool_error: r#"text format parsing error in line 1: unknown metric type "stateset""#,
        epicenter: Some(&[("foo", NO_HELP, 1)]),
        why: "OpenMetrics type stateset (linted as a gauge)",
    },
    Refused {
        file: "openmetrics/om-spec-stateset.prom",
        promtool_error: r#"text format parsing error in line 1: unknown metric type "stateset""#,
        epicenter: Some(&[("foo", NO_HELP, 1)]),
        why: "OpenMetrics type stateset (linted as a gauge)",
    },
];

/// A file promtool reads, but not as what it is: (file, promtool's findings, epicenter's, why).
type ReadDifferently = (
    &'static str,
    &'static [(&'static str, &'static str, u32)],
    &'static [(&'static str, &'static str, u32)],
    &'static str,
);

/// promtool reads an OpenMetrics body as text: counter `process_cpu_seconds` (sample
/// `process_cpu_seconds_total`) and the summary's `_created` sample become untyped families
/// without HELP. epicenter reads OpenMetrics, where both have their family's HELP.
const READ_DIFFERENTLY: &[ReadDifferently] = &[(
    "openmetrics/om-spec-complete-exposition.prom",
    &[
        ("acme_http_router_request_seconds_created", NO_HELP, 1),
        ("process_cpu_seconds_total", NO_HELP, 1),
    ],
    &[],
    "promtool reads OpenMetrics as text format 0.0.4",
)];

/// promtool's error for a body whose last line has no newline.
const NO_FINAL_NEWLINE: &str = "unexpected end of input stream";

fn shared_fixtures() -> Option<PathBuf> {
    let shared = std::env::var_os("EPICENTER_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared")));
    let dir = shared.join("fixtures/exposition");
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(std::env::var_os("CI").is_none(), "{} missing in CI", dir.display());
    eprintln!("SKIPPED for lack of test data: {} not found", dir.display());
    None
}

/// promtool 2.42 on PATH; anything else fails in CI and skips elsewhere.
fn promtool() -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("promtool"))
        .find(|path| path.is_file());
    let in_ci = std::env::var_os("CI").is_some();
    let Some(promtool) = found else {
        assert!(
            !in_ci,
            "promtool missing in CI: scripts/test installs Debian's prometheus package"
        );
        eprintln!("SKIPPED: promtool not found (apt-get install prometheus)");
        return None;
    };
    let version = Command::new(&promtool).arg("--version").output().unwrap();
    let version = String::from_utf8_lossy(&version.stdout).into_owned();
    if !version.starts_with("promtool, version 2.42.") {
        assert!(
            !in_ci,
            "the comparison is with promtool 2.42 (Debian 12), found: {version}"
        );
        eprintln!("SKIPPED: the comparison is with promtool 2.42, found: {version}");
        return None;
    }
    Some(promtool)
}

/// Every capture under `dir` (recursively), `invalid/` left out, as paths relative to `dir`.
fn captures(dir: &Path, relative: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir.join(relative)).unwrap() {
        let entry = entry.unwrap();
        let path = relative.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            if path != Path::new("invalid") {
                captures(dir, &path, out);
            }
        } else if path.extension().is_some_and(|extension| extension == "prom") {
            out.push(path.to_str().unwrap().to_string());
        }
    }
}

/// `promtool check metrics` on `body`: its findings, or its error.
fn promtool_lint(promtool: &Path, body: &[u8]) -> Result<Findings, String> {
    use std::io::Write;
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(body).unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    match output.status.code() {
        Some(0 | 3) => {}
        _ => {
            let error = stderr.trim_end();
            return Err(error.strip_prefix("error while linting: ").unwrap_or(error).to_string());
        }
    }
    let mut findings = Findings::new();
    for line in stderr.lines() {
        let (metric, message) = line.split_once(' ').unwrap();
        *findings.entry((metric.to_string(), message.to_string())).or_default() += 1;
    }
    assert_eq!(output.status.code() == Some(3), !findings.is_empty(), "{stderr}");
    Ok(findings)
}

/// `epicenter check metrics --lint --json FILE`: its findings (counts expanded), or its error.
fn epicenter_lint(file: &Path) -> Result<Findings, String> {
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["check", "metrics", "--lint", "--json"])
        .arg(file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if output.status.code() == Some(1) {
        return Err(stderr);
    }
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut findings = Findings::new();
    for finding in document["lint"].as_array().unwrap() {
        let key = (
            finding["metric"].as_str().unwrap().to_string(),
            finding["message"].as_str().unwrap().to_string(),
        );
        let count = finding["count"].as_u64().unwrap() as u32;
        assert!(count >= 1 && !findings.contains_key(&key), "{finding}");
        findings.insert(key, count);
    }
    let expected_status = if findings.is_empty() { 0 } else { 4 };
    assert_eq!(output.status.code(), Some(expected_status), "{stderr}");
    Ok(findings)
}

fn findings_of(list: &[(&str, &str, u32)]) -> Findings {
    list.iter()
        .map(|&(metric, message, count)| ((metric.to_string(), message.to_string()), count))
        .collect()
}

fn lines(findings: &Findings) -> u32 {
    findings.values().sum()
}

#[test]
fn lint_finds_what_promtool_finds_on_the_real_captures() {
    let Some(dir) = shared_fixtures() else { return };
    let Some(promtool) = promtool() else { return };
    let mut files = Vec::new();
    captures(&dir, Path::new(""), &mut files);
    files.sort();
    assert!(files.len() >= 60, "{} captures only in {}", files.len(), dir.display());

    // (files, promtool lines, epicenter lines) where promtool reads the file as it is.
    let mut read_as_is = (0, 0, 0);
    let mut with_newline = (0, 0, 0);
    let mut refused = 0;
    let mut refused_epicenter_lines = 0;
    let mut read_differently = 0;
    for file in &files {
        let path = dir.join(file);
        let body = std::fs::read(&path).unwrap();
        let epicenter = epicenter_lint(&path);
        let promtool_result = promtool_lint(&promtool, &body);
        if let Some((_, promtool_expected, epicenter_expected, why)) =
            READ_DIFFERENTLY.iter().find(|(name, ..)| name == file)
        {
            // promtool reads it, as something else: both sides pinned.
            assert_eq!(
                promtool_result.as_ref(),
                Ok(&findings_of(promtool_expected)),
                "{file}: promtool"
            );
            assert_eq!(
                epicenter.as_ref(),
                Ok(&findings_of(epicenter_expected)),
                "{file}: epicenter ({why})"
            );
            eprintln!(
                "{file}: promtool {} lines, epicenter {}: {why}",
                promtool_expected.len(),
                epicenter_expected.len()
            );
            read_differently += 1;
            continue;
        }
        match promtool_result {
            Ok(promtool_findings) => {
                let epicenter = epicenter.unwrap_or_else(|error| panic!("{file}: epicenter refuses it: {error}"));
                assert_eq!(
                    epicenter, promtool_findings,
                    "{file}: epicenter (left) and promtool (right) differ"
                );
                eprintln!("{file}: {} lines from both", lines(&epicenter));
                read_as_is.0 += 1;
                read_as_is.1 += lines(&promtool_findings);
                read_as_is.2 += lines(&epicenter);
            }
            Err(error) if error.ends_with(NO_FINAL_NEWLINE) => {
                // expfmt refuses a last line without '\n' (Prometheus's scraper reads it, so
                // does epicenter); with the newline added, promtool must find the same.
                assert!(!body.ends_with(b"\n"), "{file}: {error}");
                let mut completed = body.clone();
                completed.push(b'\n');
                let promtool_findings = promtool_lint(&promtool, &completed)
                    .unwrap_or_else(|error| panic!("{file} with a final newline: promtool: {error}"));
                let epicenter = epicenter.unwrap_or_else(|error| panic!("{file}: epicenter refuses it: {error}"));
                assert_eq!(
                    epicenter, promtool_findings,
                    "{file}: epicenter (left) and promtool on the file with a final newline (right) differ"
                );
                eprintln!(
                    "{file}: promtool refuses it ({error}); with a final newline {} lines from both",
                    lines(&epicenter)
                );
                with_newline.0 += 1;
                with_newline.1 += lines(&promtool_findings);
                with_newline.2 += lines(&epicenter);
            }
            Err(error) => {
                let expected = REFUSED.iter().find(|refused| refused.file == file).unwrap_or_else(|| {
                    panic!("{file}: promtool refuses it ({error}) and it is not in REFUSED; epicenter: {epicenter:?}")
                });
                assert_eq!(error, expected.promtool_error, "{file}: promtool's error");
                match (expected.epicenter, &epicenter) {
                    (Some(findings), Ok(found)) => {
                        assert_eq!(found, &findings_of(findings), "{file}: epicenter ({})", expected.why);
                        refused_epicenter_lines += lines(found);
                    }
                    (None, Err(_)) => {}
                    (_, found) => panic!("{file}: epicenter: {found:?}, expected {:?}", expected.epicenter),
                }
                eprintln!(
                    "{file}: promtool refuses it ({error}); epicenter: {} ({})",
                    epicenter
                        .as_ref()
                        .map_or("refuses it too".to_string(), |found| format!("{} lines", lines(found))),
                    expected.why
                );
                refused += 1;
            }
        }
    }
    for refused in REFUSED {
        assert!(
            files.iter().any(|file| file == refused.file),
            "{} is gone",
            refused.file
        );
    }
    eprintln!(
        "{} captures. promtool reads {} as they are: promtool {} lint lines, epicenter {} (the same, file by file); \
         {} more once a final newline is added: {} and {}; {} read differently (OpenMetrics as text); \
         {} refused by promtool, where epicenter reports {} lines",
        files.len(),
        read_as_is.0,
        read_as_is.1,
        read_as_is.2,
        with_newline.0,
        with_newline.1,
        with_newline.2,
        read_differently,
        refused,
        refused_epicenter_lines,
    );
}
