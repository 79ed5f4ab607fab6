//! Migrating a store written by an older epicenter: the `verdicts` table gains the `dcs`
//! column. Its own test binary: the embedded engine holds one store per process. Needs
//! `libchdb.so` (`scripts/setup`); skipped without it except in CI.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

mod common;

use std::time::Duration;

use epicenter_store::embedded::EmbeddedStore;

/// A store written before verdicts named several datacenters has no `dcs` column: migrating
/// it adds the column (older rows read as no datacenters) and keeps its rows.
#[test]
fn migrating_an_older_store_adds_the_verdicts_datacenters() {
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
    store.migrate(Duration::from_secs(86_400)).unwrap();
    let text = |sql: &str| String::from_utf8(store.query(sql, "TabSeparated").unwrap()).unwrap();
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
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
