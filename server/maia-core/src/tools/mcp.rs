//! The tools of the session's MCP servers (`mcp__<server>__<tool>`), one
//! [`Tool`] each, registered per turn as servers come and go.

use std::path::Path;
use std::sync::Arc;

use maia_llm::{ToolCall, ToolSpec};
use maia_mcp::{McpManager, McpTool};
use maia_tools::ToolKind;
use serde_json::Value;

use super::registry::{CallEnv, CallPlan, Ran, Tool, ToolEffect};
use crate::permission::{GateFacts, suggest_rule_value};

pub(crate) struct Mcp {
    pub manager: Arc<McpManager>,
    pub tool: McpTool,
}

#[async_trait::async_trait]
impl Tool for Mcp {
    fn spec(&self) -> ToolSpec {
        let t = &self.tool;
        ToolSpec {
            name: t.full_name.clone(),
            description: if t.description.is_empty() {
                t.title.clone()
            } else {
                t.description.clone()
            },
            parameters: t.input_schema.clone(),
        }
    }

    /// Another server's tool: MAIA cannot know what it changes
    /// (annotations are hints, not guarantees).
    fn effect(&self) -> ToolEffect {
        ToolEffect::Process
    }

    fn plan(&self, call: &ToolCall, raw: &Value, cwd: &Path) -> Result<CallPlan, String> {
        let t = &self.tool;
        // Annotations are hints from the server, not guarantees.
        let facts = GateFacts {
            rule_name: call.name.clone(),
            rule_input: raw.clone(),
            mutating: true,
            suggestion: suggest_rule_value(&call.name, raw, cwd),
            action: "run this tool",
            ..GateFacts::default()
        };
        let mut plan = CallPlan::new(format!("{} ({})", t.title, t.server), facts, raw.clone());
        plan.kind = (t.read_only && t.open_world).then_some(ToolKind::Fetch);
        Ok(plan)
    }

    async fn run(&self, plan: CallPlan, env: &CallEnv<'_>) -> Ran {
        let input: Value = plan.take().unwrap_or(Value::Null);
        self.manager
            .call(&self.tool.full_name, input, &env.ctx.cancel)
            .await
            .into()
    }
}
