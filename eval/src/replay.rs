//! Replay: verdicts recomputed from stored samples, so an investigation can ask "what was the
//! root cause at 14:03?" after the fact. The samples are fed to the same detector the live
//! path uses, round by round (one round per scrape interval: the median gap between an
//! instance's samples), so live and replay agree on the same data.

use std::collections::HashMap;

use epicenter_detector::engine::{Dependency, Detector, Settings};
use epicenter_detector::follow::scrape_batches;
use epicenter_detector::live::{rule_metrics, Batch};
use epicenter_detector::rules::Rule;
use epicenter_detector::{Assessment, VerdictEvent, VerdictTracker};

/// The query that reads what `rules` need from `samples`, between `from_ms` and `to_ms` (ms
/// since the epoch, inclusive, either open), as JSONEachRow rows of `t` (ms), `metric`,
/// `labels`, `value`, `instance`, `dc`, `host`, `service` in time order: what [`replay`] reads
/// ([`epicenter_detector::follow::samples_query`], which `epicenter detect` polls too).
///
/// The synthetic `up` carries the scrape's wall time while a target may stamp its own samples
/// (a simulated fleet's clock): replay groups by sample time, so it leaves `up` out; a target
/// that stops answering still shows, as a target with no samples.
pub fn samples_query(rules: &[Rule], from_ms: Option<i64>, to_ms: Option<i64>) -> String {
    epicenter_detector::follow::samples_query(&rule_metrics(rules), from_ms, to_ms, false)
}

/// Feeds `rows` (JSONEachRow of [`samples_query`]; the `instance` column is the placement's
/// instance, as the live detector names it) to a fresh detector, one round per scrape
/// interval, and returns the verdict events. Errors name the row that is not such a row.
pub fn replay(rows: &str, rules: Vec<Rule>, dependencies: Vec<Dependency>) -> Result<Vec<VerdictEvent>, String> {
    // One batch per (instance, time): one scrape, in time order.
    Ok(replay_batches(scrape_batches(rows)?, rules, dependencies))
}

/// Feeds `scrapes` (one batch per instance and sample time, in time order, as
/// [`scrape_batches`] or [`crate::prometheus::batches`] make them) to a fresh detector, one
/// round per scrape interval (the median gap between an instance's batches), and returns the
/// verdict events.
pub fn replay_batches(scrapes: Vec<Batch>, rules: Vec<Rule>, dependencies: Vec<Dependency>) -> Vec<VerdictEvent> {
    let mut replayer = Replayer::new(rules, dependencies);
    replayer.feed(scrapes);
    replayer.finish()
}

/// A replay fed in pieces (one window of a long period at a time, so only that window is held
/// in memory): [`Replayer::feed`] each piece's batches in time order, every piece after the
/// one before, then [`Replayer::finish`]. The same rounds and events as [`replay_batches`] on
/// the whole, once the scrape interval is known: it is the median gap between an instance's
/// batches in the first piece that shows one (until then batches wait).
pub struct Replayer {
    rules: Vec<Rule>,
    dependencies: Vec<Dependency>,
    settings: Settings,
    /// Batches fed before the interval was known.
    waiting: Vec<Batch>,
    running: Option<Running>,
    events: Vec<VerdictEvent>,
    /// Sees every round's assessment ([`Replayer::on_round`]).
    on_round: Option<RoundHook>,
}

/// What [`Replayer::on_round`] takes: called with every round's assessment.
pub type RoundHook = Box<dyn FnMut(&Assessment)>;

struct Running {
    detector: Detector,
    tracker: VerdictTracker,
    interval: i64,
    boundary: i64,
    latest: i64,
}

impl Replayer {
    /// A replay with `rules` and service `dependencies`, and the detector's default
    /// settings ([`Settings::default`]: an instance whose samples stop is judged lost, as
    /// live and as replay of epicenter's own store, where every scrape is recorded).
    pub fn new(rules: Vec<Rule>, dependencies: Vec<Dependency>) -> Replayer {
        Replayer::with_settings(rules, dependencies, Settings::default())
    }

    /// A replay with `rules`, service `dependencies` and the detector's `settings` (for a
    /// Prometheus server's data: [`crate::prometheus::replay_settings`]).
    pub fn with_settings(rules: Vec<Rule>, dependencies: Vec<Dependency>, settings: Settings) -> Replayer {
        Replayer {
            rules,
            dependencies,
            settings,
            waiting: Vec::new(),
            running: None,
            events: Vec::new(),
            on_round: None,
        }
    }

    /// Also hands every round's assessment to `hook`, as it is judged (for a trace).
    pub fn on_round(&mut self, hook: RoundHook) {
        self.on_round = Some(hook);
    }

    /// The scrape interval the rounds follow, ms, once known.
    pub fn interval_ms(&self) -> Option<i64> {
        self.running.as_ref().map(|run| run.interval)
    }

    /// Takes the next batches (in time order, none before an earlier piece's).
    pub fn feed(&mut self, batches: Vec<Batch>) {
        if self.running.is_none() {
            self.waiting.extend(batches);
            let waiting = std::mem::take(&mut self.waiting);
            // Enough gaps that one slow job's first scrapes do not set the interval.
            self.start(waiting, MIN_GAPS);
            return;
        }
        let Some(run) = self.running.as_mut() else {
            return;
        };
        for batch in batches {
            while batch.time_ms >= run.boundary {
                let assessment = run.detector.assess(run.latest);
                if let Some(hook) = self.on_round.as_mut() {
                    hook(&assessment);
                }
                self.events.extend(run.tracker.track(&assessment));
                run.boundary += run.interval;
            }
            run.latest = run.latest.max(batch.time_ms);
            run.detector
                .observe_series(batch.time_ms, &batch.instance, &batch.samples, !batch.reported);
        }
    }

    /// Starts the detector once `waiting` shows `min_gaps` gaps (else keeps waiting), and
    /// replays `waiting` through it.
    fn start(&mut self, waiting: Vec<Batch>, min_gaps: usize) {
        let Some(interval) = median_gap(&waiting, min_gaps) else {
            self.waiting = waiting;
            return;
        };
        let first = waiting.first().map_or(0, |batch| batch.time_ms);
        let detector = Detector::new(
            std::mem::take(&mut self.rules),
            std::mem::take(&mut self.dependencies),
            interval,
            self.settings.clone(),
        );
        self.running = Some(Running {
            detector,
            tracker: VerdictTracker::default(),
            interval,
            boundary: first + interval,
            latest: first,
        });
        self.feed(waiting);
    }

    /// Judges the last round and returns every verdict event (none when no instance was seen
    /// twice: no interval, no round).
    pub fn finish(mut self) -> Vec<VerdictEvent> {
        if self.running.is_none() && median_gap(&self.waiting, 1).is_some() {
            // Fewer gaps than wanted in the whole replay: take what there is.
            let waiting = std::mem::take(&mut self.waiting);
            self.start(waiting, 1);
        }
        if let Some(run) = self.running.as_mut() {
            let assessment = run.detector.assess(run.latest);
            if let Some(hook) = self.on_round.as_mut() {
                hook(&assessment);
            }
            self.events.extend(run.tracker.track(&assessment));
        }
        self.events
    }
}

/// Gaps between an instance's scrapes a replay waits for before it fixes the interval.
const MIN_GAPS: usize = 16;

/// The scrape interval of `scrapes`: the median gap between one instance's scrapes (robust to
/// jitter); `None` with fewer than `min_gaps` gaps.
fn median_gap(scrapes: &[Batch], min_gaps: usize) -> Option<i64> {
    // Per instance and source: a kubelet's scrapes of a pod's containers come on the
    // kubelet's schedule, between the pod's own. And a scrape's `up` apart from its samples
    // when they carry times of their own (a Prometheus server stamps `up` with the scrape's
    // time, a target with `honor_timestamps` its samples with its own): each is one sequence
    // a scrape interval apart, where the two interleaved would halve the gaps.
    let mut last: HashMap<(&str, &str, bool), i64> = HashMap::new();
    let mut gaps = Vec::new();
    for batch in scrapes {
        let up_alone = !batch.samples.is_empty() && batch.samples.iter().all(|(series, _)| series.name == "up");
        if let Some(before) = last.insert((batch.instance.name.as_str(), batch.source(), up_alone), batch.time_ms) {
            if batch.time_ms > before {
                gaps.push(batch.time_ms - before);
            }
        }
    }
    if gaps.len() < min_gaps.max(1) {
        return None;
    }
    gaps.sort_unstable();
    Some(gaps[gaps.len() / 2])
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use epicenter_detector::engine::InstanceInfo;
    use epicenter_store::config::PlacementConfig;
    use epicenter_store::rows::Series;

    use super::*;

    /// A batch of `names` (each one series of `instance`) at `time_ms`.
    fn batch(time_ms: i64, instance: &str, names: &[&str]) -> Batch {
        let labels: BTreeMap<String, String> = [("instance".to_string(), instance.to_string())].into();
        Batch {
            time_ms,
            instance: InstanceInfo {
                name: instance.to_string(),
                dc: String::new(),
                host: String::new(),
                service: String::new(),
            },
            samples: names
                .iter()
                .map(|name| {
                    let series = Series::new((*name).to_string(), labels.clone(), &PlacementConfig::default());
                    (Arc::new(series), 1.0)
                })
                .collect(),
            late: false,
            reported: false,
        }
    }

    /// A Prometheus server stamps `up` with the scrape's time and a target with
    /// `honor_timestamps` stamps its samples 250 ms later: the interval is still the scrape
    /// interval (15 s), not the 250 ms between the two; when they share a time, as without
    /// the target's own timestamps, one batch holds both.
    #[test]
    fn an_up_stamped_apart_from_its_samples_does_not_halve_the_interval() {
        let mut apart = Vec::new();
        let mut together = Vec::new();
        for scrape in 0..20 {
            let time_ms = scrape * 15_000;
            apart.push(batch(time_ms, "10.0.0.1:8080", &["up"]));
            apart.push(batch(time_ms + 250, "10.0.0.1:8080", &["http_requests_total"]));
            together.push(batch(time_ms, "10.0.0.1:8080", &["up", "http_requests_total"]));
        }
        assert_eq!(median_gap(&apart, MIN_GAPS), Some(15_000));
        assert_eq!(median_gap(&together, MIN_GAPS), Some(15_000));
    }
}
