//! Models: the `model` config option, switching, and `usage_update`
//! against the context window found from each source.

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, Options, agent_text, updates_of};

fn options(settings: Value) -> Options {
    Options {
        settings,
        ..Default::default()
    }
}

async fn session_with(maia: &mut Maia) -> (String, Value) {
    maia.initialize().await;
    let (sid, result) = maia.new_session_result().await;
    (sid, result["configOptions"].clone())
}

/// Runs one text turn and returns its `usage_update` payloads.
async fn usage_of_turn(maia: &mut Maia, sid: &str) -> Vec<Value> {
    maia.mock.push(mock::text_reply("ok"));
    let id = maia.prompt(sid, "hi").await;
    let (resp, before) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    updates_of(&before, "usage_update")
}

#[tokio::test]
async fn model_option_is_offered_and_switches_the_model() {
    let mut maia = Maia::start().await;
    maia.mock.set_models(vec![
        json!({"id": "mock-model", "max_input_tokens": 32768}),
        json!({"id": "other", "max_input_tokens": 8000}),
    ]);
    let (sid, config) = session_with(&mut maia).await;
    let option = &config[0];
    assert_eq!(option["id"], "model", "{config}");
    assert_eq!(option["category"], "model");
    assert_eq!(option["type"], "select");
    assert_eq!(option["currentValue"], "mock-model");
    let values: Vec<_> = option["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["value"].clone())
        .collect();
    assert_eq!(values, [json!("mock-model"), json!("other")]);

    let id = maia
        .request(
            "session/set_config_option",
            json!({"sessionId": sid, "configId": "model", "value": "other"}),
        )
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(
        resp["result"]["configOptions"][0]["currentValue"], "other",
        "{resp}"
    );
    let usage = usage_of_turn(&mut maia, &sid).await;
    assert_eq!(maia.mock.requests()[0]["model"], "other");
    assert_eq!(usage.last().unwrap()["size"], 8000);

    for (config_id, value) in [("model", "nope"), ("color", "red")] {
        let id = maia
            .request(
                "session/set_config_option",
                json!({"sessionId": sid, "configId": config_id, "value": value}),
            )
            .await;
        assert_eq!(maia.response(id).await.0["error"]["code"], -32602);
    }

    // `/model NAME` switches too, and the editor's option follows.
    let id = maia.prompt(&sid, "/model mock-model").await;
    let (_, before) = maia.response(id).await;
    let updates = updates_of(&before, "config_option_update");
    assert_eq!(updates.len(), 1, "{before:?}");
    assert_eq!(updates[0]["configOptions"][0]["currentValue"], "mock-model");
    assert!(agent_text(&before).contains("mock-model"));
}

#[tokio::test]
async fn usage_update_reports_the_servers_numbers_against_the_list_window() {
    let mut maia = Maia::start().await;
    let (sid, _) = session_with(&mut maia).await;
    let usage = usage_of_turn(&mut maia, &sid).await;
    assert_eq!(usage.len(), 1, "{usage:?}");
    let used = mock::MOCK_PROMPT_TOKENS + mock::MOCK_COMPLETION_TOKENS;
    assert_eq!(usage[0]["used"], json!(used));
    assert_eq!(usage[0]["size"], 32768);
}

#[tokio::test]
async fn manual_window_wins() {
    let mut maia = Maia::start_with(options(json!({"contextWindows": {"mock-model": 5000}}))).await;
    let (sid, _) = session_with(&mut maia).await;
    assert_eq!(usage_of_turn(&mut maia, &sid).await[0]["size"], 5000);
}

#[tokio::test]
async fn model_info_window_wins_over_the_list() {
    let mut maia = Maia::start().await;
    maia.mock.set_model_info(json!({"data": [
        {"model_name": "mock-model", "model_info": {"max_input_tokens": 8192.0}}
    ]}));
    let (sid, _) = session_with(&mut maia).await;
    assert_eq!(usage_of_turn(&mut maia, &sid).await[0]["size"], 8192);
}

#[tokio::test]
async fn the_model_is_asked_last_and_unknown_means_no_usage_update() {
    let mut maia = Maia::start().await;
    maia.mock.set_models(vec![json!({"id": "mock-model"})]);
    maia.mock
        .push_window_answer(mock::text_reply("200k tokens"));
    let (sid, _) = session_with(&mut maia).await;
    // Asked in the background as the session opened: the first turn never
    // waits for the answer; a later one uses it.
    usage_of_turn(&mut maia, &sid).await;
    let cache = maia.home.path().join(".maia/cache/windows.json");
    assert!(
        crate::harness::eventually(std::time::Duration::from_secs(10), || cache.exists()).await
    );
    assert_eq!(usage_of_turn(&mut maia, &sid).await[0]["size"], 200_000);
    assert_eq!(maia.mock.window_questions(), 1);

    // Unknown everywhere: no usage_update (ACP needs a size).
    let mut maia = Maia::start().await;
    maia.mock.set_models(vec![json!({"id": "mock-model"})]);
    let (sid, _) = session_with(&mut maia).await;
    assert!(usage_of_turn(&mut maia, &sid).await.is_empty());
    let id = maia.prompt(&sid, "/context").await;
    let (_, before) = maia.response(id).await;
    assert!(agent_text(&before).contains("context window: unknown"));
}

#[tokio::test]
async fn estimates_are_sent_between_responses() {
    let mut maia = Maia::start().await;
    let (sid, _) = session_with(&mut maia).await;
    let measured = usage_of_turn(&mut maia, &sid).await;
    assert_eq!(measured.len(), 1);
    // `/clear`: no model response, but the (smaller) estimate is reported.
    let id = maia.prompt(&sid, "/clear").await;
    let (_, before) = maia.response(id).await;
    let usage = updates_of(&before, "usage_update");
    assert_eq!(usage.len(), 1, "{before:?}");
    assert_eq!(usage[0]["size"], 32768);
    assert!(usage[0]["used"].as_u64().unwrap() > 0);
    // A cancelled turn reports an estimate too.
    maia.mock.push(mock::Reply::Hang);
    let id = maia.prompt(&sid, "hang").await;
    maia.mock
        .wait_for_requests(2, std::time::Duration::from_secs(5))
        .await;
    maia.notify("session/cancel", json!({"sessionId": sid}))
        .await;
    let (resp, before) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "cancelled");
    assert_eq!(updates_of(&before, "usage_update").len(), 1, "{before:?}");
}
