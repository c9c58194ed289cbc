//! Command-line arguments (`clap`).
//!
//! `maia __guard -- PROGRAM ARGS…` (the supervisor every command runs
//! under) is not parsed here: `main` hands it to `maia_tools::guard` before
//! anything else, with its arguments untouched.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use maia_core::{EngineOptions, Mode};

const AFTER_HELP: &str = "\
Settings: ~/.maia/settings.json and <cwd>/.maia/settings.json
Environment: LITELLM_API_KEY, MAIA_MODEL, MAIA_LOG (e.g. debug), MAIA_LOG_FILE,
MAIA_MANAGED_SETTINGS (the managed policy; default /etc/maia/managed-settings.json)

First run: `maia login`, `maia doctor` checks it all, `maia exec PROMPT` answers a prompt
here; then add `maia acp` to your editor.";

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
    /// Serve the Agent Client Protocol on stdin/stdout (what editors start),
    /// or bridge it to a `maia serve` daemon with --connect.
    Acp(AcpArgs),
    /// Serve ACP over the network (WebSocket and Streamable HTTP on /acp),
    /// sessions shared by every client that attaches; `serve token` manages
    /// its bearer tokens (docs/remote.md).
    Serve(ServeArgs),
    /// Serve the Language Server Protocol on stdin/stdout.
    Lsp,
    /// Connect MAIA to a LiteLLM proxy: URL, key, default model
    /// (writes ~/.maia/settings.json).
    Login(LoginArgs),
    /// Check that MAIA can answer a prompt here, one line per check.
    Doctor(DoctorArgs),
    /// Run one prompt without an editor: the answer on stdout, tool calls
    /// on stderr (or JSON events on stdout with --json).
    Exec(ExecArgs),
}

#[derive(Debug, Args, Default)]
pub struct AcpArgs {
    /// Answer a client that asks for ACP v2 (the draft, docs/acp.md) in
    /// v2; without it every client gets v1.
    #[arg(long, conflicts_with = "connect")]
    pub protocol_v2: bool,
    /// Bridge stdin/stdout to a `maia serve` daemon at this URL
    /// (ws://HOST:PORT/acp) instead of running the agent here.
    #[arg(long, value_name = "URL")]
    pub connect: Option<String>,
    /// The environment variable holding the daemon's bearer token.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "MAIA_TOKEN",
        requires = "connect"
    )]
    pub token_env: String,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ServeArgs {
    #[command(subcommand)]
    pub command: Option<ServeCommand>,
    /// Where to listen: HOST:PORT (loopback unless --insecure-behind-proxy)
    /// or a Unix socket path.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7417")]
    pub listen: String,
    /// Listen beyond loopback without TLS, for a TLS-terminating reverse
    /// proxy in front.
    #[arg(long, conflicts_with = "tls_cert")]
    pub insecure_behind_proxy: bool,
    /// Serve TLS (HTTPS, WSS; HTTP/2 by ALPN) with this certificate chain
    /// (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The TLS certificate's private key (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// A host name the `Host` and `Origin` headers may name besides the
    /// loopback ones (the proxy's public name); repeatable.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// The largest request body or WebSocket message, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 16 * 1024 * 1024)]
    pub max_message_bytes: usize,
    /// The open connections one token may have.
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub max_connections_per_token: usize,
    /// The live messages a client may leave unread before it is dropped.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub max_unread: usize,
    /// Close a Streamable HTTP connection after this long without a
    /// request and without an open stream (seconds, or a duration such as
    /// `250ms` or `2m`).
    #[arg(long, value_name = "DURATION", default_value = "600", value_parser = parse_duration)]
    pub idle_timeout: std::time::Duration,
    /// Ping every WebSocket client this often; one that sends nothing,
    /// not even the pong, for two of these is closed (a peer gone without a
    /// close frame would otherwise hold its place). Seconds, or a duration.
    #[arg(long, value_name = "DURATION", default_value = "30", value_parser = parse_duration)]
    pub ping_interval: std::time::Duration,
    /// Close a TCP connection that has made no authorized request this long
    /// after it opened (headers that never end, or none at all). Seconds,
    /// or a duration.
    #[arg(long, value_name = "DURATION", default_value = "10", value_parser = parse_duration)]
    pub header_timeout: std::time::Duration,
    /// The TCP connections that have made no authorized request yet, at
    /// most; one more closes the oldest of them.
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_unauthenticated: u64,
    /// Offer ACP v2 (the draft) to clients whose `initialize` asks for it,
    /// as `maia acp --protocol-v2` does; the others get v1.
    #[arg(long)]
    pub protocol_v2: bool,
}

#[derive(Debug, Subcommand)]
pub enum ServeCommand {
    /// Manage the bearer tokens clients connect with.
    #[command(subcommand)]
    Token(TokenCommand),
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Add a token; it is printed once, alone on stdout (only its hash is kept).
    Add {
        /// Read-only: every write request is refused.
        #[arg(long)]
        observer: bool,
        /// Allow this one session only.
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        name: String,
    },
    /// List the tokens: name, role, sessions.
    List,
    /// Revoke a token; its open connections are closed.
    Revoke { name: String },
}

#[derive(Debug, Args, Default)]
pub struct ExecArgs {
    /// The prompt; without it (or with `-`) it is read from stdin.
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,
    /// Print one JSON event per line on stdout instead of text
    /// (docs/exec.md).
    #[arg(long)]
    pub json: bool,
    /// What may run without a question: default, accept-edits, read-only
    /// or bypass. Nobody can answer a question here: a call that would ask
    /// is refused and the run goes on. Reading and searching inside the
    /// project always runs.
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    pub mode: Option<Mode>,
    /// Allow calls matching RULE (`Tool` or `Tool(pattern)`, as in
    /// `permissions.allow`) for this run only; repeatable.
    #[arg(long = "allow", value_name = "RULE", value_parser = parse_rule)]
    pub allow: Vec<String>,
    /// The project folder (default: the current one).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Go on with the saved thread ID of this folder.
    #[arg(long, value_name = "ID", conflicts_with = "continue_latest")]
    pub resume: Option<String>,
    /// Go on with the folder's most recent thread.
    #[arg(long = "continue", short = 'c')]
    pub continue_latest: bool,
    /// After the run, write the thread (messages, tool calls, diffs) to
    /// PATH: JSON when it ends in `.json`, else Markdown (docs/exec.md).
    /// An existing file is kept (exit 1) unless `--export-force`.
    #[arg(long, value_name = "PATH")]
    pub export: Option<PathBuf>,
    /// Let `--export` replace an existing file.
    #[arg(long, requires = "export")]
    pub export_force: bool,
    /// Stop before a model request that would take the run's spend past
    /// USD US dollars (over `budget.sessionUsd`; exit 4, docs/exec.md).
    #[arg(long, value_name = "USD", value_parser = parse_usd)]
    pub max_budget_usd: Option<f64>,
}

fn parse_usd(text: &str) -> Result<f64, String> {
    match text.trim().trim_start_matches('$').parse::<f64>() {
        Ok(usd) if usd.is_finite() && usd > 0.0 => Ok(usd),
        _ => Err("a positive amount of US dollars, e.g. 0.50".to_owned()),
    }
}

/// A duration: a bare number is seconds (`30`), else a `humantime` one
/// (`250ms`, `2m`); never zero.
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let parsed = match text.trim().parse::<u64>() {
        Ok(secs) => std::time::Duration::from_secs(secs),
        Err(_) => humantime::parse_duration(text.trim()).map_err(|e| {
            format!("`{text}` is not a duration (seconds, or e.g. `250ms`, `2m`): {e}")
        })?,
    };
    if parsed.is_zero() {
        return Err("a duration of zero".to_owned());
    }
    Ok(parsed)
}

fn parse_mode(text: &str) -> Result<Mode, String> {
    Mode::from_id(text).ok_or_else(|| {
        let ids: Vec<&str> = Mode::ALL.iter().map(|m| m.id()).collect();
        format!("one of {}", ids.join(", "))
    })
}

fn parse_rule(text: &str) -> Result<String, String> {
    maia_core::permission::Rule::parse(text)
        .map(|rule| rule.to_string())
        .map_err(|_| "a rule is `Tool` or `Tool(pattern)`, e.g. `Bash(cargo test *)`".to_owned())
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

/// Process-wide options of the engine, from `--model`, the environment
/// and the managed policy. Fails closed: a policy file that cannot be read
/// or parsed, or one that refuses the model asked for, is an error naming
/// the file (the process does not start).
pub fn engine_options(model: Option<String>) -> Result<EngineOptions, String> {
    let mut options = unmanaged_options(model);
    options.policy = managed_policy()
        .map_err(|e| format!("{e}; MAIA does not start until it is fixed"))?
        .map(std::sync::Arc::new);
    if let Some(model) = &options.model {
        options
            .check_model(model)
            .map_err(|refusal| format!("{refusal} (asked by --model or MAIA_MODEL)"))?;
    }
    Ok(options)
}

/// The engine's options without reading the managed policy (`maia
/// doctor` reads it itself, to report it whatever it holds).
pub fn unmanaged_options(model: Option<String>) -> EngineOptions {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    EngineOptions {
        home: env("HOME").map(PathBuf::from),
        model: model.or_else(|| env("MAIA_MODEL")),
        env_api_key: env("LITELLM_API_KEY"),
        route: None,
        allow: Vec::new(),
        no_queue: false,
        policy: None,
        max_budget_usd: None,
    }
}

/// Where the managed policy is: `/etc/maia/managed-settings.json` when
/// anything is there (a user's variable cannot swap the administrator's
/// file for a looser one), else `MAIA_MANAGED_SETTINGS` when set.
pub fn policy_path() -> PathBuf {
    let default = PathBuf::from(maia_core::policy::DEFAULT_PATH);
    if std::fs::symlink_metadata(&default).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        && let Some(path) =
            std::env::var_os(maia_core::policy::PATH_VARIABLE).filter(|v| !v.is_empty())
    {
        return PathBuf::from(path);
    }
    default
}

/// The managed policy (`None`: no file at [`policy_path`]).
pub fn managed_policy()
-> Result<Option<maia_core::policy::ManagedPolicy>, maia_core::policy::PolicyError> {
    maia_core::policy::ManagedPolicy::read(&policy_path())
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
        assert!(matches!(
            cli.command,
            Command::Acp(AcpArgs {
                connect: None,
                protocol_v2: false,
                ..
            })
        ));
        let cli = p(&["acp", "--protocol-v2"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Acp(AcpArgs {
                protocol_v2: true,
                ..
            })
        ));
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
    fn serve_timers_take_seconds_or_a_duration() {
        let Command::Serve(args) = p(&["serve", "--ping-interval", "200ms", "--idle-timeout", "2"])
            .unwrap()
            .command
        else {
            panic!("not serve")
        };
        assert_eq!(args.ping_interval, std::time::Duration::from_millis(200));
        assert_eq!(args.idle_timeout, std::time::Duration::from_secs(2));
        assert_eq!(args.header_timeout, std::time::Duration::from_secs(10));
        assert!(p(&["serve", "--ping-interval", "0"]).is_err());
        assert!(p(&["serve", "--header-timeout", "soon"]).is_err());
    }

    #[test]
    fn parses_serve() {
        let Command::Serve(args) = p(&["serve", "--listen", "/tmp/s.sock"]).unwrap().command else {
            panic!("not serve")
        };
        assert_eq!(args.listen, "/tmp/s.sock");
        assert!(args.command.is_none());
        let Command::Serve(args) = p(&["serve", "token", "add", "--observer", "phone"])
            .unwrap()
            .command
        else {
            panic!("not serve")
        };
        assert!(matches!(
            args.command,
            Some(ServeCommand::Token(TokenCommand::Add { observer: true, ref name, .. })) if name == "phone"
        ));
        let Command::Acp(args) = p(&["acp", "--connect", "ws://h/acp"]).unwrap().command else {
            panic!("not acp")
        };
        assert_eq!(
            (args.connect.as_deref(), args.token_env.as_str()),
            (Some("ws://h/acp"), "MAIA_TOKEN")
        );
    }

    #[test]
    fn parses_exec() {
        let cli = p(&[
            "exec",
            "--json",
            "--mode",
            "accept-edits",
            "--allow",
            "Bash(ls *)",
            "--allow",
            "Read",
            "--cwd",
            "/tmp",
            "--model",
            "m",
            "fix it",
        ])
        .unwrap();
        assert_eq!(cli.model.as_deref(), Some("m"));
        let Command::Exec(args) = cli.command else {
            panic!("not exec")
        };
        assert_eq!(args.prompt.as_deref(), Some("fix it"));
        assert!(args.json && !args.continue_latest);
        assert_eq!(args.mode, Some(Mode::AcceptEdits));
        assert_eq!(args.allow, ["Bash(ls *)", "Read"]);
        assert_eq!(args.cwd, Some(PathBuf::from("/tmp")));
        let Command::Exec(args) = p(&["exec", "-c"]).unwrap().command else {
            panic!("not exec")
        };
        assert!(args.continue_latest && args.prompt.is_none());
        assert!(p(&["exec", "--mode", "yolo", "x"]).is_err());
        assert!(p(&["exec", "--mode", "plan", "x"]).is_ok());
        assert!(p(&["exec", "--allow", "Bash(", "x"]).is_err());
        assert!(p(&["exec", "--resume", "a", "--continue", "x"]).is_err());
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
