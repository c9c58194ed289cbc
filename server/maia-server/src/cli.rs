//! Command-line arguments (`clap`).
//!
//! `maia __guard -- PROGRAM ARGS…` (the supervisor every command runs
//! under) is not parsed here: `main` hands it to `maia_tools::guard` before
//! anything else, with its arguments untouched.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use maia_core::EngineOptions;

const AFTER_HELP: &str = "\
Settings: ~/.maia/settings.json and <cwd>/.maia/settings.json
Environment: LITELLM_API_KEY, MAIA_MODEL, MAIA_LOG (e.g. debug), MAIA_LOG_FILE

First run: `maia login`, then add `maia acp` to your editor; `maia doctor` checks it all.";

/// MAIA, a coding agent for editors, on any model behind a LiteLLM proxy.
#[derive(Debug, Parser)]
#[command(name = "maia", version, after_help = AFTER_HELP, arg_required_else_help = true)]
pub struct Cli {
    /// Model to use (else MAIA_MODEL, the `model` setting, or the first
    /// model the proxy lists). For `login`: the default model to save.
    #[arg(long, global = true, value_name = "MODEL")]
    pub model: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the Agent Client Protocol on stdin/stdout (what editors start).
    Acp,
    /// Serve the Language Server Protocol on stdin/stdout.
    Lsp,
    /// Connect MAIA to a LiteLLM proxy: URL, key, default model
    /// (writes ~/.maia/settings.json).
    Login(LoginArgs),
    /// Check that MAIA can answer a prompt here, one line per check.
    Doctor(DoctorArgs),
}

#[derive(Debug, Args, Default)]
pub struct LoginArgs {
    /// The proxy's root URL; given, nothing is asked (for scripts).
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Take the API key from this environment variable. LITELLM_API_KEY is
    /// read at every start and not written; any other variable's value is
    /// saved in the settings file.
    #[arg(long, value_name = "NAME")]
    pub key_env: Option<String>,
}

#[derive(Debug, Args, Default)]
pub struct DoctorArgs {
    /// Print the checks as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// The project folder to check (default: the current one).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
}

/// Process-wide options of the engine, from `--model` and the environment.
pub fn engine_options(model: Option<String>) -> EngineOptions {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    EngineOptions {
        home: env("HOME").map(PathBuf::from),
        model: model.or_else(|| env("MAIA_MODEL")),
        env_api_key: env("LITELLM_API_KEY"),
        route: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn p(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("maia").chain(args.iter().copied()))
    }

    #[test]
    fn parses_what_editors_run() {
        let cli = p(&["acp"]).unwrap();
        assert!(matches!(cli.command, Command::Acp));
        assert_eq!(cli.model, None);
        let cli = p(&["acp", "--model", "m"]).unwrap();
        assert_eq!(cli.model.as_deref(), Some("m"));
        let cli = p(&["--model=x", "acp"]).unwrap();
        assert_eq!(cli.model.as_deref(), Some("x"));
        assert!(matches!(p(&["lsp"]).unwrap().command, Command::Lsp));
        let cli = p(&[
            "login",
            "--url",
            "http://h:4000",
            "--key-env",
            "K",
            "--model",
            "m",
        ])
        .unwrap();
        match cli.command {
            Command::Login(args) => {
                assert_eq!(args.url.as_deref(), Some("http://h:4000"));
                assert_eq!(args.key_env.as_deref(), Some("K"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(cli.model.as_deref(), Some("m"));
        match p(&["doctor", "--json"]).unwrap().command {
            Command::Doctor(args) => assert!(args.json),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn refuses_what_it_does_not_know() {
        assert!(p(&[]).is_err());
        assert!(p(&["acp", "--model"]).is_err());
        assert!(p(&["lsp2"]).is_err());
        assert!(p(&["acp", "lsp"]).is_err());
        let version = p(&["--version"]).unwrap_err();
        assert_eq!(version.kind(), clap::error::ErrorKind::DisplayVersion);
        Cli::command().debug_assert();
    }
}
