//! A session's state as its readers see it ([`SessionState`]: the model,
//! the mode, the running turn) in one cell ([`StateCell`]), the one owner
//! of "a turn is running". A turn is claimed and ended only by
//! [`StateCell::claim`] and [`StateCell::end`], each one atomic step on
//! the cell, so a prompt is accepted or refused in one place whoever
//! starts the turn (the handle for a prompt, the session task for a steer
//! or the queue's head). The model and the mode are written by the
//! session when it changes them itself (an approved plan, `/model`,
//! settings) and by the handle as it hands a change to the session's
//! inbox; front doors only read (`SessionHandle::state`, [`StateReader`])
//! and keep no copies. A leaf: the handle, the session and the events
//! use it; it uses only the mode.

use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::mode::Mode;

/// One turn of a session, numbered from 1 in the order they were claimed.
/// A front door keys what it must answer when the turn ends by it
/// ([`crate::Event::TurnStarted`] tells which turn the events that follow
/// belong to).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TurnId(pub u64);

/// What a session uses and does, as its readers see it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionState {
    /// The model in use (`None` until chosen).
    pub model: Option<String>,
    pub mode: Mode,
    /// The running turn, if any.
    pub running: Option<TurnId>,
}

/// The cell's value: the state and the running turn's cancellation token.
#[derive(Debug, Default)]
struct Inner {
    state: SessionState,
    cancel: Option<CancellationToken>,
    /// The last turn id given out.
    last: u64,
}

/// The session's state cell, shared by the handle, the session task and
/// the session. Readers follow it through [`StateReader`].
#[derive(Debug, Clone)]
pub(crate) struct StateCell(Arc<watch::Sender<Inner>>);

impl StateCell {
    pub(crate) fn new(model: Option<String>) -> Self {
        let (sender, _) = watch::channel(Inner {
            state: SessionState {
                model,
                ..SessionState::default()
            },
            ..Inner::default()
        });
        StateCell(Arc::new(sender))
    }

    /// Marks a turn running, when none is: its id and its cancellation
    /// token; `None` while another runs. The one place that decides it.
    pub(crate) fn claim(&self) -> Option<(TurnId, CancellationToken)> {
        let mut claimed = None;
        self.0.send_if_modified(|inner| {
            if inner.state.running.is_some() {
                return false;
            }
            inner.last += 1;
            let (id, cancel) = (TurnId(inner.last), CancellationToken::new());
            inner.state.running = Some(id);
            inner.cancel = Some(cancel.clone());
            claimed = Some((id, cancel));
            true
        });
        claimed
    }

    /// Hands the running turn over to the next one the session starts at
    /// once (a leftover steer's, the queue's head): the session stays
    /// running, so no prompt is accepted in between.
    pub(crate) fn hand_over(&self) -> (TurnId, CancellationToken) {
        let (mut id, cancel) = (TurnId(0), CancellationToken::new());
        self.0.send_modify(|inner| {
            inner.last += 1;
            id = TurnId(inner.last);
            inner.state.running = Some(id);
            inner.cancel = Some(cancel.clone());
        });
        (id, cancel)
    }

    /// Marks the session idle.
    pub(crate) fn end(&self) {
        self.0.send_if_modified(|inner| {
            inner.cancel = None;
            inner.state.running.take().is_some()
        });
    }

    /// Cancels the running turn, if any.
    pub(crate) fn cancel(&self) {
        if let Some(cancel) = &self.0.borrow().cancel {
            cancel.cancel();
        }
    }

    pub(crate) fn state(&self) -> SessionState {
        self.0.borrow().state.clone()
    }

    pub(crate) fn set_mode(&self, mode: Mode) {
        self.0
            .send_if_modified(|inner| std::mem::replace(&mut inner.state.mode, mode) != mode);
    }

    pub(crate) fn set_model(&self, model: Option<String>) {
        self.0.send_if_modified(|inner| {
            let changed = inner.state.model != model;
            inner.state.model = model;
            changed
        });
    }

    /// Sets the model when none is chosen yet.
    pub(crate) fn default_model(&self, model: Option<String>) {
        self.0.send_if_modified(|inner| {
            if inner.state.model.is_some() || model.is_none() {
                return false;
            }
            inner.state.model = model;
            true
        });
    }

    pub(crate) fn reader(&self) -> StateReader {
        StateReader(self.0.subscribe())
    }
}

/// Follows a session's state without keeping the session alive.
#[derive(Debug, Clone)]
pub struct StateReader(watch::Receiver<Inner>);

impl StateReader {
    /// The state now.
    pub fn get(&self) -> SessionState {
        self.0.borrow().state.clone()
    }

    /// Resolves once the state changed since it was last seen; `false`
    /// once the session has ended.
    pub async fn changed(&mut self) -> bool {
        self.0.changed().await.is_ok()
    }
}
