//! The calls of a session running now, each with its own cancellation
//! token, so that one call can be cancelled alone (ACP v2's
//! `tool_call/cancel` and `terminal/cancel`): the call ends "cancelled by
//! the user" and the turn goes on, as a `Task` call's child does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

/// Shared by the session's batches (which register their calls) and its
/// handles (which cancel them).
#[derive(Clone, Default)]
pub struct RunningCalls(Arc<Mutex<HashMap<String, CancellationToken>>>);

impl RunningCalls {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        // One insert or remove at a time: usable after a panic.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Call `id` runs with `token` until the guard is dropped.
    pub(crate) fn register(&self, id: &str, token: CancellationToken) -> Registered {
        self.table().insert(id.to_owned(), token);
        Registered {
            calls: self.clone(),
            id: id.to_owned(),
        }
    }

    /// Cancels call `id` alone; `false` when no such call runs.
    pub fn cancel(&self, id: &str) -> bool {
        match self.table().get(id) {
            Some(token) if !token.is_cancelled() => {
                token.cancel();
                true
            }
            _ => false,
        }
    }
}

/// A running call's place in [`RunningCalls`], removed when dropped.
pub(crate) struct Registered {
    calls: RunningCalls,
    id: String,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.calls.table().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_cancellable_while_registered_and_once() {
        let calls = RunningCalls::default();
        let token = CancellationToken::new();
        let guard = calls.register("c1", token.clone());
        assert!(!calls.cancel("other"));
        assert!(calls.cancel("c1"));
        assert!(token.is_cancelled());
        assert!(!calls.cancel("c1"), "cancelled already");
        drop(guard);
        assert!(!calls.cancel("c1"));
    }
}
