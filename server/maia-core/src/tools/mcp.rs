//! The tools of the session's MCP servers (`mcp__<server>__<tool>`), one
//! [`Tool`] each, registered per turn as servers come and go; each may be
//! offered by name only until loaded ([`super::deferred`]).

use std::path::Path;
use std::sync::Arc;

use maia_llm::{ToolCall, ToolSpec};
use maia_mcp::{McpManager, McpTool};
use maia_tools::ToolKind;
use serde_json::Value;

use super::registry::{CallEnv, CallPlan, Ran, Tool, ToolEffect, TurnEffect};
use crate::permission::{GateFacts, suggest_rule_value};

pub(crate) struct Mcp {
    pub manager: Arc<McpManager>,
    pub tool: McpTool,
}

/// The definition of a server's tool, as the model is offered it.
pub(crate) fn spec_of(t: &McpTool) -> ToolSpec {
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

#[async_trait::async_trait]
impl Tool for Mcp {
    fn spec(&self) -> ToolSpec {
        spec_of(&self.tool)
    }

    /// Offered by name only while the servers' tools weigh too much
    /// ([`super::deferred`]).
    fn deferrable(&self) -> bool {
        true
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

    /// A call loads the tool: its definition is sent from the next
    /// request on (a call by name before any search is run, not refused).
    async fn run(&self, plan: CallPlan, env: &CallEnv<'_>) -> Ran {
        let input: Value = plan.take().unwrap_or(Value::Null);
        let output = self
            .manager
            .call(&self.tool.full_name, input, &env.ctx.cancel)
            .await;
        Ran::with(
            output,
            TurnEffect::ToolsLoaded(vec![self.tool.full_name.clone()]),
        )
    }
}
