//! `epicenter replay`: verdicts recomputed from stored samples for a past period (the method is
//! `epicenter_eval::replay`: the same detector as live, round by round).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use epicenter_detector::config::DependencyConfig;

use crate::config::EXIT_CONFIG;
use crate::open::{open_existing, store_config};

/// Arguments of `epicenter replay`.
#[derive(Args, Debug)]
pub(crate) struct ReplayArgs {
    /// Start of the period, RFC 3339 (`2026-12-01T14:00:00Z`); default: the first sample.
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    from: Option<i64>,

    /// End of the period, RFC 3339, after --from; default: the last sample.
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    to: Option<i64>,

    /// Configuration naming the store and the detector's dependencies and rules.
    #[arg(long, short, value_name = "FILE")]
    config: Option<PathBuf>,

    /// The embedded store's directory instead of the configuration's (e.g. a demo's --data).
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,

    /// Print the verdict events as JSON lines instead of text.
    #[arg(long)]
    json: bool,
}

/// An RFC 3339 time as Unix milliseconds (a command-line value: clap names the flag and exits 2).
fn parse_time(text: &str) -> Result<i64, String> {
    let time = humantime::parse_rfc3339_weak(text)
        .map_err(|error| format!("{error} (expected RFC 3339, e.g. 2026-12-01T14:00:00Z)"))?;
    let since = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| "before 1970".to_string())?;
    Ok(since.as_millis() as i64)
}

/// Runs `epicenter replay`.
pub(crate) fn run(args: &ReplayArgs) -> ExitCode {
    let mut config = match store_config(args.config.as_ref(), args.data.as_ref()) {
        Ok(config) => config,
        Err(code) => return code,
    };
    if args.config.is_none() && config.detector.dependencies.is_empty() {
        // Without a configuration, the dependencies of the simulated fleet (the demo's).
        config.detector.dependencies = epicenter_eval::scenarios::fleet_dependencies()
            .into_iter()
            .map(|d| DependencyConfig {
                caller: d.caller,
                callee: d.callee,
                same_dc: d.same_dc,
            })
            .collect();
    }
    let (from, to) = (args.from, args.to);
    if let (Some(from), Some(to)) = (from, to) {
        if from >= to {
            eprintln!("error: --from must be before --to: the period is empty");
            return ExitCode::from(2);
        }
    }
    let rules = match config.detector.load_rules() {
        Ok(rules) => rules,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let (runtime, store) = match open_existing(&config) {
        Ok(opened) => opened,
        Err(code) => return code,
    };
    let sql = epicenter_eval::replay::samples_query(&rules, from, to);
    let output = match store.query(&runtime, &sql, "JSONEachRow") {
        Ok(output) => output,
        Err(error) => {
            eprintln!("error: reading samples: {error}");
            return ExitCode::from(1);
        }
    };
    let events = match epicenter_eval::replay::replay(
        &String::from_utf8_lossy(&output),
        rules,
        config.detector.dependencies(),
    ) {
        Ok(events) => events,
        Err(error) => {
            eprintln!("error: reading samples: {error}");
            return ExitCode::from(1);
        }
    };
    if events.is_empty() {
        eprintln!("replay: no verdict in the period");
    }
    for event in &events {
        if args.json {
            println!("{}", serde_json::to_string(event).unwrap_or_default());
        } else {
            let when = humantime::format_rfc3339_millis(
                std::time::UNIX_EPOCH + std::time::Duration::from_millis(event.time_ms.max(0) as u64),
            );
            println!("{when} {}: {}", event.state, event.verdict.describe());
        }
    }
    ExitCode::SUCCESS
}
