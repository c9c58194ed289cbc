//! The project's custom tools (`.maia/tools/*/TOOL.json`) as [`Tool`]s.
//! A tool that is new or changed since the user confirmed it is asked in
//! every mode until confirmed ("always allow").

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use maia_llm::{ToolCall, ToolSpec};
use maia_tools::{ToolKind, ToolOutput};
use serde_json::Value;

use super::registry::{CallEnv, CallPlan, Tool};
use crate::custom_tools::CustomTool;
use crate::permission::{Confirm, GateFacts, suggest_rule_value};

pub(crate) struct Custom {
    pub tool: CustomTool,
    /// The session's custom tools not confirmed as they are now.
    pub pending: Arc<Mutex<HashSet<String>>>,
}

#[async_trait::async_trait]
impl Tool for Custom {
    fn spec(&self) -> ToolSpec {
        self.tool.definition()
    }

    fn plan(&self, call: &ToolCall, raw: &Value, cwd: &Path) -> Result<CallPlan, String> {
        let name = &self.tool.name;
        let unconfirmed = self.pending.lock().is_ok_and(|p| p.contains(name));
        let facts = GateFacts {
            rule_name: call.name.clone(),
            rule_input: raw.clone(),
            mutating: true,
            suggestion: suggest_rule_value(&call.name, raw, cwd),
            confirm: unconfirmed.then(|| Confirm {
                name: name.clone(),
                fingerprint: self.tool.fingerprint.clone(),
            }),
            action: "run this tool",
            ..GateFacts::default()
        };
        let mut plan = CallPlan::new(name.clone(), facts, raw.clone());
        plan.kind = Some(ToolKind::Execute);
        plan.sandbox_key = Some(format!("{name} {raw}"));
        Ok(plan)
    }

    async fn run(&self, plan: CallPlan, env: &CallEnv<'_>) -> ToolOutput {
        let input: Value = plan.take().unwrap_or(Value::Null);
        self.tool
            .run_sandboxed(
                &input,
                &env.ctx.cwd,
                &env.ctx.cancel,
                env.ctx.sandbox.as_deref(),
            )
            .await
    }

    fn confirmed(&self) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.remove(&self.tool.name);
        }
    }
}
