//! `epicenter eval`: scores the detector on scenarios (headless, faster than real time) or on a
//! dataset, and prints the table or JSON. The scoring is `epicenter_eval`'s.

use std::process::ExitCode;

use clap::Args;
use epicenter_detector::rules;
use epicenter_eval::scenarios::{evaluate, summarize};
use epicenter_fleet::scenario::{Scenario, SHIPPED};

use crate::config::EXIT_CONFIG;

/// Arguments of `epicenter eval`.
#[derive(Args, Debug)]
pub(crate) struct EvalArgs {
    /// Scenarios: shipped names or files (docs/scenarios.md); all shipped ones when absent.
    #[arg(value_name = "SCENARIO")]
    scenarios: Vec<String>,

    /// Evaluate on a dataset instead of scenarios, the one argument its folder: `petshop` (the
    /// PetShop root-cause dataset: high_traffic/, low_traffic/, …); `sockshop` (Sock Shop
    /// container chaos, the dataset's sock-shop/ folder) or `nezha` (its nezha/ folder),
    /// replayed from --prometheus (docs/detector.md, "Real incidents").
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

    /// Also score N random scenarios (seeds SEED … SEED+N−1): 3–4 datacenters, one fault or
    /// two overlapping ones of every kind but host_memory_pressure and host_packet_loss, mild
    /// to severe (fleet/src/random.rs). With --random and no SCENARIO, only those are scored.
    #[arg(long, value_name = "N")]
    random: Option<u64>,

    /// First seed of --random. Seeds below 1000000 are the calibration corpus the detector's
    /// confidence was fitted on; the default, 1000000, starts where nothing was fitted.
    #[arg(long, value_name = "SEED", default_value_t = 1_000_000, requires = "random")]
    seed: u64,

    /// Run each scenario on the live path instead of headless, as `epicenter demo` does (the
    /// fleet served on 127.0.0.1, scraped, judged by the live detector, stored in a temporary
    /// embedded store) at the scenario's own speed, with N threads spinning beside it (0:
    /// none; at most 256), and score it the same way. Takes each scenario's wall time: a
    /// shipped fault scenario 30–36 s, `healthy` about 4 minutes, a random one about a minute.
    /// N above the machine's cores starves epicenter on purpose (4 on 2 cores is the issue's
    /// test). Ctrl-C stops the run and reports what was judged, exit status 130. The shipped
    /// signal rules only; no --trace.
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u16).range(0..=256),
        conflicts_with_all = ["rules", "trace", "dataset"]
    )]
    load: Option<u16>,

    /// Fit the confidence model (detector.confidence: a logistic model of being right over
    /// the leader's share and score) on the incidents of this run and print its coefficients
    /// and its reliability on them, after the usual report. Fit on calibration seeds
    /// (--random N --seed 0), check on others.
    #[arg(long)]
    calibrate: bool,

    /// Real incidents: --cases, --system, --prometheus, --prometheus-config, --config.
    #[command(flatten)]
    pub(crate) real: crate::eval_dataset::RealArgs,
}

/// Runs `epicenter eval`.
pub(crate) fn run(args: &EvalArgs) -> ExitCode {
    if args.dataset.is_some() || args.real.cases.is_some() {
        return crate::eval_dataset::run(&crate::eval_dataset::EvalArgs {
            dataset: args.dataset.as_deref(),
            scenarios: &args.scenarios,
            json: args.json,
            trace: args.trace,
            rules: args.rules.as_ref(),
            real: &args.real,
        });
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
    let names: Vec<String> = if args.scenarios.is_empty() && args.random.is_some() {
        Vec::new()
    } else if args.scenarios.is_empty() {
        SHIPPED.iter().map(|(name, _)| name.to_string()).collect()
    } else {
        args.scenarios.clone()
    };
    let mut scenarios = Vec::new();
    for name in &names {
        match Scenario::load(name) {
            Ok(scenario) => scenarios.push(scenario),
            Err(error) => {
                eprintln!("error: scenario {error}");
                return ExitCode::from(EXIT_CONFIG);
            }
        }
    }
    let named = scenarios.len();
    for seed in args.seed..args.seed.saturating_add(args.random.unwrap_or(0)) {
        match epicenter_fleet::random::scenario(seed) {
            Ok(scenario) => scenarios.push(scenario),
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::from(EXIT_CONFIG);
            }
        }
    }
    let mut interrupted = None;
    let results = if let Some(load) = args.load {
        match crate::eval_live::evaluate(&scenarios, usize::from(load), args.json) {
            Ok(run) => {
                interrupted = run.interrupted;
                run.results
            }
            Err(code) => return code,
        }
    } else {
        let mut results = Vec::new();
        for (index, scenario) in scenarios.iter().enumerate() {
            if !args.json && index < named {
                eprintln!("eval: {} ({} simulated)…", scenario.name, scenario.duration);
            } else if !args.json && (index - named) % 25 == 0 {
                eprintln!(
                    "eval: random scenarios {}… ({} of {})",
                    args.seed + (index - named) as u64,
                    index - named,
                    args.random.unwrap_or(0)
                );
            }
            let mut trace = |line: String| eprintln!("{line}");
            let trace: Option<&mut dyn FnMut(String)> = if args.trace { Some(&mut trace) } else { None };
            results.push(evaluate(scenario, parsed_rules.clone(), trace));
        }
        results
    };
    let summary = summarize(&results);
    let fitted = if args.calibrate {
        let points: Vec<_> = results
            .iter()
            .flat_map(|r| r.calibration_points.iter().cloned())
            .collect();
        match epicenter_eval::scenarios::fit_confidence(&points) {
            Ok(model) => {
                let fitted: Vec<(f64, bool)> = points
                    .iter()
                    .map(|point| (model.probability(point.share, point.score, &point.kind), point.right))
                    .collect();
                Some((model, epicenter_eval::scenarios::calibration(&fitted)))
            }
            Err(error) => {
                eprintln!("error: --calibrate: {error}");
                return ExitCode::from(EXIT_CONFIG);
            }
        }
    } else {
        None
    };
    if args.json {
        let mut document = serde_json::json!({"scenarios": results, "overall": summary});
        // Which path judged: the headless driver, or the live pipeline beside N busy threads.
        document["path"] = match args.load {
            Some(load) => serde_json::json!({"live": true, "busy_threads": load}),
            None => serde_json::json!({"live": false}),
        };
        if let Some(interrupted) = &interrupted {
            document["interrupted"] = serde_json::json!(interrupted);
        }
        if let Some((model, calibration)) = &fitted {
            document["fitted_confidence"] = serde_json::json!({
                "intercept": model.intercept,
                "share": model.share,
                "log_score": model.log_score,
                "unknown": model.unknown,
                "calibration": calibration,
            });
        }
        println!("{}", serde_json::to_string_pretty(&document).unwrap_or_default());
    } else {
        print!("{}", epicenter_eval::report::table(&results, &summary));
        if let Some(load) = args.load {
            println!(
                "  judged on the live path (fleet served on 127.0.0.1, collector, live detector, store) beside {load} busy thread{}",
                if load == 1 { "" } else { "s" }
            );
        }
        if let Some((model, calibration)) = &fitted {
            println!(
                "\nfitted confidence model: intercept {:.4}, share {:.4}, log_score {:.4}, unknown {:.4}; on these incidents Brier {:.3}, reliability: {}",
                model.intercept,
                model.share,
                model.log_score,
                model.unknown,
                calibration.brier.unwrap_or(f64::NAN),
                calibration
                    .bins
                    .iter()
                    .map(|bin| format!("{:.1}-{:.1}: {}, {:.2}, {:.2}", bin.from, bin.to, bin.verdicts, bin.mean_confidence, bin.observed))
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
    }
    if let Some(interrupted) = interrupted {
        // As a shell reports a command Ctrl-C stopped: 128 + SIGINT.
        eprintln!("eval: {interrupted}");
        return ExitCode::from(130);
    }
    ExitCode::SUCCESS
}
