//! Steering: a message the user adds to a running turn without cancelling
//! it. The handle sends it as a [`Change`](super::Change); the session keeps
//! it in its [`TurnState`](super::TurnState) and the turn takes it at its
//! tool-round boundary — after every call of the batch has its result,
//! before the next model request — as a user message, journaled as a steer.
//! A steer the turn could not take (it ended with a final answer, a
//! failure, or a question shown as text) starts a new turn right after it,
//! unless the client asked for `prompt required`; a cancelled turn fails
//! its steers. A steer sent while a permission question is open waits for
//! the answer: the batch is not over before.

use maia_llm::ChatMessage;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::event::{Event, StopReason};
use crate::prompt::{PromptPart, build_user_message};
use crate::session::Session;
use crate::session::text::display_text;
use crate::store::Record;

/// What became of a steer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SteerOutcome {
    /// The running turn took it: the model's next request holds it, as
    /// the user message `message_id` (its [`Event::SteerTaken`]).
    Injected { message_id: String },
    /// No turn could take it, so it started `turn`, whose prompt it is.
    StartedNewTurn { turn: crate::TurnId },
    /// No turn was running and the client asked not to start one: the
    /// message was not used; send it as a prompt.
    PromptRequired,
    /// It was not used, for this reason.
    Failed(String),
}

/// A steer on its way to the session.
pub(crate) struct Steer {
    pub(crate) parts: Vec<PromptPart>,
    /// When no turn can take it: answer [`SteerOutcome::PromptRequired`]
    /// instead of starting a turn.
    pub(crate) prompt_required: bool,
    pub(crate) reply: oneshot::Sender<SteerOutcome>,
}

impl Steer {
    pub(crate) fn answer(self, outcome: SteerOutcome) -> Vec<PromptPart> {
        // The asker may have gone (its request cancelled): nothing to tell.
        let _ = self.reply.send(outcome);
        self.parts
    }
}

impl Session {
    /// Keeps a steer for the running (or the next) turn.
    pub(crate) fn keep_steer(&mut self, steer: Steer) {
        self.turn.steers.push(steer);
    }

    /// The tool-round boundary: takes the steers sent so far into the
    /// history, in arrival order, each as a user message journaled as a
    /// steer. Returns how many it took.
    pub(crate) async fn inject_steers(&mut self, cancel: &CancellationToken) -> usize {
        self.apply_changes();
        // Background tasks that ended come first, on the same path.
        if let Some(notes) = self.task_notes() {
            self.push_message(ChatMessage::user(notes));
        }
        let steers = std::mem::take(&mut self.turn.steers);
        let taken = steers.len();
        for steer in steers {
            let message = build_user_message(&steer.parts, self.services.fs.as_ref()).await;
            for (path, text) in &message.seen {
                self.tools.reads.record(path, text);
            }
            let message_id = super::text::new_message_id();
            let display = display_text(&steer.parts);
            self.record(&Record::UserDisplay {
                id: message_id.clone(),
                text: display.clone(),
                steer: true,
            });
            self.emit(Event::SteerTaken {
                message_id: message_id.clone(),
                text: display,
            });
            let mut text = message.text;
            let shown = self.attach_images(&mut text, message.images, cancel).await;
            self.push_message(ChatMessage::user(text.clone()));
            if !shown.is_empty() {
                self.turn
                    .images
                    .push((crate::images::Anchor::User(text), shown));
            }
            tracing::info!(session = %self.id, "steer injected");
            steer.answer(SteerOutcome::Injected { message_id });
        }
        taken
    }

    /// Journals the final state of the calls of background tasks that ended.
    pub(crate) fn record_task_ends(&mut self) {
        for call in self.tools.tasks.take_views() {
            self.record(&Record::tool_call(&call));
        }
    }

    /// The notes on background tasks that ended, for the model (their
    /// calls' final state journaled first).
    pub(crate) fn task_notes(&mut self) -> Option<String> {
        self.record_task_ends();
        let notes = self.tools.tasks.take_notes();
        (!notes.is_empty()).then(|| notes.join("\n"))
    }

    /// After a turn ended with `stop`: the steers it did not take. A
    /// cancelled turn fails them; one that wants a prompt is told so; the
    /// first of the others is returned, to start the next turn (the caller
    /// answers it with that turn; the rest wait for its boundary).
    pub(crate) fn leftover_steers(&mut self, stop: StopReason) -> Option<Steer> {
        self.apply_changes();
        let steers = std::mem::take(&mut self.turn.steers);
        let mut next = None;
        for steer in steers {
            if stop == StopReason::Cancelled {
                steer.answer(SteerOutcome::Failed(
                    "the turn was cancelled before it could take the message".into(),
                ));
            } else if steer.prompt_required {
                steer.answer(SteerOutcome::PromptRequired);
            } else if next.is_none() {
                next = Some(steer);
            } else {
                self.turn.steers.push(steer);
            }
        }
        next
    }
}
