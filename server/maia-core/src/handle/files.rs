//! The handle's file operations: reverting the file changes a session
//! made ([`crate::checkpoint`]), handed to the session task in order with
//! the other requests.

use crate::checkpoint::{RevertError, RevertReport, RevertRequest};
use crate::session::files::RevertCall;

use super::{Input, SessionHandle};

impl SessionHandle {
    /// Reverts file changes the session made ([`crate::checkpoint`]): a
    /// preview (`dry_run`) with its token, or the revert itself. Handed to
    /// the session task now: done between turns before a prompt sent after
    /// it; refused while a turn runs ([`RevertError::TurnRunning`]),
    /// nothing changed.
    pub fn revert_files(
        &self,
        request: RevertRequest,
    ) -> impl std::future::Future<Output = Result<RevertReport, RevertError>> + Send + use<> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let call = RevertCall { request, reply };
        let sent = self.inbox.send(Input::Revert(call)).is_ok();
        async move {
            let ended = || Err(RevertError::Off("the session has ended".into()));
            if !sent {
                return ended();
            }
            answer.await.unwrap_or_else(|_| ended())
        }
    }
}
