//! Subagents over the wire (ACP 1.20): `Task` calls start child sessions.
//! A client with `clientCapabilities.subagents` sees each child announced
//! with `subagent_update` before any of its traffic, the prompt and the
//! answer as `session_message`s, the child's own updates under its id, and
//! can cancel a child alone with `session/cancel`; another client sees the
//! child's progress inside the parent's `Task` tool call. Both get the
//! child's permission questions on the parent session, titled with the
//! agent's name, and the child again after a restart.

use maia_test_support::{self as mock, Gate, Reply};
use serde_json::{Value, json};

use crate::harness::{Maia, WAIT, choose, is_permission, updates_of};

/// The first user message of a model request (a child's: its prompt).
fn first_user(request: &Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .map(crate::harness::content_text)
        .unwrap_or_default()
}

fn has_results(request: &Value) -> bool {
    request["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"))
}

fn task(id: &str, prompt: &str) -> (String, Value) {
    (
        id.to_owned(),
        json!({"description": format!("do {id}"), "prompt": prompt}),
    )
}

fn push_tasks(maia: &Maia, tasks: &[(String, Value)]) {
    let calls: Vec<(&str, &str, Value)> = tasks
        .iter()
        .map(|(id, args)| (id.as_str(), "Task", args.clone()))
        .collect();
    maia.mock.push(mock::tool_calls_reply(&calls));
}

async fn ready(subagents: bool) -> (Maia, String) {
    let mut maia = Maia::start().await;
    let caps = if subagents {
        json!({"subagents": {}})
    } else {
        json!({})
    };
    maia.initialize_with(caps).await;
    let sid = maia.new_session().await;
    (maia, sid)
}

/// The `subagent_update`s among `messages`, as (the session they were
/// sent on, the update).
fn subagent_updates(messages: &[Value]) -> Vec<(String, Value)> {
    messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "subagent_update")
        .map(|m| {
            (
                m["params"]["sessionId"].as_str().unwrap_or("").to_owned(),
                m["params"]["update"].clone(),
            )
        })
        .collect()
}

/// The ids of the children announced in `messages`.
fn children(messages: &[Value]) -> Vec<String> {
    let mut ids = Vec::new();
    for (_, update) in subagent_updates(messages) {
        let id = update["sessionId"].as_str().unwrap_or("").to_owned();
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

#[tokio::test]
async fn two_children_run_in_parallel_announced_before_their_traffic() {
    let (mut maia, sid) = ready(true).await;
    let gate = Gate::default();
    let held = gate.clone();
    maia.mock.set_rule(move |request| {
        let answer = match first_user(request).as_str() {
            "find A" => "A is in a.rs",
            "find B" => "B is in b.rs",
            _ => return None,
        };
        Some(Reply::Gated {
            gate: held.clone(),
            reply: Box::new(mock::text_reply(answer)),
        })
    });
    push_tasks(&maia, &[task("t1", "find A"), task("t2", "find B")]);
    maia.mock.push(mock::text_reply("both found"));
    let id = maia.prompt(&sid, "look for both").await;
    // Both children's requests reach the model before either is answered.
    let requests = maia.mock.wait_for_requests(3, WAIT).await;
    let mut firsts: Vec<String> = requests.iter().map(first_user).collect();
    firsts.sort();
    assert_eq!(firsts, ["find A", "find B", "look for both"]);
    gate.open();
    let (response, messages) = maia.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let ids = children(&messages);
    assert_eq!(ids.len(), 2, "{messages:#?}");
    for child in &ids {
        let first = messages
            .iter()
            .position(|m| {
                m["params"]["sessionId"] == child.as_str()
                    || m["params"]["update"]["sessionId"] == child.as_str()
                    || m["params"]["update"]["recipientSessionId"] == child.as_str()
            })
            .unwrap();
        let announce = &messages[first];
        assert_eq!(announce["params"]["sessionId"], sid, "{announce}");
        let update = &announce["params"]["update"];
        assert_eq!(update["sessionUpdate"], "subagent_update", "{announce}");
        assert_eq!(update["capabilities"], json!({"cancel": {}}));
        assert_eq!(update["state"], json!({"state": "running"}));
        assert!(
            update["title"]
                .as_str()
                .unwrap()
                .starts_with("general-purpose: do t")
        );
        // The child's answer is its own message, then a message to the parent.
        assert!(
            messages
                .iter()
                .any(|m| m["params"]["sessionId"] == child.as_str()
                    && m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"),
            "{messages:#?}"
        );
        let last = subagent_updates(&messages)
            .into_iter()
            .rfind(|(_, u)| u["sessionId"] == child.as_str())
            .unwrap()
            .1;
        assert_eq!(
            last["state"],
            json!({"state": "idle", "stopReason": "end_turn"})
        );
    }
    let sent: Vec<&Value> = messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "session_message")
        .collect();
    assert!(sent.iter().any(|m| m["params"]["sessionId"] == sid
        && m["params"]["update"]["senderSessionId"] == sid
        && m["params"]["update"]["content"][0]["text"] == "find A"));
    assert!(sent.iter().any(|m| m["params"]["sessionId"] == sid
        && m["params"]["update"]["recipientSessionId"] == sid
        && m["params"]["update"]["content"][0]["text"] == "A is in a.rs"));
    let results = crate::harness::last_tool_results(&maia);
    assert_eq!(results, ["A is in a.rs", "B is in b.rs"]);

    // After a restart, the load replays the children.
    let mut maia = maia.restart().await;
    maia.initialize_with(json!({"subagents": {}})).await;
    let (_, replay) = maia.load(&sid).await;
    let replayed = children(&replay);
    assert_eq!(replayed.len(), 2, "{replay:#?}");
    assert!(replay.iter().any(
        |m| m["params"]["update"]["sessionUpdate"] == "session_message"
            && m["params"]["update"]["content"][0]["text"] == "B is in b.rs"
    ));
}

#[tokio::test]
async fn a_childs_permission_question_comes_through_the_parent_session() {
    let (mut maia, sid) = ready(true).await;
    maia.mock
        .set_rule(|request| match first_user(request).as_str() {
            "make it" if !has_results(request) => Some(mock::tool_calls_reply(&[(
                "w1",
                "Bash",
                json!({"command": "touch made.txt"}),
            )])),
            "make it" => Some(mock::text_reply("made")),
            _ => None,
        });
    push_tasks(&maia, &[task("t1", "make it")]);
    maia.mock.push(mock::text_reply("ok"));
    let id = maia.prompt(&sid, "please").await;
    let (response, messages) = maia.response_with(id, choose("allow_once")).await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let question = messages.iter().find(|m| is_permission(m)).unwrap();
    assert_eq!(question["params"]["sessionId"], sid);
    let title = question["params"]["toolCall"]["title"].as_str().unwrap();
    assert!(title.starts_with("general-purpose: "), "{title}");
    assert!(
        maia.path("made.txt").exists(),
        "the answer applied to the child"
    );
    assert_eq!(crate::harness::last_tool_results(&maia), ["made"]);
}

#[tokio::test]
async fn session_cancel_on_a_child_cancels_it_alone() {
    let (mut maia, sid) = ready(true).await;
    maia.mock
        .set_rule(|request| (first_user(request) == "wait forever").then_some(Reply::Hang));
    push_tasks(&maia, &[task("t1", "wait forever")]);
    maia.mock.push(mock::text_reply("went on"));
    let id = maia.prompt(&sid, "start").await;
    let (announce, _) = maia
        .wait_for(|m| m["params"]["update"]["sessionUpdate"] == "subagent_update")
        .await;
    let child = announce["params"]["update"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    maia.mock.wait_for_requests(2, WAIT).await;
    maia.notify("session/cancel", json!({"sessionId": child}))
        .await;
    let (response, messages) = maia.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let result = crate::harness::last_tool_results(&maia);
    assert!(result[0].contains("cancelled by the user"), "{result:?}");
    let last = subagent_updates(&messages).pop().unwrap().1;
    assert_eq!(
        last["state"],
        json!({"state": "idle", "stopReason": "cancelled"})
    );
    maia.mock.wait_for_dropped_streams(1, WAIT).await;
    let asked = maia
        .mock
        .requests()
        .iter()
        .filter(|r| first_user(r) == "wait forever")
        .count();
    assert_eq!(asked, 1, "no child request after its cancel");
}

#[tokio::test]
async fn cancelling_the_parent_cancels_the_child() {
    let (mut maia, sid) = ready(true).await;
    maia.mock
        .set_rule(|request| (first_user(request) == "wait forever").then_some(Reply::Hang));
    push_tasks(&maia, &[task("t1", "wait forever")]);
    let id = maia.prompt(&sid, "start").await;
    maia.wait_for(|m| m["params"]["update"]["sessionUpdate"] == "subagent_update")
        .await;
    maia.mock.wait_for_requests(2, WAIT).await;
    maia.notify("session/cancel", json!({"sessionId": sid}))
        .await;
    let (response, messages) = maia.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled");
    maia.mock.wait_for_dropped_streams(1, WAIT).await;
    let last = subagent_updates(&messages).pop().unwrap().1;
    assert_eq!(
        last["state"],
        json!({"state": "idle", "stopReason": "cancelled"})
    );
    assert_eq!(
        maia.mock.requests().len(),
        2,
        "nothing asked after the cancel"
    );
}

#[tokio::test]
async fn a_client_without_subagents_sees_progress_in_the_task_call() {
    let (mut maia, sid) = ready(false).await;
    std::fs::write(maia.path("notes.txt"), "KIWI\n").unwrap();
    maia.mock
        .set_rule(|request| match first_user(request).as_str() {
            "read the notes" if !has_results(request) => Some(mock::tool_calls_reply(&[(
                "r1",
                "Read",
                json!({"file_path": "notes.txt"}),
            )])),
            "read the notes" => Some(mock::text_reply("the notes say KIWI")),
            _ => None,
        });
    push_tasks(&maia, &[task("t1", "read the notes")]);
    maia.mock.push(mock::text_reply("ok"));
    let id = maia.prompt(&sid, "go").await;
    let (_, messages) = maia.response_with(id, choose("allow_once")).await;
    assert!(
        subagent_updates(&messages).is_empty(),
        "not for this client"
    );
    assert!(
        messages
            .iter()
            .all(|m| m["params"]["sessionId"].is_null() || m["params"]["sessionId"] == sid),
        "nothing on the child's id"
    );
    let call = updates_of(&messages, "tool_call")
        .into_iter()
        .find(|u| u["title"] == "general-purpose: do t1")
        .unwrap();
    let call_id = call["toolCallId"].clone();
    let progress: Vec<Value> = updates_of(&messages, "tool_call_update")
        .into_iter()
        .filter(|u| u["toolCallId"] == call_id)
        .collect();
    let notes = maia.path("notes.txt");
    assert!(
        progress.iter().any(|u| u["content"][0]["content"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Read notes.txt") || t.contains("notes.txt"))
            && u["locations"][0]["path"] == notes.to_str().unwrap()),
        "{progress:#?}"
    );
    let last = progress.last().unwrap();
    assert_eq!(last["status"], "completed");
    assert_eq!(last["content"][0]["content"]["text"], "the notes say KIWI");

    // A load shows the Task call with its result, and no child.
    let mut maia = maia.restart().await;
    maia.initialize().await;
    let (_, replay) = maia.load(&sid).await;
    assert!(subagent_updates(&replay).is_empty());
    let replayed = updates_of(&replay, "tool_call")
        .into_iter()
        .find(|u| u["title"] == "general-purpose: do t1")
        .unwrap();
    assert_eq!(
        replayed["content"][0]["content"]["text"],
        "the notes say KIWI"
    );
}

/// An agent file written after `session/new` is read at the next turn: a
/// `Task` call names it and runs it (it was "Unknown agent" for the rest
/// of the session), and the user is told what changed.
#[tokio::test]
async fn an_agent_file_written_after_session_new_is_used_at_the_next_turn() {
    let mut maia = Maia::start().await;
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;
    let sid = maia.new_session().await;
    maia.mock.push(mock::text_reply("first"));
    let id = maia.prompt(&sid, "hello").await;
    maia.response(id).await;
    let agents = maia.path(".maia/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("scout.md"),
        "---\nname: scout\ndescription: Looks around\ntools: Read\n---\nYou are the SCOUT-PROMPT agent.\n",
    )
    .unwrap();
    maia.mock.set_rule(|request| {
        let system = request["messages"][0]["content"].to_string();
        system
            .contains("SCOUT-PROMPT")
            .then(|| mock::text_reply("scouted"))
    });
    maia.mock.push(mock::tool_calls_reply(&[(
        "t1",
        "Task",
        json!({"description": "look", "prompt": "look around", "agent": "scout"}),
    )]));
    maia.mock.push(mock::text_reply("done"));
    let id = maia.prompt(&sid, "use the scout").await;
    let (resp, messages) = maia.response_with(id, choose("allow_once")).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let all = serde_json::to_string(&messages).unwrap();
    assert!(all.contains("Agent files changed: added `scout`"), "{all}");
    assert!(!all.contains("Unknown agent"), "{all}");
    let call = updates_of(&messages, "tool_call")
        .into_iter()
        .find(|u| u["title"] == "scout: look")
        .unwrap_or_else(|| panic!("{all}"));
    let last = updates_of(&messages, "tool_call_update")
        .into_iter()
        .rfind(|u| u["toolCallId"] == call["toolCallId"])
        .unwrap();
    assert_eq!(last["content"][0]["content"]["text"], "scouted");
}
