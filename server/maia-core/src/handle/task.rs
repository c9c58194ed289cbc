//! The session task: it runs the turns, and marks "a turn is running" in
//! the session's state cell (`session_state.rs`, the one owner) for the
//! turns it starts itself and idle when a turn ends. It reads the
//! handle's inbox in the order the requests were written: between turns
//! it starts a prompt's turn, applies a change, edits the prompt queue,
//! and does a rewind or a file revert (each as one operation, before
//! whatever was written after it); while a turn runs it passes changes on
//! to the turn (taken at its checkpoints), edits the queue, and refuses
//! rewinds and reverts, nothing changed. It also
//! starts the turns the session starts itself (a leftover steer, the
//! queue's head), and runs the thread's labelling call after a turn
//! (`session/title.rs`) beside the session: its outcome is taken when the
//! session is idle, or held until the running turn ends; the call is
//! cancelled when the session ends.

use std::collections::VecDeque;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::event::{Event, StopReason};
use crate::prompt::PromptPart;
use crate::queue::{
    Queue, QueueAnswer, QueueError, QueueOp, QueueRequest, QueueTurnStatus, Queued,
};
use crate::session::files::RevertCall;
use crate::session::steer::{Steer, SteerOutcome};
use crate::session::{Change, Session, TitleDone, TitleJob, rewind};
use crate::store;

use super::{Children, SessionHandle};
use crate::session_state::{StateCell, TurnId};

/// What the handle sends the session task, in the order its caller wrote
/// the requests.
pub(super) enum Input {
    /// A turn to run; the handle claimed it in the state cell.
    Prompt {
        parts: Vec<PromptPart>,
        turn: TurnId,
        cancel: CancellationToken,
    },
    Change(Change),
    /// Truncate the thread before a user message (between turns only).
    Rewind(rewind::Request),
    /// `_session/files/revert`: done between turns, refused in a turn.
    Revert(RevertCall),
    /// Answered once the task reached it: what was sent before is done.
    Reached(oneshot::Sender<()>),
    /// A `_session/queue` edit: answered when reached, also while a turn
    /// runs (after what was written before it).
    Queue(QueueRequest),
}
/// What [`launch`] needs besides the session.
pub(super) struct Launch {
    /// The sender of the session's own queue of changes (its receiver is
    /// in the session), which the task fills while a turn runs.
    pub(super) changes: mpsc::UnboundedSender<Change>,
    pub(super) queue: Queue,
    pub(super) initial_model: Option<String>,
    pub(super) saved_options: store::SessionOptions,
    pub(super) children: Children,
    /// The session's state cell (the session writes its own changes).
    pub(super) state: StateCell,
    /// A top session owns its MCP and language servers (a child shares
    /// its parent's) and runs what the user types as commands.
    pub(super) top: bool,
}

/// Runs `session`'s turns on a task, one after another; returns its
/// handle.
pub(super) fn launch(session: Session, launch: Launch) -> SessionHandle {
    let Launch {
        changes,
        queue,
        initial_model,
        saved_options,
        children,
        state,
        top,
    } = launch;
    let (inbox_tx, inbox) = mpsc::unbounded_channel();
    let ended = CancellationToken::new();
    let handle = SessionHandle {
        id: session.id().to_owned(),
        cwd: session.services().cwd.clone(),
        inbox: inbox_tx,
        tasks: session.tools().tasks.clone(),
        running: session.tools().running.clone(),
        state: state.clone(),
        initial_model,
        saved_options,
        options: session.services().options.clone(),
        ended: ended.clone(),
        children,
    };
    let task = Task {
        inbox,
        held: VecDeque::new(),
        labelling: None,
        labelled: None,
        closing: CancellationToken::new(),
        changes,
        queue,
        events: session.services().events.clone(),
        ctl: state,
        top,
    };
    tokio::spawn(async move {
        task.run(session).await;
        ended.cancel();
    });
    handle
}

/// The session task's own state.
struct Task {
    /// The handle's requests, in the order they were written.
    inbox: mpsc::UnboundedReceiver<Input>,
    /// Inputs a running turn could not take (a prompt, and whatever
    /// followed it), taken first once it ends.
    held: VecDeque<Input>,
    /// The labelling call running, if any (one at a time).
    labelling: Option<Labelling>,
    /// A labelling call's outcome that came while a turn ran.
    labelled: Option<TitleDone>,
    /// Cancelled when the session ends: the labelling call stops.
    closing: CancellationToken,
    /// The session's own queue of changes, which the running turn takes.
    changes: mpsc::UnboundedSender<Change>,
    queue: Queue,
    /// The session's events (for the queue's, while a turn has the session).
    events: mpsc::UnboundedSender<Event>,
    /// The session's state cell: the turns the task starts are claimed
    /// there, and every turn ends there.
    ctl: StateCell,
    top: bool,
}

impl Task {
    async fn run(mut self, mut session: Session) {
        if self.top {
            let source = match session.conversation().is_empty() {
                true => "startup",
                false => "resume",
            };
            session.session_start_hooks(source).await;
        }
        // A turn to start at once: a steer's or the queue's.
        let mut next: Option<NextTurn> = None;
        loop {
            let turn = match next.take() {
                Some(turn) => turn,
                None => match self.idle(&mut session).await {
                    Some(turn) => turn,
                    None => break,
                },
            };
            next = self.turn(&mut session, turn).await;
        }
        self.closing.cancel();
        if self.top {
            session.session_end_hooks("other").await;
            session.services().mcp.shutdown();
            session.services().lsp.shutdown();
        }
        tracing::debug!(session = %session.id(), "session ended");
        // The journal (and its lock) goes with the session.
        drop(session);
    }

    /// Between turns: the inputs in the order they were written, until
    /// one starts a turn (returned); `None` once every handle is gone.
    /// A rewind or a revert is done here as one operation, so what was
    /// written after it (a prompt) waits for it and then sees its result.
    async fn idle(&mut self, session: &mut Session) -> Option<NextTurn> {
        let tasks = session.tools().tasks.clone();
        loop {
            let input = match self.held.pop_front() {
                Some(input) => input,
                None => tokio::select! {
                    biased;
                    input = self.inbox.recv() => input?,
                    () = tasks.ended() => {
                        // Journaled now; the model hears of it next turn.
                        session.record_task_ends();
                        continue;
                    }
                    done = labelled(&mut self.labelling) => {
                        session.finish_title(done, &self.closing).await;
                        continue;
                    }
                },
            };
            match input {
                Input::Prompt {
                    parts,
                    turn,
                    cancel,
                } => {
                    return Some(NextTurn {
                        parts,
                        turn,
                        cancel,
                        queued: None,
                    });
                }
                Input::Change(Change::Steer(steer)) => {
                    if let Some(turn) = idle_steer(session, steer, &self.ctl) {
                        return Some(turn);
                    }
                }
                Input::Change(change) => session.apply(change),
                Input::Rewind(request) => session.rewind_request(request).await,
                Input::Revert(call) => {
                    let report = session.revert_files(&call.request).await;
                    let _ = call.reply.send(report);
                }
                Input::Reached(reply) => {
                    let _ = reply.send(());
                }
                Input::Queue(request) => {
                    if let Some(turn) = idle_queue(session, &mut self.queue, request, &self.ctl) {
                        return Some(turn);
                    }
                }
            }
        }
    }

    /// An input that reached a running turn: a change goes to the turn (at
    /// its next checkpoint); a rewind or a revert is refused, nothing
    /// changed; a prompt (the handle refuses one while busy) waits for the
    /// turn's end, and so does everything written after it.
    fn during_turn(&mut self, input: Input) {
        if !self.held.is_empty() {
            return self.held.push_back(input);
        }
        match input {
            Input::Change(change) => {
                // The session is the receiver: it lives as long as the task.
                let _ = self.changes.send(change);
            }
            Input::Rewind(request) => request.refuse_busy(),
            Input::Revert(call) => call.refuse(),
            Input::Reached(reply) => {
                let _ = reply.send(());
            }
            Input::Queue(QueueRequest { op, reply }) => {
                let answer = self.queue.edit(op).map(|(answer, changed)| {
                    if changed {
                        let _ = self.events.send(Event::QueueChanged);
                    }
                    answer
                });
                let _ = reply.send(answer);
            }
            prompt @ Input::Prompt { .. } => self.held.push_back(prompt),
        }
    }

    /// Runs one turn to its end; the turn to start at once after it (a
    /// leftover steer's, the queue's head), the session still busy.
    async fn turn(&mut self, session: &mut Session, turn: NextTurn) -> Option<NextTurn> {
        let NextTurn {
            parts,
            turn,
            cancel,
            queued,
        } = turn;
        session.emit(Event::TurnStarted(turn));
        session.apply_changes();
        let stop = {
            let top = self.top;
            let run = async {
                if top {
                    crate::commands::run_prompt(session, parts, &cancel).await
                } else {
                    // A child's prompt is the model's task, never a command.
                    session.run_turn(parts, None, &cancel).await
                }
            };
            tokio::pin!(run);
            // The queue is edited, and the inbox read, while the turn runs.
            loop {
                tokio::select! {
                    stop = &mut run => break stop,
                    Some(input) = self.inbox.recv() => self.during_turn(input),
                    done = labelled(&mut self.labelling) => self.labelled = Some(done),
                }
            }
        };
        // What was written before the turn's end belongs to it (a steer
        // among it is taken below as a leftover).
        while let Ok(input) = self.inbox.try_recv() {
            self.during_turn(input);
        }
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
        self.queue.paused = stop == StopReason::Cancelled;
        // A steer the turn did not take starts the next one at once,
        // else the queue's head: the session stays running (a new turn
        // id handed over), so no prompt slips in between.
        let ctl = &self.ctl;
        let queue = &mut self.queue;
        let next = session
            .leftover_steers(stop)
            .map(|steer| {
                let (turn, cancel) = ctl.hand_over();
                NextTurn {
                    parts: steer.answer(SteerOutcome::StartedNewTurn { turn }),
                    turn,
                    cancel,
                    queued: None,
                }
            })
            .or_else(|| {
                let item = queue.next()?;
                Some(NextTurn::queued(item, ctl.hand_over()))
            });
        if next.is_none() {
            // Idle from here: what the client writes after the turn's
            // answer is taken as written (a rewind is done, not refused).
            self.ctl.end();
        }
        if let Some(usage) = session.take_turn_usage() {
            session.emit(Event::TurnUsage(usage));
        }
        session.emit(Event::TurnEnded(stop));
        // After the turn's end: its answer never waits for a title.
        if let Some(done) = self.labelled.take() {
            session.finish_title(done, &self.closing).await;
        }
        if self.labelling.is_none()
            && let Some(job) = session.title_job(stop)
        {
            self.labelling = Some(Labelling::start(job, &self.closing));
        }
        if let Some(NextTurn {
            queued: Some((turn_id, queued_id)),
            ..
        }) = &next
        {
            announce_queue_turn(session, turn_id, queued_id);
        }
        next
    }
}

/// A labelling call running on a task of its own.
struct Labelling {
    task: tokio::task::JoinHandle<TitleDone>,
    conversation: String,
}

impl Labelling {
    fn start(job: TitleJob, closing: &CancellationToken) -> Self {
        let conversation = job.conversation().to_owned();
        let cancel = closing.child_token();
        Labelling {
            task: tokio::spawn(job.run(cancel)),
            conversation,
        }
    }
}

/// The running labelling call's outcome, once it has one (the slot then
/// empty); never, when none runs.
async fn labelled(slot: &mut Option<Labelling>) -> TitleDone {
    let Some(labelling) = slot.as_mut() else {
        return std::future::pending().await;
    };
    let done = match (&mut labelling.task).await {
        Ok(done) => done,
        Err(_) => TitleDone::lost(labelling.conversation.clone()),
    };
    *slot = None;
    done
}

/// A turn to run: a prompt's, or one the session task starts itself.
struct NextTurn {
    parts: Vec<PromptPart>,
    turn: TurnId,
    cancel: CancellationToken,
    /// Taken from the queue: the turn's id and the queued prompt's.
    queued: Option<(String, String)>,
}

impl NextTurn {
    fn queued(item: Queued, (turn, cancel): (TurnId, CancellationToken)) -> Self {
        NextTurn {
            parts: crate::queue::parts(&item.input),
            turn,
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
    ctl: &StateCell,
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
    let Some(claimed) = ctl.claim() else {
        let _ = reply.send(Err(QueueError::Busy));
        return None;
    };
    let item = match queue.take(id.as_deref()) {
        Ok(item) => item,
        Err(e) => {
            ctl.end();
            let _ = reply.send(Err(e));
            return None;
        }
    };
    queue.paused = false;
    let next = NextTurn::queued(item, claimed);
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
fn idle_steer(session: &mut Session, steer: Steer, ctl: &StateCell) -> Option<NextTurn> {
    if ctl.state().running.is_none() && steer.prompt_required {
        steer.answer(SteerOutcome::PromptRequired);
        return None;
    }
    let Some((turn, cancel)) = ctl.claim() else {
        session.keep_steer(steer);
        return None;
    };
    Some(NextTurn {
        parts: steer.answer(SteerOutcome::StartedNewTurn { turn }),
        turn,
        cancel,
        queued: None,
    })
}
