//! Scraping: a job's targets, one scrape of a target into rows, and each target's schedule.
//!
//! Follows Prometheus's scrape semantics (`scrape/target.go`, `scrape/scrape.go`): targets get
//! `__address__`, `__scheme__`, `__metrics_path__`, `__param_<name>` and `job` before
//! `relabel_configs`; `instance` defaults to `__address__`; labels starting with `__` are
//! removed afterwards. A scrape sends `Accept` preferring OpenMetrics, reads at most
//! `body_size_limit` bytes of the (gunzipped) body within `scrape_timeout`, parses it as the
//! `Content-Type` says, applies `metric_relabel_configs`, attaches the target's labels
//! (`exported_<name>` on clashes unless `honor_labels`), enforces `sample_limit` and
//! `label_limit`, and adds the synthetic series `up`, `scrape_duration_seconds`,
//! `scrape_samples_scraped`, `scrape_samples_post_metric_relabeling` and
//! `scrape_series_added`. Any failure fails the whole scrape (`up` 0, with the reason) and
//! touches no other target.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustc_hash::{FxHashMap, FxHashSet};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, MissedTickBehavior};

use crate::config::{Job, PlacementConfig, Scheme, StaticConfig, TlsConfig};
use crate::exposition::{parse, FormatChoice, ParseOptions, Validation};
use crate::relabel::{process, Labels};

/// `Accept` header of every scrape: OpenMetrics 1.0 first, then text 0.0.4 (what Prometheus
/// sends with its default protocols).
pub const ACCEPT: &str = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1";

/// A target after relabeling: what to scrape and the labels its series get.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The job's name.
    pub job: String,
    /// Full URL: scheme, address, path and query parameters.
    pub url: String,
    /// Labels attached to every series of the target (`job`, `instance`, static labels), with
    /// `__`-prefixed labels removed.
    pub labels: Labels,
    /// A stable hash of job and labels: the schedule offset comes from it.
    pub identity: u64,
}

impl Target {
    /// The `instance` label.
    pub fn instance(&self) -> &str {
        self.labels.get("instance").map_or("", String::as_str)
    }
}

/// Builds a job's targets from its static configs and `relabel_configs`. Returns the targets
/// and how many relabeling dropped.
pub fn targets_for_job(job: &Job) -> (Vec<Target>, usize) {
    targets_for_groups(job, &job.config.static_configs)
}

/// Builds targets from target groups (static or discovered) with the job's defaults and
/// `relabel_configs`. Returns the targets and how many relabeling dropped; a target listed
/// twice is kept once.
pub fn targets_for_groups(job: &Job, groups: &[StaticConfig]) -> (Vec<Target>, usize) {
    let config = &job.config;
    let mut targets: Vec<Target> = Vec::new();
    let mut dropped = 0;
    for group in groups {
        for address in &group.targets {
            if let Err(reason) = crate::config::check_target(address) {
                tracing::warn!(job = %config.job_name, %reason, "target skipped");
                dropped += 1;
                continue;
            }
            let mut labels: Labels = group.labels.clone();
            let defaults = [
                ("__address__", address.clone()),
                ("__scheme__", scheme_name(config.scheme).to_string()),
                ("__metrics_path__", config.metrics_path.clone()),
                ("job", config.job_name.clone()),
            ];
            for (name, value) in defaults {
                labels.entry(name.to_string()).or_insert(value);
            }
            for (name, values) in &config.params {
                if let Some(first) = values.first() {
                    labels.entry(format!("__param_{name}")).or_insert_with(|| first.clone());
                }
            }
            match process(&job.relabel, labels).and_then(finish_target) {
                Some(target) if targets.iter().any(|existing| existing.identity == target.identity) => {}
                Some(target) => targets.push(target),
                None => dropped += 1,
            }
        }
    }
    (targets, dropped)
}

fn scheme_name(scheme: Scheme) -> &'static str {
    match scheme {
        Scheme::Http => "http",
        Scheme::Https => "https",
    }
}

/// Turns relabeled labels into a target: URL from the `__` labels, `instance` defaulted,
/// `__` labels removed. `None` without an address.
fn finish_target(mut labels: Labels) -> Option<Target> {
    let address = labels.get("__address__")?.clone();
    let scheme = labels.get("__scheme__").cloned().unwrap_or_else(|| "http".to_string());
    let path = labels
        .get("__metrics_path__")
        .cloned()
        .unwrap_or_else(|| "/metrics".to_string());
    let query: Vec<String> = labels
        .iter()
        .filter_map(|(name, value)| {
            name.strip_prefix("__param_")
                .map(|param| format!("{}={}", url_escape(param), url_escape(value)))
        })
        .collect();
    let mut url = format!("{scheme}://{address}{path}");
    if !query.is_empty() {
        url.push('?');
        url.push_str(&query.join("&"));
    }
    labels.entry("instance".to_string()).or_insert(address);
    labels.retain(|name, _| !name.starts_with("__"));
    let job = labels.get("job").cloned().unwrap_or_default();
    let mut identity_text = url.clone();
    for (name, value) in &labels {
        identity_text.push('\u{0}');
        identity_text.push_str(name);
        identity_text.push('=');
        identity_text.push_str(value);
    }
    Some(Target {
        job,
        url,
        labels,
        identity: fnv1a(identity_text.as_bytes()),
    })
}

fn url_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            escaped.push(byte as char);
        } else {
            escaped.push_str(&format!("%{byte:02X}"));
        }
    }
    escaped
}

/// FNV-1a, 64 bits: stable across runs and builds (schedule offsets and series ids must not
/// change when the binary is rebuilt).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Stable id of a series: FNV-1a over its name and its labels in name order, as
/// `name \0 label=value \0 label=value …`.
pub fn series_id(name: &str, labels: &Labels) -> u64 {
    let mut hash = Fnv1a::default();
    hash.write(name.as_bytes());
    for (label, value) in labels {
        hash.write(b"\0");
        hash.write(label.as_bytes());
        hash.write(b"=");
        hash.write(value.as_bytes());
    }
    hash.0
}

/// Incremental FNV-1a (same result as [`fnv1a`] over the concatenated bytes).
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Where a series runs, from the placement labels.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Placement {
    /// Datacenter (`placement.dc_label`), empty when unknown.
    pub dc: String,
    /// Host (`placement.host_label`, else the host part of `instance`).
    pub host: String,
    /// Service (`placement.service_label`), empty when unknown.
    pub service: String,
}

impl Placement {
    /// Reads the placement of a series from its labels.
    pub fn of(labels: &Labels, config: &PlacementConfig) -> Placement {
        let get = |name: &str| labels.get(name).cloned().unwrap_or_default();
        let mut host = get(&config.host_label);
        if host.is_empty() && config.host_from_instance {
            if let Some(instance) = labels.get("instance") {
                host = match instance.rsplit_once(':') {
                    Some((name, port)) if port.bytes().all(|byte| byte.is_ascii_digit()) => name.to_string(),
                    _ => instance.clone(),
                };
                host = host.trim_start_matches('[').trim_end_matches(']').to_string();
            }
        }
        Placement {
            dc: get(&config.dc_label),
            host,
            service: get(&config.service_label),
        }
    }
}

/// A series as stored: name, final labels, id and placement, computed once per target and
/// shared by every sample of the series (the scrape cache keeps it between scrapes).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Metric (sample) name.
    pub name: String,
    /// All labels of the series except the name, including `job`, `instance` and placement.
    pub labels: Labels,
    /// [`series_id`] of the series.
    pub id: u64,
    /// Datacenter, host and service of the series.
    pub placement: Placement,
    /// The `samples` columns from `metric` to `labels`, RowBinary-encoded once.
    encoded: Box<[u8]>,
}

impl Series {
    /// Builds a series from its name and final labels: id, placement and encoding.
    pub fn new(name: String, labels: Labels, placement: &PlacementConfig) -> Series {
        let id = series_id(&name, &labels);
        let placement = Placement::of(&labels, placement);
        let encoded = crate::store::rowbinary::series_columns(&name, &labels, &placement).into_boxed_slice();
        Series {
            name,
            labels,
            id,
            placement,
            encoded,
        }
    }

    /// RowBinary of the `samples` columns `metric, job, instance, dc, host, service, labels`.
    pub fn encoded_columns(&self) -> &[u8] {
        &self.encoded
    }
}

/// One stored sample: a point of a [`Series`].
#[derive(Debug, Clone, PartialEq)]
pub struct SampleRow {
    /// Sample time in milliseconds since the epoch (the exposition's timestamp when
    /// `honor_timestamps`, else the scrape's start).
    pub timestamp_ms: i64,
    /// The value.
    pub value: f64,
    /// The series the sample belongs to.
    pub series: Arc<Series>,
}

/// One scrape's health, as the `scrapes` table stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScrapeReport {
    /// Scrape start, milliseconds since the epoch.
    pub timestamp_ms: i64,
    /// Job name.
    pub job: String,
    /// `instance` label.
    pub instance: String,
    /// Target placement.
    pub placement: Placement,
    /// Whether the scrape succeeded.
    pub up: bool,
    /// Wall time of the scrape, seconds.
    pub duration_seconds: f64,
    /// Samples in the body.
    pub samples_scraped: u64,
    /// Samples kept after `metric_relabel_configs`.
    pub samples_post_metric_relabeling: u64,
    /// Series not present in the target's previous scrape.
    pub series_added: u64,
    /// Why the scrape failed.
    pub error: Option<String>,
    /// [`Target::identity`] of the scraped target (not stored; for target health).
    pub target_identity: u64,
}

/// What one scrape produced: its rows (including the synthetic series) and its report.
#[derive(Debug, Clone, PartialEq)]
pub struct ScrapeOutcome {
    /// Sample rows, body samples first, then the five synthetic series.
    pub rows: Vec<SampleRow>,
    /// Health of the scrape.
    pub report: ScrapeReport,
}

/// Per-target memory between scrapes: the scrape cache and the series seen last time (for
/// `scrape_series_added`).
///
/// The cache maps a sample's series as the exposition spelled it (name and labels, in body
/// order) to the [`Series`] metric relabeling and the target's labels made of it, or to
/// nothing when relabeling dropped it (Prometheus's scrape cache does the same). A scrape
/// hashes each sample's raw labels once and reuses the series; entries not seen in a successful
/// scrape are evicted after it.
#[derive(Debug, Default)]
pub struct TargetState {
    previous_series: FxHashSet<u64>,
    cache: FxHashMap<Box<[u8]>, CacheEntry>,
    synthetic: Option<Vec<Arc<Series>>>,
    generation: u64,
}

#[derive(Debug)]
struct CacheEntry {
    /// `None`: metric relabeling drops this series.
    series: Option<Arc<Series>>,
    /// [`TargetState::generation`] of the scrape that last saw it.
    seen: u64,
}

/// Settings shared by every scrape of a collector.
#[derive(Debug, Clone)]
pub struct ScrapeContext {
    /// Placement label names.
    pub placement: PlacementConfig,
    /// `global.external_labels`.
    pub external_labels: Labels,
}

/// Why a scrape failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ScrapeError {
    /// No answer within `scrape_timeout`.
    #[error("scrape timed out after {0:?}")]
    Timeout(Duration),
    /// Connection or protocol failure.
    #[error("request failed: {0}")]
    Request(String),
    /// The job's `tls_config` cannot be used (unreadable or invalid PEM).
    #[error("tls_config: {0}")]
    Tls(String),
    /// Non-2xx HTTP status.
    #[error("server returned HTTP status {0}")]
    Status(String),
    /// Body larger than `body_size_limit`.
    #[error("body larger than body_size_limit ({limit} bytes)")]
    BodyTooLarge {
        /// The configured limit, bytes.
        limit: u64,
    },
    /// The body is not a valid exposition.
    #[error("invalid body: {0}")]
    Parse(String),
    /// More samples than `sample_limit` after metric relabeling.
    #[error("sample_limit exceeded: {count} samples > {limit}")]
    SampleLimit {
        /// Samples after relabeling.
        count: u64,
        /// The limit.
        limit: u64,
    },
    /// A series with more labels than `label_limit`.
    #[error("label_limit exceeded: series '{series}' has {count} labels > {limit}")]
    LabelLimit {
        /// The series' name.
        series: String,
        /// Its label count (name included).
        count: u64,
        /// The limit.
        limit: u64,
    },
}

/// HTTP client shared by all scrapes.
#[derive(Debug, Clone)]
pub struct Scraper {
    client: reqwest::Client,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64)
}

impl Scraper {
    /// A scraper with gzip and connection reuse, trusting the system's CA roots for https.
    /// Errors if the HTTP client cannot be built.
    pub fn new() -> Result<Scraper, ScrapeError> {
        Scraper::with_tls(None)
    }

    /// A scraper for a job with `tls_config` (rustls): `ca_file` is trusted besides the
    /// system's roots, `cert_file` + `key_file` are presented to servers that ask, and
    /// `insecure_skip_verify` accepts any certificate. Errors ([`ScrapeError::Tls`]) name the
    /// file that cannot be read or parsed.
    pub fn with_tls(tls: Option<&TlsConfig>) -> Result<Scraper, ScrapeError> {
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("epicenter/", env!("CARGO_PKG_VERSION")))
            .gzip(true)
            .use_rustls_tls();
        if let Some(tls) = tls {
            let read = |key: &str, path: &std::path::Path| {
                std::fs::read(path).map_err(|error| ScrapeError::Tls(format!("{key} '{}': {error}", path.display())))
            };
            if let Some(path) = &tls.ca_file {
                let pem = read("ca_file", path)?;
                let certificates = reqwest::Certificate::from_pem_bundle(&pem)
                    .map_err(|error| ScrapeError::Tls(format!("ca_file '{}': {error}", path.display())))?;
                if certificates.is_empty() {
                    return Err(ScrapeError::Tls(format!(
                        "ca_file '{}': no PEM certificate in it",
                        path.display()
                    )));
                }
                for certificate in certificates {
                    builder = builder.add_root_certificate(certificate);
                }
            }
            if let (Some(cert), Some(key)) = (&tls.cert_file, &tls.key_file) {
                let mut pem = read("cert_file", cert)?;
                pem.push(b'\n');
                pem.extend(read("key_file", key)?);
                let identity = reqwest::Identity::from_pem(&pem).map_err(|error| {
                    ScrapeError::Tls(format!(
                        "cert_file '{}' / key_file '{}': {} (cert_file must hold the PEM certificate, key_file its PEM private key)",
                        cert.display(),
                        key.display(),
                        describe_request_error(&error)
                    ))
                })?;
                builder = builder.identity(identity);
            }
            if tls.insecure_skip_verify {
                builder = builder.danger_accept_invalid_certs(true);
            }
        }
        let client = builder
            .build()
            .map_err(|error| ScrapeError::Tls(describe_request_error(&error)))?;
        Ok(Scraper { client })
    }

    /// Scrapes `target` once.
    pub async fn scrape(
        &self,
        target: &Target,
        job: &Job,
        context: &ScrapeContext,
        state: &mut TargetState,
    ) -> ScrapeOutcome {
        let started_ms = now_ms();
        let started = Instant::now();
        let fetched = tokio::time::timeout(job.timeout, self.fetch(target, job)).await;
        let body = match fetched {
            Ok(Ok(body)) => Ok(body),
            Ok(Err(error)) => Err(error),
            Err(_) => Err(ScrapeError::Timeout(job.timeout)),
        };
        let target_placement = Placement::of(&target.labels, &context.placement);
        state.generation += 1;
        let generation = state.generation;
        let mut samples_scraped = 0;
        let result = body.and_then(|(content_type, body)| {
            let format = FormatChoice::from_content_type(content_type.as_deref());
            let exposition = parse(
                &body,
                ParseOptions {
                    format,
                    validation: Validation::Prometheus,
                },
            )
            .map_err(|error| ScrapeError::Parse(error.to_string()))?;
            samples_scraped = exposition.sample_count() as u64;
            let mut rows = Vec::with_capacity(exposition.sample_count() + 5);
            let mut key = Vec::with_capacity(256);
            for sample in &exposition.samples {
                let labels = exposition.labels_in(sample.labels);
                key.clear();
                key.extend_from_slice(sample.name.as_bytes());
                for label in labels {
                    key.push(0);
                    key.extend_from_slice(label.name.as_bytes());
                    key.push(0);
                    key.extend_from_slice(label.value.as_bytes());
                }
                let series = match state.cache.get_mut(key.as_slice()) {
                    Some(entry) => {
                        entry.seen = generation;
                        entry.series.clone()
                    }
                    None => {
                        let labels: Labels = labels
                            .iter()
                            .map(|label| (label.name.to_string(), label.value.to_string()))
                            .collect();
                        let series = series_for(&sample.name, labels, target, job, context).map(Arc::new);
                        state.cache.insert(
                            key.clone().into_boxed_slice(),
                            CacheEntry {
                                series: series.clone(),
                                seen: generation,
                            },
                        );
                        series
                    }
                };
                let Some(series) = series else { continue };
                let label_count = series.labels.len() as u64 + 1;
                if job.config.label_limit > 0 && label_count > job.config.label_limit {
                    return Err(ScrapeError::LabelLimit {
                        series: series.name.clone(),
                        count: label_count,
                        limit: job.config.label_limit,
                    });
                }
                let timestamp_ms = match (job.config.honor_timestamps, sample.timestamp_ms()) {
                    (true, Some(timestamp)) => timestamp,
                    _ => started_ms,
                };
                rows.push(SampleRow {
                    timestamp_ms,
                    value: sample.value,
                    series,
                });
            }
            let kept = rows.len() as u64;
            if job.config.sample_limit > 0 && kept > job.config.sample_limit {
                return Err(ScrapeError::SampleLimit {
                    count: kept,
                    limit: job.config.sample_limit,
                });
            }
            Ok(rows)
        });
        let duration_seconds = started.elapsed().as_secs_f64();
        let (mut rows, error) = match result {
            Ok(rows) => (rows, None),
            Err(error) => (Vec::new(), Some(error.to_string())),
        };
        let up = error.is_none();
        let samples_post_metric_relabeling = rows.len() as u64;
        let series_now: FxHashSet<u64> = rows.iter().map(|row| row.series.id).collect();
        let series_added = if up {
            series_now.difference(&state.previous_series).count() as u64
        } else {
            0
        };
        if up {
            state.previous_series = series_now;
            state.cache.retain(|_, entry| entry.seen == generation);
        }
        let synthetic = state.synthetic.get_or_insert_with(|| {
            let mut labels = target.labels.clone();
            for (label, value) in &context.external_labels {
                labels.entry(label.clone()).or_insert_with(|| value.clone());
            }
            SYNTHETIC_SERIES
                .iter()
                .map(|name| Arc::new(Series::new(name.to_string(), labels.clone(), &context.placement)))
                .collect()
        });
        let values = [
            if up { 1.0 } else { 0.0 },
            duration_seconds,
            samples_scraped as f64,
            samples_post_metric_relabeling as f64,
            series_added as f64,
        ];
        for (series, value) in synthetic.iter().zip(values) {
            rows.push(SampleRow {
                timestamp_ms: started_ms,
                value,
                series: series.clone(),
            });
        }
        let report = ScrapeReport {
            timestamp_ms: started_ms,
            job: target.job.clone(),
            instance: target.instance().to_string(),
            placement: target_placement,
            up,
            duration_seconds,
            samples_scraped,
            samples_post_metric_relabeling,
            series_added,
            error,
            target_identity: target.identity,
        };
        ScrapeOutcome { rows, report }
    }

    /// GETs the target and reads the body within `body_size_limit`. Returns the
    /// `Content-Type` and the (decompressed) body.
    async fn fetch(&self, target: &Target, job: &Job) -> Result<(Option<String>, Vec<u8>), ScrapeError> {
        let mut response = self
            .client
            .get(&target.url)
            .header(reqwest::header::ACCEPT, ACCEPT)
            .header(
                "X-Prometheus-Scrape-Timeout-Seconds",
                format!("{}", job.timeout.as_secs_f64()),
            )
            .send()
            .await
            .map_err(|error| ScrapeError::Request(describe_request_error(&error)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(ScrapeError::Status(status.to_string()));
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(str::to_string);
        let limit = job.config.body_size_limit.0;
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| ScrapeError::Request(describe_request_error(&error)))?
        {
            if limit > 0 && (body.len() + chunk.len()) as u64 > limit {
                return Err(ScrapeError::BodyTooLarge { limit });
            }
            body.extend_from_slice(&chunk);
        }
        Ok((content_type, body))
    }
}

/// Names of the synthetic series every scrape adds, in the order their values are computed.
const SYNTHETIC_SERIES: [&str; 5] = [
    "up",
    "scrape_duration_seconds",
    "scrape_samples_scraped",
    "scrape_samples_post_metric_relabeling",
    "scrape_series_added",
];

/// The stored series of a sample with `name` and body `labels`: metric relabeling (which sees
/// the name as `__name__`; `None` when it drops the series), then the target's and the
/// external labels.
fn series_for(name: &str, labels: Labels, target: &Target, job: &Job, context: &ScrapeContext) -> Option<Series> {
    let (name, mut labels) = if job.metric_relabel.is_empty() {
        (name.to_string(), labels)
    } else {
        let mut labels = labels;
        labels.insert("__name__".to_string(), name.to_string());
        let mut labels = process(&job.metric_relabel, labels)?;
        (labels.remove("__name__").unwrap_or_default(), labels)
    };
    attach_target_labels(&mut labels, &target.labels, job.config.honor_labels);
    for (label, value) in &context.external_labels {
        labels.entry(label.clone()).or_insert_with(|| value.clone());
    }
    Some(Series::new(name, labels, &context.placement))
}

/// reqwest's error with its causes, e.g. `error sending request: … Connection refused`, and
/// a plain-words hint for the TLS failures people meet most.
fn describe_request_error(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    if let Some(hint) = tls_hint(&text) {
        text.push_str(" (");
        text.push_str(hint);
        text.push(')');
    }
    text
}

/// What a rustls failure means for the person configuring the scrape.
fn tls_hint(text: &str) -> Option<&'static str> {
    let hints = [
        (
            "CaUsedAsEndEntity",
            "the server's certificate is itself a CA certificate (basicConstraints CA:TRUE, as `openssl req -x509` makes by default); serve a leaf certificate signed by a CA and put that CA in tls_config.ca_file (docs/configuration.md shows how), or set tls_config.insecure_skip_verify",
        ),
        (
            "UnknownIssuer",
            "the server's certificate is not signed by a trusted CA: put its CA in tls_config.ca_file",
        ),
        (
            "InvalidContentType",
            "the server did not answer with TLS: is it plain http? (scheme: http)",
        ),
        (
            "NotValidForName",
            "the certificate does not name the address scraped: scrape a name its subjectAltName lists",
        ),
        ("not valid for name", "the certificate does not name the address scraped: scrape a name its subjectAltName lists"),
        ("Expired", "the server's certificate has expired"),
    ];
    hints
        .iter()
        .find(|(token, _)| text.contains(token))
        .map(|(_, hint)| *hint)
}

/// Adds the target's labels to a series (Prometheus `mutateSampleLabels`): with
/// `honor_labels` the series' own value wins; otherwise the target's does and a clashing
/// series label is kept as `exported_<name>`.
fn attach_target_labels(labels: &mut Labels, target_labels: &Labels, honor_labels: bool) {
    for (name, value) in target_labels {
        match labels.get(name) {
            Some(_) if honor_labels => {}
            Some(existing) if existing != value => {
                let existing = existing.clone();
                let mut exported = format!("exported_{name}");
                while labels.contains_key(&exported) {
                    exported = format!("exported_{exported}");
                }
                labels.insert(exported, existing);
                labels.insert(name.clone(), value.clone());
            }
            _ => {
                labels.insert(name.clone(), value.clone());
            }
        }
    }
}

/// Offset of a target's first scrape within its interval, from its identity: targets spread
/// evenly over the interval instead of firing together, and keep their slot across restarts.
pub fn schedule_offset(identity: u64, interval: Duration) -> Duration {
    let interval_nanos = interval.as_nanos().max(1);
    Duration::from_nanos((u128::from(identity) % interval_nanos) as u64)
}

/// Scrapes `target` every `job.interval`, starting at its [`schedule_offset`], and sends each
/// outcome to `out` (waiting when the channel is full: backpressure reaches the scraper, never
/// other targets). Stops when `shutdown` turns true (cancelling a scrape in flight) or the
/// receiver is gone.
pub async fn run_target(
    target: Target,
    job: Arc<Job>,
    scraper: Scraper,
    context: Arc<ScrapeContext>,
    out: mpsc::Sender<ScrapeOutcome>,
    mut shutdown: watch::Receiver<bool>,
) {
    let start = Instant::now() + schedule_offset(target.identity, job.interval);
    let mut ticks = tokio::time::interval_at(start, job.interval);
    // A scrape that overran its slot is not made up for: the next one keeps the schedule.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut state = TargetState::default();
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        // Shutdown cancels a scrape in flight rather than waiting up to its timeout.
        let outcome = tokio::select! {
            outcome = scraper.scrape(&target, &job, &context, &mut state) => outcome,
            _ = shutdown.changed() => return,
        };
        if out.send(outcome).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn job(yaml: &str) -> Job {
        Config::from_yaml(yaml).unwrap().validate().unwrap().remove(0)
    }

    #[test]
    fn targets_get_job_instance_and_static_labels() {
        let job = job("scrape_configs:\n  - job_name: redis\n    params: {module: [redis]}\n    static_configs:\n      - targets: ['127.0.0.1:9121', 'redis-7:9121']\n        labels: {dc: dc-2}\n");
        let (targets, dropped) = targets_for_job(&job);
        assert_eq!(dropped, 0);
        assert_eq!(targets.len(), 2);
        assert_eq!(targets[0].url, "http://127.0.0.1:9121/metrics?module=redis");
        assert_eq!(targets[0].labels.get("job").map(String::as_str), Some("redis"));
        assert_eq!(targets[0].instance(), "127.0.0.1:9121");
        assert_eq!(targets[0].labels.get("dc").map(String::as_str), Some("dc-2"));
        assert!(targets[0].labels.keys().all(|name| !name.starts_with("__")));
        assert_ne!(targets[0].identity, targets[1].identity);
    }

    #[test]
    fn relabeling_can_drop_targets_and_rewrite_the_address() {
        let job = job("scrape_configs:\n  - job_name: a\n    static_configs: [{targets: ['10.0.0.1:9100', '10.0.0.2:9100']}]\n    relabel_configs:\n      - {source_labels: [__address__], regex: '10.0.0.2:.*', action: drop}\n      - {source_labels: [__address__], regex: '(.*):9100', target_label: __address__, replacement: '${1}:9200'}\n");
        let (targets, dropped) = targets_for_job(&job);
        assert_eq!(dropped, 1);
        assert_eq!(targets[0].url, "http://10.0.0.1:9200/metrics");
        // instance defaults to the address after relabeling, as in Prometheus.
        assert_eq!(targets[0].instance(), "10.0.0.1:9200");
    }

    #[test]
    fn discovered_targets_are_checked_like_static_ones() {
        let job = job("scrape_configs:\n  - job_name: a\n");
        let group = StaticConfig {
            targets: vec![
                "http://bad/".into(),
                "nohost".into(),
                "127.0.0.1:99999".into(),
                "127.0.0.1:9100".into(),
            ],
            labels: Default::default(),
        };
        let (targets, dropped) = targets_for_groups(&job, &[group]);
        assert_eq!(dropped, 3);
        assert_eq!(targets.len(), 1);
        assert_eq!(targets[0].url, "http://127.0.0.1:9100/metrics");
    }

    #[test]
    fn placement_comes_from_labels_or_instance() {
        let config = PlacementConfig::default();
        let labels: Labels = [("dc", "dc-1"), ("instance", "redis-7.dc-1:9121"), ("service", "redis")]
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        let placement = Placement::of(&labels, &config);
        assert_eq!(
            placement,
            Placement {
                dc: "dc-1".into(),
                host: "redis-7.dc-1".into(),
                service: "redis".into()
            }
        );
        let ipv6: Labels = [("instance".to_string(), "[::1]:9100".to_string())]
            .into_iter()
            .collect();
        assert_eq!(Placement::of(&ipv6, &config).host, "::1");
    }

    #[test]
    fn clashing_labels_are_exported_unless_honored() {
        let target: Labels = [("job".to_string(), "redis".to_string())].into_iter().collect();
        let mut series: Labels = [("job".to_string(), "app".to_string())].into_iter().collect();
        attach_target_labels(&mut series, &target, false);
        assert_eq!(series.get("job").map(String::as_str), Some("redis"));
        assert_eq!(series.get("exported_job").map(String::as_str), Some("app"));
        let mut honored: Labels = [("job".to_string(), "app".to_string())].into_iter().collect();
        attach_target_labels(&mut honored, &target, true);
        assert_eq!(honored.get("job").map(String::as_str), Some("app"));
        assert!(!honored.contains_key("exported_job"));
    }

    #[test]
    fn series_ids_hash_name_and_sorted_labels() {
        let labels: Labels = [("b".to_string(), "2".to_string()), ("a".to_string(), "1".to_string())]
            .into_iter()
            .collect();
        assert_eq!(series_id("up", &labels), fnv1a(b"up\0a=1\0b=2"));
        assert_ne!(series_id("up", &labels), series_id("down", &labels));
    }

    #[test]
    fn a_thousand_targets_spread_over_the_interval() {
        let interval = Duration::from_secs(10);
        let mut buckets = [0usize; 10];
        for index in 0..1000 {
            let identity =
                fnv1a(format!("http://10.1.{}.{}:9100/metrics\0job=node", index / 250, index % 250).as_bytes());
            let offset = schedule_offset(identity, interval);
            assert!(offset < interval);
            buckets[(offset.as_secs_f64()) as usize] += 1;
        }
        // Uniform would be 100 per second of the interval; no second gets more than 1.5x.
        assert!(buckets.iter().all(|&count| count > 60 && count < 150), "{buckets:?}");
    }
}
