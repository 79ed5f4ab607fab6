//! `epicenter run` then `epicenter sql` on the embedded store, as a person runs them: every
//! scrape is in `scrapes`, `samples` holds exactly the rows those scrapes imply, and a dead
//! target is down with its error while the live one is up.
//!
//! The tests wait for what they check (a target scraped, a file re-read) instead of sleeping a
//! fixed time, and stop `run` with SIGTERM once they have seen it: on a busy machine start-up
//! and scrapes take longer, and nothing here counts wall-clock events.
//!
//! Needs `libchdb.so` (`scripts/setup`); skipped without it except in CI.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

mod common;
use common::scratch;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

/// Serves `body` on every request from a thread; returns `host:port`.
fn serve(body: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    address
}

const BODY: &str = "# TYPE hikaricp_connections_pending gauge\nhikaricp_connections_pending{pool=\"HikariPool-1\"} 3\n# TYPE jetty_threads_busy gauge\njetty_threads_busy 17\n";
const BODY_SAMPLES: u64 = 2;
const SYNTHETIC_SERIES: u64 = 5;

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

/// How long a test waits for what it checks: a bound for a busy machine, far above what an
/// idle one takes (about a second).
const WAIT: Duration = Duration::from_secs(90);

/// Polls `check` every 100 ms until it holds; panics naming `what` after [`WAIT`].
fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while started.elapsed() < WAIT {
        if check() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{what}: not within {WAIT:?}");
}

/// Sends SIGTERM (what `kill`, systemd and `docker stop` send).
fn terminate(child: &std::process::Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
}

/// A plain HTTP/1.1 GET; the status and body, or `None` while nothing answers.
fn try_get(address: &str, path: &str) -> Option<(u16, String)> {
    let mut stream = std::net::TcpStream::connect(address).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_string()
    };
    Some((status, body))
}

/// A plain HTTP/1.1 GET to a server that answers; returns the status and body.
fn http_get(address: &str, path: &str) -> (u16, String) {
    try_get(address, path).unwrap_or_else(|| panic!("GET {path}: no answer from {address}"))
}

/// `/api/v1/targets`' active targets, empty while the server does not answer.
fn active_targets(server: &str) -> Vec<serde_json::Value> {
    try_get(server, "/api/v1/targets")
        .and_then(|(_, body)| serde_json::from_str::<serde_json::Value>(&body).ok())
        .and_then(|document| document["data"]["activeTargets"].as_array().cloned())
        .unwrap_or_default()
}

/// Scrapes of `job` with `result` (`up`, `down`) so far, from epicenter's own
/// `epicenter_scrapes_total`; 0 while the server does not answer.
fn scrapes_so_far(server: &str, job: &str, result: &str) -> u64 {
    let series = format!("epicenter_scrapes_total{{job=\"{job}\",result=\"{result}\"}} ");
    try_get(server, "/metrics")
        .and_then(|(_, metrics)| {
            metrics
                .lines()
                .find_map(|line| line.strip_prefix(series.as_str()).map(str::to_string))
        })
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
    out
}

fn sql(config: &std::path::Path, query: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args([
            "sql",
            "--format",
            "TabSeparated",
            "--config",
            config.to_str().unwrap(),
            query,
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn run_scrapes_into_the_embedded_store_and_sql_reads_it() {
    if !library_available() {
        return;
    }
    let live = serve(BODY);
    let dead = format!("127.0.0.1:{}", common::free_port());
    let server = format!("127.0.0.1:{}", common::free_port());
    let dir = scratch("epicenter-run");
    let config = dir.join("epicenter.yml");
    std::fs::write(
        &config,
        format!(
            "global: {{scrape_interval: 500ms}}\nserver: {{listen_address: '{server}'}}\nscrape_configs:\n  - job_name: backend\n    static_configs: [{{targets: ['{live}'], labels: {{dc: dc-1, host: jvm-1, service: backend}}}}]\n  - job_name: redis\n    static_configs: [{{targets: ['{dead}'], labels: {{dc: dc-2, service: redis}}}}]\nstorage:\n  embedded: {{path: '{}'}}\n",
            dir.join("data").display()
        ),
    )
    .unwrap();

    let child = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["run", "--config", config.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // While it runs: epicenter's own endpoints, once both targets have been scraped twice.
    wait_until("two scrapes of each target", || {
        scrapes_so_far(&server, "backend", "up") >= 2 && scrapes_so_far(&server, "redis", "down") >= 2
    });
    let (status, body) = http_get(&server, "/api/v1/targets");
    assert_eq!(status, 200, "{body}");
    let targets: serde_json::Value = serde_json::from_str(&body).unwrap();
    let active = targets["data"]["activeTargets"].as_array().unwrap();
    assert_eq!(active.len(), 2);
    let backend = active.iter().find(|target| target["scrapePool"] == "backend").unwrap();
    assert_eq!(backend["health"], "up");
    assert_eq!(backend["labels"]["dc"], "dc-1");
    assert_eq!(backend["scrapeUrl"], format!("http://{live}/metrics"));
    let redis = active.iter().find(|target| target["scrapePool"] == "redis").unwrap();
    assert_eq!(redis["health"], "down");
    assert!(redis["lastError"].as_str().unwrap().contains("request failed"));
    let (status, metrics) = http_get(&server, "/metrics");
    assert_eq!(status, 200);
    assert!(
        metrics.contains("epicenter_scrapes_total{job=\"redis\",result=\"down\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("epicenter_scrape_duration_seconds_bucket{job=\"backend\""),
        "{metrics}"
    );
    assert!(
        metrics.contains("epicenter_sink_rows_written_total{table=\"samples\"}"),
        "{metrics}"
    );
    // Issue 16: the health of epicenter's targets, under labels that do not clash with the
    // job/instance a Prometheus scraping epicenter sets; the process and build metrics.
    for line in [
        format!("epicenter_target_up{{scrape_job=\"backend\",target_instance=\"{live}\"}} 1"),
        format!("epicenter_target_up{{scrape_job=\"redis\",target_instance=\"{dead}\"}} 0"),
        "epicenter_targets{scrape_job=\"redis\",health=\"down\"} 1".to_string(),
        "epicenter_targets{scrape_job=\"backend\",health=\"up\"} 1".to_string(),
        format!("epicenter_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION")),
    ] {
        assert!(metrics.lines().any(|metric| metric == line), "{line}\n{metrics}");
    }
    let resident: f64 = metrics
        .lines()
        .find_map(|line| line.strip_prefix("process_resident_memory_bytes "))
        .unwrap_or_else(|| panic!("no process_resident_memory_bytes\n{metrics}"))
        .parse()
        .unwrap();
    // Between 1 MiB and 4 GiB: a number from /proc, not a placeholder.
    assert!((1048576.0..4294967296.0).contains(&resident), "{resident}");
    assert!(metrics.contains("process_cpu_seconds_total "), "{metrics}");
    assert_eq!(http_get(&server, "/readyz").0, 200);
    assert_eq!(http_get(&server, "/healthz"), (200, "ok\n".to_string()));
    terminate(&child);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("scraping 2 static targets"), "{stderr}");

    let scrapes = sql(
        &config,
        // Slots skipped while a busy machine held epicenter back are rows too (`skipped:`),
        // but they say nothing of the targets.
        "SELECT job, up, count() FROM scrapes WHERE error NOT LIKE 'skipped:%' GROUP BY job, up ORDER BY job, up",
    );
    let rows: Vec<Vec<&str>> = scrapes.lines().map(|line| line.split('\t').collect()).collect();
    assert_eq!(rows.len(), 2, "{scrapes}");
    assert_eq!((rows[0][0], rows[0][1]), ("backend", "1"));
    assert_eq!((rows[1][0], rows[1][1]), ("redis", "0"));
    let live_scrapes: u64 = rows[0][2].parse().unwrap();
    let dead_scrapes: u64 = rows[1][2].parse().unwrap();
    // At least the scrapes seen before the stop: every one was flushed.
    assert!(live_scrapes >= 2, "{live_scrapes}");
    assert!(dead_scrapes >= 2, "{dead_scrapes}");

    let samples: u64 = sql(&config, "SELECT count() FROM samples").trim().parse().unwrap();
    assert_eq!(
        samples,
        live_scrapes * (BODY_SAMPLES + SYNTHETIC_SERIES) + dead_scrapes * SYNTHETIC_SERIES
    );

    let errors = sql(&config, "SELECT DISTINCT error FROM scrapes WHERE job = 'redis'");
    assert!(errors.contains("request failed"), "{errors}");
    let up = sql(
        &config,
        "SELECT job, max(value) FROM samples WHERE metric = 'up' GROUP BY job ORDER BY job",
    );
    assert_eq!(up, "backend\t1\nredis\t0\n");
    let placement = sql(
        &config,
        "SELECT DISTINCT dc, host, service FROM samples WHERE metric = 'jetty_threads_busy'",
    );
    assert_eq!(placement, "dc-1\tjvm-1\tbackend\n");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_config_exits_64_before_anything_starts() {
    let dir = scratch("epicenter-run-bad");
    let config = dir.join("bad.yml");
    std::fs::write(
        &config,
        "scrape_configs:\n  - job_name: a\n    static_configs: [{targets: ['nohost:0']}]\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["run", "--config", config.to_str().unwrap(), "--for", "1s"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&output.stderr).contains("'nohost:0' has an invalid port"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn file_sd_targets_are_scraped_and_a_changed_file_is_picked_up() {
    if !library_available() {
        return;
    }
    let first = serve(BODY);
    let second = serve(BODY);
    let server = format!("127.0.0.1:{}", common::free_port());
    let dir = scratch("epicenter-file-sd-run");
    let targets_file = dir.join("backends.json");
    std::fs::write(
        &targets_file,
        format!("[{{\"targets\": [\"{first}\"], \"labels\": {{\"dc\": \"dc-1\"}}}}]"),
    )
    .unwrap();
    let config = dir.join("epicenter.yml");
    std::fs::write(
        &config,
        format!(
            "global: {{scrape_interval: 500ms}}\nserver: {{listen_address: '{server}'}}\nscrape_configs:\n  - job_name: backend\n    file_sd_configs: [{{files: ['{}'], refresh_interval: 1s}}]\nstorage:\n  embedded: {{path: '{}'}}\n",
            dir.join("*.json").display(),
            dir.join("data").display()
        ),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["run", "--config", config.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the file's target scraped", || {
        active_targets(&server).iter().any(|target| target["health"] == "up")
    });
    assert_eq!(active_targets(&server).len(), 1);
    // A second target appears in the file: picked up at the next re-read (1 s refresh).
    std::fs::write(
        &targets_file,
        format!("[{{\"targets\": [\"{first}\", \"{second}\"], \"labels\": {{\"dc\": \"dc-1\"}}}}]"),
    )
    .unwrap();
    wait_until("both targets of the changed file scraped", || {
        let active = active_targets(&server);
        active.len() == 2 && active.iter().all(|target| target["health"] == "up")
    });
    let active = active_targets(&server);
    assert!(
        active.iter().all(|target| target["labels"]["dc"] == "dc-1"),
        "{active:?}"
    );
    terminate(&child);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let per_instance = sql(
        &config,
        "SELECT instance, countIf(up = 1) > 0 FROM scrapes GROUP BY instance ORDER BY instance",
    );
    let mut expected = vec![format!("{first}\t1"), format!("{second}\t1")];
    expected.sort();
    assert_eq!(per_instance.lines().collect::<Vec<_>>(), expected);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes a config scraping `targets` (host:port list) every 300 ms into `dir/data`; returns
/// it and the address of epicenter's own server.
fn write_config(dir: &std::path::Path, targets: &[&str], extra: &str) -> (std::path::PathBuf, String) {
    let server = format!("127.0.0.1:{}", common::free_port());
    let list: Vec<String> = targets.iter().map(|target| format!("'{target}'")).collect();
    let config = dir.join("epicenter.yml");
    std::fs::write(
        &config,
        format!(
            "global: {{scrape_interval: 300ms, scrape_timeout: 250ms}}\nserver: {{listen_address: '{server}'}}\nscrape_configs:\n  - job_name: backend\n    static_configs: [{{targets: [{}]}}]\n{extra}storage:\n  embedded: {{path: '{}'}}\n",
            list.join(", "),
            dir.join("data").display()
        ),
    )
    .unwrap();
    (config, server)
}

#[test]
fn sigterm_flushes_what_was_scraped_before_exiting() {
    if !library_available() {
        return;
    }
    let live = serve(BODY);
    let dir = scratch("epicenter-sigterm");
    // Batches would wait 30 s: only the shutdown flush can write them.
    let (config, server) = write_config(&dir, &[&live], "batching: {max_age: 30s}\n");
    let child = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["run", "--config", config.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = 0;
    wait_until("three scrapes", || {
        seen = scrapes_so_far(&server, "backend", "up");
        seen >= 3
    });
    terminate(&child);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("stopping (SIGTERM)"), "{stderr}");
    // Every scrape seen before the signal (and any after it) was flushed.
    let scrapes: u64 = sql(&config, "SELECT count() FROM scrapes").trim().parse().unwrap();
    assert!(
        scrapes >= seen,
        "{scrapes} scrapes flushed, {seen} seen before SIGTERM\n{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shutdown_does_not_wait_for_a_hanging_scrape() {
    if !library_available() {
        return;
    }
    // Accepts connections and never answers.
    let hanging = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = hanging.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in hanging.incoming() {
            held.push(stream);
        }
    });
    let dir = scratch("epicenter-hang");
    let (config, _) = write_config(
        &dir,
        &[&address],
        "    scrape_interval: 120s\n    scrape_timeout: 100s\n",
    );
    let started = std::time::Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["run", "--config", config.to_str().unwrap(), "--for", "1s"])
        .output()
        .unwrap();
    let elapsed = started.elapsed();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    // The scrape in flight (100 s timeout) is cancelled, not waited for: the whole run,
    // start-up on a busy machine included, ends well before the timeout.
    assert!(elapsed < Duration::from_secs(60), "shutdown took {elapsed:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sql_without_a_store_says_so() {
    let dir = scratch("epicenter-nostore");
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .current_dir(&dir)
        .args(["sql", "SELECT count() FROM scrapes"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no epicenter store at ./data"));
    assert!(!dir.join("data").exists(), "sql must not create an empty store");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A folder that is not a store is refused, and left as it was (chDB would make it one).
#[test]
fn sql_refuses_a_folder_that_is_not_a_store() {
    let dir = scratch("epicenter-notastore");
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["sql", "--data", dir.to_str().unwrap(), "SELECT 1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("is not an epicenter store"), "{stderr}");
    let mut left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    left.sort();
    assert_eq!(left, ["notes.txt"]);
    // A `metadata/` folder alone (another ClickHouse's data directory, say) is not a store
    // either.
    std::fs::create_dir_all(dir.join("metadata")).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["sql", "--data", dir.to_str().unwrap(), "SELECT 1"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(std::fs::read_dir(dir.join("metadata")).unwrap().count(), 0);
    assert!(!dir.join("store").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A second Ctrl-C during the shutdown flush exits at once with status 130. It used to die of
/// SIGSEGV (status 139) about every time: `std::process::exit` ran libchdb.so's exit-time
/// destructors while the engine's threads were still working.
#[test]
fn a_second_signal_exits_130_without_crashing() {
    if !library_available() {
        return;
    }
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    use std::os::unix::process::ExitStatusExt;
    let live = serve(BODY);
    for delay_ms in [5, 5, 10, 10, 15] {
        let dir = scratch("epicenter-twice");
        let (config, server) = write_config(&dir, &[&live], "");
        let child = Command::new(env!("CARGO_BIN_EXE_epicenter"))
            .args(["run", "--config", config.to_str().unwrap()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
        // Running (its signal handlers installed) once the first round of scrapes is in.
        wait_until("ready", || {
            try_get(&server, "/readyz").is_some_and(|(status, _)| status == 200)
        });
        kill(pid, Signal::SIGINT).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = kill(pid, Signal::SIGINT);
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.signal(), None, "killed by a signal:\n{stderr}");
        // 0 when the flush finished before the second signal arrived.
        let code = output.status.code();
        assert!(code == Some(130) || code == Some(0), "{code:?}\n{stderr}");
        // 130 either way; which words depend on whether the flush had finished when the
        // second signal came (on a busy machine it may have, even after 5 ms).
        if code == Some(130) {
            assert!(
                stderr.contains("again: exiting without flushing")
                    || stderr.contains("again: everything was already written; exiting"),
                "{stderr}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Runs `epicenter sql` with `args` (and `stdin` piped in when given); returns the exit code,
/// stdout and stderr.
fn sql_with(args: &[&str], stdin: Option<&str>) -> (Option<i32>, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .arg("sql")
        .args(args)
        .stdin(if stdin.is_some() {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(text) = stdin {
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    }
    let output = child.wait_with_output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// While `run` holds the store, `sql` reads through its live endpoint and, asked to write,
/// says who holds it, in its own words (no engine output); afterwards `sql` only reads unless given --write, and takes its query from an argument
/// that starts with a comment, a file or standard input.
#[test]
fn sql_names_the_holder_reads_only_and_takes_files_and_stdin() {
    if !library_available() {
        return;
    }
    let live = serve(BODY);
    let dir = scratch("epicenter-sql-modes");
    let (config, server) = write_config(&dir, &[&live], "");
    // Rows kept 3 days (259,200 s), not the default: `sql` must leave that TTL alone.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replace("storage:\n", "storage:\n  retention: 3d\n")).unwrap();
    let config_arg = config.to_str().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["run", "--config", config_arg])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("a scrape", || scrapes_so_far(&server, "backend", "up") >= 1);
    // While `run` holds the store, `sql` reads it through run's live endpoint (the default
    // user on loopback)...
    let (code, stdout, stderr) = sql_with(
        &["--config", config_arg, "--format", "TabSeparated", "SELECT 41 + 1"],
        None,
    );
    assert_eq!((code, stdout.as_str()), (Some(0), "42\n"), "{stderr}");
    // ...and a write says who holds it, in epicenter's own words (no engine output).
    let (code, _, stderr) = sql_with(&["--config", config_arg, "--write", "SELECT 1"], None);
    assert_eq!(code, Some(1), "{stderr}");
    let holder = format!("is held by `epicenter run --config {config_arg}` (pid {})", child.id());
    assert!(stderr.contains(&holder), "{stderr}");
    assert!(stderr.contains("its live SQL endpoint only reads"), "{stderr}");
    assert!(
        !stderr.contains("Code: 76") && !stderr.contains("DB::Exception"),
        "{stderr}"
    );
    terminate(&child);
    assert!(child.wait_with_output().unwrap().status.success());

    let base = ["--config", config_arg, "--format", "TabSeparated"];
    fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        base.iter().chain(extra).copied().collect()
    }
    let count = "SELECT count() > 0 FROM scrapes";
    // Writes, DDL, settings and table functions are refused, and nothing changes.
    for statement in [
        "DROP TABLE scrapes",
        "INSERT INTO scrapes (job) VALUES ('x')",
        "SELECT * FROM file('/etc/hostname', 'LineAsString')",
        "SELECT 1 SETTINGS max_threads = 1",
    ] {
        let (code, stdout, stderr) = sql_with(&with(&base, &[statement]), None);
        assert_eq!(code, Some(1), "{statement}: {stdout}");
        assert!(
            stderr.starts_with("error: `epicenter sql` only reads"),
            "{statement}: {stderr}"
        );
        assert!(stderr.contains("(READONLY)"), "{statement}: {stderr}");
    }
    let (_, before, _) = sql_with(&with(&base, &["SELECT count() FROM scrapes WHERE job = 'x'"]), None);
    assert_eq!(before, "0\n");
    // --write allows them.
    let (code, _, stderr) = sql_with(
        &with(&base, &["--write", "CREATE TABLE notes (text String) ENGINE = Memory"]),
        None,
    );
    assert_eq!(code, Some(0), "{stderr}");
    // A query that starts with a comment, from the argument, a file and standard input.
    let commented = format!("-- did anything get scraped?\n{count}");
    assert_eq!(sql_with(&with(&base, &[&commented]), None).1, "1\n");
    let file = dir.join("question.sql");
    std::fs::write(&file, format!("{commented};\n")).unwrap();
    assert_eq!(sql_with(&with(&base, &["-f", file.to_str().unwrap()]), None).1, "1\n");
    assert_eq!(sql_with(&with(&base, &["-f", "-"]), Some(&commented)).1, "1\n");
    assert_eq!(sql_with(&with(&base, &[]), Some(&commented)).1, "1\n");
    // A failing query: epicenter's words first, the engine's after.
    let (code, _, stderr) = sql_with(&with(&base, &["SELECT nosuchcolumn FROM scrapes"]), None);
    assert_eq!(code, Some(1));
    assert!(
        stderr.starts_with("error: the query failed; the embedded store at"),
        "{stderr}"
    );
    assert!(stderr.contains("UNKNOWN_IDENTIFIER"), "{stderr}");
    // Opened by `--data` alone (the default retention), `sql` ran no DDL: the 3-day TTL stands.
    let data = dir.join("data");
    let ttl = "SELECT engine_full FROM system.tables WHERE database = 'epicenter' AND name = 'sample_values'";
    let (code, engine, stderr) = sql_with(
        &["--data", data.to_str().unwrap(), "--format", "TabSeparated", ttl],
        None,
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(engine.contains("toIntervalSecond(259200)"), "{engine}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `run --shard 1/3` keeps exactly the targets whose address hashes to 1 modulo 3 (MD5's last
/// 8 bytes as a big-endian integer, as Prometheus's `hashmod` computes it; the expected set
/// comes from Python's hashlib, not from epicenter), and says so; a shard that does not exist
/// is refused with what is wanted, before anything starts.
#[test]
fn a_shard_scrapes_only_the_targets_that_hash_to_it() {
    if !library_available() {
        return;
    }
    // Nothing listens on these ports: the targets are listed (and down), which is all this
    // test reads.
    let addresses: Vec<String> = (1..=12).map(|index| format!("127.0.0.1:{}", 20_000 + index)).collect();
    let script = "import hashlib, sys\nfor a in sys.argv[1:]:\n    h = int.from_bytes(hashlib.md5(a.encode()).digest()[8:], 'big')\n    print(a, h % 3)\n";
    let hashed = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(&addresses)
        .output()
        .unwrap();
    assert!(hashed.status.success());
    let expected: std::collections::BTreeSet<String> = String::from_utf8(hashed.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| line.strip_suffix(" 1").map(str::to_string))
        .collect();
    assert!(!expected.is_empty() && expected.len() < addresses.len(), "{expected:?}");

    let dir = scratch("epicenter-shard");
    let listed: Vec<&str> = addresses.iter().map(String::as_str).collect();
    let (config, server) = write_config(&dir, &listed, "");
    let refused = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["run", "--config", config.to_str().unwrap(), "--shard", "3/3"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("INDEX 3 is not below COUNT 3 in '3/3'"), "{stderr}");

    let child = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["run", "--config", config.to_str().unwrap(), "--shard", "1/3"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut active = Vec::new();
    wait_until("the shard's targets listed", || {
        active = active_targets(&server);
        !active.is_empty()
    });
    terminate(&child);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let scraped: std::collections::BTreeSet<String> = active
        .iter()
        .map(|target| target["labels"]["instance"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(scraped, expected, "{stderr}");
    assert!(
        stderr.contains("shard 1/3: scraping the targets whose address hashes to 1 (mod 3)"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
