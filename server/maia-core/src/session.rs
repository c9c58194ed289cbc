//! A session: its state, the task that runs its turns one after another,
//! and the handle a front door drives it with.
//!
//! Every message of the conversation is appended to the session's journal
//! (see [`crate::store`]) as it happens.
//!
//! The session's task owns its mode, model and client tools as plain
//! fields; the handle changes them by sending a [`Change`] on a queue of
//! their own beside the prompt queue. The idle task takes waiting changes
//! before the next prompt (a change sent before a prompt applies to it);
//! a running turn takes them at its checkpoints, before each model request
//! and each batch of tool calls, so a mode switch made mid-turn governs the
//! next batch, as the shared cells this replaced did. A second queue rather
//! than one: a turn taking changes must never meet a prompt. The front
//! door keeps its own copy of what it set, and hears of the changes the
//! session makes itself (settings, `/model`, the model list) through
//! [`Event::ModelChanged`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use maia_llm::ChatMessage;
use maia_tools::{FileSystem, ReadTracker};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::commands;
use crate::conversation::Conversation;
use crate::engine::EngineOptions;
use crate::event::{CommandEntry, Event, NoticeLevel, StopReason};
use crate::meter::Meter;
use crate::mode::Mode;
use crate::permission;
use crate::project::Project;
use crate::prompt::PromptPart;
use crate::session_tools::Todo;
use crate::settings;
use crate::store::{self, Journal, Loaded, Record};
use crate::window::WindowCache;

/// A prompt was sent while a turn is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("this session is already running a prompt; wait for it to finish or cancel it")]
pub struct Busy;

enum Op {
    Prompt {
        parts: Vec<PromptPart>,
        cancel: CancellationToken,
    },
}

/// A change to what the session uses, sent by its handle. The session
/// owns its mode, model and client tools as plain fields and applies the
/// changes in order: between turns, before it takes the next prompt, and
/// inside a turn at its checkpoints (before each model request and each
/// batch of tool calls). Changes travel on their own queue so a turn can
/// take them without ever meeting a prompt (no prompt is queued while a
/// turn runs: the handle refuses it), and the idle task takes them before
/// a prompt sent after them. So a mode change made before a prompt applies
/// to that prompt, and one made during a turn applies from its next batch
/// of tool calls — what the shared cells this replaces gave.
pub(crate) enum Change {
    Mode(Mode),
    Model(String),
    /// The endpoint's model list, when the session has no model yet.
    DefaultModel(Vec<String>),
    Client(crate::client::ClientTools),
}

/// Drives one session. Cloneable; the session ends when every clone is gone.
#[derive(Clone)]
pub struct SessionHandle {
    id: String,
    cwd: PathBuf,
    ops: mpsc::UnboundedSender<Op>,
    changes: mpsc::UnboundedSender<Change>,
    turn: Arc<Mutex<Option<CancellationToken>>>,
    busy: Arc<AtomicBool>,
    /// The model the session started with (forced or configured).
    initial_model: Option<String>,
    /// Cancelled once the session has stopped and released its journal.
    ended: CancellationToken,
}

impl std::fmt::Debug for SessionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionHandle")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl SessionHandle {
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// Starts a turn. Its events, ending with [`Event::TurnEnded`], arrive
    /// on the session's event receiver.
    pub fn prompt(&self, parts: Vec<PromptPart>) -> Result<(), Busy> {
        if self
            .busy
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(Busy);
        }
        let cancel = CancellationToken::new();
        if let Ok(mut turn) = self.turn.lock() {
            *turn = Some(cancel.clone());
        }
        if self.ops.send(Op::Prompt { parts, cancel }).is_err() {
            self.busy.store(false, Ordering::Release);
            return Err(Busy);
        }
        Ok(())
    }

    /// Cancels the running turn, if any: the model stream is dropped and
    /// running tools are killed. The turn then ends with `Cancelled`.
    pub fn cancel(&self) {
        if let Ok(turn) = self.turn.lock()
            && let Some(token) = turn.as_ref()
        {
            token.cancel();
        }
    }

    /// The model the session started with, if one is forced or
    /// configured. Later changes are the caller's own or arrive as
    /// [`Event::ModelChanged`].
    pub fn initial_model(&self) -> Option<String> {
        self.initial_model.clone()
    }

    /// The mode every session starts in. Later changes are the caller's own.
    pub fn initial_mode(&self) -> Mode {
        Mode::default()
    }

    /// Changes the mode; it applies from the next batch of tool calls.
    pub fn set_mode(&self, mode: Mode) {
        self.change(Change::Mode(mode));
    }

    /// Switches the model for the next requests.
    pub fn set_model(&self, model: String) {
        self.change(Change::Model(model));
    }

    /// Takes the default model from the endpoint's list when none is
    /// forced or configured (see [`default_model`]); returns the model the
    /// session then uses.
    pub fn default_model_from(&self, listed: &[String]) -> Option<String> {
        if self.initial_model.is_some() {
            return self.initial_model.clone();
        }
        self.change(Change::DefaultModel(listed.to_vec()));
        default_model(listed.iter().map(String::as_str)).map(str::to_owned)
    }

    /// Gives the session's tools the editor's services (terminals,
    /// questions); they apply from the next batch of tool calls.
    pub fn use_client(&self, tools: crate::client::ClientTools) {
        self.change(Change::Client(tools));
    }

    fn change(&self, change: Change) {
        // The session has ended when this fails: nothing left to change.
        let _ = self.changes.send(change);
    }

    /// Whether a turn is running.
    pub fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    /// A token cancelled once the session has stopped (every handle was
    /// dropped and its last turn ended) and its journal is released.
    /// Holding it does not keep the session alive.
    pub fn ended(&self) -> CancellationToken {
        self.ended.clone()
    }
}

/// How a session starts.
pub(crate) enum Start {
    New,
    /// Continue a saved conversation: its file name, content and the
    /// journal, already opened (and locked) for appending.
    Restore {
        name: String,
        loaded: Loaded,
        journal: Journal,
    },
}

/// Everything a running session owns, in parts with one owner each: what
/// never changes while it runs ([`Services`]), what was read from files
/// ([`Project`], replaced whole on reload), the conversation and the state
/// derived from its journal ([`Conversation`]), the context accounting
/// ([`Meter`]), the tools' shared state ([`ToolState`]) and the running
/// turn's state ([`TurnState`]).
pub(crate) struct Session {
    pub(crate) id: String,
    pub(crate) services: Services,
    pub(crate) project: Project,
    /// The history and its journal, owned together.
    pub(crate) conversation: Conversation,
    pub(crate) meter: Meter,
    pub(crate) tools: ToolState,
    pub(crate) turn: TurnState,
    /// The model in use (`None` until chosen).
    pub(crate) model: Option<String>,
    pub(crate) mode: Mode,
    /// The editor's services for the tools.
    pub(crate) client: crate::client::ClientTools,
    /// Output of `!commands` waiting to join the next request.
    pub(crate) bang_output: Vec<String>,
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
    /// Context windows found so far (process-wide).
    pub(crate) windows: Arc<WindowCache>,
    /// What the endpoint said about vision (asked when an image is sent).
    pub(crate) vision: crate::images::VisionCache,
    /// Changes from the handle, applied by [`Session::apply_changes`].
    changes: mpsc::UnboundedReceiver<Change>,
}

/// State the tools of every turn share with the session.
#[derive(Default)]
pub(crate) struct ToolState {
    /// The task list (`TodoWrite`).
    pub(crate) todos: Arc<Mutex<Vec<Todo>>>,
    /// Commands whose last run failed in the sandbox: their next call is
    /// asked, offering a run without it.
    pub(crate) sandbox_failures: Arc<Mutex<std::collections::HashSet<String>>>,
    /// What was read of each file, for Edit's read-before-edit check.
    pub(crate) reads: Arc<ReadTracker>,
}

/// The running turn's state (empty between turns).
#[derive(Default)]
pub(crate) struct TurnState {
    /// The turn's prompt (kept verbatim by a compaction).
    pub(crate) prompt: Option<TurnPrompt>,
    /// The images of the current turn (sent with its requests only).
    pub(crate) images: crate::images::Overlay,
    /// An `AskUser` question was shown as text: the turn ends after the
    /// batch, so the user can answer.
    pub(crate) asked_as_text: Arc<AtomicBool>,
}

/// The user's message of the running turn: where it is in the history and
/// what the user saw of it.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnPrompt {
    pub index: usize,
    pub display: String,
}

impl Session {
    /// Applies the changes the handle sent so far (a turn's checkpoint).
    pub(crate) fn apply_changes(&mut self) {
        while let Ok(change) = self.services.changes.try_recv() {
            self.apply(change);
        }
    }

    fn apply(&mut self, change: Change) {
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
        }
    }

    /// Uses `model` from now on, telling the front door when it changed
    /// (a change the session makes itself: settings, `/model`, the list).
    pub(crate) fn use_model(&mut self, model: Option<String>) {
        if model != self.model {
            self.model = model;
            if let Some(name) = &self.model {
                self.emit(Event::ModelChanged(name.clone()));
            }
        }
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

    /// Saves a record of what the user saw (see [`Conversation::record`]).
    pub fn record(&mut self, record: &Record) {
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

/// `a, b, c` for paths.
fn list_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn spawn(
    options: &Arc<EngineOptions>,
    windows: &Arc<WindowCache>,
    id: String,
    (cwd, roots): (PathBuf, Vec<PathBuf>),
    fs: Arc<dyn FileSystem>,
    start: Start,
    mcp_servers: Vec<maia_mcp::McpServerConfig>,
) -> (SessionHandle, mpsc::UnboundedReceiver<Event>) {
    let project = Project::load(crate::project::Place {
        options,
        cwd: &cwd,
        roots: &roots,
        id: &id,
    });
    let model = options
        .model
        .clone()
        .or_else(|| project.settings.model.clone());
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let (ops_tx, mut ops_rx) = mpsc::unbounded_channel();
    let (changes_tx, changes) = mpsc::unbounded_channel();
    let busy = Arc::new(AtomicBool::new(false));
    let turn = Arc::new(Mutex::new(None));
    let ended = CancellationToken::new();
    let handle = SessionHandle {
        id: id.clone(),
        cwd: cwd.clone(),
        ops: ops_tx,
        changes: changes_tx,
        turn: turn.clone(),
        busy: busy.clone(),
        initial_model: model.clone(),
        ended: ended.clone(),
    };
    if let Err(e) = std::fs::create_dir_all(store::sessions_dir(&cwd)) {
        tracing::warn!("cannot create {}: {e}", store::sessions_dir(&cwd).display());
    }
    tracing::info!(session = %id, cwd = %cwd.display(), settings = ?project.settings.loaded, context_file = ?project.context_file.as_ref().map(|c| &c.path), "session started");
    let previous_roots = store::saved_roots(&cwd, &id);
    if previous_roots != roots
        && let Err(e) = store::save_roots(&cwd, &id, &roots)
    {
        tracing::warn!("cannot record the workspace folders: {e}");
    }
    // Connects in the background; never delays the session.
    let mcp = Arc::new(maia_mcp::McpManager::start(settings::merge_mcp_servers(
        mcp_servers,
        &project.settings,
    )));
    let (conversation, restored) = match start {
        Start::New => (
            Conversation::create(
                &id,
                &cwd,
                options.home.as_deref(),
                fresh_name(&id),
                events_tx.clone(),
            ),
            None,
        ),
        Start::Restore {
            name,
            loaded,
            journal,
        } => (
            Conversation::restore(
                &id,
                &cwd,
                options.home.as_deref(),
                (name, &loaded, journal),
                events_tx.clone(),
            ),
            Some(loaded),
        ),
    };
    let mut session = Session {
        conversation,
        id,
        services: Services {
            options: options.clone(),
            cwd,
            roots,
            fs,
            events: events_tx,
            mcp,
            windows: windows.clone(),
            vision: crate::images::VisionCache::new(windows.catalogue().clone()),
            changes,
        },
        project,
        meter: Meter::default(),
        tools: ToolState::default(),
        turn: TurnState::default(),
        model,
        mode: Mode::default(),
        client: crate::client::ClientTools::default(),
        bang_output: Vec::new(),
    };
    if let Some(loaded) = &restored
        && let Some(todos) = loaded.records.iter().rev().find_map(|r| match r {
            Record::Plan { todos } => Some(todos.clone()),
            _ => None,
        })
        && let Ok(mut list) = session.tools.todos.lock()
    {
        *list = todos;
    }
    session.announce_start();
    if restored.is_some() {
        session.announce_roots_change(&previous_roots);
    }
    crate::mcp::watch(&session.services.mcp, session.services.events.clone());
    prefetch_window(&session);
    tokio::spawn(async move {
        loop {
            // A change sent before a prompt is taken before it.
            let op = tokio::select! {
                biased;
                Some(change) = session.services.changes.recv() => {
                    session.apply(change);
                    continue;
                }
                op = ops_rx.recv() => op,
            };
            let Some(op) = op else { break };
            match op {
                Op::Prompt { parts, cancel } => {
                    session.apply_changes();
                    let stop = session.run_prompt(parts, &cancel).await;
                    let stop = if cancel.is_cancelled() {
                        StopReason::Cancelled
                    } else {
                        stop
                    };
                    if let Ok(mut turn) = turn.lock() {
                        *turn = None;
                    }
                    busy.store(false, Ordering::Release);
                    session.emit(Event::TurnEnded(stop));
                }
            }
        }
        session.services.mcp.shutdown();
        tracing::debug!(session = %session.id, "session ended");
        // The journal (and its lock) goes with the session.
        drop(session);
        ended.cancel();
    });
    (handle, events_rx)
}

/// Learns the model's context window in the background as the session
/// opens (`/model/info`, the models list; the model's own answer is asked
/// in the background too), so the first request does not wait for it.
fn prefetch_window(session: &Session) {
    let Ok(llm) = session.project.llm.as_ref().map(Clone::clone) else {
        return;
    };
    let (windows, model, manual) = (
        session.services.windows.clone(),
        session.model.clone(),
        session.project.settings.context_windows.clone(),
    );
    tokio::spawn(async move {
        let cancel = CancellationToken::new();
        let model = match model {
            Some(model) => model,
            None => match windows.catalogue().list(&llm, &cancel).await {
                Ok(models) => match default_model(models.iter().map(|m| m.id.as_str())) {
                    Some(first) => first.to_owned(),
                    None => return,
                },
                Err(_) => return,
            },
        };
        let window = crate::window::resolve_quick(&windows, &llm, &model, &manual, &cancel).await;
        tracing::debug!(model, window = ?window, "context window prefetched");
    });
}

impl Session {
    /// The commands the user can type: MAIA's, then one per skill, then
    /// the Markdown commands (a name already taken is skipped).
    pub(crate) fn command_entries(&self) -> Vec<CommandEntry> {
        let mut out: Vec<CommandEntry> = commands::COMMANDS
            .iter()
            .map(|c| CommandEntry {
                name: c.name.to_owned(),
                description: c.description.to_owned(),
                hint: c.hint.map(str::to_owned),
            })
            .collect();
        for skill in &self.project.skills.skills {
            if out.iter().any(|c| c.name == skill.name) {
                continue;
            }
            out.push(CommandEntry {
                name: skill.name.clone(),
                description: format!("Skill: {}", skill.description),
                hint: Some(skill.hint.clone().unwrap_or_else(|| "arguments".to_owned())),
            });
        }
        for command in &self.project.markdown_commands.commands {
            if out.iter().any(|c| c.name == command.name) {
                continue;
            }
            out.push(CommandEntry {
                name: command.name.clone(),
                description: command.description.clone(),
                hint: command
                    .hint
                    .clone()
                    .or_else(|| command.takes_arguments.then(|| "arguments".to_owned())),
            });
        }
        out
    }

    /// On a load or resume: says when the editor opened the conversation
    /// with other additional folders than last time (the request's list is
    /// the one that applies, as ACP says; an omitted list means none).
    fn announce_roots_change(&self, previous: &[PathBuf]) {
        if previous == self.services.roots.as_slice() {
            return;
        }
        let text = if self.services.roots.is_empty() {
            format!(
                "This conversation was last opened with the workspace folders {}; the editor did not pass them this time, so they are not part of the workspace now.",
                list_paths(previous)
            )
        } else if previous.is_empty() {
            // The start notice lists them.
            return;
        } else {
            format!(
                "The workspace folders changed since this conversation was last opened: {} (before: {}).",
                list_paths(&self.services.roots),
                list_paths(previous)
            )
        };
        tracing::info!("{text}");
        self.emit(Event::Notice {
            level: NoticeLevel::Info,
            text,
        });
    }

    /// Tells the user which settings, rules, skills, tools and context
    /// file were loaded, and announces the commands.
    fn announce_start(&self) {
        let warn = |text: String| {
            tracing::warn!("{text}");
            self.emit(Event::Notice {
                level: NoticeLevel::Warning,
                text,
            });
        };
        let info = |text: String| {
            tracing::info!("{text}");
            self.emit(Event::Notice {
                level: NoticeLevel::Info,
                text,
            });
        };
        for warning in &self.project.settings.warnings {
            warn(warning.clone());
        }
        for note in &self.project.sandbox_notes {
            warn(note.clone());
        }
        if let Ok(pending) = self.project.pending_tools.lock()
            && !pending.is_empty()
        {
            let mut names: Vec<&str> = pending.iter().map(String::as_str).collect();
            names.sort_unstable();
            warn(format!(
                "New or changed custom tools: {}. Each call is asked, in every mode, until you confirm the tool (\"Always allow\").",
                names.join(", ")
            ));
        }
        if let Ok(broker) = self.project.broker.lock() {
            info(broker.loaded().summary());
            for warning in &broker.loaded().warnings {
                warn(warning.clone());
            }
            let unseen = permission::unseen_allow_rules(
                self.services.options.home.as_deref(),
                &self.services.cwd,
                broker.loaded(),
            );
            if !unseen.is_empty() {
                warn(format!(
                    "This project's .maia/settings.json allows without asking: {}. Read it before you trust it (/permissions lists every rule); each takes effect only once you confirm it, when MAIA first asks about a call it would allow.",
                    unseen.join(", ")
                ));
            }
        }
        for warning in self
            .project
            .skills
            .warnings
            .iter()
            .chain(&self.project.markdown_commands.warnings)
            .chain(&self.project.custom_tools.warnings)
        {
            warn(warning.clone());
        }
        if !self.services.roots.is_empty() {
            info(format!(
                "Workspace folders besides {}: {}",
                self.services.cwd.display(),
                list_paths(&self.services.roots)
            ));
        }
        if !self.project.skills.skills.is_empty() {
            let names: Vec<&str> = self
                .project
                .skills
                .skills
                .iter()
                .map(|s| s.name.as_str())
                .collect();
            info(format!("Skills: {}", names.join(", ")));
        }
        if !self.project.markdown_commands.commands.is_empty() {
            let names: Vec<String> = self
                .project
                .markdown_commands
                .commands
                .iter()
                .map(|c| format!("/{}", c.name))
                .collect();
            info(format!("Commands: {}", names.join(", ")));
        }
        if !self.project.custom_tools.tools.is_empty() {
            let names: Vec<&str> = self
                .project
                .custom_tools
                .tools
                .iter()
                .map(|t| t.name.as_str())
                .collect();
            info(format!("Custom tools: {}", names.join(", ")));
        }
        let servers = self.services.mcp.status();
        if !servers.is_empty() {
            let list: Vec<String> = servers
                .iter()
                .map(|s| {
                    let state = match &s.state {
                        maia_mcp::ServerState::Starting => "starting",
                        maia_mcp::ServerState::Connected { .. } => "connected",
                        maia_mcp::ServerState::Failed(_) => "failed",
                    };
                    format!("{} ({state})", s.name)
                })
                .collect();
            info(format!(
                "MCP servers: {} — /mcp shows their tools",
                list.join(", ")
            ));
        }
        self.emit(Event::Commands(self.command_entries()));
        let (level, text) = match &self.project.context_file {
            Some(file) => (
                NoticeLevel::Info,
                format!("Context file loaded: {}", file.path.display()),
            ),
            None => (
                NoticeLevel::Info,
                "No context file (MAIA.md, CLAUDE.md or AGENTS.md) in this folder".to_owned(),
            ),
        };
        tracing::info!("{text}");
        self.emit(Event::Notice { level, text });
    }
}

/// The replay of a saved conversation, as events (images read from
/// beside the journal, in `cwd`).
pub(crate) fn replay(loaded: &Loaded, cwd: &Path) -> Vec<Event> {
    let id = || uuid::Uuid::new_v4().to_string();
    let mut out = Vec::new();
    let mut user_message = id();
    for record in &loaded.records {
        match record {
            Record::UserDisplay { text } => {
                user_message = id();
                out.push(Event::UserMessage {
                    message_id: user_message.clone(),
                    text: text.clone(),
                });
            }
            Record::UserImage { image } => match crate::images::load(cwd, image) {
                Some(bytes) => out.push(Event::UserImage {
                    message_id: user_message.clone(),
                    mime_type: image.mime_type.clone(),
                    data: bytes.into(),
                    name: image.name.clone(),
                }),
                None => out.push(Event::UserMessage {
                    message_id: user_message.clone(),
                    text: format!("[image {} is no longer stored]", image.name),
                }),
            },
            Record::Thought { text } => out.push(Event::Thought {
                message_id: id(),
                text: text.clone(),
            }),
            Record::Message {
                message:
                    ChatMessage::Assistant {
                        content: Some(text),
                        ..
                    },
            } if !text.is_empty() => out.push(Event::AgentText {
                message_id: id(),
                text: text.clone(),
            }),
            Record::ToolCall { call } => out.push(Event::ToolCall(call.clone())),
            Record::Title { title } => out.push(Event::Title(title.clone())),
            Record::Plan { todos } => out.push(Event::Plan(todos.clone())),
            Record::Message { .. } | Record::Clear | Record::Compaction { .. } => {}
        }
    }
    out
}
