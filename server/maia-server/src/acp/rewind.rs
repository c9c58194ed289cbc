//! `_session/rewind`: the conversation truncated before one of its user
//! messages, in the shape codex-acp and claude-agent-acp share
//! (`src/SessionRewind.ts`, `src/session-rewind.ts`): params `{sessionId,
//! beforeMessage: {messageId, messageFingerprint?, messageOccurrence?},
//! resumeAtMessage?, restoreFiles?}`, result `{rewound: bool, reason?,
//! sessionId?}`. Advertised as `initialize` `_meta.sessionRewind`.
//!
//! A refusal that changes nothing is a result (`rewound: false` with a
//! `reason`); a request that names nothing known is an error: unknown
//! session `-32002`, unknown message `-32602`, a running turn `-32000`.

use maia_core::timeline::{MessagePoint, RewindDone, RewindError};
use maia_rpc::{ErrorCode, Id, RpcError};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Agent, invalid_params, unknown_session};

/// The method name.
pub(super) const METHOD: &str = "_session/rewind";

/// What `initialize` adds to its `_meta` (key `sessionRewind`, the peers'
/// capability name).
pub(super) fn capability() -> Value {
    json!({ "version": 1, "method": METHOD })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Point {
    message_id: String,
    #[serde(default)]
    message_fingerprint: Option<String>,
    #[serde(default)]
    message_occurrence: Option<u32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Params {
    session_id: String,
    before_message: Point,
    /// claude-agent-acp's check of the answer before the message: MAIA
    /// names messages by stable ids, so it is accepted and not needed.
    #[serde(default)]
    #[allow(dead_code, reason = "accepted for the peers' clients")]
    resume_at_message: Option<Value>,
    #[serde(default)]
    restore_files: bool,
}

impl Agent {
    /// Handles `_session/rewind`; answered when the session did it (or not).
    pub(super) fn rewind(&self, id: Id, params: Value) {
        if self.client_caps().is_none() {
            return self.conn.respond(
                id,
                Err(RpcError::new(
                    ErrorCode::InvalidRequest,
                    "the connection is not initialized: call `initialize` first",
                )),
            );
        }
        let params: Params = match serde_json::from_value(params) {
            Ok(params) => params,
            Err(e) => {
                return self.conn.respond(
                    id,
                    Err(invalid_params(format!("invalid params for {METHOD}: {e}"))),
                );
            }
        };
        let Some(entry) = self.entry(&params.session_id) else {
            return self
                .conn
                .respond(id, Err(unknown_session(&params.session_id)));
        };
        if params.before_message.message_id.trim().is_empty() {
            return self.conn.respond(
                id,
                Err(invalid_params("beforeMessage.messageId must not be empty")),
            );
        }
        let point = MessagePoint {
            message_id: params.before_message.message_id,
            fingerprint: params.before_message.message_fingerprint,
            occurrence: params.before_message.message_occurrence,
        };
        // Handed to the session now, while this request is handled, so it
        // takes effect before whatever the client wrote after it (a
        // prompt); the session does the files' preview, the rewind and
        // the files' restore as one operation.
        let cwd = entry.handle.cwd().to_path_buf();
        let done = entry.handle.rewind(point, params.restore_files);
        let (conn, session_id) = (self.conn.clone(), params.session_id);
        tokio::spawn(async move {
            conn.respond(id, result(done.await, &session_id, &cwd));
        });
    }
}

/// The answer to a rewind.
fn result(
    done: Result<RewindDone, RewindError>,
    session_id: &str,
    cwd: &std::path::Path,
) -> Result<Value, RpcError> {
    match done {
        Ok(RewindDone { files, .. }) => {
            let mut value = json!({ "rewound": true, "sessionId": session_id });
            match files {
                Some(Ok(done)) => {
                    value["_meta"] = json!({ "maia": {
                        "reverted": super::revert::absolutes(cwd, &done.reverted),
                        "conflicts": super::revert::absolutes(cwd, &done.conflicts),
                    }});
                }
                Some(Err(e)) => {
                    value["_meta"] = json!({ "maia": { "filesNotRestored": e.to_string() } });
                }
                None => {}
            }
            Ok(value)
        }
        // The files' preview failed: nothing changed.
        Err(e @ RewindError::Files(_)) => Ok(json!({ "rewound": false, "reason": e.to_string() })),
        Err(RewindError::Refused(refusal)) => {
            Ok(json!({ "rewound": false, "reason": refusal.reason() }))
        }
        Err(RewindError::UnknownMessage(message)) => Err(invalid_params(format!(
            "no user message `{message}` in session `{session_id}`"
        ))
        .with_data(json!({ "messageId": message }))),
        // `-32000`, the server error range's first code, as for the other
        // operations a running turn refuses.
        Err(e @ RewindError::Busy) => Err(RpcError {
            code: -32000,
            message: e.to_string(),
            data: Some(json!({ "reason": "busy" })),
        }),
        Err(RewindError::Ended) => Err(unknown_session(session_id)),
        Err(e) => Err(RpcError::new(ErrorCode::InternalError, e.to_string())),
    }
}
