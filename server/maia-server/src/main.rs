//! `maia`: the MAIA agent server that editors start.
//!
//! `maia acp` speaks the Agent Client Protocol on stdin/stdout, `maia lsp`
//! the Language Server Protocol (crate `maia-lsp`). stdout
//! carries protocol messages only; logs go to stderr (level from
//! `MAIA_LOG`, optional file from `MAIA_LOG_FILE`).

mod acp;
mod cli;
mod logging;

use std::process::ExitCode;

fn main() -> ExitCode {
    let command = match cli::parse(std::env::args().skip(1)) {
        Ok(command) => command,
        Err(message) => {
            eprintln!("maia: {message}\n\n{}", cli::USAGE);
            return ExitCode::from(2);
        }
    };
    let command_is_lsp = matches!(command, cli::Command::Lsp(_));
    match command {
        cli::Command::Help => {
            eprintln!("{}", cli::USAGE);
            ExitCode::SUCCESS
        }
        cli::Command::Version => {
            eprintln!("maia {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        cli::Command::Acp(options) | cli::Command::Lsp(options) => {
            if let Err(e) = logging::init() {
                eprintln!("maia: cannot set up logging: {e}");
            }
            match run(command_is_lsp, options) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!("{e:#}");
                    eprintln!("maia: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

fn run(lsp: bool, options: cli::Options) -> anyhow::Result<()> {
    // HTTPS to the model endpoint uses rustls with the ring provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    if lsp {
        runtime.block_on(maia_lsp::serve_stdio(options.engine_options()));
    } else {
        runtime.block_on(acp::serve_stdio(options.engine_options()))?;
    }
    // Do not wait for stray blocking tasks (a Grep walk) at exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    Ok(())
}
