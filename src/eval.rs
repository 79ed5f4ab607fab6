//! `epicenter eval`: runs scenarios through the detector, headless and faster than real time
//! (every scrape round renders each simulated exporter and parses it, as a scrape would), and
//! scores the verdicts against the ground truth beside two reference rankings.

use std::collections::BTreeMap;
use std::process::ExitCode;

use clap::Args;
use epicenter_collector::exposition::{parse, FormatChoice, ParseOptions, Validation};
use epicenter_detector::engine::{Assessment, Dependency, Detector, InstanceInfo, Settings};
use epicenter_detector::score::{ac_at, avg_at_5, dedup};
use epicenter_detector::{reference, rules};
use epicenter_fleet::scenario::{Scenario, SHIPPED};
use epicenter_fleet::truth::{ground_truth, Truth};
use epicenter_fleet::Fleet;
use serde::Serialize;

use crate::run::EXIT_CONFIG;

/// Arguments of `epicenter eval`.
#[derive(Args, Debug)]
pub(crate) struct EvalArgs {
    /// Scenarios: shipped names or files (docs/scenarios.md); all shipped ones when absent.
    #[arg(value_name = "SCENARIO")]
    scenarios: Vec<String>,

    /// Evaluate on a dataset instead of scenarios: `petshop` (the PetShop root-cause dataset;
    /// the one argument is its folder, holding high_traffic/, low_traffic/, …).
    #[arg(long, value_name = "NAME")]
    dataset: Option<String>,

    /// Print the results as JSON instead of a table.
    #[arg(long)]
    json: bool,

    /// Print every round with anomalies: the leading candidates, the verdict, the anomalies.
    #[arg(long)]
    trace: bool,

    /// Signal rules file instead of the shipped rules/signals/signals.yml.
    #[arg(long, value_name = "FILE")]
    rules: Option<std::path::PathBuf>,
}

/// The services of the simulated fleet and who calls whom.
pub(crate) fn fleet_dependencies() -> Vec<Dependency> {
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
pub(crate) struct Scores {
    pub(crate) host_ac1: f64,
    pub(crate) host_ac3: f64,
    pub(crate) host_avg5: f64,
    pub(crate) dc_ac1: f64,
    pub(crate) dc_ac3: f64,
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
pub(crate) struct VerdictSummary {
    pub(crate) kind: String,
    pub(crate) dc: String,
    /// Hosts, most likely first (at most 3).
    pub(crate) hosts: Vec<String>,
}

/// One scenario's result.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ScenarioResult {
    pub(crate) scenario: String,
    pub(crate) truth: Vec<Truth>,
    /// The first verdict after the onset.
    pub(crate) verdict: Option<VerdictSummary>,
    pub(crate) epicenter: Scores,
    pub(crate) robust_z: Scores,
    pub(crate) pagerank: Scores,
    /// Fault onset → first correct verdict, in scrape intervals.
    pub(crate) intervals_to_detect: Option<f64>,
    /// Verdicts opened that name no faulty host (any verdict in a scenario without faults).
    pub(crate) false_verdicts: usize,
    pub(crate) scrape_interval_seconds: f64,
}

/// Runs one scenario through the detector.
pub(crate) fn evaluate(scenario: &Scenario, rules: Vec<rules::Rule>, trace: bool) -> ScenarioResult {
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
        if trace && !assessment.anomalies.is_empty() {
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
            eprintln!(
                "  +{:>5}s leaders [{}] verdict {} | {}",
                fleet.second(),
                leaders.join(", "),
                assessment.verdict.as_ref().map_or("-".to_string(), |v| format!(
                    "{} {}",
                    v.kind,
                    v.hosts.first().cloned().unwrap_or_default()
                )),
                anomalies.join(" ")
            );
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

/// Runs `epicenter eval`.
pub(crate) fn run(args: &EvalArgs) -> ExitCode {
    if let Some(dataset) = &args.dataset {
        return run_dataset(dataset, args);
    }
    let rules_text = match &args.rules {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) => {
                eprintln!("error: cannot read {}: {error}", path.display());
                return ExitCode::from(EXIT_CONFIG);
            }
        },
        None => rules::SHIPPED.to_string(),
    };
    let parsed_rules = match rules::parse(&rules_text) {
        Ok(rules) => rules,
        Err(error) => {
            eprintln!(
                "error: rules {}: {error}",
                args.rules
                    .as_ref()
                    .map_or("(shipped)".to_string(), |path| path.display().to_string())
            );
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let names: Vec<String> = if args.scenarios.is_empty() {
        SHIPPED.iter().map(|(name, _)| name.to_string()).collect()
    } else {
        args.scenarios.clone()
    };
    let mut results = Vec::new();
    for name in &names {
        let scenario = match Scenario::load(name) {
            Ok(scenario) => scenario,
            Err(error) => {
                eprintln!("error: scenario {error}");
                return ExitCode::from(EXIT_CONFIG);
            }
        };
        if !args.json {
            eprintln!("eval: {} ({} simulated)…", scenario.name, scenario.duration);
        }
        results.push(evaluate(&scenario, parsed_rules.clone(), args.trace));
    }
    let summary = summarize(&results);
    if args.json {
        let document = serde_json::json!({"scenarios": results, "overall": summary});
        println!("{}", serde_json::to_string_pretty(&document).unwrap_or_default());
    } else {
        print_table(&results, &summary);
    }
    ExitCode::SUCCESS
}

/// Means over the scenarios with faults; median time to detect; false verdicts summed.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Summary {
    pub(crate) scenarios_with_faults: usize,
    pub(crate) epicenter: Scores,
    pub(crate) robust_z: Scores,
    pub(crate) pagerank: Scores,
    pub(crate) median_intervals_to_detect: Option<f64>,
    pub(crate) false_verdicts: usize,
}

pub(crate) fn summarize(results: &[ScenarioResult]) -> Summary {
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

fn print_table(results: &[ScenarioResult], summary: &Summary) {
    println!(
        "{:<24} {:<34} {:<44} {:>5} {:>5} {:>5} {:>5} {:>6} {:>5} | {:>11} {:>11}",
        "scenario",
        "ground truth",
        "verdict (kind dc: hosts)",
        "h@1",
        "h@3",
        "havg5",
        "dc@1",
        "TTD",
        "false",
        "robust-z h@1/3",
        "pagerank h@1/3"
    );
    for result in results {
        let truth = result.truth.first().map_or("none".to_string(), |t| {
            format!("{} {}: {}", t.kind, t.dcs.join(","), t.hosts.join(","))
        });
        let verdict = result.verdict.as_ref().map_or("none".to_string(), |v| {
            format!("{} {}: {}", v.kind, v.dc, v.hosts.join(","))
        });
        let ttd = result
            .intervals_to_detect
            .map_or("-".to_string(), |v| format!("{v:.1}"));
        let s = &result.epicenter;
        println!(
            "{:<24} {:<34} {:<44} {:>5.2} {:>5.2} {:>5.2} {:>5.2} {:>6} {:>5} | {:>5.2}/{:<5.2} {:>5.2}/{:<5.2}",
            result.scenario,
            truncate(&truth, 34),
            truncate(&verdict, 44),
            s.host_ac1,
            s.host_ac3,
            s.host_avg5,
            s.dc_ac1,
            ttd,
            result.false_verdicts,
            result.robust_z.host_ac1,
            result.robust_z.host_ac3,
            result.pagerank.host_ac1,
            result.pagerank.host_ac3,
        );
    }
    if summary.scenarios_with_faults == 0 {
        println!("\nno scenario with faults: false verdicts {}", summary.false_verdicts);
        return;
    }
    let s = &summary.epicenter;
    println!(
        "\noverall ({} scenarios with faults): epicenter host AC@1 {:.2}, AC@3 {:.2}, Avg@5 {:.2}, dc AC@1 {:.2}; median time to detect {} scrape intervals; false verdicts {}",
        summary.scenarios_with_faults,
        s.host_ac1,
        s.host_ac3,
        s.host_avg5,
        s.dc_ac1,
        summary.median_intervals_to_detect.map_or("-".to_string(), |v| format!("{v:.1}")),
        summary.false_verdicts
    );
    for (name, scores) in [
        ("robust z-score (BARO/N-Sigma style)", &summary.robust_z),
        ("personalized PageRank (MicroRCA style)", &summary.pagerank),
    ] {
        println!(
            "  reference, {name}: host AC@1 {:.2}, AC@3 {:.2}, Avg@5 {:.2}, dc AC@1 {:.2}",
            scores.host_ac1, scores.host_ac3, scores.host_avg5, scores.dc_ac1
        );
    }
}

fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        text.to_string()
    } else {
        let cut: String = text.chars().take(width - 1).collect();
        format!("{cut}…")
    }
}

fn run_dataset(dataset: &str, args: &EvalArgs) -> ExitCode {
    // Command-line mistakes exit 2, as clap's own do; a dataset that cannot be read, 64.
    const EXIT_USAGE: u8 = 2;
    if dataset != "petshop" {
        eprintln!("error: --dataset {dataset}: the datasets known are: petshop");
        return ExitCode::from(EXIT_USAGE);
    }
    if args.rules.is_some() || args.trace {
        eprintln!(
            "error: --dataset petshop scores the dataset's own metrics: --rules and --trace apply to scenarios only"
        );
        return ExitCode::from(EXIT_USAGE);
    }
    let [dir] = args.scenarios.as_slice() else {
        eprintln!(
            "error: --dataset petshop takes one argument: the dataset's folder (e.g. ../shared/datasets/petshop)"
        );
        return ExitCode::from(EXIT_USAGE);
    };
    let rows = match crate::petshop::evaluate(std::path::Path::new(dir)) {
        Ok(rows) => rows,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    println!("PetShop root-cause dataset (Amazon Science, CC-BY-4.0): recall of the root-cause component");
    println!(
        "{:<20} {:<6} {:<13} {:>6} {:>6} {:>6}   {:>9} {:>9}",
        "setting", "split", "issue metric", "issues", "top-1", "top-3", "ref top-1", "ref top-3"
    );
    let figure = |value: Option<f64>| value.map_or("-".to_string(), |value| format!("{value:.2}"));
    for row in &rows {
        println!(
            "{:<20} {:<6} {:<13} {:>6} {:>6.2} {:>6.2}   {:>9} {:>9}",
            row.setting,
            row.split,
            row.metric,
            row.issues,
            row.top1,
            row.top3,
            figure(row.paper_top1),
            figure(row.paper_top3),
        );
    }
    println!(
        "ref: the dataset paper's anomaly-traversal baseline as its repository's notebook prints it \
         (train and test pooled, temporal settings pooled; arXiv 2311.04806); \
         split `all` pools every split present the same way."
    );
    ExitCode::SUCCESS
}
