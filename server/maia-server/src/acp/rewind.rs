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

use maia_core::checkpoint::{RevertError, RevertRequest, RevertTarget};
use maia_core::timeline::{MessagePoint, RewindError};
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
        let restore = params.restore_files.then(|| RevertRequest {
            target: RevertTarget::FromMessage(params.before_message.message_id.clone()),
            preview_token: None,
            force: false,
            dry_run: true,
        });
        let point = MessagePoint {
            message_id: params.before_message.message_id,
            fingerprint: params.before_message.message_fingerprint,
            occurrence: params.before_message.message_occurrence,
        };
        let handle = entry.handle.clone();
        let cwd = handle.cwd().to_path_buf();
        let (conn, session_id) = (self.conn.clone(), params.session_id);
        tokio::spawn(async move {
            // The files' preview first (a revert that cannot be done
            // changes nothing), then the rewind, then the files restored as
            // `_session/files/revert {beforeMessage, force: false}` would.
            let preview = match restore {
                Some(request) => match handle.revert_files(request.clone()).await {
                    Ok(preview) => Some((request, preview)),
                    Err(RevertError::NothingToRevert) => None,
                    Err(e) => {
                        let reason = format!("cannot restore the files: {e}");
                        return conn.respond(id, Ok(json!({ "rewound": false, "reason": reason })));
                    }
                },
                None => None,
            };
            let mut answer = result(handle.rewind(point).await, &session_id);
            if let (Some((mut request, preview)), Ok(value)) = (preview, &mut answer)
                && value["rewound"] == true
            {
                request.dry_run = false;
                request.preview_token = Some(preview.token);
                value["_meta"] = match handle.revert_files(request).await {
                    Ok(done) => json!({ "maia": {
                        "reverted": super::revert::absolutes(&cwd, &done.reverted),
                        "conflicts": super::revert::absolutes(&cwd, &done.conflicts),
                    }}),
                    Err(e) => json!({ "maia": { "filesNotRestored": e.to_string() } }),
                };
            }
            conn.respond(id, answer);
        });
    }
}

/// The answer to a rewind.
fn result(
    done: Result<maia_core::timeline::Rewound, RewindError>,
    session_id: &str,
) -> Result<Value, RpcError> {
    match done {
        Ok(_) => Ok(json!({ "rewound": true, "sessionId": session_id })),
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
