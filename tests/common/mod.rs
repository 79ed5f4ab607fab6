//! What the end-to-end tests share: finding Debian binaries, free ports, child processes
//! stopped when a test ends (even on panic), a webhook receiver, and JSON over plain HTTP.

#![allow(dead_code, reason = "each test binary uses part of this module")]
#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) use nix::sys::signal::Signal;
use nix::unistd::Pid;

/// `binary` on PATH.
pub(crate) fn find(binary: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(binary))
        .find(|path| path.is_file())
}

/// Every binary in `binaries` (and libchdb.so), or None when one is missing outside CI; in
/// CI a missing one fails the test (scripts/test installs them).
pub(crate) fn require(binaries: &[&str]) -> Option<Vec<PathBuf>> {
    let found: Vec<Option<PathBuf>> = binaries.iter().map(|binary| find(binary)).collect();
    let chdb = epicenter_store::library_path().exists();
    if found.iter().any(Option::is_none) || !chdb {
        let missing: Vec<&str> = binaries
            .iter()
            .zip(&found)
            .filter(|(_, path)| path.is_none())
            .map(|(binary, _)| *binary)
            .chain((!chdb).then_some("libchdb.so"))
            .collect();
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs {missing:?} (scripts/test installs them)"
        );
        eprintln!("SKIPPED: {missing:?} missing (scripts/test installs them)");
        return None;
    }
    Some(found.into_iter().flatten().collect())
}

/// The workload generator `epicenter-loadgen` (real/loadgen), built next to `epicenter`:
/// `cargo test --workspace` builds it (its own tests run it) and so does scripts/test. A
/// missing binary, or one older than its sources, fails with the command that builds it.
pub(crate) fn loadgen() -> PathBuf {
    let binary = Path::new(env!("CARGO_BIN_EXE_epicenter")).with_file_name("epicenter-loadgen");
    let rebuild = "build it with `cargo build -p epicenter-loadgen` (scripts/test does)";
    let built = std::fs::metadata(&binary)
        .and_then(|metadata| metadata.modified())
        .unwrap_or_else(|error| panic!("{}: {error}: {rebuild}", binary.display()));
    let sources = Path::new(env!("CARGO_MANIFEST_DIR")).join("real/loadgen/src");
    for entry in std::fs::read_dir(&sources).unwrap() {
        let source = entry.unwrap().path();
        let changed = std::fs::metadata(&source).unwrap().modified().unwrap();
        assert!(
            changed <= built,
            "{} is older than {}: {rebuild}",
            binary.display(),
            source.display()
        );
    }
    binary
}

/// A port below the kernel's ephemeral range (`net.ipv4.ip_local_port_range`) that nothing is
/// bound to now, for a server started after this returns. A port the kernel hands out for
/// port 0 lies inside that range, and so does every local port of an outgoing connection: in
/// the time a child takes to start, a simulated fleet binding its instances' ports (the quiet
/// run's 5,000, a demo's hundred) or a scrape's connection may take it, and the child's bind
/// then fails while the test talks to whatever took it (seen in the fault tests: a fleet's
/// 404 where ClickHouse should answer). Candidates start at a point drawn from the clock and
/// process id, so that tests running at once rarely try the same ones.
pub(crate) fn free_port() -> u16 {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    // Never a privileged port (below 1024), never 0; at least a thousand candidates even when
    // the ephemeral range starts low.
    let ephemeral_low = ephemeral_low.max(2_048);
    let low = 10_000u16.min(ephemeral_low.saturating_sub(1_000)).max(1_024);
    let span = u32::from(ephemeral_low - low);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
        ^ std::process::id().wrapping_mul(2_654_435_761);
    (0..span)
        .map(|step| low + (seed.wrapping_add(step) % span) as u16)
        .find(|&port| TcpListener::bind(("127.0.0.1", port)).is_ok())
        .expect("no free port below the ephemeral range")
}

/// Waits up to `limit` for something to accept on 127.0.0.1:`port`.
pub(crate) fn wait_port(port: u16, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Starts `command` in its own process group, so that a signal meant for it never reaches the
/// test, and stopping it stops its children too.
pub(crate) fn spawn(command: &mut Command) -> Child {
    command
        .process_group(0)
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {command:?}: {error}"))
}

/// Sends `signal` (e.g. SIGKILL, SIGSTOP, SIGCONT) to `child` alone.
pub(crate) fn signal(child: &Child, signal: Signal) {
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, signal).unwrap_or_else(|error| panic!("kill -{signal} {pid}: {error}"));
}

/// Children killed (and reaped) when the guard is dropped.
#[derive(Default)]
pub(crate) struct Guard(pub Vec<Child>);

impl Guard {
    /// Keeps `child` until the guard is dropped; returns its index.
    pub(crate) fn keep(&mut self, child: Child) -> usize {
        self.0.push(child);
        self.0.len() - 1
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        for child in &mut self.0 {
            // A child already reaped (a node restarted in the test) is skipped: its pid, and so
            // its group id, may belong to another test's process by now.
            if matches!(child.try_wait(), Ok(Some(_))) {
                continue;
            }
            // The whole process group: a stopped child is continued first, children go too.
            if let Ok(id) = i32::try_from(child.id()) {
                let _ = nix::sys::signal::killpg(Pid::from_raw(id), Signal::SIGCONT);
                let _ = nix::sys::signal::killpg(Pid::from_raw(id), Signal::SIGKILL);
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The environment variable that makes a test binary's `clickhouse_server_child` test serve:
/// `<data dir>|<port>`.
const CLICKHOUSE_CHILD: &str = "EPICENTER_CLICKHOUSE_CHILD";

/// A ClickHouse server for tests: the ClickHouse HTTP interface over the embedded engine
/// (`epicenter_store::http::router`), in a child process a test can stop or kill. A test binary
/// that uses [`start_clickhouse_child`] has an ignored test `clickhouse_server_child` calling
/// this, which serves when [`CLICKHOUSE_CHILD`] is set and returns at once otherwise.
pub(crate) fn serve_clickhouse_child() {
    let Ok(spec) = std::env::var(CLICKHOUSE_CHILD) else {
        return;
    };
    let (dir, port) = spec.split_once('|').unwrap();
    let engine = Arc::new(epicenter_store::EmbeddedStore::open(Path::new(dir), "default").unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port.parse::<u16>().unwrap()))
            .await
            .unwrap();
        axum::serve(listener, epicenter_store::http::router(engine))
            .await
            .unwrap();
    });
}

/// Starts this test binary again as a ClickHouse server ([`serve_clickhouse_child`]) on a
/// free port, its data in `dir/engine`, its log in `dir/server.log`; waits until it listens.
/// Returns the child's index in `guard` and the port.
pub(crate) fn start_clickhouse_child(dir: &Path, guard: &mut Guard) -> (usize, u16) {
    let port = free_port();
    let log = std::fs::File::create(dir.join("server.log")).unwrap();
    let index = guard.keep(spawn(
        Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "clickhouse_server_child", "--nocapture"])
            .env(CLICKHOUSE_CHILD, format!("{}|{port}", dir.join("engine").display()))
            .stdout(log.try_clone().unwrap())
            .stderr(log),
    ));
    assert!(
        wait_port(port, Duration::from_secs(60)),
        "the ClickHouse server child did not start"
    );
    (index, port)
}

/// A webhook receiver on a new port: its address and every POST body, in order.
pub(crate) fn receiver() -> (String, Arc<Mutex<Vec<serde_json::Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    (address, receive_on(listener))
}

/// Answers every request on `listener` with 200 and keeps the JSON bodies, in order of
/// arrival. Each connection is read on its own thread with a read timeout, so a client that
/// connects and sends nothing (a readiness probe, a stray connection) delays no other.
pub(crate) fn receive_on(listener: TcpListener) -> Arc<Mutex<Vec<serde_json::Value>>> {
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let store = bodies.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let store = store.clone();
            std::thread::spawn(move || receive_one(stream, &store));
        }
    });
    bodies
}

/// Reads one request from `stream`, keeps its JSON body in `store`, answers 200.
fn receive_one(mut stream: std::net::TcpStream, store: &Mutex<Vec<serde_json::Value>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(reading) = stream.try_clone() else { return };
    let mut reader = BufReader::new(reading);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().unwrap_or(0);
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0u8; length];
    let _ = reader.read_exact(&mut body);
    if let Ok(document) = serde_json::from_slice(&body) {
        store.lock().unwrap().push(document);
    }
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
}

/// GET `path` from `server` (host:port): the whole response (status line, headers, body),
/// empty when the connection fails.
pub(crate) fn get_text(server: &str, path: &str) -> String {
    get_with_headers(server, path, "")
}

/// [`get_text`] with extra request header lines (`headers` ends each with `\r\n`).
pub(crate) fn get_with_headers(server: &str, path: &str, headers: &str) -> String {
    let Ok(mut stream) = std::net::TcpStream::connect(server) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {server}\r\n{headers}Connection: close\r\n\r\n"
    );
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
}

/// GET `path` from `server` (host:port) and parse the body as JSON; Null when anything fails.
pub(crate) fn get_json(server: &str, path: &str) -> serde_json::Value {
    let response = get_text(server, path);
    let body = response.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let start = body.find(['{', '[']).unwrap_or(0);
    let end = body.rfind(['}', ']']).map_or(0, |at| at + 1);
    serde_json::from_str(body.get(start..end).unwrap_or("")).unwrap_or(serde_json::Value::Null)
}

/// Starts the real Alertmanager on a free port with one webhook receiver at `hook`
/// (group_wait and group_interval 1 s, resolved notifications on); returns its port.
pub(crate) fn start_alertmanager(
    binary: &std::path::Path,
    dir: &std::path::Path,
    hook: &str,
    guard: &mut Guard,
) -> u16 {
    std::fs::write(
        dir.join("alertmanager.yml"),
        format!(
            "route:\n  receiver: test\n  group_by: [alertname, dc, host, kind]\n  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: test\n    webhook_configs:\n      - url: http://{hook}/\n        send_resolved: true\n"
        ),
    )
    .unwrap();
    // A busy machine may start it slowly, and a free port may be taken before it binds:
    // up to three ports, 30 s each, its own log shown if all fail.
    let log = dir.join("alertmanager.log");
    for _ in 0..3 {
        let port = free_port();
        let index = guard.keep(spawn(
            Command::new(binary)
                .arg(format!("--config.file={}", dir.join("alertmanager.yml").display()))
                .arg(format!("--storage.path={}", dir.join("am-data").display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg("--cluster.listen-address=")
                .arg(format!("--web.external-url=http://127.0.0.1:{port}"))
                .stdout(std::process::Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap()),
        ));
        if wait_port(port, Duration::from_secs(30)) {
            return port;
        }
        let _ = guard.0[index].kill();
        let _ = guard.0[index].wait();
    }
    panic!(
        "alertmanager did not start on three ports:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

/// Writes `config` (epicenter YAML) into `dir`, starts `epicenter run` with it (log in
/// `dir/epicenter.log`) and waits until its API on `api` (host:port) accepts connections.
pub(crate) fn start_epicenter(dir: &std::path::Path, api: &str, config: &str, guard: &mut Guard) {
    start_epicenter_with(dir, api, &[], config, guard);
}

/// [`start_epicenter`] with extra environment variables (`EPICENTER_LOG`, for example).
pub(crate) fn start_epicenter_with(
    dir: &std::path::Path,
    api: &str,
    env: &[(&str, &str)],
    config: &str,
    guard: &mut Guard,
) {
    let path = dir.join("epicenter.yml");
    std::fs::write(&path, config).unwrap();
    let log = std::fs::File::create(dir.join("epicenter.log")).unwrap();
    guard.keep(spawn(
        Command::new(env!("CARGO_BIN_EXE_epicenter"))
            .args(["run", "--config"])
            .arg(&path)
            .envs(env.iter().copied())
            .stdout(log.try_clone().unwrap())
            .stderr(log),
    ));
    let port = api.rsplit_once(':').unwrap().1.parse().unwrap();
    // Generous: on a machine busy writing a build back to disk, loading the embedded engine
    // (a 169 MiB library) took more than 30 s in CI once, with nothing logged yet.
    assert!(
        wait_port(port, Duration::from_secs(120)),
        "epicenter run did not serve {api} within 120 s; its log:\n{}",
        std::fs::read_to_string(dir.join("epicenter.log")).unwrap_or_default()
    );
}

/// The oldest open incident's verdict at epicenter's API `api`, if any (`data.open` lists
/// every open incident, oldest first).
pub(crate) fn open_verdict(api: &str) -> Option<serde_json::Value> {
    let document = get_json(api, "/api/v1/verdicts");
    document["data"]["open"].get(0).cloned()
}

/// Verdict events at `api` as (time ms, state, first host, kind), oldest first.
pub(crate) fn verdict_events(api: &str) -> Vec<(i64, String, String, String)> {
    get_json(api, "/api/v1/verdicts")["data"]["history"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|event| {
            (
                event["time_ms"].as_i64().unwrap_or(0),
                event["state"].as_str().unwrap_or("").to_string(),
                event["verdict"]["hosts"][0].as_str().unwrap_or("").to_string(),
                event["verdict"]["kind"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// Waits up to `limit` for an open verdict at `api`; returns it and how long it took.
pub(crate) fn await_verdict(api: &str, limit: Duration) -> Option<(serde_json::Value, Duration)> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(verdict) = open_verdict(api) {
            return Some((verdict, start.elapsed()));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    None
}

/// The open verdict at `api` once its kind is `kind`, starting from `first` (the verdict
/// [`await_verdict`] returned) and waiting until `deadline` at the latest; the last verdict
/// seen otherwise. On a busy machine the kind can sharpen a round or two after the verdict
/// opens (the callers' evidence is seen before the root's own: a hung node's exporter timing
/// out, a restarted JVM's first slow requests), on the same host.
pub(crate) fn await_kind(api: &str, kind: &str, first: serde_json::Value, deadline: Instant) -> serde_json::Value {
    let mut verdict = first;
    while verdict["kind"] != kind && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(250));
        if let Some(now) = open_verdict(api) {
            verdict = now;
        }
    }
    verdict
}

/// Waits up to `limit` until no verdict is open at `api`.
pub(crate) fn await_quiet(api: &str, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if open_verdict(api).is_none() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    false
}

/// One line for a verdict: kind, service, first host, dc, confidence.
pub(crate) fn describe(verdict: &serde_json::Value) -> String {
    format!(
        "{} {} on {} in {} (confidence {:.2})",
        verdict["kind"].as_str().unwrap_or("?"),
        verdict["service"].as_str().unwrap_or("?"),
        verdict["hosts"][0].as_str().unwrap_or("?"),
        verdict["dc"].as_str().unwrap_or("?"),
        verdict["confidence"].as_f64().unwrap_or(0.0)
    )
}

/// An `epicenter run` that scrapes itself into an embedded store with its live SQL endpoint
/// on: what tests/live_sql.rs and tests/sql_attacks.rs ask. Started by [`start_live_store`].
pub(crate) struct LiveStore {
    /// Its own folder under the temporary directory (config, log, store).
    pub dir: PathBuf,
    /// Its API's `host:port` (the one target it scrapes).
    pub api: String,
    /// The SQL endpoint's port on 127.0.0.1.
    pub sql_port: u16,
    /// The embedded store's folder.
    pub data: PathBuf,
    /// The process, stopped when this is dropped.
    pub guard: Guard,
}

/// Starts a [`LiveStore`] in a fresh folder named `name` (and the test's pid): scraping its
/// own API every `interval` with `timeout` (YAML durations),
/// the detector off, `storage.http` listening on a free port with `http_lines` (YAML at four
/// spaces' indent, e.g. `    users: [...]\n`) after `listen_address`, and `env` set. Returns
/// once the API answers; the SQL endpoint may still be starting (callers wait for its port).
pub(crate) fn start_live_store(
    name: &str,
    (interval, timeout): (&str, &str),
    http_lines: &str,
    env: &[(&str, &str)],
) -> LiveStore {
    let dir = std::env::temp_dir().join(format!("epicenter-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let api = format!("127.0.0.1:{}", free_port());
    let sql_port = free_port();
    let data = dir.join("data");
    let config = format!(
        "global: {{scrape_interval: {interval}, scrape_timeout: {timeout}}}\nserver: {{listen_address: '{api}'}}\nscrape_configs:\n  - job_name: self\n    static_configs: [{{targets: ['{api}']}}]\nstorage:\n  embedded: {{path: '{}'}}\n  http:\n    listen_address: '127.0.0.1:{sql_port}'\n{http_lines}detector: {{enabled: false}}\n",
        data.display()
    );
    let mut guard = Guard::default();
    start_epicenter_with(&dir, &api, env, &config, &mut guard);
    LiveStore {
        dir,
        api,
        sql_port,
        data,
        guard,
    }
}

/// The last 40 lines of `dir/epicenter.log`, for failure messages.
pub(crate) fn epicenter_log(dir: &std::path::Path) -> String {
    let text = std::fs::read_to_string(dir.join("epicenter.log")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Starts `epicenter fleet` (redis-node-loss at `speed`) and waits for its targets file.
pub(crate) fn start_fleet(speed: u32, targets: &std::path::Path) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args([
            "fleet",
            "--scenario",
            "redis-node-loss",
            "--speed",
            &speed.to_string(),
            "--targets-file",
        ])
        .arg(targets)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let written = loop {
        if std::fs::read_to_string(targets).is_ok_and(|text| text.trim_end().ends_with(']')) {
            break true;
        }
        if started.elapsed() > Duration::from_secs(120) {
            break false;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if !written {
        let _ = child.kill();
        let _ = child.wait();
        panic!("epicenter fleet wrote no targets file");
    }
    child
}

/// Where `scripts/test` installed the official clients (`EPICENTER_CLIENTS`, else
/// `target/clients`): a venv with clickhouse-connect and a Node folder with
/// @clickhouse/client. Missing outside CI: skipped, said plainly; missing in CI: a failure.
pub(crate) fn official_clients() -> Option<std::path::PathBuf> {
    let folder = std::env::var_os("EPICENTER_CLIENTS").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/clients"),
        std::path::PathBuf::from,
    );
    let ready = folder.join("venv/bin/python").exists() && folder.join("node/node_modules/@clickhouse/client").exists();
    if ready {
        return Some(folder);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{} lacks the official ClickHouse clients: scripts/test installs them",
        folder.display()
    );
    eprintln!(
        "SKIPPED: the official ClickHouse clients are not in {} (scripts/test installs them)",
        folder.display()
    );
    None
}

/// Runs `program` with `args`; returns its standard output, panicking with its stderr when
/// it fails.
pub(crate) fn output_of(program: &std::path::Path, args: &[&str], directory: &std::path::Path) -> String {
    let output = Command::new(program)
        .args(args)
        .current_dir(directory)
        .output()
        .unwrap_or_else(|error| panic!("cannot run {}: {error}", program.display()));
    assert!(
        output.status.success(),
        "{} failed: {}",
        program.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The questions of docs/investigation.md: (heading, SQL, the demo scenario whose store it
/// is asked of), in order. The scenario is `redis-node-loss` unless a
/// `<!-- store: SCENARIO -->` line under the heading names another.
pub(crate) fn cookbook_questions() -> Vec<(String, String, String)> {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/investigation.md")).unwrap();
    let mut questions = Vec::new();
    let mut heading = None;
    let mut store = String::new();
    let mut sql: Option<String> = None;
    for line in page.lines() {
        if let Some(title) = line.strip_prefix("## ") {
            heading = Some(title.to_string());
            store = "redis-node-loss".to_string();
        } else if let Some(named) = line
            .strip_prefix("<!-- store: ")
            .and_then(|rest| rest.strip_suffix(" -->"))
        {
            store = named.to_string();
        } else if line == "```sql" {
            sql = Some(String::new());
        } else if line == "```" {
            if let (Some(title), Some(text)) = (heading.take(), sql.take()) {
                questions.push((title, text, store.clone()));
            }
        } else if let Some(text) = &mut sql {
            text.push_str(line);
            text.push('\n');
        }
    }
    questions
}

/// Rows of `query` as `epicenter sql --format TabSeparated --data DATA` prints them (through
/// the live endpoint while an epicenter holds the store), split into fields; panics with the
/// query and stderr on failure.
pub(crate) fn sql_rows(data: &std::path::Path, query: &str) -> Vec<Vec<String>> {
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["sql", "--format", "TabSeparated", "--data"])
        .arg(data)
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

/// A `redis-server` command on 127.0.0.1:`port`, no persistence, its files in `dir` (made),
/// output discarded; add arguments, then [`spawn`] it. Protected mode is off so that callers
/// bound to other loopback addresses (127.0.0.2, …) are answered; it listens on 127.0.0.1
/// only. `port` 0 turns the plain port off (a TLS-only node adds `--tls-port`).
pub(crate) fn redis_server(binary: &std::path::Path, port: u16, dir: &std::path::Path) -> Command {
    std::fs::create_dir_all(dir).unwrap();
    let mut command = Command::new(binary);
    command
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--protected-mode",
            "no",
        ])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no", "--dir"])
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    command
}

/// `epicenter eval --json ARGUMENTS`, parsed; panics with eval's stderr when it fails.
pub(crate) fn eval_json(arguments: &[&str]) -> serde_json::Value {
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .arg("eval")
        .arg("--json")
        .args(arguments)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// An empty folder `<temp>/<name>-<pid>` (emptied if a failed run left it).
pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `path` in this repository.
pub(crate) fn repository(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A rules file holding the shipped rules (rules/signals/signals.yml) of these metrics only,
/// every line that reads one of them; panics when one has none.
pub(crate) fn shipped_rules_of(metrics: &[&str]) -> String {
    let shipped = std::fs::read_to_string(repository("rules/signals/signals.yml")).unwrap();
    let mut text = String::from("signals:\n");
    let mut found = Vec::new();
    for line in shipped.lines() {
        let Some(rest) = line.trim_start().strip_prefix("- {metric: ") else {
            continue;
        };
        let metric = rest.split(',').next().unwrap();
        if metrics.contains(&metric) {
            text.push_str(line);
            text.push('\n');
            found.push(metric);
        }
    }
    for metric in metrics {
        assert!(found.contains(metric), "no shipped rule reads {metric}");
    }
    text
}

/// Each scenario's one fault in an `epicenter eval --json` report: (scenario, kind right,
/// host AC@1, false verdicts, the verdict's kind, empty without a verdict).
pub(crate) fn judged_one_fault(report: &serde_json::Value) -> Vec<(String, bool, f64, u64, String)> {
    report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|scenario| {
            let incident = &scenario["incidents"][0];
            (
                scenario["scenario"].as_str().unwrap().to_string(),
                incident["kind_right"].as_bool().unwrap(),
                incident["epicenter"]["host_ac1"].as_f64().unwrap(),
                scenario["false_verdicts"].as_u64().unwrap(),
                incident["verdict"]["kind"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}
