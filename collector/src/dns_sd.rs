//! DNS service discovery (Prometheus `<dns_sd_config>`, as in Prometheus 2.42's
//! `discovery/dns`): every `refresh_interval`, each name in `names` is looked up as an SRV,
//! A, AAAA or MX record, and each record becomes a target with `__meta_dns_name` and, for SRV
//! and MX, the record's target (`__meta_dns_srv_record_target`, `__meta_dns_srv_record_port`,
//! `__meta_dns_mx_record_target`, the name as the record holds it, trailing dot included).
//!
//! Names are resolved through the nameservers of `/etc/resolv.conf` with its search list and
//! `ndots`, as Prometheus does; [`DNS_SERVERS_ENV`] replaces the nameservers (a Consul agent's
//! DNS on port 8600, say), which `/etc/resolv.conf` cannot do for a port other than 53.
//! Answers are not cached between refreshes. A name that does not exist (`NXDOMAIN`) or has
//! no record of the type gives no targets; a name whose lookup fails (timeout, `SERVFAIL`)
//! keeps the targets it gave last.

use std::net::SocketAddr;
use std::time::Duration;

use epicenter_config::{Problems, PromDuration};
use hickory_resolver::config::{NameServerConfig, Protocol, ResolverConfig, ResolverOpts};
use hickory_resolver::error::ResolveErrorKind;
use hickory_resolver::TokioAsyncResolver;
use serde::Deserialize;

use crate::config::StaticConfig;

/// Environment variable naming the DNS servers `dns_sd_configs` ask instead of those of
/// `/etc/resolv.conf`: comma-separated `ip:port` (`127.0.0.1:8600`) or `ip` (port 53).
pub const DNS_SERVERS_ENV: &str = "EPICENTER_DNS_SERVERS";

/// `dns_sd_configs[]`: targets from DNS records (Prometheus `<dns_sd_config>`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DnsSdConfig {
    /// Names to look up (`_metrics._tcp.example.org`, `db.example.org`); at least one.
    pub names: Vec<String>,
    /// How often the names are looked up again. Default `30s` (Prometheus's).
    #[serde(default = "default_dns_refresh_interval")]
    pub refresh_interval: PromDuration,
    /// Which record to ask for. Default `SRV`.
    #[serde(default, rename = "type")]
    pub record_type: DnsRecordType,
    /// The port of every target, for A, AAAA and MX records (required there); SRV records
    /// carry their own port and ignore it.
    #[serde(default)]
    pub port: u16,
}

fn default_dns_refresh_interval() -> PromDuration {
    PromDuration(Duration::from_secs(30))
}

/// A `dns_sd_configs[].type`, read case-insensitively as Prometheus does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DnsRecordType {
    /// Service records: each gives a host name and a port (RFC 2782).
    #[default]
    Srv,
    /// IPv4 addresses.
    A,
    /// IPv6 addresses.
    Aaaa,
    /// Mail exchangers: each gives a host name; the port comes from `port`.
    Mx,
}

impl DnsRecordType {
    /// The record type as DNS writes it (`SRV`, `A`, `AAAA`, `MX`).
    pub fn as_str(self) -> &'static str {
        match self {
            DnsRecordType::Srv => "SRV",
            DnsRecordType::A => "A",
            DnsRecordType::Aaaa => "AAAA",
            DnsRecordType::Mx => "MX",
        }
    }
}

impl<'de> Deserialize<'de> for DnsRecordType {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        match text.to_ascii_uppercase().as_str() {
            "SRV" => Ok(DnsRecordType::Srv),
            "A" => Ok(DnsRecordType::A),
            "AAAA" => Ok(DnsRecordType::Aaaa),
            "MX" => Ok(DnsRecordType::Mx),
            _ => Err(serde::de::Error::custom(format!(
                "invalid DNS-SD record type '{text}': expected SRV, A, AAAA or MX"
            ))),
        }
    }
}

/// Records each problem of one `dns_sd_configs` entry, at `at(key)` paths.
pub fn problems(sd: &DnsSdConfig, at: &dyn Fn(&str) -> String, problems: &mut Problems) {
    if sd.names.is_empty() {
        problems.push(at("names"), "must list at least one name");
    }
    for (index, name) in sd.names.iter().enumerate() {
        if name.trim().is_empty() {
            problems.push(at(&format!("names[{index}]")), "is empty");
        }
    }
    if sd.record_type != DnsRecordType::Srv && sd.port == 0 {
        problems.push(
            at("port"),
            format!(
                "is required for {} records (only SRV records carry a port)",
                sd.record_type.as_str()
            ),
        );
    }
    if sd.refresh_interval.0.is_zero() {
        problems.push(at("refresh_interval"), "must be greater than 0");
    }
}

/// Reads [`DNS_SERVERS_ENV`]'s value: `ip[:port]` items, comma-separated; port 53 when not
/// given. Errors name the item that is not an address.
pub fn parse_dns_servers(text: &str) -> Result<Vec<SocketAddr>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| {
            item.parse::<SocketAddr>()
                .or_else(|_| item.parse::<std::net::IpAddr>().map(|ip| SocketAddr::new(ip, 53)))
                .map_err(|_| format!("'{item}' is not an ip:port or an ip (e.g. 127.0.0.1:8600)"))
        })
        .collect()
}

/// A resolver for `dns_sd_configs`: `servers` over UDP (TCP for truncated answers) when
/// given, else the system's (`/etc/resolv.conf`), without a cache (each refresh asks
/// again) and with `timeout` per attempt. Errors: `/etc/resolv.conf` cannot be read.
pub fn resolver(servers: &[SocketAddr], timeout: Duration) -> Result<TokioAsyncResolver, String> {
    let (config, mut options) = if servers.is_empty() {
        hickory_resolver::system_conf::read_system_conf()
            .map_err(|error| format!("dns_sd: cannot read /etc/resolv.conf ({error}); set {DNS_SERVERS_ENV}"))?
    } else {
        let mut config = ResolverConfig::new();
        for server in servers {
            config.add_name_server(NameServerConfig::new(*server, Protocol::Udp));
            config.add_name_server(NameServerConfig::new(*server, Protocol::Tcp));
        }
        (config, ResolverOpts::default())
    };
    options.cache_size = 0;
    options.timeout = timeout;
    options.attempts = 2;
    Ok(TokioAsyncResolver::tokio(config, options))
}

/// Looks `name` up as `sd`'s record type and returns one group per record, sorted by
/// address: `__address__` (`host:port`, `[ip]:port` for IPv6) and the `__meta_dns_*` labels.
/// A name that does not exist or has no such record gives no groups. Errors: the lookup
/// failed (timeout, refused, `SERVFAIL`), with the name and type.
pub async fn lookup(resolver: &TokioAsyncResolver, sd: &DnsSdConfig, name: &str) -> Result<Vec<StaticConfig>, String> {
    let port = sd.port;
    let failed = |error: hickory_resolver::error::ResolveError| match error.kind() {
        ResolveErrorKind::NoRecordsFound { .. } => Ok(Vec::new()),
        _ => Err(format!(
            "dns_sd: cannot look up {name} ({}): {error}",
            sd.record_type.as_str()
        )),
    };
    // (address, SRV target, SRV port, MX target) per record.
    let records: Vec<(String, String, String, String)> = match sd.record_type {
        DnsRecordType::Srv => match resolver.srv_lookup(name).await {
            Ok(found) => found
                .iter()
                .map(|srv| {
                    let target = srv.target().to_string();
                    let host = target.trim_end_matches('.').to_string();
                    (
                        join_host_port(&host, srv.port()),
                        target,
                        srv.port().to_string(),
                        String::new(),
                    )
                })
                .collect(),
            Err(error) => return failed(error),
        },
        DnsRecordType::Mx => match resolver.mx_lookup(name).await {
            Ok(found) => found
                .iter()
                .map(|mx| {
                    let target = mx.exchange().to_string();
                    let host = target.trim_end_matches('.').to_string();
                    (join_host_port(&host, port), String::new(), String::new(), target)
                })
                .collect(),
            Err(error) => return failed(error),
        },
        DnsRecordType::A => match resolver.ipv4_lookup(name).await {
            Ok(found) => found
                .iter()
                .map(|a| {
                    (
                        join_host_port(&a.0.to_string(), port),
                        String::new(),
                        String::new(),
                        String::new(),
                    )
                })
                .collect(),
            Err(error) => return failed(error),
        },
        DnsRecordType::Aaaa => match resolver.ipv6_lookup(name).await {
            Ok(found) => found
                .iter()
                .map(|aaaa| {
                    (
                        join_host_port(&aaaa.0.to_string(), port),
                        String::new(),
                        String::new(),
                        String::new(),
                    )
                })
                .collect(),
            Err(error) => return failed(error),
        },
    };
    let mut groups: Vec<StaticConfig> = records
        .into_iter()
        .map(|(address, srv_target, srv_port, mx_target)| {
            let mut labels = std::collections::BTreeMap::new();
            labels.insert("__meta_dns_name".to_string(), name.to_string());
            for (key, value) in [
                ("__meta_dns_srv_record_target", srv_target),
                ("__meta_dns_srv_record_port", srv_port),
                ("__meta_dns_mx_record_target", mx_target),
            ] {
                if !value.is_empty() {
                    labels.insert(key.to_string(), value);
                }
            }
            StaticConfig {
                targets: vec![address],
                labels,
            }
        })
        .collect();
    groups.sort_by(|a, b| a.targets.cmp(&b.targets));
    groups.dedup();
    Ok(groups)
}

/// `host:port`, with an IPv6 address in brackets (Go's `net.JoinHostPort`).
fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}
