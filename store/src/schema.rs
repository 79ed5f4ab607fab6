//! epicenter's tables: one DDL for the embedded engine and a ClickHouse server.
//!
//! Every statement is idempotent (`IF NOT EXISTS`) so start-up can run them all each time;
//! `schema_version` records which version created the tables. Column choices follow the
//! incident queries: time as `DateTime64(3, 'UTC')` with DoubleDelta, values with Gorilla,
//! names as `LowCardinality(String)`, remaining labels in a `Map`, partitions by day, TTL from
//! `storage.retention`. docs/schema.md documents every column with its unit.

use std::time::Duration;

/// Version of the schema these statements create.
pub const SCHEMA_VERSION: u32 = 2;

/// The statements that create (or confirm) the schema in `database`, in order.
pub fn statements(database: &str, retention: Duration) -> Vec<String> {
    let ttl_seconds = retention.as_secs().max(1);
    vec![
        format!("CREATE DATABASE IF NOT EXISTS {database}"),
        format!(
            "CREATE TABLE IF NOT EXISTS {database}.schema_version (
                version UInt32,
                applied_at DateTime64(3, 'UTC') DEFAULT now64(3)
            ) ENGINE = ReplacingMergeTree ORDER BY version"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {database}.samples (
                time DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)),
                metric LowCardinality(String),
                job LowCardinality(String),
                instance LowCardinality(String),
                dc LowCardinality(String),
                host LowCardinality(String),
                service LowCardinality(String),
                labels Map(LowCardinality(String), String),
                value Float64 CODEC(Gorilla, ZSTD(1)),
                series_id UInt64 CODEC(ZSTD(1))
            ) ENGINE = MergeTree
            PARTITION BY toDate(time)
            ORDER BY (metric, dc, host, series_id, time)
            TTL toDateTime(time) + toIntervalSecond({ttl_seconds})"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {database}.scrapes (
                time DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)),
                job LowCardinality(String),
                instance LowCardinality(String),
                dc LowCardinality(String),
                host LowCardinality(String),
                service LowCardinality(String),
                up UInt8,
                duration_seconds Float64,
                samples_scraped UInt64,
                samples_post_metric_relabeling UInt64,
                series_added UInt64,
                error String
            ) ENGINE = MergeTree
            PARTITION BY toDate(time)
            ORDER BY (job, instance, time)
            TTL toDateTime(time) + toIntervalSecond({ttl_seconds})"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {database}.samples_1m (
                minute DateTime('UTC'),
                metric LowCardinality(String),
                dc LowCardinality(String),
                host LowCardinality(String),
                service LowCardinality(String),
                series_id UInt64,
                min SimpleAggregateFunction(min, Float64),
                max SimpleAggregateFunction(max, Float64),
                sum SimpleAggregateFunction(sum, Float64),
                count SimpleAggregateFunction(sum, UInt64),
                last AggregateFunction(argMax, Float64, DateTime64(3, 'UTC'))
            ) ENGINE = AggregatingMergeTree
            PARTITION BY toDate(minute)
            ORDER BY (metric, dc, host, service, series_id, minute)
            TTL minute + toIntervalSecond({ttl_seconds})"
        ),
        format!(
            "CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.samples_1m_mv TO {database}.samples_1m AS
            SELECT toStartOfMinute(time) AS minute, metric, dc, host, service, series_id,
                   min(value) AS min, max(value) AS max, sum(value) AS sum,
                   count() AS count, argMaxState(value, time) AS last
            FROM {database}.samples
            GROUP BY minute, metric, dc, host, service, series_id"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {database}.anomalies (
                time DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)),
                instance LowCardinality(String),
                dc LowCardinality(String),
                host LowCardinality(String),
                service LowCardinality(String),
                metric LowCardinality(String),
                class LowCardinality(String),
                peer LowCardinality(String),
                score Float64,
                onset DateTime64(3, 'UTC')
            ) ENGINE = MergeTree
            PARTITION BY toDate(time)
            ORDER BY (time, instance)
            TTL toDateTime(time) + toIntervalSecond({ttl_seconds})"
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {database}.verdicts (
                time DateTime64(3, 'UTC'),
                id String,
                state LowCardinality(String),
                kind LowCardinality(String),
                dc LowCardinality(String),
                hosts Array(String),
                service LowCardinality(String),
                instances Array(String),
                confidence Float64,
                onset DateTime64(3, 'UTC'),
                opened DateTime64(3, 'UTC'),
                evidence String
            ) ENGINE = MergeTree
            PARTITION BY toDate(time)
            ORDER BY (time, id)
            TTL toDateTime(time) + toIntervalSecond({ttl_seconds})"
        ),
        // A changed `storage.retention` applies to existing tables too, from their next merges
        // on (not by rewriting every part at start-up).
        format!("ALTER TABLE {database}.samples MODIFY TTL toDateTime(time) + toIntervalSecond({ttl_seconds}) SETTINGS materialize_ttl_after_modify = 0"),
        format!("ALTER TABLE {database}.scrapes MODIFY TTL toDateTime(time) + toIntervalSecond({ttl_seconds}) SETTINGS materialize_ttl_after_modify = 0"),
        format!("ALTER TABLE {database}.samples_1m MODIFY TTL minute + toIntervalSecond({ttl_seconds}) SETTINGS materialize_ttl_after_modify = 0"),
        format!(
            "INSERT INTO {database}.schema_version (version)
             SELECT {SCHEMA_VERSION} WHERE {SCHEMA_VERSION} NOT IN (SELECT version FROM {database}.schema_version)"
        ),
    ]
}

/// Columns of `samples` in the order [`crate::rows::encode_samples`] writes them.
pub const SAMPLE_COLUMNS: &str = "time, metric, job, instance, dc, host, service, labels, value, series_id";

/// Columns of `scrapes` in the order [`crate::rows::encode_scrapes`] writes them.
pub const SCRAPE_COLUMNS: &str =
    "time, job, instance, dc, host, service, up, duration_seconds, samples_scraped, samples_post_metric_relabeling, series_added, error";

/// A table the batcher writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// `samples`: one row per sample.
    Samples,
    /// `scrapes`: one row per scrape.
    Scrapes,
}

impl Table {
    /// The table's name.
    pub fn name(self) -> &'static str {
        match self {
            Table::Samples => "samples",
            Table::Scrapes => "scrapes",
        }
    }

    /// Its columns in the order [`crate::rows`] encodes them.
    pub fn columns(self) -> &'static str {
        match self {
            Table::Samples => SAMPLE_COLUMNS,
            Table::Scrapes => SCRAPE_COLUMNS,
        }
    }
}

/// `ground_truth`: what a simulated run injected, created by `epicenter demo` when missing
/// (docs/schema.md, `ground_truth`). Not part of [`statements`]: only demo stores hold it.
pub const GROUND_TRUTH: &str = "CREATE TABLE IF NOT EXISTS ground_truth (
            scenario LowCardinality(String),
            kind LowCardinality(String),
            service LowCardinality(String),
            dcs Array(String),
            hosts Array(String),
            instances Array(String),
            onset DateTime64(3, 'UTC'),
            end Nullable(DateTime64(3, 'UTC'))
        ) ENGINE = MergeTree ORDER BY (onset, scenario)";
