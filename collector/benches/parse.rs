//! Parser throughput: epicenter's exposition parser against the `prometheus-parse` crate.
//!
//! Both parsers read the same ~10 MiB Prometheus text format 0.0.4 body, generated
//! deterministically by [`realistic_body`] to look like what a fleet's JVM (Micrometer), Redis
//! (`redis_exporter`) and BEAM (`prometheus.ex` / Phoenix) exporters print, federated into one
//! scrape: `# HELP`/`# TYPE` per family, histograms with 5–8 labels per series, `_total`
//! counters, gauges, summaries with quantiles, Java- and Go-style number spellings, a few
//! families with millisecond timestamps and a few label values with `\"` escapes.
//!
//! Measured, for each parser, on the same body in the same run:
//! * criterion group `parse_bytes` — MiB/s ([`Throughput::Bytes`]);
//! * criterion group `parse_samples` — samples/s ([`Throughput::Elements`] with the body's
//!   sample-line count), so both units appear side by side for both parsers;
//! * a plain best-of-[`SUMMARY_RUNS`] wall-clock summary printed to stdout after criterion.
//!
//! `EPICENTER_BENCH_QUICK=1 cargo bench -p epicenter-collector --bench parse` skips criterion
//! and prints only the summary; `EPICENTER_BENCH_DUMP=<file>` also writes the body to a file.
//! `EPICENTER_BENCH_BODIES=<file>:<file>…` times both parsers on those bodies instead (the
//! parser comparison of scripts/bench, beside Prometheus's own Go parsers).
//! Before anything is timed, [`fixture`] checks that both parsers read the body completely and
//! agree on the number of samples; the bench panics otherwise (in particular when epicenter
//! reports an error or a warning on the body).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::hint::black_box;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput};
use epicenter_collector::exposition::{
    parse, parse_deferring_labels, Exposition, FormatChoice, MetricType, ParseOptions, Validation,
};

/// Size of the generated body: generation stops adding families once it is reached.
const TARGET_BYTES: usize = 10 * 1024 * 1024;

/// Seed of the body generator; fixed so every run parses the same bytes.
const SEED: u64 = 0x00e9_1ce4_7e20_2611;

/// Timed runs per parser in the plain summary (the best one is reported).
const SUMMARY_RUNS: usize = 10;

/// Options epicenter parses with: text 0.0.4, as Prometheus's scraper would ingest it.
const OPTIONS: ParseOptions = ParseOptions {
    format: FormatChoice::Text,
    validation: Validation::Prometheus,
};

// ---------------------------------------------------------------------------------------------
// Deterministic pseudo-random numbers
// ---------------------------------------------------------------------------------------------

/// xorshift64* (Vigna 2014): tiny, fast and good enough to make a body look varied. Not for
/// anything but test data.
struct Rng(u64);

impl Rng {
    /// A generator from `seed`; the state is scrambled and never zero.
    fn new(seed: u64) -> Self {
        Rng((seed ^ 0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// The next 64 random bits.
    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (`n > 0`; the modulo bias is irrelevant here).
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `low..=high`.
    fn between(&mut self, low: usize, high: usize) -> usize {
        low + self.below(high - low + 1)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// One element of `items` (non-empty).
    fn pick<'s>(&mut self, items: &[&'s str]) -> &'s str {
        items[self.below(items.len())]
    }

    /// Log-uniform integer in `[10^low_exp, 10^high_exp)`: counters and sizes span decades.
    fn log_uniform(&mut self, low_exp: f64, high_exp: f64) -> f64 {
        10f64.powf(low_exp + (high_exp - low_exp) * self.unit()).floor()
    }
}

// ---------------------------------------------------------------------------------------------
// Fleet model and family templates
// ---------------------------------------------------------------------------------------------

/// How an exporter spells numbers: Go clients print the shortest round-trip form (`1234`,
/// `0.004512`), Micrometer prints Java doubles (`1234.0`, `1.073741824E9`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    /// Go / Erlang client libraries.
    Go,
    /// Micrometer on the JVM.
    Java,
}

/// What the values of a counter, gauge or untyped family look like.
#[derive(Clone, Copy)]
enum Magnitude {
    /// Integer counts (requests, keys, processes).
    Count,
    /// Small integer levels: threads, connections, queue lengths (0–300).
    Small,
    /// Sizes in bytes, up to a few GiB.
    Bytes,
    /// Durations in seconds with fractions (`0.004512`).
    Seconds,
    /// A ratio in `[0, 1)` printed at full precision.
    Ratio,
    /// A Unix time in seconds, e.g. a process start time.
    Epoch,
}

/// The type of a family and what its type-specific lines carry.
#[derive(Clone, Copy)]
enum Shape {
    /// `# TYPE … counter`, one `_total` sample per series.
    Counter(Magnitude),
    /// `# TYPE … gauge`.
    Gauge(Magnitude),
    /// `# TYPE … untyped`.
    Untyped(Magnitude),
    /// `# TYPE … histogram` with these finite `le` bounds (plus `+Inf`), `_sum` and `_count`.
    Histogram(&'static [&'static str]),
    /// `# TYPE … summary` with these `quantile`s, `_sum` and `_count`.
    Summary(&'static [&'static str]),
}

/// Labels that identify where a series comes from.
#[derive(Clone, Copy)]
enum Origin {
    /// `application="orders"`.
    Application,
    /// `instance="10.2.17.41:8080"`.
    Instance,
    /// `dc="dc-2"`.
    Dc,
    /// `host="host-17.dc-2.example"`.
    Host,
    /// `pod="orders-7f9c6d5b8c-x2k4q"`.
    Pod,
}

/// A label that varies within one target.
#[derive(Clone, Copy)]
enum Dim {
    /// `name` with a value picked from the list.
    Pick(&'static str, &'static [&'static str]),
    /// `outcome`, derived from the `status` picked before it as Micrometer does.
    Outcome,
}

/// One metric family an exporter prints, instantiated once per application namespace.
struct Template {
    /// Family name without the namespace prefix.
    name: &'static str,
    /// `# HELP` text.
    help: &'static str,
    /// Type and value shape.
    shape: Shape,
    /// Number spelling.
    style: Style,
    /// Origin labels, printed first.
    origin: &'static [Origin],
    /// Further labels.
    dims: &'static [Dim],
    /// Inclusive range of series per family.
    series: (usize, usize),
    /// Whether every sample carries a millisecond timestamp (as federation prints them).
    timestamps: bool,
}

/// Application namespaces; a family name is `<namespace>_<template name>`.
const APPLICATIONS: &[&str] = &[
    "orders",
    "payments",
    "checkout",
    "inventory",
    "search",
    "auth",
    "notifications",
    "billing",
    "shipping",
    "catalog",
    "pricing",
    "recommendations",
    "gateway",
    "accounts",
    "ledger",
    "fraud",
    "reviews",
    "media",
    "sessions",
    "webhooks",
];

/// Micrometer's default service-level histogram bounds as configured in many fleets.
const SERVER_BUCKETS: &[&str] = &[
    "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0",
];
/// Outgoing-call histogram bounds.
const CLIENT_BUCKETS: &[&str] = &["0.001", "0.005", "0.01", "0.05", "0.1", "0.5", "1.0", "5.0"];
/// Phoenix endpoint histogram bounds (Go-style spelling).
const PHOENIX_BUCKETS: &[&str] = &["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5"];
/// Quantiles Micrometer publishes when percentiles are enabled.
const JVM_QUANTILES: &[&str] = &["0.5", "0.95", "0.99"];
/// Quantiles of the Redis latency summary.
const REDIS_QUANTILES: &[&str] = &["0.5", "0.99", "0.999"];
/// Quantiles of Go's `go_gc_duration_seconds`.
const GO_QUANTILES: &[&str] = &["0", "0.25", "0.5", "0.75", "1"];

/// HTTP methods.
const METHODS: &[&str] = &["GET", "GET", "GET", "POST", "POST", "PUT", "DELETE", "PATCH"];
/// HTTP status codes, weighted towards success.
const STATUSES: &[&str] = &[
    "200", "200", "200", "200", "201", "204", "301", "400", "401", "404", "409", "429", "500", "502", "503",
];
/// Server-side URI templates (no braces, which `prometheus-parse`'s label regex cannot read).
const SERVER_URIS: &[&str] = &[
    "/api/v1/orders",
    "/api/v1/orders/:id",
    "/api/v1/orders/:id/items",
    "/api/v1/carts/:cartId/checkout",
    "/api/v2/payments/:paymentId/capture",
    "/api/v2/payments/:paymentId/refunds",
    "/api/v1/users/:userId",
    "/api/v1/users/:userId/sessions",
    "/api/v1/search",
    "/api/v1/catalog/products/:sku",
    "/api/v1/inventory/:warehouse/stock",
    "/actuator/health",
    "/actuator/prometheus",
    "/internal/ping",
    "root",
    "NOT_FOUND",
    "REDIRECTION",
    "/graphql",
];
/// Client-side URI templates.
const CLIENT_URIS: &[&str] = &[
    "/v1/charges",
    "/v1/charges/:id",
    "/v1/tokens",
    "/oauth/token",
    "/v3/shipments",
    "/v3/rates",
    "/v1/fraud/score",
    "/api/v1/stock/reserve",
    "/api/v1/stock/release",
    "/_bulk",
    "/_search",
];
/// Downstream services called by HTTP clients.
const UPSTREAMS: &[&str] = &[
    "stripe-api",
    "fraud-scoring.internal",
    "shipping-gateway",
    "inventory-svc",
    "elasticsearch-logs",
    "keycloak",
    "ledger-svc.dc-1.example",
    "ledger-svc.dc-2.example",
];
/// Phoenix routes.
const ROUTES: &[&str] = &[
    "/socket/websocket",
    "/api/messages",
    "/api/messages/:id",
    "/api/rooms/:room_id/members",
    "/live",
    "/health",
    "/api/presence",
    "/api/uploads/:upload_id",
];
/// Redis commands.
const REDIS_COMMANDS: &[&str] = &[
    "get",
    "set",
    "setex",
    "mget",
    "hget",
    "hset",
    "hgetall",
    "del",
    "expire",
    "incr",
    "incrby",
    "zadd",
    "zrangebyscore",
    "zrem",
    "lpush",
    "rpop",
    "brpop",
    "publish",
    "subscribe",
    "eval",
    "evalsha",
    "ping",
    "info",
    "client",
    "scan",
    "exists",
    "ttl",
    "sadd",
    "smembers",
    "pexpire",
];
/// Redis error strings; a few carry quoted command names, printed with `\"` escapes.
const REDIS_ERRORS: &[&str] = &[
    "ERR",
    "WRONGTYPE",
    "NOSCRIPT",
    "MOVED",
    "LOADING",
    "OOM",
    "BUSY",
    "NOAUTH",
    "READONLY",
    r#"ERR unknown command \"FLUSHALL\""#,
    r#"ERR unknown command \"CONFIG\""#,
    r#"ERR wrong number of arguments for \"hset\""#,
];

/// Where a JVM application's series come from: the placement labels every Micrometer family
/// in the body carries.
const JVM_ORIGIN: &[Origin] = &[
    Origin::Application,
    Origin::Instance,
    Origin::Dc,
    Origin::Host,
    Origin::Pod,
];

/// G1 memory pool names as the JVM reports them (Micrometer's `id` tag).
const JVM_MEMORY_POOLS: &[&str] = &[
    "G1 Eden Space",
    "G1 Old Gen",
    "G1 Survivor Space",
    "Metaspace",
    "CodeCache",
    "Compressed Class Space",
];

/// The families every application namespace exports, in print order.
const TEMPLATES: &[Template] = &[
    // ---- JVM services, Micrometer's Prometheus registry ----
    Template {
        name: "http_server_requests_seconds",
        help: "Duration of HTTP server request handling",
        shape: Shape::Histogram(SERVER_BUCKETS),
        style: Style::Java,
        origin: &[Origin::Application, Origin::Dc, Origin::Host, Origin::Pod],
        dims: &[
            Dim::Pick("method", METHODS),
            Dim::Pick("uri", SERVER_URIS),
            Dim::Pick("status", STATUSES),
            Dim::Outcome,
        ],
        series: (20, 90),
        timestamps: false,
    },
    Template {
        name: "http_client_requests_seconds",
        help: "Timer of RestTemplate and WebClient operation",
        shape: Shape::Histogram(CLIENT_BUCKETS),
        style: Style::Java,
        origin: &[Origin::Application, Origin::Dc, Origin::Host],
        dims: &[
            Dim::Pick("client_name", UPSTREAMS),
            Dim::Pick("method", METHODS),
            Dim::Pick("uri", CLIENT_URIS),
            Dim::Pick("status", STATUSES),
        ],
        series: (10, 40),
        timestamps: false,
    },
    Template {
        name: "jvm_memory_used_bytes",
        help: "The amount of used memory",
        shape: Shape::Gauge(Magnitude::Bytes),
        style: Style::Java,
        origin: JVM_ORIGIN,
        dims: &[
            Dim::Pick("area", &["heap", "nonheap"]),
            Dim::Pick("id", JVM_MEMORY_POOLS),
        ],
        series: (12, 60),
        timestamps: false,
    },
    Template {
        name: "jvm_memory_max_bytes",
        help: "The maximum amount of memory in bytes that can be used for memory management",
        shape: Shape::Gauge(Magnitude::Bytes),
        style: Style::Java,
        origin: JVM_ORIGIN,
        dims: &[
            Dim::Pick("area", &["heap", "nonheap"]),
            Dim::Pick("id", JVM_MEMORY_POOLS),
        ],
        series: (12, 60),
        timestamps: false,
    },
    Template {
        name: "jvm_gc_pause_seconds",
        help: "Time spent in GC pause",
        shape: Shape::Summary(JVM_QUANTILES),
        style: Style::Java,
        origin: &[Origin::Application, Origin::Dc, Origin::Host, Origin::Pod],
        dims: &[
            Dim::Pick("action", &["end of minor GC", "end of major GC"]),
            Dim::Pick(
                "cause",
                &[
                    "G1 Evacuation Pause",
                    "Allocation Failure",
                    "Metadata GC Threshold",
                    "G1 Humongous Allocation",
                ],
            ),
        ],
        series: (6, 30),
        timestamps: false,
    },
    Template {
        name: "jvm_threads_states_threads",
        help: "The current number of threads",
        shape: Shape::Gauge(Magnitude::Small),
        style: Style::Java,
        origin: &[Origin::Application, Origin::Dc, Origin::Host, Origin::Pod],
        dims: &[Dim::Pick(
            "state",
            &["runnable", "blocked", "waiting", "timed-waiting", "new", "terminated"],
        )],
        series: (12, 60),
        timestamps: false,
    },
    Template {
        name: "jvm_gc_memory_allocated_bytes_total",
        help: "Incremented for an increase in the size of the (young) heap memory pool after one GC to before the next",
        shape: Shape::Counter(Magnitude::Bytes),
        style: Style::Java,
        origin: JVM_ORIGIN,
        dims: &[],
        series: (6, 30),
        timestamps: false,
    },
    Template {
        name: "hikaricp_connections_active",
        help: "Active connections",
        shape: Shape::Gauge(Magnitude::Small),
        style: Style::Java,
        origin: &[Origin::Application, Origin::Dc, Origin::Host, Origin::Pod],
        dims: &[Dim::Pick("pool", &["HikariPool-1", "primary-rw", "replica-ro"])],
        series: (6, 40),
        timestamps: false,
    },
    Template {
        name: "hikaricp_connections_acquire_seconds",
        help: "Connection acquire time",
        shape: Shape::Summary(JVM_QUANTILES),
        style: Style::Java,
        origin: &[Origin::Application, Origin::Dc, Origin::Host, Origin::Pod],
        dims: &[Dim::Pick("pool", &["HikariPool-1", "primary-rw", "replica-ro"])],
        series: (6, 30),
        timestamps: false,
    },
    Template {
        name: "process_cpu_usage",
        help: "The recent cpu usage for the Java Virtual Machine process",
        shape: Shape::Gauge(Magnitude::Ratio),
        style: Style::Java,
        origin: JVM_ORIGIN,
        dims: &[],
        series: (6, 30),
        timestamps: false,
    },
    Template {
        name: "process_start_time_seconds",
        help: "Start time of the process since unix epoch",
        shape: Shape::Gauge(Magnitude::Epoch),
        style: Style::Java,
        origin: JVM_ORIGIN,
        dims: &[],
        series: (6, 30),
        timestamps: false,
    },
    Template {
        name: "logback_events_total",
        help: "Number of log events that were enabled by the effective log level",
        shape: Shape::Counter(Magnitude::Count),
        style: Style::Java,
        origin: &[Origin::Application, Origin::Dc, Origin::Host, Origin::Pod],
        dims: &[Dim::Pick("level", &["trace", "debug", "info", "warn", "error"])],
        series: (10, 50),
        timestamps: false,
    },
    // ---- Redis, oliver006/redis_exporter ----
    Template {
        name: "redis_commands_total",
        help: "Total number of calls per command",
        shape: Shape::Counter(Magnitude::Count),
        style: Style::Go,
        origin: &[Origin::Application, Origin::Dc, Origin::Host, Origin::Instance],
        dims: &[Dim::Pick("cmd", REDIS_COMMANDS)],
        series: (20, 90),
        timestamps: false,
    },
    Template {
        name: "redis_commands_duration_seconds_total",
        help: "Total amount of time in seconds spent per command",
        shape: Shape::Counter(Magnitude::Seconds),
        style: Style::Go,
        origin: &[Origin::Application, Origin::Dc, Origin::Host, Origin::Instance],
        dims: &[Dim::Pick("cmd", REDIS_COMMANDS)],
        series: (20, 90),
        timestamps: false,
    },
    Template {
        name: "redis_latency_percentiles_usec",
        help: "A summary of latency percentile distribution per command",
        shape: Shape::Summary(REDIS_QUANTILES),
        style: Style::Go,
        origin: &[Origin::Application, Origin::Dc, Origin::Host, Origin::Instance],
        dims: &[Dim::Pick("cmd", REDIS_COMMANDS)],
        series: (10, 50),
        timestamps: false,
    },
    Template {
        name: "redis_errors_total",
        help: "Total number of errors per error type",
        shape: Shape::Counter(Magnitude::Count),
        style: Style::Go,
        origin: &[Origin::Application, Origin::Dc, Origin::Host, Origin::Instance],
        dims: &[Dim::Pick("err", REDIS_ERRORS)],
        series: (4, 20),
        timestamps: false,
    },
    Template {
        name: "redis_connected_clients",
        help: "Number of client connections (excluding connections from replicas)",
        shape: Shape::Gauge(Magnitude::Small),
        style: Style::Go,
        origin: &[Origin::Application, Origin::Dc, Origin::Host, Origin::Instance],
        dims: &[Dim::Pick("role", &["master", "slave"])],
        series: (4, 24),
        timestamps: false,
    },
    Template {
        name: "redis_memory_used_bytes",
        help: "Total number of bytes allocated by Redis using its allocator",
        shape: Shape::Gauge(Magnitude::Bytes),
        style: Style::Go,
        origin: &[Origin::Application, Origin::Dc, Origin::Host, Origin::Instance],
        dims: &[Dim::Pick("role", &["master", "slave"])],
        series: (4, 24),
        timestamps: false,
    },
    Template {
        name: "redis_keyspace_hits_total",
        help: "Number of successful lookup of keys in the main dictionary",
        shape: Shape::Counter(Magnitude::Count),
        style: Style::Go,
        origin: &[Origin::Application, Origin::Dc, Origin::Host, Origin::Instance],
        dims: &[Dim::Pick("role", &["master", "slave"])],
        series: (4, 24),
        timestamps: false,
    },
    Template {
        name: "redis_db_keys",
        help: "Total number of keys by DB",
        shape: Shape::Gauge(Magnitude::Count),
        style: Style::Go,
        origin: &[Origin::Application, Origin::Dc, Origin::Host, Origin::Instance],
        dims: &[
            Dim::Pick("role", &["master", "slave"]),
            Dim::Pick("db", &["db0", "db1", "db2", "db3", "db4", "db5", "db6", "db7"]),
        ],
        series: (8, 40),
        timestamps: false,
    },
    Template {
        name: "redis_exporter_last_scrape_duration_seconds",
        help: "The last scrape duration",
        shape: Shape::Gauge(Magnitude::Seconds),
        style: Style::Go,
        origin: &[Origin::Application, Origin::Dc, Origin::Host, Origin::Instance],
        dims: &[Dim::Pick("job", &["redis"])],
        series: (4, 24),
        timestamps: true,
    },
    Template {
        name: "go_gc_duration_seconds",
        help: "A summary of the pause duration of garbage collection cycles",
        shape: Shape::Summary(GO_QUANTILES),
        style: Style::Go,
        origin: &[Origin::Application, Origin::Dc, Origin::Host, Origin::Instance],
        dims: &[Dim::Pick("job", &["redis"])],
        series: (4, 24),
        timestamps: false,
    },
    // ---- BEAM services, prometheus.ex / telemetry_metrics_prometheus ----
    Template {
        name: "phoenix_endpoint_stop_duration_seconds",
        help: "The time spent in the Phoenix endpoint",
        shape: Shape::Histogram(PHOENIX_BUCKETS),
        style: Style::Go,
        origin: &[Origin::Application, Origin::Dc, Origin::Host, Origin::Pod],
        dims: &[
            Dim::Pick("method", METHODS),
            Dim::Pick("route", ROUTES),
            Dim::Pick("status", STATUSES),
        ],
        series: (15, 70),
        timestamps: false,
    },
    Template {
        name: "erlang_vm_memory_bytes_total",
        help: "The total amount of memory currently allocated",
        shape: Shape::Gauge(Magnitude::Bytes),
        style: Style::Go,
        origin: JVM_ORIGIN,
        dims: &[Dim::Pick("kind", &["processes", "system"])],
        series: (6, 30),
        timestamps: false,
    },
    Template {
        name: "erlang_vm_process_count",
        help: "The number of processes currently existing at the local node",
        shape: Shape::Gauge(Magnitude::Count),
        style: Style::Go,
        origin: JVM_ORIGIN,
        dims: &[],
        series: (6, 30),
        timestamps: false,
    },
    Template {
        name: "erlang_vm_statistics_run_queues_length",
        help: "The total length of all normal run-queues",
        shape: Shape::Gauge(Magnitude::Small),
        style: Style::Go,
        origin: &[Origin::Application, Origin::Dc, Origin::Host, Origin::Pod],
        dims: &[Dim::Pick("scheduler_type", &["normal", "dirty_cpu", "dirty_io"])],
        series: (6, 30),
        timestamps: false,
    },
    Template {
        name: "erlang_vm_statistics_reductions_total",
        help: "Total reductions",
        shape: Shape::Counter(Magnitude::Count),
        style: Style::Go,
        origin: JVM_ORIGIN,
        dims: &[],
        series: (6, 30),
        timestamps: false,
    },
    Template {
        name: "erlang_process_message_queue_len",
        help: "Messages waiting in the mailbox of a registered process",
        shape: Shape::Gauge(Magnitude::Small),
        style: Style::Go,
        origin: &[Origin::Application, Origin::Dc, Origin::Host, Origin::Pod],
        dims: &[Dim::Pick(
            "process",
            &[
                "Elixir.Phoenix.PubSub",
                "Elixir.MyApp.Repo",
                "Elixir.Oban.Queue.default",
                "Elixir.Broadway.Producer_0",
                "logger",
                "code_server",
            ],
        )],
        series: (8, 40),
        timestamps: true,
    },
    Template {
        name: "erlang_vm_statistics_wallclock_time_milliseconds",
        help: "Information about wall clock",
        shape: Shape::Untyped(Magnitude::Count),
        style: Style::Go,
        origin: JVM_ORIGIN,
        dims: &[],
        series: (6, 30),
        timestamps: false,
    },
];

/// Where one series runs: a pod (or Redis instance) on a host in a datacenter.
struct Target {
    /// `dc-1` … `dc-4`.
    dc: String,
    /// `host-17.dc-2.example`.
    host: String,
    /// Kubernetes pod name, `orders-7f9c6d5b8c-x2k4q`.
    pod: String,
    /// Scrape address, `10.2.17.41:8080`.
    instance: String,
}

/// The targets of one application: 6–32 pods spread over 4 datacenters and 64 hosts each.
fn targets(rng: &mut Rng, application: &str) -> Vec<Target> {
    const HEX: &[u8] = b"0123456789abcdef";
    const ALNUM: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let replica_set: String = (0..10).map(|_| HEX[rng.below(HEX.len())] as char).collect();
    (0..rng.between(6, 32))
        .map(|_| {
            let dc = rng.between(1, 4);
            let host = rng.between(1, 64);
            let suffix: String = (0..5).map(|_| ALNUM[rng.below(ALNUM.len())] as char).collect();
            Target {
                dc: format!("dc-{dc}"),
                host: format!("host-{host}.dc-{dc}.example"),
                pod: format!("{application}-{replica_set}-{suffix}"),
                instance: format!(
                    "10.{dc}.{host}.{}:{}",
                    rng.between(2, 250),
                    if rng.chance(0.5) { 8080 } else { 9121 }
                ),
            }
        })
        .collect()
}

/// Appends `name="value"` to a label list, with a comma when it is not the first.
fn push_label(labels: &mut String, name: &str, value: &str) {
    if !labels.is_empty() {
        labels.push(',');
    }
    labels.push_str(name);
    labels.push_str("=\"");
    labels.push_str(value);
    labels.push('"');
}

/// Micrometer's `outcome` for an HTTP status.
fn outcome(status: &str) -> &'static str {
    match status.as_bytes().first() {
        Some(b'1') => "INFORMATIONAL",
        Some(b'2') => "SUCCESS",
        Some(b'3') => "REDIRECTION",
        Some(b'4') => "CLIENT_ERROR",
        Some(b'5') => "SERVER_ERROR",
        _ => "UNKNOWN",
    }
}

/// Appends a value in the exporter's spelling: Java prints doubles (`12.0`, `1.073741824E9`),
/// Go the shortest round-trip form (`12`, `1073741824`).
fn push_number(out: &mut String, value: f64, style: Style) {
    match style {
        Style::Go => write!(out, "{value}"),
        Style::Java if value.fract() == 0.0 && value.abs() < 1e7 => write!(out, "{value:.1}"),
        Style::Java if value.abs() >= 1e7 => write!(out, "{value:E}"),
        Style::Java => write!(out, "{value}"),
    }
    .expect("writing to a String cannot fail");
}

/// A random value of the given magnitude.
fn scalar(rng: &mut Rng, magnitude: Magnitude) -> f64 {
    match magnitude {
        Magnitude::Count => rng.log_uniform(0.0, 7.0),
        Magnitude::Small => rng.log_uniform(0.0, 2.5) - 1.0,
        Magnitude::Bytes => rng.log_uniform(5.0, 9.6),
        // Six decimals, like `0.004512`, or a longer float now and then.
        Magnitude::Seconds if rng.chance(0.7) => rng.log_uniform(2.0, 8.0) / 1e6,
        Magnitude::Seconds => rng.unit() * 40.0,
        Magnitude::Ratio => rng.unit(),
        Magnitude::Epoch => 1_764_000_000.0 + (rng.unit() * 1e9).round() / 1000.0,
    }
}

/// Appends one sample line: `name{labels[,extra]} value[ timestamp]`.
fn push_sample(
    out: &mut String,
    name: &str,
    suffix: &str,
    labels: &str,
    extra: Option<(&str, &str)>,
    value: &str,
    timestamp: Option<u64>,
) {
    out.push_str(name);
    out.push_str(suffix);
    out.push('{');
    out.push_str(labels);
    if let Some((label, label_value)) = extra {
        out.push(',');
        out.push_str(label);
        out.push_str("=\"");
        out.push_str(label_value);
        out.push('"');
    }
    out.push_str("} ");
    out.push_str(value);
    if let Some(timestamp) = timestamp {
        write!(out, " {timestamp}").expect("writing to a String cannot fail");
    }
    out.push('\n');
}

/// Appends one family (HELP, TYPE, every sample) and returns how many sample lines it wrote.
fn push_family(
    out: &mut String,
    rng: &mut Rng,
    namespace: &str,
    application: &str,
    targets: &[Target],
    template: &Template,
    timestamp: u64,
) -> usize {
    let name = format!("{namespace}_{}", template.name);
    let type_name = match template.shape {
        Shape::Counter(_) => "counter",
        Shape::Gauge(_) => "gauge",
        Shape::Untyped(_) => "untyped",
        Shape::Histogram(_) => "histogram",
        Shape::Summary(_) => "summary",
    };
    writeln!(out, "# HELP {name} {}\n# TYPE {name} {type_name}", template.help)
        .expect("writing to a String cannot fail");
    let timestamp = template.timestamps.then_some(timestamp);

    let wanted = rng.between(template.series.0, template.series.1);
    let mut seen = HashSet::new();
    let mut samples = 0;
    let mut value = String::new();
    // Label sets are drawn at random; duplicates are skipped (a family never repeats a series).
    for _ in 0..wanted * 4 {
        if seen.len() == wanted {
            break;
        }
        let target = &targets[rng.below(targets.len())];
        let mut labels = String::with_capacity(200);
        for origin in template.origin {
            match origin {
                Origin::Application => push_label(&mut labels, "application", application),
                Origin::Instance => push_label(&mut labels, "instance", &target.instance),
                Origin::Dc => push_label(&mut labels, "dc", &target.dc),
                Origin::Host => push_label(&mut labels, "host", &target.host),
                Origin::Pod => push_label(&mut labels, "pod", &target.pod),
            }
        }
        let mut status = "200";
        for dim in template.dims {
            match *dim {
                Dim::Pick(label, values) => {
                    let picked = rng.pick(values);
                    if label == "status" {
                        status = picked;
                    }
                    push_label(&mut labels, label, picked);
                }
                Dim::Outcome => push_label(&mut labels, "outcome", outcome(status)),
            }
        }
        if !seen.insert(labels.clone()) {
            continue;
        }

        match template.shape {
            Shape::Counter(magnitude) | Shape::Gauge(magnitude) | Shape::Untyped(magnitude) => {
                value.clear();
                push_number(&mut value, scalar(rng, magnitude), template.style);
                push_sample(out, &name, "", &labels, None, &value, timestamp);
                samples += 1;
            }
            Shape::Histogram(bounds) => {
                // Cumulative bucket counts from random per-bucket weights skewed to fast buckets;
                // the `+Inf` bucket equals `_count`, as both parsers' consumers expect.
                let total = rng.log_uniform(0.0, 6.0);
                let weights: Vec<f64> = (0..=bounds.len())
                    .map(|index| rng.unit() / (1.0 + index as f64 * 0.6))
                    .collect();
                let weight_sum: f64 = weights.iter().sum();
                let mut cumulative_weight = 0.0;
                let mut previous = 0.0;
                let mut sum = 0.0;
                for (index, bound) in bounds.iter().enumerate() {
                    cumulative_weight += weights[index];
                    let count = ((total * cumulative_weight / weight_sum).floor()).min(total);
                    let upper: f64 = bound.parse().expect("bucket bounds are numbers");
                    sum += (count - previous) * upper * (0.5 + 0.5 * rng.unit());
                    previous = count;
                    value.clear();
                    push_number(&mut value, count, template.style);
                    push_sample(out, &name, "_bucket", &labels, Some(("le", bound)), &value, timestamp);
                }
                sum += (total - previous) * bounds.last().map_or(1.0, |bound| bound.parse().unwrap_or(1.0)) * 1.5;
                value.clear();
                push_number(&mut value, total, template.style);
                push_sample(out, &name, "_bucket", &labels, Some(("le", "+Inf")), &value, timestamp);
                let count_value = value.clone();
                value.clear();
                push_number(&mut value, (sum * 1e6).round() / 1e6, template.style);
                push_sample(out, &name, "_sum", &labels, None, &value, timestamp);
                push_sample(out, &name, "_count", &labels, None, &count_value, timestamp);
                samples += bounds.len() + 3;
            }
            Shape::Summary(quantiles) => {
                // Go clients print NaN for every quantile of an idle sliding window.
                let idle = rng.chance(0.05);
                let mut estimate = rng.log_uniform(1.0, 4.0) / 1e5;
                for quantile in quantiles {
                    value.clear();
                    if idle {
                        value.push_str("NaN");
                    } else {
                        push_number(&mut value, estimate, template.style);
                        estimate = (estimate * (1.0 + rng.unit() * 3.0) * 1e6).round() / 1e6;
                    }
                    push_sample(out, &name, "", &labels, Some(("quantile", quantile)), &value, timestamp);
                }
                let count = rng.log_uniform(0.0, 6.0);
                value.clear();
                push_number(&mut value, (count * estimate * 0.8 * 1e6).round() / 1e6, template.style);
                push_sample(out, &name, "_sum", &labels, None, &value, timestamp);
                value.clear();
                push_number(&mut value, count, template.style);
                push_sample(out, &name, "_count", &labels, None, &value, timestamp);
                samples += quantiles.len() + 2;
            }
        }
    }
    samples
}

/// Generates a Prometheus text format 0.0.4 body of at least `target_bytes` (families are
/// added whole until the size is reached) and returns it with its number of sample lines.
///
/// The body is a fleet's federated scrape: for each application namespace (`orders`,
/// `payments`, … then `orders2`, …) every family of [`TEMPLATES`] — Micrometer JVM metrics,
/// `redis_exporter` metrics and BEAM/Phoenix metrics — with series drawn from the
/// application's pods. Only syntax both benchmarked parsers read is used: no quoted names,
/// exemplars, braces, commas or `=` inside label values, and the only escapes are a few `\"`.
/// The same `seed` always yields the same bytes.
fn realistic_body(target_bytes: usize, seed: u64) -> (String, usize) {
    let mut rng = Rng::new(seed);
    let mut body = String::with_capacity(target_bytes + 512 * 1024);
    let mut samples = 0;
    // 2026-11-30T20:44:02Z in milliseconds; each timestamped family is 15 s later.
    let mut timestamp: u64 = 1_796_071_442_000;
    'outer: for round in 0.. {
        for application in APPLICATIONS {
            let namespace = if round == 0 {
                (*application).to_owned()
            } else {
                format!("{application}{}", round + 1)
            };
            let targets = targets(&mut rng, application);
            for template in TEMPLATES {
                if body.len() >= target_bytes {
                    break 'outer;
                }
                samples += push_family(
                    &mut body,
                    &mut rng,
                    &namespace,
                    application,
                    &targets,
                    template,
                    timestamp,
                );
                if template.timestamps {
                    timestamp += 15_000;
                }
            }
        }
    }
    (body, samples)
}

// ---------------------------------------------------------------------------------------------
// The two parsers under test
// ---------------------------------------------------------------------------------------------

/// epicenter: one call over the whole body; the result borrows from it.
fn parse_epicenter(body: &str) -> Exposition<'_> {
    match parse(body.as_bytes(), OPTIONS) {
        Ok(exposition) => exposition,
        Err(error) => panic!(
            "epicenter failed to parse the generated body: {error} (line: {:?})",
            body.lines().nth((error.line as usize).saturating_sub(1))
        ),
    }
}

/// epicenter as its scrape parses: labels of text samples deferred until a series is new to
/// the scrape cache ([`parse_deferring_labels`]), like `textparse`'s `Next` + `Series`.
fn parse_epicenter_deferred(body: &str) -> Exposition<'_> {
    match parse_deferring_labels(body.as_bytes(), OPTIONS) {
        Ok(exposition) => exposition,
        Err(error) => panic!("epicenter (labels deferred) failed to parse the body: {error}"),
    }
}

/// `prometheus-parse` 0.2: its only entry point takes an iterator of owned `io::Result<String>`
/// lines, so the per-line `to_owned` is part of what using the crate costs.
fn parse_prometheus_parse(body: &str) -> prometheus_parse::Scrape {
    prometheus_parse::Scrape::parse(body.lines().map(|line| Ok(line.to_owned())))
        .expect("prometheus-parse returns errors only from the line iterator")
}

/// The generated body and the sample count both parsers were checked to agree on.
struct Fixture {
    /// The text 0.0.4 body.
    body: String,
    /// Sample lines in the body (what epicenter's `sample_count` reports).
    samples: usize,
    /// Families in the body.
    families: usize,
}

/// The body, generated and cross-checked once per process.
///
/// Panics unless: epicenter parses the body without error or warning; its sample count equals
/// the generator's; and `prometheus-parse` sees the same samples. That crate does not return
/// one sample per line: it folds the `_bucket` lines of one histogram series (keyed by name
/// and the labels other than `le`) into one `Value::Histogram`, and the quantile lines of one
/// summary series into one `Value::Summary`, while the histogram's and summary's `_sum` and
/// `_count` lines stay separate (untyped) samples. So its `samples.len()` is compared with
/// epicenter's samples regrouped the same way, and the lines it saw — buckets and quantiles
/// expanded — with epicenter's `sample_count()`. (`prometheus-parse` splits labels on `,` and
/// `=` and trims `"`, so it keeps `\"` escapes undecoded and loses a value's final quote; the
/// generator's values avoid `,`, `=` and braces so that counts stay comparable.)
fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let (body, generated) = realistic_body(TARGET_BYTES, SEED);
        let exposition = parse_epicenter(&body);
        assert!(
            exposition.warnings.is_empty(),
            "epicenter reported {} warnings on the generated body, first: {:?}",
            exposition.warnings.len(),
            exposition
                .warnings
                .iter()
                .take(5)
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        );
        let samples = exposition.sample_count();
        assert_eq!(
            samples, generated,
            "epicenter's sample count differs from the generator's"
        );

        // epicenter's samples grouped as prometheus-parse groups them.
        let mut grouped = 0;
        for family in &exposition.families {
            let folded_label = match family.metric_type {
                MetricType::Histogram => Some("le"),
                MetricType::Summary => Some("quantile"),
                _ => None,
            };
            let mut series = HashSet::new();
            for sample in exposition.samples_of(family) {
                let labels = exposition.labels_in(sample.labels);
                match folded_label {
                    Some(folded) if labels.iter().any(|label| label.name == folded) => {
                        let mut key: Vec<_> = labels
                            .iter()
                            .filter(|label| label.name != folded)
                            .map(|label| (&label.name, &label.value))
                            .collect();
                        key.sort();
                        series.insert((&sample.name, key));
                    }
                    _ => grouped += 1,
                }
            }
            grouped += series.len();
        }

        let scrape = parse_prometheus_parse(&body);
        let lines: usize = scrape
            .samples
            .iter()
            .map(|sample| match &sample.value {
                prometheus_parse::Value::Histogram(buckets) => buckets.len(),
                prometheus_parse::Value::Summary(quantiles) => quantiles.len(),
                _ => 1,
            })
            .sum();
        assert_eq!(
            scrape.samples.len(),
            grouped,
            "prometheus-parse's grouped samples differ from epicenter's samples grouped the same way"
        );
        assert_eq!(
            lines, samples,
            "prometheus-parse read a different number of sample lines than epicenter"
        );
        assert_eq!(
            scrape.docs.len(),
            exposition.families.len(),
            "prometheus-parse read a different number of HELP lines"
        );
        Fixture {
            samples,
            families: exposition.families.len(),
            body,
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Criterion
// ---------------------------------------------------------------------------------------------

/// Both parsers on the fixture, once per throughput unit: group `parse_bytes` reports MiB/s,
/// group `parse_samples` samples/s. Flat sampling with 10 samples keeps the slower parser's
/// share of the run to a few seconds per group.
fn bench_parsers(c: &mut Criterion) {
    let fixture = fixture();
    let body = fixture.body.as_str();
    for (group_name, throughput) in [
        ("parse_bytes", Throughput::Bytes(body.len() as u64)),
        ("parse_samples", Throughput::Elements(fixture.samples as u64)),
    ] {
        let mut group = c.benchmark_group(group_name);
        group
            .sample_size(10)
            .sampling_mode(SamplingMode::Flat)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(5))
            .throughput(throughput);
        group.bench_function("epicenter", |b| b.iter(|| parse_epicenter(black_box(body))));
        group.bench_function("prometheus-parse", |b| {
            b.iter(|| parse_prometheus_parse(black_box(body)))
        });
        group.finish();
    }
}

// `criterion_group!` defines `pub fn benches()`, which runs [`bench_parsers`] with the command
// line's settings; the macro cannot carry a doc comment.
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::bench_parsers);
}

// ---------------------------------------------------------------------------------------------
// Plain summary
// ---------------------------------------------------------------------------------------------

/// Best and median wall time of `runs` calls of `work`, the result dropped inside the timing
/// (as criterion's `iter` does).
fn time_runs<T>(runs: usize, mut work: impl FnMut() -> T) -> (Duration, Duration) {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            drop(black_box(work()));
            start.elapsed()
        })
        .collect();
    times.sort();
    (times[0], times[times.len() / 2])
}

/// Prints body size, sample count, each parser's best-of-`runs` MiB/s and samples/s, and the
/// epicenter / prometheus-parse ratio.
fn print_summary(fixture: &Fixture, runs: usize) {
    let body = fixture.body.as_str();
    let mib = body.len() as f64 / (1024.0 * 1024.0);
    let samples = fixture.samples as f64;
    let (epicenter_best, epicenter_median) = time_runs(runs, || parse_epicenter(body));
    let (reference_best, reference_median) = time_runs(runs, || parse_prometheus_parse(body));
    let cores = std::thread::available_parallelism().map_or(0, usize::from);

    println!();
    println!("== parse summary: best of {runs} wall-clock runs per parser, {cores} cores available ==");
    println!(
        "body:             {mib:.2} MiB ({} bytes, {:.2} MB), {} samples, {} families, {} lines",
        body.len(),
        body.len() as f64 / 1e6,
        fixture.samples,
        fixture.families,
        body.lines().count()
    );
    for (name, best, median) in [
        ("epicenter", epicenter_best, epicenter_median),
        ("prometheus-parse", reference_best, reference_median),
    ] {
        let seconds = best.as_secs_f64();
        println!(
            "{:<17} best {:>9.2} ms (median {:>9.2} ms)  {:>9.1} MiB/s  {:>12.0} samples/s",
            format!("{name}:"),
            seconds * 1e3,
            median.as_secs_f64() * 1e3,
            mib / seconds,
            samples / seconds
        );
    }
    println!(
        "ratio epicenter/prometheus-parse (throughput, best runs): {:.2}x",
        reference_best.as_secs_f64() / epicenter_best.as_secs_f64()
    );
}

/// Times epicenter's parser and `prometheus-parse` on each body file named in `list`
/// (`:`-separated paths, scripts/bench's parser comparison) and prints, per parser and body,
/// `RESULT parser=<name> body=<file name> samples=<n> ns_per_sample=<x>`: the best of
/// [`SUMMARY_RUNS`] runs, each parsing the body as many times as fit in 100 ms, in wall-clock
/// nanoseconds per sample line (the same method as scripts/bench.d/parsepeers for the Go
/// parsers). `EPICENTER_BENCH_ONLY=epicenter` leaves `prometheus-parse` out (for profiling).
/// Panics if epicenter reports an error or a warning on a body.
fn time_bodies(list: &std::ffi::OsStr) {
    let only_epicenter = std::env::var("EPICENTER_BENCH_ONLY").is_ok_and(|only| only == "epicenter");
    for path in std::env::split_paths(list) {
        let body = std::fs::read_to_string(&path)
            .unwrap_or_else(|error| panic!("EPICENTER_BENCH_BODIES: cannot read {}: {error}", path.display()));
        let name = path
            .file_name()
            .map_or_else(String::new, |name| name.to_string_lossy().into_owned());
        let exposition = parse_epicenter(&body);
        assert!(
            exposition.warnings.is_empty(),
            "{name}: epicenter warned: {:?}",
            exposition.warnings.first()
        );
        let samples = exposition.sample_count();
        drop(exposition);
        let report = |parser: &str, per_call: Duration| {
            println!(
                "RESULT parser={parser} body={name} samples={samples} ns_per_sample={:.1}",
                per_call.as_secs_f64() * 1e9 / samples as f64
            );
        };
        report("epicenter", best_per_call(|| parse_epicenter(&body)));
        let deferred = parse_epicenter_deferred(&body);
        assert_eq!(
            deferred.sample_count(),
            samples,
            "{name}: the deferred parse counts other samples"
        );
        drop(deferred);
        report("epicenter-scrape", best_per_call(|| parse_epicenter_deferred(&body)));
        if !only_epicenter {
            report("prometheus-parse", best_per_call(|| parse_prometheus_parse(&body)));
        }
    }
}

/// The best of [`SUMMARY_RUNS`] runs of `work`, per call: each run calls it as many times as
/// a first 100 ms calibration did.
fn best_per_call<T>(mut work: impl FnMut() -> T) -> Duration {
    let calibration = Instant::now();
    let mut repeat = 0_u32;
    while calibration.elapsed() < Duration::from_millis(100) {
        drop(black_box(work()));
        repeat += 1;
    }
    (0..SUMMARY_RUNS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..repeat {
                drop(black_box(work()));
            }
            start.elapsed() / repeat
        })
        .min()
        .unwrap_or_default()
}

/// Runs criterion (unless `EPICENTER_BENCH_QUICK=1`), then the plain summary;
/// `EPICENTER_BENCH_DUMP=<file>` also writes the generated body there for inspection. Under
/// `cargo test --benches` (criterion's test mode) the fixture is still built and cross-checked
/// and criterion runs each benchmark once, but the summary is skipped.
fn main() {
    if let Some(list) = std::env::var_os("EPICENTER_BENCH_BODIES") {
        time_bodies(&list);
        return;
    }
    let quick = std::env::var("EPICENTER_BENCH_QUICK").is_ok_and(|value| value == "1");
    let arguments: Vec<String> = std::env::args().collect();
    let benchmarking = arguments.iter().any(|argument| argument == "--bench")
        && !arguments
            .iter()
            .any(|argument| argument == "--test" || argument == "--list");
    if let Some(path) = std::env::var_os("EPICENTER_BENCH_DUMP") {
        std::fs::write(&path, &fixture().body).expect("EPICENTER_BENCH_DUMP names a writable file");
        eprintln!("wrote the generated body to {}", path.to_string_lossy());
    }
    if !quick {
        group::benches();
        Criterion::default().configure_from_args().final_summary();
    }
    if quick || benchmarking {
        print_summary(fixture(), SUMMARY_RUNS);
    }
}
