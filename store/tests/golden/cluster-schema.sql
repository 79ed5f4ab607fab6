CREATE DATABASE IF NOT EXISTS epicenter ON CLUSTER 'main';

CREATE TABLE IF NOT EXISTS epicenter.schema_version_local ON CLUSTER 'main' (
                version UInt32,
                applied_at DateTime64(3, 'UTC') DEFAULT now64(3)
            ) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
            ORDER BY version;

CREATE TABLE IF NOT EXISTS epicenter.schema_version ON CLUSTER 'main' AS epicenter.schema_version_local
            ENGINE = Distributed('main', 'epicenter', 'schema_version_local', version);

CREATE TABLE IF NOT EXISTS epicenter.sample_values_local ON CLUSTER 'main' (
                metric LowCardinality(String),
                series_id UInt64 CODEC(ZSTD(1)),
                time DateTime64(3, 'UTC') CODEC(DoubleDelta, ZSTD(1)),
                value Float64 CODEC(FPC, ZSTD(1))
            ) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
            PARTITION BY toDate(time)
            ORDER BY (metric, series_id, time)
            TTL toDateTime(time) + toIntervalSecond(2592000);

CREATE TABLE IF NOT EXISTS epicenter.sample_values ON CLUSTER 'main' AS epicenter.sample_values_local
            ENGINE = Distributed('main', 'epicenter', 'sample_values_local', series_id);

CREATE TABLE IF NOT EXISTS epicenter.series_local ON CLUSTER 'main' (
                metric LowCardinality(String),
                series_id UInt64,
                job SimpleAggregateFunction(anyLast, String),
                instance SimpleAggregateFunction(anyLast, String),
                dc SimpleAggregateFunction(anyLast, String),
                host SimpleAggregateFunction(anyLast, String),
                service SimpleAggregateFunction(anyLast, String),
                labels SimpleAggregateFunction(anyLast, Map(String, String)),
                first_seen SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
                last_seen SimpleAggregateFunction(max, DateTime64(3, 'UTC'))
            ) ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
            ORDER BY (metric, series_id)
            TTL toDateTime(last_seen) + toIntervalSecond(2592000) + toIntervalSecond(7200);

CREATE TABLE IF NOT EXISTS epicenter.series ON CLUSTER 'main' AS epicenter.series_local
            ENGINE = Distributed('main', 'epicenter', 'series_local', series_id);

CREATE TABLE IF NOT EXISTS epicenter.scrapes_local ON CLUSTER 'main' (
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
            ) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
            PARTITION BY toDate(time)
            ORDER BY (job, instance, time)
            TTL toDateTime(time) + toIntervalSecond(2592000);

CREATE TABLE IF NOT EXISTS epicenter.scrapes ON CLUSTER 'main' AS epicenter.scrapes_local
            ENGINE = Distributed('main', 'epicenter', 'scrapes_local', cityHash64(instance));

CREATE VIEW IF NOT EXISTS epicenter.samples_local ON CLUSTER 'main' AS SELECT v.time AS time, metric, s.job AS job, s.instance AS instance, s.dc AS dc,
                   s.host AS host, s.service AS service, s.labels AS labels, v.value AS value, series_id
            FROM epicenter.sample_values_local AS v ANY LEFT JOIN epicenter.series_local AS s USING (metric, series_id);

CREATE TABLE IF NOT EXISTS epicenter.samples ON CLUSTER 'main' AS epicenter.samples_local
            ENGINE = Distributed('main', 'epicenter', 'samples_local', series_id);

CREATE TABLE IF NOT EXISTS epicenter.anomalies_local ON CLUSTER 'main' (
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
            ) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
            PARTITION BY toDate(time)
            ORDER BY (time, instance)
            TTL toDateTime(time) + toIntervalSecond(2592000);

CREATE TABLE IF NOT EXISTS epicenter.anomalies ON CLUSTER 'main' AS epicenter.anomalies_local
            ENGINE = Distributed('main', 'epicenter', 'anomalies_local', rand());

CREATE TABLE IF NOT EXISTS epicenter.verdicts_local ON CLUSTER 'main' (
                time DateTime64(3, 'UTC'),
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
                evidence String
            ) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
            PARTITION BY toDate(time)
            ORDER BY (time, id)
            TTL toDateTime(time) + toIntervalSecond(2592000);

CREATE TABLE IF NOT EXISTS epicenter.verdicts ON CLUSTER 'main' AS epicenter.verdicts_local
            ENGINE = Distributed('main', 'epicenter', 'verdicts_local', rand());

CREATE TABLE IF NOT EXISTS epicenter.replayed_verdicts_local ON CLUSTER 'main' (
                time DateTime64(3, 'UTC'),
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
                evidence String,
                run_id String,
                source LowCardinality(String),
                period_from Nullable(DateTime64(3, 'UTC')),
                period_to Nullable(DateTime64(3, 'UTC')),
                replayed_at DateTime64(3, 'UTC')
            ) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
            PARTITION BY toDate(replayed_at)
            ORDER BY (run_id, time, id)
            TTL toDateTime(replayed_at) + toIntervalSecond(2592000);

CREATE TABLE IF NOT EXISTS epicenter.replayed_verdicts ON CLUSTER 'main' AS epicenter.replayed_verdicts_local
            ENGINE = Distributed('main', 'epicenter', 'replayed_verdicts_local', rand());

ALTER TABLE epicenter.verdicts_local ON CLUSTER 'main' ADD COLUMN IF NOT EXISTS dcs Array(String) AFTER dc;

ALTER TABLE epicenter.verdicts ON CLUSTER 'main' ADD COLUMN IF NOT EXISTS dcs Array(String) AFTER dc;

ALTER TABLE epicenter.sample_values_local ON CLUSTER 'main' MODIFY TTL toDateTime(time) + toIntervalSecond(2592000) SETTINGS materialize_ttl_after_modify = 0;

ALTER TABLE epicenter.series_local ON CLUSTER 'main' MODIFY TTL toDateTime(last_seen) + toIntervalSecond(7200) + toIntervalSecond(2592000) SETTINGS materialize_ttl_after_modify = 0;

ALTER TABLE epicenter.scrapes_local ON CLUSTER 'main' MODIFY TTL toDateTime(time) + toIntervalSecond(2592000) SETTINGS materialize_ttl_after_modify = 0;

ALTER TABLE epicenter.sample_values_local ON CLUSTER 'main' MODIFY SETTING replicated_deduplication_window = 10000;

ALTER TABLE epicenter.series_local ON CLUSTER 'main' MODIFY SETTING replicated_deduplication_window = 10000;

ALTER TABLE epicenter.scrapes_local ON CLUSTER 'main' MODIFY SETTING replicated_deduplication_window = 10000;

CREATE OR REPLACE FUNCTION epicenterBucketQuantile ON CLUSTER 'main' AS (q, bounds, counts) -> multiIf(
    q < 0, -inf,
    q > 1, inf,
    length(bounds) < 2 OR bounds[-1] != inf OR counts[-1] <= 0, nan,
    arrayFirstIndex(c -> c >= q * counts[-1], counts) = length(bounds), bounds[-2],
    arrayFirstIndex(c -> c >= q * counts[-1], counts) = 1 AND bounds[1] <= 0, bounds[1],
    bounds[arrayFirstIndex(c -> c >= q * counts[-1], counts) - 1]
        + (bounds[arrayFirstIndex(c -> c >= q * counts[-1], counts)] - bounds[arrayFirstIndex(c -> c >= q * counts[-1], counts) - 1])
        * (q * counts[-1] - counts[arrayFirstIndex(c -> c >= q * counts[-1], counts) - 1])
        / (counts[arrayFirstIndex(c -> c >= q * counts[-1], counts)] - counts[arrayFirstIndex(c -> c >= q * counts[-1], counts) - 1]));

CREATE OR REPLACE FUNCTION epicenterHistogramQuantile ON CLUSTER 'main' AS (q, buckets) -> epicenterBucketQuantile(q, arrayMap(b -> toFloat64(b.1), arraySort(buckets)), arrayMap(b -> toFloat64(b.2), arraySort(buckets)));

INSERT INTO epicenter.schema_version (version)
             SELECT 3 WHERE 3 NOT IN (SELECT version FROM epicenter.schema_version);

ALTER TABLE epicenter.sample_values_local ON CLUSTER 'main' MODIFY SETTING merge_selector_base = 10, min_parts_to_merge_at_once = 10, min_age_to_force_merge_seconds = 3600;
