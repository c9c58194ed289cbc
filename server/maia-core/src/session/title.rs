//! The thread's title written by a model. After a turn the session says
//! whether a labelling call is due ([`Session::title_job`]: the first
//! answer's, retried once at the next turn, only while the title is still
//! the first prompt's text); the session task runs the call beside the
//! session, so no turn waits for it, and hands its outcome back
//! ([`Session::finish_title`]), which charges it like any model response
//! and keeps the title unless the user named the thread meanwhile.

use maia_llm::{ChatMessage, ChatRequest, Completion, LlmClient, LlmError};
use tokio_util::sync::CancellationToken;

use crate::conversation::Conversation;
use crate::event::{Event, StopReason};
use crate::session::Session;
use crate::store::TitleSource;

/// Labelling calls per conversation: the first answer's and one retry.
const TRIES: u8 = 2;

/// A labelling call to make: the request and the client to send it with.
pub(crate) struct TitleJob {
    llm: LlmClient,
    request: ChatRequest,
    /// The conversation's journal name when it started: a result for
    /// another conversation (after `/new`, a compaction) is dropped.
    conversation: String,
}

/// What a labelling call came back with.
pub(crate) struct TitleDone {
    model: String,
    conversation: String,
    result: Result<Completion, LlmError>,
}

impl TitleJob {
    /// The conversation it labels (its journal name).
    pub(crate) fn conversation(&self) -> &str {
        &self.conversation
    }

    /// The request's size in bytes, as sent.
    pub(crate) fn bytes(&self) -> usize {
        self.request.body().to_string().len()
    }

    /// Sends the request; cancelled with `cancel` (the session closing).
    pub(crate) async fn run(self, cancel: CancellationToken) -> TitleDone {
        let result = self
            .llm
            .stream_chat(&self.request, &cancel, &mut |_| {})
            .await;
        TitleDone {
            model: self.request.model,
            conversation: self.conversation,
            result,
        }
    }
}

impl TitleDone {
    /// A call whose task ended without an answer.
    pub(crate) fn lost(conversation: String) -> Self {
        TitleDone {
            model: String::new(),
            conversation,
            result: Err(LlmError::Cancelled),
        }
    }
}

/// Whether a title may still be replaced by a label.
fn provisional(conversation: &Conversation) -> bool {
    conversation.title().is_none() || conversation.title_source() == TitleSource::Prompt
}

/// The first prompt (as the user wrote it) and the text of the answers
/// after it, as long as the request takes.
fn first_exchange(conversation: &Conversation) -> Option<(String, String)> {
    let history = conversation.history();
    let start = history
        .iter()
        .position(|m| matches!(m, ChatMessage::User { .. }))?;
    let prompt = match (conversation.user_messages().first(), &history[start]) {
        (Some(shown), _) => shown.text.clone(),
        (None, ChatMessage::User { content, .. }) => content.clone(),
        (None, _) => return None,
    };
    let mut answer = String::new();
    for message in &history[start + 1..] {
        if let ChatMessage::Assistant {
            content: Some(text),
            ..
        } = message
            && !text.trim().is_empty()
        {
            if !answer.is_empty() {
                answer.push('\n');
            }
            answer.push_str(text.trim());
            if answer.len() > crate::title::ANSWER_BYTES {
                break;
            }
        }
    }
    (!prompt.trim().is_empty() && !answer.is_empty()).then_some((prompt, answer))
}

impl Session {
    /// The labelling call due after a turn that ended `stop`, if any
    /// (counted as tried): a top session's thread whose title is still the
    /// first prompt's, tried fewer than [`TRIES`] times, with an answer to
    /// label, titles on for the model (`titles`), the session's spending
    /// limit not reached. The model is `smallModel`, else the session's.
    pub(crate) fn title_job(&mut self, stop: StopReason) -> Option<TitleJob> {
        if self.role.is_some()
            || stop != StopReason::EndTurn
            || !provisional(&self.conversation)
            || self.conversation.title_tries() >= TRIES
        {
            return None;
        }
        let settings = &self.project.settings;
        let model = settings
            .small_model
            .clone()
            .or_else(|| self.model.clone())?;
        if crate::settings::model_flag(&settings.titles, &model) == Some(false) {
            return None;
        }
        let llm = self.project.llm.as_ref().ok()?.clone();
        if self.budget.lock().is_ok_and(|spend| spend.spent_out()) {
            tracing::debug!("no title: the session's spending limit is reached");
            return None;
        }
        let (prompt, answer) = first_exchange(&self.conversation)?;
        let tried = self.conversation.title_try();
        let job = TitleJob {
            llm,
            request: crate::title::request(&model, &prompt, &answer),
            conversation: self.conversation.name().to_owned(),
        };
        tracing::debug!(model, tried, bytes = job.bytes(), "title request");
        Some(job)
    }

    /// Takes a labelling call's outcome: its cost charged to the thread
    /// (whatever the reply), the reply kept as the title when it is
    /// title-shaped ([`crate::title::accept`]) and the thread's title is
    /// still the first prompt's (a `/rename` or `session/set_title` made
    /// meanwhile wins); saved at the head of the journal and told as
    /// [`Event::Title`]. A failure is logged, never shown: the next turn
    /// may try again.
    pub(crate) async fn finish_title(&mut self, done: TitleDone, cancel: &CancellationToken) {
        let completion = match done.result {
            Ok(completion) => completion,
            Err(LlmError::Cancelled) => return,
            Err(e) => {
                tracing::warn!(model = %done.model, "the title request failed: {e}");
                return;
            }
        };
        self.charge(
            &done.model,
            completion.usage.as_ref(),
            completion.response_cost,
            cancel,
        )
        .await;
        if let Some(size) = self.meter.window() {
            self.emit_usage(self.context_tokens(), size);
        }
        let title = match crate::title::accept(&completion.text) {
            Ok(title) => title,
            Err(why) => {
                tracing::info!(model = %done.model, why = why.name(), "title reply refused");
                return;
            }
        };
        if done.conversation != self.conversation.name() || !provisional(&self.conversation) {
            tracing::debug!("the thread was named or replaced meanwhile: label dropped");
            return;
        }
        match crate::blocking::off_runtime(|| self.conversation.set_label(&title)) {
            Ok(()) => self.emit(Event::Title(title)),
            Err(e) => tracing::warn!("cannot save the title: {e}"),
        }
    }
}
