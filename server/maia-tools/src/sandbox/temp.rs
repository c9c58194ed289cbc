//! The session's temp folder: created private to the user, held with a
//! shared `flock` while the session lives, removed when it ends; folders
//! whose MAIA died (even of `kill -9`) are removed by the next start, which
//! finds them by their marker file and an unheld lock.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::SandboxError;

/// The file that marks a folder as a session's temp folder.
pub const MARKER: &str = ".maia-session-temp";

/// A session's temp folder, removed on drop.
#[derive(Debug)]
pub(super) struct TempFolder {
    path: PathBuf,
    /// The folder, open with a shared lock for as long as the session
    /// lives (replaced when the folder is made again).
    lock: std::sync::Mutex<Option<File>>,
}

impl TempFolder {
    pub(super) fn create(path: &Path) -> Result<Self, SandboxError> {
        let folder = TempFolder {
            path: path.to_path_buf(),
            lock: std::sync::Mutex::new(None),
        };
        folder.make()?;
        Ok(folder)
    }

    /// Re-creates the folder if a command removed it.
    pub(super) fn ensure(&self) -> Result<&Path, SandboxError> {
        if !self.path.join(MARKER).is_file() {
            self.make()?;
        }
        Ok(&self.path)
    }

    /// Makes the folder, locks it, then marks it (so a sweep never sees a
    /// marked folder that is not yet held).
    fn make(&self) -> Result<(), SandboxError> {
        use std::os::unix::fs::DirBuilderExt;
        let path = &self.path;
        let err = |e: std::io::Error| SandboxError::Setup(format!("{}: {e}", path.display()));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path)
            .map_err(err)?;
        let dir = File::open(path).map_err(err)?;
        dir.lock_shared().map_err(err)?;
        if let Ok(mut held) = self.lock.lock() {
            *held = Some(dir);
        }
        std::fs::write(path.join(MARKER), b"").map_err(err)
    }
}

impl Drop for TempFolder {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::debug!(path = %self.path.display(), %e, "cannot remove the session's temp folder");
        }
    }
}

/// Removes the session temp folders under `parent` that no running MAIA
/// holds (left by one that was killed); returns how many. Runs once per
/// process when `parent` is `None` (the system temp folder).
pub fn sweep_temp_folders(parent: Option<&Path>) -> usize {
    let parent = parent
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir);
    let Ok(entries) = std::fs::read_dir(&parent) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with("maia-") {
            continue;
        }
        let path = entry.path();
        // Only real folders (not links) with the marker.
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if !is_dir || !path.join(MARKER).is_file() {
            continue;
        }
        let Ok(dir) = File::open(&path) else { continue };
        if dir.try_lock().is_err() {
            continue;
        }
        if std::fs::remove_dir_all(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn removed_on_drop_and_swept_only_when_unheld() {
        let dir = tempfile::tempdir().unwrap();
        let held = dir.path().join("maia-held");
        let orphan = dir.path().join("maia-orphan");
        let other = dir.path().join("maia-not-ours");
        let folder = TempFolder::create(&held).unwrap();
        std::fs::create_dir_all(&orphan).unwrap();
        std::fs::write(orphan.join(MARKER), "").unwrap();
        std::fs::write(orphan.join("left"), "x").unwrap();
        std::fs::create_dir_all(&other).unwrap();
        assert_eq!(sweep_temp_folders(Some(dir.path())), 1);
        assert!(held.is_dir() && !orphan.exists() && other.is_dir());
        std::fs::remove_dir_all(&held).unwrap();
        assert_eq!(folder.ensure().unwrap(), held.as_path());
        assert!(held.is_dir());
        drop(folder);
        assert!(!held.exists());
    }
}
