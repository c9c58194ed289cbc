//! The forwarder pump: one session's engine events, in order, turned into
//! `session/update`s and client requests, and the prompt's answer written
//! when the turn's last event passes (the request kept under the turn's id,
//! which `TurnStarted` tells).

use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1::{
    ClientCapabilities, ConfigOptionUpdate, CurrentModeUpdate, PromptResponse, SessionUpdate,
};
use maia_core::{Event, StateReader, TurnId};
use maia_rpc::{Connection, Id};
use tokio::sync::mpsc;

use super::{Agent, SharedChoices, convert, reason, to_value};

/// The `session/prompt` requests waiting for their turn's end, by the
/// turn's id ([`maia_core::SessionHandle::prompt`]'s answer).
pub(super) type Pending = Arc<Mutex<std::collections::BTreeMap<TurnId, Id>>>;

impl Agent {
    pub(super) fn send_update(&self, session_id: &str, update: SessionUpdate) {
        if self.wire.is_v2() {
            return super::v2::turn::send(&self.conn, session_id, update);
        }
        match convert::notification(session_id, update) {
            Ok(params) => self.conn.notify("session/update", params),
            Err(e) => tracing::error!("cannot encode an update: {e}"),
        }
    }

    /// Sends a replayed event (`session/load`).
    pub(super) fn forward(&self, session_id: &str, event: Event, caps: &ClientCapabilities) {
        if let Event::Subagent(event) = event {
            for (id, update) in super::subagents::updates(session_id, event, caps, (false, true)) {
                self.send_update(&id, update);
            }
            return;
        }
        // A replayed user message: the cursor before it follows it.
        let cursor = match &event {
            Event::UserMessage { message_id, .. } => convert::cursor_update(message_id, caps),
            _ => None,
        };
        if let Some(update) = convert::session_update(event, caps) {
            self.send_update(session_id, update);
        }
        if let Some(cursor) = cursor {
            self.send_update(session_id, cursor);
        }
    }
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every change is one push, insert, remove or retain: a panic cannot
    // leave it half-made.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Forwards one session's engine events to the client, in order, and
/// answers its pending prompt when the turn's last event passes.
pub(super) struct Forwarder {
    pub(super) conn: Connection,
    pub(super) session_id: String,
    pub(super) pending: Pending,
    pub(super) caps: ClientCapabilities,
    pub(super) choices: SharedChoices,
    /// The session's state (its model and mode), as the session writes it.
    pub(super) state: StateReader,
    /// The turn whose events pass now (its `TurnStarted` passed).
    pub(super) turn: Mutex<Option<TurnId>>,
    /// The ids of this turn's permission requests not answered yet: given
    /// up (`$/cancel_request`) when the turn ends without their answer.
    pub(super) asked: Arc<Mutex<Vec<String>>>,
    /// The running turn's usage, once the engine sent it.
    pub(super) usage: Mutex<Option<maia_llm::Usage>>,
    /// The running turn's prompt id, once saved (`_meta.maia.userMessageId`
    /// of the prompt's answer).
    pub(super) user_message: Mutex<Option<String>>,
    /// What a v2 client's session keeps besides (`None` on v1).
    pub(super) v2: Option<Arc<super::v2::turn::SessionV2>>,
    /// The texts kept through "Review in editor", for the session's writes.
    pub(super) reviewed: super::reviewed::Reviewed,
    /// Another connection of the daemon serves the session too (`mirror`):
    /// a question it answered first is withdrawn here, and (v1) the end of
    /// a turn this connection did not prompt is told with
    /// `_session/turn_ended`.
    pub(super) link: Option<super::mirror::Link>,
}

impl Forwarder {
    /// The forwarder of session `session_id` (`handle`) on `agent`'s
    /// connection, with nothing pending yet.
    pub(super) fn new(
        agent: &Agent,
        (session_id, handle, cwd): (&str, &maia_core::SessionHandle, std::path::PathBuf),
        (caps, choices): (ClientCapabilities, SharedChoices),
        reviewed: super::reviewed::Reviewed,
        link: Option<super::mirror::Link>,
    ) -> Self {
        Forwarder {
            conn: agent.conn.clone(),
            session_id: session_id.to_owned(),
            pending: Pending::default(),
            caps,
            choices,
            state: handle.state_reader(),
            turn: Default::default(),
            asked: Default::default(),
            usage: Default::default(),
            user_message: Default::default(),
            v2: agent
                .wire
                .is_v2()
                .then(|| super::v2::turn::SessionV2::new(cwd)),
            reviewed,
            link,
        }
    }

    pub(super) async fn run(self, mut events: mpsc::UnboundedReceiver<Event>) {
        while let Some(event) = events.recv().await {
            maia_otel::observe(&self.session_id, &event);
            self.forward(self.split(event));
        }
        maia_otel::session_closed(&self.session_id);
        // The engine is gone: never leave a prompt unanswered.
        let waiting = std::mem::take(&mut *lock(&self.pending));
        for id in waiting.into_values() {
            if self.v2.is_some() {
                // Never taken into the history: there is no message to name.
                self.conn.respond(id, Err(super::v2::turn::not_taken()));
                continue;
            }
            self.conn.respond(
                id,
                to_value(&PromptResponse::new(
                    agent_client_protocol_schema::v1::StopReason::Cancelled,
                )),
            );
        }
    }

    /// `event`, after its copy went to the other connection (if any).
    pub(super) fn split(&self, event: Event) -> Event {
        match self.link.as_ref().and_then(|link| link.tee.as_ref()) {
            Some(tee) => tee.split(event),
            None => event,
        }
    }

    pub(super) fn notify(&self, update: SessionUpdate) {
        self.notify_as(&self.session_id, update);
    }

    /// Sends `update` as the session `session_id`'s (a child's, for a
    /// subagent), in the connection's protocol version.
    fn notify_as(&self, session_id: &str, update: SessionUpdate) {
        if self.v2.is_some() {
            return super::v2::turn::send(&self.conn, session_id, update);
        }
        match convert::notification(session_id, update) {
            Ok(params) => self.conn.notify("session/update", params),
            Err(e) => tracing::error!("cannot encode an update: {e}"),
        }
    }

    /// Sends what `event` means to the client; never waits.
    pub(super) fn forward(&self, event: Event) {
        let event = match &self.v2 {
            Some(v2) => match self.forward_v2(v2, event) {
                Some(event) => event,
                None => return,
            },
            None => event,
        };
        match event {
            Event::TurnStarted(turn) => *lock(&self.turn) = Some(turn),
            Event::TurnEnded(stop) => {
                // No question of an ended turn is still needed; cancelled
                // before the prompt's answer, as ACP's cascade example does.
                let unanswered = std::mem::take(&mut *lock(&self.asked));
                for id in unanswered {
                    self.conn.give_up(&id);
                }
                let usage = lock(&self.usage).take().map(|u| convert::turn_usage(&u));
                let saved = lock(&self.user_message).take();
                let turn = lock(&self.turn).take();
                let id = turn.and_then(|turn| lock(&self.pending).remove(&turn));
                if let Some(id) = id {
                    let response = PromptResponse::new(convert::stop_reason(stop))
                        .meta(convert::prompt_meta(saved, usage));
                    self.conn.respond(id, to_value(&response));
                } else if self.link.is_some() {
                    super::mirror::turn_ended(&self.conn, &self.session_id, stop);
                }
            }
            Event::TurnUsage(usage) => {
                *lock(&self.usage) = Some(usage);
            }
            Event::UserMessageSaved { message_id } => {
                // Saved: a fork before it can be made from now on.
                if let Some(cursor) = convert::cursor_update(&message_id, &self.caps) {
                    self.notify(cursor);
                }
                *lock(&self.user_message) = Some(message_id);
            }
            Event::Permission(mut request) => {
                // "Reject and tell MAIA why", for clients with forms.
                let offered = request.options.clone();
                if reason::supported(&self.caps) {
                    request.options = reason::with_reason_option(&offered);
                }
                // Queued now, in order with this turn's other messages (so
                // never after its response); answered on a task.
                let params = match &self.v2 {
                    Some(v2) => {
                        super::v2::turn::requires_action(&self.conn, &self.session_id);
                        super::v2::update::permission_request(&self.session_id, &request, &v2.cwd)
                    }
                    None => convert::permission_request(&self.session_id, &request),
                };
                let answer = match params {
                    Ok(params) => Some(
                        self.conn
                            .start_request("session/request_permission", params),
                    ),
                    Err(e) => {
                        tracing::error!("cannot encode a permission request: {e}");
                        None
                    }
                };
                let (conn, session_id) = (self.conn.clone(), self.session_id.clone());
                let asked = self.asked.clone();
                let v2 = self.v2.is_some();
                let key = answer.as_ref().and_then(|a| a.id()).map(str::to_owned);
                if let Some(key) = &key {
                    lock(&asked).push(key.clone());
                }
                let reviewed = self.reviewed.clone();
                let shared = self.link.is_some();
                tokio::spawn(async move {
                    let (reply, raw) = match answer {
                        Some(answer) => {
                            let answer = if shared {
                                tokio::select! {
                                    answer = answer => answer,
                                    () = request.reply.closed() => {
                                        // Answered on the other connection:
                                        // dropping the request withdraws it.
                                        super::mirror::withdrawn(&conn, &session_id, &asked, key, v2);
                                        return;
                                    }
                                }
                            } else {
                                answer.await
                            };
                            let raw = answer.as_ref().ok().cloned();
                            (convert::permission_reply(answer), raw)
                        }
                        None => (maia_core::PermissionReply::Cancelled, None),
                    };
                    if let Some(key) = key {
                        lock(&asked).retain(|k| *k != key);
                    }
                    let view = &request.tool_call;
                    let reply = reason::resolve(
                        reply,
                        &offered,
                        (&conn, &session_id, &view.id, &view.title),
                    )
                    .await;
                    if let Some(raw) = &raw {
                        reviewed.note(raw, &reply, &offered, view);
                    }
                    maia_otel::decision(&view.name, &reply, &offered);
                    if v2 && !matches!(reply, maia_core::PermissionReply::Cancelled) {
                        super::v2::turn::running(&conn, &session_id);
                    }
                    let _ = request.reply.send(reply);
                });
            }
            Event::QueueChanged => super::queue::notify_changed(&self.conn, &self.session_id),
            Event::QueueTurn {
                turn_id,
                queued_id,
                status,
            } => super::queue::notify_turn(
                &self.conn,
                &self.session_id,
                (turn_id, queued_id, status),
            ),
            Event::ModeChanged(mode) => {
                // The session's state, with the mode this event tells.
                let mut state = self.state.get();
                state.mode = mode;
                let options = self.choices.lock().options(&state);
                self.notify(SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(
                    mode.id(),
                )));
                self.notify(SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(
                    options,
                )));
            }
            Event::Subagent(event) => {
                let thinking = self.choices.lock().show_thinking;
                let sent = super::subagents::updates(
                    &self.session_id,
                    event,
                    &self.caps,
                    (true, thinking),
                );
                for (id, update) in sent {
                    self.notify_as(&id, update);
                }
            }
            Event::Thought { .. } if !self.choices.lock().show_thinking => {}
            Event::ModelChanged(name) => {
                let mut state = self.state.get();
                let options = {
                    let mut choices = self.choices.lock();
                    if !choices.models.contains(&name) {
                        choices.models.push(name.clone());
                    }
                    state.model = Some(name);
                    choices.options(&state)
                };
                self.notify(SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(
                    options,
                )));
            }
            other => {
                if let Some(update) = convert::session_update(other, &self.caps) {
                    self.notify(update);
                }
            }
        }
    }
}
