//! Start-up glue shared by the subcommands: the async runtime, the store a configuration
//! names and the scenario a command line names, with problems printed and mapped to exit codes (64 for a configuration that cannot
//! be used, 1 for a failure).

use std::path::PathBuf;
use std::process::ExitCode;

use epicenter_fleet::Scenario;
use epicenter_store::config::EmbeddedConfig;
use epicenter_store::{OpenError, Store};

use crate::config::{Config, EXIT_CONFIG};

/// A tokio runtime for the command, or the reason it could not start.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| {
            eprintln!("error: cannot start the async runtime: {error}");
            ExitCode::from(1)
        })
}

/// Prints why a store could not be opened and picks the exit status.
pub(crate) fn refused(error: OpenError) -> ExitCode {
    eprintln!("error: {error}");
    match error {
        OpenError::Config(_) => ExitCode::from(EXIT_CONFIG),
        OpenError::Failed(_) | OpenError::Held(_) => ExitCode::from(1),
    }
}

/// Opens the store the configuration names and creates the schema (idempotent).
pub(crate) fn open_store(config: &Config, runtime: &tokio::runtime::Runtime) -> Result<Store, ExitCode> {
    Store::open(&config.storage, runtime).map_err(refused)
}

/// The configuration `--config` names (defaults without it), with `--data` pointing the
/// embedded store at another directory.
pub(crate) fn store_config(config: Option<&PathBuf>, data: Option<&PathBuf>) -> Result<Config, ExitCode> {
    let mut config = match config {
        Some(path) => crate::config_file::load(path)?.0,
        None => Config::default(),
    };
    if let Some(data) = data {
        config.storage.clickhouse = None;
        config.storage.embedded = Some(EmbeddedConfig {
            path: Some(data.clone()),
        });
    }
    Ok(config)
}

/// Opens the store `config` names for reading: a missing embedded store is an error (rather
/// than a new empty one).
pub(crate) fn open_existing(config: &Config) -> Result<(tokio::runtime::Runtime, Store), ExitCode> {
    let runtime = runtime()?;
    let store = Store::open_existing(&config.storage, &runtime).map_err(refused)?;
    Ok((runtime, store))
}

/// A shipped scenario or a file, with `--speed` (checked against the scenario's cap) in
/// place of its own; errors printed, exit 64.
pub(crate) fn load_scenario(name: &str, speed: Option<f64>) -> Result<Scenario, ExitCode> {
    let mut scenario = Scenario::load(name).map_err(|error| {
        eprintln!("error: scenario {error}");
        ExitCode::from(EXIT_CONFIG)
    })?;
    if let Some(speed) = speed {
        if let Err(message) = scenario.set_speed(speed) {
            eprintln!("error: --speed {speed}: {message}");
            return Err(ExitCode::from(EXIT_CONFIG));
        }
    }
    Ok(scenario)
}
