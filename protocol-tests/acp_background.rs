//! Background commands (issue 21): `Bash` with `run_in_background` returns
//! at once with a task id while its tool call stays `in_progress` until the
//! command exits, then completes with the exit code; the model hears of the
//! end at the next tool-round boundary or turn; `TaskStop`,
//! `_session/async_task/stop` and closing the session stop it.

use std::time::Duration;

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, agent_text, alive, eventually};

/// Answers a permission question with "allow once"; leaves anything else.
fn allow(m: &Value) -> Option<Value> {
    if m["method"] != "session/request_permission" {
        return None;
    }
    crate::harness::choose("allow_once")(m)
}

fn updates_of_call<'a>(messages: &'a [Value], id: &str) -> Vec<&'a Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| &m["params"]["update"])
        .filter(|u| u["toolCallId"] == id)
        .collect()
}

/// The ids of the tool calls announced among `messages`, in order.
fn call_ids(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "tool_call")
        .map(|m| {
            m["params"]["update"]["toolCallId"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

fn bash_bg(id: &str, command: &str) -> mock::Reply {
    mock::tool_calls_reply(&[(
        id,
        "Bash",
        json!({"command": command, "run_in_background": true}),
    )])
}

async fn final_update(maia: &mut Maia, call: &str) -> Value {
    maia.wait_for(|m| {
        m["params"]["update"]["toolCallId"] == call
            && m["params"]["update"]["sessionUpdate"] == "tool_call_update"
            && (m["params"]["update"]["status"] == "completed"
                || m["params"]["update"]["status"] == "failed")
    })
    .await
    .0["params"]["update"]
        .clone()
}

fn text_of(update: &Value) -> String {
    update["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["content"]["text"].as_str())
        .collect()
}

#[tokio::test]
async fn a_background_command_stays_in_progress_until_it_exits_while_the_turn_goes_on() {
    let (mut maia, sid) = Maia::ready().await;
    // It runs until the test lets it end, after the turn.
    let command = "until [ -e go ]; do sleep 0.02; done; echo done";
    maia.mock.push(bash_bg("call_bg", command));
    maia.mock.push(mock::text_reply("started it"));
    let id = maia.prompt(&sid, "run it in the background").await;
    let (resp, seen) = maia.response_with(id, allow).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_eq!(agent_text(&seen), "started it");
    let call = call_ids(&seen)[0].clone();
    let during = updates_of_call(&seen, &call);
    assert!(!during.is_empty(), "{seen:?}");
    assert!(
        during.iter().all(|u| u["status"].is_null()
            || u["status"] == "in_progress"
            || u["status"] == "pending"),
        "the call did not stay in progress: {during:?}"
    );
    let result = crate::harness::tool_results(&maia, 1);
    assert!(
        result[0].starts_with("Started in the background as task bg-1"),
        "{result:?}"
    );
    // It completes when the command exits, with its exit code and output.
    std::fs::write(maia.path("go"), "").unwrap();
    let done = final_update(&mut maia, &call).await;
    assert_eq!(done["status"], "completed", "{done}");
    let text = text_of(&done);
    assert!(
        text.contains("done\n") && text.contains("exited with code 0"),
        "{text}"
    );
    // The next turn starts with the note.
    maia.mock.push(mock::text_reply("noted"));
    let (resp, _) = maia.turn(&sid, "and now?").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let request = &maia.mock.requests()[2];
    let last_user = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        last_user.starts_with(&format!(
            "[Background task bg-1 (`{command}`) exited with code 0."
        )) && last_user.ends_with("and now?"),
        "{last_user}"
    );
    // Replayed finished on load.
    let (_, replay) = maia.load(&sid).await;
    let replayed = updates_of_call(&replay, &call);
    assert_eq!(
        replayed.last().unwrap()["status"],
        "completed",
        "{replayed:?}"
    );
}

#[tokio::test]
async fn task_stop_stops_a_background_command_within_the_turn() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(bash_bg("call_bg", "sleep 30"));
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_stop",
        "TaskStop",
        json!({"task_id": "bg-1"}),
    )]));
    maia.mock.push(mock::text_reply("stopped it"));
    let id = maia.prompt(&sid, "start and stop").await;
    let (resp, seen) = maia.response_with(id, allow).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let result = crate::harness::tool_results(&maia, 2);
    assert_eq!(result.last().unwrap(), "Task bg-1 is being stopped.");
    let call = call_ids(&seen)[0].clone();
    let done = match seen.iter().rfind(|m| {
        m["params"]["update"]["toolCallId"] == call.as_str()
            && m["params"]["update"]["status"] == "failed"
    }) {
        Some(m) => m["params"]["update"].clone(),
        None => final_update(&mut maia, &call).await,
    };
    assert_eq!(done["status"], "failed", "{done}");
    assert!(text_of(&done).contains("was stopped"), "{done}");
    let (_, seen) = maia.turn(&sid, "/tasks").await;
    assert!(
        agent_text(&seen).contains("`bg-1` was stopped: `sleep 30`"),
        "{seen:?}"
    );
}

#[tokio::test]
async fn async_task_stop_and_session_close_stop_background_commands() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(bash_bg("call_a", "sleep 30"));
    maia.mock
        .push(bash_bg("call_b", "echo $$ > b.pid; exec sleep 30"));
    maia.mock.push(mock::text_reply("two started"));
    let id = maia.prompt(&sid, "start two").await;
    let (resp, seen) = maia.response_with(id, allow).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let first = call_ids(&seen)[0].clone();
    let stop = maia
        .request(
            "_session/async_task/stop",
            json!({"sessionId": sid, "asyncTaskId": "bg-1"}),
        )
        .await;
    let (answer, _) = maia.response(stop).await;
    assert_eq!(answer["result"], json!({"stopped": true}), "{answer}");
    let done = final_update(&mut maia, &first).await;
    assert_eq!(done["status"], "failed", "{done}");
    let again = maia
        .request(
            "_session/async_task/stop",
            json!({"sessionId": sid, "asyncTaskId": "bg-1"}),
        )
        .await;
    let (answer, _) = maia.response(again).await;
    assert_eq!(answer["result"], json!({"stopped": false}), "{answer}");
    // Closing the session stops the other one (and what it runs).
    let pid_file = maia.path("b.pid");
    assert!(eventually(Duration::from_secs(5), || pid_file.exists()).await);
    let mut pid = 0;
    assert!(
        eventually(Duration::from_secs(5), || {
            pid = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|t| t.trim().parse().ok())
                .unwrap_or(0);
            pid != 0
        })
        .await
    );
    assert!(alive(pid));
    let close = maia
        .request("session/close", json!({"sessionId": sid}))
        .await;
    let (closed, _) = maia.response(close).await;
    assert!(closed.get("result").is_some(), "{closed}");
    assert!(
        eventually(Duration::from_secs(5), || !alive(pid)).await,
        "the background command outlived its session"
    );
}

#[tokio::test]
async fn the_end_of_a_background_command_reaches_the_model_at_the_next_tool_round() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(bash_bg("call_bg", "echo hi; exit 3"));
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_w",
        "Write",
        json!({"file_path": "out.txt", "content": "x"}),
    )]));
    maia.mock.push(mock::text_reply("seen"));
    let id = maia.prompt(&sid, "go").await;
    // The Bash question, then the Write question: answered once the
    // background command has ended, so its end precedes the boundary.
    let (first, _) = maia
        .wait_for(|m| m["method"] == "session/request_permission")
        .await;
    let call = first["params"]["toolCall"]["toolCallId"]
        .as_str()
        .unwrap()
        .to_owned();
    maia.respond(&first["id"], allow(&first).unwrap()).await;
    let (second, before) = maia
        .wait_for(|m| m["method"] == "session/request_permission")
        .await;
    let done = match before.iter().find(|m| {
        m["params"]["update"]["toolCallId"] == call.as_str()
            && m["params"]["update"]["status"] == "failed"
    }) {
        Some(m) => m["params"]["update"].clone(),
        None => final_update(&mut maia, &call).await,
    };
    assert_eq!(done["status"], "failed", "{done}");
    assert!(text_of(&done).contains("exited with code 3"), "{done}");
    maia.respond(&second["id"], allow(&second).unwrap()).await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    // At the boundary after the batch the command ended in or after (the
    // first one when it ended while MAIA was still finishing that batch,
    // e.g. taking its file checkpoint; else the second).
    let requests = maia.mock.requests();
    let note = "[Background task bg-1 (`echo hi; exit 3`) exited with code 3.";
    let carrying = requests[1..]
        .iter()
        .find(|r| {
            r["messages"].as_array().unwrap().last().unwrap()["content"]
                .as_str()
                .is_some_and(|t| t.starts_with(note))
        })
        .unwrap_or_else(|| panic!("no request ends with the note: {requests:?}"));
    let messages = carrying["messages"].as_array().unwrap();
    assert_eq!(messages.last().unwrap()["role"], "user");
    assert_eq!(messages[messages.len() - 2]["role"], "tool");
}

#[tokio::test]
async fn clear_new_and_a_killed_maia_leave_no_background_command() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock
        .push(bash_bg("a", "echo $$ > a.pid; exec sleep 30"));
    maia.mock
        .push(bash_bg("b", "echo $$ > b.pid; exec sleep 30"));
    maia.mock.push(mock::text_reply("started"));
    let id = maia.prompt(&sid, "start two").await;
    maia.response_with(id, allow).await;
    let pid_of = |maia: &Maia, name: &str| {
        std::fs::read_to_string(maia.path(name))
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
    };
    assert!(eventually(Duration::from_secs(5), || pid_of(&maia, "a.pid").is_some()).await);
    let a = pid_of(&maia, "a.pid").unwrap();
    let (_, seen) = maia.turn(&sid, "/clear").await;
    assert!(agent_text(&seen).contains("Context cleared"));
    assert!(
        eventually(Duration::from_secs(5), || !alive(a)).await,
        "/clear left a background command running"
    );
    // `/new` starts another conversation: the old one's commands stop too.
    maia.mock
        .push(bash_bg("d", "echo $$ > d.pid; exec sleep 30"));
    maia.mock.push(mock::text_reply("started"));
    let id = maia.prompt(&sid, "start another").await;
    maia.response_with(id, allow).await;
    assert!(eventually(Duration::from_secs(5), || pid_of(&maia, "d.pid").is_some()).await);
    let d = pid_of(&maia, "d.pid").unwrap();
    let (_, seen) = maia.turn(&sid, "/new").await;
    assert!(agent_text(&seen).contains("Started a new conversation"));
    assert!(
        eventually(Duration::from_secs(5), || !alive(d)).await,
        "/new left a background command running"
    );
    // A new one, then MAIA killed with SIGKILL: the guard takes it down.
    maia.mock
        .push(bash_bg("c", "echo $$ > c.pid; exec sleep 30"));
    maia.mock.push(mock::text_reply("again"));
    let id = maia.prompt(&sid, "start one more").await;
    maia.response_with(id, allow).await;
    assert!(eventually(Duration::from_secs(5), || pid_of(&maia, "c.pid").is_some()).await);
    let c = pid_of(&maia, "c.pid").unwrap();
    assert!(alive(c));
    let maia = maia.restart().await;
    assert!(
        eventually(Duration::from_secs(5), || !alive(c)).await,
        "a background command outlived a killed MAIA"
    );
    drop(maia);
}
