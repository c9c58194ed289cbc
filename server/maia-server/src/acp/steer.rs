//! `_session/steering`: a message added to a session's running turn
//! without cancelling it (the private extension codex-acp and
//! claude-agent-acp share; advertised as `initialize` `_meta.steering`).
//! Params `{sessionId, prompt: ContentBlock[], _meta?: {steering:
//! {idleBehavior: "promptRequired"}}}`; result `{outcome: "injected" |
//! "startedNewTurn" | "promptRequired" | "failed", reason?}`, written once
//! the engine used the message (or did not).

use agent_client_protocol_schema::v1::ContentBlock;
use maia_core::SteerOutcome;
use maia_rpc::{ErrorCode, Id, RpcError};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{Agent, invalid_params, unknown_session};

/// The method name.
pub(super) const METHOD: &str = "_session/steering";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SteerParams {
    session_id: String,
    prompt: Vec<ContentBlock>,
    #[serde(rename = "_meta", default)]
    meta: Option<Value>,
}

/// What `initialize` adds to its `_meta`.
pub(super) fn capability() -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert("steering".into(), json!({ "supported": true }));
    meta
}

/// The result of a steer on the wire.
fn outcome(outcome: SteerOutcome) -> Value {
    match outcome {
        SteerOutcome::Injected { .. } => json!({ "outcome": "injected" }),
        SteerOutcome::StartedNewTurn { .. } => json!({ "outcome": "startedNewTurn" }),
        SteerOutcome::PromptRequired => {
            json!({ "outcome": "promptRequired", "reason": "noRunningTurn" })
        }
        SteerOutcome::Failed(reason) => json!({ "outcome": "failed", "reason": reason }),
    }
}

impl Agent {
    /// Hands the steer to the session and answers when it was used.
    pub(super) fn steer(&self, id: Id, params: Value) {
        match self.start_steer(params) {
            Ok(answer) => {
                let conn = self.conn.clone();
                tokio::spawn(async move {
                    conn.respond(id, Ok(outcome(answer.await)));
                });
            }
            Err(e) => self.conn.respond(id, Err(e)),
        }
    }

    fn start_steer(
        &self,
        params: Value,
    ) -> Result<impl std::future::Future<Output = SteerOutcome> + use<>, RpcError> {
        if self.client_caps().is_none() {
            return Err(RpcError::new(
                ErrorCode::InvalidRequest,
                "the connection is not initialized: call `initialize` first",
            ));
        }
        let params: SteerParams = serde_json::from_value(params)
            .map_err(|e| invalid_params(format!("invalid params for {METHOD}: {e}")))?;
        let prompt_required = params
            .meta
            .as_ref()
            .and_then(|m| m.pointer("/steering/idleBehavior"))
            .and_then(Value::as_str)
            == Some("promptRequired");
        let entry = self
            .entry(&params.session_id)
            .ok_or_else(|| unknown_session(&params.session_id))?;
        let undone = super::undone::from_meta(params.meta.as_ref().and_then(Value::as_object))?;
        let parts: Vec<_> = undone
            .into_iter()
            .chain(super::prompt::prompt_parts(params.prompt)?)
            .collect();
        if parts.is_empty() {
            return Err(invalid_params("the steering prompt is empty"));
        }
        Ok(entry.handle.steer(parts, prompt_required))
    }
}
