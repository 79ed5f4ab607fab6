//! `epicenter --help` as a newcomer reads it: every subcommand listed, and the workload
//! generator's old subcommand pointing to its new home (`epicenter-loadgen`, real/loadgen).

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::process::Command;

#[test]
fn help_lists_the_product_subcommands_only() {
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    for subcommand in ["check", "run", "detect", "demo", "fleet", "eval", "replay", "sql"] {
        assert!(
            help.lines().any(|line| line.trim_start().starts_with(subcommand)),
            "{subcommand} missing:\n{help}"
        );
    }
    assert!(!help.contains("loadgen"), "{help}");
}

#[test]
fn the_old_loadgen_subcommand_points_to_its_new_home() {
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["loadgen", "redis", "--node", "redis-1-1=127.0.0.1:7001"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("epicenter-loadgen redis --node redis-1-1=127.0.0.1:7001"),
        "{stderr}"
    );
    assert!(
        stderr.contains("cargo build --release -p epicenter-loadgen"),
        "{stderr}"
    );
}
