//! `epicenter demo`: a simulated fleet, scraped into the embedded store while a scenario's
//! faults play out, with a live timeline, the ground truth and queries to explore.

use std::path::PathBuf;

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use epicenter_collector::scrape::Clock;
use epicenter_eval::demo::{
    collector_config, first_verdict_after, ground_truth_query, opened_verdicts_query, scrapes_by_service_query,
    simulated_start_ms, suggested_queries, truth_reached, truth_rows, Mark, OpenedVerdict, Timeline,
};
use epicenter_fleet::scenario::Scenario;
use epicenter_fleet::truth::Truth;
use epicenter_store::Store;
use tokio::sync::watch;

use crate::config::Config;
use crate::open::{load_scenario, open_store, runtime};

/// Arguments of `epicenter demo`.
#[derive(Args, Debug)]
pub(crate) struct DemoArgs {
    /// A shipped scenario (redis-node-loss, redis-slow-node, backend-cold-start,
    /// db-pool-exhaustion, api-retry-storm, dc-network-degradation, zone-session-loss,
    /// healthy) or a scenario file (docs/scenarios.md).
    #[arg(long, default_value = "redis-node-loss", value_name = "NAME|FILE")]
    scenario: String,

    /// Simulated seconds per wall-clock second, instead of the scenario's own `speed`.
    #[arg(long, value_name = "X")]
    speed: Option<f64>,

    /// Keep the fleet and the collector running after the scenario ends, until Ctrl-C.
    #[arg(long)]
    keep_running: bool,

    /// Embedded store directory for this run; it must not exist yet or be empty (a demo's
    /// store is its own, never mixed with another run's). Default: a new folder
    /// ./demo-data/<scenario>-<start time>, printed at the start.
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
}

/// Runs `epicenter demo`.
pub(crate) fn run(args: &DemoArgs) -> ExitCode {
    let scenario = match load_scenario(&args.scenario, args.speed) {
        Ok(scenario) => scenario,
        Err(code) => return code,
    };
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let (stop_fleet, fleet_shutdown) = watch::channel(false);
    let wall_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis() as i64)
    };
    let wall_start_ms = wall_ms() / 1000 * 1000;
    // One time line: the simulation ends when the run does, so nothing lies ahead of now.
    let start_ms = simulated_start_ms(wall_start_ms, scenario.duration.0, scenario.speed);
    let data = match epicenter_eval::demo::store_folder(
        args.data.as_deref(),
        std::path::Path::new("demo-data"),
        &scenario.name,
        wall_start_ms,
    ) {
        Ok(data) => data,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(crate::config::EXIT_CONFIG);
        }
    };
    // The store opens before the fleet's clock starts: loading the engine takes seconds,
    // minutes of simulated time the collector would otherwise miss.
    let store = match crate::open::store_config(None, Some(&data)).and_then(|config| open_store(&config, &runtime)) {
        Ok(store) => store,
        Err(code) => return code,
    };
    let fleet_started_ms = wall_ms();
    let fleet = match runtime.block_on(epicenter_fleet::serve::start(&scenario, start_ms, fleet_shutdown)) {
        Ok(fleet) => fleet,
        Err(error) => {
            eprintln!("error: cannot start the simulated fleet on 127.0.0.1: {error}");
            return ExitCode::from(1);
        }
    };
    let wall_interval = scenario
        .scrape_interval
        .0
        .div_f64(scenario.speed)
        .max(Duration::from_millis(100));
    let yaml = collector_config(&scenario, &fleet.served, wall_interval, &data);
    let (config, jobs) = match Config::from_yaml(&yaml).map(|config| (config.validate(), config)) {
        Ok((Ok(jobs), config)) => (config, jobs),
        _ => {
            eprintln!("error: internal: the demo's collector configuration is invalid:\n{yaml}");
            return ExitCode::from(1);
        }
    };
    let truth = fleet.ground_truth();
    let wall_seconds = scenario.duration.0.as_secs_f64() / scenario.speed;
    println!(
        "epicenter demo: scenario '{}': {}\n  {} instances ({} datacenters), {} simulated at {}x speed (about {:.0} s), scraped every {} simulated ({:?} wall) into {}",
        scenario.name,
        scenario.description,
        fleet.served.len(),
        scenario.fleet.datacenters,
        scenario.duration,
        scenario.speed,
        wall_seconds,
        scenario.scrape_interval,
        wall_interval,
        data.display()
    );
    for fault in &truth {
        println!(
            "  fault: {} of {} ({}) on {} in {}, at +{}s{}",
            fault.kind,
            fault.instances.join(", "),
            fault.service,
            fault.hosts.join(", "),
            fault.dcs.join(", "),
            (fault.onset_ms - start_ms) / 1000,
            fault
                .end_ms
                .map(|end| format!(" until +{}s", (end - start_ms) / 1000))
                .unwrap_or_default()
        );
    }
    let timeline = runtime.spawn(timeline(
        fleet.clock.clone(),
        truth.clone(),
        start_ms,
        fleet.headline_source(),
    ));
    let run_for = if args.keep_running {
        None
    } else {
        Some(Duration::from_secs_f64(wall_seconds) + wall_interval * 2)
    };
    // Scrapes are stamped with the fleet's clock, as its samples are.
    let clock = Clock::Simulated {
        wall_start_ms: fleet_started_ms,
        start_ms,
        speed: scenario.speed,
        end_ms: start_ms + scenario.duration.0.as_millis() as i64,
    };
    let code = runtime.block_on(crate::serve::serve(
        config,
        crate::serve::Input::Scrape(jobs),
        store.clone(),
        run_for,
        false,
        clock,
        None,
    ));
    let _ = stop_fleet.send(true);
    timeline.abort();
    // Only faults that started before the run stopped happened; one cut short ends there.
    let reached_ms = start_ms + *fleet.clock.borrow() as i64 * 1000;
    let truth = truth_reached(truth, start_ms, reached_ms, scenario.duration.0.as_millis() as i64);
    if let Err(error) = store.write_ground_truth(&runtime, &truth_rows(&truth)) {
        eprintln!("error: writing the ground truth: {error}");
        return ExitCode::from(1);
    }
    summary(&store, &runtime, &scenario, &truth, start_ms, &data);
    code
}

/// Prints a line every 30 simulated seconds, and when a fault starts or ends.
async fn timeline(
    mut clock: watch::Receiver<u64>,
    truth: Vec<Truth>,
    start_ms: i64,
    headline: impl Fn() -> epicenter_fleet::model::Headline,
) {
    let mut previous_received = headline().redis_connections_received;
    let mut previous_second = 0u64;
    let mut marks = Timeline::new(&truth, start_ms);
    while clock.changed().await.is_ok() {
        let second = *clock.borrow();
        let (passed, progress) = marks.advance(second);
        for mark in passed {
            match mark {
                Mark::Starts(fault) => println!(
                    "[+{second:>5}s] FAULT starts: {} of {} on {}",
                    fault.kind,
                    fault.instances.join(", "),
                    fault.hosts.join(", ")
                ),
                Mark::Ends(fault) => println!(
                    "[+{second:>5}s] FAULT ends: {} of {}",
                    fault.kind,
                    fault.instances.join(", ")
                ),
            }
        }
        if !progress {
            continue;
        }
        let figures = headline();
        let elapsed = (second - previous_second).max(1) as f64;
        let new_connections = (figures.redis_connections_received - previous_received) / elapsed;
        previous_received = figures.redis_connections_received;
        previous_second = second;
        println!(
            "[+{second:>5}s] api {:>6.0} req/s | backend errors {:>5.1} % | latency {:>6.3} s | waiters redis {:>5.0} db {:>4.0} | new redis conns {:>6.1}/s | mailbox {:>7.0}",
            figures.api_requests_per_second,
            figures.backend_error_fraction * 100.0,
            figures.backend_latency_seconds,
            figures.pool_waiters,
            figures.db_pending,
            new_connections,
            figures.longest_mailbox
        );
    }
}

/// What the store holds after the run, and queries to go on with.
fn summary(
    store: &Store,
    runtime: &tokio::runtime::Runtime,
    scenario: &Scenario,
    truth: &[Truth],
    start_ms: i64,
    data: &std::path::Path,
) {
    let ask = |sql: &str| {
        store
            .query(runtime, sql, "PrettyCompactMonoBlock")
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_else(|error| format!("(query failed: {error})\n"))
    };
    println!("\nWhat the store holds for this run (scrapes by service):");
    print!("{}", ask(&scrapes_by_service_query(start_ms)));
    let opened = store
        .query(runtime, &opened_verdicts_query(start_ms), "TabSeparated")
        .map(|bytes| OpenedVerdict::parse_rows(&String::from_utf8_lossy(&bytes)))
        .unwrap_or_default();
    if truth.is_empty() && scenario.faults.is_empty() {
        println!("\nNo fault was injected: the detector should say nothing.");
        println!("Verdicts opened: {}", opened.len());
    } else if truth.is_empty() {
        println!("\nThe run stopped before its first fault: there was nothing to detect yet.");
        println!("Verdicts opened: {}", opened.len());
    } else {
        println!("\nGround truth (table ground_truth):");
        print!("{}", ask(&ground_truth_query(start_ms)));
        for (index, fault) in truth.iter().enumerate() {
            // With several faults, each is named with its own verdict.
            let which = if truth.len() > 1 {
                format!(
                    " {} of {} ({} in {})",
                    index + 1,
                    truth.len(),
                    fault.kind,
                    fault.dcs.join(", ")
                )
            } else {
                String::new()
            };
            match first_verdict_after(fault, &opened) {
                Some(first) => println!(
                    "\nThe detector's first verdict after the fault{which}: {} on {} in {}, {} simulated seconds after the onset: host {}, datacenter {}.",
                    first.verdict.kind,
                    first.verdict.host,
                    first.verdict.dc,
                    first.seconds_after_onset,
                    if first.host_right { "right" } else { "WRONG" },
                    if first.dc_right { "right" } else { "WRONG" }
                ),
                None => println!("\nThe detector opened no verdict after the fault{which}."),
            }
        }
    }
    println!(
        "\nThis run's store is {}: verdicts are in the table `verdicts`, anomalies in `anomalies`. Explore it with:",
        data.display()
    );
    let kind = truth.first().map_or("none", |fault| fault.kind.as_str());
    let command = crate::style::own_command();
    let data = crate::style::shell_word(&data.display().to_string());
    for query in suggested_queries(kind, &scenario.name) {
        println!(
            "  {command} sql --data {data} {}",
            crate::style::shell_double_quoted(&query)
        );
    }
}
