//! `epicenter sql`: ask the store a question.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use epicenter_collector::config::Config;

use crate::run::{load_config, open_store, runtime};

/// Arguments of `epicenter sql`.
#[derive(Args, Debug)]
pub(crate) struct SqlArgs {
    /// The query, in ClickHouse SQL. Tables: samples, scrapes, samples_1m, anomalies,
    /// verdicts, ground_truth (docs/schema.md).
    #[arg(value_name = "QUERY")]
    query: String,

    /// Configuration naming the store (embedded, or `storage.clickhouse`); without it, the
    /// embedded store in ./data.
    #[arg(long, short, value_name = "FILE")]
    config: Option<PathBuf>,

    /// The embedded store's directory, instead of ./data or the configuration's (e.g. the
    /// `--data` of `epicenter demo`).
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,

    /// Any ClickHouse output format: PrettyCompactMonoBlock (default, a readable table),
    /// TabSeparated, CSV, JSONEachRow, Markdown, …
    #[arg(long, default_value = "PrettyCompactMonoBlock")]
    format: String,
}

/// Runs `epicenter sql`.
pub(crate) fn run(args: &SqlArgs) -> ExitCode {
    let config = match &args.config {
        Some(path) => match load_config(path) {
            Ok((config, _)) => config,
            Err(code) => return code,
        },
        None => Config::default(),
    };
    let mut config = config;
    if let Some(data) = &args.data {
        config.storage.clickhouse = None;
        config.storage.embedded = Some(epicenter_collector::config::EmbeddedConfig { path: data.clone() });
    }
    if config.storage.clickhouse.is_none() {
        let path = config.storage.embedded_path();
        if !path.exists() {
            eprintln!(
                "error: no epicenter store at {} (relative paths are read from the current directory): run `epicenter run` first, or pass --config naming the store",
                path.display()
            );
            return ExitCode::from(1);
        }
    }
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let store = match open_store(&config, &runtime) {
        Ok(store) => store,
        Err(code) => return code,
    };
    match store.query(&runtime, &args.query, &args.format) {
        Ok(output) => {
            if output.is_empty() {
                // Pretty formats print nothing for an empty result; say so (on stderr, so
                // piped output stays clean).
                eprintln!("(0 rows)");
                return ExitCode::SUCCESS;
            }
            let mut stdout = std::io::stdout().lock();
            if stdout.write_all(&output).and_then(|()| stdout.flush()).is_err() {
                return ExitCode::from(1);
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(1)
        }
    }
}
