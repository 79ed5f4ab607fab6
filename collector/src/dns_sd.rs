//! DNS service discovery (Prometheus `<dns_sd_config>`, configured by
//! [`crate::config::DnsSdConfig`], as in Prometheus 2.42's
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

use crate::config::{DnsRecordType, DnsSdConfig, StaticConfig, DNS_SERVERS_ENV};
use hickory_resolver::config::{NameServerConfig, Protocol, ResolverConfig, ResolverOpts};
use hickory_resolver::error::ResolveErrorKind;
use hickory_resolver::TokioAsyncResolver;

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
