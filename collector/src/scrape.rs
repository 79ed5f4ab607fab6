//! Scraping: a job's targets, one scrape of a target into rows, and each target's schedule.
//!
//! Follows Prometheus's scrape semantics (`scrape/target.go`, `scrape/scrape.go`): targets get
//! `__address__`, `__scheme__`, `__metrics_path__`, `__param_<name>` and `job` before
//! `relabel_configs`; `instance` defaults to `__address__`; labels starting with `__` are
//! removed afterwards. A scrape sends `Accept` preferring OpenMetrics, reads at most
//! `body_size_limit` bytes of the (gunzipped) body within `scrape_timeout`, parses it as the
//! `Content-Type` says, attaches the target's labels (`exported_<name>` on clashes unless
//! `honor_labels`), then applies `metric_relabel_configs`, enforces `sample_limit`,
//! `label_limit`, `label_name_length_limit` and `label_value_length_limit`, and adds the synthetic series `up`, `scrape_duration_seconds`,
//! `scrape_samples_scraped`, `scrape_samples_post_metric_relabeling` and
//! `scrape_series_added`. A sample stamped more than 10 minutes after the scrape's time or more
//! than an hour before it is refused and counted (`epicenter_store::rows::sample_bounds`, as
//! Prometheus's `storage.ErrOutOfBounds`), the scrape staying up. Any failure fails the whole scrape (`up` 0, with the reason) and
//! touches no other target.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, MissedTickBehavior};
use xxhash_rust::xxh3::xxh3_128;

use epicenter_config::TlsConfig;
use epicenter_store::config::PlacementConfig;
use epicenter_store::rows::{Labels, Placement, SampleRow, ScrapeOutcome, ScrapeReport, Series};

use crate::client::{describe_request_error, http_client};
use crate::config::Job;
use crate::exposition::{parse_deferring_labels, FormatChoice, ParseOptions, Validation};
use crate::relabel::process;
use crate::targets::Target;

pub use crate::config::ACCEPT;

/// Per-target memory between scrapes: the scrape cache and the series seen last time (for
/// `scrape_series_added`).
///
/// The cache maps a sample's series as the exposition spelled it ([`crate::exposition::Sample::series`]: the
/// name and label set, byte for byte) to the [`Series`] metric relabeling and the target's
/// labels made of it, or to nothing when relabeling dropped it (Prometheus's scrape cache does
/// the same, keyed by the same bytes). The key is the spelling's 128-bit XXH3 hash, not the
/// bytes: a known series costs one hash of bytes the parser just read and one integer lookup,
/// with no key to build or compare. Two spellings with one hash would share a series; with
/// 128 bits that takes about 2^64 distinct spellings in one target. Entries not seen in a
/// successful scrape are evicted after it.
#[derive(Debug, Default)]
pub struct TargetState {
    previous_series: FxHashMap<u64, i64>,
    /// Whether duplicate samples of this target were logged already.
    warned_duplicates: bool,
    /// Whether samples of this target stamped out of bounds were logged already.
    warned_out_of_bounds: bool,
    cache: FxHashMap<u128, CacheEntry>,
    synthetic: Option<Vec<Arc<Series>>>,
    /// The host the target's exposition names (`node_uname_info{nodename}`), as the cached
    /// series were placed with it ([`epicenter_store::rows::Placement::placed`]).
    nodename: Option<String>,
    generation: u64,
    /// The Redis observer's connection and counters, for a `redis_observer` job.
    observer: crate::redis_observer::ObserverState,
    /// Its resolver for callers' reverse-DNS names (`redis_observer.reverse_dns`), made at
    /// the first poll.
    observer_resolver: Option<hickory_resolver::TokioAsyncResolver>,
    /// The target's URL as text and parsed, kept between scrapes.
    url: Option<(String, reqwest::Url)>,
    /// Length of the last body read, in bytes: the next body's buffer starts that large.
    body_bytes: usize,
}

#[derive(Debug)]
struct CacheEntry {
    /// `None`: metric relabeling drops this series.
    series: Option<Arc<Series>>,
    /// [`TargetState::generation`] of the scrape that last saw it.
    seen: u64,
    /// [`TargetState::generation`] of the scrape that added it: a failed scrape takes back
    /// what it added, so a target over its limits does not grow the cache.
    added: u64,
}

/// Settings shared by every scrape of a collector.
#[derive(Debug, Clone, Default)]
pub struct ScrapeContext {
    /// Placement label names.
    pub placement: PlacementConfig,
    /// `global.external_labels`.
    pub external_labels: Labels,
    /// Where a scrape's own time (the `scrapes` row, the synthetic `up` and `scrape_*`
    /// samples, and samples without a timestamp) comes from: the wall clock, or a
    /// simulation's.
    pub clock: Clock,
    /// Every target's health and labels, when the collector keeps them (`epicenter run`):
    /// the Redis observer names a caller whose address is a known target by that target's
    /// host and service.
    pub targets: Option<Arc<crate::targets::TargetRegistry>>,
}

/// The time a scrape is stamped with, in milliseconds since the epoch.
///
/// A collector of real targets reads the wall clock. A simulated fleet
/// (`epicenter demo`) runs faster than the wall clock and stamps its samples with its own
/// time; stamping its scrapes with the same time keeps one time line in the store (the
/// `scrapes` rows, `up` and the samples of a scrape agree).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Clock {
    /// The system's wall clock.
    #[default]
    Wall,
    /// A simulation's clock: `start_ms` at wall time `wall_start_ms`, advancing `speed`
    /// simulated milliseconds per wall millisecond until it reaches `end_ms`, then at the wall
    /// clock's pace (a simulation that holds still at its end goes on being scraped).
    Simulated {
        /// Wall time the simulation started, ms since the epoch.
        wall_start_ms: i64,
        /// Simulated time at `wall_start_ms`, ms since the epoch.
        start_ms: i64,
        /// Simulated seconds per wall second (> 0).
        speed: f64,
        /// Simulated time the simulation ends, ms since the epoch (>= `start_ms`).
        end_ms: i64,
    },
}

impl Clock {
    /// The clock's time now, ms since the epoch.
    pub fn now_ms(&self) -> i64 {
        self.at(now_ms())
    }

    /// The clock's time when the wall clock reads `wall_ms`.
    pub fn at(&self, wall_ms: i64) -> i64 {
        match *self {
            Clock::Wall => wall_ms,
            Clock::Simulated {
                wall_start_ms,
                start_ms,
                speed,
                end_ms,
            } => {
                let speed = if speed > 0.0 { speed } else { 1.0 };
                let wall_end_ms = wall_start_ms + ((end_ms - start_ms) as f64 / speed).round() as i64;
                if wall_ms < wall_end_ms {
                    start_ms + ((wall_ms - wall_start_ms) as f64 * speed).round() as i64
                } else {
                    end_ms + (wall_ms - wall_end_ms)
                }
            }
        }
    }
}

/// Why a scrape failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ScrapeError {
    /// No answer within `scrape_timeout`.
    #[error("scrape timed out after {0:?}")]
    Timeout(Duration),
    /// No answer within `scrape_timeout` while epicenter itself was starved: its runtime woke
    /// up to `lag` late during the scrape ([`crate::lag`]), so the target is not to blame.
    #[error(
        "starved: scrape timed out after {timeout:?} while epicenter itself ran {} ms late (its runtime was starved of CPU); not counted against the target",
        .lag.as_millis()
    )]
    Starved {
        /// The target's `scrape_timeout`.
        timeout: Duration,
        /// The largest scheduling lag measured during the scrape.
        lag: Duration,
    },
    /// Connection or protocol failure.
    #[error("request failed: {0}")]
    Request(String),
    /// A `redis_observer` poll failed: a command, `AUTH`, or a timeout (the message says
    /// which; never the password).
    #[error("redis: {0}")]
    Redis(String),
    /// The job's `tls_config` cannot be used (unreadable or invalid PEM).
    #[error("tls_config: {0}")]
    Tls(String),
    /// A credentials file named by the job cannot be read.
    #[error("cannot authenticate: {0}")]
    Credentials(String),
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
    #[error("sample_limit exceeded: more than {limit} samples after metric relabeling (the body has {count})")]
    SampleLimit {
        /// Samples in the body, before metric relabeling (the scrape stops at the first
        /// sample past the limit, so how many relabeling would keep is not known).
        count: u64,
        /// The job's `sample_limit`.
        limit: u64,
    },
    /// A label name or value longer than `label_name_length_limit` or
    /// `label_value_length_limit`.
    #[error("{key} exceeded: series '{series}' has a label {what} of {length} bytes > {limit}")]
    LabelLengthLimit {
        /// The config key of the limit.
        key: &'static str,
        /// `name` or `value`.
        what: &'static str,
        /// The series' name.
        series: String,
        /// The label name or value's length, in bytes.
        length: u64,
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
        let client = http_client(tls).map_err(ScrapeError::Tls)?;
        Ok(Scraper { client })
    }

    /// The scraper of a job: its `tls_config` ([`Scraper::with_tls`]), its proxy
    /// (`proxy_url`, `no_proxy`, `proxy_from_environment`) and `follow_redirects`.
    ///
    /// # Errors
    /// [`ScrapeError::Tls`] naming the file or the proxy URL that cannot be used.
    pub fn for_job(config: &crate::config::ScrapeConfig) -> Result<Scraper, ScrapeError> {
        let client =
            crate::client::http_client_with_proxy(config.tls_config.as_ref(), &config.proxy(), config.follow_redirects)
                .map_err(ScrapeError::Tls)?;
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
        crate::lag::start_probe();
        let started_ms = context.clock.now_ms();
        let started = Instant::now();
        let fetched = match &job.config.redis_observer {
            Some(observer) => {
                let polled = tokio::time::timeout(
                    target.timeout,
                    observe(
                        target,
                        job,
                        observer,
                        context,
                        &mut state.observer,
                        &mut state.observer_resolver,
                    ),
                )
                .await;
                if polled.is_err() {
                    // The reply may still arrive on the connection: start afresh.
                    state.observer.disconnect();
                }
                polled
            }
            None => {
                // The target's URL parsed once, not at every scrape (reqwest parses a string
                // each time); a URL that does not parse is left to reqwest to report.
                if state.url.as_ref().is_none_or(|(text, _)| *text != target.url) {
                    state.url = reqwest::Url::parse(&target.url)
                        .ok()
                        .map(|url| (target.url.clone(), url));
                }
                let url = state.url.as_ref().map(|(_, url)| url.clone());
                let capacity = state.body_bytes;
                tokio::time::timeout(target.timeout, self.fetch(target, job, url, capacity)).await
            }
        };
        let body = match fetched {
            Ok(Ok(body)) => {
                state.body_bytes = body.1.len();
                Ok(body)
            }
            Ok(Err(error)) => Err(error),
            Err(_) => Err(ScrapeError::Timeout(target.timeout)),
        };
        // A timeout while epicenter's own runtime ran late is epicenter's, not the target's.
        let body = match body {
            Err(ScrapeError::Timeout(timeout)) => match crate::lag::starved_during(started, Instant::now(), timeout) {
                Some(lag) => Err(ScrapeError::Starved { timeout, lag }),
                None => Err(ScrapeError::Timeout(timeout)),
            },
            other => other,
        };
        let starved = matches!(body, Err(ScrapeError::Starved { .. }));
        state.generation += 1;
        let generation = state.generation;
        let mut samples_scraped = 0;
        let mut samples_duplicate = 0;
        // Samples refused for their timestamp (by `OutOfBounds::index`), and the first one's
        // series and time, for the log.
        let mut samples_out_of_bounds = [0u64; 2];
        let mut first_out_of_bounds: Option<(String, i64)> = None;
        // What Prometheus reports as `scrape_samples_post_metric_relabeling` when the scrape
        // fails on a limit: the samples relabeling kept, up to the failing one (label limits)
        // or in the whole body (sample_limit), as its scrape loop counts them.
        let mut kept_before_error = 0u64;
        // Each stored series of this scrape and the time of its last kept sample.
        // Sized as the last scrape's, so a steady target never grows it sample by sample.
        let mut series_now: FxHashMap<u64, i64> =
            FxHashMap::with_capacity_and_hasher(state.previous_series.len(), Default::default());
        // The host the target had when this body named another: a failed scrape (the body
        // then fails on a later series' labels) leaves it as it was, restored below.
        let mut nodename_before: Option<Option<String>> = None;
        let result = body.and_then(|(content_type, body)| {
            let format = FormatChoice::from_content_type(content_type.as_deref());
            let exposition = parse_deferring_labels(
                &body,
                ParseOptions {
                    format,
                    validation: Validation::Prometheus,
                },
            )
            .map_err(|error| ScrapeError::Parse(error.to_string()))?;
            samples_scraped = exposition.sample_count() as u64;
            // A host's own exporter names the host: its series (and this target's scrapes)
            // are placed on that name; when it changes, every cached series is placed anew.
            // Not through `honor_labels` (a federation or Pushgateway target carries many
            // hosts' series, each with its own `instance`).
            if context.placement.host_from_uname && !job.config.honor_labels {
                let nodename = uname_nodename(&exposition);
                if nodename != state.nodename {
                    nodename_before = Some(std::mem::replace(&mut state.nodename, nodename));
                    state.cache.clear();
                    state.synthetic = None;
                }
            }
            let nodename = state.nodename.as_deref();
            let mut rows = Vec::with_capacity(exposition.sample_count() + 5);
            let mut limit_passed = false;
            for (index, sample) in exposition.samples.iter().enumerate() {
                let key = xxh3_128(sample.series.as_bytes());
                let series = match state.cache.get_mut(&key) {
                    Some(entry) => {
                        entry.seen = generation;
                        entry.series.clone()
                    }
                    None => {
                        // A series new to the cache: its labels are read now (the parse
                        // deferred them). A label name given twice fails the scrape, as the
                        // whole body failing to parse would: nothing of it is kept.
                        let labels: Labels = match exposition.labels_of(sample) {
                            Ok(labels) => labels
                                .iter()
                                .map(|label| (label.name.to_string(), label.value.to_string()))
                                .collect(),
                            Err(error) => {
                                samples_scraped = 0;
                                return Err(ScrapeError::Parse(error.to_string()));
                            }
                        };
                        let series = series_for(&sample.name, labels, target, job, context, nodename).map(Arc::new);
                        state.cache.insert(
                            key,
                            CacheEntry {
                                series: series.clone(),
                                seen: generation,
                                added: generation,
                            },
                        );
                        series
                    }
                };
                let Some(series) = series else { continue };
                // A label limit ends the scrape at this sample: Prometheus reports the samples
                // up to it as scraped and those kept before it.
                let label_count = series.labels.len() as u64 + 1;
                let label_error = if job.limits.labels > 0 && label_count > job.limits.labels {
                    Err(ScrapeError::LabelLimit {
                        series: series.name.clone(),
                        count: label_count,
                        limit: job.limits.labels,
                    })
                } else {
                    check_label_lengths(&series, &job.limits)
                };
                if let Err(error) = label_error {
                    samples_scraped = index as u64 + 1;
                    kept_before_error =
                        rows.len() as u64 + samples_duplicate + samples_out_of_bounds.iter().sum::<u64>();
                    return Err(error);
                }
                let timestamp_ms = match (job.config.honor_timestamps, sample.timestamp_ms()) {
                    (true, Some(timestamp)) => timestamp,
                    _ => started_ms,
                };
                // Duplicates count against the limit, as in Prometheus (its limit appender
                // counts every append). Past the limit nothing more is stored or cached; the
                // rest of the body is only counted (see `limit_passed`).
                if job.limits.samples > 0
                    && rows.len() as u64 + samples_duplicate + samples_out_of_bounds.iter().sum::<u64>()
                        >= job.limits.samples
                {
                    // Prometheus counts every sample relabeling keeps, the whole body through.
                    // Without metric_relabel_configs that is every sample left, counted for
                    // free; with them, counting would mean relabeling a cardinality explosion
                    // in full, so the count stops here (docs/configuration.md).
                    limit_passed = true;
                    kept_before_error =
                        rows.len() as u64 + samples_duplicate + samples_out_of_bounds.iter().sum::<u64>() + 1;
                    if job.metric_relabel.is_empty() {
                        kept_before_error += (exposition.samples.len() - index - 1) as u64;
                    }
                    break;
                }
                // A sample stamped too far from the scrape's time is refused and counted, as
                // Prometheus's appender refuses it (`storage.ErrOutOfBounds`): it counts as
                // kept by relabeling, is neither stored nor read by the detector, and the
                // scrape stays up.
                if let Some(reason) = epicenter_store::rows::sample_bounds(timestamp_ms, started_ms) {
                    samples_out_of_bounds[reason.index()] += 1;
                    first_out_of_bounds.get_or_insert_with(|| (series.name.clone(), timestamp_ms));
                    continue;
                }
                // The same series again in this body (printed twice, or made equal by metric
                // relabeling) at the same or an earlier time: Prometheus keeps the first
                // sample and counts the rest as duplicates.
                match series_now.entry(series.id) {
                    Entry::Occupied(mut last) => {
                        if timestamp_ms <= *last.get() {
                            samples_duplicate += 1;
                            continue;
                        }
                        last.insert(timestamp_ms);
                    }
                    Entry::Vacant(first) => {
                        first.insert(timestamp_ms);
                    }
                }
                rows.push(SampleRow {
                    timestamp_ms,
                    value: sample.value,
                    series,
                });
            }
            if limit_passed {
                return Err(ScrapeError::SampleLimit {
                    count: samples_scraped,
                    limit: job.limits.samples,
                });
            }
            Ok(rows)
        });
        let duration_seconds = started.elapsed().as_secs_f64();
        let (mut rows, error) = match result {
            Ok(rows) => (rows, None),
            Err(error) => (Vec::new(), Some(error.to_string())),
        };
        if let (Some(_), Some(before)) = (&error, nodename_before) {
            state.nodename = before;
            state.synthetic = None;
            state.cache.clear();
        }
        let up = error.is_none();
        if !up {
            samples_duplicate = 0;
            samples_out_of_bounds = [0, 0];
        }
        let refused: u64 = samples_out_of_bounds.iter().sum();
        let samples_post_metric_relabeling = if up {
            rows.len() as u64 + samples_duplicate + refused
        } else {
            kept_before_error
        };
        let series_added = if up {
            series_now
                .keys()
                .filter(|id| !state.previous_series.contains_key(*id))
                .count() as u64
        } else {
            0
        };
        if samples_duplicate > 0 && !state.warned_duplicates {
            state.warned_duplicates = true;
            tracing::warn!(
                job = %target.job,
                instance = %target.instance(),
                samples_duplicate,
                "the body holds the same series more than once at one timestamp: the first sample is kept, the others are dropped and counted in epicenter_scrape_samples_duplicate_total (warned once per target)"
            );
        }
        if let (true, Some((name, timestamp_ms))) = (refused > 0 && !state.warned_out_of_bounds, &first_out_of_bounds) {
            state.warned_out_of_bounds = true;
            tracing::warn!(
                job = %target.job,
                instance = %target.instance(),
                refused,
                series = %name,
                sample_timestamp_ms = *timestamp_ms,
                scrape_timestamp_ms = started_ms,
                "samples stamped more than 10 minutes after the scrape's time or more than an hour before it were refused (the target's clock is wrong?); counted in epicenter_scrape_samples_out_of_bounds_total (warned once per target)"
            );
        }
        if up {
            state.previous_series = series_now;
            state.cache.retain(|_, entry| entry.seen == generation);
        } else {
            state.cache.retain(|_, entry| entry.added != generation);
        }
        let nodename = state.nodename.as_deref();
        let target_placement = Placement::placed(&target.labels, &context.placement, nodename);
        let synthetic = state.synthetic.get_or_insert_with(|| {
            let mut labels = target.labels.clone();
            for (label, value) in &context.external_labels {
                labels.entry(label.clone()).or_insert_with(|| value.clone());
            }
            SYNTHETIC_SERIES
                .iter()
                .map(|name| {
                    Arc::new(Series::placed(
                        name.to_string(),
                        labels.clone(),
                        &context.placement,
                        nodename,
                    ))
                })
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
            samples_duplicate,
            samples_out_of_bounds,
            error,
            target_identity: target.identity,
            skipped: false,
            starved,
        };
        ScrapeOutcome { rows, report }
    }

    /// GETs the target and reads the body within `body_size_limit`. Returns the
    /// `Content-Type` and the (decompressed) body.
    /// `url`: the target's URL parsed (else reqwest parses `target.url`); `capacity`: the
    /// bytes the body is expected to hold (the last body's), reserved up front.
    async fn fetch(
        &self,
        target: &Target,
        job: &Job,
        url: Option<reqwest::Url>,
        capacity: usize,
    ) -> Result<(Option<String>, Vec<u8>), ScrapeError> {
        let request = match url {
            Some(url) => self.client.get(url),
            None => self.client.get(&target.url),
        };
        let mut request = request.header(reqwest::header::ACCEPT, job.accept.as_str()).header(
            "X-Prometheus-Scrape-Timeout-Seconds",
            format!("{}", target.timeout.as_secs_f64()),
        );
        if !job.config.http_headers.is_empty() {
            request = crate::headers::apply(&job.config.http_headers, request).map_err(ScrapeError::Credentials)?;
        }
        if let Some(auth) = &job.auth {
            request = auth
                .apply(&self.client, request)
                .await
                .map_err(ScrapeError::Credentials)?;
        }
        let mut response = request
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
        // Chunks come decompressed (reqwest's gzip): the limit bounds what is held, so a
        // gzip bomb stops here at the limit.
        let limit = job.limits.body_size_bytes;
        // Decompression runs inside `chunk()` and may never wait on the network (a gzip
        // bomb): the deadline is checked per chunk, and the task yields now and then, so the
        // timeout and a shutdown act even then.
        let deadline = Instant::now() + target.timeout;
        let mut chunks = 0u64;
        let mut body = Vec::with_capacity(capacity);
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| ScrapeError::Request(describe_request_error(&error)))?
        {
            if let Some(limit) = limit.filter(|limit| (body.len() + chunk.len()) as u64 > *limit) {
                return Err(ScrapeError::BodyTooLarge { limit });
            }
            if Instant::now() >= deadline {
                return Err(ScrapeError::Timeout(target.timeout));
            }
            chunks += 1;
            if chunks % 64 == 0 {
                tokio::task::yield_now().await;
            }
            body.extend_from_slice(&chunk);
        }
        Ok((content_type, body))
    }
}

/// Polls the Redis node of a `redis_observer` job's target (its URL's `host:port`) and
/// returns its exposition as a text-format body. A target without a port is on 6379.
async fn observe(
    target: &Target,
    job: &Job,
    config: &crate::redis_observer::RedisObserverConfig,
    context: &ScrapeContext,
    state: &mut crate::redis_observer::ObserverState,
    resolver: &mut Option<hickory_resolver::TokioAsyncResolver>,
) -> Result<(Option<String>, Vec<u8>), ScrapeError> {
    let address = url::Url::parse(&target.url)
        .ok()
        .and_then(|url| Some(format!("{}:{}", url.host_str()?, url.port().unwrap_or(6379))))
        .ok_or_else(|| ScrapeError::Request(format!("no host:port in the target's address {}", target.url)))?;
    let (username, password) = match job.auth.as_deref() {
        Some(crate::auth::ScrapeAuth::Basic { username, password }) => (
            username.clone(),
            Some(password.current().map_err(ScrapeError::Credentials)?),
        ),
        _ => (String::new(), None),
    };
    let credentials = password.as_ref().map(|password| crate::redis_observer::Credentials {
        username: &username,
        password: password.expose(),
    });
    let known = context
        .targets
        .as_ref()
        .map(|targets| targets.placements_by_ip(&context.placement))
        .unwrap_or_default();
    if config.reverse_dns && resolver.is_none() {
        *resolver = Some(
            crate::dns_sd::resolver(&job.dns_servers, crate::redis_observer::REVERSE_LOOKUP_BUDGET)
                .map_err(ScrapeError::Request)?,
        );
    }
    let tls = match &job.config.tls_config {
        Some(tls) => Some(observer_tls(tls).map_err(ScrapeError::Tls)?),
        None => None,
    };
    let node = crate::redis_observer::Node {
        address: &address,
        credentials,
        tls: tls.as_ref(),
        known: &known,
        resolver: resolver.as_ref(),
        timeout: target.timeout,
    };
    let body = crate::redis_observer::observe(node, config, state)
        .await
        .map_err(ScrapeError::Redis)?;
    Ok((Some("text/plain; version=0.0.4".to_string()), body.into_bytes()))
}

/// The Redis observer's TLS settings from a job's `tls_config`: each PEM inline or read from
/// its file. Errors name the file that cannot be read.
fn observer_tls(tls: &TlsConfig) -> Result<crate::redis_observer::Tls, String> {
    let pem = |inline: Option<&str>, file: Option<&std::path::Path>, key: &str| -> Result<Option<Vec<u8>>, String> {
        match (inline, file) {
            (Some(text), _) => Ok(Some(text.as_bytes().to_vec())),
            (None, Some(path)) => std::fs::read(path)
                .map(Some)
                .map_err(|error| format!("{key} {}: {error}", path.display())),
            (None, None) => Ok(None),
        }
    };
    let ca_pem = pem(tls.ca.as_deref(), tls.ca_file.as_deref(), "ca_file")?;
    let cert = pem(tls.cert.as_deref(), tls.cert_file.as_deref(), "cert_file")?;
    let key = pem(
        tls.key.as_ref().map(epicenter_config::Secret::expose),
        tls.key_file.as_deref(),
        "key_file",
    )?;
    Ok(crate::redis_observer::Tls {
        ca_pem,
        client_pem: cert.zip(key),
        insecure: tls.insecure_skip_verify,
    })
}

/// Fails a series whose label names or values are longer than the job allows (Prometheus
/// `verifyLabelLimits`, which counts the metric name as the label `__name__`: a name longer
/// than `label_value_length_limit` fails the scrape, as the Prometheus 2.42 comparison in
/// tests/prometheus_parity.rs showed). Costs nothing when both limits are 0 (the default).
fn check_label_lengths(series: &Series, limits: &crate::config::Limits) -> Result<(), ScrapeError> {
    let (names, values) = (limits.label_name_bytes, limits.label_value_bytes);
    if names == 0 && values == 0 {
        return Ok(());
    }
    let metric_name = ("__name__", series.name.as_str());
    let labels = series
        .labels
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()));
    for (name, value) in std::iter::once(metric_name).chain(labels) {
        let too_long = |length: usize, limit: u64, key, what| {
            (limit > 0 && length as u64 > limit).then(|| ScrapeError::LabelLengthLimit {
                key,
                what,
                series: series.name.clone(),
                length: length as u64,
                limit,
            })
        };
        if let Some(error) = too_long(name.len(), names, "label_name_length_limit", "name")
            .or_else(|| too_long(value.len(), values, "label_value_length_limit", "value"))
        {
            return Err(error);
        }
    }
    Ok(())
}

/// Names of the synthetic series every scrape adds, in the order their values are computed.
const SYNTHETIC_SERIES: [&str; 5] = [
    "up",
    "scrape_duration_seconds",
    "scrape_samples_scraped",
    "scrape_samples_post_metric_relabeling",
    "scrape_series_added",
];

/// The stored series of a sample with `name` and body `labels`, in Prometheus's order: the
/// target's labels are attached first (`mutateSampleLabels`), then `metric_relabel_configs`
/// run on the result (seeing the name as `__name__`, and `job`, `instance` and the target's
/// other labels; `None` when they drop the series or its name), then the external labels.
fn series_for(
    name: &str,
    labels: Labels,
    target: &Target,
    job: &Job,
    context: &ScrapeContext,
    nodename: Option<&str>,
) -> Option<Series> {
    let mut labels = labels;
    attach_target_labels(&mut labels, &target.labels, job.config.honor_labels);
    let (name, mut labels) = if job.metric_relabel.is_empty() {
        (name.to_string(), labels)
    } else {
        labels.insert("__name__".to_string(), name.to_string());
        let mut labels = process(&job.metric_relabel, labels)?;
        let name = labels.remove("__name__").filter(|name| !name.is_empty())?;
        (name, labels)
    };
    for (label, value) in &context.external_labels {
        labels.entry(label.clone()).or_insert_with(|| value.clone());
    }
    // A label with an empty value is no label (Prometheus's label builder drops them).
    labels.retain(|_, value| !value.is_empty());
    Some(Series::placed(name, labels, &context.placement, nodename))
}

/// The `nodename` label of the exposition's `node_uname_info` (node_exporter's `uname`
/// collector: the kernel's host name), when the family has exactly one sample (a body with
/// several speaks for several hosts). Looks at family names only, so a body without the
/// family costs a comparison per family.
fn uname_nodename(exposition: &crate::exposition::Exposition<'_>) -> Option<String> {
    let family = exposition
        .families
        .iter()
        .find(|family| family.name == "node_uname_info")?;
    let [sample] = exposition.samples_of(family) else {
        return None;
    };
    exposition
        .label_value(sample, "nodename")
        .map(String::from)
        .filter(|name| !name.is_empty())
}

/// Adds the target's labels to a series (Prometheus `mutateSampleLabels`): with
/// `honor_labels` the series' own value wins; otherwise the target's does and the series' own
/// value, when it has one (an empty value is no value), is kept as `exported_<name>`
/// (`exported_exported_<name>` when that is taken), even when the two values are equal.
fn attach_target_labels(labels: &mut Labels, target_labels: &Labels, honor_labels: bool) {
    for (name, value) in target_labels {
        match labels.get(name).filter(|existing| !existing.is_empty()) {
            Some(_) if honor_labels => {}
            Some(existing) => {
                let existing = existing.clone();
                let mut exported = format!("exported_{name}");
                while labels.contains_key(&exported) || target_labels.contains_key(&exported) {
                    exported = format!("exported_{exported}");
                }
                labels.insert(exported, existing);
                labels.insert(name.clone(), value.clone());
            }
            None => {
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

/// Scrapes `target` every `target.interval`, starting at its [`schedule_offset`], and sends each
/// outcome to `out` (waiting when the channel is full: backpressure reaches the scraper, never
/// other targets). Stops when `shutdown` turns true (cancelling a scrape in flight) or the
/// receiver is gone.
///
/// A slot is never lost without a trace. A tick that comes late (the previous scrape, or
/// handing its outcome to `out`, overran; or the process was starved of CPU) still scrapes,
/// late, and the slots that passed meanwhile are not made up for (the schedule is kept, as
/// Prometheus keeps it) but each is sent as a [`skipped_outcome`]: a `scrapes` row with the
/// reason, no samples. At most [`MAX_SKIPPED_ROWS`] rows stand for one gap (a process stopped
/// for a day would otherwise write one per slot); the last of them says how many slots it
/// stands for. Skips are logged at most every [`SKIP_LOG_EVERY`], summed over all targets.
pub async fn run_target(
    target: Target,
    job: Arc<Job>,
    scraper: Scraper,
    context: Arc<ScrapeContext>,
    out: mpsc::Sender<ScrapeOutcome>,
    mut shutdown: watch::Receiver<bool>,
) {
    let start = Instant::now() + schedule_offset(target.identity, target.interval);
    let mut ticks = tokio::time::interval_at(start, target.interval);
    // A scrape that overran its slot is not made up for: the next one keeps the schedule, and
    // the slots in between are recorded as skipped.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut state = TargetState::default();
    let mut previous: Option<Instant> = None;
    loop {
        let scheduled = tokio::select! {
            scheduled = ticks.tick() => scheduled,
            _ = shutdown.changed() => return,
        };
        if *shutdown.borrow() {
            return;
        }
        if let Some(previous) = previous {
            let nodename = state.nodename.clone();
            let slots = (previous, scheduled, Instant::now(), now_ms());
            for outcome in skipped_between(&target, &context, nodename.as_deref(), slots) {
                if out.send(outcome).await.is_err() {
                    return;
                }
            }
        }
        previous = Some(scheduled);
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

/// Most `scrapes` rows written for one gap in a target's schedule ([`run_target`]); the last
/// row of a longer gap stands for the rest.
pub const MAX_SKIPPED_ROWS: u64 = 1_000;

/// Shortest time between two log lines about skipped scrapes (all targets together).
pub const SKIP_LOG_EVERY: Duration = Duration::from_secs(10);

/// Skipped slots not logged yet, and when the last log line was written (ms since the epoch).
static SKIPPED_UNLOGGED: AtomicU64 = AtomicU64::new(0);
static SKIP_LOGGED_AT_MS: AtomicI64 = AtomicI64::new(0);

/// How many slots of `interval` lie strictly between two ticks at `previous` and `next`
/// (both on the schedule, so `next - previous` is a whole number of intervals; a remainder
/// of half an interval or more counts as one more slot).
pub fn missed_slots(previous: Instant, next: Instant, interval: Duration) -> u64 {
    let gap = next.saturating_duration_since(previous).as_nanos();
    let interval = interval.as_nanos().max(1);
    let slots = (gap + interval / 2) / interval;
    slots.saturating_sub(1) as u64
}

/// The outcomes recording the slots missed between the ticks at `previous` and `scheduled`
/// (none when `scheduled` follows `previous` by one interval), each stamped with its slot's
/// time on `context.clock` (the wall clock read `wall_now_ms` at `now`), and logs them
/// (rate-limited).
fn skipped_between(
    target: &Target,
    context: &ScrapeContext,
    nodename: Option<&str>,
    (previous, scheduled, now, wall_now_ms): (Instant, Instant, Instant, i64),
) -> Vec<ScrapeOutcome> {
    let missed = missed_slots(previous, scheduled, target.interval);
    if missed == 0 {
        return Vec::new();
    }
    // How far behind the schedule this target was: from the first missed slot until now.
    let behind = now.saturating_duration_since(previous + target.interval);
    let rows = missed.min(MAX_SKIPPED_ROWS);
    let outcomes = (1..=rows)
        .map(|slot| {
            let at = previous + target.interval * slot as u32;
            let wall_ms = wall_now_ms - now.saturating_duration_since(at).as_millis() as i64;
            let stands_for = if slot == rows { missed - rows + 1 } else { 1 };
            let placement = Placement::placed(&target.labels, &context.placement, nodename);
            skipped_outcome(target, placement, context.clock.at(wall_ms), behind, stands_for)
        })
        .collect();
    note_skipped(target, missed, behind);
    outcomes
}

/// Adds `missed` to the skipped slots not yet logged and, at most every [`SKIP_LOG_EVERY`],
/// writes one warning with their sum and this target as an example.
fn note_skipped(target: &Target, missed: u64, behind: Duration) {
    SKIPPED_UNLOGGED.fetch_add(missed, Ordering::Relaxed);
    let now = now_ms();
    let last = SKIP_LOGGED_AT_MS.load(Ordering::Relaxed);
    if now - last < SKIP_LOG_EVERY.as_millis() as i64 {
        return;
    }
    if SKIP_LOGGED_AT_MS
        .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    let skipped = SKIPPED_UNLOGGED.swap(0, Ordering::Relaxed);
    tracing::warn!(
        skipped,
        job = %target.job,
        instance = %target.instance(),
        behind_seconds = behind.as_secs_f64(),
        "epicenter is behind its scrape schedule: scheduled scrapes passed without running (each is a scrapes row with up = 0 and an error starting \"skipped:\", and counted in epicenter_scrapes_skipped_total); the machine may be short of CPU, or the writer of room"
    );
}

/// The record of a scheduled scrape of `target` that never ran ([`ScrapeReport::skipped`]):
/// no samples, `up` false, stamped `slot_ms` (ms since the epoch on the collector's clock),
/// with an error giving how far behind the schedule epicenter was (`behind`) and, when
/// `stands_for` > 1, how many slots the row stands for. `placement` is the target's (with the
/// host its exporter named, [`Placement::placed`]).
pub fn skipped_outcome(
    target: &Target,
    placement: Placement,
    slot_ms: i64,
    behind: Duration,
    stands_for: u64,
) -> ScrapeOutcome {
    let mut error = format!(
        "skipped: epicenter was {:.3} s behind this target's schedule (the previous scrape, or handing its samples to the writer, overran the slot, or the process was starved of CPU); no scrape was made",
        behind.as_secs_f64()
    );
    if stands_for > 1 {
        error.push_str(&format!(
            " (this row stands for {stands_for} scheduled scrapes: a gap longer than {MAX_SKIPPED_ROWS} slots is not written row by row)"
        ));
    }
    ScrapeOutcome {
        rows: Vec::new(),
        report: ScrapeReport {
            timestamp_ms: slot_ms,
            job: target.job.clone(),
            instance: target.instance().to_string(),
            placement,
            up: false,
            duration_seconds: 0.0,
            samples_scraped: 0,
            samples_post_metric_relabeling: 0,
            series_added: 0,
            samples_duplicate: 0,
            samples_out_of_bounds: [0, 0],
            error: Some(error),
            target_identity: target.identity,
            skipped: true,
            starved: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use epicenter_store::rows::fnv1a;

    use super::*;

    /// A 20x simulation of 600 s started at wall 1,000 s with its clock at 400 s: 30 wall
    /// seconds in it reads 1,000 s (its end), and afterwards it follows the wall clock.
    #[test]
    fn a_simulated_clock_runs_fast_until_its_end_then_at_the_wall_pace() {
        let clock = Clock::Simulated {
            wall_start_ms: 1_000_000,
            start_ms: 400_000,
            speed: 20.0,
            end_ms: 1_000_000,
        };
        assert_eq!(clock.at(1_000_000), 400_000);
        assert_eq!(clock.at(1_001_500), 430_000);
        assert_eq!(clock.at(1_030_000), 1_000_000);
        assert_eq!(clock.at(1_045_000), 1_015_000);
        assert_eq!(Clock::Wall.at(1_234), 1_234);
        let wall = Clock::Wall.now_ms();
        assert!(wall > 1_700_000_000_000, "{wall}");
    }

    /// Ticks one interval apart miss nothing; 2.5 intervals apart (a late tick under
    /// `MissedTickBehavior::Skip` lands on the grid, so this only comes from rounding) miss two
    /// when rounded up; seven intervals apart miss six.
    #[test]
    fn missed_slots_count_the_schedule_between_two_ticks() {
        let interval = Duration::from_millis(200);
        let start = Instant::now();
        assert_eq!(missed_slots(start, start + interval, interval), 0);
        assert_eq!(missed_slots(start, start + interval * 7, interval), 6);
        assert_eq!(missed_slots(start, start + Duration::from_millis(500), interval), 2);
        assert_eq!(missed_slots(start, start + Duration::from_millis(1401), interval), 6);
        assert_eq!(missed_slots(start, start, interval), 0);
    }

    /// A gap of 1,500 slots writes 1,000 rows, one per slot on the schedule, and the last
    /// says it stands for the other 500 as well.
    #[test]
    fn a_long_gap_writes_at_most_the_row_cap() {
        let interval = Duration::from_secs(1);
        let target = Target {
            job: "node".into(),
            url: "http://10.0.0.1:9100/metrics".into(),
            labels: [("instance".to_string(), "10.0.0.1:9100".to_string())]
                .into_iter()
                .collect(),
            identity: 7,
            interval,
            timeout: interval,
        };
        let context = ScrapeContext::default();
        let previous = Instant::now();
        let scheduled = previous + interval * 1_501;
        let wall_ms = 1_700_000_000_000;
        let outcomes = skipped_between(&target, &context, None, (previous, scheduled, scheduled, wall_ms));
        assert_eq!(outcomes.len() as u64, MAX_SKIPPED_ROWS);
        assert!(outcomes
            .iter()
            .all(|outcome| outcome.report.skipped && outcome.rows.is_empty()));
        let stamps: Vec<i64> = outcomes.iter().map(|outcome| outcome.report.timestamp_ms).collect();
        // Slot k (1-based) lies 1,501 - k seconds before the tick that ended the gap.
        let expected: Vec<i64> = (1..=1_000).map(|slot| wall_ms - (1_501 - slot) * 1_000).collect();
        assert_eq!(stamps, expected);
        let last = outcomes.last().unwrap().report.error.clone().unwrap();
        assert!(last.contains("stands for 501 scheduled scrapes"), "{last}");
        let first = outcomes[0].report.error.clone().unwrap();
        assert!(!first.contains("stands for"), "{first}");
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
