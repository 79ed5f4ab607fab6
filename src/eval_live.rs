//! `epicenter eval --load N`: each scenario run on the live path, as `epicenter demo` runs it
//! (the simulated fleet served on 127.0.0.1, scraped by the collector, judged by the live
//! detector, written to an embedded store), with N busy threads beside it, and scored from the
//! rounds the live detector sent by the same scoring as the headless run
//! (`epicenter_eval::scenarios::score`).

use std::process::ExitCode;
use std::time::Duration;

use epicenter_collector::scrape::Clock;
use epicenter_detector::engine::InstanceInfo;
use epicenter_eval::demo::{collector_config, simulated_start_ms, truth_reached};
use epicenter_eval::load::BusyThreads;
use epicenter_eval::scenarios::{fleet_dependencies, score, Judged, ScenarioResult};
use epicenter_fleet::scenario::Scenario;
use tokio::sync::{mpsc, watch};

use crate::config::Config;
use crate::open::{open_store, runtime, store_config};

/// Runs every scenario live, one after the other, beside `load` busy threads, into one
/// embedded store in a temporary folder (removed afterwards; the engine holds one store per
/// process), and scores each. Progress goes to stderr unless `quiet`. Errors: the store or
/// the fleet cannot start (printed, with the exit code to use).
pub(crate) fn evaluate(scenarios: &[Scenario], load: usize, quiet: bool) -> Result<Vec<ScenarioResult>, ExitCode> {
    let runtime = runtime()?;
    let data = std::env::temp_dir().join(format!("epicenter-eval-live-{}", std::process::id()));
    let store = store_config(None, Some(&data)).and_then(|config| open_store(&config, &runtime))?;
    let mut results = Vec::new();
    for scenario in scenarios {
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
        match run_one(scenario, load, &store, &runtime, &data) {
            Ok(result) => results.push(result),
            Err(code) => {
                let _ = std::fs::remove_dir_all(&data);
                return Err(code);
            }
        }
    }
    drop(store);
    let _ = std::fs::remove_dir_all(&data);
    Ok(results)
}

/// One scenario on the live path: the fleet started on the simulated clock `demo` uses, the
/// pipeline run for the scenario's wall time plus two intervals, every round kept.
fn run_one(
    scenario: &Scenario,
    load: usize,
    store: &epicenter_store::Store,
    runtime: &tokio::runtime::Runtime,
    data: &std::path::Path,
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
    let (tap, mut rounds) = mpsc::unbounded_channel();
    let hogs = BusyThreads::start(load);
    let _ = runtime.block_on(crate::serve::serve(
        config,
        jobs,
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
    let mut judged = Vec::new();
    while let Ok(round) = rounds.try_recv() {
        judged.push(Judged::from(&round));
    }
    let instances = fleet
        .served
        .iter()
        .map(|served| {
            let instance = &served.instance;
            let info = InstanceInfo {
                name: instance.name.clone(),
                dc: instance.dc.clone(),
                host: instance.host.clone(),
                service: instance.service.name().to_string(),
            };
            (instance.name.clone(), info)
        })
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
