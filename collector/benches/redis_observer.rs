//! What the Redis observer costs the node it watches (issue 21): a real `redis-server`
//! (Debian's) holding 10,000 client connections, measured three ways in one run, one phase
//! at a time, each `EPICENTER_OBSERVER_SECONDS` long (default 20):
//!
//! 1. **baseline**: nobody polls;
//! 2. **epicenter**: [`epicenter_collector::redis_observer::observe`] (`INFO clients`,
//!    `INFO stats`, `CLIENT LIST`) once per second;
//! 3. **redis_exporter** (the peer): `prometheus-redis-exporter -export-client-list` scraped
//!    once per second (it runs `INFO ALL`, `CLIENT LIST` and more per scrape).
//!
//! For each: the node's CPU time (user + system from /proc/PID/stat), the latency a client
//! sees meanwhile (a `PING` every 10 ms on its own connection, as `redis-cli --latency`
//! does: mean, p99, max), and the poller's wall time per poll. The observer's share of one
//! core at an interval is (its CPU per poll − the baseline's per second × 1 s) / interval.
//!
//! Run: `cargo bench -p epicenter-collector --bench redis_observer` (needs redis-server and
//! prometheus-redis-exporter: `scripts/setup`; and 10,100 open files, `ulimit -n`).
//! `EPICENTER_OBSERVER_CONNECTIONS` changes the connection count.

#![allow(clippy::unwrap_used, reason = "benchmark: a panic is a failed run")]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use epicenter_collector::redis_observer::{observe, Node, ObserverState, RedisObserverConfig};

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn wait_port(port: u16) {
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(start.elapsed() < Duration::from_secs(10), "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// User + system CPU seconds of process `pid` (fields 14 and 15 of /proc/PID/stat, in clock
/// ticks of 1/100 s on Linux).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_name.split(' ').collect();
    // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

/// `PING` every 10 ms on its own connection until `stop`; latencies in seconds.
fn ping_loop(port: u16, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Vec<f64> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_nodelay(true).unwrap();
    let mut latencies = Vec::new();
    let mut answer = [0u8; 7];
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let sent = Instant::now();
        stream.write_all(b"PING\r\n").unwrap();
        stream.read_exact(&mut answer).unwrap();
        latencies.push(sent.elapsed().as_secs_f64());
        std::thread::sleep(Duration::from_millis(10));
    }
    latencies
}

struct Phase {
    name: &'static str,
    cpu_seconds: f64,
    polls: u64,
    poll_wall_seconds: Vec<f64>,
    latencies: Vec<f64>,
    seconds: f64,
}

/// Runs `poll` once per second for `seconds` while measuring the node.
fn measure(name: &'static str, pid: u32, port: u16, seconds: u64, mut poll: impl FnMut() -> bool) -> Phase {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let pinger = {
        let stop = stop.clone();
        std::thread::spawn(move || ping_loop(port, stop))
    };
    let cpu_before = cpu_seconds(pid);
    let start = Instant::now();
    let mut polls = 0;
    let mut poll_wall_seconds = Vec::new();
    while start.elapsed() < Duration::from_secs(seconds) {
        let tick = Instant::now();
        if poll() {
            polls += 1;
            poll_wall_seconds.push(tick.elapsed().as_secs_f64());
        }
        std::thread::sleep(Duration::from_secs(1).saturating_sub(tick.elapsed()));
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds(pid) - cpu_before;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let latencies = pinger.join().unwrap();
    Phase {
        name,
        cpu_seconds: cpu,
        polls,
        poll_wall_seconds,
        latencies,
        seconds: elapsed,
    }
}

fn quantile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

fn find(binary: &str) -> Option<std::path::PathBuf> {
    ["/usr/bin", "/usr/sbin", "/usr/local/bin"]
        .iter()
        .map(|folder| std::path::Path::new(folder).join(binary))
        .find(|path| path.exists())
}

fn spawn(command: &mut Command) -> Child {
    command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()
}

fn main() {
    if std::env::args().any(|argument| argument == "--list") {
        return;
    }
    let (Some(server), Some(exporter)) = (find("redis-server"), find("prometheus-redis-exporter")) else {
        eprintln!("redis_observer bench: needs redis-server and prometheus-redis-exporter (scripts/setup installs them); not run");
        return;
    };
    let connections = env_number("EPICENTER_OBSERVER_CONNECTIONS", 10_000);
    let seconds = env_number("EPICENTER_OBSERVER_SECONDS", 20);
    let dir = std::env::temp_dir().join(format!("epicenter-observer-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let mut redis = spawn(
        Command::new(&server)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--maxclients", &(connections + 100).to_string(), "--dir"])
            .arg(&dir),
    );
    wait_port(port);
    let pid = redis.id();
    // The clients: idle connections, each having run one command (as a pool's would).
    let mut held = Vec::with_capacity(connections as usize);
    for index in 0..connections {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|error| {
            panic!("connection {index} of {connections}: {error} (raise the open-files limit: ulimit -n)")
        });
        stream.write_all(b"PING\r\n").unwrap();
        held.push(stream);
    }
    for stream in &mut held {
        let mut answer = [0u8; 7];
        stream.read_exact(&mut answer).unwrap();
    }
    println!("redis-server {} on 127.0.0.1:{port} with {connections} client connections; {seconds} s per phase, one poll per second", server.display());

    let baseline = measure("baseline (no poller)", pid, port, seconds, || false);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let config = RedisObserverConfig {
        callers: Vec::new(),
        max_clients_listed: u64::MAX,
        output_buffer_threshold_bytes: 1 << 20,
        reverse_dns: false,
    };
    let mut state = ObserverState::default();
    let address = format!("127.0.0.1:{port}");
    let known = std::collections::HashMap::new();
    let mut listed_bytes = 0;
    let observed = measure("epicenter observer", pid, port, seconds, || {
        let body = runtime
            .block_on(observe(
                Node {
                    address: &address,
                    credentials: None,
                    tls: None,
                    known: &known,
                    resolver: None,
                    timeout: Duration::from_secs(5),
                },
                &config,
                &mut state,
            ))
            .unwrap();
        listed_bytes = body.len();
        assert!(body.contains("epicenter_redis_observer_clients_listed"), "{body}");
        true
    });

    let exporter_port = free_port();
    let mut peer = spawn(
        Command::new(&exporter)
            .arg(format!("-redis.addr=redis://127.0.0.1:{port}"))
            .arg(format!("-web.listen-address=127.0.0.1:{exporter_port}"))
            .arg("-export-client-list"),
    );
    wait_port(exporter_port);
    let scrape = || {
        let mut stream = TcpStream::connect(("127.0.0.1", exporter_port)).unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .unwrap();
        let mut body = Vec::new();
        stream.read_to_end(&mut body).unwrap();
        body.len()
    };
    let exporter_bytes = scrape();
    let exported = measure("redis_exporter -export-client-list", pid, port, seconds, || {
        scrape();
        true
    });
    let _ = peer.kill();
    let _ = peer.wait();
    let _ = redis.kill();
    let _ = redis.wait();
    drop(held);
    let _ = std::fs::remove_dir_all(&dir);

    let idle_per_second = baseline.cpu_seconds / baseline.seconds;
    println!("\n| phase | node CPU s | polls | node CPU ms per poll (above baseline) | poll wall ms (median) | PING mean ms | p99 ms | max ms |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut per_poll = Vec::new();
    for phase in [&baseline, &observed, &exported] {
        let extra = phase.cpu_seconds - idle_per_second * phase.seconds;
        let cost = if phase.polls > 0 {
            extra / phase.polls as f64
        } else {
            0.0
        };
        per_poll.push(cost);
        println!(
            "| {} | {:.2} | {} | {:.1} | {:.1} | {:.3} | {:.3} | {:.3} |",
            phase.name,
            phase.cpu_seconds,
            phase.polls,
            cost * 1000.0,
            quantile(&phase.poll_wall_seconds, 0.5) * 1000.0,
            phase.latencies.iter().sum::<f64>() / phase.latencies.len().max(1) as f64 * 1000.0,
            quantile(&phase.latencies, 0.99) * 1000.0,
            quantile(&phase.latencies, 1.0) * 1000.0,
        );
    }
    println!("\nexposition per poll: epicenter {listed_bytes} bytes, redis_exporter {exporter_bytes} bytes");
    for interval in [10.0, 60.0] {
        println!(
            "at one poll per {interval} s: epicenter {:.3} % of one core of the node, redis_exporter {:.3} %",
            per_poll[1] / interval * 100.0,
            per_poll[2] / interval * 100.0
        );
    }
    if per_poll[1] > 0.0 {
        println!(
            "redis_exporter costs the node {:.1}x what the observer does per poll",
            per_poll[2] / per_poll[1]
        );
    }
}
