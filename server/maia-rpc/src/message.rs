//! JSON-RPC 2.0 message shapes: ids, error objects, and the classification
//! of one incoming line.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A request id exactly as the peer sent it (number, string or `null`),
/// echoed back unchanged.
pub type Id = Value;

/// Standard and ACP-conventional error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    InternalError,
    /// `-32002`: an unknown session or resource.
    ResourceNotFound,
    /// `-32800`: the request was cancelled.
    RequestCancelled,
    /// `-32000`: ACP's `auth_required` (the client offers its login).
    AuthRequired,
}

impl ErrorCode {
    pub fn code(self) -> i64 {
        match self {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::InternalError => -32603,
            ErrorCode::ResourceNotFound => -32002,
            ErrorCode::RequestCancelled => -32800,
            ErrorCode::AuthRequired => -32000,
        }
    }
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("JSON-RPC error {code}: {message}")]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    /// Builds an error; the message is kept on one line.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        let message: String = message.into();
        RpcError {
            code: code.code(),
            message: message.replace(['\n', '\r'], " "),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
}

/// What one well-formed incoming line is.
#[derive(Debug, Clone, PartialEq)]
pub enum Classified {
    Request {
        id: Id,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    Response {
        id: Id,
        result: Result<Value, RpcError>,
    },
}

/// Classifies a line. `Err` carries the error to answer and the id to
/// answer it with (`null` when none could be read).
#[allow(clippy::result_large_err)] // called once per line; boxing buys nothing
pub fn classify(line: &[u8]) -> Result<Classified, (Id, RpcError)> {
    let value: Value = serde_json::from_slice(line).map_err(|e| {
        (
            Value::Null,
            RpcError::new(ErrorCode::ParseError, format!("Parse error: {e}")),
        )
    })?;
    classify_value(value)
}

/// Classifies one parsed message (a batch's entry, or a whole line).
#[allow(clippy::result_large_err)] // as `classify`
pub fn classify_value(value: Value) -> Result<Classified, (Id, RpcError)> {
    let obj = match value {
        Value::Object(obj) => obj,
        Value::Array(_) => {
            return Err((
                Value::Null,
                RpcError::new(
                    ErrorCode::InvalidRequest,
                    "JSON-RPC batches are not supported",
                ),
            ));
        }
        _ => {
            return Err((
                Value::Null,
                RpcError::new(ErrorCode::InvalidRequest, "a message must be a JSON object"),
            ));
        }
    };
    let id = obj.get("id").cloned();
    let id_ok = matches!(
        id,
        None | Some(Value::Null | Value::Number(_) | Value::String(_))
    );
    let echo_id = if id_ok {
        id.clone().unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    let invalid = |msg: &str| {
        (
            echo_id.clone(),
            RpcError::new(ErrorCode::InvalidRequest, msg),
        )
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid("\"jsonrpc\" must be \"2.0\""));
    }
    if !id_ok {
        return Err(invalid("\"id\" must be a number, a string or null"));
    }
    match obj.get("method") {
        Some(Value::String(method)) => {
            let params = obj.get("params").cloned().unwrap_or(Value::Null);
            if !matches!(params, Value::Null | Value::Object(_) | Value::Array(_)) {
                return Err(invalid("\"params\" must be an object or an array"));
            }
            let method = method.clone();
            Ok(match id {
                Some(id) => Classified::Request { id, method, params },
                None => Classified::Notification { method, params },
            })
        }
        Some(_) => Err(invalid("\"method\" must be a string")),
        None => {
            let Some(id) = id else {
                return Err(invalid("a message needs a \"method\" or an \"id\""));
            };
            if let Some(err) = obj.get("error") {
                let err = serde_json::from_value::<RpcError>(err.clone()).unwrap_or_else(|_| {
                    RpcError::new(ErrorCode::InternalError, format!("malformed error: {err}"))
                });
                Ok(Classified::Response {
                    id,
                    result: Err(err),
                })
            } else {
                let result = obj.get("result").cloned().unwrap_or(Value::Null);
                Ok(Classified::Response {
                    id,
                    result: Ok(result),
                })
            }
        }
    }
}

/// Best effort: the id of a line too long to parse, read from its prefix.
pub fn sniff_id(prefix: &[u8]) -> Id {
    let text = String::from_utf8_lossy(prefix);
    let Some(pos) = text.find("\"id\"") else {
        return Value::Null;
    };
    let rest = text[pos + 4..].trim_start();
    let Some(rest) = rest.strip_prefix(':') else {
        return Value::Null;
    };
    let rest = rest.trim_start();
    let end = rest
        .char_indices()
        .find(|(i, c)| {
            if rest.starts_with('"') {
                *i > 0 && *c == '"'
            } else {
                matches!(c, ',' | '}' | ' ')
            }
        })
        .map(|(i, c)| if c == '"' { i + 1 } else { i });
    let id = match end {
        Some(end) => serde_json::from_str(&rest[..end]).unwrap_or(Value::Null),
        None => Value::Null,
    };
    // A response id is null, a number or a string; anything else is null.
    match id {
        Value::Number(_) | Value::String(_) => id,
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classifies_requests_notifications_and_responses() {
        let r = classify(br#"{"jsonrpc":"2.0","id":7,"method":"m","params":{"a":1}}"#).unwrap();
        assert_eq!(
            r,
            Classified::Request {
                id: json!(7),
                method: "m".into(),
                params: json!({"a":1})
            }
        );
        let n = classify(br#"{"jsonrpc":"2.0","method":"n"}"#).unwrap();
        assert!(matches!(n, Classified::Notification { .. }));
        let ok = classify(br#"{"jsonrpc":"2.0","id":"x","result":null}"#).unwrap();
        assert_eq!(
            ok,
            Classified::Response {
                id: json!("x"),
                result: Ok(Value::Null)
            }
        );
        let err =
            classify(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"no"}}"#).unwrap();
        assert!(matches!(err, Classified::Response { result: Err(_), .. }));
    }

    #[test]
    fn rejects_bad_messages_with_the_right_codes() {
        assert_eq!(classify(b"{nope").unwrap_err().1.code, -32700);
        assert_eq!(classify(b"\xff\xfe").unwrap_err().1.code, -32700);
        assert_eq!(classify(b"[]").unwrap_err().1.code, -32600);
        assert_eq!(classify(b"3").unwrap_err().1.code, -32600);
        let (id, e) = classify(br#"{"jsonrpc":"1.0","id":4,"method":"m"}"#).unwrap_err();
        assert_eq!((id, e.code), (json!(4), -32600));
        let (id, _) = classify(br#"{"jsonrpc":"2.0","id":{"x":1},"method":"m"}"#).unwrap_err();
        assert_eq!(id, Value::Null);
    }

    #[test]
    fn sniffs_ids_from_prefixes() {
        assert_eq!(
            sniff_id(br#"{"jsonrpc":"2.0","id":12,"method":"x","params":"#),
            json!(12)
        );
        assert_eq!(sniff_id(br#"{"id": "ab", "params":"#), json!("ab"));
        assert_eq!(sniff_id(br#"{"params":{"#), Value::Null);
        // Found by fuzzing: a structured id is never echoed.
        assert_eq!(sniff_id(br#"{"id":[[1]],"params":"#), Value::Null);
        assert_eq!(sniff_id(br#"{"id":{"a":1},"params":"#), Value::Null);
        assert_eq!(sniff_id(br#"{"id":true,"params":"#), Value::Null);
    }

    #[test]
    fn error_messages_stay_on_one_line() {
        assert_eq!(
            RpcError::new(ErrorCode::InternalError, "a\nb").message,
            "a b"
        );
    }
}
