//! JSON-RPC batches (JSON-RPC 2.0 §6, as ACP v2's transports page adopts
//! it), for connections that allow them: ACP v1 defines none, so a
//! connection refuses an array with one `-32600` until
//! [`crate::Connection::allow_batches`] is called (once v2 is negotiated).
//! Other transports (the daemon's WebSocket and Streamable HTTP) hold their
//! answers here too: [`sort`] splits a batch, [`Batches`] assembles its
//! answer.
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

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::message::{Classified, ErrorCode, RpcError, classify_value};

/// The batches of one connection whose answers are not all given yet.
#[derive(Default)]
pub struct Batches {
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
pub enum Route {
    /// Not a batch's: written as it is.
    Alone(Value),
    /// Held for its batch.
    Held,
    /// The last of its batch: the whole batch's answer.
    Batch(Value),
}

impl Batches {
    pub fn allow(&self) {
        self.allowed.store(true, Ordering::Release);
    }

    pub fn allowed(&self) -> bool {
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
    pub fn open(&self, requests: &[String], answered: Vec<Value>) -> Option<Value> {
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

    /// Whether some batch waits for answers (an answer needs routing).
    pub fn holding(&self) -> bool {
        !self.table().member.is_empty()
    }

    /// The answer `message` to the request with id key `key` ([`key`]).
    pub fn route(&self, key: &str, message: Value) -> Route {
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

/// The key of a request id in [`Batches`] (its JSON text).
pub fn key(id: &Value) -> String {
    id.to_string()
}

/// A batch's entries sorted: what to run, what is answered already.
#[derive(Debug, Default)]
pub struct Sorted {
    /// The keys of its requests ([`key`]), distinct, for [`Batches::open`].
    pub requests: Vec<String>,
    /// The answers to its invalid entries (`-32600`, `id: null`; an id
    /// used twice in the batch is one).
    pub answered: Vec<Value>,
    /// Its valid entries (requests, notifications, responses), in order,
    /// each classified and as sent.
    pub valid: Vec<(Classified, Value)>,
}

/// Sorts a batch's entries; `Err` with the one answer of an empty batch.
pub fn sort(entries: Vec<Value>) -> Result<Sorted, Value> {
    let invalid = |error: RpcError| json!({"jsonrpc": "2.0", "id": null, "error": error});
    if entries.is_empty() {
        return Err(invalid(RpcError::new(
            ErrorCode::InvalidRequest,
            "an empty batch",
        )));
    }
    let mut sorted = Sorted::default();
    let mut keys = HashSet::new();
    for entry in entries {
        match classify_value(entry.clone()) {
            Ok(Classified::Request { id, .. }) if !keys.insert(key(&id)) => {
                sorted.answered.push(invalid(RpcError::new(
                    ErrorCode::InvalidRequest,
                    "an id used twice in one batch",
                )));
            }
            Ok(classified) => {
                if let Classified::Request { id, .. } = &classified {
                    sorted.requests.push(key(id));
                }
                sorted.valid.push((classified, entry));
            }
            Err((_, error)) => sorted.answered.push(invalid(error)),
        }
    }
    Ok(sorted)
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
