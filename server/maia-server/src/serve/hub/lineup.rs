//! Prompts that wait their turn. A v1 `session/prompt` that arrives while
//! another prompt of the same session is in flight (two controllers, a
//! phone and an editor, prompting at once) is neither refused nor sent:
//! it waits here, in arrival order, and goes to the agent when the prompt
//! before it is answered. Turns never interleave and no prompt is lost.
//!
//! A held prompt is the hub's, not the engine's queue (`_session/queue`):
//! that queue keeps text and file mentions, a prompt carries images and
//! embedded resources too, and the client waits on its request's answer
//! as ACP has it. A held prompt is told to the others (its echo) when it
//! is sent, not when it arrives. It is answered `cancelled` without
//! running by a `session/cancel` of its session (cancel stops the session,
//! not one turn of it) or by its client's `$/cancel_request`, and an error
//! when the session is closed or deleted (as the request to do so arrives:
//! the turn it ends must not hand the session to a waiting prompt). Its
//! client leaving does not drop it: a disconnect cancels nothing, unless
//! the leaving client asked for "cancel on disconnect", which is its
//! `session/cancel` (docs/remote.md).
//!
//! v2 prompts do not wait here: they are answered when taken, not at
//! their turn's end, and one sent while the session works joins that work
//! in the agent (a steer, as the v2 draft has it; docs/acp.md).

use std::collections::{HashMap, VecDeque};

use serde_json::{Value, json};

use super::{Hub, Kind, Routed, State};

/// A prompt waiting for the one in flight.
pub(super) struct Held {
    conn: u64,
    id: Value,
    message: Value,
}

/// The held prompts of each session, oldest first.
pub(super) type Lineup = HashMap<String, VecDeque<Held>>;

/// Whether a v1 prompt of `sid` is in flight.
pub(super) fn in_flight(state: &State, sid: &str) -> bool {
    state
        .routed
        .values()
        .any(|r| matches!(&r.kind, Kind::Prompt { session } if session == sid))
}

/// Holds `conn`'s prompt of `sid` when another is in flight or already
/// waiting; `false`: it goes to the agent now.
pub(super) fn hold(state: &mut State, conn: u64, id: &Value, message: &Value, sid: &str) -> bool {
    let waiting = state.lineup.get(sid).is_some_and(|held| !held.is_empty());
    if !waiting && !in_flight(state, sid) {
        return false;
    }
    tracing::info!(conn, session = %sid, "a prompt waits for the turn before it");
    state
        .lineup
        .entry(sid.to_owned())
        .or_default()
        .push_back(Held {
            conn,
            id: id.clone(),
            message: message.clone(),
        });
    true
}

fn answer(state: &State, conn: u64, sid: &str, message: Value) {
    if let Some(c) = state.clients.get(&conn) {
        c.outbox.push(Some(sid), message.to_string(), false);
    }
}

fn cancelled(id: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "cancelled"}})
}

/// `session/cancel` of `sid`: its held prompts are answered `cancelled`.
pub(super) fn cancel(state: &mut State, sid: &str) {
    for held in state.lineup.remove(sid).unwrap_or_default() {
        answer(state, held.conn, sid, cancelled(&held.id));
    }
}

/// `conn`'s `$/cancel_request` for `id`: `true` when it named a held
/// prompt, now answered `cancelled`.
pub(super) fn cancel_request(state: &mut State, conn: u64, id: &Value) -> bool {
    let found = state.lineup.iter_mut().find_map(|(sid, held)| {
        let at = held.iter().position(|h| h.conn == conn && &h.id == id)?;
        Some((sid.clone(), held.remove(at)?))
    });
    let Some((sid, held)) = found else {
        return false;
    };
    answer(state, conn, &sid, cancelled(&held.id));
    true
}

/// `sid` is being closed or deleted: its held prompts are answered an
/// error.
pub(super) fn closed(state: &mut State, sid: &str) {
    for held in state.lineup.remove(sid).unwrap_or_default() {
        let refused = super::error(
            &held.id,
            -32002,
            &format!("session `{sid}` was closed or deleted before this prompt's turn"),
            json!({"reason": "closed"}),
        );
        answer(state, held.conn, sid, refused);
    }
}

impl Hub {
    /// A prompt of `sid` was answered: the oldest held one goes to the
    /// agent, told to the others first.
    pub(super) fn release(&self, state: &mut State, sid: &str) {
        let closing = state
            .routed
            .values()
            .any(|r| matches!(&r.kind, Kind::Close { session } if session == sid));
        if closing {
            // Prompts held after the close was asked (another connection's
            // close may reach the hub before them).
            return closed(state, sid);
        }
        let Some(held) = state.lineup.get_mut(sid).and_then(VecDeque::pop_front) else {
            return;
        };
        if state.lineup.get(sid).is_some_and(VecDeque::is_empty) {
            state.lineup.remove(sid);
        }
        let Held { conn, id, message } = held;
        tracing::info!(conn, session = %sid, "a held prompt is sent");
        super::echo::echo(state, conn, sid, "session/prompt", &message);
        let routed = Routed {
            conn,
            id,
            kind: Kind::Prompt {
                session: sid.to_owned(),
            },
            scope: Some(sid.to_owned()),
            wire: 0,
        };
        self.send_routed(state, message, routed);
    }
}
