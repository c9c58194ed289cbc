//! Commands run in the background (`Bash` with `run_in_background`): started
//! like a Bash call (the shell, the sandbox, the guard), their combined output
//! read into a bounded log while they run, the whole tree stopped on request
//! or once the shell has exited.

use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio_util::sync::CancellationToken;

use crate::context::ToolContext;
use crate::input::BashInput;
use crate::process::GroupGuard;
use crate::runner::DRAIN_AFTER_EXIT;

/// Bytes of output kept per task (the oldest are dropped first).
pub const KEPT_BYTES: usize = 64 * 1024;

/// A task's output: the newest [`KEPT_BYTES`], and how far it was read.
#[derive(Debug, Default)]
pub struct TaskLog {
    kept: std::collections::VecDeque<u8>,
    /// Bytes written in all (the offset of the end of `kept`).
    total: u64,
    /// The offset up to which [`TaskLog::unread`] returned.
    read_to: u64,
}

impl TaskLog {
    pub fn push(&mut self, bytes: &[u8]) {
        self.kept.extend(bytes);
        self.total += bytes.len() as u64;
        let over = self.kept.len().saturating_sub(KEPT_BYTES);
        self.kept.drain(..over);
    }

    /// The output not returned before (saying how much was dropped unread).
    pub fn unread(&mut self) -> String {
        let start = self.total - self.kept.len() as u64;
        let from = self.read_to.max(start);
        let skip = usize::try_from(from - start).unwrap_or(usize::MAX);
        let bytes: Vec<u8> = self.kept.iter().skip(skip).copied().collect();
        let mut text = String::new();
        if from > self.read_to {
            text.push_str(&format!(
                "[{} bytes of older output were dropped]\n",
                from - self.read_to
            ));
        }
        text.push_str(&String::from_utf8_lossy(&bytes));
        self.read_to = self.total;
        text
    }

    /// The last `chars` characters kept.
    pub fn tail(&self, chars: usize) -> String {
        let bytes: Vec<u8> = self.kept.iter().copied().collect();
        let text = String::from_utf8_lossy(&bytes);
        let count = text.chars().count();
        text.chars().skip(count.saturating_sub(chars)).collect()
    }
}

/// How a background command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// It exited: its code, else how a signal killed it.
    Exited {
        code: Option<i64>,
        killed: Option<String>,
    },
    /// Stopped on request (`TaskStop`, the session ending).
    Stopped,
    /// Waiting for it failed.
    Failed(String),
}

/// A started command, not yet watched.
pub struct Started {
    child: tokio::process::Child,
    output: pipe::Receiver,
}

impl Started {
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }
}

/// Starts `input`'s command as a Bash call would, without waiting for it.
pub fn start(input: &BashInput, ctx: &ToolContext) -> Result<Started, String> {
    let (reader, writer) = std::io::pipe().map_err(|e| e.to_string())?;
    let writer_for_stderr = writer.try_clone().map_err(|e| e.to_string())?;
    let mut command = crate::process::command(&crate::shell().path);
    command
        .arg("-c")
        .arg(&input.command)
        .current_dir(&ctx.cwd)
        .env("MAIA_CWD", &ctx.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(writer))
        .stderr(Stdio::from(writer_for_stderr));
    if let Some(sandbox) = &ctx.sandbox {
        sandbox.attach(&mut command).map_err(|e| {
            format!(
                "The command was not run: {e}. Ask the user to run it without the sandbox or to set `sandbox` in ~/.maia/settings.json."
            )
        })?;
    }
    let spawned = command.spawn();
    drop(command);
    let child = spawned.map_err(|e| format!("Could not run the command: {e}"))?;
    let output = pipe::Receiver::from_owned_fd(OwnedFd::from(reader)).map_err(|e| e.to_string())?;
    Ok(Started { child, output })
}

/// Reads the command's output into `log` (and tells `observer` each read)
/// until it exits or `stop` fires; then its whole tree is stopped, and the
/// observer told how it ended.
pub async fn watch(
    started: Started,
    log: Arc<Mutex<TaskLog>>,
    stop: CancellationToken,
    observer: Option<crate::runner::Observer>,
) -> Ended {
    let Started {
        mut child,
        mut output,
    } = started;
    let group = GroupGuard::new(child.id());
    let mut buf = vec![0u8; 16 * 1024];
    let mut open = true;
    let push = |bytes: &[u8]| {
        if let Ok(mut log) = log.lock() {
            log.push(bytes);
        }
        if let Some(observer) = &observer {
            observer(crate::runner::Progress::Output(bytes));
        }
    };
    let mut outcome = crate::runner::Outcome::Cancelled;
    let ended = loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => {
                group.kill();
                let _ = tokio::time::timeout(std::time::Duration::from_secs(1), child.wait()).await;
                break Ended::Stopped;
            }
            read = output.read(&mut buf), if open => match read {
                Ok(0) | Err(_) => open = false,
                Ok(n) => push(&buf[..n]),
            },
            status = child.wait() => break match status {
                Ok(status) => {
                    outcome = crate::runner::Outcome::Exited(status);
                    let (code, killed) = crate::runner::exit_code(status);
                    Ended::Exited { code, killed }
                }
                Err(e) => {
                    let ended = Ended::Failed(e.to_string());
                    outcome = crate::runner::Outcome::WaitFailed(e);
                    ended
                }
            },
        }
    };
    if open && ended != Ended::Stopped {
        let drain = async {
            while let Ok(n) = output.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                push(&buf[..n]);
            }
        };
        let _ = tokio::time::timeout(DRAIN_AFTER_EXIT, drain).await;
    }
    drop(group);
    if let Some(observer) = &observer {
        crate::runner::exited(observer, &outcome);
    }
    ended
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_log_keeps_the_newest_bytes_and_says_what_was_dropped() {
        let mut log = TaskLog::default();
        log.push(b"hello\n");
        assert_eq!(log.unread(), "hello\n");
        assert_eq!(log.unread(), "");
        log.push(&vec![b'x'; KEPT_BYTES + 10]);
        let text = log.unread();
        assert!(
            text.starts_with("[10 bytes of older output were dropped]\n"),
            "{}",
            &text[..60]
        );
        assert_eq!(text.len() - text.find('\n').unwrap() - 1, KEPT_BYTES);
        assert_eq!(log.tail(3), "xxx");
    }
}
