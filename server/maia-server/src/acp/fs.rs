//! File access for the tools of an ACP session: through the editor
//! (`fs/read_text_file`, `fs/write_text_file`) when the client advertised
//! it, so unsaved buffers are seen and edits are tracked; else the disk.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use agent_client_protocol_schema::v1::{
    ClientCapabilities, ReadTextFileRequest, ReadTextFileResponse, WriteTextFileRequest,
};
use maia_rpc::Connection;
use maia_tools::{FileSystem, FsError, LocalFs};

#[derive(Clone)]
pub struct ClientFs {
    conn: Connection,
    session_id: Arc<OnceLock<String>>,
    read: bool,
    write: bool,
}

impl ClientFs {
    pub fn new(conn: Connection, caps: &ClientCapabilities) -> Self {
        ClientFs {
            conn,
            session_id: Arc::new(OnceLock::new()),
            read: caps.fs.read_text_file,
            write: caps.fs.write_text_file,
        }
    }

    /// Names the session the requests belong to (known once it started).
    pub fn bind(&self, session_id: &str) {
        let _ = self.session_id.set(session_id.to_owned());
    }

    fn session(&self) -> String {
        self.session_id.get().cloned().unwrap_or_default()
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
        let params = serde_json::to_value(request).map_err(|e| FsError::Client(e.to_string()))?;
        let value = self
            .conn
            .request("fs/read_text_file", params)
            .await
            .map_err(|e| FsError::Client(format!("the editor could not read the file: {e}")))?;
        serde_json::from_value::<ReadTextFileResponse>(value)
            .map(|r| r.content)
            .map_err(|e| FsError::Client(format!("unreadable fs/read_text_file answer: {e}")))
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
        let params = serde_json::to_value(request).map_err(|e| FsError::Client(e.to_string()))?;
        // Clients answer `{}` or `null`; both mean success.
        self.conn
            .request("fs/write_text_file", params)
            .await
            .map(|_| ())
            .map_err(|e| FsError::Client(format!("the editor could not write the file: {e}")))
    }
}
