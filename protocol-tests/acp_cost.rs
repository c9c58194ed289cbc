//! What a turn and a thread cost: from LiteLLM's `/model/info` prices, from
//! its `x-litellm-response-cost` header, from the `prices` setting, and
//! "unknown" without any of them; in `usage_update`, `/cost` and `/context`,
//! and the same after a reload.

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, Options, agent_text, updates_of};

/// `/model/info` for the mock model: a window, and `prices` when given.
fn model_info(prices: Option<(f64, f64)>) -> Value {
    let mut info = json!({"max_input_tokens": 100_000});
    if let Some((input, output)) = prices {
        info["input_cost_per_token"] = json!(input);
        info["output_cost_per_token"] = json!(output);
    }
    json!({"data": [{"model_name": "mock-model", "model_info": info}]})
}

async fn open(settings: Value, prices: Option<(f64, f64)>) -> (Maia, String) {
    let mut maia = Maia::start_with(Options {
        settings,
        ..Default::default()
    })
    .await;
    maia.mock.set_model_info(model_info(prices));
    maia.initialize().await;
    let sid = maia.new_session().await;
    (maia, sid)
}

/// The `cost` of the last `usage_update` of a turn answered "ok".
async fn turn_cost(maia: &mut Maia, sid: &str) -> Value {
    let (_, before) = maia.answered_turn(sid, "hi", "ok").await;
    let usage = updates_of(&before, "usage_update");
    assert!(!usage.is_empty(), "{before:?}");
    usage.last().unwrap()["cost"].clone()
}

async fn said(maia: &mut Maia, sid: &str, command: &str) -> String {
    let (_, before) = maia.turn(sid, command).await;
    agent_text(&before)
}

fn amount(cost: &Value) -> f64 {
    assert_eq!(cost["currency"], "USD", "{cost}");
    cost["amount"].as_f64().unwrap()
}

#[tokio::test]
async fn cost_from_model_info_prices_survives_a_reload() {
    let (mut maia, sid) = open(json!({}), Some((0.001, 0.002))).await;
    // 42 prompt tokens and 7 completion tokens per mock answer.
    let one = 42.0 * 0.001 + 7.0 * 0.002;
    assert!((amount(&turn_cost(&mut maia, &sid).await) - one).abs() < 1e-9);
    // Cumulative over the thread.
    assert!((amount(&turn_cost(&mut maia, &sid).await) - 2.0 * one).abs() < 1e-9);
    let report = said(&mut maia, &sid, "/cost").await;
    assert!(report.contains("$0.1120"), "{report}");
    assert!(report.contains("| mock-model | 2 |"), "{report}");
    assert!(report.contains("Last turn: $0.0560"), "{report}");
    let context = said(&mut maia, &sid, "/context").await;
    assert!(context.contains("cost: $0.1120 this thread"), "{context}");

    // The same thread cost after a restart and a reload.
    let mut maia = maia.restart().await;
    maia.initialize().await;
    let (resp, _) = maia.load(&sid).await;
    assert!(resp.get("error").is_none(), "{resp}");
    let report = said(&mut maia, &sid, "/cost").await;
    assert!(report.contains("$0.1120"), "{report}");
}

#[tokio::test]
async fn the_response_cost_header_is_used_when_present() {
    let (mut maia, sid) = open(json!({}), Some((0.001, 0.002))).await;
    maia.mock.set_stream_headers(vec![(
        "x-litellm-response-cost".to_owned(),
        "0.25".to_owned(),
    )]);
    assert_eq!(amount(&turn_cost(&mut maia, &sid).await), 0.25);
    assert_eq!(amount(&turn_cost(&mut maia, &sid).await), 0.5);
}

#[tokio::test]
async fn the_prices_setting_overrides_the_proxy() {
    let settings = json!({"prices": {"mock-model": {
        "input_cost_per_token": 0.01, "output_cost_per_token": 0.1
    }}});
    let (mut maia, sid) = open(settings, Some((0.001, 0.002))).await;
    maia.mock.set_stream_headers(vec![(
        "x-litellm-response-cost".to_owned(),
        "0.25".to_owned(),
    )]);
    let cost = amount(&turn_cost(&mut maia, &sid).await);
    assert!((cost - (0.42 + 0.7)).abs() < 1e-9, "{cost}");
}

#[tokio::test]
async fn without_prices_the_cost_is_unknown() {
    let (mut maia, sid) = open(json!({}), None).await;
    assert_eq!(turn_cost(&mut maia, &sid).await, Value::Null);
    let report = said(&mut maia, &sid, "/cost").await;
    assert!(report.contains("unknown"), "{report}");
    assert!(!report.contains('$'), "never a made-up number: {report}");
}

#[tokio::test]
async fn cost_needs_no_usage_update_window_to_be_reported() {
    // No window anywhere: no usage_update, but /cost still knows.
    let mut maia = Maia::start().await;
    maia.mock.set_stream_headers(vec![(
        "x-litellm-response-cost".to_owned(),
        "0.125".to_owned(),
    )]);
    maia.initialize().await;
    let sid = maia.new_session().await;
    maia.mock.push(mock::text_reply("ok"));
    maia.turn(&sid, "hi").await;
    let report = said(&mut maia, &sid, "/cost").await;
    assert!(report.contains("$0.1250"), "{report}");
}

#[tokio::test]
async fn summaries_are_charged_and_the_cost_carries_over_a_compaction() {
    let (mut maia, sid) = open(json!({}), None).await;
    maia.mock.set_stream_headers(vec![(
        "x-litellm-response-cost".to_owned(),
        "0.25".to_owned(),
    )]);
    assert_eq!(amount(&turn_cost(&mut maia, &sid).await), 0.25);
    maia.mock.push(mock::text_reply("summary"));
    let (_, before) = maia.turn(&sid, "/compact").await;
    assert!(agent_text(&before).contains("compacted"), "{before:?}");
    // The summary's response was charged, and the new file carries the total.
    assert_eq!(amount(&turn_cost(&mut maia, &sid).await), 0.75);
    let report = said(&mut maia, &sid, "/cost").await;
    assert!(
        report.contains("$0.7500") && report.contains("| mock-model | 3 |"),
        "{report}"
    );
}
