//! Attaching and detaching clients: a client attached to a live session
//! gets the updates after its `since`, the open's answer, then the
//! questions waiting for a controller (on the stream the open's request
//! asked for: `stream_of`); a client that leaves is detached from
//! everything, and the sessions it asked to cancel on leaving are
//! noted for the hub to cancel.

use serde_json::{Value, json};

use super::refusal::Refusal;
use super::{Client, RESET, Role, State};

/// The stream `client` is sent `sid`'s messages on: the session's, or
/// the connection's while it opens the session by a request sent without
/// `Acp-Session-Id`. ACP answers `session/load` once the replay is sent;
/// such a client (the Python SDK's) may not have the session's stream yet
/// (it opens it on the answer naming the session), and two streams flush
/// independently: on the stream its answer takes, the replay comes first.
pub(super) fn stream_of<'a>(client: &Client, sid: &'a str) -> Option<&'a str> {
    (!client.replaying_here.contains(sid)).then_some(sid)
}

/// The `_meta.maia.since` of an attach: absent (or `null`), or a sequence
/// number; anything else is invalid params, not "replay everything".
pub(super) fn since(message: &Value) -> Result<Option<u64>, Refusal> {
    match &message["params"]["_meta"]["maia"]["since"] {
        Value::Null => Ok(None),
        value => value.as_u64().map(Some).ok_or_else(|| {
            Refusal::new(
                -32602,
                &format!(
                    "`_meta.maia.since` must be a sequence number (an integer ≥ 0), not {value}"
                ),
            )
        }),
    }
}

/// Tells `conn` that what follows of `sid` is the whole session again
/// (`RESET`): its `since` named numbers kept by an earlier run of the
/// daemon, or from before the session was closed. On the session's stream
/// when the open was `scoped`, else on the connection's.
pub(super) fn reset(state: &State, conn: u64, sid: &str, scoped: bool) {
    if let Some(client) = state.clients.get(&conn) {
        client
            .outbox
            .push(scoped.then_some(sid), reset_message(sid), false);
    }
}

fn reset_message(sid: &str) -> String {
    json!({"jsonrpc": "2.0", "method": RESET, "params": {"sessionId": sid}}).to_string()
}

/// Attaches `conn` to the live, opened session `sid`: the updates after
/// `since` (all of them for a load without it; all of them after `RESET`
/// for a `since` this run did not number), then the open's answer (these
/// on the session's stream when `scoped`, else on the connection's: see
/// `stream_of`), then the questions waiting for a controller.
pub(super) fn attach(
    state: &mut State,
    conn: u64,
    sid: &str,
    id: &Value,
    since: Option<u64>,
    load: bool,
    scoped: bool,
) {
    let Some(client) = state.clients.get_mut(&conn) else {
        return;
    };
    let (role, wire) = (client.access.role, client.wire);
    client.attached.insert(sid.to_owned());
    let outbox = client.outbox.clone();
    let Some(live) = state.live.get_mut(sid) else {
        return;
    };
    let after = match (since, load) {
        (Some(n), _) => Some(n),
        (None, true) => Some(0),
        (None, false) => None,
    };
    let view = &live.views[wire];
    let stream = scoped.then_some(sid);
    let after = match after {
        // Numbers up to the base were sent before this run of the session.
        Some(n) if n > 0 && n <= view.seq.base => {
            outbox.push(stream, reset_message(sid), false);
            Some(0)
        }
        after => after,
    };
    if let Some(after) = after {
        for (_, update) in view.log.iter().filter(|(_, u)| {
            u["params"]["_meta"]["maia"]["seq"]
                .as_u64()
                .is_some_and(|s| s > after)
        }) {
            outbox.push(stream, update.to_string(), false);
        }
    }
    if wire == 1 {
        // v2: a resume is sent the session's state after its replay and
        // before its answer (idle when no turn was ever told).
        let mut update = view
            .state
            .clone()
            .unwrap_or_else(|| json!({"sessionUpdate": "state_update", "state": "idle"}));
        // A repeated state counts nothing: the turn's usage stays with it.
        if let Some(update) = update.as_object_mut() {
            update.remove("usage");
        }
        let snapshot = json!({"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": sid, "update": update}});
        outbox.push(stream, snapshot.to_string(), false);
    }
    live.attached.insert(conn, role);
    let mut result = view.opened.clone().unwrap_or(Value::Null);
    result["_meta"]["maia"]["seq"] = json!(view.seq.last);
    outbox.push(
        stream,
        json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string(),
        false,
    );
    tracing::info!(conn, session = %sid, ?since, "client attached");
    resend_questions(state, conn, sid);
}

/// The questions of `sid` still unanswered, sent to `conn` when it is a
/// controller.
pub(super) fn resend_questions(state: &mut State, conn: u64, sid: &str) {
    let Some(client) = state.clients.get(&conn) else {
        return;
    };
    if client.access.role != Role::Controller {
        return;
    }
    let (outbox, wire) = (client.outbox.clone(), client.wire);
    for asked in state
        .asked
        .values_mut()
        .filter(|a| a.session == sid && a.wire == wire)
    {
        if !asked.sent.contains(&conn) {
            asked.sent.push(conn);
            outbox.push(Some(sid), asked.message.to_string(), false);
        }
    }
}

pub(super) fn detach(state: &mut State, conn: u64) {
    let Some(client) = state.clients.remove(&conn) else {
        return;
    };
    for sid in &client.attached {
        if let Some(live) = state.live.get_mut(sid) {
            live.attached.remove(&conn);
            for view in &mut live.views {
                view.waiters.retain(|w| w.conn != conn);
            }
        }
    }
    for asked in state.asked.values_mut() {
        asked.sent.retain(|c| *c != conn);
    }
    let leaving = client.cancel_on_leave.intersection(&client.attached);
    let wire = client.wire;
    state.cancels.extend(leaving.map(|s| (s.clone(), wire)));
    client.outbox.close("disconnected");
    tracing::info!(conn, token = %client.access.name, "client disconnected");
}
