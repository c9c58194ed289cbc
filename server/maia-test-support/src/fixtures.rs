//! Builders of scripted replies in the exact shapes LiteLLM / OpenAI produce.
//!
//! Every streamed reply is a list of raw SSE pieces (`data: {...}\n\n`); each chunk is a
//! `chat.completion.chunk` object with `id`, `object`, `created`, `model` and `choices`. Usage
//! chunks report [`MOCK_PROMPT_TOKENS`] and [`MOCK_COMPLETION_TOKENS`].

use std::time::Duration;

use serde_json::{Value, json};

use crate::server::Reply;

/// The `[DONE]` sentinel event.
pub const DONE: &str = "data: [DONE]\n\n";
/// `prompt_tokens` of every usage chunk built here.
pub const MOCK_PROMPT_TOKENS: u64 = 42;
/// `completion_tokens` of every usage chunk built here.
pub const MOCK_COMPLETION_TOKENS: u64 = 7;
/// The `model` field of built chunks.
pub const MOCK_MODEL: &str = "mock-model";

/// One SSE event carrying `value`: `"data: {json}\n\n"`.
pub fn sse_chunk(value: &Value) -> String {
    format!("data: {value}\n\n")
}

/// A `chat.completion.chunk` with one choice.
pub fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-mock",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": MOCK_MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    })
}

/// The usage chunk: LiteLLM's shape (`choices:[{"index":0,"delta":{}}]`) or OpenAI's
/// (`choices:[]`).
pub fn usage_chunk(prompt_tokens: u64, completion_tokens: u64, litellm_shape: bool) -> Value {
    let choices = if litellm_shape {
        json!([{"index": 0, "delta": {}}])
    } else {
        json!([])
    };
    json!({
        "id": "chatcmpl-mock",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": MOCK_MODEL,
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    })
}

/// The first chunk of a reply, carrying only the role.
pub fn role_chunk() -> Value {
    chunk(json!({"role": "assistant", "content": ""}), None)
}

/// `text` cut into pieces of at most `size` characters (at least one piece).
pub fn split_chars(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars
        .chunks(size.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

/// `text` cut into exactly `n` consecutive pieces (some may be empty when `text` is short).
pub fn split_n(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let n = n.max(1);
    (0..n)
        .map(|i| {
            let start = chars.len() * i / n;
            let end = chars.len() * (i + 1) / n;
            chars[start..end].iter().collect()
        })
        .collect()
}

/// A stream of the given raw pieces with no gap.
pub fn stream(pieces: Vec<String>) -> Reply {
    Reply::Stream {
        pieces,
        gap: Duration::ZERO,
    }
}

/// Role chunk, one content delta per piece, finish `finish_reason`, usage (LiteLLM shape),
/// `[DONE]`.
fn content_stream(pieces: &[String], finish_reason: &str, gap: Duration) -> Reply {
    let mut out = vec![sse_chunk(&role_chunk())];
    out.extend(
        pieces
            .iter()
            .map(|p| sse_chunk(&chunk(json!({"content": p}), None))),
    );
    out.push(sse_chunk(&chunk(json!({}), Some(finish_reason))));
    out.push(sse_chunk(&usage_chunk(
        MOCK_PROMPT_TOKENS,
        MOCK_COMPLETION_TOKENS,
        true,
    )));
    out.push(DONE.to_owned());
    Reply::Stream { pieces: out, gap }
}

/// A complete text answer: role chunk, ~4-character deltas, finish `stop`, usage, `[DONE]`.
pub fn text_reply(text: &str) -> Reply {
    content_stream(&split_chars(text, 4), "stop", Duration::ZERO)
}

/// One content delta per piece, sent `gap` apart, then finish `stop`, usage, `[DONE]`.
pub fn text_chunks(pieces: &[&str], gap: Duration) -> Reply {
    let pieces: Vec<String> = pieces.iter().map(|p| (*p).to_owned()).collect();
    content_stream(&pieces, "stop", gap)
}

/// Like [`text_reply`] but finishing with `finish_reason` (e.g. `length`, `content_filter`).
pub fn finish_reply(text: &str, finish_reason: &str) -> Reply {
    content_stream(&split_chars(text, 4), finish_reason, Duration::ZERO)
}

/// `reasoning_content` deltas, then content deltas, then finish `stop`, usage, `[DONE]`.
pub fn reasoning_then_text(reasoning: &str, text: &str) -> Reply {
    reasoning_field_then_text("reasoning_content", reasoning, text)
}

/// Like [`reasoning_then_text`] with the reasoning under `field` (`reasoning_content` or
/// `reasoning`, as some providers send it).
pub fn reasoning_field_then_text(field: &str, reasoning: &str, text: &str) -> Reply {
    let mut out = vec![sse_chunk(&role_chunk())];
    for piece in split_chars(reasoning, 4) {
        let mut delta = serde_json::Map::new();
        delta.insert(field.to_owned(), Value::String(piece));
        out.push(sse_chunk(&chunk(Value::Object(delta), None)));
    }
    for piece in split_chars(text, 4) {
        out.push(sse_chunk(&chunk(json!({"content": piece}), None)));
    }
    out.push(sse_chunk(&chunk(json!({}), Some("stop"))));
    out.push(sse_chunk(&usage_chunk(
        MOCK_PROMPT_TOKENS,
        MOCK_COMPLETION_TOKENS,
        true,
    )));
    out.push(DONE.to_owned());
    stream(out)
}

/// Streamed tool calls `(id, name, arguments)`: each call opens with its id and name, then
/// its arguments JSON arrives in 3 pieces, the calls interleaved by index; then finish
/// `tool_calls`, a usage chunk in OpenAI's shape (`choices: []`), `[DONE]`. Continuation
/// deltas carry `"type":"function"` like LiteLLM's.
pub fn tool_calls_reply(calls: &[(&str, &str, Value)]) -> Reply {
    let mut out = vec![sse_chunk(&chunk(json!({"role": "assistant"}), None))];
    let split: Vec<Vec<String>> = calls
        .iter()
        .map(|(_, _, args)| split_n(&args.to_string(), 3))
        .collect();
    for (index, (id, name, _)) in calls.iter().enumerate() {
        out.push(sse_chunk(&chunk(
            json!({"tool_calls": [{
                "index": index, "id": id, "type": "function",
                "function": {"name": name, "arguments": ""},
            }]}),
            None,
        )));
    }
    for piece in 0..3 {
        for (index, pieces) in split.iter().enumerate() {
            out.push(sse_chunk(&chunk(
                json!({"tool_calls": [{
                    "index": index, "type": "function",
                    "function": {"arguments": pieces[piece]},
                }]}),
                None,
            )));
        }
    }
    out.push(sse_chunk(&chunk(json!({}), Some("tool_calls"))));
    out.push(sse_chunk(&usage_chunk(
        MOCK_PROMPT_TOKENS,
        MOCK_COMPLETION_TOKENS,
        false,
    )));
    out.push(DONE.to_owned());
    stream(out)
}

/// Many `"word "` deltas sent `gap` apart, then finish, usage, `[DONE]` (for cancellation).
pub fn slow_text(pieces: usize, gap: Duration) -> Reply {
    let words = vec!["word ".to_owned(); pieces];
    content_stream(&words, "stop", gap)
}

/// Some text, then LiteLLM's mid-stream error event, and no `[DONE]`.
pub fn mid_stream_error(text: &str, message: &str) -> Reply {
    let mut out = vec![sse_chunk(&role_chunk())];
    out.extend(
        split_chars(text, 4)
            .into_iter()
            .map(|p| sse_chunk(&chunk(json!({"content": p}), None))),
    );
    out.push(sse_chunk(&json!({
        "error": {"message": message, "type": null, "param": null, "code": "500"}
    })));
    stream(out)
}

/// Some text and then the connection closes: no finish reason, no `[DONE]`.
pub fn cut_stream(text: &str) -> Reply {
    let mut out = vec![sse_chunk(&role_chunk())];
    out.extend(
        split_chars(text, 4)
            .into_iter()
            .map(|p| sse_chunk(&chunk(json!({"content": p}), None))),
    );
    stream(out)
}

/// A LiteLLM-shaped error body: `{"error":{"message","type","param":null,"code":"<status>"}}`.
pub fn error_body(status: u16, message: &str) -> String {
    let kind = match status {
        400 => "invalid_request_error",
        401 | 403 => "auth_error",
        429 => "throttling_error",
        _ => "internal_server_error",
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": status.to_string()}})
        .to_string()
}

/// A non-streamed error with a LiteLLM-shaped body.
pub fn error_reply(status: u16, message: &str) -> Reply {
    Reply::Error {
        status,
        body: error_body(status, message),
        headers: Vec::new(),
    }
}

/// HTTP 429 asking to wait `retry_after_secs`, in `Retry-After` or (when `litellm_header`)
/// LiteLLM's `llm_provider-retry-after`.
pub fn rate_limited(retry_after_secs: u64, litellm_header: bool) -> Reply {
    let header = if litellm_header {
        "llm_provider-retry-after"
    } else {
        "retry-after"
    };
    Reply::Error {
        status: 429,
        body: error_body(
            429,
            "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached",
        ),
        headers: vec![(header.to_owned(), retry_after_secs.to_string())],
    }
}

/// HTTP 400 as LiteLLM reports a prompt too long for the model.
pub fn context_exceeded() -> Reply {
    error_reply(
        400,
        "litellm.ContextWindowExceededError: litellm.BadRequestError: ContextWindowExceededError: \
         OpenAIException - This model's maximum context length is 8192 tokens. However, your \
         messages resulted in 9000 tokens.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(reply: Reply) -> Vec<String> {
        match reply {
            Reply::Stream { pieces, .. } => pieces,
            _ => panic!("not a stream"),
        }
    }

    fn parse(piece: &str) -> Value {
        let data = piece
            .strip_prefix("data: ")
            .and_then(|p| p.strip_suffix("\n\n"))
            .unwrap();
        serde_json::from_str(data).unwrap()
    }

    #[test]
    fn text_reply_shape() {
        let p = pieces(text_reply("Hello world"));
        assert_eq!(p.last().unwrap(), DONE);
        let deltas: String = p[1..4]
            .iter()
            .map(|c| {
                parse(c)["choices"][0]["delta"]["content"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(deltas, "Hello world");
        assert_eq!(parse(&p[4])["choices"][0]["finish_reason"], "stop");
        assert_eq!(parse(&p[5])["usage"]["total_tokens"], 49);
        assert_eq!(parse(&p[0])["object"], "chat.completion.chunk");
    }

    #[test]
    fn tool_call_arguments_are_split_and_reassemble() {
        let args = json!({"path": "src/main.rs"});
        let p = pieces(tool_calls_reply(&[
            ("call_A", "read_file", args.clone()),
            ("call_B", "shell", json!({"cmd": "ls"})),
        ]));
        let mut joined = [String::new(), String::new()];
        let mut seen = 0;
        for piece in &p[1..p.len() - 3] {
            let tc = &parse(piece)["choices"][0]["delta"]["tool_calls"][0];
            let i = tc["index"].as_u64().unwrap() as usize;
            joined[i].push_str(tc["function"]["arguments"].as_str().unwrap());
            seen += 1;
        }
        assert_eq!(seen, 2 + 6);
        assert_eq!(serde_json::from_str::<Value>(&joined[0]).unwrap(), args);
        assert_eq!(parse(&p[p.len() - 2])["choices"], json!([]));
    }

    #[test]
    fn split_helpers() {
        assert_eq!(split_n("ab", 3).concat(), "ab");
        assert_eq!(split_n("ab", 3).len(), 3);
        assert_eq!(split_chars("héllo", 2), vec!["hé", "ll", "o"]);
        assert_eq!(split_chars("", 4), vec![""]);
    }

    #[test]
    fn error_shapes() {
        match rate_limited(1, true) {
            Reply::Error {
                status, headers, ..
            } => {
                assert_eq!(status, 429);
                assert_eq!(
                    headers,
                    vec![("llm_provider-retry-after".into(), "1".into())]
                );
            }
            _ => panic!(),
        }
        let body: Value = serde_json::from_str(&error_body(500, "x")).unwrap();
        assert_eq!(body["error"]["code"], "500");
    }
}
