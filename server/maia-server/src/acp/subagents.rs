//! Subagents on the ACP 1.20 wire: the children of `Task` calls
//! ([`maia_core::subagent`]). To a client that advertised
//! `clientCapabilities.subagents`, each child is announced on its parent
//! with `subagent_update` (title, description, `capabilities.cancel`,
//! state `running`) before any of its traffic; the prompt it was given is a
//! `session_message` from the parent to the child (the parent's outgoing
//! view and the child's incoming view); the child's own updates (text,
//! tool calls, usage) are `session/update`s of the child's session id; its
//! answer is a `session_message` from the child to the parent, and its end
//! a `subagent_update` with state `idle` and the stop reason. The shapes
//! follow the schema crate 1.20 and claude-agent-acp's
//! `src/acp-subagents.ts`. `session/cancel` naming a child cancels it alone
//! (`mod.rs`). Other clients see the child's progress inside the parent's
//! `Task` tool call: a line per tool call and the files touched.

use agent_client_protocol_schema::v1::{
    ClientCapabilities, ContentBlock, ErrorStopReason, IdleStateUpdate, IdleStopReason, MessageId,
    RunningStateUpdate, SessionCancelCapabilities, SessionId, SessionMessage, SessionUpdate,
    StateUpdate, SubagentSessionCapabilities, SubagentUpdate as WireSubagent, TextContent,
    ToolCallContent, ToolCallLocation, ToolCallUpdate, ToolCallUpdateFields,
};
use maia_core::{Event, SubagentEvent, SubagentInfo, SubagentState, SubagentUpdate};

use super::convert;

/// Whether the client shows child sessions.
pub(super) fn supported(caps: &ClientCapabilities) -> bool {
    caps.subagents.is_some()
}

/// What a client is sent for one child event, as `(session id, update)`
/// pairs in order; `parent` is the session the child belongs to. `live`:
/// a running turn's (a replay sends no progress: the `Task` call's saved
/// result follows).
pub(super) fn updates(
    parent: &str,
    event: SubagentEvent,
    caps: &ClientCapabilities,
    (live, thinking): (bool, bool),
) -> Vec<(String, SessionUpdate)> {
    let SubagentEvent { child, update } = event;
    if !supported(caps) {
        return match update {
            SubagentUpdate::Started if live => {
                vec![(parent.to_owned(), progress(&child, "Working…", &[]))]
            }
            SubagentUpdate::Progress { text, locations } if live => {
                vec![(parent.to_owned(), progress(&child, &text, &locations))]
            }
            _ => Vec::new(),
        };
    }
    match update {
        SubagentUpdate::Started => vec![
            (parent.to_owned(), announce(&child)),
            (parent.to_owned(), message(&child, parent, false)),
            (child.id.clone(), message(&child, parent, true)),
        ],
        SubagentUpdate::Event(event) => match *event {
            Event::Subagent(grandchild) => updates(&child.id, grandchild, caps, (live, thinking)),
            Event::Thought { .. } if !thinking => Vec::new(),
            other => convert::session_update(other, caps)
                .map(|update| vec![(child.id.clone(), update)])
                .unwrap_or_default(),
        },
        SubagentUpdate::Progress { .. } => Vec::new(),
        SubagentUpdate::Ended { state, answer } => {
            let mut out = Vec::new();
            if !answer.is_empty() {
                out.push((parent.to_owned(), answer_message(&child, parent, &answer)));
            }
            out.push((
                parent.to_owned(),
                SessionUpdate::SubagentUpdate(
                    WireSubagent::new(child.id.clone()).state(StateUpdate::Idle(idle(state))),
                ),
            ));
            out
        }
    }
}

/// The first `subagent_update` of a child.
fn announce(child: &SubagentInfo) -> SessionUpdate {
    SessionUpdate::SubagentUpdate(
        WireSubagent::new(child.id.clone())
            .title(format!("{}: {}", child.agent, child.description))
            .description(format!("The {} agent: {}", child.agent, child.description))
            .capabilities(
                SubagentSessionCapabilities::new().cancel(SessionCancelCapabilities::new()),
            )
            .state(StateUpdate::Running(RunningStateUpdate::new())),
    )
}

/// The prompt sent to the child: the parent's outgoing view, or (`incoming`)
/// the child's.
fn message(child: &SubagentInfo, parent: &str, incoming: bool) -> SessionUpdate {
    let (out_id, in_id) = (
        format!("{}-prompt", child.id),
        format!("{}-received", child.id),
    );
    let mut message = SessionMessage::new(if incoming {
        in_id.clone()
    } else {
        out_id.clone()
    })
    .sender_session_id(SessionId::new(parent))
    .recipient_session_id(SessionId::new(child.id.as_str()))
    .content(vec![text(&child.prompt)]);
    message = if incoming {
        message.sender_message_id(MessageId::new(out_id))
    } else {
        message.recipient_message_id(MessageId::new(in_id))
    };
    SessionUpdate::SessionMessage(message)
}

/// The child's answer, received by the parent.
fn answer_message(child: &SubagentInfo, parent: &str, answer: &str) -> SessionUpdate {
    SessionUpdate::SessionMessage(
        SessionMessage::new(format!("{}-answer", child.id))
            .sender_session_id(SessionId::new(child.id.as_str()))
            .recipient_session_id(SessionId::new(parent))
            .content(vec![text(answer)]),
    )
}

fn idle(state: SubagentState) -> IdleStateUpdate {
    let reason = match state {
        SubagentState::Completed => IdleStopReason::EndTurn,
        SubagentState::Cancelled => IdleStopReason::Cancelled,
        SubagentState::Failed => IdleStopReason::Error(ErrorStopReason::new()),
    };
    IdleStateUpdate::new().stop_reason(reason)
}

fn text(text: &str) -> ContentBlock {
    ContentBlock::Text(TextContent::new(text))
}

/// The child's progress as the content and locations of the parent's
/// `Task` tool call.
fn progress(
    child: &SubagentInfo,
    text_shown: &str,
    locations: &[std::path::PathBuf],
) -> SessionUpdate {
    let mut fields =
        ToolCallUpdateFields::new().content(vec![ToolCallContent::from(text(text_shown))]);
    if !locations.is_empty() {
        fields = fields.locations(
            locations
                .iter()
                .map(|path| ToolCallLocation::new(path.clone()))
                .collect::<Vec<_>>(),
        );
    }
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(child.tool_call_id.clone(), fields))
}
