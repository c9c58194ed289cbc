//! The handle's file operations: reverting the file changes a session
//! made ([`crate::checkpoint`]), handed to the idle session task.

use crate::checkpoint::{RevertError, RevertReport, RevertRequest};
use crate::session::Change;
use crate::session::files::RevertCall;

use super::SessionHandle;

impl SessionHandle {
    /// Reverts file changes the session made ([`crate::checkpoint`]): a
    /// preview (`dry_run`) with its token, or the revert itself. Refused
    /// while a turn runs ([`RevertError::TurnRunning`]), nothing changed.
    pub fn revert_files(
        &self,
        request: RevertRequest,
    ) -> impl std::future::Future<Output = Result<RevertReport, RevertError>> + Send + use<> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let call = RevertCall { request, reply };
        let sent = !self.is_busy() && self.changes.send(Change::Revert(call)).is_ok();
        let busy = self.is_busy();
        async move {
            if !sent {
                return Err(if busy {
                    RevertError::TurnRunning
                } else {
                    RevertError::Off("the session has ended".into())
                });
            }
            answer.await.unwrap_or(Err(RevertError::TurnRunning))
        }
    }
}
