//! `epicenter`: one binary, subcommands per job. Thin: parse arguments, wire the stages (the
//! crates `epicenter-collector`, `-store`, `-detector`, `-oncall`, `-web`, `-fleet`, `-eval`),
//! map results to exit codes. Product logic lives in those crates, not here.

mod check;
mod config;
mod config_file;
mod demo;
mod detect;
mod eval;
mod eval_dataset;
mod eval_live;
mod fleet;
mod open;
mod replay;
mod run;
mod serve;
mod signals;
mod sql;
mod stages;
mod status;
mod style;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// epicenter names the failing datacenter and host when a fleet lights up.
///
/// It scrapes client, connection-pool and mailbox metrics into ClickHouse and correlates
/// spikes across the service dependency graph: `run` scrapes and detects live, `demo` shows
/// it on a simulated fleet, `replay` and `eval` judge stored or scripted incidents.
/// Logs: EPICENTER_LOG=info (or debug, per crate: epicenter_collector=debug, epicenter_store=debug).
#[derive(Parser, Debug)]
#[command(name = "epicenter", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Validate inputs without running anything.
    #[command(subcommand)]
    Check(check::CheckCommand),

    /// Scrape the configured targets into the store until Ctrl-C (or --for).
    ///
    /// Example:
    ///   scripts/setup    # once: fetches the embedded engine
    ///   epicenter run --config docs/examples/epicenter.yml --for 1m
    #[command(verbatim_doc_comment)]
    Run(run::RunArgs),

    /// Judge a sharded fleet: read what the collectors store, detect, page (scrapes nothing).
    ///
    /// Collectors share the targets and write one ClickHouse server without a detector of
    /// their own; one `detect` reads back what its rules name every half tick and judges the
    /// whole fleet, with the same API, incident pages and notifiers as `run` (docs/scaling.md).
    ///
    /// Example (one configuration with storage.clickhouse, listen addresses apart):
    ///   epicenter run --config fleet.yml --shard 0/3 --no-detector     # and 1/3, 2/3
    ///   epicenter detect --config fleet.yml
    #[command(verbatim_doc_comment)]
    Detect(detect::DetectArgs),

    /// Run a simulated fleet, inject a scenario's faults, scrape it all into the embedded store.
    ///
    /// The fleet (API tier, JVM backend, Redis nodes over 3 datacenters) serves real
    /// exporters on 127.0.0.1; the timeline shows what happens; the ground truth and the
    /// samples end up in a store of this run's own (./demo-data/<scenario>-<start>, printed,
    /// with the `epicenter sql` commands to paste).
    ///
    /// Examples:
    ///   scripts/setup    # once: fetches the embedded engine
    ///   epicenter demo                                  # redis-node-loss, about 30 s
    ///   epicenter demo --scenario backend-cold-start
    ///   epicenter demo --scenario my-incident.yml --speed 50   # docs/scenarios.md
    #[command(verbatim_doc_comment)]
    Demo(demo::DemoArgs),

    /// Serve a simulated fleet's exporters on 127.0.0.1 until Ctrl-C, for any scraper.
    ///
    /// Example (then point Prometheus or `epicenter run` at the file with file_sd_configs):
    ///   epicenter fleet --scenario redis-node-loss --speed 1 --targets-file fleet.json
    /// The samples carry the simulated time: at a speed above 1 it runs ahead of the wall
    /// clock, which Prometheus refuses beyond about 10 minutes; use --speed 1 there.
    #[command(verbatim_doc_comment)]
    Fleet(fleet::FleetArgs),

    /// Score the detector on scenarios: AC@1, AC@3, Avg@5 at host and datacenter level, time
    /// to detect and false verdicts, beside two reference rankings from the literature.
    ///
    /// Runs headless and faster than real time (no store needed), or, with --load N, on the
    /// live path (served fleet, collector, live detector, store) beside N busy threads.
    /// Examples:
    ///   epicenter eval                        # every shipped scenario
    ///   epicenter eval redis-node-loss my.yml --json
    ///   epicenter eval --load 4 redis-node-loss   # live, 4 busy threads beside it (~30 s)
    ///   epicenter eval --dataset petshop ../shared/datasets/petshop
    ///   epicenter eval --dataset sockshop ../shared/datasets/realdev/sock-shop \
    ///       --prometheus http://127.0.0.1:19917 --config cc.yml   # real incidents
    ///   epicenter eval --cases incidents.csv --prometheus http://prometheus:9090 --config epicenter.yml
    #[command(verbatim_doc_comment)]
    Eval(eval::EvalArgs),

    /// Recompute anomalies and verdicts from stored samples, for a past period: from
    /// epicenter's store, or from a Prometheus server's samples (--prometheus).
    ///
    /// Examples:
    ///   epicenter replay --config epicenter.yml --from 2026-12-01T14:00:00Z --to 2026-12-01T14:30:00Z
    ///   epicenter replay --data ./demo-data --json
    ///   epicenter replay --prometheus http://prometheus:9090 --config epicenter.yml \
    ///       --from 2026-12-01T14:00:00Z --to 2026-12-01T16:00:00Z
    #[command(verbatim_doc_comment)]
    Replay(replay::ReplayArgs),

    /// Query the store (ClickHouse SQL) and print the result; read-only unless --write.
    ///
    /// While `epicenter run` or `demo` holds the embedded store, the query goes to its live
    /// SQL endpoint (storage.http; read-only, as the first of storage.http.users).
    ///
    /// Examples:
    ///   epicenter sql "SELECT job, instance, up, error FROM scrapes ORDER BY time DESC LIMIT 10"
    ///   epicenter sql --format CSV "SELECT metric, count() FROM samples GROUP BY metric"
    ///   epicenter sql --data demo-data/redis-node-loss-20261202T001204Z -f question.sql
    ///   echo "SELECT count() FROM verdicts" | epicenter sql --config epicenter.yml
    #[command(verbatim_doc_comment)]
    Sql(sql::SqlArgs),

    /// Moved: the workload generator is its own program, `epicenter-loadgen` (real/loadgen).
    #[command(hide = true, disable_help_flag = true)]
    Loadgen {
        /// What was given after `loadgen`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// Rust's allocations go through mimalloc: a scrape allocates and frees its body, parse and
/// rows every second per target, and glibc's malloc and free were about 6 % of `epicenter
/// run`'s CPU at 100,000 samples per second (`perf`, 2026-12-05; docs/schema.md, Cost). The
/// embedded ClickHouse engine keeps its own allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("EPICENTER_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(style::LogWriter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match cli.command {
        Command::Check(command) => check::run(command),
        Command::Run(args) => run::run(&args),
        Command::Detect(args) => detect::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Eval(args) => eval::run(&args),
        Command::Replay(args) => replay::run(&args),
        Command::Fleet(args) => fleet::run(&args),
        Command::Sql(args) => sql::run(&args),
        Command::Loadgen { args } => {
            eprintln!(
                "error: the workload generator is now a program of its own: epicenter-loadgen {} (build it with `cargo build --release -p epicenter-loadgen`; docs/real.md)",
                args.join(" ")
            );
            ExitCode::from(2)
        }
    }
}
