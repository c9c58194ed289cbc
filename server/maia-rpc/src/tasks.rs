//! The connection's tasks: one reader (frames, classifies, answers what
//! cannot be parsed, takes batches once allowed, queues requests,
//! notifications and the responses to ours in the order they came:
//! [`crate::inbox`]) and one writer draining the outgoing queue in order.

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::batch;
use crate::connection::{CANCEL_REQUEST, Connection, Incoming, Out};
use crate::framing::{Frame, read_frame};
use crate::inbox::{Inbox, Queued};
use crate::message::{Classified, ErrorCode, RpcError, classify, sniff_id};

/// Starts the reader and writer tasks. Returns the handle for sending, the
/// peer's requests and notifications (ending with the input; reading them
/// also hands our requests their answers, in order: [`Inbox`]), and the
/// writer task, which ends once every [`Connection`] is dropped and
/// the queue is flushed.
pub fn serve<R, W>(reader: R, writer: W, max_line: usize) -> (Connection, Inbox, JoinHandle<()>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    serve_with(reader, max_line, |out_rx| {
        tokio::spawn(write_loop(writer, out_rx))
    })
}

/// Like [`serve`], with a blocking writer (such as the process's stdout)
/// driven by one dedicated thread: each line is written without a hop
/// through the blocking pool, which keeps streaming latency low.
pub fn serve_blocking_writer<R, W>(
    reader: R,
    writer: W,
    max_line: usize,
) -> (Connection, Inbox, JoinHandle<()>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: std::io::Write + Send + 'static,
{
    serve_with(reader, max_line, |out_rx| {
        tokio::task::spawn_blocking(move || blocking_write_loop(writer, out_rx))
    })
}

fn serve_with<R>(
    reader: R,
    max_line: usize,
    spawn_writer: impl FnOnce(mpsc::UnboundedReceiver<Out>) -> JoinHandle<()>,
) -> (Connection, Inbox, JoinHandle<()>)
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let (out_tx, out_rx) = mpsc::unbounded_channel::<Out>();
    let conn = Connection::new(out_tx);
    let writer_task = spawn_writer(out_rx);
    let (in_tx, in_rx) = mpsc::unbounded_channel();
    let reader_conn = conn.clone();
    tokio::spawn(async move {
        read_loop(BufReader::new(reader), max_line, &reader_conn, &in_tx).await;
        if in_tx.send(Queued::Closed).is_err() {
            // Nobody reads the inbox: fail what is pending now.
            reader_conn.close_pending();
        }
    });
    let inbox = Inbox::new(in_rx, &conn);
    (conn, inbox, writer_task)
}

fn blocking_write_loop<W: std::io::Write>(writer: W, mut rx: mpsc::UnboundedReceiver<Out>) {
    let mut writer = std::io::BufWriter::new(writer);
    while let Some(out) = rx.blocking_recv() {
        let mut line = match out {
            Out::Line(line) => line,
            Out::Flush(done) => {
                let _ = std::io::Write::flush(&mut writer);
                let _ = done.send(());
                continue;
            }
        };
        line.push('\n');
        if let Err(e) = std::io::Write::write_all(&mut writer, line.as_bytes()) {
            tracing::debug!("cannot write to the peer: {e}");
            return;
        }
        // Flush once the queue is drained, not after every line.
        if rx.is_empty() && std::io::Write::flush(&mut writer).is_err() {
            return;
        }
    }
    let _ = std::io::Write::flush(&mut writer);
}

async fn write_loop<W: AsyncWrite + Unpin>(mut writer: W, mut rx: mpsc::UnboundedReceiver<Out>) {
    while let Some(out) = rx.recv().await {
        let mut line = match out {
            Out::Line(line) => line,
            Out::Flush(done) => {
                let _ = writer.flush().await;
                let _ = done.send(());
                continue;
            }
        };
        line.push('\n');
        if let Err(e) = writer.write_all(line.as_bytes()).await {
            tracing::debug!("cannot write to the peer: {e}");
            return;
        }
        // Flush once the queue is drained, not after every line.
        if rx.is_empty() && writer.flush().await.is_err() {
            return;
        }
    }
    let _ = writer.flush().await;
}

async fn read_loop<R: tokio::io::AsyncBufRead + Unpin>(
    mut reader: R,
    max_line: usize,
    conn: &Connection,
    incoming: &mpsc::UnboundedSender<Queued>,
) {
    loop {
        let frame = match read_frame(&mut reader, max_line).await {
            Ok(frame) => frame,
            Err(e) => {
                tracing::debug!("input closed: {e}");
                return;
            }
        };
        let line = match frame {
            Frame::Eof => return,
            Frame::TooLong { prefix } => {
                let id = sniff_id(&prefix);
                tracing::warn!(limit = max_line, "dropped an oversized message");
                conn.respond(
                    id,
                    Err(RpcError::new(
                        ErrorCode::InvalidRequest,
                        format!("message larger than the {max_line}-byte limit"),
                    )),
                );
                continue;
            }
            Frame::Line(line) => line,
        };
        if conn.batches().allowed()
            && let Ok(Value::Array(entries)) = serde_json::from_slice::<Value>(&line)
        {
            take_batch(conn, entries, incoming);
            continue;
        }
        match classify(&line) {
            Ok(message) => take(conn, message, incoming),
            Err((id, error)) => {
                tracing::warn!(
                    code = error.code,
                    "rejected an incoming message: {}",
                    error.message
                );
                conn.respond(id, Err(error));
            }
        }
    }
}

/// One well-formed message from the peer (a line, or a batch's entry): a
/// request registered (cancellable) and queued, `$/cancel_request` acted on
/// here, a notification queued, a response queued behind them for its
/// waiter (given at once when nobody reads the inbox any more).
fn take(conn: &Connection, message: Classified, incoming: &mpsc::UnboundedSender<Queued>) {
    match message {
        Classified::Request { id, method, params } => {
            conn.register_incoming(&id);
            let _ = incoming.send(Queued::Message(Incoming::Request { id, method, params }));
        }
        Classified::Notification { method, params } if method == CANCEL_REQUEST => {
            conn.cancel_incoming(&params);
        }
        Classified::Notification { method, params } => {
            let _ = incoming.send(Queued::Message(Incoming::Notification { method, params }));
        }
        Classified::Response { id, result } => {
            if let Err(mpsc::error::SendError(Queued::Response { id, result })) =
                incoming.send(Queued::Response { id, result })
            {
                conn.complete(&id, result);
            }
        }
    }
}

/// A batch from the peer (batches allowed): its requests registered as
/// one batch before any runs, then each entry taken as a line would be.
fn take_batch(conn: &Connection, entries: Vec<Value>, incoming: &mpsc::UnboundedSender<Queued>) {
    let sorted = match batch::sort(entries) {
        Ok(sorted) => sorted,
        Err(answer) => {
            conn.send_value(&answer);
            return;
        }
    };
    if let Some(now) = conn.batches().open(&sorted.requests, sorted.answered) {
        conn.send_value(&now);
    }
    for (message, _) in sorted.valid {
        take(conn, message, incoming);
    }
}
