//! `_session/async_task/stop`: stops one background task of a session
//! (`Bash` with `run_in_background`) without cancelling its turn, in
//! claude-agent-acp's shape: `{sessionId, asyncTaskId}` (`taskId` is taken
//! too) answered `{stopped: bool}` — whether a running task was stopped.

use maia_rpc::{ErrorCode, RpcError};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Agent, invalid_params, unknown_session};

pub(super) const METHOD: &str = "_session/async_task/stop";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StopParams {
    session_id: String,
    #[serde(alias = "taskId")]
    async_task_id: String,
}

impl Agent {
    pub(super) fn stop_task(&self, params: Value) -> Result<Value, RpcError> {
        if self.client_caps().is_none() {
            return Err(RpcError::new(
                ErrorCode::InvalidRequest,
                "the connection is not initialized: call `initialize` first",
            ));
        }
        let params: StopParams = serde_json::from_value(params)
            .map_err(|e| invalid_params(format!("invalid params for {METHOD}: {e}")))?;
        let entry = self
            .entry(&params.session_id)
            .ok_or_else(|| unknown_session(&params.session_id))?;
        let stopped = entry
            .handle
            .stop_task(&params.async_task_id)
            .unwrap_or(false);
        Ok(json!({ "stopped": stopped }))
    }
}
