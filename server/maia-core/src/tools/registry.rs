//! What a tool is: the [`Tool`] trait (describe, declare its
//! [`ToolEffect`] → plan with the facts the gate needs → prepare → run) and
//! the [`ToolRegistry`] of one turn. The router ([`super::router`]) looks
//! calls up here; nothing else matches a tool's name.

use std::any::Any;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use maia_llm::{ToolCall, ToolSpec};
use maia_tools::{ToolContext, ToolKind, ToolOutput};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

pub(crate) use crate::effect::{ToolEffect, TurnEffect};
use crate::event::{Event, ToolContent};
use crate::mode::Mode;
use crate::permission::{Broker, GateFacts};

/// What a tool understood of one call.
pub(crate) struct CallPlan {
    /// What the editor is shown.
    pub title: String,
    pub kind: Option<ToolKind>,
    pub locations: Vec<PathBuf>,
    /// Files this call touches; calls sharing one run in order.
    pub keys: Vec<PathBuf>,
    /// What the permission gate needs to know.
    pub gate: GateFacts,
    /// The command whose failures in the sandbox are remembered: its next
    /// call is asked, offering a run without the sandbox.
    pub sandbox_key: Option<String>,
    /// The tool's own reading of its input, opaque outside the tool.
    pub input: Box<dyn Any + Send + Sync>,
}

impl CallPlan {
    /// A plan with no location, no key and `gate` as the facts.
    pub fn new(title: String, gate: GateFacts, input: impl Any + Send + Sync) -> Self {
        CallPlan {
            title,
            kind: None,
            locations: Vec::new(),
            keys: Vec::new(),
            gate,
            sandbox_key: None,
            input: Box::new(input),
        }
    }

    /// The tool's input, as its `plan` stored it.
    pub fn take<T: Any>(self) -> Option<T> {
        self.input.downcast::<T>().ok().map(|b| *b)
    }
}

/// The session's side of one batch of calls, shared by its tasks.
pub(crate) struct Batch {
    pub events: UnboundedSender<Event>,
    /// The base context of every call (each call gets its own cancel).
    pub ctx: ToolContext,
    pub broker: Arc<Mutex<Broker>>,
    pub mode: Mode,
    pub home: Option<PathBuf>,
    /// Commands whose last run failed, maybe because of the sandbox.
    pub sandbox_failures: HashSet<String>,
    /// Questions to the user (permissions, `AskUser`) go one at a time.
    pub ask: tokio::sync::Mutex<()>,
    /// The language servers: Write and Edit report what they broke.
    pub lsp: Arc<maia_lsp_client::LspManager>,
    /// What the calls leave for the session's journal (`Task`).
    pub records: crate::subagent::Sink,
    /// Where each call's token is while it runs (cancelled alone).
    pub running: crate::tools::running::RunningCalls,
    /// The session's hooks (`PreToolUse`, `PostToolUse`).
    pub hooks: Option<crate::hooks::Env>,
}

/// What a tool's `run` gets besides its plan.
pub(crate) struct CallEnv<'a> {
    /// The call's id, as the editor knows it.
    pub id: &'a str,
    /// The call's context: its own cancel token, its terminal hook, no
    /// sandbox when the user allowed one run without it.
    pub ctx: &'a ToolContext,
    pub batch: &'a Batch,
}

/// What a tool's run returns: the output for the model and the effects on
/// its session.
#[derive(Debug)]
pub struct Ran {
    pub output: ToolOutput,
    pub effects: Vec<TurnEffect>,
}

impl Ran {
    /// The output with `effect`.
    pub fn with(output: ToolOutput, effect: TurnEffect) -> Ran {
        Ran {
            output,
            effects: vec![effect],
        }
    }
}

impl From<ToolOutput> for Ran {
    fn from(output: ToolOutput) -> Ran {
        Ran {
            output,
            effects: Vec::new(),
        }
    }
}

/// One tool family member, as the router runs it.
#[async_trait::async_trait]
pub(crate) trait Tool: Send + Sync {
    /// The definition offered to the model.
    fn spec(&self) -> ToolSpec;

    /// The class of change this tool may make: the one answer plan mode
    /// (what a read-only turn offers), checkpoints and a subagent's
    /// narrowing read.
    fn effect(&self) -> ToolEffect;

    /// Reads a call (`raw`: its arguments as JSON, or as a string when
    /// they are not JSON). An error goes back to the model.
    fn plan(&self, call: &ToolCall, raw: &Value, cwd: &Path) -> Result<CallPlan, String>;

    /// Work before the permission question, such as the diff of an edit
    /// (shown with the question). An error goes back to the model.
    async fn prepare(
        &self,
        _plan: &mut CallPlan,
        _ctx: &ToolContext,
    ) -> Result<Option<ToolContent>, String> {
        Ok(None)
    }

    /// Runs the call; failures are error outputs for the model. What the
    /// call did to the session comes back as effects, applied after the
    /// batch.
    async fn run(&self, plan: CallPlan, env: &CallEnv<'_>) -> Ran;

    /// The user confirmed this tool as it is now ("always allow" on a
    /// question with [`GateFacts::confirm`]).
    fn confirmed(&self) {}

    /// How the model can see the middle of a result of this tool that was
    /// cut to fit the context window ([`crate::oversize`]).
    fn narrow_hint(&self) -> &'static str {
        maia_tools::GENERIC_NARROW_HINT
    }

    /// True when a big result of this tool is on disk already (a file
    /// read): it is cut, not kept again ([`maia_tools::kept`]).
    fn result_on_disk(&self) -> bool {
        false
    }

    /// True for a tool that may be offered by name only until the model
    /// loads it (an MCP server's, [`super::deferred`]).
    fn deferrable(&self) -> bool {
        false
    }

    /// True for the tool that loads the others (`ToolSearch`): its
    /// description lists the tools offered by name only.
    fn lists_deferred(&self) -> bool {
        false
    }
}

/// The tools of one turn, in the order offered to the model.
#[derive(Clone, Default)]
pub(crate) struct ToolRegistry {
    tools: Vec<(ToolSpec, Arc<dyn Tool>)>,
}

impl ToolRegistry {
    /// Adds `tool` unless a tool of its name is registered already (names
    /// compare case-insensitively); returns whether it was added.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> bool {
        let spec = tool.spec();
        if self.names().any(|n| n.eq_ignore_ascii_case(&spec.name)) {
            tracing::debug!(tool = %spec.name, "a tool of this name is registered already; left out");
            return false;
        }
        self.tools.push((spec, tool));
        true
    }

    /// Keeps only the tools `keep` accepts.
    pub fn retain(&mut self, keep: impl Fn(&str, &dyn Tool) -> bool) {
        self.tools
            .retain(|(spec, tool)| keep(&spec.name, tool.as_ref()));
    }

    /// The tool called exactly `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools
            .iter()
            .find(|(spec, _)| spec.name == name)
            .map(|(_, tool)| tool)
    }

    /// The definitions of every tool.
    #[cfg(test)]
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|(spec, _)| spec.clone()).collect()
    }

    /// Each tool with its definition, in order.
    pub fn entries(&self) -> impl Iterator<Item = (&ToolSpec, &Arc<dyn Tool>)> {
        self.tools.iter().map(|(spec, tool)| (spec, tool))
    }

    /// The names of the registered tools.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|(spec, _)| spec.name.as_str())
    }
}
