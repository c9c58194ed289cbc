//! Budgets in an editor session (`budget.turnUsd`, `budget.sessionUsd`):
//! a request that would pass one is asked about first as a permission
//! question ("raise by …" / "stop"); "stop" ends the turn before the
//! request, "raise" sends it; a budget that cannot be enforced (no price)
//! is said once.

use serde_json::{Value, json};

use crate::harness::{Maia, Options, is_permission, updates_of};
use maia_test_support as mock;

/// What every response costs (the proxy's header).
const RESPONSE_COST: &str = "0.25";

/// A session whose model has tiny per-token prices in `/model/info`
/// (a request's estimate is far below a cent) and whose every response
/// costs [`RESPONSE_COST`] (the proxy's header), with `budget`.
async fn open(budget: Value, priced: bool) -> (Maia, String) {
    let mut maia = Maia::start_with(Options {
        settings: json!({"budget": budget}),
        ..Default::default()
    })
    .await;
    let mut info = json!({"max_input_tokens": 100_000});
    if priced {
        info["input_cost_per_token"] = json!(1e-9);
        info["output_cost_per_token"] = json!(1e-9);
        maia.mock.set_stream_headers(vec![(
            "x-litellm-response-cost".to_owned(),
            RESPONSE_COST.to_owned(),
        )]);
    }
    maia.mock.set_model_info(json!({"data": [
        {"model_name": "mock-model", "model_info": info}
    ]}));
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;
    let sid = maia.new_session().await;
    (maia, sid)
}

/// Answers the budget question with `option` (`raise` or `stop`),
/// keeping it in `asked`, and allows a tool's question.
fn answer<'a>(
    option: &'static str,
    asked: &'a mut Vec<Value>,
) -> impl FnMut(&Value) -> Option<Value> + 'a {
    move |m: &Value| {
        if !is_permission(m) {
            return None;
        }
        // The tool's own question is allowed.
        if m["params"]["toolCall"]["name"] != "Budget" {
            return Some(json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}}));
        }
        asked.push(m.clone());
        Some(json!({"outcome": {"outcome": "selected", "optionId": option}}))
    }
}

/// A turn whose first answer asks for a tool (costing 0.25), so the
/// second request would pass a turn budget of 0.20.
async fn tool_turn(
    maia: &mut Maia,
    sid: &str,
    option: &'static str,
) -> (Value, Vec<Value>, Vec<Value>) {
    maia.mock.push(mock::tool_calls_reply(&[(
        "c1",
        "Glob",
        json!({"pattern": "*.txt"}),
    )]));
    maia.mock.push(mock::text_reply("done"));
    let id = maia.prompt(sid, "look around").await;
    let mut asked = Vec::new();
    let (resp, before) = maia.response_with(id, answer(option, &mut asked)).await;
    (resp, before, asked)
}

#[tokio::test]
async fn a_turn_budget_crossed_mid_turn_is_asked_and_stop_ends_the_turn() {
    let (mut maia, sid) = open(json!({"turnUsd": 0.2}), true).await;
    let (resp, before, asked) = tool_turn(&mut maia, &sid, "stop").await;
    assert_eq!(asked.len(), 1, "{before:?}");
    let question = &asked[0]["params"];
    let ids: Vec<&str> = question["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["optionId"].as_str().unwrap())
        .collect();
    assert_eq!(&ids[..1], ["raise"], "{question}");
    assert!(ids.contains(&"stop"), "{question}");
    let raise = &question["options"][0];
    assert_eq!(raise["kind"], "allow_once");
    assert!(
        raise["name"]
            .as_str()
            .unwrap()
            .contains("by $0.20 (to $0.40)"),
        "{raise}"
    );
    assert!(
        question["toolCall"]["title"]
            .as_str()
            .unwrap()
            .contains("turn budget of $0.20"),
        "{question}"
    );
    // Stopped before the second request, saying so.
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_eq!(maia.mock.requests().len(), 1);
    let notices = updates_of(&before, "notice");
    assert!(
        notices
            .iter()
            .any(|n| n.to_string().contains("Stopped before a model request")),
        "{notices:?}"
    );
    let card = updates_of(&before, "tool_call_update")
        .into_iter()
        .find(|u| u["toolCallId"] == question["toolCall"]["toolCallId"])
        .expect("the budget card is updated");
    assert_eq!(card["status"], "failed", "{card}");
    // The spend is in usage_update: the thread's cost.
    let usage = updates_of(&before, "usage_update");
    assert_eq!(usage.last().unwrap()["cost"]["amount"], 0.25, "{usage:?}");
}

#[tokio::test]
async fn raise_sends_the_request_and_holds_for_the_turn_only() {
    let (mut maia, sid) = open(json!({"turnUsd": 0.2}), true).await;
    let (resp, before, asked) = tool_turn(&mut maia, &sid, "raise").await;
    assert_eq!(asked.len(), 1, "{before:?}");
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_eq!(maia.mock.requests().len(), 2);
    assert!(
        before.iter().any(|m| m.to_string().contains("done")),
        "the answer after the raise: {before:?}"
    );
    // The next turn starts from the setting again: asked again.
    let (_, before, asked) = tool_turn(&mut maia, &sid, "stop").await;
    assert_eq!(asked.len(), 1, "{before:?}");
    assert_eq!(maia.mock.requests().len(), 3);
}

#[tokio::test]
async fn a_session_budget_counts_every_turn() {
    let (mut maia, sid) = open(json!({"sessionUsd": 0.3}), true).await;
    maia.answered_turn(&sid, "one", "first").await;
    maia.answered_turn(&sid, "two", "second").await;
    // 0.50 spent: the third turn's request is asked about.
    maia.mock.push(mock::text_reply("third"));
    let id = maia.prompt(&sid, "three").await;
    let mut asked = Vec::new();
    let (resp, _) = maia.response_with(id, answer("stop", &mut asked)).await;
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].to_string().contains("session budget of $0.30"),
        "{}",
        asked[0]
    );
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    assert_eq!(maia.mock.requests().len(), 2);
}

#[tokio::test]
async fn without_a_price_the_budget_is_said_to_be_unenforceable_once() {
    let (mut maia, sid) = open(json!({"sessionUsd": 0.01}), false).await;
    let (_, first) = maia.answered_turn(&sid, "one", "first").await;
    let (_, second) = maia.answered_turn(&sid, "two", "second").await;
    let said = |messages: &[Value]| {
        updates_of(messages, "notice")
            .into_iter()
            .filter(|n| n.to_string().contains("budget cannot be enforced"))
            .count()
    };
    assert_eq!(said(&first), 1, "{first:?}");
    assert_eq!(said(&second), 0, "{second:?}");
    assert!(!first.iter().any(is_permission));
    assert_eq!(maia.mock.requests().len(), 2);
}
