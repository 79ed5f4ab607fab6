//! `epicenter fleet`: the simulated fleet alone, for scraping by anything (Prometheus too).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use tokio::sync::watch;

use crate::open::{load_scenario, runtime};

/// Arguments of `epicenter fleet`.
#[derive(Args, Debug)]
pub(crate) struct FleetArgs {
    /// A shipped scenario (see `epicenter demo --help`) or a scenario file (docs/scenarios.md).
    #[arg(long, default_value = "healthy", value_name = "NAME|FILE")]
    scenario: String,

    /// Simulated seconds per wall-clock second, instead of the scenario's own `speed`.
    #[arg(long, value_name = "X")]
    speed: Option<f64>,

    /// Write the targets as a file_sd file (JSON: `[{targets, labels}]`, labels dc, host,
    /// service, pod) for Prometheus's or epicenter's `file_sd_configs` (give epicenter
    /// `placement: {instance_label: pod}` to name the instances by `pod`).
    #[arg(long, value_name = "FILE")]
    targets_file: Option<PathBuf>,
}

/// Runs `epicenter fleet` until Ctrl-C.
pub(crate) fn run(args: &FleetArgs) -> ExitCode {
    let scenario = match load_scenario(&args.scenario, args.speed) {
        Ok(scenario) => scenario,
        Err(code) => return code,
    };
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let start_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64 / 1000 * 1000);
    let (stop, shutdown) = watch::channel(false);
    let fleet = match runtime.block_on(epicenter_fleet::serve::start(&scenario, start_ms, shutdown)) {
        Ok(fleet) => fleet,
        Err(error) => {
            eprintln!("error: cannot start the simulated fleet on 127.0.0.1: {error}");
            return ExitCode::from(1);
        }
    };
    let document = fleet.file_sd();
    if let Some(path) = &args.targets_file {
        let text = serde_json::to_string_pretty(&document).unwrap_or_default();
        if let Err(error) = std::fs::write(path, text + "\n") {
            eprintln!("error: cannot write {}: {error}", path.display());
            return ExitCode::from(1);
        }
    }
    println!(
        "epicenter fleet: scenario '{}': {} instances on 127.0.0.1 at {}x speed; samples carry the simulated time (honor_timestamps)",
        scenario.name,
        fleet.served.len(),
        scenario.speed
    );
    for served in &fleet.served {
        println!(
            "  {:<14} {:<6} {:<14} http://{}/metrics",
            served.instance.name, served.instance.dc, served.instance.host, served.address
        );
    }
    if let Some(path) = &args.targets_file {
        println!("targets written to {} (file_sd format); Ctrl-C stops", path.display());
    } else {
        println!("Ctrl-C stops; --targets-file FILE writes these targets for file_sd_configs");
    }
    let _ = runtime.block_on(tokio::signal::ctrl_c());
    let _ = stop.send(true);
    ExitCode::SUCCESS
}
