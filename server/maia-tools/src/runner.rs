//! Running a started command to its end: its output pipes read into capped
//! buffers while it runs, a timeout, cancellation, and the whole process
//! tree stopped afterwards. Shared by `Bash` and custom tools.

use std::process::ExitStatus;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

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

/// One output pipe being read.
struct Stream {
    reader: Option<Box<dyn AsyncRead + Unpin + Send>>,
    output: CappedOutput,
    buf: Vec<u8>,
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
            Ok(n) => self.output.push(&self.buf[..n]),
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
/// `timeout` passes or `cancel` fires, reading `pipes` meanwhile. Then the
/// whole tree is stopped, what is left in the pipes is read for a moment,
/// and the outputs are returned.
pub async fn run(
    mut child: tokio::process::Child,
    pipes: Vec<Box<dyn AsyncRead + Unpin + Send>>,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Finished {
    let group = GroupGuard::new(child.id());
    let mut streams: Vec<Stream> = pipes
        .into_iter()
        .map(|reader| Stream {
            reader: Some(reader),
            output: CappedOutput::default(),
            buf: vec![0; 16 * 1024],
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
