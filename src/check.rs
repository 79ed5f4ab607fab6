//! `epicenter check …`: validate a metrics body or a configuration file.

mod metrics;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use epicenter_config::PromDuration;

use crate::config::EXIT_CONFIG;
use crate::style::count;

/// What `epicenter check` can validate.
#[derive(Subcommand, Debug)]
pub(crate) enum CheckCommand {
    /// Check a /metrics body (Prometheus text 0.0.4 or OpenMetrics 1.0).
    ///
    /// By default the check answers "would a Prometheus-compatible scraper ingest this body?":
    /// syntax errors fail; violations of family rules that leave the data readable (unsorted
    /// buckets, interleaved families, exemplars on _count, negative counters, …) are printed
    /// as warnings, sorted by line. --strict turns them into errors. Most family rules are
    /// OpenMetrics 1.0 rules; text 0.0.4 is held to what promtool's parser (expfmt) checks.
    /// The full list is in docs/exposition.md.
    ///
    /// --lint adds the naming and best-practice checks of `promtool check metrics`
    /// (Prometheus 2.42's promlint), with promtool's messages, one finding a line on stdout:
    ///   body.txt:12: job_latency_milliseconds: use base unit "seconds" instead of "milliseconds"
    /// An OpenMetrics body is linted by the names its samples carry (a counter `x` as
    /// `x_total`), where promtool cannot read it or reads it wrongly.
    ///
    /// Exit status: 0 accepted (warnings go to stderr), 1 rejected (the error, as
    /// FILE:LINE:COLUMN: reason, goes to stderr), 2 bad arguments, 3 the input cannot be read,
    /// 4 accepted with lint findings (--lint).
    ///
    /// Examples:
    ///   curl -s http://127.0.0.1:9121/metrics | epicenter check metrics
    ///   epicenter check metrics --format openmetrics --strict body.txt
    ///   epicenter check metrics --json body.txt | jq '.families[].name'
    ///   epicenter check metrics --lint body.txt
    ///   epicenter check metrics --lint --json body.txt | jq -r '.lint[] | "\(.metric) \(.message)"'
    #[command(verbatim_doc_comment)]
    Metrics(metrics::MetricsArgs),

    /// Check an epicenter configuration file without starting anything.
    ///
    /// Reads the YAML (Prometheus-shaped `global` and `scrape_configs`, plus `storage`,
    /// `batching` and `placement`), then checks what needs no network: intervals and timeouts,
    /// targets (host:port), relabel rules (regexes compile, actions have what they need),
    /// storage choices. Every problem is printed with its key path; unknown keys are errors.
    ///
    /// Exit status: 0 valid, 64 invalid or unreadable (what `epicenter run` exits with for
    /// the same file), 2 bad arguments.
    ///
    /// Example:
    ///   epicenter check config docs/examples/epicenter.yml
    #[command(verbatim_doc_comment)]
    Config(ConfigArgs),
}

/// Arguments of `epicenter check config`.
#[derive(Args, Debug)]
pub(crate) struct ConfigArgs {
    /// The configuration file (YAML).
    #[arg(value_name = "FILE", required_unless_present = "config", conflicts_with = "config")]
    file: Option<PathBuf>,
    /// The same file, named the way `run --config` names it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

/// Runs a `check` subcommand and returns the process exit code.
pub(crate) fn run(command: CheckCommand) -> ExitCode {
    match command {
        CheckCommand::Metrics(args) => metrics::check_metrics(args),
        CheckCommand::Config(args) => check_config(&args),
    }
}

fn check_config(args: &ConfigArgs) -> ExitCode {
    // clap requires one of the two.
    let Some(file) = args.file.as_ref().or(args.config.as_ref()) else {
        return ExitCode::from(2);
    };
    let source = file.display().to_string();
    let config = match crate::config_file::read(file) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let jobs = match config.validate() {
        Ok(jobs) => jobs,
        Err(errors) => {
            for error in &errors {
                eprintln!("error: {source}: {error}");
            }
            eprintln!("{source}: {} found", count(errors.len() as u64, "problem", "problems"));
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    if config.detector.enabled {
        match config.detector.load_rules() {
            Ok(rules) => {
                // Rules that cannot read their family, as far as the formats alone say;
                // `replay --prometheus` checks them against a server's families too.
                let rules_source = config.detector.rules_source();
                for warning in epicenter_detector::rules::shape_warnings(&rules) {
                    eprintln!("warning: {source}: {rules_source}: {warning}");
                }
            }
            Err(error) => {
                eprintln!("error: {source}: {error}");
                eprintln!("{source}: 1 problem found");
                return ExitCode::from(EXIT_CONFIG);
            }
        }
    }
    // The secrets and TLS files `run` reads at start-up: a variable that is not set or a
    // file that cannot be read or parsed fails here as it would there.
    let read_at_start_up = || -> Result<(), String> {
        if let Some(clickhouse) = &config.storage.clickhouse {
            clickhouse.password()?;
            clickhouse.tls_client_config()?;
        }
        config.storage.http.credentials()?;
        config.server.bearer_token()?;
        config.server.tls_server_config().map(|_| ())
    };
    if let Err(error) = read_at_start_up() {
        eprintln!("error: {source}: {error}");
        eprintln!("{source}: 1 problem found");
        return ExitCode::from(EXIT_CONFIG);
    }
    for warning in config.unsupported() {
        eprintln!("warning: {source}: {warning}");
    }
    let static_targets: usize = jobs
        .iter()
        .flat_map(|job| &job.config.static_configs)
        .map(|static_config| static_config.targets.len())
        .sum();
    let file_patterns: usize = jobs
        .iter()
        .flat_map(|job| &job.config.file_sd_configs)
        .map(|file_sd| file_sd.files.len())
        .sum();
    let storage = match &config.storage.clickhouse {
        Some(clickhouse) => format!(
            "ClickHouse at {} (database {})",
            epicenter_config::redacted_url(&clickhouse.url),
            clickhouse.database
        ),
        None => format!("embedded at {}", config.storage.embedded_path().display()),
    };
    eprintln!(
        "{source}: ok: {}, {}{}, storage {storage}, retention {}",
        count(jobs.len() as u64, "job", "jobs"),
        count(static_targets as u64, "static target", "static targets"),
        if file_patterns > 0 {
            format!(
                " + {}",
                count(file_patterns as u64, "file_sd pattern", "file_sd patterns")
            )
        } else {
            String::new()
        },
        PromDuration(config.storage.retention()),
    );
    for job in &jobs {
        eprintln!(
            "  job {}: every {} (timeout {}), {} relabel and {} metric relabel steps",
            job.config.job_name,
            PromDuration(job.interval),
            PromDuration(job.timeout),
            job.relabel.len(),
            job.metric_relabel.len()
        );
    }
    ExitCode::SUCCESS
}
