//! Logging through `tracing`: stderr by default, or the file named by
//! `MAIA_LOG_FILE`; the level comes from `MAIA_LOG`. Without it, stderr
//! gets warnings and errors only (editors show an agent's stderr to the
//! user: Zed's log, agent-shell's Notices) and the log file keeps `info`.
//! Nothing is ever written to stdout.

use std::fs::OpenOptions;

use tracing_subscriber::EnvFilter;

/// Sets up logging; without `MAIA_LOG`, `warn` on stderr and `info` in
/// the log file.
pub fn init() -> std::io::Result<()> {
    let file = std::env::var_os("MAIA_LOG_FILE").filter(|p| !p.is_empty());
    let default = if file.is_some() { "info" } else { "warn" };
    let filter = EnvFilter::try_from_env("MAIA_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match file {
        Some(path) => {
            let file = OpenOptions::new().create(true).append(true).open(path)?;
            let _ = builder
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(file))
                .try_init();
        }
        _ => {
            let _ = builder
                .with_ansi(false)
                .with_writer(std::io::stderr)
                .try_init();
        }
    }
    Ok(())
}
