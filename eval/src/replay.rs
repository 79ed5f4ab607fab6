//! Replay: verdicts recomputed from stored samples, so an investigation can ask "what was the
//! root cause at 14:03?" after the fact. The samples are fed to the same detector the live
//! path uses, round by round (one round per scrape interval: the median gap between an
//! instance's samples), so live and replay agree on the same data.

use std::collections::HashMap;

use epicenter_detector::engine::{Dependency, Detector, Settings};
use epicenter_detector::follow::scrape_batches;
use epicenter_detector::live::{rule_metrics, Batch};
use epicenter_detector::rules::Rule;
use epicenter_detector::{VerdictEvent, VerdictTracker};

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
    // The scrape interval: the median gap between one instance's scrapes (robust to jitter).
    let mut last: HashMap<&str, i64> = HashMap::new();
    let mut gaps = Vec::new();
    for batch in &scrapes {
        if let Some(before) = last.insert(batch.instance.name.as_str(), batch.time_ms) {
            if batch.time_ms > before {
                gaps.push(batch.time_ms - before);
            }
        }
    }
    if gaps.is_empty() {
        return Vec::new();
    }
    gaps.sort_unstable();
    let interval = gaps[gaps.len() / 2];
    let mut detector = Detector::new(rules, dependencies, interval, Settings::default());
    let mut events = Vec::new();
    let mut tracker = VerdictTracker::default();
    let Some(first) = scrapes.first().map(|batch| batch.time_ms) else {
        return events;
    };
    let mut boundary = first + interval;
    let mut latest = first;
    let mut assess = |detector: &mut Detector, at: i64, events: &mut Vec<VerdictEvent>| {
        events.extend(tracker.track(&detector.assess(at)));
    };
    for batch in scrapes {
        while batch.time_ms >= boundary {
            assess(&mut detector, latest, &mut events);
            boundary += interval;
        }
        latest = latest.max(batch.time_ms);
        let samples = batch.samples.iter().map(|(m, l, v)| (m.as_str(), l.clone(), *v));
        detector.observe(batch.time_ms, &batch.instance, samples);
    }
    assess(&mut detector, latest, &mut events);
    events
}
