//! `epicenter loadgen redis`: a real Redis workload from a set of "backend" instances, each
//! with its own connection pool per Redis node and client-side consistent hashing over the
//! nodes, exporting what a Spring service with Lettuce pools exports.
//!
//! Names follow Micrometer (../shared/fixtures/exposition/NAMES.md §1a, §1b):
//! `commons_pool2_*{factoryType,name,type}` per pool (`name` is the Redis node) and
//! `lettuce_command_completion_seconds{command,local,remote}` with `remote` =
//! `redis/<node>:<port>`. Neither library counts failed commands, so failures are the
//! generator's own family `backend_redis_command_errors_total{command,remote,error}`
//! (`error` = `timeout`, `connection`, `pool_timeout`, `overload`, `other`).
//!
//! The pool is bb8 (one per instance and node, `--pool-size` connections, no check on
//! borrow, like commons-pool2's `testOnBorrow=false`); a connection whose command failed on
//! I/O is discarded and a new one is created on the next borrow, as Lettuce reconnects.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use clap::{Args, Subcommand};
use prometheus::{Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry};
use rand::Rng;
use redis::AsyncCommands;

use crate::run::runtime;

/// `epicenter loadgen`: real workloads for the end-to-end tests and `scripts/real-demo`.
#[derive(Args, Debug)]
pub(crate) struct LoadgenArgs {
    #[command(subcommand)]
    kind: LoadKind,
}

#[derive(Subcommand, Debug)]
enum LoadKind {
    /// GET/SET traffic to real Redis nodes from N backend instances (Lettuce/commons-pool2
    /// metric names), each instance serving its own /metrics on 127.0.0.1.
    ///
    /// Example (six nodes started with redis-server on ports 7001..7006):
    ///   epicenter loadgen redis --node redis-1-1=127.0.0.1:7001 --node redis-1-2=127.0.0.1:7002 \
    ///     ... --instances 12 --targets-file backends.json
    #[command(verbatim_doc_comment)]
    Redis(RedisArgs),

    /// HTTP GETs at a fixed rate to each target, measuring latency per target the way a
    /// Spring client does (Micrometer's `http_client_requests_seconds`, `client_name` = the
    /// target's name), served on one /metrics endpoint on 127.0.0.1.
    ///
    /// Example (six services on ports 8001..8006):
    ///   epicenter loadgen http --target jvm-1-1=127.0.0.1:8001 ... --path /work --rate 20 \
    ///     --targets-file client.json
    #[command(verbatim_doc_comment)]
    Http(HttpArgs),
}

/// Arguments of `epicenter loadgen http`.
#[derive(Args, Debug)]
pub(crate) struct HttpArgs {
    /// A target as NAME=HOST:PORT; NAME is the target's `pod` label in the scrape config and
    /// the `client_name` of its latency series. Repeat per target.
    #[arg(long = "target", value_name = "NAME=HOST:PORT", required = true)]
    targets: Vec<String>,

    /// Path requested on every target.
    #[arg(long, default_value = "/")]
    path: String,

    /// Requests per second per target.
    #[arg(long, default_value_t = 20.0, value_name = "PER_SECOND", value_parser = positive_rate)]
    rate: f64,

    /// How long a request may take before it counts as failed (status `IO_ERROR`).
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    timeout: Duration,

    /// This client's own placement: `pod`, `dc`, `host` and `service` labels in the targets
    /// file.
    #[arg(long, default_value = "client-1")]
    name: String,
    #[arg(long, default_value = "dc-1")]
    dc: String,
    #[arg(long, default_value = "dc-1-client-1")]
    host: String,
    #[arg(long, default_value = "client")]
    service: String,

    /// Write this client's /metrics endpoint as a file_sd file.
    #[arg(long, value_name = "FILE")]
    targets_file: Option<PathBuf>,

    /// Stop after this long (e.g. 10m); default: until Ctrl-C.
    #[arg(long = "for", value_name = "DURATION", value_parser = humantime::parse_duration)]
    run_for: Option<Duration>,
}

/// Arguments of `epicenter loadgen redis`.
#[derive(Args, Debug)]
pub(crate) struct RedisArgs {
    /// A Redis node as NAME=HOST:PORT; NAME is the node's `pod` label in the scrape config
    /// (it appears as commons-pool2 `name` and in Lettuce's `remote`). Repeat per node.
    #[arg(long = "node", value_name = "NAME=HOST:PORT", required = true)]
    nodes: Vec<String>,

    /// Backend instances, spread round-robin over --dcs.
    #[arg(long, default_value_t = 12)]
    instances: usize,

    /// Datacenters the instances are placed in (comma-separated).
    #[arg(long, default_value = "dc-1,dc-2,dc-3", value_delimiter = ',')]
    dcs: Vec<String>,

    /// Requests per second per instance (80 % GET, 20 % SET on random keys).
    #[arg(long, default_value_t = 40.0, value_name = "PER_SECOND", value_parser = positive_rate)]
    rate: f64,

    /// Keys in the key space (`key:0` ..).
    #[arg(long, default_value_t = 10_000)]
    keys: u64,

    /// Connections per pool (one pool per instance and node), like commons-pool2 maxTotal.
    #[arg(long, default_value_t = 8)]
    pool_size: u32,

    /// How long a borrow waits for a connection (commons-pool2 maxWait), e.g. 500ms.
    #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration)]
    acquire_timeout: Duration,

    /// How long a command waits for its reply (Lettuce's command timeout), e.g. 500ms.
    #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration)]
    command_timeout: Duration,

    /// Requests in flight per instance beyond which new ones are refused (`error="overload"`).
    #[arg(long, default_value_t = 256)]
    max_in_flight: i64,

    /// Write the instances' /metrics endpoints as a file_sd file (labels dc, host, service
    /// `backend`, pod).
    #[arg(long, value_name = "FILE")]
    targets_file: Option<PathBuf>,

    /// Stop after this long (e.g. 10m); default: until Ctrl-C.
    #[arg(long = "for", value_name = "DURATION", value_parser = humantime::parse_duration)]
    run_for: Option<Duration>,
}

/// Runs `epicenter loadgen`.
pub(crate) fn run(args: &LoadgenArgs) -> ExitCode {
    match &args.kind {
        LoadKind::Redis(redis_args) => run_redis(redis_args),
        LoadKind::Http(http_args) => run_http(http_args),
    }
}

/// A request rate: a finite number above 0 (requests per second).
/// Requests per second a generator accepts: one every 1000 s at the least, 100,000 at the most
/// (the interval between requests must be a representable, non-zero duration).
const RATE_RANGE: std::ops::RangeInclusive<f64> = 0.001..=100_000.0;

fn positive_rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(rate) if RATE_RANGE.contains(&rate) => Ok(rate),
        _ => Err(format!(
            "'{text}' is not a rate from {} to {} (requests per second)",
            RATE_RANGE.start(),
            RATE_RANGE.end()
        )),
    }
}

/// A Redis node as given on the command line.
#[derive(Debug, Clone)]
struct Node {
    name: String,
    address: String,
}

fn parse_node(text: &str) -> Result<Node, String> {
    parse_named(text, "--node")
}

/// NAME=HOST:PORT as given to `option`.
fn parse_named(text: &str, option: &str) -> Result<Node, String> {
    let (name, address) = text
        .split_once('=')
        .ok_or_else(|| format!("{option} '{text}': expected NAME=HOST:PORT, e.g. redis-1-1=127.0.0.1:7001"))?;
    let (host, port) = address
        .rsplit_once(':')
        .ok_or_else(|| format!("{option} '{text}': address '{address}' has no :PORT"))?;
    if name.is_empty() || host.is_empty() || port.parse::<u16>().is_err() {
        return Err(format!(
            "{option} '{text}': expected NAME=HOST:PORT with a port in 1..65535"
        ));
    }
    Ok(Node {
        name: name.to_string(),
        address: address.to_string(),
    })
}

/// A pooled Redis connection; `broken` once a command failed on I/O, so bb8 discards it.
struct Connection {
    inner: redis::aio::MultiplexedConnection,
    broken: bool,
}

/// bb8's view of one Redis node.
struct Manager {
    client: redis::Client,
    config: redis::AsyncConnectionConfig,
}

impl bb8::ManageConnection for Manager {
    type Connection = Connection;
    type Error = redis::RedisError;

    async fn connect(&self) -> Result<Connection, redis::RedisError> {
        let inner = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        Ok(Connection { inner, broken: false })
    }

    async fn is_valid(&self, connection: &mut Connection) -> Result<(), redis::RedisError> {
        redis::cmd("PING").query_async::<()>(&mut connection.inner).await
    }

    fn has_broken(&self, connection: &mut Connection) -> bool {
        connection.broken
    }
}

/// Borrow waits of one pool: commons-pool2 reports the mean of the last 100 and the maximum.
#[derive(Default)]
struct Waits {
    recent: VecDeque<f64>,
    max: f64,
}

/// One instance's pool towards one node.
struct NodePool {
    node: Node,
    remote: String,
    pool: bb8::Pool<Manager>,
    waiters: AtomicI64,
    waits: Mutex<Waits>,
    /// Counter values already exported (bb8 keeps totals; Prometheus counters take deltas).
    exported: Mutex<[u64; 3]>,
}

/// The metrics of one backend instance, in its own registry.
struct Metrics {
    registry: Registry,
    active: IntGaugeVec,
    idle: IntGaugeVec,
    waiters: IntGaugeVec,
    created: IntCounterVec,
    destroyed: IntCounterVec,
    borrowed: IntCounterVec,
    mean_wait: GaugeVec,
    max_wait: GaugeVec,
    latency: HistogramVec,
    latency_max: GaugeVec,
    errors: IntCounterVec,
}

/// Commons-pool2's `factoryType` for Lettuce's pooled connections.
const FACTORY_TYPE: &str =
    "io.lettuce.core.support.ConnectionPoolSupport$RedisPooledObjectFactory<io.lettuce.core.api.StatefulRedisConnection>";
const POOL_LABELS: [&str; 3] = ["factoryType", "name", "type"];
const COMMAND_LABELS: [&str; 3] = ["command", "local", "remote"];

impl Metrics {
    fn new(start_seconds: f64) -> Result<Metrics, prometheus::Error> {
        let registry = Registry::new();
        let gauge = |name: &str, help: &str| -> Result<IntGaugeVec, prometheus::Error> {
            let metric = IntGaugeVec::new(Opts::new(name, help), &POOL_LABELS)?;
            registry.register(Box::new(metric.clone()))?;
            Ok(metric)
        };
        let counter = |name: &str, help: &str, labels: &[&str]| -> Result<IntCounterVec, prometheus::Error> {
            let metric = IntCounterVec::new(Opts::new(name, help), labels)?;
            registry.register(Box::new(metric.clone()))?;
            Ok(metric)
        };
        let seconds = |name: &str, help: &str, labels: &[&str]| -> Result<GaugeVec, prometheus::Error> {
            let metric = GaugeVec::new(Opts::new(name, help), labels)?;
            registry.register(Box::new(metric.clone()))?;
            Ok(metric)
        };
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "lettuce_command_completion_seconds",
                "Latency between command send and command completion (complete response received)",
            )
            .buckets(vec![
                0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
            ]),
            &COMMAND_LABELS,
        )?;
        registry.register(Box::new(latency.clone()))?;
        let start = prometheus::Gauge::new(
            "process_start_time_seconds",
            "Start time of the process since unix epoch.",
        )?;
        start.set(start_seconds);
        registry.register(Box::new(start))?;
        Ok(Metrics {
            active: gauge("commons_pool2_num_active_objects", "The number of instances currently borrowed from the pool")?,
            idle: gauge("commons_pool2_num_idle_objects", "The number of instances currently idle in the pool")?,
            waiters: gauge(
                "commons_pool2_num_waiters_threads",
                "The estimate of the number of threads currently blocked waiting for an object from the pool",
            )?,
            created: counter(
                "commons_pool2_created_objects_total",
                "The total number of objects created for this pool over the lifetime of the pool",
                &POOL_LABELS,
            )?,
            destroyed: counter(
                "commons_pool2_destroyed_objects_total",
                "The total number of objects destroyed by this pool over the lifetime of the pool",
                &POOL_LABELS,
            )?,
            borrowed: counter(
                "commons_pool2_borrowed_objects_total",
                "The total number of objects successfully borrowed from this pool over the lifetime of the pool",
                &POOL_LABELS,
            )?,
            mean_wait: seconds(
                "commons_pool2_mean_borrow_wait_seconds",
                "The mean time threads wait to borrow an object",
                &POOL_LABELS,
            )?,
            max_wait: seconds(
                "commons_pool2_max_borrow_wait_seconds",
                "The maximum time a thread has waited to borrow objects from the pool",
                &POOL_LABELS,
            )?,
            latency_max: seconds(
                "lettuce_command_completion_seconds_max",
                "Longest command completion since the previous scrape, seconds",
                &COMMAND_LABELS,
            )?,
            errors: counter(
                "backend_redis_command_errors_total",
                "Redis commands that failed, by upstream and error (timeout, connection, pool_timeout, overload, other)",
                &["command", "remote", "error"],
            )?,
            latency,
            registry,
        })
    }
}

/// One backend instance.
struct Instance {
    name: String,
    dc: String,
    host: String,
    pools: Vec<NodePool>,
    /// Consistent-hash ring of (node index, virtual point): 160 points per node, as ketama.
    ring: hashring::HashRing<(usize, u32)>,
    metrics: Metrics,
    in_flight: AtomicI64,
    ok: AtomicU64,
    failed: AtomicU64,
}

impl Instance {
    /// Brings the pool gauges and counters up to date, then renders the text format.
    fn render(&self) -> String {
        let metrics = &self.metrics;
        for pool in &self.pools {
            let labels = [FACTORY_TYPE, pool.node.name.as_str(), "GenericObjectPool"];
            let state = pool.pool.state();
            let stats = &state.statistics;
            metrics
                .active
                .with_label_values(&labels)
                .set(i64::from(state.connections - state.idle_connections));
            metrics
                .idle
                .with_label_values(&labels)
                .set(i64::from(state.idle_connections));
            metrics
                .waiters
                .with_label_values(&labels)
                .set(pool.waiters.load(Ordering::Relaxed).max(0));
            let totals = [
                stats.connections_created,
                stats.connections_closed_broken
                    + stats.connections_closed_invalid
                    + stats.connections_closed_max_lifetime
                    + stats.connections_closed_idle_timeout,
                stats.get_direct + stats.get_waited,
            ];
            if let Ok(mut exported) = pool.exported.lock() {
                for (index, counter) in [&metrics.created, &metrics.destroyed, &metrics.borrowed]
                    .into_iter()
                    .enumerate()
                {
                    let delta = totals[index].saturating_sub(exported[index]);
                    counter.with_label_values(&labels).inc_by(delta);
                    exported[index] = totals[index];
                }
            }
            if let Ok(waits) = pool.waits.lock() {
                let mean = if waits.recent.is_empty() {
                    0.0
                } else {
                    waits.recent.iter().sum::<f64>() / waits.recent.len() as f64
                };
                metrics.mean_wait.with_label_values(&labels).set(mean);
                metrics.max_wait.with_label_values(&labels).set(waits.max);
            }
        }
        let mut buffer = Vec::new();
        let _ = prometheus::TextEncoder::new().encode(&metrics.registry.gather(), &mut buffer);
        // The step maximum starts again after each scrape, as Micrometer's decays.
        metrics.latency_max.reset();
        String::from_utf8(buffer).unwrap_or_default()
    }

    /// One GET or SET on the node that owns `key`.
    async fn request(self: Arc<Self>, key: u64, write: bool) {
        let command = if write { "SET" } else { "GET" };
        let Some(&(index, _)) = self.ring.get(&key) else { return };
        let pool = &self.pools[index];
        let fail = |error: &str| {
            self.metrics
                .errors
                .with_label_values(&[command, pool.remote.as_str(), error])
                .inc();
            self.failed.fetch_add(1, Ordering::Relaxed);
        };
        pool.waiters.fetch_add(1, Ordering::Relaxed);
        let asked = Instant::now();
        let borrowed = pool.pool.get().await;
        pool.waiters.fetch_sub(1, Ordering::Relaxed);
        let mut connection = match borrowed {
            Ok(connection) => connection,
            Err(bb8::RunError::TimedOut) => return fail("pool_timeout"),
            Err(bb8::RunError::User(error)) => return fail(classify(&error)),
        };
        if let Ok(mut waits) = pool.waits.lock() {
            let waited = asked.elapsed().as_secs_f64();
            if waits.recent.len() == 100 {
                waits.recent.pop_front();
            }
            waits.recent.push_back(waited);
            waits.max = waits.max.max(waited);
        }
        let sent = Instant::now();
        let name = format!("key:{key}");
        let result: redis::RedisResult<()> = if write {
            connection.inner.set(&name, key).await
        } else {
            connection.inner.get::<_, Option<u64>>(&name).await.map(|_| ())
        };
        match result {
            Ok(()) => {
                let elapsed = sent.elapsed().as_secs_f64();
                let labels = [command, "local:any", pool.remote.as_str()];
                self.metrics.latency.with_label_values(&labels).observe(elapsed);
                let max = self.metrics.latency_max.with_label_values(&labels);
                if elapsed > max.get() {
                    max.set(elapsed);
                }
                self.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                let kind = classify(&error);
                if kind == "connection" {
                    connection.broken = true;
                }
                fail(kind);
            }
        }
    }
}

/// The `error` label of a failed command or connect.
fn classify(error: &redis::RedisError) -> &'static str {
    if error.is_timeout() {
        "timeout"
    } else if error.is_io_error() || error.is_connection_dropped() || error.is_connection_refusal() {
        "connection"
    } else {
        "other"
    }
}

fn build_instances(args: &RedisArgs, nodes: &[Node], start_seconds: f64) -> Result<Vec<Arc<Instance>>, String> {
    let mut instances = Vec::new();
    let mut per_dc = vec![0usize; args.dcs.len()];
    for index in 0..args.instances {
        let dc_index = index % args.dcs.len();
        per_dc[dc_index] += 1;
        let dc = args.dcs[dc_index].clone();
        let ordinal = per_dc[dc_index];
        let dc_number = dc.trim_start_matches("dc-");
        let mut pools = Vec::new();
        let mut ring = hashring::HashRing::new();
        for (position, node) in nodes.iter().enumerate() {
            let client = redis::Client::open(format!("redis://{}/", node.address))
                .map_err(|error| format!("--node {}={}: {error}", node.name, node.address))?;
            let config = redis::AsyncConnectionConfig::new()
                .set_connection_timeout(Some(args.command_timeout))
                .set_response_timeout(Some(args.command_timeout));
            let pool = bb8::Pool::builder()
                .max_size(args.pool_size)
                .min_idle(Some(2.min(args.pool_size)))
                .test_on_check_out(false)
                .retry_connection(false)
                // commons-pool2 evicts nothing by default (no eviction runs); bb8 would close
                // idle connections after 10 minutes and every connection after 30.
                .idle_timeout(None)
                .max_lifetime(None)
                .connection_timeout(args.acquire_timeout)
                .build_unchecked(Manager { client, config });
            let port = node.address.rsplit_once(':').map_or("6379", |(_, port)| port);
            pools.push(NodePool {
                remote: format!("redis/{}:{port}", node.name),
                node: node.clone(),
                pool,
                waiters: AtomicI64::new(0),
                waits: Mutex::new(Waits::default()),
                exported: Mutex::new([0; 3]),
            });
            for point in 0..160 {
                ring.add((position, point));
            }
        }
        let metrics = Metrics::new(start_seconds).map_err(|error| format!("metrics registry: {error}"))?;
        instances.push(Arc::new(Instance {
            name: format!("backend-{dc_number}-{ordinal}"),
            host: format!("{dc}-app-{ordinal}"),
            dc,
            pools,
            ring,
            metrics,
            in_flight: AtomicI64::new(0),
            ok: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }));
    }
    Ok(instances)
}

fn run_redis(args: &RedisArgs) -> ExitCode {
    let nodes = match args
        .nodes
        .iter()
        .map(|text| parse_node(text))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(nodes) => nodes,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let problems = [
        (args.instances == 0, "--instances must be at least 1"),
        (
            args.dcs.iter().any(String::is_empty),
            "--dcs must name at least one datacenter, without empty names",
        ),
        (args.pool_size == 0, "--pool-size must be at least 1"),
        (args.keys == 0, "--keys must be at least 1"),
    ];
    if let Some((_, message)) = problems.iter().find(|(bad, _)| *bad) {
        eprintln!("error: {message}");
        return ExitCode::from(2);
    }
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let start_seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |elapsed| elapsed.as_secs_f64());
    runtime.block_on(async move {
        let instances = match build_instances(args, &nodes, start_seconds) {
            Ok(instances) => instances,
            Err(message) => {
                eprintln!("error: {message}");
                return ExitCode::from(2);
            }
        };
        let mut groups = Vec::new();
        for instance in &instances {
            let served = instance.clone();
            let placement = Placement {
                name: &instance.name,
                dc: &instance.dc,
                host: &instance.host,
                service: "backend",
            };
            match expose(Arc::new(move || served.render()), &placement).await {
                Ok(group) => groups.push(group),
                Err(code) => return code,
            }
            tokio::spawn(drive(instance.clone(), args.rate, args.keys, args.max_in_flight));
        }
        if let Some(path) = &args.targets_file {
            if let Err(code) = write_targets(path, groups) {
                return code;
            }
        }
        println!(
            "epicenter loadgen redis: {} instances × {}/s over {} nodes; Ctrl-C stops",
            instances.len(),
            args.rate,
            nodes.len()
        );
        let progress = tokio::spawn(report(instances.clone()));
        until_stopped(args.run_for).await;
        progress.abort();
        ExitCode::SUCCESS
    })
}

/// Issues `rate` requests per second for one instance, each in its own task.
async fn drive(instance: Arc<Instance>, rate: f64, keys: u64, max_in_flight: i64) {
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let (key, write) = {
            let mut random = rand::rng();
            (random.random_range(0..keys), random.random_bool(0.2))
        };
        if instance.in_flight.load(Ordering::Relaxed) >= max_in_flight {
            let Some(&(index, _)) = instance.ring.get(&key) else {
                continue;
            };
            let command = if write { "SET" } else { "GET" };
            instance
                .metrics
                .errors
                .with_label_values(&[command, instance.pools[index].remote.as_str(), "overload"])
                .inc();
            instance.failed.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        instance.in_flight.fetch_add(1, Ordering::Relaxed);
        let task = instance.clone();
        tokio::spawn(async move {
            let counter = task.clone();
            task.request(key, write).await;
            counter.in_flight.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// Prints a line every 10 s: requests completed and failed since the previous line.
async fn report(instances: Vec<Arc<Instance>>) {
    let mut ticker = tokio::time::interval(Duration::from_secs(10));
    ticker.tick().await;
    let mut previous = (0u64, 0u64);
    loop {
        ticker.tick().await;
        let ok: u64 = instances
            .iter()
            .map(|instance| instance.ok.load(Ordering::Relaxed))
            .sum();
        let failed: u64 = instances
            .iter()
            .map(|instance| instance.failed.load(Ordering::Relaxed))
            .sum();
        println!(
            "loadgen: last 10 s: {} commands ok, {} failed",
            ok - previous.0,
            failed - previous.1
        );
        previous = (ok, failed);
    }
}

/// Where a load generator's own /metrics sits, as its file_sd target labels say.
struct Placement<'a> {
    name: &'a str,
    dc: &'a str,
    host: &'a str,
    service: &'a str,
}

/// Serves `render` as /metrics on a new port of 127.0.0.1, prints the address beside its
/// placement, and returns the file_sd target group for it. Exit status 1 when it cannot listen.
async fn expose(
    render: Arc<dyn Fn() -> String + Send + Sync>,
    placement: &Placement<'_>,
) -> Result<serde_json::Value, ExitCode> {
    let address = serve_metrics(render).await.map_err(|error| {
        eprintln!("error: cannot listen on 127.0.0.1: {error}");
        ExitCode::from(1)
    })?;
    println!(
        "  {:<14} {:<6} {:<14} http://{address}/metrics",
        placement.name, placement.dc, placement.host
    );
    Ok(serde_json::json!({
        "targets": [address],
        "labels": {"dc": placement.dc, "host": placement.host, "service": placement.service, "pod": placement.name}
    }))
}

/// Writes `groups` to `path` as a Prometheus file_sd JSON file. Exit status 1 when it cannot.
fn write_targets(path: &std::path::Path, groups: Vec<serde_json::Value>) -> Result<(), ExitCode> {
    let text = serde_json::to_string_pretty(&serde_json::Value::Array(groups)).unwrap_or_default();
    std::fs::write(path, text + "\n").map_err(|error| {
        eprintln!("error: cannot write {}: {error}", path.display());
        ExitCode::from(1)
    })?;
    println!("targets written to {} (file_sd format)", path.display());
    Ok(())
}

/// Returns after `run_for`, or at Ctrl-C when there is none.
async fn until_stopped(run_for: Option<Duration>) {
    match run_for {
        Some(duration) => tokio::time::sleep(duration).await,
        None => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Serves `render` as /metrics on a new port of 127.0.0.1; returns the address.
async fn serve_metrics(render: Arc<dyn Fn() -> String + Send + Sync>) -> std::io::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?.to_string();
    let app = axum::Router::new().route(
        "/metrics",
        get(move || {
            let render = render.clone();
            async move {
                (
                    [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
                    render(),
                )
                    .into_response()
            }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(address)
}

fn run_http(args: &HttpArgs) -> ExitCode {
    let targets = match args
        .targets
        .iter()
        .map(|text| parse_named(text, "--target"))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(targets) => targets,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    if !args.path.starts_with('/') {
        eprintln!("error: --path '{}' must start with '/', e.g. /work", args.path);
        return ExitCode::from(2);
    }
    let latency = match HistogramVec::new(
        HistogramOpts::new("http_client_requests_seconds", "Timer of HTTP client requests, seconds").buckets(vec![
            0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
        ]),
        &["client_name", "method", "outcome", "status", "uri"],
    ) {
        Ok(latency) => latency,
        Err(error) => {
            eprintln!("error: metrics: {error}");
            return ExitCode::from(1);
        }
    };
    let registry = Registry::new();
    if let Err(error) = registry.register(Box::new(latency.clone())) {
        eprintln!("error: metrics: {error}");
        return ExitCode::from(1);
    }
    let client = match reqwest::Client::builder().timeout(args.timeout).build() {
        Ok(client) => client,
        Err(error) => {
            eprintln!("error: HTTP client: {error}");
            return ExitCode::from(1);
        }
    };
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    runtime.block_on(async move {
        let gathered = registry.clone();
        let render: Arc<dyn Fn() -> String + Send + Sync> = Arc::new(move || {
            let mut buffer = Vec::new();
            let _ = prometheus::TextEncoder::new().encode(&gathered.gather(), &mut buffer);
            String::from_utf8(buffer).unwrap_or_default()
        });
        let placement = Placement {
            name: &args.name,
            dc: &args.dc,
            host: &args.host,
            service: &args.service,
        };
        let group = match expose(render, &placement).await {
            Ok(group) => group,
            Err(code) => return code,
        };
        if let Some(path) = &args.targets_file {
            if let Err(code) = write_targets(path, vec![group]) {
                return code;
            }
        }
        for target in targets {
            let (client, latency, uri) = (client.clone(), latency.clone(), args.path.clone());
            let url = format!("http://{}{}", target.address, args.path);
            let period = Duration::from_secs_f64(1.0 / args.rate);
            tokio::spawn(async move {
                let mut ticker = tokio::time::interval(period);
                ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    ticker.tick().await;
                    let (client, latency, url, uri, name) = (
                        client.clone(),
                        latency.clone(),
                        url.clone(),
                        uri.clone(),
                        target.name.clone(),
                    );
                    tokio::spawn(async move {
                        let sent = Instant::now();
                        let result = client.get(&url).send().await;
                        let (outcome, status) = match &result {
                            Ok(response) => {
                                let code = response.status();
                                let outcome = match code.as_u16() {
                                    200..=299 => "SUCCESS",
                                    300..=399 => "REDIRECTION",
                                    400..=499 => "CLIENT_ERROR",
                                    _ => "SERVER_ERROR",
                                };
                                (outcome, code.as_u16().to_string())
                            }
                            Err(_) => ("UNKNOWN", "IO_ERROR".to_string()),
                        };
                        if let Ok(response) = result {
                            let _ = response.bytes().await;
                        }
                        latency
                            .with_label_values(&[name.as_str(), "GET", outcome, status.as_str(), uri.as_str()])
                            .observe(sent.elapsed().as_secs_f64());
                    });
                }
            });
        }
        until_stopped(args.run_for).await;
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rates whose interval between requests is not a usable duration are refused up front
    /// (3e9/s once panicked a worker while the command exited 0).
    #[test]
    fn rates_are_bounded() {
        assert_eq!(positive_rate("25"), Ok(25.0));
        assert_eq!(positive_rate("0.001"), Ok(0.001));
        assert_eq!(positive_rate("100000"), Ok(100_000.0));
        for bad in ["0", "-5", "3e9", "1e-300", "NaN", "inf", "abc"] {
            assert!(positive_rate(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn node_arguments_are_checked() {
        let node = parse_node("redis-1-1=127.0.0.1:7001").unwrap_or_else(|message| panic!("{message}"));
        assert_eq!(
            (node.name.as_str(), node.address.as_str()),
            ("redis-1-1", "127.0.0.1:7001")
        );
        for bad in [
            "redis-1-1",
            "=127.0.0.1:7001",
            "r=127.0.0.1",
            "r=127.0.0.1:99999",
            "r=:7001",
        ] {
            let message = parse_node(bad).err().unwrap_or_default();
            assert!(message.contains(bad), "{bad}: {message}");
        }
    }
}
