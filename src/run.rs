//! `epicenter run`: scrape the configured targets into the store until stopped.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use epicenter_collector::scrape::Clock;
use epicenter_collector::shard::Shard;
use epicenter_config::parse_duration;

use crate::config::EXIT_CONFIG;
use crate::open::runtime;

/// Arguments of `epicenter run`.
#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    /// Configuration file (see docs/configuration.md; `epicenter check config` validates it).
    #[arg(long, short, value_name = "FILE")]
    config: PathBuf,

    /// Stop after this long (e.g. `30s`, `5m`) instead of waiting for Ctrl-C: for demos,
    /// benchmarks and tests.
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
    run_for: Option<Duration>,

    /// Scrape only shard INDEX of COUNT (0-based, e.g. `0/3`): the targets whose address
    /// hashes to INDEX, as Prometheus's `hashmod` relabeling shards them. COUNT collectors
    /// started with `0/COUNT` … `COUNT-1/COUNT` over the same configuration scrape every
    /// target once; write them to one ClickHouse server (`storage.clickhouse`), with
    /// --no-detector, and run one `epicenter detect` over it for the whole fleet (a
    /// collector's own detector would see only its shard; docs/scaling.md).
    #[arg(long, value_name = "INDEX/COUNT")]
    shard: Option<Shard>,

    /// Scrape and store only: no detector (whatever `detector.enabled` says). For sharded
    /// collectors whose store one `epicenter detect` judges for the whole fleet.
    #[arg(long)]
    no_detector: bool,
}

/// Runs `epicenter run`.
pub(crate) fn run(args: &RunArgs) -> ExitCode {
    let (mut config, mut jobs) = match crate::config_file::load(&args.config) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    if args.no_detector {
        config.detector.enabled = false;
    }
    if let Some(shard) = args.shard {
        shard.apply(&mut jobs);
        if shard.count > 1 {
            eprintln!(
                "epicenter: shard {shard}: scraping the targets whose address hashes to {} (mod {}); the other shards' show as dropped in /api/v1/targets",
                shard.index, shard.count
            );
        }
    }
    for warning in config.unsupported() {
        eprintln!("warning: {warning}");
    }
    // A detector rules file that cannot be used stops the run before the store is touched.
    if config.detector.enabled {
        if let Err(error) = config.detector.load_rules() {
            eprintln!("error: {}: {error}", args.config.display());
            return ExitCode::from(EXIT_CONFIG);
        }
    }
    start(config, crate::serve::Input::Scrape(jobs), args.run_for)
}

/// Opens the store `config` names (a server that does not answer yet is waited for:
/// [`epicenter_store::Store::open_or_wait`]) and serves `input` on the wall clock until `run_for` passes
/// or a signal comes (`run`, and `detect` with [`crate::serve::Input::Store`]).
pub(crate) fn start(config: crate::config::Config, input: crate::serve::Input, run_for: Option<Duration>) -> ExitCode {
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    // A server that does not answer yet is waited for: scrapes go to the spool meanwhile.
    let store = match epicenter_store::Store::open_or_wait(&config.storage, &runtime) {
        Ok(store) => store,
        Err(error) => return crate::open::refused(error),
    };
    if let Some(why) = store.waiting_for_store() {
        let meanwhile = if config.storage.spool().is_some() {
            "scraping into the spool meanwhile"
        } else {
            "storage.spool is off, so scrapes are lost until then"
        };
        eprintln!(
            "epicenter: the store does not answer ({why}): its schema is created when it does; {meanwhile} (/readyz answers 503 until then)"
        );
    }
    runtime.block_on(crate::serve::serve(
        config,
        input,
        store,
        run_for,
        true,
        Clock::Wall,
        None,
    ))
}
