//! `epicenter sql`: ask the store a question.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::open::{open_existing, store_config};

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
    let config = match store_config(args.config.as_ref(), args.data.as_ref()) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let (runtime, store) = match open_existing(&config) {
        Ok(opened) => opened,
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
