//! `epicenter check …`: validate a metrics body (and, later, a config file).

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use epicenter_collector::exposition::{parse, Exposition, FormatChoice, ParseError, ParseOptions, Rule, Validation};
use serde_json::{json, Map, Value};

/// Warnings printed on stderr before the rest are summarised in one line.
const MAX_WARNINGS_SHOWN: usize = 20;

/// What `epicenter check` can validate.
#[derive(Subcommand, Debug)]
pub(crate) enum CheckCommand {
    /// Check a /metrics body (Prometheus text 0.0.4 or OpenMetrics 1.0).
    ///
    /// Exit status: 0 when the body would be ingested (warnings, if any, go to stderr),
    /// 1 when it would not (the error, as LINE:COLUMN: reason, goes to stderr), 2 when the
    /// file cannot be read. Like `promtool check metrics`, but it also reads OpenMetrics,
    /// exemplars and Prometheus 3 quoted UTF-8 names.
    ///
    /// Examples:
    ///   curl -s http://127.0.0.1:9121/metrics | epicenter check metrics
    ///   epicenter check metrics --format openmetrics --strict body.txt
    ///   epicenter check metrics --json body.txt | jq '.families[].name'
    #[command(verbatim_doc_comment)]
    Metrics(MetricsArgs),
}

/// Arguments of `epicenter check metrics`.
#[derive(Args, Debug)]
pub(crate) struct MetricsArgs {
    /// File holding the body; `-` or nothing reads standard input.
    #[arg(value_name = "FILE|-")]
    file: Option<PathBuf>,

    /// Format to read the body as. `auto` picks OpenMetrics when the last line is `# EOF`
    /// and text 0.0.4 otherwise.
    #[arg(long, value_enum, default_value_t = FormatArg::Auto)]
    format: FormatArg,

    /// Reject every violation of the format's specification, including those Prometheus's
    /// scraper tolerates (unsorted buckets, interleaved families, exemplars on `_count`, …),
    /// which are otherwise reported as warnings.
    #[arg(long)]
    strict: bool,

    /// Print the parsed families as JSON on stdout (name, type, unit, help, samples with
    /// labels, value, timestamp in seconds, exemplar). Non-finite values are the strings
    /// "NaN", "+Inf" and "-Inf".
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
    }
}

fn check_metrics(args: MetricsArgs) -> ExitCode {
    let (source, body) = match read_body(args.file.as_ref()) {
        Ok(read) => read,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
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
    match parse(&body, options) {
        Ok(exposition) => {
            for warning in exposition.warnings.iter().take(MAX_WARNINGS_SHOWN) {
                eprintln!("warning: {source}:{warning}");
            }
            if exposition.warnings.len() > MAX_WARNINGS_SHOWN {
                eprintln!(
                    "warning: {source}: {} more warnings not shown (--json lists them all)",
                    exposition.warnings.len() - MAX_WARNINGS_SHOWN
                );
            }
            if args.json {
                println!("{}", to_json(&exposition));
            } else {
                let tolerated = exposition
                    .warnings
                    .iter()
                    .filter(|warning| warning.rule != Rule::FormatFallback)
                    .count();
                let note = match (exposition.warnings.len(), tolerated) {
                    (0, _) => String::new(),
                    (1, 0) => ", 1 warning".to_string(),
                    (count, 0) => format!(", {count} warnings"),
                    (1, _) => ", 1 warning; --strict rejects the body".to_string(),
                    (count, _) => format!(", {count} warnings; --strict rejects the body"),
                };
                eprintln!(
                    "{source}: ok: {} families, {} samples ({}{note})",
                    exposition.families.len(),
                    exposition.sample_count(),
                    exposition.format.as_str(),
                );
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            report(&source, &error);
            ExitCode::from(1)
        }
    }
}

fn report(source: &str, error: &ParseError) {
    eprintln!("error: {source}:{error}");
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

fn number(value: f64) -> Value {
    if value.is_nan() {
        Value::from("NaN")
    } else if value == f64::INFINITY {
        Value::from("+Inf")
    } else if value == f64::NEG_INFINITY {
        Value::from("-Inf")
    } else {
        json!(value)
    }
}

fn labels_json(exposition: &Exposition<'_>, range: epicenter_collector::exposition::LabelRange) -> Value {
    let mut map = Map::new();
    for label in exposition.labels_in(range) {
        map.insert(label.name.to_string(), Value::from(label.value.as_ref()));
    }
    Value::Object(map)
}

/// The `--json` document: `{"format", "families": [{"name", "type", "unit", "help",
/// "samples": [{"name", "labels", "value", "timestamp", "exemplar"}]}], "warnings"}`.
fn to_json(exposition: &Exposition<'_>) -> Value {
    let families: Vec<Value> = exposition
        .families
        .iter()
        .map(|family| {
            let samples: Vec<Value> = exposition
                .samples_of(family)
                .iter()
                .map(|sample| {
                    json!({
                        "name": sample.name,
                        "labels": labels_json(exposition, sample.labels),
                        "value": number(sample.value),
                        "timestamp": sample.timestamp.map(number),
                        "exemplar": sample.exemplar.map(|exemplar| json!({
                            "labels": labels_json(exposition, exemplar.labels),
                            "value": number(exemplar.value),
                            "timestamp": exemplar.timestamp.map(number),
                        })),
                    })
                })
                .collect();
            json!({
                "name": family.name,
                "type": family.metric_type,
                "unit": family.unit,
                "help": family.help,
                "samples": samples,
            })
        })
        .collect();
    let warnings: Vec<Value> = exposition
        .warnings
        .iter()
        .map(|warning| json!({"line": warning.line, "column": warning.column, "rule": warning.rule, "message": warning.message}))
        .collect();
    json!({"format": exposition.format, "families": families, "warnings": warnings})
}
