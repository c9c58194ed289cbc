//! The `Skill` tool: loads the instructions of one of the session's
//! skills (offered only when the session has skills).

use std::path::Path;
use std::sync::Arc;

use maia_llm::{ToolCall, ToolSpec};
use maia_tools::{ToolKind, ToolOutput};
use serde_json::Value;

use super::registry::{CallEnv, CallPlan, Ran, Tool, ToolEffect};
use crate::permission::{GateFacts, suggest_rule_value};
use crate::skills::{self, LoadedSkills, SkillInput};

pub(crate) struct Skill {
    pub skills: Arc<LoadedSkills>,
}

#[async_trait::async_trait]
impl Tool for Skill {
    fn spec(&self) -> ToolSpec {
        skills::tool_definition()
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::Session
    }

    fn plan(&self, call: &ToolCall, raw: &Value, cwd: &Path) -> Result<CallPlan, String> {
        let input = SkillInput::parse(&call.arguments)?;
        let Some(skill) = self.skills.get(&input.skill) else {
            let known: Vec<&str> = self.skills.skills.iter().map(|s| s.name.as_str()).collect();
            return Err(format!(
                "unknown skill `{}`; available: {}",
                input.skill,
                known.join(", ")
            ));
        };
        let facts = GateFacts {
            rule_name: call.name.clone(),
            rule_input: raw.clone(),
            suggestion: suggest_rule_value(&call.name, raw, cwd),
            action: "run this tool call",
            ..GateFacts::default()
        };
        let mut plan = CallPlan::new(format!("Load skill {}", input.skill), facts, ());
        plan.kind = Some(ToolKind::Read);
        plan.locations = vec![skill.path.clone()];
        plan.input = Box::new(input);
        Ok(plan)
    }

    async fn run(&self, plan: CallPlan, _env: &CallEnv<'_>) -> Ran {
        let Some(input) = plan.take::<SkillInput>() else {
            return ToolOutput::error("internal error: no skill input").into();
        };
        let Some(skill) = self.skills.get(&input.skill).cloned() else {
            return ToolOutput::error(format!("unknown skill `{}`", input.skill)).into();
        };
        // Reading the file: off the async workers.
        let read = tokio::task::spawn_blocking(move || {
            skills::body(&skill, &input.arguments)
                .map_err(|e| format!("cannot read {}: {e}", skill.path.display()))
        })
        .await;
        match read {
            Ok(Ok(body)) => ToolOutput::ok(body),
            Ok(Err(e)) => ToolOutput::error(e),
            Err(e) => ToolOutput::error(format!("reading the skill failed: {e}")),
        }
        .into()
    }
}
