//! The replay of a saved conversation: its journal's records as the
//! events a front door shows (what the user typed, the answers, the
//! reasoning, the tool calls, the title, the task list and the children
//! of `Task` calls).

use std::path::Path;

use maia_llm::ChatMessage;

use std::sync::Arc;

use crate::event::{Event, SubagentEvent, SubagentInfo, SubagentState, SubagentUpdate};
use crate::store::{Loaded, Record};

/// The replay of a saved conversation, as events (images read from
/// beside the journal, in `cwd`).
pub(crate) fn replay(loaded: &Loaded, cwd: &Path) -> Vec<Event> {
    let id = || uuid::Uuid::new_v4().to_string();
    let mut out = Vec::new();
    let mut user_message = id();
    for record in &loaded.records {
        match record {
            Record::UserDisplay {
                id: message_id,
                text,
                steer,
            } => {
                user_message = message_id.clone();
                out.push(Event::UserMessage {
                    message_id: user_message.clone(),
                    text: text.clone(),
                    steer: *steer,
                });
            }
            Record::UserImage { image } => match crate::images::load(cwd, image) {
                Some(bytes) => out.push(Event::UserImage {
                    message_id: user_message.clone(),
                    mime_type: image.mime_type.clone(),
                    data: bytes.into(),
                    name: image.name.clone(),
                }),
                None => out.push(Event::UserMessage {
                    message_id: user_message.clone(),
                    text: format!("[image {} is no longer stored]", image.name),
                    steer: false,
                }),
            },
            Record::Thought { text } => out.push(Event::Thought {
                message_id: id(),
                text: text.clone(),
            }),
            Record::Message {
                message:
                    ChatMessage::Assistant {
                        content: Some(text),
                        ..
                    },
            } if !text.is_empty() => out.push(Event::AgentText {
                message_id: id(),
                text: text.clone(),
            }),
            Record::ToolCall { call } => out.push(Event::ToolCall(call.into())),
            Record::Title { title, .. } => out.push(Event::Title(title.clone())),
            Record::Plan { todos } => out.push(Event::Plan(todos.clone())),
            Record::Subagent {
                child,
                calls,
                state,
                answer,
            } => {
                let calls: Vec<_> = calls.iter().map(Into::into).collect();
                replay_child(&mut out, &child.into(), &calls, (*state).into(), answer)
            }
            Record::Message { .. }
            | Record::Clear
            | Record::Compaction { .. }
            | Record::Option { .. }
            | Record::ToolsLoaded { .. }
            | Record::Usage { .. }
            | Record::Costs { .. }
            | Record::Checkpoint(_)
            | Record::Reverted { .. }
            | Record::Rewind { .. } => {}
        }
    }
    out
}

/// A child session as its parent saved it: announced, its tool calls, its
/// answer, its end (before the parent's `Task` call, saved after its batch).
fn replay_child(
    out: &mut Vec<Event>,
    child: &SubagentInfo,
    calls: &[crate::event::ToolCallView],
    state: SubagentState,
    answer: &str,
) {
    let child = Arc::new(child.clone());
    let send = |out: &mut Vec<Event>, update| {
        out.push(Event::Subagent(SubagentEvent {
            child: child.clone(),
            update,
        }));
    };
    send(out, SubagentUpdate::Started);
    for call in calls {
        send(
            out,
            SubagentUpdate::Event(Box::new(Event::ToolCall(call.clone()))),
        );
    }
    if !answer.is_empty() {
        send(
            out,
            SubagentUpdate::Event(Box::new(Event::AgentText {
                message_id: uuid::Uuid::new_v4().to_string(),
                text: answer.to_owned(),
            })),
        );
    }
    send(
        out,
        SubagentUpdate::Ended {
            state,
            answer: answer.to_owned(),
        },
    );
}
