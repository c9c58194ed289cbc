//! The connection: the handle that sends to the peer and the tables of
//! requests each side still waits on; its reader and writer tasks are in
//! [`crate::tasks`].
//!
//! Invariants:
//! - every outgoing message goes through one unbounded queue drained by one
//!   writer task, so messages reach the peer in the order they were queued;
//! - a line that cannot be parsed is answered here (`-32700`/`-32600`) and
//!   the reader keeps going;
//! - responses to our own requests never reach the caller as messages: the
//!   caller's [`crate::Inbox`] hands them to their waiters in the order the
//!   peer wrote them among its requests and notifications;
//! - when input ends, pending outgoing requests fail with
//!   [`RequestError::Closed`] (after the responses written before the end)
//!   and the inbox ends;
//! - `$/cancel_request` is handled here, in both directions: an incoming
//!   one cancels the token of the request it names ([`Connection::cancellation`],
//!   [`Connection::respond_cancellable`] answers it `-32800`), and an
//!   outgoing request whose [`PendingRequest`] is dropped unanswered is
//!   cancelled with one.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::batch::{Batches, Route};
use crate::message::{ErrorCode, Id, RpcError};

/// A request or notification from the peer.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Request {
        id: Id,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
}

/// Why a request we sent got no result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestError {
    #[error(transparent)]
    Rpc(#[from] RpcError),
    #[error("the connection is closed")]
    Closed,
}

type Waiter = oneshot::Sender<Result<Value, RpcError>>;

/// The requests we sent and still wait on; `None` once input has closed,
/// so a request made after that fails at once instead of waiting forever.
type Pending = Mutex<Option<HashMap<String, Waiter>>>;

/// What the writer is asked to do.
pub(crate) enum Out {
    Line(String),
    /// Flush what was queued before, then tell.
    Flush(oneshot::Sender<()>),
}

/// The method of the protocol-level cancellation notification (LSP's,
/// adopted by ACP): `{requestId}`.
pub const CANCEL_REQUEST: &str = "$/cancel_request";

struct Inner {
    out: mpsc::UnboundedSender<Out>,
    pending: Pending,
    next_id: AtomicU64,
    /// The peer's requests not answered yet, each with the token a
    /// `$/cancel_request` naming it cancels (keyed by [`id_key`]).
    incoming: Mutex<HashMap<String, CancellationToken>>,
    /// Our requests given up on (`$/cancel_request` sent): their late
    /// answers are expected, not unknown.
    abandoned: Mutex<HashSet<String>>,
    /// The peer's batches not answered whole yet (`batch`).
    batches: Batches,
}

/// The key of an id in the tables: its JSON text, so `1` and `"1"` differ.
pub(crate) fn id_key(id: &Id) -> String {
    crate::batch::key(id)
}

/// An outgoing request already queued for the peer; awaiting it gives the
/// peer's answer, or [`RequestError::Closed`] when the connection closes
/// first.
///
/// Dropping it before the answer arrived gives the request up: the entry
/// is forgotten and the peer is sent `$/cancel_request` for it.
#[derive(Debug)]
pub struct PendingRequest {
    rx: Option<oneshot::Receiver<Result<Value, RpcError>>>,
    /// The request's id and the connection, to cancel it on drop.
    sent: Option<(String, Weak<Inner>)>,
}

impl PendingRequest {
    /// The id the request was sent with (`None` when it was never sent).
    pub fn id(&self) -> Option<&str> {
        self.sent.as_ref().map(|(key, _)| key.as_str())
    }
}

impl Drop for PendingRequest {
    fn drop(&mut self) {
        let Some((key, inner)) = self.sent.take() else {
            return;
        };
        if let Some(inner) = inner.upgrade() {
            Connection { inner }.give_up(&key);
        }
    }
}

impl std::future::Future for PendingRequest {
    type Output = Result<Value, RequestError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let Some(rx) = self.rx.as_mut() else {
            return std::task::Poll::Ready(Err(RequestError::Closed));
        };
        std::pin::Pin::new(rx).poll(cx).map(|result| match result {
            Ok(result) => {
                // Answered: nothing to cancel when it is dropped.
                self.sent = None;
                result.map_err(RequestError::Rpc)
            }
            Err(_) => Err(RequestError::Closed),
        })
    }
}

/// A cheap, cloneable handle to send messages to the peer.
#[derive(Clone)]
pub struct Connection {
    inner: Arc<Inner>,
}

/// A [`Connection`] that does not keep it (nor its writer) alive.
pub(crate) struct WeakConnection(Weak<Inner>);

impl WeakConnection {
    pub(crate) fn upgrade(&self) -> Option<Connection> {
        self.0.upgrade().map(|inner| Connection { inner })
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").finish_non_exhaustive()
    }
}

impl Connection {
    pub(crate) fn downgrade(&self) -> WeakConnection {
        WeakConnection(Arc::downgrade(&self.inner))
    }

    /// A connection whose messages go to the writer through `out`.
    pub(crate) fn new(out: mpsc::UnboundedSender<Out>) -> Self {
        Connection {
            inner: Arc::new(Inner {
                out,
                pending: Mutex::new(Some(HashMap::new())),
                next_id: AtomicU64::new(1),
                incoming: Mutex::new(HashMap::new()),
                abandoned: Mutex::new(HashSet::new()),
                batches: Batches::default(),
            }),
        }
    }

    /// The peer's batches not answered whole yet.
    pub(crate) fn batches(&self) -> &Batches {
        &self.inner.batches
    }

    pub(crate) fn send_value(&self, value: &Value) {
        // Serialising a Value cannot fail; an empty line would be a bug.
        let line = serde_json::to_string(value).unwrap_or_default();
        if self.inner.out.send(Out::Line(line)).is_err() {
            tracing::debug!("writer is gone; dropping an outgoing message");
        }
    }

    /// Waits until every message queued before this call is written and
    /// flushed (or the writer is gone).
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.inner.out.send(Out::Flush(tx)).is_ok() {
            let _ = rx.await;
        }
    }

    /// Answers a request.
    pub fn respond(&self, id: Id, result: Result<Value, RpcError>) {
        self.inner
            .incoming
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id_key(&id));
        let msg = match result {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
        };
        match self.inner.batches.route(&id_key(&id), msg) {
            Route::Alone(msg) | Route::Batch(msg) => self.send_value(&msg),
            Route::Held => {}
        }
    }

    /// From now on the peer may send JSON-RPC batches (ACP v2 allows them;
    /// v1 answers an array `-32600`): see `batch`.
    pub fn allow_batches(&self) {
        self.inner.batches.allow();
    }

    /// The token a `$/cancel_request` naming the peer's request `id`
    /// cancels (a token that never fires for a request already answered
    /// or unknown).
    pub fn cancellation(&self, id: &Id) -> CancellationToken {
        self.inner
            .incoming
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id_key(id))
            .cloned()
            .unwrap_or_default()
    }

    /// Answers the peer's request `id` with what `work` gives, unless a
    /// `$/cancel_request` for it comes first: then `work` is dropped and
    /// the answer is `-32800`, the only one.
    pub async fn respond_cancellable(
        &self,
        id: Id,
        work: impl std::future::Future<Output = Result<Value, RpcError>>,
    ) {
        let token = self.cancellation(&id);
        let result = tokio::select! {
            biased;
            () = token.cancelled() => Err(cancelled()),
            result = work => result,
        };
        self.respond(id, result);
    }

    /// Gives up our request `id` if it is still unanswered: its waiter
    /// gets [`RequestError::Closed`], the peer gets `$/cancel_request` and
    /// its late answer is ignored. Nothing happens for an answered one.
    pub fn give_up(&self, id: &str) {
        let waiting = self
            .inner
            .pending
            .lock()
            .ok()
            .and_then(|mut pending| pending.as_mut().and_then(|table| table.remove(id)))
            .is_some();
        if waiting {
            tracing::debug!(id, "an outgoing request was given up; cancelling it");
            self.inner
                .abandoned
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(id.to_owned());
            self.notify(CANCEL_REQUEST, json!({ "requestId": id }));
        }
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: Value) {
        self.send_value(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and waits for its response.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RequestError> {
        self.start_request(method, params).await
    }

    /// Queues a request now (so it keeps its place among the messages
    /// sent before and after this call) and returns its answer as a future.
    /// Dropping the future forgets the answer.
    pub fn start_request(&self, method: &str, params: Value) -> PendingRequest {
        let n = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let key = format!("maia-{n}");
        let (tx, rx) = oneshot::channel();
        let registered = match self.inner.pending.lock() {
            Ok(mut pending) => match pending.as_mut() {
                Some(table) => {
                    table.insert(key.clone(), tx);
                    true
                }
                None => false,
            },
            Err(_) => false,
        };
        if !registered {
            return PendingRequest {
                rx: None,
                sent: None,
            };
        }
        self.send_value(&json!({"jsonrpc": "2.0", "id": key, "method": method, "params": params}));
        PendingRequest {
            rx: Some(rx),
            sent: Some((key, Arc::downgrade(&self.inner))),
        }
    }

    pub(crate) fn complete(&self, id: &Id, result: Result<Value, RpcError>) {
        let key = match id {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let waiter = self
            .inner
            .pending
            .lock()
            .ok()
            .and_then(|mut pending| pending.as_mut().and_then(|table| table.remove(&key)));
        match waiter {
            Some(tx) => {
                let _ = tx.send(result);
            }
            None => {
                let abandoned = self
                    .inner
                    .abandoned
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&key);
                if abandoned {
                    tracing::debug!(id = %key, "answer to a cancelled request; ignored");
                } else {
                    tracing::warn!(id = %key, "response to an unknown request id; ignored");
                }
            }
        }
    }

    /// The peer's request `id` arrived: it can be cancelled until answered.
    pub(crate) fn register_incoming(&self, id: &Id) {
        self.inner
            .incoming
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id_key(id), CancellationToken::new());
    }

    /// A `$/cancel_request` from the peer: the request it names, if still
    /// unanswered, is told.
    pub(crate) fn cancel_incoming(&self, params: &Value) {
        let Some(id) = params.get("requestId") else {
            tracing::debug!("a $/cancel_request without a requestId; ignored");
            return;
        };
        let token = self
            .inner
            .incoming
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id_key(id))
            .cloned();
        match token {
            Some(token) => {
                tracing::debug!(%id, "the peer cancelled a request");
                token.cancel();
            }
            None => tracing::debug!(%id, "a $/cancel_request for no running request; ignored"),
        }
    }

    /// Fails every waiting request and every later one.
    pub(crate) fn close_pending(&self) {
        if let Ok(mut pending) = self.inner.pending.lock() {
            *pending = None;
        }
    }
}

/// The error a cancelled request is answered with (`-32800`).
pub fn cancelled() -> RpcError {
    RpcError::new(ErrorCode::RequestCancelled, "request cancelled")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::{serve, serve_blocking_writer};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, duplex};

    #[tokio::test]
    async fn requests_are_correlated_and_errors_answered() {
        // One pipe per direction, so dropping the client's writer ends input.
        let (mut client_write, server_read) = duplex(64 * 1024);
        let (server_write, client_read) = duplex(64 * 1024);
        let (conn, mut incoming, _w) = serve(server_read, server_write, 1024);
        let mut client_lines = tokio::io::BufReader::new(client_read).lines();

        client_write.write_all(b"garbage\n").await.unwrap();
        let line = client_lines.next_line().await.unwrap().unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["error"]["code"], -32700);
        assert_eq!(v["id"], Value::Null);

        client_write
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
            .await
            .unwrap();
        let got = incoming.recv().await.unwrap();
        assert_eq!(
            got,
            Incoming::Request {
                id: json!(1),
                method: "ping".into(),
                params: Value::Null
            }
        );

        let c2 = conn.clone();
        let pending = tokio::spawn(async move { c2.request("ask", json!({"q": 1})).await });
        let line = client_lines.next_line().await.unwrap().unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["method"], "ask");
        let answer = json!({"jsonrpc": "2.0", "id": v["id"], "result": {"a": 2}});
        client_write
            .write_all(format!("{answer}\n").as_bytes())
            .await
            .unwrap();
        // The answer is handed over while the inbox is read.
        let mut pending = pending;
        let answered = tokio::select! {
            answered = &mut pending => answered,
            message = incoming.recv() => panic!("unexpected {message:?}"),
        };
        assert_eq!(answered.unwrap().unwrap(), json!({"a": 2}));

        // End of input: pending requests fail, the incoming queue closes.
        let c3 = conn.clone();
        let pending = tokio::spawn(async move { c3.request("ask", Value::Null).await });
        let _ = client_lines.next_line().await.unwrap();
        drop(client_write);
        assert!(incoming.recv().await.is_none());
        assert_eq!(pending.await.unwrap(), Err(RequestError::Closed));
        // A request made after input closed resolves at once.
        let late = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            conn.request("late", Value::Null),
        )
        .await;
        assert_eq!(late, Ok(Err(RequestError::Closed)));
    }

    #[tokio::test]
    async fn batches_are_refused_until_allowed_then_answered_as_one_array() {
        let (mut client_write, server_read) = duplex(64 * 1024);
        let (server_write, client_read) = duplex(64 * 1024);
        let (conn, mut incoming, _w) = serve(server_read, server_write, 4096);
        let mut lines = tokio::io::BufReader::new(client_read).lines();
        let batch = json!([
            {"jsonrpc": "2.0", "id": 1, "method": "a"},
            {"jsonrpc": "2.0", "method": "note"},
            {"jsonrpc": "2.0", "id": "two", "method": "b"},
            {"jsonrpc": "1.0", "id": 3, "method": "c"},
        ]);
        client_write
            .write_all(format!("{batch}\n").as_bytes())
            .await
            .unwrap();
        let refused: Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(refused["error"]["code"], -32600, "{refused}");
        conn.allow_batches();
        client_write
            .write_all(format!("[]\n{batch}\n").as_bytes())
            .await
            .unwrap();
        let empty: Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert!(empty.is_object() && empty["id"].is_null() && empty["error"]["code"] == -32600);
        let mut ids = Vec::new();
        for _ in 0..3 {
            match incoming.recv().await.unwrap() {
                Incoming::Request { id, .. } => ids.push(id),
                Incoming::Notification { method, .. } => assert_eq!(method, "note"),
            }
        }
        assert_eq!(ids, [json!(1), json!("two")]);
        // Answered out of order: nothing is written until the last.
        conn.respond(json!("two"), Ok(json!({"b": true})));
        conn.respond(json!(1), Err(RpcError::new(ErrorCode::InternalError, "no")));
        let answer: Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        let answers = answer.as_array().expect("one array");
        assert_eq!(answers.len(), 3, "{answer}");
        assert_eq!(
            answers[0]["error"]["code"], -32600,
            "the invalid entry: {answer}"
        );
        assert_eq!(answers[1]["id"], "two");
        assert_eq!(answers[2]["id"], 1);
        // A batch of notifications only: no answer at all; the next line is
        // the next answer.
        client_write
            .write_all(b"[{\"jsonrpc\":\"2.0\",\"method\":\"n\"}]\n")
            .await
            .unwrap();
        assert!(matches!(
            incoming.recv().await,
            Some(Incoming::Notification { .. })
        ));
        conn.respond(json!(9), Ok(Value::Null));
        let next: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(next["id"], 9);
    }

    #[tokio::test]
    async fn a_started_request_keeps_its_place_before_later_messages() {
        let (_client_write, server_read) = duplex(64 * 1024);
        let (server_write, client_read) = duplex(64 * 1024);
        let (conn, incoming, _w) = serve(server_read, server_write, 1024);
        incoming.drain();
        let mut lines = tokio::io::BufReader::new(client_read).lines();
        // Queued at the call, not when the future is first polled.
        let pending = conn.start_request("session/request_permission", json!({}));
        conn.respond(json!(7), Ok(json!({"stopReason": "cancelled"})));
        let first: Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        let second: Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(first["method"], "session/request_permission");
        assert_eq!(second["id"], 7);
        drop(pending);
        conn.flush().await;
    }

    #[tokio::test]
    async fn blocking_writer_writes_lines_in_order() {
        let (mut read_end, write_end) = std::io::pipe().unwrap();
        let (conn, _incoming, writer) = serve_blocking_writer(tokio::io::empty(), write_end, 1024);
        conn.notify("first", json!({}));
        conn.respond(json!(3), Ok(json!({"ok": true})));
        drop(conn);
        writer.await.unwrap();
        let mut out = String::new();
        std::io::Read::read_to_string(&mut read_end, &mut out).unwrap();
        let lines: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["method"], "first");
        assert_eq!(lines[1]["id"], 3);
    }

    #[tokio::test]
    async fn a_cancelled_request_is_answered_32800_once() {
        let (mut client_write, server_read) = duplex(64 * 1024);
        let (server_write, client_read) = duplex(64 * 1024);
        let (conn, mut incoming, _w) = serve(server_read, server_write, 1024);
        let mut lines = tokio::io::BufReader::new(client_read).lines();
        client_write
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"slow\",\"method\":\"walk\"}\n")
            .await
            .unwrap();
        let Some(Incoming::Request { id, .. }) = incoming.recv().await else {
            panic!("no request");
        };
        let c2 = conn.clone();
        let served = tokio::spawn(async move {
            c2.respond_cancellable(id, std::future::pending()).await;
            c2.respond(json!("after"), Ok(json!({})));
        });
        client_write
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{\"requestId\":\"slow\"}}\n")
            .await
            .unwrap();
        let v: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(v["id"], "slow");
        assert_eq!(v["error"]["code"], -32800);
        served.await.unwrap();
        let v: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(v["id"], "after", "the cancelled request is answered once");
        // The notification is the connection's: it never reaches the caller.
        drop(client_write);
        assert!(incoming.recv().await.is_none());
    }

    #[tokio::test]
    async fn a_dropped_request_is_cancelled_and_its_late_answer_ignored() {
        let (mut client_write, server_read) = duplex(64 * 1024);
        let (server_write, client_read) = duplex(64 * 1024);
        let (conn, incoming, _w) = serve(server_read, server_write, 1024);
        incoming.drain();
        let mut lines = tokio::io::BufReader::new(client_read).lines();
        let pending = conn.start_request("terminal/wait_for_exit", json!({}));
        let asked: Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        drop(pending);
        let cancel: Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(cancel["method"], "$/cancel_request");
        assert_eq!(cancel["params"]["requestId"], asked["id"]);
        assert!(cancel.get("id").is_none());
        let answer = json!({"jsonrpc": "2.0", "id": asked["id"], "error": {"code": -32800, "message": "cancelled"}});
        client_write
            .write_all(format!("{answer}\n").as_bytes())
            .await
            .unwrap();
        // An answered request is not cancelled when dropped.
        let c2 = conn.clone();
        let answered =
            tokio::spawn(async move { c2.request("fs/read_text_file", json!({})).await });
        let asked: Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        let answer = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {}});
        client_write
            .write_all(format!("{answer}\n").as_bytes())
            .await
            .unwrap();
        assert_eq!(answered.await.unwrap().unwrap(), json!({}));
        conn.notify("last", json!({}));
        let last: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(last["method"], "last");
    }
}
