//! A session's state, in parts with one owner each ([`Session`]), and the
//! changes to it that are not turns: clear, reset, reload, adopt, rename,
//! and the start-up notices. The task that runs its turns and the handle a
//! front door drives it with are in [`crate::handle`]; the turn itself in
//! [`crate::turn`]. Nothing here reaches up into either.
//!
//! Every message of the conversation goes through its [`Conversation`],
//! which appends it to the journal (see [`crate::store`]) as it happens.
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
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use maia_llm::ChatMessage;
use maia_tools::{FileSystem, ReadTracker};
use tokio::sync::mpsc;

use crate::conversation::Conversation;
use crate::event::{Event, NoticeLevel};
use crate::meter::Meter;
use crate::mode::Mode;
use crate::options::EngineOptions;
use crate::permission;
use crate::project::Project;
use crate::session_tools::Todo;
use crate::store::{self, Loaded, Record};
use crate::window::WindowCache;

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
    pub(crate) changes: mpsc::UnboundedReceiver<Change>,
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

impl Session {
    /// On a load or resume: says when the editor opened the conversation
    /// with other additional folders than last time (the request's list is
    /// the one that applies, as ACP says; an omitted list means none).
    pub(crate) fn announce_roots_change(&self, previous: &[PathBuf]) {
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
    pub(crate) fn announce_start(&self) {
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
        self.emit(Event::Commands(self.project.command_entries()));
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
