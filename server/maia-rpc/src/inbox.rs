//! The peer's messages in the order they were written: requests,
//! notifications and the responses to our own requests share one queue.
//!
//! A response is handed to its waiter only when the caller asks for the
//! message after it ([`Inbox::recv`]), so everything the peer wrote before
//! the response has been taken (and acted on, when the caller acts before
//! it reads on) by then. A client that sends `session/cancel` and then
//! answers a permission question `cancelled` gets the cancel seen first,
//! whatever the scheduler does. The end of input is queued too: pending
//! requests fail only after the responses written before the end.

use serde_json::Value;
use tokio::sync::mpsc;

use crate::connection::{Connection, Incoming, WeakConnection};
use crate::message::{Id, RpcError};

/// What the reader queues, in the order the peer wrote it.
pub(crate) enum Queued {
    Message(Incoming),
    Response {
        id: Id,
        result: Result<Value, RpcError>,
    },
    /// Input ended: pending requests fail once this is reached.
    Closed,
}

/// The receiving end of a connection ([`crate::serve`]).
pub struct Inbox {
    rx: mpsc::UnboundedReceiver<Queued>,
    /// Where the answers go; the inbox does not keep the connection open.
    conn: WeakConnection,
}

impl Inbox {
    pub(crate) fn new(rx: mpsc::UnboundedReceiver<Queued>, conn: &Connection) -> Self {
        Inbox {
            rx,
            conn: conn.downgrade(),
        }
    }

    /// The next request or notification; the responses written before it
    /// are handed to their waiters on the way. `None` once input has ended
    /// (pending requests have then failed with
    /// [`crate::RequestError::Closed`]).
    pub async fn recv(&mut self) -> Option<Incoming> {
        loop {
            match self.rx.recv().await {
                Some(Queued::Message(message)) => return Some(message),
                Some(Queued::Response { id, result }) => {
                    if let Some(conn) = self.conn.upgrade() {
                        conn.complete(&id, result);
                    }
                }
                Some(Queued::Closed) | None => {
                    if let Some(conn) = self.conn.upgrade() {
                        conn.close_pending();
                    }
                    return None;
                }
            }
        }
    }

    /// Hands responses to their waiters from now on without a caller:
    /// for a caller that stops taking messages (shutting down) while its
    /// own requests may still be answered. Requests and notifications
    /// read from here on are dropped.
    pub fn drain(mut self) {
        tokio::spawn(async move { while self.recv().await.is_some() {} });
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, duplex};

    use crate::connection::{Incoming, RequestError};
    use crate::tasks::serve;

    /// The peer writes a request, then the answer to ours: the answer is
    /// not given before the request was taken.
    #[tokio::test]
    async fn a_response_waits_for_what_was_written_before_it() {
        let (mut peer_write, read) = duplex(64 * 1024);
        let (write, peer_read) = duplex(64 * 1024);
        let (conn, mut inbox, _w) = serve(read, write, 4096);
        let mut asked = conn.start_request("permission", json!({}));
        let mut lines = BufReader::new(peer_read).lines();
        let sent: serde_json::Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        let answer =
            json!({"jsonrpc": "2.0", "id": sent["id"], "result": {"outcome": "cancelled"}});
        peer_write
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{}}\n")
            .await
            .unwrap();
        peer_write
            .write_all(format!("{answer}\n").as_bytes())
            .await
            .unwrap();
        // Both lines are read; the answer stays queued behind the cancel.
        let early = tokio::time::timeout(Duration::from_millis(200), &mut asked).await;
        assert!(early.is_err(), "answered before the cancel was taken");
        let cancel = inbox.recv().await.unwrap();
        assert!(
            matches!(cancel, Incoming::Notification { ref method, .. } if method == "session/cancel")
        );
        let closed = tokio::spawn(async move { inbox.recv().await });
        let result = tokio::time::timeout(Duration::from_secs(5), asked)
            .await
            .expect("the answer never came");
        assert_eq!(result, Ok(json!({"outcome": "cancelled"})));
        drop(peer_write);
        assert!(closed.await.unwrap().is_none());
        let late = conn.start_request("late", json!({}));
        assert_eq!(late.await, Err(RequestError::Closed));
    }

    /// A response written just before the end of input still reaches its
    /// waiter; only the requests left unanswered fail.
    #[tokio::test]
    async fn the_end_of_input_fails_only_what_was_not_answered() {
        let (mut peer_write, read) = duplex(64 * 1024);
        let (write, peer_read) = duplex(64 * 1024);
        let (conn, inbox, _w) = serve(read, write, 4096);
        let answered = conn.start_request("one", json!({}));
        let unanswered = conn.start_request("two", json!({}));
        let mut lines = BufReader::new(peer_read).lines();
        let first: serde_json::Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        let answer = json!({"jsonrpc": "2.0", "id": first["id"], "result": 1});
        peer_write
            .write_all(format!("{answer}\n").as_bytes())
            .await
            .unwrap();
        drop(peer_write);
        inbox.drain();
        let wait = Duration::from_secs(5);
        assert_eq!(
            tokio::time::timeout(wait, answered).await.unwrap(),
            Ok(json!(1))
        );
        assert_eq!(
            tokio::time::timeout(wait, unanswered).await.unwrap(),
            Err(RequestError::Closed)
        );
    }
}
