//! The live store's SQL endpoint (`storage.http`) of a real `epicenter run` that scrapes its
//! own `/metrics` into the embedded store: while it runs, the store answers over the
//! ClickHouse HTTP interface to an authenticated user (three ways of giving the password,
//! query parameters bound by the engine), and to `epicenter sql`; every attack on it is
//! refused with ClickHouse's error code and changes nothing; after it stops, `epicenter sql`
//! answers the same question from the store on disk.
//!
//! Needs `libchdb.so` (`scripts/setup`); skipped without it except in CI.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

mod common;

use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{
    epicenter_log, official_clients, output_of, require, signal, start_live_store, wait_port, LiveStore, Signal,
};

const PASSWORD: &str = "s3cret-live-Pa55";

/// One HTTP/1.1 request to 127.0.0.1:`port`; returns the status, the
/// `X-ClickHouse-Exception-Code` header (empty when absent) and the body.
fn request(port: u16, target: &str, headers: &[(&str, &str)], body: &str) -> (u16, String, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head = format!(
        "POST {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let code = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("x-clickhouse-exception-code")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_default();
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, code, body)
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
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

/// The user's headers (`X-ClickHouse-User`/`-Key`, as the official clients send them).
fn as_grafana() -> [(&'static str, &'static str); 2] {
    [("X-ClickHouse-User", "grafana"), ("X-ClickHouse-Key", PASSWORD)]
}

fn epicenter_sql(args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .arg("sql")
        .args(args)
        .env("EPICENTER_TEST_SQL_PASSWORD", PASSWORD)
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn the_live_store_answers_over_http_refuses_every_attack_and_sql_uses_it() {
    if require(&[]).is_none() {
        return;
    }
    let LiveStore {
        dir,
        api,
        sql_port,
        data,
        mut guard,
    } = start_live_store(
        "live-sql",
        ("300ms", "250ms"),
        "    users: [{name: grafana, password_env: EPICENTER_TEST_SQL_PASSWORD}]\n",
        &[("EPICENTER_TEST_SQL_PASSWORD", PASSWORD)],
    );
    // The endpoint is served before the API binds: by the time `start_live_store` saw the
    // API's port take connections, `sql --data` can find it (CI once asked in between).
    assert_eq!(
        std::fs::read_to_string(data.join("http-endpoint")).ok().as_deref(),
        Some(format!("http://127.0.0.1:{sql_port}\n").as_str()),
        "the API answered before the SQL endpoint was advertised: {}",
        epicenter_log(&dir)
    );
    assert!(
        wait_port(sql_port, Duration::from_secs(30)),
        "no SQL endpoint: {}",
        epicenter_log(&dir)
    );
    let config_path = dir.join("epicenter.yml");
    let config_arg = config_path.to_str().unwrap();
    let scraped = "SELECT count() > 0 FROM scrapes WHERE job = 'self'";
    let started = Instant::now();
    while request(sql_port, "/", &as_grafana(), scraped).2 != "1\n" {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no scrape stored within 60 s: {}",
            epicenter_log(&dir)
        );
        std::thread::sleep(Duration::from_millis(300));
    }

    // The three ways ClickHouse takes a password, and `/ping` without one.
    let basic = {
        use base64::Engine;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("grafana:{PASSWORD}"))
        )
    };
    assert_eq!(
        request(sql_port, "/", &[("Authorization", &basic)], "SELECT 41 + 1").2,
        "42\n"
    );
    let target = format!(
        "/?user=grafana&password={}&query={}",
        encode(PASSWORD),
        encode("SELECT 42")
    );
    assert_eq!(request(sql_port, &target, &[], "").2, "42\n");
    assert_eq!(
        request(sql_port, "/ping", &[], ""),
        (200, String::new(), "Ok.\n".to_string())
    );

    // No password, a wrong one, an unknown user: 401 with code 516, the password never echoed.
    for headers in [
        vec![],
        vec![("X-ClickHouse-User", "grafana"), ("X-ClickHouse-Key", "guess")],
        vec![("X-ClickHouse-User", "default"), ("X-ClickHouse-Key", "")],
        vec![("X-ClickHouse-User", "admin"), ("X-ClickHouse-Key", PASSWORD)],
    ] {
        let (status, code, body) = request(sql_port, "/", &headers, "SELECT 1");
        assert_eq!((status, code.as_str()), (401, "516"), "{headers:?}: {body}");
        assert!(body.contains("AUTHENTICATION_FAILED"), "{body}");
        assert!(!body.contains(PASSWORD), "{body}");
    }

    // Query parameters are bound by the engine as typed values, never pasted into the SQL.
    let question = encode("SELECT count() > 0 FROM scrapes WHERE job = {job:String}");
    let bound = |value: &str| {
        request(
            sql_port,
            &format!("/?query={question}&param_job={}", encode(value)),
            &as_grafana(),
            "",
        )
    };
    assert_eq!(bound("self").2, "1\n");
    assert_eq!(bound("x' OR 1 = 1 OR job = '").2, "0\n");
    assert_eq!(bound("\\' OR 1 = 1 --").2, "0\n");

    // Attacks: each is refused with ClickHouse's code, and changes nothing.
    let url_attack = format!("SELECT * FROM url('http://{api}/metrics', 'LineAsString')");
    let outfile = dir.join("written-by-a-reader");
    let outfile_attack = format!("SELECT 'x' INTO OUTFILE '{}' FORMAT RawBLOB", outfile.display());
    let attacks = [
        ("/", "INSERT INTO scrapes (job) VALUES ('x')", "164"),
        (
            "/?query=INSERT%20INTO%20scrapes%20(job)%20FORMAT%20TabSeparated",
            "x\n",
            "164",
        ),
        ("/", "DROP TABLE scrapes", "164"),
        ("/", "TRUNCATE TABLE scrapes", "164"),
        ("/", "SELECT * FROM file('/etc/hostname', 'LineAsString')", "164"),
        ("/", url_attack.as_str(), "164"),
        ("/", "SELECT * FROM remote('127.0.0.1:9000', system.one)", "164"),
        ("/", "SELECT 1 SETTINGS readonly = 0", "164"),
        ("/?database=epicenter%3B%20DROP%20TABLE%20scrapes", "SELECT 1", "81"),
        ("/?param_x%3BDROP=1", "SELECT 1", "456"),
        // What readonly = 1 leaves open in the embedded engine (found by a helper).
        ("/", outfile_attack.as_str(), "164"),
        ("/", "KILL QUERY WHERE query LIKE 'INSERT%' SYNC", "164"),
        ("/", "SYSTEM STOP MERGES", "164"),
        ("/", "SELECT 1; SELECT 2", "62"),
        ("/", "  \n", "62"),
    ];
    for (target, body, expected) in attacks {
        let (status, code, answer) = request(sql_port, target, &as_grafana(), body);
        assert_eq!((status, code.as_str()), (500, expected), "{target} {body}: {answer}");
    }
    assert!(!outfile.exists(), "INTO OUTFILE wrote {}", outfile.display());
    // No request sees another's session: a failed query leaves no output behind, query
    // parameters and USE do not carry over.
    let (status, _, _) = request(
        sql_port,
        "/",
        &as_grafana(),
        "SELECT concat('left-', toString(number)), throwIf(number >= 70000, 'boom') FROM numbers(100000)",
    );
    assert_eq!(status, 500);
    assert_eq!(request(sql_port, "/", &as_grafana(), "SELECT 1").2, "1\n");
    assert_eq!(
        request(
            sql_port,
            "/?param_secret=private",
            &as_grafana(),
            "SELECT {secret:String}"
        )
        .2,
        "private\n"
    );
    let (status, _, body) = request(sql_port, "/", &as_grafana(), "SELECT {secret:String}");
    assert_eq!(status, 500, "a parameter carried over: {body}");
    assert_eq!(request(sql_port, "/", &as_grafana(), "USE system").0, 200);
    assert_eq!(request(sql_port, "/", &as_grafana(), scraped).2, "1\n");
    // A compressed body is refused rather than read as nothing.
    let (_, code, _) = request(
        sql_port,
        "/",
        &[as_grafana()[0], as_grafana()[1], ("Content-Encoding", "gzip")],
        "x",
    );
    assert_eq!(code, "48");
    // The connection's limits stand, and no query can lift them.
    assert_eq!(
        request(
            sql_port,
            "/",
            &as_grafana(),
            "SELECT getSetting('max_memory_usage'), getSetting('max_result_bytes')"
        )
        .2,
        "201326592\t33554432\n"
    );
    let (_, code, _) = request(sql_port, "/", &as_grafana(), "SET max_memory_usage = 0");
    assert_eq!(code, "164");
    let (_, _, tables) = request(
        sql_port,
        "/",
        &as_grafana(),
        "SELECT count() FROM system.tables WHERE database = 'epicenter' AND name = 'scrapes'",
    );
    assert_eq!(tables, "1\n", "the scrapes table survived");
    assert_eq!(
        request(
            sql_port,
            "/",
            &as_grafana(),
            "SELECT count() FROM scrapes WHERE job = 'x'"
        )
        .2,
        "0\n"
    );

    // `epicenter sql` asks the running epicenter's endpoint, with the configured user.
    let (code, stdout, stderr) = epicenter_sql(&["--config", config_arg, "--format", "TabSeparated", scraped]);
    assert_eq!((code, stdout.as_str()), (Some(0), "1\n"), "{stderr}");
    let (code, _, stderr) = epicenter_sql(&["--config", config_arg, "--write", "DROP TABLE scrapes"]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("only reads, so --write needs that process stopped"),
        "{stderr}"
    );
    // With --data alone it finds the endpoint but has no password: the server's refusal,
    // in epicenter's words first.
    let (code, _, stderr) = epicenter_sql(&["--data", data.to_str().unwrap(), "SELECT 1"]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.starts_with(&format!(
            "error: the query failed; the running epicenter's live endpoint at http://127.0.0.1:{sql_port}"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("AUTHENTICATION_FAILED"), "{stderr}");
    let (code, _, stderr) = epicenter_sql(&[
        "--config",
        config_arg,
        "SELECT * FROM file('/etc/hostname', 'LineAsString')",
    ]);
    assert_eq!(code, Some(1));
    assert!(stderr.starts_with("error: `epicenter sql` only reads"), "{stderr}");

    // The official Python and Node clients (nobody here wrote them) get the same rows as
    // `epicenter sql`, for a question fixed in time (so later scrapes do not change it).
    let newest = |port: u16| -> i64 {
        let (_, _, text) = request(
            port,
            "/",
            &as_grafana(),
            "SELECT toUnixTimestamp64Milli(max(time)) FROM scrapes WHERE job = 'self'",
        );
        text.trim().parse().unwrap()
    };
    let cutoff = newest(sql_port) - 1_000;
    let started = Instant::now();
    while newest(sql_port) < cutoff + 3_000 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no newer flush within 60 s"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let question = "SELECT job, count() AS scrapes, countIf(up = 1) AS up FROM scrapes WHERE job = {job:String} AND toUnixTimestamp64Milli(time) <= {cutoff:Int64} GROUP BY job";
    let literal = question
        .replace("{job:String}", "'self'")
        .replace("{cutoff:Int64}", &cutoff.to_string());
    let (code, expected, stderr) = epicenter_sql(&["--config", config_arg, "--format", "TabSeparated", &literal]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(expected.starts_with("self\t"), "{expected}");
    if let Some(clients) = official_clients() {
        for (client, answer) in [
            (
                "clickhouse-connect (Python)",
                python_client(&clients, sql_port, question, cutoff),
            ),
            (
                "@clickhouse/client (Node)",
                node_client(&clients, sql_port, question, cutoff),
            ),
        ] {
            eprintln!("{client}: {}", answer.trim());
            assert_eq!(answer, expected, "{client} and epicenter sql differ");
        }
    }

    // Stopped: the endpoint file is gone, and the store on disk gives the same answer.
    signal(&guard.0[0], Signal::SIGTERM);
    let status = guard.0[0].wait().unwrap();
    assert!(status.success(), "{}", epicenter_log(&dir));
    assert!(!data.join("http-endpoint").exists());
    let (code, stdout, stderr) = epicenter_sql(&["--config", config_arg, "--format", "TabSeparated", scraped]);
    assert_eq!((code, stdout.as_str()), (Some(0), "1\n"), "{stderr}");
    let (code, from_disk, stderr) = epicenter_sql(&["--config", config_arg, "--format", "TabSeparated", &literal]);
    assert_eq!((code, from_disk), (Some(0), expected), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// clickhouse-connect (PyPI): `question` with server-side parameters, rows as TSV lines.
fn python_client(clients: &std::path::Path, port: u16, question: &str, cutoff: i64) -> String {
    let script = format!(
        "import clickhouse_connect, sys\nclient = clickhouse_connect.get_client(host='127.0.0.1', port={port}, username='grafana', password='{PASSWORD}', database='epicenter')\nresult = client.query(sys.argv[1], parameters={{'job': 'self', 'cutoff': {cutoff}}})\nfor row in result.result_rows:\n    print('\\t'.join(str(value) for value in row))\n"
    );
    output_of(&clients.join("venv/bin/python"), &["-c", &script, question], clients)
}

/// @clickhouse/client (npm): `question` with `query_params`, rows as TSV lines.
fn node_client(clients: &std::path::Path, port: u16, question: &str, cutoff: i64) -> String {
    let script = format!(
        "const {{ createClient }} = require('@clickhouse/client');\n(async () => {{\n  const client = createClient({{ url: 'http://127.0.0.1:{port}', username: 'grafana', password: '{PASSWORD}', database: 'epicenter' }});\n  const result = await client.query({{ query: process.argv[1], query_params: {{ job: 'self', cutoff: {cutoff} }}, format: 'JSONCompactEachRow' }});\n  for (const row of await result.json()) console.log(row.map(String).join('\\t'));\n  await client.close();\n}})().catch((error) => {{ console.error(error); process.exit(1); }});\n"
    );
    output_of(
        std::path::Path::new("node"),
        &["-e", &script, question],
        &clients.join("node"),
    )
}
