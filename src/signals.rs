//! Ctrl-C (SIGINT) and SIGTERM (what `kill`, systemd and `docker stop` send), listened for
//! from start-up on: a signal that comes before the main loop waits for one must stop
//! epicenter cleanly, not kill it with the default action (a test saw that on a busy
//! machine).

use tokio::signal::unix::{signal, Signal, SignalKind};

/// The two stop signals, registered when made.
pub(crate) struct StopSignals {
    interrupt: Option<Signal>,
    terminate: Option<Signal>,
}

impl StopSignals {
    /// Registers both handlers now (inside the runtime). One that cannot be registered is
    /// warned about; epicenter then stops on the other only.
    pub(crate) fn listen() -> StopSignals {
        let register = |kind: SignalKind, name: &str| match signal(kind) {
            Ok(stream) => Some(stream),
            Err(error) => {
                tracing::warn!(%error, "cannot listen for {name}; it will not stop epicenter cleanly");
                None
            }
        };
        StopSignals {
            interrupt: register(SignalKind::interrupt(), "Ctrl-C (SIGINT)"),
            terminate: register(SignalKind::terminate(), "SIGTERM"),
        }
    }

    /// Waits for the next stop signal and says which (`Ctrl-C`, `SIGTERM`); waits for ever
    /// when neither could be registered.
    pub(crate) async fn next(&mut self) -> &'static str {
        let interrupt = async {
            match &mut self.interrupt {
                Some(stream) => stream.recv().await,
                None => std::future::pending().await,
            }
        };
        let terminate = async {
            match &mut self.terminate {
                Some(stream) => stream.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = interrupt => "Ctrl-C",
            _ = terminate => "SIGTERM",
        }
    }
}
