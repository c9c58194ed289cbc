//! Commands run by someone else: the [`Terminals`] a session may be given
//! (an editor that runs processes in its own terminals, such as the ACP
//! `terminal/*` methods), and how the Bash tool drives one.
//!
//! The sequence is fixed here, whatever serves it: `create` (the terminal
//! is announced through [`ToolContext::on_terminal`] as soon as it exists),
//! `wait_for_exit` raced against the timeout and cancellation, `kill` first
//! when either wins, then `output` for what the model sees, and always
//! `release`, also after a failure. A failing call fails the tool call with
//! its reason; the command is never run locally instead.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::context::{ToolContext, ToolOutput};
use crate::input::BashInput;

/// The argument that makes `maia` run a Bash command in a terminal the
/// editor started: `maia __terminal`, the command in [`COMMAND_ENV`] and,
/// under the sandbox, the policy in [`POLICY_ENV`]. The editor gets one
/// program and one plain word, so the call means the same whether the
/// editor executes `command` with `args` as given or (as Zed does) joins
/// them unquoted into a line for its own shell.
pub const TERMINAL_ARG: &str = "__terminal";

/// The variable carrying the command to `maia __terminal`.
pub const COMMAND_ENV: &str = "MAIA_TERMINAL_COMMAND";

/// The variable carrying the sandbox policy (JSON) to `maia __terminal`.
pub const POLICY_ENV: &str = "MAIA_SANDBOX_POLICY";

/// `maia __terminal`: applies the sandbox policy in [`POLICY_ENV`] (if
/// any) to this process, then becomes `SHELL -c COMMAND` (the shell local
/// commands use). Returns only on failure, with the exit status (126).
pub fn exec_in_terminal() -> i32 {
    use std::os::unix::process::CommandExt;
    let Some(command) = std::env::var_os(COMMAND_ENV) else {
        eprintln!("maia {TERMINAL_ARG}: no command in {COMMAND_ENV}");
        return 126;
    };
    if let Some(text) = std::env::var_os(POLICY_ENV) {
        let policy = text
            .to_str()
            .ok_or_else(|| "not UTF-8".to_owned())
            .and_then(|t| {
                serde_json::from_str::<crate::sandbox::SandboxPolicy>(t).map_err(|e| e.to_string())
            });
        let applied = match policy {
            Ok(policy) => {
                crate::sandbox::restrict_current_process(&policy).map_err(|e| e.to_string())
            }
            Err(e) => Err(format!("unreadable sandbox policy: {e}")),
        };
        if let Err(e) = applied {
            eprintln!("maia {TERMINAL_ARG}: the command was not run: {e}");
            return 126;
        }
    }
    let shell = &crate::shell().path;
    let mut exec = std::process::Command::new(shell);
    exec.arg("-c")
        .arg(command)
        .env_remove(COMMAND_ENV)
        .env_remove(POLICY_ENV);
    for name in crate::sandbox::SECRET_ENV {
        exec.env_remove(name);
    }
    let err = exec.exec();
    eprintln!("maia {TERMINAL_ARG}: cannot run {}: {err}", shell.display());
    126
}

/// Bytes of output a terminal keeps (its beginning is dropped beyond).
/// Four bytes per character at most: the model's cap always fits.
pub const OUTPUT_BYTE_LIMIT: u64 = (crate::tools::bash::MAX_OUTPUT_CHARS as u64) * 4;

/// How long `release` may take after a cancel (the turn is ending).
const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// A process to start in a terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalRequest {
    pub command: String,
    pub args: Vec<String>,
    /// Variables added to the terminal's environment.
    pub env: Vec<(String, String)>,
    /// Absolute.
    pub cwd: PathBuf,
    pub output_byte_limit: u64,
}

/// How a terminal's process ended (both `None`: unknown).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TerminalExit {
    pub exit_code: Option<u32>,
    pub signal: Option<String>,
}

/// A terminal's output so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TerminalOutput {
    pub output: String,
    /// The terminal dropped the beginning (its byte limit).
    pub truncated: bool,
    pub exit: Option<TerminalExit>,
}

/// Why a terminal call failed; the text is phrased for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TerminalError(pub String);

/// Terminals run by someone else (the editor). Ids are theirs.
#[async_trait::async_trait]
pub trait Terminals: Send + Sync {
    /// Starts the process; returns the terminal's id at once.
    async fn create(&self, request: TerminalRequest) -> Result<String, TerminalError>;
    /// Waits until the process has exited.
    async fn wait_for_exit(&self, id: &str) -> Result<TerminalExit, TerminalError>;
    async fn output(&self, id: &str) -> Result<TerminalOutput, TerminalError>;
    /// Kills the process; the terminal stays valid.
    async fn kill(&self, id: &str) -> Result<(), TerminalError>;
    /// Frees the terminal (killing the process if still running).
    async fn release(&self, id: &str) -> Result<(), TerminalError>;
}

/// Called with a terminal's id once it exists (to show it live).
pub type TerminalHook = Arc<dyn Fn(&str) + Send + Sync>;

/// How the wait ended.
enum Waited {
    Exited(Result<TerminalExit, TerminalError>),
    TimedOut,
    Cancelled,
}

/// Runs a Bash call in one of `terminals`.
pub(crate) async fn run_bash(
    input: &BashInput,
    ctx: &ToolContext,
    terminals: &dyn Terminals,
    request: TerminalRequest,
) -> ToolOutput {
    let timeout_ms = input.effective_timeout_ms();
    if ctx.cancel.is_cancelled() {
        return ToolOutput::cancelled();
    }
    // A cancel does not drop the request at once: a terminal the editor
    // creates meanwhile must still be released (the wait below sees the
    // cancel at once). A client that never answers is given up on a
    // moment after the cancel.
    let given_up = async {
        ctx.cancel.cancelled().await;
        tokio::time::sleep(RELEASE_WAIT).await;
    };
    let create = tokio::select! {
        created = terminals.create(request) => created,
        () = given_up => return ToolOutput::cancelled(),
    };
    let id = match create {
        Ok(id) => id,
        Err(e) => {
            return ToolOutput::error(format!(
                "The command was not run: the editor could not start a terminal: {e}"
            ));
        }
    };
    tracing::debug!(terminal = %id, command = %input.command, "bash started in the editor's terminal");
    if let Some(hook) = &ctx.on_terminal {
        hook(&id);
    }
    let output = drive(&id, timeout_ms, ctx, terminals).await;
    // Released whatever happened; after a cancel, without waiting forever.
    let released = tokio::time::timeout(RELEASE_WAIT, terminals.release(&id)).await;
    match released {
        Ok(Ok(())) => output,
        Ok(Err(e)) if !output.is_error => ToolOutput::error(format!(
            "{}\nReleasing the editor's terminal failed: {e}",
            output.content
        )),
        Ok(Err(e)) => {
            tracing::debug!(terminal = %id, "release failed: {e}");
            output
        }
        Err(_) => {
            tracing::warn!(terminal = %id, "the editor did not release the terminal in time");
            output
        }
    }
}

async fn drive(
    id: &str,
    timeout_ms: u64,
    ctx: &ToolContext,
    terminals: &dyn Terminals,
) -> ToolOutput {
    let waited = tokio::select! {
        biased;
        () = ctx.cancel.cancelled() => Waited::Cancelled,
        () = tokio::time::sleep(Duration::from_millis(timeout_ms)) => Waited::TimedOut,
        exit = terminals.wait_for_exit(id) => Waited::Exited(exit),
    };
    let timed_out = matches!(waited, Waited::TimedOut);
    let exit = match waited {
        Waited::Cancelled => {
            if let Err(e) = tokio::time::timeout(RELEASE_WAIT, terminals.kill(id)).await {
                tracing::debug!(terminal = %id, "kill after cancel: {e}");
            }
            return ToolOutput::cancelled();
        }
        Waited::TimedOut => {
            let killed = tokio::select! {
                biased;
                () = ctx.cancel.cancelled() => return ToolOutput::cancelled(),
                killed = tokio::time::timeout(RELEASE_WAIT, terminals.kill(id)) => killed,
            };
            let failed = match killed {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some("terminal/kill was not answered".to_owned()),
            };
            if let Some(e) = failed {
                return ToolOutput::error(format!(
                    "Command timed out after {timeout_ms} ms; killing it in the editor's terminal failed: {e}"
                ));
            }
            None
        }
        Waited::Exited(Ok(exit)) => Some(exit),
        Waited::Exited(Err(e)) => {
            // Stop what may still run before reporting.
            let _ = tokio::time::timeout(RELEASE_WAIT, terminals.kill(id)).await;
            return ToolOutput::error(format!(
                "Waiting for the command in the editor's terminal failed: {e}"
            ));
        }
    };
    // A cancel is seen while the editor is asked for the output too.
    let output = tokio::select! {
        biased;
        () = ctx.cancel.cancelled() => return ToolOutput::cancelled(),
        output = terminals.output(id) => output,
    };
    let output = match output {
        Ok(output) => output,
        Err(e) => {
            return ToolOutput::error(format!(
                "Reading the command's output from the editor's terminal failed: {e}"
            ));
        }
    };
    let mut text = crate::truncate_middle(&output.output, crate::tools::bash::MAX_OUTPUT_CHARS);
    if output.truncated {
        text = format!(
            "[... the beginning of the output was dropped by the editor's terminal ...]\n{text}"
        );
    }
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if timed_out {
        return ToolOutput::error(format!(
            "{text}Command timed out after {timeout_ms} ms and was killed."
        ));
    }
    // A wait answered without code or signal (the schema allows both to
    // be null) leaves the output's exit status to say how it ended.
    let exit = match exit {
        Some(TerminalExit {
            exit_code: None,
            signal: None,
        }) => output.exit.or(exit),
        exit => exit.or(output.exit),
    };
    let Some(exit) = exit else {
        return ToolOutput::error(format!("{text}Exit code: unknown"));
    };
    crate::runner::exit_output(
        ctx.sandbox.as_deref(),
        &text,
        exit.exit_code.map(i64::from),
        exit.signal
            .map(|signal| format!("unknown (killed by signal {signal})")),
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;
    use crate::tools::test_util::run;

    /// A scripted terminal service that logs the calls it gets.
    #[derive(Default)]
    struct Fake {
        log: Mutex<Vec<String>>,
        fail_create: bool,
        fail_output: bool,
        /// `None`: the process never exits.
        exit: Option<TerminalExit>,
        output: String,
        truncated: bool,
        /// The exit `output` reports (the killed process, after a timeout).
        output_exit: Option<TerminalExit>,
        /// Cancelled while `create` is answered (the user cancels then).
        cancel_in_create: Option<tokio_util::sync::CancellationToken>,
        /// `kill` and `output` are never answered.
        hang_kill: bool,
        hang_output: bool,
    }

    impl Fake {
        fn log(&self, what: &str) {
            self.log.lock().unwrap().push(what.to_owned());
        }
        fn calls(&self) -> Vec<String> {
            self.log.lock().unwrap().clone()
        }
    }

    #[async_trait::async_trait]
    impl Terminals for Fake {
        async fn create(&self, request: TerminalRequest) -> Result<String, TerminalError> {
            self.log(&format!("create {} {:?}", request.command, request.args));
            if self.fail_create {
                return Err(TerminalError("no terminals today".into()));
            }
            if let Some(cancel) = &self.cancel_in_create {
                cancel.cancel();
                // The answer arrives later than the cancel.
                tokio::task::yield_now().await;
            }
            Ok("t1".into())
        }
        async fn wait_for_exit(&self, _: &str) -> Result<TerminalExit, TerminalError> {
            self.log("wait");
            match &self.exit {
                Some(exit) => Ok(exit.clone()),
                None => std::future::pending().await,
            }
        }
        async fn output(&self, _: &str) -> Result<TerminalOutput, TerminalError> {
            self.log("output");
            if self.hang_output {
                std::future::pending::<()>().await;
            }
            if self.fail_output {
                return Err(TerminalError("gone".into()));
            }
            Ok(TerminalOutput {
                output: self.output.clone(),
                truncated: self.truncated,
                exit: self.output_exit.clone(),
            })
        }
        async fn kill(&self, _: &str) -> Result<(), TerminalError> {
            self.log("kill");
            if self.hang_kill {
                std::future::pending::<()>().await;
            }
            Ok(())
        }
        async fn release(&self, _: &str) -> Result<(), TerminalError> {
            self.log("release");
            Ok(())
        }
    }

    fn ctx_with(fake: &Arc<Fake>, dir: &std::path::Path) -> (ToolContext, Arc<Mutex<Vec<String>>>) {
        let mut ctx = ToolContext::local(dir);
        ctx.terminals = Some(fake.clone());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        ctx.on_terminal = Some(Arc::new(move |id: &str| {
            s.lock().unwrap().push(id.to_owned())
        }));
        (ctx, seen)
    }

    #[tokio::test]
    async fn success_announces_reads_and_releases() {
        let dir = tempfile::tempdir().unwrap();
        let fake = Arc::new(Fake {
            exit: Some(TerminalExit {
                exit_code: Some(0),
                signal: None,
            }),
            output: "hi".into(),
            ..Fake::default()
        });
        let (ctx, seen) = ctx_with(&fake, dir.path());
        let out = run(&ctx, "Bash", json!({"command": "echo hi"})).await;
        assert_eq!(out, ToolOutput::ok("hi\nExit code: 0"));
        assert_eq!(*seen.lock().unwrap(), ["t1"]);
        let calls = fake.calls();
        assert!(calls[0].starts_with("create "), "{calls:?}");
        assert!(calls[0].contains("\"-c\", \"echo hi\""), "{calls:?}");
        assert_eq!(calls[1..], ["wait", "output", "release"]);
    }

    #[tokio::test]
    async fn timeout_kills_then_reads_then_releases() {
        let dir = tempfile::tempdir().unwrap();
        let fake = Arc::new(Fake {
            output: "started".into(),
            truncated: true,
            output_exit: Some(TerminalExit {
                exit_code: None,
                signal: Some("SIGKILL".into()),
            }),
            ..Fake::default()
        });
        let (ctx, _) = ctx_with(&fake, dir.path());
        let out = run(
            &ctx,
            "Bash",
            json!({"command": "sleep 30", "timeout_ms": 50}),
        )
        .await;
        assert!(out.is_error);
        assert!(
            out.content.contains("dropped by the editor's terminal"),
            "{}",
            out.content
        );
        assert!(
            out.content
                .contains("started\nCommand timed out after 50 ms"),
            "{}",
            out.content
        );
        assert_eq!(fake.calls()[1..], ["wait", "kill", "output", "release"]);
    }

    #[tokio::test]
    async fn a_cancel_ends_the_call_while_kill_or_output_is_unanswered() {
        let dir = tempfile::tempdir().unwrap();
        for (fake, input, before_release) in [
            // Timed out, and the editor never answers the kill.
            (
                Fake {
                    hang_kill: true,
                    ..Fake::default()
                },
                json!({"command": "sleep 30", "timeout_ms": 20}),
                "kill",
            ),
            // Exited, and the editor never answers the output.
            (
                Fake {
                    exit: Some(TerminalExit {
                        exit_code: Some(0),
                        signal: None,
                    }),
                    hang_output: true,
                    ..Fake::default()
                },
                json!({"command": "true"}),
                "output",
            ),
        ] {
            let fake = Arc::new(fake);
            let (ctx, _) = ctx_with(&fake, dir.path());
            let cancel = ctx.cancel.clone();
            let watched = fake.clone();
            tokio::spawn(async move {
                while !watched.calls().iter().any(|c| c == before_release) {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                cancel.cancel();
            });
            let out = tokio::time::timeout(Duration::from_secs(3), run(&ctx, "Bash", input))
                .await
                .expect("the cancel ends the call");
            assert_eq!(out, ToolOutput::cancelled());
            assert_eq!(fake.calls().last().map(String::as_str), Some("release"));
        }
    }

    #[tokio::test]
    async fn cancel_kills_and_releases() {
        let dir = tempfile::tempdir().unwrap();
        let fake = Arc::new(Fake::default());
        let (ctx, _) = ctx_with(&fake, dir.path());
        let cancel = ctx.cancel.clone();
        let watched = fake.clone();
        // Cancelled while the editor runs the command (MAIA waits on it).
        tokio::spawn(async move {
            while !watched.calls().iter().any(|c| c == "wait") {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            cancel.cancel();
        });
        let out = tokio::time::timeout(
            Duration::from_secs(3),
            run(&ctx, "Bash", json!({"command": "sleep 30"})),
        )
        .await
        .expect("the cancel ends the call");
        assert_eq!(out, ToolOutput::cancelled());
        assert_eq!(fake.calls()[1..], ["wait", "kill", "release"]);
    }

    #[tokio::test]
    async fn a_terminal_created_while_cancelling_is_still_released() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = ToolContext::local(dir.path());
        let fake = Arc::new(Fake {
            cancel_in_create: Some(ctx.cancel.clone()),
            ..Fake::default()
        });
        ctx.terminals = Some(fake.clone());
        let out = run(&ctx, "Bash", json!({"command": "sleep 30"})).await;
        assert_eq!(out, ToolOutput::cancelled());
        assert_eq!(fake.calls()[1..], ["kill", "release"]);
    }

    #[tokio::test]
    async fn failures_are_reported_and_nothing_runs_locally() {
        let dir = tempfile::tempdir().unwrap();
        let fake = Arc::new(Fake {
            fail_create: true,
            ..Fake::default()
        });
        let (ctx, seen) = ctx_with(&fake, dir.path());
        let marker = dir.path().join("ran");
        let command = format!("touch {}", marker.display());
        let out = run(&ctx, "Bash", json!({ "command": command })).await;
        assert!(
            out.is_error && out.content.contains("no terminals today"),
            "{}",
            out.content
        );
        assert!(!marker.exists(), "the command ran locally");
        assert!(seen.lock().unwrap().is_empty());
        assert_eq!(fake.calls().len(), 1);

        let fake = Arc::new(Fake {
            fail_output: true,
            exit: Some(TerminalExit::default()),
            ..Fake::default()
        });
        let (ctx, _) = ctx_with(&fake, dir.path());
        let out = run(&ctx, "Bash", json!({"command": "true"})).await;
        assert!(
            out.is_error && out.content.contains("gone"),
            "{}",
            out.content
        );
        assert_eq!(fake.calls()[1..], ["wait", "output", "release"]);
    }

    #[tokio::test]
    async fn long_output_is_cut_in_the_middle_and_signals_reported() {
        let dir = tempfile::tempdir().unwrap();
        let fake = Arc::new(Fake {
            exit: Some(TerminalExit {
                exit_code: None,
                signal: Some("SIGTERM".into()),
            }),
            output: "x".repeat(100_000),
            ..Fake::default()
        });
        let (ctx, _) = ctx_with(&fake, dir.path());
        let out = run(&ctx, "Bash", json!({"command": "yes x"})).await;
        assert!(out.is_error);
        assert!(out.content.contains("characters truncated"));
        assert!(
            out.content.ends_with("killed by signal SIGTERM)"),
            "{}",
            &out.content[out.content.len() - 60..]
        );
        assert!(out.content.chars().count() < crate::tools::bash::MAX_OUTPUT_CHARS + 100);
    }
}
