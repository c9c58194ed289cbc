//! A session's handle and its task: [`SessionHandle`] submits prompts,
//! cancels and sends changes; [`spawn`] opens a session (its project loaded,
//! its journal created or restored) and runs its turns one after another on
//! a task. This is the top of the engine's module graph: it drives the turn
//! loop (`session/turn.rs`), which works on the session's state
//! ([`crate::session`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use maia_tools::FileSystem;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::conversation::Conversation;
use crate::event::{Event, StopReason};
use crate::mode::Mode;
use crate::options::EngineOptions;
use crate::project::Project;
use crate::prompt::PromptPart;
use crate::queue::{
    Queue, QueueAnswer, QueueError, QueueOp, QueueRequest, QueueTurnStatus, Queued,
};
use crate::session::steer::{Steer, SteerOutcome};
use crate::session::{Change, Parts, Services, Session, default_model, fresh_name};
use crate::settings;
use crate::store::{self, Journal, Loaded};
use crate::window::WindowCache;

mod children;
mod files;
use children::ChildSpawner;

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
    changes: mpsc::UnboundedSender<Change>,
    queue: mpsc::UnboundedSender<QueueRequest>,
    /// The session's background tasks (`_session/async_task/stop`).
    tasks: crate::background::Tasks,
    turn: Arc<Mutex<Option<CancellationToken>>>,
    busy: Arc<AtomicBool>,
    /// The model the session started with (forced or configured).
    initial_model: Option<String>,
    /// The options of the thread as it was saved (empty for a new one).
    saved_options: store::SessionOptions,
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
            .changes
            .send(Change::Steer(Steer {
                parts,
                prompt_required,
                reply,
            }))
            .is_ok();
        async move {
            let ended = || SteerOutcome::Failed("the session has ended".into());
            if !sent {
                return ended();
            }
            answer.await.unwrap_or_else(|_| ended())
        }
    }

    /// Works on the session's prompt queue ([`crate::queue`]); answered at
    /// once, also while a turn runs.
    pub fn queue(
        &self,
        op: QueueOp,
    ) -> impl std::future::Future<Output = Result<QueueAnswer, QueueError>> + Send + use<> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let sent = self.queue.send(QueueRequest { op, reply }).is_ok();
        async move {
            if !sent {
                return Err(QueueError::Ended);
            }
            answer.await.unwrap_or(Err(QueueError::Ended))
        }
    }

    /// Truncates the thread before the user message `point` names
    /// ([`crate::timeline`]); refused with [`RewindError::Busy`] while a
    /// turn runs, nothing changed.
    ///
    /// [`RewindError::Busy`]: crate::timeline::RewindError::Busy
    pub fn rewind(
        &self,
        point: crate::timeline::MessagePoint,
    ) -> impl std::future::Future<
        Output = Result<crate::timeline::Rewound, crate::timeline::RewindError>,
    > + Send
    + use<> {
        use crate::timeline::RewindError;
        let (reply, answer) = tokio::sync::oneshot::channel();
        let sent = !self.is_busy()
            && self
                .changes
                .send(Change::Rewind(crate::session::rewind::Request {
                    point,
                    reply,
                }))
                .is_ok();
        let busy = self.is_busy();
        async move {
            if !sent {
                return Err(if busy {
                    RewindError::Busy
                } else {
                    RewindError::Ended
                });
            }
            answer.await.unwrap_or(Err(RewindError::Ended))
        }
    }

    /// Stops background task `task_id` (its whole process tree); its tool
    /// call then completes. `Ok(false)`: it had ended already.
    pub fn stop_task(&self, task_id: &str) -> Result<bool, String> {
        self.tasks.stop(task_id)
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
    let (changes_tx, changes) = mpsc::unbounded_channel();
    let saved_options = match &start {
        Start::New => store::SessionOptions::new(),
        Start::Restore { loaded, .. } => loaded.options(),
    };
    let children = Children::default();
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
            top: true,
        },
    );
    (handle, events_rx)
}

/// What [`launch`] needs besides the session.
struct Launch {
    /// The sender of the session's changes (its receiver is in the session).
    changes: mpsc::UnboundedSender<Change>,
    queue: Queue,
    initial_model: Option<String>,
    saved_options: store::SessionOptions,
    children: Children,
    /// A top session owns its MCP and language servers (a child shares
    /// its parent's) and runs what the user types as commands.
    top: bool,
}

/// Runs `session`'s turns on a task, one after another; returns its
/// handle.
fn launch(mut session: Session, launch: Launch) -> SessionHandle {
    let Launch {
        changes,
        mut queue,
        initial_model,
        saved_options,
        children,
        top,
    } = launch;
    let (ops_tx, mut ops_rx) = mpsc::unbounded_channel();
    let (queue_tx, mut queue_rx) = mpsc::unbounded_channel();
    let busy = Arc::new(AtomicBool::new(false));
    let turn = Arc::new(Mutex::new(None));
    let ended = CancellationToken::new();
    let events = session.services().events.clone();
    let tasks = session.tools().tasks.clone();
    let handle = SessionHandle {
        id: session.id().to_owned(),
        cwd: session.services().cwd.clone(),
        ops: ops_tx,
        changes,
        queue: queue_tx,
        tasks: tasks.clone(),
        turn: turn.clone(),
        busy: busy.clone(),
        initial_model,
        saved_options,
        ended: ended.clone(),
        children,
    };
    tokio::spawn(async move {
        let ctl = TurnControl { busy, turn };
        // A turn to start at once: a steer's or the queue's.
        let mut next: Option<NextTurn> = None;
        loop {
            let NextTurn {
                parts,
                cancel,
                queued,
            } = match next.take() {
                Some(turn) => turn,
                None => {
                    // A change sent before a prompt is taken before it.
                    let op = tokio::select! {
                        biased;
                        Some(change) = session.next_change() => {
                            match change {
                                Change::Steer(steer) => {
                                    next = idle_steer(&mut session, steer, &ctl);
                                }
                                Change::Revert(call) if ctl.claim() => {
                                    // Idle again before the answer: the
                                    // client's next request (the apply
                                    // after a preview) is not refused.
                                    let report = session.revert_files(&call.request).await;
                                    ctl.end();
                                    let _ = call.reply.send(report);
                                }
                                Change::Rewind(request) => session.rewind_request(request),
                                other => session.apply(other),
                            }
                            continue;
                        }
                        Some(request) = queue_rx.recv() => {
                            next = idle_queue(&session, &mut queue, request, &ctl);
                            continue;
                        }
                        () = tasks.ended() => {
                            // Journaled now; the model hears of it next turn.
                            session.record_task_ends();
                            continue;
                        }
                        op = ops_rx.recv() => op,
                    };
                    let Some(Op::Prompt { parts, cancel }) = op else {
                        break;
                    };
                    NextTurn {
                        parts,
                        cancel,
                        queued: None,
                    }
                }
            };
            session.apply_changes();
            let stop = {
                let run = async {
                    if top {
                        crate::commands::run_prompt(&mut session, parts, &cancel).await
                    } else {
                        // A child's prompt is the model's task, never a command.
                        session.run_turn(parts, None, &cancel).await
                    }
                };
                tokio::pin!(run);
                // The queue is edited while the turn runs.
                loop {
                    tokio::select! {
                        stop = &mut run => break stop,
                        Some(request) = queue_rx.recv() => {
                            let QueueRequest { op, reply } = request;
                            let answer = queue.edit(op).map(|(answer, changed)| {
                                if changed {
                                    let _ = events.send(Event::QueueChanged);
                                }
                                answer
                            });
                            let _ = reply.send(answer);
                        }
                    }
                }
            };
            let stop = if cancel.is_cancelled() {
                StopReason::Cancelled
            } else {
                stop
            };
            if let Some((turn_id, queued_id)) = queued {
                let status = if stop == StopReason::Cancelled {
                    QueueTurnStatus::Interrupted
                } else {
                    QueueTurnStatus::Completed
                };
                session.emit(Event::QueueTurn {
                    turn_id,
                    queued_id,
                    status,
                });
            }
            // A cancelled turn pauses the queue; any other end resumes it.
            queue.paused = stop == StopReason::Cancelled;
            // A steer the turn did not take starts the next one at once,
            // else the queue's head: the session stays busy, so no prompt
            // slips in between.
            next = session
                .leftover_steers(stop)
                .map(|parts| NextTurn {
                    parts,
                    cancel: ctl.begin(),
                    queued: None,
                })
                .or_else(|| {
                    let item = queue.next()?;
                    Some(NextTurn::queued(item, ctl.begin()))
                });
            if next.is_none() {
                ctl.end();
            }
            if let Some(usage) = session.take_turn_usage() {
                session.emit(Event::TurnUsage(usage));
            }
            session.emit(Event::TurnEnded(stop));
            if let Some(NextTurn {
                queued: Some((turn_id, queued_id)),
                ..
            }) = &next
            {
                announce_queue_turn(&session, turn_id, queued_id);
            }
        }
        if top {
            session.services().mcp.shutdown();
            session.services().lsp.shutdown();
        }
        tracing::debug!(session = %session.id(), "session ended");
        // The journal (and its lock) goes with the session.
        drop(session);
        ended.cancel();
    });
    handle
}

/// The busy flag and the running turn's token, as the session task sets
/// them for the turns it starts itself.
struct TurnControl {
    busy: Arc<AtomicBool>,
    turn: Arc<Mutex<Option<CancellationToken>>>,
}

impl TurnControl {
    /// Marks the session busy, when it is idle.
    fn claim(&self) -> bool {
        self.busy
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The token of a turn the session starts (already busy).
    fn begin(&self) -> CancellationToken {
        let cancel = CancellationToken::new();
        if let Ok(mut turn) = self.turn.lock() {
            *turn = Some(cancel.clone());
        }
        cancel
    }

    fn end(&self) {
        if let Ok(mut turn) = self.turn.lock() {
            *turn = None;
        }
        self.busy.store(false, Ordering::Release);
    }
}

/// A turn the session task starts without a prompt from the handle.
struct NextTurn {
    parts: Vec<PromptPart>,
    cancel: CancellationToken,
    /// Taken from the queue: the turn's id and the queued prompt's.
    queued: Option<(String, String)>,
}

impl NextTurn {
    fn queued(item: Queued, cancel: CancellationToken) -> Self {
        NextTurn {
            parts: crate::queue::parts(&item.input),
            cancel,
            queued: Some((format!("turn-{}", uuid::Uuid::new_v4().simple()), item.id)),
        }
    }
}

fn announce_queue_turn(session: &Session, turn_id: &str, queued_id: &str) {
    session.emit(Event::QueueChanged);
    session.emit(Event::QueueTurn {
        turn_id: turn_id.to_owned(),
        queued_id: queued_id.to_owned(),
        status: QueueTurnStatus::InProgress,
    });
}

/// A queue request that reached the idle session: `start` starts a turn
/// (returned, the session marked busy); the rest edits the queue.
fn idle_queue(
    session: &Session,
    queue: &mut Queue,
    request: QueueRequest,
    ctl: &TurnControl,
) -> Option<NextTurn> {
    let QueueRequest { op, reply } = request;
    let QueueOp::Start { id } = op else {
        let answer = queue.edit(op).map(|(answer, changed)| {
            if changed {
                session.emit(Event::QueueChanged);
            }
            answer
        });
        let _ = reply.send(answer);
        return None;
    };
    if !ctl.claim() {
        let _ = reply.send(Err(QueueError::Busy));
        return None;
    }
    let item = match queue.take(id.as_deref()) {
        Ok(item) => item,
        Err(e) => {
            ctl.end();
            let _ = reply.send(Err(e));
            return None;
        }
    };
    queue.paused = false;
    let next = NextTurn::queued(item, ctl.begin());
    if let Some((turn_id, queued_id)) = &next.queued {
        let _ = reply.send(Ok(QueueAnswer::Started {
            turn_id: turn_id.clone(),
        }));
        announce_queue_turn(session, turn_id, queued_id);
    }
    Some(next)
}

/// A steer that reached the idle session: it starts a turn (returned, the
/// session marked busy), or is told a prompt is required; when a prompt is
/// already on its way it waits for that prompt's turn.
fn idle_steer(session: &mut Session, steer: Steer, ctl: &TurnControl) -> Option<NextTurn> {
    if !ctl.busy.load(Ordering::Acquire) && steer.prompt_required {
        steer.answer(SteerOutcome::PromptRequired);
        return None;
    }
    if !ctl.claim() {
        session.keep_steer(steer);
        return None;
    }
    Some(NextTurn {
        parts: steer.answer(SteerOutcome::StartedNewTurn),
        cancel: ctl.begin(),
        queued: None,
    })
}

/// Learns the model's context window in the background as the session
/// opens (`/model/info`, the models list; the model's own answer is asked
/// in the background too), so the first request does not wait for it.
fn prefetch_window(session: &Session) {
    let Ok(llm) = session.project().llm.as_ref().map(Clone::clone) else {
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
