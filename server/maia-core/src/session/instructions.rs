//! Instruction files of sub-folders: the first time a tool works in a
//! folder below the session folder, its `MAIA.md` / `AGENTS.md` /
//! `CLAUDE.md` (and those of the folders between) are added to that tool's
//! result, once per thread, and the user is told. "Once" is read from the
//! messages themselves (a marker line per file), so a resumed thread does not
//! add them again, and a compaction (which replaces the messages) lets them
//! come back when next needed.

use std::path::{Path, PathBuf};

use maia_llm::ToolCall;

use crate::context_file::{self, Seen};
use crate::event::{Event, NoticeLevel};
use crate::session::Session;

/// Starts the marker line of an added file; the path follows in backticks.
const MARKER: &str = "[MAIA: instructions from `";

/// The folder a call works in, from its `file_path` or `path` argument.
fn folder_of(call: &ToolCall, cwd: &Path) -> Option<PathBuf> {
    let args: serde_json::Value = serde_json::from_str(&call.arguments).ok()?;
    let (given, is_file) = match (args.get("file_path"), args.get("path")) {
        (Some(p), _) => (p.as_str()?, true),
        (None, Some(p)) => (p.as_str()?, false),
        _ => return None,
    };
    let path = maia_tools::path::resolve(cwd, given);
    let dir = if is_file || !path.is_dir() {
        path.parent()?.to_path_buf()
    } else {
        path
    };
    dir.starts_with(cwd).then_some(dir)
}

impl Session {
    /// The sub-folder instruction files already in the messages.
    pub(crate) fn sub_folder_instructions(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for message in self.conversation.history() {
            let maia_llm::ChatMessage::Tool { content, .. } = message else {
                continue;
            };
            for piece in content.split(MARKER).skip(1) {
                if let Some((path, _)) = piece.split_once('`') {
                    out.push(PathBuf::from(path));
                }
            }
        }
        out
    }

    /// The text to add to `call`'s result: the instruction files of the
    /// sub-folders it worked in that the thread has not seen; the user is
    /// told of each.
    pub(crate) fn sub_folder_addendum(&mut self, call: &ToolCall) -> Option<String> {
        let cwd = self.services.cwd.clone();
        let dir = folder_of(call, &cwd)?;
        if dir == cwd {
            return None;
        }
        let mut seen = Seen::of(&self.project.context_files.files);
        let (found, warnings) =
            crate::blocking::off_runtime(|| context_file::in_folders_below(&cwd, &dir, &mut seen));
        for warning in warnings {
            self.emit(Event::Notice {
                level: NoticeLevel::Warning,
                text: warning,
            });
        }
        if found.is_empty() {
            return None;
        }
        let already = self.sub_folder_instructions();
        let mut out = String::new();
        for file in found {
            if already.contains(&file.path) {
                continue;
            }
            let under = file.path.parent().unwrap_or(&cwd);
            out.push_str(&format!(
                "\n\n{MARKER}{}` (first work in `{}`); follow them for files under that folder, where they conflict with broader instructions they win:]\n\n{}",
                file.path.display(),
                under.display(),
                file.text.trim_end()
            ));
            tracing::info!(path = %file.path.display(), "sub-folder instruction file added");
            self.emit(Event::Notice {
                level: NoticeLevel::Info,
                text: format!(
                    "Instruction file loaded: {} (a tool first worked in {})",
                    file.path.display(),
                    under.display()
                ),
            });
        }
        (!out.is_empty()).then_some(out)
    }
}
