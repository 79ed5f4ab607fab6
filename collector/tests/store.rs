//! The embedded store against the real chDB engine: schema creation is idempotent, a scraped
//! body reads back exactly (names, labels, values, timestamps), scrape reports land in
//! `scrapes`, each series has one `series` row, and a missing library gives one clear error.
//!
//! Needs `libchdb.so` (`scripts/setup`). Without it the tests say they were skipped, except
//! in CI, where that is a failure.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use axum::http::header;
use axum::routing::get;
use axum::Router;
use epicenter_collector::config::jobs_from_yaml;
use epicenter_collector::scrape::{ScrapeContext, Scraper, TargetState};
use epicenter_collector::targets::targets_for_job;
use epicenter_store::config::PlacementConfig;
use epicenter_store::{library_path, Chdb, ChdbError, EmbeddedStore};

/// One data path per process (a chDB rule): every test uses its own database inside it.
fn data_path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let path = std::env::temp_dir().join(format!("epicenter-store-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        path
    })
}

fn library_available(test: &str) -> bool {
    if library_path().exists() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "{test}: {} is missing; CI runs scripts/setup first",
            library_path().display()
        );
    }
    eprintln!(
        "{test}: SKIPPED: chDB library not found at {} (run scripts/setup)",
        library_path().display()
    );
    false
}

fn body(timestamp_ms: i64) -> String {
    BODY_TEMPLATE.replace("TIMESTAMP", &timestamp_ms.to_string())
}

/// A body with Micrometer, Lettuce and BEAM series; `TIMESTAMP` is replaced by a recent time
/// (rows older than the retention would be dropped by the table TTL).
const BODY_TEMPLATE: &str = "\
# TYPE hikaricp_connections_pending gauge
hikaricp_connections_pending{pool=\"HikariPool-1\"} 14
# TYPE lettuce_command_completion_seconds histogram
lettuce_command_completion_seconds_bucket{remote=\"redis/10.0.0.7:6379\",le=\"0.001\"} 5 TIMESTAMP
lettuce_command_completion_seconds_bucket{remote=\"redis/10.0.0.7:6379\",le=\"+Inf\"} 9 TIMESTAMP
lettuce_command_completion_seconds_count{remote=\"redis/10.0.0.7:6379\"} 9 TIMESTAMP
lettuce_command_completion_seconds_sum{remote=\"redis/10.0.0.7:6379\"} 0.0123456789 TIMESTAMP
erlang_vm_process_message_queue_len{registered_name=\"voice_state_sup\",note=\"line\\nbreak \\\"quoted\\\" \\\\ done\"} 1000000
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scraped_body_reads_back_exactly() {
    if !library_available("store round trip") {
        return;
    }
    let exposition_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 60_000;
    let text = body(exposition_ms);
    let app = Router::new().route(
        "/metrics",
        get(move || {
            let text = text.clone();
            async move { ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let yaml = format!(
        "scrape_configs:\n  - job_name: backend\n    scrape_interval: 5s\n    static_configs:\n      - targets: ['{address}']\n        labels: {{dc: dc-2, host: jvm-3, service: backend}}\n"
    );
    let job = jobs_from_yaml(&yaml).unwrap().remove(0);
    let (targets, _) = targets_for_job(&job);
    let context = ScrapeContext {
        placement: PlacementConfig::default(),
        external_labels: Default::default(),
        ..Default::default()
    };
    let outcome = Scraper::new()
        .unwrap()
        .scrape(&targets[0], &job, &context, &mut TargetState::default())
        .await;
    assert!(outcome.report.up, "{:?}", outcome.report.error);

    let store = EmbeddedStore::open(data_path(), "round_trip").unwrap();
    store.migrate(Duration::from_secs(86_400 * 30)).unwrap();
    store.migrate(Duration::from_secs(86_400 * 30)).unwrap(); // idempotent
    store.write_samples(&outcome.rows).unwrap();
    store.write_scrapes(std::slice::from_ref(&outcome.report)).unwrap();

    let output = store
        .query(
            "SELECT toUnixTimestamp64Milli(time) AS ms, metric, job, instance, dc, host, service, labels, value, series_id
             FROM round_trip.samples ORDER BY metric, series_id, ms",
            "JSONEachRow",
        )
        .unwrap();
    let rows: Vec<serde_json::Value> = String::from_utf8(output)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(rows.len(), outcome.rows.len());
    for written in &outcome.rows {
        let found = rows
            .iter()
            .find(|row| {
                row["series_id"]
                    .as_str()
                    .map(|id| id == written.series.id.to_string())
                    .unwrap_or(false)
                    || row["series_id"].as_u64() == Some(written.series.id)
            })
            .unwrap_or_else(|| panic!("series {} ({}) not read back", written.series.name, written.series.id));
        assert_eq!(found["metric"], written.series.name.as_str());
        assert_eq!(
            found["ms"]
                .as_i64()
                .or_else(|| found["ms"].as_str().and_then(|ms| ms.parse().ok())),
            Some(written.timestamp_ms)
        );
        assert_eq!(found["value"].as_f64(), Some(written.value), "{}", written.series.name);
        let labels: std::collections::BTreeMap<String, String> =
            serde_json::from_value(found["labels"].clone()).unwrap();
        assert_eq!(&labels, &written.series.labels, "{}", written.series.name);
        assert_eq!(found["dc"], "dc-2");
        assert_eq!(found["host"], "jvm-3");
        assert_eq!(found["service"], "backend");
        assert_eq!(found["job"], "backend");
        assert_eq!(found["instance"], address.as_str());
    }
    // The exposition timestamp survived, the escaped label value decoded.
    let bucket = rows
        .iter()
        .find(|row| row["metric"] == "lettuce_command_completion_seconds_sum")
        .unwrap();
    assert_eq!(
        bucket["ms"]
            .as_i64()
            .or_else(|| bucket["ms"].as_str().and_then(|ms| ms.parse().ok())),
        Some(exposition_ms)
    );
    assert_eq!(bucket["value"].as_f64(), Some(0.0123456789));
    let mailbox = rows
        .iter()
        .find(|row| row["metric"] == "erlang_vm_process_message_queue_len")
        .unwrap();
    assert_eq!(mailbox["labels"]["note"], "line\nbreak \"quoted\" \\ done");

    let scrapes = String::from_utf8(
        store
            .query(
                "SELECT job, instance, dc, host, up, samples_scraped, error FROM round_trip.scrapes",
                "TabSeparated",
            )
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        scrapes.trim_end_matches('\n'),
        format!("backend\t{address}\tdc-2\tjvm-3\t1\t6\t")
    );

    // One `series` row for the series, however many samples it has.
    let series = String::from_utf8(
        store
            .query(
                "SELECT count(), any(host) FROM round_trip.series WHERE metric = 'hikaricp_connections_pending'",
                "TabSeparated",
            )
            .unwrap(),
    )
    .unwrap();
    assert_eq!(series.trim(), "1\tjvm-3");
    let version = String::from_utf8(
        store
            .query("SELECT count() FROM round_trip.schema_version", "TabSeparated")
            .unwrap(),
    )
    .unwrap();
    assert_eq!(version.trim(), "1", "migrating twice records one version");
}

#[test]
fn a_missing_library_says_how_to_get_it() {
    let error = Chdb::open(&PathBuf::from("/nonexistent/libchdb.so"), &std::env::temp_dir()).unwrap_err();
    assert!(matches!(error, ChdbError::Library { .. }));
    let message = error.to_string();
    assert!(message.contains("/nonexistent/libchdb.so"), "{message}");
    assert!(message.contains("scripts/setup"), "{message}");
    assert!(message.contains("EPICENTER_CHDB_LIB"), "{message}");
}

/// Two connections on one data path in one process, each with its own session settings: a
/// read-only one (ClickHouse's `readonly = 1`) refuses writes and table functions while the
/// other keeps writing, and the read-only one sees what the other wrote. (The way for a
/// read-only query endpoint beside the writer.)
#[test]
fn a_second_connection_reads_only_while_the_first_writes() {
    if !library_available("a_second_connection_reads_only_while_the_first_writes") {
        return;
    }
    let writer = EmbeddedStore::open(data_path(), "two_connections").unwrap();
    let reader = EmbeddedStore::open(data_path(), "two_connections").unwrap();
    writer
        .query("CREATE DATABASE IF NOT EXISTS two_connections", "TabSeparated")
        .unwrap();
    writer
        .query(
            "CREATE TABLE IF NOT EXISTS two_connections.t (x UInt64) ENGINE = MergeTree ORDER BY x",
            "TabSeparated",
        )
        .unwrap();
    reader.set_read_only().unwrap();
    let refused = reader
        .query("INSERT INTO two_connections.t VALUES (1)", "TabSeparated")
        .unwrap_err()
        .to_string();
    assert!(refused.contains("(READONLY)"), "{refused}");
    let refused = reader
        .query("SELECT * FROM file('/etc/hostname', 'LineAsString')", "TabSeparated")
        .unwrap_err()
        .to_string();
    // The engine's one user holds no `READ ON FILE` (epicenter_store::access), checked
    // before `readonly`.
    assert!(refused.contains("(ACCESS_DENIED)"), "{refused}");
    writer
        .query("INSERT INTO two_connections.t VALUES (7), (8)", "TabSeparated")
        .unwrap();
    let seen = reader
        .query("SELECT sum(x) FROM two_connections.t", "TabSeparated")
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&seen), "15\n");
}
