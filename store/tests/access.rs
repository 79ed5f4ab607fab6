//! What the embedded engine itself refuses a reader (the first wall, `store/src/access.rs`
//! and `EmbeddedStore::open_read_only`), and what it does not, measured on the chDB library
//! `scripts/setup` fetches: the second wall (`epicenter_store::guard`) exists for the latter.
//! The engine's answers are asserted exactly, so a chDB that starts guarding one of them
//! fails here and the docs (docs/investigation.md, "The live endpoint") get updated. Needs
//! `libchdb.so` (`scripts/setup`); skipped without it except in CI.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

mod common;

use std::time::Duration;

use epicenter_store::embedded::EmbeddedStore;
use epicenter_store::guard::read_only_refusal;

#[test]
fn the_engine_refuses_sources_and_limits_and_the_guard_covers_what_it_leaves_open() {
    if !common::library_available() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("epicenter-access-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let writer = EmbeddedStore::open(&dir, "epicenter").unwrap();
    writer.migrate(Duration::from_secs(86_400)).unwrap();
    // The writer keeps what it needs: DDL, inserts, merges.
    writer
        .query(
            "CREATE TABLE IF NOT EXISTS epicenter.notes (text String) ENGINE = Memory",
            "TabSeparated",
        )
        .unwrap();
    writer
        .query("INSERT INTO epicenter.notes VALUES ('kept')", "TabSeparated")
        .unwrap();
    writer
        .query("OPTIMIZE TABLE epicenter.scrapes", "TabSeparated")
        .unwrap();
    let reader = EmbeddedStore::open_read_only(&dir, "epicenter").unwrap();
    let error = |store: &EmbeddedStore, sql: &str| store.query(sql, "TabSeparated").unwrap_err().to_string();

    // Refused by the engine's grants, for the writer as for readers.
    for store in [&writer, &reader] {
        for sql in [
            "SELECT * FROM file('/etc/hostname', 'LineAsString')",
            "SELECT * FROM default.`/etc/hostname`",
            "SELECT * FROM url('http://127.0.0.1:9/', 'LineAsString')",
            "SELECT * FROM remote('127.0.0.1:9', system.one)",
            "SELECT * FROM s3('s3://bucket/key.csv')",
            "SELECT * FROM system.users",
            "SELECT addressToSymbol(0)",
        ] {
            let refused = error(store, sql);
            assert!(refused.contains("(ACCESS_DENIED)"), "{sql}: {refused}");
        }
    }
    for sql in [
        "CREATE TABLE epicenter.leak (line String) ENGINE = File(LineAsString, '/etc/hostname')",
        "CREATE DICTIONARY epicenter.d (x UInt64) PRIMARY KEY x SOURCE(FILE(path '/etc/hostname' format 'TSV')) LAYOUT(FLAT()) LIFETIME(0)",
        "CREATE USER intruder",
    ] {
        let refused = error(&writer, sql);
        assert!(refused.contains("(ACCESS_DENIED)"), "{sql}: {refused}");
    }
    // Refused by readonly, and the limits cannot be lifted.
    for sql in [
        "INSERT INTO epicenter.notes VALUES ('x')",
        "SET max_memory_usage = 0",
        "SET readonly = 0",
        "SELECT 1 SETTINGS max_execution_time = 0",
        "SELECT * FROM executable('cat', 'TSV', 'x String')",
        "SELECT * FROM dictionary('d')",
    ] {
        let refused = error(&reader, sql);
        assert!(refused.contains("(READONLY)"), "{sql}: {refused}");
    }
    assert_eq!(
        reader
            .query(
                "SELECT getSetting('max_execution_time'), getSetting('max_memory_usage'), getSetting('max_result_bytes'), getSetting('readonly')",
                "TabSeparated"
            )
            .unwrap(),
        b"30\t201326592\t33554432\t1\n"
    );
    let refused = error(&reader, "SELECT groupArray(number) FROM numbers(1000000000)");
    assert!(refused.contains("(MEMORY_LIMIT_EXCEEDED)"), "{refused}");
    assert_eq!(
        reader.query("SELECT text FROM notes", "TabSeparated").unwrap(),
        b"kept\n"
    );

    // What the engine lets through in local mode (chDB 26.7.3), so the guard refuses it.
    let hostname = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    let leaked = reader.query("SELECT file('/etc/hostname')", "TabSeparated");
    if !hostname.is_empty() {
        assert!(leaked.is_ok(), "chDB now guards the scalar file(): {leaked:?}");
    }
    for sql in [
        "SELECT file('/etc/hostname')",
        "KILL QUERY WHERE 0",
        "SYSTEM START MERGES",
        "SELECT count() FROM system.processes",
        "SELECT count() FROM system.stack_trace",
    ] {
        assert!(
            reader.query(sql, "TabSeparated").is_ok(),
            "chDB now refuses {sql}: update the docs"
        );
        let refusal = read_only_refusal(sql).unwrap_or_else(|| panic!("the guard lets {sql} through"));
        assert!(refusal.contains("(READONLY)"), "{refusal}");
    }
    drop(reader);
    drop(writer);
    let _ = std::fs::remove_dir_all(&dir);
}
