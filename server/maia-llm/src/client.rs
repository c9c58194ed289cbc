//! The HTTP client: model listing and streamed chat completions with retries and cancellation.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use tokio_util::sync::CancellationToken;

use crate::assemble::Assembler;
use crate::config::LlmConfig;
use crate::error::{ConnectFailure, ErrorInfo, LlmError, error_chain};
use crate::sse::{self, SseEvent};
use crate::types::{ChatRequest, Completion, Delta, ModelInfo};

/// The longest backoff between two attempts when the server gave no `Retry-After`.
pub const MAX_BACKOFF: Duration = Duration::from_secs(8);

/// A client for one OpenAI-compatible server. Cheap to clone.
#[derive(Clone)]
pub struct LlmClient {
    http: reqwest::Client,
    config: Arc<LlmConfig>,
    chat_url: String,
    models_url: String,
}

impl fmt::Debug for LlmClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmClient")
            .field("chat_url", &self.chat_url)
            .field("has_api_key", &self.config.api_key.is_some())
            .finish_non_exhaustive()
    }
}

/// Runs `fut` unless `cancel` fires first.
async fn or_cancel<T>(
    cancel: &CancellationToken,
    fut: impl Future<Output = T>,
) -> Result<T, LlmError> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(LlmError::Cancelled),
        value = fut => Ok(value),
    }
}

impl LlmClient {
    /// Builds a client. Fails only on an unusable `base_url` or HTTP client setup.
    ///
    /// The TLS crypto provider is expected to be installed by the binary; when none is, a
    /// private fallback is used so that plain `http://` works (HTTPS then fails certificate
    /// verification, with a warning logged here).
    pub fn new(config: LlmConfig) -> Result<Self, LlmError> {
        let chat_url = config.join(&config.chat_endpoint);
        let models_url = config.join(&config.models_endpoint);
        let parsed = reqwest::Url::parse(&chat_url)
            .map_err(|err| bad_url("base", &config.base_url, &err))?;
        reqwest::Url::parse(&models_url).map_err(|err| bad_url("models", &models_url, &err))?;

        if !maia_http::tls_available() && parsed.scheme() == "https" {
            tracing::warn!(
                "no TLS crypto provider installed; HTTPS connections to the model server will fail"
            );
        }
        let builder = maia_http::builder(parsed.host_str(), None)
            .map_err(|err| LlmError::Connection {
                kind: ConnectFailure::Other,
                message: err.to_string(),
            })?
            .connect_timeout(config.request_timeout);
        let http = builder.build().map_err(|err| LlmError::Connection {
            kind: ConnectFailure::Other,
            message: format!("cannot build the HTTP client: {}", error_chain(&err)),
        })?;
        Ok(Self {
            http,
            config: Arc::new(config),
            chat_url,
            models_url,
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &LlmConfig {
        &self.config
    }

    /// `base_url` (trailing slash trimmed) + `chat_endpoint`.
    pub fn chat_url(&self) -> String {
        self.chat_url.clone()
    }

    /// `base_url` (trailing slash trimmed) + `models_endpoint`.
    pub fn models_url(&self) -> String {
        self.models_url.clone()
    }

    fn authorize(&self, mut request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let mut has_authorization = false;
        for (name, value) in &self.config.headers {
            has_authorization |= name.eq_ignore_ascii_case("authorization");
            request = request.header(name.as_str(), value.expose());
        }
        match &self.config.api_key {
            Some(key) if !has_authorization => request.bearer_auth(key.expose()),
            _ => request,
        }
    }

    /// Sends `GET url` (JSON accepted, API key attached) and returns the status, headers and
    /// body text, whatever the status. `what` names the request in error messages. No retries;
    /// `request_timeout` applies to the headers and to the body separately.
    pub(crate) async fn get_text(
        &self,
        url: &str,
        what: &str,
    ) -> Result<(reqwest::StatusCode, reqwest::header::HeaderMap, String), LlmError> {
        let timeout = self.config.request_timeout;
        let request = self.authorize(self.http.get(url).header(ACCEPT, "application/json"));
        let response = tokio::time::timeout(timeout, request.send())
            .await
            .map_err(|_| timed_out(timeout))?
            .map_err(|err| LlmError::from_reqwest(&err, &format!("requesting {what}")))?;
        let status = response.status();
        let headers = response.headers().clone();
        let text = tokio::time::timeout(timeout, response.text())
            .await
            .map_err(|_| timed_out(timeout))?
            .map_err(|err| LlmError::from_reqwest(&err, &format!("reading {what}")))?;
        Ok((status, headers, text))
    }

    /// Sends `POST url` with the JSON `body` (API key attached) and returns the status, headers
    /// and body text, whatever the status; cancelled when `cancel` fires. No retries;
    /// `request_timeout` applies to the headers and to the body separately.
    pub(crate) async fn post_json(
        &self,
        url: &str,
        body: &serde_json::Value,
        what: &str,
        cancel: &CancellationToken,
    ) -> Result<(reqwest::StatusCode, reqwest::header::HeaderMap, String), LlmError> {
        let timeout = self.config.request_timeout;
        let request = self.authorize(
            self.http
                .post(url)
                .header(CONTENT_TYPE, "application/json")
                .header(ACCEPT, "application/json")
                .body(body.to_string()),
        );
        let response = or_cancel(cancel, tokio::time::timeout(timeout, request.send()))
            .await?
            .map_err(|_| timed_out(timeout))?
            .map_err(|err| LlmError::from_reqwest(&err, &format!("sending {what}")))?;
        let status = response.status();
        let headers = response.headers().clone();
        let text = or_cancel(cancel, tokio::time::timeout(timeout, response.text()))
            .await?
            .map_err(|_| timed_out(timeout))?
            .map_err(|err| LlmError::from_reqwest(&err, &format!("reading {what}")))?;
        Ok((status, headers, text))
    }

    /// Lists the server's models (`GET` models endpoint, `{"data":[{"id":..},..]}`).
    /// Entries without an `id` are skipped. No retries.
    pub async fn list_models(&self) -> Result<Vec<ModelInfo>, LlmError> {
        let (status, headers, text) = self.get_text(&self.models_url, "the model list").await?;
        if !status.is_success() {
            return Err(LlmError::from_http(status.as_u16(), &headers, &text));
        }
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|err| LlmError::InvalidResponse {
                message: format!("model list is not JSON: {err}"),
            })?;
        let data = value
            .get("data")
            .and_then(serde_json::Value::as_array)
            .ok_or_else(|| LlmError::InvalidResponse {
                message: "model list has no \"data\" array".to_owned(),
            })?;
        Ok(data.iter().filter_map(ModelInfo::from_json).collect())
    }

    /// Streams one completion.
    ///
    /// `on_delta` gets every text and reasoning delta as soon as it arrives, a
    /// [`Delta::ToolCallStarted`] once a tool call's id and name are known, and a
    /// [`Delta::Retrying`] before each retry wait. Rate limits (honouring `Retry-After` /
    /// `llm_provider-retry-after`, capped at 60 s), 5xx and connection failures are retried up
    /// to `max_retries` times, but only while nothing has been reported for the attempt.
    /// When `cancel` fires, the response is dropped at once and `Err(Cancelled)` returned.
    pub async fn stream_chat(
        &self,
        req: &ChatRequest,
        cancel: &CancellationToken,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<Completion, LlmError> {
        let body = bytes::Bytes::from(req.body().to_string());
        let mut attempt: u32 = 0;
        loop {
            if cancel.is_cancelled() {
                return Err(LlmError::Cancelled);
            }
            let mut emitted = false;
            let result = self
                .attempt(req, body.clone(), cancel, on_delta, &mut emitted)
                .await;
            match result {
                Ok(completion) => return Ok(completion),
                Err(err) if err.is_retryable() && !emitted && attempt < self.config.max_retries => {
                    attempt += 1;
                    let wait = match &err {
                        LlmError::RateLimited {
                            retry_after: Some(wait),
                            ..
                        } => *wait,
                        _ => backoff(self.config.retry_base, attempt),
                    };
                    tracing::warn!(attempt, wait_ms = wait.as_millis() as u64, error = %err, "retrying chat request");
                    on_delta(Delta::Retrying {
                        attempt,
                        wait,
                        reason: err.to_string(),
                    });
                    or_cancel(cancel, tokio::time::sleep(wait)).await?;
                }
                Err(err) => return Err(err),
            }
        }
    }

    async fn attempt(
        &self,
        req: &ChatRequest,
        body: bytes::Bytes,
        cancel: &CancellationToken,
        on_delta: &mut (dyn FnMut(Delta) + Send),
        emitted: &mut bool,
    ) -> Result<Completion, LlmError> {
        let timeout = self.config.request_timeout;
        tracing::debug!(url = %self.chat_url, model = %req.model, messages = req.messages.len(), "chat request");
        let request = self.authorize(
            self.http
                .post(&self.chat_url)
                .header(CONTENT_TYPE, "application/json")
                .header(ACCEPT, "text/event-stream")
                .body(body),
        );
        let response = or_cancel(cancel, tokio::time::timeout(timeout, request.send()))
            .await?
            .map_err(|_| timed_out(timeout))?
            .map_err(|err| LlmError::from_reqwest(&err, "sending the chat request"))?;

        let status = response.status();
        if !status.is_success() {
            let headers = response.headers().clone();
            let text = or_cancel(cancel, tokio::time::timeout(timeout, response.text()))
                .await?
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            let err = LlmError::from_http(status.as_u16(), &headers, &text);
            tracing::debug!(status = status.as_u16(), error = %err, "chat request failed");
            return Err(err);
        }

        let cost = response_cost(response.headers());
        let is_json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if is_json {
            // The server ignored `stream: true` and sent a whole completion.
            let text = or_cancel(cancel, tokio::time::timeout(timeout, response.text()))
                .await?
                .map_err(|_| timed_out(timeout))?
                .map_err(|err| LlmError::from_reqwest(&err, "reading the completion"))?;
            return complete_from_json(&text, on_delta, emitted).map(|c| Completion {
                response_cost: cost,
                ..c
            });
        }

        let idle = self.config.idle_timeout;
        let mut events = std::pin::pin!(sse::events(response.bytes_stream()));
        let mut assembler = Assembler::new();
        let mut saw_done = false;
        loop {
            let next = or_cancel(cancel, tokio::time::timeout(idle, events.next()))
                .await?
                .map_err(|_| LlmError::StreamInterrupted {
                    message: format!("no data for {} s", idle.as_secs_f64()),
                })?;
            match next {
                None => break,
                Some(Err(err)) => return Err(err),
                Some(Ok(SseEvent::Done)) => {
                    saw_done = true;
                    break;
                }
                Some(Ok(SseEvent::Error(data))) => {
                    return Err(LlmError::StreamInterrupted {
                        message: ErrorInfo::parse(&data).message,
                    });
                }
                Some(Ok(SseEvent::Data(data))) => {
                    for delta in assembler.push(&data)? {
                        *emitted = true;
                        on_delta(delta);
                    }
                }
            }
        }
        let completion = Completion {
            response_cost: cost,
            ..assembler.finish(saw_done)?
        };
        tracing::debug!(
            finish = ?completion.finish_reason,
            tool_calls = completion.tool_calls.len(),
            usage = ?completion.usage,
            "chat completion done"
        );
        Ok(completion)
    }
}

/// LiteLLM's `x-litellm-response-cost` header: what the response cost, in
/// US dollars (a finite number at or above zero, else ignored).
fn response_cost(headers: &reqwest::header::HeaderMap) -> Option<f64> {
    headers
        .get("x-litellm-response-cost")?
        .to_str()
        .ok()?
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|c| c.is_finite() && *c >= 0.0)
}

/// Converts a non-streamed `chat.completion` body into deltas and a completion.
fn complete_from_json(
    text: &str,
    on_delta: &mut (dyn FnMut(Delta) + Send),
    emitted: &mut bool,
) -> Result<Completion, LlmError> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|err| LlmError::InvalidResponse {
            message: format!("completion is not JSON: {err}"),
        })?;
    let choices: Vec<serde_json::Value> = value
        .get("choices")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .map(|choice| {
            serde_json::json!({
                "index": choice.get("index").cloned().unwrap_or(0.into()),
                "delta": choice.get("message").cloned().unwrap_or_default(),
                "finish_reason": choice.get("finish_reason").cloned().unwrap_or_default(),
            })
        })
        .collect();
    let mut chunk = serde_json::json!({ "choices": choices });
    if let (Some(map), Some(obj)) = (chunk.as_object_mut(), value.as_object()) {
        for key in ["usage", "error"] {
            if let Some(v) = obj.get(key) {
                map.insert(key.to_owned(), v.clone());
            }
        }
    }
    let mut assembler = Assembler::new();
    for delta in assembler.push_value(&chunk)? {
        *emitted = true;
        on_delta(delta);
    }
    assembler.finish(true)
}

/// An unusable base or models URL (`what`), as [`LlmClient::new`] reports it.
fn bad_url(what: &str, url: &str, err: &dyn fmt::Display) -> LlmError {
    LlmError::Connection {
        kind: ConnectFailure::BadUrl {
            reason: err.to_string(),
        },
        message: crate::config::redact_userinfo(&format!("invalid {what} URL {url:?}: {err}")),
    }
}

/// No answer within `timeout` (the client's own deadline around a request).
fn timed_out(timeout: Duration) -> LlmError {
    LlmError::Connection {
        kind: ConnectFailure::Timeout,
        message: format!("no response within {} s", timeout.as_secs_f64()),
    }
}

/// Exponential backoff: `base * 2^(attempt-1)`, capped at [`MAX_BACKOFF`].
pub fn backoff(base: Duration, attempt: u32) -> Duration {
    let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
    base.saturating_mul(factor).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let base = Duration::from_millis(500);
        assert_eq!(backoff(base, 1), Duration::from_millis(500));
        assert_eq!(backoff(base, 2), Duration::from_secs(1));
        assert_eq!(backoff(base, 3), Duration::from_secs(2));
        assert_eq!(backoff(base, 10), MAX_BACKOFF);
        assert_eq!(backoff(base, 100), MAX_BACKOFF);
    }

    #[test]
    fn urls_and_debug() {
        let client = LlmClient::new(LlmConfig {
            base_url: "http://127.0.0.1:4000/".into(),
            api_key: Some(crate::ApiKey::new("sk-top-secret")),
            ..LlmConfig::default()
        })
        .unwrap();
        assert_eq!(
            client.chat_url(),
            "http://127.0.0.1:4000/v1/chat/completions"
        );
        assert_eq!(client.models_url(), "http://127.0.0.1:4000/v1/models");
        assert!(!format!("{client:?}").contains("sk-top-secret"));
    }

    /// Compile-time check: the engine can spawn `stream_chat` on a multi-thread runtime.
    #[allow(dead_code)]
    fn stream_chat_future_is_send(
        client: &LlmClient,
        req: &ChatRequest,
        cancel: &CancellationToken,
        on_delta: &mut (dyn FnMut(Delta) + Send),
    ) {
        fn is_send<T: Send>(_: T) {}
        is_send(client.stream_chat(req, cancel, on_delta));
        is_send(client.list_models());
    }

    #[test]
    fn non_streamed_json_completion() {
        let body = serde_json::json!({
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "hi",
                "tool_calls": [{"id": "c1", "type": "function",
                                "function": {"name": "ls", "arguments": "{}"}}]}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
        })
        .to_string();
        let mut deltas = Vec::new();
        let mut emitted = false;
        let done = complete_from_json(&body, &mut |d| deltas.push(d), &mut emitted).unwrap();
        assert!(emitted);
        assert_eq!(done.text, "hi");
        assert_eq!(done.tool_calls[0].name, "ls");
        assert_eq!(done.finish_reason, Some(crate::FinishReason::ToolCalls));
        assert_eq!(done.usage.unwrap().total_tokens, 5);
        assert_eq!(deltas.len(), 2);
    }

    #[test]
    fn invalid_base_url() {
        let err = LlmClient::new(LlmConfig {
            base_url: "not a url".into(),
            ..LlmConfig::default()
        })
        .unwrap_err();
        match err {
            LlmError::Connection {
                kind: ConnectFailure::BadUrl { reason },
                message,
            } => {
                assert_eq!(reason, "relative URL without a base");
                assert_eq!(
                    message,
                    "invalid base URL \"not a url\": relative URL without a base"
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
