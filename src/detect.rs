//! `epicenter detect`: the fleet-wide detector. Sharded collectors (`epicenter run --shard
//! I/N --no-detector`) write one ClickHouse server; this process scrapes nothing, polls that
//! store for what the detector's rules name (`epicenter_detector::follow`) and judges the
//! whole fleet, serving the same API, incident pages and notifiers as `run`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use epicenter_config::parse_duration;

use crate::config::EXIT_CONFIG;

/// Arguments of `epicenter detect`.
#[derive(Args, Debug)]
pub(crate) struct DetectArgs {
    /// Configuration file: the collectors' own (its `storage.clickhouse`, `detector`,
    /// `notifiers`, `server` and `placement` are used; its `scrape_configs` only for their
    /// longest scrape interval, nothing is scraped).
    #[arg(long, short, value_name = "FILE")]
    config: PathBuf,

    /// Stop after this long (e.g. `30s`, `5m`) instead of waiting for Ctrl-C.
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
    run_for: Option<Duration>,
}

/// Runs `epicenter detect`.
pub(crate) fn run(args: &DetectArgs) -> ExitCode {
    let (config, jobs) = match crate::config_file::load(&args.config) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let file = args.config.display();
    if config.storage.clickhouse.is_none() {
        eprintln!(
            "error: {file}: storage.clickhouse is not set: `epicenter detect` reads what collectors write to a ClickHouse server (an embedded store belongs to the one process that writes it; `epicenter run` detects on its own there)"
        );
        return ExitCode::from(EXIT_CONFIG);
    }
    if !config.detector.enabled {
        eprintln!("error: {file}: detector.enabled is false: there is nothing for `epicenter detect` to do");
        return ExitCode::from(EXIT_CONFIG);
    }
    if let Err(error) = config.detector.load_rules() {
        eprintln!("error: {file}: {error}");
        return ExitCode::from(EXIT_CONFIG);
    }
    let longest_interval = jobs
        .iter()
        .map(|job| job.interval)
        .max()
        .unwrap_or(config.global.scrape_interval.0);
    crate::run::start(config, crate::serve::Input::Store { longest_interval }, args.run_for)
}
