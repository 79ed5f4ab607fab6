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

/// The configuration `--config` names (defaults without it), with `--data` pointing the
/// embedded store at another directory.
pub(crate) fn store_config(config: Option<&PathBuf>, data: Option<&PathBuf>) -> Result<Config, ExitCode> {
    let mut config = match config {
        Some(path) => load_config(path)?.0,
        None => Config::default(),
    };
    if let Some(data) = data {
        config.storage.clickhouse = None;
        config.storage.embedded = Some(epicenter_collector::config::EmbeddedConfig { path: data.clone() });
    }
    Ok(config)
}

/// Opens the store `config` names for reading: a missing embedded store is an error (rather
/// than a new empty one).
pub(crate) fn open_existing(config: &Config) -> Result<(tokio::runtime::Runtime, crate::run::Store), ExitCode> {
    if config.storage.clickhouse.is_none() {
        let path = config.storage.embedded_path();
        if !path.exists() {
            eprintln!(
                "error: no epicenter store at {} (relative paths are read from the current directory): run `epicenter run` first, or pass --config or --data naming the store",
                path.display()
            );
            return Err(ExitCode::from(1));
        }
        // chDB makes any directory a store on open; a folder without the `epicenter`
        // database's definition (`metadata/epicenter.sql`, which `run` and `demo` leave) is
        // someone else's, and reading it must not write a store into it.
        if !path.join("metadata").join("epicenter.sql").is_file() {
            eprintln!(
                "error: {} is not an epicenter store (no metadata/epicenter.sql in it, as `epicenter run` and `epicenter demo` leave): pass --config or --data naming the store",
                path.display()
            );
            return Err(ExitCode::from(1));
        }
    }
    let runtime = runtime()?;
    let store = open_store(config, &runtime)?;
    Ok((runtime, store))
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
