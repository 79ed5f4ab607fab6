//! The naive reference beside the detector on real incidents: a robust z-score computed
//! straight from a Prometheus server's raw series, knowing nothing of the detector, its rules
//! or the dependency graph (it never calls the detector).
//!
//! What it computes, exactly:
//! - **Points.** Every series read (every metric name the server has in the period, `up`
//!   aside) becomes points in time order: a counter (its name ends in `_total`, or its family
//!   is typed `counter` in `/api/v1/metadata`) as the per-second rate between consecutive
//!   samples, `(v[i] − v[i−1]) / (t[i] − t[i−1])`, stamped `t[i]` (after a decrease, a reset:
//!   `v[i] / (t[i] − t[i−1])`, as Prometheus's `rate` counts it); anything else as its values.
//!   Non-finite values are left out. Each series is placed by the configuration's `placement`
//!   (instance, host, service labels; see `epicenter_store::rows::Placement`).
//! - **Score of a series for a window `[from, to]`** (ms, both included): baseline = its points
//!   in the [`BASELINE_MS`] (60 min) before `from`, `[from − 60 min, from)`, at least
//!   [`MIN_BASELINE_POINTS`] of them, else the series has no score; median `m` and
//!   scale `s = max(1.4826 · MAD, 1e-6 · |m|, 1e-9)` (the floors only keep a flat baseline
//!   from dividing by zero); score = the largest `|x − m| / s` over its points in `[from, to]`.
//! - **A case** (`[start, end]`): a service's score is the largest score of the series whose
//!   placement service it is (the pods' own series; Nezha's node series carry their pod's
//!   service too), a host's the largest of the series placed on it (pods with a `host` and
//!   the node's own series). The top service and the top host are the highest (ties: the
//!   first name in order).
//! - **A quiet gap** (`[from, to]`): it alarms when any series' score exceeds
//!   [`THRESHOLD`], 5, the detector's default threshold (`Tuning::threshold`), against the
//!   hour before the gap.

use std::collections::{BTreeMap, HashMap, HashSet};

use epicenter_store::config::PlacementConfig;
use epicenter_store::rows::Placement;
use serde::Serialize;

use crate::prometheus::RawSeries;

/// How far back the baseline reaches from a window's start, ms (60 min).
pub const BASELINE_MS: i64 = 60 * 60 * 1000;

/// Points a baseline needs for the series to be scored.
pub const MIN_BASELINE_POINTS: usize = 10;

/// Scores above which a quiet gap alarms: the detector's default threshold.
pub const THRESHOLD: f64 = 5.0;

/// MAD to standard deviation for normal data.
const MAD_SCALE: f64 = 1.4826;

/// One series' points and placement.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Metric name and labels, Prometheus-style (`name{a="b",…}`), for reports.
    pub name: String,
    /// Instance, by the placement.
    pub instance: String,
    /// Service, by the placement (may be empty).
    pub service: String,
    /// Host, by the placement (may be empty).
    pub host: String,
    /// (ms, value or per-second rate), ascending.
    pub points: Vec<(i64, f64)>,
}

impl Series {
    /// The series' score for `[from, to]` against the hour before `from` (module doc), `None`
    /// without enough baseline points or without a point in the window.
    pub fn score(&self, (from, to): (i64, i64)) -> Option<f64> {
        let first = self.points.partition_point(|(time, _)| *time < from - BASELINE_MS);
        let start = self.points.partition_point(|(time, _)| *time < from);
        let end = self.points.partition_point(|(time, _)| *time <= to);
        let mut baseline: Vec<f64> = self.points[first..start].iter().map(|(_, value)| *value).collect();
        if baseline.len() < MIN_BASELINE_POINTS || start == end {
            return None;
        }
        let middle = median(&mut baseline);
        let mut deviations: Vec<f64> = baseline.iter().map(|value| (value - middle).abs()).collect();
        let mad = median(&mut deviations);
        let scale = (MAD_SCALE * mad).max(1e-6 * middle.abs()).max(1e-9);
        self.points[start..end]
            .iter()
            .map(|(_, value)| (value - middle).abs() / scale)
            .reduce(f64::max)
    }
}

/// The median of `values` (not empty): the middle one, or the mean of the two middle ones.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    }
}

/// Builds [`Series`] from windows of raw series as they are read (each sample once, windows
/// in time order), keeping only the points inside `keep` (ms ranges: the baselines and
/// windows that will be scored), so a long period is not held whole.
pub struct Collector {
    keep: Vec<(i64, i64)>,
    counters: HashSet<String>,
    placement: PlacementConfig,
    series: HashMap<BTreeMap<String, String>, Building>,
}

struct Building {
    series: Series,
    counter: bool,
    last: Option<(i64, f64)>,
}

impl Collector {
    /// A collector keeping the points in `keep` (ranges, any order), with the families typed
    /// `counter` by the server's metadata in `counter_families`, placing series by
    /// `placement`.
    pub fn new(mut keep: Vec<(i64, i64)>, counter_families: HashSet<String>, placement: PlacementConfig) -> Collector {
        keep.sort_unstable();
        // Merged into disjoint ranges, ascending: [`Collector::kept`] searches them.
        let mut merged: Vec<(i64, i64)> = Vec::with_capacity(keep.len());
        for (from, to) in keep {
            match merged.last_mut() {
                Some(last) if from <= last.1 => last.1 = last.1.max(to),
                _ => merged.push((from, to)),
            }
        }
        Collector {
            keep: merged,
            counters: counter_families,
            placement,
            series: HashMap::new(),
        }
    }

    /// Whether series `name` is a counter: `_total`, or typed `counter` (as the family or the
    /// sample name).
    fn is_counter(&self, name: &str) -> bool {
        name.ends_with("_total")
            || self.counters.contains(name)
            || name
                .strip_suffix("_total")
                .is_some_and(|family| self.counters.contains(family))
    }

    fn kept(&self, time: i64) -> bool {
        let at = self.keep.partition_point(|(_, to)| *to < time);
        self.keep.get(at).is_some_and(|(from, _)| *from <= time)
    }

    /// Takes one window's series.
    pub fn add(&mut self, window: &[RawSeries]) {
        for raw in window {
            if !self.series.contains_key(&raw.labels) {
                let mut labels = raw.labels.clone();
                let metric = labels.remove("__name__").unwrap_or_default();
                let placed = Placement::of(&labels, &self.placement);
                let shown: Vec<String> = labels.iter().map(|(key, value)| format!("{key}=\"{value}\"")).collect();
                let counter = self.is_counter(&metric);
                self.series.insert(
                    raw.labels.clone(),
                    Building {
                        series: Series {
                            name: format!("{metric}{{{}}}", shown.join(",")),
                            instance: placed.instance,
                            service: placed.service,
                            host: placed.host,
                            points: Vec::new(),
                        },
                        counter,
                        last: None,
                    },
                );
            }
            let Some(mut building) = self.series.remove(&raw.labels) else {
                continue;
            };
            for &(time, value) in &raw.samples {
                if !value.is_finite() {
                    continue;
                }
                let point = if building.counter {
                    let previous = building.last.replace((time, value));
                    match previous {
                        Some((before, old)) if time > before => {
                            let increase = if value < old { value } else { value - old };
                            Some(increase / ((time - before) as f64 / 1000.0))
                        }
                        _ => None,
                    }
                } else {
                    Some(value)
                };
                if let Some(point) = point.filter(|_| self.kept(time)) {
                    building.series.points.push((time, point));
                }
            }
            self.series.insert(raw.labels.clone(), building);
        }
    }

    /// The series built, in name order.
    pub fn finish(self) -> Vec<Series> {
        let mut series: Vec<Series> = self.series.into_values().map(|building| building.series).collect();
        series.sort_by(|a, b| a.name.cmp(&b.name));
        series
    }
}

/// A name and its score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scored {
    /// Service or host.
    pub name: String,
    /// Its largest series score.
    pub score: f64,
}

/// The naive reference's answer for one case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseScores {
    /// Services, highest first (ties by name); at most 5.
    pub services: Vec<Scored>,
    /// Hosts, highest first (ties by name); at most 5.
    pub hosts: Vec<Scored>,
    /// Series scored (with enough baseline and a point in the window).
    pub series_scored: usize,
}

/// Scores `series` for the case `[start, end]` (module doc).
pub fn case_scores(series: &[Series], window: (i64, i64)) -> CaseScores {
    let mut services: BTreeMap<&str, f64> = BTreeMap::new();
    let mut hosts: BTreeMap<&str, f64> = BTreeMap::new();
    let mut series_scored = 0;
    for one in series {
        let Some(score) = one.score(window) else {
            continue;
        };
        series_scored += 1;
        for (map, key) in [(&mut services, one.service.as_str()), (&mut hosts, one.host.as_str())] {
            if !key.is_empty() {
                let entry = map.entry(key).or_insert(score);
                *entry = entry.max(score);
            }
        }
    }
    CaseScores {
        services: ranked(services),
        hosts: ranked(hosts),
        series_scored,
    }
}

fn ranked(scores: BTreeMap<&str, f64>) -> Vec<Scored> {
    let mut ranked: Vec<Scored> = scores
        .into_iter()
        .map(|(name, score)| Scored {
            name: name.to_string(),
            score,
        })
        .collect();
    // Stable: equal scores keep name order.
    ranked.sort_by(|a, b| b.score.total_cmp(&a.score));
    ranked.truncate(5);
    ranked
}

/// The naive reference on one quiet gap.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GapScore {
    /// Whether some series scored above [`THRESHOLD`].
    pub alarm: bool,
    /// The highest series score in the gap (`None`: no series could be scored).
    pub max_score: Option<f64>,
    /// The series that had it.
    pub series: Option<String>,
    /// Series above the threshold.
    pub series_above: usize,
}

/// Scores `series` for the quiet gap `[from, to]` (module doc).
pub fn gap_score(series: &[Series], window: (i64, i64)) -> GapScore {
    let mut best: Option<(f64, &str)> = None;
    let mut above = 0;
    for one in series {
        let Some(score) = one.score(window) else {
            continue;
        };
        if score > THRESHOLD {
            above += 1;
        }
        if best.is_none_or(|(top, _)| score > top) {
            best = Some((score, one.name.as_str()));
        }
    }
    GapScore {
        alarm: above > 0,
        max_score: best.map(|(score, _)| score),
        series: best.map(|(_, name)| name.to_string()),
        series_above: above,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: i64 = 60_000;

    fn series(service: &str, host: &str, values: &[f64]) -> Series {
        Series {
            name: format!("m{{service=\"{service}\"}}"),
            instance: service.to_string(),
            service: service.to_string(),
            host: host.to_string(),
            points: values
                .iter()
                .enumerate()
                .map(|(at, value)| (at as i64 * MINUTE, *value))
                .collect(),
        }
    }

    #[test]
    fn a_series_scores_its_window_against_the_hour_before() {
        // 12 baseline points (minutes 0..11), window minutes 12..13.
        let mut values = vec![10.0, 12.0, 11.0, 10.0, 12.0, 11.0, 10.0, 12.0, 11.0, 10.0, 12.0, 11.0];
        values.extend([20.0, 9.0]);
        let one = series("a", "h", &values);
        // Median 11, deviations 1,1,0,… → MAD 1, scale 1.4826; |20 − 11| / 1.4826.
        let score = one.score((12 * MINUTE, 13 * MINUTE)).unwrap();
        assert!((score - 9.0 / 1.4826).abs() < 1e-9, "{score}");
        // Too little baseline: the first nine points only.
        assert_eq!(one.score((9 * MINUTE, 13 * MINUTE)), None);
        // No point in the window.
        assert_eq!(one.score((14 * MINUTE, 15 * MINUTE)), None);
        // A flat baseline: the relative floor, 1e-6 · 5.
        let flat = series("f", "h", &[5.0; 11].iter().copied().chain([6.0]).collect::<Vec<_>>());
        let score = flat.score((11 * MINUTE, 11 * MINUTE)).unwrap();
        assert!((score - 1.0 / 5e-6).abs() < 1e-3, "{score}");
    }

    #[test]
    fn the_baseline_reaches_back_one_hour_only() {
        // A wild point 61 minutes before the window is not in the baseline.
        let mut values = vec![1000.0];
        values.extend([1.0; 60]);
        values.push(1.0);
        let one = series("a", "h", &values);
        assert_eq!(one.score((61 * MINUTE, 61 * MINUTE)), Some(0.0));
    }

    #[test]
    fn services_and_hosts_take_their_series_maximum() {
        let calm: Vec<f64> = (0..12).map(|at| f64::from(at % 3)).chain([1.0]).collect();
        let wild: Vec<f64> = (0..12).map(|at| f64::from(at % 3)).chain([9.0]).collect();
        let wilder: Vec<f64> = (0..12).map(|at| f64::from(at % 3)).chain([30.0]).collect();
        let all = vec![
            series("carts", "vm1", &calm),
            series("carts", "", &wild),
            series("orders", "vm2", &wilder),
            series("", "vm1", &wild),
        ];
        let scores = case_scores(&all, (12 * MINUTE, 12 * MINUTE));
        // Baseline 0,1,2 ×4: median 1, MAD 1 → scale 1.4826.
        let z = |value: f64| (value - 1.0f64).abs() / 1.4826;
        assert_eq!(scores.series_scored, 4);
        assert_eq!(scores.services[0].name, "orders");
        assert!((scores.services[0].score - z(30.0)).abs() < 1e-9);
        assert_eq!(scores.services[1].name, "carts");
        assert!((scores.services[1].score - z(9.0)).abs() < 1e-9);
        let hosts: Vec<(&str, f64)> = scores.hosts.iter().map(|h| (h.name.as_str(), h.score)).collect();
        assert_eq!(hosts.len(), 2);
        assert_eq!(hosts[0].0, "vm2");
        assert_eq!(hosts[1].0, "vm1");
        assert!((hosts[1].1 - z(9.0)).abs() < 1e-9);
        let gap = gap_score(&all, (12 * MINUTE, 12 * MINUTE));
        assert!(gap.alarm);
        assert_eq!(gap.series_above, 3);
        assert!(gap.series.unwrap().contains("orders"));
        let quiet = gap_score(&all[..1], (12 * MINUTE, 12 * MINUTE));
        assert!(!quiet.alarm);
        assert_eq!(quiet.max_score, Some(0.0));
    }

    #[test]
    fn counters_become_per_second_rates_and_only_kept_points_stay() {
        let labels = |name: &str| -> BTreeMap<String, String> {
            [
                ("__name__", name),
                ("instance", "p-1"),
                ("service", "s"),
                ("host", "vm1"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
        };
        let mut collector = Collector::new(
            vec![(120_000, 240_000)],
            HashSet::from(["typed".to_string()]),
            PlacementConfig::default(),
        );
        let window = |from: usize, to: usize| -> Vec<RawSeries> {
            ["requests_total", "typed", "memory"]
                .into_iter()
                .map(|name| RawSeries {
                    labels: labels(name),
                    // 0, 60, 120, 180 (a reset to 30), 240 s.
                    samples: [
                        (0, 0.0),
                        (60_000, 60.0),
                        (120_000, 180.0),
                        (180_000, 30.0),
                        (240_000, 90.0),
                    ][from..to]
                        .to_vec(),
                })
                .collect()
        };
        collector.add(&window(0, 2));
        collector.add(&window(2, 5));
        let built = collector.finish();
        let points = |name: &str| built.iter().find(|s| s.name.starts_with(name)).unwrap().points.clone();
        assert_eq!(
            points("requests_total"),
            [(120_000, 2.0), (180_000, 0.5), (240_000, 1.0)]
        );
        assert_eq!(points("typed"), [(120_000, 2.0), (180_000, 0.5), (240_000, 1.0)]);
        assert_eq!(points("memory"), [(120_000, 180.0), (180_000, 30.0), (240_000, 90.0)]);
        let memory = built.iter().find(|s| s.name.starts_with("memory")).unwrap();
        assert_eq!(
            (memory.service.as_str(), memory.host.as_str(), memory.instance.as_str()),
            ("s", "vm1", "p-1")
        );
    }

    #[test]
    fn the_threshold_is_the_detector_s() {
        assert_eq!(THRESHOLD, epicenter_detector::signal::Tuning::default().threshold);
    }
}
