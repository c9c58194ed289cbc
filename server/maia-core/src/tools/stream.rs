//! A command's output streamed to the session's events while it runs
//! ([`Event::Command`]): the observer the router gives a `Bash` call
//! ([`maia_tools::ToolContext::on_output`]) turns the runner's reads into
//! coalesced events. The reading task only appends to a bounded buffer;
//! a small task sends what gathered at most once per [`INTERVAL`], so a
//! chatty command cannot flood the event channel, and at most
//! [`MAX_PENDING`] bytes wait (the rest of an interval's output is counted
//! and named, not kept). The exit is sent after a last flush. What the
//! model sees (the call's result) does not come from here.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use maia_tools::runner::{Observer, Progress};
use tokio::sync::Notify;
use tokio::sync::mpsc::UnboundedSender;

use crate::event::{CommandProgress, Event};

/// At most one output event per command in this time.
pub(crate) const INTERVAL: Duration = Duration::from_millis(50);

/// Most output bytes waiting for the next event.
pub(crate) const MAX_PENDING: usize = 64 * 1024;

#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    /// Bytes left out since the last event (over [`MAX_PENDING`]).
    dropped: u64,
    /// The command exited or its observer is gone: the flusher ends.
    closed: bool,
}

struct Shared {
    id: String,
    events: UnboundedSender<Event>,
    pending: Mutex<Pending>,
    wake: Notify,
}

impl Shared {
    fn send(&self, progress: CommandProgress) {
        let _ = self.events.send(Event::Command {
            tool_call_id: self.id.clone(),
            progress,
        });
    }

    /// Sends what waits (under the lock, so events keep their order);
    /// whether the stream is closed.
    fn flush(&self, pending: &mut Pending) -> bool {
        if !pending.bytes.is_empty() || pending.dropped > 0 {
            let mut bytes = std::mem::take(&mut pending.bytes);
            if pending.dropped > 0 {
                let note = format!(
                    "\r\n[{} bytes of output not shown here]\r\n",
                    std::mem::take(&mut pending.dropped)
                );
                bytes.extend_from_slice(note.as_bytes());
            }
            self.send(CommandProgress::Output(bytes));
        }
        pending.closed
    }

    fn close(&self) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.closed = true;
        }
        self.wake.notify_one();
    }
}

/// Sends what output is pending when woken, at most once per `INTERVAL`,
/// until the stream closes.
fn spawn_flusher(shared: Arc<Shared>) {
    tokio::spawn(async move {
        loop {
            shared.wake.notified().await;
            let closed = match shared.pending.lock() {
                Ok(mut pending) => shared.flush(&mut pending),
                Err(_) => true,
            };
            if closed {
                break;
            }
            tokio::time::sleep(INTERVAL).await;
        }
    });
}

/// Closes the stream when the observer is dropped (a call that never
/// reported an exit), so the flusher does not wait forever.
struct Closer(Arc<Shared>);

impl Drop for Closer {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// The observer of tool call `id`'s command, sending to `events`. Needs a
/// tokio runtime when it is first called (the flusher is a task).
pub(crate) fn observer(id: String, events: UnboundedSender<Event>) -> Observer {
    let shared = Arc::new(Shared {
        id,
        events,
        pending: Mutex::new(Pending::default()),
        wake: Notify::new(),
    });
    // The flusher starts with the first command's first report: most
    // calls that get an observer never run a command.
    let flusher = std::sync::Once::new();
    let closer = Closer(shared);
    Arc::new(move |progress: Progress<'_>| {
        let shared = &closer.0;
        flusher.call_once(|| spawn_flusher(shared.clone()));
        match progress {
            Progress::Started { command, cwd } => shared.send(CommandProgress::Started {
                command: command.to_owned(),
                cwd: cwd.to_path_buf(),
            }),
            Progress::Output(bytes) => {
                if let Ok(mut pending) = shared.pending.lock() {
                    let room = MAX_PENDING.saturating_sub(pending.bytes.len());
                    let kept = bytes.len().min(room);
                    pending.bytes.extend_from_slice(&bytes[..kept]);
                    pending.dropped += (bytes.len() - kept) as u64;
                }
                shared.wake.notify_one();
            }
            Progress::Exited { code, signal } => {
                if let Ok(mut pending) = shared.pending.lock() {
                    shared.flush(&mut pending);
                    pending.closed = true;
                    shared.send(CommandProgress::Exited {
                        code,
                        signal: signal.map(str::to_owned),
                    });
                }
                shared.wake.notify_one();
            }
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn outputs(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Event>) -> Vec<CommandProgress> {
        let mut out = Vec::new();
        while let Ok(Event::Command { progress, .. }) = rx.try_recv() {
            out.push(progress);
        }
        out
    }

    /// A flood of small reads becomes few events, none over the bound,
    /// with what was left out named; the exit comes last.
    #[tokio::test]
    async fn a_flood_is_coalesced_and_bounded() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let observer = observer("c1".into(), tx);
        let line = [b'x'; 1000];
        for _ in 0..1000 {
            observer(Progress::Output(&line));
        }
        observer(Progress::Exited {
            code: Some(0),
            signal: None,
        });
        let events = outputs(&mut rx);
        assert!(events.len() <= 3, "{}", events.len());
        let mut total = 0;
        for event in &events[..events.len() - 1] {
            let CommandProgress::Output(bytes) = event else {
                panic!("{event:?}");
            };
            assert!(bytes.len() <= MAX_PENDING + 64, "{}", bytes.len());
            total += bytes.len();
        }
        assert!(total >= MAX_PENDING, "{total}");
        let all: Vec<u8> = events
            .iter()
            .filter_map(|e| match e {
                CommandProgress::Output(b) => Some(b.clone()),
                _ => None,
            })
            .flatten()
            .collect();
        let text = String::from_utf8_lossy(&all);
        assert!(
            text.contains("bytes of output not shown here"),
            "{}",
            text.len()
        );
        assert_eq!(
            events.last(),
            Some(&CommandProgress::Exited {
                code: Some(0),
                signal: None
            })
        );
    }

    /// Output that arrives alone is sent without waiting for more.
    #[tokio::test]
    async fn a_quiet_part_is_sent_at_once() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let observer = observer("c1".into(), tx);
        observer(Progress::Output(b"one\n"));
        let first = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap();
        assert!(
            matches!(&first, Some(Event::Command { progress: CommandProgress::Output(b), .. }) if b == b"one\n"),
            "{first:?}"
        );
        observer(Progress::Output(b"two\n"));
        let second = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap();
        assert!(
            matches!(&second, Some(Event::Command { progress: CommandProgress::Output(b), .. }) if b == b"two\n"),
            "{second:?}"
        );
        drop(observer);
    }
}
