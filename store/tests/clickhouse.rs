//! The ClickHouse server sink (official `clickhouse` crate, LZ4 inserts) against the
//! ClickHouse HTTP interface served over the real embedded engine (`http`): schema,
//! inserts, queries and errors go over HTTP exactly as they would to a server.
//!
//! Needs `libchdb.so` (`scripts/setup`); skipped without it except in CI.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use epicenter_store::clickhouse::ClickHouseStore;
use epicenter_store::config::{BatchingConfig, PlacementConfig};
use epicenter_store::rows::{Placement, SampleRow, ScrapeOutcome, ScrapeReport, Series};
use epicenter_store::writer::{run_writer, Sink, WriterStats};
use epicenter_store::{http, EmbeddedStore, Table};
use tokio::sync::mpsc;

use common::{library_available, server};

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn outcome(index: u64, samples: usize) -> ScrapeOutcome {
    let placement = Placement {
        instance: format!("redis-{index}:9121"),
        dc: "dc-2".into(),
        host: format!("redis-{index}"),
        service: "redis".into(),
    };
    let rows = (0..samples)
        .map(|number| {
            let labels = [
                ("job".to_string(), "redis".to_string()),
                ("instance".to_string(), format!("redis-{index}:9121")),
                ("dc".to_string(), "dc-2".to_string()),
                ("service".to_string(), "redis".to_string()),
                ("cmd".to_string(), format!("cmd{number}")),
            ]
            .into_iter()
            .collect();
            let series = Series::new("redis_commands_total".into(), labels, &PlacementConfig::default());
            assert_eq!(series.placement, placement, "placement follows the labels");
            SampleRow {
                timestamp_ms: now_ms(),
                value: (index * 1000 + number as u64) as f64 + 0.25,
                series: Arc::new(series),
            }
        })
        .collect();
    let report = ScrapeReport {
        timestamp_ms: now_ms(),
        job: "redis".into(),
        instance: format!("redis-{index}:9121"),
        placement,
        up: true,
        duration_seconds: 0.012,
        samples_scraped: samples as u64,
        samples_post_metric_relabeling: samples as u64,
        series_added: 0,
        samples_duplicate: 0,
        samples_out_of_bounds: [0, 0],
        error: None,
        target_identity: 0,
        skipped: false,
        starved: false,
    };
    ScrapeOutcome { rows, report }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_sink_writes_and_reads_through_the_http_interface() {
    if !library_available() {
        return;
    }
    let data = std::env::temp_dir().join(format!("epicenter-clickhouse-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let embedded = Arc::new(EmbeddedStore::open(&data, "default").unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let router = http::router(embedded.clone());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });

    let store = server(&url, "over_http");
    store.migrate(Duration::from_secs(86_400)).await.unwrap();
    store.migrate(Duration::from_secs(86_400)).await.unwrap();
    // With `storage.clickhouse.cluster`, start-up sends no DDL once the schema is current (an
    // ON CLUSTER statement waits for every host), and sends it when it is not: this engine
    // knows no cluster, so there it fails, naming it.
    let on_cluster = |database: &str| {
        let config = epicenter_store::config::ClickHouseConfig {
            url: url.clone(),
            database: database.into(),
            user: "default".into(),
            password_env: None,
            password_file: None,
            tls: None,
            cluster: Some("main".into()),
        };
        epicenter_store::clickhouse::ClickHouseStore::new(&config, None).unwrap()
    };
    on_cluster("over_http")
        .migrate(Duration::from_secs(86_400))
        .await
        .unwrap();
    let error = on_cluster("fresh")
        .migrate(Duration::from_secs(86_400))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("main"), "{error}");

    // Through the batching writer, as `epicenter run` does.
    let stats = Arc::new(WriterStats::default());
    let (sender, inbox) = mpsc::channel(16);
    let writer = tokio::spawn(run_writer(
        store.clone(),
        BatchingConfig::default(),
        inbox,
        stats.clone(),
    ));
    for index in 0..20 {
        sender.send(outcome(index, 50)).await.unwrap();
    }
    // One large scrape: its batch (about 6 MB of RowBinary) is far above axum's default
    // 2 MB request limit, which the endpoint raises.
    sender.send(outcome(100, 60_000)).await.unwrap();
    drop(sender);
    writer.await.unwrap();
    assert_eq!(
        stats.sample_rows_written.load(std::sync::atomic::Ordering::SeqCst),
        61_000
    );
    assert_eq!(stats.sample_rows_failed.load(std::sync::atomic::Ordering::SeqCst), 0);

    // Read back over HTTP, and directly from the engine: the same rows.
    let over_http = String::from_utf8(
        store
            .query(
                "SELECT count(), sum(value), uniqExact(host) FROM samples WHERE host != 'redis-100'",
                "TabSeparated",
            )
            .await
            .unwrap(),
    )
    .unwrap();
    let direct = String::from_utf8(
        embedded
            .query(
                "SELECT count(), sum(value), uniqExact(host) FROM over_http.samples WHERE host != 'redis-100'",
                "TabSeparated",
            )
            .unwrap(),
    )
    .unwrap();
    let large = String::from_utf8(
        store
            .query("SELECT count() FROM samples WHERE host = 'redis-100'", "TabSeparated")
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(large.trim_end(), "60000");
    let expected_sum: f64 = (0..20u64)
        .flat_map(|index| (0..50u64).map(move |number| (index * 1000 + number) as f64 + 0.25))
        .sum();
    assert_eq!(over_http, direct);
    assert_eq!(over_http.trim_end(), format!("1000\t{expected_sum}\t20"));
    let scrapes = String::from_utf8(
        store
            .query("SELECT count(), sum(up) FROM scrapes", "TabSeparated")
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(scrapes.trim_end(), "21\t21");
    let labels = String::from_utf8(
        store
            .query(
                &format!(
                    "SELECT labels['cmd'] FROM samples WHERE series_id = {}",
                    outcome(7, 43).rows[42].series.id
                ),
                "TabSeparated",
            )
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(labels.trim_end(), "cmd42");

    // Errors come back as ClickHouse exceptions: data/SQL errors are not retried.
    let error = store
        .query("SELECT count() FROM no_such_table", "TabSeparated")
        .await
        .unwrap_err();
    assert!(
        error.message.contains("Code: 60") && error.message.contains("UNKNOWN_TABLE"),
        "{error}"
    );
    assert!(!error.retryable);
    let bad_rows = Arc::new(vec![1u8, 2, 3]);
    let error = store
        .clone()
        .write(Table::Scrapes, bad_rows, "bad".into())
        .await
        .unwrap_err();
    assert!(!error.message.is_empty());
    a_batch_written_twice_under_its_token_is_stored_once(&store, &embedded, &data).await;
    let _ = std::fs::remove_dir_all(&data);
}

/// Exactly once across retries and replays: a batch written again under its token is stored
/// once, through the server sink (`server`, database `over_http`) and by the embedded engine
/// directly alike, and a different batch whose bytes are the same (another token) is stored
/// too. (One chDB engine per process: this runs inside the test above, on its store.)
async fn a_batch_written_twice_under_its_token_is_stored_once(
    server: &Arc<ClickHouseStore>,
    embedded: &EmbeddedStore,
    data: &std::path::Path,
) {
    let (mut samples, mut series) = (Vec::new(), Vec::new());
    let rows = outcome(500, 30).rows;
    let series_rows = epicenter_store::rows::encode_samples(&rows, &mut samples, &mut series);
    let distinct: std::collections::HashSet<u64> = rows.iter().map(|row| row.series.id).collect();
    assert_eq!(series_rows, distinct.len() as u64, "one `series` row per series");
    let mut scrapes = Vec::new();
    epicenter_store::rows::encode_scrapes(std::slice::from_ref(&outcome(500, 30).report), &mut scrapes);
    let (samples, series, scrapes) = (Arc::new(samples), Arc::new(series), Arc::new(scrapes));
    let count = |table: &str| {
        let text = embedded
            .query(
                &format!("SELECT count() FROM over_http.{table} WHERE host = 'redis-500'"),
                "TabSeparated",
            )
            .unwrap();
        String::from_utf8(text).unwrap().trim_end().parse::<u64>().unwrap()
    };
    // Through the server sink: a retry after a lost answer, and a replay.
    for _ in 0..3 {
        server
            .clone()
            .write(Table::Series, series.clone(), "batch-a".into())
            .await
            .unwrap();
        server
            .clone()
            .write(Table::SampleValues, samples.clone(), "batch-a".into())
            .await
            .unwrap();
        server
            .clone()
            .write(Table::Scrapes, scrapes.clone(), "batch-a".into())
            .await
            .unwrap();
    }
    assert_eq!((count("samples"), count("scrapes")), (30, 1));
    // The same bytes as another batch: stored.
    server
        .clone()
        .write(Table::SampleValues, samples.clone(), "batch-b".into())
        .await
        .unwrap();
    assert_eq!(count("samples"), 60);
    // The embedded engine directly: the same rules.
    let direct = Arc::new(EmbeddedStore::open(data, "over_http").unwrap());
    for _ in 0..2 {
        direct
            .clone()
            .write(Table::SampleValues, samples.clone(), "batch-c".into())
            .await
            .unwrap();
    }
    assert_eq!(count("samples"), 90);
}
