//! File checkpoints: snapshots of the project taken around the tool calls
//! that may change files, so that a turn's (or one call's) file changes can
//! be undone exactly, shell commands' changes included.
//!
//! The mechanism is a shadow git repository driven by the `git` binary
//! ([`git`]): one per project in `<cwd>/.maia/.sessions/.checkpoints/`, one
//! index per session, a snapshot is `git add -A` + `git write-tree`, and
//! each tree is kept reachable by `refs/maia/<session>/<n>`. git gives the
//! user's ignore rules, content-addressed storage and a stat cache that
//! makes a snapshot of an unchanged tree cheap; the user's own `.git` is
//! never touched. A file-system watch ([`watch`]) tells when nothing
//! changed since the latest snapshot, which is then the answer without a
//! walk or a git process ([`Checkpoints`], in `taker`), and which paths
//! changed otherwise: only those are walked and staged again ([`delta`]). What git does not keep is kept beside it in the journal
//! record ([`Checkpoint`]): the full mode of files that are not 644/755,
//! and the files over the size bound (named as not captured). The journal
//! is the one owner of the checkpoint list ([`Timeline`], derived from its
//! records like the rest of the conversation's state); reverting is planned
//! and applied by [`plan`].

mod batch;
pub mod delta;
pub mod git;
pub mod plan;
pub mod restore;
mod taker;
pub mod walk;
pub mod watch;

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

use crate::settings::{FileContent, SettingsFiles};

pub use batch::records_of_batch;
pub use plan::{FileKind, PlannedFile, RevertError, RevertReport, RevertRequest, RevertTarget};
pub use taker::Checkpoints;

/// Default `checkpoints.maxFileBytes`: 5 MiB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 5 * 1024 * 1024;
/// Default `checkpoints.maxFiles`.
pub const DEFAULT_MAX_FILES: usize = 100_000;

/// The `checkpoints` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `checkpoints.enabled` (default true).
    pub enabled: bool,
    /// `checkpoints.maxFileBytes`: larger files are not captured (named).
    pub max_file_bytes: u64,
    /// `checkpoints.maxFiles`: above it checkpoints are off for the session.
    pub max_files: usize,
    /// `checkpoints.watch` (default true): a file-system watch tells when
    /// nothing changed; false: every snapshot rescans the project (for
    /// file systems whose changes the watch cannot see, e.g. network ones).
    pub watch: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            enabled: true,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_files: DEFAULT_MAX_FILES,
            watch: true,
        }
    }
}

/// The `checkpoints` settings of the files (`"checkpoints": {"enabled",
/// "maxFileBytes", "maxFiles", "watch"}` or `"checkpoints.KEY"`; the folder's file
/// wins key by key), and the problems found.
pub fn settings(files: &SettingsFiles) -> (Settings, Vec<String>) {
    let mut out = Settings::default();
    let mut warnings = Vec::new();
    for file in files.files() {
        let FileContent::Json(serde_json::Value::Object(map)) = &file.content else {
            continue;
        };
        let object = map.get("checkpoints").and_then(|v| v.as_object());
        let key = |name: &str| {
            map.get(&format!("checkpoints.{name}"))
                .or_else(|| object.and_then(|o| o.get(name)))
        };
        if let Some(value) = key("enabled") {
            match value.as_bool() {
                Some(b) => out.enabled = b,
                None => warnings.push(format!(
                    "checkpoints.enabled in {} must be true or false; ignored",
                    file.path.display()
                )),
            }
        }
        if let Some(value) = key("watch") {
            match value.as_bool() {
                Some(b) => out.watch = b,
                None => warnings.push(format!(
                    "checkpoints.watch in {} must be true or false; ignored",
                    file.path.display()
                )),
            }
        }
        if let Some(value) = key("maxFileBytes") {
            match value.as_u64() {
                Some(n) => out.max_file_bytes = n,
                None => warnings.push(format!(
                    "checkpoints.maxFileBytes in {} must be a number of bytes; ignored",
                    file.path.display()
                )),
            }
        }
        if let Some(value) = key("maxFiles") {
            match value.as_u64().and_then(|n| usize::try_from(n).ok()) {
                Some(n) => out.max_files = n,
                None => warnings.push(format!(
                    "checkpoints.maxFiles in {} must be a number; ignored",
                    file.path.display()
                )),
            }
        }
    }
    (out, warnings)
}

/// One checkpoint as the journal keeps it: the project's tree before and
/// after a mutating tool call (or a batch of them), and what git could not
/// keep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Unique within the thread.
    pub id: String,
    /// The user message whose turn made the change.
    pub message_id: String,
    /// The tool call that made it (`None`: a `!command`, or calls of one
    /// batch whose changes cannot be told apart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Tree before, tree after (in the shadow repository).
    pub before: String,
    pub after: String,
    /// Only these paths belong to this checkpoint (calls of one batch
    /// share the trees); `None`: every path that differs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<Vec<String>>,
    /// Files over the size bound, not captured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_captured: Vec<String>,
    /// Exact modes of files whose mode is not 644/755, before and after.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub before_modes: BTreeMap<String, u32>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub after_modes: BTreeMap<String, u32>,
    /// Changes an undo cannot restore (what git cannot hold), named.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_restored: Vec<NotRestored>,
    /// Folders the change created: an undo removes them when left empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub created_dirs: Vec<String>,
}

/// A change an undo cannot restore: a file, or the folder it sits in,
/// with why and how many of its files changed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NotRestored {
    pub path: String,
    pub why: walk::Escape,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub files: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl NotRestored {
    /// `` `path` (why) ``, in words.
    pub fn describe(&self) -> String {
        match self.files {
            0 | 1 => format!("`{}` ({})", self.path, self.why.describe()),
            n => format!("`{}` ({n} files; {})", self.path, self.why.describe()),
        }
    }
}

/// What the journal says of the thread's checkpoints: the list, which were
/// reverted, the tool calls and user messages known (derived from the
/// records as a reload derives it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timeline {
    pub checkpoints: Vec<Checkpoint>,
    pub reverted: BTreeSet<String>,
    /// The conflicts an undo of each reverted checkpoint kept (the user had
    /// changed them): what a forced revert of it still restores.
    pub kept: BTreeMap<String, BTreeSet<String>>,
    /// Tool call ids of the thread.
    pub tool_calls: BTreeSet<String>,
    /// User message ids in order.
    pub messages: Vec<String>,
}

impl Timeline {
    /// A checkpoint was recorded.
    pub fn add(&mut self, checkpoint: &Checkpoint) {
        self.note_message(&checkpoint.message_id);
        if let Some(call) = &checkpoint.tool_call_id {
            self.tool_calls.insert(call.clone());
        }
        self.checkpoints.push(checkpoint.clone());
    }

    /// Notes a user message id (in order; a repeat is ignored).
    pub fn note_message(&mut self, id: &str) {
        if !self.messages.iter().any(|m| m == id) {
            self.messages.push(id.to_owned());
        }
    }

    /// Checkpoints were reverted, keeping `conflicts` as the user left them.
    pub fn revert(&mut self, ids: &[String], conflicts: &[String]) {
        for id in ids {
            self.reverted.insert(id.clone());
            let kept: BTreeSet<String> = conflicts.iter().cloned().collect();
            if kept.is_empty() {
                self.kept.remove(id);
            } else {
                self.kept.insert(id.clone(), kept);
            }
        }
    }

    /// The checkpoints `target` undoes (not reverted yet), oldest first.
    pub fn select(&self, target: &RevertTarget) -> Result<Vec<Checkpoint>, RevertError> {
        self.select_for(target, false)
    }

    /// As [`Timeline::select`]; `force` also takes the reverted ones whose
    /// undo kept conflicts, narrowed to those paths.
    pub fn select_for(
        &self,
        target: &RevertTarget,
        force: bool,
    ) -> Result<Vec<Checkpoint>, RevertError> {
        let chosen = self.chosen(target, force)?;
        Ok(chosen
            .into_iter()
            .map(|mut c| {
                if self.reverted.contains(&c.id)
                    && let Some(kept) = self.kept.get(&c.id)
                {
                    let mine: Vec<String> = match &c.paths {
                        Some(paths) => paths
                            .iter()
                            .filter(|p| kept.contains(*p))
                            .cloned()
                            .collect(),
                        None => kept.iter().cloned().collect(),
                    };
                    c.paths = Some(mine);
                }
                c
            })
            .collect())
    }

    fn chosen(&self, target: &RevertTarget, force: bool) -> Result<Vec<Checkpoint>, RevertError> {
        let live = |c: &&Checkpoint| {
            !self.reverted.contains(&c.id) || (force && self.kept.contains_key(&c.id))
        };
        let chosen: Vec<Checkpoint> = match target {
            RevertTarget::ToolCall(id) => {
                if !self.tool_calls.contains(id) {
                    return Err(RevertError::UnknownToolCall(id.clone()));
                }
                self.checkpoints
                    .iter()
                    .filter(live)
                    .filter(|c| c.tool_call_id.as_deref() == Some(id.as_str()))
                    .cloned()
                    .collect()
            }
            RevertTarget::FromMessage(id) => {
                let Some(from) = self.messages.iter().position(|m| m == id) else {
                    return Err(RevertError::UnknownMessage(id.clone()));
                };
                let later: BTreeSet<&String> = self.messages[from..].iter().collect();
                self.checkpoints
                    .iter()
                    .filter(live)
                    .filter(|c| later.contains(&c.message_id))
                    .cloned()
                    .collect()
            }
            RevertTarget::LastTurn => {
                let Some(last) = self.checkpoints.iter().rev().find(live) else {
                    return Err(RevertError::NothingToRevert);
                };
                let message = last.message_id.clone();
                self.checkpoints
                    .iter()
                    .filter(live)
                    .filter(|c| c.message_id == message)
                    .cloned()
                    .collect()
            }
        };
        if chosen.is_empty() {
            return Err(RevertError::NothingToRevert);
        }
        Ok(chosen)
    }
}

/// Why a session takes no checkpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Off {
    /// `checkpoints.enabled` is false.
    Disabled,
    /// git cannot be run.
    NoGit(String),
    /// The project has more files than `checkpoints.maxFiles`.
    TooManyFiles(usize),
    /// The store failed.
    Failed(String),
}

impl std::fmt::Display for Off {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Off::Disabled => write!(f, "checkpoints are off (`checkpoints.enabled` is false)"),
            Off::NoGit(e) => write!(f, "checkpoints are off: {e}"),
            Off::TooManyFiles(max) => write!(
                f,
                "checkpoints are off for this session: the project has more than {max} files (`checkpoints.maxFiles`)"
            ),
            Off::Failed(e) => write!(f, "checkpoints are off for this session: {e}"),
        }
    }
}

/// One snapshot of the project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub tree: String,
    /// The walk it was taken after: the exact modes, the files not
    /// captured, what git could not hold, the folders.
    pub seen: std::sync::Arc<walk::Walk>,
}

impl Snapshot {
    /// Full permission bits of the files whose mode git does not keep.
    pub fn modes(&self) -> &BTreeMap<String, u32> {
        &self.seen.modes
    }

    /// Files over the size bound, not captured.
    pub fn not_captured(&self) -> &[String] {
        &self.seen.oversize
    }
}

#[cfg(test)]
mod tests;
