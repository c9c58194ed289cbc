//! A thread's side files beside its journals, each keyed by the thread id
//! and replaced whole: the additional workspace roots it was last opened
//! with (`.roots/`), its saved prompt queue (`.queue/`) and whether it is
//! archived (`.archived/`).

use std::path::{Path, PathBuf};

use super::list::pointer_path;
use super::{StoreError, io, sessions_dir};

/// Where thread `id` records its additional workspace roots.
pub(super) fn roots_path(cwd: &Path, id: &str) -> Option<PathBuf> {
    pointer_path(cwd, id).map(|p| {
        sessions_dir(cwd)
            .join(".roots")
            .join(p.file_name().unwrap_or_default())
    })
}

/// Where the prompt queue of thread `id` is saved (`crate::queue`).
pub(crate) fn queue_path(cwd: &Path, id: &str) -> Option<PathBuf> {
    pointer_path(cwd, id).map(|p| {
        sessions_dir(cwd)
            .join(".queue")
            .join(p.file_name().unwrap_or_default())
            .with_extension("json")
    })
}

/// Records the additional workspace roots thread `id` was last opened
/// with (`.maia/.sessions/.roots/<id>`, a JSON array, replaced whole; removed
/// when there are none).
pub fn save_roots(cwd: &Path, id: &str, roots: &[PathBuf]) -> Result<(), StoreError> {
    let Some(path) = roots_path(cwd, id) else {
        return Ok(());
    };
    if roots.is_empty() {
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(&path)(e)),
            _ => Ok(()),
        };
    }
    let dir = sessions_dir(cwd).join(".roots");
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let tmp = dir.join(format!(".{id}.tmp"));
    let text = serde_json::to_string(roots).unwrap_or_else(|_| "[]".to_owned());
    std::fs::write(&tmp, text).map_err(io(&tmp))?;
    std::fs::rename(&tmp, &path).map_err(io(&path))
}

/// The additional workspace roots thread `id` was last opened with.
pub fn saved_roots(cwd: &Path, id: &str) -> Vec<PathBuf> {
    roots_path(cwd, id)
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// Where thread `id` is marked archived (an empty file; no file: not
/// archived).
pub(super) fn archived_path(cwd: &Path, id: &str) -> Option<PathBuf> {
    pointer_path(cwd, id).map(|p| {
        sessions_dir(cwd)
            .join(".archived")
            .join(p.file_name().unwrap_or_default())
    })
}

/// Marks thread `id` archived or not (`.maia/.sessions/.archived/<id>`);
/// its journals are not touched.
pub fn set_archived(cwd: &Path, id: &str, archived: bool) -> Result<(), StoreError> {
    let Some(path) = archived_path(cwd, id) else {
        return Ok(());
    };
    if !archived {
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(&path)(e)),
            _ => Ok(()),
        };
    }
    let dir = sessions_dir(cwd).join(".archived");
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    std::fs::write(&path, "").map_err(io(&path))
}

/// Whether thread `id` is archived.
pub fn is_archived(cwd: &Path, id: &str) -> bool {
    archived_path(cwd, id).is_some_and(|p| p.exists())
}

#[cfg(test)]
mod tests {
    use super::super::delete;
    use super::*;

    #[test]
    fn roots_are_saved_replaced_and_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        assert!(saved_roots(cwd, "t1").is_empty());
        save_roots(cwd, "t1", &[PathBuf::from("/a"), PathBuf::from("/b")]).unwrap();
        assert_eq!(
            saved_roots(cwd, "t1"),
            vec![PathBuf::from("/a"), PathBuf::from("/b")]
        );
        save_roots(cwd, "t1", &[PathBuf::from("/c")]).unwrap();
        assert_eq!(saved_roots(cwd, "t1"), vec![PathBuf::from("/c")]);
        save_roots(cwd, "t1", &[]).unwrap();
        assert!(saved_roots(cwd, "t1").is_empty());
        save_roots(cwd, "t1", &[PathBuf::from("/c")]).unwrap();
        delete(cwd, "t1").unwrap();
        assert!(saved_roots(cwd, "t1").is_empty());
        // Ids that are not plain names are never file names.
        save_roots(cwd, "../x", &[PathBuf::from("/c")]).unwrap();
        assert!(saved_roots(cwd, "../x").is_empty());
    }
}
