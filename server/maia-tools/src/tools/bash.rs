//! The Bash tool: run a shell command with combined, capped output.
//!
//! The command runs as `bash -c` (`/bin/sh -c` when bash is missing; see
//! [`crate::shell`]) in its own process group with stdout and
//! stderr on one pipe (so output keeps its arrival order). On timeout,
//! cancellation, or once the shell has exited, the whole group is killed so
//! no background process outlives the call.

use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::time::Duration;

use tokio::net::unix::pipe;

use crate::context::{ToolContext, ToolOutput};
use crate::input::BashInput;
use crate::runner::{self, Outcome};

/// Most characters of output returned (the middle is dropped).
pub const MAX_OUTPUT_CHARS: usize = 30_000;
pub(crate) async fn execute(input: &BashInput, ctx: &ToolContext) -> ToolOutput {
    if let Some(terminals) = &ctx.terminals {
        return match terminal_request(input, ctx) {
            Ok(request) => crate::terminal::run_bash(input, ctx, terminals.as_ref(), request).await,
            Err(message) => ToolOutput::error(message),
        };
    }
    match run(input, ctx).await {
        Ok(output) => output,
        Err(err) => ToolOutput::error(format!("Could not run the command: {err}")),
    }
}

/// The terminal a Bash call runs in: `maia __terminal` (see
/// [`crate::terminal::TERMINAL_ARG`]) with the command, MAIA's variables
/// and, under the session's sandbox, its policy in the environment; the
/// session's cwd. Outside the `maia` binary (tests of this crate), without
/// a sandbox: the shell itself with `-c COMMAND`.
fn terminal_request(
    input: &BashInput,
    ctx: &ToolContext,
) -> Result<crate::terminal::TerminalRequest, String> {
    use crate::terminal::{COMMAND_ENV, POLICY_ENV, TERMINAL_ARG};
    let refused = |e: &dyn std::fmt::Display| {
        format!(
            "The command was not run: {e}. Ask the user to run it without the sandbox or to set `sandbox` in ~/.maia/settings.json."
        )
    };
    let mut env = vec![(
        "MAIA_CWD".to_owned(),
        ctx.cwd.to_string_lossy().into_owned(),
    )];
    let mut sandboxed = false;
    if let Some(sandbox) = &ctx.sandbox {
        if let Some(tmp) = sandbox.temp_dir().map_err(|e| refused(&e))? {
            env.push(("TMPDIR".to_owned(), tmp.to_string_lossy().into_owned()));
        }
        if sandbox.policy().mode != crate::sandbox::SandboxMode::Off {
            let policy = serde_json::to_string(sandbox.policy()).map_err(|e| refused(&e))?;
            env.push((POLICY_ENV.to_owned(), policy));
            sandboxed = true;
        }
    }
    let (command, args) = match crate::process::maia_exe() {
        Some(exe) => {
            env.push((COMMAND_ENV.to_owned(), input.command.clone()));
            (
                exe.to_string_lossy().into_owned(),
                vec![TERMINAL_ARG.to_owned()],
            )
        }
        None if sandboxed => {
            return Err(refused(
                &"the sandbox needs the maia binary, which cannot be found",
            ));
        }
        None => (
            crate::shell().path.to_string_lossy().into_owned(),
            vec!["-c".to_owned(), input.command.clone()],
        ),
    };
    Ok(crate::terminal::TerminalRequest {
        command,
        args,
        env,
        cwd: ctx.cwd.clone(),
        output_byte_limit: crate::terminal::OUTPUT_BYTE_LIMIT,
    })
}

async fn run(input: &BashInput, ctx: &ToolContext) -> std::io::Result<ToolOutput> {
    let timeout_ms = input.effective_timeout_ms();
    let (reader, writer) = std::io::pipe()?;
    let writer_for_stderr = writer.try_clone()?;
    let mut command = crate::process::command(&crate::shell().path);
    command
        .arg("-c")
        .arg(&input.command)
        .current_dir(&ctx.cwd)
        .env("MAIA_CWD", &ctx.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(writer))
        .stderr(Stdio::from(writer_for_stderr));
    if let Some(sandbox) = &ctx.sandbox
        && let Err(e) = sandbox.attach(&mut command)
    {
        return Ok(ToolOutput::error(format!(
            "The command was not run: {e}. Ask the user to run it without the sandbox or to set `sandbox` in ~/.maia/settings.json."
        )));
    }
    let spawned = command.spawn();
    // The command holds the parent's copies of the write end; close them so
    // the reader sees EOF once every child has closed its own.
    drop(command);
    let child = spawned?;
    tracing::debug!(command = %input.command, pid = ?child.id(), "bash started");
    let receiver = pipe::Receiver::from_owned_fd(OwnedFd::from(reader))?;
    if let Some(observer) = &ctx.on_output {
        observer(runner::Progress::Started {
            command: &input.command,
            cwd: &ctx.cwd,
        });
    }
    let finished = runner::run(
        child,
        vec![Box::new(receiver)],
        Duration::from_millis(timeout_ms),
        &ctx.cancel,
        ctx.on_output.as_ref(),
        ctx.outputs
            .as_deref()
            .map(|dir| crate::kept::file_for(dir, "Bash")),
    )
    .await;
    let outcome = finished.outcome;
    if let Some(observer) = &ctx.on_output {
        runner::exited(observer, &outcome);
    }
    let output = finished.outputs.into_iter().next().unwrap_or_default();

    let mut text = output.finish_as(MAX_OUTPUT_CHARS, "Bash");
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    let result = match outcome {
        Outcome::Cancelled => {
            tracing::debug!("bash cancelled");
            return Ok(ToolOutput::cancelled());
        }
        Outcome::TimedOut => ToolOutput::error(format!(
            "{text}Command timed out after {timeout_ms} ms and was killed."
        )),
        Outcome::WaitFailed(err) => {
            ToolOutput::error(format!("{text}Waiting for the command failed: {err}"))
        }
        Outcome::Exited(status) => {
            let (code, killed) = runner::exit_code(status);
            runner::exit_output(ctx.sandbox.as_deref(), &text, code, killed)
        }
    };
    Ok(result)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use serde_json::json;

    use super::*;
    use crate::CappedOutput;
    use crate::tools::test_util::{ctx, run};

    #[tokio::test]
    async fn exit_codes_and_cwd() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path());
        let out = run(&ctx, "Bash", json!({"command": "pwd; echo \"$MAIA_CWD\""})).await;
        let d = dir.path().display();
        assert_eq!(out.content, format!("{d}\n{d}\nExit code: 0"));
        assert!(!out.is_error);
        let out = run(&ctx, "Bash", json!({"command": "exit 3"})).await;
        assert!(out.is_error);
        assert_eq!(out.content, "Exit code: 3");
    }

    #[tokio::test]
    async fn interleaves_stdout_and_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path());
        let out = run(
            &ctx,
            "Bash",
            json!({"command": "echo a; echo b >&2; echo c"}),
        )
        .await;
        assert_eq!(out.content, "a\nb\nc\nExit code: 0");
    }

    /// The observer hears the start, each part of the output while the
    /// command still runs, and the exit; the result is unchanged.
    #[tokio::test]
    async fn an_observer_hears_output_before_the_end() {
        use std::sync::{Arc, Mutex};
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = ctx(dir.path());
        let heard: Arc<Mutex<Vec<String>>> = Arc::default();
        let log = heard.clone();
        let gate = dir.path().join("go");
        ctx.on_output = Some(Arc::new(move |p: runner::Progress<'_>| {
            let line = match p {
                runner::Progress::Started { command, .. } => format!("start {command}"),
                runner::Progress::Output(bytes) => {
                    format!("out {}", String::from_utf8_lossy(bytes))
                }
                runner::Progress::Exited { code, signal } => format!("exit {code:?} {signal:?}"),
            };
            log.lock().unwrap().push(line);
        }));
        // The command waits for the test to see its first part.
        let command = format!(
            "echo one; while [ ! -e {} ]; do sleep 0.01; done; echo two; exit 4",
            gate.display()
        );
        let task = tokio::spawn({
            let ctx = ctx.clone();
            async move { run(&ctx, "Bash", json!({ "command": command })).await }
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while !heard.lock().unwrap().iter().any(|l| l == "out one\n") {
            assert!(Instant::now() < deadline, "{:?}", heard.lock().unwrap());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(!task.is_finished());
        std::fs::write(&gate, "").unwrap();
        let out = task.await.unwrap();
        assert_eq!(out.content, "one\ntwo\nExit code: 4");
        let heard = heard.lock().unwrap().clone();
        assert!(heard[0].starts_with("start echo one"), "{heard:?}");
        assert_eq!(heard.last().unwrap(), "exit Some(4) None", "{heard:?}");
        let output: String = heard
            .iter()
            .filter_map(|l| l.strip_prefix("out "))
            .collect();
        assert_eq!(output, "one\ntwo\n");
    }

    /// A command MAIA stops on its timeout is told as killed by `SIGKILL`;
    /// one a signal ended, by that signal.
    #[tokio::test]
    async fn an_observer_hears_how_a_command_was_ended() {
        use std::sync::{Arc, Mutex};
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = ctx(dir.path());
        let exits: Arc<Mutex<Vec<String>>> = Arc::default();
        let log = exits.clone();
        ctx.on_output = Some(Arc::new(move |p: runner::Progress<'_>| {
            if let runner::Progress::Exited { code, signal } = p {
                log.lock().unwrap().push(format!("{code:?} {signal:?}"));
            }
        }));
        run(
            &ctx,
            "Bash",
            json!({"command": "sleep 30", "timeout_ms": 200}),
        )
        .await;
        run(&ctx, "Bash", json!({"command": "kill -TERM $$"})).await;
        assert_eq!(
            *exits.lock().unwrap(),
            vec!["None Some(\"SIGKILL\")", "None Some(\"SIGTERM\")"]
        );
    }

    #[tokio::test]
    async fn timeout_kills() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path());
        let start = Instant::now();
        let out = run(
            &ctx,
            "Bash",
            json!({"command": "echo started; sleep 30", "timeout_ms": 300}),
        )
        .await;
        assert!(start.elapsed() < Duration::from_secs(3));
        assert!(out.is_error);
        assert!(out.content.starts_with("started\n"), "{}", out.content);
        assert!(
            out.content.contains("timed out after 300 ms"),
            "{}",
            out.content
        );
    }

    #[tokio::test]
    async fn cancel_kills_promptly() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path());
        let cancel = ctx.cancel.clone();
        let (started, finished) = (dir.path().join("started"), dir.path().join("finished"));
        let seen = started.clone();
        // Cancelled once the command runs: mid-flight, not before it began.
        tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(5);
            while !seen.exists() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            cancel.cancel();
        });
        let start = Instant::now();
        let command = "touch started; sleep 30; touch finished";
        let out = run(&ctx, "Bash", json!({ "command": command })).await;
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(out.is_error);
        assert_eq!(out.content, "cancelled");
        assert!(started.exists() && !finished.exists());
    }

    fn is_dead(pid: i32) -> bool {
        if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err() {
            return true;
        }
        // Not yet reaped by its new parent: a zombie is dead too.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|stat| {
                stat.rsplit(')')
                    .next()
                    .is_some_and(|rest| rest.trim_start().starts_with('Z'))
            })
            .unwrap_or(true)
    }

    #[tokio::test]
    async fn background_child_does_not_survive() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path());
        let start = Instant::now();
        let out = run(&ctx, "Bash", json!({"command": "sleep 30 & echo $!"})).await;
        assert!(start.elapsed() < Duration::from_secs(3));
        assert!(!out.is_error, "{}", out.content);
        let pid: i32 = out.content.lines().next().unwrap().trim().parse().unwrap();
        let mut dead = false;
        for _ in 0..50 {
            if is_dead(pid) {
                dead = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(dead, "background sleep {pid} survived");
    }

    #[tokio::test]
    async fn huge_output_truncated_in_the_middle() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path());
        let out = run(&ctx, "Bash", json!({"command": "seq 1 200000"})).await;
        assert!(!out.is_error);
        assert!(out.content.starts_with("1\n2\n3\n"));
        assert!(out.content.ends_with("199999\n200000\nExit code: 0"));
        assert!(out.content.contains("characters truncated"));
        assert!(out.content.chars().count() <= MAX_OUTPUT_CHARS + 20);
    }

    #[test]
    fn capped_output_counts_dropped_bytes() {
        let mut out = CappedOutput::default();
        for _ in 0..100 {
            out.push(&[b'x'; 10_000]);
        }
        let text = out.finish(MAX_OUTPUT_CHARS);
        assert!(text.chars().count() <= MAX_OUTPUT_CHARS);
        let kept = text.chars().filter(|&c| c == 'x').count();
        let note = text.split("[... ").nth(1).unwrap();
        let dropped: usize = note.split(' ').next().unwrap().parse().unwrap();
        assert_eq!(kept + dropped, 1_000_000);
    }

    #[tokio::test]
    async fn missing_cwd_is_an_error() {
        let ctx = ctx(std::path::Path::new("/definitely/not/here"));
        let out = run(&ctx, "Bash", json!({"command": "true"})).await;
        assert!(
            out.is_error && out.content.contains("Could not run"),
            "{}",
            out.content
        );
    }
}
