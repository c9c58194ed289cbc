//! Implementations of the individual tools, plus helpers they share.

pub(crate) mod bash;
pub(crate) mod edit;
pub(crate) mod glob;
pub(crate) mod grep;
pub(crate) mod multiedit;
pub(crate) mod read;
pub(crate) mod webfetch;
pub(crate) mod write;

use std::path::{Path, PathBuf};

use ignore::WalkBuilder;

use crate::context::{FileDiff, ToolContext, ToolOutput};
use crate::error::ToolError;
use crate::fs::{FsError, WriteOutcome};

/// Reads `path` through the context's file system; a missing file is `None`.
pub(crate) async fn read_optional(
    ctx: &ToolContext,
    path: &Path,
) -> Result<Option<String>, ToolError> {
    match ctx.fs.read_to_string(path).await {
        Ok(text) => Ok(Some(text)),
        Err(FsError::NotFound(_)) => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// Fails when the file no longer has the content the diff was computed from
/// (it changed while the user was asked for permission).
pub(crate) async fn verify_unchanged(diff: &FileDiff, ctx: &ToolContext) -> Result<(), ToolError> {
    let current = read_optional(ctx, &diff.path).await?;
    if current == diff.old_text {
        Ok(())
    } else {
        tracing::debug!(path = %diff.path.display(), "file changed while waiting for permission");
        Err(ToolError::ChangedWhileWaiting(diff.path.clone()))
    }
}

/// Records what a write left in the file. A change the user reviewed
/// (some parts possibly rejected) is reported as the review says; `None`
/// means it was written whole and the tool reports it its own way.
pub(crate) fn reviewed(
    diff: &FileDiff,
    outcome: WriteOutcome,
    ctx: &ToolContext,
) -> Option<ToolOutput> {
    match outcome {
        WriteOutcome::Written => {
            ctx.reads.record(&diff.path, &diff.new_text);
            None
        }
        WriteOutcome::Reviewed {
            text,
            applied,
            report,
        } => {
            ctx.reads.record(&diff.path, &text);
            Some(if applied {
                ToolOutput {
                    written: (text != diff.new_text).then_some(text),
                    ..ToolOutput::ok(report)
                }
            } else {
                ToolOutput::error(report)
            })
        }
    }
}

/// A directory walker that respects .gitignore (also outside git
/// repositories) and skips hidden files.
pub(crate) fn walker(root: &Path) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(true)
        .ignore(true)
        .parents(true)
        .require_git(false)
        .follow_links(false);
    builder
}

/// True for regular files, and for symlinks pointing at regular files.
pub(crate) fn is_file_entry(entry: &ignore::DirEntry) -> bool {
    match entry.file_type() {
        Some(ft) if ft.is_file() => true,
        Some(ft) if ft.is_symlink() => entry.path().is_file(),
        _ => false,
    }
}

/// What Grep and Glob may show of the files they walk: a file is skipped
/// when its resolved path leaves the resolved search root (a symlink out of
/// the folder the rule allowed) or when the session's Read rules deny it
/// (checked on the path as walked and as resolved). Skips are counted and
/// reported in the result.
pub(crate) struct Screen {
    root: PathBuf,
    guard: Option<crate::context::ReadGuard>,
    skipped: std::sync::atomic::AtomicUsize,
}

impl Screen {
    pub(crate) fn new(root: &Path, guard: Option<crate::context::ReadGuard>) -> Self {
        Screen {
            root: std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf()),
            guard,
            skipped: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Whether `path` may be shown; counts it otherwise.
    pub(crate) fn admits(&self, path: &Path) -> bool {
        let ok = match std::fs::canonicalize(path) {
            Ok(real) => {
                real.starts_with(&self.root)
                    && self.guard.as_ref().is_none_or(|g| g(path) && g(&real))
            }
            Err(_) => false,
        };
        if !ok {
            self.skipped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        ok
    }

    /// The note added to a result, when files were skipped.
    pub(crate) fn note(&self) -> Option<String> {
        match self.skipped.load(std::sync::atomic::Ordering::Relaxed) {
            0 => None,
            n => Some(format!(
                "({n} file{} skipped: denied by a Read rule, or a symlink leading outside the searched folder.)",
                if n == 1 { "" } else { "s" }
            )),
        }
    }
}

/// Modification time of a walked entry (epoch when unknown).
pub(crate) fn mtime(entry: &ignore::DirEntry) -> std::time::SystemTime {
    entry
        .metadata()
        .ok()
        .and_then(|m| m.modified().ok())
        .unwrap_or(std::time::UNIX_EPOCH)
}

/// Ensures the search root exists.
pub(crate) async fn existing_root(root: &Path) -> Result<std::fs::Metadata, ToolError> {
    tokio::fs::metadata(root)
        .await
        .map_err(|_| ToolError::PathNotFound(root.to_path_buf()))
}

#[cfg(test)]
pub(crate) mod test_util {
    use std::path::Path;

    use crate::context::{ToolContext, ToolOutput};
    use crate::input::ToolInput;

    pub(crate) fn ctx(dir: &Path) -> ToolContext {
        ToolContext::local(dir)
    }

    /// Parses, prepares and executes a call; prepare errors become error outputs.
    pub(crate) async fn run(ctx: &ToolContext, name: &str, args: serde_json::Value) -> ToolOutput {
        let input = match ToolInput::parse(name, &args.to_string()) {
            Ok(input) => input,
            Err(e) => return ToolOutput::error(e.to_string()),
        };
        match crate::prepare(input, ctx).await {
            Ok(prepared) => crate::execute(prepared, ctx).await,
            Err(e) => ToolOutput::error(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(text: &str, applied: bool) -> WriteOutcome {
        WriteOutcome::Reviewed {
            text: text.to_owned(),
            applied,
            report: "report".to_owned(),
        }
    }

    #[test]
    fn a_partly_kept_change_says_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = test_util::ctx(dir.path());
        let diff = FileDiff {
            path: dir.path().join("a.txt"),
            old_text: Some("a\nb\n".into()),
            new_text: "A\nB\n".into(),
        };
        let partly = reviewed(&diff, outcome("A\nb\n", true), &ctx).unwrap();
        assert!(!partly.is_error);
        assert_eq!(partly.written.as_deref(), Some("A\nb\n"));
        // Kept whole: the proposal is what was written.
        let whole = reviewed(&diff, outcome("A\nB\n", true), &ctx).unwrap();
        assert_eq!(whole.written, None);
        // Nothing kept: an error, nothing written to show.
        let none = reviewed(&diff, outcome("a\nb\n", false), &ctx).unwrap();
        assert!(none.is_error);
        assert_eq!(none.written, None);
        assert!(reviewed(&diff, WriteOutcome::Written, &ctx).is_none());
    }
}
