//! The tools that work on the session's background tasks
//! ([`crate::background`]): `TaskOutput` (the new output of a task) and
//! `TaskStop` (stops it and everything it started).

use std::path::Path;

use maia_llm::{ToolCall, ToolSpec};
use maia_tools::ToolOutput;
use serde_json::{Value, json};

use super::registry::{CallEnv, CallPlan, Ran, Tool, ToolEffect};
use crate::background::Tasks;
use crate::permission::{GateFacts, suggest_rule_value};

pub(crate) fn output_definition() -> ToolSpec {
    ToolSpec {
        name: "TaskOutput".to_owned(),
        description: "Read the new output of a background task (started by Bash with \
run_in_background) since the last read, and whether it still runs."
            .to_owned(),
        parameters: json!({"type": "object", "properties": {"task_id": {"type": "string"}}, "required": ["task_id"]}),
    }
}

pub(crate) fn stop_definition() -> ToolSpec {
    ToolSpec {
        name: "TaskStop".to_owned(),
        description: "Stop a background task and every process it started.".to_owned(),
        parameters: json!({"type": "object", "properties": {"task_id": {"type": "string"}}, "required": ["task_id"]}),
    }
}

fn task_id(call: &ToolCall) -> Result<String, String> {
    let args: Value = serde_json::from_str(&call.arguments).map_err(|e| e.to_string())?;
    args["task_id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| "`task_id` is required".to_owned())
}

/// Reading or stopping MAIA's own tasks has no effect outside them.
fn quiet(call: &ToolCall, raw: &Value, cwd: &Path) -> GateFacts {
    GateFacts {
        rule_name: call.name.clone(),
        rule_input: raw.clone(),
        side_effect_free: true,
        suggestion: suggest_rule_value(&call.name, raw, cwd),
        action: "run this tool call",
        ..GateFacts::default()
    }
}

pub(crate) struct TaskOutput {
    pub tasks: Tasks,
}

#[async_trait::async_trait]
impl Tool for TaskOutput {
    fn spec(&self) -> ToolSpec {
        output_definition()
    }

    /// The output of the session's own background command.
    fn effect(&self) -> ToolEffect {
        ToolEffect::Conversation
    }

    fn plan(&self, call: &ToolCall, raw: &Value, cwd: &Path) -> Result<CallPlan, String> {
        let id = task_id(call)?;
        Ok(CallPlan::new(
            format!("Output of {id}"),
            quiet(call, raw, cwd),
            id,
        ))
    }

    async fn run(&self, plan: CallPlan, _env: &CallEnv<'_>) -> Ran {
        let id: String = plan.take().unwrap_or_default();
        match self.tasks.output(&id) {
            Ok(text) => ToolOutput::ok(text),
            Err(e) => ToolOutput::error(e),
        }
        .into()
    }
}

pub(crate) struct TaskStop {
    pub tasks: Tasks,
}

#[async_trait::async_trait]
impl Tool for TaskStop {
    fn spec(&self) -> ToolSpec {
        stop_definition()
    }

    /// Stopping a command is acting on a process.
    fn effect(&self) -> ToolEffect {
        ToolEffect::Process
    }

    fn plan(&self, call: &ToolCall, raw: &Value, cwd: &Path) -> Result<CallPlan, String> {
        let id = task_id(call)?;
        Ok(CallPlan::new(
            format!("Stop {id}"),
            quiet(call, raw, cwd),
            id,
        ))
    }

    async fn run(&self, plan: CallPlan, _env: &CallEnv<'_>) -> Ran {
        let id: String = plan.take().unwrap_or_default();
        match self.tasks.stop(&id) {
            Ok(true) => ToolOutput::ok(format!("Task {id} is being stopped.")),
            Ok(false) => ToolOutput::ok(format!("Task {id} had already ended.")),
            Err(e) => ToolOutput::error(e),
        }
        .into()
    }
}
