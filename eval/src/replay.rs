//! Replay: verdicts recomputed from stored samples, so an investigation can ask "what was the
//! root cause at 14:03?" after the fact. The samples are fed to the same detector the live
//! path uses, round by round (one round per scrape interval: the median gap between an
//! instance's samples), so live and replay agree on the same data.

use std::collections::{BTreeMap, HashMap};

use epicenter_detector::engine::{Dependency, Detector, InstanceInfo, Settings};
use epicenter_detector::live::rule_metrics;
use epicenter_detector::rules::Rule;
use epicenter_detector::{VerdictEvent, VerdictTracker};

/// One stored sample: metric, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// The query that reads what `rules` need from `samples`, between `from_ms` and `to_ms` (ms
/// since the epoch, inclusive, either open), as JSONEachRow rows of `t` (ms), `metric`,
/// `labels`, `value`, `dc`, `host`, `service` in time order: what [`replay`] reads.
///
/// The synthetic `up` carries the scrape's wall time while a target may stamp its own samples
/// (a simulated fleet's clock): replay groups by sample time, so it leaves `up` out; a target
/// that stops answering still shows, as a target with no samples.
pub fn samples_query(rules: &[Rule], from_ms: Option<i64>, to_ms: Option<i64>) -> String {
    let mut metrics: Vec<String> = rule_metrics(rules)
        .into_iter()
        .filter(|metric| !metric.starts_with("up"))
        .collect();
    metrics.sort();
    let quoted: Vec<String> = metrics
        .iter()
        .map(|m| format!("'{}'", m.replace('\'', "\\'")))
        .collect();
    let mut conditions = vec![format!("metric IN ({})", quoted.join(", "))];
    if let Some(from) = from_ms {
        conditions.push(format!("time >= fromUnixTimestamp64Milli({from})"));
    }
    if let Some(to) = to_ms {
        conditions.push(format!("time <= fromUnixTimestamp64Milli({to})"));
    }
    format!(
        "SELECT toUnixTimestamp64Milli(time) AS t, metric, labels, value, instance, dc, host, service FROM samples WHERE {} ORDER BY t",
        conditions.join(" AND ")
    )
}

/// Feeds `rows` (JSONEachRow of t, metric, labels, value, instance, dc, host, service; the
/// `instance` column is the placement's instance, as the live detector names it) to a fresh
/// detector, one round per scrape interval, and returns the verdict events.
pub fn replay(rows: &str, rules: Vec<Rule>, dependencies: Vec<Dependency>) -> Vec<VerdictEvent> {
    #[derive(serde::Deserialize)]
    struct Row {
        t: serde_json::Value,
        metric: String,
        labels: BTreeMap<String, String>,
        value: f64,
        #[serde(default)]
        instance: String,
        dc: String,
        host: String,
        service: String,
    }
    // Per (instance, time): one scrape.
    let mut scrapes: BTreeMap<(i64, String), (InstanceInfo, Vec<Sample>)> = BTreeMap::new();
    for line in rows.lines() {
        let Ok(row) = serde_json::from_str::<Row>(line) else {
            continue;
        };
        let time = row
            .t
            .as_i64()
            .or_else(|| row.t.as_str().and_then(|t| t.parse().ok()))
            .unwrap_or(0);
        let name = if row.instance.is_empty() {
            row.labels.get("instance").cloned().unwrap_or_default()
        } else {
            row.instance.clone()
        };
        let entry = scrapes.entry((time, name.clone())).or_insert_with(|| {
            (
                InstanceInfo {
                    name,
                    dc: row.dc.clone(),
                    host: row.host.clone(),
                    service: row.service.clone(),
                },
                Vec::new(),
            )
        });
        entry.1.push((row.metric, row.labels, row.value));
    }
    // The scrape interval: the median gap between one instance's scrapes (robust to jitter).
    let mut last: HashMap<&str, i64> = HashMap::new();
    let mut gaps = Vec::new();
    for (time, name) in scrapes.keys() {
        if let Some(before) = last.insert(name.as_str(), *time) {
            if *time > before {
                gaps.push(time - before);
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
    let Some(&(first, _)) = scrapes.keys().next() else {
        return events;
    };
    let mut boundary = first + interval;
    let mut latest = first;
    let mut assess = |detector: &mut Detector, at: i64, events: &mut Vec<VerdictEvent>| {
        events.extend(tracker.track(&detector.assess(at)));
    };
    for ((time, _), (info, samples)) in scrapes {
        while time >= boundary {
            assess(&mut detector, latest, &mut events);
            boundary += interval;
        }
        latest = latest.max(time);
        detector.observe(time, &info, samples.iter().map(|(m, l, v)| (m.as_str(), l.clone(), *v)));
    }
    assess(&mut detector, latest, &mut events);
    events
}
