//! The attach model: one agent (one engine, one session table) for the
//! whole daemon, and network clients attached to its live sessions.
//!
//! The agent is the ACP front door itself (`crate::acp::serve_pipe`) on an
//! in-process pipe; the hub sits between it and every client and routes
//! JSON-RPC: a client's requests go to the agent under ids of the hub's
//! own and their answers back to that client alone; a session's updates
//! go to every client attached to it, numbered by the session's update
//! sequence (`_meta.maia.seq`) and kept for replay; the agent's requests of
//! a session (permission questions) go to every controller attached to it,
//! the first answer wins and the others get `$/cancel_request`.
//!
//! Invariants:
//! - the agent's output is handled by one task, in order, under one lock:
//!   a client sees a session's messages in the agent's order, a replay
//!   before the live updates that follow it, nothing twice;
//! - a client's disconnect changes nothing for the session: its turn goes
//!   on and a question nobody answered waits for the next controller;
//! - an observer's every request but `initialize`, `session/list`,
//!   `session/load` and `session/resume` is answered an error.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

mod agent;
mod attach;
mod echo;

use attach::{attach, detach, resend_questions};

use super::outbox::Outbox;
use super::tokens::{Access, Role};

/// Updates kept per live session for replay, at most…
pub const LOG_LIMIT: usize = 100_000;
/// …and at most this many bytes of them.
pub const LOG_BYTES: usize = 64 << 20;

/// The notification telling every attached client a prompt was answered
/// (`{sessionId, stopReason}` or `{sessionId, error}`), numbered like the
/// session's updates.
pub const TURN_ENDED: &str = "_session/turn_ended";

/// The bounds of one client.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Open connections one token may have.
    pub connections: usize,
    /// Live messages a client may leave unread before it is dropped.
    pub unread: usize,
}

/// The notification telling a client the number its own prompt's echo
/// took (`{sessionId}`, `_meta.maia.seq`; `hub/echo.rs`).
pub const ECHOED: &str = "_session/echoed";

/// The notification telling every attached client that a controller
/// closed the session (`{sessionId}`).
pub const CLOSED: &str = "_session/closed";

/// What an observer may ask.
const OBSERVER_METHODS: &[&str] = &[
    "initialize",
    "session/list",
    "session/load",
    "session/resume",
];

struct Client {
    outbox: Arc<Outbox>,
    access: Access,
    initialized: bool,
    attached: HashSet<String>,
    /// The sessions whose turn is cancelled when this client leaves
    /// (`_meta.maia.cancelOnDisconnect` on the open or attach).
    cancel_on_leave: HashSet<String>,
}

/// A session open in the agent, with who is attached to it.
#[derive(Default)]
struct Live {
    seq: u64,
    /// The kept updates with their size; `log_bytes` their sum.
    log: VecDeque<(usize, Value)>,
    log_bytes: usize,
    attached: BTreeMap<u64, Role>,
    /// The open's answer (what a later attach is answered), once given.
    opened: Option<Value>,
    /// Attaches waiting for the open's answer.
    waiters: Vec<(u64, Value, Option<u64>)>,
}

enum Kind {
    Plain,
    /// `session/prompt`: its end is told to every attached client.
    Prompt {
        session: String,
    },
    New {
        cancel_on_leave: bool,
    },
    Open {
        session: String,
    },
    Close {
        session: String,
    },
}

/// A client's request forwarded to the agent.
struct Routed {
    conn: u64,
    id: Value,
    kind: Kind,
    scope: Option<String>,
}

/// The agent's request of a session, sent to its controllers.
struct Asked {
    session: String,
    message: Value,
    sent: Vec<u64>,
}

#[derive(Default)]
struct State {
    clients: HashMap<u64, Client>,
    live: HashMap<String, Live>,
    routed: HashMap<String, Routed>,
    asked: HashMap<String, Asked>,
    next: u64,
    init: Value,
    /// Sessions to cancel, as clients that asked for it left.
    cancels: Vec<String>,
}

pub struct Hub {
    state: Mutex<State>,
    agent: mpsc::UnboundedSender<String>,
}

fn error(id: &Value, code: i64, message: &str, data: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message, "data": data}})
}

/// The text form of a JSON-RPC id (a table key).
fn key(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn session_of(message: &Value) -> Option<String> {
    message["params"]["sessionId"].as_str().map(str::to_owned)
}

impl Hub {
    /// Starts the agent on a pipe and initializes it (the daemon speaks
    /// base ACP to every client: no `fs`, no terminal, see docs/remote.md).
    pub async fn start(options: maia_core::EngineOptions) -> anyhow::Result<Arc<Hub>> {
        let (ours, theirs) = tokio::io::duplex(1 << 20);
        let (their_read, their_write) = tokio::io::split(theirs);
        tokio::spawn(crate::acp::serve_pipe(options, their_read, their_write));
        let (read, mut write) = tokio::io::split(ours);
        let mut lines = BufReader::new(read).lines();
        let init = json!({"jsonrpc": "2.0", "id": "hub-init", "method": "initialize",
            "params": {"protocolVersion": 1, "clientCapabilities": {},
                       "clientInfo": {"name": "maia-serve", "version": env!("CARGO_PKG_VERSION")}}});
        write.write_all(format!("{init}\n").as_bytes()).await?;
        let result = loop {
            let Some(line) = lines.next_line().await? else {
                anyhow::bail!("the agent ended before it was initialized");
            };
            let message: Value = serde_json::from_str(&line)?;
            if message["id"] == "hub-init" {
                break message["result"].clone();
            }
        };
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        let hub = Arc::new(Hub {
            state: Mutex::new(State {
                init: result,
                next: 1,
                ..State::default()
            }),
            agent: tx,
        });
        tokio::spawn(async move {
            while let Some(line) = rx.recv().await {
                if write.write_all(line.as_bytes()).await.is_err()
                    || write.write_all(b"\n").await.is_err()
                {
                    break;
                }
            }
        });
        let reader = hub.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                match serde_json::from_str::<Value>(&line) {
                    Ok(message) => reader.on_agent(message),
                    Err(e) => tracing::error!("the agent wrote a line that is not JSON: {e}"),
                }
            }
            tracing::info!("the agent ended");
        });
        Ok(hub)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every change is a handful of inserts and removes on behalf of one
        // message: usable after a panic.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn to_agent(&self, message: &Value) {
        if self.agent.send(message.to_string()).is_err() {
            tracing::warn!("the agent is gone; a message was dropped");
        }
    }

    /// A new client: its number and its outbox (`split`: one stream per
    /// session, for Streamable HTTP); `None` when its token already has
    /// as many connections as `limits` allow.
    pub fn connect(
        &self,
        access: Access,
        split: bool,
        limits: Limits,
    ) -> Option<(u64, Arc<Outbox>)> {
        let outbox = Arc::new(Outbox::new(split, limits.unread));
        let mut state = self.lock();
        let open = state
            .clients
            .values()
            .filter(|c| c.access.name == access.name)
            .count();
        if open >= limits.connections {
            tracing::warn!(token = %access.name, open, "too many connections for one token");
            return None;
        }
        let conn = state.next;
        state.next += 1;
        tracing::info!(conn, token = %access.name, role = ?access.role, "client connected");
        state.clients.insert(
            conn,
            Client {
                outbox: outbox.clone(),
                access,
                initialized: false,
                attached: HashSet::new(),
                cancel_on_leave: HashSet::new(),
            },
        );
        Some((conn, outbox))
    }

    /// The client is gone: it is detached from its sessions, which go on.
    pub fn disconnect(&self, conn: u64) {
        let mut state = self.lock();
        detach(&mut state, conn);
        self.send_cancels(&mut state);
    }

    /// Cancels the turns of the sessions whose leaving client asked for it.
    fn send_cancels(&self, state: &mut State) {
        for session in std::mem::take(&mut state.cancels) {
            tracing::info!(target: "maia::audit", session = %session, "cancel on disconnect");
            self.to_agent(&json!({"jsonrpc": "2.0", "method": "session/cancel",
                "params": {"sessionId": session}}));
        }
    }

    /// The token name of each connected client (to close revoked ones).
    pub fn clients(&self) -> Vec<(u64, String, Arc<Outbox>)> {
        let state = self.lock();
        state
            .clients
            .iter()
            .map(|(conn, c)| (*conn, c.access.name.clone(), c.outbox.clone()))
            .collect()
    }

    /// Whether `session` may be named by `conn` on a session stream: it is
    /// attached, live, or being opened by this connection.
    pub fn knows(&self, conn: u64, session: &str) -> bool {
        let state = self.lock();
        let Some(client) = state.clients.get(&conn) else {
            return false;
        };
        client.access.may_see(session)
            && (client.attached.contains(session) || state.live.contains_key(session))
    }

    /// A message from client `conn` (one JSON-RPC message, not a batch).
    pub fn receive(&self, conn: u64, message: Value) {
        let mut state = self.lock();
        let Some(client) = state.clients.get(&conn) else {
            return;
        };
        let (access, outbox) = (client.access.clone(), client.outbox.clone());
        let reply = |m: Value, scope: Option<&str>| {
            outbox.push(scope, m.to_string(), false);
        };
        let method = message["method"].as_str().map(str::to_owned);
        let id = message.get("id").cloned();
        let sid = session_of(&message);
        match (method, id) {
            (Some(method), Some(id)) => {
                if let Err(e) =
                    self.request(&mut state, conn, &access, &method, id.clone(), message)
                {
                    reply(e.into_message(&id), None);
                }
            }
            (Some(method), None) => {
                if access.role == Role::Observer && method != maia_rpc::CANCEL_REQUEST {
                    tracing::warn!(conn, method, "a notification from an observer was ignored");
                    return;
                }
                if method == maia_rpc::CANCEL_REQUEST {
                    // Ours to rename: the client's id becomes the hub's.
                    let asked = message["params"]["requestId"].clone();
                    let ours = state
                        .routed
                        .iter()
                        .find(|(_, r)| r.conn == conn && r.id == asked)
                        .map(|(k, _)| k.clone());
                    if let Some(ours) = ours {
                        self.to_agent(&json!({"jsonrpc": "2.0", "method": method,
                            "params": {"requestId": ours}}));
                    }
                    return;
                }
                if let Some(sid) = &sid
                    && !access.may_see(sid)
                {
                    return;
                }
                if method == "session/cancel" {
                    tracing::info!(target: "maia::audit", conn, token = %access.name,
                        session = ?sid, "cancel");
                }
                self.to_agent(&message);
            }
            (None, Some(id)) => {
                // An answer to a question of the agent.
                let Some(asked) = state.asked.get(&key(&id)) else {
                    tracing::debug!(conn, "a late or unknown answer was ignored");
                    return;
                };
                if !asked.sent.contains(&conn) {
                    return;
                }
                let Some(asked) = state.asked.remove(&key(&id)) else {
                    return;
                };
                let outcome = message.get("result").cloned().unwrap_or(Value::Null);
                let question = asked.message["method"].clone();
                tracing::info!(target: "maia::audit", conn, token = %access.name,
                    session = %asked.session, %question, %outcome, "answer");
                self.to_agent(&message);
                let cancel = json!({"jsonrpc": "2.0", "method": maia_rpc::CANCEL_REQUEST,
                    "params": {"requestId": id}});
                for other in asked.sent.iter().filter(|c| **c != conn) {
                    if let Some(c) = state.clients.get(other) {
                        c.outbox
                            .push(Some(&asked.session), cancel.to_string(), false);
                    }
                }
            }
            (None, None) => reply(
                error(&Value::Null, -32600, "not a JSON-RPC message", Value::Null),
                None,
            ),
        }
    }

    fn request(
        &self,
        state: &mut State,
        conn: u64,
        access: &Access,
        method: &str,
        id: Value,
        mut message: Value,
    ) -> Result<(), Refusal> {
        let sid = session_of(&message);
        if method == "initialize" {
            let mut result = state.init.clone();
            result["_meta"]["maia"]["remote"] = json!({
                "role": access.role.as_str(),
                "updateSeq": true,
            });
            if let Some(client) = state.clients.get_mut(&conn) {
                client.initialized = true;
                client.outbox.push(
                    None,
                    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string(),
                    false,
                );
            }
            return Ok(());
        }
        if !state.clients.get(&conn).is_some_and(|c| c.initialized) {
            return Err(Refusal::new(
                -32600,
                "the connection is not initialized: call `initialize` first",
            ));
        }
        if access.role == Role::Observer && !OBSERVER_METHODS.contains(&method) {
            return Err(Refusal::new(
                -32600,
                &format!("this connection is an observer (read-only): `{method}` is refused"),
            )
            .data(json!({"reason": "observer", "method": method})));
        }
        match (&sid, &access.session) {
            (Some(sid), Some(only)) if sid != only => {
                return Err(Refusal::new(
                    -32002,
                    &format!("this token may only use session `{only}`"),
                ));
            }
            (None, Some(only)) => {
                return Err(Refusal::new(
                    -32600,
                    &format!("this token may only use session `{only}`: `{method}` is refused"),
                ));
            }
            _ => {}
        }
        let asks_cancel_on_leave = access.role == Role::Controller
            && message["params"]["_meta"]["maia"]["cancelOnDisconnect"] == true;
        if asks_cancel_on_leave
            && let Some(session) = &sid
            && matches!(method, "session/load" | "session/resume")
            && let Some(c) = state.clients.get_mut(&conn)
        {
            c.cancel_on_leave.insert(session.clone());
        }
        let kind = match method {
            "session/new" | "session/fork" => Kind::New {
                cancel_on_leave: asks_cancel_on_leave,
            },
            "session/load" | "session/resume" => {
                let session = sid.clone().unwrap_or_default();
                let since = message["params"]["_meta"]["maia"]["since"].as_u64();
                let load = method == "session/load";
                if let Some(live) = state.live.get_mut(&session) {
                    if live.opened.is_some() {
                        attach(state, conn, &session, &id, since, load);
                    } else {
                        live.waiters
                            .push((conn, id, if load { since.or(Some(0)) } else { since }));
                    }
                    return Ok(());
                }
                let live = state.live.entry(session.clone()).or_default();
                live.attached.insert(conn, access.role);
                if let Some(c) = state.clients.get_mut(&conn) {
                    c.attached.insert(session.clone());
                }
                Kind::Open { session }
            }
            "session/close" => Kind::Close {
                session: sid.clone().unwrap_or_default(),
            },
            _ => {
                if let Some(sid) = &sid
                    && state.live.contains_key(sid)
                    && !state
                        .clients
                        .get(&conn)
                        .is_some_and(|c| c.attached.contains(sid))
                {
                    return Err(Refusal::new(
                        -32600,
                        &format!(
                            "session `{sid}` is not attached here: `session/load` or `session/resume` it first"
                        ),
                    ));
                }
                if method == "session/prompt" {
                    tracing::info!(target: "maia::audit", conn, token = %access.name,
                        session = ?sid, "prompt");
                }
                if let Some(sid) = &sid {
                    echo::echo(state, conn, sid, method, &message);
                }
                Kind::Plain
            }
        };
        let ours = format!("c{conn}.{}", state.next);
        state.next += 1;
        let kind = match (kind, &sid) {
            (Kind::Plain, Some(session)) if method == "session/prompt" => Kind::Prompt {
                session: session.clone(),
            },
            (kind, _) => kind,
        };
        let scope = match kind {
            Kind::Plain | Kind::Prompt { .. } => sid.clone(),
            _ => None,
        };
        state.routed.insert(
            ours.clone(),
            Routed {
                conn,
                id,
                kind,
                scope,
            },
        );
        message["id"] = Value::String(ours);
        self.to_agent(&message);
        Ok(())
    }
}

/// A request refused by the hub itself.
struct Refusal {
    code: i64,
    message: String,
    data: Value,
}

impl Refusal {
    fn new(code: i64, message: &str) -> Self {
        Refusal {
            code,
            message: message.to_owned(),
            data: Value::Null,
        }
    }

    fn data(mut self, data: Value) -> Self {
        self.data = data;
        self
    }

    fn into_message(self, id: &Value) -> Value {
        error(id, self.code, &self.message, self.data)
    }
}
