//! Client configuration and the secret API key wrapper.

use std::fmt;
use std::time::Duration;

/// An API key. Its `Debug` and `Display` print `***`; only [`ApiKey::expose`] reveals it.
#[derive(Clone)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The secret itself, for building the `Authorization` header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Where the OpenAI-compatible server is and how patiently to talk to it.
#[derive(Clone, Debug)]
pub struct LlmConfig {
    /// Server root, e.g. `http://localhost:4000` (a trailing slash is ignored).
    pub base_url: String,
    /// Path of the chat endpoint, default `/v1/chat/completions`.
    pub chat_endpoint: String,
    /// Path of the models endpoint, default `/v1/models`.
    pub models_endpoint: String,
    /// Sent as `Authorization: Bearer ..` when set (unless `headers` has an `Authorization`).
    pub api_key: Option<ApiKey>,
    /// Extra headers sent with every request (a client-managed gateway's); the values are
    /// secrets like the key and are never shown.
    pub headers: Vec<(String, ApiKey)>,
    /// Retries after a rate limit, 5xx or connection failure (default 3).
    pub max_retries: u32,
    /// First backoff wait, doubled per attempt and capped at 8 s (default 500 ms).
    pub retry_base: Duration,
    /// Time allowed to connect and receive the response headers (default 60 s). Not a
    /// whole-stream timeout.
    pub request_timeout: Duration,
    /// Longest silence allowed between two stream chunks (default 300 s).
    pub idle_timeout: Duration,
}

impl Default for LlmConfig {
    fn default() -> Self {
        Self {
            base_url: "http://localhost:4000".to_owned(),
            chat_endpoint: "/v1/chat/completions".to_owned(),
            models_endpoint: "/v1/models".to_owned(),
            api_key: None,
            headers: Vec::new(),
            max_retries: 3,
            retry_base: Duration::from_millis(500),
            request_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(300),
        }
    }
}

impl LlmConfig {
    /// `base_url` without trailing slashes joined with `endpoint` (a leading slash is added
    /// when missing).
    pub fn join(&self, endpoint: &str) -> String {
        let base = self.base_url.trim_end_matches('/');
        if endpoint.starts_with('/') {
            format!("{base}{endpoint}")
        } else {
            format!("{base}/{endpoint}")
        }
    }
}

/// `text` with the user information of every URL in it (`user:password@`
/// after `scheme://`) replaced by `***`: a base URL may carry credentials,
/// and URLs end up in messages and logs.
pub fn redact_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| {
                matches!(c, '/' | '?' | '#' | ')' | '"' | '\'' | '`') || c.is_whitespace()
            })
            .unwrap_or(tail.len());
        match tail[..end].rfind('@') {
            Some(at) => {
                out.push_str("***");
                rest = &tail[at..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_redacted_everywhere_in_a_text() {
        assert_eq!(
            redact_userinfo("http://u:pw@h:4000/v1/models"),
            "http://***@h:4000/v1/models"
        );
        assert_eq!(
            redact_userinfo("error sending request for url (https://tok@h/x) and ftp://a:b@c"),
            "error sending request for url (https://***@h/x) and ftp://***@c"
        );
        assert_eq!(redact_userinfo("http://h/a@b"), "http://h/a@b");
        assert_eq!(redact_userinfo("no url: a@b"), "no url: a@b");
        assert_eq!(redact_userinfo("x://"), "x://");
    }

    #[test]
    fn api_key_is_never_shown() {
        let key = ApiKey::new("sk-secret-123");
        assert_eq!(format!("{key:?}"), "***");
        assert_eq!(format!("{key}"), "***");
        let config = LlmConfig {
            api_key: Some(key.clone()),
            ..LlmConfig::default()
        };
        assert!(!format!("{config:?}").contains("sk-secret"));
        assert_eq!(key.expose(), "sk-secret-123");
    }

    #[test]
    fn join_trims_slashes() {
        let mut c = LlmConfig {
            base_url: "http://h:1/".into(),
            ..LlmConfig::default()
        };
        assert_eq!(c.join("/v1/models"), "http://h:1/v1/models");
        c.base_url = "http://h:1".into();
        assert_eq!(c.join("v1/models"), "http://h:1/v1/models");
    }
}
