//! File access abstraction.
//!
//! Tools read and write files through [`FileSystem`] so the engine can route
//! them through the editor (unsaved buffers) or straight to disk with
//! [`LocalFs`].

use std::path::{Path, PathBuf};

use tokio::io::AsyncReadExt;

/// Largest file [`LocalFs`] reads as text.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Errors from a [`FileSystem`]. `Display` is phrased for the model.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("File not found: {}", .0.display())]
    NotFound(PathBuf),
    #[error("{} is a binary file (or not valid UTF-8) and cannot be handled as text", .0.display())]
    Binary(PathBuf),
    #[error("{} is too large ({size} bytes; the limit is {limit} bytes)", .path.display())]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    #[error("Could not access {}: {message}", .path.display())]
    Io { path: PathBuf, message: String },
    #[error("The editor refused the request: {0}")]
    Client(String),
}

/// Text file access used by the tools.
#[async_trait::async_trait]
pub trait FileSystem: Send + Sync {
    /// `path` is absolute. Returns the whole text.
    async fn read_to_string(&self, path: &Path) -> Result<String, FsError>;
    /// `path` is absolute; creates parent folders and the file if missing.
    async fn write(&self, path: &Path, content: &str) -> Result<(), FsError>;
    /// Writes a change the Write/Edit tools made, where the user may review
    /// it piece by piece (an editor that proposes each hunk). Returns what
    /// was kept; by default the whole change is written with [`Self::write`].
    async fn write_reviewed(&self, path: &Path, content: &str) -> Result<WriteOutcome, FsError> {
        self.write(path, content)
            .await
            .map(|()| WriteOutcome::Written)
    }
    /// Whether [`Self::write_reviewed`] of `path` (absolute) puts the
    /// change before the user hunk by hunk, so that it needs no approval
    /// beforehand. False by default.
    fn reviews_writes(&self, _path: &Path) -> bool {
        false
    }
    /// Whether [`Self::write`] goes through the editor (its buffers see
    /// the change); false for the disk.
    fn edits_through_editor(&self) -> bool {
        false
    }
}

/// What became of a change passed to [`FileSystem::write_reviewed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The whole change was written.
    Written,
    /// The user reviewed the change: `text` is the file's content now (some
    /// parts of the change may be missing), `applied` says whether any part
    /// was kept, and `report` tells the model what was kept and rejected.
    Reviewed {
        text: String,
        applied: bool,
        report: String,
    },
}

/// Disk implementation of [`FileSystem`] using `tokio::fs`.
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalFs;

fn io_error(path: &Path, err: &std::io::Error) -> FsError {
    if err.kind() == std::io::ErrorKind::NotFound {
        FsError::NotFound(path.to_path_buf())
    } else {
        FsError::Io {
            path: path.to_path_buf(),
            message: err.to_string(),
        }
    }
}

/// Decodes file bytes as text, refusing NUL bytes and invalid UTF-8.
pub fn decode_text(path: &Path, bytes: Vec<u8>) -> Result<String, FsError> {
    if bytes.contains(&0) {
        return Err(FsError::Binary(path.to_path_buf()));
    }
    String::from_utf8(bytes).map_err(|_| FsError::Binary(path.to_path_buf()))
}

#[async_trait::async_trait]
impl FileSystem for LocalFs {
    async fn read_to_string(&self, path: &Path) -> Result<String, FsError> {
        let meta = tokio::fs::metadata(path)
            .await
            .map_err(|e| io_error(path, &e))?;
        if meta.is_dir() {
            return Err(FsError::Io {
                path: path.to_path_buf(),
                message: "it is a directory, not a file (use Glob to list its files)".into(),
            });
        }
        // A FIFO would block the open, a device (`/dev/zero`) never ends.
        if !meta.is_file() {
            return Err(FsError::Io {
                path: path.to_path_buf(),
                message: "it is not a regular file".into(),
            });
        }
        if meta.len() > MAX_FILE_BYTES {
            return Err(FsError::TooLarge {
                path: path.to_path_buf(),
                size: meta.len(),
                limit: MAX_FILE_BYTES,
            });
        }
        // Read at most one byte past the limit: the file may grow meanwhile.
        let file = tokio::fs::File::open(path)
            .await
            .map_err(|e| io_error(path, &e))?;
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        file.take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| io_error(path, &e))?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(FsError::TooLarge {
                path: path.to_path_buf(),
                size: bytes.len() as u64,
                limit: MAX_FILE_BYTES,
            });
        }
        decode_text(path, bytes)
    }

    async fn write(&self, path: &Path, content: &str) -> Result<(), FsError> {
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| io_error(parent, &e))?;
        }
        tokio::fs::write(path, content)
            .await
            .map_err(|e| io_error(path, &e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn round_trip_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a/b/c.txt");
        LocalFs.write(&file, "hello\n").await.unwrap();
        assert_eq!(LocalFs.read_to_string(&file).await.unwrap(), "hello\n");

        let missing = dir.path().join("missing.txt");
        assert!(matches!(
            LocalFs.read_to_string(&missing).await,
            Err(FsError::NotFound(_))
        ));

        let bin = dir.path().join("bin");
        std::fs::write(&bin, b"ab\0cd").unwrap();
        assert!(matches!(
            LocalFs.read_to_string(&bin).await,
            Err(FsError::Binary(_))
        ));

        let latin1 = dir.path().join("latin1");
        std::fs::write(&latin1, [0xe9u8, b'a']).unwrap();
        assert!(matches!(
            LocalFs.read_to_string(&latin1).await,
            Err(FsError::Binary(_))
        ));

        assert!(matches!(
            LocalFs.read_to_string(dir.path()).await,
            Err(FsError::Io { .. })
        ));
    }
}
