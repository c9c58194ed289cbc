//! Model endpoint failures: retries, rate limits, broken streams, an
//! unreachable server, model discovery and the API key. A failed model
//! request ends the turn with `end_turn` and a message to the user, never a
//! JSON-RPC error; partial text already streamed is kept.

use std::time::{Duration, Instant};

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, Options, agent_text, updates_of};

fn with(settings: Value) -> Options {
    Options {
        settings,
        ..Default::default()
    }
}

/// Prompts and returns the `end_turn` response's updates' text.
async fn turn_text(maia: &mut Maia, sid: &str, text: &str) -> String {
    let id = maia.prompt(sid, text).await;
    let (resp, before) = maia.response(id).await;
    assert_eq!(
        resp["result"]["stopReason"], "end_turn",
        "a model failure is not a protocol error: {resp}"
    );
    assert!(resp.get("error").is_none(), "{resp}");
    for m in &before {
        assert_eq!(m["method"], "session/update", "{m}");
        assert_eq!(m["params"]["sessionId"], sid);
    }
    agent_text(&before)
}

/// The failure message the user sees.
fn assert_failure_message(text: &str, url: &str, error: &str) {
    assert!(text.contains("Model request failed"), "{text}");
    assert!(text.contains(url), "names the endpoint {url}: {text}");
    assert!(text.contains(error), "names the error {error:?}: {text}");
}

#[tokio::test]
async fn rate_limit_with_retry_after_is_waited_out() {
    for litellm_header in [false, true] {
        let (mut maia, sid) = Maia::ready().await;
        maia.mock.push(mock::rate_limited(1, litellm_header));
        maia.mock.push(mock::text_reply("after the wait"));
        let start = Instant::now();
        let id = maia.prompt(&sid, "hi").await;
        let (resp, before) = maia.response(id).await;
        assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
        assert_eq!(agent_text(&before), "after the wait");
        assert!(
            start.elapsed() >= Duration::from_millis(900),
            "Retry-After (litellm header: {litellm_header}) honoured, waited {:?}",
            start.elapsed()
        );
        assert_eq!(maia.mock.requests().len(), 2);
        // The retry is visible as a thought, not as answer text.
        let thoughts = updates_of(&before, "agent_thought_chunk");
        assert!(
            thoughts
                .iter()
                .any(|t| t["content"]["text"].as_str().unwrap().contains("retry")),
            "{thoughts:?}"
        );
    }
}

#[tokio::test]
async fn repeated_server_errors_end_the_turn_with_a_message() {
    let (mut maia, sid) = Maia::ready().await;
    for _ in 0..6 {
        maia.mock
            .push(mock::error_reply(500, "upstream is on fire"));
    }
    let text = turn_text(&mut maia, &sid, "hi").await;
    assert_failure_message(&text, &maia.mock.url(), "upstream is on fire");
    assert!(text.contains("500"), "{text}");
    assert_eq!(maia.mock.requests().len(), 1 + 3, "1 + llm_max_retries");
    assert_eq!(maia.mock.pending_replies(), 2);
}

#[tokio::test]
async fn llm_max_retries_bounds_the_attempts() {
    let (mut maia, sid) = Maia::ready_with(with(json!({"llm_max_retries": 1}))).await;
    for _ in 0..4 {
        maia.mock.push(mock::error_reply(503, "busy"));
    }
    let text = turn_text(&mut maia, &sid, "hi").await;
    assert_failure_message(&text, &maia.mock.url(), "busy");
    assert_eq!(maia.mock.requests().len(), 2);
}

#[tokio::test]
async fn rate_limit_without_retry_after_backs_off_then_gives_up() {
    let (mut maia, sid) = Maia::ready().await;
    for _ in 0..5 {
        maia.mock.push(mock::error_reply(429, "slow down"));
    }
    let text = turn_text(&mut maia, &sid, "hi").await;
    assert_failure_message(&text, &maia.mock.url(), "slow down");
    assert!(text.contains("rate limit"), "{text}");
    assert_eq!(maia.mock.requests().len(), 4);
}

#[tokio::test]
async fn empty_stream_ends_with_a_message() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::stream(Vec::new()));
    maia.mock.push(mock::text_reply("next"));
    let text = turn_text(&mut maia, &sid, "hi").await;
    assert_failure_message(&text, &maia.mock.url(), "[DONE]");
    assert_eq!(turn_text(&mut maia, &sid, "again").await, "next");
}

#[tokio::test]
async fn context_window_exceeded_compacts_once_and_retries() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::text_reply("earlier answer"));
    turn_text(&mut maia, &sid, "earlier question").await;
    maia.mock.push(mock::context_exceeded());
    maia.mock
        .push(mock::text_reply("## Project context\nSUMMARY-TEXT"));
    maia.mock.push(mock::text_reply("answer after compaction"));
    let text = turn_text(&mut maia, &sid, "a very long prompt").await;
    assert_eq!(text, "answer after compaction");
    let requests = maia.mock.requests()[1..].to_vec();
    assert_eq!(requests.len(), 3);
    // The summary request: no tools, at most 4,000 tokens and a quarter of
    // the window the error told (8,192), the five headings asked.
    assert_eq!(requests[1]["max_tokens"], 2048);
    assert!(requests[1].to_string().contains("earlier question"));
    assert!(!requests[1].to_string().contains("a very long prompt"));
    assert!(requests[1].get("tools").is_none());
    let ask = requests[1]["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        ask.contains("Next steps") && ask.contains("Current goal"),
        "{ask}"
    );
    // The retry starts from the summary.
    let retry = requests[2]["messages"].as_array().unwrap();
    assert!(
        retry[0]["content"]
            .as_str()
            .unwrap()
            .contains("SUMMARY-TEXT")
    );
    assert_eq!(retry.len(), 2, "system + the prompt: {retry:?}");
    assert_eq!(retry[1]["content"], "a very long prompt");
}

#[tokio::test]
async fn context_window_exceeded_again_is_explained() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::text_reply("earlier answer"));
    turn_text(&mut maia, &sid, "earlier question").await;
    maia.mock.push(mock::context_exceeded());
    maia.mock.push(mock::text_reply("summary"));
    maia.mock.push(mock::context_exceeded());
    let text = turn_text(&mut maia, &sid, "a very long prompt").await;
    assert_failure_message(&text, &maia.mock.url(), "maximum context length");
    assert!(text.contains("context window"), "{text}");
    assert_eq!(maia.mock.requests().len(), 4, "compacted once, not again");
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock
        .push(mock::error_reply(400, "unknown parameter: foo"));
    maia.mock.push(mock::text_reply("never used"));
    let text = turn_text(&mut maia, &sid, "hi").await;
    assert_failure_message(&text, &maia.mock.url(), "unknown parameter: foo");
    assert_eq!(maia.mock.requests().len(), 1);
}

/// A broken stream: the partial text was streamed, a failure message
/// follows, the turn ends; the next turn works and carries the partial text.
async fn partial_answer_is_kept(reply: mock::Reply, error: &str) {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(reply);
    maia.mock.push(mock::text_reply("never used"));
    let text = turn_text(&mut maia, &sid, "hi").await;
    assert!(
        text.starts_with("The answer is partial"),
        "partial text first: {text}"
    );
    assert_failure_message(&text, &maia.mock.url(), error);
    assert_eq!(
        maia.mock.requests().len(),
        1,
        "not retried once text was shown"
    );

    // The unused scripted reply serves the next turn.
    let text = turn_text(&mut maia, &sid, "go on").await;
    assert_eq!(text, "never used");
    let messages = maia.mock.requests()[1]["messages"]
        .as_array()
        .unwrap()
        .clone();
    let roles: Vec<_> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "user"],
        "{messages:?}"
    );
    assert_eq!(messages[2]["content"], "The answer is partial");
}

#[tokio::test]
async fn error_object_mid_stream() {
    partial_answer_is_kept(
        mock::mid_stream_error("The answer is partial", "provider overloaded mid-stream"),
        "provider overloaded mid-stream",
    )
    .await;
}

#[tokio::test]
async fn stream_cut_without_done() {
    partial_answer_is_kept(mock::cut_stream("The answer is partial"), "interrupted").await;
}

#[tokio::test]
async fn invalid_json_chunk_ends_cleanly() {
    let (mut maia, sid) = Maia::ready().await;
    let chunk = |text: &str| mock::sse_chunk(&mock::chunk(json!({"content": text}), None));
    maia.mock.push(mock::stream(vec![
        mock::sse_chunk(&mock::role_chunk()),
        chunk("Before "),
        "data: {\"choices\": [ this is not json\n\n".to_owned(),
        chunk("after"),
        mock::DONE.to_owned(),
    ]));
    let text = turn_text(&mut maia, &sid, "hi").await;
    assert!(text.starts_with("Before "), "{text}");
    assert!(!text.contains("after"), "{text}");
    assert_failure_message(&text, &maia.mock.url(), "not JSON");
    assert_eq!(maia.mock.requests().len(), 1);
    maia.mock.push(mock::text_reply("fine again"));
    assert_eq!(turn_text(&mut maia, &sid, "again").await, "fine again");
}

#[tokio::test]
async fn invalid_json_first_chunk_ends_cleanly() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::stream(vec![
        "data: <html>502 Bad Gateway</html>\n\n".to_owned(),
    ]));
    maia.mock.push(mock::text_reply("never used"));
    let text = turn_text(&mut maia, &sid, "hi").await;
    assert_failure_message(&text, &maia.mock.url(), "502 Bad Gateway");
    assert_eq!(maia.mock.requests().len(), 1);
}

/// A new session that could not answer is refused with `auth_required`
/// (issue 14), naming the endpoint and the cause; see `acp_auth` for the
/// login that follows.
async fn refused_session(settings: Value) -> String {
    let mut maia = Maia::start_with(with(settings)).await;
    maia.initialize().await;
    let cwd = maia.cwd();
    let start = Instant::now();
    let id = maia
        .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "took {:?}",
        start.elapsed()
    );
    assert_eq!(resp["error"]["code"], -32000, "{resp}");
    assert!(maia.mock.requests().is_empty());
    resp["error"]["message"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn unreachable_endpoint() {
    let url = "http://127.0.0.1:9";
    let text = refused_session(json!({"LiteLLM_URL": url})).await;
    assert!(text.contains(url), "{text}");
    assert!(text.contains("connection refused"), "{text}");
    assert!(text.contains("maia login"), "{text}");
}

#[tokio::test]
async fn unparsable_endpoint_url() {
    let text = refused_session(json!({"LiteLLM_URL": "not a url"})).await;
    assert!(text.contains("`not a url"), "{text}");
    assert!(text.contains("`LiteLLM_URL`"), "tells what to fix: {text}");
    assert!(!text.contains("``"), "no empty endpoint: {text}");
}

#[tokio::test]
async fn without_a_model_the_first_listed_is_used() {
    let mut maia = Maia::start_with(with(json!({"model": null}))).await;
    maia.mock
        .set_models(vec![json!({"id": "alpha"}), json!({"id": "beta"})]);
    maia.initialize().await;
    let sid = maia.new_session().await;
    maia.mock.push(mock::text_reply("hello"));
    maia.mock.push(mock::text_reply("again"));
    assert_eq!(turn_text(&mut maia, &sid, "hi").await, "hello");
    assert_eq!(turn_text(&mut maia, &sid, "hi").await, "again");
    let requests = maia.mock.requests();
    assert_eq!(requests[0]["model"], "alpha");
    assert_eq!(requests[1]["model"], "alpha");
}

#[tokio::test]
async fn without_a_model_and_an_empty_list_the_turn_explains() {
    let mut maia = Maia::start_with(with(json!({"model": null}))).await;
    maia.mock.set_models(Vec::new());
    maia.initialize().await;
    let sid = maia.new_session().await;
    let text = turn_text(&mut maia, &sid, "hi").await;
    assert!(text.contains("no model is configured"), "{text}");
    assert!(text.contains(&maia.mock.url()), "{text}");
    assert!(text.contains("`model`"), "tells how to fix it: {text}");
    assert!(maia.mock.requests().is_empty());

    // Once the server lists a model, the same session recovers.
    maia.mock.set_models(vec![json!({"id": "late"})]);
    maia.mock.push(mock::text_reply("ok"));
    assert_eq!(turn_text(&mut maia, &sid, "hi").await, "ok");
    assert_eq!(maia.mock.requests()[0]["model"], "late");
}

#[tokio::test]
async fn without_a_model_and_a_failing_list_the_turn_explains() {
    let (mut maia, sid) =
        Maia::ready_with(with(json!({"model": null, "LiteLLM_Models": "/v1/nope"}))).await;
    let text = turn_text(&mut maia, &sid, "hi").await;
    assert!(text.contains("no model is configured"), "{text}");
    assert!(
        text.contains(&format!("{}/v1/nope", maia.mock.url())),
        "{text}"
    );
    assert!(text.contains("404"), "{text}");
    assert!(maia.mock.requests().is_empty());
}

#[tokio::test]
async fn api_key_is_sent_and_never_shown() {
    let key = "sk-protocol-test-3f9a1c7e";
    let mut maia =
        Maia::start_capturing_stderr(with(json!({"LiteLLM_API_Key": key})), "trace").await;
    maia.initialize().await;
    let sid = maia.new_session().await;
    maia.mock.push(mock::text_reply("authorized"));
    assert_eq!(turn_text(&mut maia, &sid, "hi").await, "authorized");
    // A refusal and a failure that echo the request do not leak it either.
    maia.mock.push(mock::error_reply(401, "invalid api key"));
    let text = turn_text(&mut maia, &sid, "hi").await;
    assert!(text.contains("API key"), "{text}");
    for _ in 0..4 {
        maia.mock.push(mock::error_reply(500, "boom"));
    }
    turn_text(&mut maia, &sid, "hi").await;
    assert_eq!(
        maia.mock.requests().len(),
        1 + 1 + 4,
        "a 401 is not retried"
    );

    let headers = maia.mock.headers();
    assert!(!headers.is_empty());
    for request in &headers {
        let auth: Vec<_> = request
            .iter()
            .filter(|(name, _)| name == "authorization")
            .map(|(_, value)| value.as_str())
            .collect();
        assert_eq!(auth, [format!("Bearer {key}").as_str()]);
    }
    for m in &maia.seen {
        assert!(
            !m.to_string().contains(key),
            "the key leaked on stdout: {m}"
        );
    }
    maia.close_stdin();
    maia.wait_exit(Duration::from_secs(5)).await;
    let stderr = maia.stderr.lock().unwrap().clone();
    assert!(!stderr.is_empty(), "stderr was captured");
    assert!(!stderr.contains(key), "the key leaked on stderr");
}

#[tokio::test]
async fn without_a_key_no_authorization_header() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::text_reply("ok"));
    turn_text(&mut maia, &sid, "hi").await;
    assert!(
        maia.mock.headers()[0]
            .iter()
            .all(|(name, _)| name != "authorization")
    );
}

#[tokio::test]
async fn a_first_prompt_rejected_for_its_length_is_explained_not_summarised() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::context_exceeded());
    maia.mock.push(mock::text_reply("never used"));
    let text = turn_text(&mut maia, &sid, "a very long prompt").await;
    assert!(
        text.contains("nothing before your message to summarise") && text.contains("8192 tokens"),
        "{text}"
    );
    assert_eq!(
        maia.mock.requests().len(),
        1,
        "no summary of the prompt itself"
    );
    assert_eq!(maia.mock.pending_replies(), 1);
}
