//! Subagents: child sessions a turn starts with the `Task` tool
//! (`tools/task.rs`), each with its own history, system prompt
//! and tool set, in the same project, under the same rules and sandbox.
//!
//! This module is a leaf: the agent definitions ([`agents`]), what a
//! `Task` call asks for ([`ChildRequest`]), what it gets back ([`Child`]),
//! what a child session is told about itself ([`ChildRole`]) and the
//! progress a front door shows inside the parent's tool call
//! ([`Progress`]). Starting a child is the session's and the handle's job
//! (`session::Spawner`), reached through [`StartChild`].

pub mod agents;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

pub use agents::{AgentDef, LoadedAgents, ModelChoice};

use crate::event::{Event, ToolCallPatch, ToolCallView, ToolStatus};

/// How deep children nest: a session at this depth is not offered `Task`.
pub const MAX_DEPTH: u8 = 2;

/// What a `Task` call asks for.
pub struct ChildRequest {
    pub agent: AgentDef,
    pub description: String,
    pub prompt: String,
    /// The parent's `Task` tool call.
    pub tool_call_id: String,
}

/// Stops a running child's turn (the child alone).
pub trait ChildControl: Send + Sync {
    fn cancel(&self);
}

/// A started child: its session id, its events (its turn's, ending with
/// [`Event::TurnEnded`]) and its control. Dropping it ends the session.
pub struct Child {
    pub id: String,
    pub events: mpsc::UnboundedReceiver<Event>,
    pub control: Box<dyn ChildControl>,
}

/// Starts a child of the session that built it (its project, rules,
/// sandbox, mode and model), with the agent's prompt as its first turn.
pub type StartChild = Arc<dyn Fn(ChildRequest) -> Result<Child, String> + Send + Sync>;

/// Records a batch's tools leave for their session's journal, written
/// after the batch: a finished child ([`crate::store::Record::Subagent`])
/// and what its responses cost (`Record::Usage`, the charge naming the
/// agent), which a child passes on to its own parent.
pub type Sink = Arc<Mutex<Vec<crate::store::Record>>>;

/// What a session started by a `Task` call knows of its place.
#[derive(Clone)]
pub struct ChildRole {
    pub agent: String,
    /// The agent's system prompt (`None`: MAIA's).
    pub prompt: Option<String>,
    /// The tools it may use (`None`: every tool its parent may).
    pub tools: Option<Vec<String>>,
    /// Only the tools that declare they read (its agent's `reads_only`).
    pub reads_only: bool,
    /// Read-only tools only (its parent was in plan mode).
    pub read_only: bool,
    /// 1 for a child of a top session, 2 for a grandchild.
    pub depth: u8,
    /// Its parent's sink: where its responses are charged.
    pub parent: Sink,
    /// Its parent's spend and limits: a child's requests count toward
    /// them and are checked against them ([`crate::budget`]).
    pub budget: crate::budget::Shared,
    /// Its agent's own `fallbackModels` (`None`: the settings').
    pub fallback_models: Option<Vec<String>>,
}

impl ChildRole {
    /// Whether the child may use `tool`, which declares `effect` (names
    /// compare case-insensitively).
    pub(crate) fn allows(&self, tool: &str, effect: crate::effect::ToolEffect) -> bool {
        (!self.reads_only || effect == crate::effect::ToolEffect::ReadOnly)
            && self
                .tools
                .as_ref()
                .is_none_or(|tools| tools.iter().any(|t| t.eq_ignore_ascii_case(tool)))
    }
}

/// What a child has done so far, as lines for the parent's `Task` tool
/// call (for editors that do not show child sessions): each tool call's
/// title and state, and the files the calls touched.
#[derive(Debug, Default)]
pub struct Progress {
    calls: Vec<(String, String, ToolStatus)>,
    locations: Vec<PathBuf>,
}

impl Progress {
    /// Takes in one child event; `true` when what is shown changed.
    pub fn absorb(&mut self, event: &Event) -> bool {
        match event {
            Event::ToolCall(ToolCallView {
                id,
                title,
                locations,
                status,
                ..
            }) => {
                self.calls.push((id.clone(), title.clone(), *status));
                for location in locations {
                    if !self.locations.contains(location) {
                        self.locations.push(location.clone());
                    }
                }
                true
            }
            Event::ToolCallUpdate(ToolCallPatch {
                id,
                status: Some(status),
                ..
            }) => match self.calls.iter_mut().find(|(i, ..)| i == id) {
                Some(call) if call.2 != *status => {
                    call.2 = *status;
                    true
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// The lines shown: one per tool call (`…` running, `✓` done, `✗`
    /// failed), or "Working…" before the first.
    pub fn text(&self) -> String {
        let mut out: Vec<String> = self
            .calls
            .iter()
            .map(|(_, title, status)| {
                let mark = match status {
                    ToolStatus::Pending | ToolStatus::InProgress => "…",
                    ToolStatus::Completed => "✓",
                    ToolStatus::Failed => "✗",
                };
                format!("{mark} {title}")
            })
            .collect();
        if out.is_empty() {
            out.push("Working…".to_owned());
        }
        out.join("\n")
    }

    /// The files the child's tool calls touched, in order.
    pub fn locations(&self) -> &[PathBuf] {
        &self.locations
    }
}

/// The `Task` tool's description: what it does and the agents it starts.
pub fn tool_description(agents: &LoadedAgents) -> String {
    let mut out = String::from(
        "Starts a subagent: a separate agent with its own conversation that works on one task \
         and returns its final answer as this tool's result. Use it for self-contained research \
         or work whose details need not fill this conversation; several Task calls in one \
         response run in parallel. The subagent sees nothing of this conversation: the prompt \
         must say everything it needs. Agents (name: description):\n",
    );
    for agent in &agents.agents {
        let description: Vec<&str> = agent.description.split_whitespace().collect();
        out.push_str(&format!("\n- {}: {}", agent.name, description.join(" ")));
    }
    out
}
