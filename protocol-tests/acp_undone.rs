//! What the user undid in the editor's hunk review (issue 34): the
//! report rides on `session/prompt` (and `_session/steering`) as
//! `_meta.maia.undoneHunks`, and the model hears it once, at the start
//! of that message; a later request does not repeat it.

use std::time::Duration;

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, content_text, eventually, is_response};

/// The texts of the user messages of model request `index`.
fn user_texts(maia: &Maia, index: usize) -> Vec<String> {
    maia.mock.requests()[index]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(content_text)
        .collect()
}

/// How often `needle` occurs in all messages of model request `index`.
fn occurrences(maia: &Maia, index: usize, needle: &str) -> usize {
    maia.mock.requests()[index]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| content_text(m).matches(needle).count())
        .sum()
}

fn report(maia: &Maia) -> Value {
    json!({"maia": {"undoneHunks": [
        {"path": maia.path("a.txt"), "line": 2, "agentText": "agent line\n", "restoredText": "user line\n"},
        {"path": maia.path("new.txt"), "fileRemoved": true, "agentText": "created\n"},
    ]}})
}

async fn prompt_with_meta(maia: &mut Maia, sid: &str, text: &str, meta: Value) -> u64 {
    maia.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}], "_meta": meta}),
    )
    .await
}

#[tokio::test]
async fn initialize_advertises_undone_hunks() {
    let mut maia = Maia::start().await;
    let init = maia.initialize().await;
    assert_eq!(
        init["result"]["_meta"]["undoneHunks"]["meta"], "maia.undoneHunks",
        "{init}"
    );
}

#[tokio::test]
async fn the_next_model_request_carries_the_undone_hunks_once() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::text_reply("noted"));
    maia.mock.push(mock::text_reply("second"));
    let meta = report(&maia);
    let id = prompt_with_meta(&mut maia, &sid, "go on", meta).await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let users = user_texts(&maia, 0);
    let last = users.last().unwrap();
    let a = maia.path("a.txt").display().to_string();
    let created = maia.path("new.txt").display().to_string();
    assert!(
        last.starts_with("[Since your last answer the user reviewed your file changes"),
        "{last}"
    );
    assert!(
        last.contains(&format!(
            "1. {a}, line 2: your lines were removed:\n    - agent line\n  and the earlier lines restored:\n    + user line\n"
        )),
        "{last}"
    );
    assert!(
        last.contains(&format!("2. {created}: the file you created was removed.")),
        "{last}"
    );
    assert!(last.ends_with("go on"), "the prompt's text follows: {last}");
    assert_eq!(occurrences(&maia, 0, "undid 2 of them"), 1);

    // The next prompt, without a report: the note stays where it was in the
    // history, and is not added again.
    let (resp, _) = maia.turn(&sid, "and now?").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_eq!(occurrences(&maia, 1, "undid 2 of them"), 1);
    assert_eq!(user_texts(&maia, 1).last().unwrap(), "and now?");

    // The replayed thread shows what the user typed, not the note.
    let (_, replay) = maia.load(&sid).await;
    let shown: Vec<&str> = replay
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "user_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(shown, ["go on", "and now?"], "{replay:?}");
}

#[tokio::test]
async fn a_steer_carries_the_undone_hunks_too() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::text_reply("steered"));
    let meta = report(&maia);
    let id = maia
        .request(
            "_session/steering",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "look"}], "_meta": meta}),
        )
        .await;
    let (answer, _) = maia.wait_for(|m| is_response(m, id)).await;
    assert_eq!(answer["result"]["outcome"], "startedNewTurn", "{answer}");
    // The turn it started asks the model.
    assert!(
        eventually(Duration::from_secs(20), || !maia.mock.requests().is_empty()).await,
        "no model request"
    );
    let users = user_texts(&maia, 0);
    assert_eq!(occurrences(&maia, 0, "undid 2 of them"), 1);
    assert!(users.last().unwrap().ends_with("look"), "{users:?}");
}

#[tokio::test]
async fn a_malformed_report_is_refused_and_starts_nothing() {
    let (mut maia, sid) = Maia::ready().await;
    for bad in [
        json!({"maia": {"undoneHunks": [{"path": "relative.txt", "line": 1}]}}),
        json!({"maia": {"undoneHunks": [{"path": "/abs/a.txt"}]}}),
        json!({"maia": {"undoneHunks": {"path": "/abs/a.txt"}}}),
        json!({"maia": {"undoneHunks": [{"path": "/abs/a.txt", "line": 1, "extra": 1}]}}),
    ] {
        let id = prompt_with_meta(&mut maia, &sid, "hi", bad.clone()).await;
        let (resp, _) = maia.response(id).await;
        assert_eq!(resp["error"]["code"], -32602, "{bad}: {resp}");
        assert!(
            resp["error"]["message"]
                .as_str()
                .unwrap()
                .contains("undoneHunks"),
            "{resp}"
        );
    }
    assert!(maia.mock.requests().is_empty(), "no turn was started");
    // The session still works.
    maia.mock.push(mock::text_reply("fine"));
    let (resp, _) = maia.turn(&sid, "hi").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
}
