//! epicenter's own HTTP server (axum): `/metrics` (its own metrics, Prometheus text format),
//! `/healthz`, `/readyz`, `/api/v1/targets` (what Prometheus's targets page shows).
//!
//! Metric names follow `epicenter_<subsystem>_<name>_<unit>[_total]` with base units; every
//! metric is listed in docs/telemetry.md.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use epicenter_collector::batch::WriterStats;
use epicenter_collector::relabel::Labels;
use epicenter_collector::scrape::{ScrapeOutcome, Target};
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};
use serde::Serialize;

/// Label name for the scrape job.
const LABEL_JOB: &str = "job";
/// Label name for a scrape's result (`up`, `down`).
const LABEL_RESULT: &str = "result";

/// epicenter's own metrics, registered in one registry built by `run`.
pub(crate) struct Telemetry {
    registry: Registry,
    scrape_duration_seconds: HistogramVec,
    scrapes_total: IntCounterVec,
    samples_scraped_total: IntCounterVec,
    /// Scrape outcomes waiting for the writer.
    pub(crate) writer_queue_depth: IntGauge,
    /// 1 per open verdict, labelled by where and what.
    pub(crate) verdict_open: IntGaugeVec,
}

impl Telemetry {
    /// Builds the registry with the scrape metrics and the writer's counters.
    pub(crate) fn new(writer: Arc<WriterStats>) -> Result<Telemetry, prometheus::Error> {
        let registry = Registry::new();
        let scrape_duration_seconds = HistogramVec::new(
            HistogramOpts::new("epicenter_scrape_duration_seconds", "Wall time of one scrape, seconds.")
                .buckets(vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]),
            &[LABEL_JOB],
        )?;
        let scrapes_total = IntCounterVec::new(
            Opts::new(
                "epicenter_scrapes_total",
                "Scrapes finished, by job and result (up, down).",
            ),
            &[LABEL_JOB, LABEL_RESULT],
        )?;
        let samples_scraped_total = IntCounterVec::new(
            Opts::new(
                "epicenter_scrape_samples_scraped_total",
                "Samples read from targets' bodies.",
            ),
            &[LABEL_JOB],
        )?;
        let writer_queue_depth = IntGauge::new(
            "epicenter_writer_queue_depth",
            "Scrape outcomes waiting for the writer.",
        )?;
        registry.register(Box::new(scrape_duration_seconds.clone()))?;
        registry.register(Box::new(scrapes_total.clone()))?;
        registry.register(Box::new(samples_scraped_total.clone()))?;
        registry.register(Box::new(writer_queue_depth.clone()))?;
        let verdict_open = IntGaugeVec::new(
            Opts::new(
                "epicenter_verdict_open",
                "1 while a root-cause verdict is open, by datacenter, host, service and kind.",
            ),
            &["dc", "host", "service", "kind"],
        )?;
        registry.register(Box::new(verdict_open.clone()))?;
        registry.register(Box::new(WriterCollector::new(writer)?))?;
        Ok(Telemetry {
            registry,
            scrape_duration_seconds,
            scrapes_total,
            samples_scraped_total,
            writer_queue_depth,
            verdict_open,
        })
    }

    /// Records one scrape.
    pub(crate) fn observe(&self, outcome: &ScrapeOutcome) {
        let report = &outcome.report;
        self.scrape_duration_seconds
            .with_label_values(&[report.job.as_str()])
            .observe(report.duration_seconds);
        let result = if report.up { "up" } else { "down" };
        self.scrapes_total
            .with_label_values(&[report.job.as_str(), result])
            .inc();
        self.samples_scraped_total
            .with_label_values(&[report.job.as_str()])
            .inc_by(report.samples_scraped);
    }

    fn render(&self) -> Result<String, prometheus::Error> {
        let mut buffer = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut buffer)?;
        Ok(String::from_utf8_lossy(&buffer).into_owned())
    }
}

/// Exposes the writer's atomic counters as Prometheus counters at collection time.
struct WriterCollector {
    stats: Arc<WriterStats>,
    descriptions: Vec<Desc>,
}

/// (name, help, table label value) of the writer counters.
const WRITER_COUNTERS: [(&str, &str); 3] = [
    (
        "epicenter_sink_rows_written_total",
        "Rows written to the store, by table.",
    ),
    (
        "epicenter_sink_rows_failed_total",
        "Sample rows dropped after 3 failed flush attempts.",
    ),
    ("epicenter_writer_batches_flushed_total", "Batches the writer flushed."),
];

impl WriterCollector {
    fn new(stats: Arc<WriterStats>) -> Result<WriterCollector, prometheus::Error> {
        let descriptions = WRITER_COUNTERS
            .iter()
            .map(|(name, help)| Desc::new(name.to_string(), help.to_string(), Vec::new(), Default::default()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(WriterCollector { stats, descriptions })
    }
}

fn counter_family(name: &str, help: &str, values: &[(Option<(&str, &str)>, u64)]) -> MetricFamily {
    let mut family = MetricFamily::default();
    family.set_name(name.to_string());
    family.set_help(help.to_string());
    family.set_field_type(prometheus::proto::MetricType::COUNTER);
    for (label, value) in values {
        let mut metric = prometheus::proto::Metric::default();
        if let Some((label_name, label_value)) = label {
            let mut pair = prometheus::proto::LabelPair::default();
            pair.set_name(label_name.to_string());
            pair.set_value(label_value.to_string());
            metric.set_label(vec![pair]);
        }
        let mut counter = prometheus::proto::Counter::default();
        counter.set_value(*value as f64);
        metric.set_counter(counter);
        family.mut_metric().push(metric);
    }
    family
}

impl Collector for WriterCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descriptions.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let stats = &self.stats;
        vec![
            counter_family(
                WRITER_COUNTERS[0].0,
                WRITER_COUNTERS[0].1,
                &[
                    (
                        Some(("table", "samples")),
                        stats.sample_rows_written.load(Ordering::Relaxed),
                    ),
                    (
                        Some(("table", "scrapes")),
                        stats.scrape_rows_written.load(Ordering::Relaxed),
                    ),
                ],
            ),
            counter_family(
                WRITER_COUNTERS[1].0,
                WRITER_COUNTERS[1].1,
                &[(
                    Some(("table", "samples")),
                    stats.sample_rows_failed.load(Ordering::Relaxed),
                )],
            ),
            counter_family(
                WRITER_COUNTERS[2].0,
                WRITER_COUNTERS[2].1,
                &[(None, stats.batches_flushed.load(Ordering::Relaxed))],
            ),
        ]
    }
}

/// One target's health, as `/api/v1/targets` reports it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TargetStatus {
    labels: Labels,
    scrape_pool: String,
    scrape_url: String,
    health: &'static str,
    last_error: String,
    last_scrape: Option<String>,
    last_scrape_duration: f64,
}

/// Health of every target, updated from scrape outcomes.
#[derive(Default)]
pub(crate) struct TargetRegistry {
    /// By target identity (job, URL and labels): two targets may share an address.
    targets: Mutex<BTreeMap<u64, TargetStatus>>,
}

impl TargetRegistry {
    /// Adds a target before its first scrape (health `unknown`).
    pub(crate) fn add(&self, target: &Target) {
        let status = TargetStatus {
            labels: target.labels.clone(),
            scrape_pool: target.job.clone(),
            scrape_url: target.url.clone(),
            health: "unknown",
            last_error: String::new(),
            last_scrape: None,
            last_scrape_duration: 0.0,
        };
        self.lock().insert(target.identity, status);
    }

    /// Forgets a target that discovery removed.
    pub(crate) fn remove(&self, identity: u64) {
        self.lock().remove(&identity);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, TargetStatus>> {
        self.targets.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a scrape's outcome.
    pub(crate) fn observe(&self, outcome: &ScrapeOutcome) {
        let report = &outcome.report;
        if let Some(status) = self.lock().get_mut(&report.target_identity) {
            status.health = if report.up { "up" } else { "down" };
            status.last_error = report.error.clone().unwrap_or_default();
            let time = UNIX_EPOCH + Duration::from_millis(report.timestamp_ms.max(0) as u64);
            status.last_scrape = Some(humantime::format_rfc3339_millis(time).to_string());
            status.last_scrape_duration = report.duration_seconds;
        }
    }

    /// True once every target has been scraped at least once.
    fn first_round_done(&self) -> (bool, usize) {
        let targets = self.lock();
        let waiting = targets.values().filter(|status| status.health == "unknown").count();
        (waiting == 0, waiting)
    }
}

/// What the handlers share.
pub(crate) struct AppState {
    pub(crate) telemetry: Telemetry,
    pub(crate) targets: TargetRegistry,
    /// The open verdict and the history of verdict events.
    pub(crate) verdicts: Mutex<VerdictBook>,
    /// The dependency graph the detector reasons over (after its first round).
    pub(crate) graph: Mutex<Option<epicenter_detector::reference::GraphDocument>>,
    /// Where verdicts are sent.
    pub(crate) notifiers: crate::notify::Notifiers,
}

/// What `/api/v1/verdicts` serves.
#[derive(Debug, Default, Clone, Serialize)]
pub(crate) struct VerdictBook {
    /// The open verdict, if any.
    pub(crate) open: Option<epicenter_detector::Verdict>,
    /// Verdict events, oldest first: `opened`, `updated` (the answer changed) and
    /// `resolved`, with their time (ms since the epoch); the last 100.
    pub(crate) history: Vec<VerdictEvent>,
}

/// One verdict event.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct VerdictEvent {
    /// When, ms since the epoch (the samples' clock).
    pub(crate) time_ms: i64,
    /// `opened`, `updated` or `resolved`.
    pub(crate) state: String,
    /// The verdict then.
    pub(crate) verdict: epicenter_detector::Verdict,
}

/// The router: `/metrics`, `/healthz`, `/readyz`, `/api/v1/targets`.
pub(crate) fn app(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .route("/api/v1/targets", get(targets))
        .route("/api/v1/verdicts", get(verdicts))
        .route("/api/v1/graph", get(graph))
        .route("/api/v1/notifiers", get(notifiers))
        .with_state(state)
}

/// `/api/v1/graph`: the instance dependency graph as JSON (`{"status", "data": {"nodes",
/// "edges"}}`), or Graphviz DOT with `?format=dot`. 503 before the detector's first round.
async fn graph(
    State(state): State<Arc<AppState>>,
    axum::extract::Query(query): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> axum::response::Response {
    let document = state
        .graph
        .lock()
        .map(|graph| graph.clone())
        .unwrap_or_else(|poisoned| poisoned.into_inner().clone());
    let Some(document) = document else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "the detector has not judged a round yet\n",
        )
            .into_response();
    };
    if query.get("format").map(String::as_str) == Some("dot") {
        return (
            [(header::CONTENT_TYPE, "text/vnd.graphviz; charset=utf-8")],
            epicenter_detector::reference::to_dot(&document),
        )
            .into_response();
    }
    Json(serde_json::json!({"status": "success", "data": document})).into_response()
}

/// `/api/v1/notifiers`: per notifier, name, type, url and delivery counters (sent, failed,
/// dropped).
async fn notifiers(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    Json(serde_json::json!({"status": "success", "data": state.notifiers.status()}))
}

/// `/api/v1/verdicts`: `{"status": "success", "data": {"open": …, "history": […]}}`.
async fn verdicts(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    let book = state
        .verdicts
        .lock()
        .map(|book| book.clone())
        .unwrap_or_else(|poisoned| poisoned.into_inner().clone());
    Json(serde_json::json!({"status": "success", "data": book}))
}

async fn metrics(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    match state.telemetry.render() {
        Ok(text) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
            text,
        ),
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("cannot encode metrics: {error}\n"),
        ),
    }
}

async fn ready(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    // Storage is migrated before the server starts; the first round of scrapes is what remains.
    match state.targets.first_round_done() {
        (true, _) => (StatusCode::OK, "ready\n".to_string()),
        (false, waiting) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {waiting} targets not scraped yet\n"),
        ),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TargetsData {
    active_targets: Vec<TargetStatus>,
}

#[derive(Serialize)]
struct TargetsResponse {
    status: &'static str,
    data: TargetsData,
}

async fn targets(State(state): State<Arc<AppState>>) -> Json<TargetsResponse> {
    let active_targets = state.targets.lock().values().cloned().collect();
    Json(TargetsResponse {
        status: "success",
        data: TargetsData { active_targets },
    })
}
