//! The exported thread: the events of a thread's replay
//! ([`crate::session::replay`]) as a list of entries, every text bounded,
//! and its JSON form (the shape docs/sessions.md describes, version
//! [`VERSION`]).

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::event::{Event, SubagentState, SubagentUpdate, ToolCallView, ToolContent};

/// The version of the JSON shape; a change that breaks a reader bumps it.
pub const VERSION: u32 = 1;
/// The most characters of one text (a message, a tool result, a diff, a
/// string of a tool's input) kept whole; a longer one keeps its head and
/// tail around a line saying how much was left out.
pub const FIELD_CAP: usize = 16_000;
/// The most characters of text the entries of one export hold; the entries
/// past it are counted in [`Document::omitted`], not written.
pub const TOTAL_CAP: usize = 4_000_000;

/// A thread as exported.
#[derive(Debug, Serialize)]
pub struct Document {
    pub maia_export: u32,
    pub thread: ThreadInfo,
    /// When it was exported (RFC 3339, UTC).
    pub exported_at: String,
    pub entries: Vec<Entry>,
    /// Whether any text was shortened.
    pub truncated: bool,
    /// Entries left out once [`TOTAL_CAP`] was reached.
    pub omitted: usize,
}

/// Which thread it is.
#[derive(Debug, Serialize)]
pub struct ThreadInfo {
    pub id: String,
    /// The journal's name (`/rename`).
    pub name: String,
    pub title: Option<String>,
    pub cwd: PathBuf,
}

/// One thing the thread showed, in order.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Entry {
    User {
        text: String,
        steer: bool,
    },
    Image {
        name: String,
        mime_type: String,
    },
    Thought {
        text: String,
    },
    Answer {
        text: String,
    },
    ToolCall(ToolCallEntry),
    Title {
        title: String,
    },
    Plan {
        todos: Vec<crate::session_tools::Todo>,
    },
    Subagent {
        agent: String,
        description: String,
        prompt: String,
        /// `completed`, `failed` or `cancelled`; `None` when it never ended.
        state: Option<&'static str>,
        entries: Vec<Entry>,
    },
}

/// A tool call in its final state.
#[derive(Debug, Serialize)]
pub struct ToolCallEntry {
    pub id: String,
    pub name: String,
    pub title: String,
    pub kind: Option<maia_tools::ToolKind>,
    pub status: &'static str,
    pub input: Value,
    pub locations: Vec<PathBuf>,
    pub content: Vec<Content>,
}

/// What a tool call showed.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    Text {
        text: String,
    },
    /// A file change as a unified diff (`new_file`: there was none before).
    Diff {
        path: PathBuf,
        new_file: bool,
        diff: String,
    },
    Terminal {
        terminal_id: String,
    },
}

/// Shortens texts to [`FIELD_CAP`] and counts what the entries hold.
struct Budget {
    used: usize,
    truncated: bool,
}

impl Budget {
    fn text(&mut self, text: &str) -> String {
        let kept = bounded(text, FIELD_CAP);
        self.truncated |= kept.len() < text.len();
        self.used += kept.len();
        kept
    }

    fn value(&mut self, value: &Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.text(s)),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.value(v)).collect()),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.value(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// `text` whole when it has at most `cap` characters, else its head and
/// tail around a line saying how many characters were left out.
pub fn bounded(text: &str, cap: usize) -> String {
    let count = text.chars().count();
    if count <= cap {
        return text.to_owned();
    }
    let half = cap / 2;
    let head: String = text.chars().take(half).collect();
    let tail: String = text.chars().skip(count - half).collect();
    format!(
        "{head}\n[… {} characters left out …]\n{tail}",
        count - 2 * half
    )
}

/// The document of a replay (`events`, in the order a client gets them).
pub fn build(thread: ThreadInfo, events: &[Event], exported_at: String) -> Document {
    let mut budget = Budget {
        used: 0,
        truncated: false,
    };
    let mut entries = Vec::new();
    let mut omitted = 0;
    let mut children: Vec<(String, Entry)> = Vec::new();
    for event in events {
        if budget.used > TOTAL_CAP {
            omitted += usize::from(counts(event));
            continue;
        }
        if let Event::Subagent(sub) = event {
            child_event(&mut children, &mut entries, sub, &thread.cwd, &mut budget);
            continue;
        }
        if let Some(entry) = entry(event, &thread.cwd, &mut budget) {
            entries.push(entry);
        }
    }
    // A child that never ended still shows what it did.
    entries.extend(children.into_iter().map(|(_, entry)| entry));
    Document {
        maia_export: VERSION,
        thread,
        exported_at,
        entries,
        truncated: budget.truncated || omitted > 0,
        omitted,
    }
}

/// Whether `event` would have made an entry.
fn counts(event: &Event) -> bool {
    matches!(
        event,
        Event::UserMessage { .. }
            | Event::UserImage { .. }
            | Event::Thought { .. }
            | Event::AgentText { .. }
            | Event::ToolCall(_)
            | Event::Title(_)
            | Event::Plan(_)
            | Event::Subagent(_)
    )
}

fn entry(event: &Event, cwd: &Path, budget: &mut Budget) -> Option<Entry> {
    Some(match event {
        Event::UserMessage { text, steer, .. } => Entry::User {
            text: budget.text(text),
            steer: *steer,
        },
        Event::UserImage {
            name, mime_type, ..
        } => Entry::Image {
            name: name.clone(),
            mime_type: mime_type.clone(),
        },
        Event::Thought { text, .. } => Entry::Thought {
            text: budget.text(text),
        },
        Event::AgentText { text, .. } => Entry::Answer {
            text: budget.text(text),
        },
        Event::ToolCall(call) => Entry::ToolCall(tool_call(call, cwd, budget)),
        Event::Title(title) => Entry::Title {
            title: budget.text(title),
        },
        Event::Plan(todos) => Entry::Plan {
            todos: todos.clone(),
        },
        _ => return None,
    })
}

fn tool_call(call: &ToolCallView, cwd: &Path, budget: &mut Budget) -> ToolCallEntry {
    ToolCallEntry {
        id: call.id.clone(),
        name: call.name.clone(),
        title: budget.text(&call.title),
        kind: call.kind,
        status: call.status.as_str(),
        input: budget.value(&call.raw_input),
        locations: call.locations.clone(),
        content: call
            .content
            .iter()
            .map(|content| match content {
                ToolContent::Text { text } => Content::Text {
                    text: budget.text(text),
                },
                ToolContent::Diff { diff } => {
                    let shown = maia_tools::FileDiff {
                        path: diff.path.strip_prefix(cwd).unwrap_or(&diff.path).into(),
                        ..diff.clone()
                    };
                    Content::Diff {
                        path: diff.path.clone(),
                        new_file: diff.old_text.is_none(),
                        diff: budget.text(&shown.unified_diff()),
                    }
                }
                ToolContent::Terminal { terminal_id } => Content::Terminal {
                    terminal_id: terminal_id.clone(),
                },
            })
            .collect(),
    }
}

/// A child session's update: its entry is opened when it starts and
/// placed when it ends (where its parent's `Task` call comes next).
fn child_event(
    children: &mut Vec<(String, Entry)>,
    entries: &mut Vec<Entry>,
    sub: &crate::event::SubagentEvent,
    cwd: &Path,
    budget: &mut Budget,
) {
    let id = &sub.child.id;
    let at = children.iter().position(|(c, _)| c == id);
    match (&sub.update, at) {
        (SubagentUpdate::Started, None) => children.push((
            id.clone(),
            Entry::Subagent {
                agent: sub.child.agent.clone(),
                description: budget.text(&sub.child.description),
                prompt: budget.text(&sub.child.prompt),
                state: None,
                entries: Vec::new(),
            },
        )),
        (SubagentUpdate::Event(event), Some(at)) => {
            if let Some(entry) = entry(event, cwd, budget)
                && let Entry::Subagent { entries, .. } = &mut children[at].1
            {
                entries.push(entry);
            }
        }
        (SubagentUpdate::Ended { state: end, .. }, Some(at)) => {
            let (_, mut entry) = children.remove(at);
            if let Entry::Subagent { state, .. } = &mut entry {
                *state = Some(match end {
                    SubagentState::Completed => "completed",
                    SubagentState::Failed => "failed",
                    SubagentState::Cancelled => "cancelled",
                });
            }
            entries.push(entry);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_text_keeps_its_head_and_tail() {
        let text = format!("{}{}", "a".repeat(20_000), "z".repeat(20_000));
        let kept = bounded(&text, 100);
        assert!(kept.starts_with(&"a".repeat(50)));
        assert!(kept.ends_with(&"z".repeat(50)));
        assert!(kept.contains("[… 39900 characters left out …]"));
        assert_eq!(bounded("short", 100), "short");
        // Characters, not bytes: a multi-byte text is not cut inside one.
        assert_eq!(
            bounded(&"é".repeat(10), 4),
            "éé\n[… 6 characters left out …]\néé"
        );
    }
}
