//! Test support: a scripted, in-process mock of an OpenAI-compatible (LiteLLM) server.
//!
//! ```ignore
//! let mock = MockLlm::start().await;
//! mock.push(text_reply("Hello"));
//! // point the client at mock.url(), then inspect mock.requests()
//! ```

mod fixtures;
pub mod mock_mcp;
mod require;
mod server;

pub use fixtures::{
    DONE, MOCK_COMPLETION_TOKENS, MOCK_MODEL, MOCK_PROMPT_TOKENS, chunk, context_exceeded,
    cut_stream, error_body, error_reply, finish_reply, mid_stream_error, rate_limited,
    reasoning_field_then_text, reasoning_then_text, role_chunk, slow_text, split_chars, split_n,
    sse_chunk, stream, text_chunks, text_reply, tool_calls_reply, usage_chunk,
};
pub use require::{REQUIRE_ALL, env_path, on_path, require, require_all, which};
pub use server::{Gate, MockLlm, Reply, Rule, WindowError, estimate_tokens};
/// Re-exported for tests that need a scratch directory.
pub use tempfile;

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A minimal HTTP/1.1 request over a raw socket; returns the whole response text.
    async fn raw(mock: &MockLlm, method: &str, path: &str, body: &str) -> String {
        let addr = mock.url().trim_start_matches("http://").to_owned();
        let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        socket.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        socket.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn empty_queue_is_a_visible_500() {
        let mock = MockLlm::start().await;
        let out = raw(&mock, "POST", "/v1/chat/completions", "{\"a\":1}").await;
        assert!(out.starts_with("HTTP/1.1 500"), "{out}");
        assert!(out.contains("mock: no scripted reply left"));
        assert_eq!(mock.requests(), vec![serde_json::json!({"a":1})]);
        assert!(mock.headers()[0].contains(&("authorization".to_owned(), "Bearer k".to_owned())));
    }

    #[tokio::test]
    async fn models_default_and_custom() {
        let mock = MockLlm::start().await;
        let out = raw(&mock, "GET", "/v1/models", "").await;
        assert!(
            out.contains("\"mock-model\"") && out.contains("32768"),
            "{out}"
        );
        mock.set_models(vec![serde_json::json!({"id":"other"})]);
        let out = raw(&mock, "GET", "/v1/models", "").await;
        assert!(
            out.contains("\"other\"") && !out.contains("mock-model"),
            "{out}"
        );
    }

    #[tokio::test]
    async fn model_info_default_and_custom() {
        let mock = MockLlm::start().await;
        let out = raw(&mock, "GET", "/model/info", "").await;
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        assert!(out.ends_with("{\"data\":[]}"), "{out}");
        mock.set_model_info(serde_json::json!({"data": [
            {"model_name": "m", "model_info": {"max_input_tokens": 4096}}
        ]}));
        let out = raw(&mock, "GET", "/v1/model/info", "").await;
        assert!(
            out.contains("\"model_name\":\"m\"") && out.contains("4096"),
            "{out}"
        );
        assert_eq!(mock.model_info_requests(), 2);
        assert_eq!(mock.models_requests(), 0);
        raw(&mock, "GET", "/v1/models", "").await;
        assert_eq!(mock.models_requests(), 1);
        assert!(mock.requests().is_empty());
    }

    #[tokio::test]
    async fn stream_and_error_replies() {
        let mock = MockLlm::start().await;
        mock.push(text_chunks(&["ab", "cd"], Duration::from_millis(1)));
        mock.push(rate_limited(3, true));
        let out = raw(&mock, "POST", "/v1/chat/completions", "{}").await;
        assert!(out.contains("text/event-stream"));
        assert!(out.contains("\"content\":\"ab\"") && out.contains("[DONE]"));
        let out = raw(&mock, "POST", "/v1/chat/completions", "not json").await;
        assert!(out.starts_with("HTTP/1.1 429"), "{out}");
        assert!(out.contains("llm_provider-retry-after: 3"), "{out}");
        assert_eq!(mock.requests()[1]["invalid_json"], "not json");
        assert_eq!(mock.dropped_streams(), 0);
        assert_eq!(
            mock.wait_for_requests(2, Duration::from_secs(1))
                .await
                .len(),
            2
        );
    }

    #[tokio::test]
    async fn enforced_window_rejects_with_both_shapes() {
        let mock = MockLlm::start().await;
        mock.enforce_context_window(100, WindowError::LiteLlm);
        mock.push(text_reply("ok"));
        let small = r#"{"messages":[{"role":"user","content":"hi"}]}"#;
        let big = format!(
            r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#,
            "x".repeat(500)
        );
        let out = raw(&mock, "POST", "/v1/chat/completions", &big).await;
        assert!(out.starts_with("HTTP/1.1 400"), "{out}");
        assert!(
            out.contains("litellm.ContextWindowExceededError") && out.contains("\"code\":\"400\""),
            "{out}"
        );
        // The scripted reply was not used; the small request gets it, with its own size.
        let out = raw(&mock, "POST", "/v1/chat/completions", small).await;
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        let tokens = estimate_tokens(&serde_json::from_str(small).unwrap());
        assert!(
            out.contains(&format!("\"prompt_tokens\":{tokens}")),
            "{out}"
        );
        mock.enforce_context_window(100, WindowError::OpenAi);
        let out = raw(&mock, "POST", "/v1/chat/completions", &big).await;
        assert!(
            out.contains("\"code\":\"context_length_exceeded\""),
            "{out}"
        );
        assert_eq!(mock.rejected(), [0, 2]);
        assert_eq!(mock.requests().len(), 3);
    }

    #[tokio::test]
    async fn dropped_stream_is_observed() {
        let mock = MockLlm::start().await;
        mock.push(slow_text(50, Duration::from_millis(20)));
        let addr = mock.url().trim_start_matches("http://").to_owned();
        let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
        socket
            .write_all(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
            )
            .await
            .unwrap();
        let mut buf = [0u8; 256];
        let n = socket.read(&mut buf).await.unwrap();
        assert!(n > 0);
        drop(socket);
        mock.wait_for_dropped_streams(1, Duration::from_secs(2))
            .await;
    }

    #[tokio::test]
    #[should_panic(expected = "expected 1 chat request(s)")]
    async fn wait_for_requests_times_out_clearly() {
        let mock = MockLlm::start().await;
        mock.wait_for_requests(1, Duration::from_millis(20)).await;
    }
}
