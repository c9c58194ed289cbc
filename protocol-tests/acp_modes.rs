//! Session modes: `default`, `accept-edits`, `read-only`, `bypass`, as ACP
//! modes and as the `mode` config option, kept in sync.

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, choose, tool_results, updates_of};

async fn open(maia: &mut Maia) -> (String, Value) {
    maia.initialize().await;
    maia.new_session_result().await
}

async fn set_mode(maia: &mut Maia, sid: &str, mode: &str) -> Value {
    let id = maia
        .request(
            "session/set_mode",
            json!({"sessionId": sid, "modeId": mode}),
        )
        .await;
    maia.response(id).await.0
}

fn write_call(path: &str) -> mock::Reply {
    mock::tool_calls_reply(&[("w1", "Write", json!({"file_path": path, "content": "x\n"}))])
}

fn no_permission_asked(messages: &[Value]) -> bool {
    messages
        .iter()
        .all(|m| m["method"] != "session/request_permission")
}

#[tokio::test]
async fn modes_are_offered_both_ways() {
    let mut maia = Maia::start().await;
    let (sid, result) = open(&mut maia).await;
    assert_eq!(result["modes"]["currentModeId"], "default");
    let ids: Vec<_> = result["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        ids,
        ["default", "accept-edits", "read-only", "plan", "bypass"]
    );
    let bypass = &result["modes"]["availableModes"][4];
    assert!(
        bypass["name"].as_str().unwrap().contains("dangerous"),
        "{bypass}"
    );
    let option = result["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "mode")
        .unwrap()
        .clone();
    assert_eq!(option["category"], "mode");
    assert_eq!(option["currentValue"], "default");

    // set_mode → {} and the config option follows (sent before the answer).
    let id = maia
        .request(
            "session/set_mode",
            json!({"sessionId": sid, "modeId": "read-only"}),
        )
        .await;
    let (resp, before) = maia.response(id).await;
    assert_eq!(resp["result"], json!({}), "{resp}");
    let update = updates_of(&before, "config_option_update");
    assert_eq!(update.len(), 1, "{before:?}");
    let options = update[0]["configOptions"].as_array().unwrap();
    assert!(
        options
            .iter()
            .any(|o| o["id"] == "mode" && o["currentValue"] == "read-only")
    );

    // The config option → the full list, and current_mode_update.
    let id = maia
        .request(
            "session/set_config_option",
            json!({"sessionId": sid, "configId": "mode", "value": "accept-edits"}),
        )
        .await;
    let (resp, before) = maia.response(id).await;
    let options = resp["result"]["configOptions"].as_array().unwrap();
    assert!(
        options
            .iter()
            .any(|o| o["id"] == "mode" && o["currentValue"] == "accept-edits")
    );
    let update = updates_of(&before, "current_mode_update");
    assert_eq!(update[0]["currentModeId"], "accept-edits");

    let resp = set_mode(&mut maia, &sid, "yolo").await;
    assert_eq!(resp["error"]["code"], -32602);
}

#[tokio::test]
async fn accept_edits_writes_inside_the_project_without_asking() {
    let mut maia = Maia::start().await;
    let (sid, _) = open(&mut maia).await;
    set_mode(&mut maia, &sid, "accept-edits").await;
    maia.mock.push(write_call("src/a.txt"));
    let (_, before) = maia.answered_turn(&sid, "write", "done").await;
    assert!(no_permission_asked(&before));
    assert_eq!(
        std::fs::read_to_string(maia.path("src/a.txt")).unwrap(),
        "x\n"
    );
    // Commands still follow the rules (ask).
    maia.mock.push(mock::tool_calls_reply(&[(
        "b1",
        "Bash",
        json!({"command": "echo hi"}),
    )]));
    maia.mock.push(mock::text_reply("done"));
    let id = maia.prompt(&sid, "run").await;
    let (_, before) = maia.response_with(id, choose("reject_once")).await;
    assert!(!no_permission_asked(&before));
}

#[tokio::test]
async fn read_only_refuses_changes_and_commands() {
    let mut maia = Maia::start().await;
    let (sid, _) = open(&mut maia).await;
    set_mode(&mut maia, &sid, "read-only").await;
    maia.mock.push(mock::tool_calls_reply(&[
        ("w1", "Write", json!({"file_path": "a.txt", "content": "x"})),
        ("b1", "Bash", json!({"command": "touch marker"})),
    ]));
    let (resp, before) = maia.answered_turn(&sid, "try", "ok").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    assert!(no_permission_asked(&before));
    assert!(!maia.path("a.txt").exists() && !maia.path("marker").exists());
    let failed = updates_of(&before, "tool_call_update")
        .iter()
        .filter(|u| u["status"] == "failed")
        .count();
    assert_eq!(failed, 2);
    let tool_messages = tool_results(&maia, 1);
    assert!(
        tool_messages.iter().all(|t| t.contains("read-only")),
        "{tool_messages:?}"
    );
}

#[tokio::test]
async fn bypass_runs_without_asking() {
    let mut maia = Maia::start().await;
    let (sid, _) = open(&mut maia).await;
    set_mode(&mut maia, &sid, "bypass").await;
    maia.mock.push(mock::tool_calls_reply(&[(
        "b1",
        "Bash",
        json!({"command": "echo bypassed > out.txt"}),
    )]));
    let (_, before) = maia.answered_turn(&sid, "run", "ok").await;
    assert!(no_permission_asked(&before));
    assert_eq!(
        std::fs::read_to_string(maia.path("out.txt")).unwrap(),
        "bypassed\n"
    );
}

#[tokio::test]
async fn bypass_still_refuses_catastrophic_commands_and_keeps_the_sandbox() {
    let mut maia = Maia::start().await;
    let (sid, _) = open(&mut maia).await;
    set_mode(&mut maia, &sid, "bypass").await;
    let outside = maia.cwd().join("../maia-outside-probe.txt");
    maia.mock.push(mock::tool_calls_reply(&[
        // HOME is the test's own folder: harmless even if it ran.
        (
            "b1",
            "Bash",
            json!({"command": "bash -c 'rm -rf \"$HOME\"'"}),
        ),
        (
            "b2",
            "Bash",
            json!({"command": "echo x > ../maia-outside-probe.txt"}),
        ),
        ("b3", "Bash", json!({"command": "echo inside > inside.txt"})),
    ]));
    let (_, before) = maia.answered_turn(&sid, "run", "ok").await;
    assert!(no_permission_asked(&before));
    let tool_messages = tool_results(&maia, 1);
    assert!(
        tool_messages[0].contains("catastrophic"),
        "{tool_messages:?}"
    );
    assert!(maia.home.path().exists());
    let leaked = outside.exists();
    let _ = std::fs::remove_file(&outside);
    assert!(!leaked, "the sandbox let a write out of the project");
    assert!(
        tool_messages[1].contains("MAIA sandbox"),
        "{tool_messages:?}"
    );
    assert_eq!(
        std::fs::read_to_string(maia.path("inside.txt")).unwrap(),
        "inside\n"
    );
}

/// The session owns its mode: a change sent while a turn waits on a
/// permission question reaches the turn at its next batch of tool calls
/// (the one already authorising keeps the mode it started with).
#[tokio::test]
async fn a_mode_change_during_a_turn_applies_from_the_next_batch() {
    let mut maia = Maia::start().await;
    let (sid, _) = open(&mut maia).await;
    maia.mock.push(mock::tool_calls_reply(&[(
        "b1",
        "Bash",
        json!({"command": "touch first"}),
    )]));
    maia.mock.push(write_call("a.txt"));
    maia.mock.push(mock::text_reply("ok"));
    let prompt = maia.prompt(&sid, "go").await;
    let (asked, _) = maia
        .wait_for(|m| m["method"] == "session/request_permission")
        .await;
    // Answered before the question is: the change is queued by now.
    let id = maia
        .request(
            "session/set_mode",
            json!({"sessionId": sid, "modeId": "read-only"}),
        )
        .await;
    let (changed, _) = maia.response(id).await;
    assert!(changed.get("error").is_none(), "{changed}");
    let answer = choose("allow_once")(&asked).unwrap();
    maia.respond(&asked["id"], answer).await;
    let (resp, during) = maia.response(prompt).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    assert!(no_permission_asked(&during), "{during:?}");
    assert!(
        maia.path("first").exists(),
        "the first batch ran as allowed"
    );
    assert!(!maia.path("a.txt").exists(), "the write ran in read-only");
    let refused = tool_results(&maia, 2);
    assert!(
        refused.iter().any(|t| t.contains("read-only")),
        "{refused:?}"
    );
}
