//! The attach model: one agent (one engine; one session table per
//! protocol version it serves) for the whole daemon, and network clients
//! attached to its live sessions.
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
//! With `--protocol-v2` the agent is two connections of the front door on
//! one engine, one per protocol version (a *wire*: 0 is v1, 1 is v2); a
//! client talks to the one its `initialize` chose. A session one of them
//! opens is served by the other too (`_hub/attach`, see `crate::acp`'s
//! `mirror`), so each live session has one view per wire: its own updates,
//! sequence, replay log and open's answer, sent to that wire's clients.
//!
//! Invariants:
//! - the agent's output is handled by one task, in order, under one lock:
//!   a client sees a session's messages in the agent's order, a replay
//!   before the live updates that follow it, nothing twice;
//! - a client's disconnect changes nothing for the session: its turn goes
//!   on and a question nobody answered waits for the next controller;
//! - the daemon stopping closes the agent's input, as a stdio client's
//!   leaving does: running prompts are answered `cancelled`, routed to
//!   their clients before the daemon exits (`Hub::shut_down`);
//! - a session's v1 prompts reach the agent one at a time: one sent while
//!   another is in flight waits its turn (`hub/lineup.rs`);
//! - an observer's every request but `initialize`, `session/list`,
//!   `session/load` and `session/resume` is answered an error, and so is
//!   one of those with a field that would start a process or change the
//!   session (`hub/rights.rs`).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::mpsc;

mod agent;
mod attach;
mod echo;
mod lineup;
mod numbers;
mod refusal;
mod rights;
mod state;

use attach::{attach, detach, resend_questions};
use refusal::{Refusal, error};
use state::{Asked, Client, Kind, Request, Routed, State, Waiter};

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

/// The notification telling one client that the updates of a session that
/// follow are the whole session again, from its start (`{sessionId}`): the
/// `since` it attached with was numbered by an earlier run of the daemon,
/// or before the session was closed, and names nothing kept now.
pub const RESET: &str = "_session/reset";

/// The notification telling every attached client that a controller
/// closed the session (`{sessionId}`).
pub const CLOSED: &str = "_session/closed";

pub struct Hub {
    state: Mutex<State>,
    /// The agent connections, by wire.
    agents: Vec<mpsc::UnboundedSender<String>>,
    /// Closes the agent connections' input (`Hub::shut_down`).
    stop: tokio_util::sync::CancellationToken,
    /// The tasks reading the agent connections' output.
    readers: tokio_util::task::TaskTracker,
}

/// The text form of a JSON-RPC id (a table key).
fn key(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The key of the agent's request `id` on `wire` (each connection numbers
/// its own).
fn asked_key(wire: usize, id: &Value) -> String {
    format!("{wire}/{}", key(id))
}

fn session_of(message: &Value) -> Option<String> {
    message["params"]["sessionId"].as_str().map(str::to_owned)
}

impl Hub {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every change is a handful of inserts and removes on behalf of one
        // message: usable after a panic.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
            .filter(|c| c.access.hash == access.hash)
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
                wire: 0,
                attached: HashSet::new(),
                cancel_on_leave: HashSet::new(),
                replaying_here: HashSet::new(),
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

    /// Cancels the turns of the sessions whose leaving client asked for it,
    /// as a `session/cancel` of its own would: the prompts waiting behind
    /// the turn are answered `cancelled` too, none of them runs.
    fn send_cancels(&self, state: &mut State) {
        for (session, wire) in std::mem::take(&mut state.cancels) {
            tracing::info!(target: "maia::audit", session = %session, "cancel on disconnect");
            if wire == 0 {
                lineup::cancel(state, &session);
            }
            self.to_agent(
                wire,
                &json!({"jsonrpc": "2.0", "method": "session/cancel",
                "params": {"sessionId": session}}),
            );
        }
    }

    /// The token of each connected client (to close revoked ones).
    pub fn clients(&self) -> Vec<(u64, Access, Arc<Outbox>)> {
        let state = self.lock();
        state
            .clients
            .iter()
            .map(|(conn, c)| (*conn, c.access.clone(), c.outbox.clone()))
            .collect()
    }

    /// Whether client `conn` may send JSON-RPC batches: it negotiated v2
    /// (v1 defines none).
    pub fn takes_batches(&self, conn: u64) -> bool {
        self.lock()
            .clients
            .get(&conn)
            .is_some_and(|c| c.initialized && c.wire == 1)
    }

    /// A message from client `conn` (one JSON-RPC message; a batch's
    /// entries come one by one, `serve/batch.rs`).
    /// `scoped`: the answer to a request naming a session goes on that
    /// session's stream (Streamable HTTP: the request carried
    /// `Acp-Session-Id`), else on the connection's (a WebSocket has one
    /// stream: either is the same).
    pub fn receive(&self, conn: u64, message: Value, scoped: bool) {
        let mut state = self.lock();
        let Some(client) = state.clients.get(&conn) else {
            return;
        };
        let (access, outbox, wire) = (client.access.clone(), client.outbox.clone(), client.wire);
        let reply = |m: Value, scope: Option<&str>| {
            outbox.push(scope, m.to_string(), false);
        };
        let method = message["method"].as_str().map(str::to_owned);
        let id = message.get("id").cloned();
        let sid = session_of(&message);
        match (method, id) {
            (Some(method), Some(id)) => {
                let request = Request {
                    conn,
                    access: &access,
                    method: &method,
                    id: id.clone(),
                    scoped,
                };
                if let Err(e) = self.request(&mut state, request, message) {
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
                    if lineup::cancel_request(&mut state, conn, &asked) {
                        return;
                    }
                    let ours = state
                        .routed
                        .iter()
                        .find(|(_, r)| r.conn == conn && r.id == asked)
                        .map(|(k, r)| (k.clone(), r.wire));
                    if let Some((ours, wire)) = ours {
                        self.to_agent(
                            wire,
                            &json!({"jsonrpc": "2.0", "method": method,
                            "params": {"requestId": ours}}),
                        );
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
                    if let Some(sid) = sid.as_deref().filter(|_| wire == 0) {
                        lineup::cancel(&mut state, sid);
                    }
                }
                self.to_agent(wire, &message);
            }
            (None, Some(id)) => {
                // An answer to a question of the agent.
                let Some(asked) = state.asked.get(&asked_key(wire, &id)) else {
                    tracing::debug!(conn, "a late or unknown answer was ignored");
                    return;
                };
                if !asked.sent.contains(&conn) {
                    return;
                }
                let Some(asked) = state.asked.remove(&asked_key(wire, &id)) else {
                    return;
                };
                let outcome = message.get("result").cloned().unwrap_or(Value::Null);
                let question = asked.message["method"].clone();
                tracing::info!(target: "maia::audit", conn, token = %access.name,
                    session = %asked.session, %question, %outcome, "answer");
                self.to_agent(asked.wire, &message);
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
        request: Request<'_>,
        message: Value,
    ) -> Result<(), Refusal> {
        let Request {
            conn,
            access,
            method,
            id,
            scoped,
        } = request;
        let sid = session_of(&message);
        if method == "initialize" {
            // v2 for a client asking for it when the daemon offers it.
            let wire = usize::from(
                state.init.len() > 1
                    && message["params"]["protocolVersion"]
                        .as_u64()
                        .is_some_and(|v| v >= 2),
            );
            let mut result = state.init[wire].clone();
            result["_meta"]["maia"]["remote"] = json!({
                "role": access.role.as_str(),
                "updateSeq": true,
            });
            if let Some(client) = state.clients.get_mut(&conn) {
                client.initialized = true;
                client.wire = wire;
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
        let wire = state.clients.get(&conn).map_or(0, |c| c.wire);
        if method.starts_with("_hub/") {
            return Err(Refusal::new(-32601, &format!("method not found: {method}")));
        }
        if access.role == Role::Observer {
            rights::observer(wire, method, &message["params"])?;
        }
        if let Some(only) = &access.session {
            rights::limited(method, only)?;
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
            // v2 has no `session/load`: its `session/resume` replays from
            // the start with `replayFrom: {type: "start"}`.
            "session/load" | "session/resume" if wire == 0 || method == "session/resume" => {
                let session = sid.clone().unwrap_or_default();
                let since = attach::since(&message)?;
                let load =
                    method == "session/load" || message["params"]["replayFrom"]["type"] == "start";
                if let Some(live) = state.live.get_mut(&session) {
                    let view = &mut live.views[wire];
                    if view.opened.is_some() {
                        attach(state, conn, &session, &id, since, load, scoped);
                    } else {
                        view.waiters.push(Waiter {
                            conn,
                            id,
                            since: if load { since.or(Some(0)) } else { since },
                            scoped,
                        });
                    }
                    return Ok(());
                }
                if load && since.is_some_and(|n| n > 0) {
                    // A reconnect whose numbers name nothing kept here (the
                    // session was not live): the whole session follows.
                    attach::reset(state, conn, &session, scoped);
                }
                let live = state.live_entry(&session);
                live.attached.insert(conn, access.role);
                if let Some(c) = state.clients.get_mut(&conn) {
                    c.attached.insert(session.clone());
                    if !scoped {
                        c.replaying_here.insert(session.clone());
                    }
                }
                Kind::Open { session }
            }
            "session/close" => {
                let session = sid.clone().unwrap_or_default();
                lineup::closed(state, &session);
                // The other wire's connection holds the session too.
                if self.agents.len() > 1 && state.live.contains_key(&session) {
                    let close = json!({"jsonrpc": "2.0", "method": method,
                        "params": {"sessionId": session}});
                    self.internal(state, 1 - wire, close, Kind::Internal);
                }
                Kind::Close { session }
            }
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
                    if let Some(sid) = sid.as_deref().filter(|_| wire == 0)
                        && lineup::hold(state, conn, &id, &message, sid)
                    {
                        return Ok(());
                    }
                }
                if method == "session/delete"
                    && let Some(session) = &sid
                {
                    lineup::closed(state, session);
                }
                if method == "session/delete"
                    && self.agents.len() > 1
                    && let Some(session) = sid.as_ref().filter(|s| state.live.contains_key(*s))
                {
                    // The other wire's connection lets go of it too.
                    let close = json!({"jsonrpc": "2.0", "method": "session/close",
                        "params": {"sessionId": session}});
                    self.internal(state, 1 - wire, close, Kind::Internal);
                }
                // v2 tells every prompt as its own `user_message`; v1 has
                // no live place for it but the echo.
                if wire == 0
                    && let Some(sid) = &sid
                {
                    echo::echo(state, conn, sid, method, &message);
                }
                Kind::Plain
            }
        };
        // A v2 prompt is answered when taken, not at its turn's end: its end
        // is v2's `state_update`, not `_session/turn_ended`.
        let kind = match (kind, &sid) {
            (Kind::Plain, Some(session)) if method == "session/prompt" && wire == 0 => {
                Kind::Prompt {
                    session: session.clone(),
                }
            }
            (kind, _) => kind,
        };
        let scope = match kind {
            Kind::Plain | Kind::Prompt { .. } | Kind::Open { .. } if scoped => sid.clone(),
            _ => None,
        };
        let routed = Routed {
            conn,
            id,
            kind,
            scope,
            wire,
        };
        self.send_routed(state, message, routed);
        Ok(())
    }
}
