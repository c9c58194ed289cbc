//! The tools of a session's turn: the registry it offers (its tool set
//! follows the mode and whether the turn is read-only, see
//! [`crate::plan_mode`]), running one batch of calls (with a checkpoint
//! around the calls whose tools may change files); and what each model
//! response costs
//! (turns and summaries alike). A child of `session`, like `turn`.

use std::sync::Arc;

use maia_llm::{ChatMessage, ToolSpec};
use tokio_util::sync::CancellationToken;

use crate::compaction::{CompactError, Compactor};
use crate::event::Event;
use std::path::PathBuf;

use maia_tools::FileSystem;

use crate::mode::Mode;
use crate::options::EngineOptions;
use crate::project::Project;
use crate::session::Session;
use crate::store::Record;
use crate::subagent::{ChildRole, ModelChoice};
use crate::window::WindowCache;

/// Starts the child sessions of `Task` calls (the handle's, one per top
/// session and its descendants).
pub(crate) trait Spawner: Send + Sync {
    fn spawn(&self, setup: ChildSetup) -> crate::subagent::Child;
}

/// What a child session is made of: its parent's services, project
/// (shared: the same rules, sandbox, settings), mode and client, and its
/// own role and first prompt.
pub(crate) struct ChildSetup {
    pub(crate) id: String,
    pub(crate) options: Arc<EngineOptions>,
    pub(crate) cwd: PathBuf,
    pub(crate) roots: Vec<PathBuf>,
    pub(crate) fs: Arc<dyn FileSystem>,
    pub(crate) mcp: Arc<maia_mcp::McpManager>,
    pub(crate) lsp: Arc<maia_lsp_client::LspManager>,
    pub(crate) windows: Arc<WindowCache>,
    pub(crate) project: Project,
    pub(crate) model: Option<String>,
    pub(crate) mode: Mode,
    pub(crate) client: crate::client::ClientTools,
    pub(crate) role: ChildRole,
    pub(crate) prompt: String,
}

impl Session {
    /// The tools of this turn (built-in, session, skill, custom, MCP).
    pub(crate) fn tool_registry(&self) -> crate::tools::ToolRegistry {
        crate::tools::registry(crate::tools::Sources {
            skills: self.project.skills.clone(),
            custom: self.project.custom_tools.clone(),
            pending_tools: self.project.pending_tools.clone(),
            mcp: self.services.mcp.clone(),
            lsp: self.services.lsp.clone(),
            model: self.model.clone(),
            asker: self.client.asker.clone(),
            set: crate::plan_mode::ToolSet::of(self.mode, self.read_only()),
            tasks: self.tools.tasks.clone(),
            task: self.task_source(),
            role: self.role.clone(),
            search: self.web_search(),
        })
    }

    /// The proxy's client and the search tool `WebSearch` uses, once the
    /// first turn asked the proxy ([`crate::web_search::probe`]).
    fn web_search(&self) -> Option<(maia_llm::LlmClient, String)> {
        let llm = self.project.llm.as_ref().ok()?;
        let tool = self.project.web_search.get()?.tool()?;
        Some((llm.clone(), tool.to_owned()))
    }

    /// Whether the turn offers read-only tools only: `/review`, or a child
    /// whose parent was planning.
    pub(super) fn read_only(&self) -> bool {
        self.turn.read_only || self.role.as_ref().is_some_and(|r| r.read_only)
    }

    /// What the `Task` tool needs: the agents and how to start a child of
    /// this session; `None` at the deepest level.
    fn task_source(&self) -> Option<crate::tools::TaskSource> {
        let depth = self.role.as_ref().map_or(0, |r| r.depth);
        if depth >= crate::subagent::MAX_DEPTH {
            return None;
        }
        let project = self.project.share()?;
        let agents = self.project.agents.clone();
        let base = (
            self.services.options.clone(),
            self.services.cwd.clone(),
            self.services.roots.clone(),
            self.services.fs.clone(),
            self.services.mcp.clone(),
            self.services.lsp.clone(),
            self.services.windows.clone(),
        );
        let (model, mode, client) = (self.model.clone(), self.mode, self.client.clone());
        let read_only = self.read_only() || self.mode == crate::mode::Mode::Plan;
        let small = self.project.settings.small_model.clone();
        let spawner = self.services.spawner.clone();
        let sink = self.tools.records.clone();
        let budget = self.budget.clone();
        let start: crate::subagent::StartChild = Arc::new(move |request| {
            let crate::subagent::ChildRequest { agent, prompt, .. } = request;
            let model = match &agent.model {
                ModelChoice::Inherit => model.clone(),
                ModelChoice::Small => small.clone().or_else(|| model.clone()),
                // A model the managed policy refuses: the session's own.
                ModelChoice::Named(id) if base.0.check_model(id).is_err() => model.clone(),
                ModelChoice::Named(id) => Some(id.clone()),
            };
            let Some(project) = project.share() else {
                return Err("the model server is not available".to_owned());
            };
            let (options, cwd, roots, fs, mcp, lsp, windows) = base.clone();
            let id = format!("sub-{}", uuid::Uuid::new_v4().simple());
            Ok(spawner.spawn(ChildSetup {
                id,
                options,
                cwd,
                roots,
                fs,
                mcp,
                lsp,
                windows,
                project,
                model,
                // A planning parent's child is read-only, in the default mode.
                mode: if mode == crate::mode::Mode::Plan {
                    crate::mode::Mode::default()
                } else {
                    mode
                },
                client: client.clone(),
                role: ChildRole {
                    agent: agent.name.clone(),
                    prompt: agent.prompt.clone(),
                    tools: agent.tools.clone(),
                    reads_only: agent.reads_only,
                    read_only,
                    depth: depth + 1,
                    parent: sink.clone(),
                    budget: budget.clone(),
                    fallback_models: agent.fallback_models.clone(),
                },
                prompt,
            }))
        });
        Some(crate::tools::TaskSource { agents, start })
    }

    /// Writes what the batch's `Task` calls left for the journal; a child
    /// passes its charges on to its parent.
    fn take_records(&mut self) {
        let records = match self.tools.records.lock() {
            Ok(mut records) => std::mem::take(&mut *records),
            Err(_) => return,
        };
        for record in records {
            if let (Record::Usage { .. }, Some(role)) = (&record, &self.role)
                && let Ok(mut parent) = role.parent.lock()
            {
                parent.push(record.clone());
            }
            self.record(&record);
        }
    }

    /// Every tool definition a request carries now (the MCP tools offered
    /// by name only left out, [`crate::tools::deferred`]).
    pub(crate) fn tool_specs(&self) -> Vec<ToolSpec> {
        self.offered_tools(&self.round()).specs
    }

    /// The instructions of the MCP servers the user vouches for.
    pub(crate) fn mcp_instructions(&self) -> Vec<(String, String)> {
        crate::mcp::vouched_instructions(
            &self.services.mcp,
            &crate::mcp::Vouching {
                home: self.services.options.home.as_deref(),
                cwd: &self.services.cwd,
                settings: &self.project.settings,
            },
        )
    }

    /// How many MCP tools a request carries whole and how many by name
    /// only, with their bytes (for `/mcp` and the context accounting).
    pub(crate) fn deferred_tools(&self) -> crate::tools::deferred::DeferredTools {
        self.offered_tools(&self.round()).tally
    }

    /// Runs the calls of one model response
    /// ([`crate::tools::router::run_batch`]); what they did to the session
    /// is left in the result for [`Session::apply_effects`].
    pub(crate) async fn run_tool_calls(
        &mut self,
        calls: &[maia_llm::ToolCall],
        round: &mut super::round::Round,
        cancel: &CancellationToken,
    ) -> crate::tools::router::Finished {
        // A checkpoint: mode and client changes sent meanwhile apply here
        // (the round's tools follow them).
        self.apply_changes();
        self.refresh_round(round);
        let registry = &round.registry;
        let batch = crate::tools::registry::Batch {
            events: self.services.events.clone(),
            ctx: maia_tools::ToolContext {
                cwd: self.services.cwd.clone(),
                fs: self.services.fs.clone(),
                reads: self.tools.reads.clone(),
                cancel: cancel.clone(),
                read_guard: Some(crate::permission::read_guard(
                    self.project.broker.clone(),
                    self.services.cwd.clone(),
                )),
                sandbox: self.project.sandbox.clone(),
                terminals: self.client.terminals.clone(),
                on_terminal: None,
                on_output: None,
                outputs: self.outputs_dir(),
            },
            broker: self.project.broker.clone(),
            mode: self.mode,
            home: self.services.options.home.clone(),
            // A managed policy may forbid "Allow once without the sandbox":
            // no failure is then offered as one.
            sandbox_failures: match &self.services.options.policy {
                Some(policy) if !policy.allows_unsandboxed() => Default::default(),
                _ => self.tools.sandbox_failures.clone(),
            },
            ask: tokio::sync::Mutex::new(()),
            lsp: self.services.lsp.clone(),
            records: self.tools.records.clone(),
            running: self.tools.running.clone(),
            hooks: self.hook_env(),
        };
        // A checkpoint before calls that may change files (as their tools
        // declare), another after.
        let mutating = |name: &str| crate::tools::may_change_files(registry, name);
        let before = match calls.iter().any(|c| mutating(&c.name)) {
            true => self.checkpoint_before().await,
            false => None,
        };
        let done = crate::tools::router::run_batch(registry, calls, batch).await;
        self.take_records();
        if let Some(before) = before {
            let changed: Vec<(String, Vec<std::path::PathBuf>)> = done
                .views
                .iter()
                .filter(|v| mutating(&v.name))
                .map(|v| (v.id.clone(), v.locations.clone()))
                .collect();
            self.checkpoint_after(before, &changed).await;
        }
        done
    }
}

impl Session {
    /// What the system prompt adds for the mode and a read-only turn.
    pub(crate) fn tool_set_section(&self) -> Option<&'static str> {
        match crate::plan_mode::ToolSet::of(self.mode, self.read_only()) {
            crate::plan_mode::ToolSet::All => None,
            crate::plan_mode::ToolSet::ReadOnly => Some(crate::plan_mode::READ_ONLY_SECTION),
            crate::plan_mode::ToolSet::Planning => Some(crate::plan_mode::PROMPT_SECTION),
        }
    }

    /// Tells the front door how full the context is, with the thread's
    /// cost (unknown when a response had no price).
    pub(crate) fn emit_usage(&self, used: u64, size: u64) {
        self.emit_usage_of(used, size, self.context_source(), 0);
    }

    /// [`Session::emit_usage`] for a size from `source`, with
    /// `answer_chars` of an answer the history does not hold yet.
    pub(crate) fn emit_usage_of(
        &self,
        used: u64,
        size: u64,
        source: &'static str,
        answer_chars: usize,
    ) {
        let cost = self.conversation.ledger().total();
        let map = Some(Box::new(self.context_map(used, source, answer_chars)));
        self.emit(Event::Usage {
            used,
            size,
            cost,
            map,
        });
    }

    /// Records what one model response cost ([`crate::cost`]): the
    /// `prices` setting, else the proxy's header, else `/model/info`.
    pub(crate) async fn charge(
        &mut self,
        model: &str,
        usage: Option<&maia_llm::Usage>,
        header: Option<f64>,
        cancel: &CancellationToken,
    ) {
        let setting = self.project.settings.prices.get(model).copied();
        let info = match (&setting, header, usage, &self.project.llm) {
            (None, None, Some(_), Ok(llm)) => {
                crate::window::model_info_entry(&self.services.windows, llm, model, cancel)
                    .await
                    .and_then(|entry| entry.prices)
            }
            _ => None,
        };
        let charge = match usage {
            Some(usage) => {
                let priced = crate::cost::price(usage, setting.as_ref(), header, info.as_ref());
                crate::cost::Charge::new(model, usage, priced)
            }
            // No usage figures: only the proxy's own amount is a price.
            None => crate::cost::Charge::new(
                model,
                &maia_llm::Usage::default(),
                header.map(|amount| (amount, crate::cost::PriceSource::Header)),
            ),
        };
        if let Some(role) = &self.role
            && let Ok(mut parent) = role.parent.lock()
        {
            let mut charge = charge.clone();
            charge.agent = Some(role.agent.clone());
            parent.push(Record::Usage { charge });
        }
        self.record(&Record::Usage { charge });
    }

    /// A turn with read-only tools only (`/review`), shown as `typed`.
    pub(crate) async fn run_read_only_turn(
        &mut self,
        message: String,
        typed: &str,
        cancel: &CancellationToken,
    ) -> crate::event::StopReason {
        self.turn.read_only = true;
        let parts = vec![crate::prompt::PromptPart::Text(message)];
        let stop = self.run_turn(parts, Some(typed.to_owned()), cancel).await;
        self.turn.read_only = false;
        stop
    }

    /// The summary of `messages` by the summary model ([`Compactor`]); what
    /// its requests cost is charged to the thread, whatever the outcome.
    pub(crate) async fn write_summary(
        &mut self,
        messages: &[ChatMessage],
        kept: bool,
        rejected: Option<u64>,
        cancel: &CancellationToken,
    ) -> Result<String, CompactError> {
        let (model, window) = self.summary_model(cancel).await?;
        let spent = std::sync::Mutex::new(Vec::new());
        let compactor = Compactor {
            llm: &self.project.llm,
            meter: &self.meter,
            earlier: self.conversation.summary(),
            spent: &spent,
        };
        let result = compactor
            .summarise((model.clone(), window), messages, kept, rejected, cancel)
            .await;
        let spent = spent.into_inner().unwrap_or_default();
        for (usage, header) in spent {
            self.charge(&model, usage.as_ref(), header, cancel).await;
        }
        result
    }
}
