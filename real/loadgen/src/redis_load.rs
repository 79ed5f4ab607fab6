//! `epicenter-loadgen redis`: GET/SET traffic to real Redis nodes from N backend instances,
//! each with a bb8 pool per node and client-side consistent hashing, exporting Lettuce and
//! commons-pool2 metric names.

use std::collections::VecDeque;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus::{Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry};
use rand::Rng;
use redis::AsyncCommands;

use crate::{
    check_targets_file, expose, finish, parse_all, runtime, until_stopped, write_targets, Node, Placement, RedisArgs,
};

/// A pooled Redis connection; `broken` once a command failed on I/O, so bb8 discards it.
struct Connection {
    inner: redis::aio::MultiplexedConnection,
    broken: bool,
    /// The instance's refresh generation when the connection was opened: an older one is
    /// discarded when it goes back to the pool (`--refresh-on-error`).
    generation: u64,
}

/// bb8's view of one Redis node.
struct Manager {
    client: redis::Client,
    config: redis::AsyncConnectionConfig,
    /// The instance's refresh generation, shared by its pools.
    generation: Arc<AtomicU64>,
}

impl bb8::ManageConnection for Manager {
    type Connection = Connection;
    type Error = redis::RedisError;

    async fn connect(&self) -> Result<Connection, redis::RedisError> {
        let inner = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        Ok(Connection {
            inner,
            broken: false,
            generation: self.generation.load(Ordering::Relaxed),
        })
    }

    async fn is_valid(&self, connection: &mut Connection) -> Result<(), redis::RedisError> {
        redis::cmd("PING").query_async::<()>(&mut connection.inner).await
    }

    fn has_broken(&self, connection: &mut Connection) -> bool {
        connection.broken || connection.generation < self.generation.load(Ordering::Relaxed)
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
    /// `--refresh-on-error`: the generation every pooled connection is checked against, and
    /// when it last moved (ms since the instance started; at most once a second).
    refresh_on_error: bool,
    generation: Arc<AtomicU64>,
    refreshed_ms: AtomicI64,
    started: Instant,
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
            Err(bb8::RunError::User(error)) => {
                if classify(&error) == "connection" {
                    self.refresh();
                }
                return fail(classify(&error));
            }
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
                    self.refresh();
                }
                fail(kind);
            }
        }
    }
}

impl Instance {
    /// With `--refresh-on-error`, retires every pooled connection of the instance (at most
    /// once a second): each is closed when it next goes back to its pool and bb8 opens new
    /// ones up to `min_idle`.
    fn refresh(&self) {
        if !self.refresh_on_error {
            return;
        }
        let now_ms = self.started.elapsed().as_millis() as i64;
        let last = self.refreshed_ms.load(Ordering::Relaxed);
        if now_ms - last >= 1000
            && self
                .refreshed_ms
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.generation.fetch_add(1, Ordering::Relaxed);
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
        let generation = Arc::new(AtomicU64::new(0));
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
                .build_unchecked(Manager {
                    client,
                    config,
                    generation: generation.clone(),
                });
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
            refresh_on_error: args.refresh_on_error,
            generation,
            refreshed_ms: AtomicI64::new(-1000),
            started: Instant::now(),
        }));
    }
    Ok(instances)
}

/// Runs `epicenter-loadgen redis` until `--for` passes or Ctrl-C.
pub(crate) fn run(args: &RedisArgs) -> ExitCode {
    let nodes = match parse_all(&args.nodes, "--node").and_then(|nodes| {
        check_targets_file(args.targets_file.as_deref())?;
        Ok(nodes)
    }) {
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
        (args.max_in_flight < 1, "--max-in-flight must be at least 1"),
        (
            args.acquire_timeout.is_zero(),
            "--acquire-timeout must be greater than 0",
        ),
        (
            args.command_timeout.is_zero(),
            "--command-timeout must be greater than 0",
        ),
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
    let code = runtime.block_on(async move {
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
            "epicenter-loadgen redis: {} instances × {}/s over {} nodes; Ctrl-C stops",
            instances.len(),
            args.rate,
            nodes.len()
        );
        let progress = tokio::spawn(report(instances.clone()));
        until_stopped(args.run_for).await;
        progress.abort();
        ExitCode::SUCCESS
    });
    finish(runtime, code)
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
