//! Streamable HTTP on `/acp`, as the ACP transport RFD lists it: `POST`
//! carries one client message (`initialize` answered `200` with its JSON
//! and `Acp-Connection-Id`, everything else `202`), `GET` with
//! `Accept: text/event-stream` opens the connection's stream or, with
//! `Acp-Session-Id`, a session's, `DELETE` ends the connection (its
//! sessions go on: see docs/remote.md).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::Value;

use super::outbox::Outbox;
use super::tokens::Access;
use super::{CONNECTION_HEADER, Daemon, HttpConn, SESSION_HEADER, authorize, refuse};

/// When a Streamable HTTP connection was last used, and how many of its
/// streams are open (an open stream is not idle).
pub(super) struct Activity {
    streams: AtomicUsize,
    last: Mutex<Instant>,
}

impl Activity {
    fn new() -> Self {
        Activity {
            streams: AtomicUsize::new(0),
            last: Mutex::new(Instant::now()),
        }
    }

    fn touch(&self) {
        *self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Instant::now();
    }

    /// How long the connection has been idle (zero while a stream is open).
    pub(super) fn idle_for(&self) -> Duration {
        if self.streams.load(Ordering::SeqCst) > 0 {
            return Duration::ZERO;
        }
        self.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .elapsed()
    }
}

/// Counts an open stream while it lives.
struct StreamOpen(Arc<Activity>);

impl StreamOpen {
    fn new(activity: Arc<Activity>) -> Self {
        activity.streams.fetch_add(1, Ordering::SeqCst);
        StreamOpen(activity)
    }
}

impl Drop for StreamOpen {
    fn drop(&mut self) {
        self.0.touch();
        self.0.streams.fetch_sub(1, Ordering::SeqCst);
    }
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A Streamable HTTP connection a request names.
struct Found {
    id: String,
    conn: u64,
    outbox: Arc<Outbox>,
    activity: Arc<Activity>,
}

/// The connection `headers` name, when this token opened it.
fn connection(
    daemon: &Daemon,
    access: &Access,
    headers: &HeaderMap,
) -> Result<Found, Box<Response>> {
    let Some(id) = header_text(headers, CONNECTION_HEADER) else {
        return Err(Box::new(refuse(
            StatusCode::BAD_REQUEST,
            "Acp-Connection-Id is missing",
        )));
    };
    let mut table = daemon
        .http
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match table.get(id) {
        Some(c) if c.outbox.is_closed() => {
            table.remove(id);
            Err(Box::new(refuse(
                StatusCode::NOT_FOUND,
                "this connection was closed",
            )))
        }
        Some(c) if c.token == access.hash => {
            c.activity.touch();
            Ok(Found {
                id: id.to_owned(),
                conn: c.conn,
                outbox: c.outbox.clone(),
                activity: c.activity.clone(),
            })
        }
        _ => Err(Box::new(refuse(
            StatusCode::NOT_FOUND,
            "unknown Acp-Connection-Id",
        ))),
    }
}

/// The body a refusal reads first, at most, and how long it waits for it.
const DRAIN_BYTES: usize = 1 << 20;
const DRAIN_TIME: Duration = Duration::from_secs(2);

/// `refused`, sent once the request's body is read (up to [`DRAIN_BYTES`],
/// for up to [`DRAIN_TIME`]): over HTTP/2, a response while the body is
/// still coming ends the stream with `RST_STREAM`, and clients such as
/// curl then report a stream error instead of the status.
async fn after_body(body: Body, refused: Response) -> Response {
    let drain = async {
        let mut data = body.into_data_stream();
        let mut read = 0usize;
        while let Some(Ok(chunk)) = data.next().await {
            read += chunk.len();
            if read > DRAIN_BYTES {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIME, drain).await;
    refused
}

/// `POST /acp`.
pub(super) async fn post(State(daemon): State<Daemon>, request: Request) -> Response {
    let access = match authorize(&daemon, &request) {
        Ok(access) => access,
        Err(refused) => return after_body(request.into_body(), *refused).await,
    };
    let json = header_text(request.headers(), header::CONTENT_TYPE.as_str())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        let refused = refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json",
        );
        return after_body(request.into_body(), refused).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, daemon.max_message).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("the body is over {} bytes", daemon.max_message),
            );
        }
    };
    let message = match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Array(entries)) => return post_batch(&daemon, &access, &parts.headers, entries),
        Ok(message @ Value::Object(_)) => message,
        _ => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "the body is not a JSON-RPC message",
            );
        }
    };
    let headers = parts.headers;
    if message["method"] == "initialize" && header_text(&headers, CONNECTION_HEADER).is_none() {
        return initialize(&daemon, access, message);
    }
    let conn = match connection(&daemon, &access, &headers) {
        Ok(found) => found.conn,
        Err(refused) => return *refused,
    };
    // The RFD has session-scoped POSTs carry `Acp-Session-Id` without
    // listing them, and the SDK clients differ on which are: the route is
    // the message's `sessionId` (a header naming another is refused), and
    // the header says the client reads the answer on the session's stream.
    let named = header_text(&headers, SESSION_HEADER);
    let scoped = match (named, message["params"]["sessionId"].as_str()) {
        (Some(named), Some(sid)) if named != sid => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "Acp-Session-Id differs from the message's sessionId",
            );
        }
        (Some(_), Some(_)) => true,
        _ => false,
    };
    daemon.hub.receive(conn, message, scoped);
    StatusCode::ACCEPTED.into_response()
}

/// A POSTed batch (`serve/batch.rs`): taken on a connection that
/// negotiated v2, its answer one array on the connection's stream (its
/// entries may name several sessions); `501` on a v1 one. An
/// `Acp-Session-Id` must name the session of every entry that names one.
fn post_batch(
    daemon: &Daemon,
    access: &Access,
    headers: &HeaderMap,
    entries: Vec<Value>,
) -> Response {
    let found = match connection(daemon, access, headers) {
        Ok(found) => found,
        Err(refused) => return *refused,
    };
    if !daemon.hub.takes_batches(found.conn) {
        return refuse(
            StatusCode::NOT_IMPLEMENTED,
            "batches are served on ACP v2 only",
        );
    }
    if let Some(named) = header_text(headers, SESSION_HEADER)
        && entries
            .iter()
            .filter_map(|e| e["params"]["sessionId"].as_str())
            .any(|sid| sid != named)
    {
        return refuse(
            StatusCode::BAD_REQUEST,
            "Acp-Session-Id differs from an entry's sessionId",
        );
    }
    super::batch::take(&daemon.hub, found.conn, &found.outbox, entries, false);
    StatusCode::ACCEPTED.into_response()
}

/// `initialize` without a connection: a new one, answered at once.
fn initialize(daemon: &Daemon, access: Access, message: Value) -> Response {
    let token = access.hash.clone();
    let Some((conn, outbox)) = daemon.hub.connect(access, true, daemon.limits) else {
        return refuse(
            StatusCode::TOO_MANY_REQUESTS,
            "this token has too many open connections",
        );
    };
    let id = uuid::Uuid::new_v4().to_string();
    daemon
        .http
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(
            id.clone(),
            HttpConn {
                conn,
                outbox: outbox.clone(),
                token,
                activity: Arc::new(Activity::new()),
            },
        );
    let wanted = message["id"].clone();
    daemon.hub.receive(conn, message, false);
    // The hub answers `initialize` itself, before returning.
    let answer = outbox
        .take(None)
        .into_iter()
        .find(|text| serde_json::from_str::<Value>(text).is_ok_and(|m| m["id"] == wanted));
    let mut response = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        answer.unwrap_or_default(),
    )
        .into_response();
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(CONNECTION_HEADER, value);
    }
    response
}

/// `GET /acp` without an upgrade: the connection's stream, or a session's.
pub(super) async fn stream(daemon: Daemon, access: Access, headers: &HeaderMap) -> Response {
    let accepts = header_text(headers, header::ACCEPT.as_str())
        .is_some_and(|v| v.contains("text/event-stream"));
    if !accepts {
        return refuse(
            StatusCode::NOT_ACCEPTABLE,
            "Accept must include text/event-stream",
        );
    }
    let Found {
        outbox, activity, ..
    } = match connection(&daemon, &access, headers) {
        Ok(found) => found,
        Err(refused) => return *refused,
    };
    let scope = header_text(headers, SESSION_HEADER).map(str::to_owned);
    // A session's stream may be opened before the session is (the TS SDK
    // opens it before `session/load`): its messages wait in its queue.
    if let Some(sid) = &scope
        && !access.may_see(sid)
    {
        return refuse(
            StatusCode::NOT_FOUND,
            "unknown Acp-Session-Id for this connection",
        );
    }
    let open = StreamOpen::new(activity);
    let events =
        futures_util::stream::unfold((outbox, scope, open), |(outbox, scope, open)| async move {
            let batch = outbox.next_batch(scope.as_deref()).await?;
            Some((batch, (outbox, scope, open)))
        })
        .flat_map(|batch| {
            futures_util::stream::iter(
                batch
                    .into_iter()
                    .map(|text| Ok::<_, std::convert::Infallible>(Event::default().data(text))),
            )
        });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// `DELETE /acp`: the connection ends; its sessions go on.
pub(super) async fn delete(State(daemon): State<Daemon>, request: Request) -> Response {
    let access = match authorize(&daemon, &request) {
        Ok(access) => access,
        Err(refused) => return *refused,
    };
    let Found { id, conn, .. } = match connection(&daemon, &access, request.headers()) {
        Ok(found) => found,
        Err(refused) => return *refused,
    };
    daemon.end_http(&id, conn);
    (StatusCode::ACCEPTED, Body::empty()).into_response()
}
