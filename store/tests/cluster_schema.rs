//! The schema on a ClickHouse cluster (`storage.clickhouse.cluster`): the DDL against a golden
//! file, and every statement parsed by the engine itself (`formatQuery`, which parses without
//! running). No cluster runs here (there is no ClickHouse server or Keeper on this machine):
//! what the statements do on one is ClickHouse's documented behaviour, not tested.
//! `EPICENTER_BLESS=1 cargo test -p epicenter-store --test cluster_schema` rewrites the golden
//! file after a deliberate change. Its own test binary: the embedded engine holds one store per
//! process. Needs `libchdb.so` (`scripts/setup`); skipped without it except in CI.

#![allow(clippy::unwrap_used, reason = "tests: a panic is a failed assertion")]

mod common;

use std::path::Path;
use std::time::Duration;

use epicenter_store::embedded::EmbeddedStore;
use epicenter_store::schema::{is_cluster_name, merge_settings, statements, statements_for, upgrade_from_wide_samples};

/// 30 days, the default retention.
const RETENTION: Duration = Duration::from_secs(30 * 86_400);

/// The cluster's DDL as the server sink sends it to a new store: the migration, then the
/// merge settings of `sample_values`.
fn cluster_ddl() -> Vec<String> {
    let mut statements = statements_for("epicenter", RETENTION, Some("main"));
    statements.push(merge_settings("epicenter", Some("main")));
    statements
}

#[test]
fn the_cluster_ddl_matches_its_golden_file() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/cluster-schema.sql");
    let text = cluster_ddl().join(";\n\n") + ";\n";
    if std::env::var_os("EPICENTER_BLESS").is_some() {
        std::fs::write(&golden, &text).unwrap();
    }
    let expected = std::fs::read_to_string(&golden).unwrap();
    assert!(
        text == expected,
        "the cluster DDL changed; if on purpose, rerun with EPICENTER_BLESS=1 and review the diff of {}\n{text}",
        golden.display()
    );
}

/// Every table of the one-server schema is, on a cluster, a replicated `<name>_local` on each
/// shard and a `Distributed` `<name>` over them, and every statement but the version row's
/// insert runs `ON CLUSTER`.
#[test]
fn every_table_is_replicated_and_distributed() {
    let single = statements("epicenter", RETENTION);
    let tables: Vec<String> = single
        .iter()
        .filter_map(|statement| statement.strip_prefix("CREATE TABLE IF NOT EXISTS epicenter."))
        .map(|rest| rest.split([' ', '(']).next().unwrap().to_string())
        .collect();
    assert_eq!(
        tables,
        [
            "schema_version",
            "sample_values",
            "series",
            "scrapes",
            "anomalies",
            "verdicts",
            "replayed_verdicts"
        ]
    );
    let cluster = cluster_ddl();
    for table in &tables {
        let local = format!("CREATE TABLE IF NOT EXISTS epicenter.{table}_local ON CLUSTER 'main' (");
        let replicated = cluster
            .iter()
            .find(|statement| statement.starts_with(&local))
            .unwrap_or_else(|| panic!("no {table}_local"));
        assert!(
            replicated.contains("ENGINE = ReplicatedMergeTree(")
                || replicated.contains("ENGINE = ReplicatedReplacingMergeTree(")
                || replicated.contains("ENGINE = ReplicatedAggregatingMergeTree("),
            "{replicated}"
        );
        let distributed = format!(
            "CREATE TABLE IF NOT EXISTS epicenter.{table} ON CLUSTER 'main' AS epicenter.{table}_local\n            ENGINE = Distributed('main', 'epicenter', '{table}_local', "
        );
        assert!(
            cluster.iter().any(|statement| statement.starts_with(&distributed)),
            "no Distributed {table}"
        );
    }
    // `samples` is a view on one server; on a cluster each shard's `samples_local` view joins
    // its own tables and `samples` is Distributed over those views.
    assert!(single
        .iter()
        .any(|statement| statement.starts_with("CREATE VIEW IF NOT EXISTS epicenter.samples AS")));
    assert!(cluster.iter().any(|statement| statement
        .starts_with("CREATE VIEW IF NOT EXISTS epicenter.samples_local ON CLUSTER 'main' AS")
        && statement.contains("FROM epicenter.sample_values_local AS v ANY LEFT JOIN epicenter.series_local AS s")));
    assert!(cluster.iter().any(|statement| statement.starts_with(
        "CREATE TABLE IF NOT EXISTS epicenter.samples ON CLUSTER 'main' AS epicenter.samples_local\n            ENGINE = Distributed('main', 'epicenter', 'samples_local', series_id)"
    )));
    for statement in cluster
        .iter()
        .chain(&upgrade_from_wide_samples("epicenter", Some("main")))
    {
        assert!(
            statement.contains(" ON CLUSTER 'main'") || statement.starts_with("INSERT INTO epicenter.schema_version"),
            "{statement}"
        );
        assert!(!statement.contains("non_replicated"), "{statement}");
    }
    assert!(is_cluster_name("main_2") && is_cluster_name("_c"));
    assert!(!is_cluster_name("") && !is_cluster_name("2c") && !is_cluster_name("a'b") && !is_cluster_name("a b"));
}

/// The engine parses every statement (`formatQuery` throws on a syntax error and returns the
/// statement in its canonical form, which keeps the cluster and the engines).
#[test]
fn the_engine_parses_every_cluster_statement() {
    if !common::library_available() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("epicenter-cluster-ddl-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = EmbeddedStore::open(&dir, "default").unwrap();
    let mut engines = 0;
    // The upgrade of a schema-2 cluster first (engines: one Distributed per renamed table).
    for statement in upgrade_from_wide_samples("epicenter", Some("main"))
        .into_iter()
        .chain(cluster_ddl())
    {
        let literal = statement.replace('\\', "\\\\").replace('\'', "\\'");
        let formatted = store.query(&format!("SELECT formatQuery('{literal}')"), "TabSeparatedRaw");
        let formatted = String::from_utf8(formatted.unwrap_or_else(|error| panic!("{error}\n{statement}"))).unwrap();
        if !statement.starts_with("INSERT") {
            assert!(formatted.contains("ON CLUSTER main"), "{formatted}");
        }
        engines += formatted.matches("ENGINE = Replicated").count() + formatted.matches("ENGINE = Distributed").count();
    }
    assert_eq!(
        engines,
        2 + 15,
        "2 distributed tables renamed; 7 replicated and 7 distributed tables, and `samples` over the views"
    );
    // A statement with a syntax error is refused by the same call: the check can fail.
    assert!(store
        .query("SELECT formatQuery('CREATE TABLE t ON CLUSTER (x')", "TabSeparatedRaw")
        .is_err());
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
