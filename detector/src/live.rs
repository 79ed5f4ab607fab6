//! The detector live: scraped samples that a signal rule names arrive as [`Batch`]es, and
//! every tick the detector judges what arrived and sends a [`Round`]: the anomalies seen
//! for the first time, the open verdict, the verdict event if the answer changed, and the
//! dependency graph. What happens to a round (stored, printed, served, paged) is the
//! receiver's business; the binary wires it to the store, the web server and on-call.
//!
//! The samples' clock may run faster than the wall clock (a simulated fleet stamps its own
//! time): the detector reasons in the interval measured between one target's samples, and is
//! built once the first gaps are known. A tick (wall clock) only says when to judge; what a
//! round judges follows the samples' clock: when a tick came late (half a tick or more) or the
//! samples waiting span more than an interval and a half, each interval of sample time since
//! the last round gets a round at its own time, seeing the samples up to it
//! ([`catch_up_times`]), so a tick that came late by k intervals judges k rounds, as the
//! headless run would have. On time, one round judges what came.
//!
//! A round that runs late by a quarter of the tick or more (at least 25 ms) means epicenter
//! itself is starved, and so, most likely, is everything beside it on the machine: that round
//! and the next are judged behind ([`Detector::set_behind`]), which opens no verdict (on the
//! scrape path; read back from a store, [`Pacing::SampleTime`], the samples' times were set by
//! the collectors that scraped them and the detector's own lateness holds nothing). So are
//! a round in which the collector skipped a scheduled scrape or had one time out while it was
//! starved ([`Batch::late`]), and the round after it: what epicenter failed to read is not
//! evidence about the fleet.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use epicenter_store::rows::{AnomalyRow, ScrapeOutcome, Series};
use rustc_hash::FxHashSet;
use tokio::sync::{mpsc, watch};

use crate::engine::{Anomaly, Dependency, Detector, InstanceInfo, Settings, Verdict};
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

/// Most rounds judged in one tick besides the newest: a longer stall's older intervals are
/// judged together with the oldest of these (catching up must not make a starved detector
/// later still).
const CATCH_UP_ROUNDS: usize = 4;

/// The sample times (ms) of the rounds owed before the newest one at `latest_ms`: every
/// interval boundary after the last round judged (`judged_ms`) that lies more than half an
/// interval before `latest_ms`, at most 4 (the latest ones): a tick that came late by k
/// intervals owes k. The live loop asks only when a tick came late or the waiting samples
/// piled up; scrapes spread over an on-time interval owe nothing.
pub fn catch_up_times(judged_ms: Option<i64>, latest_ms: i64, interval_ms: i64) -> Vec<i64> {
    let (Some(judged), true) = (judged_ms, interval_ms > 0) else {
        return Vec::new();
    };
    // Boundaries judged + k·interval for k = 1..=owed, those before latest − interval/2;
    // counted, not walked: a sample stamped far ahead must not make this loop (or a vector)
    // as long as the jump.
    let before = latest_ms.saturating_sub(interval_ms / 2);
    let owed = if before > judged {
        (before - judged - 1) / interval_ms
    } else {
        0
    };
    let first = (owed - CATCH_UP_ROUNDS as i64).max(0) + 1;
    (first..=owed)
        .map(|k| judged.saturating_add(k.saturating_mul(interval_ms)))
        .collect()
}

/// How the live detector cuts its rounds ([`run`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pacing {
    /// Each tick judges what arrived since the last one (the scrape path: each target's
    /// scrape arrives once an interval, as it is made), with rounds owed after a late tick
    /// ([`catch_up_times`]).
    Arrival,
    /// Rounds fall on interval boundaries of sample time, each judging the batches up to its
    /// boundary, and a tick judges only the boundaries the batches have passed
    /// ([`due_times`]); a tick with none due judges nothing. A tick that comes late holds no
    /// round: the samples' times were set where they were scraped, not here (late batches
    /// still hold theirs). For batches that come in time
    /// order in lumps that need not match the ticks (`epicenter detect` reading a store back,
    /// a poll every half tick): every round then sees each target's scrape of its interval
    /// once, as a headless run does, not a quarter or three quarters of them (which made a
    /// caller whose scrape happened to be in look like it stood out among its siblings).
    SampleTime,
}

/// The interval boundaries (ms of sample time) a [`Pacing::SampleTime`] tick judges: every
/// `judged_ms + k·interval_ms` strictly before `latest_ms` (the newest batch received: a
/// batch stamped at the boundary itself may still be on its way), the last
/// [`CATCH_UP_ROUNDS`] + 1 of them (older intervals are judged with the oldest of those);
/// `latest_ms` itself before the first round ([`run`] then sets the grid half an interval off
/// it).
pub fn due_times(judged_ms: Option<i64>, latest_ms: i64, interval_ms: i64) -> Vec<i64> {
    let Some(judged) = judged_ms else {
        return vec![latest_ms];
    };
    if interval_ms <= 0 || latest_ms <= judged {
        return Vec::new();
    }
    // Counted, not walked (a sample stamped far ahead must not make a long loop).
    let owed = (latest_ms - judged - 1) / interval_ms;
    let first = (owed - CATCH_UP_ROUNDS as i64).max(1);
    (first..=owed)
        .map(|k| judged.saturating_add(k.saturating_mul(interval_ms)))
        .collect()
}

/// One target's scrape, reduced to the samples a rule names.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// Latest sample time of the scrape, ms since the epoch.
    pub time_ms: i64,
    /// The instance and where it runs.
    pub instance: InstanceInfo,
    /// The samples a rule reads: each one's series (shared with the scrape's rows, not
    /// copied) and value.
    pub samples: Vec<(Arc<Series>, f64)>,
    /// A scrape epicenter itself failed to make on time: skipped (the slot passed while it
    /// was behind) or timed out while its runtime was starved. No samples; `time_ms` is the
    /// slot's. It holds verdicts this round and the next.
    pub late: bool,
    /// Samples another target reported about this instance (cAdvisor's per-container series,
    /// scraped from the node's kubelet and placed on their pod by `placement.instance_label`):
    /// judged as the instance's, but they neither place it where its own scrapes do nor say
    /// that it answers ([`crate::engine::Detector::observe_reported`]).
    pub reported: bool,
}

impl Batch {
    /// The target whose scrape this is: the `instance` label its first sample carries (the
    /// scraped address, with Prometheus's target labels), else the instance's name. Two
    /// targets can speak of one instance (a pod's own and its node's kubelet) on schedules of
    /// their own: intervals are measured per (instance, source).
    pub fn source(&self) -> &str {
        self.samples
            .first()
            .and_then(|(series, _)| series.labels.get("instance"))
            .map_or(self.instance.name.as_str(), String::as_str)
    }
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
/// families in `metrics` ([`rule_metrics`]), first; then, for series whose own placement names
/// another instance (cAdvisor's `pod` label on a kubelet's scrape), one [`Batch::reported`]
/// per such instance, placed by those series. Rows stamped out of bounds of the scrape's time
/// (`epicenter_store::rows::sample_bounds`) are skipped and do not set [`Batch::time_ms`].
/// Empty for a scrape without samples. A scrape
/// epicenter skipped or that timed out while it was starved (`report.skipped`,
/// `report.starved`) is a [`Batch::late`] without samples: its `up` 0 is epicenter's
/// lateness, not the target's availability.
pub fn extract(outcome: &ScrapeOutcome, metrics: &MetricNames) -> Vec<Batch> {
    let report = &outcome.report;
    if report.skipped || report.starved {
        return vec![Batch {
            time_ms: report.timestamp_ms,
            instance: InstanceInfo {
                name: report.instance_name().to_string(),
                dc: report.placement.dc.clone(),
                host: report.placement.host.clone(),
                service: report.placement.service.clone(),
            },
            samples: Vec::new(),
            late: true,
            reported: false,
        }];
    }
    let name = report.instance_name();
    // The clock guard: a row stamped out of bounds of its scrape's time (the collector
    // refuses those; this holds for any other producer) neither sets the batch's time nor
    // is observed, so no sample stamped years ahead moves the detector's clock.
    let in_bounds = |row: &&epicenter_store::rows::SampleRow| {
        epicenter_store::rows::sample_bounds(row.timestamp_ms, report.timestamp_ms).is_none()
    };
    let Some(time_ms) = outcome.rows.iter().filter(in_bounds).map(|row| row.timestamp_ms).max() else {
        return Vec::new();
    };
    let mut own = Vec::new();
    // Other instances' samples, by instance name, placed by their first series.
    let mut reported: BTreeMap<&str, Batch> = BTreeMap::new();
    for row in outcome
        .rows
        .iter()
        .filter(in_bounds)
        .filter(|row| metrics.contains(&row.series.name))
    {
        let sample = (Arc::clone(&row.series), row.value);
        let placement = &row.series.placement;
        if placement.instance.is_empty() || placement.instance == name {
            own.push(sample);
            continue;
        }
        reported
            .entry(placement.instance.as_str())
            .or_insert_with(|| Batch {
                time_ms,
                instance: InstanceInfo {
                    name: placement.instance.clone(),
                    dc: placement.dc.clone(),
                    host: placement.host.clone(),
                    service: placement.service.clone(),
                },
                samples: Vec::new(),
                late: false,
                reported: true,
            })
            .samples
            .push(sample);
    }
    let mut batches = vec![Batch {
        time_ms,
        instance: InstanceInfo {
            name: name.to_string(),
            dc: report.placement.dc.clone(),
            host: report.placement.host.clone(),
            service: report.placement.service.clone(),
        },
        samples: own,
        late: false,
        reported: false,
    }];
    batches.extend(reported.into_values());
    batches
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
    /// Every anomaly of this round, as the engine judged it (not only the new ones): what
    /// scoring the live path (`epicenter eval --load`) gives the reference rankings.
    pub anomalies: Vec<Anomaly>,
    /// The verdict events of this round (an incident opened, its answer changed, or it
    /// resolved), in the order [`crate::VerdictTracker::track`] gives.
    pub events: Vec<VerdictEvent>,
    /// The instance dependency graph the detector reasons over.
    pub graph: std::sync::Arc<GraphDocument>,
    /// How late this round started against its schedule (wall clock).
    pub lag: Duration,
    /// How long judging this round took (wall clock, tokio's clock): observing the batches
    /// that arrived since the last round, assessing, and building the round.
    pub duration: Duration,
    /// When this round was judged behind because it or the round before ran late by
    /// [`late_after`] the tick or more: the larger of the two lags.
    pub held_by: Option<Duration>,
    /// Scrapes the collector skipped or had time out while starved since the last round
    /// ([`Batch::late`]).
    pub late_scrapes: u64,
    /// Whether this round was judged behind (no verdict opened, none was taken over): by
    /// the detector's own lag ([`Round::held_by`]), or by late scrapes in it or the round
    /// before.
    pub held: bool,
    /// What the detector holds after this round ([`Detector::held`]): signals (each with its
    /// baseline), and series in its per-series lookup. Both level off under series churn,
    /// since series unseen for the staleness period are forgotten.
    pub holds: (usize, usize),
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
    /// minute: it names what held it (the lag, [`Round::held_by`], or the late scrapes).
    pub fn note(&mut self, round: &Round) -> Option<String> {
        if !round.held || self.said.is_some_and(|said| said.elapsed() < BEHIND_SAID_EVERY) {
            return None;
        }
        self.said = Some(std::time::Instant::now());
        Some(match round.held_by {
            Some(lag) => format!(
                "behind: a detector round started {} ms late (this machine is starved); new verdicts wait until rounds keep time (epicenter_detector_rounds_held_total counts them)",
                lag.as_millis()
            ),
            None => format!(
                "behind: {} scrapes since the last detector round were skipped or timed out while epicenter was starved (epicenter_scrapes_skipped_total, epicenter_scrapes_starved_total); new verdicts wait until scrapes keep time (epicenter_detector_rounds_held_total counts the rounds)",
                round.late_scrapes
            ),
        })
    }
}

/// Runs the detector until `shutdown` turns true or `inbox` closes: observes batches as they
/// arrive and judges every `tick` (wall clock), sending one [`Round`] per round to `out`
/// (waiting when it is full). `dropped` is the count of batches the sender dropped because
/// `inbox` was full; batches lost that way, like [`Batch::late`] ones, hold the round and the
/// next and are not read as targets that stopped answering ([`Detector::note_lost_input`]).
/// Returns when `out`'s receiver is gone too.
#[allow(
    clippy::too_many_arguments,
    reason = "the detector's inputs and outputs, each its own"
)]
pub async fn run(
    rules: Vec<Rule>,
    dependencies: Vec<Dependency>,
    settings: Settings,
    (tick, pacing): (Duration, Pacing),
    mut inbox: mpsc::Receiver<Batch>,
    dropped: std::sync::Arc<std::sync::atomic::AtomicU64>,
    out: mpsc::Sender<Round>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut detector: Option<Detector> = None;
    let mut tracker = VerdictTracker::default();
    let mut pending: Vec<Batch> = Vec::new();
    let mut previous: HashMap<(String, String), i64> = HashMap::new();
    // The graph of the last round that built one, with the generation it was built at: built
    // again only when the detector's instances or links changed.
    let mut graph: Option<(u64, std::sync::Arc<GraphDocument>)> = None;
    let mut gaps: Vec<i64> = Vec::new();
    let mut interval_ms: Option<i64> = None;
    let mut latest_ms = 0i64;
    let mut previous_lag = Duration::ZERO;
    let mut late_scrapes = 0u64;
    let mut previous_late_scrapes = 0u64;
    let mut dropped_seen = 0u64;
    let mut lost_ms: Option<i64> = None;
    let mut judged_ms: Option<i64> = None;
    let late = late_after(tick);
    let mut ticks = tokio::time::interval(tick);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            batch = inbox.recv() => {
                let Some(batch) = batch else { return };
                if batch.late {
                    late_scrapes += 1;
                    lost_ms = Some(lost_ms.map_or(batch.time_ms, |lost| lost.max(batch.time_ms)));
                    continue;
                }
                // The interval is the median of the first gaps between one target's samples
                // (robust to scheduling jitter); fixed once INTERVAL_GAPS are known. Per
                // instance and source: a kubelet's samples about a pod come on the kubelet's
                // schedule, and between the pod's own they would halve the gaps.
                let source = (batch.instance.name.clone(), batch.source().to_string());
                if let Some(before) = previous.insert(source, batch.time_ms) {
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
                // Paced by sample time, a tick with no boundary passed judges nothing (what
                // it saw of lateness waits for the round that does).
                if pacing == Pacing::SampleTime {
                    let interval = interval_ms.filter(|_| gaps.len() >= FIRST_GAPS);
                    if interval.is_some_and(|interval| due_times(judged_ms, latest_ms, interval).is_empty()) {
                        continue;
                    }
                }
                // With `Delay`, a late tick moves the schedule: each lag is this round's own.
                let lag = tokio::time::Instant::now().saturating_duration_since(scheduled);
                // A late tick means the scrapes beside it were starved too, on the scrape path.
                // Paced by sample time the samples were stamped by their collectors, not by
                // this task: its own lateness delays the rounds but says nothing about what
                // they judge (the collectors' own losses still come as late batches).
                let behind = (pacing == Pacing::Arrival && (lag >= late || previous_lag >= late))
                    .then(|| lag.max(previous_lag));
                previous_lag = lag;
                let dropped_now = dropped.load(std::sync::atomic::Ordering::Relaxed);
                if dropped_now > dropped_seen {
                    late_scrapes += dropped_now - dropped_seen;
                    dropped_seen = dropped_now;
                    // The dropped batches' times are not known: the newest sample's stands in.
                    lost_ms = Some(lost_ms.map_or(latest_ms, |lost| lost.max(latest_ms)));
                }
                let held = behind.is_some() || late_scrapes > 0 || previous_late_scrapes > 0;
                let this_round_late = late_scrapes;
                previous_late_scrapes = std::mem::take(&mut late_scrapes);
                let Some(interval) = interval_ms.filter(|_| gaps.len() >= FIRST_GAPS) else { continue };
                let started = tokio::time::Instant::now();
                let detector = detector.get_or_insert_with(|| {
                    Detector::new(rules.clone(), dependencies.clone(), interval, settings.clone())
                });
                detector.set_behind(held);
                if let Some(lost) = lost_ms.take() {
                    detector.note_lost_input(lost);
                }
                // Rounds follow the samples' clock: when this tick came late (by half a tick or
                // more) or the samples waiting span more than an interval and a half (they piled
                // up on the way), each interval of sample time since the last round is judged at
                // its own time, in order. On time, with scrapes spread over the interval, one
                // round judges what came, as before.
                pending.sort_by_key(|batch| batch.time_ms);
                let times = match pacing {
                    Pacing::SampleTime => due_times(judged_ms, latest_ms, interval),
                    Pacing::Arrival => {
                        let span = match (pending.first(), pending.last()) {
                            (Some(first), Some(last)) => last.time_ms - first.time_ms,
                            _ => 0,
                        };
                        let piled_up = lag >= tick / 2 || span > interval + interval / 2;
                        let mut times = if piled_up {
                            catch_up_times(judged_ms, latest_ms, interval)
                        } else {
                            Vec::new()
                        };
                        times.push(latest_ms);
                        times
                    }
                };
                let Some(&last) = times.last() else { continue };
                // Paced by sample time, the grid is set half an interval off the first round,
                // which fell on the newest scrape then: on that target's own scrape times, ms
                // of jitter would put none or two of its scrapes in a round.
                judged_ms = Some(match (pacing, judged_ms) {
                    (Pacing::SampleTime, None) => last - interval / 2,
                    _ => last,
                });
                // What lies after the last round judged waits for a later tick.
                let ready = pending.partition_point(|batch| batch.time_ms <= last);
                let mut batches = pending.drain(..ready).collect::<Vec<_>>().into_iter().peekable();
                let mut late_now = this_round_late;
                for time_ms in times {
                    while let Some(batch) = batches.next_if(|batch| batch.time_ms <= time_ms) {
                        detector.observe_series(batch.time_ms, &batch.instance, &batch.samples, !batch.reported);
                    }
                    let assessment = detector.assess(time_ms);
                    let holds = detector.held();
                    let instances = detector.instances();
                    let mut round = Round {
                        holds,
                        time_ms: assessment.time_ms,
                        new_anomalies: new_anomaly_rows(&assessment, instances),
                        events: tracker.track(&assessment),
                        open: assessment.incidents.clone(),
                        anomalies: assessment.anomalies.clone(),
                        graph: match &graph {
                            Some((generation, document)) if *generation == detector.graph_generation() => {
                                document.clone()
                            }
                            _ => {
                                let document = std::sync::Arc::new(graph_document(
                                    instances,
                                    detector.dependencies(),
                                    &detector.observed_edges(),
                                ));
                                graph = Some((detector.graph_generation(), document.clone()));
                                document
                            }
                        },
                        lag,
                        duration: Duration::ZERO,
                        held_by: behind,
                        late_scrapes: std::mem::take(&mut late_now),
                        held,
                    };
                    round.duration = started.elapsed();
                    if out.send(round).await.is_err() {
                        return;
                    }
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
            late: false,
            reported: false,
        }
    }

    /// A live detector without rules ticking every `tick`, fed seven samples of one target
    /// 1 s apart (the interval is known after five gaps): its inbox, its rounds, the shutdown
    /// switch (kept alive by the caller), its task, and its first round, judged at the last
    /// of those samples (6 s).
    async fn warmed(tick: Duration) -> Warmed {
        warmed_paced(tick, Pacing::Arrival).await
    }

    /// What [`warmed`] gives: inbox, rounds, shutdown switch, task, first round.
    type Warmed = (
        mpsc::Sender<Batch>,
        mpsc::Receiver<Round>,
        watch::Sender<bool>,
        tokio::task::JoinHandle<()>,
        Round,
    );

    /// [`warmed`] with the rounds cut by `pacing`.
    async fn warmed_paced(tick: Duration, pacing: Pacing) -> Warmed {
        let (batches, inbox) = mpsc::channel(64);
        let (out, mut rounds) = mpsc::channel(64);
        let (stop, shutdown) = watch::channel(false);
        let detector = tokio::spawn(run(
            Vec::new(),
            Vec::new(),
            Settings::default(),
            (tick, pacing),
            inbox,
            std::sync::Arc::default(),
            out,
            shutdown,
        ));
        for second in 0..=6 {
            batches.send(batch(second * 1_000)).await.unwrap();
        }
        let first = rounds.recv().await.unwrap();
        assert_eq!(first.time_ms, 6_000);
        (batches, rounds, stop, detector, first)
    }

    /// A round that starts late (here: the runtime's only thread blocked for three ticks) is
    /// judged behind, and so is the one after it; its lag is measured, not guessed. Only
    /// lower bounds are asserted: a busy machine makes every round later, never earlier.
    #[tokio::test(flavor = "current_thread")]
    async fn a_late_round_and_the_next_are_held() {
        let tick = Duration::from_millis(200);
        let (batches, mut rounds, _stop, detector, _) = warmed(tick).await;
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

    /// Paced by sample time, a tick that comes late (the runtime blocked for three ticks)
    /// delays the rounds but holds none: the samples' times were set by their collectors.
    #[tokio::test(flavor = "current_thread")]
    async fn a_late_tick_holds_no_sample_paced_round() {
        let tick = Duration::from_millis(200);
        let (batches, mut rounds, _stop, detector, _) = warmed_paced(tick, Pacing::SampleTime).await;
        batches.send(batch(7_000)).await.unwrap();
        tokio::spawn(async { std::thread::sleep(Duration::from_millis(600)) });
        let late = rounds.recv().await.unwrap();
        assert_eq!(late.time_ms, 6_500);
        assert!(late.lag >= Duration::from_millis(400), "lag {:?}", late.lag);
        assert_eq!(late.held_by, None);
        assert!(!late.held);
        batches.send(batch(8_000)).await.unwrap();
        let next = rounds.recv().await.unwrap();
        assert_eq!((next.time_ms, next.held), (7_500, false));
        drop(batches);
        detector.await.unwrap();
    }

    /// Scrapes the collector skipped or had time out while starved hold the round they arrive
    /// in and the next (no verdict opens on what epicenter failed to read), and the notice
    /// says so with their count.
    #[tokio::test(flavor = "current_thread")]
    async fn late_scrapes_hold_their_round_and_the_next() {
        let tick = Duration::from_millis(100);
        let (batches, mut rounds, _stop, detector, first) = warmed(tick).await;
        assert_eq!(first.late_scrapes, 0);
        for _ in 0..2 {
            batches
                .send(Batch {
                    late: true,
                    ..batch(7_000)
                })
                .await
                .unwrap();
        }
        let mut round = rounds.recv().await.unwrap();
        while round.late_scrapes == 0 {
            round = rounds.recv().await.unwrap();
        }
        assert!(round.held, "{:?}", round.late_scrapes);
        let mut late = round.late_scrapes;
        let next = rounds.recv().await.unwrap();
        assert!(next.held, "the round after late scrapes was not held");
        late += next.late_scrapes;
        assert_eq!(late, 2);
        // Late batches carry no samples: the round time stays the last sample's.
        assert_eq!(round.time_ms, 6_000);
        let line = BehindNotice::default().note(&Round { held_by: None, ..round });
        assert!(line.is_some_and(|line| line.contains("scrapes since the last detector round were skipped")));
        drop(batches);
        detector.await.unwrap();
    }

    /// The boundaries owed after a late tick, worked by hand: interval 1 s, last round at
    /// 6 s.
    #[test]
    fn a_late_tick_owes_a_round_for_every_interval_it_skipped() {
        // On time: the newest sample is one interval on; nothing owed.
        assert_eq!(catch_up_times(Some(6_000), 7_000, 1_000), Vec::<i64>::new());
        // Spread scrapes: 1.4 intervals on is still one round.
        assert_eq!(catch_up_times(Some(6_000), 7_400, 1_000), Vec::<i64>::new());
        // Three intervals on: 7 s and 8 s are owed before the newest (9 s).
        assert_eq!(catch_up_times(Some(6_000), 9_000, 1_000), vec![7_000, 8_000]);
        // A stall of 20 intervals: only the last CATCH_UP_ROUNDS boundaries.
        assert_eq!(
            catch_up_times(Some(6_000), 26_000, 1_000),
            vec![22_000, 23_000, 24_000, 25_000]
        );
        // A sample stamped a century ahead: four rounds owed, computed, not walked.
        let century = 100 * 365 * 86_400_000_i64;
        assert_eq!(
            catch_up_times(Some(6_000), century, 1_000),
            vec![century - 4_000, century - 3_000, century - 2_000, century - 1_000]
        );
        assert_eq!(catch_up_times(Some(0), i64::MAX, 1_000).len(), 4);
        // No round judged yet, or no interval: nothing owed.
        assert_eq!(catch_up_times(None, 26_000, 1_000), Vec::<i64>::new());
        assert_eq!(catch_up_times(Some(6_000), 26_000, 0), Vec::<i64>::new());
    }

    /// The boundaries a sample-paced tick judges, worked by hand: interval 1 s, last round
    /// at 6 s.
    #[test]
    fn a_sample_paced_tick_judges_the_boundaries_the_batches_passed() {
        // Before the first round: the newest batch's time.
        assert_eq!(due_times(None, 6_000, 1_000), vec![6_000]);
        // Not yet past 7 s (a batch stamped 7 s may still be on its way): nothing.
        assert_eq!(due_times(Some(6_000), 6_500, 1_000), Vec::<i64>::new());
        assert_eq!(due_times(Some(6_000), 7_000, 1_000), Vec::<i64>::new());
        assert_eq!(due_times(Some(6_000), 7_001, 1_000), vec![7_000]);
        assert_eq!(due_times(Some(6_000), 9_500, 1_000), vec![7_000, 8_000, 9_000]);
        // A stall of 20 intervals: the last CATCH_UP_ROUNDS + 1 boundaries.
        assert_eq!(
            due_times(Some(6_000), 26_500, 1_000),
            vec![22_000, 23_000, 24_000, 25_000, 26_000]
        );
        let century = 100 * 365 * 86_400_000_i64;
        assert_eq!(due_times(Some(0), century + 1, 1_000).len(), 5);
        assert_eq!(due_times(Some(6_000), 26_000, 0), Vec::<i64>::new());
    }

    /// Paced by sample time, lumps that straddle the boundaries are judged at the boundaries,
    /// which lie half an interval off the first round (6 s: r1's scrapes, 1 s apart): after
    /// the half interval to 6.5 s, the round at 7.5 s sees r2's scrape at 7.1 s and r1's at 7 s, not r3's at 7.7 s that came
    /// with them, and a tick with no boundary passed judges nothing.
    #[tokio::test(flavor = "current_thread")]
    async fn sample_paced_rounds_fall_on_boundaries_whatever_the_lumps() {
        let tick = Duration::from_millis(100);
        let (batches, mut rounds, _stop, detector, _) = warmed_paced(tick, Pacing::SampleTime).await;
        let at = |time_ms: i64, name: &str| {
            let mut one = batch(time_ms);
            one.instance.name = name.into();
            one
        };
        batches.send(at(7_000, "r1")).await.unwrap();
        batches.send(at(7_100, "r2")).await.unwrap();
        // Several ticks pass with 7.5 s not yet passed.
        tokio::time::sleep(tick * 3).await;
        batches.send(at(7_700, "r3")).await.unwrap();
        // First the half interval up to 6.5 s (nothing came in it), then 7.5 s.
        assert_eq!(rounds.recv().await.unwrap().time_ms, 6_500);
        let first = rounds.recv().await.unwrap();
        let names = |round: &Round| -> Vec<String> { round.graph.nodes.iter().map(|node| node.name.clone()).collect() };
        assert_eq!(first.time_ms, 7_500);
        assert_eq!(names(&first), ["r1", "r2"]);
        batches.send(at(8_600, "r1")).await.unwrap();
        let second = rounds.recv().await.unwrap();
        assert_eq!(second.time_ms, 8_500);
        assert_eq!(names(&second), ["r1", "r2", "r3"]);
        drop(batches);
        detector.await.unwrap();
    }

    /// Samples of three intervals that arrive before one tick (epicenter caught up after a
    /// stall) are judged in three rounds at their own times, each seeing only the samples up
    /// to it, not in one round at the newest time.
    #[tokio::test(flavor = "current_thread")]
    async fn samples_of_several_intervals_are_judged_at_their_own_times() {
        let tick = Duration::from_millis(200);
        let (batches, mut rounds, _stop, detector, _) = warmed(tick).await;
        // Three intervals' samples arrive together (this task does not yield in between, so
        // the detector's task sees all three before its next tick).
        for second in 7..=9 {
            batches.send(batch(second * 1_000)).await.unwrap();
        }
        let mut times = Vec::new();
        while times.last() != Some(&9_000) {
            times.push(rounds.recv().await.unwrap().time_ms);
        }
        assert_eq!(times, vec![7_000, 8_000, 9_000]);
        drop(batches);
        detector.await.unwrap();
    }

    /// On time, scrapes spread over the interval: the newest sample may lie more than an
    /// interval and a half after the last round's (a target scraped late in the interval),
    /// but nothing piled up, so one round judges what came (the rule owed a round here at
    /// first, and real scrapes' jitter made rounds come in pairs).
    #[tokio::test(flavor = "current_thread")]
    async fn scrapes_spread_over_an_on_time_tick_are_judged_in_one_round() {
        let tick = Duration::from_secs(1);
        let (batches, mut rounds, _stop, detector, _) = warmed(tick).await;
        batches.send(batch(7_000)).await.unwrap();
        let mut other = batch(7_600);
        other.instance.name = "r2".into();
        batches.send(other).await.unwrap();
        let mut seen = Vec::new();
        while seen.last().map(|(time, _)| *time) != Some(7_600) {
            let round = rounds.recv().await.unwrap();
            seen.push((round.time_ms, round.lag));
        }
        // Only a tick that itself came late may judge owed rounds.
        if seen.iter().all(|(_, lag)| *lag < tick / 2) {
            assert_eq!(
                seen.iter().map(|(time, _)| *time).collect::<Vec<_>>(),
                vec![7_600],
                "{seen:?}"
            );
        }
        drop(batches);
        detector.await.unwrap();
    }

    #[test]
    fn being_behind_is_said_once_a_minute_with_the_lag_that_held_it() {
        let round = |lag_ms: u64, held_by_ms: Option<u64>| Round {
            time_ms: 0,
            new_anomalies: Vec::new(),
            open: Vec::new(),
            anomalies: Vec::new(),
            events: Vec::new(),
            graph: std::sync::Arc::new(graph_document(&BTreeMap::new(), &[], &Default::default())),
            lag: Duration::from_millis(lag_ms),
            duration: Duration::ZERO,
            held_by: held_by_ms.map(Duration::from_millis),
            late_scrapes: 0,
            held: held_by_ms.is_some(),
            holds: (0, 0),
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

    /// A scrape that timed out while epicenter was starved gives the detector no samples,
    /// only the news that it was late (its `up` 0 is epicenter's lateness); the same scrape
    /// timed out on its own is read.
    #[test]
    fn a_starved_scrape_is_not_read_as_the_targets_availability() {
        use epicenter_store::rows::{Placement, SampleRow, ScrapeReport, Series};
        let up = Series::new("up".into(), Default::default(), &Default::default());
        let outcome = |starved: bool| ScrapeOutcome {
            rows: vec![SampleRow {
                timestamp_ms: 5_000,
                value: 0.0,
                series: std::sync::Arc::new(up.clone()),
            }],
            report: ScrapeReport {
                timestamp_ms: 5_000,
                job: "redis".into(),
                instance: "r1".into(),
                placement: Placement::default(),
                up: false,
                duration_seconds: 0.5,
                samples_scraped: 0,
                samples_post_metric_relabeling: 0,
                series_added: 0,
                samples_duplicate: 0,
                samples_out_of_bounds: [0, 0],
                error: Some("timed out".into()),
                target_identity: 1,
                skipped: false,
                starved,
            },
        };
        let metrics: MetricNames = ["up".to_string()].into_iter().collect();
        let read = extract(&outcome(false), &metrics).pop().unwrap();
        assert_eq!(read.samples.len(), 1);
        assert_eq!(
            (read.samples[0].0.name.as_str(), read.samples[0].1, read.late),
            ("up", 0.0, false)
        );
        let starved = extract(&outcome(true), &metrics).pop().unwrap();
        assert!(starved.late && starved.samples.is_empty(), "{starved:?}");
        assert_eq!((starved.time_ms, starved.instance.name.as_str()), (5_000, "r1"));
    }

    /// A kubelet's scrape: its own `up` stays the kubelet's, and each pod's cAdvisor series
    /// become one reported batch of that pod, placed by the series' own placement (with
    /// `placement.instance_label: pod`), at the scrape's time; series no rule reads stay out.
    #[test]
    fn a_kubelets_scrape_is_split_into_its_pods_reported_batches() {
        use epicenter_store::config::PlacementConfig;
        use epicenter_store::rows::{Labels, SampleRow, ScrapeReport, Series};
        let placement = PlacementConfig {
            instance_label: "pod".into(),
            ..PlacementConfig::default()
        };
        let labels = |pairs: &[(&str, &str)]| -> Labels {
            let mut labels: Labels = [
                ("instance", "10.0.0.5:10250"),
                ("dc", "dc-1"),
                ("host", "node-5"),
                ("service", "kubelet"),
            ]
            .into_iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
            labels.extend(pairs.iter().map(|(name, value)| (name.to_string(), value.to_string())));
            labels
        };
        let row = |name: &str, pairs: &[(&str, &str)], value: f64, timestamp_ms: i64| SampleRow {
            timestamp_ms,
            value,
            series: std::sync::Arc::new(Series::new(name.into(), labels(pairs), &placement)),
        };
        let throttled = "container_cpu_cfs_throttled_periods_total";
        let report = ScrapeReport {
            timestamp_ms: 9_000,
            job: "kubelet".into(),
            instance: "10.0.0.5:10250".into(),
            placement: epicenter_store::rows::Placement::of(&labels(&[]), &placement),
            up: true,
            duration_seconds: 0.1,
            samples_scraped: 4,
            samples_post_metric_relabeling: 4,
            series_added: 0,
            samples_duplicate: 0,
            samples_out_of_bounds: [0, 0],
            error: None,
            target_identity: 1,
            skipped: false,
            starved: false,
        };
        let outcome = ScrapeOutcome {
            rows: vec![
                row(throttled, &[("pod", "backend-1"), ("service", "backend")], 40.0, 8_000),
                row(throttled, &[("pod", "api-1"), ("service", "api")], 2.0, 8_000),
                row("container_memory_working_set_bytes", &[("pod", "api-1")], 1e8, 8_000),
                row(throttled, &[("pod", "backend-1"), ("container", "sidecar")], 1.0, 8_000),
                row("up", &[], 1.0, 9_000),
            ],
            report,
        };
        let metrics: MetricNames = ["up".to_string(), throttled.to_string()].into_iter().collect();
        let batches = extract(&outcome, &metrics);
        let summary: Vec<(&str, &str, &str, bool, usize, i64)> = batches
            .iter()
            .map(|batch| {
                (
                    batch.instance.name.as_str(),
                    batch.instance.service.as_str(),
                    batch.instance.host.as_str(),
                    batch.reported,
                    batch.samples.len(),
                    batch.time_ms,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("10.0.0.5:10250", "kubelet", "node-5", false, 1, 9_000),
                ("api-1", "api", "node-5", true, 1, 9_000),
                ("backend-1", "backend", "node-5", true, 2, 9_000),
            ]
        );
        assert_eq!(batches[0].samples[0].0.name, "up");
    }

    #[test]
    fn late_means_a_quarter_of_the_tick_and_at_least_25_ms() {
        assert_eq!(late_after(Duration::from_secs(1)), Duration::from_millis(250));
        assert_eq!(late_after(Duration::from_secs(15)), Duration::from_millis(3_750));
        assert_eq!(late_after(Duration::from_millis(60)), Duration::from_millis(25));
    }
}
