//! The Redis observer: client metrics without touching the clients.
//!
//! A scrape job with `redis_observer:` does not GET `/metrics`; each target's `__address__`
//! is a Redis node, and every interval the observer runs `INFO clients`, `INFO stats` and
//! `CLIENT LIST` over its own connection to that node (kept open between polls, reopened
//! after an error; never `MONITOR`), and prints what it saw as a Prometheus text exposition
//! (format 0.0.4) that the scrape path then parses, relabels and stores like any body. The
//! series carry the node's target labels (its placement); the callers are labels:
//!
//! | series | type | what |
//! | --- | --- | --- |
//! | `epicenter_redis_up` | gauge | 1 when the poll worked; 0 when the node refused or dropped the connection (then nothing else is printed, as redis_exporter's `redis_up 0`) |
//! | `epicenter_redis_client_connections{caller_host,caller_service}` | gauge | connections open now, per caller |
//! | `epicenter_redis_client_connections_created_total{caller_host,caller_service}` | counter | connections whose client id was not listed at the previous poll |
//! | `epicenter_redis_client_connections_closed_total{caller_host,caller_service}` | counter | client ids listed at the previous poll and gone now |
//! | `epicenter_redis_client_last_command_connections{caller_host,command}` | gauge | connections whose last command (`cmd`) was this one |
//! | `epicenter_redis_client_idle_seconds` | histogram | idle time of the connections listed, seconds |
//! | `epicenter_redis_client_age_seconds` | histogram | age of the connections listed, seconds |
//! | `epicenter_redis_clients_output_buffer_over_threshold` | gauge | connections whose output buffer (`omem`) exceeds `output_buffer_threshold_bytes` |
//! | `epicenter_redis_connected_clients`, `…_blocked_clients`, `…_maxclients` | gauge | from `INFO clients` |
//! | `epicenter_redis_connections_received_total`, `…_rejected_total` | counter | `INFO stats` `total_connections_received`, `rejected_connections` |
//! | `epicenter_redis_observer_clients_listed` | gauge | connections `CLIENT LIST` returned, observers' own left out (0 when the listing was skipped) |
//! | `epicenter_redis_observer_listing_skipped` | gauge | 1 when the node had more than `max_clients_listed` clients and `CLIENT LIST` was not run |
//!
//! A caller is the client's address (`addr` of `CLIENT LIST`, Redis's `CLIENT LIST` reply
//! format) mapped to a host by the job's `callers` networks (first match wins), else by the
//! placement of a known target at that IP (any job's: a scraped service calling Redis from
//! the address it is scraped at), else (with `reverse_dns`) by its PTR name, else it is its
//! own `caller_host` (the IP) with an empty `caller_service`. The
//! observer's own connection is left out. Connections opened and closed between two polls are
//! not seen one by one; `…connections_received_total` still counts them.
//!
//! A node that refuses or drops connections (dead: `kill -9`, stopped) is `epicenter_redis_up 0`
//! and the scrape succeeds, as redis_exporter reports a dead node; a node that does not answer
//! within the scrape timeout (hung: `SIGSTOP`, a stuck host) fails the scrape (`up` 0). The
//! detector tells a lost node from a hung one by exactly that difference. A failed `AUTH` or
//! command fails the scrape with the reason (never the password) in the `scrapes` table.
//!
//! Cost: `CLIENT LIST` is O(connections) on the node's main thread; above
//! `max_clients_listed` connections (`INFO clients`' `connected_clients`) the listing is
//! skipped and only the `INFO` series are printed, so a node with a connection leak is not
//! slowed further by its observer.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::net::IpAddr;

use serde::Deserialize;

/// `redis_observer:` of a scrape job.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisObserverConfig {
    /// Networks of the callers and the host (and optionally service) they stand for; the
    /// first network holding a client's address names its caller.
    #[serde(default, deserialize_with = "epicenter_config::null_as_default")]
    pub callers: Vec<CallerNetwork>,
    /// Above this many connected clients (`INFO clients`), `CLIENT LIST` is not run. Default
    /// 20,000 (a node at Redis's default `maxclients` of 10,000 is listed in full).
    #[serde(default = "default_max_clients_listed")]
    pub max_clients_listed: u64,
    /// A connection whose output buffer (`omem`) is over this many bytes is counted in
    /// `epicenter_redis_clients_output_buffer_over_threshold`. Default 1 MiB.
    #[serde(default = "default_output_buffer_threshold")]
    pub output_buffer_threshold_bytes: u64,
    /// Name a caller that no network and no known target places by its reverse-DNS (PTR)
    /// name, the trailing dot removed, as `caller_host`. Default false. Names are cached for
    /// [`REVERSE_NAME_TTL`] (failures too); a poll waits at most [`REVERSE_LOOKUP_BUDGET`]
    /// for lookups and names the rest by IP until their answer is in.
    #[serde(default)]
    pub reverse_dns: bool,
}

/// How long a caller's reverse-DNS name (or its failure) is kept: 5 minutes.
pub const REVERSE_NAME_TTL: std::time::Duration = std::time::Duration::from_secs(300);

/// The longest one poll waits for reverse lookups: 500 ms.
pub const REVERSE_LOOKUP_BUDGET: std::time::Duration = std::time::Duration::from_millis(500);

/// The most reverse lookups one poll starts: 64.
pub const REVERSE_LOOKUPS_PER_POLL: usize = 64;

/// Reverse-DNS names of caller addresses, with when each was asked.
#[derive(Debug, Default)]
pub struct ReverseNames {
    cache: HashMap<IpAddr, (Option<String>, std::time::Instant)>,
}

impl ReverseNames {
    /// The cached name of `ip`, if it has one.
    pub fn name(&self, ip: &IpAddr) -> Option<&str> {
        self.cache.get(ip).and_then(|(name, _)| name.as_deref())
    }

    /// Looks up the PTR names of those of `ips` not cached (or cached longer than
    /// [`REVERSE_NAME_TTL`] ago), at most [`REVERSE_LOOKUPS_PER_POLL`] at once and within
    /// [`REVERSE_LOOKUP_BUDGET`]; an address without a name, or whose lookup failed, is
    /// cached as nameless. Lookups still running at the budget are dropped and asked again
    /// at the next poll.
    pub async fn refresh(&mut self, resolver: &hickory_resolver::TokioAsyncResolver, ips: &[IpAddr]) {
        let now = std::time::Instant::now();
        let due: Vec<IpAddr> = ips
            .iter()
            .filter(|ip| {
                self.cache
                    .get(ip)
                    .is_none_or(|(_, asked)| now.duration_since(*asked) > REVERSE_NAME_TTL)
            })
            .take(REVERSE_LOOKUPS_PER_POLL)
            .copied()
            .collect();
        if due.is_empty() {
            return;
        }
        let lookups = due.iter().map(|ip| async move {
            let name = resolver.reverse_lookup(*ip).await.ok().and_then(|names| {
                names
                    .iter()
                    .next()
                    .map(|name| name.to_utf8().trim_end_matches('.').to_string())
            });
            (*ip, name)
        });
        let Ok(answers) = tokio::time::timeout(REVERSE_LOOKUP_BUDGET, futures_util::future::join_all(lookups)).await
        else {
            return;
        };
        for (ip, name) in answers {
            self.cache.insert(ip, (name, now));
        }
    }
}

fn default_max_clients_listed() -> u64 {
    20_000
}

fn default_output_buffer_threshold() -> u64 {
    1 << 20
}

/// One entry of `redis_observer.callers`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallerNetwork {
    /// An address or a network in CIDR notation (`10.1.2.0/24`, `127.0.0.2/32`, `::1/128`).
    pub network: String,
    /// The host the network's callers run on (`caller_host`).
    pub host: String,
    /// The service, when the network holds one service's instances only (`caller_service`).
    #[serde(default)]
    pub service: String,
}

/// Checks `redis_observer` of the job at `key` (e.g. `scrape_configs[3].redis_observer`):
/// every network parses and names a host. Returns one message per problem, with its key path.
pub fn problems(config: &RedisObserverConfig, key: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for (index, caller) in config.callers.iter().enumerate() {
        if parse_network(&caller.network).is_none() {
            found.push((
                format!("{key}.callers[{index}].network"),
                format!(
                    "'{}' is not an address or a network in CIDR notation (e.g. 10.1.2.0/24)",
                    caller.network
                ),
            ));
        }
        if caller.host.is_empty() {
            found.push((format!("{key}.callers[{index}].host"), "must name a host".to_string()));
        }
    }
    found
}

/// A network of `callers`: an address alone is a network of one.
fn parse_network(text: &str) -> Option<ipnet::IpNet> {
    let text = text.trim();
    text.parse::<ipnet::IpNet>()
        .ok()
        .or_else(|| text.parse::<IpAddr>().ok().map(ipnet::IpNet::from))
}

/// What the observer of one node remembers between polls.
#[derive(Default)]
pub struct ObserverState {
    connection: Option<(redis::aio::MultiplexedConnection, u64)>,
    /// Client ids listed at the previous poll and their callers; `None` before the first.
    previous: Option<HashMap<u64, Caller>>,
    created_total: BTreeMap<Caller, u64>,
    closed_total: BTreeMap<Caller, u64>,
    /// Whether the last poll found the node refusing or dropping connections.
    unreachable: bool,
    /// Callers' reverse-DNS names (`reverse_dns`).
    reverse: ReverseNames,
    /// Every (caller host, command) printed so far: one without connections now reads 0.
    commands_seen: std::collections::BTreeSet<(String, String)>,
}

impl std::fmt::Debug for ObserverState {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ObserverState")
            .field("connected", &self.connection.is_some())
            .field("callers", &self.created_total.len())
            .finish()
    }
}

impl ObserverState {
    /// Forgets the connection (after a timeout a reply may still be on its way).
    pub fn disconnect(&mut self) {
        self.connection = None;
    }
}

/// `caller_host`, `caller_service`.
type Caller = (String, String);

/// TLS to the node (`rediss://`), from the job's `tls_config`: PEM bytes as read from its
/// `ca`/`ca_file`, `cert`/`cert_file` and `key`/`key_file`.
#[derive(Clone, Default)]
pub struct Tls {
    /// CA certificates to trust instead of the system's roots.
    pub ca_pem: Option<Vec<u8>>,
    /// Client certificate and key, for a node with `tls-auth-clients yes`.
    pub client_pem: Option<(Vec<u8>, Vec<u8>)>,
    /// Accept any certificate (`insecure_skip_verify`).
    pub insecure: bool,
}

/// Credentials for `AUTH`: the job's `basic_auth` user (empty: Redis's `default` user) and
/// password.
#[derive(Clone, Copy)]
pub struct Credentials<'a> {
    /// ACL user name; empty for the `default` user (`AUTH <password>`).
    pub username: &'a str,
    /// Password.
    pub password: &'a str,
}

/// One poll's node and how to reach and read it.
#[derive(Clone, Copy)]
pub struct Node<'a> {
    /// `host:port` of the Redis node.
    pub address: &'a str,
    /// `AUTH`, from the job's `basic_auth`.
    pub credentials: Option<Credentials<'a>>,
    /// TLS, from the job's `tls_config`.
    pub tls: Option<&'a Tls>,
    /// Callers no `callers` network holds, placed by the collector's targets: IP → (host,
    /// service).
    pub known: &'a HashMap<IpAddr, (String, String)>,
    /// For `reverse_dns`.
    pub resolver: Option<&'a hickory_resolver::TokioAsyncResolver>,
    /// How long the connection and each command may take (the job's `scrape_timeout`).
    pub timeout: std::time::Duration,
}

/// The name the observer's connections give themselves (`CLIENT SETNAME`): they show as such
/// in `CLIENT LIST`, and every observer (another job's, another epicenter's) leaves them out.
pub const OBSERVER_CLIENT_NAME: &str = "epicenter-observer";

/// Polls `node` once, the connection and each command waiting at most `node.timeout`, and
/// returns the exposition text. `node.known` places callers that no `callers` network holds;
/// `node.resolver` names the rest by reverse DNS when `reverse_dns` is set.
///
/// # Errors
/// The node cannot be reached, refuses `AUTH`, or answers a command with an error: the
/// message names the command; the password never appears in it.
pub async fn observe(
    node: Node<'_>,
    config: &RedisObserverConfig,
    state: &mut ObserverState,
) -> Result<String, String> {
    let address = node.address;
    match poll(node, config, state).await {
        Ok(text) => {
            if state.unreachable {
                tracing::info!(node = %address, "the Redis node answers again");
            }
            state.unreachable = false;
            Ok(text)
        }
        Err(failure) => {
            state.disconnect();
            if !failure.unreachable {
                return Err(failure.message);
            }
            // As redis_exporter's `redis_up 0`: the observer answered, the node did not.
            if !state.unreachable {
                tracing::warn!(node = %address, error = %failure.message, "the Redis node refuses or dropped the observer's connection: epicenter_redis_up 0 until it answers");
            }
            state.unreachable = true;
            Ok("# TYPE epicenter_redis_up gauge\nepicenter_redis_up 0\n".to_string())
        }
    }
}

/// Why a poll failed: `unreachable` when the node refused or dropped the connection (it is
/// down), else a command or authentication failure (the message says which).
struct Failure {
    message: String,
    unreachable: bool,
}

impl Failure {
    fn of(context: &str, error: &redis::RedisError) -> Failure {
        Failure {
            message: format!("{context}: {}", describe(error)),
            // Refused, reset or closed: the node (or its host) is gone. A TLS handshake
            // that fails (an untrusted certificate) is a configuration error, not a loss.
            unreachable: (error.is_connection_refusal() || error.is_connection_dropped())
                && !error.is_timeout()
                && !is_tls_failure(error),
        }
    }
}

async fn poll(node: Node<'_>, config: &RedisObserverConfig, state: &mut ObserverState) -> Result<String, Failure> {
    let Node {
        address,
        credentials,
        tls,
        known,
        resolver,
        timeout,
    } = node;
    if state.connection.is_none() {
        state.connection = Some(connect(address, credentials, tls, timeout).await?);
    }
    let Some((connection, own_id)) = state.connection.as_mut() else {
        return Err(Failure {
            message: "no connection".to_string(),
            unreachable: true,
        });
    };
    let own_id = *own_id;
    let clients: String = redis::cmd("INFO")
        .arg("clients")
        .query_async(connection)
        .await
        .map_err(|error| Failure::of("INFO clients", &error))?;
    let stats: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(connection)
        .await
        .map_err(|error| Failure::of("INFO stats", &error))?;
    let info = parse_info(&clients)
        .chain(parse_info(&stats))
        .collect::<HashMap<_, _>>();
    let connected = info
        .get("connected_clients")
        .and_then(|value| value.parse::<u64>().ok());
    let listing = match connected {
        Some(count) if count > config.max_clients_listed => None,
        _ => {
            let text: String = redis::cmd("CLIENT")
                .arg("LIST")
                .arg("TYPE")
                .arg("normal")
                .query_async(connection)
                .await
                .map_err(|error| Failure::of("CLIENT LIST", &error))?;
            Some(text)
        }
    };
    let networks: Vec<(ipnet::IpNet, &CallerNetwork)> = config
        .callers
        .iter()
        .filter_map(|caller| Some((parse_network(&caller.network)?, caller)))
        .collect();
    let mut out = String::with_capacity(4096);
    out.push_str("# TYPE epicenter_redis_up gauge\nepicenter_redis_up 1\n");
    write_info(&mut out, &info);
    match listing {
        Some(text) => {
            let clients: Vec<Client> = parse_client_list(&text)
                .filter(|client| client.id != own_id && client.name != OBSERVER_CLIENT_NAME)
                .collect();
            let named = match resolver.filter(|_| config.reverse_dns) {
                Some(resolver) => {
                    let mut unplaced: Vec<IpAddr> = clients
                        .iter()
                        .filter_map(|client| client.ip)
                        .filter(|ip| {
                            !known.contains_key(ip) && !networks.iter().any(|(network, _)| network.contains(ip))
                        })
                        .collect();
                    unplaced.sort_unstable();
                    unplaced.dedup();
                    state.reverse.refresh(resolver, &unplaced).await;
                    let mut named = known.clone();
                    for ip in unplaced {
                        if let Some(name) = state.reverse.name(&ip) {
                            named.insert(ip, (name.to_string(), String::new()));
                        }
                    }
                    Some(named)
                }
                None => None,
            };
            write_clients(
                &mut out,
                &clients,
                &networks,
                named.as_ref().unwrap_or(known),
                config,
                state,
            );
        }
        None => {
            // Too many connections to list: keep the counters' series (their values stand
            // still) and say the listing was skipped.
            let _ = writeln!(out, "# TYPE epicenter_redis_observer_clients_listed gauge");
            let _ = writeln!(out, "epicenter_redis_observer_clients_listed 0");
            let _ = writeln!(out, "# TYPE epicenter_redis_observer_listing_skipped gauge");
            let _ = writeln!(out, "epicenter_redis_observer_listing_skipped 1");
            state.previous = None;
            write_counters(&mut out, state);
        }
    }
    Ok(out)
}

async fn connect(
    address: &str,
    credentials: Option<Credentials<'_>>,
    tls: Option<&Tls>,
    timeout: std::time::Duration,
) -> Result<(redis::aio::MultiplexedConnection, u64), Failure> {
    use redis::IntoConnectionInfo as _;
    let url = match tls {
        Some(tls) if tls.insecure => format!("rediss://{address}/#insecure"),
        Some(_) => format!("rediss://{address}/"),
        None => format!("redis://{address}/"),
    };
    let info = url.into_connection_info().map_err(|error| Failure {
        message: format!("the address '{address}' is not host:port: {error}"),
        unreachable: false,
    })?;
    let info = match credentials {
        Some(credentials) => {
            let mut settings = info.redis_settings().clone().set_password(credentials.password);
            if !credentials.username.is_empty() {
                settings = settings.set_username(credentials.username);
            }
            info.set_redis_settings(settings)
        }
        None => info,
    };
    let client = match tls {
        Some(tls) => redis::Client::build_with_tls(
            info,
            redis::TlsCertificates {
                client_tls: tls
                    .client_pem
                    .clone()
                    .map(|(client_cert, client_key)| redis::ClientTlsConfig {
                        client_cert,
                        client_key,
                    }),
                root_cert: tls.ca_pem.clone(),
            },
        ),
        None => redis::Client::open(info),
    }
    .map_err(|error| Failure::of(&format!("connecting to {address}"), &error))?;
    let mut connection = client
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new()
                .set_connection_timeout(Some(timeout))
                .set_response_timeout(Some(timeout)),
        )
        .await
        .map_err(|error| Failure::of(&format!("connecting to {address}"), &error))?;
    let own_id: u64 = redis::cmd("CLIENT")
        .arg("ID")
        .query_async(&mut connection)
        .await
        .map_err(|error| Failure::of("CLIENT ID", &error))?;
    // Named, so that other observers leave it out and an operator sees what it is; an ACL
    // user without `client|setname` still observes (its connection stays unnamed).
    let _: redis::RedisResult<()> = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg(OBSERVER_CLIENT_NAME)
        .query_async(&mut connection)
        .await;
    Ok((connection, own_id))
}

/// Whether `error` comes from the TLS layer (rustls reports certificate and handshake
/// failures as I/O errors of kind `InvalidData`).
fn is_tls_failure(error: &redis::RedisError) -> bool {
    let text = error.to_string().to_lowercase();
    text.contains("certificate") || text.contains("tls") || text.contains("handshake")
}

/// A Redis error in words, never with a password (the redis crate's errors name the command
/// and the server's reply, not the credentials).
fn describe(error: &redis::RedisError) -> String {
    if error.kind() == redis::ErrorKind::AuthenticationFailed {
        "authentication failed (check the job's basic_auth username and password)".to_string()
    } else if error.code() == Some("NOAUTH") {
        "the node requires a password (set the job's basic_auth)".to_string()
    } else {
        error.to_string()
    }
}

/// `key:value` lines of an `INFO` section (`# Section` headers and blank lines skipped).
fn parse_info(text: &str) -> impl Iterator<Item = (String, String)> + '_ {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.trim_end().split_once(':'))
        .map(|(key, value)| (key.to_string(), value.to_string()))
}

/// One line of `CLIENT LIST`.
#[derive(Debug, Clone, PartialEq)]
struct Client {
    id: u64,
    ip: Option<IpAddr>,
    age_seconds: f64,
    idle_seconds: f64,
    output_buffer_bytes: u64,
    command: String,
    name: String,
}

/// The lines of a `CLIENT LIST` reply (`id=… addr=ip:port … age=… idle=… omem=… cmd=…`,
/// space-separated `field=value`); lines without an `id` are skipped.
fn parse_client_list(text: &str) -> impl Iterator<Item = Client> + '_ {
    text.lines().filter_map(|line| {
        let mut client = Client {
            id: 0,
            ip: None,
            age_seconds: 0.0,
            idle_seconds: 0.0,
            output_buffer_bytes: 0,
            command: String::new(),
            name: String::new(),
        };
        let mut has_id = false;
        for field in line.split(' ') {
            let Some((key, value)) = field.split_once('=') else {
                continue;
            };
            match key {
                "id" => {
                    client.id = value.parse().ok()?;
                    has_id = true;
                }
                "addr" => client.ip = address_ip(value),
                "age" => client.age_seconds = value.parse().unwrap_or(0.0),
                "idle" => client.idle_seconds = value.parse().unwrap_or(0.0),
                "omem" => client.output_buffer_bytes = value.parse().unwrap_or(0),
                "cmd" => client.command = value.to_string(),
                "name" => client.name = value.to_string(),
                _ => {}
            }
        }
        has_id.then_some(client)
    })
}

/// The IP of `ip:port` (`[v6]:port` or `v6:port` as Redis prints it); None for a Unix
/// socket's path.
fn address_ip(address: &str) -> Option<IpAddr> {
    let (host, _port) = address.rsplit_once(':')?;
    host.trim_start_matches('[').trim_end_matches(']').parse().ok()
}

fn caller_of(
    ip: Option<IpAddr>,
    networks: &[(ipnet::IpNet, &CallerNetwork)],
    known: &HashMap<IpAddr, (String, String)>,
) -> Caller {
    let Some(ip) = ip else {
        return ("unix".to_string(), String::new());
    };
    if let Some((_, caller)) = networks.iter().find(|(network, _)| network.contains(&ip)) {
        return (caller.host.clone(), caller.service.clone());
    }
    known
        .get(&ip)
        .cloned()
        .unwrap_or_else(|| (ip.to_string(), String::new()))
}

/// Buckets of the idle and age histograms, seconds.
const SECONDS_BUCKETS: [f64; 7] = [1.0, 10.0, 60.0, 300.0, 1800.0, 3600.0, 86400.0];

fn write_info(out: &mut String, info: &HashMap<String, String>) {
    for (field, name, kind) in [
        ("connected_clients", "epicenter_redis_connected_clients", "gauge"),
        ("blocked_clients", "epicenter_redis_blocked_clients", "gauge"),
        ("maxclients", "epicenter_redis_maxclients", "gauge"),
        (
            "total_connections_received",
            "epicenter_redis_connections_received_total",
            "counter",
        ),
        (
            "rejected_connections",
            "epicenter_redis_connections_rejected_total",
            "counter",
        ),
    ] {
        if let Some(value) = info.get(field).and_then(|value| value.parse::<f64>().ok()) {
            let family = name.trim_end_matches("_total");
            let _ = writeln!(out, "# TYPE {family} {kind}");
            let _ = writeln!(out, "{name} {value}");
        }
    }
}

fn write_clients(
    out: &mut String,
    clients: &[Client],
    networks: &[(ipnet::IpNet, &CallerNetwork)],
    known: &HashMap<IpAddr, (String, String)>,
    config: &RedisObserverConfig,
    state: &mut ObserverState,
) {
    let mut open: BTreeMap<Caller, u64> = BTreeMap::new();
    let mut commands: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut now: HashMap<u64, Caller> = HashMap::with_capacity(clients.len());
    let mut over_threshold = 0u64;
    for client in clients {
        let caller = caller_of(client.ip, networks, known);
        *open.entry(caller.clone()).or_default() += 1;
        if !client.command.is_empty() {
            *commands.entry((caller.0.clone(), client.command.clone())).or_default() += 1;
        }
        if client.output_buffer_bytes > config.output_buffer_threshold_bytes {
            over_threshold += 1;
        }
        now.insert(client.id, caller);
    }
    // Created: ids not listed before; closed: ids listed before and gone. The first poll
    // only sets the baseline (every counter starts at 0 for the callers it sees).
    if let Some(previous) = state.previous.take() {
        for (id, caller) in &now {
            if !previous.contains_key(id) {
                *state.created_total.entry(caller.clone()).or_default() += 1;
            }
        }
        for (id, caller) in previous {
            if !now.contains_key(&id) {
                *state.closed_total.entry(caller).or_default() += 1;
            }
        }
    }
    for caller in open.keys() {
        state.created_total.entry(caller.clone()).or_default();
        state.closed_total.entry(caller.clone()).or_default();
    }
    state.previous = Some(now);

    let _ = writeln!(out, "# TYPE epicenter_redis_observer_clients_listed gauge");
    let _ = writeln!(out, "epicenter_redis_observer_clients_listed {}", clients.len());
    let _ = writeln!(out, "# TYPE epicenter_redis_observer_listing_skipped gauge");
    let _ = writeln!(out, "epicenter_redis_observer_listing_skipped 0");
    let _ = writeln!(out, "# TYPE epicenter_redis_client_connections gauge");
    // Callers seen before and without a connection now are printed at 0, so a caller that
    // lost every connection reads 0, not a gap.
    for caller in state.created_total.keys() {
        let count = open.get(caller).copied().unwrap_or(0);
        let _ = writeln!(
            out,
            "epicenter_redis_client_connections{{caller_host=\"{}\",caller_service=\"{}\"}} {count}",
            escape(&caller.0),
            escape(&caller.1)
        );
    }
    write_counters(out, state);
    let _ = writeln!(out, "# TYPE epicenter_redis_client_last_command_connections gauge");
    state.commands_seen.extend(commands.keys().cloned());
    for key in &state.commands_seen {
        let count = commands.get(key).copied().unwrap_or(0);
        let (host, command) = key;
        let _ = writeln!(
            out,
            "epicenter_redis_client_last_command_connections{{caller_host=\"{}\",command=\"{}\"}} {count}",
            escape(host),
            escape(command)
        );
    }
    let _ = writeln!(out, "# TYPE epicenter_redis_clients_output_buffer_over_threshold gauge");
    let _ = writeln!(
        out,
        "epicenter_redis_clients_output_buffer_over_threshold {over_threshold}"
    );
    write_histogram(
        out,
        "epicenter_redis_client_idle_seconds",
        clients.iter().map(|client| client.idle_seconds),
    );
    write_histogram(
        out,
        "epicenter_redis_client_age_seconds",
        clients.iter().map(|client| client.age_seconds),
    );
}

fn write_counters(out: &mut String, state: &ObserverState) {
    for (family, counts) in [
        ("epicenter_redis_client_connections_created", &state.created_total),
        ("epicenter_redis_client_connections_closed", &state.closed_total),
    ] {
        let _ = writeln!(out, "# TYPE {family} counter");
        for (caller, count) in counts {
            let _ = writeln!(
                out,
                "{family}_total{{caller_host=\"{}\",caller_service=\"{}\"}} {count}",
                escape(&caller.0),
                escape(&caller.1)
            );
        }
    }
}

fn write_histogram(out: &mut String, family: &str, values: impl Iterator<Item = f64>) {
    let mut buckets = [0u64; SECONDS_BUCKETS.len()];
    let (mut count, mut sum) = (0u64, 0.0);
    for value in values {
        count += 1;
        sum += value;
        for (bound, bucket) in SECONDS_BUCKETS.iter().zip(buckets.iter_mut()) {
            if value <= *bound {
                *bucket += 1;
            }
        }
    }
    let _ = writeln!(out, "# TYPE {family} histogram");
    for (bound, bucket) in SECONDS_BUCKETS.iter().zip(buckets) {
        let _ = writeln!(out, "{family}_bucket{{le=\"{bound}\"}} {bucket}");
    }
    let _ = writeln!(out, "{family}_bucket{{le=\"+Inf\"}} {count}");
    let _ = writeln!(out, "{family}_sum {sum}");
    let _ = writeln!(out, "{family}_count {count}");
}

/// A label value escaped for the text format (backslash, double quote, line feed).
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two lines as Redis 7.0.15 prints them (captured on this project's build machine),
    /// and a Unix-socket client.
    const LIST: &str = "id=4 addr=127.0.0.2:55878 laddr=127.0.0.1:7399 fd=7 name= age=12 idle=3 flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=26 qbuf-free=20448 argv-mem=10 multi-mem=0 rbs=16384 rbp=16384 obl=0 oll=0 omem=0 tot-mem=37658 events=r cmd=get user=default redir=-1 resp=2\n\
id=9 addr=[::1]:40000 laddr=[::1]:7399 fd=8 name=pool age=400 idle=0 flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=1024 rbp=0 obl=0 oll=1 omem=2097152 tot-mem=2100000 events=rw cmd=client|list user=default redir=-1 resp=3\n\
id=11 addr=/tmp/redis.sock:0 laddr=/tmp/redis.sock:0 fd=9 name= age=1 idle=1 flags=U db=0 cmd=ping\n";

    #[test]
    fn client_list_lines_give_id_address_age_idle_buffer_and_command() {
        let clients: Vec<Client> = parse_client_list(LIST).collect();
        assert_eq!(clients.len(), 3);
        assert_eq!(clients[0].id, 4);
        assert_eq!(clients[0].ip, Some("127.0.0.2".parse().unwrap()));
        assert_eq!((clients[0].age_seconds, clients[0].idle_seconds), (12.0, 3.0));
        assert_eq!(clients[0].command, "get");
        assert_eq!(clients[1].ip, Some("::1".parse().unwrap()));
        assert_eq!(clients[1].output_buffer_bytes, 2_097_152);
        assert_eq!(clients[1].command, "client|list");
        assert_eq!(clients[2].ip, None);
    }

    #[test]
    fn callers_are_the_first_network_holding_the_address_else_a_known_target_else_the_address() {
        let config = RedisObserverConfig {
            callers: vec![
                CallerNetwork {
                    network: "127.0.0.2".to_string(),
                    host: "dc-1-host-1".to_string(),
                    service: "backend".to_string(),
                },
                CallerNetwork {
                    network: "127.0.0.0/8".to_string(),
                    host: "loopback".to_string(),
                    service: String::new(),
                },
            ],
            max_clients_listed: 10,
            output_buffer_threshold_bytes: 1 << 20,
            reverse_dns: false,
        };
        assert!(problems(&config, "job").is_empty());
        let networks: Vec<_> = config
            .callers
            .iter()
            .map(|caller| (parse_network(&caller.network).unwrap(), caller))
            .collect();
        let known = HashMap::from([
            (
                "127.0.0.2".parse().unwrap(),
                ("elsewhere".to_string(), "api".to_string()),
            ),
            (
                "10.0.0.2".parse().unwrap(),
                ("dc-2-host-1".to_string(), "api".to_string()),
            ),
        ]);
        let caller = |ip: &str| caller_of(Some(ip.parse().unwrap()), &networks, &known);
        // A configured network wins over a known target at the same address.
        assert_eq!(caller("127.0.0.2"), ("dc-1-host-1".to_string(), "backend".to_string()));
        assert_eq!(caller("127.0.0.3"), ("loopback".to_string(), String::new()));
        assert_eq!(caller("10.0.0.2"), ("dc-2-host-1".to_string(), "api".to_string()));
        assert_eq!(caller("10.0.0.1"), ("10.0.0.1".to_string(), String::new()));
    }

    #[test]
    fn a_bad_network_or_a_missing_host_is_named_by_its_key_path() {
        let config = RedisObserverConfig {
            callers: vec![CallerNetwork {
                network: "10.0.0.0/33".to_string(),
                host: String::new(),
                service: String::new(),
            }],
            max_clients_listed: 10,
            output_buffer_threshold_bytes: 1,
            reverse_dns: false,
        };
        let found = problems(&config, "scrape_configs[2].redis_observer");
        let keys: Vec<&str> = found.iter().map(|(key, _)| key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "scrape_configs[2].redis_observer.callers[0].network",
                "scrape_configs[2].redis_observer.callers[0].host"
            ]
        );
    }

    /// Three polls: a baseline of ids 1, 2 (host a), then 2, 3, 4 (3 from a, 4 from b): one
    /// created and one closed for a, one created for b; then nothing from b: b closed one,
    /// and its connections read 0.
    #[test]
    fn created_and_closed_count_client_ids_between_polls() {
        let config = RedisObserverConfig {
            callers: vec![
                CallerNetwork {
                    network: "10.0.0.1/32".to_string(),
                    host: "a".to_string(),
                    service: String::new(),
                },
                CallerNetwork {
                    network: "10.0.0.2/32".to_string(),
                    host: "b".to_string(),
                    service: String::new(),
                },
            ],
            max_clients_listed: 10,
            output_buffer_threshold_bytes: 1 << 20,
            reverse_dns: false,
        };
        let networks: Vec<_> = config
            .callers
            .iter()
            .map(|caller| (parse_network(&caller.network).unwrap(), caller))
            .collect();
        let client = |id: u64, ip: &str| Client {
            id,
            ip: Some(ip.parse().unwrap()),
            age_seconds: 0.5,
            idle_seconds: 20.0,
            output_buffer_bytes: 0,
            command: "get".to_string(),
            name: String::new(),
        };
        let mut state = ObserverState::default();
        let mut poll = |clients: &[Client]| {
            let mut out = String::new();
            write_clients(&mut out, clients, &networks, &HashMap::new(), &config, &mut state);
            out
        };
        let first = poll(&[client(1, "10.0.0.1"), client(2, "10.0.0.1")]);
        assert!(first.contains("epicenter_redis_client_connections{caller_host=\"a\",caller_service=\"\"} 2\n"));
        assert!(first
            .contains("epicenter_redis_client_connections_created_total{caller_host=\"a\",caller_service=\"\"} 0\n"));
        let second = poll(&[client(2, "10.0.0.1"), client(3, "10.0.0.1"), client(4, "10.0.0.2")]);
        for line in [
            "epicenter_redis_client_connections_created_total{caller_host=\"a\",caller_service=\"\"} 1\n",
            "epicenter_redis_client_connections_closed_total{caller_host=\"a\",caller_service=\"\"} 1\n",
            "epicenter_redis_client_connections_created_total{caller_host=\"b\",caller_service=\"\"} 1\n",
            "epicenter_redis_client_last_command_connections{caller_host=\"a\",command=\"get\"} 2\n",
            "epicenter_redis_client_idle_seconds_bucket{le=\"10\"} 0\n",
            "epicenter_redis_client_idle_seconds_bucket{le=\"60\"} 3\n",
            "epicenter_redis_client_age_seconds_bucket{le=\"1\"} 3\n",
            "epicenter_redis_client_idle_seconds_sum 60\n",
        ] {
            assert!(second.contains(line), "{line} not in\n{second}");
        }
        let third = poll(&[client(2, "10.0.0.1"), client(3, "10.0.0.1")]);
        assert!(
            third.contains("epicenter_redis_client_connections{caller_host=\"b\",caller_service=\"\"} 0\n"),
            "{third}"
        );
        assert!(
            third
                .contains("epicenter_redis_client_connections_closed_total{caller_host=\"b\",caller_service=\"\"} 1\n"),
            "{third}"
        );
        // The text parses as an exposition.
        let parsed = crate::exposition::parse(third.as_bytes(), crate::exposition::ParseOptions::default());
        assert!(parsed.is_ok(), "{parsed:?}");
    }

    #[test]
    fn info_sections_give_their_fields() {
        let info: HashMap<String, String> = parse_info(
            "# Clients\r\nconnected_clients:7\r\nmaxclients:10000\r\nblocked_clients:0\r\n\r\n# Stats\r\ntotal_connections_received:42\r\nrejected_connections:1\r\n",
        )
        .collect();
        let mut out = String::new();
        write_info(&mut out, &info);
        for line in [
            "epicenter_redis_connected_clients 7\n",
            "epicenter_redis_maxclients 10000\n",
            "# TYPE epicenter_redis_connections_received counter\n",
            "epicenter_redis_connections_received_total 42\n",
            "epicenter_redis_connections_rejected_total 1\n",
        ] {
            assert!(out.contains(line), "{line} not in\n{out}");
        }
    }
}
