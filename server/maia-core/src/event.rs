//! What the engine tells a front door: streamed text, tool calls and their
//! updates, permission requests, and the end of a turn; a command's progress
//! while it runs and the file states of what commands changed.

use std::path::PathBuf;

use maia_tools::{FileDiff, ToolKind};
use serde_json::Value;
use tokio::sync::oneshot;

/// Why a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    EndTurn,
    MaxTokens,
    MaxTurnRequests,
    Refusal,
    Cancelled,
}

/// Lifecycle of a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolStatus {
    Pending,
    InProgress,
    Completed,
    Failed,
}

impl ToolStatus {
    /// Its name in snake case (`in_progress`), as the front doors write it.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Pending => "pending",
            ToolStatus::InProgress => "in_progress",
            ToolStatus::Completed => "completed",
            ToolStatus::Failed => "failed",
        }
    }
}

/// Content shown with a tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolContent {
    Text {
        text: String,
    },
    Diff {
        diff: FileDiff,
    },
    /// A terminal of the editor that a command runs in (its id there).
    Terminal {
        terminal_id: String,
    },
}

/// A tool call as the user sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallView {
    /// Unique within the session.
    pub id: String,
    /// The model-facing tool name (`Read`, `Bash`, …).
    pub name: String,
    pub title: String,
    /// `None` when the call could not be understood.
    pub kind: Option<ToolKind>,
    /// Absolute paths the call touches.
    pub locations: Vec<PathBuf>,
    pub raw_input: Value,
    pub status: ToolStatus,
    pub content: Vec<ToolContent>,
}

/// A change to an announced tool call; `None` fields are unchanged, and a
/// `Some` content list replaces the previous one.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolCallPatch {
    pub id: String,
    pub status: Option<ToolStatus>,
    pub content: Option<Vec<ToolContent>>,
    pub raw_output: Option<Value>,
}

/// The kind of a permission option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChoiceKind {
    AllowOnce,
    AllowAlways,
    RejectOnce,
    RejectAlways,
}

/// One option of a permission request; `label` says exactly what it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionChoice {
    pub id: String,
    pub label: String,
    pub kind: ChoiceKind,
}

/// The user's answer to a permission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionReply {
    /// The id of the chosen [`PermissionChoice`], and the user's reason
    /// when the client sent one (rejections).
    Selected {
        option: String,
        reason: Option<String>,
    },
    /// Rejected without choosing an option (the client failed the request
    /// or its answer could not be read); the tool does not run and the
    /// turn goes on.
    Rejected { reason: Option<String> },
    /// The request was cancelled (the turn is being cancelled).
    Cancelled,
}

/// A question to the user. Dropping `reply` counts as `Cancelled`.
#[derive(Debug)]
pub struct PermissionRequest {
    pub tool_call: ToolCallView,
    pub options: Vec<PermissionChoice>,
    pub reply: oneshot::Sender<PermissionReply>,
}

/// Where a compaction is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompactionState {
    Started,
    /// Done: the summary, and the context size before and after (tokens).
    Completed {
        summary: String,
        before: u64,
        after: u64,
    },
    /// Failed; the conversation is unchanged.
    Failed(String),
    /// Cancelled; the conversation is unchanged.
    Cancelled,
}

/// A command offered to the user (`/name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandEntry {
    pub name: String,
    pub description: String,
    /// What the argument is, for commands that take one.
    pub hint: Option<String>,
}

/// Why a turn that ended normally did not do its job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfinished {
    /// The model kept writing a tool call as text mixed with prose, and it
    /// was not run.
    TextToolCall,
    /// The model's answer was empty and it ran no tool.
    EmptyAnswer,
    /// The model repeated its last reply word for word (text mode).
    Repeated,
    /// A call was refused and nothing ran after it (reported by the front
    /// door that refused it: `maia exec`).
    Refused,
    /// The next model request would have passed a budget and the user
    /// (or `maia exec`, which cannot ask) stopped there.
    Budget,
}

impl Unfinished {
    /// Its name on the wire (`text_tool_call`, `empty_answer`, `repeated`,
    /// `refused`, `budget`).
    pub fn name(self) -> &'static str {
        match self {
            Unfinished::TextToolCall => "text_tool_call",
            Unfinished::EmptyAnswer => "empty_answer",
            Unfinished::Repeated => "repeated",
            Unfinished::Refused => "refused",
            Unfinished::Budget => "budget",
        }
    }
}

/// How important a notice is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeLevel {
    Info,
    Warning,
}

/// One run of a hook (docs/hooks.md): which, how it ended, how long it
/// took. Front doors show it as a collapsed card or a line.
#[derive(Debug, Clone, PartialEq)]
pub struct HookReport {
    /// Unique in the session.
    pub id: String,
    /// The event (`PreToolUse`…).
    pub event: &'static str,
    /// The command as configured.
    pub command: String,
    /// What the matcher was tried on (the tool's name…), if anything.
    pub subject: Option<String>,
    /// The exit code; `None` when it was killed or could not start.
    pub exit_code: Option<i32>,
    /// `ok`, `blocked`, `error`, `timeout` or `cancelled`.
    pub outcome: &'static str,
    pub duration_ms: u64,
    /// What it printed (stdout unless it asked `suppressOutput`, then
    /// stderr), capped.
    pub output: String,
}

/// Everything a session reports, in order.
#[derive(Debug)]
pub enum Event {
    /// A piece of the answer; pieces with one `message_id` form one message.
    AgentText {
        message_id: String,
        text: String,
    },
    /// A piece of the model's reasoning (or a transient status).
    Thought {
        message_id: String,
        text: String,
    },
    /// A user message, sent only when a saved conversation is replayed.
    UserMessage {
        message_id: String,
        text: String,
        /// Sent while a turn ran (`_session/steering`) and taken by it.
        steer: bool,
    },
    /// A steer ([`crate::SessionHandle::steer`]) was taken into the running
    /// turn's history as this user message (its stable id and the text
    /// shown; journaled as a steer, so a replay sends it as
    /// [`Event::UserMessage`] with `steer`).
    SteerTaken {
        message_id: String,
        text: String,
    },
    /// The prompt of the running turn was saved under this stable id (a
    /// front door returns it with the turn's answer, so a client can name
    /// the message in a rewind or a fork without reloading the thread).
    UserMessageSaved {
        message_id: String,
    },
    /// An image of a replayed user message (same `message_id` as its text).
    UserImage {
        message_id: String,
        mime_type: String,
        data: std::sync::Arc<[u8]>,
        /// The name it was sent under (a file name or URI).
        name: String,
    },
    ToolCall(ToolCallView),
    ToolCallUpdate(ToolCallPatch),
    Permission(PermissionRequest),
    /// The conversation's title changed.
    Title(String),
    /// The session now uses this model.
    ModelChanged(String),
    /// How full the context is, in tokens, against the model's window.
    Usage {
        used: u64,
        size: u64,
        /// The thread's cost so far, US dollars; `None`: unknown.
        cost: Option<f64>,
        /// Where the context goes ([`crate::context_map`]); `None` while
        /// the window is unknown.
        map: Option<Box<crate::context_map::ContextMap>>,
    },
    /// The session switched to this mode by itself (an approved plan).
    ModeChanged(crate::mode::Mode),
    /// A plan the model proposes for approval (`ExitPlanMode`), as Markdown;
    /// one id per plan, a later one replaces it.
    PlanProposed {
        id: String,
        markdown: String,
    },
    /// The findings of a `/review`, each a file and line to open; `id` is
    /// unique in the session.
    Findings {
        id: String,
        findings: Vec<crate::review::Finding>,
    },
    /// The session's task list changed (the whole list).
    Plan(Vec<crate::session_tools::Todo>),
    /// The commands the user can type changed (the whole list).
    Commands(Vec<CommandEntry>),
    /// A compaction's progress; one id per compaction.
    Compaction {
        id: String,
        state: CompactionState,
    },
    /// Something the user should know that is not part of the conversation
    /// (settings loaded, context file missing…).
    Notice {
        level: NoticeLevel,
        text: String,
    },
    /// The turn could not do what was asked (the model request failed, the
    /// prompt was not sent, the model looped…): the message, already told
    /// to the user as text. Followed by [`Event::TurnEnded`].
    TurnFailed(String),
    /// The turn ended without doing its job, though nothing failed: why,
    /// and a sentence for the user (front doors show it as a notice; `maia
    /// exec` exits with its own status). Before [`Event::TurnEnded`].
    TurnUnfinished {
        reason: Unfinished,
        text: String,
    },
    /// The prompt queue changed (`crate::queue`): list it again.
    QueueChanged,
    /// A turn taken from the prompt queue started or ended.
    QueueTurn {
        turn_id: String,
        queued_id: String,
        status: crate::queue::QueueTurnStatus,
    },
    /// What the turn's model requests used, summed, when the server said
    /// (sent just before [`Event::TurnEnded`]).
    TurnUsage(maia_llm::Usage),
    /// A child session a `Task` call started (see the `subagent` module).
    Subagent(SubagentEvent),
    /// A hook ran (see the `hooks` module and docs/hooks.md).
    Hook(HookReport),
    /// A model request ended (for observability; nothing to show).
    ModelRequest(crate::telemetry::ModelRequest),
    /// A turn starts: the events up to the next [`Event::TurnEnded`] are
    /// this turn's (the id [`crate::SessionHandle::prompt`] returned, for a
    /// prompt's turn).
    TurnStarted(crate::session_state::TurnId),
    /// Always the last event of a turn.
    TurnEnded(StopReason),
    /// A command a tool call runs here (`Bash`), while it runs: its start,
    /// its output (coalesced, see [`CommandProgress::Output`]) and its
    /// exit, all before the call's final [`Event::ToolCallUpdate`], whose
    /// result is what the model sees (unchanged by this stream).
    Command {
        tool_call_id: String,
        progress: CommandProgress,
    },
    /// What a batch's commands changed on disk, as the checkpoints saw it
    /// (deletes, renames, mode changes and binaries included), given to
    /// the batch's first call that named no path (see `session::changes`).
    FilesChanged {
        tool_call_id: String,
        changes: Vec<FileChange>,
        /// The changes as `git diff` prints them (`--patch`, renames found,
        /// paths absolute); `None` when too large or git failed.
        patch: Option<String>,
    },
}

/// A running command's progress ([`Event::Command`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandProgress {
    /// Sent once, when the process runs.
    Started { command: String, cwd: PathBuf },
    /// Output bytes in the order read (stdout and stderr on one pipe), as
    /// raw bytes (a chunk may split a character). At most one event per
    /// 50 ms per command and 64 KiB each: a chunk that could not keep up
    /// ends with a line saying how many bytes were left out.
    Output(Vec<u8>),
    /// Sent once, after the last output: the exit code, or the signal's
    /// name (`SIGKILL` when MAIA stopped it); neither when unknown.
    Exited {
        code: Option<i32>,
        signal: Option<String>,
    },
}

/// One file a command changed ([`Event::FilesChanged`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// Absolute; for a delete, the deleted path.
    pub path: PathBuf,
    pub operation: FileOperation,
    /// Git found no text in it (before or after).
    pub binary: bool,
    /// A symbolic link (after the change; before it, for a delete).
    pub symlink: bool,
}

/// What happened to a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOperation {
    Added,
    Deleted,
    /// Its content or its mode changed.
    Modified,
    /// Renamed from this absolute path (content maybe changed too).
    Moved {
        from: PathBuf,
    },
}

/// Who a child session is, as its parent reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentInfo {
    /// The child's session id.
    pub id: String,
    /// The parent's `Task` tool call that started it.
    pub tool_call_id: String,
    /// The agent it runs (`explore`, a file's name).
    pub agent: String,
    /// The `Task` call's short description.
    pub description: String,
    /// The prompt it was given.
    pub prompt: String,
}

/// How a child session's work ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubagentState {
    Completed,
    Failed,
    Cancelled,
}

/// Something a child session did, on its parent's events.
#[derive(Debug)]
pub struct SubagentEvent {
    pub child: std::sync::Arc<SubagentInfo>,
    pub update: SubagentUpdate,
}

/// What happened to a child session. A front door that shows child
/// sessions uses `Started`, `Event` and `Ended`; another shows `Progress`
/// inside the parent's `Task` tool call. Both arrive.
#[derive(Debug)]
pub enum SubagentUpdate {
    /// Sent before any other update of the child.
    Started,
    /// One event of the child's own session (its text, reasoning, tool
    /// calls and their updates, usage); never a permission question (that
    /// reaches the parent as its own [`Event::Permission`]) nor a turn's end.
    Event(Box<Event>),
    /// What the child did so far, as text lines and the files touched.
    Progress {
        text: String,
        locations: Vec<PathBuf>,
    },
    /// The child's work ended, with its final answer.
    Ended {
        state: SubagentState,
        answer: String,
    },
}

impl Event {
    /// A copy of the event (a front door serving one session to two
    /// connections hands each its own); `None` for a permission question,
    /// whose reply is one-shot, and for a child's event that holds one.
    pub fn try_clone(&self) -> Option<Event> {
        Some(match self {
            Event::AgentText { message_id, text } => Event::AgentText {
                message_id: message_id.clone(),
                text: text.clone(),
            },
            Event::Thought { message_id, text } => Event::Thought {
                message_id: message_id.clone(),
                text: text.clone(),
            },
            Event::UserMessage {
                message_id,
                text,
                steer,
            } => Event::UserMessage {
                message_id: message_id.clone(),
                text: text.clone(),
                steer: *steer,
            },
            Event::SteerTaken { message_id, text } => Event::SteerTaken {
                message_id: message_id.clone(),
                text: text.clone(),
            },
            Event::UserMessageSaved { message_id } => Event::UserMessageSaved {
                message_id: message_id.clone(),
            },
            Event::Hook(report) => Event::Hook(report.clone()),
            Event::ModelRequest(report) => Event::ModelRequest(report.clone()),
            Event::UserImage {
                message_id,
                mime_type,
                data,
                name,
            } => Event::UserImage {
                message_id: message_id.clone(),
                mime_type: mime_type.clone(),
                data: data.clone(),
                name: name.clone(),
            },
            Event::ToolCall(view) => Event::ToolCall(view.clone()),
            Event::ToolCallUpdate(patch) => Event::ToolCallUpdate(patch.clone()),
            Event::Command {
                tool_call_id,
                progress,
            } => Event::Command {
                tool_call_id: tool_call_id.clone(),
                progress: progress.clone(),
            },
            Event::FilesChanged {
                tool_call_id,
                changes,
                patch,
            } => Event::FilesChanged {
                tool_call_id: tool_call_id.clone(),
                changes: changes.clone(),
                patch: patch.clone(),
            },
            Event::Permission(_) => return None,
            Event::Title(title) => Event::Title(title.clone()),
            Event::ModelChanged(model) => Event::ModelChanged(model.clone()),
            Event::Usage {
                used,
                size,
                cost,
                map,
            } => Event::Usage {
                used: *used,
                size: *size,
                cost: *cost,
                map: map.clone(),
            },
            Event::ModeChanged(mode) => Event::ModeChanged(*mode),
            Event::PlanProposed { id, markdown } => Event::PlanProposed {
                id: id.clone(),
                markdown: markdown.clone(),
            },
            Event::Findings { id, findings } => Event::Findings {
                id: id.clone(),
                findings: findings.clone(),
            },
            Event::Plan(todos) => Event::Plan(todos.clone()),
            Event::Commands(commands) => Event::Commands(commands.clone()),
            Event::Compaction { id, state } => Event::Compaction {
                id: id.clone(),
                state: state.clone(),
            },
            Event::Notice { level, text } => Event::Notice {
                level: *level,
                text: text.clone(),
            },
            Event::TurnFailed(text) => Event::TurnFailed(text.clone()),
            Event::TurnUnfinished { reason, text } => Event::TurnUnfinished {
                reason: *reason,
                text: text.clone(),
            },
            Event::QueueChanged => Event::QueueChanged,
            Event::QueueTurn {
                turn_id,
                queued_id,
                status,
            } => Event::QueueTurn {
                turn_id: turn_id.clone(),
                queued_id: queued_id.clone(),
                status: *status,
            },
            Event::TurnUsage(usage) => Event::TurnUsage(usage.clone()),
            Event::Subagent(sub) => Event::Subagent(SubagentEvent {
                child: sub.child.clone(),
                update: match &sub.update {
                    SubagentUpdate::Started => SubagentUpdate::Started,
                    SubagentUpdate::Event(inner) => {
                        SubagentUpdate::Event(Box::new(inner.try_clone()?))
                    }
                    SubagentUpdate::Progress { text, locations } => SubagentUpdate::Progress {
                        text: text.clone(),
                        locations: locations.clone(),
                    },
                    SubagentUpdate::Ended { state, answer } => SubagentUpdate::Ended {
                        state: *state,
                        answer: answer.clone(),
                    },
                },
            }),
            Event::TurnStarted(turn) => Event::TurnStarted(*turn),
            Event::TurnEnded(stop) => Event::TurnEnded(*stop),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question() -> Event {
        let (reply, _) = oneshot::channel();
        Event::Permission(PermissionRequest {
            tool_call: ToolCallView {
                id: "c".into(),
                name: "Write".into(),
                title: "Write a".into(),
                kind: None,
                locations: Vec::new(),
                raw_input: Value::Null,
                status: ToolStatus::Pending,
                content: Vec::new(),
            },
            options: Vec::new(),
            reply,
        })
    }

    fn of_child(event: Event) -> Event {
        Event::Subagent(SubagentEvent {
            child: std::sync::Arc::new(SubagentInfo {
                id: "child".into(),
                tool_call_id: "task".into(),
                agent: "explore".into(),
                description: "look".into(),
                prompt: "look around".into(),
            }),
            update: SubagentUpdate::Event(Box::new(event)),
        })
    }

    #[test]
    fn an_event_is_copied_whole_and_a_question_is_not() {
        let text = || Event::AgentText {
            message_id: "m".into(),
            text: "hello".into(),
        };
        for event in [
            text(),
            of_child(text()),
            Event::TurnEnded(StopReason::EndTurn),
        ] {
            let copy = event.try_clone().expect("a copy");
            assert_eq!(format!("{copy:?}"), format!("{event:?}"));
        }
        assert!(question().try_clone().is_none());
        assert!(of_child(question()).try_clone().is_none());
    }
}
