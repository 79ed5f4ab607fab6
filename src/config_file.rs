//! Reading the configuration file from disk: the main file, then the files its
//! `scrape_config_files` name, every problem printed with the file it is in.

use std::path::Path;
use std::process::ExitCode;

use epicenter_collector::config::Job;
use epicenter_config::ConfigError;

use crate::config::{Config, EXIT_CONFIG};

/// Prints what [`Config::from_yaml`] found, one `error: FILE:LINE:COLUMN: path: reason` line
/// each (`error: FILE: path: reason` without a location), then how many when more than one.
pub(crate) fn print_read_errors(source: &str, errors: &[ConfigError]) {
    for error in errors {
        if error.location.is_some() {
            eprintln!("error: {source}:{error}");
        } else {
            eprintln!("error: {source}: {error}");
        }
    }
    if errors.len() > 1 {
        eprintln!("{source}: {} problems found", errors.len());
    }
}

/// Reads the configuration file at `path` and the files its `scrape_config_files` name
/// (their jobs added after the file's own, as Prometheus 2.43 does), printing every problem
/// with its file, line and column. Every relative path written in a file is made relative
/// to the folder of that file, as Prometheus does ([`Config::set_directory`]; the jobs of a
/// `scrape_config_files` file to that file's folder). Errors: exit status 64.
pub(crate) fn read(path: &Path) -> Result<Config, ExitCode> {
    let source = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|error| {
        eprintln!("error: cannot read {source}: {error}");
        ExitCode::from(EXIT_CONFIG)
    })?;
    let mut config = Config::from_yaml(&text).map_err(|errors| {
        print_read_errors(&source, &errors);
        ExitCode::from(EXIT_CONFIG)
    })?;
    // `epicenter.yml`'s folder is the empty path: its paths stay as written, relative to
    // the working directory, which is that folder.
    let base = path.parent().unwrap_or(Path::new("."));
    // Every relative path in the file is relative to its folder, as in Prometheus.
    config.set_directory(base);
    let more = epicenter_collector::discovery::read_scrape_config_files(&config.scrape_config_files, base).map_err(
        |failed| {
            for (file, errors) in &failed {
                print_read_errors(file, errors);
            }
            ExitCode::from(EXIT_CONFIG)
        },
    )?;
    config.scrape_configs.extend(more);
    Ok(config)
}

/// Reads ([`read`]) and validates a configuration file, printing every problem (exit 64).
pub(crate) fn load(path: &Path) -> Result<(Config, Vec<Job>), ExitCode> {
    let source = path.display().to_string();
    let config = read(path)?;
    match config.validate() {
        Ok(jobs) => Ok((config, jobs)),
        Err(errors) => {
            for error in errors {
                eprintln!("error: {source}: {error}");
            }
            Err(ExitCode::from(EXIT_CONFIG))
        }
    }
}
