//! Issue 38: `epicenter eval` on real labelled incidents, replayed from a real Prometheus.
//!
//! The realdev data in ../shared (`EPICENTER_SHARED`: Sock Shop container chaos, Nezha's
//! OnlineBoutique and TrainTicket days) is turned into OpenMetrics with the dataset's own
//! python converters, backfilled with `promtool tsdb create-blocks-from openmetrics` and
//! served by Prometheus 2.42 on free ports (both sets at once, once for this binary; stopped
//! when the test ends). `epicenter eval --dataset sockshop|nezha … --json` then runs against
//! them, and the test checks what the harness must get right, each independently of it: the
//! number of cases, every case's truth against the label files (parsed here again), the naive
//! reference's ranking of one case per set recomputed here from the raw series read through
//! Prometheus's query API, and every matched incident inside its case's window. The
//! detector's own figures are held to the floors of [`ACCEPTANCE`] (what it reaches today).

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{find, free_port, spawn, Guard};

// === What the detector must keep on this data ===
//
// The floors below are what the detector reached on 2026-12-07 (shipped rules, no
// configuration: docs/detector.md, "Real incidents"), less one case's share or so of slack, so
// that a change that loses real incidents fails here. They are not issue 38's targets (Sock
// Shop service top-1 0.8 with 90 % of the quiet gaps clean; Nezha service top-1 and host AC@1
// 0.7 on both days), which the detector does not reach yet: the test prints each figure beside
// its target. Raise a floor when the detector gains; never lower one without saying why in
// docs/detector.md.

/// What one set must keep.
struct Acceptance {
    /// The set's name in the report (`sockshop`, `nezha-ob`, `nezha-tt`).
    set: &'static str,
    /// Least share of cases whose incident names the right service.
    min_service_top1: Option<f64>,
    /// Least host AC@1 over the cases with a known host.
    min_host_ac1: Option<f64>,
    /// Least share of cases with a right kind.
    min_kind_accuracy: Option<f64>,
    /// Most minutes to detect, median over the matched cases.
    max_median_minutes_to_detect: Option<f64>,
    /// Most false verdicts over the set.
    max_false_verdicts: Option<u64>,
    /// Least share of quiet gaps without a false verdict.
    min_quiet_gap_share_clean: Option<f64>,
    /// Issue 38's target for service top-1 (printed beside the figure, not asserted).
    target_service_top1: f64,
}

const ACCEPTANCE: [Acceptance; 3] = [
    // 94 cases (53 with a known host), 93 quiet gaps. Reached: 0.53, 0.60, 0.53, 1.7 min, 0, 1.00.
    Acceptance {
        set: "sockshop",
        min_service_top1: Some(0.51),
        min_host_ac1: Some(0.57),
        min_kind_accuracy: Some(0.51),
        max_median_minutes_to_detect: Some(2.5),
        max_false_verdicts: Some(2),
        min_quiet_gap_share_clean: Some(0.95),
        target_service_top1: 0.8,
    },
    // 24 cases, 3 quiet gaps. Reached: 0.38, 0.38, 0.29, 1.6 min, 1 false verdict.
    Acceptance {
        set: "nezha-ob",
        min_service_top1: Some(0.33),
        min_host_ac1: Some(0.33),
        min_kind_accuracy: Some(0.25),
        max_median_minutes_to_detect: Some(2.5),
        max_false_verdicts: Some(3),
        min_quiet_gap_share_clean: None,
        target_service_top1: 0.7,
    },
    // 28 cases, 5 quiet gaps. Reached: 0.14, 0.14, 0.14, 2.0 min, 13 false verdicts (CPU
    // saturations of busy Java pods, several after the last labelled fault: docs/detector.md).
    Acceptance {
        set: "nezha-tt",
        min_service_top1: Some(0.10),
        min_host_ac1: Some(0.10),
        min_kind_accuracy: Some(0.10),
        max_median_minutes_to_detect: Some(3.0),
        max_false_verdicts: Some(16),
        min_quiet_gap_share_clean: None,
        target_service_top1: 0.7,
    },
];

// === The servers ===

/// The realdev folder, or None outside CI when it is missing (in CI: a failure).
fn realdev() -> Option<PathBuf> {
    let shared = std::env::var_os("EPICENTER_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared")));
    let dir = shared.join("datasets/realdev");
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(std::env::var_os("CI").is_none(), "{} missing in CI", dir.display());
    eprintln!("SKIPPED for lack of test data: {} not found", dir.display());
    None
}

/// prometheus, promtool and python3, or None outside CI when one is missing.
fn programs() -> Option<[PathBuf; 3]> {
    let names = ["prometheus", "promtool", "python3"];
    let found: Vec<Option<PathBuf>> = names.iter().map(|name| find(name)).collect();
    if found.iter().any(Option::is_none) {
        let missing: Vec<&str> = names
            .iter()
            .zip(&found)
            .filter(|(_, f)| f.is_none())
            .map(|(n, _)| *n)
            .collect();
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs {missing:?} (scripts/test installs them)"
        );
        eprintln!("SKIPPED: {missing:?} missing (apt-get install prometheus python3)");
        return None;
    }
    let [a, b, c] = [found[0].clone(), found[1].clone(), found[2].clone()];
    Some([a.unwrap(), b.unwrap(), c.unwrap()])
}

/// Removes a folder when dropped (after the servers in it are stopped: declare it first).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run_ok(command: &mut Command, what: &str) {
    let output = command.stdout(Stdio::null()).output().unwrap();
    assert!(
        output.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Converts one set with its python converter (`script IN OUT ARGS…`, the README's command),
/// backfills it and serves it on a free port: the Prometheus child and its port. The
/// OpenMetrics file (hundreds of MB) is removed once backfilled.
fn serve(
    name: &str,
    script: &Path,
    input: &Path,
    args: &[String],
    programs: &[PathBuf; 3],
    dir: &Path,
) -> (Child, u16) {
    let om = dir.join(format!("{name}.om"));
    let tsdb = dir.join(format!("{name}-tsdb"));
    let started = Instant::now();
    run_ok(
        Command::new(&programs[2]).arg(script).arg(input).arg(&om).args(args),
        &format!("{} {name}", script.display()),
    );
    let converted = started.elapsed();
    run_ok(
        Command::new(&programs[1])
            .args(["tsdb", "create-blocks-from", "openmetrics"])
            .arg(&om)
            .arg(&tsdb),
        &format!("promtool create-blocks-from openmetrics {name}"),
    );
    let _ = std::fs::remove_file(&om);
    eprintln!(
        "{name}: converted in {:.0} s, backfilled in {:.0} s",
        converted.as_secs_f64(),
        (started.elapsed() - converted).as_secs_f64()
    );
    let config = dir.join(format!("{name}-prometheus.yml"));
    // No scrape jobs: the server only serves the backfilled blocks.
    std::fs::write(&config, "global: {scrape_interval: 1m}\nscrape_configs: []\n").unwrap();
    // A free port may be taken before Prometheus binds it (tests run side by side): retry.
    for _ in 0..5 {
        let port = free_port();
        let mut guard = Guard::default();
        guard.keep(spawn(
            Command::new(&programs[0])
                .arg(format!("--config.file={}", config.display()))
                .arg(format!("--storage.tsdb.path={}", tsdb.display()))
                // The blocks are years old: retention counts from the newest block, and 100y
                // keeps them whatever is written.
                .arg("--storage.tsdb.retention.time=100y")
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.join(format!("{name}-prometheus.log"))).unwrap()),
        ));
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if matches!(guard.0[0].try_wait(), Ok(Some(_))) {
                break;
            }
            let ready = common::get_text(&format!("127.0.0.1:{port}"), "/-/ready");
            if ready.starts_with("HTTP/1.1 200") && ready.contains("Prometheus") {
                return (guard.0.pop().unwrap(), port);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let log = std::fs::read_to_string(dir.join(format!("{name}-prometheus.log"))).unwrap_or_default();
        eprintln!("{name}: prometheus on {port} did not become ready; retrying on another port:\n{log}");
    }
    panic!("{name}: prometheus did not start");
}

/// POSTs the instant query `query` at `time_ms` to the Prometheus on `port` (HTTP/1.0, so the
/// answer is never chunked): its `data.result`.
fn query(port: u16, query: &str, time_ms: i64) -> Vec<serde_json::Value> {
    let encode = |text: &str| -> String {
        text.bytes()
            .map(|byte| match byte {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (byte as char).to_string(),
                _ => format!("%{byte:02X}"),
            })
            .collect()
    };
    let body = format!("query={}&time={}.{:03}", encode(query), time_ms / 1000, time_ms % 1000);
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "POST /api/v1/query HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let response = String::from_utf8(response).unwrap();
    let (_, json) = response.split_once("\r\n\r\n").unwrap();
    let answer: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(answer["status"], "success", "{query}: {answer}");
    answer["data"]["result"].as_array().unwrap().clone()
}

// === Truth, read again from the label files ===

/// A case as the label files say: id, start and end (ms), service, instance, host, fault
/// type, kinds.
type Truth = (String, i64, i64, String, String, Option<String>, String, Vec<String>);

fn kinds(fault_type: &str) -> Vec<String> {
    let kinds: &[&str] = match fault_type {
        "cpu-stress" | "cpu_contention" | "cpu_consumed" => &["cpu_saturation", "cpu_throttling"],
        "memory-stress" => &["memory_pressure"],
        "network-delay" | "network_delay" => &["network_delay"],
        "return" | "exception" => &["code_defect"],
        other => panic!("fault type {other} unknown to the test"),
    };
    kinds.iter().map(|kind| kind.to_string()).collect()
}

fn utc_ms(text: &str) -> i64 {
    let time = humantime::parse_rfc3339_weak(text).unwrap_or_else(|error| panic!("{text}: {error}"));
    time.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// The rows of a CSV file without quoted commas: header → cell, per row.
fn rows(path: &Path) -> Vec<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines().filter(|line| !line.is_empty());
    let split =
        |line: &str| -> Vec<String> { line.split(',').map(|cell| cell.trim_matches('"').to_string()).collect() };
    let header = split(lines.next().unwrap());
    lines
        .map(|line| header.iter().cloned().zip(split(line)).collect())
        .collect()
}

fn sockshop_truth(realdev: &Path) -> Vec<Truth> {
    let hosts: BTreeMap<String, String> =
        rows(&realdev.join("sock-shop/derived/container_chaos_inferred_placement.csv"))
            .into_iter()
            .filter(|row| !row["inferred_vm"].is_empty())
            .map(|row| (row["pod"].clone(), row["inferred_vm"].clone()))
            .collect();
    rows(&realdev.join("sock-shop/new-version/test/container-chaos/container-chaos-info.csv"))
        .into_iter()
        .enumerate()
        .map(|(at, row)| {
            let start = utc_ms(&row["timestamp"].replace(' ', "T"));
            let minutes: i64 = row["duration"].strip_suffix('m').unwrap().parse().unwrap();
            let pod = row["target"].clone();
            let parts: Vec<&str> = pod.split('-').collect();
            (
                format!("sockshop-{:02}", at + 1),
                start,
                start + minutes * 60_000,
                parts[..parts.len() - 2].join("-"),
                pod.clone(),
                hosts.get(&pod).cloned(),
                row["fault-type"].clone(),
                kinds(&row["fault-type"]),
            )
        })
        .collect()
}

fn nezha_truth(realdev: &Path, system: &str) -> Vec<Truth> {
    rows(&realdev.join("nezha/derived/cases.csv"))
        .into_iter()
        .filter(|row| row["system"] == system)
        .map(|row| {
            (
                row["case_id"].clone(),
                utc_ms(&row["start_utc"]),
                utc_ms(&row["end_utc"]),
                row["service"].clone(),
                row["inject_pod"].clone(),
                Some(row["host"].clone()).filter(|host| !host.is_empty()),
                row["fault_type"].clone(),
                kinds(&row["fault_type"]),
            )
        })
        .collect()
}

fn reported_truth(case: &serde_json::Value) -> Truth {
    let text = |key: &str| case[key].as_str().unwrap().to_string();
    (
        text("id"),
        case["start_ms"].as_i64().unwrap(),
        case["end_ms"].as_i64().unwrap(),
        text("service"),
        text("instance"),
        case["host"].as_str().map(str::to_string),
        text("fault_type"),
        case["kinds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap().to_string())
            .collect(),
    )
}

// === The naive reference, recomputed ===

/// The services of the series on the server around `[start, end]`, ranked as the naive
/// reference ranks them (docs/detector.md, "Real incidents"): per series, points (counters,
/// `_total`, as per-second rates between consecutive samples), baseline the hour before
/// `start` (at least 10 points), median and 1.4826·MAD (floors 1e-6·|median|, 1e-9), score the
/// largest |z| in `[start, end]`; a service's score the largest of its series'.
fn naive_services(port: u16, (start, end): (i64, i64)) -> Vec<(String, f64)> {
    let reach = end - (start - 65 * 60_000);
    let found = query(port, &format!("{{__name__=~\".+\"}}[{reach}ms]"), end);
    let mut services: BTreeMap<String, f64> = BTreeMap::new();
    for series in found {
        let name = series["metric"]["__name__"].as_str().unwrap();
        let Some(service) = series["metric"]["service"].as_str().filter(|s| !s.is_empty()) else {
            continue;
        };
        let samples: Vec<(i64, f64)> = series["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|pair| {
                let seconds = pair[0].as_f64().unwrap();
                (
                    (seconds * 1000.0).round() as i64,
                    pair[1].as_str().unwrap().parse::<f64>().unwrap(),
                )
            })
            .filter(|(_, value)| value.is_finite())
            .collect();
        let points: Vec<(i64, f64)> = if name.ends_with("_total") {
            samples
                .windows(2)
                .map(|pair| {
                    let ((t0, v0), (t1, v1)) = (pair[0], pair[1]);
                    let increase = if v1 < v0 { v1 } else { v1 - v0 };
                    (t1, increase / ((t1 - t0) as f64 / 1000.0))
                })
                .collect()
        } else {
            samples
        };
        let mut baseline: Vec<f64> = points
            .iter()
            .filter(|(t, _)| (start - 3_600_000..start).contains(t))
            .map(|(_, v)| *v)
            .collect();
        let window: Vec<f64> = points
            .iter()
            .filter(|(t, _)| (start..=end).contains(t))
            .map(|(_, v)| *v)
            .collect();
        if baseline.len() < 10 || window.is_empty() {
            continue;
        }
        let median = |values: &mut Vec<f64>| {
            values.sort_by(f64::total_cmp);
            let middle = values.len() / 2;
            if values.len() % 2 == 1 {
                values[middle]
            } else {
                (values[middle - 1] + values[middle]) / 2.0
            }
        };
        let m = median(&mut baseline);
        let mut deviations: Vec<f64> = baseline.iter().map(|v| (v - m).abs()).collect();
        let scale = (1.4826 * median(&mut deviations)).max(1e-6 * m.abs()).max(1e-9);
        let score = window.iter().map(|v| (v - m).abs() / scale).fold(0.0, f64::max);
        let entry = services.entry(service.to_string()).or_insert(score);
        *entry = entry.max(score);
    }
    let mut ranked: Vec<(String, f64)> = services.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    ranked.truncate(5);
    ranked
}

// === The test ===

/// Checks one set's report: its cases against the label files, the naive ranking of its
/// middle case against [`naive_services`], matched incidents in their windows, and
/// [`ACCEPTANCE`].
fn check_set(report: &serde_json::Value, truth: &[Truth], port: u16) {
    let set = report["set"].as_str().unwrap();
    let cases = report["cases"].as_array().unwrap();
    let reported: Vec<Truth> = cases.iter().map(|row| reported_truth(&row["case"])).collect();
    assert_eq!(reported.len(), truth.len(), "{set}: cases");
    // The report lists cases in start order; the files in theirs.
    let mut expected = truth.to_vec();
    expected.sort_by_key(|case| (case.1, case.2));
    for (got, want) in reported.iter().zip(&expected) {
        assert_eq!(got, want, "{set}: a case's truth differs from its label file's row");
    }
    let interval = report["scrape_interval_ms"].as_i64().unwrap();
    for row in cases {
        let incident = &row["detector"]["incident"];
        if incident.is_null() {
            continue;
        }
        let opened = incident["opened_ms"].as_i64().unwrap();
        let (start, end) = (
            row["case"]["start_ms"].as_i64().unwrap(),
            row["case"]["end_ms"].as_i64().unwrap(),
        );
        assert!(
            (start..=end + interval).contains(&opened),
            "{set}: {} matched an incident opened at {opened}, outside [{start}, {}]",
            row["case"]["id"],
            end + interval
        );
    }
    let ids: BTreeSet<&str> = cases
        .iter()
        .filter_map(|row| row["detector"]["incident"]["id"].as_str())
        .chain(
            report["false_verdicts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["id"].as_str().unwrap()),
        )
        .collect();
    let matched = cases
        .iter()
        .filter(|row| !row["detector"]["incident"].is_null())
        .count();
    assert_eq!(
        ids.len(),
        matched + report["false_verdicts"].as_array().unwrap().len(),
        "{set}: an incident matched twice"
    );
    let middle = &cases[cases.len() / 2];
    let window = (
        middle["case"]["start_ms"].as_i64().unwrap(),
        middle["case"]["end_ms"].as_i64().unwrap(),
    );
    let by_hand = naive_services(port, window);
    let by_eval: Vec<(String, f64)> = middle["naive"]["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap().to_string(), s["score"].as_f64().unwrap()))
        .collect();
    assert!(!by_hand.is_empty(), "{set}: no service scored by hand");
    assert_eq!(
        by_eval.iter().map(|s| &s.0).collect::<Vec<_>>(),
        by_hand.iter().map(|s| &s.0).collect::<Vec<_>>(),
        "{set} {}: the naive ranking",
        middle["case"]["id"]
    );
    for ((_, got), (name, want)) in by_eval.iter().zip(&by_hand) {
        assert!(
            (got - want).abs() <= 1e-9 * want.abs().max(1.0),
            "{set}: {name} scored {got}, by hand {want}"
        );
    }
    assert_eq!(
        middle["naive"]["service_right"].as_bool().unwrap(),
        by_hand[0].0 == middle["case"]["service"].as_str().unwrap()
    );
    let summary = &report["summary"];
    let acceptance = ACCEPTANCE.iter().find(|a| a.set == set).unwrap();
    let at_least = |key: &str, least: Option<f64>| {
        if let Some(least) = least {
            let value = summary[key].as_f64().unwrap_or(0.0);
            assert!(value >= least, "{set}: {key} {value} < {least}");
        }
    };
    at_least("service_top1", acceptance.min_service_top1);
    at_least("host_ac1", acceptance.min_host_ac1);
    at_least("kind_accuracy", acceptance.min_kind_accuracy);
    at_least("quiet_gap_share_clean", acceptance.min_quiet_gap_share_clean);
    if let Some(most) = acceptance.max_median_minutes_to_detect {
        let value = summary["median_minutes_to_detect"].as_f64().unwrap_or(f64::INFINITY);
        assert!(value <= most, "{set}: median minutes to detect {value} > {most}");
    }
    if let Some(most) = acceptance.max_false_verdicts {
        let value = summary["false_verdicts"].as_u64().unwrap();
        assert!(value <= most, "{set}: {value} false verdicts > {most}");
    }
    eprintln!(
        "{set}: {} cases, {} matched; service top-1 {:.2} (naive {:.2}; issue 38's target {:.2}), host AC@1 {} (naive {}), kind {:.2}, false verdicts {}, quiet gaps clean {} (naive {})",
        summary["cases"],
        summary["matched"],
        summary["service_top1"].as_f64().unwrap(),
        summary["naive"]["service_top1"].as_f64().unwrap(),
        acceptance.target_service_top1,
        summary["host_ac1"],
        summary["naive"]["host_ac1"],
        summary["kind_accuracy"].as_f64().unwrap(),
        summary["false_verdicts"],
        summary["quiet_gap_share_clean"],
        summary["naive"]["quiet_gap_share_clean"],
    );
}

#[test]
fn real_incidents_are_scored_from_prometheus() {
    let Some(realdev) = realdev() else {
        return;
    };
    let Some(programs) = programs() else {
        return;
    };
    let started = Instant::now();
    let scratch = Scratch(common::scratch("epicenter-realdev"));
    let dir = scratch.0.clone();
    let mut guard = Guard::default();
    let tools = realdev.join("tools");
    let strings = |list: &[&Path]| list.iter().map(|p| p.display().to_string()).collect::<Vec<String>>();
    let sockshop_args = {
        let mut args = vec![
            "--test-dir".to_string(),
            "container-chaos".to_string(),
            "--derived-dir".to_string(),
        ];
        args.extend(strings(&[&realdev.join("sock-shop/derived")]));
        args
    };
    let nezha_args = {
        let mut args = vec!["--derived-dir".to_string()];
        args.extend(strings(&[&realdev.join("nezha/derived")]));
        args.extend([
            "--dates".to_string(),
            "2022-08-22".to_string(),
            "2023-01-29".to_string(),
        ]);
        args
    };
    // Both sets converted, backfilled and served at once.
    let ((sockshop, sockshop_port), (nezha, nezha_port)) = std::thread::scope(|scope| {
        let sockshop = scope.spawn(|| {
            serve(
                "sockshop",
                &tools.join("sockshop_to_openmetrics.py"),
                &realdev.join("sock-shop"),
                &sockshop_args,
                &programs,
                &dir,
            )
        });
        let nezha = scope.spawn(|| {
            serve(
                "nezha",
                &tools.join("nezha_to_openmetrics.py"),
                &realdev.join("nezha"),
                &nezha_args,
                &programs,
                &dir,
            )
        });
        (sockshop.join().unwrap(), nezha.join().unwrap())
    });
    guard.keep(sockshop);
    guard.keep(nezha);
    let served = started.elapsed();
    // Sock Shop pods without an inferred placement carry no `host`: none is made up from
    // `instance`.
    let config = dir.join("epicenter.yml");
    std::fs::write(&config, "placement: {host_from_instance: false}\n").unwrap();
    let eval = |arguments: Vec<String>| -> serde_json::Value {
        let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
            .arg("eval")
            .arg("--json")
            .args(&arguments)
            .arg("--config")
            .arg(&config)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "eval {arguments:?}: {stderr}");
        assert!(stderr.contains("windows: "), "no progress on stderr: {stderr}");
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let dataset = |name: &str, folder: &str, port: u16, extra: &[&str]| -> Vec<String> {
        let mut arguments = vec![
            "--dataset".to_string(),
            name.to_string(),
            realdev.join(folder).display().to_string(),
            "--prometheus".to_string(),
            format!("http://127.0.0.1:{port}"),
        ];
        arguments.extend(extra.iter().map(|a| a.to_string()));
        arguments
    };
    let (sockshop, ob, tt) = std::thread::scope(|scope| {
        let sockshop = scope.spawn(|| eval(dataset("sockshop", "sock-shop", sockshop_port, &[])));
        let ob = scope.spawn(|| eval(dataset("nezha", "nezha", nezha_port, &["--system", "ob"])));
        let tt = scope.spawn(|| eval(dataset("nezha", "nezha", nezha_port, &["--system", "tt"])));
        (sockshop.join().unwrap(), ob.join().unwrap(), tt.join().unwrap())
    });
    let set = |document: &serde_json::Value, name: &str| -> serde_json::Value {
        let sets = document["sets"].as_array().unwrap();
        assert_eq!(sets.len(), 1, "{document}");
        assert_eq!(sets[0]["set"], name);
        sets[0].clone()
    };
    let (sockshop, ob, tt) = (set(&sockshop, "sockshop"), set(&ob, "nezha-ob"), set(&tt, "nezha-tt"));
    assert_eq!(sockshop["cases"].as_array().unwrap().len(), 94);
    assert_eq!(ob["cases"].as_array().unwrap().len(), 24);
    assert_eq!(tt["cases"].as_array().unwrap().len(), 28);
    check_set(&sockshop, &sockshop_truth(&realdev), sockshop_port);
    check_set(&ob, &nezha_truth(&realdev, "OnlineBoutique"), nezha_port);
    check_set(&tt, &nezha_truth(&realdev, "TrainTicket"), nezha_port);
    eprintln!(
        "served in {:.0} s, scored in {:.0} s",
        served.as_secs_f64(),
        (started.elapsed() - served).as_secs_f64()
    );
    drop(guard);
}
