//! `epicenter demo`: a simulated fleet, scraped into the embedded store while a scenario's
//! faults play out, with a live timeline, the ground truth and queries to explore.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use epicenter_eval::demo::{first_verdict_after, suggested_queries, truth_reached, truth_rows, OpenedVerdict};
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

    /// Embedded store directory (where `epicenter sql` looks by default; for another one,
    /// `epicenter sql --data DIR`).
    #[arg(long, default_value = "./data", value_name = "DIR")]
    data: PathBuf,
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
    let start_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64 / 1000 * 1000);
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
    let yaml = collector_config(&scenario, &fleet.served, wall_interval, &args.data);
    let (config, jobs) = match Config::from_yaml(&yaml).map(|config| (config.validate(), config)) {
        Ok((Ok(jobs), config)) => (config, jobs),
        _ => {
            eprintln!("error: internal: the demo's collector configuration is invalid:\n{yaml}");
            return ExitCode::from(1);
        }
    };
    let store = match open_store(&config, &runtime) {
        Ok(store) => store,
        Err(code) => return code,
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
        args.data.display()
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
    let code = runtime.block_on(crate::serve::serve(config, jobs, store.clone(), run_for));
    let _ = stop_fleet.send(true);
    timeline.abort();
    // Only faults that started before the run stopped happened; one cut short ends there.
    let reached_ms = start_ms + *fleet.clock.borrow() as i64 * 1000;
    let truth = truth_reached(truth, start_ms, reached_ms, scenario.duration.0.as_millis() as i64);
    if let Err(error) = store.write_ground_truth(&runtime, &truth_rows(&truth)) {
        eprintln!("error: writing the ground truth: {error}");
        return ExitCode::from(1);
    }
    summary(&store, &runtime, &scenario, &truth, start_ms);
    code
}

/// The collector configuration the demo runs: one job per service, every instance a static
/// target labelled with its datacenter, host and service; simulated timestamps honoured.
fn collector_config(
    scenario: &Scenario,
    served: &[epicenter_fleet::serve::ServedInstance],
    interval: Duration,
    data: &std::path::Path,
) -> String {
    let interval_ms = interval.as_millis().max(100);
    let timeout_ms = (interval_ms * 8 / 10).max(80);
    let mut yaml = format!(
        "global:\n  scrape_interval: {interval_ms}ms\n  scrape_timeout: {timeout_ms}ms\n  external_labels: {{scenario: {}}}\nscrape_configs:\n",
        scenario.name
    );
    for service in ["api", "backend", "redis", "db", "gateway", "voice", "media"] {
        yaml.push_str(&format!("  - job_name: {service}\n    static_configs:\n"));
        for target in served.iter().filter(|target| target.instance.service.name() == service) {
            yaml.push_str(&format!(
                "      - targets: ['{}']\n        labels: {{dc: {}, host: {}, service: {service}, pod: {}}}\n",
                target.address, target.instance.dc, target.instance.host, target.instance.name
            ));
        }
    }
    yaml.push_str(&format!(
        "storage:\n  embedded:\n    path: '{}'\nserver:\n  listen_address: 127.0.0.1:0\ndetector:\n  interval: {interval_ms}ms\n  dependencies:\n{}",
        data.display().to_string().replace('\'', "''"),
        epicenter_eval::scenarios::fleet_dependencies()
            .iter()
            .map(|d| format!("    - {{caller: {}, callee: {}, same_dc: {}}}\n", d.caller, d.callee, d.same_dc))
            .collect::<String>()
    ));
    yaml
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
    // The clock is a watch channel: under load a reader sees only the latest second, so every
    // mark is printed when the clock passes it, not only when it lands on it.
    let mut seen_second: Option<u64> = None;
    while clock.changed().await.is_ok() {
        let second = *clock.borrow();
        let now_ms = start_ms + second as i64 * 1000;
        let before_ms = seen_second.map_or(i64::MIN, |seen| start_ms + seen as i64 * 1000);
        let passed = |at_ms: i64| before_ms < at_ms && at_ms <= now_ms;
        let crossed_progress = seen_second.map_or(second % 30 == 0, |seen| second / 30 > seen / 30);
        seen_second = Some(second);
        for fault in &truth {
            if passed(fault.onset_ms) {
                println!(
                    "[+{second:>5}s] FAULT starts: {} of {} on {}",
                    fault.kind,
                    fault.instances.join(", "),
                    fault.hosts.join(", ")
                );
            }
            if fault.end_ms.is_some_and(passed) {
                println!(
                    "[+{second:>5}s] fault ends: {} of {}",
                    fault.kind,
                    fault.instances.join(", ")
                );
            }
        }
        if !crossed_progress {
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
fn summary(store: &Store, runtime: &tokio::runtime::Runtime, scenario: &Scenario, truth: &[Truth], start_ms: i64) {
    let ask = |sql: &str| {
        store
            .query(runtime, sql, "PrettyCompactMonoBlock")
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_else(|error| format!("(query failed: {error})\n"))
    };
    println!("\nWhat the store holds for this run (scrapes by service):");
    print!(
        "{}",
        ask(&format!(
            "SELECT service, count() AS scrapes, sum(up) AS up, sum(samples_scraped) AS samples FROM scrapes \
             WHERE time >= fromUnixTimestamp64Milli({start_ms}) GROUP BY service ORDER BY service"
        ))
    );
    let opened = store
        .query(
            runtime,
            &format!(
                "SELECT kind, dc, arrayElement(hosts, 1), toUnixTimestamp64Milli(time) FROM verdicts \
                 WHERE state = 'opened' AND time >= fromUnixTimestamp64Milli({start_ms}) ORDER BY time"
            ),
            "TabSeparated",
        )
        .map(|bytes| OpenedVerdict::parse_rows(&String::from_utf8_lossy(&bytes)))
        .unwrap_or_default();
    if truth.is_empty() {
        println!("\nNo fault was injected: the detector should say nothing.");
        println!("Verdicts opened: {}", opened.len());
    } else {
        println!("\nGround truth (table ground_truth):");
        print!(
            "{}",
            ask(&format!(
                "SELECT scenario, kind, service, dcs, hosts, instances, onset FROM ground_truth WHERE onset >= fromUnixTimestamp64Milli({start_ms}) ORDER BY onset"
            ))
        );
        match first_verdict_after(&truth[0], &opened) {
            Some(first) => println!(
                "\nThe detector's first verdict after the fault: {} on {} in {}, {} simulated seconds after the onset: host {}, datacenter {}.",
                first.verdict.kind,
                first.verdict.host,
                first.verdict.dc,
                first.seconds_after_onset,
                if first.host_right { "right" } else { "WRONG" },
                if first.dc_right { "right" } else { "WRONG" }
            ),
            None => println!("\nThe detector opened no verdict after the fault."),
        }
    }
    println!("\nVerdicts are in the table `verdicts`, anomalies in `anomalies`. Explore with `epicenter sql` (add --data DIR if you used --data):");
    let kind = truth.first().map_or("none", |fault| fault.kind.as_str());
    for query in suggested_queries(kind, &scenario.name) {
        println!("  epicenter sql \"{query}\"");
    }
}
