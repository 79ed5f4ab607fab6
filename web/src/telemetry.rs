//! epicenter's own metrics, in one registry built by the binary and rendered at `/metrics`
//! (Prometheus text format 0.0.4). Names follow `epicenter_<subsystem>_<name>_<unit>[_total]`
//! with base units; every metric is listed in docs/telemetry.md.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use epicenter_collector::targets::TargetRegistry;
use epicenter_store::rows::ScrapeOutcome;
use epicenter_store::writer::WriterStats;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

/// Label name for the scrape job.
const LABEL_JOB: &str = "job";
/// Label name for a scrape's result (`up`, `down`).
const LABEL_RESULT: &str = "result";

/// epicenter's own metrics, registered in one registry built by `run` (docs/telemetry.md).
pub struct Telemetry {
    registry: Registry,
    scrape_duration_seconds: HistogramVec,
    scrapes_total: IntCounterVec,
    samples_scraped_total: IntCounterVec,
    samples_duplicate_total: IntCounterVec,
    /// Scrape outcomes waiting for the writer.
    pub writer_queue_depth: IntGauge,
    /// 1 per open verdict, labelled by where and what.
    pub verdict_open: IntGaugeVec,
    /// How late each detector round started against its schedule, seconds.
    pub detector_round_lag_seconds: Histogram,
    /// Detector rounds judged behind (late; no verdict opened in them).
    pub detector_rounds_held_total: IntCounter,
}

impl Telemetry {
    /// Builds the registry with the scrape metrics and the writer's counters. Errors only if
    /// a metric's name or labels are invalid or registered twice (a programming error).
    pub fn new(writer: Arc<WriterStats>) -> Result<Telemetry, prometheus::Error> {
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
        let samples_duplicate_total = IntCounterVec::new(
            Opts::new(
                "epicenter_scrape_samples_duplicate_total",
                "Samples dropped because their series already had a sample at that time in the same body (the first is kept, as Prometheus does).",
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
        registry.register(Box::new(samples_duplicate_total.clone()))?;
        registry.register(Box::new(writer_queue_depth.clone()))?;
        let verdict_open = IntGaugeVec::new(
            Opts::new(
                "epicenter_verdict_open",
                "1 while a root-cause verdict is open, by datacenter, host, service and kind.",
            ),
            &["dc", "host", "service", "kind"],
        )?;
        registry.register(Box::new(verdict_open.clone()))?;
        let detector_round_lag_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "epicenter_detector_round_lag_seconds",
                "How late each detector round started against its schedule, seconds (epicenter's own scheduling lag).",
            )
            .buckets(vec![0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0]),
        )?;
        registry.register(Box::new(detector_round_lag_seconds.clone()))?;
        let detector_rounds_held_total = IntCounter::new(
            "epicenter_detector_rounds_held_total",
            "Detector rounds judged behind: the round or the one before ran late by a quarter of the tick or more, so no verdict opened in it.",
        )?;
        registry.register(Box::new(detector_rounds_held_total.clone()))?;
        registry.register(Box::new(WriterCollector::new(writer)?))?;
        // process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds, …
        // (Linux /proc), as every Prometheus client library exports them.
        registry.register(Box::new(prometheus::process_collector::ProcessCollector::for_self()))?;
        let build_info = IntGaugeVec::new(
            Opts::new(
                "epicenter_build_info",
                "1, labelled with the version of the running epicenter.",
            ),
            &["version"],
        )?;
        build_info.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        registry.register(Box::new(build_info))?;
        Ok(Telemetry {
            registry,
            scrape_duration_seconds,
            scrapes_total,
            samples_scraped_total,
            samples_duplicate_total,
            writer_queue_depth,
            verdict_open,
            detector_round_lag_seconds,
            detector_rounds_held_total,
        })
    }

    /// Records one scrape.
    pub fn observe(&self, outcome: &ScrapeOutcome) {
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
        if report.samples_duplicate > 0 {
            self.samples_duplicate_total
                .with_label_values(&[report.job.as_str()])
                .inc_by(report.samples_duplicate);
        }
    }

    /// Exports the health of every target in `targets` at each collection:
    /// `epicenter_target_up{scrape_job, target_instance}` (1 up, 0 down; absent before the
    /// first scrape) and `epicenter_targets{scrape_job, health}` (counts). The labels are not
    /// `job` and `instance`, which the Prometheus scraping epicenter sets to epicenter's own
    /// (Prometheus's own per-pool metrics use `scrape_job` likewise).
    ///
    /// # Errors
    /// Registered twice (a programming error).
    pub fn watch_targets(&self, targets: Arc<TargetRegistry>) -> Result<(), prometheus::Error> {
        self.registry.register(Box::new(TargetCollector::new(targets)?))
    }

    /// The registry in the text format, or why it cannot be encoded.
    pub fn render(&self) -> Result<String, prometheus::Error> {
        let mut buffer = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut buffer)?;
        Ok(String::from_utf8_lossy(&buffer).into_owned())
    }
}

/// Target health from the [`TargetRegistry`] at collection time ([`Telemetry::watch_targets`]).
struct TargetCollector {
    targets: Arc<TargetRegistry>,
    descriptions: Vec<Desc>,
}

/// (name, help) of the target health gauges.
const TARGET_GAUGES: [(&str, &str); 2] = [
    (
        "epicenter_target_up",
        "1 when the target's last scrape succeeded, 0 when it failed; absent before its first scrape.",
    ),
    (
        "epicenter_targets",
        "Targets by scrape job and health (up, down, unknown: not scraped yet).",
    ),
];

impl TargetCollector {
    fn new(targets: Arc<TargetRegistry>) -> Result<TargetCollector, prometheus::Error> {
        let descriptions = TARGET_GAUGES
            .iter()
            .map(|(name, help)| Desc::new(name.to_string(), help.to_string(), Vec::new(), Default::default()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(TargetCollector { targets, descriptions })
    }
}

/// A gauge or counter family with one metric per `(labels, value)`.
fn family(
    name: &str,
    help: &str,
    kind: prometheus::proto::MetricType,
    metrics: Vec<(Vec<(&str, String)>, f64)>,
) -> MetricFamily {
    let mut family = MetricFamily::default();
    family.set_name(name.to_string());
    family.set_help(help.to_string());
    family.set_field_type(kind);
    for (labels, value) in metrics {
        let mut metric = prometheus::proto::Metric::default();
        metric.set_label(
            labels
                .into_iter()
                .map(|(name, value)| {
                    let mut pair = prometheus::proto::LabelPair::default();
                    pair.set_name(name.to_string());
                    pair.set_value(value);
                    pair
                })
                .collect(),
        );
        if kind == prometheus::proto::MetricType::COUNTER {
            let mut counter = prometheus::proto::Counter::default();
            counter.set_value(value);
            metric.set_counter(counter);
        } else {
            let mut gauge = prometheus::proto::Gauge::default();
            gauge.set_value(value);
            metric.set_gauge(gauge);
        }
        family.mut_metric().push(metric);
    }
    family
}

fn gauge_family(name: &str, help: &str, metrics: Vec<(Vec<(&str, String)>, f64)>) -> MetricFamily {
    family(name, help, prometheus::proto::MetricType::GAUGE, metrics)
}

impl Collector for TargetCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descriptions.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let health = self.targets.health_by_target();
        let up = health
            .iter()
            .filter(|(_, _, health)| *health != "unknown")
            .map(|(job, instance, health)| {
                let labels = vec![("scrape_job", job.clone()), ("target_instance", instance.clone())];
                (labels, if *health == "up" { 1.0 } else { 0.0 })
            })
            .collect();
        let mut counts: std::collections::BTreeMap<(&str, &str), u64> = std::collections::BTreeMap::new();
        for (job, _, health) in &health {
            *counts.entry((job.as_str(), health)).or_default() += 1;
        }
        let counts = counts
            .into_iter()
            .map(|((job, health), count)| {
                (
                    vec![("scrape_job", job.to_string()), ("health", health.to_string())],
                    count as f64,
                )
            })
            .collect();
        vec![
            gauge_family(TARGET_GAUGES[0].0, TARGET_GAUGES[0].1, up),
            gauge_family(TARGET_GAUGES[1].0, TARGET_GAUGES[1].1, counts),
        ]
    }
}

/// Exposes the writer's atomic counters as Prometheus counters at collection time.
struct WriterCollector {
    stats: Arc<WriterStats>,
    descriptions: Vec<Desc>,
}

/// (name, help) of the writer counters.
const WRITER_COUNTERS: [(&str, &str); 4] = [
    (
        "epicenter_sink_rows_written_total",
        "Rows written to the store, by table.",
    ),
    (
        "epicenter_sink_rows_failed_total",
        "Sample rows dropped: after 3 failed flush attempts (no spool), or refused by the store as bad data.",
    ),
    ("epicenter_writer_batches_flushed_total", "Batches the writer flushed."),
    (
        "epicenter_spool_dropped_rows_total",
        "Sample rows the spool dropped: its oldest batches past storage.spool.max_size or max_age, or batches it could not write (disk full).",
    ),
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
    let metrics = values
        .iter()
        .map(|(label, value)| {
            let labels = label.iter().map(|(name, value)| (*name, value.to_string())).collect();
            (labels, *value as f64)
        })
        .collect();
    family(name, help, prometheus::proto::MetricType::COUNTER, metrics)
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
            counter_family(
                WRITER_COUNTERS[3].0,
                WRITER_COUNTERS[3].1,
                &[(None, stats.spool_dropped_rows.load(Ordering::Relaxed))],
            ),
        ]
    }
}
