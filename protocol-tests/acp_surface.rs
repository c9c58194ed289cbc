//! The ACP 1.20 surface beyond prompts (issue 22): `logout`,
//! `$/cancel_request` of MAIA's own slow requests, tool-call names, the
//! reasoning-effort and boolean config options, the turn's usage
//! (`_meta.maia.usage`), `session/set_title` and the session archive.

use std::time::Duration;

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, Options, choose, updates_of};

fn with(settings: Value) -> Options {
    Options {
        settings,
        ..Options::default()
    }
}

fn settings_file(maia: &Maia) -> std::path::PathBuf {
    maia.home.path().join(".maia/settings.json")
}

async fn new_session_response(maia: &mut Maia) -> Value {
    let cwd = maia.cwd();
    let id = maia
        .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    maia.response(id).await.0
}

#[tokio::test]
async fn logout_forgets_the_saved_key_and_the_next_session_needs_a_login() {
    let mut maia = Maia::start_with(with(json!({"LiteLLM_API_Key": "sk-saved"}))).await;
    maia.mock.require_key(Some("sk-saved"));
    let init = maia.initialize().await;
    assert_eq!(
        init["result"]["agentCapabilities"]["auth"]["logout"],
        json!({}),
        "{init}"
    );
    let resp = new_session_response(&mut maia).await;
    assert!(resp["result"]["sessionId"].is_string(), "{resp}");
    let before: Value =
        serde_json::from_str(&std::fs::read_to_string(settings_file(&maia)).unwrap()).unwrap();

    let id = maia.request("logout", json!({})).await;
    let (resp, _) = maia.response_with(id, |_| None).await;
    assert_eq!(resp["result"], json!({}), "{resp}");

    // Only the key left the file.
    let after: Value =
        serde_json::from_str(&std::fs::read_to_string(settings_file(&maia)).unwrap()).unwrap();
    let mut expected = before.clone();
    expected.as_object_mut().unwrap().remove("LiteLLM_API_Key");
    assert_eq!(after, expected);

    let resp = new_session_response(&mut maia).await;
    assert_eq!(resp["error"]["code"], -32000, "{resp}");
    // Logging out twice is still `{}`.
    let id = maia.request("logout", json!({})).await;
    assert_eq!(maia.response(id).await.0["result"], json!({}));
}

#[tokio::test]
async fn a_cancelled_slow_load_answers_32800_and_nothing_follows() {
    let (mut maia, sid) = Maia::ready().await;
    maia.answered_turn(&sid, "hello", "an answer to replay")
        .await;
    let mut maia = maia.restart().await;
    maia.initialize().await;
    // A slow proxy: the load waits for its model list.
    maia.mock.set_models_delay(Duration::from_secs(2));
    let cwd = maia.cwd();
    let id = maia
        .request(
            "session/load",
            json!({"sessionId": sid, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    maia.notify("$/cancel_request", json!({"requestId": id}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["error"]["code"], -32800, "{resp}");
    assert!(resp.get("result").is_none(), "{resp}");
    // Nothing of the session follows, even once the proxy has answered.
    if let Some(late) = maia.next_within(Duration::from_secs(3)).await {
        panic!("a message followed the cancelled load: {late}");
    }
    // The session was not left open: a prompt does not find it, and a new
    // load opens it (its journal was released).
    let prompt = maia.prompt(&sid, "are you there?").await;
    assert_eq!(maia.response(prompt).await.0["error"]["code"], -32002);
    maia.mock.set_models_delay(Duration::ZERO);
    let (resp, replay) = maia.load(&sid).await;
    assert!(resp["result"].is_object(), "{resp}");
    assert!(!updates_of(&replay, "agent_message_chunk").is_empty());
}

#[tokio::test]
async fn cancel_request_for_an_unknown_or_answered_request_is_ignored() {
    let (mut maia, _sid) = Maia::ready().await;
    maia.notify("$/cancel_request", json!({"requestId": 999}))
        .await;
    maia.notify("$/cancel_request", json!({"requestId": 1}))
        .await;
    let id = maia.request("session/list", json!({})).await;
    let (resp, before) = maia.response(id).await;
    assert!(resp["result"]["sessions"].is_array(), "{resp}");
    assert!(before.is_empty(), "{before:?}");
}

#[tokio::test]
async fn a_cancelled_authenticate_probe_answers_32800() {
    let mut maia = Maia::start().await;
    maia.initialize().await;
    maia.mock.set_models_delay(Duration::from_secs(2));
    let id = maia
        .request("authenticate", json!({"methodId": "agent"}))
        .await;
    maia.notify("$/cancel_request", json!({"requestId": id}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["error"]["code"], -32800, "{resp}");
    if let Some(late) = maia.next_within(Duration::from_secs(3)).await {
        panic!("a message followed the cancelled authenticate: {late}");
    }
}

#[tokio::test]
async fn every_tool_call_carries_the_tool_s_real_name() {
    let url = mock::mock_mcp::spawn_http().await.unwrap();
    let mut maia = Maia::start().await;
    maia.initialize().await;
    let cwd = maia.cwd();
    let id = maia
        .request(
            "session/new",
            json!({"cwd": cwd, "mcpServers": [{"type": "http", "name": "web", "url": url, "headers": []}]}),
        )
        .await;
    let sid = maia.response(id).await.0["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    std::fs::write(maia.path("a.txt"), "alpha\n").unwrap();
    maia.mock.push(mock::tool_calls_reply(&[
        ("call_read", "Read", json!({"file_path": "a.txt"})),
        (
            "call_write",
            "Write",
            json!({"file_path": "b.txt", "content": "beta"}),
        ),
        ("call_mcp", "mcp__web__echo", json!({"text": "hi"})),
    ]));
    maia.mock.push(mock::text_reply("done"));
    let id = maia.prompt(&sid, "go").await;
    let (resp, before) = maia.response_with(id, choose("allow_once")).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let names = |messages: &[Value]| -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = updates_of(messages, "tool_call")
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap_or("<none>").to_owned(),
                    c["toolCallId"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        out.sort();
        out
    };
    let live = names(&before);
    let only_names = |calls: &[(String, String)]| -> Vec<String> {
        calls.iter().map(|(name, _)| name.clone()).collect()
    };
    assert_eq!(
        only_names(&live),
        ["Read", "Write", "mcp__web__echo"],
        "{before:?}"
    );
    // The permission questions name the tool too.
    let asked: Vec<&Value> = before
        .iter()
        .filter(|m| m["method"] == "session/request_permission")
        .collect();
    assert!(!asked.is_empty());
    for asked in asked {
        let call = &asked["params"]["toolCall"];
        let (name, _) = live
            .iter()
            .find(|(_, id)| call["toolCallId"] == json!(id))
            .unwrap();
        assert_eq!(call["name"], json!(name), "{asked}");
    }
    // And so does the replay of a load.
    let mut maia = maia.restart().await;
    maia.initialize().await;
    let (_, replay) = maia.load(&sid).await;
    assert_eq!(names(&replay), live, "{replay:?}");
    // A compaction shown as a tool call (no `session.compaction`) has one too.
    maia.mock.push(mock::text_reply("summary"));
    let (_, before) = maia.turn(&sid, "/compact").await;
    let compaction = updates_of(&before, "tool_call");
    assert_eq!(compaction.len(), 1, "{before:?}");
    assert_eq!(compaction[0]["name"], "Compact", "{before:?}");
}

/// The turn's usage in the prompt response: `_meta.maia.usage`, never at
/// the root, so the response has only the stable v1 schema's fields.
fn turn_usage(resp: &Value) -> &Value {
    let result = &resp["result"];
    let fields: Vec<&String> = result
        .as_object()
        .unwrap_or_else(|| panic!("no result in {resp}"))
        .keys()
        .collect();
    assert!(
        fields
            .iter()
            .all(|f| ["stopReason", "_meta"].contains(&f.as_str())),
        "a field outside the stable PromptResponse: {resp}"
    );
    &result["_meta"]["maia"]["usage"]
}

#[tokio::test]
async fn the_prompt_response_carries_the_turn_s_usage_in_its_meta_not_at_its_root() {
    let (mut maia, sid) = Maia::ready().await;
    let (resp, _) = maia.answered_turn(&sid, "hello", "hi").await;
    let (p, c) = (mock::MOCK_PROMPT_TOKENS, mock::MOCK_COMPLETION_TOKENS);
    assert!(resp["result"].get("usage").is_none(), "{resp}");
    assert!(
        resp["result"]["_meta"]["maia"]["userMessageId"].is_string(),
        "{resp}"
    );
    assert_eq!(
        *turn_usage(&resp),
        json!({"totalTokens": p + c, "inputTokens": p, "outputTokens": c}),
        "{resp}"
    );
    // Two requests in one turn add up; reasoning and cache figures are
    // passed on when the server reports them.
    let usage = json!({
        "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1, "model": "mock-model",
        "choices": [{"index": 0, "delta": {}}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 300, "total_tokens": 1300,
                  "completion_tokens_details": {"reasoning_tokens": 200},
                  "prompt_tokens_details": {"cached_tokens": 600},
                  "cache_creation_input_tokens": 50},
    });
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_g",
        "Glob",
        json!({"pattern": "*.nothing"}),
    )]));
    maia.mock.push(mock::stream(vec![
        mock::sse_chunk(&mock::role_chunk()),
        mock::sse_chunk(&mock::chunk(json!({"content": "found none"}), None)),
        mock::sse_chunk(&mock::chunk(json!({}), Some("stop"))),
        mock::sse_chunk(&usage),
        "data: [DONE]\n\n".to_owned(),
    ]));
    let id = maia.prompt(&sid, "look").await;
    let (resp, _) = maia.response_with(id, choose("allow_once")).await;
    assert_eq!(
        *turn_usage(&resp),
        json!({"totalTokens": 1300 + p + c, "inputTokens": 1000 + p, "outputTokens": 300 + c,
               "thoughtTokens": 200, "cachedReadTokens": 600, "cachedWriteTokens": 50}),
        "{resp}"
    );
    // A turn without a model request (a slash command) has none.
    let (resp, _) = maia.turn(&sid, "/help").await;
    assert!(turn_usage(&resp).is_null(), "{resp}");
}

fn listed(resp: &Value) -> Vec<(String, Value)> {
    resp["result"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("no sessions in {resp}"))
        .iter()
        .map(|s| (s["sessionId"].as_str().unwrap().to_owned(), s.clone()))
        .collect()
}

async fn list(maia: &mut Maia, params: Value) -> Vec<(String, Value)> {
    let id = maia.request("session/list", params).await;
    listed(&maia.response(id).await.0)
}

#[tokio::test]
async fn set_title_renames_like_rename_and_the_list_shows_it() {
    let mut maia = Maia::start().await;
    let init = maia.initialize().await;
    assert_eq!(
        init["result"]["agentCapabilities"]["sessionCapabilities"]["title"],
        json!({})
    );
    let sid = maia.new_session().await;
    maia.answered_turn(&sid, "hello", "hi").await;
    let id = maia
        .request(
            "session/set_title",
            json!({"sessionId": sid, "title": "Fix: the login bug?"}),
        )
        .await;
    let (resp, before) = maia.response(id).await;
    assert_eq!(
        resp["result"],
        json!({"title": "Fix the login bug"}),
        "{resp}"
    );
    // The update comes from the session's pump, the answer from the
    // request: either may be first.
    let info = match updates_of(&before, "session_info_update").pop() {
        Some(info) => info,
        None => maia
            .wait_for(|m| m["params"]["update"]["sessionUpdate"] == "session_info_update")
            .await
            .0["params"]["update"]
            .clone(),
    };
    assert_eq!(info["title"], "Fix the login bug", "{before:?}");
    let cwd = maia.cwd();
    let sessions = list(&mut maia, json!({"cwd": cwd})).await;
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].1["title"], "Fix the login bug");
    assert!(
        maia.path(".maia/.sessions/Fix the login bug.jsonl")
            .exists()
    );
    // The same path as `/rename`: the conversation goes on in that file.
    maia.answered_turn(&sid, "more", "sure").await;
    let journal = crate::harness::read(&maia.path(".maia/.sessions/Fix the login bug.jsonl"));
    assert!(journal.contains("sure"), "{journal}");

    for (params, code) in [
        (json!({"sessionId": sid, "title": "  "}), -32602),
        (json!({"sessionId": sid, "title": "???"}), -32602),
        (json!({"sessionId": "nope", "title": "x"}), -32002),
    ] {
        let id = maia.request("session/set_title", params.clone()).await;
        let (resp, _) = maia.response(id).await;
        assert_eq!(resp["error"]["code"], code, "{params}: {resp}");
    }
}

#[tokio::test]
async fn archived_sessions_leave_the_list_until_unarchived_and_it_persists() {
    let mut maia = Maia::start().await;
    let init = maia.initialize().await;
    assert_eq!(
        init["result"]["agentCapabilities"]["sessionCapabilities"]["archive"],
        json!({})
    );
    let a = maia.new_session().await;
    maia.answered_turn(&a, "first", "one").await;
    let b = maia.new_session().await;
    maia.answered_turn(&b, "second", "two").await;
    let cwd = maia.cwd();
    let ids = |sessions: &[(String, Value)]| -> Vec<String> {
        let mut ids: Vec<String> = sessions.iter().map(|(id, _)| id.clone()).collect();
        ids.sort();
        ids
    };
    let mut both = vec![a.clone(), b.clone()];
    both.sort();
    assert_eq!(ids(&list(&mut maia, json!({"cwd": cwd})).await), both);

    let id = maia
        .request("session/archive", json!({"sessionId": a}))
        .await;
    assert_eq!(maia.response(id).await.0["result"], json!({}));
    assert_eq!(
        ids(&list(&mut maia, json!({"cwd": cwd})).await),
        std::slice::from_ref(&b)
    );
    let only = list(&mut maia, json!({"cwd": cwd, "archived": "only"})).await;
    assert_eq!(ids(&only), std::slice::from_ref(&a));
    assert_eq!(only[0].1["archived"], true);
    let all = list(&mut maia, json!({"cwd": cwd, "archived": "include"})).await;
    assert_eq!(ids(&all), both);

    // Kept across a restart; unarchive brings it back.
    let mut maia = maia.restart().await;
    maia.initialize().await;
    assert_eq!(
        ids(&list(&mut maia, json!({"cwd": cwd})).await),
        std::slice::from_ref(&b)
    );
    let id = maia
        .request("session/unarchive", json!({"sessionId": a}))
        .await;
    assert_eq!(maia.response(id).await.0["result"], json!({}));
    let sessions = list(&mut maia, json!({"cwd": cwd})).await;
    assert_eq!(ids(&sessions), both);
    assert!(
        sessions.iter().all(|(_, s)| s.get("archived").is_none()),
        "{sessions:?}"
    );

    let id = maia
        .request("session/archive", json!({"sessionId": "nope"}))
        .await;
    assert_eq!(maia.response(id).await.0["error"]["code"], -32002);
    let id = maia
        .request("session/list", json!({"cwd": cwd, "archived": "sometimes"}))
        .await;
    assert_eq!(maia.response(id).await.0["error"]["code"], -32602);
}

/// The config option `id` of a result holding `configOptions`.
fn option<'a>(result: &'a Value, id: &str) -> Option<&'a Value> {
    result["configOptions"]
        .as_array()
        .unwrap_or_else(|| panic!("no configOptions in {result}"))
        .iter()
        .find(|o| o["id"] == id)
}

async fn set_option(maia: &mut Maia, sid: &str, params: Value) -> Value {
    let mut params = params;
    params["sessionId"] = json!(sid);
    let id = maia.request("session/set_config_option", params).await;
    maia.response(id).await.0
}

fn reasoning_model_info() -> Value {
    json!({"data": [{"model_name": "mock-model", "model_info": {"supports_reasoning": true}}]})
}

#[tokio::test]
async fn a_reasoning_effort_reaches_the_request_and_is_kept_with_the_thread() {
    let mut maia = Maia::start().await;
    maia.mock.set_model_info(reasoning_model_info());
    maia.initialize().await;
    let (sid, result) = maia.new_session_result().await;
    let effort = option(&result, "reasoning_effort").unwrap_or_else(|| panic!("{result}"));
    assert_eq!(effort["category"], "model_config");
    assert_eq!(effort["type"], "select");
    assert_eq!(effort["currentValue"], "default");
    let values: Vec<&Value> = effort["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| &o["value"])
        .collect();
    assert_eq!(
        values,
        [
            &json!("default"),
            &json!("low"),
            &json!("medium"),
            &json!("high")
        ]
    );
    // Without a client capability there is no boolean option.
    assert!(option(&result, "show_thinking").is_none(), "{result}");

    maia.answered_turn(&sid, "one", "a").await;
    assert!(maia.mock.requests()[0].get("reasoning_effort").is_none());
    let resp = set_option(
        &mut maia,
        &sid,
        json!({"configId": "reasoning_effort", "value": "high"}),
    )
    .await;
    assert_eq!(
        option(&resp["result"], "reasoning_effort").unwrap()["currentValue"],
        "high",
        "{resp}"
    );
    assert!(
        option(&resp["result"], "model").is_some(),
        "the complete list: {resp}"
    );
    maia.answered_turn(&sid, "two", "b").await;
    assert_eq!(maia.mock.requests()[1]["reasoning_effort"], "high");
    let resp = set_option(
        &mut maia,
        &sid,
        json!({"configId": "reasoning_effort", "value": "extreme"}),
    )
    .await;
    assert_eq!(resp["error"]["code"], -32602, "{resp}");

    // Kept with the thread: a load shows it and the next request sends it.
    let mut maia = maia.restart().await;
    maia.initialize().await;
    let (resp, _) = maia.load(&sid).await;
    assert_eq!(
        option(&resp["result"], "reasoning_effort").unwrap()["currentValue"],
        "high",
        "{resp}"
    );
    maia.answered_turn(&sid, "three", "c").await;
    assert_eq!(
        maia.mock.requests().last().unwrap()["reasoning_effort"],
        "high"
    );
    // Back to the model's own: nothing sent.
    set_option(
        &mut maia,
        &sid,
        json!({"configId": "reasoning_effort", "value": "default"}),
    )
    .await;
    maia.answered_turn(&sid, "four", "d").await;
    assert!(
        maia.mock
            .requests()
            .last()
            .unwrap()
            .get("reasoning_effort")
            .is_none()
    );
}

#[tokio::test]
async fn the_effort_is_offered_only_for_models_that_take_one() {
    // `/model/info` says nothing: no effort option, and setting one fails.
    let (mut maia, sid) = Maia::ready().await;
    let resp = set_option(
        &mut maia,
        &sid,
        json!({"configId": "mode", "value": "default"}),
    )
    .await;
    assert!(
        option(&resp["result"], "reasoning_effort").is_none(),
        "{resp}"
    );
    let resp = set_option(
        &mut maia,
        &sid,
        json!({"configId": "reasoning_effort", "value": "low"}),
    )
    .await;
    assert_eq!(resp["error"]["code"], -32602, "{resp}");
    // The `reasoningModels` setting says so.
    let mut maia = Maia::start_with(with(json!({"reasoningModels": ["mock-model"]}))).await;
    maia.initialize().await;
    let (_, result) = maia.new_session_result().await;
    assert!(option(&result, "reasoning_effort").is_some(), "{result}");
}

#[tokio::test]
async fn show_thinking_is_a_boolean_for_clients_that_take_one_and_hides_the_reasoning() {
    let caps = json!({"session": {"configOptions": {"boolean": {}}}});
    let mut maia = Maia::start().await;
    maia.initialize_with(caps.clone()).await;
    let (sid, result) = maia.new_session_result().await;
    let thinking = option(&result, "show_thinking").unwrap_or_else(|| panic!("{result}"));
    assert_eq!(thinking["type"], "boolean");
    assert_eq!(thinking["currentValue"], true);

    maia.mock
        .push(mock::reasoning_then_text("pondering", "shown"));
    let (_, before) = maia.turn(&sid, "think").await;
    assert!(
        !updates_of(&before, "agent_thought_chunk").is_empty(),
        "{before:?}"
    );

    let resp = set_option(
        &mut maia,
        &sid,
        json!({"configId": "show_thinking", "type": "boolean", "value": false}),
    )
    .await;
    assert_eq!(
        option(&resp["result"], "show_thinking").unwrap()["currentValue"],
        false,
        "{resp}"
    );
    maia.mock
        .push(mock::reasoning_then_text("secret pondering", "hidden"));
    let (_, before) = maia.turn(&sid, "think again").await;
    assert!(
        updates_of(&before, "agent_thought_chunk").is_empty(),
        "{before:?}"
    );
    assert_eq!(crate::harness::agent_text(&before), "hidden");
    // A select value for a boolean option is refused.
    let resp = set_option(
        &mut maia,
        &sid,
        json!({"configId": "show_thinking", "value": "yes"}),
    )
    .await;
    assert_eq!(resp["error"]["code"], -32602, "{resp}");

    // Kept with the thread; the replay hides the reasoning too.
    let mut maia = maia.restart().await;
    maia.initialize_with(caps).await;
    let (resp, replay) = maia.load(&sid).await;
    assert_eq!(
        option(&resp["result"], "show_thinking").unwrap()["currentValue"],
        false,
        "{resp}"
    );
    assert!(
        updates_of(&replay, "agent_thought_chunk").is_empty(),
        "{replay:?}"
    );

    // Without the capability: no boolean option, and setting it fails.
    let (mut maia, sid) = Maia::ready().await;
    let resp = set_option(
        &mut maia,
        &sid,
        json!({"configId": "show_thinking", "type": "boolean", "value": false}),
    )
    .await;
    assert_eq!(resp["error"]["code"], -32602, "{resp}");
    assert!(
        maia.seen.iter().all(option_free),
        "no boolean option was sent"
    );
}

fn option_free(message: &Value) -> bool {
    !message.to_string().contains("show_thinking")
        || message["method"].is_null() && message.get("error").is_some()
}

#[tokio::test]
async fn an_mcp_server_over_legacy_sse_from_the_editor() {
    let url = mock::mock_mcp::spawn_sse().await.unwrap();
    let mut maia = Maia::start().await;
    let init = maia.initialize().await;
    assert_eq!(
        init["result"]["agentCapabilities"]["mcpCapabilities"],
        json!({"http": true, "sse": true})
    );
    let cwd = maia.cwd();
    let id = maia
        .request(
            "session/new",
            json!({"cwd": cwd, "mcpServers": [{"type": "sse", "name": "legacy", "url": url,
                   "headers": [{"name": "X-Test", "value": "1"}]}]}),
        )
        .await;
    let sid = maia.response(id).await.0["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_1",
        "mcp__legacy__echo",
        json!({"text": "over sse"}),
    )]));
    maia.mock.push(mock::text_reply("done"));
    let id = maia.prompt(&sid, "go").await;
    let (resp, before) = maia.response_with(id, choose("allow_once")).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let call = updates_of(&before, "tool_call");
    assert_eq!(call[0]["name"], "mcp__legacy__echo", "{call:?}");
    assert_eq!(
        crate::harness::tool_results(&maia, 1),
        ["echo: over sse"],
        "{:?}",
        maia.mock.requests()
    );
}

#[tokio::test]
async fn a_model_that_takes_no_effort_is_sent_none() {
    let mut maia = Maia::start().await;
    maia.mock.set_models(vec![
        json!({"id": "mock-model", "object": "model"}),
        json!({"id": "plain-model", "object": "model"}),
    ]);
    maia.mock.set_model_info(reasoning_model_info());
    maia.initialize().await;
    let (sid, _) = maia.new_session_result().await;
    set_option(
        &mut maia,
        &sid,
        json!({"configId": "reasoning_effort", "value": "medium"}),
    )
    .await;
    // `/model` (the session's own switch): the effort stays the thread's
    // choice but only a model that takes one is sent it.
    maia.turn(&sid, "/model plain-model").await;
    maia.answered_turn(&sid, "one", "a").await;
    let last = maia.mock.requests().last().unwrap().clone();
    assert_eq!(last["model"], "plain-model");
    assert!(last.get("reasoning_effort").is_none(), "{last}");
    maia.turn(&sid, "/model mock-model").await;
    maia.answered_turn(&sid, "two", "b").await;
    assert_eq!(
        maia.mock.requests().last().unwrap()["reasoning_effort"],
        "medium"
    );
    // The editor's switch to a model without one resets it.
    let resp = set_option(
        &mut maia,
        &sid,
        json!({"configId": "model", "value": "plain-model"}),
    )
    .await;
    assert!(
        option(&resp["result"], "reasoning_effort").is_none(),
        "{resp}"
    );
    let resp = set_option(
        &mut maia,
        &sid,
        json!({"configId": "model", "value": "mock-model"}),
    )
    .await;
    assert_eq!(
        option(&resp["result"], "reasoning_effort").unwrap()["currentValue"],
        "default"
    );
}
