//! The detector live: scraped samples that a signal rule names arrive as [`Batch`]es, and
//! every tick the detector judges what arrived and sends a [`Round`]: the anomalies seen
//! for the first time, the open verdict, the verdict event if the answer changed, and the
//! dependency graph. What happens to a round (stored, printed, served, paged) is the
//! receiver's business; the binary wires it to the store, the web server and on-call.
//!
//! The samples' clock may run faster than the wall clock (a simulated fleet stamps its own
//! time): the detector reasons in the interval measured between one target's samples, and is
//! built once the first gaps are known.
//!
//! A round that runs late by a quarter of the tick or more (at least 25 ms) means epicenter
//! itself is starved, and so, most likely, is everything beside it on the machine: that round
//! and the next are judged behind ([`Detector::set_behind`]), which opens no verdict.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use epicenter_store::rows::{AnomalyRow, ScrapeOutcome};
use rustc_hash::FxHashSet;
use tokio::sync::{mpsc, watch};

use crate::engine::{Dependency, Detector, InstanceInfo, Settings, Verdict};
use crate::events::{new_anomaly_rows, VerdictEvent, VerdictTracker};
use crate::reference::{graph_document, GraphDocument};
use crate::rules::Rule;

/// Gaps between one target's samples that fix the interval (their median).
const INTERVAL_GAPS: usize = 30;
/// Gaps needed before the first round.
const FIRST_GAPS: usize = 5;
/// The smallest lateness that counts as behind, whatever the tick.
const LATE_FLOOR: Duration = Duration::from_millis(25);

/// How late a round may run before the detector counts as behind: a quarter of `tick`, and
/// never under 25 ms.
pub fn late_after(tick: Duration) -> Duration {
    (tick / 4).max(LATE_FLOOR)
}

/// One target's scrape, reduced to the samples a rule names.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// Latest sample time of the scrape, ms since the epoch.
    pub time_ms: i64,
    /// The instance and where it runs.
    pub instance: InstanceInfo,
    /// (metric, labels, value) of the samples a rule reads.
    pub samples: Vec<(String, BTreeMap<String, String>, f64)>,
}

/// The metric names any rule reads (with `_sum`/`_count` for means), as [`extract`] looks
/// them up for every sample of every scrape: an FxHash set (rustc-hash), several times cheaper
/// than SipHash on these short names and keyed by our own rules, not by a scraped body.
pub type MetricNames = FxHashSet<String>;

/// The metric names any rule reads (with `_sum`/`_count` for means).
pub fn rule_metrics(rules: &[Rule]) -> MetricNames {
    let mut names = MetricNames::default();
    for rule in rules {
        names.insert(rule.spec.metric.clone());
        names.insert(format!("{}_sum", rule.spec.metric));
        names.insert(format!("{}_count", rule.spec.metric));
    }
    names
}

/// The part of `outcome` the detector reads: the target (named by its placement's instance,
/// the label `placement.instance_label` names, else its `instance`) and the samples of
/// families in `metrics` ([`rule_metrics`]). `None` for a scrape without samples.
pub fn extract(outcome: &ScrapeOutcome, metrics: &MetricNames) -> Option<Batch> {
    let report = &outcome.report;
    let name = report.instance_name().to_string();
    let samples: Vec<(String, BTreeMap<String, String>, f64)> = outcome
        .rows
        .iter()
        .filter(|row| metrics.contains(&row.series.name))
        .map(|row| (row.series.name.clone(), row.series.labels.clone(), row.value))
        .collect();
    let time_ms = outcome.rows.iter().map(|row| row.timestamp_ms).max()?;
    Some(Batch {
        time_ms,
        instance: InstanceInfo {
            name,
            dc: report.placement.dc.clone(),
            host: report.placement.host.clone(),
            service: report.placement.service.clone(),
        },
        samples,
    })
}

/// What one round of the live detector found.
#[derive(Debug, Clone)]
pub struct Round {
    /// Round time, ms since the epoch (the samples' clock).
    pub time_ms: i64,
    /// Anomalies in their first round, as `anomalies` rows.
    pub new_anomalies: Vec<AnomalyRow>,
    /// Every incident open after this round, oldest first.
    pub open: Vec<Verdict>,
    /// The verdict events of this round (an incident opened, its answer changed, or it
    /// resolved), in the order [`crate::VerdictTracker::track`] gives.
    pub events: Vec<VerdictEvent>,
    /// The instance dependency graph the detector reasons over.
    pub graph: GraphDocument,
    /// How late this round started against its schedule (wall clock).
    pub lag: Duration,
    /// How long judging this round took (wall clock, tokio's clock): observing the batches
    /// that arrived since the last round, assessing, and building the round.
    pub duration: Duration,
    /// When this round was judged behind (it or the round before ran late by [`late_after`]
    /// the tick or more; no verdict opened, none was taken over): the larger of the two lags.
    pub held_by: Option<Duration>,
}

/// How often [`BehindNotice`] speaks, at most.
const BEHIND_SAID_EVERY: Duration = Duration::from_secs(60);

/// Says, at most once a minute, that rounds are judged behind (for a log or a terminal).
#[derive(Debug, Default)]
pub struct BehindNotice {
    said: Option<std::time::Instant>,
}

impl BehindNotice {
    /// The line to print for `round`, if it was held and nothing was said in the last
    /// minute: it names the lag that held it ([`Round::held_by`]).
    pub fn note(&mut self, round: &Round) -> Option<String> {
        let lag = round.held_by?;
        if self.said.is_some_and(|said| said.elapsed() < BEHIND_SAID_EVERY) {
            return None;
        }
        self.said = Some(std::time::Instant::now());
        Some(format!(
            "behind: a detector round started {} ms late (this machine is starved); new verdicts wait until rounds keep time (epicenter_detector_rounds_held_total counts them)",
            lag.as_millis()
        ))
    }
}

/// Runs the detector until `shutdown` turns true or `inbox` closes: observes batches as they
/// arrive and judges every `tick` (wall clock), sending one [`Round`] per round to `out`
/// (waiting when it is full). Returns when `out`'s receiver is gone too.
pub async fn run(
    rules: Vec<Rule>,
    dependencies: Vec<Dependency>,
    settings: Settings,
    tick: Duration,
    mut inbox: mpsc::Receiver<Batch>,
    out: mpsc::Sender<Round>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut detector: Option<Detector> = None;
    let mut tracker = VerdictTracker::default();
    let mut pending: Vec<Batch> = Vec::new();
    let mut previous: HashMap<String, i64> = HashMap::new();
    let mut gaps: Vec<i64> = Vec::new();
    let mut interval_ms: Option<i64> = None;
    let mut latest_ms = 0i64;
    let mut previous_lag = Duration::ZERO;
    let late = late_after(tick);
    let mut ticks = tokio::time::interval(tick);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            batch = inbox.recv() => {
                let Some(batch) = batch else { return };
                // The interval is the median of the first gaps between one target's samples
                // (robust to scheduling jitter); fixed once INTERVAL_GAPS are known.
                if let Some(before) = previous.insert(batch.instance.name.clone(), batch.time_ms) {
                    let gap = batch.time_ms - before;
                    if gap > 0 && gaps.len() < INTERVAL_GAPS {
                        gaps.push(gap);
                        let mut sorted = gaps.clone();
                        sorted.sort_unstable();
                        interval_ms = Some(sorted[sorted.len() / 2]);
                    }
                }
                latest_ms = latest_ms.max(batch.time_ms);
                pending.push(batch);
            }
            scheduled = ticks.tick() => {
                // With `Delay`, a late tick moves the schedule: each lag is this round's own.
                let lag = tokio::time::Instant::now().saturating_duration_since(scheduled);
                let behind = (lag >= late || previous_lag >= late).then(|| lag.max(previous_lag));
                previous_lag = lag;
                let Some(interval) = interval_ms.filter(|_| gaps.len() >= FIRST_GAPS) else { continue };
                let started = tokio::time::Instant::now();
                let detector = detector.get_or_insert_with(|| {
                    Detector::new(rules.clone(), dependencies.clone(), interval, settings.clone())
                });
                for batch in pending.drain(..) {
                    let samples = batch.samples.iter().map(|(name, labels, value)| (name.as_str(), labels.clone(), *value));
                    detector.observe(batch.time_ms, &batch.instance, samples);
                }
                detector.set_behind(behind.is_some());
                let assessment = detector.assess(latest_ms);
                let instances = detector.instances();
                let mut round = Round {
                    time_ms: assessment.time_ms,
                    new_anomalies: new_anomaly_rows(&assessment, instances),
                    events: tracker.track(&assessment),
                    open: assessment.incidents.clone(),
                    graph: graph_document(instances, detector.dependencies(), &detector.peer_edges()),
                    lag,
                    duration: Duration::ZERO,
                    held_by: behind,
                };
                round.duration = started.elapsed();
                if out.send(round).await.is_err() {
                    return;
                }
            }
            _ = shutdown.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(time_ms: i64) -> Batch {
        Batch {
            time_ms,
            instance: InstanceInfo {
                name: "r1".into(),
                dc: "dc-1".into(),
                host: "h1".into(),
                service: "redis".into(),
            },
            samples: Vec::new(),
        }
    }

    /// A round that starts late (here: the runtime's only thread blocked for three ticks) is
    /// judged behind, and so is the one after it; its lag is measured, not guessed. Only
    /// lower bounds are asserted: a busy machine makes every round later, never earlier.
    #[tokio::test(flavor = "current_thread")]
    async fn a_late_round_and_the_next_are_held() {
        let tick = Duration::from_millis(200);
        let (batches, inbox) = mpsc::channel(64);
        let (out, mut rounds) = mpsc::channel(64);
        let (_stop, shutdown) = watch::channel(false);
        let detector = tokio::spawn(run(
            Vec::new(),
            Vec::new(),
            Settings::default(),
            tick,
            inbox,
            out,
            shutdown,
        ));
        // Gaps of 1 s between one target's samples: the interval is known after five.
        for second in 0..=6 {
            batches.send(batch(second * 1_000)).await.unwrap();
        }
        let first = rounds.recv().await.unwrap();
        assert_eq!(first.time_ms, 6_000);
        // Block the runtime: the next tick cannot start on time.
        tokio::spawn(async { std::thread::sleep(Duration::from_millis(600)) });
        let late = rounds.recv().await.unwrap();
        assert!(late.lag >= Duration::from_millis(400), "lag {:?}", late.lag);
        assert!(late.lag >= late_after(tick));
        assert_eq!(late.held_by, Some(late.lag), "a round {:?} late was not held", late.lag);
        let next = rounds.recv().await.unwrap();
        assert!(
            next.held_by >= Some(late.lag),
            "the round after a late one was not held"
        );
        drop(batches);
        detector.await.unwrap();
    }

    #[test]
    fn being_behind_is_said_once_a_minute_with_the_lag_that_held_it() {
        let round = |lag_ms: u64, held_by_ms: Option<u64>| Round {
            time_ms: 0,
            new_anomalies: Vec::new(),
            open: Vec::new(),
            events: Vec::new(),
            graph: graph_document(&BTreeMap::new(), &[], &Default::default()),
            lag: Duration::from_millis(lag_ms),
            duration: Duration::ZERO,
            held_by: held_by_ms.map(Duration::from_millis),
        };
        let mut notice = BehindNotice::default();
        assert_eq!(notice.note(&round(3, None)), None);
        assert_eq!(
            notice
                .note(&round(505, Some(505)))
                .as_deref()
                .map(|line| line.contains("505 ms late")),
            Some(true)
        );
        // The round after, held by the one before, within the minute: nothing said.
        assert_eq!(notice.note(&round(2, Some(505))), None);
        notice.said = std::time::Instant::now().checked_sub(BEHIND_SAID_EVERY);
        // Held by the previous round's lag (700 ms), not its own 2 ms: the lag that held it.
        let line = notice.note(&round(2, Some(700))).unwrap();
        assert!(
            line.starts_with("behind: a detector round started 700 ms late"),
            "{line}"
        );
    }

    #[test]
    fn late_means_a_quarter_of_the_tick_and_at_least_25_ms() {
        assert_eq!(late_after(Duration::from_secs(1)), Duration::from_millis(250));
        assert_eq!(late_after(Duration::from_secs(15)), Duration::from_millis(3_750));
        assert_eq!(late_after(Duration::from_millis(60)), Duration::from_millis(25));
    }
}
