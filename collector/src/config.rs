//! The collector's sections of the configuration file: `global` and `scrape_configs`, in the
//! shape of Prometheus's configuration reference (same keys, defaults and duration syntax).
//!
//! Unknown keys are errors that name their path
//! (`scrape_configs[1].relabel_configs[0].sorce_labels`). [`jobs`] checks everything that
//! needs no network (intervals, targets, relabel rules, TLS files) and reports every problem
//! at once; it returns each job with its defaults resolved and its relabel rules compiled.
//! [`CollectorConfig`] reads the two sections alone, for tools and tests that scrape without
//! the rest of epicenter's file.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use epicenter_config::{
    is_label_name, prometheus_only_warning, ByteSize, ConfigError, Problems, PromDuration, PrometheusOnly, Secret,
    TlsConfig,
};
use serde::Deserialize;

use crate::auth::{AuthSettings, Authorization, BasicAuth, OAuth2, ScrapeAuth};
use crate::relabel::{Relabel, RelabelConfig};

/// `global`: defaults shared by all jobs (Prometheus `<global>`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GlobalConfig {
    /// How often to scrape a target. Default `1m` (Prometheus's default).
    #[serde(default = "default_scrape_interval")]
    pub scrape_interval: PromDuration,
    /// How long a scrape may take. Default `10s`, or the interval when that is shorter
    /// (as Prometheus does); see [`GlobalConfig::timeout`].
    #[serde(default)]
    pub scrape_timeout: Option<PromDuration>,
    /// Labels added to every series this collector writes (e.g. `collector: eu-1`).
    #[serde(default, deserialize_with = "epicenter_config::null_as_default")]
    pub external_labels: BTreeMap<String, String>,
    /// Prometheus's rule evaluation interval: read, not used (see [`warnings`]).
    #[serde(default)]
    pub evaluation_interval: PrometheusOnly,
    /// Prometheus's query log file: read, not used (see [`warnings`]).
    #[serde(default)]
    pub query_log_file: PrometheusOnly,
    /// Default `body_size_limit` of every job (Prometheus 2.45 and later have it here).
    #[serde(default)]
    pub body_size_limit: Option<ByteSize>,
    /// Default `sample_limit` of every job.
    #[serde(default)]
    pub sample_limit: Option<u64>,
    /// Default `label_limit` of every job.
    #[serde(default)]
    pub label_limit: Option<u64>,
    /// Default `label_name_length_limit` of every job.
    #[serde(default)]
    pub label_name_length_limit: Option<u64>,
    /// Default `label_value_length_limit` of every job.
    #[serde(default)]
    pub label_value_length_limit: Option<u64>,
    /// Default `target_limit` of every job.
    #[serde(default)]
    pub target_limit: Option<u64>,
    /// Default `keep_dropped_targets` of every job (accepted; see the job's).
    #[serde(default)]
    pub keep_dropped_targets: Option<u64>,
    /// Default `scrape_protocols` of every job.
    #[serde(default)]
    pub scrape_protocols: Option<Vec<String>>,
}

impl Default for GlobalConfig {
    fn default() -> Self {
        GlobalConfig {
            scrape_interval: default_scrape_interval(),
            scrape_timeout: None,
            external_labels: BTreeMap::new(),
            evaluation_interval: None,
            query_log_file: None,
            body_size_limit: None,
            sample_limit: None,
            label_limit: None,
            label_name_length_limit: None,
            label_value_length_limit: None,
            target_limit: None,
            keep_dropped_targets: None,
            scrape_protocols: None,
        }
    }
}

impl GlobalConfig {
    /// The effective global timeout: as set, else `10s` capped at the global interval.
    pub fn timeout(&self) -> PromDuration {
        self.scrape_timeout
            .unwrap_or_else(|| PromDuration(default_scrape_timeout().0.min(self.scrape_interval.0)))
    }
}

fn default_scrape_interval() -> PromDuration {
    PromDuration(Duration::from_secs(60))
}

fn default_scrape_timeout() -> PromDuration {
    PromDuration(Duration::from_secs(10))
}

/// One scrape job (Prometheus `<scrape_config>`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScrapeConfig {
    /// The `job` label of every target of this job; unique across jobs; required (a missing
    /// one is reported with the job's other problems, not alone).
    #[serde(default)]
    pub job_name: String,
    /// Overrides `global.scrape_interval`.
    #[serde(default)]
    pub scrape_interval: Option<PromDuration>,
    /// Overrides `global.scrape_timeout`; must not exceed the job's interval.
    #[serde(default)]
    pub scrape_timeout: Option<PromDuration>,
    /// HTTP path of the metrics endpoint. Default `/metrics`.
    #[serde(default = "default_metrics_path")]
    pub metrics_path: String,
    /// `http` (default) or `https`.
    #[serde(default)]
    pub scheme: Scheme,
    /// URL query parameters sent with every scrape.
    #[serde(default, deserialize_with = "epicenter_config::null_as_default")]
    pub params: BTreeMap<String, Vec<String>>,
    /// Keep the target's own `job`/`instance`/… labels when they clash with ours. Default false.
    #[serde(default)]
    pub honor_labels: bool,
    /// Use the timestamps the target prints (the fleet simulator's clock). Default true.
    #[serde(default = "default_true")]
    pub honor_timestamps: bool,
    /// Fixed targets.
    #[serde(default, deserialize_with = "epicenter_config::null_as_default")]
    pub static_configs: Vec<StaticConfig>,
    /// Targets read from JSON or YAML files, re-read when they change.
    #[serde(default, deserialize_with = "epicenter_config::null_as_default")]
    pub file_sd_configs: Vec<FileSdConfig>,
    /// Targets from HTTP endpoints (Prometheus's HTTP SD), fetched every `refresh_interval`.
    #[serde(default, deserialize_with = "epicenter_config::null_as_default")]
    pub http_sd_configs: Vec<HttpSdConfig>,
    /// Targets from DNS SRV, A, AAAA or MX records, looked up every `refresh_interval`
    /// (looked up by the `dns_sd` module).
    #[serde(default, deserialize_with = "epicenter_config::null_as_default")]
    pub dns_sd_configs: Vec<DnsSdConfig>,
    /// Relabeling of targets before scraping.
    #[serde(default, deserialize_with = "epicenter_config::null_as_default")]
    pub relabel_configs: Vec<RelabelConfig>,
    /// Relabeling of scraped series before storage.
    #[serde(default, deserialize_with = "epicenter_config::null_as_default")]
    pub metric_relabel_configs: Vec<RelabelConfig>,
    /// Largest body accepted, in bytes after decompression (`10MiB`); larger scrapes fail.
    /// Default `global.body_size_limit`, else [`DEFAULT_BODY_SIZE_LIMIT`]; `0` = no limit
    /// (Prometheus's default, under which one gzip bomb can take all the memory there is).
    /// The effective value is [`Limits::body_size_bytes`].
    #[serde(default)]
    pub body_size_limit: Option<ByteSize>,
    /// Most samples accepted per scrape after metric relabeling; more fails the scrape.
    /// Default `global.sample_limit`, else [`DEFAULT_SAMPLE_LIMIT`]; 0 = no limit
    /// (Prometheus's default).
    #[serde(default)]
    pub sample_limit: Option<u64>,
    /// Most labels per series; more fails the scrape. Default `global.label_limit`, else
    /// [`DEFAULT_LABEL_LIMIT`]; 0 = no limit (Prometheus's default).
    #[serde(default)]
    pub label_limit: Option<u64>,
    /// Longest label name, in bytes; longer fails the scrape (Prometheus
    /// `label_name_length_limit`). Default `global`'s, else 0 = no limit.
    #[serde(default)]
    pub label_name_length_limit: Option<u64>,
    /// Longest label value, in bytes; longer fails the scrape (Prometheus
    /// `label_value_length_limit`). Default `global`'s, else 0 = no limit.
    #[serde(default)]
    pub label_value_length_limit: Option<u64>,
    /// Most targets the job may have after relabeling (Prometheus `target_limit`); past it
    /// none of the job's targets is scraped and each is down with the reason. Default
    /// `global`'s, else 0 = no limit.
    #[serde(default)]
    pub target_limit: Option<u64>,
    /// Prometheus's cap on dropped targets kept for its API (`keep_dropped_targets`):
    /// accepted; epicenter keeps none (it counts them), which is within any cap.
    #[serde(default)]
    pub keep_dropped_targets: Option<u64>,
    /// The exposition formats asked for, most wanted first (Prometheus `scrape_protocols`):
    /// `OpenMetricsText1.0.0`, `OpenMetricsText0.0.1`, `PrometheusText1.0.0`,
    /// `PrometheusText0.0.4`; `PrometheusProto` is left out of the request with a warning
    /// (epicenter reads the text formats). Default `global`'s, else OpenMetrics 1.0, then
    /// text 0.0.4 ([`ACCEPT`]).
    #[serde(default)]
    pub scrape_protocols: Option<Vec<String>>,
    /// TLS settings for `scheme: https` (Prometheus `tls_config`): a CA file for private
    /// CAs (the system's roots are trusted as well), a client certificate, or no verification.
    #[serde(default)]
    pub tls_config: Option<TlsConfig>,
    /// HTTP Basic authentication (Prometheus `basic_auth`; [`crate::auth`]).
    #[serde(default)]
    pub basic_auth: Option<BasicAuth>,
    /// An `Authorization` header (Prometheus `authorization`; [`crate::auth`]).
    #[serde(default)]
    pub authorization: Option<Authorization>,
    /// A bearer token, inline (Prometheus's older form of `authorization`).
    #[serde(default)]
    pub bearer_token: Option<Secret>,
    /// A file holding a bearer token, re-read when it changes.
    #[serde(default)]
    pub bearer_token_file: Option<PathBuf>,
    /// OAuth 2.0 client credentials (Prometheus `oauth2`; [`crate::auth::OAuth2`]).
    #[serde(default)]
    pub oauth2: Option<OAuth2>,
    /// HTTP, HTTPS or SOCKS5 proxy for the job's scrapes (user information, if any, is sent
    /// as `Proxy-Authorization`).
    #[serde(default)]
    pub proxy_url: Option<String>,
    /// Hosts, domains (`.example.com`) and networks (`10.0.0.0/8`) reached without the
    /// proxy, comma-separated. Needs `proxy_url`.
    #[serde(default)]
    pub no_proxy: Option<String>,
    /// Use the `HTTP_PROXY`, `HTTPS_PROXY` and `NO_PROXY` environment variables. Default
    /// false (Prometheus's): without it the environment's proxy is not used.
    #[serde(default)]
    pub proxy_from_environment: bool,
    /// Headers sent to the proxy (Prometheus `proxy_connect_header`: name → secret values;
    /// on the `CONNECT` of an https scrape and with each request forwarded for an http one).
    /// Needs `proxy_url`; never printed.
    #[serde(default, deserialize_with = "epicenter_config::null_as_default")]
    pub proxy_connect_header: BTreeMap<String, Vec<Secret>>,
    /// Extra request headers (Prometheus `http_headers`: per name, `values`, `secrets`,
    /// `files`; [`crate::headers`]).
    #[serde(default, deserialize_with = "epicenter_config::null_as_default")]
    pub http_headers: BTreeMap<String, crate::headers::HeaderValues>,
    /// Follow up to 10 HTTP redirects (Prometheus `follow_redirects`). Default true; false
    /// makes a `3xx` answer a failed scrape.
    #[serde(default = "default_true")]
    pub follow_redirects: bool,
    /// Prometheus's `enable_http2` (default true), accepted for compatibility: epicenter
    /// scrapes over HTTP/1.1 either way (what `false` asks for; with `true` Prometheus may
    /// negotiate HTTP/2 over TLS, which changes nothing a target serves).
    #[serde(default = "default_true")]
    pub enable_http2: bool,
    /// Observe Redis nodes instead of scraping `/metrics`: each target's `__address__` is a
    /// Redis node polled with `INFO` and `CLIENT LIST` ([`crate::redis_observer`]);
    /// `basic_auth` (username, password or password_file) is its `AUTH`; `metrics_path`,
    /// `scheme`, `params` and the HTTP settings do not apply.
    #[serde(default)]
    pub redis_observer: Option<crate::redis_observer::RedisObserverConfig>,
}

impl ScrapeConfig {
    /// Makes each relative file path of the job relative to `directory`, the folder of the
    /// file that holds the job, as Prometheus does (`SetDirectory`): TLS files, secret and
    /// token files, `file_sd_configs` files, `http_headers` files, and those of
    /// `http_sd_configs`. Absolute paths stay as they are.
    pub fn set_directory(&mut self, directory: &Path) {
        let join = |path: &mut PathBuf| epicenter_config::resolve_relative(directory, path);
        let auth = |basic: &mut Option<BasicAuth>, authorization: &mut Option<Authorization>| {
            basic.iter_mut().for_each(|basic| basic.set_directory(directory));
            authorization
                .iter_mut()
                .for_each(|authorization| authorization.set_directory(directory));
        };
        self.tls_config.iter_mut().for_each(|tls| tls.set_directory(directory));
        auth(&mut self.basic_auth, &mut self.authorization);
        self.bearer_token_file.iter_mut().for_each(join);
        self.oauth2
            .iter_mut()
            .for_each(|oauth2| oauth2.set_directory(directory));
        for file_sd in &mut self.file_sd_configs {
            for pattern in &mut file_sd.files {
                if Path::new(pattern.as_str()).is_relative() {
                    *pattern = directory.join(pattern.as_str()).to_string_lossy().into_owned();
                }
            }
        }
        for header in self.http_headers.values_mut() {
            header.files.iter_mut().for_each(join);
        }
        for sd in &mut self.http_sd_configs {
            sd.tls_config.iter_mut().for_each(|tls| tls.set_directory(directory));
            auth(&mut sd.basic_auth, &mut sd.authorization);
        }
    }

    /// The job's proxy, from `proxy_url`, `no_proxy` and `proxy_from_environment`.
    pub fn proxy(&self) -> crate::client::Proxy {
        match (&self.proxy_url, self.proxy_from_environment) {
            (Some(url), _) => crate::client::Proxy::Url {
                url: url.clone(),
                no_proxy: self.no_proxy.clone(),
                headers: self
                    .proxy_connect_header
                    .iter()
                    .flat_map(|(name, values)| values.iter().map(move |value| (name.clone(), value.clone())))
                    .collect(),
            },
            (None, true) => crate::client::Proxy::FromEnvironment,
            (None, false) => crate::client::Proxy::None,
        }
    }
}

/// `body_size_limit` when the job does not set one: 16 MiB, vmagent's default
/// (`-promscrape.maxScrapeSize`). The largest bodies of common exporters are a few MiB
/// (kube-state-metrics on large clusters); the limit applies to the decompressed body.
pub const DEFAULT_BODY_SIZE_LIMIT: u64 = 16 * 1024 * 1024;

/// `sample_limit` when the job does not set one: 50,000 series per target. Common exporters
/// stay far below it (node_exporter 1–3k, cAdvisor on a busy node 10–20k); a target past it
/// is usually a cardinality explosion, and 10 such targets of 100k series would take more
/// memory than the rest of a 1,000-target fleet. kube-state-metrics on large clusters needs
/// more: set the job's `sample_limit` (0 = none).
pub const DEFAULT_SAMPLE_LIMIT: u64 = 50_000;

/// `label_limit` when the job does not set one: 64 labels per series, above what real
/// exporters attach (the most in the captures of ../shared/fixtures/exposition is 18).
pub const DEFAULT_LABEL_LIMIT: u64 = 64;

/// `Accept` header of a job's scrapes without `scrape_protocols`: OpenMetrics 1.0 first, then
/// text 0.0.4 (what Prometheus 2.42 sends with its default protocols).
pub const ACCEPT: &str = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1";

/// Prometheus's `scrape_protocols` names and the media type each asks for, in the
/// `Accept` header (Prometheus `config.ScrapeProtocolsHeaders`).
pub const SCRAPE_PROTOCOLS: [(&str, &str); 5] = [
    ("OpenMetricsText1.0.0", "application/openmetrics-text;version=1.0.0"),
    ("OpenMetricsText0.0.1", "application/openmetrics-text;version=0.0.1"),
    ("PrometheusText1.0.0", "text/plain;version=1.0.0"),
    ("PrometheusText0.0.4", "text/plain;version=0.0.4"),
    (
        "PrometheusProto",
        "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited",
    ),
];

/// The `Accept` header for `protocols` (names of [`SCRAPE_PROTOCOLS`], most wanted first),
/// weighted as Prometheus weighs them (`q=0.6` for the first, one tenth less for each next,
/// `*/*` last); `PrometheusProto` is left out. `None`: the default, [`ACCEPT`].
pub fn accept_header(protocols: Option<&[String]>) -> String {
    let Some(protocols) = protocols else {
        return ACCEPT.to_string();
    };
    let mut weight = SCRAPE_PROTOCOLS.len() + 1;
    let mut parts = Vec::new();
    for protocol in protocols.iter().filter(|protocol| *protocol != "PrometheusProto") {
        if let Some((_, media_type)) = SCRAPE_PROTOCOLS.iter().find(|(name, _)| name == protocol) {
            parts.push(format!("{media_type};q=0.{weight}"));
            weight -= 1;
        }
    }
    parts.push(format!("*/*;q=0.{weight}"));
    parts.join(",")
}

/// Records problems of a `scrape_protocols` list at `path`: empty, a name Prometheus does
/// not have, a name twice, or only `PrometheusProto` (which epicenter cannot read).
fn scrape_protocol_problems(protocols: &[String], path: &str, problems: &mut Problems) {
    if protocols.is_empty() {
        problems.push(path, "must list at least one protocol");
    }
    let mut seen = BTreeSet::new();
    for (index, protocol) in protocols.iter().enumerate() {
        if !SCRAPE_PROTOCOLS.iter().any(|(name, _)| name == protocol) {
            let names: Vec<&str> = SCRAPE_PROTOCOLS.iter().map(|(name, _)| *name).collect();
            problems.push(
                format!("{path}[{index}]"),
                format!("unknown protocol '{protocol}'; expected one of {}", names.join(", ")),
            );
        } else if !seen.insert(protocol.as_str()) {
            problems.push(format!("{path}[{index}]"), format!("'{protocol}' is listed twice"));
        }
    }
    if !protocols.is_empty() && protocols.iter().all(|protocol| protocol == "PrometheusProto") {
        problems.push(
            path,
            "lists only PrometheusProto, which epicenter does not read; add OpenMetricsText1.0.0 or PrometheusText0.0.4",
        );
    }
}

/// A job's effective limits: its own setting, else `global`'s, else epicenter's default.
/// `0` turns a limit off, as in Prometheus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest body read, in bytes after decompression; `None` = no limit.
    pub body_size_bytes: Option<u64>,
    /// Most samples per scrape (0 = none).
    pub samples: u64,
    /// Most labels per series (0 = none).
    pub labels: u64,
    /// Longest label name, bytes (0 = none).
    pub label_name_bytes: u64,
    /// Longest label value, bytes (0 = none).
    pub label_value_bytes: u64,
    /// Most targets of the job after relabeling (0 = none).
    pub targets: u64,
}

impl Limits {
    /// `job`'s limits, with `global`'s where the job sets none.
    pub fn of(job: &ScrapeConfig, global: &GlobalConfig) -> Limits {
        let body = job.body_size_limit.or(global.body_size_limit);
        Limits {
            body_size_bytes: match body {
                None => Some(DEFAULT_BODY_SIZE_LIMIT),
                Some(ByteSize(0)) => None,
                Some(ByteSize(limit)) => Some(limit),
            },
            samples: job.sample_limit.or(global.sample_limit).unwrap_or(DEFAULT_SAMPLE_LIMIT),
            labels: job.label_limit.or(global.label_limit).unwrap_or(DEFAULT_LABEL_LIMIT),
            label_name_bytes: job
                .label_name_length_limit
                .or(global.label_name_length_limit)
                .unwrap_or(0),
            label_value_bytes: job
                .label_value_length_limit
                .or(global.label_value_length_limit)
                .unwrap_or(0),
            targets: job.target_limit.or(global.target_limit).unwrap_or(0),
        }
    }
}

fn default_metrics_path() -> String {
    "/metrics".to_string()
}

fn default_true() -> bool {
    true
}

/// URL scheme of a scrape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    /// Plain HTTP.
    #[default]
    Http,
    /// HTTP over TLS.
    Https,
}

/// `static_configs[]`: targets written in the file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticConfig {
    /// `host:port` of each target.
    pub targets: Vec<String>,
    /// Labels attached to every series of these targets (e.g. `dc`, `host`, `service`).
    #[serde(default, deserialize_with = "epicenter_config::null_as_default")]
    pub labels: BTreeMap<String, String>,
}

/// `http_sd_configs[]`: targets from an HTTP endpoint (Prometheus `<http_sd_config>` and its
/// HTTP SD protocol): a `GET` of `url` every `refresh_interval` answering `200` with
/// `Content-Type: application/json` and a list of `{"targets": […], "labels": {…}}`
/// groups ([`crate::discovery::fetch_http_targets`]). Each group's targets get
/// `__meta_url` for relabeling; after a failed refresh the previous targets stay.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSdConfig {
    /// `http://` or `https://` URL of the target list.
    pub url: String,
    /// How often the list is fetched. Default `60s` (Prometheus's).
    #[serde(default = "default_http_refresh_interval")]
    pub refresh_interval: PromDuration,
    /// HTTP Basic authentication towards the endpoint ([`crate::auth`]).
    #[serde(default)]
    pub basic_auth: Option<BasicAuth>,
    /// An `Authorization` header towards the endpoint ([`crate::auth`]).
    #[serde(default)]
    pub authorization: Option<Authorization>,
    /// TLS settings for an `https://` URL.
    #[serde(default)]
    pub tls_config: Option<TlsConfig>,
}

fn default_http_refresh_interval() -> PromDuration {
    PromDuration(Duration::from_secs(60))
}

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
pub fn dns_sd_problems(sd: &DnsSdConfig, at: &dyn Fn(&str) -> String, problems: &mut Problems) {
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

/// `file_sd_configs[]`: target files in Prometheus's file_sd format.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSdConfig {
    /// Paths or globs (`targets/*.json`) of `.json`, `.yml` or `.yaml` files.
    pub files: Vec<String>,
    /// How often to re-read the files even without change notifications. Default `5m`.
    #[serde(default = "default_refresh_interval")]
    pub refresh_interval: PromDuration,
}

fn default_refresh_interval() -> PromDuration {
    PromDuration(Duration::from_secs(300))
}

/// A scrape job with every default resolved and its relabel rules compiled.
#[derive(Debug, Clone)]
pub struct Job {
    /// The job as configured.
    pub config: ScrapeConfig,
    /// Effective interval.
    pub interval: Duration,
    /// Effective timeout (never longer than the interval).
    pub timeout: Duration,
    /// Compiled `relabel_configs`.
    pub relabel: Vec<Relabel>,
    /// Compiled `metric_relabel_configs`.
    pub metric_relabel: Vec<Relabel>,
    /// How scrapes authenticate, if they do (shared by the job's targets).
    pub auth: Option<Arc<ScrapeAuth>>,
    /// Each `http_sd_configs` entry's client (its `tls_config`) and authentication, in order.
    pub http_sd: Vec<(reqwest::Client, Option<Arc<ScrapeAuth>>)>,
    /// Effective limits (the job's, else `global`'s, else epicenter's defaults).
    pub limits: Limits,
    /// The `Accept` header of the job's scrapes, from `scrape_protocols`.
    pub accept: String,
    /// The DNS servers `dns_sd_configs` ask (from [`DNS_SERVERS_ENV`]); empty
    /// = those of `/etc/resolv.conf`.
    pub dns_servers: Vec<SocketAddr>,
}

/// Checks `global` and `scrape_configs` (no network; TLS files are read) and resolves each
/// job's defaults, recording every problem in `problems` with its key path. Returns one
/// [`Job`] per scrape config, in order, whether or not problems were found (a job with a bad
/// relabel rule lacks that rule).
pub fn jobs(global: &GlobalConfig, scrape_configs: &[ScrapeConfig], problems: &mut Problems) -> Vec<Job> {
    if global.scrape_interval.0.is_zero() {
        problems.push("global.scrape_interval", "must be greater than 0");
    }
    let global_timeout = global.timeout();
    if global_timeout.0.is_zero() {
        problems.push("global.scrape_timeout", "must be greater than 0");
    }
    if global_timeout.0 > global.scrape_interval.0 {
        problems.push(
            "global.scrape_timeout",
            format!(
                "{global_timeout} is longer than global.scrape_interval {}",
                global.scrape_interval
            ),
        );
    }
    for name in global.external_labels.keys() {
        if !is_label_name(name) {
            problems.push(format!("global.external_labels.{name}"), "is not a valid label name");
        }
    }

    if let Some(protocols) = &global.scrape_protocols {
        scrape_protocol_problems(protocols, "global.scrape_protocols", problems);
    }
    // The DNS servers of dns_sd_configs, when the environment replaces the system's.
    let dns_servers = match std::env::var(DNS_SERVERS_ENV) {
        Ok(text) if scrape_configs.iter().any(|job| !job.dns_sd_configs.is_empty()) => parse_dns_servers(&text)
            .unwrap_or_else(|message| {
                problems.push(DNS_SERVERS_ENV, message);
                Vec::new()
            }),
        _ => Vec::new(),
    };
    let mut jobs = Vec::new();
    let mut job_names = BTreeSet::new();
    for (index, scrape) in scrape_configs.iter().enumerate() {
        let at = |key: &str| format!("scrape_configs[{index}].{key}");
        if scrape.job_name.is_empty() {
            problems.push(at("job_name"), "is required and must not be empty");
        } else if !job_names.insert(scrape.job_name.clone()) {
            problems.push(
                at("job_name"),
                format!(
                    "'{}' is used by an earlier job; job names must be unique",
                    scrape.job_name
                ),
            );
        }
        if let Some(tls) = &scrape.tls_config {
            // Build the client `epicenter run` will use: unreadable or unusable PEM (a
            // directory, a key where a certificate belongs) fails here, not later.
            if tls.problems(&at("tls_config"), problems) {
                if let Err(message) = crate::client::http_client(Some(tls)) {
                    problems.push(at("tls_config"), message);
                }
            }
        }
        if let Some(observer) = &scrape.redis_observer {
            for (key, message) in crate::redis_observer::problems(observer, &at("redis_observer")) {
                problems.push(key, message);
            }
            let protocol = "is not supported by redis_observer (it speaks the Redis protocol; use basic_auth for AUTH and tls_config for TLS)";
            let tls_only = "is not supported by redis_observer's TLS (ca, ca_file, cert, cert_file, key, key_file and insecure_skip_verify are)";
            let tls = scrape.tls_config.as_ref();
            for (present, key, message) in [
                (scrape.scheme == Scheme::Https, "scheme", protocol),
                (scrape.authorization.is_some(), "authorization", protocol),
                (scrape.bearer_token.is_some(), "bearer_token", protocol),
                (scrape.bearer_token_file.is_some(), "bearer_token_file", protocol),
                (scrape.oauth2.is_some(), "oauth2", protocol),
                (scrape.proxy_url.is_some(), "proxy_url", protocol),
                (
                    tls.is_some_and(|tls| tls.server_name.is_some()),
                    "tls_config.server_name",
                    tls_only,
                ),
                (
                    tls.is_some_and(|tls| tls.min_version.is_some()),
                    "tls_config.min_version",
                    tls_only,
                ),
                (
                    tls.is_some_and(|tls| tls.max_version.is_some()),
                    "tls_config.max_version",
                    tls_only,
                ),
            ] {
                if present {
                    problems.push(at(key), message);
                }
            }
        }
        if scrape.proxy_url.is_some() && scrape.proxy_from_environment {
            problems.push(
                at("proxy_from_environment"),
                "proxy_url and proxy_from_environment are both set: choose one",
            );
        }
        if scrape.no_proxy.is_some() && scrape.proxy_url.is_none() {
            problems.push(at("no_proxy"), "has no effect without proxy_url");
        }
        if !scrape.proxy_connect_header.is_empty() && scrape.proxy_url.is_none() {
            problems.push(at("proxy_connect_header"), "has no effect without proxy_url");
        }
        for (name, values) in &scrape.proxy_connect_header {
            if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                problems.push(
                    at(&format!("proxy_connect_header.{name}")),
                    "is not an HTTP header name",
                );
            }
            for (index, value) in values.iter().enumerate() {
                if reqwest::header::HeaderValue::from_str(value.expose()).is_err() {
                    problems.push(
                        at(&format!("proxy_connect_header.{name}[{index}]")),
                        "holds a character a header value cannot carry",
                    );
                }
            }
        }
        if let Some(url) = &scrape.proxy_url {
            let scheme_ok = url::Url::parse(url)
                .is_ok_and(|parsed| matches!(parsed.scheme(), "http" | "https" | "socks5" | "socks5h"));
            if !scheme_ok {
                problems.push(
                    at("proxy_url"),
                    format!(
                        "'{}' is not an http://, https:// or socks5:// URL",
                        epicenter_config::redacted_url(url)
                    ),
                );
            } else if let Err(message) = crate::client::http_client_with_proxy(None, &scrape.proxy(), true) {
                problems.push(at("proxy_url"), message);
            }
        }
        let interval = scrape.scrape_interval.unwrap_or(global.scrape_interval);
        // Prometheus caps an inherited global timeout at the job's interval.
        let timeout = match scrape.scrape_timeout {
            Some(timeout) => timeout,
            None => PromDuration(global_timeout.0.min(interval.0)),
        };
        if interval.0.is_zero() {
            problems.push(at("scrape_interval"), "must be greater than 0");
        }
        if timeout.0.is_zero() {
            problems.push(at("scrape_timeout"), "must be greater than 0");
        }
        if timeout.0 > interval.0 {
            problems.push(
                at("scrape_timeout"),
                format!("{timeout} is longer than the job's scrape_interval {interval}"),
            );
        }
        if !scrape.metrics_path.starts_with('/') {
            problems.push(
                at("metrics_path"),
                format!("'{}' must start with '/'", scrape.metrics_path),
            );
        }
        let mut targets = BTreeSet::new();
        for (static_index, static_config) in scrape.static_configs.iter().enumerate() {
            for (target_index, target) in static_config.targets.iter().enumerate() {
                let path = at(&format!("static_configs[{static_index}].targets[{target_index}]"));
                if let Err(message) = check_listed_target(target) {
                    problems.push(path, message);
                } else if !targets.insert((target.clone(), &static_config.labels)) {
                    // The same address with other labels (another `__metrics_path__` or
                    // `__param_target`, the multi-target exporter pattern) is another target.
                    problems.push(
                        path,
                        format!("'{target}' is listed twice in this job with the same labels"),
                    );
                }
            }
            for name in static_config.labels.keys() {
                if !is_label_name(name) {
                    problems.push(
                        at(&format!("static_configs[{static_index}].labels.{name}")),
                        "is not a valid label name",
                    );
                }
            }
        }
        for (file_index, file_sd) in scrape.file_sd_configs.iter().enumerate() {
            if file_sd.files.is_empty() {
                problems.push(
                    at(&format!("file_sd_configs[{file_index}].files")),
                    "must list at least one file",
                );
            }
            for (pattern_index, pattern) in file_sd.files.iter().enumerate() {
                let extension_ok = [".json", ".yml", ".yaml"]
                    .iter()
                    .any(|extension| pattern.ends_with(extension));
                if !extension_ok {
                    problems.push(
                        at(&format!("file_sd_configs[{file_index}].files[{pattern_index}]")),
                        format!("'{pattern}' must end in .json, .yml or .yaml"),
                    );
                }
            }
            if file_sd.refresh_interval.0.is_zero() {
                problems.push(
                    at(&format!("file_sd_configs[{file_index}].refresh_interval")),
                    "must be greater than 0",
                );
            }
        }
        let mut http_sd = Vec::new();
        for (sd_index, sd) in scrape.http_sd_configs.iter().enumerate() {
            let sd_at = |key: &str| at(&format!("http_sd_configs[{sd_index}].{key}"));
            match url::Url::parse(&sd.url) {
                Ok(url) if !matches!(url.scheme(), "http" | "https") => {
                    problems.push(sd_at("url"), format!("scheme '{}' is not http or https", url.scheme()))
                }
                Ok(url) if url.host_str().is_none_or(str::is_empty) => problems.push(sd_at("url"), "has no host"),
                Ok(_) => {}
                Err(error) => problems.push(
                    sd_at("url"),
                    format!(
                        "'{}' is not a URL ({error}); write http://host:port/path",
                        epicenter_config::redacted_url(&sd.url)
                    ),
                ),
            }
            if sd.refresh_interval.0.is_zero() {
                problems.push(sd_at("refresh_interval"), "must be greater than 0");
            }
            let auth = ScrapeAuth::from_settings(
                AuthSettings {
                    basic_auth: sd.basic_auth.as_ref(),
                    authorization: sd.authorization.as_ref(),
                    bearer_token: None,
                    bearer_token_file: None,
                    oauth2: None,
                },
                &sd_at,
                problems,
            );
            match crate::client::http_client(sd.tls_config.as_ref()) {
                Ok(client) => http_sd.push((client, auth.map(Arc::new))),
                Err(message) => problems.push(sd_at("tls_config"), message),
            }
        }
        crate::headers::problems(&scrape.http_headers, &at, problems);
        if let Some(protocols) = &scrape.scrape_protocols {
            scrape_protocol_problems(protocols, &at("scrape_protocols"), problems);
        }
        for (sd_index, sd) in scrape.dns_sd_configs.iter().enumerate() {
            dns_sd_problems(
                sd,
                &|key: &str| at(&format!("dns_sd_configs[{sd_index}].{key}")),
                problems,
            );
        }
        let compile = |problems: &mut Problems, key: &str, configs: &[RelabelConfig]| -> Vec<Relabel> {
            configs
                .iter()
                .enumerate()
                .filter_map(|(step, config)| match config.compile() {
                    Ok(relabel) => Some(relabel),
                    Err(message) => {
                        let (field, reason) = message.split_once(": ").unwrap_or(("", message.as_str()));
                        let path = if field.is_empty() {
                            at(&format!("{key}[{step}]"))
                        } else {
                            at(&format!("{key}[{step}].{field}"))
                        };
                        problems.push(path, reason.to_string());
                        None
                    }
                })
                .collect()
        };
        let auth = ScrapeAuth::from_settings(
            AuthSettings {
                basic_auth: scrape.basic_auth.as_ref(),
                authorization: scrape.authorization.as_ref(),
                bearer_token: scrape.bearer_token.as_ref(),
                bearer_token_file: scrape.bearer_token_file.as_deref(),
                oauth2: scrape.oauth2.as_ref(),
            },
            &at,
            problems,
        );
        let relabel = compile(problems, "relabel_configs", &scrape.relabel_configs);
        let metric_relabel = compile(problems, "metric_relabel_configs", &scrape.metric_relabel_configs);
        jobs.push(Job {
            config: scrape.clone(),
            interval: interval.0,
            timeout: timeout.0,
            relabel,
            metric_relabel,
            auth: auth.map(Arc::new),
            http_sd,
            limits: Limits::of(scrape, global),
            accept: accept_header(
                scrape
                    .scrape_protocols
                    .as_deref()
                    .or(global.scrape_protocols.as_deref()),
            ),
            dns_servers: dns_servers.clone(),
        });
    }
    jobs
}

/// The collector's sections on their own: a document holding only `global` and
/// `scrape_configs` (what Prometheus's own file holds for scraping).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectorConfig {
    /// Defaults for every scrape job.
    #[serde(default)]
    pub global: GlobalConfig,
    /// The jobs to scrape.
    #[serde(default)]
    pub scrape_configs: Vec<ScrapeConfig>,
}

impl CollectorConfig {
    /// Reads the two sections from YAML; errors name the key path, line and column.
    pub fn from_yaml(text: &str) -> Result<CollectorConfig, ConfigError> {
        epicenter_config::from_yaml(text)
    }

    /// The jobs, or every problem found ([`jobs`]).
    pub fn validate(&self) -> Result<Vec<Job>, Vec<ConfigError>> {
        let mut problems = Problems::default();
        let jobs = jobs(&self.global, &self.scrape_configs, &mut problems);
        if problems.is_empty() {
            Ok(jobs)
        } else {
            Err(problems.into_errors())
        }
    }

    /// Settings this build accepts but cannot act on, as sentences for warnings.
    pub fn warnings(&self) -> Vec<String> {
        warnings(&self.global, &self.scrape_configs)
    }
}

/// Settings in `global` and `scrape_configs` this build accepts but cannot act on, as
/// sentences for warnings: Prometheus's rule and query-log settings, a `tls_config` on a
/// plain-http job.
pub fn warnings(global: &GlobalConfig, scrape_configs: &[ScrapeConfig]) -> Vec<String> {
    let mut warnings = Vec::new();
    let protobuf = |path: String, protocols: &Option<Vec<String>>, warnings: &mut Vec<String>| {
        if protocols
            .as_ref()
            .is_some_and(|list| list.len() > 1 && list.iter().any(|name| name == "PrometheusProto"))
        {
            warnings.push(format!(
                "{path}: PrometheusProto is left out of the request (epicenter reads the text formats; the others listed are asked for)"
            ));
        }
    };
    protobuf(
        "global.scrape_protocols".to_string(),
        &global.scrape_protocols,
        &mut warnings,
    );
    for (index, job) in scrape_configs.iter().enumerate() {
        protobuf(
            format!("scrape_configs[{index}].scrape_protocols"),
            &job.scrape_protocols,
            &mut warnings,
        );
    }
    if global.evaluation_interval.is_some() {
        warnings.push(prometheus_only_warning(
            "global.evaluation_interval",
            "epicenter evaluates no recording or alerting rules (its detector runs every detector.interval)",
        ));
    }
    if global.query_log_file.is_some() {
        warnings.push(prometheus_only_warning(
            "global.query_log_file",
            "queries go to the store (ClickHouse's system.query_log records them)",
        ));
    }
    for (index, job) in scrape_configs.iter().enumerate() {
        if job.tls_config.is_some() && job.scheme != Scheme::Https {
            warnings.push(format!(
                "scrape_configs[{index}].tls_config: has no effect: job '{}' scrapes over plain http (set scheme: https)",
                job.job_name
            ));
        }
    }
    warnings
}

/// Prometheus 2.42's service discoveries other than `static_configs`, `file_sd_configs`,
/// `http_sd_configs` and `dns_sd_configs`
/// (its configuration reference, `<scrape_config>`).
const PROMETHEUS_DISCOVERIES: [&str; 25] = [
    "azure_sd_configs",
    "consul_sd_configs",
    "digitalocean_sd_configs",
    "docker_sd_configs",
    "dockerswarm_sd_configs",
    "ec2_sd_configs",
    "eureka_sd_configs",
    "gce_sd_configs",
    "hetzner_sd_configs",
    "ionos_sd_configs",
    "kubernetes_sd_configs",
    "kuma_sd_configs",
    "lightsail_sd_configs",
    "linode_sd_configs",
    "marathon_sd_configs",
    "nerve_sd_configs",
    "nomad_sd_configs",
    "openstack_sd_configs",
    "ovhcloud_sd_configs",
    "puppetdb_sd_configs",
    "scaleway_sd_configs",
    "serverset_sd_configs",
    "triton_sd_configs",
    "uyuni_sd_configs",
    "vultr_sd_configs",
];

/// Prometheus scrape settings epicenter does not act on yet, with why refusing them is safer
/// than ignoring them.
const PROMETHEUS_SCRAPE_SETTINGS: [(&str, &str); 2] = [
    (
        "native_histogram_bucket_limit",
        "epicenter reads OpenMetrics 1.0 and text 0.0.4, without native histograms",
    ),
    (
        "scrape_classic_histograms",
        "epicenter reads OpenMetrics 1.0 and text 0.0.4, without native histograms",
    ),
];

/// For an unknown key at `path` (`scrape_configs[2].kubernetes_sd_configs`) that is a
/// Prometheus setting this build does not support: a sentence saying so and what to do
/// instead, to replace YAML's "unknown field" (which lists epicenter's keys, as if the
/// user had misspelt one).
pub fn unsupported_prometheus_key(path: &str) -> Option<String> {
    // Keys of Prometheus versions after 2.42, at the top, in `global` and in a job.
    const NEWER_TOP: [&str; 2] = ["runtime", "otlp"];
    const NEWER_GLOBAL: [&str; 5] = [
        "rule_query_offset",
        "metric_name_validation_scheme",
        "scrape_failure_log_file",
        "always_scrape_classic_histograms",
        "convert_classic_histograms_to_nhcb",
    ];
    const NEWER_JOB: [&str; 9] = [
        "enable_compression",
        "track_timestamps_staleness",
        "fallback_scrape_protocol",
        "scrape_native_histograms",
        "convert_classic_histograms_to_nhcb",
        "always_scrape_classic_histograms",
        "metric_name_validation_scheme",
        "metric_name_escaping_scheme",
        "scrape_failure_log_file",
    ];
    if NEWER_TOP.contains(&path) {
        return Some("a setting of Prometheus versions after 2.42 that epicenter does not support yet".to_string());
    }
    let (parent, key) = path.rsplit_once('.')?;
    if parent == "global" && NEWER_GLOBAL.contains(&key) {
        return Some(
            "a global setting of Prometheus versions after 2.42 that epicenter does not support yet".to_string(),
        );
    }
    let in_job = parent.starts_with("scrape_configs[") && !parent.contains('.');
    if in_job && NEWER_JOB.contains(&key) {
        return Some(
            "a scrape setting of Prometheus versions after 2.42 that epicenter does not support yet".to_string(),
        );
    }
    if in_job && PROMETHEUS_DISCOVERIES.contains(&key) {
        return Some(
            "Prometheus service discovery that epicenter does not support yet; list the targets in static_configs, in files read by file_sd_configs, behind an http_sd_configs endpoint (which a discovery tool can write or serve), or in DNS (dns_sd_configs)"
                .to_string(),
        );
    }
    if in_job {
        if let Some((_, why)) = PROMETHEUS_SCRAPE_SETTINGS.iter().find(|(name, _)| *name == key) {
            return Some(format!(
                "a Prometheus scrape setting epicenter does not support yet, and does not ignore: {why}"
            ));
        }
    }
    None
}

/// Reads `global` and `scrape_configs` from YAML and returns the jobs; any problem is an
/// error naming its path. For tests and benchmarks that build jobs from a snippet.
pub fn jobs_from_yaml(text: &str) -> Result<Vec<Job>, Vec<ConfigError>> {
    CollectorConfig::from_yaml(text)
        .map_err(|error| vec![error])?
        .validate()
}

/// A target as listed (`static_configs`, a target file, HTTP or DNS discovery), before
/// relabeling: `host:port` or a bare `host` (relabeling may make it a `__param_target`, or
/// the scheme's default port is added after relabeling, as Prometheus 2.42 does), never a
/// URL, a path or credentials (Prometheus's `CheckTargetAddress` refuses a `/`). Errors say
/// what is wrong with it.
pub fn check_listed_target(target: &str) -> Result<(), String> {
    if !target.contains('@') && !target.contains('/') && !target.is_empty() {
        let bare = target.starts_with('[') && target.ends_with(']') && target.len() > 2;
        if bare || !target.contains(':') {
            return Ok(());
        }
    }
    check_target(target)
}

/// `address` with the scheme's default port (`:80` for http, `:443` for https, `:6379` for a
/// `redis_observer` job's `redis`) when it has none, as Prometheus 2.42 adds it after relabeling (`PopulateLabels`); unchanged otherwise.
pub fn with_default_port(address: &str, scheme: &str) -> String {
    let bracketed_v6 = address.starts_with('[') && address.ends_with(']');
    let has_port = !bracketed_v6 && address.contains(':');
    if has_port || address.is_empty() || address.contains('/') || address.contains('@') {
        return address.to_string();
    }
    match scheme {
        "https" => format!("{address}:443"),
        "redis" => format!("{address}:6379"),
        _ => format!("{address}:80"),
    }
}

/// A target after relabeling is `host:port` (IPv6 in brackets), without scheme or path.
/// Errors say what is wrong with it.
pub fn check_target(target: &str) -> Result<(), String> {
    if let Some((_, host)) = target.rsplit_once('@') {
        // Never echo what comes before the `@`: it is a user name and password.
        return Err(format!(
            "'xxxxx@{host}' carries credentials (user:password@); targets are host:port, and credentials do not belong in them"
        ));
    }
    if target.contains("://") {
        return Err(format!(
            "'{target}' is a URL; a target is host:port (set the job's `scheme` for https). For a multi-target exporter (blackbox, snmp), list the exporter's host:port as the target and this URL as its `__param_target` label"
        ));
    }
    if target.contains('/') {
        return Err(format!(
            "'{target}' has a path; write host:port and set the job's `metrics_path`"
        ));
    }
    let Some((host, port)) = target.rsplit_once(':') else {
        return Err(format!("'{target}' has no port; write host:port"));
    };
    if host.is_empty() || host == "[]" {
        return Err(format!("'{target}' has no host"));
    }
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return Err(format!("'{target}': write IPv6 addresses in brackets, e.g. [::1]:9100"));
    }
    match port.parse::<u16>() {
        Ok(port) if port > 0 => Ok(()),
        _ => Err(format!("'{target}' has an invalid port '{port}'")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_keys_not_built_yet_are_named_as_such_and_typos_are_not() {
        for (path, words) in [
            ("scrape_configs[3].kubernetes_sd_configs", "service discovery"),
            ("scrape_configs[1].enable_compression", "after 2.42"),
            ("global.rule_query_offset", "after 2.42"),
            ("otlp", "after 2.42"),
            ("scrape_configs[0].native_histogram_bucket_limit", "does not ignore"),
        ] {
            let message = unsupported_prometheus_key(path).unwrap_or_else(|| panic!("{path}"));
            assert!(message.contains(words), "{path}: {message}");
        }
        for typo in [
            "scrape_configs[0].scrape_intervall",
            "global.evaluation_intervl",
            "scrape_configs[0].static_configs[0].kubernetes_sd_configs",
            "kubernetes_sd_configs",
        ] {
            assert_eq!(unsupported_prometheus_key(typo), None, "{typo}");
        }
    }

    #[test]
    fn the_default_timeout_is_capped_at_a_short_global_interval() {
        let config = CollectorConfig::from_yaml("global: {scrape_interval: 5s}\n").unwrap();
        assert_eq!(config.global.timeout().0, Duration::from_secs(5));
        assert!(config.validate().is_ok());
        let config = CollectorConfig::from_yaml("global: {scrape_interval: 5s, scrape_timeout: 6s}\n").unwrap();
        assert_eq!(config.validate().unwrap_err()[0].path, "global.scrape_timeout");
    }

    #[test]
    fn a_redis_observer_job_names_its_bad_keys_by_path() {
        let yaml = "scrape_configs:\n  - job_name: observer\n    scheme: https\n    tls_config: {insecure_skip_verify: true, server_name: redis.example}\n    redis_observer:\n      callers:\n        - {network: 10.0.0.0/40, host: dc-1-host-1}\n        - {network: 10.0.1.0/24, host: ''}\n";
        let errors = CollectorConfig::from_yaml(yaml).unwrap().validate().unwrap_err();
        let paths: Vec<&str> = errors.iter().map(|error| error.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "scrape_configs[0].redis_observer.callers[0].network",
                "scrape_configs[0].redis_observer.callers[1].host",
                "scrape_configs[0].scheme",
                "scrape_configs[0].tls_config.server_name"
            ],
            "{errors:?}"
        );
        let good = "scrape_configs:\n  - job_name: observer\n    basic_auth: {password: secret}\n    redis_observer: {callers: [{network: 127.0.0.2, host: h}]}\n";
        let jobs = CollectorConfig::from_yaml(good).unwrap().validate().unwrap();
        let observer = jobs[0].config.redis_observer.as_ref().unwrap();
        assert_eq!((observer.max_clients_listed, observer.callers.len()), (20_000, 1));
    }

    #[test]
    fn job_defaults_come_from_global() {
        let yaml = "global: {scrape_interval: 30s, scrape_timeout: 10s}\nscrape_configs:\n  - job_name: a\n  - job_name: b\n    scrape_interval: 5s\n";
        let jobs = CollectorConfig::from_yaml(yaml).unwrap().validate().unwrap();
        assert_eq!(
            (jobs[0].interval, jobs[0].timeout),
            (Duration::from_secs(30), Duration::from_secs(10))
        );
        // An inherited timeout is capped at a shorter job interval, as Prometheus does.
        assert_eq!(
            (jobs[1].interval, jobs[1].timeout),
            (Duration::from_secs(5), Duration::from_secs(5))
        );
        assert_eq!(jobs[0].config.metrics_path, "/metrics");
        assert!(jobs[0].config.honor_timestamps);
    }

    #[test]
    fn relative_paths_are_joined_to_the_file_s_folder_and_absolute_ones_kept() {
        let yaml = "scrape_configs:
  - job_name: a
    tls_config: {ca_file: ca.pem, cert_file: /abs/cert.pem, key_file: k/key.pem}
    basic_auth: {username: u, password_file: pw}
    bearer_token_file: token
    oauth2: {client_id: c, client_secret_file: secret, token_url: 'http://127.0.0.1:1/t'}
    file_sd_configs: [{files: ['targets/*.json', /etc/t.json]}]
    http_headers: {X-A: {files: [h]}}
    http_sd_configs: [{url: 'http://127.0.0.1:1/sd', authorization: {credentials_file: cred}, tls_config: {ca_file: sd-ca.pem}}]
";
        let mut job = CollectorConfig::from_yaml(yaml).unwrap().scrape_configs.remove(0);
        job.set_directory(Path::new("/conf"));
        let tls = job.tls_config.as_ref().unwrap();
        assert_eq!(tls.ca_file.as_deref(), Some(Path::new("/conf/ca.pem")));
        assert_eq!(tls.cert_file.as_deref(), Some(Path::new("/abs/cert.pem")));
        assert_eq!(tls.key_file.as_deref(), Some(Path::new("/conf/k/key.pem")));
        let password = job.basic_auth.as_ref().unwrap().password_file.as_deref();
        assert_eq!(password, Some(Path::new("/conf/pw")));
        assert_eq!(job.bearer_token_file.as_deref(), Some(Path::new("/conf/token")));
        let secret = job.oauth2.as_ref().unwrap().client_secret_file.as_deref();
        assert_eq!(secret, Some(Path::new("/conf/secret")));
        assert_eq!(
            job.file_sd_configs[0].files,
            vec!["/conf/targets/*.json", "/etc/t.json"]
        );
        assert_eq!(job.http_headers["X-A"].files, vec![PathBuf::from("/conf/h")]);
        let sd = &job.http_sd_configs[0];
        let credentials = sd.authorization.as_ref().unwrap().credentials_file.as_deref();
        assert_eq!(credentials, Some(Path::new("/conf/cred")));
        let sd_ca = sd.tls_config.as_ref().unwrap().ca_file.as_deref();
        assert_eq!(sd_ca, Some(Path::new("/conf/sd-ca.pem")));
    }

    #[test]
    fn listed_targets_may_lack_a_port_and_get_the_scheme_s_default() {
        for good in ["a.example", "10.0.0.1", "[::1]", "a.example:9115"] {
            assert_eq!(check_listed_target(good), Ok(()), "{good}");
        }
        for bad in ["http://a.example", "a.example/probe", "u:p@a", "", "::1"] {
            assert!(check_listed_target(bad).is_err(), "{bad}");
        }
        assert_eq!(with_default_port("a.example", "http"), "a.example:80");
        assert_eq!(with_default_port("a.example", "https"), "a.example:443");
        assert_eq!(with_default_port("[::1]", "https"), "[::1]:443");
        assert_eq!(with_default_port("a.example:9100", "https"), "a.example:9100");
    }

    #[test]
    fn targets_are_host_and_port() {
        for good in ["127.0.0.1:9100", "redis-7.dc-2:9121", "[::1]:9100"] {
            assert_eq!(check_target(good), Ok(()), "{good}");
        }
        for bad in [
            "127.0.0.1",
            "http://a:1",
            "a:1/metrics",
            ":9100",
            "a:0",
            "a:99999",
            "::1:9100",
        ] {
            assert!(check_target(bad).is_err(), "{bad}");
        }
    }
}
