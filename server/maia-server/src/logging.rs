//! Logging through `tracing`: stderr by default, or the file named by
//! `MAIA_LOG_FILE`; the level comes from `MAIA_LOG` (default `info`, `warn`
//! for `maia exec`, whose stderr is read by a person).
//! Nothing is ever written to stdout.

use std::fs::OpenOptions;

use tracing_subscriber::EnvFilter;

/// Sets up logging; `default` is the level when `MAIA_LOG` is not set.
pub fn init(default: &str) -> std::io::Result<()> {
    let filter = EnvFilter::try_from_env("MAIA_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match std::env::var_os("MAIA_LOG_FILE") {
        Some(path) if !path.is_empty() => {
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
