//! Putting a planned state in place without leaving anything behind: each
//! file is written in a staging folder of the shadow store
//! (`.checkpoints/restore/<id>/`, held locked while the revert runs) and
//! renamed into place, so it is never torn and a crash at any point leaves
//! nothing in the user's folders. Where the staging folder is on another
//! file system than the file (a mount inside the project), the file is
//! written beside its target instead, and its name is first added to the
//! staging folder's `pending` list. [`sweep`], run when a session opens,
//! removes what an interrupted revert left: the staging folders nobody
//! holds and the files their lists name.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::plan::RevertError;

/// The staging folders' parent inside the shadow store.
const RESTORE_DIR: &str = "restore";
/// The lock file a live revert holds in its staging folder.
const LOCK: &str = "lock";
/// The list of files written beside their targets.
const PENDING: &str = "pending";
/// The mark in the name of a file written beside its target.
const ASIDE_MARK: &str = ".maia-restore-";

/// What a file becomes.
pub(super) enum Goal<'a> {
    Absent,
    File { mode: u32, bytes: &'a [u8] },
    Link { target: &'a [u8] },
}

/// One revert's staging folder, locked while it lives and removed on drop.
pub(super) struct Staging {
    dir: PathBuf,
    /// Held for the lock; closed (unlocked) after the folder is removed.
    _lock: File,
    next: u64,
}

impl Staging {
    /// A new staging folder in the shadow store at `git_dir`.
    pub(super) fn new(git_dir: &Path) -> Result<Staging, RevertError> {
        let dir = git_dir
            .join(RESTORE_DIR)
            .join(uuid::Uuid::new_v4().simple().to_string());
        let io = |e: std::io::Error| RevertError::Io {
            path: dir.display().to_string(),
            message: e.to_string(),
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        crate::fault_point!("restore.staging.made").map_err(io)?;
        let lock = File::create(dir.join(LOCK)).map_err(io)?;
        lock.lock().map_err(io)?;
        Ok(Staging {
            dir,
            _lock: lock,
            next: 0,
        })
    }

    /// Puts `goal` at `root/path`: deleted, or written aside and renamed
    /// into place.
    pub(super) fn put(&mut self, root: &Path, path: &str, goal: Goal) -> Result<(), RevertError> {
        let full = root.join(path);
        let io = |e: std::io::Error| RevertError::Io {
            path: path.to_owned(),
            message: e.to_string(),
        };
        let (mode, bytes, target) = match goal {
            Goal::Absent => {
                match std::fs::symlink_metadata(&full) {
                    Ok(meta) if !meta.is_dir() => std::fs::remove_file(&full).map_err(io)?,
                    _ => {}
                }
                return Ok(());
            }
            Goal::File { mode, bytes } => (mode, bytes, None),
            Goal::Link { target } => (0, &[][..], Some(target)),
        };
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        self.next += 1;
        let staged = self.dir.join(self.next.to_string());
        write_one(&staged, mode, bytes, target).map_err(io)?;
        if let Err(e) = crate::fault_point!("restore.staged") {
            let _ = std::fs::remove_file(&staged);
            return Err(io(e));
        }
        match std::fs::rename(&staged, &full) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::CrossesDevices => {
                let _ = std::fs::remove_file(&staged);
            }
            Err(e) => {
                let _ = std::fs::remove_file(&staged);
                return Err(io(e));
            }
        }
        // Another file system: beside the target, named in the list first.
        let aside = aside_path(&full);
        self.note_pending(&aside).map_err(io)?;
        let written =
            write_one(&aside, mode, bytes, target).and_then(|()| std::fs::rename(&aside, &full));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&aside);
            return Err(io(e));
        }
        Ok(())
    }

    fn note_pending(&self, aside: &Path) -> std::io::Result<()> {
        use std::os::unix::ffi::OsStrExt;
        let mut list = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(PENDING))?;
        let mut line = aside.as_os_str().as_bytes().to_vec();
        line.push(b'\n');
        list.write_all(&line)?;
        list.sync_data()
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // Everything staged was renamed or removed; the list's files too.
        remove_staging(&self.dir);
    }
}

fn write_one(at: &Path, mode: u32, bytes: &[u8], link: Option<&[u8]>) -> std::io::Result<()> {
    match link {
        Some(target) => {
            use std::os::unix::ffi::OsStrExt;
            std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(target), at)
        }
        None => {
            std::fs::write(at, bytes)?;
            std::fs::set_permissions(at, std::fs::Permissions::from_mode(mode))
        }
    }
}

fn aside_path(full: &Path) -> PathBuf {
    let name = full
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    full.with_file_name(format!(
        ".{name}{ASIDE_MARK}{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    ))
}

/// Removes a staging folder and the files its list names (only files whose
/// name carries the mark: the list cannot make it delete anything else).
fn remove_staging(dir: &Path) {
    use std::os::unix::ffi::OsStrExt;
    if let Ok(list) = std::fs::read(dir.join(PENDING)) {
        for line in list.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let path = Path::new(std::ffi::OsStr::from_bytes(line));
            let marked = path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().contains(ASIDE_MARK));
            if marked
                && std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_dir())
                && let Err(e) = std::fs::remove_file(path)
            {
                tracing::warn!("cannot remove {}: {e}", path.display());
            }
        }
    }
    if let Err(e) = std::fs::remove_dir_all(dir)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!("cannot remove {}: {e}", dir.display());
    }
}

/// Removes what interrupted reverts left in the shadow store at `git_dir`
/// (folders whose lock nobody holds); the number of folders removed.
pub fn sweep(git_dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(git_dir.join(RESTORE_DIR)) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let dir = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        // A live revert holds its lock; a folder without one is a crash's
        // between `create_dir` and the lock.
        let held = File::open(dir.join(LOCK)).is_ok_and(|lock| lock.try_lock().is_err());
        if held {
            continue;
        }
        remove_staging(&dir);
        removed += 1;
    }
    removed
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_put_leaves_nothing_beside_the_file_and_the_staging_folder_goes_on_drop() {
        let root = tempfile::tempdir().unwrap();
        let store = root.path().join(".store");
        let mut staging = Staging::new(&store).unwrap();
        staging
            .put(
                root.path(),
                "a/b.txt",
                Goal::File {
                    mode: 0o600,
                    bytes: b"hi",
                },
            )
            .unwrap();
        staging
            .put(root.path(), "l", Goal::Link { target: b"a/b.txt" })
            .unwrap();
        let full = root.path().join("a/b.txt");
        assert_eq!(std::fs::read(&full).unwrap(), b"hi");
        assert_eq!(
            std::fs::metadata(&full).unwrap().permissions().mode() & 0o7777,
            0o600
        );
        assert_eq!(
            std::fs::read_link(root.path().join("l")).unwrap(),
            Path::new("a/b.txt")
        );
        assert_eq!(std::fs::read_dir(root.path().join("a")).unwrap().count(), 1);
        // Held: a sweep leaves it.
        assert_eq!(sweep(&store), 0);
        drop(staging);
        assert_eq!(
            std::fs::read_dir(store.join(RESTORE_DIR)).unwrap().count(),
            0
        );
    }

    #[test]
    fn a_sweep_removes_an_abandoned_folder_and_the_marked_files_it_lists() {
        let root = tempfile::tempdir().unwrap();
        let store = root.path().join(".store");
        let dir = store.join(RESTORE_DIR).join("crashed");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("1"), "staged").unwrap();
        std::fs::write(dir.join(LOCK), "").unwrap();
        let aside = root.path().join(".x.maia-restore-1234abcd");
        let innocent = root.path().join("keep.txt");
        std::fs::write(&aside, "half").unwrap();
        std::fs::write(&innocent, "mine").unwrap();
        let list = format!("{}\n{}\n", aside.display(), innocent.display());
        std::fs::write(dir.join(PENDING), list).unwrap();
        assert_eq!(sweep(&store), 1);
        assert!(!dir.exists());
        assert!(!aside.exists());
        assert!(innocent.exists(), "only marked files are removed");
        assert_eq!(sweep(&store), 0);
    }
}
