//! One network client's outgoing messages: bounded queues, one per stream
//! (a WebSocket has one; a Streamable HTTP connection has its
//! connection-scoped stream and one per session), drained by the
//! transport in order.
//!
//! Invariants:
//! - messages of one stream leave in the order they were pushed;
//! - live messages past its limit unread close the outbox with a reason
//!   instead of growing it (a slow or stuck reader cannot hold the
//!   daemon's memory or stall a session); replays and answers, whose size
//!   the client asked for, are not counted against it.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Which stream a message travels on: `None` is the connection's own
/// (and a WebSocket's only one), `Some(session)` a session's.
pub type Scope = Option<String>;

#[derive(Default)]
struct Queues {
    by_scope: HashMap<Scope, VecDeque<String>>,
    len: usize,
}

/// See the module's documentation.
pub struct Outbox {
    /// One queue per session (Streamable HTTP) or one for all (WebSocket).
    split: bool,
    /// Live messages that may wait unread.
    limit: usize,
    queues: Mutex<Queues>,
    notify: Notify,
    closed: CancellationToken,
    reason: Mutex<Option<String>>,
}

impl Outbox {
    pub fn new(split: bool, limit: usize) -> Self {
        Outbox {
            split,
            limit,
            queues: Mutex::new(Queues::default()),
            notify: Notify::new(),
            closed: CancellationToken::new(),
            reason: Mutex::new(None),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queues> {
        // Every change is one push or drain: usable after a panic.
        self.queues
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `text` on `scope`'s stream. A `bounded` push past the limit
    /// closes the outbox instead and answers false.
    pub fn push(&self, scope: Option<&str>, text: String, bounded: bool) -> bool {
        if self.closed.is_cancelled() {
            return false;
        }
        {
            let mut queues = self.lock();
            if bounded && queues.len >= self.limit {
                drop(queues);
                self.close(&format!(
                    "the client fell behind: {} messages were left unread",
                    self.limit
                ));
                return false;
            }
            let key = if self.split {
                scope.map(str::to_owned)
            } else {
                None
            };
            queues.by_scope.entry(key).or_default().push_back(text);
            queues.len += 1;
        }
        self.notify.notify_waiters();
        true
    }

    /// Takes what waits on `scope`'s stream (every stream's, unsplit).
    pub fn take(&self, scope: Option<&str>) -> Vec<String> {
        let mut queues = self.lock();
        let key = if self.split {
            scope.map(str::to_owned)
        } else {
            None
        };
        let taken: Vec<String> = queues
            .by_scope
            .get_mut(&key)
            .map(|q| q.drain(..).collect())
            .unwrap_or_default();
        queues.len -= taken.len();
        taken
    }

    /// The next messages of `scope`'s stream, waiting for some; `None`
    /// once the outbox is closed.
    pub async fn next_batch(&self, scope: Option<&str>) -> Option<Vec<String>> {
        loop {
            let notified = self.notify.notified();
            if self.closed.is_cancelled() {
                return None;
            }
            let batch = self.take(scope);
            if !batch.is_empty() {
                return Some(batch);
            }
            tokio::select! {
                () = notified => {}
                () = self.closed.cancelled() => return None,
            }
        }
    }

    /// Closes the outbox; the transport ends the connection telling
    /// `reason`. The first reason stays.
    pub fn close(&self, reason: &str) {
        {
            let mut kept = self
                .reason
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if kept.is_none() {
                *kept = Some(reason.to_owned());
            }
        }
        self.closed.cancel();
        self.notify.notify_waiters();
    }

    /// Whether every message pushed has been taken by the transport.
    pub fn is_drained(&self) -> bool {
        self.lock().len == 0
    }

    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    pub async fn closed(&self) {
        self.closed.cancelled().await;
    }

    /// Why the outbox was closed, if it was.
    pub fn reason(&self) -> Option<String> {
        self.reason
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: usize = 64;

    #[test]
    fn a_reader_that_falls_behind_is_dropped_with_a_reason() {
        let outbox = Outbox::new(false, LIMIT);
        for n in 0..LIMIT {
            assert!(outbox.push(None, n.to_string(), true));
        }
        // Answers and replays are not counted against the limit.
        assert!(outbox.push(None, "answer".into(), false));
        assert!(!outbox.push(None, "one too many".into(), true));
        assert!(outbox.is_closed());
        assert!(outbox.reason().unwrap_or_default().contains("fell behind"));
    }

    #[test]
    fn split_streams_keep_their_own_order() {
        let outbox = Outbox::new(true, LIMIT);
        outbox.push(Some("s"), "a".into(), true);
        outbox.push(None, "x".into(), true);
        outbox.push(Some("s"), "b".into(), true);
        assert_eq!(outbox.take(Some("s")), ["a", "b"]);
        assert_eq!(outbox.take(None), ["x"]);
    }
}
