//! Scenario scoring: runs scenarios through the detector headless and faster than real time
//! (every scrape round renders each simulated exporter and parses it, as a scrape would), and
//! scores every ground-truth row against its own incident (host and datacenter AC@1, AC@3,
//! Avg@5, time to detect, kind right, datacenter set exactly right) and counts the incidents
//! that answer no fault (false verdicts), beside two reference rankings from the literature
//! (robust z-score as in BARO/N-Sigma, personalized PageRank as in MicroRCA).

use std::collections::BTreeMap;

use epicenter_collector::exposition::{parse, FormatChoice, ParseOptions, Validation};
use epicenter_detector::engine::{
    Anomaly, Assessment, ConfidenceModel, Dependency, Detector, InstanceInfo, Settings, Verdict,
};
use epicenter_detector::reference;
use epicenter_detector::rules::Rule;
use epicenter_detector::score::{ac_at, avg_at_5, dedup};
use epicenter_fleet::scenario::Scenario;
use epicenter_fleet::truth::{ground_truth, Truth};
use epicenter_fleet::{Fleet, Instance};
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

/// Where a simulated instance runs, as the detector names it (its placement labels).
pub fn instance_info(instance: &Instance) -> InstanceInfo {
    InstanceInfo {
        name: instance.name.clone(),
        dc: instance.dc.clone(),
        host: instance.host.clone(),
        service: instance.service.name().to_string(),
    }
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
    /// Every datacenter named, sorted (both ends of a link).
    pub dcs: Vec<String>,
    /// Hosts, most likely first (at most 3).
    pub hosts: Vec<String>,
}

/// How one ground-truth row (one fault) was answered: by the incident matched to it
/// ([`evaluate`] says how), or not at all.
#[derive(Debug, Clone, Serialize)]
pub struct IncidentScore {
    /// Index of the ground-truth row in [`ScenarioResult::truth`].
    pub truth: usize,
    /// The matched incident's verdict as it first stood after the onset.
    pub verdict: Option<VerdictSummary>,
    /// The detector's scores on that verdict (all zero without one).
    pub epicenter: Scores,
    /// The robust z-score reference's scores, on the anomalies of the round the incident
    /// opened (or three intervals after the onset without one).
    pub robust_z: Scores,
    /// The personalized PageRank reference's scores, on the same round's anomalies.
    pub pagerank: Scores,
    /// Fault onset → the first round the incident named a faulty host first, in scrape
    /// intervals; `None` when it never did.
    pub intervals_to_detect: Option<f64>,
    /// Whether the verdict's kind is the detector's name for the fault ([`kind_matches`]).
    pub kind_right: bool,
    /// Whether the datacenters the verdict names ([`Verdict::dcs`]) are exactly the fault's.
    pub dcs_right: bool,
}

/// One scenario's result.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    /// Scenario name.
    pub scenario: String,
    /// Its ground truth: every fault that started.
    pub truth: Vec<Truth>,
    /// One score per ground-truth row, in the same order.
    pub incidents: Vec<IncidentScore>,
    /// Incidents opened that answer no fault (every incident in a scenario without faults).
    pub false_verdicts: usize,
    /// Every incident opened: its confidence when it opened, and whether it was right (it
    /// answers a fault, names one of its hosts first and has the right kind). What the
    /// reliability table and the Brier score are computed from ([`Calibration`]).
    pub confidences: Vec<(f64, bool)>,
    /// The same incidents' inputs to the confidence model, for `eval --calibrate`
    /// ([`fit_confidence`]); not in the JSON.
    #[serde(skip)]
    pub calibration_points: Vec<CalibrationPoint>,
    /// Simulated time, seconds.
    pub simulated_seconds: f64,
    /// The scenario's scrape interval, seconds.
    pub scrape_interval_seconds: f64,
}

/// Whether a verdict of kind `verdict` names a fault of kind `truth` (the simulator's fault
/// kinds, docs/scenarios.md, "Faults"): the same name, except that a slow database shows as
/// its callers' `pool_exhaustion`, and a session loss as the `mailbox_overload` it causes at
/// the datacenter's voice-state supervisor (the table's good verdict), a host's memory
/// pressure as `host_saturation` (a starved host, whichever resource), and a host's packet
/// loss as `host_network`.
pub fn kind_matches(truth: &str, verdict: &str) -> bool {
    match truth {
        "slow_database" => verdict == "pool_exhaustion",
        "host_memory_pressure" => verdict == "host_saturation",
        "host_packet_loss" => verdict == "host_network",
        "session_loss" => matches!(verdict, "session_loss" | "mailbox_overload"),
        _ => truth == verdict,
    }
}

/// One incident as the rounds saw it: the round it opened and its verdict every round it was
/// open, in order.
struct Seen {
    opened_ms: i64,
    states: Vec<(i64, Verdict)>,
}

/// What one detector round said, as scoring needs it: the round's time (the samples' clock,
/// ms since the epoch), every incident open after it, and every anomaly of the round (the
/// reference rankings' input). Made from a headless [`Assessment`] or a live
/// [`epicenter_detector::live::Round`], so that both paths are scored by one [`score`].
#[derive(Debug, Clone, Default)]
pub struct Judged {
    /// Round time, ms since the epoch.
    pub time_ms: i64,
    /// Every incident open after the round, oldest first.
    pub incidents: Vec<Verdict>,
    /// Every anomaly of the round.
    pub anomalies: Vec<Anomaly>,
}

impl From<Assessment> for Judged {
    fn from(assessment: Assessment) -> Judged {
        Judged {
            time_ms: assessment.time_ms,
            incidents: assessment.incidents,
            anomalies: assessment.anomalies,
        }
    }
}

impl From<&epicenter_detector::live::Round> for Judged {
    fn from(round: &epicenter_detector::live::Round) -> Judged {
        Judged {
            time_ms: round.time_ms,
            incidents: round.open.clone(),
            anomalies: round.anomalies.clone(),
        }
    }
}

/// One sample as the detector takes it: (metric, labels, value).
type Sample<'a> = (&'a str, BTreeMap<String, String>, f64);

/// Runs one scenario through the detector, start to end, and scores it. `trace` receives a
/// line for every round with anomalies (leaders, verdict, strongest anomalies).
pub fn evaluate(scenario: &Scenario, rules: Vec<Rule>, mut trace: Option<&mut dyn FnMut(String)>) -> ScenarioResult {
    let start_ms = 1_780_000_000_000;
    let mut fleet = Fleet::new(scenario, start_ms);
    let interval = scenario.scrape_interval.0.as_secs().max(1);
    let mut detector = Detector::new(rules, fleet_dependencies(), interval as i64 * 1000, Settings::default());
    let infos: Vec<InstanceInfo> = fleet.instances().iter().map(instance_info).collect();
    let by_name: BTreeMap<&str, usize> = infos
        .iter()
        .enumerate()
        .map(|(at, info)| (info.name.as_str(), at))
        .collect();
    let truth = ground_truth(&fleet);
    let mut assessments: Vec<Judged> = Vec::new();
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
            // A kubelet's cAdvisor series name their container's instance in `pod`: that
            // instance's evidence, as `placement.instance_label: pod` places them live.
            let mut samples: Vec<Sample> = Vec::new();
            let mut reported: BTreeMap<usize, Vec<Sample>> = BTreeMap::new();
            for sample in &exposition.samples {
                let labels = exposition.label_map(sample);
                let other = labels
                    .get("pod")
                    .filter(|pod| **pod != info.name)
                    .and_then(|pod| by_name.get(pod.as_str()).copied());
                match other {
                    Some(at) => reported
                        .entry(at)
                        .or_default()
                        .push((sample.name.as_ref(), labels, sample.value)),
                    None => samples.push((sample.name.as_ref(), labels, sample.value)),
                }
            }
            samples.push(("up", BTreeMap::new(), 1.0));
            detector.observe(now, info, samples);
            for (at, samples) in reported {
                detector.observe_reported(now, &infos[at], samples);
            }
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
                .take(if std::env::var_os("EPICENTER_TRACE_ALL").is_some() {
                    400
                } else {
                    8
                })
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
                "  +{:>5}s leaders [{}] incidents {} | {}",
                fleet.second(),
                leaders.join(", "),
                if assessment.incidents.is_empty() {
                    "-".to_string()
                } else {
                    assessment
                        .incidents
                        .iter()
                        .map(|v| format!("{} {}", v.kind, v.hosts.first().cloned().unwrap_or_default()))
                        .collect::<Vec<_>>()
                        .join(" + ")
                },
                anomalies.join(" ")
            ));
        }
        assessments.push(Judged::from(assessment));
    }
    let instances = detector.instances().clone();
    score(
        &scenario.name,
        &truth,
        &assessments,
        &instances,
        detector.dependencies(),
        interval,
        end as f64,
    )
}
/// Scores the rounds of one run of scenario `name` against its ground truth `truth`:
/// every fault matched to its own incident (below), the rest counted as false verdicts.
/// `instances` places instance names (datacenter, host, service) for the reference rankings,
/// `dependencies` is the service graph they walk, `interval` the scrape interval in seconds
/// (times to detect are counted in it) and `simulated_seconds` how long the run lasted
/// (false verdicts per day). The rounds may come from the headless driver ([`evaluate`]) or
/// from the live pipeline (`epicenter eval --load`); either way, in time order.
pub fn score(
    name: &str,
    truth: &[Truth],
    assessments: &[Judged],
    instances: &BTreeMap<String, InstanceInfo>,
    dependencies: &[Dependency],
    interval: u64,
    simulated_seconds: f64,
) -> ScenarioResult {
    let info_map = instances;
    let interval_ms = interval as f64 * 1000.0;
    let mut seen: Vec<Seen> = Vec::new();
    for assessment in assessments {
        for verdict in &assessment.incidents {
            match seen.iter_mut().find(|incident| incident.states[0].1.id == verdict.id) {
                Some(incident) => incident.states.push((assessment.time_ms, verdict.clone())),
                None => seen.push(Seen {
                    opened_ms: assessment.time_ms,
                    states: vec![(assessment.time_ms, verdict.clone())],
                }),
            }
        }
    }
    // Each fault, in onset order, gets the first unmatched incident opened at or after its
    // onset that ever named one of its hosts first; failing that, the first unmatched one
    // opened within ten intervals of the onset (a wrong answer, scored as such). One to one:
    // an incident answers one fault, except that datacenters degraded together (faults of
    // `dc_degradation` starting within an interval of each other) are one event, answered by
    // one incident naming them all: each such fault is scored against the group's datacenters
    // and hosts together. A fault an incident already answering another absorbed is a miss.
    let mut order: Vec<usize> = (0..truth.len()).collect();
    order.sort_by_key(|&index| truth[index].onset_ms);
    let together = |one: &Truth, other: &Truth| {
        one.kind == "dc_degradation"
            && other.kind == "dc_degradation"
            && (one.onset_ms - other.onset_ms).abs() as f64 <= interval_ms
    };
    let merged: Vec<Truth> = truth
        .iter()
        .map(|fault| {
            let mut event = fault.clone();
            for other in truth.iter().filter(|other| together(fault, other)) {
                event.dcs.extend(other.dcs.iter().cloned());
                event.hosts.extend(other.hosts.iter().cloned());
            }
            event.dcs.sort();
            event.dcs.dedup();
            event.hosts.sort();
            event.hosts.dedup();
            event
        })
        .collect();
    let mut used = vec![false; seen.len()];
    let mut right = vec![false; seen.len()];
    let mut answered: Vec<Option<usize>> = vec![None; truth.len()];
    let mut scored: Vec<Option<IncidentScore>> = vec![None; truth.len()];
    // First, each fault takes the first unmatched incident that names it (its host first);
    // only then do the faults left take an incident that opened near their onset as a wrong
    // answer, so an earlier fault's wrong answer never takes a later fault's right one.
    let mut named_by: Vec<Option<usize>> = vec![None; truth.len()];
    {
        let mut taken = vec![false; seen.len()];
        for &index in &order {
            let fault = &merged[index];
            let names = |verdict: &Verdict| verdict.hosts.first().is_some_and(|host| fault.hosts.contains(host));
            let first = (0..seen.len()).find(|&i| {
                !taken[i] && seen[i].opened_ms >= fault.onset_ms && seen[i].states.iter().any(|(_, v)| names(v))
            });
            if let Some(i) = first {
                taken[i] = true;
                named_by[index] = Some(i);
            }
        }
    }
    let claimed: Vec<bool> = (0..seen.len()).map(|i| named_by.contains(&Some(i))).collect();
    for index in order {
        let fault = &merged[index];
        let names_fault = |verdict: &Verdict| verdict.hosts.first().is_some_and(|host| fault.hosts.contains(host));
        // For an incident several faults joined: it names this fault's host among its own.
        let names_joined = |verdict: &Verdict| verdict.hosts.iter().any(|host| fault.hosts.contains(host));
        let after = |incident: &Seen| incident.opened_ms >= fault.onset_ms;
        // The incident of a fault of the same event (datacenters degraded together).
        let same_event = (0..truth.len())
            .filter(|&other| other != index && together(&truth[index], &truth[other]))
            .find_map(|other| answered[other]);
        let matched = same_event.or(named_by[index]).or_else(|| {
            (0..seen.len()).find(|&i| {
                !used[i]
                    && !claimed[i]
                    && after(&seen[i])
                    && seen[i].opened_ms <= fault.onset_ms + 10 * interval_ms as i64
            })
        });
        answered[index] = matched;
        let shared = matched.is_some_and(|i| used[i]);
        if let Some(i) = matched.filter(|_| !shared) {
            used[i] = true;
            let verdict = &seen[i].states[0].1;
            right[i] = names_fault(verdict) && kind_matches(&fault.kind, &verdict.kind);
        }
        let incident = matched.map(|i| &seen[i]);
        // The reference rankings see the anomalies of the round the incident opened (or,
        // without one, three intervals after the onset).
        let at = incident.map_or(fault.onset_ms + 3 * interval as i64 * 1000, |incident| {
            incident.opened_ms
        });
        let anomalies = assessments
            .iter()
            .find(|a| a.time_ms >= at)
            .map(|a| a.anomalies.clone())
            .unwrap_or_default();
        let baro = reference::robust_z(&anomalies);
        let walk = reference::pagerank(&anomalies, info_map, dependencies);
        let mut result = IncidentScore {
            truth: index,
            verdict: None,
            epicenter: Scores::default(),
            robust_z: scores(&baro, info_map, fault),
            pagerank: scores(&walk, info_map, fault),
            intervals_to_detect: None,
            kind_right: false,
            dcs_right: false,
        };
        if let Some(incident) = incident {
            // A shared incident is judged from the first round it named this fault's host.
            let verdict = if shared {
                incident
                    .states
                    .iter()
                    .find(|(time_ms, v)| *time_ms >= fault.onset_ms && names_joined(v))
                    .map_or(&incident.states[0].1, |(_, v)| v)
            } else {
                &incident.states[0].1
            };
            // Ranked datacenters for AC@k: what a network verdict names, else its candidates'.
            let dcs = if matches!(verdict.kind.as_str(), "dc_degradation" | "link_degradation") {
                verdict.dcs.clone()
            } else {
                dedup(verdict.candidates.iter().map(|c| c.dc.clone()))
            };
            let named_dcs = verdict.dcs.clone();
            let mut ranked = verdict.ranked_hosts();
            if shared {
                // This fault's host first among the hosts the incident names.
                ranked.sort_by_key(|host| !fault.hosts.contains(host));
            }
            result.epicenter = scores_of(&ranked, &dcs, fault);
            result.kind_right = kind_matches(&fault.kind, &verdict.kind);
            result.dcs_right = named_dcs == fault.dcs;
            result.intervals_to_detect = incident
                .states
                .iter()
                .find(|(time_ms, verdict)| {
                    if shared {
                        *time_ms >= fault.onset_ms && names_joined(verdict)
                    } else {
                        names_fault(verdict)
                    }
                })
                .map(|(time_ms, _)| ((*time_ms - fault.onset_ms) as f64 / interval_ms).max(0.0));
            result.verdict = Some(VerdictSummary {
                kind: verdict.kind.clone(),
                dc: verdict.dc.clone(),
                dcs: verdict.dcs.clone(),
                hosts: verdict.ranked_hosts().into_iter().take(3).collect(),
            });
        }
        scored[index] = Some(result);
    }
    ScenarioResult {
        scenario: name.to_string(),
        truth: truth.to_vec(),
        incidents: scored.into_iter().flatten().collect(),
        false_verdicts: used.iter().filter(|used| !**used).count(),
        confidences: seen
            .iter()
            .zip(&right)
            .map(|(incident, right)| (incident.states[0].1.confidence, *right))
            .collect(),
        calibration_points: seen
            .iter()
            .zip(&right)
            .map(|(incident, right)| {
                let verdict = &incident.states[0].1;
                CalibrationPoint {
                    share: verdict.leader_share,
                    score: verdict.candidates.first().map_or(0.0, |leader| leader.score),
                    kind: verdict.kind.clone(),
                    right: *right,
                }
            })
            .collect(),
        simulated_seconds,
        scrape_interval_seconds: interval as f64,
    }
}

/// How well confidence predicts being right, over a set of incidents: the Brier score
/// (mean squared difference between the confidence and 1 for a right incident, 0 for a wrong
/// one; lower is better, 0.25 is what a constant 0.5 scores) and a reliability table (Murphy
/// and Winkler 1977; DeGroot and Fienberg 1983): the incidents binned by confidence in tenths,
/// each bin's mean confidence beside the share that was right.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Calibration {
    /// Incidents scored.
    pub verdicts: usize,
    /// Brier score, 0..1 (`None` without incidents).
    pub brier: Option<f64>,
    /// Bins with at least one incident, lowest confidence first.
    pub bins: Vec<ReliabilityBin>,
}

/// One bin of a reliability table.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ReliabilityBin {
    /// Lower bound of the bin's confidence (inclusive), a tenth.
    pub from: f64,
    /// Upper bound (exclusive, except 1.0 in the last bin).
    pub to: f64,
    /// Incidents in the bin.
    pub verdicts: usize,
    /// Their mean confidence.
    pub mean_confidence: f64,
    /// The share of them that was right.
    pub observed: f64,
}

/// One incident's inputs to the confidence model and whether it was right.
#[derive(Debug, Clone, PartialEq)]
pub struct CalibrationPoint {
    /// The leader's share of the top three candidates' scores ([`Verdict::leader_share`]).
    pub share: f64,
    /// The leader's score.
    pub score: f64,
    /// The kind the incident opened with.
    pub kind: String,
    /// Whether the incident was right ([`ScenarioResult::confidences`]).
    pub right: bool,
}

/// Coefficients of the confidence model, in [`ConfidenceModel`]'s order: intercept, share,
/// ln(score), unknown kind.
const FEATURES: usize = 4;

/// The logistic [`ConfidenceModel`] of most likelihood for `points` (Newton's method,
/// iteratively reweighted least squares, with a small ridge of 0.01 on the coefficients so
/// that a corpus without a wrong incident, or without an `unknown` one, still gives finite
/// ones). Errors: no points, or a singular fit.
pub fn fit_confidence(points: &[CalibrationPoint]) -> Result<ConfidenceModel, String> {
    if points.is_empty() {
        return Err("no incidents to fit the confidence on".to_string());
    }
    const RIDGE: f64 = 0.01;
    let features = |point: &CalibrationPoint| {
        let unknown = if epicenter_detector::ConfidenceModel::names_no_cause(&point.kind) {
            1.0
        } else {
            0.0
        };
        [1.0, point.share, point.score.max(1e-3).ln(), unknown]
    };
    let mut beta = [0.0f64; FEATURES];
    for _ in 0..100 {
        let mut gradient = [0.0f64; FEATURES];
        let mut hessian = [[0.0f64; FEATURES]; FEATURES];
        for point in points {
            let x = features(point);
            let z: f64 = (0..FEATURES).map(|i| x[i] * beta[i]).sum();
            let p = 1.0 / (1.0 + (-z).exp());
            let y = if point.right { 1.0 } else { 0.0 };
            for i in 0..FEATURES {
                gradient[i] += (y - p) * x[i];
                for j in 0..FEATURES {
                    hessian[i][j] += p * (1.0 - p) * x[i] * x[j];
                }
            }
        }
        for i in 0..FEATURES {
            gradient[i] -= RIDGE * beta[i];
            hessian[i][i] += RIDGE;
        }
        let step = solve(hessian, gradient).ok_or("the fit is singular: too few distinct incidents")?;
        for i in 0..FEATURES {
            beta[i] += step[i];
        }
        if step.iter().all(|value| value.abs() < 1e-10) {
            break;
        }
    }
    Ok(ConfidenceModel {
        intercept: beta[0],
        share: beta[1],
        log_score: beta[2],
        unknown: beta[3],
    })
}

/// `a⁻¹ b` for an N × N system by Gaussian elimination with partial pivoting; `None` when `a`
/// is singular.
fn solve<const N: usize>(mut a: [[f64; N]; N], mut b: [f64; N]) -> Option<[f64; N]> {
    for column in 0..N {
        let pivot = (column..N).max_by(|&x, &y| a[x][column].abs().total_cmp(&a[y][column].abs()))?;
        if a[pivot][column].abs() < 1e-12 {
            return None;
        }
        a.swap(column, pivot);
        b.swap(column, pivot);
        let pivot_row = a[column];
        for row in column + 1..N {
            let factor = a[row][column] / pivot_row[column];
            for (value, above) in a[row].iter_mut().zip(pivot_row).skip(column) {
                *value -= factor * above;
            }
            b[row] -= factor * b[column];
        }
    }
    let mut x = [0.0; N];
    for row in (0..N).rev() {
        let rest: f64 = (row + 1..N).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - rest) / a[row][row];
    }
    Some(x)
}

/// The calibration of `confidences` ((confidence, right) per incident).
pub fn calibration(confidences: &[(f64, bool)]) -> Calibration {
    let outcome = |right: bool| if right { 1.0 } else { 0.0 };
    let brier = (!confidences.is_empty()).then(|| {
        confidences
            .iter()
            .map(|&(p, right)| (p - outcome(right)).powi(2))
            .sum::<f64>()
            / confidences.len() as f64
    });
    let mut bins = Vec::new();
    for tenth in 0..10 {
        let (from, to) = (f64::from(tenth) / 10.0, f64::from(tenth + 1) / 10.0);
        let inside: Vec<&(f64, bool)> = confidences
            .iter()
            .filter(|(p, _)| *p >= from && (*p < to || (tenth == 9 && *p <= 1.0)))
            .collect();
        if inside.is_empty() {
            continue;
        }
        let n = inside.len() as f64;
        bins.push(ReliabilityBin {
            from,
            to,
            verdicts: inside.len(),
            mean_confidence: inside.iter().map(|(p, _)| p).sum::<f64>() / n,
            observed: inside.iter().map(|(_, right)| outcome(*right)).sum::<f64>() / n,
        });
    }
    Calibration {
        verdicts: confidences.len(),
        brier,
        bins,
    }
}

/// Means over every fault of every scenario (one incident each); median time to detect;
/// false verdicts summed and per simulated day.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Scenarios with at least one fault.
    pub scenarios_with_faults: usize,
    /// Faults scored (ground-truth rows; the means are over these).
    pub faults: usize,
    /// The detector's mean scores.
    pub epicenter: Scores,
    /// The robust z-score reference's mean scores.
    pub robust_z: Scores,
    /// The personalized PageRank reference's mean scores.
    pub pagerank: Scores,
    /// Share of faults whose incident has the right kind ([`kind_matches`]).
    pub kind_accuracy: f64,
    /// Share of faults whose incident names exactly the fault's datacenters.
    pub dc_set_accuracy: f64,
    /// Median time to detect, scrape intervals (a missed fault counts as infinite; `None`
    /// when the median is a miss).
    pub median_intervals_to_detect: Option<f64>,
    /// The slowest detection, scrape intervals (`None` when a fault was missed).
    pub max_intervals_to_detect: Option<f64>,
    /// False verdicts over every scenario.
    pub false_verdicts: usize,
    /// False verdicts per simulated day, over every scenario's simulated time.
    pub false_verdicts_per_day: f64,
    /// How well the incidents' confidence predicted being right.
    pub calibration: Calibration,
}

/// The overall figures of a set of results.
pub fn summarize(results: &[ScenarioResult]) -> Summary {
    let faults: Vec<&IncidentScore> = results.iter().flat_map(|r| &r.incidents).collect();
    let n = faults.len().max(1) as f64;
    let mean = |pick: &dyn Fn(&IncidentScore) -> &Scores| -> Scores {
        let sum = |f: &dyn Fn(&Scores) -> f64| faults.iter().map(|r| f(pick(r))).sum::<f64>() / n;
        Scores {
            host_ac1: sum(&|s| s.host_ac1),
            host_ac3: sum(&|s| s.host_ac3),
            host_avg5: sum(&|s| s.host_avg5),
            dc_ac1: sum(&|s| s.dc_ac1),
            dc_ac3: sum(&|s| s.dc_ac3),
        }
    };
    let mut detect: Vec<f64> = faults
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
    let false_verdicts: usize = results.iter().map(|r| r.false_verdicts).sum();
    let days = results.iter().map(|r| r.simulated_seconds).sum::<f64>() / 86_400.0;
    Summary {
        scenarios_with_faults: results.iter().filter(|r| !r.truth.is_empty()).count(),
        faults: faults.len(),
        epicenter: mean(&|r| &r.epicenter),
        robust_z: mean(&|r| &r.robust_z),
        pagerank: mean(&|r| &r.pagerank),
        kind_accuracy: faults.iter().filter(|r| r.kind_right).count() as f64 / n,
        dc_set_accuracy: faults.iter().filter(|r| r.dcs_right).count() as f64 / n,
        median_intervals_to_detect: median,
        max_intervals_to_detect: detect.last().copied().filter(|value| value.is_finite()),
        false_verdicts,
        false_verdicts_per_day: if days > 0.0 { false_verdicts as f64 / days } else { 0.0 },
        calibration: calibration(
            &results
                .iter()
                .flat_map(|r| r.confidences.iter().copied())
                .collect::<Vec<_>>(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(kind: &str, dc: &str, host: &str, onset_ms: i64) -> Truth {
        Truth {
            scenario: "s".into(),
            kind: kind.into(),
            service: "redis".into(),
            dcs: vec![dc.into()],
            hosts: vec![host.into()],
            instances: vec![format!("{host}-redis")],
            onset_ms,
            end_ms: None,
        }
    }

    fn open(id: &str, kind: &str, dcs: &[&str], hosts: &[&str]) -> Verdict {
        Verdict {
            id: id.into(),
            kind: kind.into(),
            dc: dcs[0].into(),
            dcs: dcs.iter().map(|dc| dc.to_string()).collect(),
            hosts: hosts.iter().map(|host| host.to_string()).collect(),
            service: "redis".into(),
            instances: hosts.iter().map(|host| format!("{host}-redis")).collect(),
            confidence: 0.9,
            leader_share: 1.0,
            candidates: Vec::new(),
            evidence: Vec::new(),
            onset_ms: 0,
            opened_ms: 0,
        }
    }

    /// Issue 38: incidents answer faults one to one. A second node lost while the first's
    /// incident is open, which that incident absorbs (it grows to name the second host), is a
    /// miss and not a second right answer; an earlier fault's wrong answer does not take a
    /// later fault's right one; two datacenters degraded at once are one event, both answered
    /// by the one incident naming both.
    #[test]
    fn incidents_answer_faults_one_to_one() {
        let rounds = |states: Vec<(i64, Vec<Verdict>)>| -> Vec<Judged> {
            states
                .into_iter()
                .map(|(time_ms, incidents)| Judged {
                    time_ms,
                    incidents,
                    anomalies: Vec::new(),
                })
                .collect()
        };
        let score_of = |truth: &[Truth], judged: &[Judged]| score("s", truth, judged, &BTreeMap::new(), &[], 10, 600.0);
        // Absorbed: one incident, opened for h1, later naming h2 too.
        let truth = [
            fault("node_loss", "dc-1", "h1", 0),
            fault("node_loss", "dc-1", "h2", 60_000),
        ];
        let first = open("a", "node_loss", &["dc-1"], &["h1"]);
        let grown = open("a", "node_loss", &["dc-1"], &["h1", "h2"]);
        let result = score_of(
            &truth,
            &rounds(vec![(10_000, vec![first.clone()]), (70_000, vec![grown])]),
        );
        assert_eq!(result.incidents[0].epicenter.host_ac1, 1.0);
        assert!(result.incidents[1].verdict.is_none(), "{:?}", result.incidents[1]);
        assert_eq!(result.false_verdicts, 0);
        // A wrong answer near an earlier fault's onset is not taken from the later fault it names.
        let truth = [
            fault("slow_node", "dc-3", "h9", 0),
            fault("link_degradation", "dc-2", "h5", 5_000),
        ];
        let link = open("b", "link_degradation", &["dc-2", "dc-3"], &["h5"]);
        let result = score_of(&truth, &rounds(vec![(20_000, vec![link])]));
        assert!(result.incidents[0].verdict.is_none(), "{:?}", result.incidents[0]);
        assert_eq!(result.incidents[1].epicenter.host_ac1, 1.0);
        // Two datacenters degraded together: one incident naming both answers both.
        let truth = [
            fault("dc_degradation", "dc-2", "h2", 0),
            fault("dc_degradation", "dc-3", "h3", 0),
        ];
        let both = open("c", "dc_degradation", &["dc-2", "dc-3"], &["h3", "h2"]);
        let result = score_of(&truth, &rounds(vec![(10_000, vec![both])]));
        assert_eq!(result.false_verdicts, 0);
        for incident in &result.incidents {
            assert_eq!(incident.epicenter.host_ac1, 1.0, "{incident:?}");
            assert!(incident.dcs_right && incident.kind_right, "{incident:?}");
        }
    }

    /// The Brier score and the reliability table, against values worked by hand.
    #[test]
    fn calibration_bins_by_tenths_and_scores_squared_errors() {
        let table = calibration(&[(0.95, true), (0.85, true), (0.85, false), (0.15, false), (1.0, true)]);
        // (0.05² + 0.15² + 0.85² + 0.15² + 0²) / 5
        let brier = (0.0025 + 0.0225 + 0.7225 + 0.0225) / 5.0;
        assert!((table.brier.unwrap() - brier).abs() < 1e-12, "{table:?}");
        assert_eq!(table.verdicts, 5);
        let bins: Vec<(f64, usize, f64, f64)> = table
            .bins
            .iter()
            .map(|bin| (bin.from, bin.verdicts, bin.mean_confidence, bin.observed))
            .collect();
        assert_eq!(bins.len(), 3, "{bins:?}");
        assert_eq!((bins[0].0, bins[0].1, bins[0].3), (0.1, 1, 0.0));
        assert!((bins[0].2 - 0.15).abs() < 1e-12);
        assert_eq!((bins[1].0, bins[1].1, bins[1].3), (0.8, 2, 0.5));
        // 0.95 and 1.0 share the last bin.
        assert_eq!((bins[2].0, bins[2].1, bins[2].3), (0.9, 2, 1.0));
        assert!((bins[2].2 - 0.975).abs() < 1e-12);
        assert_eq!(calibration(&[]).brier, None);
    }

    /// Four cells of incidents with four distinct feature vectors: the logistic model with four
    /// coefficients is saturated, so at the maximum likelihood each cell's probability is the
    /// share of its incidents that was right (up to the small ridge).
    #[test]
    fn the_fitted_confidence_reproduces_each_cells_share_when_the_model_is_saturated() {
        let e = std::f64::consts::E;
        let cells = [
            (0.5, 1.0, "slow_node", 5),
            (0.5, e * e, "node_loss", 8),
            (0.9, 1.0, "slow_node", 3),
            (0.5, 1.0, "unknown", 1),
        ];
        let mut points = Vec::new();
        for (share, score, kind, right) in cells {
            for n in 0..10 {
                points.push(CalibrationPoint {
                    share,
                    score,
                    kind: kind.to_string(),
                    right: n < right,
                });
            }
        }
        let model = fit_confidence(&points).unwrap();
        for (share, score, kind, right) in cells {
            let fitted = model.probability(share, score, kind);
            let observed = f64::from(right) / 10.0;
            assert!(
                (fitted - observed).abs() < 0.02,
                "{kind} at {share}, {score}: {fitted} vs {observed} ({model:?})"
            );
        }
        assert!(model.unknown < 0.0, "{model:?}");
        assert!(fit_confidence(&[]).is_err());
    }

    #[test]
    fn kinds_match_by_the_scenario_docs() {
        assert!(kind_matches("slow_database", "pool_exhaustion"));
        assert!(kind_matches("session_loss", "mailbox_overload"));
        assert!(kind_matches("node_loss", "node_loss"));
        assert!(!kind_matches("node_loss", "node_hang"));
        assert!(!kind_matches("slow_database", "slow_node"));
    }
}
