//! `epicenter check metrics` as a person runs it: exit codes, messages, `--json`.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn epicenter(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run epicenter");
    let mut input = child.stdin.take().unwrap();
    if let Some(bytes) = stdin {
        // The command may exit before reading (bad arguments): a broken pipe is not a failure.
        let _ = input.write_all(bytes);
    }
    drop(input);
    child.wait_with_output().unwrap()
}

/// A file in a directory of its own, removed when the guard drops.
struct TempFile {
    dir: std::path::PathBuf,
    path: std::path::PathBuf,
}

impl TempFile {
    fn new(name: &str, contents: &[u8]) -> TempFile {
        let dir = std::env::temp_dir().join(format!("epicenter-cli-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, contents).unwrap();
        TempFile { dir, path }
    }

    fn arg(&self) -> &str {
        self.path.to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const VALID_OPENMETRICS: &str = "\
# TYPE hikaricp_connections_pending gauge
# HELP hikaricp_connections_pending Pending threads
hikaricp_connections_pending{pool=\"HikariPool-1\"} 3
# TYPE lettuce_command_completion_seconds histogram
# UNIT lettuce_command_completion_seconds seconds
lettuce_command_completion_seconds_bucket{upstream=\"redis-7:6379\",le=\"0.001\"} 5 # {trace_id=\"4bf92f\"} 0.0004 1700000000.25
lettuce_command_completion_seconds_bucket{upstream=\"redis-7:6379\",le=\"+Inf\"} 9
lettuce_command_completion_seconds_count{upstream=\"redis-7:6379\"} 9
lettuce_command_completion_seconds_sum{upstream=\"redis-7:6379\"} 0.5
# TYPE erlang_vm_process_message_queue_len gauge
erlang_vm_process_message_queue_len{registered_name=\"voice_state_sup\"} NaN
erlang_vm_process_message_queue_len{registered_name=\"session_sup\"} +Inf
# EOF
";

#[test]
fn a_valid_body_exits_zero_and_says_what_it_read() {
    let file = TempFile::new("valid.om", VALID_OPENMETRICS.as_bytes());
    let output = epicenter(&["check", "metrics", file.arg()], None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("ok: 3 families, 7 samples (openmetrics)"), "{stderr}");
}

#[test]
fn an_invalid_body_exits_one_with_line_and_column() {
    let body = b"# TYPE a counter\na_total{foo=\"b\\qr\"} 1\n";
    let file = TempFile::new("invalid.prom", body);
    let output = epicenter(&["check", "metrics", file.arg()], None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr.contains(&format!(
            "error: {}:2:15: invalid label value escape '\\q'",
            file.path.display()
        )),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
}

#[test]
fn standard_input_and_dash_are_read() {
    for args in [&["check", "metrics"][..], &["check", "metrics", "-"][..]] {
        let output = epicenter(args, Some(b"up 1\n"));
        assert_eq!(output.status.code(), Some(0));
        assert!(String::from_utf8_lossy(&output.stderr).contains("<stdin>: ok: 1 family, 1 sample (text)"));
    }
}

#[test]
fn strict_turns_tolerated_violations_into_errors() {
    let body = b"# TYPE a histogram\na_bucket{le=\"2\"} 1\na_bucket{le=\"1\"} 1\na_bucket{le=\"+Inf\"} 1\n# EOF\n";
    let default = epicenter(&["check", "metrics"], Some(body));
    let stderr = String::from_utf8_lossy(&default.stderr);
    assert_eq!(default.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: <stdin>:3:1: buckets of 'a' out of order"),
        "{stderr}"
    );
    assert!(stderr.contains("--strict rejects the body"), "{stderr}");
    let strict = epicenter(&["check", "metrics", "--strict"], Some(body));
    assert_eq!(strict.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&strict.stderr).contains("error: <stdin>:3:1: buckets of 'a' out of order"));
}

/// Issue 16: the same series twice in one body was accepted silently, even under --strict.
/// Now a warning naming both lines (a scrape keeps the first), an error under --strict; the
/// same name with other labels, or the same labels in another order, is judged by label set.
#[test]
fn the_same_series_twice_is_a_warning_and_strict_rejects_it() {
    let body = b"a_total 1\nb{x=\"1\",y=\"2\"} 2\nb{x=\"2\",y=\"2\"} 3\nb{y=\"2\",x=\"1\"} 4\n";
    let default = epicenter(&["check", "metrics"], Some(body));
    let stderr = String::from_utf8_lossy(&default.stderr);
    assert_eq!(default.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: <stdin>:4:1: series 'b' repeats line 2 at the same timestamp"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("warning:").count(), 1, "{stderr}");
    let strict = epicenter(&["check", "metrics", "--strict"], Some(body));
    assert_eq!(strict.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&strict.stderr).contains("error: <stdin>:4:1: series 'b' repeats line 2"));
    // Other timestamps are other samples.
    let timestamped = epicenter(&["check", "metrics", "--strict"], Some(b"a 1 1000\na 2 2000\n"));
    assert_eq!(
        timestamped.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&timestamped.stderr)
    );
}

#[test]
fn explicit_format_is_honoured() {
    let output = epicenter(&["check", "metrics", "--format", "openmetrics"], Some(b"up 1\n"));
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("does not end with '# EOF'"));
    let output = epicenter(&["check", "metrics", "--format", "text"], Some(b"up 1 1.5\n"));
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("integer milliseconds"));
}

#[test]
fn unreadable_file_exits_three_and_bad_arguments_two() {
    let output = epicenter(&["check", "metrics", "/nonexistent/epicenter/body"], None);
    assert_eq!(output.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot read /nonexistent/epicenter/body"));
    let output = epicenter(&["check", "metrics", "--format", "bogus"], Some(b"up 1\n"));
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn an_empty_body_is_accepted_with_a_warning() {
    let output = epicenter(&["check", "metrics"], Some(b""));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0));
    assert!(stderr.contains("body is empty"), "{stderr}");
}

#[test]
fn similar_label_sets_are_distinct_metrics() {
    // Label values whose hashes are close must not be taken for the same metric.
    let body = "# TYPE c counter\nc_total{instance=\"10.0.1.19:9100\"} 1 200\nc_total{instance=\"other\"} 1\nc_total{instance=\"10.0.1.94:9100\"} 1 100\n# EOF\n";
    let output = epicenter(&["check", "metrics", "--strict"], Some(body.as_bytes()));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
}

#[test]
fn many_warnings_are_counted_and_summarised() {
    let mut body = String::from("# TYPE c counter\n");
    for index in 0..1500 {
        body.push_str(&format!("c_total{{i=\"{index}\"}} -1\n"));
    }
    body.push_str("# EOF\n");
    let output = epicenter(&["check", "metrics", "--json"], Some(body.as_bytes()));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0));
    assert!(
        stderr.contains("1480 more warnings not shown; --json lists the first 1000"),
        "{stderr}"
    );
    assert!(
        stderr.contains("ok: 1 family, 1500 samples (openmetrics, 1500 warnings;"),
        "{stderr}"
    );
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(document["warnings"].as_array().unwrap().len(), 1000);
    assert_eq!(document["warnings_dropped"], 500);
    assert_eq!(document["warnings"][0]["rule"], "value_range");
    assert_eq!(document["warnings"][0]["line"], 2);
}

#[test]
fn clear_errors_for_common_mistakes() {
    let cases: &[(&[u8], &str)] = &[
        (b"a 1e400\n", "1:3: value '1e400' is out of range for a 64-bit float"),
        (b"\xef\xbb\xbfa 1\n", "1:1: body starts with a UTF-8 byte-order mark"),
        (b"a 1 # {t=\"x\"} 2\nb{c=\"d\\q\"} 1\n", "1:5: exemplar (' # {"),
        (b"a 1\n", ""),
    ];
    for (body, expected) in cases {
        let output = epicenter(&["check", "metrics", "--format", "text"], Some(body));
        let stderr = String::from_utf8_lossy(&output.stderr);
        if expected.is_empty() {
            assert_eq!(output.status.code(), Some(0), "{stderr}");
        } else {
            assert_eq!(output.status.code(), Some(1), "{stderr}");
            assert!(stderr.contains(expected), "expected {expected:?} in {stderr}");
        }
    }
    let output = epicenter(&["check", "metrics", "--format", "openmetrics"], Some(b"up 1\n"));
    assert!(String::from_utf8_lossy(&output.stderr).contains("<stdin>:2:1: OpenMetrics body does not end with '# EOF'"));
}

#[test]
fn json_output_carries_families_samples_and_exemplars() {
    let output = epicenter(&["check", "metrics", "--json"], Some(VALID_OPENMETRICS.as_bytes()));
    assert_eq!(output.status.code(), Some(0));
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).expect("stdout is JSON");
    assert_eq!(document["format"], "openmetrics");
    let families = document["families"].as_array().unwrap();
    assert_eq!(families.len(), 3);

    assert_eq!(families[0]["name"], "hikaricp_connections_pending");
    assert_eq!(families[0]["type"], "gauge");
    assert_eq!(families[0]["help"], "Pending threads");
    assert_eq!(families[0]["samples"][0]["labels"]["pool"], "HikariPool-1");
    assert_eq!(families[0]["samples"][0]["value"], 3.0);

    let histogram = &families[1];
    assert_eq!(histogram["type"], "histogram");
    assert_eq!(histogram["unit"], "seconds");
    let samples = histogram["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 4);
    assert_eq!(samples[0]["name"], "lettuce_command_completion_seconds_bucket");
    assert_eq!(samples[0]["labels"]["le"], "0.001");
    assert_eq!(samples[0]["labels"]["upstream"], "redis-7:6379");
    assert_eq!(samples[0]["exemplar"]["labels"]["trace_id"], "4bf92f");
    assert_eq!(samples[0]["exemplar"]["value"], 0.0004);
    assert_eq!(samples[0]["exemplar"]["timestamp"], 1700000000.25);
    assert_eq!(samples[3]["value"], 0.5);
    assert!(samples[1]["exemplar"].is_null());

    let mailbox = families[2]["samples"].as_array().unwrap();
    assert_eq!(mailbox[0]["value"], "NaN");
    assert_eq!(mailbox[1]["value"], "+Inf");
    assert_eq!(document["warnings"].as_array().unwrap().len(), 0);
}

#[test]
fn help_teaches_the_exit_codes() {
    let output = epicenter(&["check", "metrics", "--help"], None);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0));
    for needle in [
        "Exit status",
        "--strict",
        "--json",
        "--format",
        "openmetrics",
        "--lint",
        "epicenter check metrics --lint body.txt",
        "4 accepted with lint findings",
    ] {
        assert!(stdout.contains(needle), "--help lacks {needle}:\n{stdout}");
    }
}

#[test]
fn the_readme_examples_behave_as_documented() {
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/examples");
    let good = format!("{examples}/backend-jvm.prom");
    let output = epicenter(&["check", "metrics", &good], None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("ok: 10 families, 13 samples (text)"), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    let strict = epicenter(&["check", "metrics", "--strict", &good], None);
    assert_eq!(strict.status.code(), Some(0));

    let broken = format!("{examples}/broken.prom");
    let output = epicenter(&["check", "metrics", &broken], None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr.contains("broken.prom:3:57: invalid label value escape '\\8'"),
        "{stderr}"
    );
}

/// A body with promlint findings: a counter without `_total`, a gauge in milliseconds, and a
/// camelCase label on two series (promtool prints that one twice).
const LINT_BODY: &str = "\
# HELP jobs_done Jobs done.
# TYPE jobs_done counter
jobs_done 3
# HELP queue_wait_milliseconds Wait.
# TYPE queue_wait_milliseconds gauge
queue_wait_milliseconds{poolName=\"a\"} 1
queue_wait_milliseconds{poolName=\"b\"} 2
";

#[test]
fn lint_prints_promtool_findings_one_a_line_and_exits_four() {
    let file = TempFile::new("lint.prom", LINT_BODY.as_bytes());
    let output = epicenter(&["check", "metrics", "--lint", file.arg()], None);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(4), "{stderr}");
    let source = file.arg();
    assert_eq!(
        stdout,
        format!(
            "{source}:1: jobs_done: counter metrics should have \"_total\" suffix\n\
             {source}:6: queue_wait_milliseconds: label names should be written in 'snake_case' not 'camelCase' (2 times)\n\
             {source}:4: queue_wait_milliseconds: use base unit \"seconds\" instead of \"milliseconds\"\n"
        )
    );
    assert!(
        stderr.contains("ok: 2 families, 3 samples (text); lint: 3 findings (4 lines in promtool's output)"),
        "{stderr}"
    );
    // Without --lint the same body is simply accepted.
    let output = epicenter(&["check", "metrics", file.arg()], None);
    assert_eq!(output.status.code(), Some(0));
    assert!(output.stdout.is_empty());
}

#[test]
fn lint_on_a_clean_body_exits_zero_and_a_broken_body_still_exits_one() {
    let clean = "# HELP jobs_done_total Jobs done.\n# TYPE jobs_done_total counter\njobs_done_total 3\n";
    let output = epicenter(&["check", "metrics", "--lint", "-"], Some(clean.as_bytes()));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(output.stdout.is_empty());
    assert!(stderr.contains("; lint: 0 findings"), "{stderr}");

    let output = epicenter(&["check", "metrics", "--lint", "-"], Some(b"a{b=\"1\" 1\n"));
    assert_eq!(output.status.code(), Some(1));
}

#[test]
fn lint_json_is_a_last_key_with_rule_line_and_count() {
    let file = TempFile::new("lint-json.prom", LINT_BODY.as_bytes());
    let output = epicenter(&["check", "metrics", "--lint", "--json", file.arg()], None);
    assert_eq!(output.status.code(), Some(4));
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        document["lint"],
        serde_json::json!([
            {"metric": "jobs_done", "rule": "counter_without_total",
             "message": "counter metrics should have \"_total\" suffix", "line": 1, "count": 1},
            {"metric": "queue_wait_milliseconds", "rule": "camel_case_label",
             "message": "label names should be written in 'snake_case' not 'camelCase'", "line": 6, "count": 2},
            {"metric": "queue_wait_milliseconds", "rule": "non_base_unit",
             "message": "use base unit \"seconds\" instead of \"milliseconds\"", "line": 4, "count": 1},
        ])
    );
    assert_eq!(document["families"].as_array().unwrap().len(), 2);
    // Without --lint the document has no "lint" key.
    let output = epicenter(&["check", "metrics", "--json", file.arg()], None);
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(document.get("lint").is_none(), "{document}");
}

#[test]
fn lint_names_an_openmetrics_counter_by_its_total_sample() {
    // promtool 2.42 reads this as text: an untyped `build_seconds_total` without help.
    let body = "# TYPE build_seconds counter\n# HELP build_seconds Build time.\nbuild_seconds_total 4\n\
                # TYPE queue_ms gauge\nqueue_ms 1\n# EOF\n";
    let output = epicenter(&["check", "metrics", "--lint", "-"], Some(body.as_bytes()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(4));
    assert_eq!(
        stdout,
        "<stdin>:4: queue_ms: metric names should not contain abbreviated units\n<stdin>:4: queue_ms: no help text\n"
    );
}
