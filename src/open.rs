//! Start-up glue shared by the subcommands: the async runtime, the store a configuration
//! names, the scenario a command line names and the Prometheus server `--prometheus` names, with problems printed and mapped to exit codes (64 for a configuration that cannot
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

/// The Prometheus server at `url`, reached with the HTTP settings of the `--prometheus-config`
/// file `settings` (none: plain HTTP; its relative paths read from its folder). Errors are printed: exit 64 for a bad URL or settings
/// file (named).
pub(crate) fn prometheus_source(
    url: &str,
    settings: Option<&PathBuf>,
) -> Result<epicenter_eval::prometheus::Source, ExitCode> {
    use epicenter_eval::prometheus::{HttpSettings, Source};
    let parsed = match settings {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|error| {
                eprintln!("error: --prometheus-config {}: {error}", path.display());
                ExitCode::from(EXIT_CONFIG)
            })?;
            let mut parsed = HttpSettings::from_yaml(&text).map_err(|error| {
                eprintln!("error: --prometheus-config {}: {error}", path.display());
                ExitCode::from(EXIT_CONFIG)
            })?;
            // Its relative paths are read from its folder, as the configuration's are.
            parsed.set_directory(path.parent().unwrap_or(std::path::Path::new(".")));
            parsed
        }
        None => HttpSettings::default(),
    };
    Source::new(url, &parsed).map_err(|error| {
        match settings {
            Some(path) => eprintln!("error: {error} (in {})", path.display()),
            None => eprintln!("error: {error}"),
        }
        ExitCode::from(EXIT_CONFIG)
    })
}
