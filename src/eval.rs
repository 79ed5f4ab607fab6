//! `epicenter eval`: scores the detector on scenarios (headless, faster than real time) or on a
//! dataset, and prints the table or JSON. The scoring is `epicenter_eval`'s.

use std::process::ExitCode;

use clap::Args;
use epicenter_detector::rules;
use epicenter_eval::scenarios::{evaluate, summarize, ScenarioResult, Summary};
use epicenter_fleet::scenario::{Scenario, SHIPPED};

use crate::config::EXIT_CONFIG;

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
        let mut trace = |line: String| eprintln!("{line}");
        let trace: Option<&mut dyn FnMut(String)> = if args.trace { Some(&mut trace) } else { None };
        results.push(evaluate(&scenario, parsed_rules.clone(), trace));
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

fn print_table(results: &[ScenarioResult], summary: &Summary) {
    println!(
        "{:<24} {:<34} {:<44} {:>5} {:>5} {:>5} {:>5} {:>5} {:>6} {:>5} | {:>11} {:>11}",
        "scenario",
        "ground truth",
        "incident (kind dc: hosts)",
        "h@1",
        "h@3",
        "havg5",
        "dc@1",
        "kind",
        "TTD",
        "false",
        "robust-z h@1/3",
        "pagerank h@1/3"
    );
    for result in results {
        if result.incidents.is_empty() {
            println!(
                "{:<24} {:<34} {:<44} {:>5} {:>5} {:>5} {:>5} {:>5} {:>6} {:>5} |",
                result.scenario, "none", "-", "", "", "", "", "", "", result.false_verdicts
            );
        }
        // One line per fault; the scenario's false verdicts on its first.
        for (row, incident) in result.incidents.iter().enumerate() {
            let truth = result.truth.get(incident.truth).map_or("none".to_string(), |t| {
                format!("{} {}: {}", t.kind, t.dcs.join(","), t.hosts.join(","))
            });
            let verdict = incident.verdict.as_ref().map_or("none".to_string(), |v| {
                format!("{} {}: {}", v.kind, v.dcs.join(","), v.hosts.join(","))
            });
            let ttd = incident
                .intervals_to_detect
                .map_or("-".to_string(), |v| format!("{v:.1}"));
            let s = &incident.epicenter;
            let false_verdicts = if row == 0 {
                result.false_verdicts.to_string()
            } else {
                String::new()
            };
            println!(
                "{:<24} {:<34} {:<44} {:>5.2} {:>5.2} {:>5.2} {:>5.2} {:>5} {:>6} {:>5} | {:>5.2}/{:<5.2} {:>5.2}/{:<5.2}",
                if row == 0 { result.scenario.as_str() } else { "" },
                truncate(&truth, 34),
                truncate(&verdict, 44),
                s.host_ac1,
                s.host_ac3,
                s.host_avg5,
                s.dc_ac1,
                if incident.kind_right { "ok" } else { "wrong" },
                ttd,
                false_verdicts,
                incident.robust_z.host_ac1,
                incident.robust_z.host_ac3,
                incident.pagerank.host_ac1,
                incident.pagerank.host_ac3,
            );
        }
    }
    if summary.faults == 0 {
        println!(
            "\nno scenario with faults: false verdicts {} ({:.2} per simulated day)",
            summary.false_verdicts, summary.false_verdicts_per_day
        );
        return;
    }
    let s = &summary.epicenter;
    println!(
        "\noverall ({} faults in {} scenarios, each fault scored on its own incident): epicenter host AC@1 {:.2}, AC@3 {:.2}, Avg@5 {:.2}, dc AC@1 {:.2}; kind right {:.2}; datacenters exactly right {:.2}; time to detect median {}, slowest {} scrape intervals; false verdicts {} ({:.2} per simulated day)",
        summary.faults,
        summary.scenarios_with_faults,
        s.host_ac1,
        s.host_ac3,
        s.host_avg5,
        s.dc_ac1,
        summary.kind_accuracy,
        summary.dc_set_accuracy,
        summary.median_intervals_to_detect.map_or("-".to_string(), |v| format!("{v:.1}")),
        summary.max_intervals_to_detect.map_or("-".to_string(), |v| format!("{v:.1}")),
        summary.false_verdicts,
        summary.false_verdicts_per_day,
    );
    let calibration = &summary.calibration;
    if let Some(brier) = calibration.brier {
        println!(
            "  confidence over {} incidents: Brier score {brier:.3}; reliability (confidence bin: incidents, mean confidence, share right): {}",
            calibration.verdicts,
            calibration
                .bins
                .iter()
                .map(|bin| format!(
                    "{:.1}-{:.1}: {}, {:.2}, {:.2}",
                    bin.from, bin.to, bin.verdicts, bin.mean_confidence, bin.observed
                ))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
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
    let rows = match epicenter_eval::petshop::evaluate(std::path::Path::new(dir)) {
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
