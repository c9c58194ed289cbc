//! ACP v2 as the SDKs' draft has it (`@agentclientprotocol/sdk` 2.4.0's
//! schema): one tool call or one terminal cancelled alone
//! (`tool_call/cancel`, `terminal/cancel`, advertised per call), the state
//! snapshot a resume sends before its answer, JSON-RPC batches, notices and
//! compactions told as `compaction_update` without a client capability.

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::acp_v2::{V2, call_ids, check, tool_updates, updates_of};
use crate::harness::{Maia, Options, choose};

/// A v2 session running a command that waits until cancelled; the call's
/// id, its terminal's id, and the messages seen.
async fn running_command(client: &mut V2) -> (String, String, String, Vec<Value>) {
    let sid = client.new_session().await;
    client.maia.mock.push(mock::tool_calls_reply(&[(
        "call_wait",
        "Bash",
        json!({"command": "echo started; sleep 300"}),
    )]));
    client.maia.mock.push(mock::text_reply("it was stopped"));
    let params = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "wait"}]});
    client.call("session/prompt", params, "PromptRequest").await;
    let seen = client
        .until(
            |m| m["params"]["update"]["sessionUpdate"] == "terminal_output_chunk",
            choose("allow_once"),
        )
        .await;
    let call = call_ids(&seen)[0].clone();
    let terminal = updates_of(&seen, "terminal_update")[0]["terminalId"]
        .as_str()
        .unwrap()
        .to_owned();
    (sid, call, terminal, seen)
}

/// Follows the turn to idle; the last request the model was sent.
async fn model_told(client: &mut V2) -> (Vec<Value>, String) {
    let rest = client.until_idle(|_| None).await;
    let requests = client.maia.mock.requests();
    let last = requests.last().cloned().unwrap_or(Value::Null);
    (rest, last.to_string())
}

#[tokio::test]
async fn a_tool_call_cancelled_alone_ends_and_the_turn_goes_on() {
    let mut client = V2::start().await;
    let (sid, call, _, seen) = running_command(&mut client).await;
    // Cancellable while it runs, and said so on the call.
    assert!(
        tool_updates(&seen, &call)
            .iter()
            .any(|u| u["capabilities"]["cancel"] == json!({})),
        "{seen:#?}"
    );
    let params = json!({"sessionId": sid, "toolCallId": call});
    let id = client
        .call("tool_call/cancel", params.clone(), "CancelToolCallRequest")
        .await;
    let (resp, _) = client
        .response(id, "CancelToolCallResponse", |_| None)
        .await;
    assert!(resp.get("error").is_none(), "{resp}");
    let (rest, told) = model_told(&mut client).await;
    // The call ended (no longer cancellable), the model was told, and the
    // turn ended as the model ended it, not cancelled.
    let ended = tool_updates(&rest, &call);
    assert!(
        ended.iter().any(|u| u["status"] == "failed"
            && u["capabilities"].is_null()
            && u.get("capabilities").is_some()),
        "{rest:#?}"
    );
    assert!(told.contains("Cancelled by the user"), "{told}");
    let idle = rest.last().unwrap();
    assert_eq!(idle["params"]["update"]["stopReason"], "end_turn", "{idle}");
    // Finished: a second cancel is invalid params, as the draft says; so
    // is an unknown session.
    let id = client
        .call("tool_call/cancel", params, "CancelToolCallRequest")
        .await;
    let (again, _) = client
        .response(id, "CancelToolCallResponse", |_| None)
        .await;
    assert_eq!(again["error"]["code"], -32602, "{again}");
    let id = client
        .call(
            "tool_call/cancel",
            json!({"sessionId": "nope", "toolCallId": call}),
            "CancelToolCallRequest",
        )
        .await;
    let (unknown, _) = client
        .response(id, "CancelToolCallResponse", |_| None)
        .await;
    assert!(unknown.get("error").is_some(), "{unknown}");
}

#[tokio::test]
async fn a_terminal_cancelled_alone_reports_its_exit_and_the_turn_goes_on() {
    let mut client = V2::start().await;
    let (sid, _, terminal, seen) = running_command(&mut client).await;
    assert_eq!(
        updates_of(&seen, "terminal_update")[0]["capabilities"]["cancel"],
        json!({}),
        "{seen:#?}"
    );
    let params = json!({"sessionId": sid, "terminalId": terminal});
    let id = client
        .call("terminal/cancel", params.clone(), "CancelTerminalRequest")
        .await;
    let (resp, _) = client
        .response(id, "CancelTerminalResponse", |_| None)
        .await;
    assert!(resp.get("error").is_none(), "{resp}");
    let (rest, told) = model_told(&mut client).await;
    let exits: Vec<&Value> = updates_of(&rest, "terminal_update")
        .into_iter()
        .filter(|u| u.get("exitStatus").is_some())
        .collect();
    assert_eq!(exits.len(), 1, "{rest:#?}");
    assert!(exits[0]["capabilities"].is_null(), "{:?}", exits[0]);
    assert!(told.contains("Cancelled by the user"), "{told}");
    assert_eq!(
        rest.last().unwrap()["params"]["update"]["stopReason"],
        "end_turn"
    );
    let id = client
        .call(
            "terminal/cancel",
            json!({"sessionId": sid, "terminalId": "not-a-terminal"}),
            "CancelTerminalRequest",
        )
        .await;
    let (unknown, _) = client
        .response(id, "CancelTerminalResponse", |_| None)
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}

#[tokio::test]
async fn a_resume_sends_the_sessions_state_after_its_replay_and_before_its_answer() {
    let mut client = V2::start().await;
    let sid = client.new_session().await;
    client.maia.mock.push(mock::text_reply("hello"));
    client.turn(&sid, "hi", |_| None).await;
    let cwd = client.maia.cwd();
    for replay in [Some(json!({"type": "start"})), None] {
        let mut params = json!({"sessionId": sid, "cwd": cwd});
        if let Some(replay) = &replay {
            params["replayFrom"] = replay.clone();
        }
        let id = client
            .call("session/resume", params, "ResumeSessionRequest")
            .await;
        let (resp, before) = client.response(id, "ResumeSessionResponse", |_| None).await;
        assert!(resp.get("error").is_none(), "{resp}");
        let last = before.last().expect("a snapshot before the answer");
        assert_eq!(
            last["params"]["update"]["sessionUpdate"], "state_update",
            "{before:#?}"
        );
        assert_eq!(last["params"]["update"]["state"], "idle", "{last}");
    }
}

fn v2_stdio() -> Options {
    Options {
        args: vec!["--protocol-v2".into()],
        ..Options::default()
    }
}

#[tokio::test]
async fn v2_takes_json_rpc_batches_and_v1_refuses_them() {
    // v1 (no `--protocol-v2` negotiated): one -32600 for the array.
    let mut v1 = Maia::start_with(Options::default()).await;
    v1.send_raw("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/list\",\"params\":{}}]\n")
        .await;
    let refused = v1.next().await;
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let mut maia = Maia::start_with(v2_stdio()).await;
    let init =
        json!({"protocolVersion": 2, "info": {"name": "t", "version": "1"}, "capabilities": {}});
    let id = maia.request("initialize", init).await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"]["protocolVersion"], 2, "{resp}");
    // An empty batch: one -32600, not an array.
    maia.send_raw("[]\n").await;
    let empty = maia.next().await;
    assert!(empty.is_object(), "{empty}");
    assert_eq!(empty["error"]["code"], -32600, "{empty}");
    assert!(empty["id"].is_null());
    // Two requests, a notification and an invalid entry: one array with
    // the two answers and the entry's -32600, nothing for the notification.
    let cwd = maia.cwd();
    let batch = json!([
        {"jsonrpc": "2.0", "id": "list", "method": "session/list", "params": {}},
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "none"}},
        {"jsonrpc": "2.0", "id": 7, "method": "session/new", "params": {"cwd": cwd}},
        42,
    ]);
    maia.send(&batch).await;
    let answer = maia.next_batch().await;
    let answers = answer
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {answer}"));
    assert_eq!(answers.len(), 3, "{answer}");
    let by_id = |id: Value| answers.iter().find(|a| a["id"] == id).cloned();
    let list = by_id(json!("list")).expect("the list's answer");
    check("ListSessionsResponse", &list["result"]);
    let new = by_id(json!(7)).expect("the new session's answer");
    check("NewSessionResponse", &new["result"]);
    assert!(
        answers
            .iter()
            .any(|a| a["id"].is_null() && a["error"]["code"] == -32600),
        "{answer}"
    );
    // A batch of notifications only gets no answer: no array line comes
    // before the next request's answer (one would fail `next`).
    maia.send_raw("[{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\",\"params\":{\"sessionId\":\"none\"}}]\n")
        .await;
    let id = maia.request("session/list", json!({})).await;
    let (next, _) = maia.response(id).await;
    assert!(next.get("result").is_some(), "{next}");
}

#[tokio::test]
async fn a_v2_client_is_sent_notices_without_asking() {
    // v2 notices need no client capability (v1's do): an empty answer is
    // a turn that did nothing, told as a warning notice.
    let mut client = V2::start().await;
    let sid = client.new_session().await;
    client.maia.mock.push(mock::text_reply(""));
    let seen = client.turn(&sid, "do it", |_| None).await;
    let empty: Vec<&Value> = updates_of(&seen, "notice")
        .into_iter()
        .filter(|n| {
            n["title"]
                .as_str()
                .is_some_and(|t| t.contains("empty answer"))
        })
        .collect();
    assert_eq!(empty.len(), 1, "{seen:#?}");
    assert_eq!(empty[0]["severity"], "warning", "{:?}", empty[0]);
}

#[tokio::test]
async fn a_v2_compaction_is_a_compaction_update_not_a_tool_call() {
    // The draft's `compaction_update` needs no client capability (v1's
    // does): a v2 client is told a compaction as one, never as the
    // `Compact` tool call.
    let mut client = V2::start().await;
    let sid = client.new_session().await;
    client.maia.mock.push(mock::text_reply("first answer"));
    client
        .turn(&sid, "remember the word banana", |_| None)
        .await;
    client
        .maia
        .mock
        .push(mock::text_reply("## Project context\nThe word is banana."));
    let seen = client.turn(&sid, "/compact", |_| None).await;
    let updates = updates_of(&seen, "compaction_update");
    let statuses: Vec<&Value> = updates.iter().map(|u| &u["status"]).collect();
    assert_eq!(
        statuses,
        [&json!("in_progress"), &json!("completed")],
        "{seen:#?}"
    );
    assert_eq!(updates[0]["compactionId"], updates[1]["compactionId"]);
    let summary = updates[1]["summary"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(summary.contains("banana"), "{:?}", updates[1]);
    assert!(
        updates_of(&seen, "tool_call_update")
            .iter()
            .all(|u| !u["title"]
                .as_str()
                .unwrap_or_default()
                .contains("Compacting")),
        "never both carriers: {seen:#?}"
    );
}
