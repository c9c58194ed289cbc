//! A session's handle: [`SessionHandle`] submits prompts, cancels and
//! sends changes, in order, to the session's task (`handle/task.rs`);
//! [`spawn`] opens a session (its project loaded, its journal created or
//! restored) and starts that task, which runs its turns one after another.
//! This is the top of the engine's module graph: it drives the turn loop
//! (`session/turn.rs`), which works on the session's state
//! ([`crate::session`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use maia_tools::FileSystem;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::conversation::Conversation;
use crate::event::Event;
use crate::mode::Mode;
use crate::options::EngineOptions;
use crate::project::Project;
use crate::prompt::PromptPart;
use crate::queue::{Queue, QueueAnswer, QueueError, QueueOp, QueueRequest};
use crate::session::steer::{Steer, SteerOutcome};
use crate::session::{Change, Parts, Services, Session, default_model, fresh_name};
use crate::settings;
use crate::store::{self, Journal, Loaded};
use crate::window::WindowCache;

mod children;
mod files;
mod task;
use crate::session_state::{SessionState, StateCell, StateReader, TurnId};
use children::ChildSpawner;
use task::{Input, Launch, launch};

/// A prompt was sent while a turn is running (the one refusal, whichever
/// front door asked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("this session is already running a prompt; wait for it to finish or cancel it")]
pub struct Busy;

/// Drives one session. Cloneable; the session ends when every clone is gone.
#[derive(Clone)]
pub struct SessionHandle {
    id: String,
    cwd: PathBuf,
    /// The session task's inbox: prompts, changes, rewinds, reverts and
    /// queue edits, in the order the caller wrote them.
    inbox: mpsc::UnboundedSender<Input>,
    /// The session's background tasks (`_session/async_task/stop`).
    tasks: crate::background::Tasks,
    /// The calls running now (`cancel_call`).
    running: crate::tools::running::RunningCalls,
    /// The session's state: its model, its mode and its running turn
    /// (`session_state.rs`, the one owner of "a turn is running").
    state: StateCell,
    /// The model the session started with (forced or configured).
    initial_model: Option<String>,
    /// The options of the thread as it was saved (empty for a new one).
    saved_options: store::SessionOptions,
    /// The process's options: the managed policy bounds modes and models.
    options: Arc<EngineOptions>,
    /// Cancelled once the session has stopped and released its journal.
    ended: CancellationToken,
    /// The running children of `Task` calls, of this session and of its
    /// descendants, by session id.
    children: Children,
}

/// Running child sessions by id, shared by a top session and its
/// descendants.
type Children = Arc<Mutex<std::collections::HashMap<String, SessionHandle>>>;

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

    /// Starts a turn, or refuses with [`Busy`] while one runs (decided by
    /// the state cell alone). Its events, from [`Event::TurnStarted`] with
    /// the returned id to [`Event::TurnEnded`], arrive on the session's
    /// event receiver.
    pub fn prompt(&self, parts: Vec<PromptPart>) -> Result<TurnId, Busy> {
        let (turn, cancel) = self.state.claim().ok_or(Busy)?;
        let prompt = Input::Prompt {
            parts,
            turn,
            cancel,
        };
        if self.inbox.send(prompt).is_err() {
            self.state.end();
            return Err(Busy);
        }
        Ok(turn)
    }

    /// The session's state now: its model, its mode, its running turn.
    pub fn state(&self) -> SessionState {
        self.state.state()
    }

    /// Follows the session's state; holding it does not keep the session
    /// alive.
    pub fn state_reader(&self) -> StateReader {
        self.state.reader()
    }

    /// Adds a message to the running turn (`_session/steering`): it joins
    /// the history at the turn's next tool-round boundary, or starts a turn
    /// after it when the turn ends without one. When no turn runs it starts
    /// one, unless `prompt_required` ([`SteerOutcome::PromptRequired`]).
    /// The future resolves once the message was used (or not).
    pub fn steer(
        &self,
        parts: Vec<PromptPart>,
        prompt_required: bool,
    ) -> impl std::future::Future<Output = SteerOutcome> + Send + use<> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let sent = self
            .inbox
            .send(Input::Change(Change::Steer(Steer {
                parts,
                prompt_required,
                reply,
            })))
            .is_ok();
        async move {
            let ended = || SteerOutcome::Failed("the session has ended".into());
            if !sent {
                return ended();
            }
            answer.await.unwrap_or_else(|_| ended())
        }
    }

    /// Works on the session's prompt queue ([`crate::queue`]) through the
    /// inbox, in order with what was written before it; answered when the
    /// session task reaches it, also while a turn runs.
    pub fn queue(
        &self,
        op: QueueOp,
    ) -> impl std::future::Future<Output = Result<QueueAnswer, QueueError>> + Send + use<> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let sent = self
            .inbox
            .send(Input::Queue(QueueRequest { op, reply }))
            .is_ok();
        async move {
            if !sent {
                return Err(QueueError::Ended);
            }
            answer.await.unwrap_or(Err(QueueError::Ended))
        }
    }

    /// Truncates the thread before the user message `point` names
    /// ([`crate::timeline`]), restoring the files as a revert from it
    /// would when `restore_files` (their preview first: one that fails
    /// changes nothing). Handed to the session task now, in order with
    /// the other requests: done between turns before a prompt sent after
    /// it; refused with [`RewindError::Busy`] while a turn runs, nothing
    /// changed.
    ///
    /// [`RewindError::Busy`]: crate::timeline::RewindError::Busy
    pub fn rewind(
        &self,
        point: crate::timeline::MessagePoint,
        restore_files: bool,
    ) -> impl std::future::Future<
        Output = Result<crate::timeline::RewindDone, crate::timeline::RewindError>,
    > + Send
    + use<> {
        use crate::timeline::RewindError;
        let (reply, answer) = tokio::sync::oneshot::channel();
        let request = crate::session::rewind::Request {
            point,
            restore_files,
            reply,
        };
        let sent = self.inbox.send(Input::Rewind(request)).is_ok();
        async move {
            if !sent {
                return Err(RewindError::Ended);
            }
            answer.await.unwrap_or(Err(RewindError::Ended))
        }
    }

    /// Resolves once the session task has taken every request sent
    /// before this call (a rewind or a revert done, or refused): what
    /// reads the session's journal from outside (a fork) sees their
    /// effect.
    pub fn reached(&self) -> impl std::future::Future<Output = ()> + Send + use<> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let sent = self.inbox.send(Input::Reached(reply)).is_ok();
        async move {
            if sent {
                // Dropped unanswered: the session ended; nothing to wait for.
                let _ = answer.await;
            }
        }
    }

    /// Stops background task `task_id` (its whole process tree); its tool
    /// call then completes. `Ok(false)`: it had ended already.
    pub fn stop_task(&self, task_id: &str) -> Result<bool, String> {
        self.tasks.stop(task_id)
    }

    /// Cancels tool call `id` alone, while it runs: its process is killed
    /// (a command's whole tree), it ends "cancelled by the user" and the
    /// turn goes on. `false` when no such call runs.
    pub fn cancel_call(&self, id: &str) -> bool {
        self.running.cancel(id)
    }

    /// Cancels the running turn of child session `id` (a `Task` call's,
    /// of this session or of one of its children) alone: its `Task` call
    /// ends "cancelled by the user" and the parent's turn goes on. `false`
    /// when no such child runs.
    pub fn cancel_child(&self, id: &str) -> bool {
        let child = self
            .children
            .lock()
            .ok()
            .and_then(|children| children.get(id).cloned());
        match child {
            Some(child) => {
                child.cancel();
                true
            }
            None => false,
        }
    }

    /// Cancels the running turn, if any: the model stream is dropped and
    /// running tools are killed. The turn then ends with `Cancelled`.
    pub fn cancel(&self) {
        self.state.cancel();
    }

    /// The model the session started with, if one is forced or
    /// configured. The model now is [`SessionHandle::state`]'s.
    pub fn initial_model(&self) -> Option<String> {
        self.initial_model.clone()
    }

    /// Changes the mode; it applies from the next batch of tool calls.
    /// The session's state shows it from now on. A mode the managed
    /// policy refuses is not taken (the refusal names the policy file).
    pub fn set_mode(&self, mode: Mode) -> Result<(), crate::policy::Refusal> {
        self.options.check_mode(mode)?;
        self.state.set_mode(mode);
        self.change(Change::Mode(mode));
        Ok(())
    }

    /// Switches the model for the next requests. The session's state
    /// shows it from now on. A model the managed policy refuses is not
    /// taken.
    pub fn set_model(&self, model: String) -> Result<(), crate::policy::Refusal> {
        self.options.check_model(&model)?;
        self.state.set_model(Some(model.clone()));
        self.change(Change::Model(model));
        Ok(())
    }

    /// The modes this session may be switched to (the managed policy may
    /// leave `bypass` out).
    pub fn modes(&self) -> Vec<Mode> {
        self.options.modes()
    }

    /// The managed policy in force, if any.
    pub fn policy(&self) -> Option<&crate::policy::ManagedPolicy> {
        self.options.policy.as_deref()
    }

    /// Takes the default model from the endpoint's list when none is
    /// forced or configured (see [`default_model`]); returns the model the
    /// session then uses.
    pub fn default_model_from(&self, listed: &[String]) -> Option<String> {
        if self.initial_model.is_some() {
            return self.initial_model.clone();
        }
        let listed: Vec<String> = match &self.options.policy {
            Some(policy) => policy.filter_models(listed.to_vec()),
            None => listed.to_vec(),
        };
        self.change(Change::DefaultModel(listed.clone()));
        let model = default_model(listed.iter().map(String::as_str)).map(str::to_owned);
        self.state.default_model(model);
        self.state.state().model
    }

    /// Renames the conversation as `/rename` does (its title and its file
    /// name), between turns or at the running turn's next checkpoint. The
    /// answer is the name kept, or why it could not be; `title` is first
    /// made a valid name ([`store::name_from_title`]), and `Err` at once
    /// when nothing of it is left.
    pub fn rename(
        &self,
        title: &str,
    ) -> Result<tokio::sync::oneshot::Receiver<Result<String, String>>, String> {
        let name = store::name_from_title(title)
            .ok_or_else(|| format!("`{title}` has nothing a conversation name can hold"))?;
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.change(Change::Rename { name, reply });
        Ok(answer)
    }

    /// The options the thread was saved with (what `set_option` recorded
    /// before); empty for a new thread.
    pub fn saved_options(&self) -> &store::SessionOptions {
        &self.saved_options
    }

    /// Sets one of the thread's options (such as `reasoning_effort`),
    /// recorded in its journal and used from the next model request.
    pub fn set_option(&self, key: &str, value: serde_json::Value) {
        self.change(Change::Option(key.to_owned(), value));
    }

    /// Gives the session's tools the editor's services (terminals,
    /// questions); they apply from the next batch of tool calls.
    pub fn use_client(&self, tools: crate::client::ClientTools) {
        self.change(Change::Client(tools));
    }

    fn change(&self, change: Change) {
        // The session has ended when this fails: nothing left to change.
        let _ = self.inbox.send(Input::Change(change));
    }

    /// Whether a turn is running (the session state's `running`).
    pub fn is_busy(&self) -> bool {
        self.state.state().running.is_some()
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

pub(crate) fn spawn(
    options: &Arc<EngineOptions>,
    (windows, lsp_pool): (&Arc<WindowCache>, &Arc<maia_lsp_client::LspPool>),
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
    let (changes_tx, changes) = mpsc::unbounded_channel();
    let state = StateCell::new(model.clone());
    let saved_options = match &start {
        Start::New => store::SessionOptions::new(),
        Start::Restore { loaded, .. } => loaded.options(),
    };
    let children = Children::default();
    if let Err(e) = std::fs::create_dir_all(store::sessions_dir(&cwd)) {
        tracing::warn!("cannot create {}: {e}", store::sessions_dir(&cwd).display());
    }
    tracing::info!(session = %id, cwd = %cwd.display(), settings = ?project.settings.loaded, context_files = ?project.context_files.files.iter().map(|c| &c.path).collect::<Vec<_>>(), "session started");
    let previous_roots = store::saved_roots(&cwd, &id);
    if previous_roots != roots
        && let Err(e) = store::save_roots(&cwd, &id, &roots)
    {
        tracing::warn!("cannot record the workspace folders: {e}");
    }
    // Connects in the background; never delays the session.
    let editor_servers: Vec<String> = mcp_servers.iter().map(|s| s.name.clone()).collect();
    let mcp_servers = settings::merge_mcp_servers(mcp_servers, &project.settings);
    let mcp_sandbox = maia_mcp::McpSandbox {
        servers: crate::mcp_trust::confinement(
            crate::mcp_trust::Place {
                home: options.home.as_deref(),
                cwd: &cwd,
                sandboxed: project.sandbox.is_some(),
            },
            &mcp_servers,
            &editor_servers,
            &project.settings,
        ),
        sandbox: project.sandbox.clone(),
    };
    let mcp = Arc::new(maia_mcp::McpManager::start_sandboxed(
        mcp_servers,
        Some(mcp_sandbox),
    ));
    let lsp = crate::langs::manager(
        project.lsp.clone(),
        &cwd,
        project.sandbox.clone(),
        events_tx.clone(),
        lsp_pool,
    );
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
    let session = Session::new(Parts {
        id,
        services: Services {
            options: options.clone(),
            cwd,
            roots,
            fs,
            events: events_tx,
            mcp,
            lsp,
            windows: windows.clone(),
            vision: crate::images::VisionCache::new(windows.catalogue().clone()),
            changes,
            spawner: Arc::new(ChildSpawner {
                children: children.clone(),
            }),
            state: state.clone(),
        },
        project,
        conversation,
        model: model.clone(),
        role: None,
    });
    if let Some(loaded) = &restored
        && let Ok(mut list) = session.tools().todos.lock()
    {
        // The task list in effect: rewinds applied.
        *list = crate::timeline::todos(&crate::timeline::rewound(loaded));
    }
    session.announce_start();
    if restored.is_some() {
        session.announce_roots_change(&previous_roots);
    }
    crate::mcp::watch(&session.services().mcp, session.services().events.clone());
    prefetch_window(&session);
    let queue_path = match session.services().options.no_queue {
        true => None,
        false => store::queue_path(&session.services().cwd, session.id()),
    };
    let handle = launch(
        session,
        Launch {
            changes: changes_tx,
            queue: Queue::load(queue_path),
            initial_model: model,
            saved_options,
            children,
            state,
            top: true,
        },
    );
    (handle, events_rx)
}

/// Learns the model's context window in the background as the session
/// opens (`/model/info`, the models list; the model's own answer is asked
/// in the background too), so the first request does not wait for it.
fn prefetch_window(session: &Session) {
    let Some(llm) = session.project().llm.as_ref().ok().cloned() else {
        return;
    };
    let (windows, model, manual) = (
        session.services().windows.clone(),
        session.model().map(str::to_owned),
        session.project().settings.context_windows.clone(),
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
