//! `epicenter demo`: a simulated fleet, scraped into the embedded store while a scenario's
//! faults play out, with a live timeline, the ground truth and queries to explore.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use epicenter_collector::config::Config;
use epicenter_fleet::scenario::Scenario;
use epicenter_fleet::truth::Truth;
use tokio::sync::watch;

use crate::run::{open_store, runtime, serve, Store, EXIT_CONFIG};

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

/// A shipped scenario or a file, with `--speed` (checked against the scenario's cap) in
/// place of its own; errors printed, exit 64.
pub(crate) fn load_scenario(name: &str, speed: Option<f64>) -> Result<Scenario, ExitCode> {
    let mut scenario = Scenario::load(name).map_err(|error| {
        eprintln!("error: scenario {error}");
        ExitCode::from(EXIT_CONFIG)
    })?;
    if let Some(speed) = speed {
        if !(speed.is_finite() && speed > 0.0 && speed <= scenario.max_speed()) {
            eprintln!(
                "error: --speed {speed}: must be above 0 and at most {} for this scenario (its {} scrape interval must stay at least 100 ms of wall time)",
                scenario.max_speed(),
                scenario.scrape_interval
            );
            return Err(ExitCode::from(EXIT_CONFIG));
        }
        scenario.speed = speed;
    }
    Ok(scenario)
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
    let code = runtime.block_on(serve(config, jobs, store.clone(), run_for));
    let _ = stop_fleet.send(true);
    timeline.abort();
    // Only faults that started before the run stopped happened; one cut short ends there.
    let reached_ms = start_ms + *fleet.clock.borrow() as i64 * 1000;
    let truth: Vec<Truth> = truth
        .into_iter()
        .filter(|fault| fault.onset_ms <= reached_ms)
        .map(|mut fault| {
            if fault.end_ms.is_none_or(|end| end > reached_ms)
                && reached_ms < start_ms + scenario.duration.0.as_millis() as i64
            {
                fault.end_ms = Some(reached_ms);
            }
            fault
        })
        .collect();
    if let Err(error) = write_truth(&store, &runtime, &truth) {
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
        crate::eval::fleet_dependencies()
            .iter()
            .map(|d| format!("    - {{caller: {}, callee: {}, same_dc: {}}}\n", d.caller, d.callee, d.same_dc))
            .collect::<String>()
    ));
    yaml
}

/// Creates `ground_truth` (idempotent) and appends this run's faults.
fn write_truth(store: &Store, runtime: &tokio::runtime::Runtime, truth: &[Truth]) -> Result<(), String> {
    store.query(
        runtime,
        "CREATE TABLE IF NOT EXISTS ground_truth (
            scenario LowCardinality(String),
            kind LowCardinality(String),
            service LowCardinality(String),
            dcs Array(String),
            hosts Array(String),
            instances Array(String),
            onset DateTime64(3, 'UTC'),
            end Nullable(DateTime64(3, 'UTC'))
        ) ENGINE = MergeTree ORDER BY (onset, scenario)",
        "TabSeparated",
    )?;
    for fault in truth {
        let list = |values: &[String]| {
            let quoted: Vec<String> = values
                .iter()
                .map(|value| format!("'{}'", value.replace('\'', "''")))
                .collect();
            format!("[{}]", quoted.join(","))
        };
        let sql = format!(
            "INSERT INTO ground_truth VALUES ('{}', '{}', '{}', {}, {}, {}, fromUnixTimestamp64Milli({}), {})",
            fault.scenario.replace('\'', "''"),
            fault.kind,
            fault.service,
            list(&fault.dcs),
            list(&fault.hosts),
            list(&fault.instances),
            fault.onset_ms,
            fault
                .end_ms
                .map_or("NULL".to_string(), |end| format!("fromUnixTimestamp64Milli({end})"))
        );
        store.query(runtime, &sql, "TabSeparated")?;
    }
    Ok(())
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
    let verdicts = store
        .query(
            runtime,
            &format!(
                "SELECT kind, dc, arrayElement(hosts, 1), toUnixTimestamp64Milli(time) FROM verdicts \
                 WHERE state = 'opened' AND time >= fromUnixTimestamp64Milli({start_ms}) ORDER BY time"
            ),
            "TabSeparated",
        )
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default();
    let opened: Vec<Vec<String>> = verdicts
        .lines()
        .map(|line| line.split('\t').map(str::to_string).collect())
        .filter(|fields: &Vec<String>| fields.len() == 4)
        .collect();
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
        let fault = &truth[0];
        match opened
            .iter()
            .find(|fields| fields[3].parse::<i64>().is_ok_and(|at| at >= fault.onset_ms))
        {
            Some(fields) => {
                let host_right = fault.hosts.contains(&fields[2]);
                let dc_right = fault.dcs.contains(&fields[1]);
                let seconds = fields[3].parse::<i64>().map_or(0, |at| (at - fault.onset_ms) / 1000);
                println!(
                    "\nThe detector's first verdict after the fault: {} on {} in {}, {} simulated seconds after the onset: host {}, datacenter {}.",
                    fields[0],
                    fields[2],
                    fields[1],
                    seconds,
                    if host_right { "right" } else { "WRONG" },
                    if dc_right { "right" } else { "WRONG" }
                );
            }
            None => println!("\nThe detector opened no verdict after the fault."),
        }
    }
    println!("\nVerdicts are in the table `verdicts`, anomalies in `anomalies`. Explore with `epicenter sql` (add --data DIR if you used --data):");
    let kind = truth.first().map_or("none", |fault| fault.kind.as_str());
    for query in suggested_queries(kind, &scenario.name) {
        println!("  epicenter sql \"{query}\"");
    }
}

/// Three queries that show the scenario's fault in the stored samples.
fn suggested_queries(kind: &str, scenario: &str) -> Vec<String> {
    let this_run = format!("labels['scenario'] = '{}'", scenario.replace('\'', "''"));
    let specific = match kind {
        "node_loss" => format!("SELECT labels['pod'] AS node, toStartOfMinute(time) AS minute, max(value) - min(value) AS new_connections FROM samples WHERE metric = 'redis_connections_received_total' AND {this_run} GROUP BY node, minute ORDER BY minute, node"),
        "slow_node" => format!("SELECT labels['name'] AS redis_node, round(avg(value), 2) AS active_connections FROM samples WHERE metric = 'commons_pool2_num_active_objects' AND {this_run} GROUP BY redis_node ORDER BY active_connections DESC"),
        "cold_start" => format!("SELECT labels['pod'] AS pod, max(value) AS longest_gc_pause_seconds FROM samples WHERE metric = 'jvm_gc_pause_seconds_max' AND {this_run} GROUP BY pod ORDER BY longest_gc_pause_seconds DESC LIMIT 5"),
        "slow_database" => format!("SELECT labels['pool'] AS pool, max(value) AS pending_threads FROM samples WHERE metric = 'hikaricp_connections_pending' AND {this_run} GROUP BY pool ORDER BY pending_threads DESC"),
        "retry_storm" => format!("SELECT dc, labels['code'] AS code, max(value) - min(value) AS requests FROM samples WHERE metric = 'http_requests_total' AND {this_run} GROUP BY dc, code ORDER BY dc, code"),
        "dc_degradation" => format!("SELECT dc AS caller_dc, labels['remote'] AS remote, round(1000 * (maxIf(value, metric LIKE '%_sum') - minIf(value, metric LIKE '%_sum')) / (maxIf(value, metric LIKE '%_count') - minIf(value, metric LIKE '%_count')), 2) AS mean_command_ms FROM samples WHERE metric IN ('lettuce_command_completion_seconds_sum', 'lettuce_command_completion_seconds_count') AND {this_run} GROUP BY caller_dc, remote ORDER BY mean_command_ms DESC LIMIT 10"),
        "session_loss" => format!("SELECT labels['pod'] AS pod, toStartOfMinute(time) AS minute, max(value) AS voice_state_sup_mailbox FROM samples WHERE metric = 'erlang_vm_process_message_queue_len' AND labels['registered_name'] = 'voice_state_sup' AND {this_run} GROUP BY pod, minute ORDER BY minute, pod"),
        _ => format!("SELECT service, count(DISTINCT metric) AS metrics, count() AS samples FROM samples WHERE {this_run} GROUP BY service ORDER BY service"),
    };
    vec![
        specific,
        format!("SELECT service, dc, host, countIf(up = 0) AS failed_scrapes, round(max(duration_seconds), 3) AS slowest_scrape_seconds FROM scrapes WHERE job = service GROUP BY service, dc, host ORDER BY failed_scrapes DESC, service, host"),
        "SELECT scenario, kind, dcs, hosts, instances, onset FROM ground_truth ORDER BY onset DESC LIMIT 5".to_string(),
    ]
}
