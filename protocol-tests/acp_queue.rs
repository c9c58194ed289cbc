//! `_session/queue` (issue 21): codex-acp's prompt queue — list, add,
//! update, delete, reorder, start, the `_session/queue/changed` and
//! `_session/queue/turn` notifications; queued prompts run in order when the
//! turn ends, a cancelled turn keeps (and pauses) the queue, and the queue
//! survives a restart.

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, is_permission, is_response};

fn text(value: &str) -> Value {
    json!([{"type": "text", "text": value}])
}

/// Sends a queue request and returns its response (answering nothing).
async fn queue(maia: &mut Maia, sid: &str, action: &str, params: Value) -> Value {
    let mut body = json!({"sessionId": sid, "action": action});
    if let (Some(body), Some(params)) = (body.as_object_mut(), params.as_object()) {
        body.extend(params.clone());
    }
    let id = maia.request("_session/queue", body).await;
    maia.wait_for(|m| is_response(m, id)).await.0
}

async fn add(maia: &mut Maia, sid: &str, value: &str) -> String {
    let resp = queue(
        maia,
        sid,
        "add",
        json!({"input": text(value), "clientUserMessageId": format!("client-{value}")}),
    )
    .await;
    assert_eq!(resp["result"]["status"], "ok", "{resp}");
    let item = &resp["result"]["result"]["queuedSubmission"];
    assert_eq!(item["clientUserMessageId"], format!("client-{value}"));
    assert_eq!(item["input"], text(value));
    item["id"].as_str().unwrap().to_owned()
}

async fn listed(maia: &mut Maia, sid: &str) -> Vec<(String, String)> {
    let resp = queue(maia, sid, "list", json!({})).await;
    assert_eq!(resp["result"]["status"], "ok", "{resp}");
    resp["result"]["result"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["id"].as_str().unwrap().to_owned(),
                i["input"][0]["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn last_user_text(maia: &Maia, index: usize) -> String {
    let requests = maia.mock.requests();
    requests[index]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default()
}

/// Waits for the `_session/queue/turn` notification of `queued` with `status`.
async fn queue_turn(maia: &mut Maia, queued: &str, status: &str) -> Value {
    maia.wait_for(|m| {
        m["method"] == "_session/queue/turn"
            && m["params"]["turn"]["queuedSubmissionId"] == queued
            && m["params"]["turn"]["status"] == status
    })
    .await
    .0
}

#[tokio::test]
async fn initialize_advertises_the_queue() {
    let mut maia = Maia::start().await;
    let init = maia.initialize().await;
    assert_eq!(
        init["result"]["_meta"]["queue"],
        json!({
            "version": 1,
            "method": "_session/queue",
            "actions": ["list", "add", "update", "delete", "reorder", "start"],
            "changedNotification": "_session/queue/changed",
            "turnNotification": "_session/queue/turn",
        }),
        "{init}"
    );
}

#[tokio::test]
async fn queued_prompts_are_edited_during_a_turn_and_run_in_order_when_it_ends() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_w",
        "Write",
        json!({"file_path": "out.txt", "content": "hello"}),
    )]));
    maia.mock.push(mock::text_reply("done"));
    maia.mock.push(mock::text_reply("third answer"));
    maia.mock.push(mock::text_reply("first answer"));
    let prompt = maia.prompt(&sid, "write the file").await;
    let (permission, _) = maia.wait_for(is_permission).await;
    let seen_before = maia.seen.len();
    let first = add(&mut maia, &sid, "first").await;
    let second = add(&mut maia, &sid, "second").await;
    let third = add(&mut maia, &sid, "third").await;
    assert_eq!(
        listed(&mut maia, &sid).await,
        [
            (first.clone(), "first".to_owned()),
            (second.clone(), "second".to_owned()),
            (third.clone(), "third".to_owned())
        ]
    );
    let resp = queue(
        &mut maia,
        &sid,
        "reorder",
        json!({"queuedSubmissionIds": [third, first, second]}),
    )
    .await;
    assert_eq!(
        resp["result"],
        json!({"status": "ok", "result": {}}),
        "{resp}"
    );
    // A stale order (not every id once) is refused and changes nothing.
    let stale = queue(
        &mut maia,
        &sid,
        "reorder",
        json!({"queuedSubmissionIds": [first, third]}),
    )
    .await;
    assert_eq!(stale["error"]["code"], -32602, "{stale}");
    let resp = queue(
        &mut maia,
        &sid,
        "delete",
        json!({"queuedSubmissionId": second}),
    )
    .await;
    assert_eq!(resp["result"]["result"], json!({"deleted": true}), "{resp}");
    let resp = queue(
        &mut maia,
        &sid,
        "update",
        json!({"queuedSubmissionId": first, "input": text("first, edited")}),
    )
    .await;
    assert_eq!(
        resp["result"]["result"]["queuedSubmission"]["input"],
        text("first, edited")
    );
    // Start while a turn runs is refused.
    let busy = queue(&mut maia, &sid, "start", json!({})).await;
    assert_eq!(busy["error"]["code"], -32600, "{busy}");
    assert_eq!(
        listed(&mut maia, &sid).await,
        [
            (third.clone(), "third".to_owned()),
            (first.clone(), "first, edited".to_owned())
        ]
    );
    // One change notification per change: 3 adds, reorder, delete, update.
    let changed = maia.seen[seen_before..]
        .iter()
        .filter(|m| m["method"] == "_session/queue/changed" && m["params"]["sessionId"] == sid)
        .count();
    assert_eq!(changed, 6);

    let option = crate::harness::choose("allow_once")(&permission).unwrap();
    maia.respond(&permission["id"], option).await;
    let (resp, _) = maia.response(prompt).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let started = queue_turn(&mut maia, &third, "inProgress").await;
    assert_eq!(started["params"]["sessionId"], sid);
    queue_turn(&mut maia, &third, "completed").await;
    queue_turn(&mut maia, &first, "inProgress").await;
    queue_turn(&mut maia, &first, "completed").await;
    assert_eq!(maia.mock.requests().len(), 4);
    assert_eq!(last_user_text(&maia, 2), "third");
    assert_eq!(last_user_text(&maia, 3), "first, edited");
    assert!(listed(&mut maia, &sid).await.is_empty());
}

#[tokio::test]
async fn a_cancelled_turn_keeps_the_queue_and_start_resumes_it() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_w",
        "Write",
        json!({"file_path": "out.txt", "content": "hello"}),
    )]));
    let prompt = maia.prompt(&sid, "write the file").await;
    let (permission, _) = maia.wait_for(is_permission).await;
    let later = add(&mut maia, &sid, "later").await;
    maia.notify("session/cancel", json!({"sessionId": sid}))
        .await;
    maia.respond(
        &permission["id"],
        json!({"outcome": {"outcome": "cancelled"}}),
    )
    .await;
    let (resp, _) = maia.response(prompt).await;
    assert_eq!(resp["result"]["stopReason"], "cancelled", "{resp}");
    assert_eq!(
        listed(&mut maia, &sid).await,
        [(later.clone(), "later".to_owned())]
    );
    assert_eq!(
        maia.mock.requests().len(),
        1,
        "the queue did not run by itself"
    );

    maia.mock.push(mock::text_reply("later answer"));
    let resp = queue(&mut maia, &sid, "start", json!({})).await;
    assert_eq!(resp["result"]["status"], "ok", "{resp}");
    assert_eq!(resp["result"]["result"]["turn"]["status"], "inProgress");
    queue_turn(&mut maia, &later, "completed").await;
    assert_eq!(last_user_text(&maia, 1), "later");
    assert!(listed(&mut maia, &sid).await.is_empty());
    // Starting an empty queue is refused.
    let empty = queue(&mut maia, &sid, "start", json!({})).await;
    assert_eq!(empty["error"]["code"], -32602, "{empty}");
}

#[tokio::test]
async fn the_queue_survives_a_restart() {
    let (mut maia, sid) = Maia::ready().await;
    // Adding to an idle session queues without starting a turn.
    let kept = add(&mut maia, &sid, "kept").await;
    assert!(maia.mock.requests().is_empty());
    let mut maia = maia.restart().await;
    maia.initialize().await;
    let (loaded, _) = maia.load(&sid).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    assert_eq!(listed(&mut maia, &sid).await, [(kept, "kept".to_owned())]);
}

#[tokio::test]
async fn a_malformed_queue_request_is_invalid_params() {
    let (mut maia, sid) = Maia::ready().await;
    let resp = queue(&mut maia, &sid, "teleport", json!({})).await;
    assert_eq!(resp["error"]["code"], -32602, "{resp}");
}
