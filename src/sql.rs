//! `epicenter sql`: ask the store a question.

use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use epicenter_store::backend::is_read_only_refusal;
use epicenter_store::{OpenError, Store};

use crate::open::{refused, runtime, store_config};

/// Arguments of `epicenter sql`.
#[derive(Args, Debug)]
pub(crate) struct SqlArgs {
    /// The query, in ClickHouse SQL (leading `--` comments are fine). Tables: samples,
    /// series, sample_values, scrapes, anomalies, verdicts, ground_truth (docs/schema.md). Without it,
    /// the query is read from --file or from standard input.
    #[arg(value_name = "QUERY", allow_hyphen_values = true, conflicts_with = "file")]
    query: Option<String>,

    /// Read the query from FILE (`-` for standard input).
    #[arg(long, short, value_name = "FILE")]
    file: Option<PathBuf>,

    /// Configuration naming the store (embedded, or `storage.clickhouse`); without it, the
    /// embedded store in ./data.
    #[arg(long, short, value_name = "FILE")]
    config: Option<PathBuf>,

    /// The embedded store's directory, instead of ./data or the configuration's (e.g. the
    /// folder `epicenter demo` printed).
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,

    /// Any ClickHouse output format: PrettyCompactMonoBlock (default, a readable table),
    /// TabSeparated, CSV, JSONEachRow, Markdown, …
    #[arg(long, default_value = "PrettyCompactMonoBlock")]
    format: String,

    /// Allow statements that change the store (INSERT, ALTER, DROP, …) and query-level
    /// SETTINGS. Without it the query runs with ClickHouse's `readonly = 1`.
    #[arg(long)]
    write: bool,
}

/// The query text: the argument, the file, or standard input when it is not a terminal.
fn query_text(args: &SqlArgs) -> Result<String, String> {
    if let Some(query) = &args.query {
        return Ok(query.clone());
    }
    let mut text = String::new();
    match &args.file {
        Some(path) if path.as_os_str() != "-" => {
            return std::fs::read_to_string(path).map_err(|error| format!("cannot read {}: {error}", path.display()));
        }
        Some(_) => {}
        None if std::io::stdin().is_terminal() => {
            return Err("no query: give it as an argument, with --file FILE, or on standard input".to_string());
        }
        None => {}
    }
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|error| format!("cannot read the query from standard input: {error}"))?;
    Ok(text)
}

/// Runs `epicenter sql`.
pub(crate) fn run(args: &SqlArgs) -> ExitCode {
    let query = match query_text(args) {
        Ok(query) if !query.trim().is_empty() => query,
        Ok(_) => {
            eprintln!("error: the query is empty");
            return ExitCode::from(2);
        }
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let config = match store_config(args.config.as_ref(), args.data.as_ref()) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    // A store held by a running epicenter is asked through that epicenter's live endpoint.
    let mut live = false;
    let (store, place) = match Store::open_existing(&config.storage, &runtime) {
        Ok(store) => {
            let place = store.describe(&config.storage);
            (store, place)
        }
        Err(OpenError::Held(held)) => match Store::open_live(&config.storage) {
            Ok(_) if args.write => {
                eprintln!("error: {held}; its live SQL endpoint only reads, so --write needs that process stopped");
                return ExitCode::from(1);
            }
            Ok((store, url)) => {
                live = true;
                (store, format!("the running epicenter's live endpoint at {url}"))
            }
            Err(error) => {
                eprintln!("error: {held}; {error}");
                return ExitCode::from(1);
            }
        },
        Err(error) => return refused(error),
    };
    let answer = if args.write {
        store.query(&runtime, &query, &args.format)
    } else {
        store.query_read_only(&runtime, &query, &args.format)
    };
    match answer {
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
        Err(message) if !args.write && is_read_only_refusal(&message) => {
            let way_out = if live {
                "a running epicenter's live endpoint only reads"
            } else {
                "add --write to allow writes and settings"
            };
            eprintln!(
                "error: `epicenter sql` only reads: this query would write, change a setting or call a table function ({way_out}); {place} said: {message}"
            );
            ExitCode::from(1)
        }
        Err(message) => {
            eprintln!("error: the query failed; {place} said: {message}");
            if live && message.contains("AUTHENTICATION_FAILED") {
                eprintln!("hint: pass --config naming the configuration epicenter runs with: `sql` logs in as the first of its storage.http.users");
            }
            ExitCode::from(1)
        }
    }
}
