//! Child processes run in their own process group, killed as a whole.

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Kills a child's process group when dropped (also when the future that
/// owns it is dropped half-way), so no grandchild outlives a call.
#[derive(Debug)]
pub struct GroupGuard(Option<Pid>);

impl GroupGuard {
    /// Guards the group led by the child `pid` (started with
    /// `process_group(0)`); `None` guards nothing.
    pub fn new(pid: Option<u32>) -> Self {
        GroupGuard(pid.and_then(|id| i32::try_from(id).ok()).map(Pid::from_raw))
    }

    /// The group's id, for logs.
    pub fn pid(&self) -> Option<i32> {
        self.0.map(Pid::as_raw)
    }

    /// Sends SIGKILL to the whole group now.
    pub fn kill(&self) {
        if let Some(pgid) = self.0 {
            // ESRCH (group already gone) is expected and harmless.
            if let Err(err) = killpg(pgid, Signal::SIGKILL) {
                tracing::trace!(%err, "killpg");
            }
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}
