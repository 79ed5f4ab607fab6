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
        input.write_all(bytes).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn temp_file(name: &str, contents: &[u8]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("epicenter-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
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
    let path = temp_file("valid.om", VALID_OPENMETRICS.as_bytes());
    let output = epicenter(&["check", "metrics", path.to_str().unwrap()], None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("ok: 3 families, 7 samples (openmetrics)"), "{stderr}");
}

#[test]
fn an_invalid_body_exits_one_with_line_and_column() {
    let body = b"# TYPE a counter\na_total{foo=\"b\\qr\"} 1\n";
    let path = temp_file("invalid.prom", body);
    let output = epicenter(&["check", "metrics", path.to_str().unwrap()], None);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr.contains(&format!(
            "error: {}:2:15: invalid label value escape '\\q'",
            path.display()
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
        assert!(String::from_utf8_lossy(&output.stderr).contains("<stdin>: ok: 1 families, 1 samples (text)"));
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
fn unreadable_file_exits_two() {
    let output = epicenter(&["check", "metrics", "/nonexistent/epicenter/body"], None);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot read /nonexistent/epicenter/body"));
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
    for needle in ["Exit status", "--strict", "--json", "--format", "openmetrics"] {
        assert!(stdout.contains(needle), "--help lacks {needle}:\n{stdout}");
    }
}
