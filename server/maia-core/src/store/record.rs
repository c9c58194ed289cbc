//! The journal's records: what each line of a session file holds, as types
//! of the journal's own (format [`FORMAT_VERSION`], docs/sessions.md).
//! The engine's event types (what the editor is shown) are converted to and
//! from these ([`SavedToolCall`], [`SavedSubagent`]), so a change made for
//! the editor is not a change of the file format; the fixture test
//! `tests/journal_format.rs` holds the format to real files.

use std::path::PathBuf;

use maia_llm::ChatMessage;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::{SubagentInfo, SubagentState, ToolCallView, ToolContent, ToolStatus};

/// The journal format version written by this build.
pub const FORMAT_VERSION: u32 = 1;

/// First line of a journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Always `"maia-session"`.
    pub kind: String,
    pub version: u32,
    /// The thread id the editor knows this conversation by.
    pub id: String,
    pub cwd: PathBuf,
    /// Seconds since the Unix epoch.
    pub created: u64,
}

/// Who wrote a thread's title. Only a [`TitleSource::Prompt`] title is
/// replaced by a labelling call's; the others are final.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TitleSource {
    /// `/rename`, a client's `session/set_title`, a fork's, or a file
    /// written before the other two existed.
    #[default]
    User,
    /// The first prompt's text, until the label is written.
    Prompt,
    /// The labelling call's (`session/title.rs`).
    Label,
}

impl TitleSource {
    fn is_user(&self) -> bool {
        *self == TitleSource::User
    }
}

/// One line after the header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    /// An entry of the model-facing history.
    Message { message: ChatMessage },
    /// What the user typed, as shown in the editor; `steer` when it was
    /// sent while a turn ran and taken by that turn (`session::steer`).
    UserDisplay {
        /// The message's stable id (`Event::UserMessage`'s `message_id`,
        /// what a rewind or a fork names). Journals written before ids
        /// existed have none; [`load`] gives those `u<N>`, N being the
        /// record's place among the file's user messages.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        id: String,
        text: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        steer: bool,
    },
    /// An image the user sent with the message recorded just before; its
    /// bytes are stored beside the journal (`images.rs`).
    UserImage { image: ImageRef },
    /// Reasoning shown to the user.
    Thought { text: String },
    /// A tool call in its final state.
    ToolCall { call: SavedToolCall },
    /// The conversation's title, and who wrote it (absent in files from
    /// before titles were labelled: the user's, as a rename wrote it).
    Title {
        title: String,
        #[serde(default, skip_serializing_if = "TitleSource::is_user")]
        source: TitleSource,
    },
    /// `/clear`: the model-facing history starts again after this point.
    Clear,
    /// The task list after a `TodoWrite` (the whole list).
    Plan {
        todos: Vec<crate::session_tools::Todo>,
    },
    /// A compaction: the history starts again after this point, with this
    /// summary as starting context (first record of a `name__n` file).
    Compaction { summary: String },
    /// One model response's usage and what it cost ([`crate::cost`]).
    Usage { charge: crate::cost::Charge },
    /// The thread's costs so far, carried into a compaction's new file.
    Costs { ledger: crate::cost::Ledger },
    /// A file checkpoint: the project's tree before and after a tool call
    /// that may change files ([`crate::checkpoint`]).
    Checkpoint(crate::checkpoint::Checkpoint),
    /// Checkpoints undone (`/undo`, `_session/files/revert`): a later undo
    /// goes further back; `conflicts` were left alone.
    Reverted {
        ids: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        paths: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        conflicts: Vec<String>,
    },
    /// A session option the user chose (the editor's config options, such
    /// as `reasoning_effort`); the last record of a key wins.
    Option {
        key: String,
        value: serde_json::Value,
    },
    /// A child session a `Task` call ran (the `subagent` module): who it
    /// was, its tool calls in their final state, how it ended and its
    /// answer (the child keeps no journal of its own).
    Subagent {
        child: SavedSubagent,
        calls: Vec<SavedToolCall>,
        state: SavedSubagentState,
        answer: String,
    },
    /// A rewind: the thread is truncated before the user message `before`
    /// (its id); the records from it onward leave the derived state except
    /// the thread's own (costs, title, options). Nothing is deleted
    /// (`timeline.rs`).
    Rewind { before: String },
    /// Tools offered by name only whose definitions the thread's requests
    /// carry from here on (offered by name only until loaded, docs/tools.md); a `/clear` forgets
    /// them, a compaction's new file starts with them all.
    ToolsLoaded { names: Vec<String> },
}

impl Record {
    /// The record of a tool call in its final state.
    pub fn tool_call(view: &ToolCallView) -> Record {
        Record::ToolCall { call: view.into() }
    }

    /// The record of a child session a `Task` call ran.
    pub fn subagent(
        child: &SubagentInfo,
        calls: &[ToolCallView],
        state: SubagentState,
        answer: String,
    ) -> Record {
        Record::Subagent {
            child: child.into(),
            calls: calls.iter().map(SavedToolCall::from).collect(),
            state: state.into(),
            answer,
        }
    }

    /// Keeps `ledger` in step with this record: a charge adds up, a carried
    /// ledger replaces it (the same on reload and live).
    pub fn absorb_cost(&self, ledger: &mut crate::cost::Ledger) {
        match self {
            Record::Usage { charge } => ledger.add(charge),
            Record::Costs { ledger: carried } => ledger.clone_from(carried),
            _ => {}
        }
    }
}

/// A session's options by key (see [`Record::Option`]).
pub type SessionOptions = std::collections::BTreeMap<String, serde_json::Value>;

/// A stored image, as journal records name it; its bytes are stored beside
/// the journal (`images.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRef {
    /// Hex SHA-256 of the bytes (the file name).
    pub sha256: String,
    pub mime_type: String,
    pub name: String,
    pub bytes: u64,
    pub width: u32,
    pub height: u32,
}

/// A tool call in its final state, as the journal keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedToolCall {
    pub id: String,
    pub name: String,
    pub title: String,
    pub kind: Option<SavedKind>,
    pub locations: Vec<PathBuf>,
    pub raw_input: Value,
    pub status: SavedStatus,
    pub content: Vec<SavedContent>,
}

/// How a tool was presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SavedKind {
    Read,
    Edit,
    Execute,
    Search,
    Fetch,
}

/// Where a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SavedStatus {
    Pending,
    InProgress,
    Completed,
    Failed,
}

/// Content shown with a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SavedContent {
    Text { text: String },
    Diff { diff: SavedDiff },
    Terminal { terminal_id: String },
}

/// A file change shown with a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedDiff {
    pub path: PathBuf,
    pub old_text: Option<String>,
    pub new_text: String,
}

/// Who a child session was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedSubagent {
    pub id: String,
    pub tool_call_id: String,
    pub agent: String,
    pub description: String,
    pub prompt: String,
}

/// How a child session's work ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SavedSubagentState {
    Completed,
    Failed,
    Cancelled,
}

impl From<&ToolCallView> for SavedToolCall {
    fn from(view: &ToolCallView) -> Self {
        use maia_tools::ToolKind;
        SavedToolCall {
            id: view.id.clone(),
            name: view.name.clone(),
            title: view.title.clone(),
            kind: view.kind.map(|kind| match kind {
                ToolKind::Read => SavedKind::Read,
                ToolKind::Edit => SavedKind::Edit,
                ToolKind::Execute => SavedKind::Execute,
                ToolKind::Search => SavedKind::Search,
                ToolKind::Fetch => SavedKind::Fetch,
            }),
            locations: view.locations.clone(),
            raw_input: view.raw_input.clone(),
            status: view.status.into(),
            content: view.content.iter().map(SavedContent::from).collect(),
        }
    }
}

impl From<ToolStatus> for SavedStatus {
    fn from(status: ToolStatus) -> Self {
        match status {
            ToolStatus::Pending => SavedStatus::Pending,
            ToolStatus::InProgress => SavedStatus::InProgress,
            ToolStatus::Completed => SavedStatus::Completed,
            ToolStatus::Failed => SavedStatus::Failed,
        }
    }
}

impl From<&ToolContent> for SavedContent {
    fn from(content: &ToolContent) -> Self {
        match content {
            ToolContent::Text { text } => SavedContent::Text { text: text.clone() },
            ToolContent::Diff { diff } => SavedContent::Diff {
                diff: SavedDiff {
                    path: diff.path.clone(),
                    old_text: diff.old_text.clone(),
                    new_text: diff.new_text.clone(),
                },
            },
            ToolContent::Terminal { terminal_id } => SavedContent::Terminal {
                terminal_id: terminal_id.clone(),
            },
        }
    }
}

impl From<&SavedToolCall> for ToolCallView {
    fn from(saved: &SavedToolCall) -> Self {
        use maia_tools::ToolKind;
        ToolCallView {
            id: saved.id.clone(),
            name: saved.name.clone(),
            title: saved.title.clone(),
            kind: saved.kind.map(|kind| match kind {
                SavedKind::Read => ToolKind::Read,
                SavedKind::Edit => ToolKind::Edit,
                SavedKind::Execute => ToolKind::Execute,
                SavedKind::Search => ToolKind::Search,
                SavedKind::Fetch => ToolKind::Fetch,
            }),
            locations: saved.locations.clone(),
            raw_input: saved.raw_input.clone(),
            status: match saved.status {
                SavedStatus::Pending => ToolStatus::Pending,
                SavedStatus::InProgress => ToolStatus::InProgress,
                SavedStatus::Completed => ToolStatus::Completed,
                SavedStatus::Failed => ToolStatus::Failed,
            },
            content: saved
                .content
                .iter()
                .map(|content| match content {
                    SavedContent::Text { text } => ToolContent::Text { text: text.clone() },
                    SavedContent::Diff { diff } => ToolContent::Diff {
                        diff: maia_tools::FileDiff {
                            path: diff.path.clone(),
                            old_text: diff.old_text.clone(),
                            new_text: diff.new_text.clone(),
                        },
                    },
                    SavedContent::Terminal { terminal_id } => ToolContent::Terminal {
                        terminal_id: terminal_id.clone(),
                    },
                })
                .collect(),
        }
    }
}

impl From<&SubagentInfo> for SavedSubagent {
    fn from(info: &SubagentInfo) -> Self {
        SavedSubagent {
            id: info.id.clone(),
            tool_call_id: info.tool_call_id.clone(),
            agent: info.agent.clone(),
            description: info.description.clone(),
            prompt: info.prompt.clone(),
        }
    }
}

impl From<&SavedSubagent> for SubagentInfo {
    fn from(saved: &SavedSubagent) -> Self {
        SubagentInfo {
            id: saved.id.clone(),
            tool_call_id: saved.tool_call_id.clone(),
            agent: saved.agent.clone(),
            description: saved.description.clone(),
            prompt: saved.prompt.clone(),
        }
    }
}

impl From<SubagentState> for SavedSubagentState {
    fn from(state: SubagentState) -> Self {
        match state {
            SubagentState::Completed => SavedSubagentState::Completed,
            SubagentState::Failed => SavedSubagentState::Failed,
            SubagentState::Cancelled => SavedSubagentState::Cancelled,
        }
    }
}

impl From<SavedSubagentState> for SubagentState {
    fn from(state: SavedSubagentState) -> Self {
        match state {
            SavedSubagentState::Completed => SubagentState::Completed,
            SavedSubagentState::Failed => SubagentState::Failed,
            SavedSubagentState::Cancelled => SubagentState::Cancelled,
        }
    }
}
