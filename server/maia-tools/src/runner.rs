//! Running a started command to its end: its output pipes read into capped
//! buffers while it runs, a timeout, cancellation, and the whole process
//! tree stopped afterwards, and how an exit is told to the model
//! ([`exit_output`]). Shared by `Bash` and custom tools. A caller may watch
//! a run ([`Observer`]): its output bytes as they are read, then its exit.

use std::path::Path;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

use crate::ToolOutput;
use crate::process::GroupGuard;
use crate::truncate::CappedOutput;

/// How long to keep reading after the command exited (background children
/// may hold a pipe open until the tree is stopped).
pub const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(200);

/// How a run ended.
#[derive(Debug)]
pub enum Outcome {
    Exited(ExitStatus),
    WaitFailed(std::io::Error),
    TimedOut,
    Cancelled,
}

/// What a run produced: how it ended and each pipe's output, in the order
/// the pipes were given.
#[derive(Debug)]
pub struct Finished {
    pub outcome: Outcome,
    pub outputs: Vec<CappedOutput>,
}

/// What a running command tells its watcher ([`Observer`]), in order:
/// `Started` once, `Output` for each read of its pipes (the bytes as they
/// came, stdout and stderr alike), `Exited` once, after the last output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress<'a> {
    /// The command runs (`command` as the shell was given it, in `cwd`).
    Started {
        command: &'a str,
        cwd: &'a Path,
    },
    Output(&'a [u8]),
    /// It ended: its exit code, or the signal that ended it (`SIGKILL` when
    /// MAIA stopped it on a timeout or a cancel); neither when unknown.
    Exited {
        code: Option<i32>,
        signal: Option<&'a str>,
    },
}

/// Watches a command while it runs ([`crate::ToolContext::on_output`]).
/// Called on the reading task: it must return at once.
pub type Observer = Arc<dyn Fn(Progress<'_>) + Send + Sync>;

/// How `outcome` is told to an [`Observer`].
pub fn exited(observer: &Observer, outcome: &Outcome) {
    use std::os::unix::process::ExitStatusExt;
    let name = |n: i32| {
        nix::sys::signal::Signal::try_from(n)
            .map(|s| s.as_str())
            .ok()
    };
    let (code, signal) = match outcome {
        Outcome::Exited(status) => (status.code(), status.signal().and_then(name)),
        Outcome::TimedOut | Outcome::Cancelled => (None, Some("SIGKILL")),
        Outcome::WaitFailed(_) => (None, None),
    };
    observer(Progress::Exited { code, signal });
}

/// One output pipe being read.
struct Stream {
    reader: Option<Box<dyn AsyncRead + Unpin + Send>>,
    output: CappedOutput,
    buf: Vec<u8>,
    observer: Option<Observer>,
}

impl Stream {
    fn open(&self) -> bool {
        self.reader.is_some()
    }

    /// Reads once; closes the stream at EOF or on error. Cancel-safe.
    async fn read_some(&mut self) {
        let Some(reader) = self.reader.as_mut() else {
            return;
        };
        match reader.read(&mut self.buf).await {
            Ok(0) => self.reader = None,
            Ok(n) => {
                self.output.push(&self.buf[..n]);
                if let Some(observer) = &self.observer {
                    observer(Progress::Output(&self.buf[..n]));
                }
            }
            Err(err) => {
                tracing::debug!(%err, "reading command output failed");
                self.reader = None;
            }
        }
    }
}

/// Reads from whichever stream has data first; pending forever when none
/// is open (callers guard on that).
async fn read_any(streams: &mut [Stream]) {
    let reads = streams
        .iter_mut()
        .filter(|s| s.open())
        .map(|s| Box::pin(s.read_some()));
    let reads: Vec<_> = reads.collect();
    if reads.is_empty() {
        std::future::pending::<()>().await;
    }
    futures_util::future::select_all(reads).await;
}

/// Runs `child` (started with [`crate::process::command`]) until it exits,
/// `timeout` passes or `cancel` fires, reading `pipes` meanwhile (each
/// read told to `observer`). Then the whole tree is stopped, what is left
/// in the pipes is read for a moment, and the outputs are returned.
pub async fn run(
    mut child: tokio::process::Child,
    pipes: Vec<Box<dyn AsyncRead + Unpin + Send>>,
    timeout: Duration,
    cancel: &CancellationToken,
    observer: Option<&Observer>,
    keep: Option<std::path::PathBuf>,
) -> Finished {
    let group = GroupGuard::new(child.id());
    let mut keep = keep;
    let mut streams: Vec<Stream> = pipes
        .into_iter()
        .map(|reader| Stream {
            reader: Some(reader),
            // The first pipe's output is kept whole when `keep` names a file.
            output: keep
                .take()
                .map_or_else(CappedOutput::default, CappedOutput::keeping),
            buf: vec![0; 16 * 1024],
            observer: observer.cloned(),
        })
        .collect();
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let outcome = loop {
        let any_open = streams.iter().any(Stream::open);
        tokio::select! {
            biased;
            () = cancel.cancelled() => break Outcome::Cancelled,
            () = &mut deadline => break Outcome::TimedOut,
            () = read_any(&mut streams), if any_open => {}
            status = child.wait() => break match status {
                Ok(status) => Outcome::Exited(status),
                Err(err) => Outcome::WaitFailed(err),
            },
        }
    };
    if !matches!(outcome, Outcome::Exited(_)) {
        group.kill();
        // Reap the leader; it was just stopped so this is quick.
        let _ = tokio::time::timeout(Duration::from_secs(1), child.wait()).await;
    }
    let drain = async {
        while streams.iter().any(Stream::open) {
            read_any(&mut streams).await;
        }
    };
    let _ = tokio::time::timeout(DRAIN_AFTER_EXIT, drain).await;
    // Whatever is left of the tree (background children) goes now.
    drop(group);
    Finished {
        outcome,
        outputs: streams.into_iter().map(|s| s.output).collect(),
    }
}

/// How an exit status is told: the exit code, else `128 + signal` with the
/// signal, else unknown (see [`exit_output`]).
pub fn exit_code(status: ExitStatus) -> (Option<i64>, Option<String>) {
    use std::os::unix::process::ExitStatusExt;
    (
        status.code().map(i64::from),
        status
            .signal()
            .map(|signal| format!("{} (killed by signal {signal})", 128 + signal)),
    )
}

/// The result of a command that ended with `text` as its output: exit code
/// `code` (with the sandbox's note, and [`ToolOutput::sandbox_denied`]
/// set, when a failure looks like a denial, so the user is offered one run
/// without it), else `killed` (how a signal is
/// told), else an unknown exit. The one exit formatter of `Bash` (local or
/// in the editor's terminal) and custom tools.
pub fn exit_output(
    sandbox: Option<&crate::sandbox::Sandbox>,
    text: &str,
    code: Option<i64>,
    killed: Option<String>,
) -> ToolOutput {
    match (code, killed) {
        (Some(0), _) => ToolOutput::ok(format!("{text}Exit code: 0")),
        (Some(code), _) => match sandbox {
            Some(sandbox) if crate::sandbox::denial(text) => ToolOutput {
                sandbox_denied: true,
                ..ToolOutput::error(format!(
                    "{text}Exit code: {code}\n{}",
                    crate::sandbox::denial_note(sandbox.policy())
                ))
            },
            _ => ToolOutput::error(format!("{text}Exit code: {code}")),
        },
        (None, Some(killed)) => ToolOutput::error(format!("{text}Exit code: {killed}")),
        (None, None) => ToolOutput::error(format!("{text}Exit code: unknown")),
    }
}
