//! Tool errors; `Display` is the message handed to the model.

use std::path::PathBuf;

use crate::fs::FsError;

/// Why a tool call could not be prepared or run.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error(
        "Unknown tool `{0}`. Available tools: Read, Write, Edit, MultiEdit, Glob, Grep, Bash, WebFetch."
    )]
    UnknownTool(String),
    #[error("Invalid arguments for {tool}: {message}")]
    InvalidArguments { tool: String, message: String },
    #[error("{0}")]
    Fs(#[from] FsError),
    #[error("You must Read {} before editing it.", .0.display())]
    NotRead(PathBuf),
    #[error("{} has changed since you last read it. Read it again before editing.", .0.display())]
    ChangedSinceRead(PathBuf),
    #[error(
        "{} was modified while waiting for permission. Read it again and retry.",
        .0.display()
    )]
    ChangedWhileWaiting(PathBuf),
    #[error(
        "old_string must not be empty. To create a file or replace its whole content, use the Write tool."
    )]
    EmptyOldString,
    #[error("old_string and new_string are identical; there is nothing to change.")]
    NoChange,
    #[error(
        "old_string was not found in {}. It must match the file exactly, including whitespace and indentation; Read the file again if unsure.",
        .0.display()
    )]
    OldStringNotFound(PathBuf),
    #[error(
        "old_string occurs {count} times in {}. Include more surrounding context to make it unique, or set replace_all to true.",
        .path.display()
    )]
    OldStringNotUnique { path: PathBuf, count: usize },
    #[error("Edit {number} of {total} failed, so none was applied: {source}")]
    InMultiEdit {
        /// 1-based.
        number: usize,
        total: usize,
        source: Box<ToolError>,
    },
    #[error("Invalid {what} `{pattern}`: {message}")]
    InvalidPattern {
        what: &'static str,
        pattern: String,
        message: String,
    },
    #[error("Path not found: {}", .0.display())]
    PathNotFound(PathBuf),
    #[error("cancelled")]
    Cancelled,
    #[error("{0}")]
    Other(String),
}
