//! The `Task` tool: `{description, prompt, agent?}` starts a child session
//! ([`crate::subagent`]) that runs the agent on the prompt to its final
//! answer, which becomes the call's result. The child's events reach the
//! parent's front door as [`Event::Subagent`]; its permission questions
//! are the parent's own, titled with the agent's name. Cancelling the
//! parent's turn cancels the child; a child cancelled alone (by the
//! editor) ends the call with "cancelled by the user".

use std::path::Path;
use std::sync::Arc;

use maia_llm::{ToolCall, ToolSpec};
use maia_tools::ToolOutput;
use serde::Deserialize;
use serde_json::{Value, json};

use super::registry::{CallEnv, CallPlan, Ran, Tool, ToolEffect};
use crate::event::{
    Event, StopReason, SubagentEvent, SubagentInfo, SubagentState, SubagentUpdate, ToolCallView,
};
use crate::permission::GateFacts;
use crate::store::Record;
use crate::subagent::{AgentDef, ChildRequest, LoadedAgents, Progress, StartChild};

pub(crate) const NAME: &str = "Task";

/// What a call asks for.
#[derive(Deserialize)]
struct Input {
    description: String,
    prompt: String,
    #[serde(default, alias = "subagent_type")]
    agent: Option<String>,
}

pub(crate) fn definition(agents: &LoadedAgents) -> ToolSpec {
    ToolSpec {
        name: NAME.to_owned(),
        description: crate::subagent::tool_description(agents),
        parameters: json!({
            "type": "object",
            "properties": {
                "description": {"type": "string", "description": "A short (3-5 word) description of the task"},
                "prompt": {"type": "string", "description": "The task for the agent, with everything it needs to know"},
                "agent": {"type": "string", "description": "The agent to use (default: general-purpose, with the tools of this session)"}
            },
            "required": ["description", "prompt"]
        }),
    }
}

pub(crate) struct Task {
    pub agents: Arc<LoadedAgents>,
    pub start: StartChild,
}

/// The agent of a call without one: this session's tools and prompt.
fn general() -> AgentDef {
    AgentDef {
        fallback_models: None,
        name: "general-purpose".to_owned(),
        description: String::new(),
        tools: None,
        reads_only: false,
        model: crate::subagent::ModelChoice::Inherit,
        prompt: None,
        path: None,
    }
}

#[async_trait::async_trait]
impl Tool for Task {
    fn spec(&self) -> ToolSpec {
        definition(&self.agents)
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::Subagent
    }

    fn plan(&self, call: &ToolCall, raw: &Value, _cwd: &Path) -> Result<CallPlan, String> {
        let input: Input = serde_json::from_value(raw.clone())
            .map_err(|e| format!("invalid arguments for Task: {e}"))?;
        let agent = match input.agent.as_deref().map(str::trim) {
            None | Some("" | "general-purpose") => general(),
            Some(name) => self.agents.get(name).cloned().ok_or_else(|| {
                let names: Vec<&str> = self.agents.agents.iter().map(|a| a.name.as_str()).collect();
                format!("Unknown agent `{name}`. Agents: {}.", names.join(", "))
            })?,
        };
        // Starting a child changes nothing: its own calls are asked.
        let gate = GateFacts {
            rule_name: call.name.clone(),
            rule_input: raw.clone(),
            side_effect_free: true,
            action: "start this subagent",
            ..GateFacts::default()
        };
        let title = format!("{}: {}", agent.name, input.description);
        Ok(CallPlan::new(
            title,
            gate,
            (agent, input.description, input.prompt),
        ))
    }

    async fn run(&self, plan: CallPlan, env: &CallEnv<'_>) -> Ran {
        let Some((agent, description, prompt)) = plan.take::<(AgentDef, String, String)>() else {
            return ToolOutput::error("Error: the Task call could not be read.").into();
        };
        let events = &env.batch.events;
        let child = (self.start)(ChildRequest {
            agent: agent.clone(),
            description: description.clone(),
            prompt: prompt.clone(),
            tool_call_id: env.id.to_owned(),
        });
        let mut child = match child {
            Ok(child) => child,
            Err(e) => {
                return ToolOutput::error(format!("Error: the subagent could not start: {e}"))
                    .into();
            }
        };
        let info = Arc::new(SubagentInfo {
            id: child.id.clone(),
            tool_call_id: env.id.to_owned(),
            agent: agent.name.clone(),
            description,
            prompt,
        });
        let send = |update: SubagentUpdate| {
            let _ = events.send(Event::Subagent(SubagentEvent {
                child: info.clone(),
                update,
            }));
        };
        send(SubagentUpdate::Started);
        let mut run = Run::default();
        let cancel = env.ctx.cancel.clone();
        let mut cancelled_here = false;
        let stop = loop {
            let event = tokio::select! {
                event = child.events.recv() => event,
                () = cancel.cancelled(), if !cancelled_here => {
                    // The parent's turn ends: so does the child's.
                    cancelled_here = true;
                    child.control.cancel();
                    continue;
                }
            };
            match event {
                None => break StopReason::Cancelled,
                Some(Event::TurnEnded(stop)) => break stop,
                Some(Event::Permission(mut request)) => {
                    request.tool_call.title =
                        format!("{}: {}", agent.name, request.tool_call.title);
                    let _ = events.send(Event::Permission(request));
                }
                Some(event) => {
                    if run.absorb(&event) {
                        send(SubagentUpdate::Progress {
                            text: run.progress.text(),
                            locations: run.progress.locations().to_vec(),
                        });
                    }
                    if shown(&event) {
                        send(SubagentUpdate::Event(Box::new(event)));
                    }
                }
            }
        };
        let answer = run.answer();
        let (state, output) = match (stop, run.failed) {
            (StopReason::Cancelled, _) => (
                SubagentState::Cancelled,
                ToolOutput::error(
                    "The subagent was cancelled by the user before it finished; it gave no answer.",
                ),
            ),
            (_, Some(failure)) => (
                SubagentState::Failed,
                ToolOutput::error(format!("The subagent failed: {failure}")),
            ),
            _ if answer.trim().is_empty() => (
                SubagentState::Completed,
                ToolOutput::ok("The subagent finished without an answer."),
            ),
            _ => (SubagentState::Completed, ToolOutput::ok(answer.clone())),
        };
        if let Ok(mut records) = env.batch.records.lock() {
            records.push(Record::subagent(&info, &run.calls, state, answer.clone()));
        }
        send(SubagentUpdate::Ended { state, answer });
        output.into()
    }
}

/// Whether a child event is shown as the child's own (the rest is
/// bookkeeping of its session: its title, model, commands, queue).
fn shown(event: &Event) -> bool {
    matches!(
        event,
        Event::AgentText { .. }
            | Event::Thought { .. }
            | Event::ToolCall(_)
            | Event::ToolCallUpdate(_)
            | Event::Plan(_)
            | Event::Usage { .. }
            | Event::Compaction { .. }
            | Event::Notice { .. }
            | Event::Subagent(_)
    )
}

/// What a child's turn did: its progress, its tool calls in their latest
/// state, its messages (the last is the answer), whether it failed.
#[derive(Default)]
struct Run {
    progress: Progress,
    calls: Vec<ToolCallView>,
    messages: Vec<(String, String)>,
    failed: Option<String>,
}

impl Run {
    /// Takes in one child event; `true` when its progress changed.
    fn absorb(&mut self, event: &Event) -> bool {
        match event {
            Event::AgentText { message_id, text } => match self.messages.last_mut() {
                Some((id, said)) if id == message_id => said.push_str(text),
                _ => self.messages.push((message_id.clone(), text.clone())),
            },
            Event::TurnFailed(message) => self.failed = Some(message.clone()),
            Event::ToolCall(view) => self.calls.push(view.clone()),
            Event::ToolCallUpdate(patch) => {
                if let Some(view) = self.calls.iter_mut().find(|v| v.id == patch.id) {
                    if let Some(status) = patch.status {
                        view.status = status;
                    }
                    if let Some(content) = &patch.content {
                        view.content.clone_from(content);
                    }
                }
            }
            _ => {}
        }
        self.progress.absorb(event)
    }

    /// The child's final answer: its last message.
    fn answer(&self) -> String {
        self.messages
            .last()
            .map(|(_, text)| text.clone())
            .unwrap_or_default()
    }
}
