//! The agent's side of the hub: its updates numbered, kept and sent to
//! every attached client, its questions sent to every controller, and the
//! answers to the requests forwarded for clients routed back (attaching a
//! client when a session opens for it).

use serde_json::{Value, json};

use super::Asked;
use super::{
    CLOSED, ECHOED, Hub, Kind, LOG_BYTES, LOG_LIMIT, Role, State, TURN_ENDED, attach, detach,
    error, key, resend_questions, session_of,
};

impl Hub {
    /// A message from the agent.
    pub(super) fn on_agent(&self, message: Value) {
        let mut state = self.lock();
        self.handle(&mut state, message);
        // Clients dropped for falling behind leave like any other.
        self.send_cancels(&mut state);
    }

    fn handle(&self, state: &mut State, message: Value) {
        let method = message["method"].as_str().map(str::to_owned);
        let id = message.get("id").cloned();
        match (method, id) {
            (None, Some(id)) => self.answer(state, &key(&id), message),
            (Some(method), None) if method == maia_rpc::CANCEL_REQUEST => {
                let asked = key(&message["params"]["requestId"]);
                if let Some(asked) = state.asked.remove(&asked) {
                    for conn in &asked.sent {
                        if let Some(c) = state.clients.get(conn) {
                            c.outbox
                                .push(Some(&asked.session), message.to_string(), false);
                        }
                    }
                }
            }
            (Some(_), None) => match session_of(&message) {
                Some(sid) => publish(state, &sid, message),
                None => {
                    let text = message.to_string();
                    for c in state.clients.values().filter(|c| c.initialized) {
                        c.outbox.push(None, text.clone(), false);
                    }
                }
            },
            (Some(_), Some(id)) => {
                let Some(sid) = session_of(&message).filter(|s| state.live.contains_key(s)) else {
                    self.to_agent(&error(
                        &id,
                        -32603,
                        "no client can answer this",
                        Value::Null,
                    ));
                    return;
                };
                let controllers = controllers(state, &sid);
                let text = message.to_string();
                for conn in &controllers {
                    if let Some(c) = state.clients.get(conn) {
                        c.outbox.push(Some(&sid), text.clone(), false);
                    }
                }
                state.asked.insert(
                    key(&id),
                    Asked {
                        session: sid,
                        message,
                        sent: controllers,
                    },
                );
            }
            (None, None) => tracing::error!("the agent wrote a message that is not JSON-RPC"),
        }
    }

    /// The agent's answer to the forwarded request `ours`.
    fn answer(&self, state: &mut State, ours: &str, mut message: Value) {
        let Some(routed) = state.routed.remove(ours) else {
            return;
        };
        message["id"] = routed.id.clone();
        let ok = message.get("result").is_some();
        match routed.kind {
            Kind::Plain => {}
            Kind::Prompt { session } => {
                if let Some(c) = state.clients.get(&routed.conn) {
                    c.outbox
                        .push(routed.scope.as_deref(), message.to_string(), false);
                }
                let ended = json!({"jsonrpc": "2.0", "method": TURN_ENDED, "params": {
                    "sessionId": session,
                    "stopReason": message["result"]["stopReason"],
                    "error": message.get("error"),
                }});
                publish(state, &session, ended);
                return;
            }
            Kind::New { cancel_on_leave } => {
                if let Some(sid) = message["result"]["sessionId"].as_str() {
                    if cancel_on_leave && let Some(c) = state.clients.get_mut(&routed.conn) {
                        c.cancel_on_leave.insert(sid.to_owned());
                    }
                    let live = state.live.entry(sid.to_owned()).or_default();
                    live.opened = Some(message["result"].clone());
                    let role = state.clients.get(&routed.conn).map(|c| c.access.role);
                    if let Some(role) = role {
                        live.attached.insert(routed.conn, role);
                    }
                    if let Some(c) = state.clients.get_mut(&routed.conn) {
                        c.attached.insert(sid.to_owned());
                    }
                }
            }
            Kind::Open { session } => {
                let waiters = match state.live.get_mut(&session) {
                    Some(live) if ok => {
                        live.opened = Some(message["result"].clone());
                        std::mem::take(&mut live.waiters)
                    }
                    Some(live) => {
                        let waiters = std::mem::take(&mut live.waiters);
                        state.live.remove(&session);
                        for c in state.clients.values_mut() {
                            c.attached.remove(&session);
                        }
                        for (conn, id, _) in &waiters {
                            let mut refused = message.clone();
                            refused["id"] = id.clone();
                            if let Some(c) = state.clients.get(conn) {
                                c.outbox.push(None, refused.to_string(), false);
                            }
                        }
                        Vec::new()
                    }
                    None => Vec::new(),
                };
                if let Some(c) = state.clients.get(&routed.conn) {
                    c.outbox.push(None, message.to_string(), false);
                }
                if ok {
                    resend_questions(state, routed.conn, &session);
                }
                for (conn, id, since) in waiters {
                    attach(state, conn, &session, &id, since, since.is_some());
                }
                return;
            }
            Kind::Close { session } => {
                if ok {
                    // Every client attached is told, the closer included.
                    let closed = json!({"jsonrpc": "2.0", "method": CLOSED,
                        "params": {"sessionId": session}});
                    publish(state, &session, closed);
                    state.live.remove(&session);
                    for c in state.clients.values_mut() {
                        c.attached.remove(&session);
                    }
                }
            }
        }
        if let Some(c) = state.clients.get(&routed.conn) {
            c.outbox
                .push(routed.scope.as_deref(), message.to_string(), false);
        }
    }
}

/// Numbers a message of the live session `sid`, keeps it for replay and
/// sends it to every client attached; a client that fell behind is dropped.
fn publish(state: &mut State, sid: &str, message: Value) {
    publish_as(state, sid, message, None);
}

/// `publish`; with `echo_of`, a client's own words told to the others
/// (`echo`): that client gets `ECHOED` with the number instead, so every
/// client's numbers stay contiguous.
pub(super) fn publish_as(state: &mut State, sid: &str, mut message: Value, echo_of: Option<u64>) {
    let Some(live) = state.live.get_mut(sid) else {
        tracing::debug!(session = %sid, "an update of a session nobody opened");
        return;
    };
    live.seq += 1;
    let placeholder = echo_of.map(|_| {
        json!({"jsonrpc": "2.0", "method": ECHOED,
            "params": {"sessionId": sid, "_meta": {"maia": {"seq": live.seq}}}})
        .to_string()
    });
    message["params"]["_meta"]["maia"]["seq"] = json!(live.seq);
    let text = message.to_string();
    live.log_bytes += text.len();
    live.log.push_back((text.len(), message));
    while live.log.len() > LOG_LIMIT || live.log_bytes > LOG_BYTES {
        match live.log.pop_front() {
            Some((size, _)) => live.log_bytes -= size,
            None => break,
        }
    }
    let attached: Vec<u64> = live.attached.keys().copied().collect();
    for conn in attached {
        let sent = match &placeholder {
            Some(own) if Some(conn) == echo_of => own,
            _ => &text,
        };
        let dropped = state
            .clients
            .get(&conn)
            .is_some_and(|c| !c.outbox.push(Some(sid), sent.clone(), true));
        if dropped {
            tracing::warn!(conn, session = %sid, "a client fell behind; dropped");
            detach(state, conn);
        }
    }
}

fn controllers(state: &State, sid: &str) -> Vec<u64> {
    state.live.get(sid).map_or_else(Vec::new, |live| {
        live.attached
            .iter()
            .filter(|(_, role)| **role == Role::Controller)
            .map(|(conn, _)| *conn)
            .collect()
    })
}
