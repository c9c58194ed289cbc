//! The tools of a session behind one registry. Each family is one file
//! implementing [`registry::Tool`]: built-in ([`builtin`]), session
//! ([`session`]: TodoWrite, CurrentModel, AskUser), [`skill`], [`custom`],
//! [`mcp`], [`lsp`] (Diagnostics, References, Definition, Symbols), [`plan`] (`ExitPlanMode`, in the `plan` mode only) and `task` (`Task`, a subagent); [`registry`] builds the registry of one turn (one line per
//! family), [`effect`] holds what a tool declares it may change and what a
//! call did to its session, and [`router`] runs the calls of one model
//! response.

pub(crate) mod builtin;
mod custom;
pub(crate) mod effect;
mod lsp;
mod mcp;
mod plan;
pub(crate) mod registry;
pub(crate) mod router;
mod session;
mod skill;
mod task;
mod tasks;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use maia_mcp::McpManager;

use crate::custom_tools::LoadedTools;
use crate::skills::LoadedSkills;
pub(crate) use registry::ToolRegistry;

/// What the registry of a turn is built from: the session's state.
pub(crate) struct Sources {
    pub skills: Arc<LoadedSkills>,
    pub custom: Arc<LoadedTools>,
    /// Custom tools not confirmed as they are now.
    pub pending_tools: Arc<Mutex<HashSet<String>>>,
    pub mcp: Arc<McpManager>,
    pub lsp: Arc<maia_lsp_client::LspManager>,
    pub model: Option<String>,
    pub asker: Option<Arc<dyn crate::client::Asker>>,
    /// The session's background tasks.
    pub tasks: crate::background::Tasks,
    /// Which tools the turn offers (the mode, a read-only turn).
    pub set: crate::plan_mode::ToolSet,
    /// The `Task` tool's agents and starter (`None`: not offered).
    pub task: Option<TaskSource>,
    /// A child session's place: its agent's `tools` narrow the set.
    pub role: Option<crate::subagent::ChildRole>,
}

/// What the `Task` tool starts children with.
pub(crate) struct TaskSource {
    pub agents: Arc<crate::subagent::LoadedAgents>,
    pub start: crate::subagent::StartChild,
}

/// The registry of one turn: built-in tools, then session tools, the
/// Skill tool (when there are skills), custom tools, the language-server
/// tools (when a server serves the project) and MCP tools. A name
/// taken already is left out (custom tools are checked at load against
/// [`reserved_tool_names`], so the clash is reported there once).
pub(crate) fn registry(s: Sources) -> ToolRegistry {
    let mut r = ToolRegistry::default();
    for tool in fixed(&s) {
        r.register(tool);
    }
    for tool in &s.custom.tools {
        r.register(Arc::new(custom::Custom {
            tool: tool.clone(),
            pending: s.pending_tools.clone(),
        }));
    }
    lsp::all(&s.lsp)
        .into_iter()
        .for_each(|tool| _ = r.register(tool));
    for tool in crate::mcp::offered_tools(&s.mcp) {
        r.register(Arc::new(mcp::Mcp {
            manager: s.mcp.clone(),
            tool,
        }));
    }
    if s.set.ends_planning() {
        r.register(Arc::new(plan::ExitPlanMode));
    }
    if let Some(source) = s.task {
        r.register(Arc::new(task::Task {
            agents: source.agents,
            start: source.start,
        }));
    }
    // What each tool declares it may change decides what a read-only turn
    // offers and what a read-only agent may use.
    r.retain(|_, tool| s.set.offers(tool.effect()));
    if let Some(role) = &s.role {
        r.retain(|name, tool| role.allows(name, tool.effect()));
    }
    r
}

/// The tools every session has (the Skill tool is offered only with
/// skills, but its name is always reserved).
fn fixed(s: &Sources) -> Vec<Arc<dyn registry::Tool>> {
    let mut tools: Vec<Arc<dyn registry::Tool>> = builtin::all(&s.tasks)
        .into_iter()
        .map(|b| Arc::new(b) as Arc<dyn registry::Tool>)
        .collect();
    tools.push(Arc::new(session::TodoWrite));
    tools.push(Arc::new(session::CurrentModel {
        model: s.model.clone(),
    }));
    tools.push(Arc::new(session::AskUser {
        asker: s.asker.clone(),
    }));
    tools.push(Arc::new(tasks::TaskOutput {
        tasks: s.tasks.clone(),
    }));
    tools.push(Arc::new(tasks::TaskStop {
        tasks: s.tasks.clone(),
    }));
    if !s.skills.skills.is_empty() {
        tools.push(Arc::new(skill::Skill {
            skills: s.skills.clone(),
        }));
    }
    tools
}

/// The names a custom tool may not take: those of the tools every
/// session has (the same definitions their [`registry::Tool::spec`] give).
pub fn reserved_tool_names() -> Vec<String> {
    let mut names: Vec<String> = maia_tools::definitions()
        .into_iter()
        .map(|d| d.name.to_owned())
        .collect();
    names.extend(
        [
            crate::session_tools::todo_definition(),
            crate::session_tools::current_model_definition(),
            crate::session_tools::ask_user_definition(),
            crate::skills::tool_definition(),
            tasks::output_definition(),
            tasks::stop_definition(),
            task::definition(&crate::subagent::LoadedAgents::default()),
            crate::plan_mode::definition(),
        ]
        .map(|spec| spec.name),
    );
    names
}
