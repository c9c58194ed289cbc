//! What the hub answers itself: a JSON-RPC error, and a request it
//! refuses before the agent sees it.

use serde_json::{Value, json};

pub(super) fn error(id: &Value, code: i64, message: &str, data: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message, "data": data}})
}

/// A request refused by the hub itself.
pub(super) struct Refusal {
    code: i64,
    message: String,
    data: Value,
}

impl Refusal {
    pub(super) fn new(code: i64, message: &str) -> Self {
        Refusal {
            code,
            message: message.to_owned(),
            data: Value::Null,
        }
    }

    pub(super) fn data(mut self, data: Value) -> Self {
        self.data = data;
        self
    }

    pub(super) fn into_message(self, id: &Value) -> Value {
        error(id, self.code, &self.message, self.data)
    }
}
