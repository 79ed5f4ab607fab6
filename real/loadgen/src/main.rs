//! `epicenter-loadgen`: real workloads for the end-to-end tests and `scripts/real-demo`, a
//! program of its own beside the product (not a subcommand of `epicenter`).
//!
//! `epicenter-loadgen redis` ([`redis_load`]): a real Redis workload from a set of "backend"
//! instances, each with its own connection pool per Redis node and client-side consistent
//! hashing over the nodes, exporting what a Spring service with Lettuce pools exports.
//! `epicenter-loadgen http` ([`http_load`]): HTTP GETs at a fixed rate per target with Micrometer's
//! client latency timer.
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

mod http_load;
mod redis_load;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use clap::{Args, Parser, Subcommand};

/// Real workloads for end-to-end trials of epicenter: `redis` drives real Redis nodes from
/// backend instances that export Lettuce/commons-pool2 metrics; `http` measures latency to
/// HTTP services as a Micrometer client does (see scripts/real-demo, docs/real.md).
#[derive(Parser, Debug)]
#[command(name = "epicenter-loadgen", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    kind: LoadKind,
}

#[derive(Subcommand, Debug)]
enum LoadKind {
    /// GET/SET traffic to real Redis nodes from N backend instances (Lettuce/commons-pool2
    /// metric names), each instance serving its own /metrics on 127.0.0.1.
    ///
    /// Example (six nodes started with redis-server on ports 7001..7006):
    ///   epicenter-loadgen redis --node redis-1-1=127.0.0.1:7001 --node redis-1-2=127.0.0.1:7002 \
    ///     ... --instances 12 --targets-file backends.json
    #[command(verbatim_doc_comment)]
    Redis(RedisArgs),

    /// HTTP GETs at a fixed rate to each target, measuring latency per target the way a
    /// Spring client does (Micrometer's `http_client_requests_seconds`, `client_name` = the
    /// target's name), served on one /metrics endpoint on 127.0.0.1.
    ///
    /// Example (six services on ports 8001..8006):
    ///   epicenter-loadgen http --target jvm-1-1=127.0.0.1:8001 ... --path /work --rate 20 \
    ///     --targets-file client.json
    #[command(verbatim_doc_comment)]
    Http(HttpArgs),
}

/// Arguments of `epicenter-loadgen http`.
#[derive(Args, Debug)]
struct HttpArgs {
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

/// Arguments of `epicenter-loadgen redis`.
#[derive(Args, Debug)]
struct RedisArgs {
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

    /// On a connection error, drop every pooled connection of the instance, to every node,
    /// and connect again (at most once a second), as cluster clients refresh their topology
    /// (redis-py's `RedisCluster` re-initializes its nodes on a `ConnectionError`, Lettuce's
    /// adaptive refresh triggers on persistent reconnects): the reconnect storm the surviving
    /// nodes see after one is lost. Off by default (commons-pool2 + Lettuce keep their pools).
    #[arg(long)]
    refresh_on_error: bool,

    /// Write the instances' /metrics endpoints as a file_sd file (labels dc, host, service
    /// `backend`, pod).
    #[arg(long, value_name = "FILE")]
    targets_file: Option<PathBuf>,

    /// Stop after this long (e.g. 10m); default: until Ctrl-C.
    #[arg(long = "for", value_name = "DURATION", value_parser = humantime::parse_duration)]
    run_for: Option<Duration>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.kind {
        LoadKind::Redis(redis_args) => redis_load::run(redis_args),
        LoadKind::Http(http_args) => http_load::run(http_args),
    }
}

/// A tokio runtime, or the reason it could not start (exit 1).
fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| {
            eprintln!("error: cannot start the async runtime: {error}");
            ExitCode::from(1)
        })
}

/// Requests per second a generator accepts: one every 1000 s at the least, 100,000 at the most
/// (the interval between requests must be a representable, non-zero duration).
const RATE_RANGE: std::ops::RangeInclusive<f64> = 0.001..=100_000.0;

/// A request rate (requests per second) within [`RATE_RANGE`], for clap; the error names the
/// range.
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

#[cfg(test)]
fn parse_node(text: &str) -> Result<Node, String> {
    parse_named(text, "--node")
}

/// Every NAME=HOST:PORT given to `option`: each well formed, names unique, and each host
/// resolvable now (a name that does not resolve fails here, not as a stream of failed
/// connections). Errors name the option and the value.
fn parse_all(texts: &[String], option: &str) -> Result<Vec<Node>, String> {
    let mut nodes: Vec<Node> = Vec::with_capacity(texts.len());
    for text in texts {
        let node = parse_named(text, option)?;
        if nodes.iter().any(|known| known.name == node.name) {
            return Err(format!("{option} '{text}': the name '{}' is given twice", node.name));
        }
        std::net::ToSocketAddrs::to_socket_addrs(node.address.as_str())
            .map_err(|error| format!("{option} '{text}': cannot resolve '{}': {error}", node.address))?;
        nodes.push(node);
    }
    Ok(nodes)
}

/// `--targets-file`'s folder must exist before any endpoint starts.
fn check_targets_file(path: Option<&std::path::Path>) -> Result<(), String> {
    let Some(path) = path else { return Ok(()) };
    let folder = path.parent().filter(|folder| !folder.as_os_str().is_empty());
    match folder {
        Some(folder) if !folder.is_dir() => Err(format!(
            "--targets-file {}: the folder {} does not exist",
            path.display(),
            folder.display()
        )),
        _ => Ok(()),
    }
}

/// Ends a run: the runtime is shut down without waiting more than a second for blocking work
/// still in flight (connection attempts), so `--for` is kept.
fn finish(runtime: tokio::runtime::Runtime, code: ExitCode) -> ExitCode {
    runtime.shutdown_timeout(Duration::from_secs(1));
    code
}

/// NAME=HOST:PORT as given to `option`.
fn parse_named(text: &str, option: &str) -> Result<Node, String> {
    let (name, address) = text
        .split_once('=')
        .ok_or_else(|| format!("{option} '{text}': expected NAME=HOST:PORT, e.g. redis-1-1=127.0.0.1:7001"))?;
    let (host, port) = address
        .rsplit_once(':')
        .ok_or_else(|| format!("{option} '{text}': address '{address}' has no :PORT"))?;
    if name.is_empty() || host.is_empty() || port.parse::<u16>().map_or(true, |port| port == 0) {
        return Err(format!(
            "{option} '{text}': expected NAME=HOST:PORT with a port in 1..65535"
        ));
    }
    Ok(Node {
        name: name.to_string(),
        address: address.to_string(),
    })
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
