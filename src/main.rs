//! `epicenter`: one binary, subcommands per job. Thin: parse arguments, call the library,
//! map results to exit codes.

mod check;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// epicenter names the failing datacenter and host when a fleet lights up.
///
/// It scrapes client, connection-pool and mailbox metrics into ClickHouse and correlates
/// spikes across the service dependency graph. Today's build ships the exposition parser and
/// `epicenter check metrics`; scraping, the detector and the demo land next.
#[derive(Parser, Debug)]
#[command(name = "epicenter", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Validate inputs without running anything.
    #[command(subcommand)]
    Check(check::CheckCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(command) => check::run(command),
    }
}
