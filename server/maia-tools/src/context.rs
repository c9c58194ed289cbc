//! Shared types of a tool call: context, prepared call, diff and output.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::fs::{FileSystem, LocalFs};
use crate::input::ToolInput;
use crate::reads::ReadTracker;

/// Everything a tool needs from its session.
#[derive(Clone)]
pub struct ToolContext {
    /// Absolute session working directory; relative paths resolve against it.
    pub cwd: PathBuf,
    pub fs: Arc<dyn FileSystem>,
    pub reads: Arc<ReadTracker>,
    pub cancel: CancellationToken,
    /// The session's Read rules for the tools that read many files (Grep,
    /// Glob): `false` for a file a Read deny rule covers. `None` = no rule.
    pub read_guard: Option<ReadGuard>,
    /// The sandbox commands run in (`None`: no sandbox).
    pub sandbox: Option<Arc<crate::sandbox::Sandbox>>,
    /// Where Bash runs when not here: the editor's terminals.
    pub terminals: Option<Arc<dyn crate::terminal::Terminals>>,
    /// Told the id of the terminal a Bash call runs in, once it exists.
    pub on_terminal: Option<crate::terminal::TerminalHook>,
    /// Told a Bash command's start, output and exit while it runs here.
    pub on_output: Option<crate::runner::Observer>,
    /// The thread's outputs folder ([`crate::kept::thread_dir`]): an output
    /// over its cap is kept whole there. `None`: cut in the middle.
    pub outputs: Option<PathBuf>,
}

/// Whether a file may be read; see [`ToolContext::read_guard`].
pub type ReadGuard = Arc<dyn Fn(&Path) -> bool + Send + Sync>;

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("cwd", &self.cwd)
            .field("cancel", &self.cancel.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl ToolContext {
    /// A context on the local disk with a fresh read tracker and token.
    pub fn local(cwd: impl Into<PathBuf>) -> Self {
        Self {
            cwd: cwd.into(),
            fs: Arc::new(LocalFs),
            reads: Arc::new(ReadTracker::default()),
            cancel: CancellationToken::new(),
            read_guard: None,
            sandbox: None,
            terminals: None,
            on_terminal: None,
            on_output: None,
            outputs: None,
        }
    }
}

/// A file change shown to the user before it is applied.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FileDiff {
    /// Absolute path.
    pub path: PathBuf,
    /// `None` = new file.
    pub old_text: Option<String>,
    pub new_text: String,
}

impl FileDiff {
    /// A unified diff (3 lines of context) of the change, for logs or
    /// clients that cannot render a diff themselves.
    pub fn unified_diff(&self) -> String {
        let old = self.old_text.as_deref().unwrap_or("");
        let name = self.path.display().to_string();
        let old_name = if self.old_text.is_some() {
            name.clone()
        } else {
            "/dev/null".to_string()
        };
        similar::TextDiff::from_lines(old, &self.new_text)
            .unified_diff()
            .context_radius(3)
            .header(&old_name, &name)
            .to_string()
    }
}

/// A validated call, ready for permission and execution.
#[derive(Debug)]
pub struct Prepared {
    pub input: ToolInput,
    pub diff: Option<FileDiff>,
}

/// What the model gets back from a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
    /// Images for the model (Read of an image, MCP results); `content`
    /// names them.
    pub images: Vec<crate::image::ImageData>,
    /// A command failed in the sandbox and the sandbox may be the cause
    /// ([`crate::sandbox::denial`]): known where its exit is told
    /// ([`crate::runner::exit_output`]), never read back from `content`.
    pub sandbox_denied: bool,
    /// The file's text after a write the user reviewed before it was made,
    /// when it is not the proposed change (some of its hunks were undone):
    /// the diff shown for the call is then the one written.
    pub written: Option<String>,
}

impl ToolOutput {
    /// A successful output.
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            images: Vec::new(),
            sandbox_denied: false,
            written: None,
        }
    }

    /// A failed output.
    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            images: Vec::new(),
            sandbox_denied: false,
            written: None,
        }
    }

    /// The output of a cancelled call.
    pub fn cancelled() -> Self {
        Self::error("cancelled")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unified_diff_shows_change() {
        let diff = FileDiff {
            path: PathBuf::from("/p/a.txt"),
            old_text: Some("a\nb\n".into()),
            new_text: "a\nc\n".into(),
        };
        let text = diff.unified_diff();
        assert!(text.contains("-b\n") && text.contains("+c\n"), "{text}");
    }
}
