//! Secrets stay secret (fault test 7 of the nothing-lost issue): a secret given in each way
//! epicenter takes one — a ClickHouse URL's userinfo, `password_env`, `password_file`, a
//! webhook URL's query, an Alertmanager URL's userinfo — appears in no log line at any level
//! (`EPICENTER_LOG=trace`), no error, no `check config` output and no API response. The URLs
//! still show which endpoint is meant: user, host, port, path, query names, the secret parts
//! as `xxxxx`.
//!
//! Each test prints its figures (outputs searched, lines read, secrets found); scripts/test
//! runs them beside fault tests 1-5, output shown. Needs `libchdb.so` (`scripts/setup`) for
//! the live run; skipped without it except in CI.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{
    epicenter_log, free_port, get_json, get_text, get_with_headers, require, start_epicenter_with, start_fleet, Guard,
};

const IN_CLICKHOUSE_URL: &str = "Userinfo-S3cret-7f3a";
const IN_ENV: &str = "Env-S3cret-91c2";
const IN_FILE: &str = "File-S3cret-44d0";
const IN_WEBHOOK_QUERY: &str = "Hook-S3cret-0b9e";
const IN_ALERTMANAGER_URL: &str = "Am-S3cret-5d21";
const ENV_VARIABLE: &str = "EPICENTER_TEST_CLICKHOUSE_PASSWORD";

// Outputs searched and lines read by `assert_no_secret`, for the figures each test prints
// (each test runs on a thread of its own).
thread_local! {
    static SEARCHED: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// Prints fault 7's figures for this test: the five secrets, how many outputs and lines
/// were searched, found 0 times (any finding has already failed the test).
fn figures(test: &str) {
    let (outputs, lines) = SEARCHED.get();
    eprintln!(
        "fault 7 ({test}): 5 secrets given 5 ways, looked for in {outputs} outputs ({lines} lines): found 0 times"
    );
}

/// Fails naming the secret and the line it leaked in.
fn assert_no_secret(what: &str, text: &str) {
    let (outputs, lines) = SEARCHED.get();
    SEARCHED.set((outputs + 1, lines + text.lines().count()));
    for secret in [
        IN_CLICKHOUSE_URL,
        IN_ENV,
        IN_FILE,
        IN_WEBHOOK_QUERY,
        IN_ALERTMANAGER_URL,
    ] {
        if let Some(line) = text.lines().find(|line| line.contains(secret)) {
            panic!("{what} shows the secret {secret}: {line}");
        }
    }
}

/// A folder for one test with the password file in it.
fn folder(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("epicenter-secrets-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("password"), format!("{IN_FILE}\n")).unwrap();
    dir
}

/// The notifiers section, both notifiers aimed at `port`, where nothing listens.
fn notifiers(port: u16) -> String {
    format!(
        "notifiers:\n  - {{name: hook, type: webhook, url: 'http://127.0.0.1:{port}/hooks/epicenter?token={IN_WEBHOOK_QUERY}'}}\n  - {{name: pager, type: alertmanager, url: 'http://pager:{IN_ALERTMANAGER_URL}@127.0.0.1:{port}'}}\n"
    )
}

/// The three ways of giving the ClickHouse password, each with a server at `port` (where
/// nothing listens): (name, storage section).
fn storages(dir: &std::path::Path, port: u16) -> Vec<(&'static str, String)> {
    vec![
        (
            "userinfo",
            format!("storage:\n  clickhouse: {{url: 'http://reader:{IN_CLICKHOUSE_URL}@127.0.0.1:{port}'}}\n"),
        ),
        (
            // A `#` in the password: no URL parser reads this as meant; shown masked anyway.
            "hash_in_password",
            format!("storage:\n  clickhouse: {{url: 'http://reader:{IN_CLICKHOUSE_URL}#x@127.0.0.1:{port}'}}\n"),
        ),
        (
            "password_env",
            format!("storage:\n  clickhouse: {{url: 'http://127.0.0.1:{port}', user: reader, password_env: {ENV_VARIABLE}}}\n"),
        ),
        (
            "password_file",
            format!(
                "storage:\n  clickhouse: {{url: 'http://127.0.0.1:{port}', user: reader, password_file: '{}'}}\n",
                dir.join("password").display()
            ),
        ),
    ]
}

/// Runs `epicenter args…` with every log level on; stdout and stderr together.
fn epicenter(args: &[&str], config: &std::path::Path) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(args)
        .arg("--config")
        .arg(config)
        .env("EPICENTER_LOG", "trace")
        .env(ENV_VARIABLE, IN_ENV)
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn e2e_fault_7_check_config_and_a_failed_start_show_no_secret() {
    let dir = folder("check");
    let port = free_port();
    for (way, storage) in storages(&dir, port) {
        let config = dir.join(format!("{way}.yml"));
        std::fs::write(&config, format!("scrape_configs: []\n{storage}{}", notifiers(port))).unwrap();
        let checked = epicenter(&["check", "config"], &config);
        assert_no_secret(&format!("check config ({way})"), &checked);
        if way == "hash_in_password" {
            // No URL parser reads this as meant: refused, with the way out.
            assert!(checked.contains("percent-encode it"), "check config ({way}): {checked}");
        } else {
            assert!(checked.contains(": ok: "), "check config ({way}) failed: {checked}");
        }
        if way == "userinfo" {
            assert!(
                checked.contains(&format!("ClickHouse at http://reader:xxxxx@127.0.0.1:{port}/")),
                "check config does not show which server: {checked}"
            );
        }
        // Nothing listens on the ClickHouse port: start-up fails, saying where it tried.
        let started = epicenter(&["run", "--for", "3s"], &config);
        assert_no_secret(&format!("run against a server that is down ({way})"), &started);
        assert!(
            way == "hash_in_password" || started.contains(&format!("127.0.0.1:{port}")),
            "the failed start ({way}) does not name the server: {started}"
        );
    }
    // Mistakes in the URLs themselves: the errors quote them with the secret masked.
    let config = dir.join("typos.yml");
    std::fs::write(
        &config,
        format!(
            "scrape_configs:\n  - {{job_name: a, static_configs: [{{targets: ['reader:{IN_CLICKHOUSE_URL}@127.0.0.1:{port}']}}]}}\nstorage:\n  clickhouse: {{url: 'reader:{IN_CLICKHOUSE_URL}@127.0.0.1:{port}'}}\nnotifiers:\n  - {{name: hook, type: webhook, url: '127.0.0.1:{port}/hook?token={IN_WEBHOOK_QUERY}'}}\n  - {{name: pager, type: alertmanager, url: 'ftp://pager:{IN_ALERTMANAGER_URL}@127.0.0.1:{port}'}}\n"
        ),
    )
    .unwrap();
    for command in [&["check", "config"][..], &["run", "--for", "3s"][..]] {
        let refused = epicenter(command, &config);
        assert_no_secret(&format!("{command:?} refusing bad URLs"), &refused);
        for key in [
            "scrape_configs[0].static_configs[0].targets[0]",
            "storage.clickhouse.url",
            "notifiers[0].url",
            "notifiers[1].url",
        ] {
            assert!(refused.contains(key), "{command:?} does not name {key}: {refused}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    figures("check config and failed starts");
}

/// With a bearer token configured, the API answers only requests that carry it; Prometheus's
/// endpoints and the probes stay open; the token is in no response or log line; an empty
/// token file refuses to start.
#[test]
fn e2e_fault_7_a_bearer_token_guards_the_api_and_leaves_metrics_and_probes_open() {
    if require(&[]).is_none() {
        return;
    }
    const TOKEN: &str = "Bearer-S3cret-e61d";
    let dir = folder("bearer");
    std::fs::write(dir.join("token"), format!("{TOKEN}\n")).unwrap();
    let mut guard = Guard::default();
    let api = format!("127.0.0.1:{}", free_port());
    let config = |token_file: &str| {
        format!(
            "server: {{listen_address: '{api}', bearer_token_file: '{}'}}\nscrape_configs: []\nstorage:\n  embedded: {{path: '{}'}}\n",
            dir.join(token_file).display(),
            dir.join("data").display()
        )
    };
    start_epicenter_with(&dir, &api, &[("EPICENTER_LOG", "trace")], &config("token"), &mut guard);
    let status = |response: &str| response.split(' ').nth(1).unwrap_or("").to_string();
    for path in [
        "/api/v1/targets",
        "/api/v1/verdicts",
        "/api/v1/graph",
        "/api/v1/notifiers",
    ] {
        let without = get_text(&api, path);
        assert_eq!(status(&without), "401", "{path}: {without}");
        assert!(
            without.to_ascii_lowercase().contains("www-authenticate: bearer"),
            "{without}"
        );
        assert!(without.contains("no bearer token"), "{without}");
        let wrong = get_with_headers(&api, path, "Authorization: Bearer Bearer-S3cret-e61e\r\n");
        assert_eq!(status(&wrong), "401", "{path}: {wrong}");
        assert!(wrong.contains("wrong bearer token"), "{wrong}");
        let right = get_with_headers(&api, path, &format!("Authorization: Bearer {TOKEN}\r\n"));
        assert_ne!(status(&right), "401", "{path}: {right}");
        for response in [without, wrong, right] {
            assert!(!response.contains(TOKEN), "{path} shows the token: {response}");
        }
    }
    for path in ["/metrics", "/healthz", "/readyz"] {
        let open = get_text(&api, path);
        assert!(
            status(&open) == "200" || (path == "/readyz" && status(&open) == "503"),
            "{path}: {open}"
        );
    }
    drop(guard);
    let log = std::fs::read_to_string(dir.join("epicenter.log")).unwrap();
    assert!(!log.contains(TOKEN), "the log shows the token");
    // An empty token would let anyone in: refused at start.
    std::fs::write(dir.join("empty"), "\n").unwrap();
    let path = dir.join("empty.yml");
    std::fs::write(&path, config("empty")).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_epicenter"))
        .args(["run", "--for", "2s", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("server.bearer_token: the token is empty"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("fault 7 (the bearer token): 401 without the token or with a wrong one; the token in no log line");
}

/// A live run whose notifiers cannot deliver (their receivers are down, so every attempt
/// fails and is logged): the log, at trace level, and every API response stay clean.
#[test]
fn e2e_fault_7_a_live_run_with_failing_notifiers_shows_no_secret() {
    if require(&[]).is_none() {
        return;
    }
    let dir = folder("live");
    let mut guard = Guard::default();
    let api = format!("127.0.0.1:{}", free_port());
    let targets = dir.join("targets.json");
    let down = free_port();
    start_epicenter_with(
        &dir,
        &api,
        &[("EPICENTER_LOG", "trace")],
        &format!(
            "global: {{scrape_interval: 500ms, scrape_timeout: 400ms}}\nserver: {{listen_address: '{api}'}}\nscrape_configs:\n  - job_name: fleet\n    file_sd_configs: [{{files: ['{}'], refresh_interval: 1s}}]\nstorage:\n  embedded: {{path: '{}'}}\nplacement: {{instance_label: pod}}\ndetector:\n  dependencies:\n    - {{caller: api, callee: backend, same_dc: true}}\n    - {{caller: backend, callee: redis}}\n    - {{caller: backend, callee: db, same_dc: true}}\n{}",
            targets.display(),
            dir.join("data").display(),
            notifiers(down)
        ),
        &mut guard,
    );
    // A Redis node dies 9 s after the fleet starts: a verdict, and notifications that fail.
    guard.0.push(start_fleet(20, &targets));
    let started = Instant::now();
    let failed_twice = |log: &str| {
        ["notifier=hook", "notifier=pager"].iter().all(|name| {
            log.lines()
                .filter(|line| line.contains(name) && line.contains("notification failed"))
                .count()
                >= 2
        })
    };
    let log = || std::fs::read_to_string(dir.join("epicenter.log")).unwrap_or_default();
    while started.elapsed() < Duration::from_secs(120) && !failed_twice(&log()) {
        std::thread::sleep(Duration::from_millis(250));
    }
    let log = log();
    assert!(
        failed_twice(&log),
        "no failed notifications logged within 120 s: {}",
        epicenter_log(&dir)
    );
    assert_no_secret("the log", &log);
    for path in [
        "/api/v1/notifiers",
        "/api/v1/targets",
        "/api/v1/verdicts",
        "/api/v1/graph",
        "/metrics",
        "/readyz",
    ] {
        assert_no_secret(path, &get_text(&api, path));
    }
    let shown = get_text(&api, "/api/v1/notifiers");
    assert!(
        shown.contains(&format!("http://127.0.0.1:{down}/hooks/epicenter?token=xxxxx")),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("http://pager:xxxxx@127.0.0.1:{down}/")),
        "{shown}"
    );
    // A receiver that is down shows at once, with the cause in plain words (reqwest alone
    // says `error sending request`), long before an event is given up.
    let notifiers = get_json(&api, "/api/v1/notifiers");
    for notifier in notifiers["data"].as_array().unwrap() {
        assert!(notifier["errors"].as_u64().unwrap() >= 2, "{notifier}");
        let last_error = notifier["lastError"].as_str().unwrap_or_default();
        assert!(last_error.contains("Connection refused"), "{notifier}");
    }
    assert!(
        log.lines()
            .any(|line| line.contains("notification failed") && line.contains("Connection refused")),
        "no cause in the failure lines: {}",
        epicenter_log(&dir)
    );
    drop(guard);
    let _ = std::fs::remove_dir_all(&dir);
    figures("a live run with failing notifiers");
}
