//! The PetShop dataset adapter (`epicenter eval --dataset petshop DIR`): the PetShop root-cause dataset (Amazon Science,
//! CC-BY-4.0; arXiv 2311.04806) scored the way its paper does: top-1 and top-3 recall of the
//! root-cause component, per traffic setting and per metric of the issue, beside the reference
//! figures the dataset's repository publishes ([`REFERENCE`]).
//!
//! The method is the detector's, adapted to 5-minute steps without scrapes (see [`rank`]): the
//! issue's own statistic is scored per component against a robust baseline (the fault-free
//! `noissue/` period, else the steps before the issue), latency in seconds and availability as
//! failed requests; candidates are the issue's target and everything it calls (`graph.csv`, row
//! calls column); faults spread to callers, so a walk from the target moves to a callee that
//! is anomalous and accounts for at least half of what its caller shows, in seconds × requests
//! or in failed requests. Nothing here is fitted to the dataset's issues: the constants are
//! round numbers argued from the data's units (docs/detector.md says which run chose what).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use epicenter_detector::signal::median_in_place;
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

/// A robust baseline of one series: its median and a scale (1.4826 × MAD, the normal-consistent
/// MAD), floored so that a flat baseline does not turn noise into an anomaly.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Baseline {
    center: f64,
    scale: f64,
}

impl Baseline {
    /// `values` in the series' unit; `None` when there is none. The floor is the larger of the
    /// series' own floor (see [`Quantity::floor`]) and 1.4826 × MAD.
    fn of(values: &[f64], quantity: Quantity) -> Option<Baseline> {
        if values.is_empty() {
            return None;
        }
        let mut sorted = values.to_vec();
        let center = median_in_place(&mut sorted);
        let mut deviations: Vec<f64> = values.iter().map(|v| (v - center).abs()).collect();
        let mad = median_in_place(&mut deviations);
        Some(Baseline {
            center,
            scale: (1.4826 * mad).max(quantity.floor(center)).max(1e-9),
        })
    }
}

/// What the score of an issue measures, in the direction that is bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quantity {
    /// Mean latency in seconds; up is bad. Floor: 5 % of the baseline, so a change smaller than
    /// that never counts however quiet the series was.
    Latency,
    /// Failed requests per step: (100 − availability %) / 100 × requests; up is bad. Floor:
    /// the Poisson noise of the baseline count, √median + 1, so 3 errors where none are usual
    /// score 3 and a busy service's usual handful scores little.
    Errors,
}

impl Quantity {
    fn floor(self, center: f64) -> f64 {
        match self {
            Quantity::Latency => 0.05 * center.abs(),
            Quantity::Errors => center.max(0.0).sqrt() + 1.0,
        }
    }
}

/// Whether `node` is a caller's record of a call rather than a component: X-Ray names the
/// subsegment a caller writes for a downstream it cannot see into (a load balancer, an
/// uninstrumented endpoint) `<host>_remote`. Its latency and errors are the callee's as the
/// caller saw them, so it explains nothing the component behind it does not; it is ranked after
/// the components and a walk does not stop on it.
fn is_call_record(node: &str) -> bool {
    node.ends_with("_remote")
}

/// A callee is anomalous enough to carry the walk at this many scales above its baseline.
const WALK_SCORE: f64 = 3.0;
/// ... and explains what was seen at its caller when its excess is at least this share of the
/// caller's.
const WALK_SHARE: f64 = 0.5;

/// One series of one component, per step, in the issue's [`Quantity`]: latency as given, or
/// failed requests from availability % and the `requests`/`Sum` column of the same component.
fn quantity_series(table: &Table, component: &str, quantity: Quantity, statistic: &str) -> Option<Vec<Option<f64>>> {
    let find = |metric: &str, statistic: &str| {
        table
            .columns
            .iter()
            .find(|c| c.component == component && c.metric == metric && c.statistic == statistic)
    };
    match quantity {
        Quantity::Latency => find("latency", statistic).map(|c| c.values.clone()),
        Quantity::Errors => {
            let availability = find("availability", statistic)?;
            let requests = find("requests", "Sum")?;
            Some(
                availability
                    .values
                    .iter()
                    .zip(&requests.values)
                    .map(|(a, n)| Some((100.0 - (*a)?) / 100.0 * (*n)?))
                    .collect(),
            )
        }
    }
}

/// Requests of `component` at step `row` (the `requests`/`Sum` column), 1 when unknown.
fn requests_at(table: &Table, component: &str, row: usize) -> f64 {
    table
        .columns
        .iter()
        .find(|c| c.component == component && c.metric == "requests" && c.statistic == "Sum")
        .and_then(|c| c.values.get(row).copied().flatten())
        .unwrap_or(1.0)
}

/// What one candidate shows at the analysed step.
#[derive(Debug, Clone, Copy, Default)]
struct Evidence {
    /// Scales above its baseline in the bad direction (0 when below it or unknown).
    score: f64,
    /// How much of the symptom it accounts for, in physical units: excess seconds summed over
    /// its requests (latency) or excess failed requests (availability).
    excess: f64,
}

/// The ranking for one issue, best first.
///
/// Method: the target's own statistic (`agg`, Average in the dataset) of the issue's metric is
/// scored per component against a robust baseline: the fault-free `noissue/` period when the
/// setting has one, else the issue file's steps before the issue. A step of `step` seconds
/// belongs to the issue when it ends after the issue's timestamp (CloudWatch labels a step by
/// its start). The analysed step is the issue step where the target scores highest. Faults
/// spread to callers, so a walk starts at the target and moves to a callee that is anomalous
/// ([`WALK_SCORE`]) and explains at least [`WALK_SHARE`] of what its caller shows in physical
/// units (excess seconds × requests, or excess errors); among several it takes the most
/// anomalous, never a call record. The walk's end ranks first, the nodes it passed next, then
/// every other candidate by score.
fn rank(
    issue: &Table,
    baseline: Option<&Table>,
    graph: &BTreeMap<String, BTreeSet<String>>,
    target: &TargetSpec,
) -> Vec<String> {
    // Candidates: the target and everything it calls.
    let mut candidates: BTreeSet<String> = BTreeSet::new();
    let mut queue = VecDeque::from([target.node.clone()]);
    while let Some(node) = queue.pop_front() {
        if candidates.insert(node.clone()) {
            for callee in graph.get(&node).into_iter().flatten() {
                queue.push_back(callee.clone());
            }
        }
    }
    let quantity = if target.metric == "availability" {
        Quantity::Errors
    } else {
        Quantity::Latency
    };
    let step = match issue.times.as_slice() {
        [first, second, ..] if second > first => second - first,
        _ => 300.0,
    };
    let first_issue_step = issue
        .times
        .iter()
        .position(|time| time + step > target.timestamp)
        .unwrap_or(issue.times.len().saturating_sub(1));
    let mut series: BTreeMap<&String, (Vec<Option<f64>>, Option<Baseline>)> = BTreeMap::new();
    for name in &candidates {
        let Some(values) = quantity_series(issue, name, quantity, &target.agg) else {
            continue;
        };
        let reference: Vec<f64> = match baseline.and_then(|table| quantity_series(table, name, quantity, &target.agg)) {
            Some(normal) => normal.into_iter().flatten().collect(),
            None => values[..first_issue_step].iter().flatten().copied().collect(),
        };
        let base = Baseline::of(&reference, quantity);
        series.insert(name, (values, base));
    }
    let evidence_at = |name: &String, row: usize| -> Evidence {
        let Some((values, Some(base))) = series.get(name) else {
            return Evidence::default();
        };
        let Some(value) = values.get(row).copied().flatten() else {
            return Evidence::default();
        };
        let excess = value - base.center;
        Evidence {
            score: (excess / base.scale).max(0.0),
            excess: match quantity {
                Quantity::Latency => excess * requests_at(issue, name, row),
                Quantity::Errors => excess,
            },
        }
    };
    let row = (first_issue_step..issue.times.len())
        .max_by(|a, b| {
            evidence_at(&target.node, *a)
                .score
                .total_cmp(&evidence_at(&target.node, *b).score)
                .then(b.cmp(a))
        })
        .unwrap_or(first_issue_step);
    let evidence: BTreeMap<&String, Evidence> = candidates.iter().map(|name| (name, evidence_at(name, row))).collect();
    let of = |name: &str| evidence.get(&name.to_string()).copied().unwrap_or_default();
    if std::env::var_os("EPICENTER_PETSHOP_TRACE").is_some() {
        let mut sorted: Vec<(&&String, &Evidence)> = evidence.iter().collect();
        sorted.sort_by(|a, b| b.1.score.total_cmp(&a.1.score));
        eprintln!(
            "{} {} step {row}: {:?}",
            target.node,
            target.metric,
            &sorted[..sorted.len().min(6)]
        );
    }
    let mut path = vec![target.node.clone()];
    loop {
        let current = of(path.last().map_or("", String::as_str));
        let best = graph
            .get(path.last().map_or("", String::as_str))
            .into_iter()
            .flatten()
            .filter(|callee| candidates.contains(*callee) && !path.contains(callee) && !is_call_record(callee))
            .filter(|callee| {
                let seen = of(callee);
                seen.score >= WALK_SCORE && seen.excess >= WALK_SHARE * current.excess
            })
            .max_by(|a, b| of(a).score.total_cmp(&of(b).score).then(b.cmp(a)));
        match best {
            Some(callee) => path.push(callee.clone()),
            None => break,
        }
    }
    let mut ranked: Vec<String> = path.iter().rev().cloned().collect();
    let mut rest: Vec<&String> = candidates.iter().filter(|name| !path.contains(name)).collect();
    rest.sort_by(|a, b| {
        is_call_record(a)
            .cmp(&is_call_record(b))
            .then(of(b).score.total_cmp(&of(a).score))
            .then(a.cmp(b))
    });
    ranked.extend(rest.into_iter().cloned());
    ranked
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
    /// Top-1 recall of the root-cause component, 0..1.
    pub top1: f64,
    /// Top-3 recall, 0..1.
    pub top3: f64,
    /// The reference's top-1 for this setting family and metric ([`REFERENCE`]).
    pub paper_top1: Option<f64>,
    /// The reference's top-3.
    pub paper_top3: Option<f64>,
}

/// Scores every issue under `dir/<setting>/{train,test}/issue_*`: one row per setting, split
/// and issue metric, then one per setting family and metric over every split present ("all"),
/// pooled like the reference. Errors name the file that could not be read or parsed.
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
    // (family, metric) → (issues, hits at 1, hits at 3) over every split.
    let mut pooled: BTreeMap<(String, String), (usize, usize, usize)> = BTreeMap::new();
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
            let mut by_metric: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new();
            for issue in issues {
                let target_path = issue.join("target.json");
                let text = std::fs::read_to_string(&target_path)
                    .map_err(|error| format!("{}: {error}", target_path.display()))?;
                let target: TargetFile =
                    serde_json::from_str(&text).map_err(|error| format!("{}: {error}", target_path.display()))?;
                let table = read_table(&issue.join("metrics.csv"))?;
                check_target(&target, &table, &graph)
                    .map_err(|problem| format!("{}: {problem}", target_path.display()))?;
                let ranking = rank(&table, baseline.as_ref(), &graph, &target.target);
                let truth = &target.root_cause.node;
                let hit1 = usize::from(ranking.first() == Some(truth));
                let hit3 = usize::from(ranking.iter().take(3).any(|name| name == truth));
                for entry in [
                    by_metric.entry(target.target.metric.clone()).or_default(),
                    pooled
                        .entry((family(&name).to_string(), target.target.metric.clone()))
                        .or_default(),
                ] {
                    entry.0 += 1;
                    entry.1 += hit1;
                    entry.2 += hit3;
                }
            }
            for (metric, counts) in by_metric {
                let known = reference(&name, &metric);
                rows.push(row(&name, split, metric, counts, known));
            }
        }
    }
    for ((family_name, metric), counts) in pooled {
        let known = reference(&family_name, &metric);
        rows.push(row(&family_name, "all", metric, counts, known));
    }
    Ok(rows)
}

fn row(
    setting: &str,
    split: &str,
    metric: String,
    (issues, hits1, hits3): (usize, usize, usize),
    reference: Option<(f64, f64)>,
) -> PetshopRow {
    PetshopRow {
        setting: setting.to_string(),
        split: split.to_string(),
        metric,
        issues,
        top1: hits1 as f64 / issues as f64,
        top3: hits3 as f64 / issues as f64,
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
    fn baselines_are_robust_and_floored() {
        // Median 1.0, MAD 0.05 → 1.4826 × 0.05 = 0.07413 beats the 5 % floor (0.05).
        let base = Baseline::of(&[1.0, 1.1, 0.9, 1.0, 1.05, 0.95], Quantity::Latency).unwrap();
        assert_eq!(base.center, 1.0);
        assert!((base.scale - 0.07413).abs() < 1e-9, "{base:?}");
        // A flat latency: 5 % of it.
        let flat = Baseline::of(&[0.2, 0.2, 0.2], Quantity::Latency).unwrap();
        assert!((flat.scale - 0.01).abs() < 1e-12, "{flat:?}");
        // No usual errors: Poisson floor √0 + 1 = 1; a usual 16: √16 + 1 = 5.
        assert_eq!(Baseline::of(&[0.0, 0.0, 0.0], Quantity::Errors).unwrap().scale, 1.0);
        assert_eq!(Baseline::of(&[16.0, 16.0, 16.0], Quantity::Errors).unwrap().scale, 5.0);
        assert_eq!(Baseline::of(&[], Quantity::Errors), None);
    }

    #[test]
    fn availability_becomes_failed_requests() {
        let table = Table {
            times: vec![0.0, 300.0],
            columns: vec![
                column("api", "availability", "Average", &[100.0, 97.5]),
                column("api", "requests", "Sum", &[400.0, 400.0]),
            ],
        };
        let errors = quantity_series(&table, "api", Quantity::Errors, "Average").unwrap();
        assert_eq!(errors, vec![Some(0.0), Some(10.0)]);
        assert!(quantity_series(&table, "db", Quantity::Errors, "Average").is_none());
    }

    /// site → {search, list}; search → table. Site's latency rises 0.3 s on 100 requests (30 s of
    /// excess), search's 0.21 s (21 s, score 0.21 / (5 % of 0.05) = 84), the table's 0.2 s (20 s):
    /// the table explains search and search explains site, so the walk goes site → search →
    /// table. `list` scores higher than search (0.001 / (5 % of 0.0001) = 200) but accounts for
    /// 0.1 s of site's 30, so the walk passes it by.
    #[test]
    fn the_walk_follows_the_callee_that_explains_the_caller() {
        let times = vec![0.0, 300.0, 600.0];
        let issue = Table {
            times: times.clone(),
            columns: vec![
                column("site", "latency", "Average", &[0.10, 0.10, 0.40]),
                column("site", "requests", "Sum", &[100.0, 100.0, 100.0]),
                column("search", "latency", "Average", &[0.05, 0.05, 0.26]),
                column("search", "requests", "Sum", &[100.0, 100.0, 100.0]),
                column("table", "latency", "Average", &[0.01, 0.01, 0.21]),
                column("table", "requests", "Sum", &[100.0, 100.0, 100.0]),
                column("list", "latency", "Average", &[0.0001, 0.0001, 0.0011]),
                column("list", "requests", "Sum", &[100.0, 100.0, 100.0]),
            ],
        };
        let graph: BTreeMap<String, BTreeSet<String>> = [("site", vec!["search", "list"]), ("search", vec!["table"])]
            .into_iter()
            .map(|(caller, callees)| (caller.to_string(), callees.into_iter().map(String::from).collect()))
            .collect();
        let target = TargetSpec {
            node: "site".to_string(),
            metric: "latency".to_string(),
            agg: average(),
            timestamp: 600.0,
        };
        // No noissue table: the two steps before the issue are the baseline.
        let ranking = rank(&issue, None, &graph, &target);
        assert_eq!(ranking[..3], ["table", "search", "site"]);
        // If the table's rise were too small to explain search's (5 s of 21 s), the walk stops
        // at search.
        let mut weaker = issue.clone();
        weaker.columns[4] = column("table", "latency", "Average", &[0.01, 0.01, 0.06]);
        assert_eq!(rank(&weaker, None, &graph, &target)[0], "search");
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
                "microservice,site,db\nmetric,latency,latency\nstatistic,Average,Average\nunix_timestamp,,\n0,0.1,0.01\n300,0.1,0.01\n600,0.5,{cell}\n"
            ),
        )
        .unwrap();
        std::fs::write(issue.join("target.json"), target).unwrap();
        // A stray file beside the issue folders is not an issue.
        std::fs::write(root.join("low_traffic/train/.DS_Store"), "").unwrap();
        root
    }

    const TARGET: &str = r#"{"target": {"node": "site", "metric": "latency", "agg": "Average", "timestamp": 600}, "root_cause": {"node": "db"}}"#;

    #[test]
    fn a_well_formed_issue_is_scored_and_bad_input_is_named() {
        let good = tiny_dataset("good", "0.41", TARGET);
        let rows = evaluate(&good).unwrap_or_else(|error| panic!("{error}"));
        let train = rows.iter().find(|row| row.split == "train").unwrap();
        assert_eq!((train.issues, train.top1), (1, 1.0));

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

        for root in [good, garbage, unknown, metric] {
            let _ = std::fs::remove_dir_all(root);
        }
    }
}
