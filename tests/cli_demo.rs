//! `epicenter demo` end to end: each shipped fault scenario runs through the real collector
//! into the embedded store, and the physics the scenario promises is checked in the stored
//! samples (read back with `epicenter sql`), against the ground truth the demo wrote.
//!
//! Needs `libchdb.so` (`scripts/setup`); skipped without it except in CI.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn library_available() -> bool {
    let library = epicenter_collector::store::library_path();
    if library.exists() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{} missing: CI runs scripts/setup first",
        library.display()
    );
    eprintln!(
        "SKIPPED: chDB library not found at {} (run scripts/setup)",
        library.display()
    );
    false
}

struct Run {
    dir: PathBuf,
    config: PathBuf,
    stdout: String,
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `epicenter demo --scenario NAME --speed 60` into a fresh store.
fn demo(scenario: &str) -> Run {
    let dir = std::env::temp_dir().join(format!("epicenter-demo-{scenario}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("data");
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["demo", "--scenario", scenario, "--speed", "60", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "demo {scenario} failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("FAULT starts"), "{stdout}");
    assert!(stdout.contains("Ground truth"), "{stdout}");
    let config = dir.join("sql.yml");
    std::fs::write(
        &config,
        format!("storage:\n  embedded:\n    path: '{}'\n", data.display()),
    )
    .unwrap();
    Run { dir, config, stdout }
}

/// Rows of a query, tab-separated fields.
fn sql(config: &Path, query: &str) -> Vec<Vec<String>> {
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["sql", "--format", "TabSeparated", "--config"])
        .arg(config)
        .arg(query)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{query}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| line.split('\t').map(str::to_string).collect())
        .collect()
}

fn onset_ms(config: &Path) -> i64 {
    sql(config, "SELECT toUnixTimestamp64Milli(onset) FROM ground_truth")[0][0]
        .parse()
        .unwrap()
}

/// Series of `metric` per pod: (time ms, value), in time order; `filter` adds SQL conditions.
fn series(config: &Path, metric: &str, filter: &str) -> BTreeMap<String, Vec<(i64, f64)>> {
    let rows = sql(
        config,
        &format!(
            "SELECT labels['pod'], toUnixTimestamp64Milli(time), value FROM samples
             WHERE metric = '{metric}' {filter} ORDER BY time"
        ),
    );
    let mut out: BTreeMap<String, Vec<(i64, f64)>> = BTreeMap::new();
    for row in rows {
        out.entry(row[0].clone())
            .or_default()
            .push((row[1].parse().unwrap(), row[2].parse().unwrap()));
    }
    out
}

/// Last value at or before `at`.
fn value_at(points: &[(i64, f64)], at: i64) -> f64 {
    points
        .iter()
        .take_while(|(time, _)| *time <= at)
        .last()
        .map(|(_, value)| *value)
        .unwrap()
}

#[test]
fn node_loss_storms_the_surviving_nodes_within_two_intervals() {
    if !library_available() {
        return;
    }
    let run = demo("redis-node-loss");
    let onset = onset_ms(&run.config);
    let interval = 10_000;
    let received = series(&run.config, "redis_connections_received_total", "");
    assert_eq!(received.len(), 6, "{:?}", received.keys());
    for (pod, points) in &received {
        if pod == "redis-2-1" {
            continue;
        }
        // Baseline: new connections per second over the two minutes before the fault.
        let before = (value_at(points, onset) - value_at(points, onset - 120_000)) / 120.0;
        let after = (value_at(points, onset + 2 * interval) - value_at(points, onset)) / 20.0;
        assert!(before > 0.0, "{pod}: no baseline churn");
        eprintln!("{pod}: {before:.2} new connections/s before, {after:.2}/s in the two intervals after");
        assert!(
            after > 10.0 * before,
            "{pod}: {after:.2}/s after the fault vs {before:.2}/s before"
        );
    }
    // The dead node's exporter says so; the others stay up.
    let up = series(&run.config, "redis_up", "");
    let during = onset + 60_000;
    for (pod, points) in &up {
        let expected = if pod == "redis-2-1" { 0.0 } else { 1.0 };
        assert_eq!(value_at(points, during), expected, "{pod}");
        assert_eq!(value_at(points, onset - 10_000), 1.0, "{pod} before the fault");
    }
    assert!(run.stdout.contains("redis-2-1 on dc-2-host-3"), "{}", run.stdout);
    // An empty result is said, on stderr, in the default (pretty) format.
    let empty = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["sql", "--config"])
        .arg(&run.config)
        .arg("SELECT metric FROM samples WHERE metric = 'no_such_metric'")
        .output()
        .unwrap();
    assert!(empty.status.success());
    assert!(empty.stdout.is_empty());
    assert_eq!(String::from_utf8_lossy(&empty.stderr).trim(), "(0 rows)");
}

/// p99 (histogram_quantile's linear interpolation) of the requests counted between `from`
/// and `to` over the given pods.
fn p99(buckets: &BTreeMap<(String, String), Vec<(i64, f64)>>, pods: &[&str], from: i64, to: i64) -> f64 {
    let mut per_le: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    for ((pod, le), points) in buckets {
        if !pods.contains(&pod.as_str()) {
            continue;
        }
        let bound = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().unwrap()
        };
        let entry = per_le.entry(bound.to_bits()).or_insert((bound, 0.0));
        entry.1 += value_at(points, to) - value_at(points, from);
    }
    let mut cumulative: Vec<(f64, f64)> = per_le.into_values().collect();
    cumulative.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = cumulative.last().unwrap().1;
    let rank = 0.99 * total;
    let mut previous = (0.0, 0.0);
    for (bound, count) in cumulative {
        if count >= rank {
            if bound.is_infinite() {
                return previous.0;
            }
            return previous.0 + (bound - previous.0) * (rank - previous.1) / (count - previous.1);
        }
        previous = (bound, count);
    }
    previous.0
}

#[test]
fn cold_start_slows_only_the_new_instances_then_they_warm_up() {
    if !library_available() {
        return;
    }
    let run = demo("backend-cold-start");
    let onset = onset_ms(&run.config);
    let rows = sql(
        &run.config,
        "SELECT labels['pod'], labels['le'], toUnixTimestamp64Milli(time), value FROM samples
         WHERE metric = 'http_server_requests_seconds_bucket' AND labels['status'] = '200' ORDER BY time",
    );
    let mut buckets: BTreeMap<(String, String), Vec<(i64, f64)>> = BTreeMap::new();
    for row in rows {
        buckets
            .entry((row[0].clone(), row[1].clone()))
            .or_default()
            .push((row[2].parse().unwrap(), row[3].parse().unwrap()));
    }
    let new = ["backend-1-1", "backend-1-2"];
    let old: std::collections::BTreeSet<String> = buckets
        .keys()
        .map(|(pod, _)| pod.clone())
        .filter(|pod| !new.contains(&pod.as_str()))
        .collect();
    let old: Vec<&str> = old.iter().map(String::as_str).collect();
    assert_eq!(old.len(), 10, "{old:?}");
    // First minutes after the restart (counters restart at zero: start after the onset).
    let (from, to) = (onset + 10_000, onset + 120_000);
    let (new_p99, old_p99) = (p99(&buckets, &new, from, to), p99(&buckets, &old, from, to));
    eprintln!("first two minutes: p99 new {new_p99:.4} s, old {old_p99:.4} s");
    assert!(
        new_p99 > 5.0 * old_p99,
        "first minutes: new p99 {new_p99:.4} s vs old {old_p99:.4} s"
    );
    // Warmed up: back within 20 %.
    let (from, to) = (onset + 420_000, onset + 540_000);
    let (new_p99, old_p99) = (p99(&buckets, &new, from, to), p99(&buckets, &old, from, to));
    eprintln!("minutes 7 to 9: p99 new {new_p99:.4} s, old {old_p99:.4} s");
    assert!(
        (new_p99 / old_p99 - 1.0).abs() < 0.2,
        "after warm-up: new p99 {new_p99:.4} s vs old {old_p99:.4} s"
    );
    // The restart shows as a new process start time on those two only.
    let started = series(&run.config, "process_start_time_seconds", "AND job = 'backend'");
    for (pod, points) in &started {
        let moved = value_at(points, onset + 30_000) > value_at(points, onset - 10_000);
        assert_eq!(moved, new.contains(&pod.as_str()), "{pod}");
    }
}

#[test]
fn a_slow_node_fills_the_pools_towards_it_only() {
    if !library_available() {
        return;
    }
    let run = demo("redis-slow-node");
    let onset = onset_ms(&run.config);
    let active = sql(
        &run.config,
        &format!(
            "SELECT labels['name'], avgIf(value, time < fromUnixTimestamp64Milli({onset})),
                    avgIf(value, time >= fromUnixTimestamp64Milli({onset}) + INTERVAL 20 SECOND
                                 AND time < fromUnixTimestamp64Milli({onset}) + INTERVAL 4 MINUTE)
             FROM samples WHERE metric = 'commons_pool2_num_active_objects' GROUP BY 1 ORDER BY 1"
        ),
    );
    assert_eq!(active.len(), 6);
    for row in active {
        let (node, before, during): (&str, f64, f64) = (&row[0], row[1].parse().unwrap(), row[2].parse().unwrap());
        if node == "redis-3-2" {
            assert!(during > 10.0 * before.max(0.05), "{node}: {before} -> {during}");
        } else {
            assert!(during < 2.0 * before.max(0.5), "{node}: {before} -> {during}");
        }
    }
}
