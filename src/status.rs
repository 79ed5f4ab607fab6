//! `epicenter run`'s status: on a terminal one line redrawn in place every second (stderr);
//! otherwise a plain `epicenter: status: …` line every minute, for logs. The figures are
//! [`epicenter_web::status::Status`]; other output clears the redrawn line first
//! ([`crate::style::clear_status`]).

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use epicenter_store::writer::WriterStats;
use epicenter_web::AppState;
use tokio::sync::watch;

/// How often a plain status line is written when stderr is not a terminal.
const PLAIN_EVERY: Duration = Duration::from_secs(60);
/// How often the terminal line is redrawn.
const TERMINAL_EVERY: Duration = Duration::from_secs(1);

/// Reports the status until `shutdown` turns true; the terminal line is cleared then.
pub(crate) async fn report(state: Arc<AppState>, writer: Arc<WriterStats>, mut shutdown: watch::Receiver<bool>) {
    let terminal = std::io::stderr().is_terminal();
    let every = if terminal { TERMINAL_EVERY } else { PLAIN_EVERY };
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    let mut last = (Instant::now(), 0u64);
    loop {
        tokio::select! {
            biased;
            _ = shutdown.changed() => break,
            _ = ticks.tick() => {}
        }
        if *shutdown.borrow() {
            break;
        }
        let status = state.status(&writer);
        let elapsed = last.0.elapsed().as_secs_f64().max(0.001);
        let rate = status.counted().saturating_sub(last.1) as f64 / elapsed;
        last = (Instant::now(), status.counted());
        let line = status.line(rate);
        if terminal {
            crate::style::draw_status(&format!("epicenter: {line}"));
        } else {
            let _ = writeln!(std::io::stderr(), "epicenter: status: {line}");
        }
    }
    crate::style::clear_status();
}
