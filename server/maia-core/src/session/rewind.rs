//! Rewinding a live session: the thread truncated before one of its user
//! messages ([`crate::timeline`]), with the files restored when asked, and
//! what the session derived from the dropped part forgotten (the context
//! measurement, the files read, the task list).

use std::sync::Arc;

use tokio::sync::oneshot;

use super::Session;
use crate::event::Event;
use crate::timeline::{MessagePoint, RewindDone, RewindError, Rewound};

/// A rewind on its way to the session (from its handle).
pub(crate) struct Request {
    pub(crate) point: MessagePoint,
    /// Restore the files too, as a revert from the message would.
    pub(crate) restore_files: bool,
    pub(crate) reply: oneshot::Sender<Result<RewindDone, RewindError>>,
}

impl Request {
    /// Answers a rewind that arrived while a turn runs: refused, nothing
    /// changed.
    pub(crate) fn refuse_busy(self) {
        let _ = self.reply.send(Err(RewindError::Busy));
    }
}

impl Session {
    /// Does a rewind asked for between turns, as one operation, and
    /// answers it: the files' preview first (a revert that cannot be done
    /// changes nothing), then the rewind, then the files restored as
    /// `_session/files/revert {beforeMessage, force: false}` would.
    pub(crate) async fn rewind_request(&mut self, request: Request) {
        let Request {
            point,
            restore_files,
            reply,
        } = request;
        let preview = match restore_files {
            true => match self.preview_restore(&point.message_id).await {
                Ok(preview) => preview,
                Err(e) => {
                    let _ = reply.send(Err(RewindError::Files(e)));
                    return;
                }
            },
            false => None,
        };
        let done = match self.rewind(&point) {
            Ok(rewound) => rewound,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        if crate::fault_point!("rewind.recorded").is_err() {
            let _ = reply.send(Ok(RewindDone {
                rewound: done,
                files: None,
            }));
            return;
        }
        let files = match preview {
            Some(preview) => Some(self.restore(preview).await),
            None => None,
        };
        let _ = reply.send(Ok(RewindDone {
            rewound: done,
            files,
        }));
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
