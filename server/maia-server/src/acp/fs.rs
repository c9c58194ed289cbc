//! File access for the tools of an ACP session: through the editor
//! (`fs/read_text_file`, `fs/write_text_file`) when the client advertised
//! it, so unsaved buffers are seen and edits are tracked; else the disk.

use std::path::Path;

use agent_client_protocol_schema::v1::{
    ClientCapabilities, ReadTextFileRequest, ReadTextFileResponse, WriteTextFileRequest,
};
use maia_rpc::Connection;
use maia_tools::{FileSystem, FsError, LocalFs, WriteOutcome};

use super::peer::Peer;
use super::reviewed::Reviewed;

#[derive(Clone)]
pub struct ClientFs {
    peer: Peer,
    read: bool,
    write: bool,
    /// Texts the user kept of proposed changes ("Review in editor").
    reviewed: Reviewed,
}

impl ClientFs {
    pub fn new(conn: Connection, caps: &ClientCapabilities) -> Self {
        ClientFs {
            peer: Peer::new(conn),
            read: caps.fs.read_text_file,
            write: caps.fs.write_text_file,
            reviewed: Reviewed::default(),
        }
    }

    /// Names the session the requests belong to (known once it started).
    pub fn bind(&self, session_id: &str) {
        self.peer.bind(session_id);
    }

    /// Where the session's permission answers leave the texts kept.
    pub fn reviewed(&self) -> Reviewed {
        self.reviewed.clone()
    }

    fn session(&self) -> String {
        self.peer.session()
    }
}

/// Whether the start of a file on disk looks binary (a NUL byte).
async fn binary_on_disk(path: &Path) -> bool {
    use tokio::io::AsyncReadExt;
    let Ok(mut file) = tokio::fs::File::open(path).await else {
        return false;
    };
    let mut buf = vec![0u8; 8192];
    match file.read(&mut buf).await {
        Ok(n) => buf[..n].contains(&0),
        Err(_) => false,
    }
}

#[async_trait::async_trait]
impl FileSystem for ClientFs {
    async fn read_to_string(&self, path: &Path) -> Result<String, FsError> {
        if !self.read {
            return LocalFs.read_to_string(path).await;
        }
        match tokio::fs::metadata(path).await {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(FsError::NotFound(path.to_path_buf()));
            }
            // A FIFO would block the open below, a device never ends: the
            // editor is not asked for them (as on disk, see `LocalFs`).
            Ok(meta) if !meta.is_file() => {
                return LocalFs.read_to_string(path).await;
            }
            Ok(meta) if meta.len() > maia_tools::fs::MAX_FILE_BYTES => {
                return Err(FsError::TooLarge {
                    path: path.to_path_buf(),
                    size: meta.len(),
                    limit: maia_tools::fs::MAX_FILE_BYTES,
                });
            }
            _ => {}
        }
        if binary_on_disk(path).await {
            return Err(FsError::Binary(path.to_path_buf()));
        }
        let request = ReadTextFileRequest::new(self.session(), path.to_path_buf());
        self.peer
            .call::<ReadTextFileResponse>(
                "fs/read_text_file",
                request,
                "the editor could not read the file",
            )
            .await
            .map(|r| r.content)
            .map_err(FsError::Client)
    }

    async fn write(&self, path: &Path, content: &str) -> Result<(), FsError> {
        if !self.write {
            return LocalFs.write(path, content).await;
        }
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| FsError::Io {
                    path: parent.to_path_buf(),
                    message: e.to_string(),
                })?;
        }
        let request = WriteTextFileRequest::new(self.session(), path.to_path_buf(), content);
        // Clients answer `{}` or `null`; both mean success, and nothing in
        // the answer is used.
        self.peer
            .call::<serde::de::IgnoredAny>(
                "fs/write_text_file",
                request,
                "the editor could not write the file",
            )
            .await
            .map(|_| ())
            .map_err(FsError::Client)
    }

    async fn write_reviewed(&self, path: &Path, content: &str) -> Result<WriteOutcome, FsError> {
        self.reviewed.clone().write(self, path, content).await
    }

    fn edits_through_editor(&self) -> bool {
        self.write
    }
}
