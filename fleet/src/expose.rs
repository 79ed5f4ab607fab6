//! What each simulated exporter prints: text format 0.0.4, every sample stamped with the
//! simulated time (milliseconds), names, types and labels as the real exporters print them
//! (../shared/fixtures/exposition/NAMES.md): Micrometer's Prometheus registry for the JVM
//! backend (Jetty, commons-pool2 under Lettuce, Lettuce command latency, HikariCP, JVM GC,
//! Spring's `http_server_requests` with percentile histograms on), redis_exporter for the
//! Redis nodes, and client_python's conventions for the API tier.

use crate::instrument::{self, ByStatus, Peers};
use crate::model::{Fleet, State, API_BUCKETS, BACKEND_BUCKETS};
use crate::scenario::{ApiInstrumentation, BackendInstrumentation, Mesh};
use crate::text::Out;
use crate::topology::{fnv1a, Service};

/// Commons-pool2 `factoryType` of Lettuce's pooled connections.
const FACTORY_TYPE: &str =
    "io.lettuce.core.support.ConnectionPoolSupport$RedisPooledObjectFactory<io.lettuce.core.api.StatefulRedisConnection>";

/// The BEAM runtime's own families, as prometheus.erl 4.11 names them.
fn beam_vm(out: &mut Out, processes: f64, run_queue: f64, process_bytes: f64, reductions: f64) {
    out.family(
        "erlang_vm_process_count",
        "gauge",
        "The number of processes currently existing at the local node.",
    );
    out.sample("erlang_vm_process_count", &[], processes.round());
    out.family(
        "erlang_vm_process_limit",
        "gauge",
        "The maximum number of simultaneously existing processes at the local node.",
    );
    out.sample("erlang_vm_process_limit", &[], 1_048_576.0);
    out.family(
        "erlang_vm_statistics_run_queues_length",
        "gauge",
        "The total length of all normal run-queues.",
    );
    out.sample("erlang_vm_statistics_run_queues_length", &[], run_queue);
    out.family(
        "erlang_vm_statistics_reductions_total",
        "counter",
        "Total reduction count.",
    );
    out.sample("erlang_vm_statistics_reductions_total", &[], reductions.floor());
    out.family(
        "erlang_vm_memory_bytes_total",
        "gauge",
        "The total amount of memory currently allocated.",
    );
    out.sample(
        "erlang_vm_memory_bytes_total",
        &[("kind", "processes")],
        process_bytes.round(),
    );
    out.sample("erlang_vm_memory_bytes_total", &[("kind", "system")], 110_000_000.0);
}

/// The inbound metrics of `mesh`'s sidecar beside an instance of workload `destination`
/// called by `source`, serving gRPC or plain HTTP, if there is one.
fn sidecar(
    out: &mut Out,
    mesh: Mesh,
    (source, destination, grpc): (&str, &str, bool),
    bounds: &[f64],
    by_status: &[ByStatus],
) {
    let peers = Peers {
        source,
        destination,
        namespace: "prod",
        grpc,
    };
    match mesh {
        Mesh::None => {}
        Mesh::Istio => instrument::istio(out, &peers, bounds, by_status),
        Mesh::Linkerd => instrument::linkerd(out, &peers, bounds, by_status),
    }
}

impl Fleet {
    /// The exposition (Prometheus text format 0.0.4, samples stamped with the simulated
    /// time) that instance `index` serves now. A dead Redis node's exporter still answers,
    /// with `redis_up 0`, as redis_exporter does.
    pub fn render(&self, index: usize) -> String {
        render(self, index)
    }
}

/// The exposition of instance `index` of `fleet` now.
fn render(fleet: &Fleet, index: usize) -> String {
    let mut out = Out {
        text: String::with_capacity(16 * 1024),
        timestamp_ms: fleet.now_ms(),
    };
    let instance = &fleet.instances()[index];
    let seconds = |at: u64| (fleet.start_ms() as f64 / 1000.0) + at as f64;
    match (instance.service, fleet.instance_state(index)) {
        (Service::Api, State::Api(api)) => {
            let (busy, ok, server_errors, throttled, latency_sum, latency_count, buckets) = api.figures();
            let workers = fleet.scenario().fleet.api.workers as f64;
            let instrumentation = fleet.scenario().fleet.instrumentation;
            match instrumentation.api {
                ApiInstrumentation::ClientPython => {
                    out.family("http_requests_total", "counter", "Requests served, by status code.");
                    for (code, value) in [("200", ok), ("429", throttled), ("503", server_errors)] {
                        out.sample(
                            "http_requests_total",
                            &[("code", code), ("method", "GET")],
                            value.floor(),
                        );
                    }
                    out.family("http_request_duration_seconds", "histogram", "Request latency.");
                    out.histogram(
                        "http_request_duration_seconds",
                        &[("method", "GET")],
                        &API_BUCKETS,
                        buckets,
                        latency_count,
                        latency_sum,
                    );
                }
                ApiInstrumentation::Otel => {
                    instrument::otel_http(&mut out, "/v1/sessions", &API_BUCKETS, &api.by_status())
                }
            }
            if instrumentation.mesh != Mesh::None {
                sidecar(
                    &mut out,
                    instrumentation.mesh,
                    ("istio-ingressgateway", "api", false),
                    &API_BUCKETS,
                    &api.by_status(),
                );
            }
            out.family("api_workers_busy", "gauge", "Worker processes handling a request.");
            out.sample("api_workers_busy", &[], busy.round());
            out.family("api_workers_max", "gauge", "Worker processes configured.");
            out.sample("api_workers_max", &[], workers);
            out.family(
                "process_start_time_seconds",
                "gauge",
                "Start time of the process since unix epoch in seconds.",
            );
            out.sample("process_start_time_seconds", &[], seconds(0));
        }
        (Service::Backend, State::Backend(backend)) => {
            let view = backend.view();
            let shape = &fleet.scenario().fleet.backend;
            let threads = shape.threads as f64;
            let busy = view.busy_threads.round();
            let current = (busy + 8.0).min(threads);
            for (name, help, value) in [
                (
                    "jetty_threads_config_max",
                    "The maximum number of threads in the pool",
                    threads,
                ),
                (
                    "jetty_threads_config_min",
                    "The minimum number of threads in the pool",
                    8.0,
                ),
                (
                    "jetty_threads_current",
                    "The total number of threads in the pool",
                    current,
                ),
                ("jetty_threads_busy", "The number of busy threads in the pool", busy),
                (
                    "jetty_threads_idle",
                    "The number of idle threads in the pool",
                    current - busy,
                ),
                (
                    "jetty_threads_jobs",
                    "Number of jobs queued waiting for a thread",
                    view.queued_jobs.round(),
                ),
            ] {
                out.family(name, "gauge", help);
                out.sample(name, &[], value);
            }
            let redis_names = fleet.redis_names();
            type PoolFigure = fn(&crate::model::PoolView) -> f64;
            let pool_families: [(&str, &str, &str, PoolFigure); 8] = [
                (
                    "commons_pool2_num_active_objects",
                    "gauge",
                    "The number of instances currently borrowed from the pool",
                    |pool| pool.active.round(),
                ),
                (
                    "commons_pool2_num_idle_objects",
                    "gauge",
                    "The number of instances currently idle in the pool",
                    |pool| (pool.open - pool.active.round()).max(0.0).round(),
                ),
                (
                    "commons_pool2_num_waiters_threads",
                    "gauge",
                    "The estimate of the number of threads currently blocked waiting for an object from the pool",
                    |pool| pool.waiters.round(),
                ),
                (
                    "commons_pool2_created_objects_total",
                    "counter",
                    "The total number of objects created for this pool over the lifetime of the pool",
                    |pool| pool.created.floor(),
                ),
                (
                    "commons_pool2_destroyed_objects_total",
                    "counter",
                    "The total number of objects destroyed by this pool over the lifetime of the pool",
                    |pool| pool.destroyed.floor(),
                ),
                (
                    "commons_pool2_borrowed_objects_total",
                    "counter",
                    "The total number of objects successfully borrowed from this pool over the lifetime of the pool",
                    |pool| pool.borrowed.floor(),
                ),
                (
                    "commons_pool2_mean_borrow_wait_seconds",
                    "gauge",
                    "The mean time threads wait to borrow an object",
                    |pool| pool.mean_wait,
                ),
                (
                    "commons_pool2_max_borrow_wait_seconds",
                    "gauge",
                    "The maximum time a thread has waited to borrow objects from the pool",
                    |pool| pool.max_wait,
                ),
            ];
            for (name, kind, help, figure) in pool_families {
                out.family(name, kind, help);
                for (pool, node) in view.pools.iter().zip(&redis_names) {
                    out.sample(
                        name,
                        &[
                            ("factoryType", FACTORY_TYPE),
                            ("name", node),
                            ("type", "GenericObjectPool"),
                        ],
                        figure(pool),
                    );
                }
            }
            out.family(
                "lettuce_command_completion_seconds",
                "summary",
                "Latency between command send and command completion (complete response received",
            );
            let remotes: Vec<String> = redis_names.iter().map(|node| format!("redis/{node}:6379")).collect();
            for (pool, remote) in view.pools.iter().zip(&remotes) {
                let labels = [("command", "GET"), ("local", "local:any"), ("remote", remote.as_str())];
                out.sample(
                    "lettuce_command_completion_seconds_count",
                    &labels,
                    pool.commands.0.floor(),
                );
                out.sample("lettuce_command_completion_seconds_sum", &labels, pool.commands.1);
            }
            out.family(
                "lettuce_command_completion_seconds_max",
                "gauge",
                "Latency between command send and command completion (complete response received",
            );
            for (pool, remote) in view.pools.iter().zip(&remotes) {
                let labels = [("command", "GET"), ("local", "local:any"), ("remote", remote.as_str())];
                out.sample("lettuce_command_completion_seconds_max", &labels, pool.commands.2);
            }
            let db_pool = shape.db_pool_size as f64;
            let db = &view.db_pool;
            let db_active = db.active.round();
            // HikariCP's poolName is set to the database the pool connects to.
            let pool_name = format!("db-{}-1", instance.dc.trim_start_matches("dc-"));
            let hikari = [("pool", pool_name.as_str())];
            for (name, help, value) in [
                ("hikaricp_connections", "Total connections", db_pool),
                ("hikaricp_connections_active", "Active connections", db_active),
                ("hikaricp_connections_idle", "Idle connections", db_pool - db_active),
                ("hikaricp_connections_pending", "Pending threads", db.waiters.round()),
                ("hikaricp_connections_max", "Max connections", db_pool),
                ("hikaricp_connections_min", "Min connections", db_pool),
            ] {
                out.family(name, "gauge", help);
                out.sample(name, &hikari, value);
            }
            out.family(
                "hikaricp_connections_timeout_total",
                "counter",
                "Connection timeout total count",
            );
            out.sample("hikaricp_connections_timeout_total", &hikari, view.db_timeouts.floor());
            out.family(
                "hikaricp_connections_acquire_seconds",
                "summary",
                "Connection acquire time",
            );
            out.sample(
                "hikaricp_connections_acquire_seconds_count",
                &hikari,
                db.commands.0.floor(),
            );
            out.sample("hikaricp_connections_acquire_seconds_sum", &hikari, db.commands.1);
            out.family(
                "hikaricp_connections_acquire_seconds_max",
                "gauge",
                "Connection acquire time",
            );
            out.sample(
                "hikaricp_connections_acquire_seconds_max",
                &hikari,
                db.max_wait.max(0.000_2),
            );
            out.family("hikaricp_connections_usage_seconds", "summary", "Connection usage time");
            out.sample(
                "hikaricp_connections_usage_seconds_count",
                &hikari,
                view.db_usage.0.floor(),
            );
            out.sample("hikaricp_connections_usage_seconds_sum", &hikari, view.db_usage.1);
            out.family(
                "hikaricp_connections_usage_seconds_max",
                "gauge",
                "Connection usage time",
            );
            out.sample("hikaricp_connections_usage_seconds_max", &hikari, view.db_usage.2);
            let gc = [
                ("action", "end of minor GC"),
                ("cause", "G1 Evacuation Pause"),
                ("gc", "G1 Young Generation"),
            ];
            out.family("jvm_gc_pause_seconds", "summary", "Time spent in GC pause");
            out.sample("jvm_gc_pause_seconds_count", &gc, view.gc.0.floor());
            out.sample("jvm_gc_pause_seconds_sum", &gc, view.gc.1);
            out.family("jvm_gc_pause_seconds_max", "gauge", "Time spent in GC pause");
            out.sample("jvm_gc_pause_seconds_max", &gc, view.gc.2);
            let instrumentation = fleet.scenario().fleet.instrumentation;
            let by_status = [
                ("200", view.ok.0, view.ok.1, view.ok.2.into()),
                ("500", view.errors.0, view.errors.1, view.errors.2.into()),
            ];
            match instrumentation.backend {
                BackendInstrumentation::Micrometer => {
                    out.family(
                        "http_server_requests_seconds",
                        "histogram",
                        "Duration of HTTP server request handling",
                    );
                    let mut max = Vec::new();
                    for (outcome, status, (count, sum, buckets)) in
                        [("SUCCESS", "200", view.ok), ("SERVER_ERROR", "500", view.errors)]
                    {
                        let labels = [
                            ("error", "none"),
                            ("exception", "none"),
                            ("method", "GET"),
                            ("outcome", outcome),
                            ("status", status),
                            ("uri", "/api/v1/session"),
                        ];
                        out.histogram(
                            "http_server_requests_seconds",
                            &labels,
                            &BACKEND_BUCKETS,
                            buckets,
                            count,
                            sum,
                        );
                        max.push((labels, if count > 0.0 { sum / count * 3.0 } else { 0.0 }));
                    }
                    out.family(
                        "http_server_requests_seconds_max",
                        "gauge",
                        "Duration of HTTP server request handling",
                    );
                    for (labels, value) in max {
                        out.sample("http_server_requests_seconds_max", &labels, value);
                    }
                }
                BackendInstrumentation::Otel => {
                    instrument::otel_http(&mut out, "/api/v1/session", &BACKEND_BUCKETS, &by_status);
                }
                BackendInstrumentation::Grpc => {
                    instrument::grpc(&mut out, "chat.v1.Sessions", "Get", &BACKEND_BUCKETS, &by_status);
                }
            }
            sidecar(
                &mut out,
                instrumentation.mesh,
                (
                    "api",
                    "backend",
                    instrumentation.backend == BackendInstrumentation::Grpc,
                ),
                &BACKEND_BUCKETS,
                &by_status,
            );
            out.family(
                "process_start_time_seconds",
                "gauge",
                "Start time of the process since unix epoch.",
            );
            out.sample("process_start_time_seconds", &[], seconds(view.started_at));
            out.family(
                "process_uptime_seconds",
                "gauge",
                "The uptime of the Java virtual machine",
            );
            out.sample("process_uptime_seconds", &[], (fleet.second() - view.started_at) as f64);
        }
        (Service::Redis, State::Redis(redis)) => {
            let view = redis.view();
            if !view.alive {
                out.family("redis_up", "gauge", "Information about the Redis instance");
                out.sample("redis_up", &[], 0.0);
                out.family(
                    "redis_exporter_last_scrape_error",
                    "gauge",
                    "The last scrape error status.",
                );
                let error = format!(
                    "dial redis: dial tcp {}:6379: connect: connection refused",
                    instance.name
                );
                out.sample("redis_exporter_last_scrape_error", &[("err", &error)], 1.0);
                return out.text;
            }
            out.family("redis_up", "gauge", "Information about the Redis instance");
            out.sample("redis_up", &[], 1.0);
            out.family(
                "redis_exporter_last_scrape_error",
                "gauge",
                "The last scrape error status.",
            );
            out.sample("redis_exporter_last_scrape_error", &[("err", "")], 0.0);
            out.family("redis_instance_info", "gauge", "Information about the Redis instance");
            let run_id = format!(
                "{:040x}",
                u128::from(fnv1a(instance.name.as_bytes())) << 32 | u128::from(view.started_at as u32)
            );
            out.sample(
                "redis_instance_info",
                &[
                    ("maxmemory_policy", "noeviction"),
                    ("os", "Linux 6.1.0-28-amd64 x86_64"),
                    ("process_id", "1"),
                    ("redis_build_id", "b2ab4bed7c0f1e9d"),
                    ("redis_mode", "standalone"),
                    ("redis_version", "7.0.15"),
                    ("role", "master"),
                    ("run_id", &run_id),
                    ("tcp_port", "6379"),
                ],
                1.0,
            );
            for (name, kind, help, value) in [
                (
                    "redis_connected_clients",
                    "gauge",
                    "connected_clients metric",
                    view.connected.round(),
                ),
                ("redis_blocked_clients", "gauge", "blocked_clients metric", 0.0),
                ("redis_max_clients", "gauge", "maxclients metric", 10000.0),
                (
                    "redis_connections_received_total",
                    "counter",
                    "connections_received_total metric",
                    view.received.floor(),
                ),
                (
                    "redis_rejected_connections_total",
                    "counter",
                    "rejected_connections_total metric",
                    0.0,
                ),
                (
                    "redis_commands_processed_total",
                    "counter",
                    "commands_processed_total metric",
                    view.commands.floor(),
                ),
                (
                    "redis_uptime_in_seconds",
                    "gauge",
                    "uptime_in_seconds metric",
                    (fleet.second() - view.started_at) as f64,
                ),
                (
                    "redis_start_time_seconds",
                    "gauge",
                    "Start time of the Redis instance since unix epoch in seconds.",
                    seconds(view.started_at),
                ),
            ] {
                out.family(name, kind, help);
                out.sample(name, &[], value);
            }
            out.family("redis_commands_total", "counter", "Total number of calls per command");
            out.sample("redis_commands_total", &[("cmd", "get")], view.commands.floor());
            out.family(
                "redis_commands_duration_seconds_total",
                "counter",
                "Total amount of time in seconds spent per command",
            );
            out.sample(
                "redis_commands_duration_seconds_total",
                &[("cmd", "get")],
                view.command_seconds,
            );
        }
        (Service::Node, State::Node(node)) => out.text.push_str(&node.render(out.timestamp_ms)),
        (Service::Kubelet, State::Kubelet(kubelet)) => {
            kubelet.render(&mut out, fleet.instances(), fleet.start_ms(), |at| fleet.running(at));
        }
        (Service::Db, State::Db(db)) => {
            let (active, commits) = db.figures();
            out.family("pg_up", "gauge", "Whether the last scrape of metrics from PostgreSQL was able to connect to the server (1 for yes, 0 for no).");
            out.sample("pg_up", &[], 1.0);
            out.family("pg_stat_activity_count", "gauge", "number of connections in this state");
            for (state, value) in [("active", active.round()), ("idle", (30.0 - active.round()).max(0.0))] {
                out.sample("pg_stat_activity_count", &[("datname", "app"), ("state", state)], value);
            }
            out.family(
                "pg_stat_database_xact_commit",
                "counter",
                "Number of transactions in this database that have been committed",
            );
            out.sample(
                "pg_stat_database_xact_commit",
                &[("datid", "16384"), ("datname", "app")],
                commits.floor(),
            );
        }
        (Service::Gateway, State::Gateway(gateway)) => {
            let (sessions, connects, disconnects) = gateway.figures();
            out.family("gateway_sessions", "gauge", "Client sessions held by this gateway.");
            out.sample("gateway_sessions", &[], sessions.round());
            out.family(
                "gateway_session_connects_total",
                "counter",
                "Sessions started on this gateway.",
            );
            out.sample("gateway_session_connects_total", &[], connects.floor());
            out.family(
                "gateway_session_disconnects_total",
                "counter",
                "Sessions ended or dropped on this gateway.",
            );
            out.sample("gateway_session_disconnects_total", &[], disconnects.floor());
            // One Erlang process per session, plus the runtime's own.
            beam_vm(
                &mut out,
                sessions + 600.0,
                0.0,
                60_000_000.0 + sessions * 2_800.0,
                connects * 4_000.0 + fleet.second() as f64 * 3.0e6,
            );
        }
        (Service::Voice, State::Voice(voice)) => {
            let view = voice.view();
            out.family(
                "erlang_vm_process_message_queue_len",
                "gauge",
                "Messages waiting in the mailbox of a registered process (epicenter's family; prometheus.erl has none for arbitrary processes).",
            );
            for (name, queue) in [
                ("voice_state_sup", view.queue.round()),
                ("voice_state_registry", 0.0),
                ("logger", 0.0),
            ] {
                out.sample(
                    "erlang_vm_process_message_queue_len",
                    &[("registered_name", name)],
                    queue,
                );
            }
            out.family(
                "voice_state_session_starts_total",
                "counter",
                "Session starts the supervisor has handled.",
            );
            out.sample("voice_state_session_starts_total", &[], view.starts.floor());
            out.family(
                "voice_state_messages_processed_total",
                "counter",
                "Messages the supervisor has taken from its mailbox.",
            );
            out.sample("voice_state_messages_processed_total", &[], view.processed.floor());
            out.family(
                "voice_state_media_rpc_total",
                "counter",
                "RPCs to media servers, by peer.",
            );
            let dc = instance.dc.trim_start_matches("dc-");
            for (peer, calls) in view.rpc.iter().enumerate() {
                let name = format!("media-{dc}-{}", peer + 1);
                out.sample("voice_state_media_rpc_total", &[("peer", &name)], calls.floor());
            }
            out.family(
                "voice_state_discovery_registered",
                "gauge",
                "1 while the service-discovery registration is live, 0 once it expired.",
            );
            out.sample(
                "voice_state_discovery_registered",
                &[],
                if view.registered { 1.0 } else { 0.0 },
            );
            out.family(
                "voice_state_discovery_heartbeat_wait_seconds",
                "gauge",
                "How long the next discovery heartbeat waits in the supervisor's mailbox.",
            );
            out.sample("voice_state_discovery_heartbeat_wait_seconds", &[], view.heartbeat_wait);
            let busy = if view.queue >= 1.0 { 1.0 } else { 0.0 };
            // Each queued message holds about 200 bytes of process heap.
            beam_vm(
                &mut out,
                1_200.0,
                busy,
                80_000_000.0 + view.queue * 200.0,
                view.reductions,
            );
        }
        (Service::Media, State::Media(media)) => {
            let (received, calls) = media.figures();
            out.family(
                "media_rpc_received_total",
                "counter",
                "RPCs received from the voice-state service.",
            );
            out.sample("media_rpc_received_total", &[], received.floor());
            out.family("media_active_calls", "gauge", "Calls in progress.");
            out.sample("media_active_calls", &[], calls.round());
            out.family(
                "process_start_time_seconds",
                "gauge",
                "Start time of the process since unix epoch in seconds.",
            );
            out.sample("process_start_time_seconds", &[], seconds(0));
        }
        _ => {}
    }
    out.text
}
