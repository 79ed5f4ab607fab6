//! `epicenter demo`, `epicenter fleet` and `epicenter run` end to end: a simulated fleet
//! served on loopback, scraped by the real collector into the embedded store, judged live,
//! and read back with `epicenter sql` and `epicenter replay`.
//!
//! These run against the wall clock, so they assert only what holds on a busy machine: what
//! was stored (every instance, the ground truth, the deploys), what the detector named, and
//! that replaying the stored samples names the same thing. They never count wall-clock
//! scrapes. The physics of every scenario is asserted on deterministic runs, with the clock
//! driven by the test, in `fleet/tests/physics.rs`; detection on every scenario by `epicenter
//! eval` (tests/cli_eval.rs).
//!
//! Needs `libchdb.so` (`scripts/setup`); skipped without it except in CI.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{scratch, sql_rows};

/// How long a test waits for a fleet to write its targets file, or for a verdict: bounds
/// for a busy machine, far above what an idle one takes (under a second, about 15 s).
const TARGETS_WAIT: Duration = Duration::from_secs(120);
const VERDICT_WAIT: Duration = Duration::from_secs(120);

fn library_available() -> bool {
    let library = epicenter_store::library_path();
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

/// Waits (up to [`TARGETS_WAIT`]) for a fleet's file_sd file to be written completely.
fn wait_for_targets(path: &Path) -> bool {
    let started = Instant::now();
    while started.elapsed() < TARGETS_WAIT {
        if std::fs::read_to_string(path).is_ok_and(|text| text.trim_end().ends_with(']')) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

struct Run {
    dir: PathBuf,
    data: PathBuf,
    stdout: String,
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `epicenter demo --scenario SCENARIO` (at its own speed unless `speed`) into a fresh
/// store named `label`; the demo must succeed.
fn demo(label: &str, scenario: &str, speed: Option<u32>) -> Run {
    let dir = std::env::temp_dir().join(format!("epicenter-demo-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("data");
    let mut command = Command::new(env!("CARGO_BIN_EXE_epicenter"));
    command.args(["demo", "--scenario", scenario, "--data"]).arg(&data);
    if let Some(speed) = speed {
        command.args(["--speed", &speed.to_string()]);
    }
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "demo {scenario} failed:\n{stdout}\n{stderr}");
    Run { dir, data, stdout }
}

/// The node-loss demo end to end: the timeline and the ground truth printed and stored, every
/// instance's samples stored, the live detector's verdict right, and a replay of the stored
/// samples naming the same kind, datacenter and host.
#[test]
fn a_node_loss_demo_names_the_node_and_replay_agrees() {
    if !library_available() {
        return;
    }
    let run = demo("redis-node-loss", "redis-node-loss", None);
    assert!(
        run.stdout.contains("FAULT starts: node_loss of redis-2-1"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("FAULT ends: node_loss of redis-2-1"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains(&format!("This run's store is {}", run.data.display())),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("Ground truth"), "{}", run.stdout);
    assert!(run.stdout.contains("host right, datacenter right"), "{}", run.stdout);
    assert!(run.stdout.contains("redis-2-1 on dc-2-host-3"), "{}", run.stdout);
    let truth = sql_rows(
        &run.data,
        "SELECT kind, service, hosts, dcs, instances FROM ground_truth",
    );
    assert_eq!(
        truth,
        [["node_loss", "redis", "['dc-2-host-3']", "['dc-2']", "['redis-2-1']"]],
        "{truth:?}"
    );
    // Every instance answered and was stored (at 20x on a busy machine some scrapes fail: the
    // count of those is the collector's health, not asserted here).
    let pods = sql_rows(
        &run.data,
        "SELECT uniqExact(labels['pod']), uniqExact(job) FROM samples",
    );
    assert_eq!(pods, [["42", "7"]], "{pods:?}");
    let scraped = sql_rows(&run.data, "SELECT uniqExact(instance) FROM scrapes WHERE up = 1");
    assert_eq!(scraped, [["42"]], "{scraped:?}");
    // The dead node's exporter said so, in the stored samples.
    let down = sql_rows(
        &run.data,
        "SELECT min(value) FROM samples WHERE metric = 'redis_up' AND labels['pod'] = 'redis-2-1'",
    );
    assert_eq!(down, [["0"]]);
    // The first verdict after the onset (what the demo judged; quiet before the fault is
    // `epicenter eval`'s to assert, on the deterministic run).
    let onset_ms: i64 = sql_rows(&run.data, "SELECT toUnixTimestamp64Milli(onset) FROM ground_truth")[0][0]
        .parse()
        .unwrap();
    let live = sql_rows(
        &run.data,
        &format!(
            "SELECT kind, dc, dcs, hosts[1] FROM verdicts WHERE state = 'opened'
             AND time >= fromUnixTimestamp64Milli({onset_ms}) ORDER BY time LIMIT 1"
        ),
    );
    assert_eq!(live, [["node_loss", "dc-2", "['dc-2']", "dc-2-host-3"]], "{live:?}");
    // Confidence is a share to three decimals in the table (never 0.9198606271777003).
    for row in sql_rows(&run.data, "SELECT toString(confidence) FROM verdicts") {
        let decimals = row[0].split('.').nth(1).map_or(0, str::len);
        assert!(decimals <= 3, "confidence {} has {decimals} decimals", row[0]);
    }
    // Replay from the stored samples agrees with the live detector on the answer, and
    // `--write` keeps its events apart from the live ones, in `replayed_verdicts`.
    let live_before = sql_rows(&run.data, "SELECT count() FROM verdicts");
    let replay = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["replay", "--json", "--write", "--data"])
        .arg(&run.data)
        .output()
        .unwrap();
    assert!(replay.status.success(), "{}", String::from_utf8_lossy(&replay.stderr));
    let events: Vec<serde_json::Value> = String::from_utf8_lossy(&replay.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let opened = events
        .iter()
        .find(|event| event["state"] == "opened" && event["time_ms"].as_i64().unwrap() >= onset_ms)
        .expect("replay found no verdict after the onset");
    assert_eq!(opened["verdict"]["kind"], "node_loss", "{opened}");
    assert_eq!(opened["verdict"]["dc"], "dc-2", "{opened}");
    assert_eq!(opened["verdict"]["hosts"][0], "dc-2-host-3", "{opened}");
    let printed: Vec<Vec<String>> = events
        .iter()
        .map(|event| {
            vec![
                event["time_ms"].to_string(),
                event["state"].as_str().unwrap().to_string(),
                event["verdict"]["kind"].as_str().unwrap().to_string(),
                event["verdict"]["hosts"][0].as_str().unwrap_or_default().to_string(),
            ]
        })
        .collect();
    // Events of one round share a time: compared as sorted lists of whole rows.
    let mut written = sql_rows(
        &run.data,
        "SELECT toUnixTimestamp64Milli(time), state, kind, hosts[1] FROM replayed_verdicts",
    );
    written.sort();
    let mut printed = printed;
    printed.sort();
    assert_eq!(written, printed, "replayed_verdicts against replay's own output");
    let runs = sql_rows(
        &run.data,
        "SELECT uniqExact(run_id), any(source) FROM replayed_verdicts",
    );
    assert_eq!(runs, [["1", "store"]], "{runs:?}");
    assert!(
        String::from_utf8_lossy(&replay.stderr).contains(&format!(
            "{} verdict events appended to replayed_verdicts",
            events.len()
        )),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    // The live verdicts are untouched.
    let live_after = sql_rows(&run.data, "SELECT count() FROM verdicts");
    assert_eq!(live_after, live_before);
    // A mistyped store is an error, as for reading, and no store is made there.
    let missing = run.data.with_file_name("no-such-store");
    let refused = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["replay", "--write", "--data"])
        .arg(&missing)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("no epicenter store at"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(
        !missing.exists(),
        "replay --write made a store at {}",
        missing.display()
    );
    // An empty result is said, on stderr, in the default (pretty) format.
    let empty = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["sql", "--data"])
        .arg(&run.data)
        .arg("SELECT metric FROM samples WHERE metric = 'no_such_metric'")
        .output()
        .unwrap();
    assert!(empty.status.success());
    assert!(empty.stdout.is_empty());
    assert_eq!(String::from_utf8_lossy(&empty.stderr).trim(), "(0 rows)");
}

/// Issue 18: a kubelet on every host (cAdvisor's container families, each series naming its
/// pod) and one backend container throttled by a CPU limit below its demand, end to end: the
/// kubelets' series are stored on their pods (not on the kubelet), the live detector names
/// the throttled container `cpu_throttling` on its host, and a replay of the stored samples
/// names the same (the kubelet's scrapes of a pod, between the pod's own, keep the interval
/// the pod's own scrapes give).
#[test]
fn a_throttled_container_demo_is_named_from_its_kubelet() {
    if !library_available() {
        return;
    }
    let dir = scratch("epicenter-demo-throttle-scenario");
    let scenario = dir.join("throttle.yml");
    std::fs::write(
        &scenario,
        "name: throttle\nseed: 61\nspeed: 20\nduration: 8m\nstart_hour: 10\nscrape_interval: 10s\nfleet: {cadvisor: true}\nfaults:\n  - {kind: cpu_throttling, select: {service: backend, dc: dc-2, count: 1}, at: 3m}\n",
    )
    .unwrap();
    let run = demo("throttle", scenario.to_str().unwrap(), None);
    assert!(
        run.stdout.contains("FAULT starts: cpu_throttling of backend-2-1"),
        "{}",
        run.stdout
    );
    // Every container of the fleet (42 instances) on its own pod, with its service.
    let placed = sql_rows(
        &run.data,
        "SELECT uniqExact(instance), countIf(instance LIKE '127.0.0.1:%'), uniqExact(service) FROM samples WHERE metric = 'container_cpu_cfs_periods_total'",
    );
    assert_eq!(placed, [["42", "0", "7"]], "{placed:?}");
    let onset_ms: i64 = sql_rows(&run.data, "SELECT toUnixTimestamp64Milli(onset) FROM ground_truth")[0][0]
        .parse()
        .unwrap();
    let live = sql_rows(
        &run.data,
        &format!(
            "SELECT kind, dc, hosts[1], instances[1] FROM verdicts WHERE state = 'opened'
             AND time >= fromUnixTimestamp64Milli({onset_ms}) ORDER BY time LIMIT 1"
        ),
    );
    assert_eq!(
        live,
        [["cpu_throttling", "dc-2", "dc-2-host-2", "backend-2-1"]],
        "{live:?}\n{}",
        run.stdout
    );
    let replay = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["replay", "--json", "--data"])
        .arg(&run.data)
        .output()
        .unwrap();
    assert!(replay.status.success(), "{}", String::from_utf8_lossy(&replay.stderr));
    let opened: Vec<serde_json::Value> = String::from_utf8_lossy(&replay.stdout)
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|event| event["state"] == "opened" && event["time_ms"].as_i64().unwrap() >= onset_ms)
        .collect();
    let first = opened.first().expect("replay found no verdict after the onset");
    assert_eq!(
        (&first["verdict"]["kind"], &first["verdict"]["hosts"][0]),
        (&serde_json::json!("cpu_throttling"), &serde_json::json!("dc-2-host-2")),
        "{first}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The healthy scenario, shortened to one simulated hour (deploys at 20 and 40 minutes), run
/// end to end: no fault announced, every instance stored, the deploys stored as restarts, and
/// nothing else moving in the stored samples.
#[test]
fn a_healthy_demo_stores_every_instance_and_its_deploys() {
    if !library_available() {
        return;
    }
    let shipped = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/healthy.yml")).unwrap();
    let short = shipped
        .replace("duration: 6h", "duration: 1h")
        .replace("at: 2h\n", "at: 20m\n")
        .replace("at: 4h30m\n", "at: 40m\n");
    assert_ne!(short, shipped);
    let file = std::env::temp_dir().join(format!("epicenter-healthy-{}.yml", std::process::id()));
    std::fs::write(&file, short).unwrap();
    let run = demo("healthy", file.to_str().unwrap(), Some(100));
    std::fs::remove_file(&file).unwrap();
    assert!(run.stdout.contains("No fault was injected"), "{}", run.stdout);
    assert!(!run.stdout.contains("FAULT starts"), "{}", run.stdout);
    let pods = sql_rows(&run.data, "SELECT uniqExact(labels['pod']) FROM samples");
    assert_eq!(pods, [["42"]]);
    // 12 backends restarted in the first deploy, the 4 of dc-2 again in the second.
    let restarts = sql_rows(
        &run.data,
        "SELECT labels['pod'], uniqExact(value) - 1 FROM samples
         WHERE metric = 'process_start_time_seconds' AND job = 'backend' GROUP BY 1 ORDER BY 1",
    );
    assert_eq!(restarts.len(), 12);
    for row in &restarts {
        let expected = if row[0].starts_with("backend-2-") { "2" } else { "1" };
        assert_eq!(row[1], expected, "{row:?}");
    }
    let trouble = sql_rows(
        &run.data,
        "SELECT
            maxIf(value, metric = 'erlang_vm_process_message_queue_len'),
            maxIf(value, metric = 'hikaricp_connections_pending'),
            maxIf(value, metric = 'commons_pool2_num_waiters_threads'),
            maxIf(value, metric = 'http_requests_total' AND labels['code'] != '200'),
            minIf(value, metric = 'redis_up'),
            minIf(value, metric = 'voice_state_discovery_registered')
         FROM samples",
    );
    assert_eq!(trouble[0], ["0", "0", "0", "0", "1", "1"], "{trouble:?}");
}

/// `epicenter fleet` serves every instance and writes a file_sd file naming them; what it
/// serves passes `epicenter check metrics --strict`; Ctrl-C (SIGINT) stops it cleanly.
#[test]
fn fleet_serves_targets_listed_in_a_file_sd_file() {
    let dir = std::env::temp_dir().join(format!("epicenter-fleet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let targets = dir.join("targets.json");
    let child = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["fleet", "--scenario", "redis-node-loss", "--targets-file"])
        .arg(&targets)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed on the way out if an assertion fails first.
    struct Guard(std::process::Child);
    impl Drop for Guard {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Guard(child);
    assert!(wait_for_targets(&targets), "no targets file");
    let groups: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(&targets).unwrap()).unwrap();
    // api 6, backend 12, redis 6, db 3, gateway 6, voice 3, media 6.
    assert_eq!(groups.len(), 42);
    let redis = groups
        .iter()
        .find(|group| group["labels"]["pod"] == "redis-2-1")
        .unwrap();
    assert_eq!(redis["labels"]["host"], "dc-2-host-3");
    assert_eq!(redis["labels"]["dc"], "dc-2");
    for group in &groups {
        let address = group["targets"][0].as_str().unwrap();
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        use std::io::{Read, Write};
        write!(
            stream,
            "GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        let body = response.split_once("\r\n\r\n").unwrap().1.to_string();
        let mut check = Command::new(env!("CARGO_BIN_EXE_epicenter"))
            .args(["check", "metrics", "--strict"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The body may be chunked; check the dechunked text when it is.
        let text = if response.to_ascii_lowercase().contains("transfer-encoding: chunked") {
            let mut out = String::new();
            let mut rest = body.as_str();
            while let Some((size, tail)) = rest.split_once("\r\n") {
                let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
                if size == 0 {
                    break;
                }
                out.push_str(&tail[..size]);
                rest = &tail[size + 2..];
            }
            out
        } else {
            body
        };
        check.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        let output = check.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}: {}",
            group["labels"]["pod"],
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let status = Command::new("kill")
        .args(["-INT", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.0.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(exit.success(), "{exit:?}");
}

/// `epicenter fleet` serving a scenario, scraped through its file_sd file by `epicenter run`
/// with `detector` as the configuration's `detector:` section; both killed on drop.
struct Live {
    children: Vec<std::process::Child>,
    server: String,
    dir: PathBuf,
}

impl Drop for Live {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Live {
    fn start(label: &str, scenario: &str, detector: &str) -> Live {
        let dir = scratch(&format!("epicenter-live-{label}"));
        let targets = dir.join("targets.json");
        let fleet = Command::new(env!("CARGO_BIN_EXE_epicenter"))
            .args(["fleet", "--scenario", scenario, "--targets-file"])
            .arg(&targets)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let server = format!("127.0.0.1:{}", common::free_port());
        let mut live = Live {
            children: vec![fleet],
            server: server.clone(),
            dir: dir.clone(),
        };
        assert!(wait_for_targets(&targets), "no targets file");
        let config = dir.join("run.yml");
        std::fs::write(
            &config,
            format!(
                "global: {{scrape_interval: 500ms, scrape_timeout: 400ms}}\nserver: {{listen_address: '{server}'}}\nscrape_configs:\n  - job_name: fleet\n    file_sd_configs: [{{files: ['{}']}}]\nstorage:\n  embedded: {{path: '{}'}}\nplacement: {{instance_label: pod}}\n{detector}",
                targets.display(),
                dir.join("data").display()
            ),
        )
        .unwrap();
        let run = Command::new(env!("CARGO_BIN_EXE_epicenter"))
            .args(["run", "--for", "5m", "--config"])
            .arg(&config)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        live.children.push(run);
        live
    }

    /// The response (head and body) to `GET path` on epicenter's server; empty when it does
    /// not answer yet.
    fn get(&self, path: &str) -> String {
        use std::io::{Read, Write};
        let Ok(mut stream) = std::net::TcpStream::connect(&self.server) else {
            return String::new();
        };
        let _ = write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.server
        );
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        response
    }

    /// The JSON document `GET path` answers (chunked or not), if it parses.
    fn get_json(&self, path: &str) -> Option<serde_json::Value> {
        let response = self.get(path);
        let (_, body) = response.split_once("\r\n\r\n")?;
        let start = body.find('{')?;
        let end = body.rfind('}')? + 1;
        serde_json::from_str(&body[start..end]).ok()
    }

    /// /api/v1/verdicts once a verdict is open (panics after [`VERDICT_WAIT`]).
    fn first_verdict(&self) -> serde_json::Value {
        let started = Instant::now();
        while started.elapsed() < VERDICT_WAIT {
            std::thread::sleep(Duration::from_millis(100));
            if let Some(document) = self.get_json("/api/v1/verdicts") {
                if document["data"]["open"].get(0).is_some() {
                    return document;
                }
            }
        }
        panic!("no open verdict within {VERDICT_WAIT:?}")
    }

    /// Stops `run` with SIGTERM; it must exit 0. Returns what it printed.
    fn stop(&mut self) -> String {
        use std::io::Read;
        let mut run = self.children.pop().unwrap();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(run.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let status = run.wait().unwrap();
        let mut stdout = String::new();
        run.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
        assert!(status.success(), "{status:?}\n{stdout}");
        stdout
    }
}

/// The detector inside `epicenter run`, on a fleet it does not own: `epicenter fleet`
/// (node loss at its own 20x) scraped through file_sd; the verdict shows up at
/// /api/v1/verdicts and as `epicenter_verdict_open` on /metrics, and `run` stops cleanly on
/// SIGTERM. The waits are bounds, not expectations: on a busy machine it takes longer.
#[test]
fn run_serves_the_live_verdict_over_http() {
    if !library_available() {
        return;
    }
    let mut live = Live::start(
        "node-loss",
        "redis-node-loss",
        "detector:\n  dependencies:\n    - {caller: api, callee: backend, same_dc: true}\n    - {caller: backend, callee: redis}\n    - {caller: backend, callee: db, same_dc: true}\n    - {caller: gateway, callee: voice, same_dc: true}\n    - {caller: voice, callee: media, same_dc: true}\n",
    );
    let document = live.first_verdict();
    let open = &document["data"]["open"][0];
    assert_eq!(document["data"]["open"].as_array().map(Vec::len), Some(1), "{document}");
    assert_eq!(open["kind"], "node_loss", "{open}");
    assert_eq!(open["dc"], "dc-2", "{open}");
    assert_eq!(open["hosts"][0], "dc-2-host-3", "{open}");
    assert_eq!(document["data"]["history"][0]["state"], "opened");
    let metrics = live.get("/metrics");
    assert!(
        metrics.contains(
            "epicenter_verdict_open{dc=\"dc-2\",host=\"dc-2-host-3\",kind=\"node_loss\",service=\"redis\"} 1"
        ),
        "{metrics}"
    );
    // The dependency graph: 42 instances; backend → redis configured and observed (the pools
    // name their node); DOT on request.
    let document = live.get_json("/api/v1/graph").unwrap();
    assert_eq!(document["data"]["nodes"].as_array().unwrap().len(), 42);
    let edges = document["data"]["edges"].as_array().unwrap();
    assert!(
        edges
            .iter()
            .any(|e| e["caller"] == "backend-1-1" && e["callee"] == "redis-2-1" && e["source"] == "both"),
        "{document}"
    );
    assert!(edges
        .iter()
        .all(|e| !(e["caller"] == "backend-1-1" && e["callee"] == "db-2-1")));
    let dot = live.get("/api/v1/graph?format=dot");
    assert!(
        dot.contains("text/vnd.graphviz") && dot.contains("digraph epicenter {"),
        "{dot}"
    );
    let stdout = live.stop();
    assert!(
        stdout.contains("epicenter: VERDICT opened: node_loss of redis-2-1"),
        "{stdout}"
    );
}

/// Issue 18: a fleet behind an Istio mesh, then a Linkerd one, with no `dependencies`
/// configured. The sidecars' server-side series name their calling workload (Istio's
/// `source_workload`, Linkerd's `client_id`), so
/// /api/v1/graph shows api → backend in each datacenter as observed (beside the pools'
/// observed backend → redis and backend → db; no configured edge, no api → backend across
/// datacenters), and the slow
/// callee of the shipped cold deploy (backend-1-1 and backend-1-2 slow after a restart) is
/// named on its hosts.
#[test]
fn a_mesh_gives_the_graph_without_dependencies_and_the_slow_callee_is_named() {
    if !library_available() {
        return;
    }
    let scenario =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/backend-cold-start.yml"))
            .unwrap();
    assert!(
        !scenario.contains("\nfleet:"),
        "the shipped scenario has its own fleet section"
    );
    let dir = scratch("epicenter-mesh-scenario");
    for mesh in ["istio", "linkerd"] {
        mesh_run(&dir, &scenario, mesh);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// One run of [`a_mesh_gives_the_graph_without_dependencies_and_the_slow_callee_is_named`]
/// behind `mesh`.
fn mesh_run(dir: &Path, scenario: &str, mesh: &str) {
    let file = dir.join(format!("cold-{mesh}.yml"));
    std::fs::write(
        &file,
        format!("{scenario}fleet: {{instrumentation: {{mesh: {mesh}}}}}\n"),
    )
    .unwrap();
    let mut live = Live::start(mesh, file.to_str().unwrap(), "");
    // (api → backend edges, api → backend edges across datacenters, edges not observed) in
    // /api/v1/graph, and the number of api → backend pairs within a datacenter.
    let count = |graph: &serde_json::Value| -> Option<(usize, usize, usize, usize)> {
        let nodes = graph["data"]["nodes"].as_array()?;
        let of = |name: &serde_json::Value| nodes.iter().find(|node| node["name"] == *name);
        let edges = graph["data"]["edges"].as_array()?;
        let (mut mesh, mut across, mut not_observed) = (0, 0, 0);
        for edge in edges {
            let (caller, callee) = (of(&edge["caller"])?, of(&edge["callee"])?);
            not_observed += usize::from(edge["source"] != "observed");
            if caller["service"] == "api" && callee["service"] == "backend" {
                mesh += 1;
                across += usize::from(caller["dc"] != callee["dc"]);
            }
        }
        let pairs = nodes
            .iter()
            .filter(|api| api["service"] == "api")
            .flat_map(|api| {
                nodes
                    .iter()
                    .filter(move |backend| backend["service"] == "backend" && backend["dc"] == api["dc"])
            })
            .count();
        Some((mesh, across, not_observed, pairs))
    };
    // Edges appear with the first scrape of each backend; wait for all of them, bounded.
    let started = Instant::now();
    let mut graph = serde_json::Value::Null;
    while started.elapsed() < VERDICT_WAIT {
        std::thread::sleep(Duration::from_millis(200));
        if let Some(document) = live.get_json("/api/v1/graph") {
            graph = document;
            if count(&graph).is_some_and(|(calls, _, _, pairs)| pairs > 0 && calls >= pairs) {
                break;
            }
        }
    }
    let (calls, across, not_observed, pairs) = count(&graph).unwrap_or_else(|| panic!("{mesh}: {graph}"));
    // Every api instance calls every backend of its own datacenter, and only those.
    assert!(pairs > 0, "{graph}");
    assert_eq!((calls, across, not_observed), (pairs, 0, 0), "{mesh}: {graph}");

    let document = live.first_verdict();
    let open = &document["data"]["open"][0];
    assert_eq!(open["kind"], "cold_start", "{mesh}: {document}");
    assert_eq!(open["dc"], "dc-1", "{mesh}: {open}");
    let hosts: Vec<&str> = open["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h.as_str())
        .collect();
    assert!(["dc-1-host-2", "dc-1-host-3"].contains(&hosts[0]), "{mesh}: {open}");
    let _ = live.stop();
}

/// Hundreds of instances, one port each: a 4-datacenter fleet of 352 instances starts, lists
/// every target, and each answers with its own exposition.
#[test]
fn a_fleet_of_hundreds_of_instances_serves_every_one() {
    let dir = std::env::temp_dir().join(format!("epicenter-big-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = dir.join("big.yml");
    std::fs::write(
        &scenario,
        "name: big\nfleet:\n  datacenters: 4\n  hosts_per_datacenter: 16\n  api: {instances_per_datacenter: 10}\n  backend: {instances_per_datacenter: 50}\n  redis: {nodes_per_datacenter: 6}\n  beam: {gateways_per_datacenter: 10, media_per_datacenter: 10}\n",
    )
    .unwrap();
    let targets = dir.join("targets.json");
    let child = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["fleet", "--scenario"])
        .arg(&scenario)
        .arg("--targets-file")
        .arg(&targets)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    struct Guard(std::process::Child);
    impl Drop for Guard {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _guard = Guard(child);
    assert!(wait_for_targets(&targets), "no targets file");
    let groups: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(&targets).unwrap()).unwrap();
    // Per datacenter: api 10, backend 50, redis 6, db 1, gateway 10, voice 1, media 10.
    assert_eq!(groups.len(), 4 * (10 + 50 + 6 + 1 + 10 + 1 + 10));
    let mut ports = std::collections::BTreeSet::new();
    for group in &groups {
        let address = group["targets"][0].as_str().unwrap();
        assert!(ports.insert(address.to_string()), "{address} twice");
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        write!(
            stream,
            "GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        assert!(response.starts_with("HTTP/1.1 200"), "{address}: {response}");
        let pod = group["labels"]["pod"].as_str().unwrap();
        let family = match group["labels"]["service"].as_str().unwrap() {
            "api" => "http_requests_total{",
            "backend" => "jetty_threads_busy ",
            "redis" => "redis_up ",
            "db" => "pg_up ",
            "gateway" => "gateway_sessions ",
            "voice" => "erlang_vm_process_message_queue_len{",
            "media" => "media_rpc_received_total ",
            other => panic!("unexpected service {other}"),
        };
        assert!(response.contains(family), "{pod}: no {family}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ctrl-C before the scenario's first fault: the demo says it stopped before the fault, not
/// that no fault was injected. At 5x the node-loss fault is 36 s of wall time away when the
/// first timeline line (+30 s, 6 s in) is read.
#[test]
fn a_demo_stopped_before_its_fault_says_so() {
    use std::io::BufRead;
    if !library_available() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("epicenter-demo-early-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["demo", "--speed", "5", "--data"])
        .arg(dir.join("data"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut shown = String::new();
    loop {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "the demo ended early:\n{shown}"
        );
        shown.push_str(&line);
        if line.starts_with("[+") {
            break;
        }
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    shown.push_str(&rest);
    let status = child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "{shown}");
    assert!(!shown.contains("FAULT starts"), "{shown}");
    assert!(
        shown.contains("The run stopped before its first fault: there was nothing to detect yet."),
        "{shown}"
    );
    assert!(!shown.contains("No fault was injected"), "{shown}");
}
