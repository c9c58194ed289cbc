//! `maia`: the MAIA agent server that editors start.
//!
//! `maia acp` speaks the Agent Client Protocol on stdin/stdout, `maia lsp`
//! the Language Server Protocol (crate `maia-lsp`). stdout
//! carries protocol messages only; logs go to stderr (level from
//! `MAIA_LOG`, optional file from `MAIA_LOG_FILE`). `maia login`,
//! `maia doctor` and `maia exec` (one prompt, no editor) are for people at
//! a terminal and for scripts.

mod acp;
mod cli;
mod doctor;
mod exec;
mod logging;
mod login;
mod probe;
mod serve;
mod settings_file;
mod signals;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;

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
    let cli = match cli::Cli::try_parse_from(args) {
        Ok(cli) => cli,
        // Help and version on stdout (exit 0), mistakes on stderr (exit 2).
        Err(e) => e.exit(),
    };
    set_guard();
    // HTTPS to the model endpoint uses rustls with the ring provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    match cli.command {
        cli::Command::Acp(cli::AcpArgs {
            connect: Some(url),
            token_env,
            ..
        }) => {
            if let Err(e) = logging::init() {
                eprintln!("maia: cannot set up logging: {e}");
            }
            let Some(token) = std::env::var(&token_env).ok().filter(|t| !t.is_empty()) else {
                eprintln!("maia: --connect needs the daemon's token in ${token_env}");
                return ExitCode::FAILURE;
            };
            let result = runtime().and_then(|rt| rt.block_on(serve::bridge::run(&url, &token)));
            match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("maia: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
        cli::Command::Serve(args) => {
            if let Err(e) = logging::init() {
                eprintln!("maia: cannot set up logging: {e}");
            }
            let options = match cli::engine_options(cli.model) {
                Ok(options) => options,
                Err(e) => return refuse_start(&e),
            };
            match serve::main(args, options) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("maia: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
        cli::Command::Acp(_) | cli::Command::Lsp => {
            if let Err(e) = logging::init() {
                eprintln!("maia: cannot set up logging: {e}");
            }
            let (lsp, v2) = match &cli.command {
                cli::Command::Acp(args) => (false, args.protocol_v2),
                _ => (true, false),
            };
            let options = match cli::engine_options(cli.model) {
                Ok(options) => options,
                Err(e) => return refuse_start(&e),
            };
            match serve((lsp, v2), options) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!("{e:#}");
                    eprintln!("maia: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
        cli::Command::Login(args) => {
            let options = match cli::engine_options(None) {
                Ok(options) => options,
                Err(e) => return refuse_start(&e),
            };
            let stdin = std::io::stdin();
            let tty = stdin.is_terminal();
            let mut input = stdin.lock();
            let mut stdout = std::io::stdout();
            let mut term = login::Terminal {
                input: &mut input,
                out: &mut stdout,
                tty,
            };
            let result =
                runtime().map(|rt| rt.block_on(login::run(&args, cli.model, &options, &mut term)));
            match result {
                Ok(Ok(())) => ExitCode::SUCCESS,
                Ok(Err(e)) => {
                    eprintln!("✗ {e}");
                    ExitCode::FAILURE
                }
                Err(e) => {
                    eprintln!("maia: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
        cli::Command::Exec(args) => {
            if let Err(e) = logging::init() {
                eprintln!("maia: cannot set up logging: {e}");
            }
            exec::main(args, cli.model)
        }
        cli::Command::Doctor(args) => {
            // The policy is reported by a check of its own, whatever it holds.
            let mut options = cli::unmanaged_options(cli.model);
            options.policy = cli::managed_policy()
                .ok()
                .flatten()
                .map(std::sync::Arc::new);
            let cwd = match args
                .cwd
                .clone()
                .map(Ok)
                .unwrap_or_else(std::env::current_dir)
            {
                Ok(cwd) => std::path::absolute(&cwd).unwrap_or(cwd),
                Err(e) => {
                    eprintln!("maia: no current folder: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let mut stdout = std::io::stdout();
            let result = runtime().and_then(|rt| {
                Ok(rt.block_on(doctor::run(&options, &cwd, args.json, &mut stdout))?)
            });
            match result {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::FAILURE,
                Err(e) => {
                    eprintln!("maia: {e:#}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// The process does not start (the managed policy cannot be applied):
/// said on stderr and in the log, exit status 1.
fn refuse_start(message: &str) -> ExitCode {
    tracing::error!("{message}");
    eprintln!("maia: {message}");
    ExitCode::FAILURE
}

/// Commands and MCP servers run under this same binary as their guard.
fn set_guard() {
    // `/proc/self/exe` names it even if the file was replaced since it started.
    #[cfg(target_os = "linux")]
    maia_tools::process::set_guard("/proc/self/exe".into());
    #[cfg(not(target_os = "linux"))]
    if let Ok(exe) = std::env::current_exe() {
        maia_tools::process::set_guard(exe);
    }
}

/// The longest the exit waits for telemetry still to be exported.
pub(crate) const TELEMETRY_EXIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Starts telemetry on `runtime` when the environment configures it
/// (docs/telemetry.md); [`maia_otel::shutdown`] before the runtime stops.
/// A managed policy's `telemetry` wins over the environment.
pub(crate) fn telemetry_on(runtime: &tokio::runtime::Runtime, options: &maia_core::EngineOptions) {
    let _entered = runtime.enter();
    let enforced = options
        .policy
        .as_ref()
        .and_then(|p| p.telemetry())
        .map(|t| maia_otel::Enforced {
            on: t.enabled,
            vars: t.otel.clone(),
            capture_content: t.log_prompts,
        })
        .unwrap_or_default();
    maia_otel::init_with(&enforced);
}

pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

fn serve(
    (lsp, protocol_v2): (bool, bool),
    options: maia_core::EngineOptions,
) -> anyhow::Result<()> {
    // The path an editor's terminal starts (`maia __terminal`), found now,
    // while the file surely is the running binary.
    if maia_tools::process::maia_exe().is_none() {
        tracing::warn!("the maia binary cannot be found; Bash cannot run in the editor's terminal");
    }
    let runtime = runtime()?;
    if lsp {
        runtime.block_on(async {
            let mut stop = signals::Stop::new()?;
            maia_lsp::serve_stdio(options, async move { stop.next().await }).await;
            anyhow::Ok(())
        })?;
    } else {
        telemetry_on(&runtime, &options);
        let served = runtime.block_on(acp::serve_stdio(options, protocol_v2));
        maia_otel::shutdown(TELEMETRY_EXIT);
        served?;
    }
    // Do not wait for stray blocking tasks (a Grep walk) at exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    Ok(())
}
