//! One network client's outgoing messages: bounded queues, one per stream
//! (a WebSocket has one; a Streamable HTTP connection has its
//! connection-scoped stream and one per session), drained by the
//! transport in order.
//!
//! A v2 client's JSON-RPC batch is answered here as one array: the answers
//! to its requests are held as they are pushed (`maia_rpc::batch`) and the
//! array goes on the connection's stream once the last one is given.
//!
//! Invariants:
//! - messages of one stream leave in the order they were pushed;
//! - live messages past its limit unread close the outbox with a reason
//!   instead of growing it (a slow or stuck reader cannot hold the
//!   daemon's memory or stall a session); replays and answers, whose size
//!   the client asked for, are not counted against it.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use maia_rpc::batch::{self, Batches, Route, Sorted};
use serde_json::Value;
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
    /// The client's batches whose answers are not all given yet.
    batches: Batches,
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
            batches: Batches::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queues> {
        // Every change is one push or drain: usable after a panic.
        self.queues
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A batch from the client (`sorted`, its entries not taken yet): its
    /// requests' answers are held from now on until the last, then pushed
    /// as one array on the connection's stream; its invalid entries'
    /// answers go in that array (pushed now when it has no request).
    pub fn open_batch(&self, sorted: &mut Sorted) {
        let answered = std::mem::take(&mut sorted.answered);
        if let Some(now) = self.batches.open(&sorted.requests, answered) {
            self.push(None, now.to_string(), false);
        }
    }

    /// Queues `text` on `scope`'s stream (an answer to a batch's request:
    /// held for its batch). A `bounded` push past the limit closes the
    /// outbox instead and answers false.
    pub fn push(&self, scope: Option<&str>, text: String, bounded: bool) -> bool {
        if self.closed.is_cancelled() {
            return false;
        }
        if self.batches.holding()
            && let Ok(message) = serde_json::from_str::<Value>(&text)
            && message.get("method").is_none()
            && let Some(id) = message.get("id")
        {
            return match self.batches.route(&batch::key(id), message) {
                Route::Held => true,
                Route::Batch(answer) => self.enqueue(None, answer.to_string(), false),
                Route::Alone(_) => self.enqueue(scope, text, bounded),
            };
        }
        self.enqueue(scope, text, bounded)
    }

    fn enqueue(&self, scope: Option<&str>, text: String, bounded: bool) -> bool {
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
    fn a_batch_is_answered_as_one_array_on_the_connection_stream() {
        let outbox = Outbox::new(true, LIMIT);
        let batch = vec![
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "a"}),
            serde_json::json!({"jsonrpc": "2.0", "method": "n"}),
            serde_json::json!({"jsonrpc": "1.0", "id": 9, "method": "bad"}),
            serde_json::json!({"jsonrpc": "2.0", "id": "x", "method": "b"}),
        ];
        let mut sorted = batch::sort(batch).unwrap();
        outbox.open_batch(&mut sorted);
        assert!(
            outbox.take(None).is_empty(),
            "nothing before the last answer"
        );
        // A message that is not an answer, and an answer to another id, pass.
        outbox.push(Some("s"), r#"{"jsonrpc":"2.0","method":"u"}"#.into(), true);
        outbox.push(
            None,
            r#"{"jsonrpc":"2.0","id":2,"result":{}}"#.into(),
            false,
        );
        assert_eq!(outbox.take(None).len(), 1);
        outbox.push(
            Some("s"),
            r#"{"jsonrpc":"2.0","id":"x","result":{}}"#.into(),
            false,
        );
        assert_eq!(outbox.take(Some("s")).len(), 1, "only the update");
        outbox.push(
            None,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#.into(),
            false,
        );
        let answer: Vec<Value> = outbox
            .take(None)
            .iter()
            .map(|t| serde_json::from_str(t).unwrap())
            .collect();
        assert_eq!(answer.len(), 1);
        let ids: Vec<&Value> = answer[0]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| &m["id"])
            .collect();
        assert_eq!(
            ids,
            [&Value::Null, &serde_json::json!("x"), &serde_json::json!(1)]
        );
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
