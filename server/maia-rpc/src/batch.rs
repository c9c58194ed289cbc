//! JSON-RPC batches (JSON-RPC 2.0 §6, as ACP v2's transports page adopts
//! it), for connections that allow them: ACP v1 defines none, so a
//! connection refuses an array with one `-32600` until
//! [`crate::Connection::allow_batches`] is called (once v2 is negotiated).
//!
//! A batch's requests run as any request does; their answers are held
//! here and written as one array once the last is given. An entry that is
//! not a valid message is answered in that array (`-32600`); notifications
//! and responses get no entry, so a batch without requests or invalid
//! entries is answered nothing, and an empty array is one `-32600` with
//! `id: null`, never an empty array.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use serde_json::Value;

/// The batches of one connection whose answers are not all given yet.
#[derive(Default)]
pub(crate) struct Batches {
    allowed: AtomicBool,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    next: u64,
    /// The batch each held request (by id key) belongs to.
    member: HashMap<String, u64>,
    open: HashMap<u64, Open>,
}

struct Open {
    /// Answers still to come.
    waiting: usize,
    answers: Vec<Value>,
}

/// Where an answer goes.
#[derive(Debug, PartialEq)]
pub(crate) enum Route {
    /// Not a batch's: written as it is.
    Alone(Value),
    /// Held for its batch.
    Held,
    /// The last of its batch: the whole batch's answer.
    Batch(Value),
}

impl Batches {
    pub(crate) fn allow(&self) {
        self.allowed.store(true, Ordering::Release);
    }

    pub(crate) fn allowed(&self) -> bool {
        self.allowed.load(Ordering::Acquire)
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        // Every change is a few inserts and removes: usable after a panic.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A batch whose requests have the id keys `requests` (distinct) and
    /// whose invalid entries were answered `answered`: what to write now
    /// (the whole answer when no request waits; nothing for a batch of
    /// notifications and responses only).
    pub(crate) fn open(&self, requests: &[String], answered: Vec<Value>) -> Option<Value> {
        if requests.is_empty() {
            return (!answered.is_empty()).then_some(Value::Array(answered));
        }
        let mut table = self.table();
        let number = table.next;
        table.next += 1;
        for key in requests {
            table.member.insert(key.clone(), number);
        }
        table.open.insert(
            number,
            Open {
                waiting: requests.len(),
                answers: answered,
            },
        );
        None
    }

    /// The answer `message` to the request with id key `key`.
    pub(crate) fn route(&self, key: &str, message: Value) -> Route {
        let mut table = self.table();
        let Some(number) = table.member.remove(key) else {
            return Route::Alone(message);
        };
        let Some(open) = table.open.get_mut(&number) else {
            return Route::Alone(message);
        };
        open.answers.push(message);
        open.waiting = open.waiting.saturating_sub(1);
        if open.waiting > 0 {
            return Route::Held;
        }
        match table.open.remove(&number) {
            Some(open) => Route::Batch(Value::Array(open.answers)),
            None => Route::Held,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_are_held_until_the_last_then_written_as_one_array() {
        let batches = Batches::default();
        let invalid =
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "x"}});
        assert_eq!(
            batches.open(&["1".into(), "\"a\"".into()], vec![invalid.clone()]),
            None
        );
        assert_eq!(batches.route("\"a\"", json!({"id": "a"})), Route::Held);
        assert_eq!(
            batches.route("7", json!({"id": 7})),
            Route::Alone(json!({"id": 7}))
        );
        assert_eq!(
            batches.route("1", json!({"id": 1})),
            Route::Batch(json!([invalid, {"id": "a"}, {"id": 1}]))
        );
        // Forgotten once answered: a later request with the same id is alone.
        assert_eq!(
            batches.route("1", json!({"id": 1})),
            Route::Alone(json!({"id": 1}))
        );
    }

    #[test]
    fn a_batch_without_requests_is_answered_at_once_or_not_at_all() {
        let batches = Batches::default();
        assert_eq!(batches.open(&[], Vec::new()), None);
        let invalid = json!({"id": null});
        assert_eq!(
            batches.open(&[], vec![invalid.clone()]),
            Some(json!([invalid]))
        );
    }
}
