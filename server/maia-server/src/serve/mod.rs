//! `maia serve`: one long-lived process serving ACP over the network on
//! one `/acp` endpoint (a WebSocket upgrade, or Streamable HTTP in `http`),
//! every client attached to the live sessions of one agent (`hub`), every
//! request checked for a bearer token (`tokens`), its `Host` and `Origin`.
//! `maia serve token …` manages the tokens; `bridge` is `maia acp
//! --connect`. See docs/remote.md.

mod accept;
mod batch;
pub mod bridge;
mod http;
mod hub;
mod outbox;
mod tls;
pub mod tokens;
mod web;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};

use crate::cli::{ServeArgs, ServeCommand, TokenCommand};
use hub::Hub;
use outbox::Outbox;
use tokens::Access;

/// The header naming a connection (the RFD's).
pub const CONNECTION_HEADER: &str = "acp-connection-id";
/// The header naming a session (the RFD's).
pub const SESSION_HEADER: &str = "acp-session-id";

/// How long a stopping daemon waits for its running turns to end.
const SHUTDOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How often the token file is read again to close revoked connections.
const REVOKE_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// A Streamable HTTP connection: a hub client without a socket.
struct HttpConn {
    conn: u64,
    outbox: Arc<Outbox>,
    /// The hash of the token that opened it (the only one it answers).
    token: String,
    activity: Arc<http::Activity>,
}

#[derive(Clone)]
struct Daemon {
    hub: Arc<Hub>,
    tokens: PathBuf,
    /// Host names a request's `Host` and `Origin` may name (`None`: any,
    /// on a Unix socket).
    hosts: Option<Arc<Vec<String>>>,
    max_message: usize,
    limits: hub::Limits,
    /// How long a Streamable HTTP connection may go without a request
    /// and without an open stream.
    idle: std::time::Duration,
    /// How often a WebSocket client is pinged; silent for two, it is closed.
    ping: std::time::Duration,
    http: Arc<Mutex<HashMap<String, HttpConn>>>,
    /// The web page's logins (`web`).
    web: Arc<web::Logins>,
}

impl Daemon {
    /// Ends the Streamable HTTP connection `id` (the hub's `conn`): its
    /// sessions go on.
    fn end_http(&self, id: &str, conn: u64) {
        self.http
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(id);
        self.hub.disconnect(conn);
    }
}

/// `maia serve …`.
pub fn main(args: ServeArgs, options: maia_core::EngineOptions) -> anyhow::Result<()> {
    let home = options
        .home
        .clone()
        .ok_or_else(|| anyhow::anyhow!("HOME is not set: the token file has no folder"))?;
    let path = tokens::path(&home);
    match args.command {
        Some(ServeCommand::Token(command)) => token_command(&path, command),
        None => {
            let runtime = crate::runtime()?;
            crate::telemetry_on(&runtime, &options);
            let served = runtime.block_on(run(args, options, path));
            maia_otel::shutdown(crate::TELEMETRY_EXIT);
            served?;
            runtime.shutdown_timeout(std::time::Duration::from_millis(200));
            Ok(())
        }
    }
}

fn token_command(path: &std::path::Path, command: TokenCommand) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout();
    match command {
        TokenCommand::Add {
            observer,
            session,
            name,
        } => {
            let role = if observer {
                tokens::Role::Observer
            } else {
                tokens::Role::Controller
            };
            let token = tokens::add(path, &name, role, session)?;
            // The token alone on stdout, once; the rest on stderr.
            writeln!(out, "{token}")?;
            eprintln!(
                "token `{name}` added ({}); it is shown only now",
                role.as_str()
            );
        }
        TokenCommand::List => {
            for entry in tokens::load(path)? {
                let scope = entry
                    .session
                    .map_or_else(|| "all sessions".to_owned(), |s| format!("session {s}"));
                writeln!(out, "{}\t{}\t{scope}", entry.name, entry.role.as_str())?;
            }
        }
        TokenCommand::Revoke { name } => {
            tokens::revoke(path, &name)?;
            eprintln!("token `{name}` revoked; its open connections close within a second");
        }
    }
    Ok(())
}

enum Listen {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

fn parse_listen(text: &str, secure: bool) -> anyhow::Result<Listen> {
    if text.contains('/') {
        return Ok(Listen::Unix(PathBuf::from(
            text.trim_start_matches("unix:"),
        )));
    }
    let addr: SocketAddr = text
        .parse()
        .map_err(|_| anyhow::anyhow!("--listen {text}: not HOST:PORT nor a socket path"))?;
    if !addr.ip().is_loopback() && !secure {
        anyhow::bail!(
            "--listen {addr} is not a loopback address: beyond loopback MAIA serves TLS only \
             (--tls-cert and --tls-key), or plain HTTP behind a TLS-terminating reverse proxy \
             (--insecure-behind-proxy); or reach it through an SSH tunnel"
        );
    }
    Ok(Listen::Tcp(addr))
}

async fn run(
    args: ServeArgs,
    options: maia_core::EngineOptions,
    tokens_path: PathBuf,
) -> anyhow::Result<()> {
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tls::acceptor(cert, key)?),
        _ => None,
    };
    let secure = args.insecure_behind_proxy || tls.is_some();
    let listen = parse_listen(&args.listen, secure)?;
    if tokens::load(&tokens_path)?.is_empty() {
        anyhow::bail!(
            "no token can connect yet: add one with `maia serve token add NAME` ({})",
            tokens_path.display()
        );
    }
    let hub = Hub::start(options, args.protocol_v2).await?;
    let hosts = match &listen {
        Listen::Unix(_) => None,
        Listen::Tcp(addr) => {
            let mut hosts = vec![
                "localhost".to_owned(),
                "127.0.0.1".to_owned(),
                "[::1]".to_owned(),
                addr.ip().to_string(),
            ];
            hosts.extend(args.allow_hosts.iter().cloned());
            Some(Arc::new(hosts))
        }
    };
    let daemon = Daemon {
        hub,
        tokens: tokens_path,
        hosts,
        max_message: args.max_message_bytes,
        idle: args.idle_timeout,
        ping: args.ping_interval,
        limits: hub::Limits {
            connections: args.max_connections_per_token,
            unread: args.max_unread,
        },
        http: Arc::new(Mutex::new(HashMap::new())),
        web: Arc::new(web::Logins::new(secure)),
    };
    tokio::spawn(close_revoked(daemon.clone()));
    let hub = daemon.hub.clone();
    let router = axum::Router::new()
        .route("/", axum::routing::get(web::page))
        .route("/login", axum::routing::post(web::login))
        .route("/logout", axum::routing::post(web::logout))
        .route("/web/app.js", axum::routing::get(web::script))
        .route("/web/app.css", axum::routing::get(web::style))
        .route(
            "/acp",
            axum::routing::get(get_acp)
                .post(http::post)
                .delete(http::delete),
        )
        .with_state(daemon);
    let mut stop = crate::signals::Stop::new()?;
    let stopped = async move {
        let signal = stop.next().await;
        tracing::info!(signal, "signal received; shutting down");
        // Running turns end `cancelled`, as under `maia acp`.
        hub.shut_down(SHUTDOWN_WAIT).await;
    };
    match listen {
        Listen::Tcp(addr) => {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            let bound = listener.local_addr()?;
            let (scheme, ws) = if tls.is_some() {
                ("https", "wss")
            } else {
                ("http", "ws")
            };
            eprintln!("maia serve: listening on {scheme}://{bound}/acp ({ws}://{bound}/acp)");
            eprintln!("maia serve: the web page is {scheme}://{bound}/");
            let gate = accept::Gate::new(
                usize::try_from(args.max_unauthenticated).unwrap_or(usize::MAX),
                args.header_timeout,
            );
            accept::serve(listener, tls, router, gate, stopped).await;
        }
        Listen::Unix(path) => {
            if tls.is_some() {
                anyhow::bail!("a Unix socket is served without TLS");
            }
            let _ = std::fs::remove_file(&path);
            let listener = tokio::net::UnixListener::bind(&path)?;
            eprintln!("maia serve: listening on unix:{}", path.display());
            axum::serve(listener, router)
                .with_graceful_shutdown(stopped)
                .await?;
        }
    }
    Ok(())
}

/// Closes the connections whose token was revoked, and the Streamable
/// HTTP connections idle for too long.
async fn close_revoked(daemon: Daemon) {
    // An idle timeout shorter than the check is checked at half of it.
    let every = REVOKE_CHECK
        .min(daemon.idle / 2)
        .max(std::time::Duration::from_millis(10));
    loop {
        tokio::time::sleep(every).await;
        let idle: Vec<(String, u64)> = daemon
            .http
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter(|(_, c)| c.activity.idle_for() > daemon.idle)
            .map(|(id, c)| (id.clone(), c.conn))
            .collect();
        for (id, conn) in idle {
            tracing::info!(conn, "an idle Streamable HTTP connection was closed");
            daemon.end_http(&id, conn);
        }
        let Ok(entries) = tokens::load(&daemon.tokens) else {
            continue;
        };
        for (conn, access, outbox) in daemon.hub.clients() {
            if !access.holds(&entries) {
                tracing::info!(conn, token = %access.name, "token revoked; connection closed");
                outbox.close("the token was revoked");
                daemon.hub.disconnect(conn);
            }
        }
    }
}

fn refuse(status: StatusCode, message: &str) -> Response {
    let mut response = (status, message.to_owned()).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

/// The host part of `Host` or of an `Origin` URL, lowercased.
fn host_name(authority: &str) -> String {
    let authority = authority.to_ascii_lowercase();
    if authority.starts_with('[') {
        return authority
            .split_once(']')
            .map_or(authority.clone(), |(h, _)| format!("{h}]"));
    }
    authority
        .rsplit_once(':')
        .map_or(authority.clone(), |(h, _)| h.to_owned())
}

/// The checks of every request: `Host` and `Origin` name this daemon
/// (against DNS rebinding and cross-site pages). On HTTP/2 the host is the
/// request's `:authority`, not a `Host` header.
fn check_host(daemon: &Daemon, request: &Request) -> Result<(), Box<Response>> {
    let headers = request.headers();
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    if let Some(hosts) = &daemon.hosts {
        let host = text(header::HOST)
            .or_else(|| request.uri().authority().map(|a| a.as_str()))
            .map(host_name);
        if !host.as_ref().is_some_and(|h| hosts.contains(h)) {
            return Err(Box::new(refuse(
                StatusCode::FORBIDDEN,
                "this Host is not served here",
            )));
        }
        if let Some(origin) = text(header::ORIGIN) {
            // A served host, and the request's own origin: its port too
            // (another port of this host is another site).
            let allowed = url::Url::parse(origin)
                .ok()
                .and_then(|u| u.host_str().map(|h| host_name(&format!("{h}:0"))))
                .is_some_and(|h| hosts.contains(&h))
                && web::same_origin(headers, request.uri().authority().map(|a| a.as_str()));
            if !allowed {
                return Err(Box::new(refuse(
                    StatusCode::FORBIDDEN,
                    "this Origin is not allowed",
                )));
            }
        }
    }
    Ok(())
}

/// `check_host`, then a known bearer token (or, on the web page's own
/// WebSocket only, its login cookie: `web`).
fn authorize(daemon: &Daemon, request: &Request) -> Result<Access, Box<Response>> {
    check_host(daemon, request)?;
    let access = authorize_token(daemon, request)?;
    admitted(request);
    Ok(access)
}

/// The request's connection showed a token (or a login): the gate
/// (`accept`) no longer bounds it.
fn admitted(request: &Request) {
    if let Some(admitted) = request.extensions().get::<accept::Admitted>() {
        admitted.authorized();
    }
}

/// The bearer token of `request`, or the web page's login cookie.
fn authorize_token(daemon: &Daemon, request: &Request) -> Result<Access, Box<Response>> {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        // The scheme is case-insensitive (RFC 9110, 11.1).
        .and_then(|v| v.trim_start().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    let Some(presented) = presented else {
        return web::cookie_access(daemon, request).ok_or_else(|| {
            Box::new(refuse(
                StatusCode::UNAUTHORIZED,
                "a bearer token is needed (Authorization: Bearer …)",
            ))
        });
    };
    let entries = tokens::load(&daemon.tokens).map_err(|e| {
        tracing::error!("{e}");
        refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the token file cannot be read",
        )
    })?;
    tokens::check(&entries, presented)
        .ok_or_else(|| Box::new(refuse(StatusCode::UNAUTHORIZED, "unknown or revoked token")))
}

/// `GET /acp`: a WebSocket upgrade, else a Streamable HTTP stream.
async fn get_acp(State(daemon): State<Daemon>, request: Request) -> Response {
    let access = match authorize(&daemon, &request) {
        Ok(access) => access,
        Err(refused) => return *refused,
    };
    let upgrade = request
        .headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    if !upgrade {
        return http::stream(daemon, access, request.headers()).await;
    }
    let (mut parts, _) = request.into_parts();
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(upgrade) => upgrade,
        Err(rejection) => return rejection.into_response(),
    };
    let Some((conn, outbox)) = daemon.hub.connect(access, false, daemon.limits) else {
        return refuse(
            StatusCode::TOO_MANY_REQUESTS,
            "this token has too many open connections",
        );
    };
    let id = uuid::Uuid::new_v4().to_string();
    let max = daemon.max_message;
    let mut response = upgrade
        .max_message_size(max)
        .max_frame_size(max)
        // tungstenite's default 128 KiB read buffer per connection would be
        // most of an idle connection's memory.
        .read_buffer_size(8 * 1024)
        .write_buffer_size(0)
        .on_failed_upgrade({
            let (hub, outbox) = (daemon.hub.clone(), outbox.clone());
            move |_| {
                outbox.close("the upgrade failed");
                hub.disconnect(conn);
            }
        })
        .on_upgrade(move |socket| websocket(daemon, conn, outbox, socket));
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(CONNECTION_HEADER, value);
    }
    response
}

/// One WebSocket client: one JSON-RPC message per text frame each way.
async fn websocket(daemon: Daemon, conn: u64, outbox: Arc<Outbox>, socket: WebSocket) {
    let (mut tx, mut rx) = socket.split();
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + daemon.ping, daemon.ping);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut heard = tokio::time::Instant::now();
    let mut silent = false;
    'run: loop {
        tokio::select! {
            _ = ping.tick() => {
                if heard.elapsed() >= daemon.ping * 2 {
                    silent = true;
                    break;
                }
                let sent = tokio::time::timeout(daemon.ping, tx.send(Message::Ping(Default::default()))).await;
                if !matches!(sent, Ok(Ok(()))) {
                    break;
                }
            }
            batch = outbox.next_batch(None) => {
                let Some(batch) = batch else { break };
                for text in batch {
                    tokio::select! {
                        sent = tx.send(Message::Text(text.into())) => if sent.is_err() { break 'run },
                        () = outbox.closed() => break,
                    }
                }
            }
            message = rx.next() => {
                heard = tokio::time::Instant::now();
                match message {
                Some(Ok(Message::Text(text))) => match parse(text.as_str()) {
                    Ok(Value::Array(entries)) if daemon.hub.takes_batches(conn) => {
                        batch::take(&daemon.hub, conn, &outbox, entries, true);
                    }
                    Ok(Value::Array(_)) => {
                        let answer = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600,
                            "message": "batches are served on ACP v2 only"}});
                        outbox.push(None, answer.to_string(), false);
                    }
                    Ok(message) => daemon.hub.receive(conn, message, true),
                    Err(answer) => {
                        outbox.push(None, answer.to_string(), false);
                    }
                },
                Some(Ok(Message::Binary(_) | Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(Message::Close(_)) | Err(_)) | None => break,
                }
            },
        }
    }
    daemon.hub.disconnect(conn);
    if silent {
        tracing::info!(conn, "closing a WebSocket that answered no ping");
        return;
    }
    if let Some(reason) = outbox.reason().filter(|r| r != "disconnected") {
        tracing::info!(conn, reason, "closing a WebSocket");
        let frame = CloseFrame {
            code: 1008,
            reason: reason.into(),
        };
        // A reader that is stuck does not take the close frame either.
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            tx.send(Message::Close(Some(frame))),
        )
        .await;
    }
}

/// One client frame: a JSON-RPC object or a batch (an array), or the
/// error to answer.
fn parse(text: &str) -> Result<Value, Value> {
    match serde_json::from_str::<Value>(text) {
        Ok(message @ (Value::Object(_) | Value::Array(_))) => Ok(message),
        Ok(_) => Err(json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": -32600, "message": "not a JSON-RPC message"}})),
        Err(e) => Err(json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": -32700, "message": format!("parse error: {e}")}})),
    }
}
