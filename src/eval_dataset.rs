//! `epicenter eval --dataset …` and `eval --cases FILE`: datasets with known answers. PetShop
//! is ranked from its own files (`epicenter_eval::petshop`); real incidents (Sock Shop, Nezha,
//! a user's own cases) are replayed from a Prometheus server and scored beside the naive
//! reference (`epicenter_eval::realcases`). Wiring only: the method is `epicenter_eval`'s.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use epicenter_eval::cases::{self, NezhaSystem};
use epicenter_eval::realcases::{self, RunSettings};

use crate::config::EXIT_CONFIG;

/// Command-line mistakes exit 2, as clap's own do; a dataset that cannot be read, 64.
const EXIT_USAGE: u8 = 2;

/// The arguments of `epicenter eval` for real incidents.
#[derive(Args, Debug)]
pub(crate) struct RealArgs {
    /// Score past incidents of your own, replayed from --prometheus: a CSV with a header and
    /// the columns start, end (RFC 3339), service, host (may be empty), instance, fault_type,
    /// kinds (`;`-separated verdict kinds that count as right), optional id
    /// (docs/detector.md, "Real incidents").
    #[arg(long, value_name = "FILE", conflicts_with_all = ["dataset", "load"])]
    pub(crate) cases: Option<PathBuf>,

    /// With --dataset nezha: only OnlineBoutique (`ob`) or TrainTicket (`tt`); both (two sets)
    /// by default.
    #[arg(long, value_name = "ob|tt")]
    pub(crate) system: Option<String>,

    /// The Prometheus server holding the incidents' samples (its HTTP API,
    /// `http://prometheus:9090`); required for sockshop, nezha and --cases.
    #[arg(long, value_name = "URL")]
    pub(crate) prometheus: Option<String>,

    /// YAML with how to reach --prometheus: the HTTP keys of a scrape_config, as for
    /// `replay --prometheus-config`.
    #[arg(long, value_name = "FILE", requires = "prometheus")]
    pub(crate) prometheus_config: Option<PathBuf>,

    /// Configuration whose `placement` places the series and whose `detector` section gives
    /// the service dependencies and the rules (`rules_file`), as `replay` uses them.
    #[arg(long, short, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
}

/// What `epicenter eval` was given, for a dataset or cases (`crate::eval::EvalArgs`'s).
pub(crate) struct EvalArgs<'a> {
    /// `--dataset`.
    pub(crate) dataset: Option<&'a str>,
    /// The positional arguments (a dataset's folder).
    pub(crate) scenarios: &'a [String],
    /// `--json`.
    pub(crate) json: bool,
    /// `--trace`.
    pub(crate) trace: bool,
    /// `--rules`.
    pub(crate) rules: Option<&'a PathBuf>,
    /// The real-incident arguments.
    pub(crate) real: &'a RealArgs,
}

/// Runs `epicenter eval --dataset NAME DIR` or `eval --cases FILE`.
pub(crate) fn run(args: &EvalArgs) -> ExitCode {
    match args.dataset {
        Some("petshop") => petshop(args),
        Some("sockshop" | "nezha") | None => real(args),
        Some(other) => {
            eprintln!("error: --dataset {other}: the datasets known are: petshop, sockshop, nezha");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// Real incidents: the cases loaded, each set replayed from the server and scored.
fn real(args: &EvalArgs) -> ExitCode {
    let real = args.real;
    let dataset = args.dataset;
    let what = dataset.map_or("--cases".to_string(), |name| format!("--dataset {name}"));
    if real.system.is_some() && dataset != Some("nezha") {
        eprintln!("error: --system applies to --dataset nezha only");
        return ExitCode::from(EXIT_USAGE);
    }
    let Some(url) = &real.prometheus else {
        eprintln!("error: {what} replays the incidents from a Prometheus server: give its URL with --prometheus (docs/detector.md, \"Real incidents\")");
        return ExitCode::from(EXIT_USAGE);
    };
    let loaded = match (dataset, args.scenarios, &real.cases) {
        (Some(name), [dir], None) => load_dataset(name, Path::new(dir), real.system.as_deref()),
        (None, [], Some(file)) => cases::from_csv(file),
        (Some(name), _, _) => {
            eprintln!(
                "error: --dataset {name} takes one argument: the dataset's folder (e.g. ../shared/datasets/realdev/{})",
                if name == "nezha" { "nezha" } else { "sock-shop" }
            );
            return ExitCode::from(EXIT_USAGE);
        }
        _ => {
            eprintln!("error: --cases FILE takes no other argument");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let loaded = match loaded {
        Ok(loaded) if loaded.is_empty() => {
            eprintln!("error: {what}: no cases");
            return ExitCode::from(EXIT_CONFIG);
        }
        Ok(loaded) => loaded,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(if error.starts_with("--system") {
                EXIT_USAGE
            } else {
                EXIT_CONFIG
            });
        }
    };
    let config = match crate::open::store_config(real.config.as_ref(), None) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let rules = match args.rules {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))
            .and_then(|text| {
                epicenter_detector::rules::parse(&text).map_err(|error| format!("rules {}: {error}", path.display()))
            }),
        None => config.detector.load_rules(),
    };
    let settings = match rules {
        Ok(rules) => RunSettings {
            rules,
            dependencies: config.detector.dependencies(),
            placement: config.placement.clone(),
        },
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let source = match crate::open::prometheus_source(url, real.prometheus_config.as_ref()) {
        Ok(source) => source,
        Err(code) => return code,
    };
    let runtime = match crate::open::runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let trace: Option<Arc<dyn Fn(String)>> = args
        .trace
        .then(|| Arc::new(|line: String| eprintln!("{line}")) as Arc<dyn Fn(String)>);
    let mut reports = Vec::new();
    for (set, set_cases) in realcases::sets(loaded) {
        eprintln!("eval: {set}: {} cases, replayed from {url}", set_cases.len());
        let mut progress = |line: String| eprintln!("{line}");
        let run = runtime.block_on(realcases::run_set(
            &source,
            &set,
            set_cases,
            &settings,
            &mut progress,
            trace.clone(),
        ));
        match run {
            Ok(run) => reports.push(realcases::score(&run)),
            Err(error) => {
                eprintln!("error: reading {url}: {error}");
                return ExitCode::from(1);
            }
        }
    }
    if args.json {
        let document = serde_json::json!({"source": url, "sets": reports});
        println!("{}", serde_json::to_string_pretty(&document).unwrap_or_default());
    } else {
        print!("{}", realcases::table(&reports, url));
    }
    ExitCode::SUCCESS
}

/// The cases of `--dataset NAME DIR` (`--system` for Nezha).
fn load_dataset(name: &str, dir: &Path, system: Option<&str>) -> Result<Vec<cases::Case>, String> {
    if name == "sockshop" {
        return cases::sockshop(dir);
    }
    let system = system.map(NezhaSystem::parse).transpose()?;
    cases::nezha(dir, system)
}

/// `--dataset petshop DIR`: the PetShop table or JSON.
fn petshop(args: &EvalArgs) -> ExitCode {
    if args.real.prometheus.is_some() || args.real.config.is_some() || args.real.system.is_some() {
        eprintln!("error: --dataset petshop reads its own files: --prometheus, --config and --system apply to sockshop, nezha and --cases");
        return ExitCode::from(EXIT_USAGE);
    }
    if args.rules.is_some() || args.trace {
        eprintln!(
            "error: --dataset petshop scores the dataset's own metrics: --rules and --trace apply to scenarios only"
        );
        return ExitCode::from(EXIT_USAGE);
    }
    let [dir] = args.scenarios else {
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
    println!(
        "PetShop root-cause dataset (Amazon Science, CC-BY-4.0): recall of the root-cause component \
         among the detector's candidates"
    );
    println!(
        "{:<20} {:<6} {:<13} {:>6} {:>6} {:>6} {:>8} {:>6}   {:>9} {:>9}",
        "setting", "split", "issue metric", "issues", "top-1", "top-3", "flagged", "tied", "ref top-1", "ref top-3"
    );
    let figure = |value: Option<f64>| value.map_or("-".to_string(), |value| format!("{value:.2}"));
    for row in &rows {
        println!(
            "{:<20} {:<6} {:<13} {:>6} {:>6.2} {:>6.2} {:>8} {:>6}   {:>9} {:>9}",
            row.setting,
            row.split,
            row.metric,
            row.issues,
            row.top1,
            row.top3,
            row.target_flagged,
            row.tied_at_top,
            figure(row.paper_top1),
            figure(row.paper_top3),
        );
    }
    println!(
        "flagged: issues whose target the detector flagged in the issue's metric at an issue step \
         (else ranked at the first issue step with any candidate); tied: issues whose first two \
         candidates had equal scores (ordered by name)."
    );
    println!(
        "ref: the dataset paper's anomaly-traversal baseline as its repository's notebook prints it \
         (train and test pooled, temporal settings pooled; arXiv 2311.04806); \
         split `all` pools every split present the same way."
    );
    ExitCode::SUCCESS
}
