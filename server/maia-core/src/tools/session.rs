//! The tools that act on the session itself, as [`Tool`]s: `TodoWrite`
//! (the task list, shown as a plan), `CurrentModel` and `AskUser` (a
//! question with choices, through the editor's form or as text). They have
//! no effect outside the conversation, so no rule matching means allowed.
//! Their definitions and parsing live in [`crate::session_tools`].

use std::path::Path;
use std::sync::Arc;

use maia_llm::{ToolCall, ToolSpec};
use maia_tools::ToolOutput;
use serde_json::Value;

use super::registry::{CallEnv, CallPlan, Ran, Tool, ToolEffect, TurnEffect};
use crate::event::Event;
use crate::permission::{GateFacts, suggest_rule_value};
use crate::session_tools::{self, Todo};

/// The facts of a call without side effects.
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

/// `TodoWrite`: replaces the session's task list (shown at once; the
/// session keeps the list after the batch, [`TurnEffect::TodosChanged`]).
pub(crate) struct TodoWrite;

#[async_trait::async_trait]
impl Tool for TodoWrite {
    fn spec(&self) -> ToolSpec {
        session_tools::todo_definition()
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::Conversation
    }

    fn plan(&self, call: &ToolCall, raw: &Value, cwd: &Path) -> Result<CallPlan, String> {
        let todos = session_tools::parse_todos(&call.arguments)?;
        let title = format!("Update the task list ({} tasks)", todos.len());
        Ok(CallPlan::new(title, quiet(call, raw, cwd), todos))
    }

    async fn run(&self, plan: CallPlan, env: &CallEnv<'_>) -> Ran {
        let todos: Vec<Todo> = plan.take().unwrap_or_default();
        let result = session_tools::todo_result(&todos);
        let _ = env.batch.events.send(Event::Plan(todos.clone()));
        Ran::with(ToolOutput::ok(result), TurnEffect::TodosChanged(todos))
    }
}

/// `CurrentModel`: the model of this turn.
pub(crate) struct CurrentModel {
    pub model: Option<String>,
}

#[async_trait::async_trait]
impl Tool for CurrentModel {
    fn spec(&self) -> ToolSpec {
        session_tools::current_model_definition()
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::Session
    }

    fn plan(&self, call: &ToolCall, raw: &Value, cwd: &Path) -> Result<CallPlan, String> {
        Ok(CallPlan::new(
            "Current model".to_owned(),
            quiet(call, raw, cwd),
            (),
        ))
    }

    async fn run(&self, _plan: CallPlan, _env: &CallEnv<'_>) -> Ran {
        match &self.model {
            Some(model) => ToolOutput::ok(format!("The current model is `{model}`.")),
            None => ToolOutput::error("No model is chosen yet."),
        }
        .into()
    }
}

/// `AskUser`: through the editor's form when it has one; else the question
/// is shown as text and the turn ends after this batch
/// ([`TurnEffect::AskedAsText`]), so the user answers in their next prompt.
pub(crate) struct AskUser {
    pub asker: Option<Arc<dyn crate::client::Asker>>,
}

#[async_trait::async_trait]
impl Tool for AskUser {
    fn spec(&self) -> ToolSpec {
        session_tools::ask_user_definition()
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::Conversation
    }

    fn plan(&self, call: &ToolCall, raw: &Value, cwd: &Path) -> Result<CallPlan, String> {
        let question = session_tools::parse_question(&call.arguments)?;
        let title = format!("Ask: {}", question.0);
        Ok(CallPlan::new(title, quiet(call, raw, cwd), question))
    }

    async fn run(&self, plan: CallPlan, env: &CallEnv<'_>) -> Ran {
        let Some((question, choices)) = plan.take::<(String, Vec<String>)>() else {
            return ToolOutput::error("internal error: no question").into();
        };
        let Some(asker) = &self.asker else {
            let _ = env.batch.events.send(Event::AgentText {
                message_id: uuid::Uuid::new_v4().to_string(),
                text: session_tools::question_text(&question, &choices),
            });
            let told = ToolOutput::ok(
                "The question was shown to the user as text and the turn ends now: their answer \
will be their next message. Do not guess it.",
            );
            return Ran::with(told, TurnEffect::AskedAsText);
        };
        let question = crate::client::Question {
            question,
            choices,
            tool_call_id: env.id.to_owned(),
        };
        // Questions are asked one at a time, like permissions.
        let asked = async {
            let _turn = env.batch.ask.lock().await;
            asker.ask(&question).await
        };
        let answer = tokio::select! {
            biased;
            () = env.ctx.cancel.cancelled() => return ToolOutput::cancelled().into(),
            answer = asked => answer,
        };
        match answer {
            Ok(answer) => ToolOutput::ok(session_tools::answer_result(&answer)),
            Err(e) => ToolOutput::error(format!(
                "The question could not be asked: {e}. Ask it in your answer instead."
            )),
        }
        .into()
    }
}
