//! One live session served by two connections of the front door: `maia
//! serve --protocol-v2` runs one agent connection per protocol version on
//! one engine (`crate::serve::hub` routes each client to the connection of
//! its version). The connection that opens a session leaves it here
//! (`Shared`), and the hub asks the other one to serve it too
//! (`_hub/attach`), in its own version.
//!
//! The engine never learns there are two: the opener's pump hands a copy
//! of every event to the other connection's pump (`Tee`). A permission
//! question becomes one question on each connection; the first answer is
//! the engine's, and the other question is withdrawn (its reply channel
//! closes, so its connection gives the request up). Both connections hold
//! the session's handle: the session ends when both closed it.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use maia_core::{Event, PermissionReply, PermissionRequest, SessionHandle, TurnId};
use maia_rpc::{ErrorCode, Id, RpcError};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::forward::Forwarder;
use super::{Agent, SessionEntry, SharedChoices, Slot, convert, unknown_session};

/// The hub's request asking a connection to serve a session the other
/// connection opened: `{sessionId}`, answered as a `session/load` (v1) or
/// a `session/resume` (v2) after the replay the opener sent.
pub const METHOD: &str = "_hub/attach";

/// The sessions one connection opened and the other has not attached yet.
#[derive(Default)]
pub struct Shared {
    waiting: Mutex<HashMap<String, Waiting>>,
}

/// What the other connection needs to serve a live session.
pub(super) struct Waiting {
    pub(super) handle: SessionHandle,
    /// The copies of the session's events, from its opening on.
    pub(super) events: mpsc::UnboundedReceiver<Event>,
    /// The history the opener replayed (a load's).
    pub(super) replay: Vec<Event>,
    pub(super) choices: SharedChoices,
    pub(super) cwd: PathBuf,
    pub(super) book: Prompts,
}

/// The prompts v1 clients sent, by turn, as v1 content (JSON): a v2 client
/// is shown them in the turn's `user_message`. Written under its lock while
/// the turn is claimed, so the turn's events find it.
pub(super) type Prompts = Arc<Mutex<BTreeMap<TurnId, Value>>>;

/// Prompts kept for the other connection, at most (the oldest go first:
/// a command's turn saves no message to show it with).
const BOOK: usize = 16;

/// A forwarder's link to the other connection serving its session.
pub(super) struct Link {
    /// The opener's: copies the events to the other connection.
    pub(super) tee: Option<Tee>,
    pub(super) book: Prompts,
}

/// Keeps the content of the v1 prompt of `turn` for the other connection.
pub(super) fn note_prompt(book: &mut BTreeMap<TurnId, Value>, turn: TurnId, content: Value) {
    book.insert(turn, content);
    while book.len() > BOOK {
        book.pop_first();
    }
}

impl Forwarder {
    /// The content of `turn`'s prompt, when a v1 client of the other
    /// connection sent it, as v2 content.
    pub(in crate::acp) fn peer_prompt(
        &self,
        turn: TurnId,
    ) -> Option<Vec<agent_client_protocol_schema::v2::ContentBlock>> {
        let link = self.link.as_ref()?;
        let content = super::forward::lock(&link.book).remove(&turn)?;
        serde_json::from_value(content).ok()
    }
}

impl Shared {
    pub fn new() -> Arc<Shared> {
        Arc::new(Shared::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        // Every change is one insert or remove.
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Leaves `session` for the other connection to attach.
    pub(super) fn leave(&self, session: &str, waiting: Waiting) {
        self.lock().insert(session.to_owned(), waiting);
    }
}

/// A tee for a session shared with the other connection, and what the
/// other connection reads of it.
pub(super) fn tee() -> (Tee, mpsc::UnboundedReceiver<Event>) {
    let (tx, events) = mpsc::unbounded_channel();
    (Tee(tx), events)
}

/// The opener's side: copies each event for the other connection.
pub(super) struct Tee(mpsc::UnboundedSender<Event>);

impl Tee {
    /// Sends a copy of `event` to the other connection and gives it back;
    /// a permission question is split in two, answered once.
    pub(super) fn split(&self, event: Event) -> Event {
        let Event::Permission(request) = event else {
            if let Some(copy) = event.try_clone() {
                let _ = self.0.send(copy);
            }
            return event;
        };
        let (ours, our_answer) = oneshot::channel();
        let (theirs, their_answer) = oneshot::channel();
        let twin = PermissionRequest {
            tool_call: request.tool_call.clone(),
            options: request.options.clone(),
            reply: theirs,
        };
        if self.0.send(Event::Permission(twin)).is_err() {
            return Event::Permission(request);
        }
        let own = PermissionRequest {
            tool_call: request.tool_call,
            options: request.options,
            reply: ours,
        };
        tokio::spawn(first_answer(request.reply, our_answer, their_answer));
        Event::Permission(own)
    }
}

/// Gives the engine the first of two answers; the other question's reply
/// channel is dropped, which withdraws it. When the engine stops waiting
/// (the turn was cancelled), both questions stay until their turn's end
/// gives them up, as on one connection.
async fn first_answer(
    mut engine: oneshot::Sender<PermissionReply>,
    ours: oneshot::Receiver<PermissionReply>,
    theirs: oneshot::Receiver<PermissionReply>,
) {
    let (mut ours, mut theirs) = (Some(ours), Some(theirs));
    loop {
        let answer = tokio::select! {
            () = engine.closed() => {
                let wait = |r: Option<oneshot::Receiver<PermissionReply>>| async move {
                    if let Some(r) = r { let _ = r.await; }
                };
                tokio::join!(wait(ours), wait(theirs));
                return;
            }
            answer = answer_of(&mut ours), if ours.is_some() => {
                ours = None;
                answer
            }
            answer = answer_of(&mut theirs), if theirs.is_some() => {
                theirs = None;
                answer
            }
        };
        match answer {
            Ok(reply) => {
                let _ = engine.send(reply);
                return;
            }
            // That connection is gone: the other may still answer.
            Err(_) if ours.is_some() || theirs.is_some() => continue,
            Err(_) => return,
        }
    }
}

/// The answer on `side`, or never when it has none.
async fn answer_of(
    side: &mut Option<oneshot::Receiver<PermissionReply>>,
) -> Result<PermissionReply, oneshot::error::RecvError> {
    match side.as_mut() {
        Some(receiver) => receiver.await,
        None => std::future::pending().await,
    }
}

impl Agent {
    /// `_hub/attach {sessionId}`: serves a session the other connection
    /// opened, in this connection's version: its replay, then the answer
    /// (a load's or a v2 resume's), then its events as they come.
    pub(super) fn attach_shared(self: &Arc<Self>, id: Id, params: &Value) {
        let waiting = match (&self.shared, params["sessionId"].as_str()) {
            (Some(shared), Some(sid)) => shared.lock().remove(sid).map(|w| (sid.to_owned(), w)),
            (None, _) => {
                let error = RpcError::new(ErrorCode::MethodNotFound, "method not found");
                return self.conn.respond(id, Err(error));
            }
            (Some(_), None) => None,
        };
        let Some((sid, waiting)) = waiting else {
            let sid = params["sessionId"].as_str().unwrap_or_default();
            return self.conn.respond(id, Err(unknown_session(sid)));
        };
        let Waiting {
            handle,
            events,
            replay,
            choices,
            cwd,
            book,
        } = waiting;
        let caps = self.client_caps().unwrap_or_default();
        let show_thinking = choices.lock().show_thinking;
        for event in replay {
            if show_thinking || !matches!(event, Event::Thought { .. }) {
                self.forward(&sid, event, &caps);
            }
        }
        let state = handle.state();
        let options = choices.lock().options(&state);
        let how = super::open::Open::Load(sid.clone());
        let modes = convert::modes(state.mode, &handle.modes());
        let mut result = how.response(&sid, modes, options);
        if self.wire.is_v2() {
            result = super::v2::open_response(result, true);
        }
        let link = Link {
            tee: None,
            book: book.clone(),
        };
        let forwarder = Forwarder::new(
            self,
            (&sid, &handle, cwd),
            (caps, choices.clone()),
            Default::default(),
            Some(link),
        );
        let done = tokio_util::sync::CancellationToken::new();
        let entry = Arc::new(SessionEntry {
            handle,
            pending: forwarder.pending.clone(),
            choices,
            done: done.clone(),
            v2: forwarder.v2.clone(),
            book: Some(book),
        });
        self.lock_sessions().insert(sid, Slot::Open(entry));
        self.conn.respond(id, result);
        let pump = tokio::spawn(async move {
            let _done = done.drop_guard();
            forwarder.run(events).await;
        });
        if let Ok(mut pumps) = self.pumps.lock() {
            pumps.retain(|p| !p.is_finished());
            pumps.push(pump);
        }
    }
}

/// The notification telling a v1 client that a turn it did not prompt
/// ended (another connection's client prompted it, or the queue started
/// it), as the hub tells it of the ones it did.
const TURN_ENDED: &str = "_session/turn_ended";

/// Tells the end of a turn this connection did not prompt.
pub(super) fn turn_ended(
    conn: &maia_rpc::Connection,
    session_id: &str,
    stop: maia_core::StopReason,
) {
    let stop = serde_json::to_value(convert::stop_reason(stop)).unwrap_or(Value::Null);
    conn.notify(
        TURN_ENDED,
        serde_json::json!({"sessionId": session_id, "stopReason": stop}),
    );
}

/// A question answered on the other connection: no longer asked here
/// (its request was dropped), and a v2 session runs again, unless its
/// turn ended meanwhile.
pub(super) fn withdrawn(
    conn: &maia_rpc::Connection,
    session_id: &str,
    asked: &Mutex<Vec<String>>,
    key: Option<String>,
    v2: bool,
) {
    let mut asked = super::forward::lock(asked);
    let Some(key) = key else { return };
    let before = asked.len();
    asked.retain(|k| *k != key);
    // Under the lock: a turn's end (which empties it) is told after this.
    if v2 && asked.len() < before {
        super::v2::turn::running(conn, session_id);
    }
}

#[cfg(test)]
mod tests;
