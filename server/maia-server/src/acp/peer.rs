//! The editor as the server of one session's requests: the connection, the
//! session id the requests carry (known once the session started), and one
//! typed request/answer round trip. Shared by the editor-backed file
//! system (`fs.rs`), terminals (`terminal.rs`) and questions (`ask.rs`).

use std::sync::{Arc, OnceLock};

use maia_rpc::Connection;
use serde::Serialize;
use serde::de::DeserializeOwned;

#[derive(Clone)]
pub struct Peer {
    conn: Connection,
    session_id: Arc<OnceLock<String>>,
}

impl Peer {
    pub fn new(conn: Connection) -> Self {
        Peer {
            conn,
            session_id: Arc::new(OnceLock::new()),
        }
    }

    /// Names the session the requests belong to.
    pub fn bind(&self, session_id: &str) {
        let _ = self.session_id.set(session_id.to_owned());
    }

    pub fn session(&self) -> String {
        self.session_id.get().cloned().unwrap_or_default()
    }

    /// Sends `method` and reads its answer as `T`; `null` is read as `{}`
    /// (clients answer either for methods without a result). A failed
    /// request is `"{failed}: {error}"`.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
        failed: &str,
    ) -> Result<T, String> {
        let params = serde_json::to_value(params).map_err(|e| e.to_string())?;
        let value = self
            .conn
            .request(method, params)
            .await
            .map_err(|e| format!("{failed}: {e}"))?;
        let value = if value.is_null() {
            serde_json::json!({})
        } else {
            value
        };
        serde_json::from_value(value).map_err(|e| format!("unreadable {method} answer: {e}"))
    }
}
