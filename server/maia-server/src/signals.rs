//! The signals that stop the server: SIGTERM (an editor closing, Neovim's
//! `jobstop`), SIGINT and SIGHUP (a closed terminal).

use tokio::signal::unix::{Signal, SignalKind, signal};

/// Waits for the first stopping signal.
pub struct Stop {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Stop {
    /// Installs the handlers (from now on these signals no longer kill the
    /// process outright).
    pub fn new() -> std::io::Result<Stop> {
        Ok(Stop {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The name of the next signal received.
    pub async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
            _ = self.hup.recv() => "SIGHUP",
        }
    }
}
