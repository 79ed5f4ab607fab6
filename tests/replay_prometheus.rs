//! Issue 18: `epicenter replay --prometheus` against the real Prometheus 2.42 (Debian
//! package). The seven shipped fault scenarios are run on the simulated fleet headless, an
//! hour apart on one time line; every exporter's every sample, with the labels a scrape would attach (`job`,
//! `instance`, and the file_sd labels `dc`, `host`, `service`, `pod`), is written as
//! OpenMetrics and backfilled with `promtool tsdb create-blocks-from openmetrics`; Prometheus
//! serves the blocks on 127.0.0.1. For each scenario, `replay --prometheus` over its ten
//! minutes must name what `epicenter eval` names on the same scenario: the same kind,
//! datacenter and first host, opened within one scrape interval of eval's time to detect; and
//! one replay of the whole span (hours, in half-hour windows fed one by one) opens the same
//! incidents, each within its scenario.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use epicenter_collector::exposition::{parse, FormatChoice, ParseOptions, Validation};
use epicenter_fleet::{Fleet, Scenario};

mod common;
use common::{free_port, require, spawn, wait_port, Guard};

/// The scenarios, each started an hour after the one before, from this time (2026-05-28):
/// every shipped one with a fault.
const SCENARIOS: [&str; 7] = [
    "redis-node-loss",
    "redis-slow-node",
    "backend-cold-start",
    "db-pool-exhaustion",
    "api-retry-storm",
    "dc-network-degradation",
    "zone-session-loss",
];
const FIRST_START_MS: i64 = 1_780_000_000_000;

/// Series name → series labels (in OpenMetrics form) → (ms, value), of every scenario.
type Samples = BTreeMap<String, BTreeMap<String, Vec<(i64, f64)>>>;

/// Runs `scenario` from `start_ms` and adds what every exporter printed at every scrape.
fn record(scenario: &Scenario, start_ms: i64, samples: &mut Samples) {
    let mut fleet = Fleet::new(scenario, start_ms);
    let interval = scenario.scrape_interval.0.as_secs();
    let end = scenario.duration.0.as_secs();
    let instances = fleet.instances().to_vec();
    while fleet.second() < end {
        fleet.step();
        if fleet.second() % interval != 0 {
            continue;
        }
        for (index, instance) in instances.iter().enumerate() {
            let text = fleet.render(index);
            let options = ParseOptions {
                format: FormatChoice::Text,
                validation: Validation::Prometheus,
            };
            let exposition = parse(text.as_bytes(), options).unwrap();
            let target = [
                ("job", "fleet".to_string()),
                ("instance", format!("127.0.0.1:{}", 20_000 + index)),
                ("dc", instance.dc.clone()),
                ("host", instance.host.clone()),
                ("service", instance.service.name().to_string()),
                ("pod", instance.name.clone()),
            ];
            for sample in &exposition.samples {
                let mut labels = exposition.label_map(sample);
                for (name, value) in &target {
                    labels.insert((*name).to_string(), value.clone());
                }
                let mut key = String::new();
                for (name, value) in &labels {
                    let value = value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
                    let _ = write!(key, "{}{name}=\"{value}\"", if key.is_empty() { "" } else { "," });
                }
                let time_ms = sample.timestamp_ms().unwrap_or(fleet.now_ms());
                samples
                    .entry(sample.name.to_string())
                    .or_default()
                    .entry(key)
                    .or_default()
                    .push((time_ms, sample.value));
            }
        }
    }
}

/// `samples` as OpenMetrics text: one `unknown` family per series name (so no family's name
/// has to differ from its samples', as a counter's `_total` would), timestamps in seconds.
fn openmetrics(samples: &Samples) -> String {
    let mut text = String::new();
    for (name, series) in samples {
        let _ = writeln!(text, "# TYPE {name} unknown");
        for (labels, points) in series {
            for (time_ms, value) in points {
                let value = if value.is_nan() {
                    "NaN".to_string()
                } else if value.is_infinite() {
                    if *value > 0.0 { "+Inf" } else { "-Inf" }.to_string()
                } else {
                    format!("{value}")
                };
                let _ = writeln!(
                    text,
                    "{name}{{{labels}}} {value} {}.{:03}",
                    time_ms / 1000,
                    time_ms % 1000
                );
            }
        }
    }
    text.push_str("# EOF\n");
    text
}

/// Backfills `samples` into a TSDB in `dir` (`promtool tsdb create-blocks-from openmetrics`)
/// and serves it with Prometheus (`binaries`: prometheus, promtool) on a free loopback port,
/// until the guard is dropped.
fn serve_backfilled(binaries: &[std::path::PathBuf], dir: &std::path::Path, samples: &Samples) -> (Guard, u16) {
    let file = dir.join("fleet.om");
    std::fs::write(&file, openmetrics(samples)).unwrap();
    let blocks = dir.join("tsdb");
    let backfill = Command::new(&binaries[1])
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&file)
        .arg(&blocks)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(
        backfill.status.success(),
        "promtool: {}",
        String::from_utf8_lossy(&backfill.stderr)
    );
    std::fs::write(dir.join("prometheus.yml"), "global: {scrape_interval: 1m}\n").unwrap();
    let port = free_port();
    let mut guard = Guard::default();
    guard.keep(spawn(
        Command::new(&binaries[0])
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", blocks.display()))
            // The blocks are months old: the default 15 days' retention would delete them.
            .arg("--storage.tsdb.retention.time=100y")
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap()),
    ));
    assert!(wait_port(port, Duration::from_secs(60)), "prometheus did not start");
    (guard, port)
}

fn run(arguments: &[&str]) -> (String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(arguments)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(output.status.success(), "epicenter {arguments:?}: {stderr}");
    (String::from_utf8_lossy(&output.stdout).to_string(), stderr)
}

fn rfc3339(ms: i64) -> String {
    humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_millis(ms as u64)).to_string()
}

#[test]
fn replay_from_prometheus_names_what_eval_names() {
    let Some(binaries) = require(&["prometheus", "promtool"]) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("epicenter-replay-prometheus-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut samples = Samples::new();
    let mut scenarios = Vec::new();
    for (index, name) in SCENARIOS.iter().enumerate() {
        let scenario = Scenario::load(name).unwrap();
        let start_ms = FIRST_START_MS + index as i64 * 3_600_000;
        record(&scenario, start_ms, &mut samples);
        scenarios.push((scenario, start_ms));
    }
    let (guard, port) = serve_backfilled(&binaries, &dir, &samples);
    // The simulated fleet's placement and call graph, as the demo's configuration has them.
    let config = dir.join("epicenter.yml");
    std::fs::write(
        &config,
        "placement: {instance_label: pod}\ndetector:\n  dependencies:\n    - {caller: api, callee: backend, same_dc: true}\n    - {caller: backend, callee: redis}\n    - {caller: backend, callee: db, same_dc: true}\n    - {caller: gateway, callee: voice, same_dc: true}\n    - {caller: voice, callee: media, same_dc: true}\n",
    )
    .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    // `replay --prometheus` over (from, to), ms: its JSON lines and its stderr.
    let replay = |(from_ms, to_ms): (i64, i64)| {
        run(&[
            "replay",
            "--json",
            "--config",
            config.to_str().unwrap(),
            "--prometheus",
            &url,
            "--from",
            &rfc3339(from_ms),
            "--to",
            &rfc3339(to_ms),
        ])
    };
    let mut each_alone = Vec::new();
    for (scenario, start_ms) in &scenarios {
        let (report, _) = run(&["eval", "--json", &scenario.name]);
        let report: serde_json::Value = serde_json::from_str(&report).unwrap();
        let incident = &report["scenarios"][0]["incidents"][0];
        let truth = &report["scenarios"][0]["truth"][0];
        let expected = &incident["verdict"];
        assert!(
            expected.is_object(),
            "eval names nothing on {}: {report}",
            scenario.name
        );
        let interval_ms = scenario.scrape_interval.0.as_millis() as i64;
        let onset_offset_ms = truth["onset_ms"].as_i64().unwrap() - FIRST_START_MS;
        let eval_detect_ms =
            onset_offset_ms + (incident["intervals_to_detect"].as_f64().unwrap() * interval_ms as f64) as i64;

        let end_ms = start_ms + scenario.duration.0.as_millis() as i64;
        let (events, progress) = replay((*start_ms, end_ms));
        assert!(progress.contains("replay: read 1/1 windows"), "{progress}");
        let opened: Vec<serde_json::Value> = events
            .lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
            .filter(|event| event["state"] == "opened")
            .collect();
        eprintln!(
            "{}: eval {} {} {} at +{} ms; replay opened {:?}",
            scenario.name,
            expected["kind"],
            expected["dc"],
            expected["hosts"][0],
            eval_detect_ms,
            opened
                .iter()
                .map(|event| format!(
                    "{} {} {} at +{} ms",
                    event["verdict"]["kind"],
                    event["verdict"]["dc"],
                    event["verdict"]["hosts"][0],
                    event["time_ms"].as_i64().unwrap() - start_ms
                ))
                .collect::<Vec<_>>()
        );
        assert_eq!(opened.len(), 1, "{}: {events}", scenario.name);
        let verdict = &opened[0]["verdict"];
        assert_eq!(verdict["kind"], expected["kind"], "{}", scenario.name);
        assert_eq!(verdict["dc"], expected["dc"], "{}", scenario.name);
        assert_eq!(verdict["hosts"][0], expected["hosts"][0], "{}", scenario.name);
        each_alone.push((
            format!("{} {} {}", verdict["kind"], verdict["dc"], verdict["hosts"][0]),
            opened[0]["time_ms"].as_i64().unwrap(),
        ));
        let replay_detect_ms = opened[0]["time_ms"].as_i64().unwrap() - start_ms;
        assert!(
            (replay_detect_ms - eval_detect_ms).abs() <= interval_ms,
            "{}: replay opened at +{replay_detect_ms} ms, eval at +{eval_detect_ms} ms",
            scenario.name
        );
    }
    // The whole span at once, hours of it in half-hour windows fed one by one: the same
    // incidents, in order.
    let last_end_ms = scenarios
        .iter()
        .map(|(scenario, start_ms)| start_ms + scenario.duration.0.as_millis() as i64)
        .max()
        .unwrap();
    let (events, progress) = replay((FIRST_START_MS, last_end_ms));
    let windows = (last_end_ms - FIRST_START_MS + 1_799_999) / 1_800_000;
    assert!(
        progress.contains(&format!("replay: read {windows}/{windows} windows")),
        "{progress}"
    );
    let opened: Vec<(String, i64)> = events
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|event| event["state"] == "opened")
        .map(|event| {
            (
                format!(
                    "{} {} {}",
                    event["verdict"]["kind"], event["verdict"]["dc"], event["verdict"]["hosts"][0]
                ),
                event["time_ms"].as_i64().unwrap(),
            )
        })
        .collect();
    // The detector's baselines now reach back into the scenario before (the same instance
    // names, a fleet restarted after 50 quiet minutes), so an incident may open a few rounds
    // later than alone; each within its own scenario's ten minutes.
    let kinds = |list: &[(String, i64)]| list.iter().map(|(what, _)| what.clone()).collect::<Vec<_>>();
    assert_eq!(
        kinds(&opened),
        kinds(&each_alone),
        "the whole span against each scenario alone"
    );
    for ((what, at), (_, start_ms)) in opened.iter().zip(&scenarios) {
        assert!(
            (*start_ms..start_ms + 600_000).contains(at),
            "{what} opened at {at}, outside its scenario"
        );
    }
    // `--write` into a new embedded store: the events replay printed, in `replayed_verdicts`.
    let store = dir.join("replayed");
    let (written_events, progress) = run(&[
        "replay",
        "--json",
        "--write",
        "--config",
        config.to_str().unwrap(),
        "--data",
        store.to_str().unwrap(),
        "--prometheus",
        &url,
        "--from",
        &rfc3339(FIRST_START_MS),
        "--to",
        &rfc3339(last_end_ms),
    ]);
    assert_eq!(written_events, events, "replay --write printed other events");
    let count = events.lines().count();
    assert!(
        progress.contains(&format!("replay: {count} verdict events appended to replayed_verdicts")),
        "{progress}"
    );
    let stored = common::sql_rows(
        &store,
        "SELECT kind, dc, hosts[1], toUnixTimestamp64Milli(time) FROM replayed_verdicts WHERE state = 'opened' ORDER BY time",
    );
    let expected: Vec<Vec<String>> = opened
        .iter()
        .map(|(what, at)| {
            let mut fields: Vec<String> = what
                .split(' ')
                .map(|field| field.trim_matches('"').to_string())
                .collect();
            fields.push(at.to_string());
            fields
        })
        .collect();
    assert_eq!(stored, expected, "replayed_verdicts");
    let runs = common::sql_rows(
        &store,
        "SELECT uniqExact(run_id), any(source), toUnixTimestamp64Milli(any(period_from)), toUnixTimestamp64Milli(any(period_to)) FROM replayed_verdicts",
    );
    assert_eq!(
        runs,
        [[
            "1".to_string(),
            "prometheus".to_string(),
            FIRST_START_MS.to_string(),
            last_end_ms.to_string()
        ]],
        "{runs:?}"
    );
    // Writing needs a store named: without --data or --config, nothing is read or written.
    let unnamed = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["replay", "--write", "--prometheus", &url, "--from"])
        .arg(rfc3339(FIRST_START_MS))
        .arg("--to")
        .arg(rfc3339(last_end_ms))
        .current_dir(&dir)
        .output()
        .unwrap();
    assert_eq!(
        unnamed.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&unnamed.stderr)
    );
    assert!(!dir.join("data").exists(), "a store was made in the current directory");
    drop(guard);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 38: a replay of a Prometheus server never takes a gap in a series for a lost target,
/// and reads the server's own `up`. Four `web` instances (placed by `pod`, each on its own
/// host) serve a request counter scraped every 15 s for 80 minutes, twice a day apart: the
/// first time with Prometheus's `up` for every scrape, `web-2`'s counter missing for 3
/// minutes (a backfill's missing cells: `up` stays 1) and `web-3` down from minute 60 (`up`
/// 0, its counter gone), as Prometheus records a target that stops answering; the second
/// time without any `up` (data converted from elsewhere) and only `web-2`'s gap. The first
/// period opens one incident, on `web-3`, from its `up` series; the second opens nothing.
#[test]
fn replay_from_prometheus_reads_up_and_takes_no_gap_for_a_lost_target() {
    let Some(binaries) = require(&["prometheus", "promtool"]) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("epicenter-replay-gaps-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    const INTERVAL_MS: i64 = 15_000;
    const MINUTES: i64 = 80;
    let with_up_ms = FIRST_START_MS - 3 * 86_400_000;
    let without_up_ms = with_up_ms + 86_400_000;
    let minute = |start: i64, at: i64| start + at * 60_000;
    let mut samples = Samples::new();
    // A deterministic spread of about ±4 % around 100 requests per second.
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut noise = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % 1000) as f64 / 1000.0 - 0.5
    };
    for (start, with_up) in [(with_up_ms, true), (without_up_ms, false)] {
        for index in 1..=4 {
            let target = format!(
                "dc=\"dc-1\",host=\"h-{index}\",instance=\"10.0.0.{index}:8080\",job=\"web\",pod=\"web-{index}\",service=\"web\""
            );
            let mut total = 1_000.0 * f64::from(index);
            let mut time_ms = start;
            while time_ms < minute(start, MINUTES) {
                total += (100.0 + 8.0 * noise()) * (INTERVAL_MS / 1000) as f64;
                let down = with_up && index == 3 && time_ms >= minute(start, 60);
                let missing = index == 2 && (minute(start, 50)..minute(start, 53)).contains(&time_ms);
                if with_up {
                    samples
                        .entry("up".to_string())
                        .or_default()
                        .entry(target.clone())
                        .or_default()
                        .push((time_ms, if down { 0.0 } else { 1.0 }));
                }
                if !down && !missing {
                    samples
                        .entry("http_requests_total".to_string())
                        .or_default()
                        .entry(format!("code=\"200\",{target},method=\"GET\""))
                        .or_default()
                        .push((time_ms, total.floor()));
                }
                time_ms += INTERVAL_MS;
            }
        }
    }
    let (guard, port) = serve_backfilled(&binaries, &dir, &samples);
    let config = dir.join("epicenter.yml");
    std::fs::write(&config, "placement: {instance_label: pod}\n").unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let opened = |start_ms: i64| -> Vec<serde_json::Value> {
        let (events, progress) = run(&[
            "replay",
            "--json",
            "--config",
            config.to_str().unwrap(),
            "--prometheus",
            &url,
            "--from",
            &rfc3339(start_ms),
            "--to",
            &rfc3339(minute(start_ms, MINUTES)),
        ]);
        assert!(progress.contains("replay: read 3/3 windows"), "{progress}");
        events
            .lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
            .filter(|event| event["state"] == "opened")
            .collect()
    };
    let with_up = opened(with_up_ms);
    assert_eq!(with_up.len(), 1, "{with_up:#?}");
    let verdict = &with_up[0]["verdict"];
    assert_eq!(verdict["instances"][0], "web-3", "{verdict:#}");
    assert_eq!(verdict["hosts"][0], "h-3", "{verdict:#}");
    let at = with_up[0]["time_ms"].as_i64().unwrap();
    assert!(
        (minute(with_up_ms, 60)..minute(with_up_ms, 62)).contains(&at),
        "opened {} ms after the target went down",
        at - minute(with_up_ms, 60)
    );
    // The evidence is the server's `up` series (its labels), not a silence.
    let evidence = verdict["evidence"].as_array().unwrap();
    assert!(
        evidence.iter().any(|anomaly| anomaly["instance"] == "web-3"
            && anomaly["metric"] == "up"
            && anomaly["labels"]["job"] == "web"
            && anomaly["value"] == 0.0),
        "{evidence:#?}"
    );
    let without_up = opened(without_up_ms);
    assert!(without_up.is_empty(), "a gap opened {without_up:#?}");
    drop(guard);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 38: `replay --prometheus` warns, with each rule's key path, about rules whose kind
/// does not fit the family the server has, and goes on. Prometheus scrapes a target of the
/// test's (so it has metadata, which backfilled data lacks) printing a latency as quantile
/// gauges (a mesh's windowed quantiles; no `_sum` or `_count`) and a queue depth as a gauge;
/// the rules read the first as a mean and as one gauge for all quantiles, the second as a
/// counter and, rightly, as a gauge.
#[test]
fn replay_from_prometheus_warns_when_a_rule_s_kind_does_not_fit_the_family() {
    use std::io::{BufRead, BufReader, Write};
    let Some(binaries) = require(&["prometheus"]) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("epicenter-replay-kinds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let target = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let target_address = target.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let body = "# TYPE rpc_latency_seconds gauge\nrpc_latency_seconds{quantile=\"0.5\"} 0.012\nrpc_latency_seconds{quantile=\"0.9\"} 0.031\n# TYPE queue_depth gauge\nqueue_depth 7\n";
        for stream in target.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|read| read > 0) && line != "\r\n" {
                line.clear();
            }
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    std::fs::write(
        dir.join("prometheus.yml"),
        format!("global: {{scrape_interval: 1s}}\nscrape_configs:\n  - job_name: app\n    static_configs: [{{targets: ['{target_address}'], labels: {{pod: app-1}}}}]\n"),
    )
    .unwrap();
    let port = free_port();
    let mut guard = Guard::default();
    guard.keep(spawn(
        Command::new(&binaries[0])
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap()),
    ));
    assert!(wait_port(port, Duration::from_secs(60)), "prometheus did not start");
    let url = format!("http://127.0.0.1:{port}");
    // Until a scrape has given the server its metadata.
    let started = std::time::Instant::now();
    loop {
        let metadata = common::get_text(&format!("127.0.0.1:{port}"), "/api/v1/metadata?metric=queue_depth");
        if metadata.contains("\"gauge\"") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no metadata: {metadata}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let rules = dir.join("app-signals.yml");
    std::fs::write(
        &rules,
        "signals:\n  - {metric: rpc_latency_seconds, kind: mean, class: latency, bad: up, floor: 0.01}\n  - {metric: rpc_latency_seconds, kind: gauge, class: latency, bad: up, floor: 0.01}\n  - {metric: queue_depth, kind: counter, class: saturation, bad: up, floor: 1}\n  - {metric: queue_depth, kind: gauge, class: saturation, bad: up, floor: 1}\n",
    )
    .unwrap();
    let config = dir.join("epicenter.yml");
    std::fs::write(
        &config,
        "placement: {instance_label: pod}\ndetector: {rules_file: app-signals.yml}\n",
    )
    .unwrap();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let (_, stderr) = run(&[
        "replay",
        "--config",
        config.to_str().unwrap(),
        "--prometheus",
        &url,
        "--from",
        &rfc3339(now_ms - 120_000),
        "--to",
        &rfc3339(now_ms),
    ]);
    let source = format!("warning: detector.rules_file {}", rules.display());
    let warnings: Vec<&str> = stderr.lines().filter(|line| line.starts_with("warning:")).collect();
    assert_eq!(warnings.len(), 3, "{stderr}");
    assert!(
        warnings[0].starts_with(&format!("{source}: signals[0]: kind: mean reads rpc_latency_seconds_sum and rpc_latency_seconds_count, which the server does not have"))
            && warnings[0].contains("`kind: gauge` rule on rpc_latency_seconds with `match: {quantile: \"0.9\"}`"),
        "{stderr}"
    );
    assert!(
        warnings[1].starts_with(&format!("{source}: signals[1]: the server's rpc_latency_seconds series carry a `quantile` label this rule does not match on")),
        "{stderr}"
    );
    assert!(
        warnings[2].starts_with(&format!("{source}: signals[2]: kind: counter reads the rate of queue_depth, which the server's metadata types as a gauge")),
        "{stderr}"
    );
    // The replay went on.
    assert!(stderr.contains("replay: read 1/1 windows"), "{stderr}");
    drop(guard);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--prometheus-config` authenticates as a scrape_config does: a server that wants HTTP
/// Basic gets it (and answers), a wrong password is refused with the server's status named
/// and the password never printed; a setting that is not a scrape_config key is named.
#[test]
fn replay_from_prometheus_authenticates_as_a_scrape_config_does() {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let wanted = {
        use base64::Engine;
        format!(
            "authorization: basic {}",
            base64::engine::general_purpose::STANDARD.encode("replayer:s3cret-pass")
        )
    };
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut authorized = false;
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|read| read > 0) && line != "\r\n" {
                authorized |= line.trim().eq_ignore_ascii_case(&wanted);
                line.clear();
            }
            let (status, body) = if authorized {
                (
                    "200 OK",
                    r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#,
                )
            } else {
                ("401 Unauthorized", "Unauthorized\n")
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let dir = std::env::temp_dir().join(format!("epicenter-replay-auth-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let replay = |password: &str, extra: &str| {
        std::fs::write(dir.join("password"), password).unwrap();
        let settings = dir.join("prometheus.yml");
        std::fs::write(
            &settings,
            format!(
                "basic_auth: {{username: replayer, password_file: {}}}\n{extra}",
                dir.join("password").display()
            ),
        )
        .unwrap();
        Command::new(env!("CARGO_BIN_EXE_epicenter"))
            .args(["replay", "--prometheus", &url, "--prometheus-config"])
            .arg(&settings)
            .args(["--from", "2026-05-28T20:00:00Z", "--to", "2026-05-28T20:10:00Z"])
            .output()
            .unwrap()
    };
    let right = replay("s3cret-pass\n", "");
    let stderr = String::from_utf8_lossy(&right.stderr);
    assert!(right.status.success(), "{stderr}");
    assert!(stderr.contains("holds none of the"), "{stderr}");
    let wrong = replay("guessed", "");
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert_eq!(wrong.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("HTTP 401"), "{stderr}");
    assert!(!stderr.contains("guessed") && !stderr.contains("s3cret"), "{stderr}");
    // A relative `password_file` is read from the settings file's folder, not from where
    // epicenter runs (issue 38).
    std::fs::write(dir.join("password"), "s3cret-pass\n").unwrap();
    let relative = dir.join("relative.yml");
    std::fs::write(&relative, "basic_auth: {username: replayer, password_file: password}\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["replay", "--prometheus", &url, "--prometheus-config"])
        .arg(&relative)
        .args(["--from", "2026-05-28T20:00:00Z", "--to", "2026-05-28T20:10:00Z"])
        .current_dir("/")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("holds none of the"), "{stderr}");
    let typo = replay("s3cret-pass", "bearer_tokn_file: /etc/token\n");
    let stderr = String::from_utf8_lossy(&typo.stderr);
    assert_eq!(typo.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("bearer_tokn_file"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
