//! epicenter's configuration: YAML in the shape Prometheus users know, plus epicenter's own
//! sections.
//!
//! `global` and `scrape_configs` follow Prometheus's configuration reference (same keys,
//! defaults and duration syntax); `storage`, `batching` and `placement` are epicenter's.
//! Unknown keys are errors that name their path (`scrape_configs[1].relabel_configs[0].sorce_labels`).
//! Loading is in two steps, as in linkerd2-proxy: [`Config::from_yaml`] reads and
//! [`Config::validate`] checks everything that needs no I/O (intervals, targets, relabel
//! rules, storage choices) and reports every problem at once. Reading secrets and connecting
//! to storage are separate start-up steps.

mod units;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

pub use units::{parse_duration, parse_size, ByteSize, PromDuration};

use crate::relabel::{is_label_name, Relabel, RelabelConfig};

/// The whole configuration file.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Defaults for every scrape job.
    #[serde(default)]
    pub global: GlobalConfig,
    /// The jobs to scrape.
    #[serde(default)]
    pub scrape_configs: Vec<ScrapeConfig>,
    /// Where samples go. Without `clickhouse`, the embedded store is used.
    #[serde(default)]
    pub storage: StorageConfig,
    /// When the writer flushes a batch: whichever limit is reached first.
    #[serde(default)]
    pub batching: BatchingConfig,
    /// Which labels name the datacenter, host and service of a series.
    #[serde(default)]
    pub placement: PlacementConfig,
    /// epicenter's own HTTP server (`/metrics`, `/healthz`, `/readyz`, `/api/v1/targets`).
    #[serde(default)]
    pub server: ServerConfig,
    /// The detector: service dependencies, signal rules, how often it judges.
    #[serde(default)]
    pub detector: DetectorConfig,
    /// Where verdicts are sent: Alertmanager, webhooks.
    #[serde(default)]
    pub notifiers: Vec<NotifierConfig>,
}

/// One `notifiers` entry: where verdicts go, and which.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifierConfig {
    /// Name in logs and metrics; unique.
    pub name: String,
    /// `alertmanager` (API v2, `POST <url>/api/v2/alerts`) or `webhook` (the verdict document
    /// with `status` firing/resolved, POSTed to `url`).
    #[serde(rename = "type")]
    pub kind: NotifierKind,
    /// Alertmanager's base URL (`http://127.0.0.1:9093`) or the webhook's URL.
    pub url: String,
    /// Per-request timeout. Default `5s`.
    #[serde(default = "default_notifier_timeout")]
    pub timeout: PromDuration,
    /// Re-send an open verdict this often (Alertmanager forgets alerts not re-sent before
    /// their `endsAt`). Default `1m`.
    #[serde(default = "default_resend")]
    pub resend_interval: PromDuration,
    /// Only these verdict kinds (empty: all).
    #[serde(default)]
    pub kinds: Vec<String>,
    /// Only verdicts in these datacenters (empty: all).
    #[serde(default)]
    pub dcs: Vec<String>,
    /// Only verdicts on these services (empty: all).
    #[serde(default)]
    pub services: Vec<String>,
    /// Only verdicts at least this confident (0..1). Default 0.
    #[serde(default)]
    pub min_confidence: f64,
}

/// Kinds of notifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NotifierKind {
    /// Prometheus Alertmanager, API v2.
    Alertmanager,
    /// A generic JSON webhook.
    Webhook,
}

fn default_notifier_timeout() -> PromDuration {
    PromDuration(Duration::from_secs(5))
}

fn default_resend() -> PromDuration {
    PromDuration(Duration::from_secs(60))
}

/// `detector`: what the root-cause detector needs to know (docs/detector.md).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetectorConfig {
    /// Run the detector on what is scraped. Default true.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Which service calls which (by the placement `service` label): faults spread to
    /// callers, load to callees.
    #[serde(default)]
    pub dependencies: Vec<DependencyConfig>,
    /// Signal rules file (the shape of rules/signals/signals.yml); default the shipped rules.
    #[serde(default)]
    pub rules_file: Option<PathBuf>,
    /// How often the detector judges what arrived. Default: `global.scrape_interval`.
    #[serde(default)]
    pub interval: Option<PromDuration>,
}

impl Default for DetectorConfig {
    fn default() -> Self {
        DetectorConfig {
            enabled: true,
            dependencies: Vec::new(),
            rules_file: None,
            interval: None,
        }
    }
}

/// One `detector.dependencies` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DependencyConfig {
    /// Calling service.
    pub caller: String,
    /// Called service.
    pub callee: String,
    /// Calls stay within the caller's datacenter. Default false.
    #[serde(default)]
    pub same_dc: bool,
}

/// `server`: where epicenter's own HTTP endpoints listen.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// `host:port` to listen on. Default `127.0.0.1:9464` (loopback only; set `0.0.0.0:9464`
    /// to expose it).
    #[serde(default = "default_listen_address")]
    pub listen_address: String,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen_address: default_listen_address(),
        }
    }
}

fn default_listen_address() -> String {
    "127.0.0.1:9464".to_string()
}

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
    #[serde(default)]
    pub external_labels: BTreeMap<String, String>,
}

impl Default for GlobalConfig {
    fn default() -> Self {
        GlobalConfig {
            scrape_interval: default_scrape_interval(),
            scrape_timeout: None,
            external_labels: BTreeMap::new(),
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
    /// The `job` label of every target of this job; unique across jobs.
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
    #[serde(default)]
    pub params: BTreeMap<String, Vec<String>>,
    /// Keep the target's own `job`/`instance`/… labels when they clash with ours. Default false.
    #[serde(default)]
    pub honor_labels: bool,
    /// Use the timestamps the target prints (the fleet simulator's clock). Default true.
    #[serde(default = "default_true")]
    pub honor_timestamps: bool,
    /// Fixed targets.
    #[serde(default)]
    pub static_configs: Vec<StaticConfig>,
    /// Targets read from JSON or YAML files, re-read when they change.
    #[serde(default)]
    pub file_sd_configs: Vec<FileSdConfig>,
    /// Relabeling of targets before scraping.
    #[serde(default)]
    pub relabel_configs: Vec<RelabelConfig>,
    /// Relabeling of scraped series before storage.
    #[serde(default)]
    pub metric_relabel_configs: Vec<RelabelConfig>,
    /// Largest body accepted, in bytes (`10MiB`); larger scrapes fail. 0 = no limit (default).
    #[serde(default)]
    pub body_size_limit: ByteSize,
    /// Most samples accepted per scrape after metric relabeling; more fails the scrape.
    /// 0 = no limit (default).
    #[serde(default)]
    pub sample_limit: u64,
    /// Most labels per series; more fails the scrape. 0 = no limit (default).
    #[serde(default)]
    pub label_limit: u64,
    /// TLS settings for `scheme: https` (Prometheus `tls_config`): a CA file for private
    /// CAs (the system's roots are trusted as well), a client certificate, or no verification.
    #[serde(default)]
    pub tls_config: Option<TlsConfig>,
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
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
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

/// `storage`: the embedded chDB store (default) or a ClickHouse server.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// The embedded store; used when `clickhouse` is absent.
    #[serde(default)]
    pub embedded: Option<EmbeddedConfig>,
    /// A ClickHouse server over HTTP.
    #[serde(default)]
    pub clickhouse: Option<ClickHouseConfig>,
    /// How long samples are kept (table TTL). Default `30d`.
    #[serde(default)]
    pub retention: Option<PromDuration>,
}

impl StorageConfig {
    /// Retention with its default of 30 days.
    pub fn retention(&self) -> Duration {
        self.retention
            .map_or(Duration::from_secs(30 * 86_400), |retention| retention.0)
    }

    /// The embedded store's directory (default `./data`).
    pub fn embedded_path(&self) -> PathBuf {
        self.embedded
            .as_ref()
            .map_or_else(|| PathBuf::from("./data"), |embedded| embedded.path.clone())
    }
}

/// `storage.embedded`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddedConfig {
    /// Directory of the embedded store. Default `./data`.
    #[serde(default = "default_data_path")]
    pub path: PathBuf,
}

fn default_data_path() -> PathBuf {
    PathBuf::from("./data")
}

/// `storage.clickhouse`: a ClickHouse server reached over its HTTP interface.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClickHouseConfig {
    /// Base URL, e.g. `http://127.0.0.1:8123`.
    pub url: String,
    /// Database holding epicenter's tables. Default `epicenter`.
    #[serde(default = "default_database")]
    pub database: String,
    /// User. Default `default`.
    #[serde(default = "default_user")]
    pub user: String,
    /// Environment variable holding the password.
    #[serde(default)]
    pub password_env: Option<String>,
    /// File holding the password (trailing newline ignored).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// TLS settings for `https` URLs.
    #[serde(default)]
    pub tls: Option<TlsConfig>,
}

fn default_database() -> String {
    "epicenter".to_string()
}

fn default_user() -> String {
    "default".to_string()
}

/// TLS settings, the subset of Prometheus's `tls_config` epicenter uses: a scrape job's
/// `tls_config` and `storage.clickhouse.tls`. Files are PEM; `validate` checks they exist.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM file of the CA (or CAs) that signed the server's certificate, trusted besides the
    /// system's roots.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate, for servers that require one; needs `key_file`.
    #[serde(default)]
    pub cert_file: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of `cert_file`.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// Accept any certificate and host name (testing only: anyone on the path can read and
    /// change the traffic).
    #[serde(default)]
    pub insecure_skip_verify: bool,
}

impl TlsConfig {
    /// Problems with the files, as `(key path under prefix, message)`.
    fn problems(&self, prefix: &str) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        for (key, path) in [
            ("ca_file", &self.ca_file),
            ("cert_file", &self.cert_file),
            ("key_file", &self.key_file),
        ] {
            if let Some(path) = path {
                if let Err(error) = std::fs::metadata(path) {
                    problems.push((
                        format!("{prefix}.{key}"),
                        format!("cannot read '{}': {error}", path.display()),
                    ));
                }
            }
        }
        if self.cert_file.is_some() != self.key_file.is_some() {
            problems.push((
                prefix.to_string(),
                "cert_file and key_file go together (a client certificate needs its key)".to_string(),
            ));
        }
        problems
    }
}

/// A password: never printed by `Debug` or `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The secret value, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl ClickHouseConfig {
    /// Reads the password from `password_env` or `password_file` (I/O: call at start-up, not
    /// in `validate`). `Ok(None)` when neither is set.
    pub fn password(&self) -> Result<Option<Secret>, String> {
        if let Some(variable) = &self.password_env {
            return std::env::var(variable)
                .map(|value| Some(Secret(value)))
                .map_err(|_| format!("storage.clickhouse.password_env: environment variable {variable} is not set"));
        }
        if let Some(path) = &self.password_file {
            return std::fs::read_to_string(path)
                .map(|text| Some(Secret(text.trim_end_matches(['\n', '\r']).to_string())))
                .map_err(|error| {
                    format!(
                        "storage.clickhouse.password_file: cannot read {}: {error}",
                        path.display()
                    )
                });
        }
        Ok(None)
    }
}

/// `batching`: the writer flushes when any limit is reached.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchingConfig {
    /// Rows per batch. Default 1,000,000.
    #[serde(default = "default_max_rows")]
    pub max_rows: u64,
    /// Encoded (RowBinary) bytes per batch. Default `256MiB`: at 100k samples/s a 5 s batch
    /// is about 95 MB, and a lower cap only makes inserts smaller and dearer (fleet benchmark,
    /// docs/schema.md, Cost: 0.48 cores at 64 MiB, 0.43 uncapped).
    #[serde(default = "default_max_bytes")]
    pub max_bytes: ByteSize,
    /// Oldest row's age before a flush. Default `5s`: larger, fewer inserts cost the engine
    /// far less CPU (fleet benchmark, docs/schema.md, Cost), and the detector reads samples
    /// from the scrape path, not from storage.
    #[serde(default = "default_max_age")]
    pub max_age: PromDuration,
}

impl Default for BatchingConfig {
    fn default() -> Self {
        BatchingConfig {
            max_rows: default_max_rows(),
            max_bytes: default_max_bytes(),
            max_age: default_max_age(),
        }
    }
}

fn default_max_rows() -> u64 {
    1_000_000
}

fn default_max_bytes() -> ByteSize {
    ByteSize(256 << 20)
}

fn default_max_age() -> PromDuration {
    PromDuration(Duration::from_secs(5))
}

/// `placement`: which labels say where a series runs (the detector's datacenter/host/service).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlacementConfig {
    /// Label naming the datacenter. Default `dc`.
    #[serde(default = "default_dc_label")]
    pub dc_label: String,
    /// Label naming the host. Default `host`.
    #[serde(default = "default_host_label")]
    pub host_label: String,
    /// Label naming the service. Default `service`.
    #[serde(default = "default_service_label")]
    pub service_label: String,
    /// When a series has no host label, take the host part of `instance` (`host:port`).
    /// Default true.
    #[serde(default = "default_true")]
    pub host_from_instance: bool,
}

impl Default for PlacementConfig {
    fn default() -> Self {
        PlacementConfig {
            dc_label: default_dc_label(),
            host_label: default_host_label(),
            service_label: default_service_label(),
            host_from_instance: true,
        }
    }
}

fn default_dc_label() -> String {
    "dc".to_string()
}

fn default_host_label() -> String {
    "host".to_string()
}

fn default_service_label() -> String {
    "service".to_string()
}

/// A configuration problem: where (file, line and column when known, key path) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Key path, e.g. `scrape_configs[1].scrape_timeout`; empty for the document itself.
    pub path: String,
    /// 1-based line and column in the file, when the problem was found while reading it.
    pub location: Option<(usize, usize)>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((line, column)) = self.location {
            write!(f, "{line}:{column}: ")?;
        }
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

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
}

impl Config {
    /// Reads a configuration from YAML text. An empty document is the default configuration.
    ///
    /// Errors name the key path and, when the YAML parser knows it, the line and column:
    /// `3:5: scrape_configs[0].job_nme: unknown field `job_nme`, expected one of …`.
    pub fn from_yaml(text: &str) -> Result<Config, ConfigError> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        let deserializer = serde_norway::Deserializer::from_str(text);
        serde_path_to_error::deserialize(deserializer).map_err(|error| {
            let path = error.path().to_string();
            let inner = error.into_inner();
            let location = inner.location().map(|location| (location.line(), location.column()));
            // The YAML library repeats the location in its message; keep only the reason.
            let message = inner.to_string();
            let message = match message.rsplit_once(" at line ") {
                Some((reason, _)) if location.is_some() => reason.to_string(),
                _ => message,
            };
            // ...and may start with the enclosing path, which we print ourselves.
            let message = match message.split_once(": ") {
                Some((prefix, reason)) if !prefix.is_empty() && path.starts_with(prefix) => reason.to_string(),
                _ => message,
            };
            ConfigError {
                path: if path == "." { String::new() } else { path },
                location,
                message,
            }
        })
    }

    /// Checks everything that needs no I/O and resolves each job's defaults. Returns every
    /// problem found, each with its key path.
    pub fn validate(&self) -> Result<Vec<Job>, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let mut problem = |path: String, message: String| {
            errors.push(ConfigError {
                path,
                location: None,
                message,
            })
        };

        let global = &self.global;
        if global.scrape_interval.0.is_zero() {
            problem("global.scrape_interval".into(), "must be greater than 0".into());
        }
        let global_timeout = global.timeout();
        if global_timeout.0.is_zero() {
            problem("global.scrape_timeout".into(), "must be greater than 0".into());
        }
        if global_timeout.0 > global.scrape_interval.0 {
            problem(
                "global.scrape_timeout".into(),
                format!(
                    "{global_timeout} is longer than global.scrape_interval {}",
                    global.scrape_interval
                ),
            );
        }
        for name in global.external_labels.keys() {
            if !is_label_name(name) {
                problem(
                    format!("global.external_labels.{name}"),
                    "is not a valid label name".into(),
                );
            }
        }

        let mut jobs = Vec::new();
        let mut job_names = BTreeSet::new();
        for (index, scrape) in self.scrape_configs.iter().enumerate() {
            let at = |key: &str| format!("scrape_configs[{index}].{key}");
            if scrape.job_name.is_empty() {
                problem(at("job_name"), "must not be empty".into());
            } else if !job_names.insert(scrape.job_name.clone()) {
                problem(
                    at("job_name"),
                    format!(
                        "'{}' is used by an earlier job; job names must be unique",
                        scrape.job_name
                    ),
                );
            }
            if let Some(tls) = &scrape.tls_config {
                let problems = tls.problems(&at("tls_config"));
                if problems.is_empty() {
                    // Build the client `epicenter run` will use: unreadable or unusable PEM
                    // (a directory, a key where a certificate belongs) fails here, not later.
                    if let Err(error) = crate::scrape::Scraper::with_tls(Some(tls)) {
                        problem(at("tls_config"), error.to_string());
                    }
                }
                for (key, message) in problems {
                    problem(key, message);
                }
            }
            let interval = scrape.scrape_interval.unwrap_or(global.scrape_interval);
            // Prometheus caps an inherited global timeout at the job's interval.
            let timeout = match scrape.scrape_timeout {
                Some(timeout) => timeout,
                None => PromDuration(global_timeout.0.min(interval.0)),
            };
            if interval.0.is_zero() {
                problem(at("scrape_interval"), "must be greater than 0".into());
            }
            if timeout.0.is_zero() {
                problem(at("scrape_timeout"), "must be greater than 0".into());
            }
            if timeout.0 > interval.0 {
                problem(
                    at("scrape_timeout"),
                    format!("{timeout} is longer than the job's scrape_interval {interval}"),
                );
            }
            if !scrape.metrics_path.starts_with('/') {
                problem(
                    at("metrics_path"),
                    format!("'{}' must start with '/'", scrape.metrics_path),
                );
            }
            let mut targets = BTreeSet::new();
            for (static_index, static_config) in scrape.static_configs.iter().enumerate() {
                for (target_index, target) in static_config.targets.iter().enumerate() {
                    let path = at(&format!("static_configs[{static_index}].targets[{target_index}]"));
                    if let Err(message) = check_target(target) {
                        problem(path, message);
                    } else if !targets.insert(target.clone()) {
                        problem(path, format!("'{target}' is listed twice in this job"));
                    }
                }
                for name in static_config.labels.keys() {
                    if !is_label_name(name) {
                        problem(
                            at(&format!("static_configs[{static_index}].labels.{name}")),
                            "is not a valid label name".into(),
                        );
                    }
                }
            }
            for (file_index, file_sd) in scrape.file_sd_configs.iter().enumerate() {
                if file_sd.files.is_empty() {
                    problem(
                        at(&format!("file_sd_configs[{file_index}].files")),
                        "must list at least one file".into(),
                    );
                }
                for (pattern_index, pattern) in file_sd.files.iter().enumerate() {
                    let extension_ok = [".json", ".yml", ".yaml"]
                        .iter()
                        .any(|extension| pattern.ends_with(extension));
                    if !extension_ok {
                        problem(
                            at(&format!("file_sd_configs[{file_index}].files[{pattern_index}]")),
                            format!("'{pattern}' must end in .json, .yml or .yaml"),
                        );
                    }
                }
                if file_sd.refresh_interval.0.is_zero() {
                    problem(
                        at(&format!("file_sd_configs[{file_index}].refresh_interval")),
                        "must be greater than 0".into(),
                    );
                }
            }
            let mut compile = |key: &str, configs: &[RelabelConfig]| -> Vec<Relabel> {
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
                            problem(path, reason.to_string());
                            None
                        }
                    })
                    .collect()
            };
            let relabel = compile("relabel_configs", &scrape.relabel_configs);
            let metric_relabel = compile("metric_relabel_configs", &scrape.metric_relabel_configs);
            jobs.push(Job {
                config: scrape.clone(),
                interval: interval.0,
                timeout: timeout.0,
                relabel,
                metric_relabel,
            });
        }

        let storage = &self.storage;
        if storage.embedded.is_some() && storage.clickhouse.is_some() {
            problem("storage".into(), "set either embedded or clickhouse, not both".into());
        }
        if let Some(clickhouse) = &storage.clickhouse {
            if !(clickhouse.url.starts_with("http://") || clickhouse.url.starts_with("https://")) {
                problem(
                    "storage.clickhouse.url".into(),
                    format!(
                        "'{}' must start with http:// or https:// (the HTTP interface, port 8123 by default)",
                        clickhouse.url
                    ),
                );
            }
            if let Some(tls) = &clickhouse.tls {
                for (key, message) in tls.problems("storage.clickhouse.tls") {
                    problem(key, message);
                }
            }
            if clickhouse.password_env.is_some() && clickhouse.password_file.is_some() {
                problem(
                    "storage.clickhouse".into(),
                    "set either password_env or password_file, not both".into(),
                );
            }
            if clickhouse.database.is_empty()
                || !clickhouse
                    .database
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                problem(
                    "storage.clickhouse.database".into(),
                    format!("'{}' must be letters, digits and '_'", clickhouse.database),
                );
            }
        }
        let mut notifier_names = std::collections::HashSet::new();
        for (index, notifier) in self.notifiers.iter().enumerate() {
            let at = |key: &str| format!("notifiers[{index}].{key}");
            if notifier.name.is_empty() || !notifier_names.insert(notifier.name.clone()) {
                problem(at("name"), format!("'{}' must be non-empty and unique", notifier.name));
            }
            if !(notifier.url.starts_with("http://") || notifier.url.starts_with("https://")) {
                problem(
                    at("url"),
                    format!("'{}' must start with http:// or https://", notifier.url),
                );
            }
            if !(0.0..=1.0).contains(&notifier.min_confidence) {
                problem(at("min_confidence"), "must be between 0 and 1".into());
            }
            if notifier.timeout.0.is_zero() || notifier.resend_interval.0.is_zero() {
                problem(
                    at("timeout"),
                    "timeout and resend_interval must be greater than 0".into(),
                );
            }
        }
        if storage.retention().is_zero() {
            problem("storage.retention".into(), "must be greater than 0".into());
        }
        if self.batching.max_rows == 0 {
            problem("batching.max_rows".into(), "must be greater than 0".into());
        }
        if self.batching.max_bytes.0 == 0 {
            problem("batching.max_bytes".into(), "must be greater than 0".into());
        }
        if self.batching.max_age.0.is_zero() {
            problem("batching.max_age".into(), "must be greater than 0".into());
        }
        if self.server.listen_address.parse::<std::net::SocketAddr>().is_err() {
            problem(
                "server.listen_address".into(),
                format!(
                    "'{}' is not an address to listen on (ip:port, e.g. 127.0.0.1:9464)",
                    self.server.listen_address
                ),
            );
        }
        for (key, name) in [
            ("placement.dc_label", &self.placement.dc_label),
            ("placement.host_label", &self.placement.host_label),
            ("placement.service_label", &self.placement.service_label),
        ] {
            if !is_label_name(name) {
                problem(key.into(), format!("'{name}' is not a valid label name"));
            }
        }
        if errors.is_empty() {
            Ok(jobs)
        } else {
            Err(errors)
        }
    }
}

/// A target is `host:port` (IPv6 in brackets), without scheme or path. Errors say what is
/// wrong with it.
pub fn check_target(target: &str) -> Result<(), String> {
    if target.contains("://") {
        return Err(format!(
            "'{target}' has a scheme; write host:port and set the job's `scheme`"
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
    fn an_empty_file_is_the_default_configuration() {
        let config = Config::from_yaml("").unwrap();
        assert_eq!(config.global.scrape_interval.0, Duration::from_secs(60));
        assert_eq!(config.storage.embedded_path(), PathBuf::from("./data"));
        assert!(config.validate().unwrap().is_empty());
    }

    #[test]
    fn unknown_keys_name_their_path_and_line() {
        let yaml = "global:\n  scrape_interval: 15s\nscrape_configs:\n  - job_name: a\n    static_configs:\n      - targets: ['127.0.0.1:9100']\n        lables: {dc: dc-1}\n";
        let error = Config::from_yaml(yaml).unwrap_err();
        assert_eq!(error.path, "scrape_configs[0].static_configs[0].lables");
        assert_eq!(error.location.map(|(line, _)| line), Some(7));
        assert!(error.message.starts_with("unknown field `lables`"), "{error}");
        let error =
            Config::from_yaml("storage:\n  clickhouse:\n    url: http://x:8123\n    pasword_env: P\n").unwrap_err();
        assert_eq!(error.path, "storage.clickhouse.pasword_env");
        let error = Config::from_yaml("global:\n  scrape_interval: 15\n").unwrap_err();
        assert_eq!(error.path, "global.scrape_interval");
        assert!(error.message.contains("add a unit"), "{error}");
    }

    #[test]
    fn validation_reports_every_problem_with_its_path() {
        let yaml = "
global: {scrape_interval: 15s, scrape_timeout: 20s}
scrape_configs:
  - job_name: redis
    scrape_interval: 5s
    scrape_timeout: 6s
    static_configs:
      - targets: ['127.0.0.1:9121', 'http://127.0.0.1:9122', '127.0.0.1', '127.0.0.1:9121']
    relabel_configs:
      - {action: hashmod, target_label: shard}
  - job_name: redis
    metrics_path: metrics
storage:
  embedded: {path: /tmp/x}
  clickhouse: {url: '127.0.0.1:8123'}
batching: {max_rows: 0}
";
        let config = Config::from_yaml(yaml).unwrap();
        let errors = config.validate().unwrap_err();
        let paths: Vec<&str> = errors.iter().map(|error| error.path.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "global.scrape_timeout",
                "scrape_configs[0].scrape_timeout",
                "scrape_configs[0].static_configs[0].targets[1]",
                "scrape_configs[0].static_configs[0].targets[2]",
                "scrape_configs[0].static_configs[0].targets[3]",
                "scrape_configs[0].relabel_configs[0].modulus",
                "scrape_configs[1].job_name",
                "scrape_configs[1].metrics_path",
                "storage",
                "storage.clickhouse.url",
                "batching.max_rows",
            ],
            "{errors:#?}"
        );
    }

    #[test]
    fn the_default_timeout_is_capped_at_a_short_global_interval() {
        let config = Config::from_yaml("global: {scrape_interval: 5s}\n").unwrap();
        assert_eq!(config.global.timeout().0, Duration::from_secs(5));
        assert!(config.validate().is_ok());
        let config = Config::from_yaml("global: {scrape_interval: 5s, scrape_timeout: 6s}\n").unwrap();
        assert_eq!(config.validate().unwrap_err()[0].path, "global.scrape_timeout");
    }

    #[test]
    fn job_defaults_come_from_global() {
        let yaml = "global: {scrape_interval: 30s, scrape_timeout: 10s}\nscrape_configs:\n  - job_name: a\n  - job_name: b\n    scrape_interval: 5s\n";
        let jobs = Config::from_yaml(yaml).unwrap().validate().unwrap();
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
    fn secrets_are_redacted_and_read_from_the_environment() {
        let secret = Secret("hunter2".to_string());
        assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
        let config = ClickHouseConfig {
            url: "http://127.0.0.1:8123".into(),
            database: "epicenter".into(),
            user: "default".into(),
            password_env: Some("EPICENTER_TEST_SURELY_UNSET_VARIABLE".into()),
            password_file: None,
            tls: None,
        };
        let error = config.password().unwrap_err();
        assert!(
            error.contains("EPICENTER_TEST_SURELY_UNSET_VARIABLE is not set"),
            "{error}"
        );
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
