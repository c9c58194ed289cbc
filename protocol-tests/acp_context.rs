//! Context management under a real limit: the mock LLM enforces its context
//! window (HTTP 400 with LiteLLM's or OpenAI's body for any request over
//! it), and compaction must keep the user's words, size its own requests,
//! and leave the journal telling the whole story.

use std::time::Duration;

use maia_test_support::{self as mock, WindowError, estimate_tokens};
use serde_json::{Value, json};

use crate::harness::{Maia, Options, agent_text, updates_of};

async fn ready(settings: Value) -> (Maia, String) {
    let mut maia = Maia::start_with(Options {
        settings,
        ..Default::default()
    })
    .await;
    maia.initialize_with(json!({"session": {"compaction": {}}}))
        .await;
    let sid = maia.new_session().await;
    (maia, sid)
}

async fn turn(maia: &mut Maia, sid: &str, text: &str) -> (Value, Vec<Value>) {
    let id = maia.prompt(sid, text).await;
    maia.response(id).await
}

fn journal(maia: &Maia, name: &str) -> Vec<Value> {
    std::fs::read_to_string(maia.path(&format!(".maia/.sessions/{name}.jsonl")))
        .unwrap_or_else(|e| panic!("no journal {name}: {e}"))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn session_files(maia: &Maia) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(maia.path(".maia/.sessions"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    names.sort();
    names
}

/// The text of a message whatever its content's shape (string or parts).
fn content_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

fn is_summary_request(request: &Value) -> bool {
    request["max_tokens"].is_u64() && request["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with("You summarise a coding session"))
}

/// A prompt of about `tokens` tokens (4 characters each) ending with `tag`.
fn long_prompt(tag: &str, tokens: usize) -> String {
    let mut text = String::new();
    let mut i = 0;
    while text.len() < tokens * 4 {
        text.push_str(&format!("line {i} of the notes for {tag}. "));
        i += 1;
    }
    text.push_str(&format!("QUESTION {tag}: what is the answer?"));
    text
}

#[tokio::test]
async fn reactive_compaction_keeps_the_prompt_verbatim_in_the_request_and_the_journal() {
    let (mut maia, sid) = ready(json!({})).await;
    maia.mock.push(mock::text_reply("first answer"));
    turn(&mut maia, &sid, "remember the word banana").await;
    let id = maia.prompt(&sid, "/rename work").await;
    maia.response(id).await;
    let base = estimate_tokens(&maia.mock.requests()[0]);
    // MAIA believes the list's 32,768 tokens; the provider allows much less.
    maia.mock
        .enforce_context_window(base + 12_000, WindowError::LiteLlm);
    maia.mock.push(mock::text_reply("second answer"));
    let second = long_prompt("two", 6_500);
    turn(&mut maia, &sid, &second).await;
    assert!(maia.mock.rejected().is_empty());

    let third = long_prompt("three", 6_500);
    maia.mock.push(mock::text_reply(
        "## Project context\nThe word is banana.\n## Current goal\n-\n## Relevant files\n-\n## Decisions and conclusions\n-\n## Next steps\n-",
    ));
    maia.mock.push(mock::text_reply("third answer"));
    let (resp, before) = turn(&mut maia, &sid, &third).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    assert_eq!(agent_text(&before), "third answer");
    let requests = maia.mock.requests();
    let rejected = maia.mock.rejected();
    assert_eq!(rejected.len(), 1, "one request over the window");
    let rejected_size = estimate_tokens(&requests[rejected[0]]);
    let summary = &requests[rejected[0] + 1];
    assert!(is_summary_request(summary), "{summary}");
    assert!(
        estimate_tokens(summary) < rejected_size,
        "the summary request ({}) is smaller than the rejected one ({rejected_size})",
        estimate_tokens(summary)
    );
    let summarised = summary.to_string();
    assert!(summarised.contains("banana") && summarised.contains("QUESTION two"));
    assert!(
        !summarised.contains("QUESTION three"),
        "the latest message is kept, not summarised"
    );
    // The request after compaction: the summary, then the prompt verbatim.
    let after = requests.last().unwrap();
    let messages = after["messages"].as_array().unwrap();
    assert!(
        content_text(&messages[0]).contains("The word is banana."),
        "{}",
        serde_json::to_string_pretty(&requests.iter().map(|r| r["messages"].as_array().unwrap().iter().map(|m| content_text(m).chars().take(150).collect::<String>()).collect::<Vec<_>>()).collect::<Vec<_>>()).unwrap()
    );
    assert_eq!(messages.len(), 2, "{after}");
    assert_eq!(messages[1]["role"], "user");
    assert_eq!(content_text(&messages[1]), third);
    assert!(!after.to_string().contains("was compacted to fit"));

    // The continued journal holds the question and the answer.
    assert_eq!(session_files(&maia), ["work.jsonl", "work__1.jsonl"]);
    let records = journal(&maia, "work__1");
    let shown: Vec<_> = records
        .iter()
        .filter(|r| r["type"] == "user_display")
        .collect();
    assert_eq!(shown.len(), 1, "{records:?}");
    assert_eq!(shown[0]["text"], third);
    let saved = records
        .iter()
        .filter(|r| r["type"] == "message")
        .map(|r| r["message"].clone())
        .collect::<Vec<_>>();
    assert_eq!(saved.len(), 2, "{saved:?}");
    assert_eq!(saved[0]["role"], "user");
    assert_eq!(content_text(&saved[0]), third);
    assert_eq!(content_text(&saved[1]), "third answer");

    // After a restart, session/load shows the question before the answer.
    let mut maia = maia.restart().await;
    maia.initialize().await;
    let cwd = maia.cwd();
    let id = maia
        .request(
            "session/load",
            json!({"sessionId": sid, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    let (resp, before) = maia.response(id).await;
    assert!(resp.get("error").is_none(), "{resp}");
    let users: Vec<String> = updates_of(&before, "user_message_chunk")
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(users.concat(), third);
    assert_eq!(agent_text(&before), "third answer");
    let _ = Duration::from_secs(1);
}
