//! End-to-end tests of the client against the scripted mock server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use maia_llm::{
    ApiKey, ChatMessage, ChatRequest, Completion, Delta, FinishReason, LlmClient, LlmConfig,
    LlmError, ToolCall, ToolSpec, Usage,
};
use maia_test_support::{
    DONE, MockLlm, Reply, chunk, context_exceeded, cut_stream, error_reply, finish_reply,
    mid_stream_error, rate_limited, reasoning_field_then_text, reasoning_then_text, role_chunk,
    slow_text, sse_chunk, text_chunks, text_reply, tool_calls_reply,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn config(url: &str) -> LlmConfig {
    LlmConfig {
        base_url: url.to_owned(),
        retry_base: Duration::from_millis(10),
        request_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
        ..LlmConfig::default()
    }
}

fn client(mock: &MockLlm) -> LlmClient {
    LlmClient::new(config(&mock.url())).unwrap()
}

fn request() -> ChatRequest {
    ChatRequest {
        model: "mock-model".into(),
        messages: vec![ChatMessage::system("be brief"), ChatMessage::user("hi")],
        tools: vec![],
        max_tokens: None,
        cache: false,
        reasoning_effort: None,
    }
}

async fn run(client: &LlmClient) -> (Result<Completion, LlmError>, Vec<Delta>) {
    let mut deltas = Vec::new();
    let cancel = CancellationToken::new();
    let result = client
        .stream_chat(&request(), &cancel, &mut |d| deltas.push(d))
        .await;
    (result, deltas)
}

#[tokio::test]
async fn streamed_text_in_order_with_usage() {
    let mock = MockLlm::start().await;
    mock.push(text_chunks(
        &["Hel", "lo, ", "wor", "ld"],
        Duration::from_millis(2),
    ));
    let (result, deltas) = run(&client(&mock)).await;
    let done = result.unwrap();
    assert_eq!(
        deltas,
        ["Hel", "lo, ", "wor", "ld"]
            .map(|s| Delta::Text(s.into()))
            .to_vec()
    );
    assert_eq!(done.text, "Hello, world");
    assert_eq!(done.finish_reason, Some(FinishReason::Stop));
    assert_eq!(
        done.usage,
        Some(Usage {
            prompt_tokens: 42,
            completion_tokens: 7,
            total_tokens: 49,
            ..Usage::default()
        })
    );
    let body = &mock.requests()[0];
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["messages"][1], json!({"role":"user","content":"hi"}));
    assert!(body.get("tools").is_none());
}

#[tokio::test]
async fn deltas_arrive_before_the_stream_ends() {
    let mock = MockLlm::start().await;
    mock.push(text_chunks(&["a", "b", "c"], Duration::from_millis(150)));
    let client = client(&mock);
    let start = Instant::now();
    let mut first_at = None;
    let cancel = CancellationToken::new();
    client
        .stream_chat(&request(), &cancel, &mut |_| {
            first_at.get_or_insert_with(|| start.elapsed());
        })
        .await
        .unwrap();
    let total = start.elapsed();
    assert!(
        first_at.unwrap() + Duration::from_millis(200) < total,
        "{first_at:?} {total:?}"
    );
}

#[tokio::test]
async fn tool_calls_assembled() {
    let mock = MockLlm::start().await;
    mock.push(tool_calls_reply(&[
        ("call_A", "read_file", json!({"path": "src/main.rs"})),
        ("call_B", "shell", json!({"cmd": "ls -la"})),
    ]));
    let client = client(&mock);
    let mut req = request();
    req.tools.push(ToolSpec {
        name: "read_file".into(),
        description: "Read a file".into(),
        parameters: json!({"type":"object","properties":{"path":{"type":"string"}}}),
    });
    req.max_tokens = Some(256);
    let mut deltas = Vec::new();
    let done = client
        .stream_chat(&req, &CancellationToken::new(), &mut |d| deltas.push(d))
        .await
        .unwrap();
    assert_eq!(
        deltas,
        vec![
            Delta::ToolCallStarted {
                index: 0,
                id: "call_A".into(),
                name: "read_file".into()
            },
            Delta::ToolCallStarted {
                index: 1,
                id: "call_B".into(),
                name: "shell".into()
            },
        ]
    );
    assert_eq!(done.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(
        done.tool_calls,
        vec![
            ToolCall {
                id: "call_A".into(),
                name: "read_file".into(),
                arguments: json!({"path": "src/main.rs"}).to_string()
            },
            ToolCall {
                id: "call_B".into(),
                name: "shell".into(),
                arguments: json!({"cmd": "ls -la"}).to_string()
            },
        ]
    );
    assert_eq!(done.usage.unwrap().total_tokens, 49);
    let body = &mock.requests()[0];
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "read_file");
    assert_eq!(body["max_tokens"], 256);
}

#[tokio::test]
async fn reasoning_both_fields() {
    let mock = MockLlm::start().await;
    mock.push(reasoning_then_text("Let me think.", "42"));
    mock.push(reasoning_field_then_text("reasoning", "Hmm", "ok"));
    let client = client(&mock);
    let (r, deltas) = run(&client).await;
    let done = r.unwrap();
    assert_eq!(done.reasoning, "Let me think.");
    assert_eq!(done.text, "42");
    assert!(matches!(deltas[0], Delta::Reasoning(_)));
    let (r, _) = run(&client).await;
    let done = r.unwrap();
    assert_eq!((done.reasoning.as_str(), done.text.as_str()), ("Hmm", "ok"));
}

#[tokio::test]
async fn finish_reason_length() {
    let mock = MockLlm::start().await;
    mock.push(finish_reply("trunc", "length"));
    let (r, _) = run(&client(&mock)).await;
    assert_eq!(r.unwrap().finish_reason, Some(FinishReason::Length));
}

#[tokio::test]
async fn event_split_mid_line_with_crlf() {
    let mock = MockLlm::start().await;
    let first = sse_chunk(&role_chunk()).replace("\n\n", "\r\n\r\n");
    let text = sse_chunk(&chunk(json!({"content": "split"}), None)).replace("\n\n", "\r\n\r\n");
    let (a, b) = text.split_at(17);
    mock.push(Reply::Stream {
        pieces: vec![
            first,
            a.to_owned(),
            b.to_owned(),
            sse_chunk(&chunk(json!({}), Some("stop"))),
            "data: [DO".to_owned(),
            "NE]\n\n".to_owned(),
        ],
        gap: Duration::from_millis(5),
    });
    let (r, deltas) = run(&client(&mock)).await;
    assert_eq!(r.unwrap().text, "split");
    assert_eq!(deltas, vec![Delta::Text("split".into())]);
}

#[tokio::test]
async fn rate_limit_retry_after_then_success() {
    for litellm_header in [false, true] {
        let mock = MockLlm::start().await;
        mock.push(rate_limited(1, litellm_header));
        mock.push(text_reply("ok"));
        let start = Instant::now();
        let (r, deltas) = run(&client(&mock)).await;
        assert_eq!(r.unwrap().text, "ok");
        assert!(start.elapsed() >= Duration::from_secs(1));
        match &deltas[0] {
            Delta::Retrying {
                attempt,
                wait,
                reason,
            } => {
                assert_eq!(*attempt, 1);
                assert_eq!(*wait, Duration::from_secs(1));
                assert!(reason.contains("rate limited"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(mock.requests().len(), 2);
    }
}

#[tokio::test]
async fn repeated_500_gives_up_after_max_retries() {
    let mock = MockLlm::start().await;
    for _ in 0..4 {
        mock.push(error_reply(500, "upstream exploded"));
    }
    let (r, deltas) = run(&client(&mock)).await;
    match r {
        Err(LlmError::Server { status, message }) => {
            assert_eq!(status, 500);
            assert_eq!(message, "upstream exploded");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(mock.requests().len(), 4);
    let waits: Vec<_> = deltas
        .iter()
        .map(|d| match d {
            Delta::Retrying { attempt, wait, .. } => (*attempt, wait.as_millis()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(waits, vec![(1, 10), (2, 20), (3, 40)]);
}

#[tokio::test]
async fn context_exceeded_is_not_retried() {
    let mock = MockLlm::start().await;
    mock.push(context_exceeded());
    mock.push(text_reply("never"));
    let (r, deltas) = run(&client(&mock)).await;
    assert!(
        matches!(r, Err(LlmError::ContextWindowExceeded { .. })),
        "{r:?}"
    );
    assert!(deltas.is_empty());
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn auth_error_is_typed() {
    let mock = MockLlm::start().await;
    mock.push(error_reply(401, "Authentication Error, invalid key"));
    let (r, _) = run(&client(&mock)).await;
    assert!(
        matches!(r, Err(LlmError::Authentication { status: 401, .. })),
        "{r:?}"
    );
}

#[tokio::test]
async fn mid_stream_error_object() {
    let mock = MockLlm::start().await;
    mock.push(mid_stream_error(
        "partial",
        "litellm.APIConnectionError: overloaded",
    ));
    mock.push(text_reply("not used"));
    let (r, deltas) = run(&client(&mock)).await;
    match r {
        Err(LlmError::StreamInterrupted { message }) => {
            assert_eq!(message, "litellm.APIConnectionError: overloaded")
        }
        other => panic!("{other:?}"),
    }
    assert!(!deltas.is_empty());
    assert_eq!(mock.requests().len(), 1, "must not retry after deltas");
}

#[tokio::test]
async fn cut_stream_is_interrupted() {
    let mock = MockLlm::start().await;
    mock.push(cut_stream("half an ans"));
    let (r, _) = run(&client(&mock)).await;
    assert!(
        matches!(r, Err(LlmError::StreamInterrupted { .. })),
        "{r:?}"
    );
}

#[tokio::test]
async fn finish_reason_without_done_is_accepted() {
    let mock = MockLlm::start().await;
    mock.push(Reply::Stream {
        pieces: vec![
            sse_chunk(&chunk(json!({"content": "fine"}), None)),
            sse_chunk(&chunk(json!({}), Some("stop"))),
        ],
        gap: Duration::ZERO,
    });
    let (r, _) = run(&client(&mock)).await;
    assert_eq!(r.unwrap().text, "fine");
}

#[tokio::test]
async fn invalid_json_chunk_is_an_error() {
    let mock = MockLlm::start().await;
    mock.push(Reply::Stream {
        pieces: vec!["data: {oops\n\n".to_owned(), DONE.to_owned()],
        gap: Duration::ZERO,
    });
    let (r, _) = run(&client(&mock)).await;
    assert!(matches!(r, Err(LlmError::InvalidResponse { .. })), "{r:?}");
}

#[tokio::test]
async fn cancellation_during_slow_stream() {
    let mock = MockLlm::start().await;
    mock.push(slow_text(100, Duration::from_millis(50)));
    let client = client(&mock);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let mut count = 0usize;
    let started = std::sync::Arc::new(tokio::sync::Notify::new());
    let started2 = started.clone();
    let canceller = tokio::spawn(async move {
        started2.notified().await;
        tokio::time::sleep(Duration::from_millis(120)).await;
        trigger.cancel();
        Instant::now()
    });
    let r = client
        .stream_chat(&request(), &cancel, &mut |_| {
            count += 1;
            if count == 1 {
                started.notify_one();
            }
        })
        .await;
    let returned = Instant::now();
    let cancelled_at = canceller.await.unwrap();
    assert!(matches!(r, Err(LlmError::Cancelled)), "{r:?}");
    assert!(returned.duration_since(cancelled_at) < Duration::from_millis(100));
    assert!((1..10).contains(&count), "{count}");
    mock.wait_for_dropped_streams(1, Duration::from_secs(2))
        .await;
}

#[tokio::test]
async fn cancellation_while_hanging_and_during_retry_wait() {
    let mock = MockLlm::start().await;
    mock.push(Reply::Hang);
    let client = client(&mock);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let server = mock.clone();
    // Cancelled once the server holds the request: mid-flight, not before.
    let canceller = tokio::spawn(async move {
        server.wait_for_requests(1, Duration::from_secs(5)).await;
        trigger.cancel();
        Instant::now()
    });
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        client.stream_chat(&request(), &cancel, &mut |_| {}),
    )
    .await
    .expect("the cancel ends a hanging stream");
    let cancelled_at = canceller.await.unwrap();
    assert!(matches!(r, Err(LlmError::Cancelled)), "{r:?}");
    assert!(cancelled_at.elapsed() < Duration::from_millis(300));
    assert_eq!(mock.requests().len(), 1);
    mock.wait_for_dropped_streams(1, Duration::from_secs(2))
        .await;

    // A long Retry-After wait is cut short by cancellation too.
    mock.push(rate_limited(30, true));
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let start = Instant::now();
    let r = client
        .stream_chat(&request(), &cancel, &mut |d| {
            if matches!(d, Delta::Retrying { .. }) {
                trigger.cancel();
            }
        })
        .await;
    assert!(matches!(r, Err(LlmError::Cancelled)));
    assert!(start.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn bearer_header_only_with_key() {
    let mock = MockLlm::start().await;
    mock.push(text_reply("a"));
    mock.push(text_reply("b"));
    let with_key = LlmClient::new(LlmConfig {
        api_key: Some(ApiKey::new("sk-test-1234")),
        ..config(&mock.url())
    })
    .unwrap();
    with_key
        .stream_chat(&request(), &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    run(&client(&mock)).await.0.unwrap();
    let headers = mock.headers();
    let auth = |i: usize| {
        headers[i]
            .iter()
            .find(|(k, _)| k == "authorization")
            .map(|(_, v)| v.clone())
    };
    assert_eq!(auth(0).as_deref(), Some("Bearer sk-test-1234"));
    assert_eq!(auth(1), None);
}

#[tokio::test]
async fn extra_headers_are_sent_and_an_authorization_among_them_wins() {
    let mock = MockLlm::start().await;
    mock.require_key(Some("sk-gateway"));
    mock.push(text_reply("a"));
    let client = LlmClient::new(LlmConfig {
        api_key: Some(ApiKey::new("sk-settings")),
        headers: vec![
            ("Authorization".into(), ApiKey::new("Bearer sk-gateway")),
            ("x-tag".into(), ApiKey::new("t-1")),
        ],
        ..config(&mock.url())
    })
    .unwrap();
    assert!(!format!("{client:?}{:?}", client.config()).contains("sk-gateway"));
    assert_eq!(client.list_models().await.unwrap().len(), 1);
    client
        .stream_chat(&request(), &CancellationToken::new(), &mut |_| {})
        .await
        .unwrap();
    let headers = mock.headers();
    let sent = &headers[0];
    let auth: Vec<_> = sent.iter().filter(|(k, _)| k == "authorization").collect();
    assert_eq!(auth.len(), 1, "{sent:?}");
    assert_eq!(auth[0].1, "Bearer sk-gateway");
    assert!(sent.iter().any(|(k, v)| k == "x-tag" && v == "t-1"));
}

#[tokio::test]
async fn connection_refused_after_retries() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let client = LlmClient::new(LlmConfig {
        max_retries: 2,
        ..config(&url)
    })
    .unwrap();
    let (r, deltas) = run(&client).await;
    assert!(
        matches!(
            r,
            Err(LlmError::Connection {
                kind: maia_llm::ConnectFailure::Refused,
                ..
            })
        ),
        "{r:?}"
    );
    assert_eq!(deltas.len(), 2);
    let text = r.unwrap_err().to_string();
    assert!(!text.contains('\n'));
}

#[tokio::test]
async fn list_models() {
    let mock = MockLlm::start().await;
    let client = client(&mock);
    let models = client.list_models().await.unwrap();
    assert_eq!(models.len(), 1);
    assert_eq!(models[0].id, "mock-model");
    assert_eq!(models[0].max_input_tokens, Some(32768));
    mock.set_models(vec![
        json!({"id":"a","max_input_tokens":8192.0}),
        json!({"id":"b"}),
    ]);
    let models = client.list_models().await.unwrap();
    assert_eq!(models[0].max_input_tokens, Some(8192));
    assert_eq!(models[1].max_input_tokens, None);
}

#[tokio::test]
async fn idle_timeout_interrupts() {
    let mock = MockLlm::start().await;
    mock.push(Reply::Hang);
    let client = LlmClient::new(LlmConfig {
        idle_timeout: Duration::from_millis(100),
        ..config(&mock.url())
    })
    .unwrap();
    let (r, _) = run(&client).await;
    assert!(
        matches!(r, Err(LlmError::StreamInterrupted { .. })),
        "{r:?}"
    );
}
