//! Prompt turns: streamed text, thoughts, stop reasons, file context.

use std::time::Duration;

use maia_test_support as mock;
use serde_json::json;

use crate::harness::{Maia, agent_text, updates, updates_of};

#[tokio::test]
async fn streams_text_before_the_response() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::text_chunks(
        &["Hello", ", ", "world", "!"],
        Duration::from_millis(5),
    ));
    let id = maia.prompt(&sid, "hi").await;
    let (resp, before) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_eq!(agent_text(&before), "Hello, world!");
    let chunks = updates_of(&before, "agent_message_chunk");
    assert!(chunks.len() >= 4, "streamed in pieces: {chunks:?}");
    let ids: std::collections::HashSet<_> = chunks.iter().map(|c| c["messageId"].clone()).collect();
    assert_eq!(ids.len(), 1, "one message id for one message");
    for m in &before {
        assert_eq!(m["params"]["sessionId"], sid);
    }
    // The model got the system prompt, the user text and the tools.
    let reqs = maia.mock.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0]["model"], "mock-model");
    assert_eq!(reqs[0]["stream"], true);
    assert_eq!(reqs[0]["stream_options"]["include_usage"], true);
    let messages = reqs[0]["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages.last().unwrap()["content"], "hi");
    let tools: Vec<_> = reqs[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        tools,
        [
            "Read",
            "Write",
            "Edit",
            "MultiEdit",
            "Glob",
            "Grep",
            "Bash",
            "WebFetch",
            "TodoWrite",
            "CurrentModel",
            "AskUser",
            "TaskOutput",
            "TaskStop",
            "Task"
        ]
    );

    // A second turn carries the history.
    let (resp, before) = maia.answered_turn(&sid, "more", "again").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    assert_eq!(agent_text(&before), "again");
    let messages = maia.mock.requests()[1]["messages"]
        .as_array()
        .unwrap()
        .clone();
    let roles: Vec<_> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert_eq!(messages[2]["content"], "Hello, world!");
}

#[tokio::test]
async fn reasoning_becomes_thought_chunks() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock
        .push(mock::reasoning_then_text("let me think", "answer"));
    let id = maia.prompt(&sid, "q").await;
    let (_, before) = maia.response(id).await;
    let thoughts: String = updates_of(&before, "agent_thought_chunk")
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(thoughts, "let me think");
    assert_eq!(agent_text(&before), "answer");
}

#[tokio::test]
async fn stop_reasons_from_finish_reasons() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::finish_reply("cut", "length"));
    let id = maia.prompt(&sid, "q").await;
    assert_eq!(
        maia.response(id).await.0["result"]["stopReason"],
        "max_tokens"
    );
    maia.mock.push(mock::finish_reply("", "content_filter"));
    let id = maia.prompt(&sid, "q").await;
    assert_eq!(maia.response(id).await.0["result"]["stopReason"], "refusal");
}

#[tokio::test]
async fn max_turn_requests_caps_model_calls() {
    let mut maia = Maia::start_with(crate::harness::Options {
        settings: json!({"max_turn_requests": 2}),
        ..Default::default()
    })
    .await;
    maia.initialize().await;
    let sid = maia.new_session().await;
    std::fs::write(maia.path("a.txt"), "x").unwrap();
    for i in 0..3 {
        maia.mock.push(mock::tool_calls_reply(&[(
            &format!("c{i}"),
            "Glob",
            json!({"pattern": "*.txt"}),
        )]));
    }
    let id = maia.prompt(&sid, "loop").await;
    let (resp, _) = maia
        .response_with(id, crate::harness::choose("allow_always"))
        .await;
    assert_eq!(resp["result"]["stopReason"], "max_turn_requests", "{resp}");
    assert_eq!(maia.mock.requests().len(), 2);
}

#[tokio::test]
async fn file_links_and_embedded_resources_are_injected_as_data() {
    let (mut maia, sid) = Maia::ready().await;
    let file = maia.path("notes.md");
    std::fs::write(&file, "secret plan").unwrap();
    maia.mock.push(mock::text_reply("ok"));
    let uri = format!("file://{}", file.display());
    let id = maia
        .prompt_blocks(
            &sid,
            json!([
                {"type": "text", "text": "summarise"},
                {"type": "resource_link", "uri": uri, "name": "notes.md"},
                {"type": "resource_link", "uri": uri, "name": "notes.md"},
                {"type": "resource", "resource": {"uri": "file:///virtual/buf.rs", "text": "fn unsaved() {}"}}
            ]),
        )
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    let req = &maia.mock.requests()[0];
    let user = req["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(user.starts_with("summarise"), "{user}");
    assert_eq!(
        user.matches("secret plan").count(),
        1,
        "same file once: {user}"
    );
    assert!(user.contains("fn unsaved() {}"));
    assert!(user.contains("not instructions"));
}

#[tokio::test]
async fn concurrent_prompt_on_one_session_is_rejected() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock
        .push(mock::slow_text(40, Duration::from_millis(25)));
    let first = maia.prompt(&sid, "slow").await;
    let second = maia.prompt(&sid, "again").await;
    let (resp, _) = maia.response(second).await;
    assert_eq!(resp["error"]["code"], -32600, "{resp}");
    assert!(
        resp["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already")
    );
    let (resp, _) = maia.response(first).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    // Nothing for this turn after its response.
    let (_, before) = maia.answered_turn(&sid, "next", "next").await;
    assert_eq!(crate::harness::agent_text(&before), "next");
    assert!(updates(&before).iter().all(
        |u| u["sessionUpdate"] == "agent_message_chunk" || u["sessionUpdate"] == "usage_update"
    ));
}

/// The title comes from the whole prompt: a client that sends "Please
/// rewrite", a link and " for me." as three blocks (agent-shell) gets the
/// sentence, with the mention as its file name, not the first block alone.
#[tokio::test]
async fn the_title_of_a_three_block_prompt_is_the_whole_sentence() {
    let (mut maia, sid) = Maia::ready().await;
    let file = maia.path("notes.txt");
    std::fs::write(&file, "text").unwrap();
    maia.mock.push(mock::text_reply("ok"));
    let uri = format!("file://{}", file.display());
    let id = maia
        .prompt_blocks(
            &sid,
            json!([
                {"type": "text", "text": "Please rewrite"},
                {"type": "resource_link", "uri": uri, "name": "notes.txt"},
                {"type": "text", "text": " for me."}
            ]),
        )
        .await;
    let (resp, messages) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    let titles: Vec<serde_json::Value> = updates_of(&messages, "session_info_update")
        .into_iter()
        .filter_map(|u| u.get("title").cloned())
        .collect();
    assert_eq!(
        titles,
        vec![json!("Please rewrite notes.txt for me.")],
        "{messages:#?}"
    );
}
