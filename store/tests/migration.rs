//! Migrating a store written by an older epicenter: the `verdicts` table gains the `dcs`
//! column, and schema 2's wide `samples` is set aside as `samples_v2` for the thin layout. Its own test binary: the embedded engine holds one store per process. Needs
//! `libchdb.so` (`scripts/setup`); skipped without it except in CI.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

mod common;

use std::time::Duration;

use epicenter_store::embedded::EmbeddedStore;

/// A store written before verdicts named several datacenters has no `dcs` column: migrating
/// it adds the column (older rows read as no datacenters) and keeps its rows. A store of
/// schema 2 keeps its wide `samples` as `samples_v2`; new samples are thin and read back
/// through the `samples` view with their labels.
#[test]
fn migrating_an_older_store_keeps_its_rows_and_gains_the_thin_layout() {
    if !common::library_available() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("epicenter-verdicts-dcs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = EmbeddedStore::open(&dir, "epicenter").unwrap();
    store
        .query("CREATE DATABASE IF NOT EXISTS epicenter", "TabSeparated")
        .unwrap();
    store
        .query(
            "CREATE TABLE epicenter.verdicts (time DateTime64(3, 'UTC'), id String, state LowCardinality(String),
                kind LowCardinality(String), dc LowCardinality(String), hosts Array(String),
                service LowCardinality(String), instances Array(String), confidence Float64,
                onset DateTime64(3, 'UTC'), opened DateTime64(3, 'UTC'), evidence String)
             ENGINE = MergeTree ORDER BY (time, id)",
            "TabSeparated",
        )
        .unwrap();
    store
        .query(
            "INSERT INTO epicenter.verdicts VALUES (now64(3), '1-redis-2-1', 'opened', 'node_loss', 'dc-2',
                ['dc-2-host-3'], 'redis', ['redis-2-1'], 0.98, now64(3), now64(3), '[]')",
            "TabSeparated",
        )
        .unwrap();
    // Schema 2's wide `samples`, its rollup and the view between them, with a row.
    for statement in [
        "CREATE TABLE epicenter.samples (time DateTime64(3, 'UTC'), metric LowCardinality(String),
            job LowCardinality(String), instance LowCardinality(String), dc LowCardinality(String),
            host LowCardinality(String), service LowCardinality(String), labels Map(LowCardinality(String), String),
            value Float64, series_id UInt64) ENGINE = MergeTree ORDER BY (metric, dc, host, series_id, time)",
        "CREATE TABLE epicenter.samples_1m (minute DateTime('UTC'), metric LowCardinality(String),
            series_id UInt64, max SimpleAggregateFunction(max, Float64))
            ENGINE = AggregatingMergeTree ORDER BY (metric, series_id, minute)",
        "CREATE MATERIALIZED VIEW epicenter.samples_1m_mv TO epicenter.samples_1m AS
            SELECT toStartOfMinute(time) AS minute, metric, series_id, max(value) AS max
            FROM epicenter.samples GROUP BY minute, metric, series_id",
        "INSERT INTO epicenter.samples VALUES (now64(3), 'up', 'redis', 'redis-2-1', 'dc-2', 'dc-2-host-3',
            'redis', {'instance': 'redis-2-1'}, 1, 42)",
    ] {
        store.query(statement, "TabSeparated").unwrap();
    }
    store.migrate(Duration::from_secs(86_400)).unwrap();
    let text = |sql: &str| String::from_utf8(store.query(sql, "TabSeparated").unwrap()).unwrap();
    assert_eq!(
        text("SELECT name, engine FROM system.tables WHERE database = 'epicenter' AND name LIKE 'samples%' ORDER BY name"),
        "samples\tView\nsamples_1m_v2\tAggregatingMergeTree\nsamples_v2\tMergeTree\n"
    );
    // The merge settings of `sample_values` (docs/schema.md, Merges), on the table itself.
    let engine = text("SELECT engine_full FROM system.tables WHERE database = 'epicenter' AND name = 'sample_values'");
    assert!(
        engine.contains("merge_selector_base = 10") && engine.contains("min_parts_to_merge_at_once = 10"),
        "{engine}"
    );
    assert_eq!(
        text("SELECT metric, host, labels['instance'], value FROM epicenter.samples_v2"),
        "up\tdc-2-host-3\tredis-2-1\t1\n",
        "schema 2's rows are kept"
    );
    // ... and copied: `samples` reads them, labels and placement as stored.
    assert_eq!(
        text("SELECT metric, host, labels['instance'], value, series_id FROM epicenter.samples"),
        "up\tdc-2-host-3\tredis-2-1\t1\t42\n"
    );
    // New samples go to the thin tables and read back, labels and all, through `samples`.
    let labels: epicenter_store::Labels = [("instance", "redis-2-1:9121"), ("job", "redis"), ("dc", "dc-2")]
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    let series = std::sync::Arc::new(epicenter_store::Series::new(
        "redis_connected_clients".into(),
        labels,
        &Default::default(),
    ));
    // Three samples 15 s apart in one minute, ten minutes ago (inside the retention).
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let minute_ms = (now_ms / 60_000 - 10) * 60_000;
    let rows: Vec<epicenter_store::SampleRow> = (0..3)
        .map(|at| epicenter_store::SampleRow {
            timestamp_ms: minute_ms + at * 15_000,
            value: 10.0 + at as f64,
            series: series.clone(),
        })
        .collect();
    store.write_samples(&rows).unwrap();
    assert_eq!(
        text(&format!(
            "SELECT toUnixTimestamp64Milli(time) - {minute_ms}, metric, dc, host, labels['job'], value
             FROM epicenter.samples WHERE metric = 'redis_connected_clients' ORDER BY time"
        )),
        "0\tredis_connected_clients\tdc-2\tredis-2-1\tredis\t10\n\
         15000\tredis_connected_clients\tdc-2\tredis-2-1\tredis\t11\n\
         30000\tredis_connected_clients\tdc-2\tredis-2-1\tredis\t12\n"
    );
    assert_eq!(
        text("SELECT count() FROM epicenter.series").trim(),
        "2",
        "the copied series and the new one"
    );
    // A series placed anew (same id, another host) reads, once merged, with its newest
    // placement for all its samples.
    store
        .query(
            "INSERT INTO epicenter.series (metric, job, instance, dc, host, service, labels, series_id, first_seen, last_seen)
             VALUES ('up', 'redis', 'redis-2-1', 'dc-2', 'renamed-host', 'redis', {'instance': 'redis-2-1'}, 42, now64(3), now64(3))",
            "TabSeparated",
        )
        .unwrap();
    store
        .query("OPTIMIZE TABLE epicenter.series FINAL", "TabSeparated")
        .unwrap();
    assert_eq!(
        text("SELECT host, count() FROM epicenter.samples WHERE metric = 'up' GROUP BY host"),
        "renamed-host\t1\n"
    );
    assert_eq!(text("SELECT count() FROM epicenter.series").trim(), "2");

    let columns = text(
        "SELECT groupArray(name) FROM (SELECT name FROM system.columns
         WHERE database = 'epicenter' AND table = 'verdicts' ORDER BY position)",
    );
    assert!(
        columns.starts_with("['time','id','state','kind','dc','dcs','hosts'"),
        "{columns}"
    );
    assert_eq!(
        text("SELECT id, dc, dcs FROM epicenter.verdicts").trim(),
        "1-redis-2-1\tdc-2\t[]"
    );
    // Migrating again changes nothing.
    store.migrate(Duration::from_secs(86_400)).unwrap();
    assert_eq!(text("SELECT count() FROM epicenter.verdicts").trim(), "1");
    assert_eq!(text("SELECT count() FROM epicenter.samples").trim(), "4");
    assert_eq!(text("SELECT count() FROM epicenter.samples_v2").trim(), "1");
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
