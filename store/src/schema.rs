//! epicenter's tables: one DDL for the embedded engine and a ClickHouse server.
//!
//! Every statement is idempotent (`IF NOT EXISTS`) so start-up can run them all each time;
//! `schema_version` records which version created the tables. Column choices follow the
//! incident queries: time as `DateTime64(3, 'UTC')` with DoubleDelta, values with FPC,
//! names as `LowCardinality(String)`, remaining labels in a `Map`, partitions by day, TTL from
//! `storage.retention`. docs/schema.md documents every column with its unit.

use std::time::Duration;

/// Version of the schema these statements create.
pub const SCHEMA_VERSION: u32 = 3;

/// The statements that create (or confirm) the schema in `database` on one server (or the
/// embedded engine), in order: [`statements_for`] without a cluster.
pub fn statements(database: &str, retention: Duration) -> Vec<String> {
    statements_for(database, retention, None)
}

/// One table of the schema, as [`statements_for`] renders it on one server or a cluster.
struct TableSpec {
    /// Its name (on a cluster, the name of the `Distributed` table; the shards' own tables
    /// are `<name>_local`).
    name: &'static str,
    /// The column list, without parentheses.
    columns: &'static str,
    /// The MergeTree family engine without arguments: `MergeTree`, `ReplacingMergeTree`, ...
    engine: &'static str,
    /// PARTITION BY, ORDER BY and TTL (`{ttl}` stands for the TTL in seconds).
    tail: &'static str,
    /// How a `Distributed` table spreads inserted rows over the shards.
    sharding_key: &'static str,
}

const SCHEMA_VERSION_TABLE: TableSpec = TableSpec {
    name: "schema_version",
    columns: "version UInt32,
                applied_at DateTime64(3, 'UTC') DEFAULT now64(3)",
    engine: "ReplacingMergeTree",
    tail: "ORDER BY version",
    sharding_key: "version",
};

/// `sample_values`: the samples themselves, thin (issue 19): the metric, the series id, the
/// time and the value. The labels and placement are in [`SERIES_TABLE`], written once per
/// series; the `samples` view joins the two. On a cluster a series' samples stay on one shard
/// (`series_id` is already a hash), the same shard as its `series` rows.
const SAMPLE_VALUES_TABLE: TableSpec = TableSpec {
    name: "sample_values",
    columns: "metric LowCardinality(String),
                series_id UInt64 CODEC(ZSTD(1)),
                time DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)),
                value Float64 CODEC(FPC, ZSTD(1))",
    engine: "MergeTree",
    tail: "PARTITION BY toDate(time)
            ORDER BY (metric, series_id, time)
            TTL toDateTime(time) + toIntervalSecond({ttl})",
    sharding_key: "series_id",
};

/// `series`: one row per series (written with its first sample, then again an hour of sample
/// time after the last one, and after each restart: `rows::SERIES_REFRESH_MS`); the merges
/// keep one row per `(metric, series_id)` with the least `first_seen`, the greatest
/// `last_seen` and the placement and labels of the row written last (`anyLast`: merges read a
/// key's rows in insertion order). The id hashes the name and labels only, so a series whose
/// placement changes (another `placement.*` label, a host renamed by its exporter's uname)
/// keeps its id and, once merged, its newest placement for all its samples. Its TTL runs two
/// refresh periods past the retention, so a series never loses its labels before its samples.
const SERIES_TABLE: TableSpec = TableSpec {
    name: "series",
    columns: "metric LowCardinality(String),
                series_id UInt64,
                job SimpleAggregateFunction(anyLast, String),
                instance SimpleAggregateFunction(anyLast, String),
                dc SimpleAggregateFunction(anyLast, String),
                host SimpleAggregateFunction(anyLast, String),
                service SimpleAggregateFunction(anyLast, String),
                labels SimpleAggregateFunction(anyLast, Map(String, String)),
                first_seen SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
                last_seen SimpleAggregateFunction(max, DateTime64(3, 'UTC'))",
    engine: "AggregatingMergeTree",
    tail: "ORDER BY (metric, series_id)
            TTL toDateTime(last_seen) + toIntervalSecond({ttl}) + toIntervalSecond(7200)",
    sharding_key: "series_id",
};

const SCRAPES_TABLE: TableSpec = TableSpec {
    name: "scrapes",
    columns: "time DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)),
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
                error String",
    engine: "MergeTree",
    tail: "PARTITION BY toDate(time)
            ORDER BY (job, instance, time)
            TTL toDateTime(time) + toIntervalSecond({ttl})",
    sharding_key: "cityHash64(instance)",
};

const ANOMALIES_TABLE: TableSpec = TableSpec {
    name: "anomalies",
    columns: "time DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)),
                instance LowCardinality(String),
                dc LowCardinality(String),
                host LowCardinality(String),
                service LowCardinality(String),
                metric LowCardinality(String),
                class LowCardinality(String),
                peer LowCardinality(String),
                score Float64,
                onset DateTime64(3, 'UTC')",
    engine: "MergeTree",
    tail: "PARTITION BY toDate(time)
            ORDER BY (time, instance)
            TTL toDateTime(time) + toIntervalSecond({ttl})",
    sharding_key: "rand()",
};

/// The columns of `verdicts`, which `replayed_verdicts` repeats before its own.
macro_rules! verdict_columns {
    () => {
        "time DateTime64(3, 'UTC'),
                id String,
                state LowCardinality(String),
                kind LowCardinality(String),
                dc LowCardinality(String),
                dcs Array(String),
                hosts Array(String),
                service LowCardinality(String),
                instances Array(String),
                confidence Float64,
                onset DateTime64(3, 'UTC'),
                opened DateTime64(3, 'UTC'),
                evidence String"
    };
}

const VERDICTS_TABLE: TableSpec = TableSpec {
    name: "verdicts",
    columns: verdict_columns!(),
    engine: "MergeTree",
    tail: "PARTITION BY toDate(time)
            ORDER BY (time, id)
            TTL toDateTime(time) + toIntervalSecond({ttl})",
    sharding_key: "rand()",
};

/// `replayed_verdicts`: the verdict events `epicenter replay --write` found, with the columns
/// of `verdicts` and the run that found them (`run_id`, `source`, the period, `replayed_at`:
/// one value per run, [`crate::backend::ReplayRun`]), apart from the live ones so that
/// nothing replayed pages, resolves or shows as a live incident. A replay usually looks at a
/// past period, possibly older than the retention: rows expire by when they were written,
/// not by the time they speak of.
const REPLAYED_VERDICTS_TABLE: TableSpec = TableSpec {
    name: "replayed_verdicts",
    columns: concat!(
        verdict_columns!(),
        ",
                run_id String,
                source LowCardinality(String),
                period_from Nullable(DateTime64(3, 'UTC')),
                period_to Nullable(DateTime64(3, 'UTC')),
                replayed_at DateTime64(3, 'UTC')"
    ),
    engine: "MergeTree",
    tail: "PARTITION BY toDate(replayed_at)
            ORDER BY (run_id, time, id)
            TTL toDateTime(replayed_at) + toIntervalSecond({ttl})",
    sharding_key: "rand()",
};

/// Whether `name` can name a ClickHouse cluster in epicenter's DDL unquoted and unescaped:
/// ASCII letters, digits and `_`, not starting with a digit (what `storage.clickhouse.cluster`
/// accepts).
pub fn is_cluster_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The statements that create (or confirm) the schema in `database`, in order: on one server
/// (or the embedded engine) when `cluster` is `None`; on the ClickHouse cluster `cluster` (a
/// `remote_servers` entry of the servers' configuration, name as [`is_cluster_name`] allows)
/// otherwise, following ClickHouse's replication and Distributed engine docs: every statement
/// `ON CLUSTER`, each table's rows in a `Replicated…MergeTree` table `<name>_local` on every
/// shard (ZooKeeper/Keeper path `/clickhouse/tables/{shard}/{database}/{table}`, replica
/// `{replica}`: the servers' macros), and `<name>` a `Distributed` table over them, so inserts
/// and queries name the same tables as on one server. Each shard's `samples_local` view
/// joins its own `sample_values_local` and `series_local`, and `samples` is a `Distributed`
/// table over those views; the insert deduplication window is `replicated_deduplication_window`
/// there. A store of schema 2 is set aside first ([`upgrade_from_wide_samples`]).
pub fn statements_for(database: &str, retention: Duration, cluster: Option<&str>) -> Vec<String> {
    let ttl_seconds = retention.as_secs().max(1);
    let on = cluster.map_or(String::new(), |cluster| format!(" ON CLUSTER '{cluster}'"));
    // The table rows are written to: `<name>_local` on a cluster.
    let local = |name: &str| match cluster {
        Some(_) => format!("{database}.{name}_local"),
        None => format!("{database}.{name}"),
    };
    let create = |table: &TableSpec| -> Vec<String> {
        let tail = table.tail.replace("{ttl}", &ttl_seconds.to_string());
        match cluster {
            None => vec![format!(
                "CREATE TABLE IF NOT EXISTS {database}.{} (
                {}
            ) ENGINE = {}
            {tail}",
                table.name, table.columns, table.engine
            )],
            Some(cluster) => vec![
                format!(
                    "CREATE TABLE IF NOT EXISTS {database}.{name}_local{on} (
                {}
            ) ENGINE = Replicated{}('/clickhouse/tables/{{shard}}/{{database}}/{{table}}', '{{replica}}')
            {tail}",
                    table.columns,
                    table.engine,
                    name = table.name
                ),
                format!(
                    "CREATE TABLE IF NOT EXISTS {database}.{name}{on} AS {database}.{name}_local
            ENGINE = Distributed('{cluster}', '{database}', '{name}_local', {})",
                    table.sharding_key,
                    name = table.name
                ),
            ],
        }
    };
    let dedup_setting = match cluster {
        None => "non_replicated_deduplication_window",
        Some(_) => "replicated_deduplication_window",
    };
    let mut statements = vec![format!("CREATE DATABASE IF NOT EXISTS {database}{on}")];
    statements.extend(create(&SCHEMA_VERSION_TABLE));
    statements.extend(create(&SAMPLE_VALUES_TABLE));
    statements.extend(create(&SERIES_TABLE));
    statements.extend(create(&SCRAPES_TABLE));
    // No per-minute rollup: it cost about 0.09 cores of 0.35 at 100,000 samples per second
    // (fleet bench, 2026-12-05) and no shipped query or dashboard reads it; docs/schema.md gives the two
    // statements that add one by hand.
    // `samples`: every sample with its series' labels and placement, the columns the wide
    // table of schema 2 had. A LEFT ANY join: each sample once, with one `series` row (however
    // many are not merged yet), and a sample whose `series` row is missing (its batch lost)
    // still shows, with empty labels. On a cluster each shard joins its own tables (a series
    // and its samples share a shard) and `samples` is a Distributed table over that view.
    let samples_select = |values: &str, series: &str| {
        format!(
            "SELECT v.time AS time, metric, s.job AS job, s.instance AS instance, s.dc AS dc,
                   s.host AS host, s.service AS service, s.labels AS labels, v.value AS value, series_id
            FROM {values} AS v ANY LEFT JOIN {series} AS s USING (metric, series_id)"
        )
    };
    match cluster {
        None => statements.push(format!(
            "CREATE VIEW IF NOT EXISTS {database}.samples AS {}",
            samples_select(&local("sample_values"), &local("series"))
        )),
        Some(cluster) => {
            statements.push(format!(
                "CREATE VIEW IF NOT EXISTS {database}.samples_local{on} AS {}",
                samples_select(&local("sample_values"), &local("series"))
            ));
            statements.push(format!(
                "CREATE TABLE IF NOT EXISTS {database}.samples{on} AS {database}.samples_local
            ENGINE = Distributed('{cluster}', '{database}', 'samples_local', series_id)"
            ));
        }
    }
    statements.extend(create(&ANOMALIES_TABLE));
    statements.extend(create(&VERDICTS_TABLE));
    statements.extend(create(&REPLAYED_VERDICTS_TABLE));
    // Stores written before verdicts named several datacenters (a link's two ends) gain
    // the column; their old rows read as no datacenters. On a cluster the Distributed table's
    // own column list gains it too.
    statements.push(format!(
        "ALTER TABLE {}{on} ADD COLUMN IF NOT EXISTS dcs Array(String) AFTER dc",
        local("verdicts")
    ));
    if cluster.is_some() {
        statements.push(format!(
            "ALTER TABLE {database}.verdicts{on} ADD COLUMN IF NOT EXISTS dcs Array(String) AFTER dc"
        ));
    }
    // A changed `storage.retention` applies to existing tables too, from their next merges
    // on (not by rewriting every part at start-up).
    for (table, column) in [
        ("sample_values", "toDateTime(time)"),
        ("series", "toDateTime(last_seen) + toIntervalSecond(7200)"),
        ("scrapes", "toDateTime(time)"),
    ] {
        statements.push(format!(
            "ALTER TABLE {}{on} MODIFY TTL {column} + toIntervalSecond({ttl_seconds}) SETTINGS materialize_ttl_after_modify = 0",
            local(table)
        ));
    }
    // Inserts carry an `insert_deduplication_token` per batch (see `writer`); MergeTree
    // tables that are not replicated honour it only with a deduplication window: the
    // last DEDUPLICATION_WINDOW insert blocks are remembered, so a batch retried or
    // replayed after a crash is stored once. Replicated tables keep such a window by default
    // (in Keeper); it is widened to the same size.
    for table in ["sample_values", "series", "scrapes"] {
        statements.push(format!(
            "ALTER TABLE {}{on} MODIFY SETTING {dedup_setting} = {DEDUPLICATION_WINDOW}",
            local(table)
        ));
    }
    // The histogram quantile the cookbook builds on (docs/investigation.md); functions
    // are the server's, not the database's, so their names carry `epicenter`.
    for function in [BUCKET_QUANTILE, HISTOGRAM_QUANTILE] {
        statements.push(match cluster {
            None => function.to_string(),
            Some(_) => function.replacen(" AS (", &format!("{on} AS ("), 1),
        });
    }
    statements.push(format!(
        "INSERT INTO {database}.schema_version (version)
             SELECT {SCHEMA_VERSION} WHERE {SCHEMA_VERSION} NOT IN (SELECT version FROM {database}.schema_version)"
    ));
    statements
}

/// The statements that copy a schema-2 store's samples (set aside by
/// [`upgrade_from_wide_samples`] as `samples_v2`) into the thin tables, run once after
/// [`statements_for`] when the upgrade happened: `series` gets one row per series (placement
/// and labels as stored, first and last seen from its samples), `sample_values` every sample.
/// `samples_v2` is kept (dropping it is the operator's call, docs/schema.md).
pub fn copy_from_wide_samples(database: &str) -> Vec<String> {
    vec![
        format!(
            "INSERT INTO {database}.series ({})
             SELECT metric, any(job), any(instance), any(dc), any(host), any(service),
                    CAST(any(labels), 'Map(String, String)'), series_id, min(time), max(time)
             FROM {database}.samples_v2 GROUP BY metric, series_id",
            SERIES_COLUMNS
        ),
        format!(
            "INSERT INTO {database}.sample_values ({})
             SELECT metric, series_id, time, value FROM {database}.samples_v2",
            SAMPLE_VALUE_COLUMNS
        ),
    ]
}

/// Every statement of a migration, in order, for both backends: [`statements_for`] with, when
/// `upgrading` (a schema-2 store: [`wide_samples_query`] counted one), the wide tables set
/// aside right after `CREATE DATABASE` ([`upgrade_from_wide_samples`]) and their samples
/// copied at the end ([`copy_from_wide_samples`]). The first statement is always
/// `CREATE DATABASE IF NOT EXISTS` (the backends run it before asking [`wide_samples_query`]).
pub fn migration(database: &str, retention: Duration, cluster: Option<&str>, upgrading: bool) -> Vec<String> {
    let mut statements = statements_for(database, retention, cluster);
    if upgrading {
        let upgrade = upgrade_from_wide_samples(database, cluster);
        statements.splice(1..1, upgrade);
        statements.extend(copy_from_wide_samples(database));
    }
    statements
}

/// The statement that sets how `sample_values` merges; both backends run it after the
/// migration ([`migration`]), at every start of a single server or embedded store, so stores
/// made before it get it too (on a cluster, with the rest of the DDL: only while the schema is
/// not current).
///
/// A collector writes a part every few seconds, and ClickHouse's background merges rewrite
/// every sample into larger parts, level by level; with the defaults (Simple merge selector,
/// `merge_selector_base = 5`, merges from two parts) merging was about a third of the
/// embedded engine's CPU on the ingest bench. Here a merge waits for ten parts of about one
/// size (`min_parts_to_merge_at_once`, `merge_selector_base`): a sample is rewritten about
/// log10 rather than log5 times of the parts a day's partition grows to, for up to nine parts
/// more waiting at each size level. `min_age_to_force_merge_seconds` merges what is left once
/// every part of a range is an hour old, so a closed day's partition does not keep its
/// leftovers. ClickHouse servers before 24.11 know neither of the first two settings and
/// refuse the statement: the backends log that and go on, the table merging with the
/// server's defaults (docs/schema.md, Merges).
pub fn merge_settings(database: &str, cluster: Option<&str>) -> String {
    let (table, on) = match cluster {
        Some(cluster) => (
            format!("{database}.sample_values_local"),
            format!(" ON CLUSTER '{cluster}'"),
        ),
        None => (format!("{database}.sample_values"), String::new()),
    };
    format!(
        "ALTER TABLE {table}{on} MODIFY SETTING merge_selector_base = 10, min_parts_to_merge_at_once = 10, min_age_to_force_merge_seconds = 3600"
    )
}

/// A query answering `database`'s `samples` engine, and the engine schema 3 has there (`View`
/// on one server, `Distributed` on a cluster), checked after every migration: a wide
/// `samples` left in place would silently hide every new sample.
pub fn samples_engine_check(database: &str, cluster: Option<&str>) -> (String, &'static str) {
    (
        format!(
            "SELECT engine FROM system.tables WHERE database = {} AND name = 'samples'",
            quote(database)
        ),
        if cluster.is_some() { "Distributed" } else { "View" },
    )
}

/// The query [`crate::embedded::EmbeddedStore::migrate`] and the server sink's `migrate` run
/// before [`statements_for`]: how many wide `samples` tables (schema 2 and before: one row per
/// sample with its labels, a MergeTree table) `database` holds, 0 or 1.
pub fn wide_samples_query(database: &str, cluster: Option<&str>) -> String {
    let name = if cluster.is_some() { "samples_local" } else { "samples" };
    format!(
        "SELECT count() FROM system.tables WHERE database = {} AND name = '{name}' AND engine LIKE '%MergeTree'",
        quote(database)
    )
}

/// The statements that set a schema-2 store's wide `samples` aside before [`statements_for`]
/// creates the thin layout (run only when [`wide_samples_query`] counts one): the rollup view
/// is dropped, `samples` becomes `samples_v2` and `samples_1m` `samples_1m_v2`, their rows
/// kept (queryable with the same columns; the TTL removes them in time). On a cluster the
/// shards' tables are renamed and the `Distributed` tables made again over the new names.
pub fn upgrade_from_wide_samples(database: &str, cluster: Option<&str>) -> Vec<String> {
    let on = cluster.map_or(String::new(), |cluster| format!(" ON CLUSTER '{cluster}'"));
    let mut statements = vec![format!("DROP VIEW IF EXISTS {database}.samples_1m_mv{on}")];
    for table in ["samples", "samples_1m"] {
        match cluster {
            None => statements.push(format!("RENAME TABLE {database}.{table} TO {database}.{table}_v2")),
            Some(cluster) => {
                statements.push(format!("DROP TABLE IF EXISTS {database}.{table}{on}"));
                statements.push(format!(
                    "RENAME TABLE {database}.{table}_local TO {database}.{table}_v2_local{on}"
                ));
                statements.push(format!(
                    "CREATE TABLE IF NOT EXISTS {database}.{table}_v2{on} AS {database}.{table}_v2_local
            ENGINE = Distributed('{cluster}', '{database}', '{table}_v2_local', series_id)"
                ));
            }
        }
    }
    statements
}

/// `epicenterBucketQuantile(q, bounds, counts)`: the `q`-quantile (0..1) of a Prometheus
/// histogram from its buckets' upper bounds (`le`, ascending, the last `+Inf`) and their
/// cumulative counts (increases over a window, or totals), the way PromQL's
/// `histogram_quantile` computes it (prometheus/promql/quantile.go, `bucketQuantile`): linear
/// interpolation inside the bucket holding rank `q × total`, the first bucket starting at 0,
/// the `+Inf` bucket answered by the highest finite bound; `nan` without a `+Inf` bucket,
/// with fewer than two buckets or no observations; `-inf`/`inf` for `q` below 0 or above 1.
/// Counts are taken as given (PromQL also evens out non-monotonic counts; this does not).
pub const BUCKET_QUANTILE: &str = "CREATE OR REPLACE FUNCTION epicenterBucketQuantile AS (q, bounds, counts) -> multiIf(
    q < 0, -inf,
    q > 1, inf,
    length(bounds) < 2 OR bounds[-1] != inf OR counts[-1] <= 0, nan,
    arrayFirstIndex(c -> c >= q * counts[-1], counts) = length(bounds), bounds[-2],
    arrayFirstIndex(c -> c >= q * counts[-1], counts) = 1 AND bounds[1] <= 0, bounds[1],
    bounds[arrayFirstIndex(c -> c >= q * counts[-1], counts) - 1]
        + (bounds[arrayFirstIndex(c -> c >= q * counts[-1], counts)] - bounds[arrayFirstIndex(c -> c >= q * counts[-1], counts) - 1])
        * (q * counts[-1] - counts[arrayFirstIndex(c -> c >= q * counts[-1], counts) - 1])
        / (counts[arrayFirstIndex(c -> c >= q * counts[-1], counts)] - counts[arrayFirstIndex(c -> c >= q * counts[-1], counts) - 1]))";

/// `epicenterHistogramQuantile(q, buckets)`: [`BUCKET_QUANTILE`] of `buckets`, an array of
/// `(upper bound, cumulative count)` tuples in any order, one per bucket (sum the series of
/// one `le` first), e.g. `groupArray((toFloat64(labels['le']), increase))`.
pub const HISTOGRAM_QUANTILE: &str = "CREATE OR REPLACE FUNCTION epicenterHistogramQuantile AS (q, buckets) -> epicenterBucketQuantile(q, arrayMap(b -> toFloat64(b.1), arraySort(buckets)), arrayMap(b -> toFloat64(b.2), arraySort(buckets)))";

/// Insert blocks per table whose deduplication tokens are remembered (ClickHouse's
/// `non_replicated_deduplication_window`). Only the batches in flight when a retry or a crash
/// happened can come twice, far fewer than this.
pub const DEDUPLICATION_WINDOW: u32 = 10_000;

/// A token no other batch has: this process's id and start time (ns) and a counter. Without
/// one, a table with a deduplication window drops a batch whose bytes equal a recent one's
/// (ClickHouse deduplicates by block hash then).
pub fn new_batch_token() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static STARTED: OnceLock<u128> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let started = STARTED.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos())
    });
    format!(
        "{:x}-{started:x}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// `INSERT INTO <database>.<table> (<columns>) SETTINGS insert_deduplication_token = '…'`
/// (no FORMAT clause): an insert that is idempotent under `token`, a batch's identity (the
/// same batch sent again is stored once, another batch with the same bytes is stored).
/// Characters other than ASCII letters, digits, `-` and `_` are dropped from the token, so it
/// needs no quoting.
pub fn insert_statement(database: &str, table: Table, token: &str) -> String {
    let token: String = token
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    format!(
        "INSERT INTO {database}.{} ({}) SETTINGS insert_deduplication_token = '{token}'",
        table.name(),
        table.columns()
    )
}

/// Columns of `sample_values` in the order [`crate::rows::encode_samples`] writes them.
pub const SAMPLE_VALUE_COLUMNS: &str = "metric, series_id, time, value";

/// Columns of `series` in the order [`crate::rows::encode_series_row`] writes them.
pub const SERIES_COLUMNS: &str = "metric, job, instance, dc, host, service, labels, series_id, first_seen, last_seen";

/// Columns of `scrapes` in the order [`crate::rows::encode_scrapes`] writes them.
pub const SCRAPE_COLUMNS: &str =
    "time, job, instance, dc, host, service, up, duration_seconds, samples_scraped, samples_post_metric_relabeling, series_added, error";

/// A table the batcher writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// `sample_values`: one row per sample (metric, series id, time, value).
    SampleValues,
    /// `series`: one row per new series (and per series every hour it is still scraped).
    Series,
    /// `scrapes`: one row per scrape.
    Scrapes,
}

impl Table {
    /// The table's name.
    pub fn name(self) -> &'static str {
        match self {
            Table::SampleValues => "sample_values",
            Table::Series => "series",
            Table::Scrapes => "scrapes",
        }
    }

    /// Its columns in the order [`crate::rows`] encodes them.
    pub fn columns(self) -> &'static str {
        match self {
            Table::SampleValues => SAMPLE_VALUE_COLUMNS,
            Table::Series => SERIES_COLUMNS,
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

/// A ClickHouse string literal: single-quoted, with `\` and `'` escaped by a backslash
/// (ClickHouse SQL reference, "String literals").
pub fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}
