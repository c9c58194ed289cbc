//! `_session/steering` (issue 21): a message added to a running turn joins
//! it at the tool-round boundary (after the batch's results, before the
//! next model request), one sent during a final answer starts a new turn
//! after it, and an idle session starts a turn unless the client asked for
//! `idleBehavior: "promptRequired"`. Wire shapes as codex-acp and
//! claude-agent-acp answer them.

use std::time::Duration;

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, agent_text, choose, is_permission, is_response};

async fn steer(maia: &mut Maia, sid: &str, text: &str, meta: Option<Value>) -> u64 {
    let mut params = json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    maia.request("_session/steering", params).await
}

/// The (role, text) of each message of the model request `index`.
fn roles_and_texts(maia: &Maia, index: usize) -> Vec<(String, String)> {
    let requests = maia.mock.requests();
    requests[index]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Waits until the agent's streamed text (from now) contains `text`.
async fn wait_for_text(maia: &mut Maia, text: &str) {
    let mut streamed = String::new();
    while !streamed.contains(text) {
        let m = maia.next().await;
        if m["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            streamed.push_str(
                m["params"]["update"]["content"]["text"]
                    .as_str()
                    .unwrap_or_default(),
            );
        }
    }
}

#[tokio::test]
async fn initialize_advertises_steering() {
    let mut maia = Maia::start().await;
    let init = maia.initialize().await;
    assert_eq!(
        init["result"]["_meta"]["steering"]["supported"],
        json!(true),
        "{init}"
    );
}

#[tokio::test]
async fn a_steer_joins_the_turn_after_the_tool_results_and_waits_for_the_permission_answer() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_w",
        "Write",
        json!({"file_path": "out.txt", "content": "hello"}),
    )]));
    maia.mock.push(mock::text_reply("done, and noted"));
    let prompt = maia.prompt(&sid, "write the file").await;
    let (permission, _) = maia.wait_for(is_permission).await;
    let steer_id = steer(&mut maia, &sid, "also mention the weather", None).await;
    // A barrier: a request answered at once. The steer is not answered
    // before it: it waits for the permission answer and the tool's result.
    let ping = maia.request("_maia/no_such_method", json!({})).await;
    let (_, before) = maia.wait_for(|m| is_response(m, ping)).await;
    assert!(
        !before.iter().any(|m| is_response(m, steer_id)),
        "the steer was answered while the permission question was open: {before:?}"
    );
    let option = choose("allow_once")(&permission).unwrap();
    maia.respond(&permission["id"], option).await;
    let (resp, seen) = maia.response(prompt).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_eq!(agent_text(&seen), "done, and noted");
    let answer = match seen.iter().find(|m| is_response(m, steer_id)) {
        Some(answer) => answer.clone(),
        None => maia.wait_for(|m| is_response(m, steer_id)).await.0,
    };
    assert_eq!(answer["result"], json!({"outcome": "injected"}), "{answer}");
    // The second request holds the steer after the tool's result, in order.
    let second = roles_and_texts(&maia, 1);
    let tail: Vec<&str> = second
        .iter()
        .rev()
        .take(3)
        .map(|(r, _)| r.as_str())
        .collect();
    assert_eq!(tail, ["user", "tool", "assistant"], "{second:?}");
    assert_eq!(second.last().unwrap().1, "also mention the weather");
    assert_eq!(maia.mock.requests().len(), 2, "no extra turn was started");
    assert_eq!(
        std::fs::read_to_string(maia.path("out.txt")).unwrap(),
        "hello"
    );

    // Journaled as a steer and replayed in its place on load.
    let mut maia = maia.restart().await;
    maia.initialize().await;
    let (loaded, replay) = maia.load(&sid).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    let updates: Vec<&Value> = replay
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| &m["params"]["update"])
        .collect();
    let steer_at = updates
        .iter()
        .position(|u| {
            u["sessionUpdate"] == "user_message_chunk"
                && u["content"]["text"] == "also mention the weather"
        })
        .unwrap_or_else(|| panic!("the steer is not replayed: {updates:?}"));
    assert_eq!(updates[steer_at]["_meta"]["steering"], json!(true));
    let tool_at = updates
        .iter()
        .position(|u| u["sessionUpdate"] == "tool_call")
        .expect("the tool call is replayed");
    assert!(
        tool_at < steer_at,
        "the steer is replayed after the tool call"
    );
    let first_user = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "user_message_chunk")
        .unwrap();
    assert!(
        first_user.get("_meta").is_none_or(Value::is_null),
        "{first_user}"
    );
}

#[tokio::test]
async fn a_steer_during_the_final_answer_starts_a_new_turn_after_it() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::text_chunks(
        &["one ", "two ", "three"],
        Duration::from_millis(300),
    ));
    maia.mock.push(mock::text_reply("second answer"));
    let prompt = maia.prompt(&sid, "count").await;
    maia.wait_for(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .await;
    let steer_id = steer(&mut maia, &sid, "now in French", None).await;
    let (resp, seen) = maia.response(prompt).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    // Answered as the new turn starts: before or after the prompt's answer.
    let answer = match seen.iter().find(|m| is_response(m, steer_id)) {
        Some(answer) => answer.clone(),
        None => maia.wait_for(|m| is_response(m, steer_id)).await.0,
    };
    assert_eq!(
        answer["result"],
        json!({"outcome": "startedNewTurn"}),
        "{answer}"
    );
    wait_for_text(&mut maia, "second answer").await;
    let second = roles_and_texts(&maia, 1);
    let tail: Vec<&(String, String)> = second.iter().rev().take(2).collect();
    assert_eq!(tail[0], &("user".to_owned(), "now in French".to_owned()));
    assert_eq!(
        tail[1],
        &("assistant".to_owned(), "one two three".to_owned())
    );
}

#[tokio::test]
async fn an_idle_steer_with_prompt_required_is_not_used() {
    let (mut maia, sid) = Maia::ready().await;
    let id = steer(
        &mut maia,
        &sid,
        "hello?",
        Some(json!({"steering": {"idleBehavior": "promptRequired"}})),
    )
    .await;
    let (answer, _) = maia.response(id).await;
    assert_eq!(
        answer["result"],
        json!({"outcome": "promptRequired", "reason": "noRunningTurn"}),
        "{answer}"
    );
    assert!(maia.mock.requests().is_empty(), "no turn was started");
    // The session takes a prompt as usual afterwards.
    let (resp, _) = maia.answered_turn(&sid, "hello", "hi").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
}

#[tokio::test]
async fn an_idle_steer_starts_a_turn_by_default() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::text_reply("steered hello"));
    let id = steer(&mut maia, &sid, "hello from a steer", None).await;
    let (answer, _) = maia.response(id).await;
    assert_eq!(
        answer["result"],
        json!({"outcome": "startedNewTurn"}),
        "{answer}"
    );
    wait_for_text(&mut maia, "steered hello").await;
    let first = roles_and_texts(&maia, 0);
    assert_eq!(
        first.last().unwrap(),
        &("user".to_owned(), "hello from a steer".to_owned())
    );
}

#[tokio::test]
async fn a_steer_to_an_unknown_session_is_an_error() {
    let (mut maia, _) = Maia::ready().await;
    let id = steer(&mut maia, "no-such-session", "hi", None).await;
    let (answer, _) = maia.response(id).await;
    assert!(answer.get("error").is_some(), "{answer}");
}

#[tokio::test]
async fn a_steer_the_cancelled_turn_did_not_take_fails_and_starts_nothing() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_w",
        "Write",
        json!({"file_path": "out.txt", "content": "hello"}),
    )]));
    let prompt = maia.prompt(&sid, "write the file").await;
    let (permission, _) = maia.wait_for(is_permission).await;
    let steer_id = steer(&mut maia, &sid, "and then stop", None).await;
    maia.notify("session/cancel", json!({"sessionId": sid}))
        .await;
    maia.respond(
        &permission["id"],
        json!({"outcome": {"outcome": "cancelled"}}),
    )
    .await;
    let (resp, seen) = maia.response(prompt).await;
    assert_eq!(resp["result"]["stopReason"], "cancelled", "{resp}");
    let answer = match seen.iter().find(|m| is_response(m, steer_id)) {
        Some(answer) => answer.clone(),
        None => maia.wait_for(|m| is_response(m, steer_id)).await.0,
    };
    assert_eq!(answer["result"]["outcome"], "failed", "{answer}");
    assert!(answer["result"]["reason"].as_str().is_some(), "{answer}");
    assert_eq!(maia.mock.requests().len(), 1, "no turn was started");
    let (resp, _) = maia.answered_turn(&sid, "hello", "hi").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
}

/// Impolite: the steer is written right behind the prompt, before any
/// answer, so it may reach MAIA before the turn has started, while its
/// first request streams, or at the tool round. Wherever it lands, it is
/// answered once, reaches the model exactly once and after the prompt, and
/// nothing of the turn is lost.
#[tokio::test]
async fn a_steer_pipelined_behind_its_prompt_reaches_the_model_once_in_order() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_t",
        "TodoWrite",
        json!({"todos": [{"content": "look around", "status": "pending"}]}),
    )]));
    maia.mock.push(mock::text_reply("first done"));
    maia.mock.push(mock::text_reply("second done"));
    let prompt = maia.prompt(&sid, "the prompt itself").await;
    let steer_id = steer(&mut maia, &sid, "the pipelined steer", None).await;

    let (resp, mut seen) = maia.response(prompt).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let answer = match seen.iter().find(|m| is_response(m, steer_id)) {
        Some(answer) => answer.clone(),
        None => {
            let (answer, more) = maia.wait_for(|m| is_response(m, steer_id)).await;
            seen.extend(more);
            answer
        }
    };
    let outcome = answer["result"]["outcome"].as_str().unwrap_or_default();
    assert!(
        outcome == "injected" || outcome == "startedNewTurn",
        "{answer}"
    );
    if outcome == "startedNewTurn" {
        // The steer's own turn follows the prompt's.
        tokio::time::timeout(Duration::from_secs(10), wait_for_text(&mut maia, "done"))
            .await
            .expect("the steer's turn never answered");
    }
    let requests = maia.mock.requests();
    let last = requests.len() - 1;
    let users: Vec<String> = roles_and_texts(&maia, last)
        .into_iter()
        .filter(|(role, _)| role == "user")
        .map(|(_, text)| text)
        .collect();
    let prompt_at = users.iter().position(|t| t.contains("the prompt itself"));
    let steer_at: Vec<usize> = (0..users.len())
        .filter(|&i| users[i].contains("the pipelined steer"))
        .collect();
    assert!(prompt_at.is_some(), "{users:?}");
    assert_eq!(
        steer_at.len(),
        1,
        "the steer reached the model once: {users:?}"
    );
    assert!(steer_at[0] > prompt_at.unwrap(), "{users:?}");
    // No request ever held the steer before the prompt.
    for i in 0..=last {
        let texts: Vec<String> = roles_and_texts(&maia, i)
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        let p = texts.iter().position(|t| t.contains("the prompt itself"));
        let s = texts.iter().position(|t| t.contains("the pipelined steer"));
        if let Some(s) = s {
            assert!(p.is_some_and(|p| p < s), "request {i}: {texts:?}");
        }
    }
}
