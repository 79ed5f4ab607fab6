//! `epicenter check …`: validate a metrics body or a configuration file.

use std::io::{BufWriter, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use epicenter_collector::exposition::{parse, write_json, FormatChoice, ParseOptions, Validation};
use epicenter_config::PromDuration;

use crate::config::{Config, EXIT_CONFIG};
use crate::style::count;

/// Warnings printed on stderr before the rest are summarised in one line.
const MAX_WARNINGS_SHOWN: usize = 20;

/// Exit status when the input cannot be read (usage errors exit 2, as clap does).
const EXIT_UNREADABLE: u8 = 3;

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
    /// Exit status: 0 accepted (warnings go to stderr), 1 rejected (the error, as
    /// FILE:LINE:COLUMN: reason, goes to stderr), 2 bad arguments, 3 the input cannot be read.
    ///
    /// Examples:
    ///   curl -s http://127.0.0.1:9121/metrics | epicenter check metrics
    ///   epicenter check metrics --format openmetrics --strict body.txt
    ///   epicenter check metrics --json body.txt | jq '.families[].name'
    #[command(verbatim_doc_comment)]
    Metrics(MetricsArgs),

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

/// Arguments of `epicenter check metrics`.
#[derive(Args, Debug)]
pub(crate) struct MetricsArgs {
    /// File holding the body; `-` or nothing reads standard input.
    #[arg(value_name = "FILE|-")]
    file: Option<PathBuf>,

    /// Format to read the body as. `auto` picks OpenMetrics when the last line is `# EOF` and
    /// text 0.0.4 otherwise; it reads a text body with `# EOF` appended as text, and an
    /// OpenMetrics snippet without `# EOF` that carries exemplars as OpenMetrics (both with a
    /// warning).
    #[arg(long, value_enum, default_value_t = FormatArg::Auto)]
    format: FormatArg,

    /// Reject every violation of the format's specification, including those Prometheus's
    /// scraper tolerates, which are otherwise reported as warnings.
    #[arg(long)]
    strict: bool,

    /// Print the parsed families as JSON on stdout (name, type, unit, help, samples with
    /// labels, value, timestamp in seconds, exemplar; then the first 1,000 warnings).
    /// Non-finite values are the strings "NaN", "+Inf" and "-Inf".
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum FormatArg {
    Auto,
    Text,
    Openmetrics,
}

/// Runs a `check` subcommand and returns the process exit code.
pub(crate) fn run(command: CheckCommand) -> ExitCode {
    match command {
        CheckCommand::Metrics(args) => check_metrics(args),
        CheckCommand::Config(args) => check_config(&args),
    }
}

fn check_config(args: &ConfigArgs) -> ExitCode {
    // clap requires one of the two.
    let Some(file) = args.file.as_ref().or(args.config.as_ref()) else {
        return ExitCode::from(2);
    };
    let source = file.display().to_string();
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(error) => {
            eprintln!("error: cannot read {source}: {error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let config = match Config::from_yaml(&text) {
        Ok(config) => config,
        Err(errors) => {
            crate::config::print_read_errors(&source, &errors);
            return ExitCode::from(EXIT_CONFIG);
        }
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
        if let Err(error) = config.detector.load_rules() {
            eprintln!("error: {source}: {error}");
            eprintln!("{source}: 1 problem found");
            return ExitCode::from(EXIT_CONFIG);
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

fn check_metrics(args: MetricsArgs) -> ExitCode {
    let (source, body) = match read_body(args.file.as_ref()) {
        Ok(read) => read,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(EXIT_UNREADABLE);
        }
    };
    let options = ParseOptions {
        format: match args.format {
            FormatArg::Auto => FormatChoice::Auto,
            FormatArg::Text => FormatChoice::Text,
            FormatArg::Openmetrics => FormatChoice::OpenMetrics,
        },
        validation: if args.strict {
            Validation::Strict
        } else {
            Validation::Prometheus
        },
    };
    let mut exposition = match parse(&body, options) {
        Ok(exposition) => exposition,
        Err(error) => {
            eprintln!("error: {source}:{error}");
            return ExitCode::from(1);
        }
    };
    if let Err(error) = exposition.check_duplicates(options.validation) {
        eprintln!("error: {source}:{error}");
        return ExitCode::from(1);
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        eprintln!("warning: {source}: body is empty: no families (is the exporter answering?)");
    }
    for warning in exposition.warnings.iter().take(MAX_WARNINGS_SHOWN) {
        eprintln!("warning: {source}:{warning}");
    }
    let total_warnings = exposition.warning_count();
    if total_warnings > MAX_WARNINGS_SHOWN {
        let listed = format!("; --json lists the first {}", exposition.warnings.len());
        eprintln!(
            "warning: {source}: {} more warnings not shown{listed}",
            total_warnings - MAX_WARNINGS_SHOWN
        );
    }
    if args.json {
        let stdout = std::io::stdout();
        let mut out = BufWriter::new(stdout.lock());
        if let Err(error) = write_json(&exposition, &mut out).and_then(|()| out.flush()) {
            eprintln!("error: cannot write JSON to standard output: {error}");
            return ExitCode::from(EXIT_UNREADABLE);
        }
    }
    let tolerated = exposition.strict_rejections();
    let mut note = String::new();
    if total_warnings > 0 {
        note.push_str(&format!(", {}", count(total_warnings as u64, "warning", "warnings")));
        if tolerated > 0 {
            note.push_str("; --strict rejects the body");
        }
    }
    eprintln!(
        "{source}: ok: {}, {} ({}{note})",
        count(exposition.families.len() as u64, "family", "families"),
        count(exposition.sample_count() as u64, "sample", "samples"),
        exposition.format.as_str(),
    );
    ExitCode::SUCCESS
}

fn read_body(file: Option<&PathBuf>) -> Result<(String, Vec<u8>), String> {
    match file {
        Some(path) if path.as_os_str() != "-" => std::fs::read(path)
            .map(|body| (path.display().to_string(), body))
            .map_err(|error| format!("cannot read {}: {error}", path.display())),
        _ => {
            let mut body = Vec::new();
            std::io::stdin()
                .read_to_end(&mut body)
                .map_err(|error| format!("cannot read standard input: {error}"))?;
            Ok(("<stdin>".to_string(), body))
        }
    }
}
