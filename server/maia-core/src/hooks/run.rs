//! Running one hook command: the shell `Bash` uses (`bash -c`), started
//! like every command MAIA runs (`maia_tools::process::command`: its own
//! process group, under the guard), in the session's sandbox when it has
//! one, in the project folder, its event as JSON on stdin, stdout and
//! stderr read apart; at its timeout (or when the turn is cancelled) the
//! whole process tree is killed (`maia_tools::runner::run`).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use maia_tools::runner::{self, Outcome};
use maia_tools::sandbox::Sandbox;
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

/// Most characters kept of a hook's stdout and of its stderr.
pub const MAX_OUTPUT_CHARS: usize = 10_000;

/// How a hook run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    /// It exited with this code.
    Exited(i32),
    /// A signal ended it (its name or number).
    Killed(String),
    /// Its timeout passed: it was killed with its whole tree.
    TimedOut,
    /// The turn was cancelled: it was killed with its whole tree.
    Cancelled,
    /// It could not be started (or waited for): why.
    Failed(String),
}

/// What one hook run produced.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub ended: Ended,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

/// Where and how a hook runs.
pub struct Place<'a> {
    pub cwd: &'a Path,
    pub sandbox: Option<&'a Sandbox>,
    pub session_id: &'a str,
}

/// Runs `command` with `input` on its stdin.
pub async fn run(
    command: &str,
    input: &str,
    timeout: Duration,
    place: &Place<'_>,
    cancel: &CancellationToken,
) -> RunResult {
    let start = Instant::now();
    let failed = |why: String| RunResult {
        ended: Ended::Failed(why),
        stdout: String::new(),
        stderr: String::new(),
        elapsed: start.elapsed(),
    };
    let mut cmd = maia_tools::process::command(&maia_tools::shell().path);
    cmd.arg("-c")
        .arg(command)
        .current_dir(place.cwd)
        .env("MAIA_PROJECT_DIR", place.cwd)
        .env("CLAUDE_PROJECT_DIR", place.cwd)
        .env("MAIA_CWD", place.cwd)
        .env("MAIA_SESSION_ID", place.session_id)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(sandbox) = place.sandbox {
        if let Ok(Some(tmp)) = sandbox.temp_dir() {
            cmd.env("TMPDIR", tmp);
        }
        if let Err(e) = sandbox.attach(&mut cmd) {
            return failed(format!("the sandbox could not be set up: {e}"));
        }
    }
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => return failed(format!("could not start: {e}")),
    };
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return failed("its output could not be read".to_owned());
    };
    if let Some(mut stdin) = child.stdin.take() {
        let input = input.as_bytes().to_vec();
        // Written apart: a hook that never reads its stdin must not stall.
        tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
            let _ = stdin.shutdown().await;
        });
    }
    let finished = runner::run(
        child,
        vec![Box::new(stdout), Box::new(stderr)],
        timeout,
        cancel,
        None,
        None,
    )
    .await;
    let mut outputs = finished.outputs.into_iter();
    let stdout = outputs.next().unwrap_or_default().finish(MAX_OUTPUT_CHARS);
    let stderr = outputs.next().unwrap_or_default().finish(MAX_OUTPUT_CHARS);
    let ended = match finished.outcome {
        Outcome::Exited(status) => {
            use std::os::unix::process::ExitStatusExt;
            match (status.code(), status.signal()) {
                (Some(code), _) => Ended::Exited(code),
                (None, Some(signal)) => Ended::Killed(
                    nix::sys::signal::Signal::try_from(signal)
                        .map(|s| s.as_str().to_owned())
                        .unwrap_or_else(|_| signal.to_string()),
                ),
                (None, None) => Ended::Failed("it ended in an unknown way".to_owned()),
            }
        }
        Outcome::TimedOut => Ended::TimedOut,
        Outcome::Cancelled => Ended::Cancelled,
        Outcome::WaitFailed(e) => Ended::Failed(format!("waiting for it failed: {e}")),
    };
    RunResult {
        ended,
        stdout,
        stderr,
        elapsed: start.elapsed(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(dir: &Path) -> Place<'_> {
        Place {
            cwd: dir,
            sandbox: None,
            session_id: "s1",
        }
    }

    #[tokio::test]
    async fn stdin_stdout_stderr_and_the_exit_code() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let r = run(
            "read -r line; echo \"got $line\"; echo oops >&2; exit 2",
            "{\"a\":1}\n",
            Duration::from_secs(10),
            &place(&dir),
            &CancellationToken::new(),
        )
        .await;
        assert_eq!(r.ended, Ended::Exited(2));
        assert_eq!(r.stdout.trim(), "got {\"a\":1}");
        assert_eq!(r.stderr.trim(), "oops");
    }

    #[tokio::test]
    async fn a_hung_hook_and_its_children_are_killed_at_the_timeout() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let pidfile = dir.join("pid");
        let command = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let start = Instant::now();
        let r = run(
            &command,
            "",
            Duration::from_millis(300),
            &place(&dir),
            &CancellationToken::new(),
        )
        .await;
        assert_eq!(r.ended, Ended::TimedOut);
        assert!(start.elapsed() < Duration::from_secs(5));
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .expect("the hook wrote its child's pid");
        // The background child is gone (or a zombie about to be reaped).
        let alive = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false);
        assert!(!alive, "the hook's child outlived its timeout");
    }

    #[tokio::test]
    async fn a_hook_that_ignores_stdin_does_not_stall() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let big = "x".repeat(1 << 20);
        let r = run(
            "echo done",
            &big,
            Duration::from_secs(10),
            &place(&dir),
            &CancellationToken::new(),
        )
        .await;
        assert_eq!(r.ended, Ended::Exited(0));
        assert_eq!(r.stdout.trim(), "done");
    }
}
