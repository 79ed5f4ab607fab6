//! The fleet's physics, one simulated second per [`Fleet::step`].
//!
//! Load flows from the API tier to the JVM backend and from the backend to the Redis nodes it
//! shards over (client-side consistent hashing). Every quantity comes from rates and holding
//! times (Little's law), not from scripted curves:
//! - a backend instance's pool towards a Redis node holds a connection for the command's
//!   service time; offered concurrency = command rate × hold time. Below the pool size, the
//!   wait follows Sakasegawa's M/M/c approximation; above it, borrowers wait up to
//!   `maxWait` (0.5 s) and the excess fails;
//! - a dead node holds connections for the command timeout (1 s) and fails every command until
//!   the clients' topology refresh (8 s later) drops it from the ring; then every client
//!   rebuilds its pool towards every surviving node (a connection-creation storm proportional
//!   to clients × pool size) while the old connections idle until they are closed 30 s later;
//! - request latency = own work (× the JIT warm-up factor after a restart) + Redis time +
//!   pool wait; Jetty busy threads = request rate × latency; failed requests come back from
//!   mobile clients as retries (up to twice), multiplying load;
//! - a restarted JVM starts with counters at zero (a counter reset), a new
//!   `process_start_time_seconds`, slow code and long GC pauses that decay with the warm-up
//!   time constant;
//! - traffic follows a daily shape (±30 %, peak at 15:00) with per-instance noise.
//!
//! Randomness comes from one ChaCha8 generator seeded by the scenario, drawn in a fixed order,
//! so the same seed gives the same samples.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::scenario::{FaultKind, Scenario};
pub use crate::topology::{Instance, Service};

/// Commons-pool2 `maxWait`: how long a borrower waits for a connection, seconds.
const MAX_WAIT_SECONDS: f64 = 0.5;
/// Lettuce command timeout towards a dead node, seconds.
const COMMAND_TIMEOUT_SECONDS: f64 = 1.0;
/// Delay between a node's death (or return) and the clients' topology refresh, seconds.
const TOPOLOGY_REFRESH_SECONDS: u64 = 8;
/// Seconds a replaced pool's connections stay open (idle) before they are closed.
const OLD_POOL_CLOSE_SECONDS: u64 = 30;
/// Redis command service time on a healthy node, seconds.
const REDIS_SERVICE_SECONDS: f64 = 0.0004;
/// Network round trip inside the fleet, seconds.
const NETWORK_SECONDS: f64 = 0.0005;
/// Backend's own work per request on a warm JVM, seconds.
const BACKEND_WORK_SECONDS: f64 = 0.012;
/// HikariCP `connectionTimeout` as the backend sets it, seconds.
const DB_CONNECTION_TIMEOUT_SECONDS: f64 = 1.0;
/// Fraction of pooled connections the evictor replaces per second (baseline churn).
const EVICTION_PER_SECOND: f64 = 0.002;

/// Per backend instance, per Redis node: the client pool.
#[derive(Debug, Clone, Default)]
struct Pool {
    open: f64,
    old_idle: f64,
    old_close_at: u64,
    active: f64,
    waiters: f64,
    mean_wait: f64,
    max_wait: f64,
    created: f64,
    destroyed: f64,
    borrowed: f64,
    command_count: f64,
    command_sum: f64,
    command_max: f64,
}

/// State of a backend instance.
#[derive(Debug, Clone, Default)]
pub(crate) struct Backend {
    started_at: u64,
    warmup_seconds: f64,
    pools: Vec<Pool>,
    rate: f64,
    error_fraction: f64,
    latency: f64,
    sigma: f64,
    busy_threads: f64,
    queued_jobs: f64,
    ok_count: f64,
    error_count: f64,
    ok_sum: f64,
    error_sum: f64,
    ok_buckets: Vec<f64>,
    error_buckets: Vec<f64>,
    gc_count: f64,
    gc_sum: f64,
    gc_max: f64,
    db_pool: Pool,
    db_timeouts: f64,
    /// HikariCP usage: connections returned, seconds held in total, longest hold.
    db_usage: (f64, f64, f64),
}

impl Backend {
    /// How far from warm it is at simulated second `now`: 1 just after a cold restart,
    /// decaying as `exp(−age / warmup_seconds)`; 0 for an instance running since the start.
    fn warm(&self, now: u64) -> f64 {
        if self.started_at == 0 {
            return 0.0;
        }
        let age = now.saturating_sub(self.started_at) as f64;
        (-age / self.warmup_seconds).exp()
    }
}

/// State of an API instance.
#[derive(Debug, Clone, Default)]
pub(crate) struct Api {
    rate: f64,
    busy: f64,
    ok: f64,
    server_errors: f64,
    throttled: f64,
    latency_sum: f64,
    latency_count: f64,
    buckets: Vec<f64>,
    /// `latency_sum` and `buckets` split by answer, 200 and 503, for exporters that keep a
    /// histogram per status code (OpenTelemetry, a mesh's sidecar). Each accumulates its own
    /// share, so each only grows (a difference of two sums could dip by a rounding error).
    ok_latency_sum: f64,
    ok_buckets: Vec<f64>,
    error_latency_sum: f64,
    error_buckets: Vec<f64>,
    /// Fraction of last second's requests that failed or were throttled (what clients retry).
    failed_fraction: f64,
    /// Traffic factor of a retry storm in progress (1 = none).
    storm: f64,
}

/// State of a database.
#[derive(Debug, Clone, Default)]
pub(crate) struct Db {
    extra_latency: f64,
    active: f64,
    commits: f64,
}

/// State of a session gateway.
#[derive(Debug, Clone, Default)]
pub(crate) struct Gateway {
    sessions: f64,
    connects: f64,
    disconnects: f64,
    /// Sessions this gateway lost and whose clients have yet to reconnect.
    pending_reconnects: f64,
    /// Capacity factor (1 = normal; a scale-down lowers it).
    capacity: f64,
}

/// State of the voice-state service of a datacenter (its supervisor's mailbox).
#[derive(Debug, Clone, Default)]
pub(crate) struct Voice {
    queue: f64,
    processed: f64,
    starts: f64,
    rpc: Vec<f64>,
    heartbeat_wait: f64,
    registered: bool,
    reductions: f64,
}

/// State of a media server.
#[derive(Debug, Clone, Default)]
pub(crate) struct Media {
    rpc_received: f64,
    calls: f64,
}

/// State of a Redis node.
#[derive(Debug, Clone, Default)]
pub(crate) struct Redis {
    alive: bool,
    extra_latency: f64,
    started_at: u64,
    connected: f64,
    received: f64,
    commands: f64,
    command_seconds: f64,
}

/// Upper bounds of the backend's request-latency histogram, seconds (Micrometer-style
/// percentile histogram, 1 ms to 30 s).
pub const BACKEND_BUCKETS: [f64; 24] = [
    0.001, 0.002, 0.003, 0.005, 0.007, 0.01, 0.015, 0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5,
    2.0, 3.0, 5.0, 10.0, 30.0,
];

/// Upper bounds of the API's request-latency histogram (client_python's defaults), seconds.
pub const API_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

/// A simulated fleet at one instant.
pub struct Fleet {
    scenario: Scenario,
    instances: Vec<Instance>,
    api: Vec<(usize, Api)>,
    backend: Vec<(usize, Backend)>,
    redis: Vec<(usize, Redis)>,
    db: Vec<(usize, Db)>,
    gateway: Vec<(usize, Gateway)>,
    voice: Vec<(usize, Voice)>,
    media: Vec<(usize, Media)>,
    /// Degraded datacenters and links: (datacenter number, the other end's number for a link
    /// or `None` for the whole datacenter, extra seconds per call, fraction lost).
    degraded: Vec<(usize, Option<usize>, f64, f64)>,
    /// Starved hosts: host name → extra seconds per operation of every instance on it.
    starved: BTreeMap<String, f64>,
    /// Hosts short of memory: host name → extra seconds per operation (reclaim, swap).
    pressed: BTreeMap<String, f64>,
    /// Hosts losing packets: host name → (extra seconds per call, fraction of calls failed,
    /// fraction of packets lost).
    lossy: BTreeMap<String, (f64, f64, f64)>,
    /// Each host's node_exporter, with the fleet's `node_exporter` (instance index, state).
    nodes: Vec<(usize, crate::node::Node)>,
    /// Each host's kubelet, with the fleet's `cadvisor` (instance index, state).
    kubelets: Vec<(usize, crate::cadvisor::Kubelet)>,
    /// Containers under a `cpu_throttling` fault: instance index → CPU limit, cores.
    throttled: BTreeMap<usize, f64>,
    /// The day's traffic shape this second (1 at the mean).
    load: f64,
    /// Per instance (by index), its CPU demand over its service's at mean traffic, as of the
    /// last second ([`crate::cadvisor::Running::work`]); kept only with the fleet's `cadvisor`.
    work: Vec<f64>,
    /// Which nodes the clients' ring holds (their topology view).
    ring_view: Vec<bool>,
    shares: Vec<f64>,
    pending_refresh: Option<u64>,
    rng: ChaCha8Rng,
    /// Simulated seconds since the start.
    second: u64,
    /// Simulated time of the start, milliseconds since the epoch.
    start_ms: i64,
}

impl Fleet {
    /// Builds the fleet of `scenario`, its clock starting at `start_ms` (milliseconds since
    /// the epoch).
    pub fn new(scenario: &Scenario, start_ms: i64) -> Fleet {
        let shape = &scenario.fleet;
        let instances = shape.layout();
        let of = |service: Service| -> Vec<usize> {
            instances
                .iter()
                .enumerate()
                .filter(|(_, instance)| instance.service == service)
                .map(|(index, _)| index)
                .collect()
        };
        let redis_count = of(Service::Redis).len();
        let pool_size = shape.backend.redis_pool_size as f64;
        let backend = of(Service::Backend)
            .into_iter()
            .map(|index| {
                let pools = (0..redis_count)
                    .map(|_| Pool {
                        open: pool_size,
                        created: pool_size,
                        ..Pool::default()
                    })
                    .collect();
                (
                    index,
                    Backend {
                        pools,
                        warmup_seconds: 90.0,
                        started_at: 0,
                        ok_buckets: vec![0.0; BACKEND_BUCKETS.len()],
                        error_buckets: vec![0.0; BACKEND_BUCKETS.len()],
                        sigma: 0.5,
                        ..Backend::default()
                    },
                )
            })
            .collect::<Vec<_>>();
        let backends = backend.len() as f64;
        let redis = of(Service::Redis)
            .into_iter()
            .map(|index| {
                (
                    index,
                    Redis {
                        alive: true,
                        connected: backends * pool_size,
                        received: backends * pool_size,
                        ..Redis::default()
                    },
                )
            })
            .collect();
        let api = of(Service::Api)
            .into_iter()
            .map(|index| {
                (
                    index,
                    Api {
                        buckets: vec![0.0; API_BUCKETS.len()],
                        ok_buckets: vec![0.0; API_BUCKETS.len()],
                        error_buckets: vec![0.0; API_BUCKETS.len()],
                        storm: 1.0,
                        ..Api::default()
                    },
                )
            })
            .collect();
        let db = of(Service::Db)
            .into_iter()
            .map(|index| (index, Db::default()))
            .collect();
        let beam = &shape.beam;
        let per_gateway = beam.sessions_per_datacenter / beam.gateways_per_datacenter as f64;
        let gateway = of(Service::Gateway)
            .into_iter()
            .map(|index| {
                (
                    index,
                    Gateway {
                        sessions: per_gateway,
                        capacity: 1.0,
                        ..Gateway::default()
                    },
                )
            })
            .collect();
        let voice = of(Service::Voice)
            .into_iter()
            .map(|index| {
                (
                    index,
                    Voice {
                        registered: true,
                        rpc: vec![0.0; beam.media_per_datacenter],
                        ..Voice::default()
                    },
                )
            })
            .collect();
        let media = of(Service::Media)
            .into_iter()
            .map(|index| (index, Media::default()))
            .collect();
        let nodes = of(Service::Node)
            .into_iter()
            .enumerate()
            .map(|(number, index)| {
                (
                    index,
                    crate::node::Node::new(&instances[index].host, scenario.seed, number),
                )
            })
            .collect();
        let kubelets = of(Service::Kubelet)
            .into_iter()
            .enumerate()
            .map(|(number, index)| {
                let on_host: Vec<usize> = instances
                    .iter()
                    .enumerate()
                    .filter(|(_, other)| {
                        other.host == instances[index].host
                            && !matches!(other.service, Service::Node | Service::Kubelet)
                    })
                    .map(|(at, _)| at)
                    .collect();
                (index, crate::cadvisor::Kubelet::new(&on_host, scenario.seed, number))
            })
            .collect();
        let ring_view = vec![true; redis_count];
        let names: Vec<String> = of(Service::Redis)
            .into_iter()
            .map(|index| instances[index].name.clone())
            .collect();
        let shares = ring_shares(&names, &ring_view);
        Fleet {
            scenario: scenario.clone(),
            instances,
            api,
            backend,
            redis,
            db,
            gateway,
            voice,
            media,
            degraded: Vec::new(),
            starved: BTreeMap::new(),
            pressed: BTreeMap::new(),
            lossy: BTreeMap::new(),
            nodes,
            kubelets,
            throttled: BTreeMap::new(),
            load: 1.0,
            work: Vec::new(),
            ring_view,
            shares,
            pending_refresh: None,
            rng: ChaCha8Rng::seed_from_u64(scenario.seed),
            second: 0,
            start_ms,
        }
    }

    /// Every instance, API first, then backend, then Redis, each by datacenter and number.
    pub fn instances(&self) -> &[Instance] {
        &self.instances
    }

    /// Simulated seconds since the start.
    pub fn second(&self) -> u64 {
        self.second
    }

    /// Simulated time now, milliseconds since the epoch.
    pub fn now_ms(&self) -> i64 {
        self.start_ms + self.second as i64 * 1000
    }

    /// Names of the instances a fault selects (see [`crate::scenario::Selector`]).
    pub fn select(&self, fault: &crate::scenario::Fault) -> Vec<usize> {
        self.select_by(&fault.select, fault.kind.service())
    }

    /// Instances `selector` picks, `default_service` unless it names one (`network`: any).
    pub fn select_by(&self, selector: &crate::scenario::Selector, default_service: &str) -> Vec<usize> {
        selector.pick(&self.instances, default_service)
    }

    /// Advances the fleet by one simulated second.
    pub fn step(&mut self) {
        self.second += 1;
        let now = self.second;
        self.apply_faults(now);
        self.refresh_topology(now);

        let shape = self.scenario.fleet.clone();
        let hour = (self.scenario.start_hour + now as f64 / 3600.0) % 24.0;
        let daily = 1.0 + 0.3 * (std::f64::consts::TAU * (hour - 9.0) / 24.0).sin();
        self.load = daily;
        let fleet_rate = shape.api.requests_per_second * daily * (1.0 + 0.02 * self.normal());

        // Backend error fraction per datacenter from the previous second: what clients retry.
        let datacenters = shape.datacenters;
        let mut dc_error = vec![0.0f64; datacenters + 1];
        let mut dc_latency = vec![0.0f64; datacenters + 1];
        let mut dc_backends = vec![0.0f64; datacenters + 1];
        for (index, backend) in &self.backend {
            let dc = dc_number(&self.instances[*index].dc);
            dc_error[dc] += backend.error_fraction;
            dc_latency[dc] += backend.latency.max(BACKEND_WORK_SECONDS);
            dc_backends[dc] += 1.0;
        }
        let mut dc_offered = vec![0.0f64; datacenters + 1];
        let api_count = self.api.len() as f64;
        let retry = shape.api.retry_probability;
        for slot in 0..self.api.len() {
            let index = self.api[slot].0;
            let dc = dc_number(&self.instances[index].dc);
            let (edge_latency, edge_loss) = self.degradation(dc, dc);
            let (host_latency, host_loss) = self.host_link(index);
            let (edge_latency, edge_loss) = (edge_latency + host_latency, edge_loss + host_loss);
            let error = (dc_error[dc] / dc_backends[dc].max(1.0) + edge_loss).min(1.0);
            let latency = dc_latency[dc] / dc_backends[dc].max(1.0) + 0.002 + edge_latency + self.steal(index);
            let noise = 1.0 + 0.03 * self.normal();
            let base = fleet_rate / api_count * noise;
            let storm = self.api[slot].1.storm;
            let failed_before = self.api[slot].1.failed_fraction;
            // Mobile clients retry failed requests up to twice; during a retry storm they
            // retry everything, throttling included, up to five times without backoff.
            let offered = if storm > 1.0 {
                let f = failed_before.clamp(0.0, 0.95);
                base * storm * (0..=5).map(|k| f.powi(k)).sum::<f64>()
            } else {
                base * (1.0 + retry * error + (retry * error).powi(2))
            };
            let workers = shape.api.workers as f64;
            let busy = offered * latency;
            let throttled = if busy > workers {
                offered * (1.0 - workers / busy)
            } else {
                0.0
            };
            let passed = offered - throttled;
            let api = &mut self.api[slot].1;
            api.failed_fraction = if offered > 0.0 {
                (throttled + passed * error) / offered
            } else {
                0.0
            };
            api.rate = offered;
            api.busy = busy.min(workers);
            api.ok += passed * (1.0 - error);
            api.server_errors += passed * error;
            api.throttled += throttled;
            api.latency_sum += passed * latency;
            api.latency_count += passed;
            api.ok_latency_sum += passed * (1.0 - error) * latency;
            api.error_latency_sum += passed * error * latency;
            for (((bucket, ok_bucket), error_bucket), bound) in api
                .buckets
                .iter_mut()
                .zip(&mut api.ok_buckets)
                .zip(&mut api.error_buckets)
                .zip(API_BUCKETS)
            {
                let below = passed * lognormal_cdf(bound, latency * 0.85, 0.45);
                *bucket += below;
                *ok_bucket += below * (1.0 - error);
                *error_bucket += below * error;
            }
            dc_offered[dc] += passed;
        }

        let commands = shape.backend.redis_commands_per_request;
        let pool_size = shape.backend.redis_pool_size as f64;
        let threads = shape.backend.threads as f64;
        let redis_state: Vec<(bool, f64)> = self
            .redis
            .iter()
            .map(|(index, redis)| (redis.alive, redis.extra_latency + self.steal(*index)))
            .collect();
        let mut node_commands = vec![0.0; self.redis.len()];
        let mut node_created = vec![0.0; self.redis.len()];
        let mut node_connected = vec![0.0; self.redis.len()];
        let node_dcs: Vec<usize> = self
            .redis
            .iter()
            .map(|(index, _)| dc_number(&self.instances[*index].dc))
            .collect();
        let db_by_dc: Vec<(usize, f64)> = self
            .db
            .iter()
            .map(|(index, db)| {
                (
                    dc_number(&self.instances[*index].dc),
                    db.extra_latency + self.steal(*index),
                )
            })
            .collect();
        let mut db_active = vec![0.0; self.db.len()];
        let mut db_commits = vec![0.0; self.db.len()];
        for slot in 0..self.backend.len() {
            let index = self.backend[slot].0;
            let dc = dc_number(&self.instances[index].dc);
            // Calls cross the network: a datacenter's or link's degradation, and packet loss at
            // the host of either end.
            let own_link = self.host_link(index);
            let edges: Vec<(f64, f64)> = node_dcs
                .iter()
                .zip(&self.redis)
                .map(|(&node_dc, (node, _))| {
                    let (latency, loss) = self.degradation(dc, node_dc);
                    let node_link = self.host_link(*node);
                    (latency + own_link.0 + node_link.0, loss + own_link.1 + node_link.1)
                })
                .collect();
            let (db_edge_latency, db_edge_loss) = self.degradation(dc, dc);
            let db_link = self
                .db
                .iter()
                .find(|(at, _)| dc_number(&self.instances[*at].dc) == dc)
                .map_or((0.0, 0.0), |(at, _)| self.host_link(*at));
            let (db_edge_latency, db_edge_loss) = (
                db_edge_latency + own_link.0 + db_link.0,
                db_edge_loss + own_link.1 + db_link.1,
            );
            let steal = self.steal(index);
            let noise = 1.0 + 0.03 * self.normal();
            let gc_draw = self.rng.random::<f64>();
            let rate = dc_offered[dc] / dc_backends[dc].max(1.0) * noise;
            let backend = &mut self.backend[slot].1;
            let warm = backend.warm(now);
            let mut fail_share = 0.0;
            let mut redis_time = 0.0;
            for (node, pool) in backend.pools.iter_mut().enumerate() {
                let share = self.shares[node];
                let (alive, extra) = redis_state[node];
                // Baseline churn: the evictor replaces a few idle connections.
                let churn = pool.open * EVICTION_PER_SECOND;
                pool.created += churn;
                pool.destroyed += churn;
                node_created[node] += churn;
                if pool.old_idle > 0.0 && now >= pool.old_close_at {
                    pool.destroyed += pool.old_idle;
                    pool.old_idle = 0.0;
                }
                node_connected[node] += if alive { pool.open + pool.old_idle } else { 0.0 };
                let rate_node = rate * commands * share;
                if rate_node <= 0.0 {
                    pool.active = 0.0;
                    pool.waiters = 0.0;
                    continue;
                }
                let (edge_latency, edge_loss) = edges[node];
                let hold = if alive {
                    REDIS_SERVICE_SECONDS + extra + NETWORK_SECONDS + edge_latency
                } else {
                    COMMAND_TIMEOUT_SECONDS
                };
                let (wait, borrow_fail) = pool_wait(rate_node * hold, pool_size, hold, MAX_WAIT_SECONDS);
                let served = rate_node * (1.0 - borrow_fail);
                pool.active = (served * hold).min(pool_size);
                pool.waiters = (rate_node * wait).min(threads);
                pool.mean_wait = wait;
                pool.max_wait = (wait * 2.0).min(MAX_WAIT_SECONDS);
                pool.borrowed += served;
                pool.command_count += served;
                pool.command_sum += served * hold;
                pool.command_max = hold * 1.5;
                if alive {
                    node_commands[node] += served;
                }
                let fail = if alive { (borrow_fail + edge_loss).min(1.0) } else { 1.0 };
                fail_share += share * fail;
                redis_time += share * (hold + wait);
            }
            // HikariCP towards the datacenter's database: the same pool arithmetic.
            let db_slot = db_by_dc.iter().position(|(db_dc, _)| *db_dc == dc);
            let db_extra = db_slot.map_or(0.0, |at| db_by_dc[at].1);
            let queries = rate * shape.db.queries_per_request;
            let query_hold = shape.db.query_seconds + db_extra + db_edge_latency;
            let db_pool_size = shape.backend.db_pool_size as f64;
            let (db_wait, db_fail) = pool_wait(
                queries * query_hold,
                db_pool_size,
                query_hold,
                DB_CONNECTION_TIMEOUT_SECONDS,
            );
            let db_served = queries * (1.0 - db_fail);
            let pool = &mut backend.db_pool;
            pool.active = (db_served * query_hold).min(db_pool_size);
            pool.waiters = (queries * db_wait).min(threads);
            pool.mean_wait = db_wait;
            pool.max_wait = (db_wait * 2.0).min(DB_CONNECTION_TIMEOUT_SECONDS);
            pool.command_count += queries;
            pool.command_sum += queries * db_wait;
            pool.borrowed += db_served;
            backend.db_timeouts += queries * db_fail;
            backend.db_usage.0 += db_served;
            backend.db_usage.1 += db_served * query_hold;
            backend.db_usage.2 = query_hold * 1.5;
            if let Some(at) = db_slot {
                db_active[at] += pool.active;
                db_commits[at] += db_served;
            }
            let db_fail_share = (db_fail + db_edge_loss).min(1.0);
            let error = 1.0 - (-commands * fail_share - shape.db.queries_per_request * db_fail_share).exp();
            let work = BACKEND_WORK_SECONDS * (1.0 + 12.0 * warm) + steal;
            let latency = work + commands * redis_time + shape.db.queries_per_request * (query_hold + db_wait) + 0.001;
            let concurrency = rate * latency;
            let rejected = if concurrency > threads {
                1.0 - threads / concurrency
            } else {
                0.0
            };
            let error = (error + rejected).min(1.0);
            backend.rate = rate;
            backend.error_fraction = error;
            backend.latency = latency;
            backend.sigma = 0.5 + 0.3 * warm;
            backend.busy_threads = concurrency.min(threads);
            backend.queued_jobs = (concurrency - threads).max(0.0);
            let ok = rate * (1.0 - error);
            let failed = rate * error;
            let median_ok = latency * 0.8;
            backend.ok_count += ok;
            backend.ok_sum += ok * latency;
            backend.error_count += failed;
            backend.error_sum += failed * latency.max(COMMAND_TIMEOUT_SECONDS.min(MAX_WAIT_SECONDS));
            let sigma = backend.sigma;
            for (bucket, bound) in backend.ok_buckets.iter_mut().zip(BACKEND_BUCKETS) {
                *bucket += ok * lognormal_cdf(bound, median_ok, sigma);
            }
            for (bucket, bound) in backend.error_buckets.iter_mut().zip(BACKEND_BUCKETS) {
                *bucket += failed * lognormal_cdf(bound, MAX_WAIT_SECONDS, 0.3);
            }
            // GC: pauses of ~0.2 s a few times a minute; up to ~1 s while the JVM warms up.
            let pause_rate = 0.1 * (1.0 + 2.0 * warm);
            let pause = 0.2 * (1.0 + 4.0 * warm) * (0.8 + 0.4 * gc_draw);
            backend.gc_count += pause_rate;
            backend.gc_sum += pause_rate * pause;
            backend.gc_max = pause * 1.5;
        }
        for (at, (_, db)) in self.db.iter_mut().enumerate() {
            db.active = db_active[at];
            db.commits += db_commits[at];
        }
        self.step_beam(daily);
        let stalled_disks: Vec<String> = self
            .db
            .iter()
            .filter(|(_, db)| db.extra_latency > 0.0)
            .map(|(index, _)| self.instances[*index].host.clone())
            .collect();
        for (index, node) in &mut self.nodes {
            let host = &self.instances[*index].host;
            let trouble = crate::node::HostTrouble {
                steal_seconds: self.starved.get(host).copied().unwrap_or(0.0),
                memory_seconds: self.pressed.get(host).copied().unwrap_or(0.0),
                packet_loss: self.lossy.get(host).map_or(0.0, |(_, _, lost)| *lost),
                disk_stalled: stalled_disks.contains(host),
            };
            node.step(daily, trouble);
        }
        if !self.kubelets.is_empty() {
            self.note_work(daily);
            let mut kubelets = std::mem::take(&mut self.kubelets);
            for (_, kubelet) in &mut kubelets {
                kubelet.step(&self.instances, |index| self.running(index));
            }
            self.kubelets = kubelets;
        }
        for (node, (_, redis)) in self.redis.iter_mut().enumerate() {
            redis.received += node_created[node];
            if redis.alive {
                redis.connected = node_connected[node];
                redis.commands += node_commands[node];
                redis.command_seconds += node_commands[node] * (REDIS_SERVICE_SECONDS + redis.extra_latency);
            } else {
                redis.connected = 0.0;
            }
        }
    }

    /// One second of the session path, per datacenter: session starts (churn plus clients
    /// reconnecting after a loss, 10 % of those waiting per second) put
    /// `messages_per_start` messages each in the voice-state supervisor's mailbox; the
    /// supervisor serves one message in `message_seconds + scan_seconds_per_queued × queue`
    /// (selective receive), so past the point where arrivals exceed that rate the mailbox
    /// runs away. Each served start makes one RPC to a media server; the discovery heartbeat
    /// waits its turn in the mailbox and the registration expires past the TTL.
    fn step_beam(&mut self, daily: f64) {
        let beam = self.scenario.fleet.beam.clone();
        let datacenters = self.scenario.fleet.datacenters;
        let per_gateway = beam.sessions_per_datacenter * daily / beam.gateways_per_datacenter as f64;
        let mut starts = vec![0.0f64; datacenters + 1];
        for slot in 0..self.gateway.len() {
            let index = self.gateway[slot].0;
            let dc = dc_number(&self.instances[index].dc);
            let noise = 1.0 + 0.03 * self.normal();
            let gateway = &mut self.gateway[slot].1;
            let churn = gateway.sessions * beam.starts_per_session_per_second * noise;
            let reconnecting = gateway.pending_reconnects * 0.1;
            gateway.pending_reconnects -= reconnecting;
            // Sessions drift towards the daily level; reconnects land on this gateway's peers
            // in the datacenter as much as on itself.
            gateway.sessions += (per_gateway * gateway.capacity - gateway.sessions) * 0.01;
            gateway.connects += churn;
            gateway.disconnects += churn;
            starts[dc] += churn + reconnecting;
        }
        // Reconnecting sessions come back through the datacenter's gateways at full capacity.
        for (_, gateway) in &mut self.gateway {
            if gateway.capacity >= 1.0 {
                gateway.sessions = gateway.sessions.max(0.0);
            }
        }
        let media_count = beam.media_per_datacenter;
        let mut media_rpc = vec![0.0f64; self.media.len()];
        for slot in 0..self.voice.len() {
            let index = self.voice[slot].0;
            let dc = dc_number(&self.instances[index].dc);
            let voice = &mut self.voice[slot].1;
            let arrivals = starts[dc] * beam.messages_per_start + 1.0;
            // Serve messages one by one within the second, each costing more while the
            // mailbox is long (integrated in 10 slices).
            let mut budget = 1.0;
            let mut served = 0.0;
            let mut queue = voice.queue + arrivals;
            for _ in 0..10 {
                let per_message = beam.message_seconds + beam.scan_seconds_per_queued * queue;
                let slice = (budget / 10.0_f64.max(1.0)).min(budget);
                let can = (slice / per_message).min(queue);
                served += can;
                queue -= can;
                budget -= slice;
            }
            let _ = budget;
            voice.queue = queue;
            voice.processed += served;
            let started = served / beam.messages_per_start;
            voice.starts += started;
            voice.reductions += served * 2_000.0 + 50_000.0;
            let per_message = beam.message_seconds + beam.scan_seconds_per_queued * queue;
            voice.heartbeat_wait = queue * per_message;
            voice.registered = voice.heartbeat_wait <= beam.registration_ttl_seconds;
            for (peer, rpc) in voice.rpc.iter_mut().enumerate() {
                *rpc += started / media_count as f64;
                let media_slot = (dc - 1) * media_count + peer;
                if let Some(total) = media_rpc.get_mut(media_slot) {
                    *total += started / media_count as f64;
                }
            }
        }
        for (slot, (_, media)) in self.media.iter_mut().enumerate() {
            media.rpc_received += media_rpc[slot];
            // Calls last about two minutes: the active count follows the RPC rate.
            media.calls += (media_rpc[slot] * 120.0 - media.calls) * 0.05;
        }
    }

    /// Extra seconds and loss fraction on a call from datacenter `from` to `to` while a
    /// datacenter degradation touches either end, or a link degradation joins the two.
    fn degradation(&self, from: usize, to: usize) -> (f64, f64) {
        self.degraded
            .iter()
            .filter(|(dc, peer, _, _)| match peer {
                None => *dc == from || *dc == to,
                Some(peer) => (*dc == from && *peer == to) || (*dc == to && *peer == from),
            })
            .fold((0.0, 0.0), |(latency, loss), (_, _, extra, lost)| {
                (latency + extra, (loss + lost).min(1.0))
            })
    }

    /// Extra seconds and fraction failed of each call into or out of the instance at `index`:
    /// its host's packet loss.
    fn host_link(&self, index: usize) -> (f64, f64) {
        self.lossy
            .get(&self.instances[index].host)
            .map_or((0.0, 0.0), |(latency, failed, _)| (*latency, *failed))
    }

    /// Extra seconds per operation of the instance at `index`: its host's CPU steal and
    /// memory pressure, and, in a fleet with `cadvisor` (containers with CPU limits), its
    /// container's CFS throttling.
    fn steal(&self, index: usize) -> f64 {
        let host = &self.instances[index].host;
        let throttling = if self.kubelets.is_empty() {
            0.0
        } else {
            let service = self.instances[index].service;
            let limit = crate::cadvisor::Kubelet::limit(service, self.throttled.get(&index).copied());
            crate::cadvisor::Kubelet::extra_seconds(service, self.work_of(index), limit)
        };
        self.starved.get(host).copied().unwrap_or(0.0) + self.pressed.get(host).copied().unwrap_or(0.0) + throttling
    }

    /// The instance at `index`'s CPU demand over its service's at mean traffic, as of the last
    /// second ([`Fleet::note_work`]); the day's shape before the first.
    fn work_of(&self, index: usize) -> f64 {
        self.work.get(index).copied().unwrap_or(self.load)
    }

    /// Notes every instance's work this second: the day's shape `daily`, and for API and
    /// backend instances their own traffic against their share of the fleet's mean (a retry
    /// storm's API instances, and the backends it reaches, work harder), three times that for
    /// a backend that has just started cold (its JIT), decaying with its warm-up.
    fn note_work(&mut self, daily: f64) {
        let shape = &self.scenario.fleet;
        let mut work = vec![daily; self.instances.len()];
        let per_api = shape.api.requests_per_second / self.api.len().max(1) as f64;
        for (index, api) in &self.api {
            work[*index] = api.rate / per_api.max(f64::MIN_POSITIVE);
        }
        let per_backend = shape.api.requests_per_second / self.backend.len().max(1) as f64;
        for (index, backend) in &self.backend {
            let warm = backend.warm(self.second);
            work[*index] = backend.rate / per_backend.max(f64::MIN_POSITIVE) * (1.0 + 2.0 * warm);
        }
        self.work = work;
    }

    /// What the kubelet sees of the instance at `index`'s container this second.
    pub(crate) fn running(&self, index: usize) -> crate::cadvisor::Running {
        let started_at = match self.instance_state(index) {
            State::Backend(backend) => Some(backend.started_at),
            State::Redis(redis) => redis.alive.then_some(redis.started_at),
            _ => Some(0),
        };
        crate::cadvisor::Running {
            work: self.work_of(index),
            limit_cores: self.throttled.get(&index).copied(),
            started_at,
        }
    }

    fn normal(&mut self) -> f64 {
        // Box–Muller from two uniforms: exact and stable across rand versions.
        let u1: f64 = self.rng.random::<f64>().max(f64::MIN_POSITIVE);
        let u2: f64 = self.rng.random::<f64>();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Starts and ends faults whose time has come.
    fn apply_faults(&mut self, now: u64) {
        let faults = self.scenario.faults.clone();
        for fault in &faults {
            let start = fault.at.0.as_secs().max(1);
            let end = fault.duration.map(|duration| start + duration.0.as_secs());
            let starting = now == start;
            let ending = end == Some(now);
            if !starting && !ending {
                continue;
            }
            if matches!(fault.kind, FaultKind::DcDegradation | FaultKind::LinkDegradation) {
                let dc = fault.select.dc.as_deref().map_or(0, dc_number);
                let peer = fault.peer_dc.as_deref().map(dc_number);
                if starting {
                    self.degraded.push((
                        dc,
                        peer,
                        fault.latency_seconds.unwrap_or(0.03),
                        fault.loss.unwrap_or(0.02),
                    ));
                } else {
                    self.degraded
                        .retain(|(degraded, other, _, _)| (*degraded, *other) != (dc, peer));
                }
                continue;
            }
            if fault.kind == FaultKind::HostPacketLoss {
                if let Some(host) = &fault.select.host {
                    if starting {
                        let lost = fault.loss.unwrap_or(0.02);
                        let latency = fault.latency_seconds.unwrap_or(3.0 * lost * 0.2);
                        self.lossy.insert(host.clone(), (latency, lost / 4.0, lost));
                    } else {
                        self.lossy.remove(host);
                    }
                }
                continue;
            }
            if matches!(fault.kind, FaultKind::HostSaturation | FaultKind::HostMemoryPressure) {
                let (hosts, default) = if fault.kind == FaultKind::HostSaturation {
                    (&mut self.starved, 0.02)
                } else {
                    (&mut self.pressed, 0.01)
                };
                if let Some(host) = &fault.select.host {
                    if starting {
                        hosts.insert(host.clone(), fault.latency_seconds.unwrap_or(default));
                    } else {
                        hosts.remove(host);
                    }
                }
                continue;
            }
            for index in self.select(fault) {
                match fault.kind {
                    FaultKind::DcDegradation
                    | FaultKind::LinkDegradation
                    | FaultKind::HostSaturation
                    | FaultKind::HostMemoryPressure
                    | FaultKind::HostPacketLoss => {}
                    FaultKind::CpuThrottling => {
                        if starting {
                            let factor = fault.factor.unwrap_or(2.0).max(1.0);
                            let limit = crate::cadvisor::base_cores(self.instances[index].service) / factor;
                            self.throttled.insert(index, limit);
                        } else {
                            self.throttled.remove(&index);
                        }
                    }
                    FaultKind::SessionLoss => {
                        if !starting {
                            continue;
                        }
                        let fraction = fault.fraction.unwrap_or(0.17);
                        let selected = self.select(fault).len().max(1) as f64;
                        let dc_sessions = self.scenario.fleet.beam.sessions_per_datacenter;
                        if let Some((_, gateway)) = self.gateway.iter_mut().find(|(at, _)| *at == index) {
                            // The selected gateways together drop `fraction` of the datacenter's
                            // sessions; their clients reconnect.
                            let lost = (dc_sessions * fraction / selected).min(gateway.sessions);
                            gateway.sessions -= lost;
                            gateway.disconnects += lost;
                            gateway.pending_reconnects += lost;
                            gateway.capacity = (gateway.sessions
                                / (dc_sessions / self.scenario.fleet.beam.gateways_per_datacenter as f64))
                                .min(1.0);
                        }
                    }
                    FaultKind::SlowDatabase => {
                        if let Some((_, db)) = self.db.iter_mut().find(|(at, _)| *at == index) {
                            db.extra_latency = if starting {
                                fault.latency_seconds.unwrap_or(0.5)
                            } else {
                                0.0
                            };
                        }
                    }
                    FaultKind::RetryStorm => {
                        if let Some((_, api)) = self.api.iter_mut().find(|(at, _)| *at == index) {
                            api.storm = if starting {
                                fault.factor.unwrap_or(4.0).max(1.0)
                            } else {
                                1.0
                            };
                        }
                    }
                    FaultKind::NodeLoss => {
                        if let Some((_, redis)) = self.redis.iter_mut().find(|(at, _)| *at == index) {
                            redis.alive = ending;
                            if ending {
                                redis.started_at = now;
                                redis.connected = 0.0;
                            }
                            self.pending_refresh = Some(now + TOPOLOGY_REFRESH_SECONDS);
                        }
                    }
                    FaultKind::SlowNode => {
                        if let Some((_, redis)) = self.redis.iter_mut().find(|(at, _)| *at == index) {
                            redis.extra_latency = if starting {
                                fault.latency_seconds.unwrap_or(0.05)
                            } else {
                                0.0
                            };
                        }
                    }
                    FaultKind::ColdStart => {
                        if !starting {
                            continue;
                        }
                        self.restart_backend(index, now, fault.warmup_seconds.unwrap_or(90.0));
                    }
                }
            }
        }
        self.apply_operations(now);
    }

    /// Rolling deploys whose time has come: each selected backend instance restarts in turn,
    /// `stagger` apart, warming up over `warmup_seconds` (short: pre-warmed).
    fn apply_operations(&mut self, now: u64) {
        let operations = self.scenario.operations.clone();
        for operation in &operations {
            let start = operation.at.0.as_secs().max(1);
            let stagger = operation.stagger.map_or(30, |stagger| stagger.0.as_secs().max(1));
            let selected = self.select_by(&operation.select, "backend");
            for (turn, index) in selected.into_iter().enumerate() {
                if now == start + turn as u64 * stagger {
                    self.restart_backend(index, now, operation.warmup_seconds.unwrap_or(5.0));
                }
            }
        }
    }

    /// Restarts backend instance `index` at `now`: counters from zero (a counter reset), a new
    /// start time, new pools towards every live Redis node, and code that warms up with time
    /// constant `warmup` seconds.
    fn restart_backend(&mut self, index: usize, now: u64, warmup: f64) {
        let pool_size = self.scenario.fleet.backend.redis_pool_size as f64;
        let alive: Vec<bool> = self.redis.iter().map(|(_, redis)| redis.alive).collect();
        let Some((_, backend)) = self.backend.iter_mut().find(|(at, _)| *at == index) else {
            return;
        };
        *backend = Backend {
            started_at: now,
            warmup_seconds: warmup,
            ok_buckets: vec![0.0; BACKEND_BUCKETS.len()],
            error_buckets: vec![0.0; BACKEND_BUCKETS.len()],
            sigma: 0.8,
            pools: alive
                .iter()
                .map(|&up| Pool {
                    open: if up { pool_size } else { 0.0 },
                    created: if up { pool_size } else { 0.0 },
                    ..Pool::default()
                })
                .collect(),
            ..Backend::default()
        };
        for ((_, redis), up) in self.redis.iter_mut().zip(alive) {
            if up {
                redis.received += pool_size;
            }
        }
    }

    /// The clients' topology refresh: the ring follows the live nodes, and every client
    /// rebuilds its pools towards every node in the new ring.
    fn refresh_topology(&mut self, now: u64) {
        if self.pending_refresh != Some(now) {
            return;
        }
        self.pending_refresh = None;
        self.ring_view = self.redis.iter().map(|(_, redis)| redis.alive).collect();
        let names: Vec<String> = self
            .redis
            .iter()
            .map(|(index, _)| self.instances[*index].name.clone())
            .collect();
        self.shares = ring_shares(&names, &self.ring_view);
        let pool_size = self.scenario.fleet.backend.redis_pool_size as f64;
        for (_, backend) in &mut self.backend {
            for (node, pool) in backend.pools.iter_mut().enumerate() {
                let (_, redis) = &mut self.redis[node];
                if !self.ring_view[node] {
                    pool.destroyed += pool.open + pool.old_idle;
                    pool.open = 0.0;
                    pool.old_idle = 0.0;
                    continue;
                }
                pool.old_idle += pool.open;
                pool.old_close_at = now + OLD_POOL_CLOSE_SECONDS;
                pool.open = pool_size;
                pool.created += pool_size;
                redis.received += pool_size;
            }
        }
    }

    pub(crate) fn instance_state(&self, index: usize) -> State<'_> {
        if let Some((_, api)) = self.api.iter().find(|(at, _)| *at == index) {
            return State::Api(api);
        }
        if let Some((_, backend)) = self.backend.iter().find(|(at, _)| *at == index) {
            return State::Backend(backend);
        }
        if let Some((_, db)) = self.db.iter().find(|(at, _)| *at == index) {
            return State::Db(db);
        }
        if let Some((_, gateway)) = self.gateway.iter().find(|(at, _)| *at == index) {
            return State::Gateway(gateway);
        }
        if let Some((_, voice)) = self.voice.iter().find(|(at, _)| *at == index) {
            return State::Voice(voice);
        }
        if let Some((_, media)) = self.media.iter().find(|(at, _)| *at == index) {
            return State::Media(media);
        }
        if let Some((_, node)) = self.nodes.iter().find(|(at, _)| *at == index) {
            return State::Node(node);
        }
        if let Some((_, kubelet)) = self.kubelets.iter().find(|(at, _)| *at == index) {
            return State::Kubelet(kubelet);
        }
        match self.redis.iter().find(|(at, _)| *at == index) {
            Some((_, redis)) => State::Redis(redis),
            None => State::Missing,
        }
    }

    pub(crate) fn redis_names(&self) -> Vec<&str> {
        self.redis
            .iter()
            .map(|(index, _)| self.instances[*index].name.as_str())
            .collect()
    }

    pub(crate) fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    pub(crate) fn start_ms(&self) -> i64 {
        self.start_ms
    }

    /// New connections per second the Redis nodes received in total over the last second,
    /// and the backend's fleet-wide error fraction: the demo's live timeline.
    pub fn headline(&self) -> Headline {
        let backends = self.backend.len().max(1) as f64;
        Headline {
            redis_connections_received: self.redis.iter().map(|(_, redis)| redis.received).sum(),
            backend_error_fraction: self.backend.iter().map(|(_, b)| b.error_fraction).sum::<f64>() / backends,
            backend_latency_seconds: self.backend.iter().map(|(_, b)| b.latency).sum::<f64>() / backends,
            pool_waiters: self
                .backend
                .iter()
                .flat_map(|(_, b)| b.pools.iter().map(|pool| pool.waiters))
                .sum(),
            api_requests_per_second: self.api.iter().map(|(_, api)| api.rate).sum(),
            longest_mailbox: self.voice.iter().map(|(_, voice)| voice.queue).fold(0.0, f64::max),
            db_pending: self.backend.iter().map(|(_, backend)| backend.db_pool.waiters).sum(),
        }
    }
}

/// Fleet-wide figures for a live timeline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Headline {
    /// Connections the Redis nodes have accepted since the start (a counter).
    pub redis_connections_received: f64,
    /// Mean fraction of backend requests failing, 0..1.
    pub backend_error_fraction: f64,
    /// Mean backend request latency, seconds.
    pub backend_latency_seconds: f64,
    /// Threads waiting for a Redis connection, fleet-wide.
    pub pool_waiters: f64,
    /// Requests per second the API tier takes, retries included.
    pub api_requests_per_second: f64,
    /// Longest voice-state supervisor mailbox, messages.
    pub longest_mailbox: f64,
    /// Threads waiting for a database connection, fleet-wide.
    pub db_pending: f64,
}

/// What the exporters (`expose`) read of an instance.
pub(crate) enum State<'a> {
    Api(&'a Api),
    Backend(&'a Backend),
    Redis(&'a Redis),
    Db(&'a Db),
    Gateway(&'a Gateway),
    Voice(&'a Voice),
    Media(&'a Media),
    Node(&'a crate::node::Node),
    Kubelet(&'a crate::cadvisor::Kubelet),
    Missing,
}

/// Fields the exposition reads; kept here so the physics owns its state.
impl Api {
    /// Requests by status code as an exporter with a histogram per code sees them: (code,
    /// requests, seconds in total, cumulative counts over [`API_BUCKETS`]). 200 and 503 share
    /// the instance's latency; a 429 is refused at once (counted in the lowest bucket, 1 ms).
    pub(crate) fn by_status(&self) -> [crate::instrument::ByStatus<'_>; 3] {
        [
            ("200", self.ok, self.ok_latency_sum, self.ok_buckets.as_slice().into()),
            (
                "429",
                self.throttled,
                self.throttled * 0.001,
                vec![self.throttled; API_BUCKETS.len()].into(),
            ),
            (
                "503",
                self.server_errors,
                self.error_latency_sum,
                self.error_buckets.as_slice().into(),
            ),
        ]
    }

    pub(crate) fn figures(&self) -> (f64, f64, f64, f64, f64, f64, &[f64]) {
        (
            self.busy,
            self.ok,
            self.server_errors,
            self.throttled,
            self.latency_sum,
            self.latency_count,
            &self.buckets,
        )
    }
}

/// Read access for the exposition.
pub(crate) struct BackendView<'a> {
    pub(crate) started_at: u64,
    pub(crate) busy_threads: f64,
    pub(crate) queued_jobs: f64,
    pub(crate) ok: (f64, f64, &'a [f64]),
    pub(crate) errors: (f64, f64, &'a [f64]),
    pub(crate) gc: (f64, f64, f64),
    pub(crate) db_pool: PoolView,
    pub(crate) db_timeouts: f64,
    pub(crate) db_usage: (f64, f64, f64),
    pub(crate) pools: Vec<PoolView>,
}

/// One pool, for the exposition.
pub(crate) struct PoolView {
    pub(crate) open: f64,
    pub(crate) active: f64,
    pub(crate) waiters: f64,
    pub(crate) mean_wait: f64,
    pub(crate) max_wait: f64,
    pub(crate) created: f64,
    pub(crate) destroyed: f64,
    pub(crate) borrowed: f64,
    pub(crate) commands: (f64, f64, f64),
}

impl Backend {
    pub(crate) fn view(&self) -> BackendView<'_> {
        BackendView {
            started_at: self.started_at,
            busy_threads: self.busy_threads,
            queued_jobs: self.queued_jobs,
            ok: (self.ok_count, self.ok_sum, &self.ok_buckets),
            errors: (self.error_count, self.error_sum, &self.error_buckets),
            gc: (self.gc_count, self.gc_sum, self.gc_max),
            db_pool: PoolView::of(&self.db_pool),
            db_timeouts: self.db_timeouts,
            db_usage: self.db_usage,
            pools: self.pools.iter().map(PoolView::of).collect(),
        }
    }
}

impl PoolView {
    fn of(pool: &Pool) -> PoolView {
        PoolView {
            open: pool.open + pool.old_idle,
            active: pool.active,
            waiters: pool.waiters,
            mean_wait: pool.mean_wait,
            max_wait: pool.max_wait,
            created: pool.created,
            destroyed: pool.destroyed,
            borrowed: pool.borrowed,
            commands: (pool.command_count, pool.command_sum, pool.command_max),
        }
    }
}

impl Gateway {
    /// Sessions held, connects and disconnects (counters).
    pub(crate) fn figures(&self) -> (f64, f64, f64) {
        (self.sessions, self.connects, self.disconnects)
    }
}

/// Read access for the exposition.
pub(crate) struct VoiceView<'a> {
    pub(crate) queue: f64,
    pub(crate) processed: f64,
    pub(crate) starts: f64,
    pub(crate) rpc: &'a [f64],
    pub(crate) registered: bool,
    pub(crate) heartbeat_wait: f64,
    pub(crate) reductions: f64,
}

impl Voice {
    pub(crate) fn view(&self) -> VoiceView<'_> {
        VoiceView {
            queue: self.queue,
            processed: self.processed,
            starts: self.starts,
            rpc: &self.rpc,
            registered: self.registered,
            heartbeat_wait: self.heartbeat_wait,
            reductions: self.reductions,
        }
    }
}

impl Media {
    /// RPCs received (a counter) and calls in progress.
    pub(crate) fn figures(&self) -> (f64, f64) {
        (self.rpc_received, self.calls)
    }
}

impl Db {
    /// Connections in use and transactions committed (a counter).
    pub(crate) fn figures(&self) -> (f64, f64) {
        (self.active, self.commits)
    }
}

/// Read access for the exposition.
pub(crate) struct RedisView {
    pub(crate) alive: bool,
    pub(crate) started_at: u64,
    pub(crate) connected: f64,
    pub(crate) received: f64,
    pub(crate) commands: f64,
    pub(crate) command_seconds: f64,
}

impl Redis {
    pub(crate) fn view(&self) -> RedisView {
        RedisView {
            alive: self.alive,
            started_at: self.started_at,
            connected: self.connected,
            received: self.received,
            commands: self.commands,
            command_seconds: self.command_seconds,
        }
    }
}

/// Wait for a pooled connection and the fraction of borrowers that give up, for `offered`
/// concurrency (arrival rate × hold time) on `size` connections: Sakasegawa's M/M/c
/// approximation below saturation, `timeout` and the excess failing above it.
fn pool_wait(offered: f64, size: f64, hold: f64, timeout: f64) -> (f64, f64) {
    let utilisation = offered / size;
    if utilisation < 0.98 {
        let exponent = (2.0 * (size + 1.0)).sqrt() - 1.0;
        let wait = hold * utilisation.powf(exponent) / (size * (1.0 - utilisation));
        (wait.min(timeout), 0.0)
    } else {
        (timeout, (1.0 - size / offered).max(0.0))
    }
}

fn dc_number(dc: &str) -> usize {
    dc.trim_start_matches("dc-").parse().unwrap_or(0)
}

/// Fraction of the key space each node owns on a consistent-hash ring with 160 virtual nodes
/// per live node (ketama's count), hashed with FNV-1a; dead nodes own nothing.
pub fn ring_shares(names: &[String], live: &[bool]) -> Vec<f64> {
    let mut points: Vec<(u64, usize)> = Vec::new();
    for (node, name) in names.iter().enumerate() {
        if !live[node] {
            continue;
        }
        for replica in 0..160 {
            let point = crate::topology::fnv1a(format!("{name}-{replica}").as_bytes());
            points.push((point, node));
        }
    }
    let mut shares = vec![0.0; names.len()];
    if points.is_empty() {
        return shares;
    }
    points.sort_unstable();
    // Each point owns the arc from the previous point (wrapping) up to itself.
    let full = 2f64.powi(64);
    for (at, &(point, node)) in points.iter().enumerate() {
        let previous = if at == 0 {
            points[points.len() - 1].0
        } else {
            points[at - 1].0
        };
        let arc = point.wrapping_sub(previous) as f64;
        shares[node] += arc / full;
    }
    shares
}

/// P(X ≤ x) for a log-normal with the given median and σ of the log (statrs).
pub fn lognormal_cdf(x: f64, median: f64, sigma: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, LogNormal};
    if x <= 0.0 || median <= 0.0 {
        return 0.0;
    }
    LogNormal::new(median.ln(), sigma).map_or(0.0, |distribution| distribution.cdf(x))
}
