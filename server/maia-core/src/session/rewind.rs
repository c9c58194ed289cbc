//! Rewinding a live session: the thread truncated before one of its user
//! messages ([`crate::timeline`]), and what the session derived from the
//! dropped part forgotten (the context measurement, the files read, the
//! task list).

use std::sync::Arc;

use tokio::sync::oneshot;

use super::Session;
use crate::event::Event;
use crate::timeline::{MessagePoint, RewindError, Rewound};

/// A rewind on its way to the session (from its handle).
pub(crate) struct Request {
    pub(crate) point: MessagePoint,
    pub(crate) reply: oneshot::Sender<Result<Rewound, RewindError>>,
}

impl Request {
    /// Answers a rewind that arrived while a turn runs: refused, nothing
    /// changed.
    pub(crate) fn refuse_busy(self) {
        let _ = self.reply.send(Err(RewindError::Busy));
    }
}

impl Session {
    /// Does a rewind asked for between turns and answers it.
    pub(crate) fn rewind_request(&mut self, request: Request) {
        let done = self.rewind(&request.point);
        let _ = request.reply.send(done);
    }

    /// Truncates the thread before the user message `point` names (as a
    /// reload of its journal would show it); a refusal changes nothing.
    pub(crate) fn rewind(&mut self, point: &MessagePoint) -> Result<Rewound, RewindError> {
        let done = crate::blocking::off_runtime(|| self.conversation.rewind(point))?;
        self.meter.forget();
        self.tools.reads = Arc::new(maia_tools::ReadTracker::default());
        if let Ok(mut todos) = self.tools.todos.lock() {
            todos.clone_from(&done.todos);
        }
        self.emit(Event::Plan(done.todos.clone()));
        Ok(done)
    }
}
