//! `epicenter eval --load N`: each scenario run on the live path, as `epicenter demo` runs it
//! (the simulated fleet served on 127.0.0.1, scraped by the collector, judged by the live
//! detector, written to an embedded store), with N busy threads beside it, and scored from the
//! rounds the live detector sent by the same scoring as the headless run
//! (`epicenter_eval::scenarios::score`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use epicenter_collector::scrape::Clock;
use epicenter_eval::demo::{collector_config, simulated_start_ms, truth_reached};
use epicenter_eval::load::BusyThreads;
use epicenter_eval::scenarios::{fleet_dependencies, instance_info, score, Judged, ScenarioResult};
use epicenter_fleet::scenario::Scenario;
use tokio::sync::{mpsc, watch};

use crate::config::Config;
use crate::open::{open_store, runtime, store_config};

/// What `eval --load` did: a result per scenario run (the last one cut short when
/// `interrupted`), and, when a stop signal came, a sentence saying which scenario it cut
/// short and that the later ones were not run.
pub(crate) struct LiveRun {
    pub(crate) results: Vec<ScenarioResult>,
    pub(crate) interrupted: Option<String>,
}

/// The run's temporary store folder, removed when dropped (also when a panic unwinds).
struct TempFolder(PathBuf);

impl Drop for TempFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs every scenario live, one after the other, beside `load` busy threads, into one
/// embedded store in a new temporary folder (removed afterwards; the engine holds one store
/// per process), and scores each. Progress goes to stderr unless `quiet`. Ctrl-C or SIGTERM
/// stops the scenario running (flushed and scored as far as it got) and the ones after it.
/// Errors: the folder, the store, the fleet or the busy threads cannot start (printed, with
/// the exit code to use).
pub(crate) fn evaluate(scenarios: &[Scenario], load: usize, quiet: bool) -> Result<LiveRun, ExitCode> {
    let runtime = runtime()?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.subsec_nanos());
    let folder =
        TempFolder(std::env::temp_dir().join(format!("epicenter-eval-live-{}-{nanos:09}", std::process::id())));
    if let Err(error) = std::fs::create_dir(&folder.0) {
        eprintln!(
            "error: cannot create the live evaluation's store folder {}: {error}",
            folder.0.display()
        );
        return Err(ExitCode::from(1));
    }
    let data = folder.0.join("data");
    let store = store_config(None, Some(&data)).and_then(|config| open_store(&config, &runtime))?;
    // A stop signal ends the whole evaluation: `serve` stops the scenario it is running, this
    // listener (which hears the same signal) keeps the next ones from starting.
    let stopped: Arc<Mutex<Option<&'static str>>> = Arc::default();
    let heard = Arc::clone(&stopped);
    // Registered now, before any scenario starts, so that no signal goes unheard.
    let mut signals = {
        let _entered = runtime.enter();
        crate::signals::StopSignals::listen()
    };
    runtime.spawn(async move {
        let signal = signals.next().await;
        *heard.lock().unwrap_or_else(PoisonError::into_inner) = Some(signal);
    });
    let signal = || *stopped.lock().unwrap_or_else(PoisonError::into_inner);
    let mut run = LiveRun {
        results: Vec::new(),
        interrupted: None,
    };
    for (index, scenario) in scenarios.iter().enumerate() {
        if !quiet {
            eprintln!(
                "eval: {} live ({} simulated at {}x, about {:.0} s) beside {load} busy thread{}…",
                scenario.name,
                scenario.duration,
                scenario.speed,
                scenario.duration.0.as_secs_f64() / scenario.speed,
                if load == 1 { "" } else { "s" }
            );
        }
        let result = run_one(scenario, load, &store, &runtime, &data)?;
        let reached = result.simulated_seconds;
        run.results.push(result);
        if let Some(signal) = signal() {
            let later = scenarios.len() - index - 1;
            run.interrupted = Some(format!(
                "stopped by {signal} during '{}' at {reached:.0} of {} simulated seconds: its result covers only that part{}",
                scenario.name,
                scenario.duration.0.as_secs(),
                if later > 0 { format!("; {later} later scenario(s) not run") } else { String::new() }
            ));
            break;
        }
    }
    drop(store);
    drop(folder);
    Ok(run)
}

/// One scenario on the live path: the fleet started on the simulated clock `demo` uses, the
/// pipeline run for the scenario's wall time plus two intervals (or until a stop signal),
/// every round the live detector sent converted for scoring as it comes.
fn run_one(
    scenario: &Scenario,
    load: usize,
    store: &epicenter_store::Store,
    runtime: &tokio::runtime::Runtime,
    data: &Path,
) -> Result<ScenarioResult, ExitCode> {
    let wall_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis() as i64)
    };
    let start_ms = simulated_start_ms(wall_ms() / 1000 * 1000, scenario.duration.0, scenario.speed);
    let (stop_fleet, fleet_shutdown) = watch::channel(false);
    let fleet_started_ms = wall_ms();
    let fleet = runtime
        .block_on(epicenter_fleet::serve::start(scenario, start_ms, fleet_shutdown))
        .map_err(|error| {
            eprintln!("error: cannot start the simulated fleet on 127.0.0.1: {error}");
            ExitCode::from(1)
        })?;
    let wall_interval = scenario
        .scrape_interval
        .0
        .div_f64(scenario.speed)
        .max(Duration::from_millis(100));
    let yaml = collector_config(scenario, &fleet.served, wall_interval, data);
    let (mut config, jobs) = match Config::from_yaml(&yaml).map(|config| (config.validate(), config)) {
        Ok((Ok(jobs), config)) => (config, jobs),
        _ => {
            eprintln!("error: internal: the live evaluation's collector configuration is invalid:\n{yaml}");
            return Err(ExitCode::from(1));
        }
    };
    // Nobody queries this store while it runs: no SQL endpoint.
    config.storage.http.listen_address = Some(String::new());
    let clock = Clock::Simulated {
        wall_start_ms: fleet_started_ms,
        start_ms,
        speed: scenario.speed,
        end_ms: start_ms + scenario.duration.0.as_millis() as i64,
    };
    let run_for = Duration::from_secs_f64(scenario.duration.0.as_secs_f64() / scenario.speed) + wall_interval * 2;
    let (tap, mut rounds) = mpsc::unbounded_channel::<epicenter_detector::live::Round>();
    // Each round kept only as what scoring reads (a round also carries the whole graph).
    let collecting = runtime.spawn(async move {
        let mut judged = Vec::new();
        while let Some(round) = rounds.recv().await {
            judged.push(Judged::from(&round));
        }
        judged
    });
    let hogs = BusyThreads::start(load).map_err(|error| {
        eprintln!("error: cannot start {load} busy threads: {error}");
        ExitCode::from(1)
    })?;
    let _ = runtime.block_on(crate::serve::serve(
        config,
        crate::serve::Input::Scrape(jobs),
        store.clone(),
        Some(run_for),
        false,
        clock,
        Some(tap),
    ));
    drop(hogs);
    let _ = stop_fleet.send(true);
    let reached_ms = start_ms + *fleet.clock.borrow() as i64 * 1000;
    let duration_ms = scenario.duration.0.as_millis() as i64;
    let truth = truth_reached(fleet.ground_truth(), start_ms, reached_ms, duration_ms);
    // The tap closed with the pipeline: every round is in.
    let judged = runtime.block_on(collecting).unwrap_or_default();
    let instances = fleet
        .served
        .iter()
        .map(|served| (served.instance.name.clone(), instance_info(&served.instance)))
        .collect();
    let interval = scenario.scrape_interval.0.as_secs().max(1);
    let simulated_seconds = ((reached_ms - start_ms) as f64 / 1000.0).max(0.0);
    Ok(score(
        &scenario.name,
        &truth,
        &judged,
        &instances,
        &fleet_dependencies(),
        interval,
        simulated_seconds,
    ))
}
