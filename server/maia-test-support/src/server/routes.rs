//! The mock's HTTP routes: chat completions (a scripted reply, a standing
//! rule's, a window question's or a title request's answer, or an enforced
//! window's error),
//! the model list and `/model/info`, the key check, and the 404 of the
//! rest.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

use super::stream::{hang_body, sse_response, stream_body};
use super::{Reply, Shared, WindowError, estimate_tokens, lock};

fn window_error_body(shape: WindowError, limit: u64, tokens: u64) -> String {
    let upstream = format!(
        "This model's maximum context length is {limit} tokens. However, your messages \
         resulted in {tokens} tokens. Please reduce the length of the messages."
    );
    match shape {
        WindowError::LiteLlm => json!({"error": {
            "message": format!(
                "litellm.ContextWindowExceededError: litellm.BadRequestError: \
                 ContextWindowExceededError: OpenAIException - {upstream}"
            ),
            "type": "invalid_request_error",
            "param": null,
            "code": "400",
        }}),
        WindowError::OpenAi => json!({"error": {
            "message": upstream,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }}),
    }
    .to_string()
}

/// `pieces` with every `usage.prompt_tokens` (and `total_tokens`) set from `prompt_tokens`.
fn with_prompt_tokens(pieces: Vec<String>, prompt_tokens: u64) -> Vec<String> {
    pieces
        .into_iter()
        .map(|piece| {
            let Some(data) = piece.strip_prefix("data: ") else {
                return piece;
            };
            let Ok(mut value) = serde_json::from_str::<Value>(data.trim_end()) else {
                return piece;
            };
            let Some(usage) = value.get_mut("usage").and_then(Value::as_object_mut) else {
                return piece;
            };
            let completion = usage
                .get("completion_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            usage.insert("prompt_tokens".into(), prompt_tokens.into());
            usage.insert("total_tokens".into(), (prompt_tokens + completion).into());
            format!("data: {value}\n\n")
        })
        .collect()
}
pub(super) fn default_model() -> Value {
    json!({"id": "mock-model", "object": "model", "max_input_tokens": 32768})
}

fn json_response(status: StatusCode, body: String) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

pub(super) async fn not_found() -> Response {
    json_response(
        StatusCode::NOT_FOUND,
        json!({"error": {"message": "mock: no such route", "code": "404"}}).to_string(),
    )
}

/// The 401 LiteLLM sends for a missing or wrong key, when a key is required.
fn refused(shared: &Shared, headers: &HeaderMap) -> Option<Response> {
    let required = lock(&shared.required_key).clone()?;
    let sent = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    (sent != format!("Bearer {required}")).then(|| {
        json_response(
            StatusCode::UNAUTHORIZED,
            json!({"error": {"message": "Authentication Error, Invalid proxy server token passed.", "type": "auth_error", "code": "401"}}).to_string(),
        )
    })
}

pub(super) async fn model_info(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    shared.model_info_gets.fetch_add(1, Ordering::SeqCst);
    if let Some(refused) = refused(&shared, &headers) {
        return refused;
    }
    let body = lock(&shared.model_info).clone();
    json_response(StatusCode::OK, body.to_string())
}

pub(super) async fn models(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    shared.models_gets.fetch_add(1, Ordering::SeqCst);
    let delay = *lock(&shared.models_delay);
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    if let Some(refused) = refused(&shared, &headers) {
        return refused;
    }
    let data = lock(&shared.models).clone();
    json_response(
        StatusCode::OK,
        json!({"object": "list", "data": data}).to_string(),
    )
}

/// Whether a chat request is the agent asking for the context size.
fn is_window_question(request: &Value) -> bool {
    request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .is_some_and(|c| c.contains("maximum context size"))
}

/// Whether a chat request is the agent asking for a thread's title (its
/// instruction, last, starts so).
fn is_title_request(request: &Value) -> bool {
    request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .is_some_and(|c| c.contains("Write a title for the conversation above"))
}

pub(super) async fn chat(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = refused(&shared, &headers) {
        return refused;
    }
    let request = serde_json::from_slice::<Value>(&body)
        .unwrap_or_else(|_| json!({"invalid_json": String::from_utf8_lossy(&body)}));
    let header_list = headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    let reply =
        if is_title_request(&request) {
            lock(&shared.title_requests).push(request);
            Some(
                lock(&shared.title_replies)
                    .pop_front()
                    .unwrap_or(Reply::Error {
                        status: 404,
                        body:
                            json!({"error": {"message": "mock: the title request is not scripted"}})
                                .to_string(),
                        headers: Vec::new(),
                    }),
            )
        } else if is_window_question(&request) {
            lock(&shared.window_requests).push(request);
            Some(lock(&shared.window_replies).pop_front().unwrap_or(Reply::Error {
            status: 404,
            body: json!({"error": {"message": "mock: the context size question is not scripted"}})
                .to_string(),
            headers: Vec::new(),
        }))
        } else {
            let window = *lock(&shared.window);
            let tokens = estimate_tokens(&request);
            let rule = lock(&shared.rule).clone();
            let ruled = |request: &Value| rule.as_ref().and_then(|rule| rule(request));
            lock(&shared.headers).push(header_list);
            let over = window.is_some_and(|(limit, _)| tokens > limit);
            let ruled = if over { None } else { ruled(&request) };
            let index = {
                let mut requests = lock(&shared.requests);
                requests.push(request);
                requests.len() - 1
            };
            match window {
                Some((limit, shape)) if tokens > limit => {
                    lock(&shared.rejected).push(index);
                    Some(Reply::Error {
                        status: 400,
                        body: window_error_body(shape, limit, tokens),
                        headers: Vec::new(),
                    })
                }
                Some(_) => match ruled.or_else(|| lock(&shared.replies).pop_front()) {
                    Some(Reply::Stream { pieces, gap }) => Some(Reply::Stream {
                        pieces: with_prompt_tokens(pieces, tokens),
                        gap,
                    }),
                    other => other,
                },
                None => ruled.or_else(|| lock(&shared.replies).pop_front()),
            }
        };
    shared.changed.notify_waiters();
    let mut reply = reply;
    while let Some(Reply::Gated { gate, reply: inner }) = reply {
        gate.pass().await;
        reply = Some(*inner);
    }

    match reply {
        None => json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"error": {"message": "mock: no scripted reply left"}}).to_string(),
        ),
        Some(Reply::Error {
            status,
            body,
            headers,
        }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = json_response(status, body);
            for (name, value) in headers {
                if let (Ok(name), Ok(value)) = (
                    HeaderName::from_bytes(name.as_bytes()),
                    HeaderValue::from_str(&value),
                ) {
                    response.headers_mut().append(name, value);
                }
            }
            response
        }
        Some(Reply::Stream { pieces, gap }) => {
            let extra = lock(&shared.stream_headers).clone();
            let mut response = sse_response(stream_body(shared, pieces, gap));
            for (name, value) in extra {
                if let (Ok(name), Ok(value)) = (
                    HeaderName::from_bytes(name.as_bytes()),
                    HeaderValue::from_str(&value),
                ) {
                    response.headers_mut().append(name, value);
                }
            }
            response
        }
        Some(Reply::Hang) => sse_response(hang_body(shared)),
        // Unwrapped above.
        Some(Reply::Gated { .. }) => {
            json_response(StatusCode::INTERNAL_SERVER_ERROR, String::new())
        }
    }
}
