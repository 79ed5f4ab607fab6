//! The spool end to end (fault tests 1 and 4 of the nothing-lost issue, at test scale): the
//! ClickHouse server sink against the ClickHouse HTTP interface over the real embedded engine.
//! Every scrape accepted while the server refuses connections is stored exactly once when it
//! returns; a batch whose insert landed but whose acknowledgement was lost (a `kill -9`
//! between the two) is replayed at the next start and still stored once. Each prints samples
//! expected / stored / duplicated.
//!
//! Needs `libchdb.so` (`scripts/setup`); skipped without it except in CI.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use epicenter_config::{ByteSize, PromDuration};
use epicenter_store::config::BatchingConfig;
use epicenter_store::rows::{Placement, SampleRow, ScrapeOutcome, ScrapeReport, Series};
use epicenter_store::spool::{Spool, SpoolConfig, SpooledBatch};
use epicenter_store::writer::{run_spooled_writer, Sink, WriterStats};
use epicenter_store::{http, EmbeddedStore, Table};
use tokio::sync::mpsc;

use common::{library_available, server};

/// Scrape `index` of one target: `samples` samples whose values are `index * 1000 + n`, so
/// loss and duplication are counted exactly.
fn outcome(index: u64, samples: u64) -> ScrapeOutcome {
    // Recent times: older rows would fall to the tables' TTL as they are inserted.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let rows = (0..samples)
        .map(|number| {
            let labels = [("seq".to_string(), number.to_string())].into_iter().collect();
            SampleRow {
                timestamp_ms: now_ms - 600_000 + index as i64 * 1000,
                value: (index * 1000 + number) as f64,
                series: Arc::new(Series::new("sequenced_total".into(), labels, &Default::default())),
            }
        })
        .collect();
    ScrapeOutcome {
        rows,
        report: ScrapeReport {
            timestamp_ms: now_ms - 600_000 + index as i64 * 1000,
            job: "seq".into(),
            instance: format!("target-{index}"),
            placement: Placement::default(),
            up: true,
            duration_seconds: 0.01,
            samples_scraped: samples,
            samples_post_metric_relabeling: samples,
            series_added: 0,
            samples_duplicate: 0,
            samples_out_of_bounds: [0, 0],
            error: None,
            target_identity: index,
            skipped: false,
            starved: false,
        },
    }
}

/// (sample rows, distinct values, scrape rows) in `database`.
fn stored(engine: &EmbeddedStore, database: &str) -> (u64, u64, u64) {
    let text = engine
        .query(
            &format!("SELECT (SELECT count() FROM {database}.samples), (SELECT uniqExact(value) FROM {database}.samples), (SELECT count() FROM {database}.scrapes)"),
            "TabSeparated",
        )
        .unwrap();
    let text = String::from_utf8(text).unwrap();
    let numbers: Vec<u64> = text.split_whitespace().map(|number| number.parse().unwrap()).collect();
    (numbers[0], numbers[1], numbers[2])
}

fn spool_config(dir: &std::path::Path) -> SpoolConfig {
    SpoolConfig {
        path: dir.to_path_buf(),
        max_size: ByteSize(1 << 30),
        max_age: Duration::from_secs(3600),
        fsync: true,
        sync_interval: Duration::from_secs(1),
    }
}

fn spooled_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|entry| {
            entry
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".batch")
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_accepted_is_lost_or_doubled_across_an_outage_and_a_crash() {
    if !library_available() {
        return;
    }
    let root = std::env::temp_dir().join(format!("epicenter-spool-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let engine = Arc::new(EmbeddedStore::open(&root.join("engine"), "default").unwrap());
    // The server's schema exists before the outage (an outage of a server, not a new one).
    for database in ["outage", "crash"] {
        for statement in epicenter_store::schema::statements(database, Duration::from_secs(86_400)) {
            engine.query(&statement, "TabSeparated").unwrap();
        }
    }
    // The server's port, free now; nothing listens on it until the outage ends.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");

    // 1. The server refuses connections while 40 scrapes of 50 samples are accepted.
    let outage = server(&url, "outage");
    let stats = Arc::new(WriterStats::default());
    let (sender, inbox) = mpsc::channel(64);
    let limits = BatchingConfig {
        max_rows: 200,
        max_bytes: ByteSize(1 << 30),
        max_age: PromDuration(Duration::from_millis(200)),
    };
    let spool_dir = root.join("spool-outage");
    let writer = tokio::spawn(run_spooled_writer(
        outage.clone(),
        limits.clone(),
        inbox,
        stats.clone(),
        Spool::open(&spool_config(&spool_dir)).unwrap(),
    ));
    for index in 0..40 {
        sender.send(outcome(index, 50)).await.unwrap();
    }
    let started = Instant::now();
    while spooled_files(&spool_dir) < 10 && started.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(spooled_files(&spool_dir) >= 10, "the batches are not on disk");
    tokio::time::sleep(Duration::from_secs(3)).await;
    // The server comes back.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    let router = http::router(engine.clone());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let started = Instant::now();
    while stored(&engine, "outage").2 < 40 && started.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(sender);
    writer.await.unwrap();
    let (samples, distinct, scrapes) = stored(&engine, "outage");
    eprintln!(
        "outage: samples expected 2000 / stored {samples} / duplicated {}; scrapes 40 / {scrapes}",
        samples - distinct
    );
    assert_eq!((samples, distinct, scrapes), (2000, 2000, 40));
    assert_eq!(spooled_files(&spool_dir), 0, "delivered batches leave the spool");

    // 2. A crash after an insert landed and before it was acknowledged: the batch is still
    // spooled at the next start, and a second, never-sent batch is behind it.
    let crashed = server(&url, "crash");
    let spool_dir = root.join("spool-crash");
    let mut spool = Spool::open(&spool_config(&spool_dir)).unwrap();
    let mut batches = Vec::new();
    for index in [100, 101] {
        let outcome = outcome(index, 30);
        let mut batch = SpooledBatch {
            sample_rows: 30,
            scrape_rows: 1,
            ..SpooledBatch::default()
        };
        batch.series_rows = epicenter_store::rows::encode_samples(&outcome.rows, &mut batch.samples, &mut batch.series);
        epicenter_store::rows::encode_scrapes(std::slice::from_ref(&outcome.report), &mut batch.scrapes);
        spool.append(&mut batch).unwrap();
        batches.push(batch);
    }
    for (table, data) in [
        (Table::Series, &batches[0].series),
        (Table::SampleValues, &batches[0].samples),
        (Table::Scrapes, &batches[0].scrapes),
    ] {
        let token: Arc<str> = spool.token(batches[0].sequence, table).into();
        crashed
            .clone()
            .write(table, Arc::new(data.clone()), token)
            .await
            .unwrap();
    }
    drop(spool);
    // The restart: the writer replays the spool, then stops (no new scrapes).
    let (sender, inbox) = mpsc::channel(1);
    drop(sender);
    run_spooled_writer(
        crashed,
        limits,
        inbox,
        Arc::new(WriterStats::default()),
        Spool::open(&spool_config(&spool_dir)).unwrap(),
    )
    .await;
    let (samples, distinct, scrapes) = stored(&engine, "crash");
    eprintln!(
        "crash and replay: samples expected 60 / stored {samples} / duplicated {}; scrapes 2 / {scrapes}",
        samples - distinct
    );
    assert_eq!((samples, distinct, scrapes), (60, 60, 2));
    assert_eq!(spooled_files(&spool_dir), 0);
    let _ = std::fs::remove_dir_all(&root);
}

/// A crash between a batch's inserts (issue 39): its `series` and `sample_values` rows
/// landed, its `scrapes` insert never did. The replay at the next start stores the batch
/// whole: every scrape has its `scrapes` row, and no sample is doubled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_cut_between_its_inserts_is_stored_whole_by_the_replay() {
    if !library_available() {
        return;
    }
    let root = std::env::temp_dir().join(format!("epicenter-spool-cut-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let engine = Arc::new(EmbeddedStore::open(&root.join("engine"), "cut").unwrap());
    for statement in epicenter_store::schema::statements("cut", Duration::from_secs(86_400)) {
        engine.query(&statement, "TabSeparated").unwrap();
    }
    engine.use_database().unwrap();
    let spool_dir = root.join("spool");
    let mut spool = Spool::open(&spool_config(&spool_dir)).unwrap();
    let mut batches = Vec::new();
    for index in [200, 201] {
        let outcome = outcome(index, 30);
        let mut batch = SpooledBatch {
            sample_rows: 30,
            scrape_rows: 1,
            ..SpooledBatch::default()
        };
        batch.series_rows = epicenter_store::rows::encode_samples(&outcome.rows, &mut batch.samples, &mut batch.series);
        epicenter_store::rows::encode_scrapes(std::slice::from_ref(&outcome.report), &mut batch.scrapes);
        spool.append(&mut batch).unwrap();
        batches.push(batch);
    }
    for (table, data) in [
        (Table::Series, &batches[0].series),
        (Table::SampleValues, &batches[0].samples),
    ] {
        let token: Arc<str> = spool.token(batches[0].sequence, table).into();
        engine
            .clone()
            .write(table, Arc::new(data.clone()), token)
            .await
            .unwrap();
    }
    drop(spool);
    let limits = BatchingConfig {
        max_rows: 200,
        max_bytes: ByteSize(1 << 30),
        max_age: PromDuration(Duration::from_millis(200)),
    };
    let (sender, inbox) = mpsc::channel(1);
    drop(sender);
    run_spooled_writer(
        engine.clone(),
        limits,
        inbox,
        Arc::new(WriterStats::default()),
        Spool::open(&spool_config(&spool_dir)).unwrap(),
    )
    .await;
    let (samples, distinct, scrapes) = stored(&engine, "cut");
    eprintln!("cut batch replayed: samples 60 / stored {samples} / distinct {distinct}; scrapes 2 / {scrapes}");
    assert_eq!((samples, distinct, scrapes), (60, 60, 2));
    assert_eq!(spooled_files(&spool_dir), 0);
    let _ = std::fs::remove_dir_all(&root);
}
