//! `epicenter-loadgen` as a user meets it: the two workloads in `--help`, bad options refused
//! up front with exit 2 and a message naming the option, before anything starts, and `--for`
//! kept even when nothing answers.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::process::{Command, Output};

fn loadgen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_epicenter-loadgen"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn help_names_both_workloads() {
    let output = loadgen(&["--help"]);
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    assert!(help.contains("redis") && help.contains("http"), "{help}");
    let redis = String::from_utf8(loadgen(&["redis", "--help"]).stdout).unwrap();
    for option in [
        "--node",
        "--instances",
        "--rate",
        "--pool-size",
        "--targets-file",
        "--for",
    ] {
        assert!(redis.contains(option), "redis --help lacks {option}:\n{redis}");
    }
}

#[test]
fn bad_options_exit_2_naming_the_option() {
    for (args, expected) in [
        (vec!["redis", "--node", "redis-1-1"], "expected NAME=HOST:PORT"),
        (vec!["redis", "--node", "r=127.0.0.1:99999"], "a port in 1..65535"),
        (
            vec!["redis", "--node", "r=127.0.0.1:7001", "--rate", "3e9"],
            "is not a rate",
        ),
        (
            vec!["redis", "--node", "r=127.0.0.1:7001", "--instances", "0"],
            "--instances must be at least 1",
        ),
        (
            vec!["http", "--target", "web=127.0.0.1:8001", "--path", "work"],
            "must start with '/'",
        ),
        (vec!["http", "--target", "web"], "expected NAME=HOST:PORT"),
        (vec!["redis", "--node", "r=127.0.0.1:0"], "a port in 1..65535"),
        (
            vec!["redis", "--node", "r=127.0.0.1:7001", "--node", "r=127.0.0.1:7002"],
            "given twice",
        ),
        (vec!["redis", "--node", "r=nosuchhost.invalid:7001"], "cannot resolve"),
        (
            vec!["redis", "--node", "r=127.0.0.1:7001", "--acquire-timeout", "0s"],
            "--acquire-timeout must be greater than 0",
        ),
        (
            vec!["redis", "--node", "r=127.0.0.1:7001", "--command-timeout", "0s"],
            "--command-timeout must be greater than 0",
        ),
        (
            vec!["redis", "--node", "r=127.0.0.1:7001", "--max-in-flight=0"],
            "--max-in-flight must be at least 1",
        ),
        (
            vec![
                "redis",
                "--node",
                "r=127.0.0.1:7001",
                "--targets-file",
                "/nonexistent/dir/t.json",
            ],
            "the folder /nonexistent/dir does not exist",
        ),
        (
            vec!["http", "--target", "web=127.0.0.1:8001", "--timeout", "0s"],
            "--timeout must be greater than 0",
        ),
    ] {
        let output = loadgen(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn a_run_ends_when_for_says_even_when_nothing_answers() {
    // Nothing listens on port 1: every connection is refused, over and over.
    let started = std::time::Instant::now();
    let output = loadgen(&["redis", "--node", "r=127.0.0.1:1", "--instances", "2", "--for", "2s"]);
    let took = started.elapsed();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(took < std::time::Duration::from_secs(30), "took {took:?} for --for 2s");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("epicenter-loadgen redis: 2 instances"), "{stdout}");
}
