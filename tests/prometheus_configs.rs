//! Prometheus configuration files written by others are read unchanged (issue 16).
//!
//! * Debian's own files, installed by the `prometheus` package (scripts/test installs it):
//!   `/etc/prometheus/prometheus.yml` and `/usr/share/doc/prometheus/examples/prometheus.yml`.
//!   `check config` accepts each and names the server-only sections it does not use.
//! * With `EPICENTER_PROMETHEUS_REPO` set to a checkout of prometheus/prometheus (v2.42.0, the
//!   version Debian 12 ships, commit 225c61122d88b01d1f0eaaee0e05b6f3e0567ac0), also its
//!   `documentation/examples/*.yml` and `config/testdata/*.good.yml`: each is accepted, or
//!   refused only for settings epicenter names as not supported yet (never "unknown field"
//!   for a Prometheus key, and every such key in one run); and its scrape-side `*.bad.yml`
//!   files are refused. The repository is not kept in this tree (fetched material is not
//!   committed here) and CI has no network to fetch it, so CI runs the Debian part only.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::path::{Path, PathBuf};
use std::process::Command;

/// `(exit code, stderr)` of `epicenter check config --config PATH`.
fn check(path: &Path) -> (Option<i32>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["check", "config", "--config"])
        .arg(path)
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

#[test]
fn debians_prometheus_files_are_read_unchanged() {
    let shipped = Path::new("/etc/prometheus/prometheus.yml");
    if !shipped.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs Debian's prometheus package (scripts/test installs it)"
        );
        eprintln!("SKIPPED: /etc/prometheus/prometheus.yml missing (apt-get install prometheus)");
        return;
    }
    let example = Path::new("/usr/share/doc/prometheus/examples/prometheus.yml");
    for path in [shipped, example].into_iter().filter(|path| path.exists()) {
        let text = std::fs::read_to_string(path).unwrap();
        let (code, stderr) = check(path);
        assert_eq!(code, Some(0), "{}: {stderr}", path.display());
        // Each server-only section the file sets is named once, with what to use instead.
        let expected: Vec<(&str, &str)> = [
            (
                "\nalerting:",
                "alerting: a Prometheus server setting, not used by epicenter",
            ),
            (
                "evaluation_interval:",
                "global.evaluation_interval: a Prometheus server setting",
            ),
        ]
        .into_iter()
        .filter(|(key, _)| text.contains(key))
        .collect();
        assert!(
            !expected.is_empty(),
            "{}: no server-only section?\n{text}",
            path.display()
        );
        for (_, warning) in expected {
            assert_eq!(
                stderr.matches(warning).count(),
                1,
                "{}: {warning}\n{stderr}",
                path.display()
            );
        }
        // The jobs are the file's: one line per job_name.
        let jobs = text
            .lines()
            .filter(|line| line.trim_start().starts_with("- job_name:"))
            .count();
        assert!(jobs > 0);
        assert!(
            stderr.contains(&format!("ok: {jobs} job")),
            "{}: {jobs} jobs expected\n{stderr}",
            path.display()
        );
    }
}

/// The upstream corpus, when a checkout is given (see the module documentation).
#[test]
fn prometheus_s_own_examples_are_accepted_or_refused_only_for_what_is_not_supported() {
    let Some(repo) = std::env::var_os("EPICENTER_PROMETHEUS_REPO").map(PathBuf::from) else {
        eprintln!("SKIPPED: set EPICENTER_PROMETHEUS_REPO to a prometheus/prometheus v2.42.0 checkout");
        return;
    };
    let listed = |dir: &str, suffix: &str| -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(repo.join(dir))
            .unwrap_or_else(|error| panic!("{}: {error}", repo.join(dir).display()))
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.to_string_lossy().ends_with(suffix))
            .collect();
        files.sort();
        files
    };
    // Not Prometheus server files: a Kubernetes manifest and a web (TLS) configuration.
    let not_configs = ["rbac-setup.yml", "web-config.yml"];
    let (mut accepted, mut refused) = (Vec::new(), Vec::new());
    for path in listed("documentation/examples", ".yml")
        .into_iter()
        .chain(listed("config/testdata", ".good.yml"))
    {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if not_configs.contains(&name.as_str()) {
            continue;
        }
        let (code, stderr) = check(&path);
        if code == Some(0) {
            accepted.push(name);
            continue;
        }
        for line in stderr.lines().filter(|line| line.starts_with("error:")) {
            assert!(
                line.contains("does not support yet"),
                "{name}: refused for something other than an unsupported setting:\n{line}"
            );
        }
        refused.push(name);
    }
    eprintln!("accepted unchanged: {accepted:?}\nrefused for unsupported settings: {refused:?}");
    for name in [
        "prometheus.yml",
        "prometheus-agent.yml",
        "global_timeout.good.yml",
        "rules_abs_path.good.yml",
    ] {
        assert!(accepted.contains(&name.to_string()), "{name}: {accepted:?}");
    }
    // Scrape-side mistakes: refused, naming the key.
    let bad = [
        ("dropequal.bad.yml", "relabel_configs[0].target_label"),
        ("dropequal1.bad.yml", "relabel_configs[0].regex"),
        ("empty_scrape_config.bad.yml", "scrape_configs[0]"),
        ("empty_static_config.bad.yml", "static_configs[0]"),
        ("jobname.bad.yml", "scrape_configs[0].job_name"),
        ("jobname_dup.bad.yml", "job_name"),
        ("keepequal.bad.yml", "relabel_configs[0].target_label"),
        ("labeldrop.bad.yml", "relabel_configs[0].source_labels"),
        ("labeldrop2.bad.yml", "relabel_configs[0].modulus"),
        ("labeldrop3.bad.yml", "relabel_configs[0].separator"),
        ("labelkeep2.bad.yml", "relabel_configs[0].modulus"),
        ("labelmap.bad.yml", "relabel_configs[0].replacement"),
        ("labelname.bad.yml", "global.external_labels"),
        ("lowercase2.bad.yml", "relabel_configs[0].target_label"),
        ("lowercase3.bad.yml", "relabel_configs[0].replacement"),
        ("modulus_missing.bad.yml", "relabel_configs[0]"),
        ("regex.bad.yml", "relabel_configs[0].regex"),
        ("scrape_interval.bad.yml", "scrape_configs[0].scrape_timeout"),
        ("section_key_dup.bad.yml", "duplicate field `scrape_configs`"),
        ("unknown_attr.bad.yml", "scrape_configs[0].consult_sd_configs"),
        ("unknown_global_attr.bad.yml", "global.nonexistent_field"),
        ("uppercase3.bad.yml", "relabel_configs[0].replacement"),
        ("url_in_targetgroup.bad.yml", "static_configs[0].targets[0]"),
    ];
    for (name, key) in bad {
        let (code, stderr) = check(&repo.join("config/testdata").join(name));
        assert_eq!(code, Some(64), "{name} accepted:\n{stderr}");
        assert!(stderr.contains(key), "{name}: {key} not named:\n{stderr}");
    }
}
