//! Typed errors and their classification from HTTP statuses, error bodies and headers.
//!
//! LiteLLM answers errors with `{"error":{"message":..,"type":..,"code":"429"}}` (`code` may be a
//! string or an integer); the message is taken from there, else from the raw body, truncated.
//!
//! A request that got no HTTP answer is [`LlmError::Connection`] with a [`ConnectFailure`] saying
//! why, read from reqwest's error and the types in its `source()` chain ([`connect_failure`]), so
//! that callers branch on the kind, never on the message.

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::Value;

/// The longest `Retry-After` wait honoured.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Raw bodies longer than this (in characters) are truncated in messages.
const MAX_BODY_CHARS: usize = 500;

/// Everything that can go wrong talking to the server. `Display` is one line.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LlmError {
    #[error("rate limited{}: {message}", retry_after_suffix(.retry_after))]
    RateLimited {
        retry_after: Option<Duration>,
        message: String,
    },
    #[error("context window exceeded: {message}")]
    ContextWindowExceeded { message: String },
    #[error("authentication failed (HTTP {status}): {message}")]
    Authentication { status: u16, message: String },
    #[error("bad request (HTTP {status}): {message}")]
    BadRequest { status: u16, message: String },
    #[error("server error (HTTP {status}): {message}")]
    Server { status: u16, message: String },
    #[error("stream interrupted: {message}")]
    StreamInterrupted { message: String },
    #[error("connection failed: {message}")]
    Connection {
        kind: ConnectFailure,
        message: String,
    },
    #[error("invalid response: {message}")]
    InvalidResponse { message: String },
    #[error("cancelled")]
    Cancelled,
}

/// Why a request got no HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectFailure {
    /// The URL cannot be used (unparsable, no host, unsupported scheme); `reason` says why,
    /// without the URL.
    BadUrl { reason: String },
    /// Nothing listens at the address: the TCP connection was refused.
    Refused,
    /// The host name could not be resolved.
    Dns,
    /// No answer in time, while connecting or waiting for the response.
    Timeout,
    /// The TLS handshake failed: a plain-HTTP server, an untrusted or wrong certificate.
    Tls,
    /// Anything else: a reset connection, a failing HTTP proxy, the client's own setup.
    Other,
}

fn retry_after_suffix(retry_after: &Option<Duration>) -> String {
    match retry_after {
        Some(d) => format!(" (retry after {:.1} s)", d.as_secs_f64()),
        None => String::new(),
    }
}

impl LlmError {
    /// Whether trying the same request again may succeed: rate limits, 5xx, connection failures
    /// (but not an unusable URL).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Connection { kind, .. } => !matches!(kind, ConnectFailure::BadUrl { .. }),
            Self::RateLimited { .. } | Self::Server { .. } => true,
            _ => false,
        }
    }

    /// Why the request got no answer, for a [`LlmError::Connection`].
    pub fn connect_failure(&self) -> Option<&ConnectFailure> {
        match self {
            Self::Connection { kind, .. } => Some(kind),
            _ => None,
        }
    }

    /// Classifies a non-success HTTP answer.
    pub fn from_http(status: u16, headers: &HeaderMap, body: &str) -> Self {
        let info = ErrorInfo::parse(body);
        let message = info.message.clone();
        match status {
            401 | 403 => Self::Authentication { status, message },
            429 => Self::RateLimited {
                retry_after: retry_after(headers),
                message,
            },
            400..=499 if info.is_context_exceeded() => Self::ContextWindowExceeded { message },
            400..=499 => Self::BadRequest { status, message },
            500..=599 => Self::Server { status, message },
            _ => Self::InvalidResponse {
                message: format!("unexpected HTTP {status}: {message}"),
            },
        }
    }

    /// Converts a transport error from reqwest; `context` says what was being done.
    pub(crate) fn from_reqwest(err: &reqwest::Error, context: &str) -> Self {
        let message = crate::config::redact_userinfo(&format!("{context}: {}", error_chain(err)));
        if err.is_decode() || err.is_body() {
            Self::StreamInterrupted { message }
        } else {
            Self::Connection {
                kind: connect_failure(err),
                message,
            }
        }
    }
}

/// Why reqwest got no answer, from its own flags and the error types in its `source()` chain:
/// `io::ErrorKind::ConnectionRefused` / `TimedOut`, a `rustls::Error` (the chain goes into the
/// error an `io::Error` wraps, which its `source()` skips).
///
/// A failed name lookup is the one case without a type to look for: hyper-util reports it as its
/// private `ConnectError`, whose text is the fixed `"dns error"` (around the resolver's
/// `io::Error`, whose kind is uncategorised), so that text is compared here and nowhere else.
/// A TLS handshake cut short by the server (an `https://` URL, the connection closed during
/// connect) counts as TLS.
pub(crate) fn connect_failure(err: &reqwest::Error) -> ConnectFailure {
    use std::error::Error;
    use std::io;
    if err.is_builder() {
        return ConnectFailure::BadUrl {
            reason: crate::config::redact_userinfo(&error_chain(err)),
        };
    }
    if err.is_timeout() {
        return ConnectFailure::Timeout;
    }
    let https = err.url().is_some_and(|url| url.scheme() == "https");
    let mut cut_short = false;
    let mut source: Option<&(dyn Error + 'static)> = Some(err);
    while let Some(current) = source {
        if current.downcast_ref::<rustls::Error>().is_some() {
            return ConnectFailure::Tls;
        }
        if current.to_string() == "dns error" {
            return ConnectFailure::Dns;
        }
        source = match current.downcast_ref::<io::Error>() {
            Some(io_err) => {
                match io_err.kind() {
                    io::ErrorKind::ConnectionRefused => return ConnectFailure::Refused,
                    io::ErrorKind::TimedOut => return ConnectFailure::Timeout,
                    io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => {
                        cut_short = true;
                    }
                    _ => {}
                }
                // `io::Error::source()` skips the error it wraps: go into it.
                io_err
                    .get_ref()
                    .map(|inner| inner as &(dyn Error + 'static))
            }
            None => current.source(),
        };
    }
    if https && cut_short && err.is_connect() {
        ConnectFailure::Tls
    } else {
        ConnectFailure::Other
    }
}

/// `err` and all its sources on one line, joined with `: `.
pub(crate) fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    one_line(&text)
}

/// Collapses newlines so a message stays on one line.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first `MAX_BODY_CHARS` characters of `text`, with `…` when cut.
pub(crate) fn truncate(text: &str) -> String {
    let text = one_line(text);
    match text.char_indices().nth(MAX_BODY_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// The fields of an error body that matter for classification.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ErrorInfo {
    pub message: String,
    pub kind: Option<String>,
    pub code: Option<String>,
}

impl ErrorInfo {
    /// Reads `{"error":{..}}`, `{"error":"text"}`, `{"message":..}` or `{"detail":..}`; anything
    /// else becomes the truncated raw text.
    pub fn parse(body: &str) -> Self {
        match serde_json::from_str::<Value>(body) {
            Ok(value) => Self::from_value(&value).unwrap_or_else(|| Self {
                message: truncate(body),
                ..Self::default()
            }),
            Err(_) => Self {
                message: if body.trim().is_empty() {
                    "(empty body)".to_owned()
                } else {
                    truncate(body)
                },
                ..Self::default()
            },
        }
    }

    /// Reads an error object; `None` when `value` has no recognisable message.
    pub fn from_value(value: &Value) -> Option<Self> {
        let obj = match value.get("error") {
            Some(Value::String(s)) => {
                return Some(Self {
                    message: truncate(s),
                    ..Self::default()
                });
            }
            Some(inner @ Value::Object(_)) => inner,
            _ => value,
        };
        let message = obj
            .get("message")
            .or_else(|| obj.get("detail"))
            .map(|m| match m {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })?;
        let text_of = |v: Option<&Value>| match v {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        Some(Self {
            message: truncate(&message),
            kind: text_of(obj.get("type")),
            code: text_of(obj.get("code")),
        })
    }

    /// Whether this describes a prompt too long for the model, in any known dialect.
    pub fn is_context_exceeded(&self) -> bool {
        let lower = self.message.to_lowercase();
        self.code.as_deref() == Some("context_length_exceeded")
            || self.kind.as_deref() == Some("exceed_context_size_error")
            || self.message.contains("ContextWindowExceededError")
            || lower.contains("maximum context length")
            || lower.contains("context_length_exceeded")
            || lower.contains("exceeds the available context size")
    }
}

/// The server's requested wait: `retry-after-ms`, `retry-after` or LiteLLM's
/// `llm_provider-retry-after` (seconds, possibly fractional), capped at [`MAX_RETRY_AFTER`].
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let read = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    let secs = read("retry-after-ms")
        .map(|ms| ms / 1000.0)
        .or_else(|| read("retry-after"))
        .or_else(|| read("llm_provider-retry-after"))
        .or_else(|| read("llm-provider-retry-after"))?;
    Some(Duration::from_secs_f64(
        secs.min(MAX_RETRY_AFTER.as_secs_f64()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderName, HeaderValue};

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        map
    }

    #[test]
    fn litellm_rate_limit() {
        let body = r#"{"error":{"message":"litellm.RateLimitError: slow down","type":"throttling_error","code":"429"}}"#;
        let err = LlmError::from_http(429, &headers(&[("llm_provider-retry-after", "2")]), body);
        match &err {
            LlmError::RateLimited {
                retry_after,
                message,
            } => {
                assert_eq!(*retry_after, Some(Duration::from_secs(2)));
                assert_eq!(message, "litellm.RateLimitError: slow down");
            }
            other => panic!("{other:?}"),
        }
        assert!(err.is_retryable());
        assert_eq!(
            err.to_string(),
            "rate limited (retry after 2.0 s): litellm.RateLimitError: slow down"
        );
    }

    #[test]
    fn retry_after_spellings_and_cap() {
        assert_eq!(
            retry_after(&headers(&[("Retry-After", "1")])),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after-ms", "250")])),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "3600")])),
            Some(MAX_RETRY_AFTER)
        );
        assert_eq!(
            retry_after(&headers(&[(
                "retry-after",
                "Wed, 21 Oct 2015 07:28:00 GMT"
            )])),
            None
        );
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }

    #[test]
    fn context_window_dialects() {
        let h = HeaderMap::new();
        let litellm = r#"{"error":{"message":"litellm.ContextWindowExceededError: litellm.BadRequestError: too long","type":"invalid_request_error","code":"400"}}"#;
        let openai = r#"{"error":{"message":"too long","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
        let llama = r#"{"error":{"code":400,"message":"request (6033 tokens) exceeds the available context size (4096 tokens)","type":"exceed_context_size_error"}}"#;
        let prose = r#"{"error":{"message":"This model's maximum context length is 8192 tokens"}}"#;
        for body in [litellm, openai, llama, prose] {
            let err = LlmError::from_http(400, &h, body);
            assert!(
                matches!(err, LlmError::ContextWindowExceeded { .. }),
                "{body}: {err:?}"
            );
            assert!(!err.is_retryable());
        }
    }

    #[test]
    fn status_classes() {
        let h = HeaderMap::new();
        let body = r#"{"error":{"message":"m","code":500}}"#;
        assert!(matches!(
            LlmError::from_http(401, &h, body),
            LlmError::Authentication { status: 401, .. }
        ));
        assert!(matches!(
            LlmError::from_http(403, &h, body),
            LlmError::Authentication { status: 403, .. }
        ));
        assert!(matches!(
            LlmError::from_http(404, &h, body),
            LlmError::BadRequest { status: 404, .. }
        ));
        let e = LlmError::from_http(529, &h, body);
        assert!(matches!(e, LlmError::Server { status: 529, .. }));
        assert!(e.is_retryable());
        assert!(!LlmError::Cancelled.is_retryable());
    }

    #[test]
    fn raw_bodies_are_truncated_to_one_line() {
        let body = format!("Internal\nServer Error {}", "x".repeat(2000));
        let err = LlmError::from_http(500, &HeaderMap::new(), &body);
        let text = err.to_string();
        assert!(!text.contains('\n'));
        assert!(text.chars().count() < 600, "{}", text.len());
        assert!(text.starts_with("server error (HTTP 500): Internal Server Error xx"));
        let empty = LlmError::from_http(500, &HeaderMap::new(), "");
        assert_eq!(empty.to_string(), "server error (HTTP 500): (empty body)");
    }

    #[test]
    fn error_info_shapes() {
        assert_eq!(ErrorInfo::parse(r#"{"error":"plain"}"#).message, "plain");
        assert_eq!(ErrorInfo::parse(r#"{"detail":"d"}"#).message, "d");
        let info = ErrorInfo::parse(r#"{"error":{"message":"m","type":null,"code":429}}"#);
        assert_eq!(info.code.as_deref(), Some("429"));
        assert_eq!(info.kind, None);
        assert_eq!(ErrorInfo::parse(r#"{"x":1}"#).message, r#"{"x":1}"#);
    }
}
