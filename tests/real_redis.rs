//! Real Redis, end to end: six `redis-server` nodes (Debian's package) over three
//! datacenters, one `prometheus-redis-exporter` per node, twelve backend instances of
//! `epicenter-loadgen redis` (a real client with real pools), `epicenter run` scraping all of
//! it every second, and the real Alertmanager delivering to a webhook this test serves.
//!
//! One test injects three faults in turn — `kill -9` of a node, `SIGSTOP` of a node,
//! `CLIENT PAUSE` on a node — and for each checks: the verdict names the node's host and
//! datacenter and the right kind within 30 s, the firing alert reaches the webhook through
//! Alertmanager, and the resolved notification follows recovery. Another restarts every node
//! in turn, one every 60 s, and checks that any verdict names the node just restarted.
//!
//! Needs redis-server, redis-cli, prometheus-redis-exporter, prometheus-alertmanager and
//! libchdb.so (scripts/test installs them); skipped without them except in CI.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{
    await_kind, await_quiet, await_verdict, describe, epicenter_log, free_port, loadgen, open_verdict, receiver,
    redis_server, require, signal, spawn, start_alertmanager, start_epicenter, verdict_events, wait_port, Guard,
    Signal,
};

/// One Redis node and its exporter.
struct Node {
    name: String,
    dc: String,
    host: String,
    port: u16,
    exporter_port: u16,
    /// Index of the redis-server child in the guard.
    server: usize,
}

/// Everything one test runs.
struct Rig {
    dir: PathBuf,
    guard: Guard,
    nodes: Vec<Node>,
    /// epicenter's HTTP API (host:port).
    api: String,
    /// Webhook bodies from Alertmanager, in order.
    bodies: Arc<Mutex<Vec<serde_json::Value>>>,
    redis_server: PathBuf,
}

fn start_redis(binary: &Path, port: u16, dir: &Path) -> Child {
    spawn(&mut redis_server(binary, port, dir))
}

impl Rig {
    /// Starts six nodes (two per datacenter), their exporters, Alertmanager, the load
    /// generator and `epicenter run`; returns once epicenter serves its API.
    fn start(label: &str, binaries: &[PathBuf]) -> Rig {
        let [redis_server, _, exporter, alertmanager] = binaries else {
            panic!("four binaries expected")
        };
        let dir = std::env::temp_dir().join(format!("epicenter-real-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut guard = Guard::default();
        let (hook, bodies) = receiver();
        let am_port = start_alertmanager(alertmanager, &dir, &hook, &mut guard);
        let mut nodes = Vec::new();
        for dc in 1..=3 {
            for ordinal in 1..=2 {
                let name = format!("redis-{dc}-{ordinal}");
                let port = free_port();
                let server = guard.keep(start_redis(redis_server, port, &dir.join(&name)));
                let exporter_port = free_port();
                guard.keep(spawn(
                    Command::new(exporter)
                        .arg(format!("-redis.addr=127.0.0.1:{port}"))
                        .arg(format!("-web.listen-address=127.0.0.1:{exporter_port}"))
                        .arg("-connection-timeout=2s")
                        .stdout(Stdio::null())
                        .stderr(Stdio::null()),
                ));
                nodes.push(Node {
                    host: format!("dc-{dc}-redis-{ordinal}"),
                    dc: format!("dc-{dc}"),
                    name,
                    port,
                    exporter_port,
                    server,
                });
            }
        }
        for node in &nodes {
            assert!(
                wait_port(node.port, Duration::from_secs(10)),
                "{} did not start",
                node.name
            );
            assert!(
                wait_port(node.exporter_port, Duration::from_secs(10)),
                "exporter of {} did not start",
                node.name
            );
        }
        let targets = dir.join("backends.json");
        let mut loadgen = Command::new(loadgen());
        loadgen
            .args(["redis", "--instances", "12", "--rate", "40", "--targets-file"])
            .arg(&targets);
        for node in &nodes {
            loadgen
                .arg("--node")
                .arg(format!("{}=127.0.0.1:{}", node.name, node.port));
        }
        guard.keep(spawn(loadgen.stdout(Stdio::null()).stderr(Stdio::null())));
        let written = (0..200).any(|_| {
            std::thread::sleep(Duration::from_millis(50));
            std::fs::read_to_string(&targets).is_ok_and(|text| text.trim_end().ends_with(']'))
        });
        assert!(written, "epicenter-loadgen wrote no targets file");
        let api = format!("127.0.0.1:{}", free_port());
        let static_targets: String = nodes
            .iter()
            .map(|node| {
                format!(
                    "      - targets: ['127.0.0.1:{}']\n        labels: {{dc: {}, host: {}, service: redis, pod: {}}}\n",
                    node.exporter_port, node.dc, node.host, node.name
                )
            })
            .collect();
        let config = format!(
            "global: {{scrape_interval: 1s, scrape_timeout: 800ms}}\nserver: {{listen_address: '{api}'}}\nscrape_configs:\n  - job_name: redis\n    static_configs:\n{static_targets}  - job_name: backend\n    file_sd_configs: [{{files: ['{}']}}]\nstorage:\n  embedded: {{path: '{}'}}\nplacement: {{instance_label: pod}}\ndetector:\n  dependencies:\n    - {{caller: backend, callee: redis}}\nnotifiers:\n  - {{name: oncall, type: alertmanager, url: 'http://127.0.0.1:{am_port}', resend_interval: 5s}}\n",
            targets.display(),
            dir.join("data").display()
        );
        start_epicenter(&dir, &api, &config, &mut guard);
        Rig {
            dir,
            guard,
            nodes,
            api,
            bodies,
            redis_server: redis_server.clone(),
        }
    }

    /// The rig after 40 s of baseline (the detector judges after 12 intervals) with no
    /// verdict on the healthy fleet; None when a binary is missing outside CI.
    fn start_healthy(label: &str) -> Option<(Rig, Vec<PathBuf>)> {
        let binaries = require(&[
            "redis-server",
            "redis-cli",
            "prometheus-redis-exporter",
            "prometheus-alertmanager",
        ])?;
        let rig = Rig::start(label, &binaries);
        std::thread::sleep(Duration::from_secs(40));
        assert!(
            verdict_events(&rig.api).is_empty(),
            "verdicts on a healthy fleet: {:?}",
            verdict_events(&rig.api)
        );
        Some((rig, binaries))
    }

    fn node(&self, name: &str) -> &Node {
        self.nodes.iter().find(|node| node.name == name).unwrap()
    }

    fn server(&self, name: &str) -> &Child {
        &self.guard.0[self.node(name).server]
    }

    /// Starts the node again on its port (after kill -9).
    fn restart(&mut self, name: &str) {
        let index = self.nodes.iter().position(|node| node.name == name).unwrap();
        let (port, dir) = (self.nodes[index].port, self.dir.join(name));
        let _ = self.guard.0[self.nodes[index].server].wait();
        let child = start_redis(&self.redis_server, port, &dir);
        self.nodes[index].server = self.guard.keep(child);
        assert!(wait_port(port, Duration::from_secs(10)), "{name} did not restart");
    }

    /// Waits up to `limit` for a webhook body with `status` for `host`; how long it took.
    fn await_notification(&self, status: &str, host: &str, limit: Duration) -> Option<Duration> {
        let start = Instant::now();
        while start.elapsed() < limit {
            let found = self.bodies.lock().unwrap().iter().any(|body| {
                body["status"] == status
                    && body["alerts"].as_array().is_some_and(|alerts| {
                        alerts.iter().any(|alert| {
                            alert["labels"]["alertname"] == "EpicenterRootCause" && alert["labels"]["host"] == host
                        })
                    })
            });
            if found {
                return Some(start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        None
    }
}

/// One fault: the verdict within 30 s with host, dc and kind; firing through Alertmanager;
/// `recover` undoes the fault; the resolved notification follows.
fn check_fault(
    rig: &mut Rig,
    fault: &str,
    name: &str,
    kind: &str,
    inject: impl FnOnce(&mut Rig),
    recover: impl FnOnce(&mut Rig),
) {
    let (host, dc) = (rig.node(name).host.clone(), rig.node(name).dc.clone());
    assert!(
        open_verdict(&rig.api).is_none(),
        "a verdict is open before {fault}: {:?}",
        open_verdict(&rig.api)
    );
    let injected = Instant::now();
    inject(rig);
    let (first, took) = await_verdict(&rig.api, Duration::from_secs(30))
        .unwrap_or_else(|| panic!("{fault}: no verdict within 30 s\n{}", epicenter_log(&rig.dir)));
    eprintln!(
        "{fault}: verdict after {:.1} s: {}",
        took.as_secs_f64(),
        describe(&first)
    );
    // The kind may sharpen within the 30 s (a hang can open as `slow_node`: the callers'
    // waiting pools are seen a round before the hung node's own exporter times out).
    let verdict = await_kind(&rig.api, kind, first, injected + Duration::from_secs(30));
    eprintln!("{fault}: named as {}", describe(&verdict));
    assert_eq!(verdict["hosts"][0], host.as_str(), "{fault}: wrong host: {verdict:#}");
    assert_eq!(verdict["dc"], dc.as_str(), "{fault}: wrong dc: {verdict:#}");
    assert_eq!(verdict["kind"], kind, "{fault}: wrong kind: {verdict:#}");
    let firing = rig
        .await_notification("firing", &host, Duration::from_secs(30))
        .unwrap_or_else(|| panic!("{fault}: no firing notification through Alertmanager"));
    eprintln!(
        "{fault}: firing notification received {:.1} s after the fault",
        injected.elapsed().as_secs_f64()
    );
    let _ = firing;
    // The fault lasts 20 s: the verdict stays open on the node all along.
    while injected.elapsed() < Duration::from_secs(20) {
        let open = open_verdict(&rig.api);
        assert!(
            open.as_ref()
                .is_some_and(|verdict| verdict["hosts"][0] == host.as_str()),
            "{fault}: the verdict closed or moved {:.1} s into the fault: {open:?}\n{:?}",
            injected.elapsed().as_secs_f64(),
            verdict_events(&rig.api)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let recovered = Instant::now();
    recover(rig);
    let resolved = rig
        .await_notification("resolved", &host, Duration::from_secs(90))
        .unwrap_or_else(|| {
            panic!(
                "{fault}: no resolved notification within 90 s of recovery\n{:?}",
                verdict_events(&rig.api)
            )
        });
    eprintln!(
        "{fault}: resolved notification {:.1} s after recovery",
        resolved.as_secs_f64()
    );
    let _ = recovered;
    // Once it said the right kind, the verdict on this host kept it.
    let mut settled = false;
    for (_, state, first, event_kind) in verdict_events(&rig.api) {
        if first != host || state == "resolved" {
            continue;
        }
        settled |= event_kind == kind;
        assert!(
            !settled || event_kind == kind,
            "{fault}: the verdict on {host} changed kind to {event_kind}"
        );
    }
    assert!(settled, "{fault}: no verdict event on {host} said {kind}");
    assert!(
        await_quiet(&rig.api, Duration::from_secs(60)),
        "{fault}: the verdict stayed open"
    );
}

#[test]
fn e2e_kill_stop_and_pause_are_each_named_and_paged() {
    let Some((mut rig, binaries)) = Rig::start_healthy("faults") else {
        return;
    };

    check_fault(
        &mut rig,
        "kill -9 redis-2-1",
        "redis-2-1",
        "node_loss",
        |rig| signal(rig.server("redis-2-1"), Signal::SIGKILL),
        |rig| rig.restart("redis-2-1"),
    );
    std::thread::sleep(Duration::from_secs(15));
    check_fault(
        &mut rig,
        "SIGSTOP redis-3-2",
        "redis-3-2",
        "node_hang",
        |rig| signal(rig.server("redis-3-2"), Signal::SIGSTOP),
        |rig| signal(rig.server("redis-3-2"), Signal::SIGCONT),
    );
    std::thread::sleep(Duration::from_secs(15));
    let port = rig.node("redis-1-2").port.to_string();
    let cli = binaries[1].clone();
    check_fault(
        &mut rig,
        "CLIENT PAUSE redis-1-2",
        "redis-1-2",
        "slow_node",
        |_| {
            let status = Command::new(&cli)
                .args(["-p", &port, "CLIENT", "PAUSE", "40000", "WRITE"])
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "redis-cli CLIENT PAUSE failed");
        },
        |_| {
            // Writes stalled, reads went on; the pause would end by itself after 40 s.
            let _ = Command::new(&cli)
                .args(["-p", &port, "CLIENT", "UNPAUSE"])
                .stdout(Stdio::null())
                .status();
        },
    );
    let _ = std::fs::remove_dir_all(&rig.dir);
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64)
}

/// Every node restarted in turn (SIGTERM, start again), one every 30 s (a Kubernetes rolling
/// update moves on as soon as the new pod is ready): either no verdict, or verdicts that each
/// name the node restarted last (or the one before, while its evidence fades) — never a node
/// not restarted yet, and never one restarted two turns ago. (It was one every 60 s; at 30 s
/// the suite is 3 minutes shorter and a restart's evidence overlaps the next one's.)
#[test]
fn e2e_a_rolling_restart_names_only_the_restarted_nodes() {
    let Some((mut rig, _)) = Rig::start_healthy("rolling") else {
        return;
    };
    let order: Vec<(String, String)> = rig
        .nodes
        .iter()
        .map(|node| (node.name.clone(), node.host.clone()))
        .collect();
    let mut restarts: Vec<(i64, String)> = Vec::new();
    for (name, host) in &order {
        restarts.push((now_ms(), host.clone()));
        signal(rig.server(name), Signal::SIGTERM);
        rig.restart(name);
        std::thread::sleep(Duration::from_secs(30));
    }
    let events = verdict_events(&rig.api);
    eprintln!("rolling restart of {} nodes: verdict events {events:?}", order.len());
    for (time_ms, state, host, _) in &events {
        if state == "resolved" {
            continue;
        }
        let latest = restarts.iter().rposition(|(at, _)| at <= time_ms);
        let allowed: Vec<&String> = latest
            .map(|index| {
                restarts[index.saturating_sub(1)..=index]
                    .iter()
                    .map(|(_, host)| host)
                    .collect()
            })
            .unwrap_or_default();
        assert!(
            allowed.contains(&host),
            "a verdict {state} at {time_ms} names {host}, but the nodes restarted last were {allowed:?} (restarts {restarts:?}); every event with its evidence and candidates:\n{:#}",
            common::get_json(&rig.api, "/api/v1/verdicts")["data"]["history"]
        );
    }
    let _ = std::fs::remove_dir_all(&rig.dir);
}
