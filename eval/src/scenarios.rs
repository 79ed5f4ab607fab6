//! Scenario scoring: runs scenarios through the detector headless and faster than real time
//! (every scrape round renders each simulated exporter and parses it, as a scrape would), and
//! scores the first verdict after the onset against the ground truth (host and datacenter
//! AC@1, AC@3, Avg@5, time to detect, false verdicts) beside two reference rankings from the
//! literature (robust z-score as in BARO/N-Sigma, personalized PageRank as in MicroRCA).

use std::collections::BTreeMap;

use epicenter_collector::exposition::{parse, FormatChoice, ParseOptions, Validation};
use epicenter_detector::engine::{Assessment, Dependency, Detector, InstanceInfo, Settings};
use epicenter_detector::reference;
use epicenter_detector::rules::Rule;
use epicenter_detector::score::{ac_at, avg_at_5, dedup};
use epicenter_fleet::scenario::Scenario;
use epicenter_fleet::truth::{ground_truth, Truth};
use epicenter_fleet::Fleet;
use serde::Serialize;

/// The services of the simulated fleet and who calls whom.
pub fn fleet_dependencies() -> Vec<Dependency> {
    [
        ("api", "backend", true),
        ("backend", "redis", false),
        ("backend", "db", true),
        ("gateway", "voice", true),
        ("voice", "media", true),
    ]
    .into_iter()
    .map(|(caller, callee, same_dc)| Dependency {
        caller: caller.to_string(),
        callee: callee.to_string(),
        same_dc,
    })
    .collect()
}

/// Scores of one ranking.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Scores {
    /// Host AC@1: whether the first host named is a faulty one (0 or 1; a mean over scenarios).
    pub host_ac1: f64,
    /// Host AC@3: a faulty host among the first three.
    pub host_ac3: f64,
    /// Host Avg@5: the mean of AC@1 … AC@5.
    pub host_avg5: f64,
    /// Datacenter AC@1.
    pub dc_ac1: f64,
    /// Datacenter AC@3.
    pub dc_ac3: f64,
}

fn scores(instances: &[String], infos: &BTreeMap<String, InstanceInfo>, truth: &Truth) -> Scores {
    let hosts = dedup(
        instances
            .iter()
            .filter_map(|name| infos.get(name))
            .map(|info| info.host.clone()),
    );
    let dcs = dedup(
        instances
            .iter()
            .filter_map(|name| infos.get(name))
            .map(|info| info.dc.clone()),
    );
    scores_of(&hosts, &dcs, truth)
}

fn scores_of(hosts: &[String], dcs: &[String], truth: &Truth) -> Scores {
    Scores {
        host_ac1: ac_at(hosts, &truth.hosts, 1),
        host_ac3: ac_at(hosts, &truth.hosts, 3),
        host_avg5: avg_at_5(hosts, &truth.hosts),
        dc_ac1: ac_at(dcs, &truth.dcs, 1),
        dc_ac3: ac_at(dcs, &truth.dcs, 3),
    }
}

/// What a verdict said, in short.
#[derive(Debug, Clone, Serialize)]
pub struct VerdictSummary {
    /// Incident kind.
    pub kind: String,
    /// Datacenter named.
    pub dc: String,
    /// Hosts, most likely first (at most 3).
    pub hosts: Vec<String>,
}

/// One scenario's result.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    /// Scenario name.
    pub scenario: String,
    /// Its ground truth: every fault that started.
    pub truth: Vec<Truth>,
    /// The first verdict after the onset.
    pub verdict: Option<VerdictSummary>,
    /// The detector's scores (its first verdict after the onset).
    pub epicenter: Scores,
    /// The robust z-score reference's scores, on the same round's anomalies.
    pub robust_z: Scores,
    /// The personalized PageRank reference's scores, on the same round's anomalies.
    pub pagerank: Scores,
    /// Fault onset → first correct verdict, in scrape intervals.
    pub intervals_to_detect: Option<f64>,
    /// Verdicts opened that name no faulty host (any verdict in a scenario without faults).
    pub false_verdicts: usize,
    /// The scenario's scrape interval, seconds.
    pub scrape_interval_seconds: f64,
}

/// Runs one scenario through the detector, start to end, and scores it. `trace` receives a
/// line for every round with anomalies (leaders, verdict, strongest anomalies).
pub fn evaluate(scenario: &Scenario, rules: Vec<Rule>, mut trace: Option<&mut dyn FnMut(String)>) -> ScenarioResult {
    let start_ms = 1_780_000_000_000;
    let mut fleet = Fleet::new(scenario, start_ms);
    let interval = scenario.scrape_interval.0.as_secs().max(1);
    let mut detector = Detector::new(rules, fleet_dependencies(), interval as i64 * 1000, Settings::default());
    let infos: Vec<InstanceInfo> = fleet
        .instances()
        .iter()
        .map(|instance| InstanceInfo {
            name: instance.name.clone(),
            dc: instance.dc.clone(),
            host: instance.host.clone(),
            service: instance.service.name().to_string(),
        })
        .collect();
    let truth = ground_truth(&fleet);
    let mut assessments: Vec<Assessment> = Vec::new();
    let end = scenario.duration.0.as_secs();
    while fleet.second() < end {
        fleet.step();
        if fleet.second() % interval != 0 {
            continue;
        }
        let now = fleet.now_ms();
        for (index, info) in infos.iter().enumerate() {
            let text = fleet.render(index);
            let Ok(exposition) = parse(
                text.as_bytes(),
                ParseOptions {
                    format: FormatChoice::Text,
                    validation: Validation::Prometheus,
                },
            ) else {
                continue;
            };
            let mut samples: Vec<(&str, BTreeMap<String, String>, f64)> = exposition
                .samples
                .iter()
                .map(|sample| {
                    let labels = exposition
                        .labels_in(sample.labels)
                        .iter()
                        .map(|label| (label.name.to_string(), label.value.to_string()))
                        .collect();
                    (sample.name.as_ref(), labels, sample.value)
                })
                .collect();
            samples.push(("up", BTreeMap::new(), 1.0));
            detector.observe(now, info, samples);
        }
        let assessment = detector.assess(now);
        if let Some(trace) = trace.as_mut().filter(|_| !assessment.anomalies.is_empty()) {
            let leaders: Vec<String> = assessment
                .candidates
                .iter()
                .take(3)
                .map(|c| format!("{} {:.1}", c.instance, c.score))
                .collect();
            let anomalies: Vec<String> = assessment
                .anomalies
                .iter()
                .take(8)
                .map(|a| {
                    format!(
                        "{}:{}{} {:.0}",
                        a.instance,
                        a.metric,
                        a.peer.as_ref().map(|p| format!("->{p}")).unwrap_or_default(),
                        a.score
                    )
                })
                .collect();
            trace(format!(
                "  +{:>5}s leaders [{}] verdict {} | {}",
                fleet.second(),
                leaders.join(", "),
                assessment.verdict.as_ref().map_or("-".to_string(), |v| format!(
                    "{} {}",
                    v.kind,
                    v.hosts.first().cloned().unwrap_or_default()
                )),
                anomalies.join(" ")
            ));
        }
        assessments.push(assessment);
    }
    let info_map: BTreeMap<String, InstanceInfo> = detector.instances().clone();
    let interval_ms = interval as f64 * 1000.0;
    let Some(first_truth) = truth.first() else {
        let false_verdicts = assessments.iter().filter(|a| a.opened).count();
        return ScenarioResult {
            scenario: scenario.name.clone(),
            truth,
            verdict: None,
            epicenter: Scores::default(),
            robust_z: Scores::default(),
            pagerank: Scores::default(),
            intervals_to_detect: None,
            false_verdicts,
            scrape_interval_seconds: interval as f64,
        };
    };
    let onset = first_truth.onset_ms;
    let first_verdict = assessments
        .iter()
        .find(|a| a.time_ms >= onset && a.verdict.is_some())
        .and_then(|a| a.verdict.clone().map(|verdict| (a, verdict)));
    let correct = assessments.iter().find(|a| {
        a.time_ms >= onset
            && a.verdict
                .as_ref()
                .and_then(|verdict| verdict.hosts.first())
                .is_some_and(|host| first_truth.hosts.contains(host))
    });
    let false_verdicts = assessments
        .iter()
        .filter(|a| a.opened)
        .filter(|a| {
            a.verdict
                .as_ref()
                .and_then(|verdict| verdict.hosts.first())
                .is_none_or(|host| !first_truth.hosts.contains(host))
        })
        .count();
    // The reference rankings see the anomalies of the round our first verdict came in (or,
    // without one, three intervals after the onset).
    let at = first_verdict
        .as_ref()
        .map_or(onset + 3 * interval as i64 * 1000, |(assessment, _)| assessment.time_ms);
    let anomalies = assessments
        .iter()
        .find(|a| a.time_ms >= at)
        .map(|a| a.anomalies.clone())
        .unwrap_or_default();
    let baro = reference::robust_z(&anomalies);
    let walk = reference::pagerank(&anomalies, &info_map, detector.dependencies());
    let (epicenter, verdict) = match &first_verdict {
        Some((_, verdict)) => {
            let dcs = dedup(verdict.candidates.iter().map(|c| c.dc.clone()));
            let dcs = if verdict.kind == "dc_degradation" {
                vec![verdict.dc.clone()]
            } else {
                dcs
            };
            (
                scores_of(&verdict.ranked_hosts(), &dcs, first_truth),
                Some(VerdictSummary {
                    kind: verdict.kind.clone(),
                    dc: verdict.dc.clone(),
                    hosts: verdict.ranked_hosts().into_iter().take(3).collect(),
                }),
            )
        }
        None => (Scores::default(), None),
    };
    ScenarioResult {
        scenario: scenario.name.clone(),
        truth: truth.clone(),
        verdict,
        epicenter,
        robust_z: scores(&baro, &info_map, first_truth),
        pagerank: scores(&walk, &info_map, first_truth),
        intervals_to_detect: correct.map(|a| ((a.time_ms - onset) as f64 / interval_ms).max(0.0)),
        false_verdicts,
        scrape_interval_seconds: interval as f64,
    }
}

/// Means over the scenarios with faults; median time to detect; false verdicts summed.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Scenarios with at least one fault (the means are over these).
    pub scenarios_with_faults: usize,
    /// The detector's mean scores.
    pub epicenter: Scores,
    /// The robust z-score reference's mean scores.
    pub robust_z: Scores,
    /// The personalized PageRank reference's mean scores.
    pub pagerank: Scores,
    /// Median time to detect, scrape intervals (a missed fault counts as infinite; `None`
    /// when the median is a miss).
    pub median_intervals_to_detect: Option<f64>,
    /// False verdicts over every scenario.
    pub false_verdicts: usize,
}

/// The overall figures of a set of results.
pub fn summarize(results: &[ScenarioResult]) -> Summary {
    let faulty: Vec<&ScenarioResult> = results.iter().filter(|r| !r.truth.is_empty()).collect();
    let mean = |pick: &dyn Fn(&ScenarioResult) -> &Scores| -> Scores {
        let n = faulty.len().max(1) as f64;
        let sum = |f: &dyn Fn(&Scores) -> f64| faulty.iter().map(|r| f(pick(r))).sum::<f64>() / n;
        Scores {
            host_ac1: sum(&|s| s.host_ac1),
            host_ac3: sum(&|s| s.host_ac3),
            host_avg5: sum(&|s| s.host_avg5),
            dc_ac1: sum(&|s| s.dc_ac1),
            dc_ac3: sum(&|s| s.dc_ac3),
        }
    };
    let mut detect: Vec<f64> = faulty
        .iter()
        .map(|r| r.intervals_to_detect.unwrap_or(f64::INFINITY))
        .collect();
    detect.sort_by(f64::total_cmp);
    let median = if detect.is_empty() {
        None
    } else {
        let middle = detect.len() / 2;
        let value = if detect.len() % 2 == 1 {
            detect[middle]
        } else {
            (detect[middle - 1] + detect[middle]) / 2.0
        };
        value.is_finite().then_some(value)
    };
    Summary {
        scenarios_with_faults: faulty.len(),
        epicenter: mean(&|r| &r.epicenter),
        robust_z: mean(&|r| &r.robust_z),
        pagerank: mean(&|r| &r.pagerank),
        median_intervals_to_detect: median,
        false_verdicts: results.iter().map(|r| r.false_verdicts).sum(),
    }
}
