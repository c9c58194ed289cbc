//! What a thread derives from its records and its history, as pure
//! functions: the file checkpoints' timeline, a journal's records with the
//! title first, and a history made valid for the model.

use maia_llm::ChatMessage;

use crate::store::{self, Record};

/// `records` with `title` first and no other title: listing reads only the
/// start of each file, and the title is the last one too.
pub(super) fn titled_first(
    records: Vec<Record>,
    title: &str,
    source: store::TitleSource,
) -> Vec<Record> {
    let first = Record::Title {
        title: title.to_owned(),
        source,
    };
    std::iter::once(first)
        .chain(
            records
                .into_iter()
                .filter(|r| !matches!(r, Record::Title { .. })),
        )
        .collect()
}

/// Makes the history valid for the model: a tool result without its call is
/// dropped, and a call without a result gets a synthetic error result.
pub(crate) fn repair_history(history: &mut Vec<ChatMessage>) {
    let mut out: Vec<ChatMessage> = Vec::with_capacity(history.len());
    let mut open: Vec<String> = Vec::new();
    let close = |out: &mut Vec<ChatMessage>, open: &mut Vec<String>| {
        for id in open.drain(..) {
            out.push(ChatMessage::Tool {
                tool_call_id: id,
                content: "Error: this call got no result (it was interrupted).".to_owned(),
            });
        }
    };
    for message in history.drain(..) {
        match &message {
            ChatMessage::Tool { tool_call_id, .. } => {
                if let Some(pos) = open.iter().position(|id| id == tool_call_id) {
                    open.remove(pos);
                    out.push(message);
                }
            }
            ChatMessage::Assistant { tool_calls, .. } => {
                close(&mut out, &mut open);
                open = tool_calls.iter().map(|c| c.id.clone()).collect();
                out.push(message);
            }
            _ => {
                close(&mut out, &mut open);
                out.push(message);
            }
        }
    }
    close(&mut out, &mut open);
    *history = out;
}

/// The file checkpoints a journal's records describe.
pub(super) fn timeline_of(records: &[Record]) -> crate::checkpoint::Timeline {
    let mut timeline = crate::checkpoint::Timeline::default();
    for record in records {
        absorb_timeline(&mut timeline, record);
    }
    timeline
}

/// Keeps the checkpoints' timeline in step with one record.
pub(super) fn absorb_timeline(timeline: &mut crate::checkpoint::Timeline, record: &Record) {
    match record {
        Record::Checkpoint(checkpoint) => timeline.add(checkpoint),
        Record::Reverted { ids, conflicts, .. } => timeline.revert(ids, conflicts),
        Record::ToolCall { call } => {
            timeline.tool_calls.insert(call.id.clone());
        }
        Record::UserDisplay { id, .. } if !id.is_empty() => timeline.note_message(id),
        _ => {}
    }
}
