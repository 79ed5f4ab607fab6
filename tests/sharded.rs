//! Issue 19's sharded run, end to end: three collectors (`epicenter run --shard I/3
//! --no-detector`) scrape one simulated fleet into one ClickHouse server (the ClickHouse HTTP
//! interface over the embedded engine, a child process), one `epicenter detect` judges the
//! whole fleet from that store, and an unsharded `epicenter run` scrapes the same fleet at the
//! same time into an embedded store of its own. A Redis node dies and returns (redis-node-loss
//! at 20×): both must name the same incidents (kind, datacenter, hosts), the detector without
//! having scraped anything. Needs `libchdb.so` (`scripts/setup`).

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{
    free_port, get_json, require, signal, spawn, start_clickhouse_child, start_fleet, wait_port, Guard, Signal,
};

/// The ClickHouse server child of this binary ([`common::serve_clickhouse_child`]).
#[test]
#[ignore = "the ClickHouse server child process of the sharded test, started by it"]
fn clickhouse_server_child() {
    common::serve_clickhouse_child();
}

/// The configuration every process shares but for its listen address and store: the fleet's
/// targets from file_sd at 500 ms (10 s of the fleet's clock at 20×), stamped with the scrape's
/// time (`honor_timestamps: false`: the fleet's own clock runs 20× ahead of the scrapes', see
/// `epicenter_detector::follow` on `up`), the fleet's dependencies, instances named by `pod`.
fn config(api: &str, targets: &Path, storage: &str) -> String {
    format!(
        "global: {{scrape_interval: 500ms, scrape_timeout: 400ms}}\nserver: {{listen_address: '{api}'}}\nscrape_configs:\n  - job_name: fleet\n    honor_timestamps: false\n    file_sd_configs: [{{files: ['{}'], refresh_interval: 1s}}]\nstorage:\n{storage}placement: {{instance_label: pod}}\nbatching: {{max_age: 250ms}}\ndetector:\n  dependencies:\n    - {{caller: api, callee: backend, same_dc: true}}\n    - {{caller: backend, callee: redis}}\n    - {{caller: backend, callee: db, same_dc: true}}\n",
        targets.display()
    )
}

/// Starts `epicenter ARGS --config dir/NAME.yml` (log in dir/NAME.log) and waits for its API.
fn start(dir: &Path, name: &str, args: &[&str], config: &str, api: &str, guard: &mut Guard) {
    let path = dir.join(format!("{name}.yml"));
    std::fs::write(&path, config).unwrap();
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
    guard.keep(spawn(
        Command::new(env!("CARGO_BIN_EXE_epicenter"))
            .args(args)
            .arg("--config")
            .arg(&path)
            .stdout(log.try_clone().unwrap())
            .stderr(log),
    ));
    let port = api.rsplit_once(':').unwrap().1.parse().unwrap();
    assert!(
        wait_port(port, Duration::from_secs(120)),
        "{name} did not serve {api} within 120 s; its log:\n{}",
        std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default()
    );
}

/// What an incident names: kind, datacenters, hosts (sorted).
type Answer = (String, Vec<String>, Vec<String>);

/// One incident as a process's API tells of it.
#[derive(Debug, Default)]
struct Incident {
    /// The answer (kind, datacenters, hosts, sorted) before it resolved.
    answer: Answer,
    resolved: bool,
    /// When it opened, ms on the samples' clock.
    opened_ms: i64,
}

/// The incidents a process's API tells of, by verdict id.
fn incidents(api: &str) -> BTreeMap<String, Incident> {
    let mut incidents = BTreeMap::new();
    let history = get_json(api, "/api/v1/verdicts")["data"]["history"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for event in history {
        let verdict = &event["verdict"];
        let strings = |value: &serde_json::Value| -> Vec<String> {
            let mut list: Vec<String> = value
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|item| item.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            list.sort();
            list
        };
        let id = verdict["id"].as_str().unwrap_or("").to_string();
        let entry = incidents.entry(id).or_insert_with(|| Incident {
            opened_ms: event["time_ms"].as_i64().unwrap_or(0),
            ..Incident::default()
        });
        if event["state"] == "resolved" {
            entry.resolved = true;
        } else {
            entry.answer = (
                verdict["kind"].as_str().unwrap_or("").to_string(),
                strings(&verdict["dcs"]),
                strings(&verdict["hosts"]),
            );
        }
    }
    incidents
}

/// The anomalies a process stored as it first saw them (time ms, instance, metric, class,
/// peer, score), from the store its configuration at `config` names, for a failure message.
fn stored_anomalies(config: &Path) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["sql", "--format", "TabSeparated", "--config"])
        .arg(config)
        .arg("SELECT toUnixTimestamp64Milli(time), instance, metric, class, peer, round(score, 1) FROM anomalies ORDER BY time, instance LIMIT 100")
        .output();
    match output {
        Ok(output) => format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(error) => format!("epicenter sql did not run: {error}"),
    }
}

/// (kind, datacenters, hosts) of every incident, resolved or not.
fn answers(incidents: &BTreeMap<String, Incident>) -> BTreeSet<Answer> {
    incidents.values().map(|incident| incident.answer.clone()).collect()
}

#[test]
fn e2e_three_collectors_and_one_detector_name_what_one_unsharded_run_names() {
    if require(&[]).is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("epicenter-sharded-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let targets = dir.join("targets.json");
    let mut guard = Guard::default();
    let (server, server_port) = start_clickhouse_child(&dir, &mut guard);
    let shared = |name: &str| {
        format!(
            "  clickhouse: {{url: 'http://127.0.0.1:{server_port}'}}\n  spool: {{path: '{}'}}\n",
            dir.join(format!("spool-{name}")).display()
        )
    };
    let whole = format!("127.0.0.1:{}", free_port());
    let detector = format!("127.0.0.1:{}", free_port());
    start(
        &dir,
        "unsharded",
        &["run"],
        &config(
            &whole,
            &targets,
            &format!("  embedded: {{path: '{}'}}\n", dir.join("data").display()),
        ),
        &whole,
        &mut guard,
    );
    start(
        &dir,
        "detect",
        &["detect"],
        &config(&detector, &targets, &shared("detect")),
        &detector,
        &mut guard,
    );
    let mut collector_apis = Vec::new();
    for index in 0..3 {
        let api = format!("127.0.0.1:{}", free_port());
        collector_apis.push(api.clone());
        let shard = format!("{index}/3");
        let name = format!("collector-{index}");
        start(
            &dir,
            &name,
            &["run", "--shard", &shard, "--no-detector"],
            &config(&api, &targets, &shared(&name)),
            &api,
            &mut guard,
        );
    }
    // The fleet last, once everyone listens: its clock (and the fault's) starts with it. At 20×
    // the node dies 9 s after it starts and returns 12 s later.
    guard.0.push(start_fleet(20, &targets));
    let logs = || {
        ["unsharded", "detect", "collector-0", "collector-1", "collector-2"]
            .iter()
            .map(|name| {
                let text = std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                format!("--- {name}.log\n{}", lines[lines.len().saturating_sub(15)..].join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    // Both must have opened and resolved the node loss; then one more minute of the fleet's
    // clock (3 s) for anything else either would open.
    let settled = |api: &str| {
        let incidents = incidents(api);
        !incidents.is_empty() && incidents.values().all(|incident| incident.resolved)
    };
    let deadline = Instant::now() + Duration::from_secs(240);
    while !(settled(&whole) && settled(&detector)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    std::thread::sleep(Duration::from_secs(3));
    let (one, many) = (incidents(&whole), incidents(&detector));
    eprintln!("unsharded run: {one:?}\nthree collectors + detect: {many:?}");
    assert!(
        answers(&one).contains(&(
            "node_loss".to_string(),
            vec!["dc-2".to_string()],
            vec!["dc-2-host-3".to_string()]
        )),
        "the unsharded run did not name the node loss: {one:?}\n{}",
        logs()
    );
    // Each verdict event's evidence, for a failure message: time, state, kind, and the
    // anomalies as instance/metric.
    let evidence = |api: &str| -> String {
        let history = get_json(api, "/api/v1/verdicts")["data"]["history"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        history
            .iter()
            .map(|event| {
                let pieces: Vec<String> = event["verdict"]["evidence"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .iter()
                    .map(|anomaly| {
                        format!(
                            "{}/{}",
                            anomaly["instance"].as_str().unwrap_or("?"),
                            anomaly["metric"].as_str().unwrap_or("?")
                        )
                    })
                    .collect();
                format!(
                    "{} {} {}: {}",
                    event["time_ms"],
                    event["state"],
                    event["verdict"]["kind"],
                    pieces.join(", ")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        answers(&many),
        answers(&one),
        "the sharded run's incidents differ from the unsharded run's\nunsharded:\n{}\nsharded:\n{}\n{}\n--- anomalies the unsharded run stored (first rounds):\n{}--- anomalies detect stored:\n{}",
        evidence(&whole),
        evidence(&detector),
        logs(),
        stored_anomalies(&dir.join("unsharded.yml")),
        stored_anomalies(&dir.join("detect.yml"))
    );
    // Each opened within 10 s of the other's. The detector reads a scrape once its collector
    // flushed it (batching.max_age 250 ms), its next poll ran (every half tick, 250 ms) and it
    // lies a hold (an interval) behind the newest read, and a collector that writes late holds
    // the rounds back: about 0.5 s here on a quiet machine, 6 s once beside three busy threads.
    let opened = |incidents: &BTreeMap<String, Incident>| {
        let mut times: Vec<(Answer, i64)> = incidents
            .values()
            .map(|incident| (incident.answer.clone(), incident.opened_ms))
            .collect();
        times.sort();
        times
    };
    for (unsharded, sharded) in opened(&one).iter().zip(opened(&many)) {
        eprintln!(
            "{:?}: opened {} ms after the unsharded run",
            sharded.0,
            sharded.1 - unsharded.1
        );
        assert!(
            (unsharded.1 - sharded.1).abs() <= 10_000,
            "opened at {} unsharded and {} sharded: {unsharded:?} {sharded:?}",
            unsharded.1,
            sharded.1
        );
    }
    // The shards' targets add up to the unsharded run's (which shard takes which target is
    // tests/cli_run_sql.rs's).
    let active: Vec<usize> = collector_apis
        .iter()
        .map(|api| {
            get_json(api, "/api/v1/targets")["data"]["activeTargets"]
                .as_array()
                .map_or(0, Vec::len)
        })
        .collect();
    let all = get_json(&whole, "/api/v1/targets")["data"]["activeTargets"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(
        active.iter().sum::<usize>(),
        all,
        "shards {active:?} against {all} targets"
    );
    let log = std::fs::read_to_string(dir.join("detect.log")).unwrap_or_default();
    assert!(log.contains("detecting from what the collectors store"), "{log}");
    // The store stalls for 12 s (24 intervals): every target falls silent for the detector,
    // which is epicenter's loss, not the fleet's: no new incident, and the log says that the
    // store did not answer (a poll gives up after 10 s).
    let before = incidents(&detector).len();
    signal(&guard.0[server], Signal::SIGSTOP);
    std::thread::sleep(Duration::from_secs(12));
    signal(&guard.0[server], Signal::SIGCONT);
    std::thread::sleep(Duration::from_secs(5));
    let after = incidents(&detector);
    assert_eq!(
        after.len(),
        before,
        "the detector judged the store's stall: {after:?}\n{}",
        logs()
    );
    let log = std::fs::read_to_string(dir.join("detect.log")).unwrap_or_default();
    assert!(
        log.contains("the store did not answer the detector's poll (reading ")
            && log.contains(": no answer within 10s)"),
        "{log}"
    );
    drop(guard);
    let _ = std::fs::remove_dir_all(&dir);
}
