//! A v2 session's prompt lifecycle: `session/prompt` is answered once the
//! prompt is in the history (its `messageId`), followed by the
//! `user_message` and `state_update: running`; the turn's end is
//! `state_update: idle` with its stop reason; a permission question is
//! framed by `requires_action` and `running`. A turn no prompt started (the
//! queue's next prompt) says the same, with no request to answer; what
//! comes between turns (a background command ending) is sent as it
//! happens, with the session idle. A command's terminal and file states
//! are `terminal`'s.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use agent_client_protocol_schema::v2::{
    ContentBlock, IdleStateUpdate, PromptRequest, PromptResponse, RequiresActionStateUpdate,
    RunningStateUpdate, SessionUpdate, StateUpdate, UserMessage,
};
use maia_core::{Event, SteerOutcome, TurnId};
use maia_rpc::{Connection, Id, RpcError};

use super::super::forward::{Forwarder, lock};
use super::super::{Agent, unknown_session};

/// Turns whose user message no request claimed, kept at most.
const UNCLAIMED: usize = 16;

/// What a v2 session keeps besides v1's.
pub(in crate::acp) struct SessionV2 {
    /// The session's folder (a command's subject names it).
    pub(in crate::acp) cwd: PathBuf,
    /// The content of each prompt not yet in the history, by its turn.
    prompts: Mutex<BTreeMap<TurnId, Vec<ContentBlock>>>,
    /// The user message of the last turns no request was waiting for (a
    /// steered prompt learns the turn it started after the turn may have
    /// saved it). Taken under the forwarder's `pending` lock.
    unclaimed: Mutex<BTreeMap<TurnId, String>>,
    /// The tool calls showing a command's terminal.
    terminals: super::terminal::Terminals,
}

impl SessionV2 {
    pub(in crate::acp) fn new(cwd: PathBuf) -> std::sync::Arc<Self> {
        std::sync::Arc::new(SessionV2 {
            cwd,
            prompts: Mutex::new(BTreeMap::new()),
            unclaimed: Mutex::new(BTreeMap::new()),
            terminals: super::terminal::Terminals::default(),
        })
    }
}

/// Sends `update` (v1) to a v2 client as its v2 update(s).
pub(in crate::acp) fn send(
    conn: &Connection,
    session_id: &str,
    update: agent_client_protocol_schema::v1::SessionUpdate,
) {
    for update in super::update::updates(update) {
        send_v2(conn, session_id, update);
    }
}

fn send_v2(conn: &Connection, session_id: &str, update: SessionUpdate) {
    match super::update::notification(session_id, update) {
        Ok(params) => conn.notify("session/update", params),
        Err(e) => tracing::error!("cannot encode an update: {e}"),
    }
}

fn state(conn: &Connection, session_id: &str, state: StateUpdate) {
    send_v2(conn, session_id, SessionUpdate::StateUpdate(state));
}

/// `state_update: running` (after a permission question was answered).
pub(in crate::acp) fn running(conn: &Connection, session_id: &str) {
    state(
        conn,
        session_id,
        StateUpdate::Running(RunningStateUpdate::new()),
    );
}

/// The state snapshot a resume sends after its replay and before its
/// answer (the draft's MUST): `running` while a turn runs, else `idle`
/// (without a stop reason: it ends nothing).
pub(in crate::acp) fn snapshot(conn: &Connection, session_id: &str, busy: bool) {
    let update = match busy {
        true => StateUpdate::Running(RunningStateUpdate::new()),
        false => StateUpdate::Idle(IdleStateUpdate::new()),
    };
    state(conn, session_id, update);
}

/// `state_update: requires_action` (a permission question is open).
pub(in crate::acp) fn requires_action(conn: &Connection, session_id: &str) {
    let update = StateUpdate::RequiresAction(RequiresActionStateUpdate::new());
    state(conn, session_id, update);
}

/// The answer to a v2 prompt whose session ended before taking it.
pub(in crate::acp) fn not_taken() -> RpcError {
    RpcError::new(
        maia_rpc::ErrorCode::InternalError,
        "the session ended before the prompt was taken",
    )
}

impl Agent {
    /// v2's `session/prompt`: the turn is claimed now, the request answered
    /// when its prompt is in the history. While the session works, the
    /// prompt contributes to that work, as the draft has it: it is steered
    /// in (`steered`).
    pub(in crate::acp) fn prompt_v2(&self, id: &Id, req: PromptRequest) -> Result<(), RpcError> {
        let session_id = req.session_id.0.to_string();
        let entry = self
            .entry(&session_id)
            .ok_or_else(|| unknown_session(&session_id))?;
        let Some(v2) = entry.v2.clone() else {
            return Err(unknown_session(&session_id));
        };
        let blocks: Vec<agent_client_protocol_schema::v1::ContentBlock> =
            super::reread(&req.prompt, "this prompt content")?;
        let parts = super::super::prompt::prompt_parts(blocks)?;
        let mut pending = lock(&entry.pending);
        maia_otel::prompt(&session_id, req.meta.as_ref(), &parts);
        let Ok(turn) = entry.handle.prompt(parts) else {
            maia_otel::prompt_refused(&session_id);
            drop(pending);
            return self.steered(id, req, &entry);
        };
        lock(&v2.prompts).insert(turn, req.prompt);
        pending.insert(turn, id.clone());
        Ok(())
    }

    /// A v2 prompt sent while the session works joins that work as a
    /// steer: the running turn takes it at its next tool-round boundary
    /// (answered then, with the id of the user message it became), or it
    /// starts the next turn (answered when that turn saves it). A turn
    /// cancelled before taking it fails it: the request is answered an
    /// error and the model never sees it.
    fn steered(
        &self,
        id: &Id,
        req: PromptRequest,
        entry: &super::super::SessionEntry,
    ) -> Result<(), RpcError> {
        let Some(v2) = entry.v2.clone() else {
            return Err(unknown_session(&req.session_id.0));
        };
        let blocks: Vec<agent_client_protocol_schema::v1::ContentBlock> =
            super::reread(&req.prompt, "this prompt content")?;
        let parts = super::super::prompt::prompt_parts(blocks)?;
        let steer = entry.handle.steer(parts, false);
        let (conn, pending, id) = (self.conn.clone(), entry.pending.clone(), id.clone());
        tracing::info!(session = %req.session_id.0, "a v2 prompt joins the running work");
        tokio::spawn(async move {
            let message_id = match steer.await {
                SteerOutcome::Injected { message_id } => message_id,
                SteerOutcome::StartedNewTurn { turn } => {
                    let mut pending = lock(&pending);
                    match lock(&v2.unclaimed).remove(&turn) {
                        Some(message_id) => message_id,
                        None => {
                            lock(&v2.prompts).insert(turn, req.prompt);
                            pending.insert(turn, id);
                            return;
                        }
                    }
                }
                SteerOutcome::PromptRequired => return conn.respond(id, Err(not_taken())),
                SteerOutcome::Failed(reason) => {
                    let error = RpcError::new(maia_rpc::ErrorCode::InternalError, reason);
                    return conn.respond(id, Err(error));
                }
            };
            let response = PromptResponse::new(message_id);
            conn.respond(id, super::super::to_value(&response));
        });
        Ok(())
    }
}

impl Forwarder {
    /// The turn events a v2 client is told differently; `Some` gives the
    /// event back to the v1 path (whose updates `notify` turns into v2).
    pub(in crate::acp) fn forward_v2(&self, v2: &SessionV2, event: Event) -> Option<Event> {
        match event {
            Event::TurnStarted(turn) => *lock(&self.turn) = Some(turn),
            Event::Command {
                tool_call_id,
                progress,
            } => {
                for update in v2.terminals.command(&tool_call_id, progress) {
                    send_v2(&self.conn, &self.session_id, update);
                }
            }
            Event::FilesChanged {
                tool_call_id,
                changes,
                patch,
            } => {
                let update = super::terminal::files_changed(&tool_call_id, &changes, patch);
                send_v2(&self.conn, &self.session_id, update);
            }
            Event::ToolCallUpdate(patch) => {
                return Some(Event::ToolCallUpdate(v2.terminals.patch(patch)));
            }
            Event::UserMessageSaved { message_id } => {
                let turn = *lock(&self.turn);
                self.inserted(v2, turn, &message_id);
                *lock(&self.user_message) = Some(message_id);
            }
            Event::SteerTaken { message_id, text } => {
                let mut meta = serde_json::Map::new();
                meta.insert("steering".into(), serde_json::json!(true));
                let message = UserMessage::new(message_id)
                    .content(vec![ContentBlock::from(text)])
                    .meta(meta);
                send_v2(
                    &self.conn,
                    &self.session_id,
                    SessionUpdate::UserMessage(message),
                );
            }
            Event::TurnEnded(stop) => {
                let unanswered = std::mem::take(&mut *lock(&self.asked));
                for id in unanswered {
                    self.conn.give_up(&id);
                }
                let usage = lock(&self.usage).take();
                let saved = lock(&self.user_message).take();
                let turn = lock(&self.turn).take();
                // A command's turn saves no prompt: it is answered now.
                if saved.is_none()
                    && let Some(turn) = turn
                {
                    self.inserted(v2, Some(turn), &format!("turn-{}", turn.0));
                }
                let mut idle = IdleStateUpdate::new().stop_reason(stop_reason(stop));
                if let Some(usage) = usage {
                    let v1 = super::super::convert::turn_usage(&usage);
                    if let Ok(v2) =
                        super::reread::<agent_client_protocol_schema::v2::Usage>(&v1, "usage")
                    {
                        idle = idle.usage(v2);
                    }
                }
                state(&self.conn, &self.session_id, StateUpdate::Idle(idle));
            }
            other => return Some(other),
        }
        None
    }

    /// The prompt of `turn` is in the history as `message_id`: its request
    /// (if a client sent it) is answered, then the message and `running`.
    fn inserted(&self, v2: &SessionV2, turn: Option<TurnId>, message_id: &str) {
        let (id, content) = match turn {
            Some(turn) => {
                let mut pending = lock(&self.pending);
                let id = pending.remove(&turn);
                if id.is_none() {
                    let mut unclaimed = lock(&v2.unclaimed);
                    unclaimed.insert(turn, message_id.to_owned());
                    while unclaimed.len() > UNCLAIMED {
                        unclaimed.pop_first();
                    }
                }
                (id, lock(&v2.prompts).remove(&turn))
            }
            None => (None, None),
        };
        let content = content.or_else(|| turn.and_then(|turn| self.peer_prompt(turn)));
        if let Some(id) = id {
            let response = PromptResponse::new(message_id.to_owned());
            self.conn.respond(id, super::super::to_value(&response));
        }
        let mut message = UserMessage::new(message_id.to_owned());
        if let Some(content) = content {
            message = message.content(content);
        }
        send_v2(
            &self.conn,
            &self.session_id,
            SessionUpdate::UserMessage(message),
        );
        running(&self.conn, &self.session_id);
    }
}

fn stop_reason(stop: maia_core::StopReason) -> agent_client_protocol_schema::v2::StopReason {
    use agent_client_protocol_schema::v2::StopReason;
    match stop {
        maia_core::StopReason::EndTurn => StopReason::EndTurn,
        maia_core::StopReason::MaxTokens => StopReason::MaxTokens,
        maia_core::StopReason::MaxTurnRequests => StopReason::MaxTurnRequests,
        maia_core::StopReason::Refusal => StopReason::Refusal,
        maia_core::StopReason::Cancelled => StopReason::Cancelled,
    }
}
