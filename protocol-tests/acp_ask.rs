//! `AskUser`: a question with choices as `elicitation/create` (form mode)
//! when the client advertises `elicitation.form`, else as text ending the
//! turn; accept, decline, cancel and errors are answers the model gets.

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, agent_text, tool_results, updates_of};

fn ask_call(maia: &Maia) {
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_q",
        "AskUser",
        json!({"question": "Which database?", "choices": ["sqlite", "postgres"]}),
    )]));
}

async fn form_client() -> (Maia, String) {
    let mut maia = Maia::start().await;
    maia.initialize_with(json!({"elicitation": {"form": {}}}))
        .await;
    let sid = maia.new_session().await;
    (maia, sid)
}

/// Asks once through the form, answering `elicitation/create` with
/// `answer` (a result, or an error when `Err`); returns the requests the
/// client got and the model's tool result.
async fn ask_with(answer: Result<Value, &str>) -> (Vec<Value>, String) {
    let (mut maia, sid) = form_client().await;
    ask_call(&maia);
    maia.mock.push(mock::text_reply("thanks"));
    let id = maia.prompt(&sid, "set it up").await;
    let mut asked = Vec::new();
    let resp = loop {
        let m = maia.next().await;
        if m.get("method").is_none() && m["id"] == json!(id) {
            break m;
        }
        if m["method"] == "elicitation/create" {
            asked.push(m.clone());
            match &answer {
                Ok(result) => maia.respond(&m["id"], result.clone()).await,
                Err(message) => {
                    maia.send(&json!({"jsonrpc": "2.0", "id": m["id"],
                        "error": {"code": -32603, "message": message}}))
                        .await;
                }
            }
        } else {
            assert!(
                m.get("id").is_none() || m.get("method").is_none(),
                "unexpected agent request: {m}"
            );
        }
    };
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_eq!(maia.mock.requests().len(), 2, "the model continues");
    let result = tool_results(&maia, 1).remove(0);
    let requests = asked
        .iter()
        .map(|m| {
            assert_eq!(m["params"]["sessionId"], sid);
            m["params"].clone()
        })
        .collect();
    (requests, result)
}

#[tokio::test]
async fn the_form_carries_the_choices_and_the_answer_returns_to_the_model() {
    let (asked, result) = ask_with(Ok(json!({
        "action": "accept",
        "content": {"choice": "postgres", "note": "version 16 please"}
    })))
    .await;
    assert_eq!(asked.len(), 1, "asked once, without a permission question");
    let params = &asked[0];
    assert_eq!(params["mode"], "form");
    assert_eq!(params["message"], "Which database?");
    assert!(
        params["toolCallId"]
            .as_str()
            .is_some_and(|t| t.starts_with("tool-")),
        "{params}"
    );
    let schema = &params["requestedSchema"];
    assert_eq!(schema["type"], "object");
    assert_eq!(
        schema["properties"]["choice"]["enum"],
        json!(["sqlite", "postgres"])
    );
    assert_eq!(schema["properties"]["note"]["type"], "string");
    assert_eq!(schema["required"], json!(["choice"]));
    assert_eq!(
        result,
        "The user chose: postgres\nThe user added: version 16 please"
    );
}

#[tokio::test]
async fn decline_cancel_and_errors_are_answers_too() {
    let (_, result) = ask_with(Ok(json!({"action": "decline"}))).await;
    assert!(result.contains("declined"), "{result}");
    let (_, result) = ask_with(Ok(json!({"action": "cancel"}))).await;
    assert!(result.contains("dismissed"), "{result}");
    let (_, result) = ask_with(Err("forms are broken")).await;
    assert!(
        result.contains("could not be asked") && result.contains("forms are broken"),
        "{result}"
    );
}

#[tokio::test]
async fn without_forms_the_question_is_text_and_the_turn_ends() {
    // `elicitation: {}` advertises no mode.
    for caps in [json!({}), json!({"elicitation": {}})] {
        let mut maia = Maia::start().await;
        maia.initialize_with(caps).await;
        let sid = maia.new_session().await;
        ask_call(&maia);
        let id = maia.prompt(&sid, "set it up").await;
        let (resp, before) = maia.response(id).await;
        assert_eq!(resp["result"]["stopReason"], "end_turn");
        assert_eq!(
            maia.mock.requests().len(),
            1,
            "the turn ends at the question"
        );
        let text = agent_text(&before);
        assert!(
            text.contains("Which database?") && text.contains("1. sqlite\n2. postgres"),
            "{text}"
        );
        let done = updates_of(&before, "tool_call_update");
        assert_eq!(done.last().unwrap()["status"], "completed");
        // The answer is the next prompt; the model sees the whole exchange.
        let (resp, _) = maia.answered_turn(&sid, "2", "postgres it is").await;
        assert_eq!(resp["result"]["stopReason"], "end_turn");
        let messages = maia.mock.requests()[1]["messages"]
            .as_array()
            .unwrap()
            .clone();
        let n = messages.len();
        assert_eq!(messages[n - 2]["role"], "tool");
        assert!(
            messages[n - 2]["content"]
                .as_str()
                .unwrap()
                .contains("next message"),
            "{messages:?}"
        );
        assert_eq!(messages[n - 1]["role"], "user");
        assert_eq!(messages[n - 1]["content"], "2");
    }
}

#[tokio::test]
async fn cancel_while_the_form_is_open_ends_the_turn() {
    let (mut maia, sid) = form_client().await;
    ask_call(&maia);
    let id = maia.prompt(&sid, "set it up").await;
    let (asked, _) = maia.wait_for(|m| m["method"] == "elicitation/create").await;
    maia.notify("session/cancel", json!({"sessionId": sid}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "cancelled");
    // A late answer is harmless.
    maia.respond(&asked["id"], json!({"action": "cancel"}))
        .await;
    let (resp, _) = maia.answered_turn(&sid, "next", "ok").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
}

#[tokio::test]
async fn a_bad_question_is_an_error_for_the_model() {
    let (mut maia, sid) = form_client().await;
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_q",
        "AskUser",
        json!({"question": "Which?", "choices": ["only one"]}),
    )]));
    let (resp, _) = maia.answered_turn(&sid, "go", "sorry").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    let result = tool_results(&maia, 1).remove(0);
    assert!(result.contains("2 to 6 choices"), "{result}");
}
