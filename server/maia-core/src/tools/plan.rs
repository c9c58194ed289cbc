//! `ExitPlanMode {plan}` as a [`Tool`], offered in the `plan` mode only: it
//! puts the whole plan to the user as a permission question
//! ([`crate::plan_mode::choices`]) and, when the user approves, returns
//! the mode to switch to ([`TurnEffect::SwitchMode`]); the session applies
//! it after the batch and the turn goes on.

use std::path::Path;

use maia_llm::{ToolCall, ToolSpec};
use maia_tools::{ToolKind, ToolOutput};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::registry::{CallEnv, CallPlan, Ran, Tool, ToolEffect, TurnEffect};
use crate::event::{Event, PermissionReply, PermissionRequest, ToolCallView, ToolContent};
use crate::permission::GateFacts;
use crate::plan_mode;

/// The title of the plan question.
const TITLE: &str = "Ready to code?";

pub(crate) struct ExitPlanMode;

#[async_trait::async_trait]
impl Tool for ExitPlanMode {
    fn spec(&self) -> ToolSpec {
        plan_mode::definition()
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::Conversation
    }

    fn plan(&self, call: &ToolCall, raw: &Value, _cwd: &Path) -> Result<CallPlan, String> {
        let plan = plan_mode::parse(&call.arguments)?;
        // The question is this tool's own: the gate lets the call through.
        let gate = GateFacts {
            rule_name: call.name.clone(),
            rule_input: raw.clone(),
            side_effect_free: true,
            action: "leave plan mode",
            ..GateFacts::default()
        };
        let mut planned = CallPlan::new(TITLE.to_owned(), gate, plan);
        planned.kind = Some(ToolKind::Read);
        Ok(planned)
    }

    async fn run(&self, plan: CallPlan, env: &CallEnv<'_>) -> Ran {
        let Some(markdown) = plan.take::<String>() else {
            return ToolOutput::error("internal error: no plan").into();
        };
        // One question at a time, like permissions.
        let _turn = env.batch.ask.lock().await;
        let _ = env.batch.events.send(Event::PlanProposed {
            id: plan_mode::PLAN_ID.to_owned(),
            markdown: markdown.clone(),
        });
        let (reply, answered) = oneshot::channel();
        let _ = env.batch.events.send(Event::Permission(PermissionRequest {
            tool_call: ToolCallView {
                id: env.id.to_owned(),
                name: plan_mode::EXIT_PLAN_MODE.to_owned(),
                title: TITLE.to_owned(),
                kind: Some(ToolKind::Read),
                locations: Vec::new(),
                raw_input: json!({ "plan": markdown }),
                status: crate::event::ToolStatus::Pending,
                content: vec![ToolContent::Text { text: markdown }],
            },
            options: plan_mode::choices(),
            reply,
        }));
        let reply = tokio::select! {
            biased;
            () = env.ctx.cancel.cancelled() => return ToolOutput::cancelled().into(),
            reply = answered => reply.unwrap_or(PermissionReply::Cancelled),
        };
        match plan_mode::answer(reply) {
            None => ToolOutput::cancelled().into(),
            Some((None, told)) => ToolOutput::ok(told).into(),
            Some((Some(mode), told)) => {
                Ran::with(ToolOutput::ok(told), TurnEffect::SwitchMode(mode))
            }
        }
    }
}
