//! Prometheus configuration files written by others are read unchanged (issue 16).
//!
//! * Debian's own files, installed by the `prometheus` package (scripts/test installs it):
//!   `/etc/prometheus/prometheus.yml` and `/usr/share/doc/prometheus/examples/prometheus.yml`.
//!   `check config` accepts each and names the server-only sections it does not use.
//! * Files of prometheus/prometheus v2.42.0 (the version Debian 12 ships), kept unchanged in
//!   `tests/data/prometheus-v2.42.0/` with their licence and provenance (SOURCES.md there):
//!   the configuration examples and `config/testdata/*.good.yml` files that use only what
//!   epicenter supports are accepted; its scrape-side `*.bad.yml` files are refused, naming
//!   the key. These run everywhere, CI included.
//! * With `EPICENTER_PROMETHEUS_REPO` set to a checkout of that tag (commit
//!   225c61122d88b01d1f0eaaee0e05b6f3e0567ac0), all of `documentation/examples/*.yml` and
//!   `config/testdata/*.good.yml`: each is accepted, or refused only for settings epicenter
//!   names as not supported yet (never "unknown field" for a Prometheus key).

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

/// Where the files taken from prometheus/prometheus v2.42.0 are kept (SOURCES.md there).
fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/prometheus-v2.42.0")
}

/// Whether the top-level `section` of a YAML file has a value: text after the colon, or an
/// indented line that is not a comment before the next top-level key.
fn sets(text: &str, section: &str) -> bool {
    let mut lines = text
        .lines()
        .skip_while(|line| !line.starts_with(&format!("{section}:")));
    let Some(first) = lines.next() else { return false };
    let inline = first[section.len() + 1..].trim();
    if !inline.is_empty() && !inline.starts_with('#') {
        return inline != "null" && inline != "~";
    }
    lines
        .take_while(|line| line.is_empty() || line.starts_with(' ') || line.starts_with('#') || line.starts_with('-'))
        .any(|line| {
            let line = line.trim();
            !line.is_empty() && !line.starts_with('#')
        })
}

/// The files kept in this tree: every configuration example of `documentation/examples/`
/// and every `config/testdata/*.good.yml` that uses only what epicenter supports (static,
/// file, HTTP and DNS discovery; the other 18 use Kubernetes, Consul, EC2 and other
/// discoveries), read unchanged.
#[test]
fn prometheus_s_own_example_files_are_read_unchanged() {
    let mut checked = 0;
    for dir in ["documentation/examples", "config/testdata"] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(corpus().join(dir))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| !path.to_string_lossy().ends_with(".bad.yml"))
            .collect();
        paths.sort();
        for path in paths {
            let text = std::fs::read_to_string(&path).unwrap();
            let (code, stderr) = check(&path);
            assert_eq!(code, Some(0), "{}: {stderr}", path.display());
            // Each server-only top-level section the file sets is named as not used (one
            // left empty, like the example's `rule_files:` with its entries commented out,
            // sets nothing).
            for section in ["rule_files", "alerting", "remote_write", "remote_read"] {
                if sets(&text, section) {
                    let warning = format!("{section}: a Prometheus server setting, not used by epicenter");
                    assert_eq!(
                        stderr.matches(&warning).count(),
                        1,
                        "{}: {warning}\n{stderr}",
                        path.display()
                    );
                }
            }
            let jobs = text
                .lines()
                .filter(|line| line.trim_start().starts_with("- job_name:"))
                .count();
            assert!(
                stderr.contains(&format!("ok: {jobs} job")),
                "{}: {jobs} jobs expected\n{stderr}",
                path.display()
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 9, "the corpus holds 2 examples and 7 good test files");
}

/// Prometheus's own `*.bad.yml` files for scrape-side mistakes: each refused, naming the key.
/// Left out: those of discoveries epicenter does not have (Kubernetes, Consul, …), of
/// server-only sections (remote_write, alerting, tracing, rules), `static_config.bad.yml`
/// (a file_sd file, not a configuration), and two epicenter reads more leniently:
/// `scrape_body_size_limit.bad.yml` (`body_size_limit: 100` is 100 bytes to epicenter;
/// Prometheus wants a unit) and `labelvalue.bad.yml` (a `!!binary` external label value that
/// is not UTF-8 to Prometheus, and the text `/w==` to epicenter's YAML reader).
#[test]
fn prometheus_s_own_bad_files_are_refused_naming_the_key() {
    let bad = [
        ("bearertoken.bad.yml", "scrape_configs[0].bearer_token_file"),
        ("bearertoken_basicauth.bad.yml", "scrape_configs[0].bearer_token"),
        ("dropequal.bad.yml", "relabel_configs[0].target_label"),
        ("dropequal1.bad.yml", "relabel_configs[0].regex"),
        (
            "empty_metric_relabel_config.bad.yml",
            "metric_relabel_configs[0].target_label",
        ),
        ("empty_scrape_config.bad.yml", "scrape_configs[0]"),
        ("empty_scrape_config_action.bad.yml", "relabel_configs[0].action"),
        ("empty_static_config.bad.yml", "static_configs[0]"),
        ("empty_target_relabel_config.bad.yml", "relabel_configs[0].target_label"),
        ("http_url_bad_scheme.bad.yml", "http_sd_configs[0].url"),
        ("http_url_no_host.bad.yml", "http_sd_configs[0].url"),
        ("http_url_no_scheme.bad.yml", "http_sd_configs[0].url"),
        ("jobname.bad.yml", "scrape_configs[0].job_name"),
        ("jobname_dup.bad.yml", "job_name"),
        ("keepequal.bad.yml", "relabel_configs[0].target_label"),
        ("keepequal1.bad.yml", "relabel_configs[0].regex"),
        ("labeldrop.bad.yml", "relabel_configs[0].source_labels"),
        ("labeldrop2.bad.yml", "relabel_configs[0].modulus"),
        ("labeldrop3.bad.yml", "relabel_configs[0].separator"),
        ("labeldrop4.bad.yml", "relabel_configs[0].replacement"),
        ("labeldrop5.bad.yml", "relabel_configs[0].target_label"),
        ("labelkeep.bad.yml", "relabel_configs[0].source_labels"),
        ("labelkeep2.bad.yml", "relabel_configs[0].modulus"),
        ("labelkeep3.bad.yml", "relabel_configs[0].separator"),
        ("labelkeep4.bad.yml", "relabel_configs[0].replacement"),
        ("labelkeep5.bad.yml", "relabel_configs[0].target_label"),
        ("labelmap.bad.yml", "relabel_configs[0].replacement"),
        ("labelname.bad.yml", "global.external_labels"),
        ("labelname2.bad.yml", "global.external_labels"),
        ("lowercase.bad.yml", "relabel_configs[0].target_label"),
        ("lowercase2.bad.yml", "relabel_configs[0].target_label"),
        ("lowercase3.bad.yml", "relabel_configs[0].replacement"),
        ("modulus_missing.bad.yml", "relabel_configs[0]"),
        ("regex.bad.yml", "relabel_configs[0].regex"),
        ("scrape_interval.bad.yml", "scrape_configs[0].scrape_timeout"),
        ("section_key_dup.bad.yml", "duplicate field `scrape_configs`"),
        (
            "target_label_hashmod_missing.bad.yml",
            "relabel_configs[0].target_label",
        ),
        ("target_label_missing.bad.yml", "relabel_configs[0].target_label"),
        ("unknown_attr.bad.yml", "scrape_configs[0].consult_sd_configs"),
        ("unknown_global_attr.bad.yml", "global.nonexistent_field"),
        ("uppercase.bad.yml", "relabel_configs[0].target_label"),
        ("uppercase2.bad.yml", "relabel_configs[0].target_label"),
        ("uppercase3.bad.yml", "relabel_configs[0].replacement"),
        ("url_in_targetgroup.bad.yml", "static_configs[0].targets[0]"),
    ];
    let dir = corpus().join("config/testdata");
    let kept = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|entry| {
            entry
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".bad.yml")
        })
        .count();
    assert_eq!(kept, bad.len(), "every kept bad file is checked");
    for (name, key) in bad {
        let (code, stderr) = check(&dir.join(name));
        assert_eq!(code, Some(64), "{name} accepted:\n{stderr}");
        assert!(stderr.contains(key), "{name}: {key} not named:\n{stderr}");
    }
}

/// The whole upstream corpus, when a checkout is given (see the module documentation): every
/// file is accepted, or refused only for discoveries epicenter names as not supported.
#[test]
fn prometheus_s_whole_example_corpus_is_refused_only_for_what_is_not_supported() {
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
    // What this tree keeps is what is accepted.
    for dir in ["documentation/examples", "config/testdata"] {
        for entry in std::fs::read_dir(corpus().join(dir)).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().to_string();
            if !name.ends_with(".bad.yml") {
                assert!(accepted.contains(&name), "{name}: {accepted:?}");
            }
        }
    }
    assert_eq!(accepted.len(), 9, "{accepted:?}");
}
