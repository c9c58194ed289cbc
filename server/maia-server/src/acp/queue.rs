//! `_session/queue`: the session's prompt queue, in codex-acp's shape
//! (`src/SessionQueue.ts`): `{sessionId, action: "list" | "add" | "update" |
//! "delete" | "reorder" | "start", …}` answered `{status: "ok", result}`, and
//! the notifications `_session/queue/changed` `{sessionId}` (list again) and
//! `_session/queue/turn` `{sessionId, turn: {id, status, queuedSubmissionId}}`
//! when a queued prompt's turn starts and ends. Advertised as `initialize`
//! `_meta.queue`.

use maia_core::queue::{QueueAnswer, QueueError, QueueInput, QueueOp, QueueTurnStatus, Queued};
use maia_rpc::{Connection, ErrorCode, Id, RpcError};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Agent, invalid_params, unknown_session};

pub(super) const METHOD: &str = "_session/queue";
const CHANGED: &str = "_session/queue/changed";
const TURN: &str = "_session/queue/turn";
const ACTIONS: [&str; 6] = ["list", "add", "update", "delete", "reorder", "start"];

/// What `initialize` adds to its `_meta` (key `queue`).
pub(super) fn capability() -> Value {
    json!({
        "version": 1,
        "method": METHOD,
        "actions": ACTIONS,
        "changedNotification": CHANGED,
        "turnNotification": TURN,
    })
}

#[derive(Deserialize)]
#[serde(tag = "action", rename_all = "camelCase")]
enum Action {
    List {},
    #[serde(rename_all = "camelCase")]
    Add {
        input: Vec<QueueInput>,
        client_user_message_id: String,
    },
    #[serde(rename_all = "camelCase")]
    Update {
        queued_submission_id: String,
        input: Vec<QueueInput>,
    },
    #[serde(rename_all = "camelCase")]
    Delete {
        queued_submission_id: String,
    },
    #[serde(rename_all = "camelCase")]
    Reorder {
        queued_submission_ids: Vec<String>,
    },
    #[serde(rename_all = "camelCase")]
    Start {
        #[serde(default)]
        queued_submission_id: Option<String>,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    session_id: String,
    #[serde(flatten)]
    action: Action,
}

impl From<Action> for QueueOp {
    fn from(action: Action) -> Self {
        match action {
            Action::List {} => QueueOp::List,
            Action::Add {
                input,
                client_user_message_id,
            } => QueueOp::Add {
                input,
                client_user_message_id,
            },
            Action::Update {
                queued_submission_id,
                input,
            } => QueueOp::Update {
                id: queued_submission_id,
                input,
            },
            Action::Delete {
                queued_submission_id,
            } => QueueOp::Delete {
                id: queued_submission_id,
            },
            Action::Reorder {
                queued_submission_ids,
            } => QueueOp::Reorder {
                ids: queued_submission_ids,
            },
            Action::Start {
                queued_submission_id,
            } => QueueOp::Start {
                id: queued_submission_id,
            },
        }
    }
}

fn item(queued: &Queued) -> Value {
    serde_json::to_value(queued).unwrap_or(Value::Null)
}

fn result(answer: Result<QueueAnswer, QueueError>) -> Result<Value, RpcError> {
    let result = match answer {
        Ok(QueueAnswer::List(items)) => json!({
            "data": items.iter().map(item).collect::<Vec<_>>(),
            "nextCursor": null,
        }),
        Ok(QueueAnswer::Written(queued)) => json!({ "queuedSubmission": item(&queued) }),
        Ok(QueueAnswer::Deleted(deleted)) => json!({ "deleted": deleted }),
        Ok(QueueAnswer::Reordered) => json!({}),
        Ok(QueueAnswer::Started { turn_id }) => {
            json!({ "turn": { "id": turn_id, "status": "inProgress" } })
        }
        Err(e @ (QueueError::Busy | QueueError::Ended)) => {
            return Err(RpcError::new(ErrorCode::InvalidRequest, e.to_string()));
        }
        Err(e) => return Err(invalid_params(e.to_string())),
    };
    Ok(json!({ "status": "ok", "result": result }))
}

impl Agent {
    pub(super) fn queue(&self, id: Id, params: Value) {
        if self.client_caps().is_none() {
            return self.conn.respond(
                id,
                Err(RpcError::new(
                    ErrorCode::InvalidRequest,
                    "the connection is not initialized: call `initialize` first",
                )),
            );
        }
        let request: Request = match serde_json::from_value(params) {
            Ok(request) => request,
            // Prompt content is not echoed.
            Err(_) => {
                return self
                    .conn
                    .respond(id, Err(invalid_params("invalid session queue request")));
            }
        };
        let Some(entry) = self.entry(&request.session_id) else {
            return self
                .conn
                .respond(id, Err(unknown_session(&request.session_id)));
        };
        let answer = entry.handle.queue(request.action.into());
        let conn = self.conn.clone();
        tokio::spawn(async move {
            conn.respond(id, result(answer.await));
        });
    }
}

/// `_session/queue/changed` for `session_id`.
pub(super) fn notify_changed(conn: &Connection, session_id: &str) {
    conn.notify(CHANGED, json!({ "sessionId": session_id }));
}

/// `_session/queue/turn` for `session_id`.
pub(super) fn notify_turn(
    conn: &Connection,
    session_id: &str,
    (turn_id, queued_id, status): (String, String, QueueTurnStatus),
) {
    let status = match status {
        QueueTurnStatus::InProgress => "inProgress",
        QueueTurnStatus::Completed => "completed",
        QueueTurnStatus::Interrupted => "interrupted",
    };
    conn.notify(
        TURN,
        json!({
            "sessionId": session_id,
            "turn": { "id": turn_id, "status": status, "queuedSubmissionId": queued_id },
        }),
    );
}
