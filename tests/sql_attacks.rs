//! Issue 39's attack battery against the live SQL endpoint of a real `epicenter run`
//! (scraping its own `/metrics` into the embedded store, the endpoint without a password,
//! as by default): every attack is refused with ClickHouse's error code and a sentence, no
//! answer holds a secret of epicenter's environment or a password file, and questions are
//! still answered; a query of 10^12 rows or of an hour is cut off by the limits, other
//! readers are not kept waiting past [`LIVE_SLOT_WAIT`], epicenter's RSS stays under 1 GiB
//! above idle, and scraping goes on.
//!
//! What worked on 1f55c1b (from the adversarial probe of 2026-12-07 in issue 39, and
//! re-checked for this battery on 2026-12-07 by running 1f55c1b's `guard::read_only_refusal`
//! on each statement and the statements it let through against chDB 26.7.3 with 1f55c1b's
//! engine settings, `readonly = 1` and the default all-granting user): the scalar
//! `file('/proc/self/environ')`, `file('/etc/hostname')` and `file(<password_file>)`
//! answered the files; `SELECT 1 #!\nSYSTEM STOP MERGES`, ``SELECT 1 #'`` and
//! ``SELECT $$'$$`` hid `KILL QUERY` and `SYSTEM STOP MERGES` from the old lexical guard
//! (a `'` it took for a string), and both ran; `system.processes`, `system.server_settings`,
//! `system.stack_trace`, `SHOW PROCESSLIST` answered; `database=system` answered
//! `processes`; any `Host` header was answered; `?readonly=0` and `?max_execution_time=0`
//! were accepted (ignored); a 10^12-row TSV answer reached 12.98 GB of RSS and four slow
//! readers kept a fifth waiting up to 120 s. Refused already then: the `file`/`url`/
//! `remote`/`s3`/`executable`/`dictionary` table functions, `CREATE DICTIONARY` (readonly),
//! query-level `SETTINGS` and `SET` (readonly).
//!
//! Needs `libchdb.so` (`scripts/setup`); skipped without it except in CI.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::{epicenter_log, require, start_live_store, wait_port, LiveStore};
use epicenter_store::http::LIVE_SLOT_WAIT;

/// A value only epicenter's environment holds: no answer may contain it.
const CANARY: &str = "canary-env-7f3a91c2";
/// The content of a password file (as `storage.http.users[].password_file` holds) the
/// attacks try to read.
const FILE_PASSWORD: &str = "canary-file-5b7e20d4";

/// One HTTP/1.1 request to 127.0.0.1:`port` with `host` as its `Host` header; returns the
/// status, the `X-ClickHouse-Exception-Code` header (empty when absent) and the body.
fn request(port: u16, host: &str, target: &str, body: &str) -> (u16, String, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let head = format!(
        "POST {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.split(' ').nth(1).unwrap_or("0").parse().unwrap_or(0);
    let code = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("x-clickhouse-exception-code")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_default();
    (status, code, body.to_string())
}

/// Percent-encodes a query parameter's value.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (byte as char).to_string(),
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// Resident set size of process `pid` in bytes (`VmRSS` of /proc/PID/status).
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

#[test]
fn every_attack_on_the_live_endpoint_is_refused_and_questions_are_answered() {
    if require(&[]).is_none() {
        return;
    }
    // `default` without a password: the default on loopback.
    let LiveStore {
        dir,
        api,
        sql_port: port,
        guard,
        ..
    } = start_live_store("sql-attacks", ("1s", "900ms"), "", &[("EPICENTER_TEST_CANARY", CANARY)]);
    let host = format!("127.0.0.1:{port}");
    let password_file = dir.join("grafana.password");
    std::fs::write(&password_file, format!("{FILE_PASSWORD}\n")).unwrap();
    assert!(
        wait_port(port, Duration::from_secs(30)),
        "no SQL endpoint: {}",
        epicenter_log(&dir)
    );
    let pid = guard.0[0].id();
    let ask = |body: &str| request(port, &host, "/", body);
    let scraped = "SELECT count() > 0 FROM scrapes WHERE job = 'self'";
    let started = Instant::now();
    while ask(scraped).2 != "1\n" {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no scrape stored: {}",
            epicenter_log(&dir)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let password_path = password_file.display().to_string();
    // (statement, expected ClickHouse code): 164 READONLY and 497 ACCESS_DENIED refuse what a
    // reader may not do, 62 SYNTAX_ERROR text the endpoint will not read.
    let attacks: Vec<(String, &str)> = vec![
        ("SELECT file('/proc/self/environ')".into(), "164"),
        ("SELECT file('/etc/hostname')".into(), "164"),
        (format!("SELECT file('{password_path}')"), "164"),
        ("SELECT `file`('/proc/self/environ')".into(), "164"),
        ("SELECT FILE /* x */ ('/proc/self/environ')".into(), "164"),
        ("SELECT * FROM file('/proc/self/environ', 'LineAsString')".into(), "164"),
        ("SELECT * FROM default.`/proc/self/environ`".into(), "497"),
        (format!("SELECT * FROM url('http://{api}/metrics', 'LineAsString')"), "164"),
        ("SELECT * FROM remote('127.0.0.1:9000', system.one)".into(), "164"),
        ("SELECT * FROM remoteSecure('127.0.0.1:9440', system.one)".into(), "164"),
        ("SELECT * FROM cluster('default', system.one)".into(), "164"),
        ("SELECT * FROM s3('s3://bucket/key.csv')".into(), "164"),
        ("SELECT * FROM input('x String')".into(), "164"),
        ("SELECT * FROM executable('cat', 'TSV', 'x String')".into(), "164"),
        ("SELECT dictGet('d', 'a', toUInt64(1))".into(), "164"),
        ("SELECT * FROM dictionary('d')".into(), "164"),
        (
            "CREATE DICTIONARY d (x UInt64) PRIMARY KEY x SOURCE(FILE(path '/etc/hostname' format 'TSV')) LAYOUT(FLAT()) LIFETIME(0)".into(),
            "164",
        ),
        ("SELECT * FROM system.users".into(), "164"),
        ("SELECT * FROM system.server_settings".into(), "164"),
        ("SELECT * FROM system.processes".into(), "164"),
        ("SELECT * FROM `system`.`stack_trace`".into(), "164"),
        ("SHOW PROCESSLIST".into(), "164"),
        ("SELECT 1 #!\nKILL QUERY WHERE 1".into(), "62"),
        ("SELECT 1 #!\nSYSTEM STOP MERGES".into(), "62"),
        ("SELECT 1 #'\n; SYSTEM STOP MERGES -- '".into(), "62"),
        ("SELECT $$'$$; KILL QUERY WHERE 1 -- '".into(), "62"),
        ("SELECT 1 -- x\n; KILL QUERY WHERE 1".into(), "62"),
        ("SELECT 1 /* ; */ ; SYSTEM STOP FETCHES".into(), "62"),
        ("SELECT '\\\\'; KILL QUERY WHERE 1".into(), "62"),
        ("KILL QUERY WHERE 1".into(), "164"),
        ("SYSTEM STOP MERGES".into(), "164"),
        ("SYSTEM STOP FETCHES".into(), "164"),
        ("SELECT 1 SETTINGS max_execution_time = 0".into(), "164"),
        ("SET readonly = 0".into(), "164"),
        (format!("SELECT 1 INTO OUTFILE '{}/x' FORMAT RawBLOB", dir.display()), "164"),
    ];
    for (attack, expected) in &attacks {
        let (status, code, body) = ask(attack);
        assert_eq!((status, code.as_str()), (500, *expected), "{attack}: {body}");
        assert!(body.contains("DB::Exception"), "{attack}: {body}");
        assert!(
            !body.contains(CANARY) && !body.contains(FILE_PASSWORD),
            "{attack} leaked: {body}"
        );
    }
    assert!(!dir.join("x").exists(), "INTO OUTFILE wrote a file");
    // Settings in the URL that would lift a limit or readonly; a database that would make
    // every system table a bare name.
    for target in [
        "/?readonly=0",
        "/?max_execution_time=0",
        "/?max_memory_usage=0",
        "/?max_result_bytes=100000000000",
        "/?allow_introspection_functions=1",
        "/?database=system",
    ] {
        let (status, code, body) = request(port, &host, target, "SELECT 1");
        assert_eq!((status, code.as_str()), (500, "164"), "{target}: {body}");
    }
    // A foreign Host header (DNS rebinding): refused before anything, /ping included.
    for target in ["/", "/ping"] {
        let (status, code, body) = request(port, &format!("rebind.example:{port}"), target, "SELECT 1");
        assert_eq!((status, code.as_str()), (403, "516"), "{target}: {body}");
    }
    assert_eq!(request(port, &format!("localhost:{port}"), "/", "SELECT 42").2, "42\n");

    // Questions the dashboards and docs ask are still answered.
    assert_eq!(ask(scraped).2, "1\n");
    assert_eq!(
        ask("SELECT count() FROM system.tables WHERE database = 'epicenter' AND name = 'scrapes'").2,
        "1\n"
    );
    let question = encode("SELECT {x:UInt8} + 1");
    assert_eq!(
        request(port, &host, &format!("/?query={question}&param_x=41&readonly=1"), "").2,
        "42\n"
    );
    assert_eq!(
        ask("SELECT 'file(''/etc/hostname'')', '#!', '$$'").2,
        "file(\\'/etc/hostname\\')\t#!\t$$\n"
    );

    // Memory and time: cut off by the limits, epicenter's RSS under 1 GiB above idle,
    // other readers refused after LIVE_SLOT_WAIT rather than kept waiting, scraping on.
    let idle = rss(pid);
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(idle));
    let sampling = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let (peak, sampling) = (peak.clone(), sampling.clone());
        std::thread::spawn(move || {
            while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                peak.fetch_max(rss(pid), std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let scrapes_before: u64 = ask("SELECT count() FROM scrapes").2.trim().parse().unwrap();
    let (_, code, body) = ask("SELECT number FROM numbers(1000000000000) FORMAT TSV");
    assert_eq!(code, "396", "10^12 rows: {}", &body[..body.len().min(300)]);
    let (_, code, body) = ask("SELECT groupArray(number) FROM numbers(1000000000000)");
    assert_eq!(code, "241", "an array of 10^12: {body}");
    let slow = "SELECT sum(number) FROM numbers(10000000000000)";
    let slow_readers: Vec<_> = (0..epicenter_store::http::LIVE_QUERIES)
        .map(|_| {
            let host = host.clone();
            std::thread::spawn(move || request(port, &host, "/", slow))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let (_, waiting, body) = ask("SELECT 1");
    assert_eq!(waiting, "202", "a fifth reader behind four slow ones: {body}");
    assert!(
        body.contains(&format!("within {} s", LIVE_SLOT_WAIT.as_secs())),
        "{body}"
    );
    for reader in slow_readers {
        let (_, code, body) = reader.join().unwrap();
        assert_eq!(code, "159", "an hour-long question: {body}");
    }
    sampling.store(false, std::sync::atomic::Ordering::Relaxed);
    sampler.join().unwrap();
    let peak = peak.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("epicenter RSS: idle {} MiB, peak {} MiB", idle >> 20, peak >> 20);
    assert!(
        peak < idle + (1 << 30),
        "RSS rose from {} MiB to {} MiB",
        idle >> 20,
        peak >> 20
    );
    assert_eq!(
        ask("SELECT 1").2,
        "1\n",
        "readers are answered once the slow ones are cut off"
    );
    let (scrapes_after, failed) = {
        let text = ask("SELECT count(), countIf(up = 0) FROM scrapes").2;
        let (count, failed) = text.trim().split_once('\t').unwrap();
        (count.parse::<u64>().unwrap(), failed.parse::<u64>().unwrap())
    };
    assert!(
        scrapes_after > scrapes_before + 10,
        "scraping stalled: {scrapes_before} -> {scrapes_after}"
    );
    assert_eq!(failed, 0, "scrapes failed during the battery: {}", epicenter_log(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}
