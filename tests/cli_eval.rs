//! `epicenter eval` against issues 5's and 17's acceptance: over the shipped scenarios and
//! over scenarios written here (not in the repository, in the documented format, other nodes,
//! datacenters, strengths and seeds), host-level AC@1 ≥ 0.95 and AC@3 = 1.0, kind and
//! datacenter set right ≥ 0.95, datacenter-level AC@1 = 1.0 (every fault here has one
//! datacenter), median time to detect ≤ 2 scrape intervals, no false verdicts, and none over
//! 24 simulated hours of a healthy fleet with deploys (and node_exporter and a kubelet on every
//! host). Host
//! faults (CPU steal, memory pressure) are named at host level from the hosts' own exporter
//! (issue 18). The reference rankings are reported beside ours. Every fault is scored on its own
//! incident (issue 17): two faults at once, in different datacenters, are each named by an
//! incident of their own, with the right kind, within the time a lone fault takes.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::process::Command;

mod common;

use common::eval_json as eval;

fn check(report: &serde_json::Value) {
    let overall = &report["overall"];
    let ours = &overall["epicenter"];
    eprintln!("{}", serde_json::to_string_pretty(overall).unwrap());
    // Issue 17's acceptance: host AC@1 ≥ 0.95, AC@3 = 1, kind and datacenter set ≥ 0.95,
    // median time to detect ≤ 2 intervals.
    assert!(ours["host_ac1"].as_f64().unwrap() >= 0.95, "{overall}");
    assert!(overall["kind_accuracy"].as_f64().unwrap() >= 0.95, "{overall}");
    assert!(overall["dc_set_accuracy"].as_f64().unwrap() >= 0.95, "{overall}");
    assert_eq!(ours["host_ac3"].as_f64(), Some(1.0), "{overall}");
    assert_eq!(ours["dc_ac1"].as_f64(), Some(1.0), "{overall}");
    assert!(
        overall["median_intervals_to_detect"].as_f64().unwrap() <= 2.0,
        "{overall}"
    );
    assert_eq!(overall["false_verdicts"].as_u64(), Some(0), "{overall}");
    // The reference rankings are computed and reported.
    for reference in ["robust_z", "pagerank"] {
        assert!(overall[reference]["host_ac1"].as_f64().is_some(), "{overall}");
    }
}

#[test]
fn the_shipped_scenarios_meet_the_acceptance() {
    let report = eval(&[]);
    assert_eq!(report["scenarios"].as_array().unwrap().len(), 8);
    check(&report);
}

#[test]
fn scenarios_written_outside_the_repository_meet_it_too() {
    let dir = std::env::temp_dir().join(format!("epicenter-unseen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let faults = [
        (
            "loss-3-2",
            201,
            "10m",
            64,
            "{kind: node_loss, select: {instance: redis-3-2}, at: 4m, duration: 3m}",
        ),
        (
            "loss-1-1",
            202,
            "10m",
            64,
            "{kind: node_loss, select: {instance: redis-1-1}, at: 5m}",
        ),
        (
            "slow-2-2",
            203,
            "10m",
            64,
            "{kind: slow_node, select: {instance: redis-2-2}, at: 4m, latency_seconds: 0.03}",
        ),
        (
            "cold-3",
            204,
            "12m",
            64,
            "{kind: cold_start, select: {dc: dc-3, count: 1}, at: 4m, warmup_seconds: 120}",
        ),
        (
            "cold-2x3",
            205,
            "12m",
            64,
            "{kind: cold_start, select: {dc: dc-2, count: 3}, at: 3m}",
        ),
        (
            "db-1",
            206,
            "10m",
            64,
            "{kind: slow_database, select: {dc: dc-1}, at: 4m, latency_seconds: 0.4}",
        ),
        (
            "storm-3",
            207,
            "10m",
            12,
            "{kind: retry_storm, select: {dc: dc-3}, at: 4m, factor: 5}",
        ),
        (
            "degrade-2",
            208,
            "10m",
            64,
            "{kind: dc_degradation, select: {dc: dc-2}, at: 4m, latency_seconds: 0.05, loss: 0.01}",
        ),
        (
            "session-2",
            209,
            "10m",
            64,
            "{kind: session_loss, select: {dc: dc-2}, at: 4m, fraction: 0.25}",
        ),
    ];
    let mut files = Vec::new();
    for (name, seed, duration, workers, fault) in faults {
        let path = dir.join(format!("{name}.yml"));
        std::fs::write(
            &path,
            format!("name: {name}\nseed: {seed}\nduration: {duration}\nfleet: {{api: {{workers: {workers}}}}}\nfaults:\n  - {fault}\n"),
        )
        .unwrap();
        files.push(path.to_str().unwrap().to_string());
    }
    // The healthy day runs node_exporter and a kubelet (cAdvisor) on every host too (issue
    // 18): the hosts' CPU, pressure stall, memory and network families and the containers'
    // throttling must stay quiet through a day's traffic and deploys.
    let healthy = dir.join("healthy-24h.yml");
    std::fs::write(
        &healthy,
        "name: healthy-24h\nseed: 210\nduration: 24h\nstart_hour: 0\nscrape_interval: 15s\nfleet: {node_exporter: true, cadvisor: true}\noperations:\n  - {kind: deploy, select: {service: backend}, at: 3h, stagger: 45s}\n  - {kind: deploy, select: {service: backend, dc: dc-3}, at: 12h, stagger: 30s}\n  - {kind: deploy, select: {service: backend, dc: dc-1}, at: 20h}\n",
    )
    .unwrap();
    files.push(healthy.to_str().unwrap().to_string());
    let arguments: Vec<&str> = files.iter().map(String::as_str).collect();
    let report = eval(&arguments);
    std::fs::remove_dir_all(&dir).unwrap();
    check(&report);
    let healthy = report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|scenario| scenario["scenario"] == "healthy-24h")
        .unwrap();
    assert_eq!(healthy["false_verdicts"].as_u64(), Some(0), "{healthy}");
}

/// Writes `scenarios` (name, seed, API workers, two faults) as scenario files in a fresh
/// folder and returns the folder and the files.
fn two_fault_scenarios(scenarios: &[(&str, u64, u32, &str, &str)]) -> (std::path::PathBuf, Vec<String>) {
    let dir = std::env::temp_dir().join(format!("epicenter-concurrent-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = Vec::new();
    for (name, seed, workers, first, second) in scenarios {
        let path = dir.join(format!("{name}.yml"));
        std::fs::write(
            &path,
            format!(
                "name: {name}\nseed: {seed}\nduration: 12m\nfleet: {{api: {{workers: {workers}}}}}\nfaults:\n  - {first}\n  - {second}\n"
            ),
        )
        .unwrap();
        files.push(path.to_str().unwrap().to_string());
    }
    (dir, files)
}

/// Two faults in different datacenters, the second starting a minute or a minute and a half
/// after the first or at the same second: each is matched to an incident of its own (the
/// first no longer hides the second until it ends), named at host level, with the right kind
/// and datacenter, the second as fast as a lone fault of its kind, and nothing else opens.
/// The first eight were written for issue 17 before the detector was run on them and passed
/// unchanged; the last four came from a reviewer's attempts to break it.
#[test]
fn concurrent_faults_in_different_datacenters_each_get_their_own_incident() {
    let (dir, files) = two_fault_scenarios(&[
        (
            "loss-then-db",
            41,
            12,
            "{kind: node_loss, select: {instance: redis-1-1}, at: 3m, duration: 5m}",
            "{kind: slow_database, select: {dc: dc-3}, at: 4m30s, latency_seconds: 0.4}",
        ),
        (
            "cold-then-slow",
            43,
            12,
            "{kind: cold_start, select: {dc: dc-2, count: 2}, at: 3m}",
            "{kind: slow_node, select: {instance: redis-3-2}, at: 4m, latency_seconds: 0.03}",
        ),
        (
            "storm-then-loss",
            303,
            12,
            "{kind: retry_storm, select: {dc: dc-3}, at: 3m, factor: 5}",
            "{kind: node_loss, select: {instance: redis-2-1}, at: 4m}",
        ),
        (
            "degrade-then-loss",
            304,
            64,
            "{kind: dc_degradation, select: {dc: dc-2}, at: 3m, latency_seconds: 0.05, loss: 0.01}",
            "{kind: node_loss, select: {instance: redis-3-1}, at: 4m}",
        ),
        (
            "session-then-cold",
            305,
            64,
            "{kind: session_loss, select: {dc: dc-1}, at: 3m, fraction: 0.25}",
            "{kind: cold_start, select: {dc: dc-3, count: 1}, at: 4m, warmup_seconds: 120}",
        ),
        (
            "db-then-storm",
            306,
            12,
            "{kind: slow_database, select: {dc: dc-2}, at: 3m, latency_seconds: 0.4}",
            "{kind: retry_storm, select: {dc: dc-1}, at: 4m, factor: 6}",
        ),
        (
            "two-losses-at-once",
            307,
            64,
            "{kind: node_loss, select: {instance: redis-1-2}, at: 4m}",
            "{kind: node_loss, select: {instance: redis-3-1}, at: 4m}",
        ),
        (
            "slow-and-db-at-once",
            308,
            64,
            "{kind: slow_node, select: {instance: redis-2-2}, at: 4m, latency_seconds: 0.03}",
            "{kind: slow_database, select: {dc: dc-1}, at: 4m, latency_seconds: 0.4}",
        ),
        // Found by a reviewer (each missed its second fault before callers that stand out
        // among the callers an incident reaches kept their own trouble; see docs/detector.md).
        (
            "slow-and-storm",
            109,
            12,
            "{kind: slow_node, select: {instance: redis-3-2}, at: 3m, duration: 5m}",
            "{kind: retry_storm, select: {dc: dc-2}, at: 3m, duration: 4m}",
        ),
        (
            "loss-then-cold",
            111,
            12,
            "{kind: node_loss, select: {instance: redis-1-1}, at: 3m, duration: 6m}",
            "{kind: cold_start, select: {dc: dc-2, count: 2}, at: 4m}",
        ),
        (
            "link-then-db",
            112,
            12,
            "{kind: link_degradation, select: {dc: dc-1}, peer_dc: dc-2, at: 3m, duration: 6m}",
            "{kind: slow_database, select: {instance: db-3-1}, at: 4m, duration: 4m}",
        ),
        (
            "slow-then-host",
            113,
            12,
            "{kind: slow_node, select: {instance: redis-1-1}, at: 3m, duration: 6m}",
            "{kind: host_saturation, select: {host: dc-2-host-1}, at: 4m}",
        ),
    ]);
    let arguments: Vec<&str> = files.iter().map(String::as_str).collect();
    let report = eval(&arguments);
    std::fs::remove_dir_all(&dir).unwrap();
    let overall = &report["overall"];
    eprintln!("{}", serde_json::to_string_pretty(overall).unwrap());
    assert_eq!(overall["faults"].as_u64(), Some(24), "{overall}");
    assert!(overall["epicenter"]["host_ac1"].as_f64().unwrap() >= 0.95, "{overall}");
    assert_eq!(overall["epicenter"]["host_ac3"].as_f64(), Some(1.0), "{overall}");
    assert!(overall["kind_accuracy"].as_f64().unwrap() >= 0.95, "{overall}");
    assert!(overall["dc_set_accuracy"].as_f64().unwrap() >= 0.95, "{overall}");
    assert!(
        overall["median_intervals_to_detect"].as_f64().unwrap() <= 2.0,
        "{overall}"
    );
    assert_eq!(overall["false_verdicts"].as_u64(), Some(0), "{overall}");
    // The acceptance's "including the second of two concurrent ones": the median over the
    // later-starting fault of each pair, on its own.
    let mut seconds: Vec<f64> = report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|scenario| {
            let onset = |incident: &serde_json::Value| {
                scenario["truth"][incident["truth"].as_u64().unwrap() as usize]["onset_ms"]
                    .as_i64()
                    .unwrap()
            };
            let incidents = scenario["incidents"].as_array().unwrap();
            let later = incidents.iter().max_by_key(|incident| onset(incident)).unwrap();
            later["intervals_to_detect"].as_f64().unwrap_or(f64::INFINITY)
        })
        .collect();
    seconds.sort_by(f64::total_cmp);
    let median = (seconds[seconds.len() / 2 - 1] + seconds[seconds.len() / 2]) / 2.0;
    eprintln!("second faults' times to detect: {seconds:?}");
    assert!(
        median <= 2.0,
        "the second faults' median time to detect is {median}: {seconds:?}"
    );
    for scenario in report["scenarios"].as_array().unwrap() {
        let incidents = scenario["incidents"].as_array().unwrap();
        assert_eq!(incidents.len(), 2, "{scenario}");
        for incident in incidents {
            let truth = &scenario["truth"][incident["truth"].as_u64().unwrap() as usize];
            let verdict = &incident["verdict"];
            // Its own incident, in the fault's datacenter, on one of the fault's hosts.
            assert_eq!(verdict["dc"], truth["dcs"][0], "{scenario}");
            assert!(
                truth["hosts"].as_array().unwrap().contains(&verdict["hosts"][0]),
                "{scenario}"
            );
            // A lone fault of these kinds is named within 3 intervals (latency alone waits 3
            // rounds); the second of two must not wait for the first to end.
            assert!(incident["intervals_to_detect"].as_f64().unwrap() <= 3.0, "{scenario}");
        }
    }
}

/// A host that starves every instance on it and a degraded link between two datacenters:
/// named as the host (`host_saturation`, not one of its services) and as the link
/// (`link_degradation`, both datacenters, no third), over other hosts, datacenters, fleet
/// shapes and severities. The first six were written while the rules were built; the last
/// eight were written after, and passed on their first run (2026-12-04); none was changed
/// after being run.
#[test]
fn a_starved_host_and_a_degraded_link_are_named_as_such() {
    let dir = std::env::temp_dir().join(format!("epicenter-scope-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let host = |host: &str, at: &str, latency: f64| {
        format!("{{kind: host_saturation, select: {{host: {host}}}, at: {at}, latency_seconds: {latency}}}")
    };
    let link = |one: &str, other: &str, latency: f64, loss: f64| {
        format!(
            "{{kind: link_degradation, select: {{dc: {one}}}, peer_dc: {other}, at: 4m, latency_seconds: {latency}, loss: {loss}}}"
        )
    };
    let wide = "api: {workers: 64}";
    let scenarios = [
        ("host-1-2", 506, wide, host("dc-1-host-2", "4m", 0.05)),
        ("host-1-3", 504, wide, host("dc-1-host-3", "4m", 0.03)),
        ("host-2-4", 503, wide, host("dc-2-host-4", "4m", 0.02)),
        ("host-3-1", 505, wide, host("dc-3-host-1", "4m", 0.02)),
        ("link-1-2", 501, wide, link("dc-1", "dc-2", 0.05, 0.01)),
        ("link-3-2", 502, wide, link("dc-3", "dc-2", 0.03, 0.02)),
        ("h-2-1", 601, wide, host("dc-2-host-1", "4m", 0.03)),
        ("h-3-3", 602, wide, host("dc-3-host-3", "3m", 0.04)),
        ("h-1-4", 603, wide, host("dc-1-host-4", "5m", 0.015)),
        (
            "h-4dc-4-2",
            604,
            "datacenters: 4, api: {workers: 64}",
            host("dc-4-host-2", "4m", 0.03),
        ),
        (
            "h-3hosts-2-1",
            605,
            "hosts_per_datacenter: 3, api: {workers: 64}",
            host("dc-2-host-1", "4m", 0.03),
        ),
        ("l-1-3", 606, wide, link("dc-1", "dc-3", 0.04, 0.01)),
        (
            "l-4dc-4-2",
            607,
            "datacenters: 4, api: {workers: 64}",
            link("dc-4", "dc-2", 0.03, 0.02),
        ),
        ("l-mild-2-3", 608, wide, link("dc-2", "dc-3", 0.02, 0.005)),
    ];
    let mut files = Vec::new();
    for (name, seed, fleet, fault) in &scenarios {
        let path = dir.join(format!("{name}.yml"));
        std::fs::write(
            &path,
            format!("name: {name}\nseed: {seed}\nduration: 10m\nfleet: {{{fleet}}}\nfaults:\n  - {fault}\n"),
        )
        .unwrap();
        files.push(path.to_str().unwrap().to_string());
    }
    let arguments: Vec<&str> = files.iter().map(String::as_str).collect();
    let report = eval(&arguments);
    std::fs::remove_dir_all(&dir).unwrap();
    let overall = &report["overall"];
    eprintln!("{}", serde_json::to_string_pretty(overall).unwrap());
    assert_eq!(overall["faults"].as_u64(), Some(14), "{overall}");
    assert!(overall["epicenter"]["host_ac1"].as_f64().unwrap() >= 0.95, "{overall}");
    assert_eq!(overall["epicenter"]["host_ac3"].as_f64(), Some(1.0), "{overall}");
    assert!(overall["kind_accuracy"].as_f64().unwrap() >= 0.95, "{overall}");
    assert!(overall["dc_set_accuracy"].as_f64().unwrap() >= 0.95, "{overall}");
    assert_eq!(overall["false_verdicts"].as_u64(), Some(0), "{overall}");
    // A host's trouble shows as latency alone; corroborated by two services' instances on the
    // host, it confirms in two rounds like any fault (one instance's latency alone waits
    // three: a paused process shows a second or two of it).
    assert!(
        overall["median_intervals_to_detect"].as_f64().unwrap() <= 2.0,
        "{overall}"
    );
    for scenario in report["scenarios"].as_array().unwrap() {
        let truth = &scenario["truth"][0];
        let verdict = &scenario["incidents"][0]["verdict"];
        assert_eq!(verdict["kind"], truth["kind"], "{scenario}");
        assert_eq!(verdict["dcs"], truth["dcs"], "{scenario}");
        if truth["kind"] == "host_saturation" {
            assert_eq!(verdict["hosts"][0], truth["hosts"][0], "{scenario}");
        }
    }
}

/// Issue 17's calibration: on random scenarios never used to fit the confidence model
/// (seeds from 1,000,000), the confidence is within 0.1 of the share of right incidents in
/// every bin holding at least 10, and the Brier score beats a constant 0.9's on the same
/// incidents; the detector stays accurate on them. `--calibrate` fits finite coefficients on
/// calibration seeds.
#[test]
fn confidence_is_calibrated_on_random_scenarios_it_was_not_fitted_on() {
    let report = eval(&["--random", "60", "--seed", "1000000"]);
    let overall = &report["overall"];
    eprintln!("{}", serde_json::to_string_pretty(overall).unwrap());
    assert_eq!(report["scenarios"].as_array().unwrap().len(), 60);
    assert!(overall["epicenter"]["host_ac1"].as_f64().unwrap() >= 0.9, "{overall}");
    let calibration = &overall["calibration"];
    let mut checked = 0;
    for bin in calibration["bins"].as_array().unwrap() {
        if bin["verdicts"].as_u64().unwrap() >= 10 {
            checked += 1;
            let gap = bin["mean_confidence"].as_f64().unwrap() - bin["observed"].as_f64().unwrap();
            assert!(gap.abs() <= 0.1, "{bin}");
        }
    }
    assert!(checked >= 1, "{calibration}");
    // The Brier score of a constant 0.9 on the same incidents, from their outcomes.
    let outcomes: Vec<bool> = report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|scenario| scenario["confidences"].as_array().unwrap().clone())
        .map(|pair| pair[1].as_bool().unwrap())
        .collect();
    let constant = outcomes
        .iter()
        .map(|right| (0.9_f64 - if *right { 1.0 } else { 0.0 }).powi(2))
        .sum::<f64>()
        / outcomes.len() as f64;
    assert!(
        calibration["brier"].as_f64().unwrap() < constant,
        "{calibration} vs {constant}"
    );
    let fitted = eval(&["--random", "30", "--seed", "0", "--calibrate"]);
    let model = &fitted["fitted_confidence"];
    for key in ["intercept", "share", "log_score", "unknown"] {
        assert!(model[key].as_f64().unwrap().is_finite(), "{model}");
    }
}

/// Issue 17: `eval --load N` judges on the live path (the fleet served on loopback, the
/// collector, the live detector, the store) beside N busy threads, and scores it as the
/// headless run is. A node loss and a database that exhausts its callers' pools (the latter
/// got no verdict at all in the issue's measurement on a loaded machine), beside 4 hogs: each
/// fault named by its own incident, right host and kind, and nothing else opened. Nothing is
/// asserted on how fast, in wall-clock events: the time to detect must only exist.
#[test]
fn the_live_path_beside_four_busy_threads_names_each_fault() {
    if common::require(&[]).is_none() {
        return;
    }
    let report = eval(&["--load", "4", "redis-node-loss", "db-pool-exhaustion"]);
    assert_eq!(report["path"]["live"].as_bool(), Some(true), "{}", report["path"]);
    assert_eq!(report["path"]["busy_threads"].as_u64(), Some(4));
    let scenarios = report["scenarios"].as_array().unwrap();
    assert_eq!(scenarios.len(), 2);
    for (scenario, (kind, host)) in scenarios
        .iter()
        .zip([("node_loss", "dc-2-host-3"), ("slow_database", "dc-2-host-4")])
    {
        let name = &scenario["scenario"];
        // The ground truth is the scenario's own fault, reached by the live fleet.
        let truth = scenario["truth"].as_array().unwrap();
        assert_eq!(truth.len(), 1, "{name}: {truth:?}");
        assert_eq!(truth[0]["kind"].as_str(), Some(kind), "{name}");
        let incident = &scenario["incidents"][0];
        eprintln!("{name}: {incident}");
        assert!(
            truth[0]["hosts"][0].as_str().unwrap().starts_with(host),
            "{name}: {truth:?}"
        );
        assert_eq!(
            incident["epicenter"]["host_ac1"].as_f64(),
            Some(1.0),
            "{name}: {incident}"
        );
        assert_eq!(incident["kind_right"].as_bool(), Some(true), "{name}: {incident}");
        assert!(incident["intervals_to_detect"].as_f64().is_some(), "{name}: {incident}");
        assert_eq!(scenario["false_verdicts"].as_u64(), Some(0), "{name}: {scenario}");
    }
}

/// Ctrl-C during `eval --load` stops the scenario running and the ones after it, reports
/// what was judged, marked as cut short, exits 130 and leaves no temporary store behind (a
/// reviewer found the second scenario started anyway and a later Ctrl-C lost everything).
#[test]
fn ctrl_c_stops_a_live_evaluation_and_reports_what_was_judged() {
    use std::io::{BufRead, BufReader};
    if common::require(&[]).is_none() {
        return;
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["eval", "--json", "--load", "0", "redis-node-loss", "redis-slow-node"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    // The pipeline is up once it says what it scrapes.
    while !seen.contains("epicenter: scraping") {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "stderr ended: {seen}");
        seen.push_str(&line);
    }
    common::signal(&child, common::Signal::SIGINT);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let output = child.wait_with_output().unwrap();
    seen.push_str(&rest);
    assert_eq!(output.status.code(), Some(130), "{seen}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let interrupted = report["interrupted"].as_str().unwrap_or_default();
    assert!(
        interrupted.contains("stopped by Ctrl-C during 'redis-node-loss'"),
        "{report}"
    );
    assert!(interrupted.contains("1 later scenario(s) not run"), "{interrupted}");
    assert_eq!(report["scenarios"].as_array().unwrap().len(), 1, "{report}");
    assert!(seen.contains("eval: stopped by Ctrl-C"), "{seen}");
    assert!(
        !seen.contains("redis-slow-node live"),
        "the next scenario started: {seen}"
    );
    let prefix = format!("epicenter-eval-live-{pid}-");
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "temporary store left behind: {left:?}");
}

/// A scenario's name is any string its file gives; the live path's collector configuration
/// must keep it one value (a reviewer's `x}, y: {z` broke the generated YAML).
#[test]
fn a_scenario_name_with_yaml_syntax_runs_live() {
    if common::require(&[]).is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("epicenter-odd-name-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("odd.yml");
    let name = "x}, y: {z 'q' #c";
    std::fs::write(
        &file,
        format!(
            "name: \"{name}\"\ndescription: a short healthy run\nseed: 7\nspeed: 60\nduration: 1m\nscrape_interval: 10s\n"
        ),
    )
    .unwrap();
    let report = eval(&["--load", "0", file.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(report["scenarios"][0]["scenario"].as_str(), Some(name), "{report}");
    assert_eq!(report["scenarios"][0]["false_verdicts"].as_u64(), Some(0), "{report}");
}

/// The PetShop harness reads every issue of the dataset in ../shared (training split here),
/// ranks each with the detector and reports recall per setting, split and issue metric beside
/// the dataset's reference figures; the figures docs/detector.md gives for the training split
/// are the ones the harness prints now.
#[test]
fn petshop_issues_are_all_scored() {
    let dir = std::env::var_os("EPICENTER_SHARED")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared")))
        .join("datasets/petshop");
    if !dir.is_dir() {
        assert!(std::env::var_os("CI").is_none(), "{} missing in CI", dir.display());
        eprintln!("SKIPPED for lack of test data: {} not found", dir.display());
        return;
    }
    let rows = check_petshop(&dir);
    assert!(
        !dir.join("low_traffic/test").exists(),
        "{}: the test split is here; the documented figures are the training split's",
        dir.display()
    );
    check_petshop_docs(&rows);
}

/// The whole dataset with its held-back `test/` split (a clone of
/// github.com/amazon-science/petshop-root-cause-analysis, folder `dataset`), when
/// EPICENTER_PETSHOP_FULL names it; the same checks as above.
#[test]
fn petshop_full_dataset_when_given() {
    let Some(dir) = std::env::var_os("EPICENTER_PETSHOP_FULL") else {
        eprintln!("SKIPPED: set EPICENTER_PETSHOP_FULL to the dataset folder of a clone of amazon-science/petshop-root-cause-analysis");
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    assert!(
        dir.join("low_traffic/test").is_dir(),
        "{}: no low_traffic/test; EPICENTER_PETSHOP_FULL must name the dataset folder",
        dir.display()
    );
    check_petshop(&dir);
}

/// Command-line mistakes with --dataset exit 2 and say what is wrong.
#[test]
fn dataset_usage_mistakes_exit_2() {
    for args in [
        vec!["--dataset", "nosuch", "dir"],
        vec!["--dataset", "petshop"],
        vec!["--dataset", "petshop", "a", "b"],
        vec!["--dataset", "petshop", "dir", "--rules", "rules/signals/signals.yml"],
    ] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_epicenter"))
            .arg("eval")
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: --dataset"), "{args:?}: {stderr}");
    }
}

/// Runs the PetShop harness on `dir` and checks its rows against the dataset on disk: every
/// issue folder scored once in its setting, split and issue metric (read from its target.json
/// here) and once more in the pooled rows; recall in 0..1, a whole number of issues, top-3 at
/// least top-1; the target flagged and the ties at most the issues; the reference attached.
fn check_petshop(dir: &std::path::Path) -> Vec<serde_json::Value> {
    let report = eval(&["--dataset", "petshop", dir.to_str().unwrap()]);
    let rows = report.as_array().unwrap().clone();
    eprintln!("{}", serde_json::to_string(&report).unwrap());
    // (setting, split, metric) → issues, from the folders and their target.json files.
    let mut on_disk: std::collections::BTreeMap<(String, String, String), u64> = Default::default();
    for setting in ["high_traffic", "low_traffic", "temporal_traffic1", "temporal_traffic2"] {
        for split in ["train", "test"] {
            let Ok(entries) = std::fs::read_dir(dir.join(setting).join(split)) else {
                continue;
            };
            for entry in entries {
                let path = entry.unwrap().path();
                if !path.is_dir() {
                    continue;
                }
                let target: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(path.join("target.json")).unwrap()).unwrap();
                let metric = target["target"]["metric"].as_str().unwrap().to_string();
                *on_disk
                    .entry((setting.to_string(), split.to_string(), metric))
                    .or_default() += 1;
            }
        }
    }
    assert!(!on_disk.is_empty(), "{}: no issues", dir.display());
    let issues_of = |setting: &str, split: &str, metric: &str| -> Option<u64> {
        rows.iter()
            .find(|row| row["setting"] == setting && row["split"] == split && row["metric"] == metric)
            .map(|row| row["issues"].as_u64().unwrap())
    };
    for ((setting, split, metric), count) in &on_disk {
        assert_eq!(
            issues_of(setting, split, metric),
            Some(*count),
            "{setting} {split} {metric}"
        );
    }
    let per_split: u64 = rows
        .iter()
        .filter(|row| row["split"] != "all")
        .map(|row| row["issues"].as_u64().unwrap())
        .sum();
    let pooled: u64 = rows
        .iter()
        .filter(|row| row["split"] == "all")
        .map(|row| row["issues"].as_u64().unwrap())
        .sum();
    assert_eq!(per_split, on_disk.values().sum::<u64>());
    assert_eq!(pooled, per_split);
    for row in &rows {
        let issues = row["issues"].as_u64().unwrap();
        let (top1, top3) = (row["top1"].as_f64().unwrap(), row["top3"].as_f64().unwrap());
        assert!(
            issues > 0 && (0.0..=1.0).contains(&top1) && (top1..=1.0).contains(&top3),
            "{row}"
        );
        for recall in [top1, top3] {
            let hits = recall * issues as f64;
            assert!((hits - hits.round()).abs() < 1e-9, "not a whole number of hits: {row}");
        }
        assert!(row["target_flagged"].as_u64().unwrap() <= issues, "{row}");
        assert!(row["tied_at_top"].as_u64().unwrap() <= issues, "{row}");
        assert!(row["paper_top1"].as_f64().is_some(), "no reference: {row}");
    }
    // The reference figures (the dataset repository's notebook) are attached to every row.
    let reference = |setting: &str, metric: &str| {
        rows.iter()
            .find(|row| row["setting"] == setting && row["split"] == "all" && row["metric"] == metric)
            .map(|row| row["paper_top1"].as_f64())
    };
    assert_eq!(reference("low_traffic", "latency"), Some(Some(0.571)));
    assert_eq!(reference("high_traffic", "availability"), Some(Some(0.667)));
    assert_eq!(reference("temporal_traffic", "availability"), Some(Some(0.75)));
    rows
}

/// docs/detector.md's PetShop results table ("### Results": one line per setting family and
/// issue metric, `| setting | metric | issues | top-1 (top-3) | flagged | tied | …`) gives the
/// pooled rows' figures, to two decimals: a change to the detector that moves them must
/// update the docs.
fn check_petshop_docs(rows: &[serde_json::Value]) {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/detector.md")).unwrap();
    let section = docs
        .split("## PetShop (real data)")
        .nth(1)
        .and_then(|petshop| petshop.split("### Results").nth(1))
        .expect("docs/detector.md: no PetShop results section");
    let mut compared = 0;
    for line in section.lines().filter(|line| line.starts_with("| ")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let family = match cells[0] {
            "low traffic" => "low_traffic",
            "high traffic" => "high_traffic",
            "temporal 1 + 2" => "temporal_traffic",
            _ => continue,
        };
        let row = rows
            .iter()
            .find(|row| row["setting"] == family && row["split"] == "all" && row["metric"] == cells[1])
            .unwrap_or_else(|| panic!("no row for {line}"));
        let printed = format!(
            "{} | {:.2} ({:.2}) | {} | {}",
            row["issues"],
            row["top1"].as_f64().unwrap(),
            row["top3"].as_f64().unwrap(),
            row["target_flagged"],
            row["tied_at_top"]
        );
        assert_eq!(cells[2..6].join(" | "), printed, "docs/detector.md: {line}");
        compared += 1;
    }
    assert_eq!(compared, rows.iter().filter(|row| row["split"] == "all").count());
}

/// Issue 38: several incidents at once stay apart, and `eval` matches incidents to faults one
/// to one. Three faults in three datacenters, the third starting while the first two are open
/// or resolving (a node loss, a slow database, a slow node; a slow node, a cold deploy, a node
/// loss; a slow database, a node loss, a second slow database): each is answered by an
/// incident of its own, named at host level with its kind and datacenter, and nothing else
/// opens. Two datacenters of four degraded together are one event: one incident naming both,
/// no incident per host and no false verdict. Written for issue 38; the three-fault scenarios
/// passed on their first run (and on the code before issue 38), the two-datacenter one named
/// dc-3 and a link between dc-1 and dc-2 before the detector named every degraded
/// datacenter.
#[test]
fn several_incidents_at_once_stay_apart() {
    let dir = std::env::temp_dir().join(format!("epicenter-several-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let scenarios = [
        (
            "three-a",
            401,
            "{kind: node_loss, select: {instance: redis-1-1}, at: 3m, duration: 4m}",
            "{kind: slow_database, select: {dc: dc-2}, at: 3m30s, latency_seconds: 0.4, duration: 6m}",
            "{kind: slow_node, select: {instance: redis-3-2}, at: 6m, latency_seconds: 0.03}",
        ),
        (
            "three-b",
            402,
            "{kind: slow_node, select: {instance: redis-2-1}, at: 3m, latency_seconds: 0.03, duration: 4m}",
            "{kind: cold_start, select: {dc: dc-1, count: 2}, at: 3m20s}",
            "{kind: node_loss, select: {instance: redis-3-1}, at: 6m30s}",
        ),
        (
            "three-c",
            403,
            "{kind: slow_database, select: {dc: dc-3}, at: 3m, latency_seconds: 0.4, duration: 4m}",
            "{kind: node_loss, select: {instance: redis-1-2}, at: 3m40s, duration: 3m}",
            "{kind: slow_database, select: {dc: dc-1}, at: 6m50s, latency_seconds: 0.4}",
        ),
    ];
    let mut files = Vec::new();
    for (name, seed, first, second, third) in scenarios {
        let path = dir.join(format!("{name}.yml"));
        std::fs::write(
            &path,
            format!(
                "name: {name}\nseed: {seed}\nduration: 14m\nfleet: {{api: {{workers: 64}}}}\nfaults:\n  - {first}\n  - {second}\n  - {third}\n"
            ),
        )
        .unwrap();
        files.push(path.to_str().unwrap().to_string());
    }
    let two_dcs = dir.join("two-dcs.yml");
    std::fs::write(
        &two_dcs,
        "name: two-dcs\nseed: 23\nfleet: {datacenters: 4}\nspeed: 20\nduration: 10m\nscrape_interval: 10s\nfaults:\n  - {kind: dc_degradation, select: {dc: dc-2}, at: 3m, duration: 5m, latency_seconds: 0.03, loss: 0.02}\n  - {kind: dc_degradation, select: {dc: dc-3}, at: 3m, duration: 5m, latency_seconds: 0.03, loss: 0.02}\n",
    )
    .unwrap();
    files.push(two_dcs.to_str().unwrap().to_string());
    let arguments: Vec<&str> = files.iter().map(String::as_str).collect();
    let report = eval(&arguments);
    std::fs::remove_dir_all(&dir).unwrap();
    let overall = &report["overall"];
    assert_eq!(overall["faults"].as_u64(), Some(11), "{overall}");
    assert_eq!(overall["false_verdicts"].as_u64(), Some(0), "{overall}");
    for scenario in report["scenarios"].as_array().unwrap() {
        let name = scenario["scenario"].as_str().unwrap();
        for incident in scenario["incidents"].as_array().unwrap() {
            assert_eq!(
                incident["epicenter"]["host_ac1"].as_f64(),
                Some(1.0),
                "{name}: {incident}"
            );
            assert_eq!(incident["kind_right"].as_bool(), Some(true), "{name}: {incident}");
            assert_eq!(incident["dcs_right"].as_bool(), Some(true), "{name}: {incident}");
        }
        if name == "two-dcs" {
            // One incident answers both faults and names both datacenters.
            let verdicts: Vec<&serde_json::Value> = scenario["incidents"]
                .as_array()
                .unwrap()
                .iter()
                .map(|incident| &incident["verdict"])
                .collect();
            assert_eq!(verdicts.len(), 2, "{scenario}");
            for verdict in &verdicts {
                assert_eq!(verdict["kind"], "dc_degradation", "{scenario}");
                assert_eq!(verdict["dcs"], serde_json::json!(["dc-2", "dc-3"]), "{scenario}");
            }
            assert_eq!(scenario["confidences"].as_array().unwrap().len(), 1, "{scenario}");
        } else {
            // Three faults, three incidents.
            assert_eq!(scenario["confidences"].as_array().unwrap().len(), 3, "{scenario}");
        }
    }
}

/// Issue 18: host faults are named at host level with AC@1 ≥ 0.95 over the shipped host
/// scenarios (scenarios/hosts/: CPU steal, memory pressure and packet loss, mild to severe, on
/// hosts of every datacenter running different services' instances), each fleet with
/// node_exporter on every host; the verdict's kind is `host_saturation`, or `host_network` for
/// packet loss; nothing else opens. The host's own
/// exporter is read: its steal is in the trace of the mildest steal from the fault's onset.
#[test]
fn host_faults_are_named_at_host_level_with_the_hosts_own_exporter() {
    let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/hosts");
    let mut files: Vec<String> = std::fs::read_dir(folder)
        .unwrap()
        .map(|entry| entry.unwrap().path().to_str().unwrap().to_string())
        .filter(|path| path.ends_with(".yml"))
        .collect();
    files.sort();
    assert!(files.len() >= 6, "{files:?}");
    let arguments: Vec<&str> = files.iter().map(String::as_str).collect();
    let report = eval(&arguments);
    let scenarios = report["scenarios"].as_array().unwrap();
    let mut hosts = std::collections::BTreeSet::new();
    let mut kinds = std::collections::BTreeSet::new();
    let mut dcs = std::collections::BTreeSet::new();
    let (mut right_host, mut right_kind, mut faults) = (0.0, 0usize, 0usize);
    for scenario in scenarios {
        assert_eq!(scenario["false_verdicts"].as_u64(), Some(0), "{scenario}");
        for (truth, incident) in scenario["truth"]
            .as_array()
            .unwrap()
            .iter()
            .zip(scenario["incidents"].as_array().unwrap())
        {
            let host = truth["hosts"][0].as_str().unwrap();
            assert_eq!(truth["hosts"].as_array().unwrap().len(), 1, "{truth}");
            // dc-2-host-4's own exporter is node-2-4, and the ground truth names it with the
            // host's other instances: the fleet served it.
            let node = host.replace("dc-", "node-").replace("-host-", "-");
            assert!(
                truth["instances"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|name| name == node.as_str()),
                "{truth}"
            );
            hosts.insert(host.to_string());
            dcs.insert(truth["dcs"][0].as_str().unwrap().to_string());
            kinds.insert(truth["kind"].as_str().unwrap().to_string());
            faults += 1;
            right_host += incident["epicenter"]["host_ac1"].as_f64().unwrap();
            right_kind += usize::from(incident["kind_right"] == true);
            if incident["verdict"].is_object() {
                let kind = if truth["kind"] == "host_packet_loss" {
                    "host_network"
                } else {
                    "host_saturation"
                };
                assert_eq!(incident["verdict"]["kind"], kind, "{incident}");
            }
        }
    }
    eprintln!(
        "host faults: {faults}, host AC@1 {:.2}, kind right {right_kind}",
        right_host / faults as f64
    );
    assert!(faults >= 6 && hosts.len() >= 6 && dcs.len() == 3, "{hosts:?} {dcs:?}");
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        ["host_memory_pressure", "host_packet_loss", "host_saturation"]
    );
    assert!(
        right_host / faults as f64 >= 0.95,
        "host AC@1 {right_host}/{faults}: {report}"
    );
    assert!(
        right_kind as f64 / faults as f64 >= 0.95,
        "kind right {right_kind}/{faults}"
    );

    let mild = format!("{folder}/host-steal-dc2-host4-mild.yml");
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["eval", "--trace", &mild])
        .output()
        .unwrap();
    // The trace is printed on stderr, beside the progress lines.
    let trace = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{trace}");
    // The fault starts at 3m: the first round with the host's steal is the fault's first.
    let first = trace
        .lines()
        .find(|line| line.contains("node-2-4:node_cpu_seconds_total"))
        .unwrap_or_else(|| panic!("no steal of node-2-4 in the trace:\n{trace}"));
    let second: u64 = first
        .split_whitespace()
        .nth(1)
        .unwrap()
        .trim_end_matches('s')
        .parse()
        .unwrap();
    assert!((180..=200).contains(&second), "{first}");
}

/// Issue 18, from a review: node_exporter on every host must not turn the shipped faults into
/// their hosts' trouble. The database's stalled disk shows in its host's exporter (disk busy,
/// iowait, I/O stall) and is still the database's pool exhaustion; every other kind stays
/// what it was, and nothing else opens.
#[test]
fn the_shipped_faults_keep_their_kinds_with_node_exporter_on_every_host() {
    let dir = std::env::temp_dir().join(format!("epicenter-shipped-nodes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        if path.extension().is_none_or(|extension| extension != "yml") || name == "healthy" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let text = if text.contains("\nfleet:\n") {
            text.replace("\nfleet:\n", "\nfleet:\n  node_exporter: true\n")
        } else {
            format!("{text}fleet: {{node_exporter: true}}\n")
        };
        let file = dir.join(format!("{name}.yml"));
        std::fs::write(&file, text).unwrap();
        files.push(file.to_str().unwrap().to_string());
    }
    assert_eq!(files.len(), 7, "{files:?}");
    let arguments: Vec<&str> = files.iter().map(String::as_str).collect();
    let report = eval(&arguments);
    std::fs::remove_dir_all(&dir).unwrap();
    for scenario in report["scenarios"].as_array().unwrap() {
        assert_eq!(scenario["false_verdicts"].as_u64(), Some(0), "{scenario}");
        // The ground truth names the hosts' exporters only for host and datacenter faults.
        let truth = &scenario["truth"][0];
        assert!(
            truth["service"] == "network"
                || truth["instances"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|name| !name.as_str().unwrap().starts_with("node-")),
            "{truth}"
        );
        let incident = &scenario["incidents"][0];
        assert_eq!(incident["kind_right"], true, "{scenario}");
        assert_eq!(incident["epicenter"]["host_ac1"].as_f64(), Some(1.0), "{scenario}");
    }
}
