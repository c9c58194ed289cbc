//! Git worktrees made for forks (`/fork --worktree`, `session/fork` with
//! `_meta.maia.worktree`), safe to interrupt at any point: before
//! `git worktree add` runs, a record of what it will make (folder, branch,
//! the commit it starts from) is written to the project's sessions folder
//! (`.forks/<tag>.json`) and held locked; it is removed once the fork's
//! journal is saved in the worktree. [`sweep`], run when a session opens
//! in the project, undoes what a record nobody holds names: the worktree
//! (through git), its branch while it still points where it started, and
//! the folder. A forged record can name nothing but a folder and a branch
//! of the shapes MAIA makes, beside the project's repository.

use std::fs::File;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The records' folder inside the sessions folder.
const FORKS_DIR: &str = ".forks";

/// A git worktree made for a fork.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worktree {
    /// The worktree's folder, beside the repository's.
    pub path: PathBuf,
    /// Its new branch, `maia/fork-<8 hex>`.
    pub branch: String,
    /// Where the fork works: the worktree, or the same subfolder of it as
    /// the session's folder is of its repository.
    pub cwd: PathBuf,
}

/// What a worktree being made will be, as its record keeps it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Record {
    /// The repository's top folder.
    top: PathBuf,
    /// The 8 hex digits of the folder's and branch's names.
    tag: String,
    /// The commit the branch starts at.
    head: String,
    /// The fork's folder inside the worktree (the session's folder inside
    /// its repository; empty at the top). Absent in older records.
    #[serde(default)]
    inside: PathBuf,
}

impl Record {
    /// The folder, when `top` has a parent and a name.
    fn folder(&self) -> Option<PathBuf> {
        let name = self.top.file_name()?.to_string_lossy().into_owned();
        Some(
            self.top
                .parent()?
                .join(format!("{name}.maia-fork-{}", self.tag)),
        )
    }

    /// Whether the fork was saved in the worktree (a journal in its
    /// sessions folder that the commit it started at does not hold): killed
    /// after that, before its record was removed, the worktree is the
    /// fork's and is kept.
    async fn saved(&self) -> bool {
        let Some(folder) = self.folder() else {
            return false;
        };
        if self
            .inside
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return false;
        }
        let sessions = crate::store::sessions_dir(&self.inside);
        let Ok(entries) = std::fs::read_dir(folder.join(&sessions)) else {
            return false;
        };
        let journals: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        if journals.is_empty() {
            return false;
        }
        // Journals committed in the repository came with the checkout.
        let spec = sessions.to_string_lossy().into_owned();
        let Ok(tracked) = crate::review::git(
            &self.top,
            &["ls-tree", "-r", "--name-only", &self.head, "--", &spec],
        )
        .await
        else {
            return false;
        };
        journals.iter().any(|journal| {
            let name = journal
                .file_name()
                .map(|n| n.to_string_lossy().into_owned());
            !tracked.lines().any(|line| {
                Path::new(line)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    == name
            })
        })
    }

    fn branch(&self) -> String {
        format!("maia/fork-{}", self.tag)
    }

    /// Whether the record has the shape MAIA writes (a forged one is
    /// ignored).
    fn well_formed(&self) -> bool {
        self.tag.len() == 8
            && self.tag.bytes().all(|b| b.is_ascii_hexdigit())
            && self.head.len() >= 40
            && self.head.bytes().all(|b| b.is_ascii_hexdigit())
            && self.top.is_absolute()
    }
}

/// A worktree being made: its record, held locked until [`Making::done`]
/// (the fork was saved) or [`Making::undo`] (it could not be).
#[derive(Debug)]
pub struct Making {
    file: PathBuf,
    record: Record,
    /// Held for the lock.
    _lock: File,
}

impl Making {
    /// The fork is saved in the worktree: nothing to undo any more.
    pub fn done(self) {
        if crate::fault_point!("worktree.add.saved").is_err() {
            return;
        }
        if let Err(e) = std::fs::remove_file(&self.file) {
            tracing::warn!("cannot remove {}: {e}", self.file.display());
        }
    }

    /// The fork could not be saved: the worktree and its branch go.
    pub async fn undo(self) {
        undo(&self.record).await;
        let _ = std::fs::remove_file(&self.file);
    }
}

/// Adds a git worktree for a fork of a session working in `cwd`: a new
/// branch `maia/fork-<8 hex>` at the repository's `HEAD`, checked out in
/// `<parent>/<repository folder>.maia-fork-<8 hex>` (uncommitted changes
/// stay in the project). Fails when `cwd` is not in a git repository.
/// `sessions` is the project's sessions folder, where the record goes.
pub async fn add(cwd: &Path, sessions: &Path) -> Result<(Worktree, Making), String> {
    let top = crate::review::git(cwd, &["rev-parse", "--show-toplevel"])
        .await
        .map_err(|_| format!("`{}` is not in a git repository", cwd.display()))?;
    let top = PathBuf::from(top.trim());
    let head = crate::review::git(&top, &["rev-parse", "--verify", "HEAD"])
        .await
        .map_err(|_| format!("`{}` has no commit to start a branch at", top.display()))?;
    let inside = std::fs::canonicalize(cwd)
        .ok()
        .zip(std::fs::canonicalize(&top).ok())
        .and_then(|(cwd, top)| cwd.strip_prefix(top).ok().map(Path::to_path_buf))
        .unwrap_or_default();
    let record = Record {
        top: top.clone(),
        tag: uuid::Uuid::new_v4().simple().to_string()[..8].to_owned(),
        head: head.trim().to_owned(),
        inside: inside.clone(),
    };
    let path = record
        .folder()
        .ok_or_else(|| format!("`{}` has no parent folder", top.display()))?;
    let branch = record.branch();
    let making = write_record(sessions, record)
        .map_err(|e| format!("cannot write the fork's record in the sessions folder: {e}"))?;
    let target = path.to_string_lossy().into_owned();
    if let Err(e) = crate::fault_point!("worktree.add.recorded") {
        making.undo().await;
        return Err(e.to_string());
    }
    let added = crate::review::git(
        &top,
        &[
            "worktree",
            "add",
            "-b",
            &branch,
            &target,
            &making.record.head,
        ],
    )
    .await;
    let added =
        added.and_then(|_| crate::fault_point!("worktree.add.added").map_err(|e| e.to_string()));
    if let Err(e) = added {
        making.undo().await;
        return Err(e);
    }
    let fork_cwd = path.join(inside);
    if let Err(e) = std::fs::create_dir_all(&fork_cwd) {
        making.undo().await;
        return Err(format!("cannot create `{}`: {e}", fork_cwd.display()));
    }
    Ok((
        Worktree {
            path,
            branch,
            cwd: fork_cwd,
        },
        making,
    ))
}

fn write_record(sessions: &Path, record: Record) -> std::io::Result<Making> {
    use std::io::Write;
    let dir = sessions.join(FORKS_DIR);
    std::fs::create_dir_all(&dir)?;
    let file = dir.join(format!("{}.json", record.tag));
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&file)?;
    out.lock()?;
    out.write_all(&serde_json::to_vec(&record).map_err(std::io::Error::other)?)?;
    out.sync_all()?;
    Ok(Making {
        file,
        record,
        _lock: out,
    })
}

/// Removes what an interrupted worktree fork left: the worktree, its
/// branch (while it still points where it started) and the folder.
async fn undo(record: &Record) {
    let Some(folder) = record.folder() else {
        return;
    };
    let target = folder.to_string_lossy().into_owned();
    drop_torn_entry(record).await;
    if crate::fault_point!("worktree.undo.entry").is_err() {
        return;
    }
    let listed = crate::review::git(&record.top, &["worktree", "list", "--porcelain"])
        .await
        .unwrap_or_default();
    let registered = listed
        .lines()
        .any(|line| line.strip_prefix("worktree ") == Some(target.as_str()));
    let remove_args = ["worktree", "remove", "--force", "--force", target.as_str()];
    let remove = || crate::review::git(&record.top, &remove_args);
    let refused = registered && remove().await.is_err();
    if crate::fault_point!("worktree.undo.removed").is_err() {
        return;
    }
    // A folder git had not registered yet (or could not remove).
    if folder.exists()
        && let Err(e) = std::fs::remove_dir_all(&folder)
    {
        tracing::warn!("cannot remove {target}: {e}");
    }
    // A `worktree add` killed before it wrote the folder's `.git` file
    // leaves an entry git will not remove while that folder is there, and
    // will not prune while it is locked ("initializing"): with the folder
    // gone, it removes it.
    if refused && let Err(e) = remove().await {
        tracing::warn!("cannot remove the worktree {target}: {e}");
    }
    let _ = crate::review::git(&record.top, &["worktree", "prune"]).await;
    if crate::fault_point!("worktree.undo.pruned").is_err() {
        return;
    }
    let branch = record.branch();
    let at = crate::review::git(
        &record.top,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ],
    )
    .await;
    if at.is_ok_and(|sha| sha.trim() == record.head)
        && let Err(e) = crate::review::git(&record.top, &["branch", "-D", &branch]).await
    {
        tracing::warn!("cannot remove the branch {branch}: {e}");
    }
}

/// Removes git's entry for the fork's folder (`worktrees/<its name>` in
/// the repository's git folder) when `worktree add` was killed while it
/// wrote it: an empty `commondir` makes every `git worktree list` and
/// `git branch -D` of the repository fail ("failed to read …/commondir"),
/// so git itself cannot remove it; a missing or empty `gitdir` names no
/// folder. An entry that reads whole is left to git.
async fn drop_torn_entry(record: &Record) {
    let Ok(common) = crate::review::git(&record.top, &["rev-parse", "--git-common-dir"]).await
    else {
        return;
    };
    let common = record.top.join(common.trim());
    // Git names the entry after the folder, made a valid ref component (a
    // leading `.` becomes `-`: a project folder `.dotfiles` has the entry
    // `-dotfiles.maia-fork-…`) and numbered when taken: the fork's tag,
    // unique, finds it.
    let mark = format!(".maia-fork-{}", record.tag);
    let Ok(entries) = std::fs::read_dir(common.join("worktrees")) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().contains(&mark) {
            drop_if_torn(&entry.path());
        }
    }
}

/// Removes the entry `entry` when it is torn (see [`drop_torn_entry`]).
fn drop_if_torn(entry: &Path) {
    let empty = |file: &str| {
        std::fs::read_to_string(entry.join(file)).map_or(true, |text| text.trim().is_empty())
    };
    let commondir_torn = entry.join("commondir").exists() && empty("commondir");
    if entry.is_dir() && (commondir_torn || empty("gitdir")) {
        tracing::warn!(entry = %entry.display(), "removing a worktree entry a killed fork left half written");
        if let Err(e) = std::fs::remove_dir_all(entry) {
            tracing::warn!("cannot remove {}: {e}", entry.display());
        }
    }
}

/// Undoes the worktree forks of the project (sessions folder `sessions`,
/// repository top `top`) that were interrupted before their fork was
/// saved; the folders removed.
pub async fn sweep(sessions: &Path, cwd: &Path) -> Vec<PathBuf> {
    let dir = sessions.join(FORKS_DIR);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let top = crate::review::git(cwd, &["rev-parse", "--show-toplevel"])
        .await
        .map(|t| PathBuf::from(t.trim()))
        .ok();
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let file = entry.path();
        let Ok(lock) = File::open(&file) else {
            continue;
        };
        // A fork being made right now holds its record.
        if lock.try_lock().is_err() {
            continue;
        }
        let record = std::fs::read(&file)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Record>(&bytes).ok());
        match record {
            Some(record) if record.well_formed() && Some(&record.top) == top.as_ref() => {
                // Killed after the fork was saved: the worktree is the fork's.
                if record.saved().await {
                    let _ = std::fs::remove_file(&file);
                    continue;
                }
                undo(&record).await;
                if crate::fault_point!("worktree.sweep.undone").is_err() {
                    continue;
                }
                removed.extend(record.folder());
            }
            // Torn (killed while written: nothing was made yet), or not
            // ours to act on.
            _ => {}
        }
        let _ = std::fs::remove_file(&file);
    }
    removed
}

/// [`sweep`] on a task, when there are records (a session opening does
/// not wait for it).
pub fn sweep_in_background(sessions: &Path, cwd: &Path) {
    if !sessions.join(FORKS_DIR).is_dir() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let (sessions, cwd) = (sessions.to_path_buf(), cwd.to_path_buf());
    runtime.spawn(async move {
        for folder in sweep(&sessions, &cwd).await {
            tracing::info!("removed {}, left by an interrupted fork", folder.display());
        }
    });
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    async fn repo() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().join("proj");
        std::fs::create_dir_all(&top).unwrap();
        let top = top.canonicalize().unwrap();
        for args in [
            &["init", "-q"][..],
            &[
                "-c",
                "user.email=t@t",
                "-c",
                "user.name=t",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "x",
            ],
        ] {
            crate::review::git(&top, args).await.unwrap();
        }
        (dir, top)
    }

    #[tokio::test]
    async fn an_interrupted_fork_is_undone_by_the_sweep_and_a_finished_one_kept() {
        let (_dir, top) = repo().await;
        let sessions = top.join(".maia/.sessions");
        let (kept, making) = add(&top, &sessions).await.unwrap();
        making.done();
        let (cut, making) = add(&top, &sessions).await.unwrap();
        // Held: a sweep leaves it.
        assert!(sweep(&sessions, &top).await.is_empty());
        assert!(cut.path.exists());
        // Dropped without `done` (as a kill would): swept.
        drop(making);
        assert_eq!(sweep(&sessions, &top).await, vec![cut.path.clone()]);
        assert!(!cut.path.exists());
        let branches = crate::review::git(&top, &["branch", "--list"])
            .await
            .unwrap();
        assert!(!branches.contains(&cut.branch), "{branches}");
        assert!(branches.contains(&kept.branch), "{branches}");
        assert!(kept.path.exists());
        let list = crate::review::git(&top, &["worktree", "list"])
            .await
            .unwrap();
        assert_eq!(list.lines().count(), 2, "{list}");
        crate::review::git(
            &top,
            &[
                "worktree",
                "remove",
                "--force",
                &kept.path.to_string_lossy(),
            ],
        )
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn a_fork_killed_while_git_wrote_its_entry_leaves_the_repository_usable() {
        let (_dir, top) = repo().await;
        let sessions = top.join(".maia/.sessions");
        let (cut, making) = add(&top, &sessions).await.unwrap();
        // What a `worktree add` killed while writing its entry leaves: the
        // entry locked while it initializes (so `worktree prune` skips
        // it), its `commondir` created, still empty. Every `worktree list`
        // and `branch -D` of the repository then fails.
        let name = cut.path.file_name().unwrap().to_owned();
        let entry = top.join(".git/worktrees").join(&name);
        std::fs::write(entry.join("locked"), "initializing").unwrap();
        std::fs::write(entry.join("commondir"), "").unwrap();
        assert!(
            crate::review::git(&top, &["worktree", "list"])
                .await
                .is_err(),
            "git reads this entry as torn"
        );
        drop(making);
        assert_eq!(sweep(&sessions, &top).await, vec![cut.path.clone()]);
        assert!(!cut.path.exists());
        assert!(!entry.exists());
        let list = crate::review::git(&top, &["worktree", "list", "--porcelain"])
            .await
            .unwrap();
        assert_eq!(list.matches("worktree ").count(), 1, "{list}");
        let branches = crate::review::git(&top, &["branch", "--list", "maia/*"])
            .await
            .unwrap();
        assert!(branches.trim().is_empty(), "{branches}");
    }

    #[tokio::test]
    async fn a_fork_killed_before_its_folder_had_a_git_file_is_undone() {
        let (_dir, top) = repo().await;
        let sessions = top.join(".maia/.sessions");
        let (cut, making) = add(&top, &sessions).await.unwrap();
        // What a `worktree add` killed early leaves: the entry, locked
        // while it initializes, and a folder without its `.git` file.
        let path = cut.path.to_string_lossy().into_owned();
        crate::review::git(
            &top,
            &["worktree", "lock", "--reason", "initializing", &path],
        )
        .await
        .unwrap();
        std::fs::remove_file(cut.path.join(".git")).unwrap();
        drop(making);
        assert_eq!(sweep(&sessions, &top).await, vec![cut.path.clone()]);
        assert!(!cut.path.exists());
        let list = crate::review::git(&top, &["worktree", "list", "--porcelain"])
            .await
            .unwrap();
        assert_eq!(list.matches("worktree ").count(), 1, "{list}");
    }

    #[tokio::test]
    async fn a_forged_record_names_nothing_outside_the_forks_shapes() {
        let (dir, top) = repo().await;
        let sessions = top.join(".maia/.sessions");
        let victim = dir.path().join("victim");
        std::fs::create_dir_all(&victim).unwrap();
        std::fs::create_dir_all(sessions.join(FORKS_DIR)).unwrap();
        let forged = serde_json::json!({"top": victim, "tag": "../../victim", "head": "0"});
        std::fs::write(sessions.join(FORKS_DIR).join("x.json"), forged.to_string()).unwrap();
        assert!(sweep(&sessions, &top).await.is_empty());
        assert!(victim.exists());
    }
}
