//! Commands and their file changes on ACP v2: a command MAIA runs is an
//! agent-owned terminal (`terminal_update` with its command and folder,
//! `terminal_output_chunk`s of base64 bytes as the engine streams them,
//! `terminal_update` with its `exitStatus`), which its tool call shows as
//! `{type: "terminal", terminalId}` content; and the file states a batch's
//! commands left (`FilesChanged`) appended to the owning call as one
//! `diff` item (`tool_call_content_chunk`) with the checkpoints' git patch.
//!
//! A call with a terminal keeps the terminal as its content: the result
//! text the model saw (which repeats the output) moves to `rawOutput`
//! (`{"output": text}`) instead of replacing it. Replays (no terminal left)
//! show that text, as for v1.

use std::collections::BTreeSet;
use std::sync::Mutex;

use agent_client_protocol_schema::MaybeUndefined;
use agent_client_protocol_schema::v2::{
    Diff, DiffChange, DiffFileType, SessionUpdate, TerminalCancelCapabilities,
    TerminalCapabilities, TerminalExitStatus, TerminalOutputChunk, TerminalUpdate, ToolCallContent,
    ToolCallContentChunk,
};
use base64::Engine as _;
use maia_core::{CommandProgress, FileChange, FileOperation, ToolCallPatch, ToolContent};

use super::super::forward::lock;

/// The tool calls of a v2 session that show a terminal.
#[derive(Default)]
pub(in crate::acp) struct Terminals {
    calls: Mutex<BTreeSet<String>>,
}

/// The terminal of tool call `id` (one command per call; never reused).
fn terminal_id(call: &str) -> String {
    format!("term-{call}")
}

/// The tool call whose command terminal `terminal` is.
pub(in crate::acp) fn call_of(terminal: &str) -> Option<&str> {
    terminal
        .strip_prefix("term-")
        .filter(|call| !call.is_empty())
}

impl Terminals {
    /// What tool call `call`'s command `progress` is on v2.
    pub(in crate::acp) fn command(
        &self,
        call: &str,
        progress: CommandProgress,
    ) -> Vec<SessionUpdate> {
        let id = terminal_id(call);
        match progress {
            CommandProgress::Started { command, cwd } => {
                lock(&self.calls).insert(call.to_owned());
                let terminal = TerminalUpdate::new(id.clone())
                    .command(command)
                    .cwd(cwd)
                    .capabilities(
                        TerminalCapabilities::new().cancel(TerminalCancelCapabilities::new()),
                    );
                let shown = agent_client_protocol_schema::v2::ToolCallUpdate::new(call.to_owned())
                    .content(vec![ToolCallContent::Terminal(
                        agent_client_protocol_schema::v2::Terminal::new(id),
                    )]);
                vec![
                    SessionUpdate::TerminalUpdate(terminal),
                    SessionUpdate::ToolCallUpdate(shown),
                ]
            }
            CommandProgress::Output(bytes) => {
                let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
                vec![SessionUpdate::TerminalOutputChunk(
                    TerminalOutputChunk::new(id, data),
                )]
            }
            CommandProgress::Exited { code, signal } => {
                let exit = TerminalExitStatus::new()
                    .exit_code(code.map(i64::from))
                    .signal(signal);
                vec![SessionUpdate::TerminalUpdate(
                    TerminalUpdate::new(id)
                        .exit_status(exit)
                        .capabilities(MaybeUndefined::Null),
                )]
            }
        }
    }

    /// `patch` as a v2 client sees it: a call with a terminal keeps it as
    /// its content, the text the model saw going to `rawOutput`. Its last
    /// update (completed or failed) forgets the call.
    pub(in crate::acp) fn patch(&self, mut patch: ToolCallPatch) -> ToolCallPatch {
        let mut calls = lock(&self.calls);
        if !calls.contains(&patch.id) {
            return patch;
        }
        if let Some(content) = patch.content.take() {
            let mut kept = vec![ToolContent::Terminal {
                terminal_id: terminal_id(&patch.id),
            }];
            let mut texts = Vec::new();
            for item in content {
                match item {
                    ToolContent::Text { text } => texts.push(text),
                    ToolContent::Terminal { .. } => {}
                    other => kept.push(other),
                }
            }
            if patch.raw_output.is_none() && !texts.is_empty() {
                patch.raw_output = Some(serde_json::json!({ "output": texts.join("\n") }));
            }
            patch.content = Some(kept);
        }
        if matches!(
            patch.status,
            Some(maia_core::ToolStatus::Completed | maia_core::ToolStatus::Failed)
        ) {
            calls.remove(&patch.id);
        }
        patch
    }
}

/// A batch's command file changes, appended to tool call `call`.
pub(in crate::acp) fn files_changed(
    call: &str,
    changes: &[FileChange],
    patch: Option<String>,
) -> SessionUpdate {
    let changes = changes
        .iter()
        .map(|change| {
            let path = change.path.clone();
            let v2 = match &change.operation {
                FileOperation::Added => DiffChange::add(path),
                FileOperation::Deleted => DiffChange::delete(path),
                FileOperation::Modified => DiffChange::modify(path),
                FileOperation::Moved { from } => DiffChange::move_file(from.clone(), path),
            };
            let kind = if change.symlink {
                DiffFileType::Symlink
            } else if change.binary {
                DiffFileType::Binary
            } else {
                DiffFileType::Text
            };
            v2.file_type(kind)
        })
        .collect();
    let diff = match patch {
        Some(text) => Diff::patch(text, changes),
        None => Diff::new(changes),
    };
    SessionUpdate::ToolCallContentChunk(ToolCallContentChunk::new(
        call.to_owned(),
        ToolCallContent::Diff(diff),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_a_terminal_and_its_result_text_moves_to_raw_output() {
        let terminals = Terminals::default();
        let started = terminals.command(
            "c1",
            CommandProgress::Started {
                command: "ls".into(),
                cwd: "/p".into(),
            },
        );
        let json = serde_json::to_value(&started).unwrap_or_default();
        assert_eq!(json[0]["sessionUpdate"], "terminal_update", "{json}");
        assert_eq!(json[0]["terminalId"], "term-c1", "{json}");
        assert_eq!(json[1]["content"][0]["terminalId"], "term-c1", "{json}");
        let out = terminals.command("c1", CommandProgress::Output(b"hi\n".to_vec()));
        let json = serde_json::to_value(&out).unwrap_or_default();
        assert_eq!(json[0]["data"], "aGkK", "{json}");
        let end = ToolCallPatch {
            id: "c1".into(),
            status: Some(maia_core::ToolStatus::Completed),
            content: Some(vec![ToolContent::Text {
                text: "hi\nExit code: 0".into(),
            }]),
            raw_output: None,
        };
        let end = terminals.patch(end);
        assert_eq!(
            end.content,
            Some(vec![ToolContent::Terminal {
                terminal_id: "term-c1".into()
            }])
        );
        assert_eq!(
            end.raw_output,
            Some(serde_json::json!({"output": "hi\nExit code: 0"}))
        );
        // Forgotten once done: a later patch passes as it is.
        let later = ToolCallPatch {
            id: "c1".into(),
            content: Some(Vec::new()),
            ..ToolCallPatch::default()
        };
        assert_eq!(terminals.patch(later.clone()), later);
    }
}
