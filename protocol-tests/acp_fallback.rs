//! Fallback models (`fallbackModels`): a request that still fails with an
//! overload (529) after its retries goes to the next model; the user is
//! told (a notice, the model picker's value); the fallback holds for the
//! turn and the chosen model is asked again the next turn.

use serde_json::{Value, json};

use crate::harness::{Maia, Options, agent_text, updates_of};
use maia_test_support as mock;

fn picked(before: &[Value]) -> Vec<Value> {
    updates_of(before, "config_option_update")
        .iter()
        .map(|u| u["configOptions"][0]["currentValue"].clone())
        .collect()
}

#[tokio::test]
async fn an_overloaded_model_falls_back_for_the_turn_then_is_tried_again() {
    let mut maia = Maia::start_with(Options {
        settings: json!({"llm_max_retries": 1, "fallbackModels": ["mock-model", "backup-model"]}),
        ..Default::default()
    })
    .await;
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;
    let sid = maia.new_session().await;
    // The chosen model: a 529, and its one retry a 529 too.
    maia.mock.push(mock::error_reply(529, "Overloaded"));
    maia.mock.push(mock::error_reply(529, "Overloaded"));
    // The fallback answers with a tool call, then the turn's end: both
    // requests go to the fallback.
    maia.mock.push(mock::tool_calls_reply(&[(
        "c1",
        "TodoWrite",
        json!({"todos": [{"content": "look", "status": "pending", "activeForm": "Looking"}]}),
    )]));
    maia.mock.push(mock::text_reply("answered by the backup"));
    let (resp, before) = maia.turn(&sid, "hi").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert!(agent_text(&before).contains("answered by the backup"));
    let models: Vec<String> = maia
        .mock
        .requests()
        .iter()
        .map(|r| r["model"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        models,
        ["mock-model", "mock-model", "backup-model", "backup-model"]
    );
    let notices = updates_of(&before, "notice");
    assert!(
        notices.iter().any(|n| {
            let n = n.to_string();
            n.contains("backup-model") && n.contains("529")
        }),
        "{notices:?}"
    );
    // The picker showed the fallback, then the chosen model at the end.
    assert_eq!(
        picked(&before),
        [json!("backup-model"), json!("mock-model")]
    );

    // The next turn asks the chosen model again.
    let (_, _) = maia.answered_turn(&sid, "again", "first model back").await;
    let last = maia.mock.requests().last().unwrap().clone();
    assert_eq!(last["model"], "mock-model");
}

#[tokio::test]
async fn without_fallback_models_an_overload_fails_the_turn() {
    let mut maia = Maia::start_with(Options {
        settings: json!({"llm_max_retries": 0}),
        ..Default::default()
    })
    .await;
    maia.initialize().await;
    let sid = maia.new_session().await;
    maia.mock.push(mock::error_reply(529, "Overloaded"));
    let (_, before) = maia.turn(&sid, "hi").await;
    assert_eq!(maia.mock.requests().len(), 1);
    assert!(agent_text(&before).contains("529"), "{before:?}");
}
