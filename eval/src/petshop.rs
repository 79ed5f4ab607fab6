//! The PetShop dataset adapter (`epicenter eval --dataset petshop DIR`): the PetShop root-cause
//! dataset (Amazon Science, CC-BY-4.0; arXiv 2311.04806) scored the way its paper does: top-1
//! and top-3 recall of the root-cause component, per traffic setting and per metric of the
//! issue, beside the reference figures the dataset's repository publishes ([`REFERENCE`]).
//!
//! Nothing here ranks: the ranking is the detector's own ([`epicenter_detector::Detector`]:
//! its signals, baselines and candidate ranking). This module loads the dataset's files and
//! adapts their 5-minute shape to the detector's input (see [`rank_issue`] for the adapter's
//! choices, docs/detector.md "PetShop (real data)" for the reasons):
//! - each component is an instance of a service of its own name, on a host of its own name, in
//!   one synthetic datacenter (`petshop`);
//! - `graph.csv`'s edges (row calls column) are service [`Dependency`] values;
//! - each 5-minute step is one detector round at the step's timestamp (`interval_ms` 300,000):
//!   the issue's statistic of latency, failed requests from availability and requests, and
//!   requests, as samples of the families in [`RULES`];
//! - the fault-free `noissue/` period (when the setting has one) is fed first, moved on the
//!   clock to end one step before the issue file, then the issue file's steps.
//!
//! What is scored is the detector's candidates ([`epicenter_detector::Assessment::candidates`])
//! at the first issue step where it flags the issue's target (see [`rank_issue`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use epicenter_detector::rules::Class;
use epicenter_detector::signal::Tuning;
use epicenter_detector::{Candidate, Dependency, Detector, InstanceInfo, Settings};
use serde::Serialize;

/// One metric series of a component.
#[derive(Debug, Clone)]
struct Column {
    component: String,
    metric: String,
    statistic: String,
    values: Vec<Option<f64>>,
}

/// A metrics.csv: four header rows (microservice, metric, statistic, unix_timestamp), then
/// one row per step with the timestamp first.
#[derive(Debug, Clone)]
struct Table {
    times: Vec<f64>,
    columns: Vec<Column>,
}

fn read_table(path: &Path) -> Result<Table, String> {
    let text = std::fs::read_to_string(path).map_err(|error| format!("{}: {error}", path.display()))?;
    let rows: Vec<Vec<&str>> = text.lines().map(|line| line.split(',').collect()).collect();
    if rows.len() < 4 || rows[0].first() != Some(&"microservice") || rows[1].first() != Some(&"metric") {
        return Err(format!(
            "{}: expected the header rows microservice, metric, statistic, unix_timestamp",
            path.display()
        ));
    }
    let width = rows[0].len();
    let mut columns: Vec<Column> = (1..width)
        .map(|at| Column {
            component: rows[0][at].to_string(),
            metric: rows[1].get(at).copied().unwrap_or("").to_string(),
            statistic: rows[2].get(at).copied().unwrap_or("").to_string(),
            values: Vec::new(),
        })
        .collect();
    let mut times = Vec::new();
    for (line, row) in rows.iter().enumerate().skip(4) {
        let time: f64 = row
            .first()
            .and_then(|cell| cell.parse().ok())
            .ok_or_else(|| format!("{}:{}: no timestamp in the first column", path.display(), line + 1))?;
        if let Some(previous) = times.last().filter(|previous| **previous >= time) {
            // The detector's clock must advance: a repeated or earlier step would be dropped
            // silently.
            return Err(format!(
                "{}:{}:1: timestamp {time} does not come after the previous row's ({previous})",
                path.display(),
                line + 1
            ));
        }
        times.push(time);
        for (at, column) in columns.iter_mut().enumerate() {
            // An empty cell (or `nan`) is a step without data, as the dataset writes it;
            // anything else that is not a number is an error, not a silent gap.
            let value = match row.get(at + 1).map(|cell| cell.trim()) {
                None | Some("") => None,
                Some(cell) => match cell.parse::<f64>() {
                    Ok(value) => Some(value).filter(|v| v.is_finite()),
                    Err(_) => {
                        return Err(format!(
                            "{}:{}:{}: '{cell}' is not a number (column {} {} {})",
                            path.display(),
                            line + 1,
                            at + 2,
                            column.component,
                            column.metric,
                            column.statistic
                        ))
                    }
                },
            };
            column.values.push(value);
        }
    }
    if times.is_empty() {
        return Err(format!("{}: no data rows after the four header rows", path.display()));
    }
    Ok(Table { times, columns })
}

/// Call graph: caller → callees (row calls column).
fn read_graph(path: &Path) -> Result<BTreeMap<String, BTreeSet<String>>, String> {
    let text = std::fs::read_to_string(path).map_err(|error| format!("{}: {error}", path.display()))?;
    let rows: Vec<Vec<&str>> = text.lines().map(|line| line.split(',').collect()).collect();
    let header = rows.first().ok_or_else(|| format!("{}: empty", path.display()))?;
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for row in rows.iter().skip(1) {
        let Some(caller) = row.first() else { continue };
        for (at, cell) in row.iter().enumerate().skip(1) {
            if cell.parse::<f64>().is_ok_and(|value| value != 0.0) {
                if let Some(callee) = header.get(at) {
                    edges.entry(caller.to_string()).or_default().insert(callee.to_string());
                }
            }
        }
    }
    Ok(edges)
}

#[derive(serde::Deserialize)]
struct TargetFile {
    target: TargetSpec,
    root_cause: RootCause,
}

#[derive(serde::Deserialize)]
struct TargetSpec {
    node: String,
    metric: String,
    /// The statistic the issue was seen in (`Average` throughout the dataset).
    #[serde(default = "average")]
    agg: String,
    timestamp: f64,
}

fn average() -> String {
    "Average".to_string()
}

#[derive(serde::Deserialize)]
struct RootCause {
    node: String,
}

/// The dataset's step: CloudWatch's 5-minute period, seconds. An issue file whose first two
/// timestamps are another distance apart is read at that distance instead.
const STEP_SECONDS: f64 = 300.0;

/// Family of a component's latency in the issue's statistic (`latency`/`Average` in the
/// dataset), seconds.
const LATENCY: &str = "petshop_latency_seconds";
/// Family of a component's failed requests per second over a step:
/// (100 − `availability` %) / 100 × `requests`/`Sum` / step seconds.
const FAILED: &str = "petshop_failed_requests_per_second";
/// Family of a component's requests per second over a step: `requests`/`Sum` / step seconds.
const REQUESTS: &str = "petshop_requests_per_second";

/// The adapter's signal rules (the shape of `rules/signals/signals.yml`, parsed by
/// [`epicenter_detector::rules::parse`]); `{one_per_step}` is one request per step, per second.
/// - latency: as the shipped HTTP server latency families (`http_request_duration_seconds`,
///   OpenTelemetry's, gRPC's): class latency, up is bad, floor 5 ms. A gauge, because the
///   dataset gives the step's mean already (a shipped `mean` rule derives it from `_sum` and
///   `_count`).
/// - failed requests: class errors, up is bad, floor one failed request per step. The dataset's
///   availability is the share of requests that succeeded, which is what the detector calls
///   errors; its class `availability` is a process up or down (weight 4, `node_loss`). The
///   shipped 5xx floor, 0.5 per second (150 a step), is more than PetShop's busiest component
///   serves (about 4 requests a second); one failed request is the smallest count there is.
/// - requests: class traffic, up is bad (load spreads to callees), floor one request per
///   second, for the same reason (the shipped `code="200"` rules' floor is 20 per second).
const RULES: &str = "signals:
  - {metric: petshop_latency_seconds, kind: gauge, class: latency, bad: up, floor: 0.005}
  - {metric: petshop_failed_requests_per_second, kind: gauge, class: errors, bad: up, floor: {one_per_step}}
  - {metric: petshop_requests_per_second, kind: gauge, class: traffic, bad: up, floor: 1}
";

/// The one synthetic datacenter every component is placed in (the dataset has no placement).
const DATACENTER: &str = "petshop";

/// The detector's settings for 5-minute steps: the defaults, except that a signal is judged
/// from its first baseline value (`min_history` 1, default 12). The temporal settings have no
/// fault-free period in the copies we have, and their issue files hold one or two steps before
/// the issue: with twelve, the detector would judge nothing there. With a `noissue/` period
/// (589 steps before the issue) the setting changes nothing at the issue.
pub fn detector_settings() -> Settings {
    Settings {
        tuning: Tuning {
            min_history: 1,
            ..Tuning::default()
        },
        ..Settings::default()
    }
}

/// The adapter's rules ([`RULES`]) for a step of `step_seconds`.
fn rules(step_seconds: f64) -> Vec<epicenter_detector::rules::Rule> {
    let text = RULES.replace("{one_per_step}", &format!("{}", 1.0 / step_seconds));
    // The text is this module's own: a failure is a bug here, not bad input.
    epicenter_detector::rules::parse(&text).unwrap_or_else(|error| panic!("the PetShop adapter's rules: {error}"))
}

/// `graph.csv`'s edges as service dependencies (every component is its own service), caller →
/// callee, in the one datacenter.
fn dependencies(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Dependency> {
    graph
        .iter()
        .flat_map(|(caller, callees)| {
            callees.iter().map(move |callee| Dependency {
                caller: caller.clone(),
                callee: callee.clone(),
                same_dc: true,
            })
        })
        .collect()
}

/// Where a component runs for the detector: a service of its own name on a host of its own
/// name in [`DATACENTER`] (so no component has siblings, and a host names one component).
fn placement(component: &str) -> InstanceInfo {
    InstanceInfo {
        name: component.to_string(),
        dc: DATACENTER.to_string(),
        host: component.to_string(),
        service: component.to_string(),
    }
}

/// The columns of one component that the adapter reads, by index into [`Table::columns`].
#[derive(Debug, Clone, Copy, Default)]
struct ComponentColumns {
    /// `latency` in the issue's statistic.
    latency: Option<usize>,
    /// `availability` in the issue's statistic.
    availability: Option<usize>,
    /// `requests`/`Sum`.
    requests: Option<usize>,
}

/// Every component of `table` (in column order) with its columns for `statistic`.
fn components(table: &Table, statistic: &str) -> Vec<(String, ComponentColumns)> {
    let mut found: Vec<(String, ComponentColumns)> = Vec::new();
    for (index, column) in table.columns.iter().enumerate() {
        let at = match found.iter().position(|(name, _)| *name == column.component) {
            Some(at) => at,
            None => {
                found.push((column.component.clone(), ComponentColumns::default()));
                found.len() - 1
            }
        };
        let slot = &mut found[at].1;
        match (column.metric.as_str(), column.statistic.as_str()) {
            ("latency", s) if s == statistic => slot.latency = Some(index),
            ("availability", s) if s == statistic => slot.availability = Some(index),
            ("requests", "Sum") => slot.requests = Some(index),
            _ => {}
        }
    }
    found
}

/// One component's samples at step `row` of `table`: (family, labels, value), for the
/// families of [`RULES`]; a cell without data gives no sample.
fn samples_at(
    table: &Table,
    columns: ComponentColumns,
    row: usize,
    step_seconds: f64,
) -> Vec<(&'static str, BTreeMap<String, String>, f64)> {
    let cell = |index: Option<usize>| index.and_then(|index| table.columns[index].values.get(row).copied().flatten());
    let mut samples = Vec::new();
    if let Some(latency) = cell(columns.latency) {
        samples.push((LATENCY, BTreeMap::new(), latency));
    }
    let requests = cell(columns.requests);
    if let Some(requests) = requests {
        samples.push((REQUESTS, BTreeMap::new(), requests / step_seconds));
    }
    if let (Some(availability), Some(requests)) = (cell(columns.availability), requests) {
        let failed = ((100.0 - availability) / 100.0 * requests).max(0.0);
        samples.push((FAILED, BTreeMap::new(), failed / step_seconds));
    }
    samples
}

/// Feeds every component of `table` at step `row` to the detector at `time_ms`. Every
/// component is observed at every step, with whatever samples it has: X-Ray writes nothing for
/// a component that served no request in a step, and that is an idle component, not one that
/// stopped answering (which the detector would infer from a silent target).
fn feed(
    detector: &mut Detector,
    table: &Table,
    components: &[(String, ComponentColumns)],
    row: usize,
    time_ms: i64,
    step_seconds: f64,
) {
    for (name, columns) in components {
        detector.observe(
            time_ms,
            &placement(name),
            samples_at(table, *columns, row, step_seconds),
        );
    }
}

/// The detector's ranking for one issue, and how it was chosen.
#[derive(Debug, Clone, PartialEq)]
struct Ranked {
    /// The detector's candidates at the chosen step, best first (empty when it had none at any
    /// issue step).
    candidates: Vec<Candidate>,
    /// Whether the detector flagged the issue's target (its latency for a latency issue, its
    /// errors for an availability issue) at an issue step; else the ranking is the first issue
    /// step's that had any candidate.
    target_flagged: bool,
}

/// Runs the detector over one issue and returns its ranking.
///
/// The adapter: every component is an instance ([`placement`]), `graph.csv`'s edges are
/// dependencies ([`dependencies`]), each step is a round at its timestamp (ms) with
/// `interval_ms` the step (300,000), the samples are [`RULES`]' families in the issue's
/// statistic (`target.agg`), and the settings are [`detector_settings`]. The `noissue/` period,
/// when given, is fed first, its clock moved so that its last step falls one step before the
/// issue file's first (it was recorded months later; the detector's signals need a clock that
/// advances); then the issue file's steps, the ones before the issue feeding the baselines too.
///
/// Which round's ranking counts, decided from the design before any run: a step belongs to the
/// issue when it ends after the issue's timestamp (CloudWatch labels a step by its start); the
/// ranking is the detector's whole-round candidates
/// ([`epicenter_detector::Assessment::candidates`]: every instance with evidence, scored as
/// docs/detector.md "Ranking" says) at the first issue step where the detector flags the
/// target in the issue's metric, the moment it sees what the dataset says was seen. When it
/// never does, the first issue step with any candidate counts; with none, the issue is a miss.
/// A verdict is not waited for: the dataset asks for the cause of an issue already seen, and
/// the detector's confirmation rounds (two to six of them, ten to thirty minutes at this step)
/// are about whether to page, which the dataset does not score.
fn rank_issue(
    issue: &Table,
    noissue: Option<&Table>,
    graph: &BTreeMap<String, BTreeSet<String>>,
    target: &TargetSpec,
) -> Ranked {
    let step_seconds = match issue.times.as_slice() {
        [first, second, ..] if second > first => second - first,
        _ => STEP_SECONDS,
    };
    let step_ms = (step_seconds * 1000.0).round() as i64;
    let mut detector = Detector::new(rules(step_seconds), dependencies(graph), step_ms, detector_settings());
    let issue_start_ms = (issue.times[0] * 1000.0).round() as i64;
    if let Some(normal) = noissue {
        let components = components(normal, &target.agg);
        let last = normal.times.last().copied().unwrap_or_default();
        let shift_ms = issue_start_ms - step_ms - (last * 1000.0).round() as i64;
        for (row, time) in normal.times.iter().enumerate() {
            let time_ms = (time * 1000.0).round() as i64 + shift_ms;
            feed(&mut detector, normal, &components, row, time_ms, step_seconds);
            detector.assess(time_ms);
        }
    }
    let components = components(issue, &target.agg);
    let class = if target.metric == "availability" {
        Class::Errors
    } else {
        Class::Latency
    };
    let mut first_with_candidates: Option<Vec<Candidate>> = None;
    for (row, time) in issue.times.iter().enumerate() {
        let time_ms = (time * 1000.0).round() as i64;
        feed(&mut detector, issue, &components, row, time_ms, step_seconds);
        let assessment = detector.assess(time_ms);
        if time + step_seconds <= target.timestamp {
            continue;
        }
        let flagged = assessment
            .anomalies
            .iter()
            .any(|anomaly| anomaly.instance == target.node && anomaly.peer.is_none() && anomaly.class == class);
        if std::env::var_os("EPICENTER_PETSHOP_TRACE").is_some() {
            trace(target, row, flagged, &assessment);
        }
        if flagged {
            return Ranked {
                candidates: assessment.candidates,
                target_flagged: true,
            };
        }
        if first_with_candidates.is_none() && !assessment.candidates.is_empty() {
            first_with_candidates = Some(assessment.candidates);
        }
    }
    Ranked {
        candidates: first_with_candidates.unwrap_or_default(),
        target_flagged: false,
    }
}

/// With `EPICENTER_PETSHOP_TRACE` set, what the detector saw at an issue step, on stderr: the
/// target and its timestamp, the step, whether the target was flagged, the first five candidates with their
/// scores and the anomalies behind the first.
fn trace(target: &TargetSpec, row: usize, flagged: bool, assessment: &epicenter_detector::Assessment) {
    let top: Vec<String> = assessment
        .candidates
        .iter()
        .take(5)
        .map(|c| format!("{} {:.2}", c.instance, c.score))
        .collect();
    let behind: Vec<String> = assessment
        .anomalies
        .iter()
        .filter(|a| {
            assessment.candidates.first().is_some_and(|c| c.instance == a.instance) || a.instance == target.node
        })
        .map(|a| format!("{} {:?} {:.1}", a.instance, a.class, a.score))
        .collect();
    eprintln!(
        "petshop {} {} at {}, step {row}: flagged {flagged}; candidates {top:?}; anomalies {behind:?}",
        target.node, target.metric, target.timestamp
    );
}

/// What makes an issue scorable: a metric the method knows, and a target and root cause that
/// the call graph or the metrics name (else every ranking would silently miss).
fn check_target(target: &TargetFile, table: &Table, graph: &BTreeMap<String, BTreeSet<String>>) -> Result<(), String> {
    if !matches!(target.target.metric.as_str(), "latency" | "availability") {
        return Err(format!(
            "target.metric '{}': expected latency or availability",
            target.target.metric
        ));
    }
    let known = |name: &str| {
        graph.contains_key(name)
            || graph.values().any(|callees| callees.contains(name))
            || table.columns.iter().any(|column| column.component == name)
    };
    for (key, name) in [
        ("target.node", &target.target.node),
        ("root_cause.node", &target.root_cause.node),
    ] {
        if !known(name) {
            return Err(format!("{key} '{name}' is in neither graph.csv nor metrics.csv"));
        }
    }
    if !table
        .columns
        .iter()
        .any(|column| column.component == target.target.node && column.statistic == target.target.agg)
    {
        return Err(format!(
            "target.agg '{}': metrics.csv has no such statistic for {}",
            target.target.agg, target.target.node
        ));
    }
    Ok(())
}

/// The dataset's published reference: top-1 and top-3 recall of the anomaly-traversal baseline
/// (MAD score, threshold 5) as the dataset repository's notebook `code/RCA-Dataset-Eval.ipynb`
/// prints them (commit 1c5992d), over the train and test splits together and with the two
/// temporal settings pooled. Keyed by setting family and issue metric.
const REFERENCE: [(&str, &str, f64, f64); 6] = [
    ("low_traffic", "latency", 0.571, 0.571),
    ("low_traffic", "availability", 0.833, 1.0),
    ("high_traffic", "latency", 0.571, 0.786),
    ("high_traffic", "availability", 0.667, 1.0),
    ("temporal_traffic", "latency", 1.0, 1.0),
    ("temporal_traffic", "availability", 0.75, 1.0),
];

/// The family a setting folder belongs to for [`REFERENCE`]: `temporal_traffic1` and
/// `temporal_traffic2` pool as `temporal_traffic`.
fn family(setting: &str) -> &str {
    setting.trim_end_matches(|c: char| c.is_ascii_digit())
}

/// Results for one setting (or setting family, for `split` "all") and issue metric.
#[derive(Debug, Clone, Serialize)]
pub struct PetshopRow {
    /// A setting folder, or a family pooling settings (`temporal_traffic`) when `split` is "all".
    pub setting: String,
    /// `train`, `test`, or `all` (every split present, pooled the way the reference is).
    pub split: String,
    /// The issue metric: `latency` or `availability`.
    pub metric: String,
    /// Issues scored.
    pub issues: usize,
    /// Top-1 recall of the root-cause component among the detector's candidates, 0..1.
    pub top1: f64,
    /// Top-3 recall, 0..1.
    pub top3: f64,
    /// Issues at which the detector flagged the target in the issue's metric at an issue step
    /// (the others were ranked at the first issue step with any candidate, or not at all).
    pub target_flagged: usize,
    /// Issues whose first two candidates had the same score, so that the detector's order by
    /// name chose its first.
    pub tied_at_top: usize,
    /// The reference's top-1 for this setting family and metric ([`REFERENCE`]).
    pub paper_top1: Option<f64>,
    /// The reference's top-3.
    pub paper_top3: Option<f64>,
}

/// Tallies of one row while issues are scored.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    issues: usize,
    hits1: usize,
    hits3: usize,
    flagged: usize,
    tied: usize,
}

/// Scores every issue under `dir/<setting>/{train,test}/issue_*` with the detector
/// ([`rank_issue`]): one row per setting, split and issue metric, then one per setting family
/// and metric over every split present ("all"), pooled like the reference. Errors name the
/// file (and line and column, for a cell) that could not be read or parsed.
pub fn evaluate(dir: &Path) -> Result<Vec<PetshopRow>, String> {
    let mut rows = Vec::new();
    let mut settings: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|error| format!("{}: {error}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.join("graph.csv").exists())
        .collect();
    settings.sort();
    if settings.is_empty() {
        return Err(format!(
            "{}: no traffic setting (a folder with graph.csv) found; point at the dataset's root",
            dir.display()
        ));
    }
    let reference = |setting: &str, metric: &str| {
        REFERENCE
            .iter()
            .find(|(family_name, m, _, _)| *family_name == family(setting) && *m == metric)
            .map(|(_, _, top1, top3)| (*top1, *top3))
    };
    // (family, metric) → tallies over every split.
    let mut pooled: BTreeMap<(String, String), Tally> = BTreeMap::new();
    for setting in settings {
        let name = setting
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let graph = read_graph(&setting.join("graph.csv"))?;
        if graph.is_empty() {
            return Err(format!(
                "{}: no edges (a 1.0 in row A, column B means A calls B)",
                setting.join("graph.csv").display()
            ));
        }
        let noissue = setting.join("noissue/metrics.csv");
        let baseline = if noissue.exists() {
            Some(read_table(&noissue)?)
        } else {
            None
        };
        for split in ["train", "test"] {
            // Issue folders only: a stray file (`.DS_Store`) or hidden entry is not an issue.
            let mut issues: Vec<PathBuf> = match std::fs::read_dir(setting.join(split)) {
                Ok(entries) => entries
                    .filter_map(|entry| entry.ok().map(|entry| entry.path()))
                    .filter(|path| {
                        path.is_dir()
                            && !path
                                .file_name()
                                .is_some_and(|name| name.to_string_lossy().starts_with('.'))
                    })
                    .collect(),
                Err(_) => continue,
            };
            issues.sort();
            let mut by_metric: BTreeMap<String, Tally> = BTreeMap::new();
            for issue in issues {
                let target_path = issue.join("target.json");
                let text = std::fs::read_to_string(&target_path)
                    .map_err(|error| format!("{}: {error}", target_path.display()))?;
                let target: TargetFile =
                    serde_json::from_str(&text).map_err(|error| format!("{}: {error}", target_path.display()))?;
                let table = read_table(&issue.join("metrics.csv"))?;
                check_target(&target, &table, &graph)
                    .map_err(|problem| format!("{}: {problem}", target_path.display()))?;
                let ranked = rank_issue(&table, baseline.as_ref(), &graph, &target.target);
                let truth = &target.root_cause.node;
                let names: Vec<&str> = ranked.candidates.iter().map(|c| c.instance.as_str()).collect();
                let tied = matches!(ranked.candidates.as_slice(), [first, second, ..] if first.score == second.score);
                for tally in [
                    by_metric.entry(target.target.metric.clone()).or_default(),
                    pooled
                        .entry((family(&name).to_string(), target.target.metric.clone()))
                        .or_default(),
                ] {
                    tally.issues += 1;
                    tally.hits1 += usize::from(names.first() == Some(&truth.as_str()));
                    tally.hits3 += usize::from(names.iter().take(3).any(|name| name == truth));
                    tally.flagged += usize::from(ranked.target_flagged);
                    tally.tied += usize::from(tied);
                }
            }
            for (metric, tally) in by_metric {
                let known = reference(&name, &metric);
                rows.push(row(&name, split, metric, tally, known));
            }
        }
    }
    for ((family_name, metric), tally) in pooled {
        let known = reference(&family_name, &metric);
        rows.push(row(&family_name, "all", metric, tally, known));
    }
    Ok(rows)
}

fn row(setting: &str, split: &str, metric: String, tally: Tally, reference: Option<(f64, f64)>) -> PetshopRow {
    PetshopRow {
        setting: setting.to_string(),
        split: split.to_string(),
        metric,
        issues: tally.issues,
        top1: tally.hits1 as f64 / tally.issues as f64,
        top3: tally.hits3 as f64 / tally.issues as f64,
        target_flagged: tally.flagged,
        tied_at_top: tally.tied,
        paper_top1: reference.map(|(top1, _)| top1),
        paper_top3: reference.map(|(_, top3)| top3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(component: &str, metric: &str, statistic: &str, values: &[f64]) -> Column {
        Column {
            component: component.to_string(),
            metric: metric.to_string(),
            statistic: statistic.to_string(),
            values: values.iter().map(|v| Some(*v)).collect(),
        }
    }

    #[test]
    fn availability_becomes_failed_requests_per_second() {
        let table = Table {
            times: vec![0.0, 300.0],
            columns: vec![
                column("api", "availability", "Average", &[100.0, 97.5]),
                column("api", "requests", "Sum", &[600.0, 600.0]),
                column("api", "latency", "p99", &[9.0, 9.0]),
            ],
        };
        let found = components(&table, "Average");
        assert_eq!(found.len(), 1);
        let (name, columns) = &found[0];
        assert_eq!(name, "api");
        // p99 is not the issue's statistic: no latency sample.
        assert_eq!(columns.latency, None);
        let at = |row| {
            samples_at(&table, *columns, row, 300.0)
                .into_iter()
                .map(|(family, _, value)| (family, value))
                .collect::<Vec<_>>()
        };
        // 2.5 % of 600 requests failed in the second step: 15 over 300 s.
        assert_eq!(at(0), [(REQUESTS, 2.0), (FAILED, 0.0)]);
        assert_eq!(at(1), [(REQUESTS, 2.0), (FAILED, 0.05)]);
        // The adapter's rules parse, and one failed request a step is the errors' floor.
        let rules = rules(300.0);
        assert_eq!(rules.len(), 3);
        assert_eq!(rules[1].spec.class, Class::Errors);
        assert!((rules[1].spec.floor - 1.0 / 300.0).abs() < 1e-12);
    }

    /// `value` with a little deterministic noise (±4 % in five levels) at step `k`.
    fn noisy(value: f64, k: usize) -> f64 {
        value * (1.0 + 0.02 * (((k * 7) % 5) as f64 - 2.0))
    }

    /// site → search → table, 300 requests a step each and no failures; latencies (seconds)
    /// per step from `latency(component, step)`.
    fn chain_table(times: Vec<f64>, latency: impl Fn(&str, usize) -> f64) -> Table {
        let mut columns = Vec::new();
        for name in ["site", "search", "table"] {
            let values: Vec<f64> = (0..times.len()).map(|k| latency(name, k)).collect();
            columns.push(column(name, "latency", "Average", &values));
            columns.push(column(name, "requests", "Sum", &vec![300.0; times.len()]));
            columns.push(column(name, "availability", "Average", &vec![100.0; times.len()]));
        }
        Table { times, columns }
    }

    fn usual(name: &str) -> f64 {
        match name {
            "site" => 0.100,
            "search" => 0.050,
            _ => 0.010,
        }
    }

    fn chain_graph() -> BTreeMap<String, BTreeSet<String>> {
        [("site", "search"), ("search", "table")]
            .into_iter()
            .map(|(caller, callee)| (caller.to_string(), BTreeSet::from([callee.to_string()])))
            .collect()
    }

    /// A fault-free period of 30 steps, recorded (as in the dataset) long after the issue.
    fn chain_noissue() -> Table {
        let times = (0..30).map(|k| 50_000_000.0 + 300.0 * k as f64).collect();
        chain_table(times, |name, k| noisy(usual(name), k))
    }

    /// Six steps from 1,000,000 s; the issue is seen at 1,000,610 s, so steps 2–5 are the
    /// issue's.
    fn chain_target() -> TargetSpec {
        TargetSpec {
            node: "site".to_string(),
            metric: "latency".to_string(),
            agg: average(),
            timestamp: 1_000_610.0,
        }
    }

    fn ranking(ranked: &Ranked) -> Vec<&str> {
        ranked.candidates.iter().map(|c| c.instance.as_str()).collect()
    }

    /// The slowed callee at the end of a chain: the table's latency rises 40 ms from step 2, its
    /// caller's 45 ms and the site's 55 ms (each adds its own wait). The detector's baselines
    /// scale with the usual latency (at least 10 % of the median), so the same added time is a
    /// stronger anomaly where calls are usually quick: table (40 scales), search (9), site (5.5,
    /// flagged: the target is seen). The detector ranks the callee first, then its caller.
    #[test]
    fn the_detector_ranks_the_slowed_callee_of_a_chain_first() {
        let times: Vec<f64> = (0..6).map(|k| 1_000_000.0 + 300.0 * k as f64).collect();
        let issue = chain_table(times, |name, k| {
            let added = match name {
                "site" => 0.055,
                "search" => 0.045,
                _ => 0.040,
            };
            noisy(usual(name), k + 30) + if k >= 2 { added } else { 0.0 }
        });
        let ranked = rank_issue(&issue, Some(&chain_noissue()), &chain_graph(), &chain_target());
        assert!(ranked.target_flagged, "{ranked:?}");
        assert_eq!(ranking(&ranked), ["table", "search", "site"], "{ranked:?}");
        // Every component in the one synthetic datacenter, on a host of its own.
        assert!(ranked
            .candidates
            .iter()
            .all(|c| c.dc == DATACENTER && c.host == c.instance));
    }

    /// The fault-free period is what the baselines learn: an issue file whose every step is
    /// already slow shows nothing against its own first steps, and the slow table against the
    /// `noissue/` period (fed first, its clock moved to end just before the issue file).
    #[test]
    fn the_noissue_period_feeds_the_baselines() {
        let times: Vec<f64> = (0..6).map(|k| 1_000_000.0 + 300.0 * k as f64).collect();
        let issue = chain_table(times, |name, k| {
            noisy(usual(name), k + 30) + if name == "table" { 0.040 } else { 0.0 }
        });
        let alone = rank_issue(&issue, None, &chain_graph(), &chain_target());
        assert_eq!(
            alone,
            Ranked {
                candidates: Vec::new(),
                target_flagged: false
            }
        );
        let with_normal = rank_issue(&issue, Some(&chain_noissue()), &chain_graph(), &chain_target());
        // The site's latency did not move: not flagged, so the first issue step's candidates.
        assert!(!with_normal.target_flagged);
        assert_eq!(ranking(&with_normal), ["table"], "{with_normal:?}");
    }

    #[test]
    fn temporal_settings_pool_into_one_family() {
        assert_eq!(family("temporal_traffic2"), "temporal_traffic");
        assert_eq!(family("low_traffic"), "low_traffic");
    }

    /// A one-issue dataset in a temp folder: site calls db; the issue file's cells as given.
    fn tiny_dataset(name: &str, cell: &str, target: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("epicenter-petshop-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let issue = root.join("low_traffic/train/issue_0");
        std::fs::create_dir_all(&issue).unwrap();
        std::fs::write(
            root.join("low_traffic/graph.csv"),
            ",site,db\nsite,0.0,1.0\ndb,0.0,0.0\n",
        )
        .unwrap();
        std::fs::write(
            issue.join("metrics.csv"),
            format!(
                "microservice,site,db\nmetric,latency,latency\nstatistic,Average,Average\nunix_timestamp,,\n0,0.1,0.01\n300,0.1,0.01\n600,0.17,{cell}\n"
            ),
        )
        .unwrap();
        std::fs::write(issue.join("target.json"), target).unwrap();
        // A stray file beside the issue folders is not an issue.
        std::fs::write(root.join("low_traffic/train/.DS_Store"), "").unwrap();
        root
    }

    const TARGET: &str = r#"{"target": {"node": "site", "metric": "latency", "agg": "Average", "timestamp": 600}, "root_cause": {"node": "db"}}"#;

    /// Without a `noissue/` period the steps before the issue are the baseline (a gauge's
    /// first reading is a value; `min_history` 1): the third step (the issue's) is judged
    /// against the first two, db 400 scales up, site 7.
    #[test]
    fn a_well_formed_issue_is_scored_and_bad_input_is_named() {
        let good = tiny_dataset("good", "0.41", TARGET);
        let rows = evaluate(&good).unwrap_or_else(|error| panic!("{error}"));
        let train = rows.iter().find(|row| row.split == "train").unwrap();
        assert_eq!(
            (train.issues, train.top1, train.target_flagged, train.tied_at_top),
            (1, 1.0, 1, 0)
        );

        let garbage = tiny_dataset("garbage", "n/a", TARGET);
        let error = evaluate(&garbage).unwrap_err();
        assert!(
            error.ends_with("metrics.csv:7:3: 'n/a' is not a number (column db latency Average)"),
            "{error}"
        );

        let unknown = tiny_dataset(
            "unknown",
            "0.41",
            &TARGET.replace(r#""node": "db""#, r#""node": "cache""#),
        );
        let error = evaluate(&unknown).unwrap_err();
        assert!(
            error.contains("target.json: root_cause.node 'cache' is in neither"),
            "{error}"
        );

        let metric = tiny_dataset("metric", "0.41", &TARGET.replace("\"latency\"", "\"Latency\""));
        let error = evaluate(&metric).unwrap_err();
        assert!(
            error.contains("target.metric 'Latency': expected latency or availability"),
            "{error}"
        );

        let backwards = tiny_dataset("backwards", "0.41", TARGET);
        let path = backwards.join("low_traffic/train/issue_0/metrics.csv");
        let text = std::fs::read_to_string(&path).unwrap().replace("\n600,", "\n300,");
        std::fs::write(&path, text).unwrap();
        let error = evaluate(&backwards).unwrap_err();
        assert!(
            error.ends_with("metrics.csv:7:1: timestamp 300 does not come after the previous row's (300)"),
            "{error}"
        );

        for root in [good, garbage, unknown, metric, backwards] {
            let _ = std::fs::remove_dir_all(root);
        }
    }
}
