//! `epicenter replay`: verdicts recomputed from stored samples for a past period (the method is
//! `epicenter_eval::replay`: the same detector as live, round by round), from epicenter's
//! store or from a Prometheus server (`--prometheus`, `epicenter_eval::prometheus`).

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

    /// Read the samples from this Prometheus server's HTTP API (`http://prometheus:9090`)
    /// instead of epicenter's store: the series the rules name and `up`, placed by --config's
    /// `placement` (a gap in a series is no lost target). Needs --from and --to.
    #[arg(long, value_name = "URL", requires_all = ["from", "to"])]
    prometheus: Option<String>,

    /// YAML with how to reach --prometheus: the HTTP keys of a scrape_config (`basic_auth`,
    /// `authorization`, `bearer_token_file`, `oauth2`, `tls_config`), so no secret goes on the
    /// command line. Relative paths in it are read from its folder.
    #[arg(long, value_name = "FILE", requires = "prometheus")]
    prometheus_config: Option<PathBuf>,

    /// Also append the verdict events to the store's `replayed_verdicts` table (`verdicts`'
    /// columns and the run: `run_id`, printed on stderr, `source`, the period, `replayed_at`),
    /// apart from the live ones (nothing replayed pages); rows expire by when they were
    /// written. With --prometheus the store is --data's (created when missing) or --config's;
    /// otherwise the one read, which must be free (no running `epicenter run`). The schema is
    /// made current first (a ClickHouse user needs `epicenter run`'s rights). Each run appends.
    #[arg(long)]
    write: bool,
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
    for warning in epicenter_detector::rules::shape_warnings(&rules) {
        eprintln!("warning: {}: {warning}", config.detector.rules_source());
    }
    if args.write && args.prometheus.is_some() && args.config.is_none() && args.data.is_none() {
        eprintln!("error: replay --prometheus --write needs the store to write to: --data DIR (created when missing) or --config FILE");
        return ExitCode::from(2);
    }
    if let (Some(url), Some(from), Some(to)) = (&args.prometheus, from, to) {
        // The store to write into is opened first: a held or unreachable one is said before a
        // long read of the server, not after.
        let store = if args.write {
            let opened = crate::open::runtime()
                .and_then(|runtime| crate::open::open_store(&config, &runtime).map(|store| (runtime, store)));
            match opened {
                Ok(opened) => Some(opened),
                Err(code) => return code,
            }
        } else {
            None
        };
        let events = match from_prometheus(url, args.prometheus_config.as_ref(), (from, to), &config, rules) {
            Ok(events) => events,
            Err(code) => return code,
        };
        if let Some((runtime, store)) = &store {
            let run = epicenter_store::ReplayRun::new("prometheus", Some(from), Some(to));
            if let Err(code) = write(runtime, store, &run, &events) {
                return code;
            }
        }
        return print(&events, args.json);
    }
    // Writing needs the store itself (its schema made current, so an older store gains
    // `replayed_verdicts`); it must exist, as for reading.
    let opened = if args.write {
        crate::open::runtime().and_then(|runtime| {
            epicenter_store::Store::open_existing_for_writing(&config.storage, &runtime)
                .map(|store| (runtime, store))
                .map_err(crate::open::refused)
        })
    } else {
        open_existing(&config)
    };
    let (runtime, store) = match opened {
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
    if args.write {
        let run = epicenter_store::ReplayRun::new("store", from, to);
        if let Err(code) = write(&runtime, &store, &run, &events) {
            return code;
        }
    }
    print(&events, args.json)
}

/// Appends `events` to the store's `replayed_verdicts` as `run` and says so on stderr, with
/// the run's id; exit 1 when the store refuses (its answer printed).
fn write(
    runtime: &tokio::runtime::Runtime,
    store: &epicenter_store::Store,
    run: &epicenter_store::ReplayRun,
    events: &[epicenter_detector::VerdictEvent],
) -> Result<(), ExitCode> {
    let rows: Vec<_> = events.iter().map(epicenter_detector::VerdictEvent::row).collect();
    runtime
        .block_on(store.write_replayed_verdicts(run, &rows))
        .map_err(|error| {
            eprintln!("error: replay --write: writing replayed_verdicts: {error}");
            ExitCode::from(1)
        })?;
    eprintln!(
        "replay: {} verdict events appended to replayed_verdicts as run_id '{}'",
        rows.len(),
        run.run_id
    );
    Ok(())
}

/// The verdict events of replaying the samples the rules name between `from` and `to` (ms) on
/// the Prometheus server at `url`, placed by `config.placement`, window by window (progress on
/// stderr), after warnings about rules that do not fit the server's families. Errors are
/// printed: exit 64 for a bad URL or settings file (named), 1 when the server cannot be read.
fn from_prometheus(
    url: &str,
    settings: Option<&PathBuf>,
    (from, to): (i64, i64),
    config: &crate::config::Config,
    rules: Vec<epicenter_detector::rules::Rule>,
) -> Result<Vec<epicenter_detector::VerdictEvent>, ExitCode> {
    use epicenter_eval::prometheus::{Progress, RawSeries};
    let source = crate::open::prometheus_source(url, settings)?;
    let runtime = crate::open::runtime()?;
    // Rules whose kind does not fit the family the server has: said, never a reason to stop.
    match runtime.block_on(source.rule_warnings(&rules, (from, to))) {
        Ok(warnings) => warnings
            .iter()
            .for_each(|warning| eprintln!("warning: {}: {warning}", config.detector.rules_source())),
        Err(error) => eprintln!("warning: replay: the rules were not checked against {url}'s families: {error}"),
    }
    let mut metrics: Vec<String> = epicenter_detector::live::rule_metrics(&rules).into_iter().collect();
    metrics.sort();
    // Half-hour windows: a day of a thousand-target fleet's rule series stays far under
    // Prometheus's default query.max-samples (50 million) per query.
    let window_ms = 30 * 60 * 1000;
    // A gap in the server's series is not a lost target; its `up` series say which were.
    let mut replayer = epicenter_eval::replay::Replayer::with_settings(
        rules,
        config.detector.dependencies(),
        epicenter_eval::prometheus::replay_settings(),
    );
    let mut read = 0;
    let mut each = |series: Vec<RawSeries>, progress: Progress| {
        eprintln!(
            "replay: read {}/{} windows of {url}: {} series, {} samples",
            progress.windows_read, progress.windows, progress.series, progress.samples
        );
        read = progress.samples;
        replayer.feed(epicenter_eval::prometheus::batches(series, &config.placement));
    };
    runtime
        .block_on(source.read(&metrics, (from, to), window_ms, &mut each))
        .map_err(|error| {
            eprintln!("error: reading {url}: {error}");
            ExitCode::from(1)
        })?;
    if read == 0 {
        eprintln!(
            "replay: {url} holds none of the {} metrics the rules read in the period",
            metrics.len()
        );
    }
    Ok(replayer.finish())
}

/// Prints verdict events as text or JSON lines; exit 0.
fn print(events: &[epicenter_detector::VerdictEvent], json: bool) -> ExitCode {
    if events.is_empty() {
        eprintln!("replay: no verdict in the period");
    }
    for event in events {
        if json {
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
