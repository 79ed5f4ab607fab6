//! Scenarios as data: a fleet's shape, its clock, and the faults injected into it.
//!
//! A scenario is a YAML file (docs/scenarios.md teaches the format; `scenarios/` holds the
//! shipped ones). Unknown keys are errors naming their path. Durations use Prometheus's
//! syntax (`90s`, `5m`, `1h30m`); times inside the run (`at`) count from the run's start.

use std::path::Path;
use std::time::Duration;

use epicenter_config::PromDuration;
use serde::Deserialize;

use crate::topology::{Instance, Service};

/// A whole scenario file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name, used in ground truth and output (`redis-node-loss`).
    pub name: String,
    /// One or two sentences: what happens and what a good verdict says.
    #[serde(default)]
    pub description: String,
    /// Seed of every random draw: the same seed gives identical samples.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Simulated seconds per wall-clock second. Default 10.
    #[serde(default = "default_speed")]
    pub speed: f64,
    /// Simulated length of the run. Default `10m`.
    #[serde(default = "default_duration")]
    pub duration: PromDuration,
    /// Simulated interval at which epicenter scrapes the fleet. Default `10s`.
    #[serde(default = "default_scrape_interval")]
    pub scrape_interval: PromDuration,
    /// Simulated hour of day (0–24, UTC) at the start, for the daily traffic shape. Default 10.
    #[serde(default = "default_start_hour")]
    pub start_hour: f64,
    /// The fleet's shape.
    #[serde(default)]
    pub fleet: FleetShape,
    /// Faults: each has a kind, a selector and a time window; ground truth follows from them.
    #[serde(default)]
    pub faults: Vec<Fault>,
    /// Planned operations (deploys): not faults, not in the ground truth.
    #[serde(default)]
    pub operations: Vec<Operation>,
}

fn default_seed() -> u64 {
    1
}
fn default_speed() -> f64 {
    10.0
}
fn default_duration() -> PromDuration {
    PromDuration(Duration::from_secs(600))
}
fn default_scrape_interval() -> PromDuration {
    PromDuration(Duration::from_secs(10))
}
fn default_start_hour() -> f64 {
    10.0
}

/// How many of what, where.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetShape {
    /// Datacenters, named `dc-1` … `dc-N`. Default 3.
    #[serde(default = "default_datacenters")]
    pub datacenters: usize,
    /// Hosts per datacenter, named `dc-1-host-1` …; instances are spread over them. Default 4.
    #[serde(default = "default_hosts")]
    pub hosts_per_datacenter: usize,
    /// The public API tier.
    #[serde(default)]
    pub api: ApiShape,
    /// The JVM backend.
    #[serde(default)]
    pub backend: BackendShape,
    /// The Redis nodes the backend shards over.
    #[serde(default)]
    pub redis: RedisShape,
    /// The databases (one per datacenter; the backend uses its own datacenter's).
    #[serde(default)]
    pub db: DbShape,
    /// The BEAM session path: gateways, the voice-state service and media servers.
    #[serde(default)]
    pub beam: BeamShape,
    /// Whether every host also runs node_exporter (an instance `node-<dc>-<h>` of service
    /// `node` per host, listed after every other instance): CPU by mode, pressure stall,
    /// memory, OOM kills, disk, network, `node_uname_info`. Default false: the shipped
    /// scenarios and the random corpus the confidence model was fitted on predate it.
    #[serde(default)]
    pub node_exporter: bool,
    /// Whether every host also runs a kubelet whose cAdvisor serves each container's CPU,
    /// CFS throttling, memory and OOM families (an instance `kubelet-<dc>-<h>` of service
    /// `kubelet` per host, after the node_exporters; each series names its container's
    /// instance in `pod`; fleet/src/cadvisor.rs). Default false.
    #[serde(default)]
    pub cadvisor: bool,
    /// Which libraries the API tier and the backend print their request metrics with, and
    /// whether a service mesh's sidecars add theirs. Default: client_python's conventions on
    /// the API tier, Micrometer on the backend, no mesh (what the shipped scenarios print).
    #[serde(default)]
    pub instrumentation: Instrumentation,
}

/// The request metrics the API tier and the backend print (issue 18: the detector on fleets
/// instrumented otherwise). Only the request families change: the same requests, latencies
/// and failures, under the names, labels and units each library gives them
/// (rules/signals/examples/ holds one exposition of each family, with its source). Every
/// other family of the instance (pools, threads, GC, the process start time) stays.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Instrumentation {
    /// The API tier's HTTP server metrics.
    #[serde(default)]
    pub api: ApiInstrumentation,
    /// The backend's request metrics.
    #[serde(default)]
    pub backend: BackendInstrumentation,
    /// A sidecar proxy beside every API and backend instance, whose metrics are merged into
    /// the instance's own exposition (as Istio's metrics merging serves them): its view of
    /// the requests that reach the instance. Default none.
    #[serde(default)]
    pub mesh: Mesh,
}

/// The API tier's HTTP server metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiInstrumentation {
    /// `http_requests_total{code, method}` and the histogram `http_request_duration_seconds`
    /// (client_python's and client_golang promhttp's conventions). The default.
    #[default]
    ClientPython,
    /// OpenTelemetry's `http.server.request.duration` as its Prometheus exporter prints it:
    /// the histogram `http_server_request_duration_seconds` by `http_request_method`,
    /// `http_response_status_code` and `http_route` (semantic conventions 1.26, HTTP
    /// metrics), one series per status code (200, 429, 503).
    Otel,
}

/// The backend's request metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendInstrumentation {
    /// Spring's `http_server_requests_seconds` timer through Micrometer (histogram on, with
    /// `_max`), by `outcome` and `status`. The default.
    #[default]
    Micrometer,
    /// OpenTelemetry's `http_server_request_duration_seconds`, by status code (200, 500).
    Otel,
    /// A gRPC server instrumented by go-grpc-middleware's Prometheus provider:
    /// `grpc_server_started_total`, `grpc_server_handled_total` by `grpc_code` (`OK`, and
    /// `Unavailable` for what would have been a 500) and the histogram
    /// `grpc_server_handling_seconds`.
    Grpc,
}

/// A service mesh's sidecar metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mesh {
    /// No sidecar. The default.
    #[default]
    None,
    /// Istio's standard metrics as the server's sidecar reports them (`reporter="destination"`):
    /// `istio_requests_total` by `response_code` and the histogram
    /// `istio_request_duration_milliseconds`, with source and destination workloads.
    Istio,
    /// Linkerd's proxy, inbound: `response_total` by `status_code` and `classification`, and
    /// the histogram `response_latency_ms`.
    Linkerd,
}

impl FleetShape {
    /// Every instance of this shape, API first, then backend, Redis, database, gateway,
    /// voice and media, each by datacenter and number: `<service>-<dc>-<n>` on host
    /// `dc-<dc>-host-<h>`, each service starting on its own host so services spread; then,
    /// with `node_exporter`, one `node-<dc>-<h>` per host, and with `cadvisor`, one
    /// `kubelet-<dc>-<h>` per host.
    pub fn layout(&self) -> Vec<Instance> {
        let mut instances = Vec::new();
        for (service, per_dc, offset) in [
            (Service::Api, self.api.instances_per_datacenter, 0),
            (Service::Backend, self.backend.instances_per_datacenter, 1),
            (Service::Redis, self.redis.nodes_per_datacenter, 2),
            (Service::Db, 1, 3),
            (Service::Gateway, self.beam.gateways_per_datacenter, 0),
            (Service::Voice, 1, 1),
            (Service::Media, self.beam.media_per_datacenter, 2),
        ] {
            for dc in 1..=self.datacenters {
                for number in 1..=per_dc {
                    let host = (number - 1 + offset) % self.hosts_per_datacenter + 1;
                    instances.push(Instance {
                        name: format!("{}-{dc}-{number}", service.name()),
                        service,
                        dc: format!("dc-{dc}"),
                        host: format!("dc-{dc}-host-{host}"),
                    });
                }
            }
        }
        for (wanted, service) in [(self.node_exporter, Service::Node), (self.cadvisor, Service::Kubelet)] {
            if !wanted {
                continue;
            }
            for dc in 1..=self.datacenters {
                for host in 1..=self.hosts_per_datacenter {
                    instances.push(Instance {
                        name: format!("{}-{dc}-{host}", service.name()),
                        service,
                        dc: format!("dc-{dc}"),
                        host: format!("dc-{dc}-host-{host}"),
                    });
                }
            }
        }
        instances
    }
}

impl Default for FleetShape {
    fn default() -> Self {
        FleetShape {
            datacenters: default_datacenters(),
            hosts_per_datacenter: default_hosts(),
            api: ApiShape::default(),
            backend: BackendShape::default(),
            redis: RedisShape::default(),
            db: DbShape::default(),
            beam: BeamShape::default(),
            node_exporter: false,
            cadvisor: false,
            instrumentation: Instrumentation::default(),
        }
    }
}

/// The session path on the BEAM: clients hold sessions on gateways; every session start sends
/// messages to the datacenter's voice-state supervisor (one named process, `voice_state_sup`),
/// which serves its mailbox one message at a time, makes an RPC to a media server per start,
/// and renews its service-discovery registration from the same mailbox.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BeamShape {
    /// Gateway instances per datacenter. Default 2.
    #[serde(default = "default_two")]
    pub gateways_per_datacenter: usize,
    /// Media servers per datacenter. Default 2.
    #[serde(default = "default_two")]
    pub media_per_datacenter: usize,
    /// Sessions per datacenter at the daily mean. Default 400,000.
    #[serde(default = "default_sessions")]
    pub sessions_per_datacenter: f64,
    /// Session starts per second per session (clients reconnecting as they move). Default
    /// 0.0007 (280 starts per second per datacenter).
    #[serde(default = "default_churn")]
    pub starts_per_session_per_second: f64,
    /// Supervisor messages per session start. Default 3.
    #[serde(default = "default_messages")]
    pub messages_per_start: f64,
    /// Supervisor time per message on an empty mailbox, seconds. Default 0.00015.
    #[serde(default = "default_message_seconds")]
    pub message_seconds: f64,
    /// Extra time per message per message already queued (selective receive scans the
    /// mailbox), seconds. Default 1e-8 (1 ms at 100,000 queued).
    #[serde(default = "default_scan_seconds")]
    pub scan_seconds_per_queued: f64,
    /// Service-discovery registration TTL: the registration expires when the heartbeat waits
    /// longer than this in the mailbox, seconds. Default 30.
    #[serde(default = "default_ttl")]
    pub registration_ttl_seconds: f64,
}

impl Default for BeamShape {
    fn default() -> Self {
        BeamShape {
            gateways_per_datacenter: default_two(),
            media_per_datacenter: default_two(),
            sessions_per_datacenter: default_sessions(),
            starts_per_session_per_second: default_churn(),
            messages_per_start: default_messages(),
            message_seconds: default_message_seconds(),
            scan_seconds_per_queued: default_scan_seconds(),
            registration_ttl_seconds: default_ttl(),
        }
    }
}

fn default_sessions() -> f64 {
    400_000.0
}
fn default_churn() -> f64 {
    0.0007
}
fn default_messages() -> f64 {
    3.0
}
fn default_message_seconds() -> f64 {
    0.000_15
}
fn default_scan_seconds() -> f64 {
    1e-8
}
fn default_ttl() -> f64 {
    30.0
}

/// The databases behind the backend's HikariCP pools.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DbShape {
    /// Queries per backend request. Default 0.3.
    #[serde(default = "default_queries")]
    pub queries_per_request: f64,
    /// Query time on a healthy database, seconds. Default 0.004.
    #[serde(default = "default_query_seconds")]
    pub query_seconds: f64,
}

impl Default for DbShape {
    fn default() -> Self {
        DbShape {
            queries_per_request: default_queries(),
            query_seconds: default_query_seconds(),
        }
    }
}

fn default_queries() -> f64 {
    0.3
}
fn default_query_seconds() -> f64 {
    0.004
}

fn default_datacenters() -> usize {
    3
}
fn default_hosts() -> usize {
    4
}

/// The public API tier (fork-model workers in front of the backend).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiShape {
    /// Instances per datacenter. Default 2.
    #[serde(default = "default_two")]
    pub instances_per_datacenter: usize,
    /// Fleet-wide requests per second at the daily mean (the daily shape swings ±30 %).
    /// Default 800.
    #[serde(default = "default_rps")]
    pub requests_per_second: f64,
    /// Worker processes per instance. Default 64.
    #[serde(default = "default_workers")]
    pub workers: usize,
    /// Probability that a mobile client retries a failed request (up to twice). Default 0.6.
    #[serde(default = "default_retry")]
    pub retry_probability: f64,
}

impl Default for ApiShape {
    fn default() -> Self {
        ApiShape {
            instances_per_datacenter: default_two(),
            requests_per_second: default_rps(),
            workers: default_workers(),
            retry_probability: default_retry(),
        }
    }
}

fn default_two() -> usize {
    2
}
fn default_rps() -> f64 {
    800.0
}
fn default_workers() -> usize {
    64
}
fn default_retry() -> f64 {
    0.6
}

/// The JVM backend: Jetty threads, a Redis pool per shard, HikariCP, GC.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendShape {
    /// Instances per datacenter. Default 4.
    #[serde(default = "default_four")]
    pub instances_per_datacenter: usize,
    /// Connections per Redis node in each instance's pool (commons-pool2 `maxTotal`). Default 8.
    #[serde(default = "default_redis_pool")]
    pub redis_pool_size: usize,
    /// Redis commands per request. Default 2.
    #[serde(default = "default_commands")]
    pub redis_commands_per_request: f64,
    /// Jetty thread pool maximum. Default 200.
    #[serde(default = "default_threads")]
    pub threads: usize,
    /// HikariCP `maximumPoolSize`. Default 10.
    #[serde(default = "default_db_pool")]
    pub db_pool_size: usize,
}

impl Default for BackendShape {
    fn default() -> Self {
        BackendShape {
            instances_per_datacenter: default_four(),
            redis_pool_size: default_redis_pool(),
            redis_commands_per_request: default_commands(),
            threads: default_threads(),
            db_pool_size: default_db_pool(),
        }
    }
}

fn default_four() -> usize {
    4
}
fn default_redis_pool() -> usize {
    8
}
fn default_commands() -> f64 {
    2.0
}
fn default_threads() -> usize {
    200
}
fn default_db_pool() -> usize {
    10
}

/// The Redis nodes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisShape {
    /// Nodes per datacenter. Default 2.
    #[serde(default = "default_two")]
    pub nodes_per_datacenter: usize,
}

impl Default for RedisShape {
    fn default() -> Self {
        RedisShape {
            nodes_per_datacenter: default_two(),
        }
    }
}

/// One injected fault.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// What goes wrong.
    pub kind: FaultKind,
    /// Which instances it hits.
    pub select: Selector,
    /// When it starts, from the run's start.
    pub at: PromDuration,
    /// How long it lasts; absent = until the end of the run.
    #[serde(default)]
    pub duration: Option<PromDuration>,
    /// `slow_node`: extra latency per Redis command, seconds. Default 0.05.
    #[serde(default)]
    pub latency_seconds: Option<f64>,
    /// `cold_start`: time constant of the JIT warm-up, seconds. Default 90.
    #[serde(default)]
    pub warmup_seconds: Option<f64>,
    /// `retry_storm`: factor on the selected API instances' client traffic. Default 4.
    /// `cpu_throttling`: the containers' CPU demand at the day's mean traffic over their new
    /// limit. Default 2.
    #[serde(default)]
    pub factor: Option<f64>,
    /// `dc_degradation`: fraction of calls into or out of the datacenter that fail, 0..1.
    /// Default 0.02.
    #[serde(default)]
    pub loss: Option<f64>,
    /// `session_loss`: fraction of the datacenter's sessions dropped. Default 0.17.
    #[serde(default)]
    pub fraction: Option<f64>,
    /// `link_degradation`: the datacenter at the other end of the link (`select.dc` is one
    /// end).
    #[serde(default)]
    pub peer_dc: Option<String>,
}

/// One fault parameter as validation sees it: its key, its value, the kinds it applies to,
/// and its range (above the first bound, except `factor`, which may equal it; up to the
/// second).
type FaultParameter<'a> = (&'a str, Option<f64>, &'a [FaultKind], f64, f64);

/// A planned operation: not a fault, so not in the ground truth (a good detector stays
/// quiet).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Operation {
    /// What is done.
    pub kind: OperationKind,
    /// Which instances (of the backend, for `deploy`).
    pub select: Selector,
    /// When it starts, from the run's start.
    pub at: PromDuration,
    /// Time between one instance and the next (a rolling deploy). Default `30s`.
    #[serde(default)]
    pub stagger: Option<PromDuration>,
    /// Warm-up time constant of the restarted instances, seconds (pre-warmed by warm-up
    /// requests before taking traffic). Default 5.
    #[serde(default)]
    pub warmup_seconds: Option<f64>,
}

/// Kinds of planned operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationKind {
    /// A rolling restart of backend instances that warm up before taking traffic.
    Deploy,
}

/// Kinds of fault the simulator can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// A Redis node dies (process gone; its exporter reports `redis_up 0`).
    NodeLoss,
    /// A Redis node answers, slowly (`latency_seconds` per command).
    SlowNode,
    /// Backend instances restart cold, as after a deploy (JIT and GC warm up over
    /// `warmup_seconds`).
    ColdStart,
    /// A database node turns slow (`latency_seconds` per query, default 0.5: a stalled disk
    /// on its host): the backend's HikariCP pools towards it run out.
    SlowDatabase,
    /// The selected gateways are scaled down by mistake: they drop `fraction` of their
    /// datacenter's sessions, whose clients reconnect through the remaining gateways within
    /// about 20 s; every start queues messages at the voice-state supervisor.
    SessionLoss,
    /// Mobile clients of the selected API instances retry without backoff (a bad client
    /// release): their traffic rises by `factor`, and throttled (429) requests are retried too.
    RetryStorm,
    /// Every call into or out of a datacenter is slower (`latency_seconds`, default 0.03)
    /// and some fail (`loss`): a datacenter-wide network degradation. Selects a datacenter.
    DcDegradation,
    /// Calls between two datacenters (`select.dc` and `peer_dc`), in either direction, are
    /// slower (`latency_seconds`, default 0.03) and some fail (`loss`, default 0.02): a
    /// degraded link between them. Calls within either and to a third datacenter are untouched.
    LinkDegradation,
    /// Every instance on one host (`select.host`) is starved of CPU, as under steal from a
    /// noisy neighbour: each operation it serves (an API request, a backend request's own
    /// work, a Redis command, a database query) takes `latency_seconds` longer (default
    /// 0.02). The BEAM services on the host are not slowed. With the fleet's
    /// `node_exporter`, the host reports the steal (`node_cpu_seconds_total{mode="steal"}`)
    /// and CPU pressure stall.
    HostSaturation,
    /// One host (`select.host`) runs short of memory: the kernel reclaims pages and swaps, so
    /// every operation of every instance on it takes `latency_seconds` longer (default 0.01;
    /// as under steal, the BEAM services are not slowed), and the OOM killer fires about once a minute. With the fleet's
    /// `node_exporter`, the host reports it: `MemAvailable` falls to 2 % of memory, memory
    /// and I/O pressure stall rise, `node_vmstat_oom_kill` grows. Ground truth names the host;
    /// the verdict that names it is `host_saturation`.
    HostMemoryPressure,
    /// One host's network interface loses `loss` of its packets (default 0.02: a bad cable
    /// or NIC): every call into or out of an instance on it waits for retransmissions,
    /// `latency_seconds` longer (default 3 segments × `loss` × the 200 ms minimum
    /// retransmission timeout: 12 ms at 2 %), and `loss` / 4 of them fail (a client's deadline
    /// passes first). The BEAM services are not touched. With the fleet's `node_exporter`,
    /// the host reports it: receive errors (`node_network_receive_errs_total`) and
    /// retransmitted segments (`node_netstat_Tcp_RetransSegs`) rise. The verdict that names it
    /// is `host_network`.
    HostPacketLoss,
    /// The selected instances' containers get a CPU limit below their demand (a deploy set
    /// `resources.limits.cpu` too low): at the day's mean traffic they want `factor` times the
    /// cores the limit allows (default 2), so the kernel's CFS quota throttles them and each
    /// operation waits for the next period (up to 100 ms; fleet/src/cadvisor.rs). Selects
    /// backend instances unless `select.service` says otherwise (any service but the BEAM
    /// ones, which the simulator does not slow). With the fleet's `cadvisor`, the kubelet
    /// reports the throttled periods and seconds.
    CpuThrottling,
}

impl FaultKind {
    /// Every kind, in the order docs/scenarios.md lists them.
    pub const ALL: [FaultKind; 12] = [
        FaultKind::NodeLoss,
        FaultKind::SlowNode,
        FaultKind::ColdStart,
        FaultKind::SlowDatabase,
        FaultKind::RetryStorm,
        FaultKind::DcDegradation,
        FaultKind::LinkDegradation,
        FaultKind::HostSaturation,
        FaultKind::HostMemoryPressure,
        FaultKind::HostPacketLoss,
        FaultKind::SessionLoss,
        FaultKind::CpuThrottling,
    ];

    /// The name ground truth and verdicts use (`node_loss`, `slow_node`, `cold_start`).
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::NodeLoss => "node_loss",
            FaultKind::SlowNode => "slow_node",
            FaultKind::ColdStart => "cold_start",
            FaultKind::SlowDatabase => "slow_database",
            FaultKind::RetryStorm => "retry_storm",
            FaultKind::DcDegradation => "dc_degradation",
            FaultKind::LinkDegradation => "link_degradation",
            FaultKind::HostSaturation => "host_saturation",
            FaultKind::HostMemoryPressure => "host_memory_pressure",
            FaultKind::HostPacketLoss => "host_packet_loss",
            FaultKind::SessionLoss => "session_loss",
            FaultKind::CpuThrottling => "cpu_throttling",
        }
    }

    /// The service the fault applies to; `network` for a datacenter-wide or link fault, which
    /// selects every instance of the datacenter, and `host` for a host fault, which selects
    /// every instance of the host. A `cpu_throttling` fault's is its default; its selector may
    /// name another (the ground truth names the selected instances' service).
    pub fn service(self) -> &'static str {
        match self {
            FaultKind::NodeLoss | FaultKind::SlowNode => "redis",
            FaultKind::ColdStart => "backend",
            FaultKind::SlowDatabase => "db",
            FaultKind::RetryStorm => "api",
            FaultKind::DcDegradation | FaultKind::LinkDegradation => "network",
            FaultKind::HostSaturation | FaultKind::HostMemoryPressure | FaultKind::HostPacketLoss => "host",
            FaultKind::SessionLoss => "gateway",
            FaultKind::CpuThrottling => "backend",
        }
    }
}

/// Picks instances: all of `service`, narrowed by datacenter, host and instance name, then
/// the first `count` (in name order) if given.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selector {
    /// Service (`api`, `backend`, `redis`, `db`); default: the fault kind's service.
    #[serde(default)]
    pub service: Option<String>,
    /// Datacenter name (`dc-2`).
    #[serde(default)]
    pub dc: Option<String>,
    /// Host name (`dc-2-host-3`).
    #[serde(default)]
    pub host: Option<String>,
    /// Instance name (`redis-2-1`).
    #[serde(default)]
    pub instance: Option<String>,
    /// Take at most this many of the matches.
    #[serde(default)]
    pub count: Option<usize>,
}

impl Selector {
    /// Indices into `instances` this selector picks, of `default_service` unless it names
    /// one (`network` or `host`: any service), at most `count` of them.
    pub fn pick(&self, instances: &[Instance], default_service: &str) -> Vec<usize> {
        let service = self.service.as_deref().unwrap_or(default_service);
        let mut picked: Vec<usize> = instances
            .iter()
            .enumerate()
            .filter(|(_, instance)| {
                (matches!(service, "network" | "host") || instance.service.name() == service)
                    && self.dc.as_ref().is_none_or(|dc| &instance.dc == dc)
                    && self.host.as_ref().is_none_or(|host| &instance.host == host)
                    && self.instance.as_ref().is_none_or(|name| &instance.name == name)
            })
            .map(|(index, _)| index)
            .collect();
        if let Some(count) = self.count {
            picked.truncate(count);
        }
        picked
    }
}

/// A scenario that cannot be used, with the key path or file it concerns.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ScenarioError {
    /// Key path (`faults[0].kind`) or file name.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// Shipped scenarios, by name: the files under `scenarios/`, built into the binary.
pub const SHIPPED: [(&str, &str); 8] = [
    ("redis-node-loss", include_str!("../../scenarios/redis-node-loss.yml")),
    ("redis-slow-node", include_str!("../../scenarios/redis-slow-node.yml")),
    (
        "backend-cold-start",
        include_str!("../../scenarios/backend-cold-start.yml"),
    ),
    (
        "db-pool-exhaustion",
        include_str!("../../scenarios/db-pool-exhaustion.yml"),
    ),
    ("api-retry-storm", include_str!("../../scenarios/api-retry-storm.yml")),
    (
        "dc-network-degradation",
        include_str!("../../scenarios/dc-network-degradation.yml"),
    ),
    (
        "zone-session-loss",
        include_str!("../../scenarios/zone-session-loss.yml"),
    ),
    ("healthy", include_str!("../../scenarios/healthy.yml")),
];

impl Scenario {
    /// Parses and checks a scenario. Errors name the key path (and line) or the rule broken.
    pub fn from_yaml(text: &str) -> Result<Scenario, ScenarioError> {
        // Size and nesting first: the YAML library is slow on deep nesting.
        epicenter_config::check_shape(text).map_err(|error| ScenarioError {
            path: "scenario".to_string(),
            message: error.to_string(),
        })?;
        let deserializer = serde_norway::Deserializer::from_str(text);
        let scenario: Scenario = serde_path_to_error::deserialize(deserializer).map_err(|error| {
            let path = error.path().to_string();
            // serde_norway's message carries the line and column, and sometimes the path.
            let inner = error.into_inner().to_string();
            let message = inner.strip_prefix(&format!("{path}: ")).unwrap_or(&inner).to_string();
            ScenarioError {
                path: if path == "." { "scenario".to_string() } else { path },
                message,
            }
        })?;
        scenario.check()?;
        scenario.check_selections()?;
        Ok(scenario)
    }

    /// A shipped scenario by name, or a file by path.
    pub fn load(name_or_path: &str) -> Result<Scenario, ScenarioError> {
        if let Some((_, text)) = SHIPPED.iter().find(|(name, _)| *name == name_or_path) {
            return Scenario::from_yaml(text);
        }
        let text = std::fs::read_to_string(Path::new(name_or_path)).map_err(|error| ScenarioError {
            path: name_or_path.to_string(),
            message: match closest_shipped(name_or_path) {
                Some(close) => format!(
                    "not a shipped scenario and not a readable file ({error}); did you mean '{close}'? (shipped: {})",
                    SHIPPED.map(|(name, _)| name).join(", ")
                ),
                None => format!(
                    "not a shipped scenario ({}) and not a readable file: {error}",
                    SHIPPED.map(|(name, _)| name).join(", ")
                ),
            },
        })?;
        Scenario::from_yaml(&text).map_err(|error| ScenarioError {
            path: format!("{name_or_path}: {}", error.path),
            message: error.message,
        })
    }

    /// Checks what needs the fleet's topology: every fault and operation selects at least one
    /// instance. Errors name the selector's path.
    pub fn check_selections(&self) -> Result<(), ScenarioError> {
        let instances = self.fleet.layout();
        let dcs = (1..=self.fleet.datacenters).map(|dc| format!("dc-{dc}"));
        let dcs: Vec<String> = dcs.collect();
        let known_dcs = format!("dc-1 … dc-{}", self.fleet.datacenters);
        for (index, fault) in self.faults.iter().enumerate() {
            for (key, dc) in [("select.dc", &fault.select.dc), ("peer_dc", &fault.peer_dc)] {
                if let Some(dc) = dc.as_ref().filter(|dc| !dcs.contains(dc)) {
                    return Err(ScenarioError {
                        path: format!("faults[{index}].{key}"),
                        message: format!("no datacenter {dc} in this fleet (it has {known_dcs})"),
                    });
                }
            }
            if let Some(host) = &fault.select.host {
                if !instances.iter().any(|instance| &instance.host == host) {
                    return Err(ScenarioError {
                        path: format!("faults[{index}].select.host"),
                        message: format!(
                            "no host {host} in this fleet (hosts are dc-<n>-host-<m>, n in 1..={}, m in 1..={})",
                            self.fleet.datacenters, self.fleet.hosts_per_datacenter
                        ),
                    });
                }
            }
            if fault.select.pick(&instances, fault.kind.service()).is_empty() {
                return Err(ScenarioError {
                    path: format!("faults[{index}].select"),
                    message: format!(
                        "selects no {} instance in this fleet (names are <service>-<dc number>-<n>, e.g. {}-1-1; docs/scenarios.md)",
                        fault.kind.service(),
                        fault.kind.service()
                    ),
                });
            }
        }
        for (index, operation) in self.operations.iter().enumerate() {
            if operation.select.pick(&instances, "backend").is_empty() {
                return Err(ScenarioError {
                    path: format!("operations[{index}].select"),
                    message: "selects no backend instance in this fleet".to_string(),
                });
            }
        }
        Ok(())
    }

    /// Runs the scenario at `speed` simulated seconds per wall-clock second instead of its
    /// own. Errors (saying why, without the value's name) unless `0 < speed <=`
    /// [`Scenario::max_speed`].
    pub fn set_speed(&mut self, speed: f64) -> Result<(), String> {
        if !(speed.is_finite() && speed > 0.0 && speed <= self.max_speed()) {
            return Err(format!(
                "must be above 0 and at most {} for this scenario (its {} scrape interval must stay at least 100 ms of wall time)",
                self.max_speed(),
                self.scrape_interval
            ));
        }
        self.speed = speed;
        Ok(())
    }

    /// The highest speed at which the scrape interval stays at least 100 ms of wall time
    /// (faster, a collector on a small machine misses rounds).
    pub fn max_speed(&self) -> f64 {
        (self.scrape_interval.0.as_secs_f64() * 10.0).min(1000.0)
    }

    fn check(&self) -> Result<(), ScenarioError> {
        let fail = |path: &str, message: String| {
            Err(ScenarioError {
                path: path.to_string(),
                message,
            })
        };
        if !(self.speed.is_finite() && self.speed > 0.0 && self.speed <= 1000.0) {
            return fail("speed", format!("{} must be in (0, 1000]", self.speed));
        }
        if self.duration.0 < Duration::from_secs(1) {
            return fail("duration", "must be at least 1s".into());
        }
        if self.scrape_interval.0 < Duration::from_secs(1) {
            return fail("scrape_interval", "must be at least 1s".into());
        }
        if self.speed > self.max_speed() {
            return fail(
                "speed",
                format!(
                    "{} is faster than {} (the {} scrape interval must stay at least 100 ms of wall time)",
                    self.speed,
                    self.max_speed(),
                    self.scrape_interval
                ),
            );
        }
        let shape = &self.fleet;
        // Large enough for a fleet of several thousand targets (scripts/quiet serves 5,000).
        for (path, value, max) in [
            ("fleet.datacenters", shape.datacenters, 16),
            ("fleet.hosts_per_datacenter", shape.hosts_per_datacenter, 1024),
            (
                "fleet.api.instances_per_datacenter",
                shape.api.instances_per_datacenter,
                1024,
            ),
            (
                "fleet.backend.instances_per_datacenter",
                shape.backend.instances_per_datacenter,
                1024,
            ),
            ("fleet.redis.nodes_per_datacenter", shape.redis.nodes_per_datacenter, 32),
            ("fleet.backend.redis_pool_size", shape.backend.redis_pool_size, 256),
            ("fleet.backend.threads", shape.backend.threads, 10_000),
            ("fleet.api.workers", shape.api.workers, 10_000),
            (
                "fleet.beam.gateways_per_datacenter",
                shape.beam.gateways_per_datacenter,
                1024,
            ),
            ("fleet.beam.media_per_datacenter", shape.beam.media_per_datacenter, 1024),
        ] {
            if value == 0 || value > max {
                return fail(path, format!("{value} must be between 1 and {max}"));
            }
        }
        if !(0.0..=1.0).contains(&shape.api.retry_probability) {
            return fail("fleet.api.retry_probability", "must be between 0 and 1".into());
        }
        for (index, operation) in self.operations.iter().enumerate() {
            if operation.at.0 >= self.duration.0 {
                return fail(
                    &format!("operations[{index}].at"),
                    format!("{} is not before the end of the run ({})", operation.at, self.duration),
                );
            }
        }
        for (index, fault) in self.faults.iter().enumerate() {
            if fault.at.0 >= self.duration.0 {
                return fail(
                    &format!("faults[{index}].at"),
                    format!("{} is not before the end of the run ({})", fault.at, self.duration),
                );
            }
            if fault.kind == FaultKind::DcDegradation && fault.select.dc.is_none() {
                return fail(
                    &format!("faults[{index}].select.dc"),
                    "dc_degradation needs the datacenter it degrades".into(),
                );
            }
            if fault.kind == FaultKind::LinkDegradation {
                let ends = (fault.select.dc.as_deref(), fault.peer_dc.as_deref());
                let (Some(one), Some(other)) = ends else {
                    return fail(
                        &format!("faults[{index}].peer_dc"),
                        "link_degradation needs both ends: select.dc and peer_dc".into(),
                    );
                };
                if one == other {
                    return fail(
                        &format!("faults[{index}].peer_dc"),
                        format!("is {other}, the same datacenter as select.dc: a link joins two"),
                    );
                }
            } else if fault.peer_dc.is_some() {
                return fail(
                    &format!("faults[{index}].peer_dc"),
                    format!("applies to link_degradation only, not {}", fault.kind.name()),
                );
            }
            // Each kind's own parameters, in range; another kind's parameter is a mistake (it
            // would be silently ignored).
            let key = |name: &str| format!("faults[{index}].{name}");
            let parameters: [FaultParameter<'_>; 5] = [
                (
                    "latency_seconds",
                    fault.latency_seconds,
                    &[
                        FaultKind::SlowNode,
                        FaultKind::SlowDatabase,
                        FaultKind::DcDegradation,
                        FaultKind::LinkDegradation,
                        FaultKind::HostSaturation,
                        FaultKind::HostMemoryPressure,
                        FaultKind::HostPacketLoss,
                    ],
                    0.0,
                    3600.0,
                ),
                (
                    "warmup_seconds",
                    fault.warmup_seconds,
                    &[FaultKind::ColdStart],
                    0.0,
                    86_400.0,
                ),
                (
                    "factor",
                    fault.factor,
                    &[FaultKind::RetryStorm, FaultKind::CpuThrottling],
                    1.0,
                    1000.0,
                ),
                (
                    "loss",
                    fault.loss,
                    &[
                        FaultKind::DcDegradation,
                        FaultKind::LinkDegradation,
                        FaultKind::HostPacketLoss,
                    ],
                    0.0,
                    1.0,
                ),
                ("fraction", fault.fraction, &[FaultKind::SessionLoss], 0.0, 1.0),
            ];
            for (name, value, kinds, low, high) in parameters {
                let Some(value) = value else { continue };
                if !kinds.contains(&fault.kind) {
                    let takes: Vec<&str> = kinds.iter().map(|kind| kind.name()).collect();
                    return fail(
                        &key(name),
                        format!("applies to {} only, not {}", takes.join(", "), fault.kind.name()),
                    );
                }
                let above_low = if name == "factor" { value >= low } else { value > low };
                if !(value.is_finite() && above_low && value <= high) {
                    let from = if name == "factor" { "from" } else { "above" };
                    return fail(&key(name), format!("{value} must be {from} {low} up to {high}"));
                }
            }
            if fault.kind.service() == "host" && fault.select.host.is_none() {
                return fail(
                    &format!("faults[{index}].select.host"),
                    format!("{} needs the host it starves", fault.kind.name()),
                );
            }
            if let Some(service) = &fault.select.service {
                if fault.kind == FaultKind::CpuThrottling {
                    if !["api", "backend", "redis", "db"].contains(&service.as_str()) {
                        return fail(
                            &format!("faults[{index}].select.service"),
                            format!("cpu_throttling slows api, backend, redis or db instances, not '{service}'"),
                        );
                    }
                } else if fault.kind.service() != "network"
                    && fault.kind.service() != "host"
                    && service != fault.kind.service()
                {
                    return fail(
                        &format!("faults[{index}].select.service"),
                        format!(
                            "{} applies to '{}', not '{service}'",
                            fault.kind.name(),
                            fault.kind.service()
                        ),
                    );
                }
            }
        }
        Ok(())
    }
}

/// The shipped scenario name closest to `given` when it is near enough to be a typo
/// (Jaro-Winkler similarity of at least 0.85, the threshold clap uses for its own suggestions).
fn closest_shipped(given: &str) -> Option<&'static str> {
    SHIPPED
        .iter()
        .map(|(name, _)| (*name, strsim::jaro_winkler(given, name)))
        .filter(|(_, similarity)| *similarity >= 0.85)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(name, _)| name)
}

#[cfg(test)]
mod suggestion_tests {
    use super::*;

    #[test]
    fn a_misspelt_scenario_name_gets_a_suggestion() {
        assert_eq!(closest_shipped("redis-node-los"), Some("redis-node-loss"));
        assert_eq!(closest_shipped("redis-slow-nod"), Some("redis-slow-node"));
        assert_eq!(closest_shipped("my-incident.yml"), None);
        let error = Scenario::load("backend-cold-strat").unwrap_err();
        assert!(
            error.message.contains("did you mean 'backend-cold-start'?"),
            "{}",
            error.message
        );
    }
}
