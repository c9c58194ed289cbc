//! Reverting checkpoints: the plan (what each file becomes, which files
//! the user changed after MAIA did: conflicts, kept unless forced), its
//! preview (kinds and diffs) and token, and applying it (each file staged
//! and renamed into place, never torn: [`super::restore`]).
//!
//! The plan walks the chosen checkpoints from the newest backwards, per
//! path: when the file as it stands (or as an undone later checkpoint left
//! it) equals the checkpoint's *after*, it becomes the *before*; otherwise
//! the path is a conflict and is left as it is (unless forced).
//!
//! Here: the plan; its preview and token are `preview`'s, applying it
//! `apply`'s.

mod apply;
mod preview;

pub use preview::describe;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::Checkpoint;
use super::git::{Blob, GitError, Repo};

/// What to undo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevertTarget {
    /// One tool call's file changes.
    ToolCall(String),
    /// Every change made from that user message's turn onward.
    FromMessage(String),
    /// The last turn (with file changes not undone yet).
    LastTurn,
}

/// A revert request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevertRequest {
    pub target: RevertTarget,
    /// The preview's token; required to apply.
    pub preview_token: Option<String>,
    /// Overwrite files the user changed after MAIA.
    pub force: bool,
    /// Only plan and preview.
    pub dry_run: bool,
}

/// Why a revert did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RevertError {
    #[error("no tool call `{0}` in this session")]
    UnknownToolCall(String),
    #[error("no user message `{0}` in this session")]
    UnknownMessage(String),
    #[error("there are no file changes to undo")]
    NothingToRevert,
    #[error(
        "cannot restore: the checkpoint store is missing or unreadable ({0}); nothing was changed"
    )]
    StorePrunedOrUnreadable(String),
    #[error("the files changed since the preview; preview again")]
    StalePreview,
    #[error("a preview token is required to apply a revert")]
    TokenRequired,
    #[error("a turn is running; cancel it first")]
    TurnRunning,
    #[error("{0}")]
    Off(String),
    #[error("cannot restore {path}: {message}")]
    Io { path: String, message: String },
}

/// What a revert does to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// MAIA created it: the revert deletes it.
    Created,
    /// MAIA changed it: the revert writes it back.
    Modified,
    /// MAIA deleted it: the revert recreates it.
    Deleted,
}

impl FileKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::Created => "created",
            FileKind::Modified => "modified",
            FileKind::Deleted => "deleted",
        }
    }
}

/// One file of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFile {
    /// Relative to the project, with `/`.
    pub path: String,
    pub kind: FileKind,
    /// The user changed it after MAIA: left alone unless forced.
    pub conflict: bool,
    /// The text now and after the revert (when they are text).
    pub old_text: Option<String>,
    pub new_text: Option<String>,
}

/// What a revert planned or did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RevertReport {
    pub files: Vec<PlannedFile>,
    /// Files over the size bound that the checkpoints did not hold.
    pub not_captured: Vec<String>,
    /// Changes the checkpoints could not hold (ignored folders, paths
    /// named `.git`, nested repositories, outside the project), named.
    pub not_restored: Vec<super::NotRestored>,
    /// Folders the undone changes created that the revert removes when
    /// they are left empty (as planned), or removed (as applied).
    pub folders: Vec<String>,
    /// `sha256:<hex>` of the plan and the files as they are.
    pub token: String,
    /// Applied (false for a dry run).
    pub applied: bool,
    /// Paths written back, deleted or recreated.
    pub reverted: Vec<String>,
    /// Conflicts left alone.
    pub conflicts: Vec<String>,
    /// The checkpoints undone (for the journal).
    pub checkpoint_ids: Vec<String>,
}

/// A file's state: its kind, permission bits and bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    File {
        mode: u32,
        bytes: Vec<u8>,
    },
    Link {
        target: Vec<u8>,
    },
    /// Something else (a folder where a file was): never equal to a file.
    Other,
}

type State = Option<Entry>;

fn entry_of(
    blob: Option<&Blob>,
    path: &str,
    modes: &BTreeMap<String, u32>,
    blobs: &HashMap<String, Vec<u8>>,
) -> Result<State, RevertError> {
    let Some(blob) = blob else {
        return Ok(None);
    };
    if blob.mode == 0o160000 {
        // A nested repository: git keeps its commit, not its files.
        return Ok(Some(Entry::Other));
    }
    let bytes = blobs.get(&blob.sha).cloned().ok_or_else(|| {
        RevertError::StorePrunedOrUnreadable(format!("object {} is missing", blob.sha))
    })?;
    if blob.mode == 0o120000 {
        return Ok(Some(Entry::Link { target: bytes }));
    }
    let mode = modes
        .get(path)
        .copied()
        .unwrap_or(if blob.mode & 0o111 != 0 { 0o755 } else { 0o644 });
    Ok(Some(Entry::File { mode, bytes }))
}

fn disk_state(root: &Path, path: &str) -> State {
    use std::os::unix::ffi::OsStrExt;
    let full = root.join(path);
    let meta = std::fs::symlink_metadata(&full).ok()?;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(&full).ok()?;
        return Some(Entry::Link {
            target: target.as_os_str().as_bytes().to_vec(),
        });
    }
    if !meta.is_file() {
        return Some(Entry::Other);
    }
    match std::fs::read(&full) {
        Ok(bytes) => Some(Entry::File {
            mode: meta.permissions().mode() & 0o7777,
            bytes,
        }),
        Err(_) => Some(Entry::Other),
    }
}

fn digest(state: &State) -> String {
    let mut h = Sha256::new();
    match state {
        None => h.update(b"absent"),
        Some(Entry::File { mode, bytes }) => {
            h.update(format!("file {mode:o} ").as_bytes());
            h.update(bytes);
        }
        Some(Entry::Link { target }) => {
            h.update(b"link ");
            h.update(target);
        }
        Some(Entry::Other) => h.update(b"other"),
    }
    hex(&h.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(state: &State) -> Option<String> {
    match state {
        Some(Entry::File { bytes, .. }) => String::from_utf8(bytes.clone())
            .ok()
            .filter(|t| !t.contains('\0')),
        _ => None,
    }
}

/// One path's change in one checkpoint.
struct Step {
    path: String,
    before: State,
    after: State,
}

/// The steps of each checkpoint, oldest first.
async fn steps(repo: &Repo, chosen: &[Checkpoint]) -> Result<Vec<Vec<Step>>, RevertError> {
    let unreadable = |e: GitError| RevertError::StorePrunedOrUnreadable(e.to_string());
    let mut all = Vec::new();
    for checkpoint in chosen {
        if !repo.has(&checkpoint.before).await || !repo.has(&checkpoint.after).await {
            return Err(RevertError::StorePrunedOrUnreadable(format!(
                "{} has no tree {}",
                repo.git_dir.display(),
                checkpoint.before
            )));
        }
        let mut changes = repo
            .diff(&checkpoint.before, &checkpoint.after)
            .await
            .map_err(unreadable)?;
        // Mode changes git does not see (644 → 600): the same blob on both sides.
        let mut moded: BTreeSet<&String> = BTreeSet::new();
        for path in checkpoint
            .before_modes
            .keys()
            .chain(checkpoint.after_modes.keys())
        {
            if checkpoint.before_modes.get(path) != checkpoint.after_modes.get(path)
                && !changes.iter().any(|c| &c.path == path)
            {
                moded.insert(path);
            }
        }
        if !moded.is_empty() {
            let paths: Vec<String> = moded.into_iter().cloned().collect();
            let before = repo
                .entries(&checkpoint.before, &paths)
                .await
                .map_err(unreadable)?;
            let after = repo
                .entries(&checkpoint.after, &paths)
                .await
                .map_err(unreadable)?;
            for path in paths {
                if let (Some(b), Some(a)) = (before.get(&path), after.get(&path)) {
                    changes.push(super::git::Change {
                        path,
                        before: Some(b.clone()),
                        after: Some(a.clone()),
                    });
                }
            }
        }
        if let Some(only) = &checkpoint.paths {
            changes.retain(|c| only.contains(&c.path));
        }
        let shas: Vec<String> = changes
            .iter()
            .flat_map(|c| [c.before.as_ref(), c.after.as_ref()])
            .flatten()
            .map(|b| b.sha.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let blobs = repo.blobs(&shas).await.map_err(unreadable)?;
        let mut steps = Vec::new();
        for change in changes {
            steps.push(Step {
                before: entry_of(
                    change.before.as_ref(),
                    &change.path,
                    &checkpoint.before_modes,
                    &blobs,
                )?,
                after: entry_of(
                    change.after.as_ref(),
                    &change.path,
                    &checkpoint.after_modes,
                    &blobs,
                )?,
                path: change.path,
            });
        }
        all.push(steps);
    }
    Ok(all)
}

/// The plan: each path's state now and after the revert, and the conflicts.
struct Plan {
    now: BTreeMap<String, State>,
    target: BTreeMap<String, State>,
    /// Targets when forced (for conflicts' kinds and diffs).
    forced: BTreeMap<String, State>,
    conflicts: BTreeSet<String>,
}

fn plan(root: &Path, steps: &[Vec<Step>]) -> Plan {
    let mut now: BTreeMap<String, State> = BTreeMap::new();
    for step in steps.iter().flatten() {
        now.entry(step.path.clone())
            .or_insert_with(|| disk_state(root, &step.path));
    }
    let mut target = now.clone();
    let mut forced = now.clone();
    let mut conflicts = BTreeSet::new();
    for checkpoint in steps.iter().rev() {
        for step in checkpoint {
            if let Some(state) = forced.get_mut(&step.path) {
                *state = step.before.clone();
            }
            if conflicts.contains(&step.path) {
                continue;
            }
            if let Some(state) = target.get_mut(&step.path) {
                if *state == step.after {
                    *state = step.before.clone();
                } else if *state == step.before {
                    // Already as undoing leaves it (an interrupted revert
                    // got this far): nothing to do, and no conflict.
                } else {
                    // Changed by someone else since: it stays as the newer
                    // checkpoints' undoing left it.
                    conflicts.insert(step.path.clone());
                }
            }
        }
    }
    Plan {
        now,
        target,
        forced,
        conflicts,
    }
}

/// Plans (and unless `dry_run`, applies) reverting `chosen` in `root`.
/// `editor` writes a text file through the editor when it offers it.
pub async fn revert(
    repo: &Repo,
    chosen: &[Checkpoint],
    request: &RevertRequest,
    editor: Option<&dyn maia_tools::FileSystem>,
) -> Result<RevertReport, RevertError> {
    let root = repo.work_tree.clone();
    let steps = steps(repo, chosen).await?;
    let plan = plan(&root, &steps);
    let token = plan.token(request.force);
    let files = plan.files();
    let not_captured: Vec<String> = chosen
        .iter()
        .flat_map(|c| c.not_captured.iter().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let not_restored: Vec<super::NotRestored> = chosen
        .iter()
        .flat_map(|c| c.not_restored.iter().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let folders: Vec<String> = chosen
        .iter()
        .flat_map(|c| c.created_dirs.iter().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let report = RevertReport {
        not_restored,
        folders,
        conflicts: files
            .iter()
            .filter(|f| f.conflict)
            .map(|f| f.path.clone())
            .collect(),
        files,
        not_captured,
        token,
        applied: false,
        reverted: Vec::new(),
        checkpoint_ids: chosen.iter().map(|c| c.id.clone()).collect(),
    };
    if request.dry_run {
        return Ok(report);
    }
    match &request.preview_token {
        None => return Err(RevertError::TokenRequired),
        Some(t) if *t != report.token => return Err(RevertError::StalePreview),
        Some(_) => {}
    }
    apply::apply(repo, &plan, request, report, editor).await
}
