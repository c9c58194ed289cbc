//! The tools of a session behind one registry. Each family is one file
//! implementing [`registry::Tool`]: built-in ([`builtin`]), session
//! ([`session`]: TodoWrite, CurrentModel, AskUser), [`skill`], [`custom`],
//! [`mcp`], [`lsp`] (Diagnostics, References, Definition, Symbols), [`plan`] (`ExitPlanMode`, in the `plan` mode only), `task` (`Task`, a subagent), `web_search` (`WebSearch`, when the proxy has a search tool) and `tool_search` (`ToolSearch`, which loads the MCP tools offered by name only, [`deferred`]); [`registry`] builds the registry of one turn (one line per
//! family; each tool declares what it may change, [`crate::effect`]) and
//! [`router`] runs the calls of one model response; `stream` streams a
//! command's output while it runs.

pub(crate) mod builtin;
mod custom;
pub(crate) mod deferred;
mod hooked;
mod lsp;
mod mcp;
mod plan;
pub(crate) mod registry;
pub(crate) mod router;
pub(crate) mod running;
mod session;
mod skill;
mod stream;
mod task;
mod tasks;
mod tool_search;
mod web_search;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use maia_mcp::McpManager;

use crate::custom_tools::LoadedTools;
use crate::skills::LoadedSkills;
pub(crate) use registry::ToolRegistry;

/// The built-in file and shell tools: what a local model (or a small
/// window) is offered, the rest staying runnable but undescribed.
pub(crate) const CORE_TOOLS: [&str; 6] = ["Read", "Write", "Edit", "Bash", "Glob", "Grep"];

/// The tools text mode's steps run as (text_edits.rs): a whole
/// file, a replacement, a command.
pub(crate) mod text_steps {
    pub(crate) const WRITE: &str = "Write";
    pub(crate) const EDIT: &str = "Edit";
    pub(crate) const BASH: &str = "Bash";
}

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
    /// The proxy's client and search tool (`None`: no web search).
    pub search: Option<(maia_llm::LlmClient, String)>,
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
    if !s.mcp.is_empty() {
        r.register(Arc::new(tool_search::ToolSearch {
            manager: s.mcp.clone(),
        }));
    }
    if let Some((llm, tool)) = s.search {
        r.register(Arc::new(web_search::WebSearch { llm, tool }));
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
    narrow(&mut r, s.set, s.role.as_ref());
    r
}

/// Keeps the tools the turn's tool set offers and its agent may use: what
/// each tool declares it may change decides, never its name (an agent
/// file's `tools` list is the user's, matched as written).
fn narrow(
    r: &mut ToolRegistry,
    set: crate::plan_mode::ToolSet,
    role: Option<&crate::subagent::ChildRole>,
) {
    r.retain(|_, tool| set.offers(tool.effect()));
    if let Some(role) = role {
        r.retain(|name, tool| role.allows(name, tool.effect()));
    }
}

/// Whether a call of `name` may change files, as its tool declares (so it
/// takes a checkpoint); an unknown name changes nothing.
pub(crate) fn may_change_files(registry: &ToolRegistry, name: &str) -> bool {
    registry
        .get(name)
        .is_some_and(|tool| tool.effect().may_change_files())
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
            web_search::definition(),
            tool_search::definition(),
        ]
        .map(|spec| spec.name),
    );
    names
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use maia_llm::{ToolCall, ToolSpec};
    use maia_tools::ToolOutput;
    use serde_json::{Value, json};

    use super::registry::{CallEnv, CallPlan, Ran, Tool, ToolEffect};
    use super::*;
    use crate::mode::Mode;
    use crate::plan_mode::ToolSet;

    /// A tool no list anywhere names, of the class it is built with.
    struct Made(&'static str, ToolEffect);

    #[async_trait::async_trait]
    impl Tool for Made {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: self.0.to_owned(),
                description: String::new(),
                parameters: json!({"type": "object"}),
            }
        }
        fn effect(&self) -> ToolEffect {
            self.1
        }
        fn plan(&self, call: &ToolCall, _: &Value, _: &Path) -> Result<CallPlan, String> {
            Ok(CallPlan::new(
                call.name.clone(),
                crate::permission::GateFacts::default(),
                (),
            ))
        }
        async fn run(&self, _: CallPlan, _: &CallEnv<'_>) -> Ran {
            ToolOutput::ok("").into()
        }
    }

    fn made() -> ToolRegistry {
        let mut r = ToolRegistry::default();
        for (name, effect) in [
            ("Lookup", ToolEffect::ReadOnly),
            ("Note", ToolEffect::Conversation),
            ("Whoami", ToolEffect::Session),
            ("Poke", ToolEffect::Files),
            ("Launch", ToolEffect::Process),
            ("Helper", ToolEffect::Subagent),
        ] {
            r.register(Arc::new(Made(name, effect)));
        }
        r
    }

    #[test]
    fn a_tool_declared_read_only_is_offered_in_plan_mode_and_takes_no_checkpoint() {
        let mut planning = made();
        narrow(&mut planning, ToolSet::of(Mode::Plan, false), None);
        assert_eq!(
            planning.names().collect::<Vec<_>>(),
            ["Lookup", "Note", "Helper"]
        );
        let mut all = made();
        narrow(&mut all, ToolSet::of(Mode::Default, false), None);
        assert_eq!(all.names().count(), 6);
        let checkpointed: Vec<&str> = all.names().filter(|n| may_change_files(&all, n)).collect();
        assert_eq!(checkpointed, ["Poke", "Launch", "Helper"]);
        assert!(!may_change_files(&all, "NoSuchTool"));
    }

    #[test]
    fn an_agent_that_only_reads_gets_the_tools_declared_read_only() {
        let role = crate::subagent::ChildRole {
            agent: "explore".to_owned(),
            prompt: None,
            tools: None,
            reads_only: true,
            read_only: false,
            depth: 1,
            parent: Arc::default(),
            budget: crate::budget::Spend::shared(crate::budget::Limits::default()),
            fallback_models: None,
        };
        let mut r = made();
        narrow(&mut r, ToolSet::All, Some(&role));
        assert_eq!(r.names().collect::<Vec<_>>(), ["Lookup"]);
        let named = crate::subagent::ChildRole {
            tools: Some(vec!["poke".to_owned(), "Note".to_owned()]),
            reads_only: false,
            ..role
        };
        let mut r = made();
        narrow(&mut r, ToolSet::All, Some(&named));
        assert_eq!(r.names().collect::<Vec<_>>(), ["Note", "Poke"]);
    }
}
