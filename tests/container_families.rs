//! Issue 18: the container families (cAdvisor, as a host's kubelet serves them: the
//! simulator's `fleet.cadvisor`) detect their fault in simulated scenarios, and change no
//! other verdict.
//!
//! The fault is `cpu_throttling`: a container's CPU limit below its demand. Its scenarios are
//! written here (not in the repository), on four services, in three datacenters, mild to
//! severe. Judged with nothing but `up`, the restart rule and the shipped cAdvisor throttling
//! rules (read from rules/signals/signals.yml by metric name), each is named `cpu_throttling`
//! on the throttled container's host; with `up` and the restart rule alone, none is named
//! (the control: what names them is the kubelet's evidence, placed on the pods by their
//! `pod` label). With the shipped rules, the same scenarios and every shipped fault and host
//! scenario with a kubelet on every host keep their roots and kinds, and nothing else opens.
//! The healthy day with kubelets is in tests/cli_eval.rs.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::path::{Path, PathBuf};

mod common;
use common::{eval_json as eval, judged_one_fault as judged, repository, scratch, shipped_rules_of as rules_of};

/// The throttling scenarios: (name, seed, start hour, fleet extras, fault).
const THROTTLED: [(&str, u64, u32, &str, &str); 4] = [
    (
        "throttle-backend-dc2",
        61,
        10,
        "",
        "{kind: cpu_throttling, select: {service: backend, dc: dc-2, count: 1}, at: 3m, duration: 5m}",
    ),
    (
        "throttle-api-dc1-mild",
        62,
        15,
        ", node_exporter: true",
        "{kind: cpu_throttling, select: {service: api, dc: dc-1, count: 1}, at: 3m, factor: 1.5}",
    ),
    (
        "throttle-redis-dc3-severe",
        63,
        20,
        ", node_exporter: true",
        "{kind: cpu_throttling, select: {service: redis, dc: dc-3, count: 1}, at: 4m, factor: 3}",
    ),
    (
        "throttle-db-dc1",
        64,
        3,
        ", node_exporter: true",
        "{kind: cpu_throttling, select: {service: db, dc: dc-1}, at: 3m, duration: 4m}",
    ),
];

/// Writes [`THROTTLED`] into `dir`; returns the files.
fn throttled_scenarios(dir: &Path) -> Vec<String> {
    THROTTLED
        .iter()
        .map(|(name, seed, hour, extras, fault)| {
            let file = dir.join(format!("{name}.yml"));
            std::fs::write(
                &file,
                format!(
                    "name: {name}\nseed: {seed}\nduration: 10m\nstart_hour: {hour}\nfleet: {{cadvisor: true{extras}}}\nfaults:\n  - {fault}\n"
                ),
            )
            .unwrap();
            file.to_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn a_throttled_container_is_named_from_its_kubelets_evidence_alone() {
    let dir = scratch("epicenter-container-families");
    let files = throttled_scenarios(&dir);
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let baseline = ["up", "process_start_time_seconds"];
    let cadvisor = rules_of(
        &[
            baseline.as_slice(),
            &[
                "container_cpu_cfs_throttled_seconds_total",
                "container_cpu_cfs_throttled_periods_total",
            ],
        ]
        .concat(),
    );
    let rules = write("rules-cadvisor.yml", &cadvisor);
    let mut arguments = vec!["--rules", rules.as_str()];
    arguments.extend(files.iter().map(String::as_str));
    let report = eval(&arguments);
    let results = judged(&report);
    assert_eq!(results.len(), THROTTLED.len(), "{report}");
    for (name, kind_right, host_ac1, false_verdicts, kind) in &results {
        eprintln!("{name}: {kind}, host AC@1 {host_ac1}, {false_verdicts} false");
        assert!(
            *kind_right && kind == "cpu_throttling" && *host_ac1 == 1.0 && *false_verdicts == 0,
            "{name}: {report}"
        );
    }

    // The control: without the kubelet's rules nothing names them.
    let control = write("rules-restart.yml", &rules_of(&baseline));
    let mut arguments = vec!["--rules", control.as_str()];
    arguments.extend(files.iter().map(String::as_str));
    let report = eval(&arguments);
    for (name, kind_right, host_ac1, _, _) in judged(&report) {
        assert!(!kind_right && host_ac1 == 0.0, "{name} control: {report}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn with_kubelets_on_every_host_every_fault_keeps_its_root_and_kind() {
    let dir = scratch("epicenter-container-shipped");
    let mut files = throttled_scenarios(&dir);
    let mut shipped: Vec<PathBuf> = Vec::new();
    for folder in ["scenarios", "scenarios/hosts"] {
        for entry in std::fs::read_dir(repository(folder)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|extension| extension == "yml") && !path.ends_with("healthy.yml") {
                shipped.push(path);
            }
        }
    }
    shipped.sort();
    assert!(shipped.len() >= 17, "{shipped:?}");
    for path in &shipped {
        let name = path.file_stem().unwrap().to_str().unwrap();
        let text = std::fs::read_to_string(path).unwrap();
        let renamed = format!("{name}-kubelets");
        let mut text = text.replace(&format!("\nname: {name}\n"), &format!("\nname: {renamed}\n"));
        assert!(text.contains(&format!("\nname: {renamed}\n")), "{name}: no name line");
        // The shipped files write their fleet section as `fleet:` with a block, as a flow
        // mapping on one line, or not at all.
        if text.contains("\nfleet: {") {
            text = text.replace("\nfleet: {", "\nfleet: {cadvisor: true, ");
        } else if text.contains("\nfleet:\n") {
            text = text.replace("\nfleet:\n", "\nfleet:\n  cadvisor: true\n");
        } else {
            text.push_str("fleet: {cadvisor: true}\n");
        }
        let file = dir.join(format!("{renamed}.yml"));
        std::fs::write(&file, text).unwrap();
        files.push(file.to_str().unwrap().to_string());
    }
    let arguments: Vec<&str> = files.iter().map(String::as_str).collect();
    let report = eval(&arguments);
    std::fs::remove_dir_all(&dir).unwrap();
    let results = judged(&report);
    assert_eq!(results.len(), files.len(), "{report}");
    for (name, kind_right, host_ac1, false_verdicts, kind) in results {
        assert!(
            kind_right && host_ac1 == 1.0 && false_verdicts == 0,
            "{name}: kind {kind} right {kind_right}, host AC@1 {host_ac1}, {false_verdicts} false: {report}"
        );
    }
}
