//! Applying a revert's plan once its preview's token matches: each file
//! put in place (through the editor for text when it offers it, else
//! staged and renamed, never torn: [`super::super::restore`]), then the
//! folders the checkpoints made removed when left empty.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::super::git::Repo;
use super::super::restore::{Goal, Staging};
use super::{Entry, Plan, RevertError, RevertReport, RevertRequest, State};

/// Applies `plan` (the forced targets with `request.force`) to the files
/// `report` lists, and completes the report.
pub(super) async fn apply(
    repo: &Repo,
    plan: &Plan,
    request: &RevertRequest,
    mut report: RevertReport,
    editor: Option<&dyn maia_tools::FileSystem>,
) -> Result<RevertReport, RevertError> {
    let root = repo.work_tree.clone();
    let goals = if request.force {
        &plan.forced
    } else {
        &plan.target
    };
    let mut staging = Staging::new(&repo.git_dir)?;
    for file in &report.files {
        let (Some(goal), Some(now)) = (goals.get(&file.path), plan.now.get(&file.path)) else {
            continue;
        };
        if goal == now {
            continue;
        }
        write_state(&mut staging, &root, &file.path, goal, editor).await?;
        report.reverted.push(file.path.clone());
        crate::fault_point!("revert.file.put").map_err(|e| RevertError::Io {
            path: file.path.clone(),
            message: e.to_string(),
        })?;
    }
    drop(staging);
    report.folders = remove_empty_folders(&root, &report.folders);
    if request.force {
        report.conflicts.clear();
    }
    report.applied = true;
    Ok(report)
}

/// Puts `state` at `path`: through the editor for text when it offers
/// it, else staged and renamed into place ([`Staging`]), deleted when
/// absent.
async fn write_state(
    staging: &mut Staging,
    root: &Path,
    path: &str,
    state: &State,
    editor: Option<&dyn maia_tools::FileSystem>,
) -> Result<(), RevertError> {
    let full = root.join(path);
    if let (Some(fs), Some(Entry::File { mode, bytes })) = (editor, state)
        && let Ok(text) = std::str::from_utf8(bytes)
        && !std::fs::symlink_metadata(&full).is_ok_and(|m| m.file_type().is_symlink())
    {
        let io = |e: String| RevertError::Io {
            path: path.to_owned(),
            message: e,
        };
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io(e.to_string()))?;
        }
        fs.write(&full, text).await.map_err(|e| io(e.to_string()))?;
        std::fs::set_permissions(&full, std::fs::Permissions::from_mode(*mode))
            .map_err(|e| io(e.to_string()))?;
        return Ok(());
    }
    let goal = match state {
        None | Some(Entry::Other) => Goal::Absent,
        Some(Entry::File { mode, bytes }) => Goal::File { mode: *mode, bytes },
        Some(Entry::Link { target }) => Goal::Link { target },
    };
    staging.put(root, path, goal)
}

/// Removes `folders` (relative to `root`) that are empty, deepest first
/// (a folder emptied by removing its empty subfolders goes too); the ones
/// removed. A folder holding anything, or that is not a folder (a link),
/// stays.
fn remove_empty_folders(root: &Path, folders: &[String]) -> Vec<String> {
    let mut deepest_first: Vec<&String> = folders.iter().collect();
    deepest_first.sort_by_key(|f| std::cmp::Reverse(f.matches('/').count()));
    let mut removed = Vec::new();
    for folder in deepest_first {
        let full = root.join(folder);
        let is_folder = std::fs::symlink_metadata(&full).is_ok_and(|m| m.is_dir());
        // `remove_dir` fails on a folder that is not empty: nothing lost.
        if is_folder && std::fs::remove_dir(&full).is_ok() {
            removed.push(folder.clone());
        }
    }
    removed.sort();
    removed
}
