//! The mock's streamed answers: SSE pieces sent with their gaps (each
//! logged with its time), a stream that hangs, and the count of streams
//! dropped before their end.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;

use super::{Shared, lock};

pub(super) fn sse_response(body: Body) -> Response {
    let mut response = Response::new(body);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Counts the stream as dropped unless it was marked finished before being dropped.
struct DropGuard {
    shared: Arc<Shared>,
    finished: bool,
}

impl DropGuard {
    fn mark_finished(&mut self) {
        self.finished = true;
    }
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.shared.dropped.fetch_add(1, Ordering::SeqCst);
            self.shared.changed.notify_waiters();
        }
    }
}

struct StreamState {
    pieces: VecDeque<String>,
    gap: Duration,
    first: bool,
    guard: DropGuard,
}

pub(super) fn stream_body(shared: Arc<Shared>, pieces: Vec<String>, gap: Duration) -> Body {
    let state = StreamState {
        pieces: pieces.into(),
        gap,
        first: true,
        guard: DropGuard {
            shared,
            finished: false,
        },
    };
    let stream = futures_util::stream::unfold(state, |mut state| async move {
        let Some(piece) = state.pieces.pop_front() else {
            state.guard.mark_finished();
            return None;
        };
        if !state.first && !state.gap.is_zero() {
            tokio::time::sleep(state.gap).await;
        }
        state.first = false;
        if state.pieces.is_empty() {
            state.guard.mark_finished();
        }
        lock(&state.guard.shared.sent).push((Instant::now(), piece.clone()));
        Some((Ok::<_, Infallible>(Bytes::from(piece)), state))
    });
    Body::from_stream(stream)
}

pub(super) fn hang_body(shared: Arc<Shared>) -> Body {
    let guard = DropGuard {
        shared,
        finished: false,
    };
    let stream = futures_util::stream::unfold(guard, |guard| async move {
        std::future::pending::<()>().await;
        Some((Ok::<_, Infallible>(Bytes::new()), guard))
    });
    Body::from_stream(stream)
}
