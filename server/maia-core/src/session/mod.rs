//! A session's state, in parts with one owner each ([`Session`]), and the
//! changes to it that are not turns: clear, reset, reload, adopt, rename,
//! and the start-up notices. The fields are private: other modules use the
//! state operations and the accessors that lend out its parts. The turn
//! loop is the child module `turn`, the tools of a turn the child
//! `tooling`, the context accounting and the compaction the child
//! `compact` (with `announce`, `changes`, `effects`, `files`, `steer` and `rewind`,
//! the only other files with an `impl Session`); the summary a compaction
//! continues from is written by [`crate::compaction::Compactor`] from
//! borrowed parts. The task that runs its turns and the handle a front door drives
//! it with are in `handle/`. Nothing here reaches up into either.
//!
//! Every message of the conversation goes through its [`Conversation`],
//! which appends it to the journal (see [`crate::store`]) as it happens.
//!
//! The session's task owns its mode, model and client tools as plain
//! fields; the handle changes them by sending a [`Change`] to the task's
//! inbox, in order with its prompts (`handle/task.rs`). The idle task
//! applies a change as it reaches it (a change sent before a prompt
//! applies to it); while a turn runs the task passes changes on to the
//! session's own queue, which the turn takes at its checkpoints, before
//! each model request and each batch of tool calls, so a mode switch made
//! mid-turn governs the next batch, as the shared cells this replaced did.
//! A queue of its own: a turn taking changes must never meet a prompt. The
//! front doors keep no copy of the model or the mode: they read the
//! session's state cell (`session_state.rs`), where the handle records a
//! change as it sends it and the session the changes it makes itself (an
//! approved plan, settings, `/model`), before telling them as
//! [`Event::ModeChanged`] and [`Event::ModelChanged`].

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use maia_llm::ChatMessage;
use maia_tools::{FileSystem, ReadTracker};
use tokio::sync::mpsc;

use crate::conversation::Conversation;
use crate::event::Event;
use crate::meter::Meter;
use crate::mode::Mode;
use crate::options::EngineOptions;
use crate::project::Project;
use crate::session_tools::Todo;
use crate::store::{self, Loaded, Record};
use crate::window::WindowCache;

mod after_tools;
mod announce;
mod budget;
mod changes;
mod compact;
mod context_map;
mod effects;
mod fallback;
pub(crate) mod files;
mod hooks;
pub(crate) mod instructions;
mod replay;
pub(crate) mod rewind;
mod round;
pub(crate) mod steer;
pub(crate) mod text;
mod text_mode;
mod title;
mod tooling;
mod turn;
mod turn_images;

pub(crate) use hooks::hooks_command;
pub(crate) use title::{TitleDone, TitleJob};
pub(crate) use {replay::replay, tooling::ChildSetup, tooling::Spawner};

/// A change to what the session uses, sent by its handle. The session
/// owns its mode, model and client tools as plain fields and applies the
/// changes in order: between turns, as the idle task reaches them in its
/// inbox (before a prompt sent after them), and inside a turn at its
/// checkpoints (before each model request and each batch of tool calls),
/// from a queue of their own the task fills while the turn runs, so a turn
/// takes them without ever meeting a prompt. So a mode change made before
/// a prompt applies to that prompt, and one made during a turn applies
/// from its next batch of tool calls — what the shared cells this replaces
/// gave.
pub(crate) enum Change {
    Mode(Mode),
    Model(String),
    /// The endpoint's model list, when the session has no model yet.
    DefaultModel(Vec<String>),
    Client(crate::client::ClientTools),
    /// A message for the running turn, or the next ([`steer`]).
    Steer(steer::Steer),
    /// Set one of the thread's options (recorded in its journal).
    Option(String, serde_json::Value),
    /// Rename the conversation (as `/rename`); the answer is the name kept,
    /// or why not.
    Rename {
        name: String,
        reply: tokio::sync::oneshot::Sender<Result<String, String>>,
    },
}

/// Everything a running session owns, in parts with one owner each: what
/// never changes while it runs ([`Services`]), what was read from files
/// ([`Project`], replaced whole on reload), the conversation and the state
/// derived from its journal ([`Conversation`]), the context accounting
/// ([`Meter`]), the tools' shared state ([`ToolState`]) and the running
/// turn's state ([`TurnState`]).
pub(crate) struct Session {
    id: String,
    services: Services,
    project: Project,
    /// The history and its journal, owned together.
    conversation: Conversation,
    meter: Meter,
    tools: ToolState,
    turn: TurnState,
    /// The model in use (`None` until chosen).
    model: Option<String>,
    mode: Mode,
    /// The editor's services for the tools.
    client: crate::client::ClientTools,
    /// Output of `!commands` waiting to join the next request.
    bang_output: Vec<String>,
    /// What `SessionStart` hooks printed, for the next prompt.
    hook_context: Vec<String>,
    checkpoints: crate::checkpoint::Checkpoints,
    /// A `Task` call's child: its place ([`crate::subagent`]).
    role: Option<crate::subagent::ChildRole>,
    /// The model could not call tools: turns edit with text blocks
    /// ([`text_mode`]).
    text_mode: bool,
    /// What the session and its subagents spent, and their limits
    /// ([`crate::budget`]; a child shares its parent's).
    budget: crate::budget::Shared,
}

/// What a session is given when it opens and keeps until it ends.
pub(crate) struct Services {
    pub(crate) options: Arc<EngineOptions>,
    pub(crate) cwd: PathBuf,
    /// The additional workspace roots (resolved; see [`crate::workspace`]).
    pub(crate) roots: Vec<PathBuf>,
    pub(crate) fs: Arc<dyn FileSystem>,
    pub(crate) events: mpsc::UnboundedSender<Event>,
    /// The session's MCP servers (stopped when the session ends).
    pub(crate) mcp: Arc<maia_mcp::McpManager>,
    /// The session's language servers (stopped when the session ends).
    pub(crate) lsp: Arc<maia_lsp_client::LspManager>,
    /// Context windows found so far (process-wide).
    pub(crate) windows: Arc<WindowCache>,
    /// What the endpoint said about vision (asked when an image is sent).
    pub(crate) vision: crate::images::VisionCache,
    /// Changes from the handle, passed on by the session task while a
    /// turn runs; applied by [`Session::apply_changes`].
    pub(crate) changes: mpsc::UnboundedReceiver<Change>,
    pub(crate) spawner: Arc<dyn Spawner>,
    /// The state its readers see (`session_state.rs`): the session writes
    /// the model and the mode it changes itself.
    pub(crate) state: crate::session_state::StateCell,
}

/// State the tools of every turn share with the session.
#[derive(Default)]
pub(crate) struct ToolState {
    /// The task list (`TodoWrite`, kept after each batch).
    pub(crate) todos: Arc<Mutex<Vec<Todo>>>,
    /// Commands whose last run failed in the sandbox: their next call is
    /// asked, offering a run without it (kept after each batch).
    pub(crate) sandbox_failures: std::collections::HashSet<String>,
    /// What was read of each file, for Edit's read-before-edit check.
    pub(crate) reads: Arc<ReadTracker>,
    /// Commands run in the background (`Bash` with `run_in_background`).
    pub(crate) tasks: crate::background::Tasks,
    /// What the batch's `Task` calls leave for the journal.
    pub(crate) records: crate::subagent::Sink,
    /// The calls running now, each cancellable alone.
    pub(crate) running: crate::tools::running::RunningCalls,
}

/// The running turn's state (empty between turns).
#[derive(Default)]
pub(crate) struct TurnState {
    /// The turn's prompt (kept verbatim by a compaction).
    pub(crate) prompt: Option<TurnPrompt>,
    /// The images of the current turn (sent with its requests only).
    pub(crate) images: crate::images::Overlay,
    /// Steers waiting for the turn's next tool-round boundary.
    pub(crate) steers: Vec<steer::Steer>,
    /// The turn offers read-only tools only (`/review`).
    pub(crate) read_only: bool,
    /// The model this turn fell back to (`fallbackModels`): it holds for
    /// the rest of the turn.
    pub(crate) fallback: Option<String>,
    /// The usage the server reported for this turn's requests, summed.
    pub(crate) usage: Option<maia_llm::Usage>,
    /// The system prompt's environment section, made at the turn's start.
    pub(crate) environment: String,
    /// The turn failed, ended unfinished or was stopped by a hook: its
    /// `Stop` hooks do not run.
    pub(crate) halted: std::sync::atomic::AtomicBool,
}

impl TurnState {
    /// Marks the turn as ended without finishing its job.
    pub(crate) fn halt(&self) {
        self.halted
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether [`TurnState::halt`] was called (and clears it).
    pub(crate) fn take_halted(&self) -> bool {
        self.halted
            .swap(false, std::sync::atomic::Ordering::Relaxed)
    }
}

/// What a session starts with; the rest starts empty.
pub(crate) struct Parts {
    pub(crate) id: String,
    pub(crate) services: Services,
    pub(crate) project: Project,
    pub(crate) conversation: Conversation,
    pub(crate) model: Option<String>,
    pub(crate) role: Option<crate::subagent::ChildRole>,
}

/// The user's message of the running turn: where it is in the history and
/// what the user saw of it.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnPrompt {
    pub index: usize,
    pub display: String,
    /// The message's stable id (its journal record's).
    pub id: String,
}

impl Session {
    /// A session from its parts: no turn, the default mode, no client
    /// tools, nothing measured.
    pub(crate) fn new(parts: Parts) -> Self {
        let Parts {
            id,
            services,
            project,
            conversation,
            model,
            role,
        } = parts;
        let budget = match &role {
            Some(role) => role.budget.clone(),
            None => {
                let mut limits = project.settings.budget;
                if let Some(usd) = services.options.max_budget_usd {
                    limits.session = Some(usd);
                }
                crate::budget::Spend::shared(limits)
            }
        };
        Self {
            budget,
            checkpoints: files::checkpoints(&services.cwd, &id, role.is_none()),
            id,
            services,
            project,
            conversation,
            meter: Meter::default(),
            tools: ToolState::default(),
            text_mode: false,
            turn: TurnState::default(),
            model,
            mode: Mode::default(),
            client: crate::client::ClientTools::default(),
            bang_output: Vec::new(),
            hook_context: Vec::new(),
            role,
        }
    }

    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// The thread's outputs folder ([`maia_tools::kept::thread_dir`]);
    /// `None` without a home folder.
    pub(crate) fn outputs_dir(&self) -> Option<std::path::PathBuf> {
        let home = self.services.options.home.as_deref()?;
        maia_tools::kept::thread_dir(home, &self.id)
    }

    pub(crate) fn services(&self) -> &Services {
        &self.services
    }

    pub(crate) fn project(&self) -> &Project {
        &self.project
    }

    pub(crate) fn conversation(&self) -> &Conversation {
        &self.conversation
    }

    pub(crate) fn meter(&self) -> &Meter {
        &self.meter
    }

    pub(crate) fn tools(&self) -> &ToolState {
        &self.tools
    }

    /// The model in use (`None` until chosen).
    pub(crate) fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// `/model NAME`: uses `name` from now on and tells the front door.
    pub(crate) fn choose_model(&mut self, name: &str) {
        self.model = Some(name.to_owned());
        self.services.state.set_model(self.model.clone());
        self.emit(Event::ModelChanged(name.to_owned()));
    }

    /// Keeps the output of a `!command` for the next request.
    pub(crate) fn add_bang_output(&mut self, text: String) {
        self.bang_output.push(text);
    }

    /// Outputs of `!commands` waiting for the next request.
    pub(crate) fn pending_bang_outputs(&self) -> usize {
        self.bang_output.len()
    }

    /// Applies the changes the handle sent so far (a turn's checkpoint).
    pub(crate) fn apply_changes(&mut self) {
        while let Ok(change) = self.services.changes.try_recv() {
            self.apply(change);
        }
    }

    pub(crate) fn apply(&mut self, change: Change) {
        match change {
            Change::Mode(mode) => self.mode = mode,
            Change::Model(model) => self.model = Some(model),
            Change::DefaultModel(listed) => {
                if self.model.is_none() {
                    self.model =
                        default_model(listed.iter().map(String::as_str)).map(str::to_owned);
                }
            }
            Change::Client(tools) => self.client = tools,
            Change::Steer(steer) => self.keep_steer(steer),
            Change::Option(key, value) => self.conversation.set_option(key, value),
            Change::Rename { name, reply } => {
                let renamed = crate::blocking::off_runtime(|| self.rename(name.clone()))
                    .map(|()| name)
                    .map_err(|e| e.to_string());
                let _ = reply.send(renamed);
            }
        }
    }

    /// Uses `model` from now on, telling the front door when it changed
    /// (a change the session makes itself: settings, `/model`, the list).
    pub(crate) fn use_model(&mut self, model: Option<String>) {
        if model != self.model {
            self.model = model;
            self.services.state.set_model(self.model.clone());
            if let Some(name) = &self.model {
                self.emit(Event::ModelChanged(name.clone()));
            }
        }
    }

    /// The reasoning effort the thread chose (its `reasoning_effort`
    /// option), for a `model` known to take one: the `reasoningModels`
    /// setting, else `/model/info`'s `supports_reasoning` (read when the
    /// session opened). Another model (after `/model`) is sent none.
    pub(crate) fn reasoning_effort(&self, model: &str) -> Option<String> {
        let effort = self
            .conversation
            .option_text(crate::options::REASONING_EFFORT)?;
        let takes = self.project.settings.reasoning_models.get(model).copied();
        let takes = takes.or_else(|| {
            let llm = self.project.llm.as_ref().ok()?;
            self.services
                .windows
                .model_info(llm, model)?
                .supports_reasoning
        });
        takes.unwrap_or(false).then_some(effort)
    }

    /// The usage of the turn that just ended (reset for the next).
    pub(crate) fn take_turn_usage(&mut self) -> Option<maia_llm::Usage> {
        self.turn.usage.take()
    }

    pub fn emit(&self, event: Event) {
        let _ = self.services.events.send(event);
    }

    /// Tells the user `text` as a message of its own (not the model's).
    pub(crate) fn say(&self, text: String) {
        self.emit(Event::AgentText {
            message_id: uuid::Uuid::new_v4().to_string(),
            text,
        });
    }

    /// Ends the turn as failed: tells the user `text`, then says the turn
    /// failed ([`Event::TurnFailed`]) for front doors that report it.
    pub(crate) fn fail(&self, text: String) -> crate::event::StopReason {
        let message = text.trim().replace("**", "");
        self.turn.halt();
        self.say(text);
        self.emit(Event::TurnFailed(message));
        crate::event::StopReason::EndTurn
    }

    /// Says the turn ends without doing its job ([`Event::TurnUnfinished`]).
    pub(crate) fn unfinished(&self, reason: crate::event::Unfinished, text: String) {
        tracing::warn!(reason = reason.name(), "{text}");
        self.turn.halt();
        self.emit(Event::TurnUnfinished { reason, text });
    }

    /// Saves a record of what the user saw (see [`Conversation::record`]).
    pub fn record(&mut self, record: &Record) {
        // A subagent's charge was counted by the child that made it.
        if let Record::Usage { charge } = record
            && charge.agent.is_none()
            && let Ok(mut spend) = self.budget.lock()
        {
            spend.add(charge.cost);
        }
        self.conversation.record(record);
    }

    /// Adds a message to the history and the journal.
    pub fn push_message(&mut self, message: ChatMessage) {
        self.conversation.push(message);
    }

    /// Switches to a fresh conversation with settings, context file and
    /// permissions reloaded; `name` is the new file's name.
    pub fn reset(&mut self, name: String) {
        self.reload();
        self.meter.forget();
        self.tools.reads = Arc::new(ReadTracker::default());
        self.conversation.restart(name);
    }

    /// `/clear`: the history restarts in the same journal, with nothing of
    /// the cleared conversation left (its summary, what was measured of it,
    /// the files read); settings, context file and rules are reloaded.
    pub fn clear(&mut self) {
        self.conversation.clear();
        self.meter.forget();
        self.tools.reads = Arc::new(ReadTracker::default());
        self.reload();
    }

    /// Reloads settings, the context file and the rules, and tells the user
    /// what was loaded (`/clear`, `/new`).
    pub fn reload(&mut self) {
        self.reload_quietly();
        self.announce_start();
    }

    /// Reloads settings, the context file, rules, skills and custom tools;
    /// only the command list is sent again (after a compaction).
    pub fn reload_quietly(&mut self) {
        crate::blocking::off_runtime(|| self.reload_files());
    }

    fn reload_files(&mut self) {
        let project = Project::load(crate::project::Place {
            options: &self.services.options,
            cwd: &self.services.cwd,
            roots: &self.services.roots,
            id: &self.id,
        });
        if self.services.options.model.is_none() && project.settings.model.is_some() {
            self.use_model(project.settings.model.clone());
        }
        self.project = project;
        self.bang_output.clear();
    }

    /// Replaces this thread's conversation with a saved one.
    pub fn adopt(&mut self, name: String, loaded: &Loaded) -> Result<(), store::StoreError> {
        self.conversation.adopt(name, loaded)?;
        self.meter.forget();
        self.tools.reads = Arc::new(ReadTracker::default());
        Ok(())
    }

    /// Renames the saved conversation; its title becomes `name` (what
    /// the editor lists and shows).
    pub fn rename(&mut self, name: String) -> Result<(), store::StoreError> {
        self.conversation.rename(name.clone())?;
        self.emit(Event::Title(name));
        Ok(())
    }
}

/// The model used when none is forced (`--model`, `MAIA_MODEL`) or
/// configured (`model`): the first one the endpoint lists. The one place
/// that decides it, for the front doors and the turn loop.
pub fn default_model<'a>(mut listed: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    listed.next()
}

/// A fresh conversation name: the date and time, and a short suffix.
pub(crate) fn fresh_name(id: &str) -> String {
    let now = store::iso8601(store::now_secs());
    let stamp: String = now
        .trim_end_matches('Z')
        .chars()
        .map(|c| {
            if c == 'T' {
                '_'
            } else if c == ':' {
                '-'
            } else {
                c
            }
        })
        .collect();
    format!("{stamp}-{}", &id[..4.min(id.len())])
}
