//! The ACP front door: typed dispatch of client requests onto the engine,
//! and engine events turned into `session/update`s and client requests.
//!
//! Invariants:
//! - every request gets exactly one response; notifications none;
//! - a session's updates and its prompt response go through one ordered
//!   writer, and the response is written only after the turn's last event
//!   (the engine's `TurnEnded`), so no update of a turn follows its response;
//! - nothing is sent for a session before its `session/new` response;
//! - `fs/*` requests are sent only when the client advertised them.
//!
//! Here: the input loop, dispatch to the connection's protocol version
//! (v1's requests in `v1`, v2's in `v2`) and the session table. Opening sessions
//! (one path for `session/new`, `load` and `resume`) and the queue of
//! messages waiting for an open are in `open`, requests on an open session
//! in `manage`, the per-session pump in `forward`, prompt content in
//! `prompt`, the front door's own choices (the model list, the effort, the
//! thinking shown) and the config options made of them with the session's
//! model and mode in `choices`.

mod ask;
mod auth;
mod choices;
mod convert;
mod fork;
mod forward;
mod fs;
mod manage;
mod mirror;
mod open;
mod options;
mod peer;
mod prompt;
#[cfg(feature = "llm-providers")]
mod providers;
mod queue;
mod reason;
mod revert;
mod reviewed;
mod rewind;
mod steer;
mod subagents;
mod tasks;
mod terminal;
mod undone;
mod v1;
mod v2;

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1::{ClientCapabilities, ClientNotification};
use maia_core::{Engine, EngineOptions, SessionHandle};
use maia_rpc::{Connection, ErrorCode, Id, Incoming, RpcError};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// Serves ACP on this process's stdin and stdout until stdin closes or a
/// SIGTERM, SIGINT or SIGHUP arrives. Either way running prompts are
/// answered `cancelled` while the output is open, sessions stop (their
/// commands and MCP servers killed, journals closed) and the output is
/// flushed before returning.
///
/// With `protocol_v2`, a client asking for ACP v2 (the draft) gets it
/// (`v2`); any other gets v1.
pub async fn serve_stdio(options: EngineOptions, protocol_v2: bool) -> anyhow::Result<()> {
    let (conn, mut incoming, writer) = maia_rpc::serve_blocking_writer(
        tokio::io::stdin(),
        std::io::stdout(),
        maia_rpc::framing::DEFAULT_MAX_LINE,
    );
    let agent = Arc::new(Agent::new(conn.clone(), Engine::new(options), protocol_v2));
    let mut stop = crate::signals::Stop::new()?;
    loop {
        tokio::select! {
            message = incoming.recv() => match message {
                Some(Incoming::Request { id, method, params }) => {
                    agent.handle_request(id, &method, params)
                }
                Some(Incoming::Notification { method, params }) => {
                    agent.handle_notification(&method, params)
                }
                None => {
                    tracing::info!("input closed; shutting down");
                    break;
                }
            },
            signal = stop.next() => {
                tracing::info!(signal, "signal received; shutting down");
                break;
            }
        }
    }
    // The client may still answer what the stopping turns asked.
    incoming.drain();
    agent.shutdown().await;
    drop(agent);
    let _ = tokio::time::timeout(std::time::Duration::from_millis(500), conn.flush()).await;
    drop(conn);
    // The writer ends once the reader (blocked on stdin) lets go too; do
    // not wait for it after the flush.
    let _ = tokio::time::timeout(std::time::Duration::from_millis(100), writer).await;
    Ok(())
}

pub use mirror::{METHOD as ATTACH, Shared};

/// Serves ACP on an in-process pipe until its input closes: one of `maia
/// serve`'s agent connections (on its one engine) behind the hub that
/// attaches network clients to their sessions (`crate::serve::hub`). With
/// `protocol_v2` the connection is offered v2 as `maia acp --protocol-v2`
/// is; with `shared`, the daemon runs one connection per version and the
/// two serve each other's sessions (`mirror`). Running prompts are answered
/// `cancelled` and sessions stop when the input closes.
pub async fn serve_pipe<R, W>(
    engine: Engine,
    (protocol_v2, shared): (bool, Option<Arc<Shared>>),
    reader: R,
    writer: W,
) where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (conn, mut incoming, writer) =
        maia_rpc::serve(reader, writer, maia_rpc::framing::DEFAULT_MAX_LINE);
    let mut agent = Agent::new(conn.clone(), engine, protocol_v2);
    agent.shared = shared;
    let agent = Arc::new(agent);
    while let Some(message) = incoming.recv().await {
        match message {
            Incoming::Request { id, method, params } => agent.handle_request(id, &method, params),
            Incoming::Notification { method, params } => agent.handle_notification(&method, params),
        }
    }
    agent.shutdown().await;
    drop(agent);
    let _ = tokio::time::timeout(std::time::Duration::from_millis(500), conn.flush()).await;
    drop(conn);
    let _ = tokio::time::timeout(std::time::Duration::from_millis(100), writer).await;
}

use choices::{Choices, SharedChoices};
use forward::Pending;

struct SessionEntry {
    handle: SessionHandle,
    pending: Pending,
    choices: SharedChoices,
    /// Cancelled when the session's pump has ended (the session stopped and
    /// its last prompt was answered).
    done: tokio_util::sync::CancellationToken,
    /// What a v2 client's session keeps besides (`None` on v1).
    v2: Option<Arc<v2::turn::SessionV2>>,
    /// The v1 prompts for the other connection's v2 clients (`mirror`).
    book: Option<mirror::Prompts>,
}

/// How long `session/close` waits for the session to stop.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long opening a session waits for the endpoint's model list.
const MODEL_LIST_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// What the agent knows of a session id.
enum Slot {
    /// Being opened (`session/load` / `resume`, or reopened): messages
    /// naming it wait in `queue` (as read from the input), in arrival order. `entry` is set once the
    /// session is ready, while the queue drains.
    Opening {
        /// Which open this is (a reopening while the queue drains starts
        /// a new one, which takes over the rest of the queue).
        generation: u64,
        entry: Option<Arc<SessionEntry>>,
        queue: VecDeque<Incoming>,
    },
    Open(Arc<SessionEntry>),
}

impl Slot {
    fn entry(&self) -> Option<Arc<SessionEntry>> {
        match self {
            Slot::Open(entry) => Some(entry.clone()),
            Slot::Opening { entry, .. } => entry.clone(),
        }
    }
}

struct Agent {
    conn: Connection,
    engine: Engine,
    /// The client's capabilities, once `initialize` was answered.
    client: Mutex<Option<ClientCapabilities>>,
    /// Every session id this connection opened or is opening. One lock, held
    /// only for map operations, so a state change is atomic with the
    /// routing decision of every message.
    sessions: Mutex<HashMap<String, Slot>>,
    /// Numbers the opens of [`Slot::Opening`].
    generations: std::sync::atomic::AtomicU64,
    pumps: Mutex<Vec<JoinHandle<()>>>,
    /// Folders sessions were opened in (what `session/list` without a
    /// `cwd` and `session/delete` search).
    known_cwds: Mutex<BTreeSet<PathBuf>>,
    /// The folder of the last `session/new` refused with `auth_required`
    /// (what `authenticate` checks; else the user's settings alone).
    auth_cwd: Mutex<Option<PathBuf>>,
    /// The protocol version this connection speaks.
    wire: v2::Wire,
    /// The sessions shared with the daemon's other connection (`mirror`).
    shared: Option<Arc<Shared>>,
}

/// Sessions per `session/list` page.
const LIST_PAGE: usize = 50;

fn invalid_params(message: impl Into<String>) -> RpcError {
    RpcError::new(ErrorCode::InvalidParams, message)
}

fn unknown_session(id: &str) -> RpcError {
    RpcError::new(
        ErrorCode::ResourceNotFound,
        format!("unknown session `{id}`"),
    )
    .with_data(json!({ "sessionId": id }))
}

fn to_value<T: serde::Serialize>(value: &T) -> Result<Value, RpcError> {
    serde_json::to_value(value).map_err(|e| RpcError::new(ErrorCode::InternalError, e.to_string()))
}

impl Agent {
    fn new(conn: Connection, engine: Engine, protocol_v2: bool) -> Self {
        Agent {
            conn,
            engine,
            client: Mutex::new(None),
            sessions: Mutex::new(HashMap::new()),
            generations: std::sync::atomic::AtomicU64::new(1),
            pumps: Mutex::new(Vec::new()),
            known_cwds: Mutex::new(BTreeSet::new()),
            auth_cwd: Mutex::new(None),
            wire: v2::Wire::new(protocol_v2),
            shared: None,
        }
    }

    fn client_caps(&self) -> Option<ClientCapabilities> {
        self.client.lock().ok().and_then(|c| c.clone())
    }

    /// A request from the client's input: one that names a session being
    /// opened waits for it (in order); the rest is handled now.
    fn handle_request(self: &Arc<Self>, id: Id, method: &str, params: Value) {
        if let Some(sid) = named_session(&params) {
            let mut sessions = self.lock_sessions();
            if let Some(Slot::Opening { queue, .. }) = sessions.get_mut(&sid) {
                queue.push_back(Incoming::Request {
                    id,
                    method: method.to_owned(),
                    params,
                });
                return;
            }
        }
        self.handle_request_now(id, method, params);
    }

    fn handle_request_now(self: &Arc<Self>, id: Id, method: &str, params: Value) {
        if method == mirror::METHOD {
            return self.attach_shared(id, &params);
        }
        if self.wire.speaks_v2(method, &params) {
            return self.handle_v2(id, method, params);
        }
        self.handle_v1(id, method, params)
    }

    /// Answers request `id` with what `work` gives, run on the blocking
    /// pool (it reads or writes files).
    fn respond_off_runtime(
        self: &Arc<Self>,
        id: Id,
        work: impl FnOnce(&Agent) -> Result<Value, RpcError> + Send + 'static,
    ) {
        let agent = self.clone();
        tokio::spawn(async move {
            let worker = agent.clone();
            let result = tokio::task::spawn_blocking(move || work(&worker))
                .await
                .unwrap_or_else(|e| Err(RpcError::new(ErrorCode::InternalError, e.to_string())));
            agent.conn.respond(id, result);
        });
    }

    fn handle_notification(self: &Arc<Self>, method: &str, params: Value) {
        if let Some(sid) = named_session(&params) {
            let mut sessions = self.lock_sessions();
            if let Some(Slot::Opening { queue, .. }) = sessions.get_mut(&sid) {
                queue.push_back(Incoming::Notification {
                    method: method.to_owned(),
                    params,
                });
                return;
            }
        }
        self.handle_notification_now(method, params);
    }

    fn handle_notification_now(&self, method: &str, params: Value) {
        match ClientNotification::from_method_and_params(method, &params) {
            Ok(ClientNotification::CancelNotification(n)) => {
                match self.entry(n.session_id.0.as_ref()) {
                    Some(entry) => {
                        tracing::info!(session = %n.session_id, "cancel requested");
                        entry.handle.cancel();
                    }
                    None => {
                        // A child of a `Task` call is cancelled alone.
                        let id = n.session_id.0.as_ref();
                        let entries: Vec<_> = self
                            .lock_sessions()
                            .values()
                            .filter_map(Slot::entry)
                            .collect();
                        if entries.iter().any(|entry| entry.handle.cancel_child(id)) {
                            tracing::info!(session = %id, "subagent cancel requested");
                        } else {
                            tracing::debug!(session = %id, "cancel for an unknown session")
                        }
                    }
                }
            }
            Ok(_) => tracing::debug!(method, "notification ignored"),
            Err(e) => tracing::debug!(method, "notification ignored: {e}"),
        }
    }

    fn lock_sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        // A panic while the lock was held cannot leave the map half-changed
        // (every change is one insert or remove): keep using it.
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The session `id`, when it is open (or opened and draining its queue).
    fn entry(&self, id: &str) -> Option<Arc<SessionEntry>> {
        self.lock_sessions().get(id).and_then(Slot::entry)
    }

    fn dispatch(self: &Arc<Self>, message: Incoming) {
        match message {
            Incoming::Request { id, method, params } => {
                self.handle_request_now(id, &method, params)
            }
            Incoming::Notification { method, params } => {
                self.handle_notification_now(&method, params)
            }
        }
    }

    async fn shutdown(&self) {
        let slots: Vec<Slot> = self.lock_sessions().drain().map(|(_, s)| s).collect();
        for entry in slots.iter().filter_map(Slot::entry) {
            entry.handle.cancel();
        }
        drop(slots);
        let pumps: Vec<JoinHandle<()>> = self
            .pumps
            .lock()
            .map(|mut p| std::mem::take(&mut *p))
            .unwrap_or_default();
        // Give running tools a moment to kill their process groups.
        let all = futures_util::future::join_all(pumps);
        let _ = tokio::time::timeout(std::time::Duration::from_millis(800), all).await;
    }
}
/// The session a request or notification names (`params.sessionId`).
fn named_session(params: &Value) -> Option<String> {
    params
        .get("sessionId")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// `initialize`'s `_meta`: the private extensions MAIA serves.
fn meta() -> serde_json::Map<String, Value> {
    let mut meta = steer::capability();
    meta.insert("queue".into(), queue::capability());
    meta.insert("fileRevert".into(), revert::capability());
    meta.insert("sessionRewind".into(), rewind::capability());
    meta.insert("undoneHunks".into(), undone::capability());
    meta.insert("permissionReview".into(), reviewed::capability());
    meta
}
