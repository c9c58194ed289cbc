//! A session: its state, the task that runs its turns one after another,
//! and the handle a front door drives it with.
//!
//! Every message of the conversation is appended to the session's journal
//! (see [`crate::store`]) as it happens.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use maia_llm::{ChatMessage, LlmClient, LlmError};
use maia_tools::{FileSystem, ReadTracker};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::commands;
use crate::context_file::{self, ContextFile};
use crate::conversation::Conversation;
use crate::custom_tools::{self, LoadedTools};
use crate::engine::EngineOptions;
use crate::event::{CommandEntry, Event, NoticeLevel, StopReason};
use crate::mode::{Mode, SharedMode};
use crate::permission;
use crate::permission::Broker;
use crate::prompt::PromptPart;
use crate::session_tools::{ASK_USER, CURRENT_MODEL, TODO_WRITE, Todo};
use crate::settings::{self, Settings};
use crate::skills::{self, LoadedSkills};
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

/// Drives one session. Cloneable; the session ends when every clone is gone.
#[derive(Clone)]
pub struct SessionHandle {
    id: String,
    cwd: PathBuf,
    ops: mpsc::UnboundedSender<Op>,
    turn: Arc<Mutex<Option<CancellationToken>>>,
    busy: Arc<AtomicBool>,
    model: SharedModel,
    mode: SharedMode,
    /// Cancelled once the session has stopped and released its journal.
    ended: CancellationToken,
    client: crate::client::SharedClient,
}

/// The model a session uses, readable and settable from both sides.
#[derive(Debug, Clone, Default)]
pub struct SharedModel(Arc<Mutex<Option<String>>>);

impl SharedModel {
    pub fn get(&self) -> Option<String> {
        self.0.lock().ok().and_then(|m| m.clone())
    }

    pub fn set(&self, model: Option<String>) {
        if let Ok(mut m) = self.0.lock() {
            *m = model;
        }
    }
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

    /// The model in use, if chosen.
    pub fn model(&self) -> Option<String> {
        self.model.get()
    }

    /// The session's mode.
    pub fn mode(&self) -> Mode {
        self.mode.get()
    }

    /// Changes the mode; it applies to the next tool call.
    pub fn set_mode(&self, mode: Mode) {
        self.mode.set(mode);
    }

    /// The shared mode cell (for front doors that watch it).
    pub fn shared_mode(&self) -> SharedMode {
        self.mode.clone()
    }

    /// The shared model cell (for front doors that watch it).
    pub fn shared_model(&self) -> SharedModel {
        self.model.clone()
    }

    /// Switches the model for the next requests.
    pub fn set_model(&self, model: String) {
        self.model.set(Some(model));
    }

    /// Takes the default model from the endpoint's list when none is
    /// forced or configured (see [`default_model`]).
    pub fn default_model_from(&self, listed: &[String]) {
        if self.model.get().is_none()
            && let Some(model) = default_model(listed.iter().map(String::as_str))
        {
            self.model.set(Some(model.to_owned()));
        }
    }

    /// Gives the session's tools the editor's services (terminals,
    /// questions); they apply from the next batch of tool calls.
    pub fn use_client(&self, tools: crate::client::ClientTools) {
        self.client.set(tools);
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

/// Everything a running session owns.
pub(crate) struct Session {
    pub id: String,
    pub cwd: PathBuf,
    /// The additional workspace roots (resolved; see [`crate::workspace`]).
    pub roots: Vec<PathBuf>,
    pub options: Arc<EngineOptions>,
    pub settings: Settings,
    pub llm: Result<LlmClient, LlmError>,
    /// The model in use, shared with the handle (`None` until chosen).
    pub model: SharedModel,
    pub mode: SharedMode,
    /// The history and its journal, owned together.
    pub conversation: Conversation,
    pub fs: Arc<dyn FileSystem>,
    pub reads: Arc<ReadTracker>,
    pub broker: Arc<Mutex<Broker>>,
    /// The sandbox of the session's commands (`None`: off or unsupported).
    pub sandbox: Option<Arc<maia_tools::sandbox::Sandbox>>,
    /// What to tell the user about the sandbox at the start.
    sandbox_notes: Vec<String>,
    /// Commands whose last run failed in the sandbox.
    /// Custom tools not confirmed since they appeared or changed: every
    /// call is asked, in every mode.
    pub(crate) pending_tools: Arc<Mutex<std::collections::HashSet<String>>>,
    pub(crate) sandbox_failures: Arc<Mutex<std::collections::HashSet<String>>>,
    pub skills: Arc<LoadedSkills>,
    /// Markdown commands (`.maia/commands`, `.claude/commands`).
    pub markdown_commands: Arc<crate::markdown_commands::LoadedCommands>,
    pub custom_tools: Arc<LoadedTools>,
    /// The session's MCP servers (stopped when the session ends).
    pub mcp: Arc<maia_mcp::McpManager>,
    /// The task list (`TodoWrite`).
    pub todos: Arc<Mutex<Vec<Todo>>>,
    /// Output of `!commands` waiting to join the next request.
    pub pending: Vec<String>,
    pub events: mpsc::UnboundedSender<Event>,
    pub context_file: Option<ContextFile>,
    /// A compaction summary that replaces the context file as starting
    /// context.
    pub summary: Option<String>,
    /// The last measured context size and the history length it covered.
    pub measured: Option<(u64, usize)>,
    /// Real/estimated token ratio from the last response (1.0 until known).
    pub calibration: f64,
    pub windows: Arc<WindowCache>,
    /// The context window of the model in use, once known.
    pub window: Option<u64>,
    /// Where [`Session::window`] came from (`manual`, `modelInfo`, …).
    pub window_source: Option<&'static str>,
    pub title: Option<String>,
    /// The editor's services for the tools.
    pub(crate) client: crate::client::SharedClient,
    /// An `AskUser` question was shown as text: the turn ends after the
    /// batch, so the user can answer.
    pub(crate) asked_as_text: Arc<AtomicBool>,
    /// What the endpoint said about vision (asked when an image is sent).
    pub(crate) vision: crate::images::VisionCache,
    /// The images of the current turn (sent with its requests only).
    pub(crate) turn_images: crate::images::Overlay,
    /// The running turn's prompt (kept verbatim by a compaction).
    pub prompt: Option<TurnPrompt>,
    /// The last response's usage and what the meter showed for it.
    pub last_usage: Option<maia_llm::Usage>,
    /// Cached prompt tokens over the session.
    pub cached_total: u64,
    /// Tool calls the model wrote as text: retried, and shown after a second time.
    pub text_tool_calls: TextToolCalls,
}

/// Counts of tool calls written as text instead of through the tool-calling interface.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TextToolCalls {
    /// Requests retried with the corrective instruction.
    pub retried: u32,
    /// Retries that came back as text again (shown to the user as text).
    pub shown: u32,
}

/// The user's message of the running turn: where it is in the history and
/// what the user saw of it.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnPrompt {
    pub index: usize,
    pub display: String,
}

impl Session {
    pub fn emit(&self, event: Event) {
        let _ = self.events.send(event);
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
        self.summary = None;
        self.measured = None;
        self.reads = Arc::new(ReadTracker::default());
        self.title = None;
        self.conversation.restart(name);
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
        self.settings = settings::load_with(&self.options, &self.cwd);
        self.llm = LlmClient::new(self.settings.llm.clone());
        if self.options.model.is_none() && self.settings.model.is_some() {
            self.model.set(self.settings.model.clone());
        }
        self.context_file = context_file::load(&self.cwd);
        let home = self.options.home.clone();
        if let Ok(mut broker) = self.broker.lock() {
            *broker = Broker::load(home.as_deref(), &self.cwd);
            broker.set_roots(self.roots.clone());
        }
        (self.sandbox, self.sandbox_notes) =
            build_sandbox(home.as_deref(), &self.cwd, &self.roots, &self.id);
        self.skills = Arc::new(skills::load(home.as_deref(), &self.cwd));
        self.markdown_commands =
            Arc::new(crate::markdown_commands::load(home.as_deref(), &self.cwd));
        self.custom_tools = Arc::new(custom_tools::load(&self.cwd, &reserved_tool_names()));
        if let Ok(mut pending) = self.pending_tools.lock() {
            *pending = pending_tools(home.as_deref(), &self.cwd, &self.custom_tools);
        }
        self.pending.clear();
    }

    /// Replaces this thread's conversation with a saved one.
    pub fn adopt(&mut self, name: String, loaded: &Loaded) -> Result<(), store::StoreError> {
        self.conversation.adopt(name, loaded)?;
        self.summary = loaded.summary().map(str::to_owned);
        self.measured = None;
        self.title = loaded.title().map(str::to_owned);
        self.reads = Arc::new(ReadTracker::default());
        Ok(())
    }

    /// Renames the saved conversation; its title becomes `name` (what
    /// the editor lists and shows).
    pub fn rename(&mut self, name: String) -> Result<(), store::StoreError> {
        self.conversation.rename(name.clone())?;
        self.title = Some(name.clone());
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

/// The custom tools the user has not confirmed as they are now.
fn pending_tools(
    home: Option<&Path>,
    cwd: &Path,
    tools: &LoadedTools,
) -> std::collections::HashSet<String> {
    let prints: Vec<(String, String)> = tools
        .tools
        .iter()
        .map(|t| (t.name.clone(), t.fingerprint()))
        .collect();
    permission::unconfirmed_tools(home, cwd, &prints)
        .into_iter()
        .collect()
}

/// The session's sandbox from the settings ([`settings::sandbox_policy`]),
/// with what to tell the user: why it is off, what it cannot enforce.
fn build_sandbox(
    home: Option<&Path>,
    cwd: &Path,
    roots: &[PathBuf],
    id: &str,
) -> (Option<Arc<maia_tools::sandbox::Sandbox>>, Vec<String>) {
    use maia_tools::sandbox::{Sandbox, SandboxMode};
    let (mut policy, mut notes) = settings::sandbox_policy(home, cwd, id);
    // Commands may write in the additional roots as in the cwd.
    policy.roots.extend(roots.iter().cloned());
    if policy.mode == SandboxMode::Off {
        return (None, notes);
    }
    match Sandbox::new(policy) {
        Ok(sandbox) => {
            for limit in sandbox.limits() {
                notes.push(format!("Command sandbox: {limit}."));
            }
            tracing::info!(mode = sandbox.policy().mode.id(), limits = ?sandbox.limits(), "command sandbox");
            (Some(Arc::new(sandbox)), notes)
        }
        Err(e) => {
            notes.push(format!(
                "Commands run without a sandbox: {e}. Bash, custom tools and !command can write anywhere you can."
            ));
            (None, notes)
        }
    }
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
    let settings = settings::load_with(options, &cwd);
    let llm = LlmClient::new(settings.llm.clone());
    let mode = SharedMode::default();
    let model = SharedModel::default();
    model.set(options.model.clone().or_else(|| settings.model.clone()));
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let (ops_tx, mut ops_rx) = mpsc::unbounded_channel();
    let busy = Arc::new(AtomicBool::new(false));
    let turn = Arc::new(Mutex::new(None));
    let ended = CancellationToken::new();
    let client = crate::client::SharedClient::default();
    let handle = SessionHandle {
        id: id.clone(),
        cwd: cwd.clone(),
        ops: ops_tx,
        turn: turn.clone(),
        busy: busy.clone(),
        model: model.clone(),
        mode: mode.clone(),
        ended: ended.clone(),
        client: client.clone(),
    };
    if let Err(e) = std::fs::create_dir_all(store::sessions_dir(&cwd)) {
        tracing::warn!("cannot create {}: {e}", store::sessions_dir(&cwd).display());
    }
    let context_file = context_file::load(&cwd);
    tracing::info!(session = %id, cwd = %cwd.display(), settings = ?settings.loaded, context_file = ?context_file.as_ref().map(|c| &c.path), "session started");
    let mut broker = Broker::load(options.home.as_deref(), &cwd);
    broker.set_roots(roots.clone());
    let (sandbox, sandbox_notes) = build_sandbox(options.home.as_deref(), &cwd, &roots, &id);
    let previous_roots = store::saved_roots(&cwd, &id);
    if previous_roots != roots
        && let Err(e) = store::save_roots(&cwd, &id, &roots)
    {
        tracing::warn!("cannot record the workspace folders: {e}");
    }
    let loaded_skills = skills::load(options.home.as_deref(), &cwd);
    let markdown_commands = crate::markdown_commands::load(options.home.as_deref(), &cwd);
    let loaded_tools = custom_tools::load(&cwd, &reserved_tool_names());
    let new_tools = pending_tools(options.home.as_deref(), &cwd, &loaded_tools);
    // Connects in the background; never delays the session.
    let mcp_sandbox = sandbox.clone().map(|sandbox| maia_mcp::McpSandbox {
        sandbox,
        offline: settings.mcp_offline.clone(),
    });
    let mcp = Arc::new(maia_mcp::McpManager::start_sandboxed(
        settings::merge_mcp_servers(mcp_servers, &settings),
        mcp_sandbox,
    ));
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
        cwd,
        roots,
        options: options.clone(),
        settings,
        llm,
        model,
        mode,
        fs,
        reads: Arc::new(ReadTracker::default()),
        broker: Arc::new(Mutex::new(broker)),
        sandbox,
        sandbox_notes,
        sandbox_failures: Arc::default(),
        pending_tools: Arc::new(Mutex::new(new_tools)),
        skills: Arc::new(loaded_skills),
        markdown_commands: Arc::new(markdown_commands),
        custom_tools: Arc::new(loaded_tools),
        mcp,
        todos: Arc::new(Mutex::new(Vec::new())),
        pending: Vec::new(),
        events: events_tx,
        context_file,
        summary: None,
        measured: None,
        calibration: 1.0,
        windows: windows.clone(),
        window: None,
        window_source: None,
        title: None,
        client,
        asked_as_text: Arc::default(),
        vision: crate::images::VisionCache::default(),
        turn_images: Vec::new(),
        prompt: None,
        last_usage: None,
        cached_total: 0,
        text_tool_calls: TextToolCalls::default(),
    };
    if let Some(loaded) = &restored {
        session.summary = loaded.summary().map(str::to_owned);
        if let Some(todos) = loaded.records.iter().rev().find_map(|r| match r {
            Record::Plan { todos } => Some(todos.clone()),
            _ => None,
        }) && let Ok(mut list) = session.todos.lock()
        {
            *list = todos;
        }
        session.title = loaded.title().map(str::to_owned);
    }
    session.announce_start();
    if restored.is_some() {
        session.announce_roots_change(&previous_roots);
    }
    crate::mcp::watch(&session.mcp, session.events.clone());
    prefetch_window(&session);
    tokio::spawn(async move {
        while let Some(op) = ops_rx.recv().await {
            match op {
                Op::Prompt { parts, cancel } => {
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
        session.mcp.shutdown();
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
    let Ok(llm) = session.llm.as_ref().map(Clone::clone) else {
        return;
    };
    let (windows, model, manual) = (
        session.windows.clone(),
        session.model.clone(),
        session.settings.context_windows.clone(),
    );
    tokio::spawn(async move {
        let cancel = CancellationToken::new();
        let model = match model.get() {
            Some(model) => model,
            None => match llm.list_models().await {
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

/// Names custom tools may not take.
/// The names a custom tool may not take: the built-in tools'.
pub fn reserved_tool_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = maia_tools::TOOL_NAMES.to_vec();
    names.extend([skills::TOOL_NAME, TODO_WRITE, CURRENT_MODEL, ASK_USER]);
    names
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
        for skill in &self.skills.skills {
            if out.iter().any(|c| c.name == skill.name) {
                continue;
            }
            out.push(CommandEntry {
                name: skill.name.clone(),
                description: format!("Skill: {}", skill.description),
                hint: Some(skill.hint.clone().unwrap_or_else(|| "arguments".to_owned())),
            });
        }
        for command in &self.markdown_commands.commands {
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
        if previous == self.roots.as_slice() {
            return;
        }
        let text = if self.roots.is_empty() {
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
                list_paths(&self.roots),
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
        for warning in &self.settings.warnings {
            warn(warning.clone());
        }
        for note in &self.sandbox_notes {
            warn(note.clone());
        }
        if let Ok(pending) = self.pending_tools.lock()
            && !pending.is_empty()
        {
            let mut names: Vec<&str> = pending.iter().map(String::as_str).collect();
            names.sort_unstable();
            warn(format!(
                "New or changed custom tools: {}. Each call is asked, in every mode, until you confirm the tool (\"Always allow\").",
                names.join(", ")
            ));
        }
        if let Ok(broker) = self.broker.lock() {
            info(broker.loaded().summary());
            for warning in &broker.loaded().warnings {
                warn(warning.clone());
            }
            let unseen = permission::unseen_allow_rules(
                self.options.home.as_deref(),
                &self.cwd,
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
            .skills
            .warnings
            .iter()
            .chain(&self.markdown_commands.warnings)
            .chain(&self.custom_tools.warnings)
        {
            warn(warning.clone());
        }
        if !self.roots.is_empty() {
            info(format!(
                "Workspace folders besides {}: {}",
                self.cwd.display(),
                list_paths(&self.roots)
            ));
        }
        if !self.skills.skills.is_empty() {
            let names: Vec<&str> = self.skills.skills.iter().map(|s| s.name.as_str()).collect();
            info(format!("Skills: {}", names.join(", ")));
        }
        if !self.markdown_commands.commands.is_empty() {
            let names: Vec<String> = self
                .markdown_commands
                .commands
                .iter()
                .map(|c| format!("/{}", c.name))
                .collect();
            info(format!("Commands: {}", names.join(", ")));
        }
        if !self.custom_tools.tools.is_empty() {
            let names: Vec<&str> = self
                .custom_tools
                .tools
                .iter()
                .map(|t| t.name.as_str())
                .collect();
            info(format!("Custom tools: {}", names.join(", ")));
        }
        let servers = self.mcp.status();
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
        let (level, text) = match &self.context_file {
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
