//! `maia`: the MAIA agent server that editors start.
//!
//! `maia acp` speaks the Agent Client Protocol on stdin/stdout, `maia lsp`
//! the Language Server Protocol (crate `maia-lsp`). stdout
//! carries protocol messages only; logs go to stderr (level from
//! `MAIA_LOG`, optional file from `MAIA_LOG_FILE`).

mod acp;
mod cli;
mod logging;
mod signals;

use std::process::ExitCode;

fn main() -> ExitCode {
    // `maia __guard -- PROGRAM ARGS…`: the supervisor every command runs
    // under (maia_tools::guard); nothing else of maia starts.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).and_then(|a| a.to_str()) == Some(maia_tools::process::GUARD_ARG) {
        let code = maia_tools::guard::run(&args[2..]);
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    // `maia __terminal`: a Bash command the editor starts in its terminal,
    // sandboxed as MAIA's own children are (maia_tools::terminal).
    if args.get(1).and_then(|a| a.to_str()) == Some(maia_tools::terminal::TERMINAL_ARG) {
        let code = maia_tools::terminal::exec_in_terminal();
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
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
    // Commands run under this same binary as their guard. `/proc/self/exe`
    // names it even if the file was replaced since it started.
    #[cfg(target_os = "linux")]
    maia_tools::process::set_guard("/proc/self/exe".into());
    #[cfg(not(target_os = "linux"))]
    if let Ok(exe) = std::env::current_exe() {
        maia_tools::process::set_guard(exe);
    }
    // The path an editor's terminal starts (`maia __terminal`), found now,
    // while the file surely is the running binary.
    if maia_tools::process::maia_exe().is_none() {
        tracing::warn!("the maia binary cannot be found; Bash cannot run in the editor's terminal");
    }
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
