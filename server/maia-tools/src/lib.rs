//! The model-facing tools of MAIA: Read, Write, Edit, MultiEdit, Glob, Grep, Bash and
//! WebFetch.
//!
//! A tool call goes through two steps:
//! 1. [`prepare`] validates the typed [`ToolInput`] and, for Write, Edit and MultiEdit,
//!    computes the [`FileDiff`] shown to the user before permission is asked;
//! 2. [`execute`] runs it and returns a [`ToolOutput`] for the model.
//!
//! The crate knows nothing about protocols; files go through the
//! [`FileSystem`] in the [`ToolContext`].

pub mod background;
mod context;
mod definitions;
mod error;
pub mod fs;
pub mod guard;
pub mod image;
mod input;
pub mod kept;
pub mod path;
pub mod process;
pub mod reads;
pub mod runner;
pub mod sandbox;
mod shell;
pub mod terminal;
mod tools;
mod truncate;

pub use context::{FileDiff, Prepared, ReadGuard, ToolContext, ToolOutput};
pub use definitions::{Changes, GENERIC_NARROW_HINT, ToolDefinition, definitions};
pub use error::ToolError;
pub use fs::{FileSystem, FsError, LocalFs, WriteOutcome};
pub use image::{ImageData, ImageError};
pub use input::{
    BashInput, DEFAULT_BASH_TIMEOUT_MS, DEFAULT_WEBFETCH_MAX_LENGTH, EditInput, EditOp, GlobInput,
    GrepInput, GrepMode, MAX_BASH_TIMEOUT_MS, MAX_WEBFETCH_MAX_LENGTH, MultiEditInput, ReadInput,
    TOOL_NAMES, ToolInput, ToolKind, WebFetchInput, WriteInput, rule_parent,
};
pub use reads::{ReadTracker, StaleRead};
pub use shell::{Shell, shell};
pub use terminal::{
    TerminalError, TerminalExit, TerminalHook, TerminalOutput, TerminalRequest, Terminals,
};
pub use tools::webfetch::{WEBFETCH_MAX_BODY_BYTES, WEBFETCH_TIMEOUT};
pub use truncate::{CappedOutput, omission_note, truncate_middle};

/// Validates `input` and computes what the user must see before permission.
///
/// Write: reads the current file through `ctx.fs` (missing → `old_text`
/// `None`) and builds the diff. Edit: reads through `ctx.fs`, requires that the
/// file was read (or written) in this session and is unchanged since, applies
/// the replacement and builds the diff. Other tools: no diff, minimal
/// validation (regex and globs compile, WebFetch's URL is http(s)).
pub async fn prepare(input: ToolInput, ctx: &ToolContext) -> Result<Prepared, ToolError> {
    let diff = match &input {
        ToolInput::Read(_) | ToolInput::Bash(_) => None,
        ToolInput::Write(i) => Some(tools::write::prepare(i, ctx).await?),
        ToolInput::Edit(i) => Some(tools::edit::prepare(i, ctx).await?),
        ToolInput::MultiEdit(i) => Some(tools::multiedit::prepare(i, ctx).await?),
        ToolInput::Glob(i) => {
            tools::glob::Matcher::new(&i.pattern)?;
            None
        }
        ToolInput::Grep(i) => {
            tools::grep::Query::new(i)?;
            None
        }
        ToolInput::WebFetch(i) => {
            tools::webfetch::parse_url(&i.url)?;
            None
        }
    };
    Ok(Prepared { input, diff })
}

/// Runs the tool. Never panics; failures are returned as an error
/// [`ToolOutput`] with a message for the model. Honours `ctx.cancel`.
pub async fn execute(prepared: Prepared, ctx: &ToolContext) -> ToolOutput {
    if ctx.cancel.is_cancelled() {
        return ToolOutput::cancelled();
    }
    let name = prepared.input.name();
    // Bash handles cancellation itself (it must kill its process group).
    if let ToolInput::Bash(i) = &prepared.input {
        return tools::bash::execute(i, ctx).await;
    }
    let run = async {
        match prepared.input {
            ToolInput::Read(i) => tools::read::execute(&i, ctx).await,
            ToolInput::Write(i) => tools::write::execute(&i, prepared.diff, ctx).await,
            ToolInput::Edit(i) => tools::edit::execute(&i, prepared.diff, ctx).await,
            ToolInput::MultiEdit(i) => tools::multiedit::execute(&i, prepared.diff, ctx).await,
            ToolInput::Glob(i) => tools::glob::execute(&i, ctx).await,
            ToolInput::Grep(i) => tools::grep::execute(&i, ctx).await,
            ToolInput::Bash(i) => Ok(tools::bash::execute(&i, ctx).await),
            ToolInput::WebFetch(i) => tools::webfetch::execute(&i).await,
        }
    };
    let result = tokio::select! {
        biased;
        () = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
        result = run => result,
    };
    match result {
        Ok(output) => output,
        Err(ToolError::Cancelled) => ToolOutput::cancelled(),
        Err(err) => {
            tracing::debug!(tool = name, error = %err, "tool failed");
            ToolOutput::error(err.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};
    use std::sync::{Arc, Mutex};

    use super::*;

    /// An editor-like file system kept in memory.
    #[derive(Default)]
    struct MemFs(Mutex<HashMap<PathBuf, String>>);

    #[async_trait::async_trait]
    impl FileSystem for MemFs {
        async fn read_to_string(&self, path: &Path) -> Result<String, FsError> {
            self.0
                .lock()
                .unwrap()
                .get(path)
                .cloned()
                .ok_or_else(|| FsError::NotFound(path.to_path_buf()))
        }
        async fn write(&self, path: &Path, content: &str) -> Result<(), FsError> {
            self.0
                .lock()
                .unwrap()
                .insert(path.to_path_buf(), content.to_string());
            Ok(())
        }
    }

    #[tokio::test]
    async fn file_tools_go_through_ctx_fs() {
        let fs = Arc::new(MemFs::default());
        let mut ctx = ToolContext::local("/virtual");
        ctx.fs = fs.clone();
        let call = |name: &str, args: &str| ToolInput::parse(name, args).unwrap();

        let p = prepare(
            call("Write", r#"{"file_path":"a.txt","content":"hi\n"}"#),
            &ctx,
        )
        .await
        .unwrap();
        assert_eq!(
            p.diff,
            Some(FileDiff {
                path: PathBuf::from("/virtual/a.txt"),
                old_text: None,
                new_text: "hi\n".into()
            })
        );
        assert!(!execute(p, &ctx).await.is_error);

        let read = prepare(call("Read", r#"{"file_path":"/virtual/a.txt"}"#), &ctx)
            .await
            .unwrap();
        assert_eq!(execute(read, &ctx).await.content, "     1\thi\n");

        let edit = call(
            "Edit",
            r#"{"file_path":"a.txt","old_string":"hi","new_string":"bye"}"#,
        );
        let p = prepare(edit, &ctx).await.unwrap();
        assert!(!execute(p, &ctx).await.is_error);
        assert_eq!(
            fs.0.lock()
                .unwrap()
                .get(Path::new("/virtual/a.txt"))
                .unwrap(),
            "bye\n"
        );
    }

    #[tokio::test]
    async fn cancelled_before_start() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "x").unwrap();
        let ctx = ToolContext::local(dir.path());
        ctx.cancel.cancel();
        for (name, args) in [
            ("Read", r#"{"file_path":"a.txt"}"#),
            ("Grep", r#"{"pattern":"x"}"#),
            ("Bash", r#"{"command":"echo hi"}"#),
        ] {
            let p = prepare(ToolInput::parse(name, args).unwrap(), &ctx)
                .await
                .unwrap();
            assert_eq!(execute(p, &ctx).await, ToolOutput::cancelled());
        }
    }
}
