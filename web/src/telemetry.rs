//! epicenter's own metrics, in one registry built by the binary and rendered at `/metrics`
//! (Prometheus text format 0.0.4, or OpenMetrics 1.0 when the scraper asks for it:
//! [`crate::openmetrics`]). Names follow `epicenter_<subsystem>_<name>_<unit>[_total]` with
//! base units; every metric is listed in docs/telemetry.md.
//!
//! Each stage reports the way that keeps it free of this crate: scrape outcomes through
//! [`Telemetry::observe`], the live detector's rounds through [`Telemetry::observe_round`]
//! (what a [`Round`] carries), and the writer's, the targets' and the notifiers' own counters
//! read at collection time ([`WriterStats`], [`TargetRegistry`], [`Notifiers::snapshot`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use epicenter_collector::targets::TargetRegistry;
use epicenter_detector::live::Round;
use epicenter_oncall::Notifiers;
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
/// Label name for an anomaly's signal class (`rules::Class`, lowercase).
const LABEL_CLASS: &str = "class";
/// Label name for a notifier's configured `name`.
const LABEL_NOTIFIER: &str = "notifier";
/// Label name for why a notification was dropped (`queue_full`, `given_up`).
const LABEL_REASON: &str = "reason";

/// Every signal class an anomaly can have (the detector's `rules::Class`, as the `anomalies`
/// table spells it): `epicenter_detector_anomalies_total` starts at 0 for each.
const ANOMALY_CLASSES: [&str; 6] = ["availability", "errors", "latency", "saturation", "traffic", "restart"];

/// epicenter's own metrics, registered in one registry built by `run` (docs/telemetry.md).
pub struct Telemetry {
    registry: Registry,
    scrape_duration_seconds: HistogramVec,
    scrapes_total: IntCounterVec,
    samples_scraped_total: IntCounterVec,
    samples_duplicate_total: IntCounterVec,
    samples_out_of_bounds_total: IntCounterVec,
    scrapes_skipped_total: IntCounterVec,
    scrapes_starved_total: IntCounterVec,
    /// Scrape outcomes waiting for the writer.
    pub writer_queue_depth: IntGauge,
    /// 1 per open verdict, labelled by where and what.
    verdict_open: IntGaugeVec,
    /// How late each detector round started against its schedule, seconds.
    detector_round_lag_seconds: Histogram,
    /// Detector rounds judged behind (late; no verdict opened in them).
    detector_rounds_held_total: IntCounter,
    detector_signals: IntGauge,
    detector_series: IntGauge,
    /// Scrapes the detector never saw: its queue was full (a detector behind the scrapes).
    pub detector_batches_dropped_total: IntCounter,
    /// Detector rounds judged.
    detector_rounds_total: IntCounter,
    /// Time taken to judge one detector round, seconds.
    detector_round_duration_seconds: Histogram,
    /// Anomalies the detector saw for the first time, by signal class.
    detector_anomalies_total: IntCounterVec,
    /// `epicenter detect`'s store follower, [`Telemetry::follow`].
    follow: FollowTelemetry,
}

/// What `epicenter detect`'s store follower reports after each poll (all 0 in `run`).
pub struct FollowTelemetry {
    /// Whether this process follows a store (`epicenter detect`).
    active: std::sync::atomic::AtomicBool,
    /// Instances whose scrapes the collectors stored lately.
    pub instances: IntGauge,
    /// Of those, instances whose collector went quiet while the others wrote: kept as seen,
    /// their silence not judged.
    pub instances_lost: IntGauge,
    /// Sample rows read back from the store: what the polls cost.
    pub sample_rows_read_total: IntCounter,
    /// Polls that failed or timed out (their rounds are held).
    pub polls_failed_total: IntCounter,
    /// The newest sample time fed to the detector, seconds since the epoch.
    pub newest_sample_timestamp_seconds: prometheus::Gauge,
}

impl FollowTelemetry {
    /// Marks this process as following a store (the status line then tells of the follower).
    pub fn activate(&self) {
        self.active.store(true, Ordering::Relaxed);
    }

    /// Whether this process follows a store.
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }
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
        let samples_out_of_bounds_total = IntCounterVec::new(
            Opts::new(
                "epicenter_scrape_samples_out_of_bounds_total",
                "Samples refused because their timestamp lay more than 10 minutes after their scrape's time (reason too_far_ahead) or more than an hour before it (too_old); neither stored nor read by the detector (Prometheus: prometheus_target_scrapes_sample_out_of_bounds_total).",
            ),
            &[LABEL_JOB, LABEL_REASON],
        )?;
        let scrapes_skipped_total = IntCounterVec::new(
            Opts::new(
                "epicenter_scrapes_skipped_total",
                "Scheduled scrapes that never ran because epicenter was behind its schedule (an earlier scrape or the writer overran the slot, or the process was starved of CPU); each is a scrapes row with up = 0 and an error starting \"skipped:\".",
            ),
            &[LABEL_JOB],
        )?;
        let scrapes_starved_total = IntCounterVec::new(
            Opts::new(
                "epicenter_scrapes_starved_total",
                "Scrapes that timed out while epicenter itself was starved (its runtime woke at least a quarter of the timeout late during the scrape); also counted as down in epicenter_scrapes_total, never read by the detector; each is a scrapes row with an error starting \"starved:\".",
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
        registry.register(Box::new(samples_out_of_bounds_total.clone()))?;
        registry.register(Box::new(scrapes_skipped_total.clone()))?;
        registry.register(Box::new(scrapes_starved_total.clone()))?;
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
        let detector_signals = IntGauge::new(
            "epicenter_detector_signals",
            "Signals the detector holds (each with its baseline) after its last round; series unseen for five minutes while their instance answers are forgotten.",
        )?;
        registry.register(Box::new(detector_signals.clone()))?;
        let detector_series = IntGauge::new(
            "epicenter_detector_series",
            "Series in the detector's per-series lookup after its last round (whether or not a rule reads them); forgotten like its signals.",
        )?;
        registry.register(Box::new(detector_series.clone()))?;
        let detector_batches_dropped_total = IntCounter::new(
            "epicenter_detector_batches_dropped_total",
            "Scrapes whose samples never reached the detector because its queue was full (it was behind the scrapes); rounds with such losses are held and the targets are not judged silent for them.",
        )?;
        registry.register(Box::new(detector_batches_dropped_total.clone()))?;
        let detector_rounds_total = IntCounter::new(
            "epicenter_detector_rounds_total",
            "Detector rounds judged (one per tick once the scrape interval is known).",
        )?;
        registry.register(Box::new(detector_rounds_total.clone()))?;
        let detector_round_duration_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "epicenter_detector_round_duration_seconds",
                "Time taken to judge one detector round (observe what arrived, assess, build the round), seconds.",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
            ]),
        )?;
        registry.register(Box::new(detector_round_duration_seconds.clone()))?;
        let detector_anomalies_total = IntCounterVec::new(
            Opts::new(
                "epicenter_detector_anomalies_total",
                "Anomalies the detector saw for the first time (each also a row of the anomalies table), by signal class.",
            ),
            &[LABEL_CLASS],
        )?;
        for class in ANOMALY_CLASSES {
            detector_anomalies_total.with_label_values(&[class]);
        }
        registry.register(Box::new(detector_anomalies_total.clone()))?;
        let follow = FollowTelemetry {
            active: std::sync::atomic::AtomicBool::new(false),
            instances: IntGauge::new(
                "epicenter_detect_instances",
                "Instances whose scrapes the collectors stored lately, as epicenter detect's store follower last read them (0 in epicenter run).",
            )?,
            instances_lost: IntGauge::new(
                "epicenter_detect_instances_lost",
                "Instances whose collector stored no scrape for a while as the others went on (it stopped, or its writes fail): kept as seen by epicenter detect, their silence not judged.",
            )?,
            sample_rows_read_total: IntCounter::new(
                "epicenter_detect_sample_rows_read_total",
                "Sample rows epicenter detect read back from the store (each poll reads from where the least-fed live instance stands): what following costs the store.",
            )?,
            polls_failed_total: IntCounter::new(
                "epicenter_detect_polls_failed_total",
                "Polls of the store by epicenter detect that failed or got no answer in time; the detector rounds after them are held.",
            )?,
            newest_sample_timestamp_seconds: prometheus::Gauge::new(
                "epicenter_detect_newest_sample_timestamp_seconds",
                "The newest sample time epicenter detect fed to its detector, seconds since the epoch (time() minus it is how far the detector is behind the scrapes).",
            )?,
        };
        registry.register(Box::new(follow.instances.clone()))?;
        registry.register(Box::new(follow.instances_lost.clone()))?;
        registry.register(Box::new(follow.sample_rows_read_total.clone()))?;
        registry.register(Box::new(follow.polls_failed_total.clone()))?;
        registry.register(Box::new(follow.newest_sample_timestamp_seconds.clone()))?;
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
            samples_out_of_bounds_total,
            scrapes_skipped_total,
            scrapes_starved_total,
            writer_queue_depth,
            verdict_open,
            detector_round_lag_seconds,
            detector_rounds_held_total,
            detector_signals,
            detector_series,
            detector_batches_dropped_total,
            detector_rounds_total,
            detector_round_duration_seconds,
            detector_anomalies_total,
            follow,
        })
    }

    /// `epicenter detect`'s store follower's figures.
    pub fn follow(&self) -> &FollowTelemetry {
        &self.follow
    }

    /// Records one round of the live detector: its count, how long it took and how late it
    /// started, whether it was held, the anomalies it saw first (by class), and
    /// `epicenter_verdict_open` for every incident open after it.
    pub fn observe_round(&self, round: &Round) {
        self.detector_rounds_total.inc();
        self.detector_round_duration_seconds
            .observe(round.duration.as_secs_f64());
        self.detector_round_lag_seconds.observe(round.lag.as_secs_f64());
        if round.held {
            self.detector_rounds_held_total.inc();
        }
        self.detector_signals.set(round.holds.0 as i64);
        self.detector_series.set(round.holds.1 as i64);
        for anomaly in &round.new_anomalies {
            self.detector_anomalies_total
                .with_label_values(&[anomaly.class.as_str()])
                .inc();
        }
        self.verdict_open.reset();
        for verdict in &round.open {
            let host = verdict.hosts.first().map_or("", String::as_str);
            self.verdict_open
                .with_label_values(&[
                    verdict.dc.as_str(),
                    host,
                    verdict.service.as_str(),
                    verdict.kind.as_str(),
                ])
                .set(1);
        }
    }

    /// Records one scrape; a skipped one ([`ScrapeReport::skipped`]) only in
    /// `epicenter_scrapes_skipped_total`.
    ///
    /// [`ScrapeReport::skipped`]: epicenter_store::rows::ScrapeReport::skipped
    pub fn observe(&self, outcome: &ScrapeOutcome) {
        let report = &outcome.report;
        if report.skipped {
            self.scrapes_skipped_total
                .with_label_values(&[report.job.as_str()])
                .inc();
            return;
        }
        self.scrape_duration_seconds
            .with_label_values(&[report.job.as_str()])
            .observe(report.duration_seconds);
        if report.starved {
            self.scrapes_starved_total
                .with_label_values(&[report.job.as_str()])
                .inc();
        }
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
        for reason in epicenter_store::rows::OutOfBounds::ALL {
            let refused = report.samples_out_of_bounds[reason.index()];
            if refused > 0 {
                self.samples_out_of_bounds_total
                    .with_label_values(&[report.job.as_str(), reason.as_str()])
                    .inc_by(refused);
            }
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

    /// Exports every notifier's delivery at each collection, labelled `notifier` (its
    /// configured name), read from [`Notifiers::snapshot`]:
    /// `epicenter_notifications_sent_total` (delivered, once however often retried),
    /// `epicenter_notifications_failed_total` (requests that failed, each retry counted),
    /// `epicenter_notifications_dropped_total{reason}` (never delivered: `queue_full`, or
    /// `given_up` after a 4xx or 10 minutes of retries), `epicenter_notification_queue_depth`
    /// and `epicenter_notification_queue_capacity` (events). Named after Prometheus's notifier
    /// metrics (`prometheus_notifications_sent_total`, `…_errors_total`, `…_dropped_total`,
    /// `…_queue_length`, `…_queue_capacity`).
    ///
    /// # Errors
    /// Registered twice (a programming error).
    pub fn watch_notifiers(&self, notifiers: Arc<Notifiers>) -> Result<(), prometheus::Error> {
        self.registry.register(Box::new(NotifierCollector::new(notifiers)?))
    }

    /// The registry in the text format 0.0.4, or why it cannot be encoded.
    pub fn render(&self) -> Result<String, prometheus::Error> {
        let mut buffer = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut buffer)?;
        Ok(String::from_utf8_lossy(&buffer).into_owned())
    }

    /// The registry in OpenMetrics 1.0 text, ending with `# EOF` ([`crate::openmetrics`]).
    pub fn render_openmetrics(&self) -> String {
        crate::openmetrics::encode(&self.registry.gather())
    }
}

/// Notifier delivery from [`Notifiers::snapshot`] at collection time
/// ([`Telemetry::watch_notifiers`]).
struct NotifierCollector {
    notifiers: Arc<Notifiers>,
    descriptions: Vec<Desc>,
}

/// (name, help) of the notifier metrics: three counters, then two gauges.
const NOTIFIER_METRICS: [(&str, &str); 5] = [
    (
        "epicenter_notifications_sent_total",
        "Notifications a receiver accepted (2xx), by notifier; a notification retried until it gets through counts once.",
    ),
    (
        "epicenter_notifications_failed_total",
        "Requests to a receiver that failed (connection error, timeout, non-2xx), by notifier; each retry counts.",
    ),
    (
        "epicenter_notifications_dropped_total",
        "Notifications never delivered, by notifier and reason: queue_full (the notifier's queue was full), given_up (refused with a 4xx, or still failing after 10 minutes of retries).",
    ),
    (
        "epicenter_notification_queue_depth",
        "Verdict events waiting in the notifier's queue (not counting the one being sent or retried).",
    ),
    (
        "epicenter_notification_queue_capacity",
        "Verdict events the notifier's queue holds; more are dropped.",
    ),
];

impl NotifierCollector {
    fn new(notifiers: Arc<Notifiers>) -> Result<NotifierCollector, prometheus::Error> {
        let descriptions = NOTIFIER_METRICS
            .iter()
            .map(|(name, help)| Desc::new(name.to_string(), help.to_string(), Vec::new(), Default::default()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(NotifierCollector {
            notifiers,
            descriptions,
        })
    }
}

impl Collector for NotifierCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descriptions.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let snapshot = self.notifiers.snapshot();
        let per_notifier = |value: &dyn Fn(&epicenter_oncall::DeliverySnapshot) -> f64| {
            snapshot
                .iter()
                .map(|notifier| (vec![(LABEL_NOTIFIER, notifier.name.clone())], value(notifier)))
                .collect::<Vec<_>>()
        };
        let dropped = snapshot
            .iter()
            .flat_map(|notifier| {
                [
                    ("queue_full", notifier.dropped_queue_full),
                    ("given_up", notifier.given_up),
                ]
                .map(|(reason, count)| {
                    let labels = vec![
                        (LABEL_NOTIFIER, notifier.name.clone()),
                        (LABEL_REASON, reason.to_string()),
                    ];
                    (labels, count as f64)
                })
            })
            .collect();
        let counter = prometheus::proto::MetricType::COUNTER;
        let [sent, failed, dropped_help, depth, capacity] = NOTIFIER_METRICS;
        vec![
            family(sent.0, sent.1, counter, per_notifier(&|notifier| notifier.sent as f64)),
            family(
                failed.0,
                failed.1,
                counter,
                per_notifier(&|notifier| notifier.failed_requests as f64),
            ),
            family(dropped_help.0, dropped_help.1, counter, dropped),
            gauge_family(depth.0, depth.1, per_notifier(&|notifier| notifier.queue_depth as f64)),
            gauge_family(
                capacity.0,
                capacity.1,
                per_notifier(&|notifier| notifier.queue_capacity as f64),
            ),
        ]
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

/// (name, help) of the spool's backlog gauges, read from [`WriterStats`] at collection.
const SPOOL_GAUGES: [(&str, &str); 3] = [
    (
        "epicenter_spool_backlog_batches",
        "Batches waiting in the spool for the store (the one being delivered included); grows while the store is down.",
    ),
    (
        "epicenter_spool_backlog_bytes",
        "Bytes on disk of the batches waiting in the spool.",
    ),
    (
        "epicenter_spool_oldest_batch_age_seconds",
        "Age of the oldest batch waiting in the spool, seconds (0 when none waits): how long the store has been behind.",
    ),
];

impl WriterCollector {
    fn new(stats: Arc<WriterStats>) -> Result<WriterCollector, prometheus::Error> {
        let descriptions = WRITER_COUNTERS
            .iter()
            .chain(SPOOL_GAUGES.iter())
            .map(|(name, help)| Desc::new(name.to_string(), help.to_string(), Vec::new(), Default::default()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(WriterCollector { stats, descriptions })
    }
}

/// The wall clock, ms since the epoch.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as i64)
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
                        Some(("table", "series")),
                        stats.series_rows_written.load(Ordering::Relaxed),
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
            gauge_family(
                SPOOL_GAUGES[0].0,
                SPOOL_GAUGES[0].1,
                vec![(Vec::new(), stats.spool_batches.load(Ordering::Relaxed) as f64)],
            ),
            gauge_family(
                SPOOL_GAUGES[1].0,
                SPOOL_GAUGES[1].1,
                vec![(Vec::new(), stats.spool_bytes.load(Ordering::Relaxed) as f64)],
            ),
            gauge_family(
                SPOOL_GAUGES[2].0,
                SPOOL_GAUGES[2].1,
                vec![(Vec::new(), stats.spool_oldest_age_seconds(now_ms()))],
            ),
        ]
    }
}
