//! `epicenter-loadgen` as a user meets it: the two workloads in `--help`, and bad options
//! refused up front with exit 2 and a message naming the option, before anything starts.

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
    ] {
        let output = loadgen(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}
