//! Issue 6's first acceptance line: `promtool check rules rules/*.yml` and `promtool test
//! rules` pass. promtool comes from Debian's prometheus package, which scripts/test installs;
//! without it the test says SKIPPED, except in CI where it fails.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::path::PathBuf;
use std::process::Command;

fn promtool() -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("promtool"))
        .find(|path| path.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "promtool missing in CI: scripts/test installs Debian's prometheus package"
        );
        eprintln!("SKIPPED: promtool not found (apt-get install prometheus)");
    }
    found
}

fn rule_files(dir: &str) -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "yml"))
        .collect();
    files.sort();
    files
}

#[test]
fn promtool_checks_and_unit_tests_the_rules() {
    let Some(promtool) = promtool() else { return };
    let rules = rule_files("rules");
    assert!(rules.len() >= 2, "{rules:?}");
    let check = Command::new(&promtool)
        .arg("check")
        .arg("rules")
        .args(&rules)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let tests = rule_files("rules/tests");
    assert!(tests.len() >= 2, "{tests:?}");
    let test = Command::new(&promtool)
        .arg("test")
        .arg("rules")
        .args(&tests)
        .output()
        .unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&test.stdout),
        String::from_utf8_lossy(&test.stderr)
    );
    assert!(test.status.success(), "{report}");
    assert_eq!(report.matches("SUCCESS").count(), tests.len(), "{report}");
}

/// A rule file promtool rejects fails the check: the test above can fail.
#[test]
fn a_broken_rule_is_caught() {
    let Some(promtool) = promtool() else { return };
    let file = std::env::temp_dir().join(format!("epicenter-broken-rules-{}.yml", std::process::id()));
    std::fs::write(
        &file,
        "groups:\n  - name: broken\n    rules:\n      - alert: Broken\n        expr: sum by (dc (up)\n",
    )
    .unwrap();
    let check = Command::new(&promtool)
        .args(["check", "rules"])
        .arg(&file)
        .output()
        .unwrap();
    std::fs::remove_file(&file).unwrap();
    assert!(!check.status.success());
}
