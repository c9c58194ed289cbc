//! Compaction: `/compact`, automatic and cancelled compactions, how the
//! editor sees them, and the `name__n` files.

use std::time::Duration;

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, Options, agent_text, session_files, updates_of};

async fn ready(settings: Value, client_capabilities: Value) -> (Maia, String) {
    let mut maia = Maia::start_with(Options {
        settings,
        ..Default::default()
    })
    .await;
    maia.initialize_with(client_capabilities).await;
    let sid = maia.new_session().await;
    (maia, sid)
}

#[tokio::test]
async fn manual_compaction_with_the_compaction_capability() {
    let (mut maia, sid) = ready(json!({}), json!({"session": {"compaction": {}}})).await;
    maia.mock.push(mock::text_reply("first answer"));
    maia.turn(&sid, "remember the word banana").await;
    let id = maia.prompt(&sid, "/rename work").await;
    maia.response(id).await;

    maia.mock
        .push(mock::text_reply("## Project context\nThe word is banana."));
    let (resp, before) = maia.turn(&sid, "/compact").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    let updates = updates_of(&before, "compaction_update");
    let statuses: Vec<_> = updates.iter().map(|u| u["status"].clone()).collect();
    assert_eq!(statuses, [json!("in_progress"), json!("completed")]);
    assert_eq!(updates[0]["compactionId"], updates[1]["compactionId"]);
    assert!(
        updates[1]["summary"][0]["text"]
            .as_str()
            .unwrap()
            .contains("banana")
    );
    assert!(
        updates_of(&before, "tool_call").is_empty(),
        "never both carriers"
    );
    assert!(agent_text(&before).contains("work__1"));
    let summary_request = maia.mock.requests().last().unwrap().clone();
    assert_eq!(summary_request["max_tokens"], 4000);

    // The pre-compaction file is intact; the thread continues in work__1.
    assert_eq!(session_files(&maia), ["work.jsonl", "work__1.jsonl"]);
    let old = std::fs::read_to_string(maia.path(".maia/.sessions/work.jsonl")).unwrap();
    assert!(old.contains("remember the word banana"));

    maia.mock.push(mock::text_reply("it was banana"));
    maia.turn(&sid, "what was the word?").await;
    let messages = maia.mock.requests().last().unwrap()["messages"].clone();
    let messages = messages.as_array().unwrap();
    assert_eq!(
        messages.len(),
        2,
        "system (with the summary) + the new question"
    );
    assert!(
        messages[0]["content"]
            .as_str()
            .unwrap()
            .contains("The word is banana.")
    );

    // Loading the compacted file restores the summary as starting context.
    let id = maia.prompt(&sid, "/load work__1").await;
    maia.response(id).await;
    maia.mock.push(mock::text_reply("ok"));
    maia.turn(&sid, "again").await;
    let messages = maia.mock.requests().last().unwrap()["messages"].clone();
    assert!(
        messages[0]["content"]
            .as_str()
            .unwrap()
            .contains("The word is banana.")
    );
}

#[tokio::test]
async fn without_the_capability_a_think_tool_call_shows_it() {
    let (mut maia, sid) = ready(json!({}), json!({})).await;
    maia.mock.push(mock::text_reply("first answer"));
    maia.turn(&sid, "hello").await;
    maia.mock.push(mock::text_reply("the summary"));
    let (_, before) = maia.turn(&sid, "/compact").await;
    assert!(updates_of(&before, "compaction_update").is_empty());
    let calls = updates_of(&before, "tool_call");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["kind"], "think");
    assert_eq!(calls[0]["title"], "Compacting conversation…");
    let done = updates_of(&before, "tool_call_update");
    assert_eq!(done.last().unwrap()["status"], "completed");
    let text = done.last().unwrap()["content"][0]["content"]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains('→'), "before/after token counts: {text}");
}

#[tokio::test]
async fn automatic_compaction_before_a_request() {
    // The mock counts like a provider (and reports it as usage); a first
    // session measures what every request carries (system prompt, tools).
    let (mut maia, sid) = ready(json!({}), json!({"session": {"compaction": {}}})).await;
    maia.mock
        .enforce_context_window(1_000_000, mock::WindowError::LiteLlm);
    maia.mock.push(mock::text_reply("measure"));
    maia.turn(&sid, "hi").await;
    let base = mock::estimate_tokens(&maia.mock.requests()[0]);
    // A window leaving 1,000 tokens above the 4,000 + 500 kept for the
    // summary and the output reserve (an eighth of so small a window).
    let window = ((base + 4_500 + 1_000) * 8).div_ceil(7);
    std::fs::create_dir_all(maia.path(".maia")).unwrap();
    // Not a local model: the same tools as the measured session, though
    // the window is small.
    std::fs::write(
        maia.path(".maia/settings.json"),
        json!({"contextWindows": {"mock-model": window}, "localModels": false}).to_string(),
    )
    .unwrap();
    let sid = maia.new_session().await;
    maia.mock.push(mock::text_reply("first answer"));
    let first = format!("first: {}", "long words ".repeat(220));
    let (_, before) = maia.turn(&sid, &first).await;
    assert!(updates_of(&before, "compaction_update").is_empty());
    // 600 + 500 tokens: over the threshold before the request.
    let prompt = format!("{} What now?", "more words ".repeat(180));
    maia.mock.push(mock::text_reply("auto summary"));
    maia.mock.push(mock::text_reply("answer"));
    let (resp, before) = maia.turn(&sid, &prompt).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    assert_eq!(agent_text(&before), "answer");
    let statuses: Vec<_> = updates_of(&before, "compaction_update")
        .iter()
        .map(|u| u["status"].clone())
        .collect();
    assert_eq!(statuses, [json!("in_progress"), json!("completed")]);
    let requests = maia.mock.requests();
    assert_eq!(requests.len(), 4);
    // The summary came first; a small window gets a summary of a quarter of it.
    assert_eq!(requests[2]["max_tokens"], (window / 4).min(4000));
    assert!(requests[2].to_string().contains("first answer"));
    assert!(
        !requests[2].to_string().contains("What now?"),
        "kept, not summarised"
    );
    let messages = requests[3]["messages"].as_array().unwrap();
    assert!(
        messages[0]["content"]
            .as_str()
            .unwrap()
            .contains("auto summary")
    );
    assert_eq!(messages.len(), 2);
    assert_eq!(
        messages[1]["content"],
        prompt.as_str(),
        "the prompt, verbatim"
    );
    // Usage: the estimate after compacting, then the server's numbers.
    let usage = updates_of(&before, "usage_update");
    assert_eq!(usage.len(), 2, "{usage:?}");
    assert_eq!(usage[1]["size"], window);
    assert!(
        session_files(&maia)
            .iter()
            .any(|f| f.ends_with("__1.jsonl"))
    );
    // The measured size is under the threshold again: no compaction now.
    maia.mock.push(mock::text_reply("calm"));
    let (_, before) = maia.turn(&sid, "next").await;
    assert!(updates_of(&before, "compaction_update").is_empty());
}

#[tokio::test]
async fn cancelling_a_compaction_changes_nothing() {
    let (mut maia, sid) = ready(json!({}), json!({"session": {"compaction": {}}})).await;
    maia.mock.push(mock::text_reply("first answer"));
    maia.turn(&sid, "keep me").await;
    maia.mock.push(mock::Reply::Hang);
    let id = maia.prompt(&sid, "/compact").await;
    maia.wait_for(|m| m["params"]["update"]["sessionUpdate"] == "compaction_update")
        .await;
    // The cancel comes while the summary streams (the update is sent before the request).
    maia.mock
        .wait_for_requests(2, Duration::from_secs(10))
        .await;
    maia.notify("session/cancel", json!({"sessionId": sid}))
        .await;
    let (resp, before) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "cancelled");
    let last = updates_of(&before, "compaction_update");
    assert_eq!(last.last().unwrap()["status"], "cancelled");
    maia.mock
        .wait_for_dropped_streams(1, Duration::from_secs(5))
        .await;
    assert_eq!(session_files(&maia).len(), 1, "no __1 file");
    maia.mock.push(mock::text_reply("still here"));
    maia.turn(&sid, "next").await;
    let messages = maia.mock.requests().last().unwrap()["messages"].clone();
    let text = messages.to_string();
    assert!(text.contains("keep me"), "history unchanged: {text}");
}

#[tokio::test]
async fn suffix_wraps_after_1000() {
    let (mut maia, sid) = ready(json!({}), json!({})).await;
    let before = maia.compact_renamed(&sid, "x__1000").await;
    assert!(
        agent_text(&before).contains("`x__1`"),
        "{}",
        agent_text(&before)
    );
    assert!(session_files(&maia).contains(&"x__1.jsonl".to_owned()));
}

#[tokio::test]
async fn bang_output_pending_at_compact_is_summarised() {
    let (mut maia, sid) = ready(json!({}), json!({"session": {"compaction": {}}})).await;
    maia.mock.push(mock::text_reply("first answer"));
    maia.turn(&sid, "hello").await;
    let (resp, _) = maia.turn(&sid, "!echo pending-bang-93").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_eq!(maia.mock.requests().len(), 1, "`!` asks no model");

    maia.mock
        .push(mock::text_reply("## Project context\nran echo"));
    let (resp, _) = maia.turn(&sid, "/compact").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let summary_request = maia.mock.requests()[1].to_string();
    assert!(
        summary_request.contains("pending-bang-93"),
        "the summary request carries the `!` output: {summary_request}"
    );

    // Summarised, not sent a second time.
    maia.mock.push(mock::text_reply("ok"));
    maia.turn(&sid, "next").await;
    let next = maia.mock.requests().last().unwrap().to_string();
    assert!(!next.contains("pending-bang-93"), "{next}");
    assert!(next.contains("ran echo"), "{next}");
}
