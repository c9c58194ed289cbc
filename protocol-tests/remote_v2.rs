//! ACP v2 on `maia serve --protocol-v2`: a v1 and a v2 client attached to
//! one live session, each in its own shapes (every v2 message validated
//! against the draft's schema, as in `acp_v2`), one permission answer
//! applied across both versions, a v2 client catching up with `since`, and
//! a v2 observer refused every write.

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::acp_v2::{check, check_sent};
use crate::harness::client::{Acp, acp};
use crate::harness::{choose, is_permission};
use crate::remote_client::{Daemon, Http, Ws, seqs, wait_on, write_call};

const EDITOR: (&str, &[&str]) = ("editor", &[]);
const PHONE: (&str, &[&str]) = ("phone", &[]);
const WATCHER: (&str, &[&str]) = ("watcher", &["--observer"]);

fn update_kind(m: &Value) -> &str {
    m["params"]["update"]["sessionUpdate"]
        .as_str()
        .unwrap_or_default()
}

fn is_idle(m: &Value) -> bool {
    update_kind(m) == "state_update" && m["params"]["update"]["state"] == "idle"
}

fn text_of(messages: &[Value]) -> String {
    messages
        .iter()
        .filter(|m| update_kind(m) == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect()
}

/// A v1 client on the daemon.
async fn v1_client(daemon: &Daemon, token: &str) -> Ws {
    let ws = daemon.client(token).await;
    let init = ws.seen.last().unwrap().clone();
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    assert!(init["result"]["agentCapabilities"].is_object(), "{init}");
    ws
}

/// A v2 client on the daemon; its `initialize` and answer checked.
async fn v2_client(daemon: &Daemon, token: &str) -> Ws {
    let mut ws = daemon.ws(token).await;
    let params = json!({"protocolVersion": 2, "info": {"name": "remote-v2", "version": "1"},
                        "capabilities": {}});
    check("InitializeRequest", &params);
    let init = ws.call("initialize", params).await;
    assert_eq!(init["result"]["protocolVersion"], 2, "{init}");
    check("InitializeResponse", &init["result"]);
    ws
}

/// Sends a v2 request, checked as `def`; its id.
async fn v2_request(ws: &mut Ws, method: &str, params: Value, def: &str) -> u64 {
    check(def, &params);
    ws.request(method, params).await
}

/// The answer to a v2 request (checked as `def` unless an error), and the
/// messages before it, each checked.
async fn v2_response(ws: &mut Ws, id: u64, def: &str) -> (Value, Vec<Value>) {
    let (resp, before) = ws
        .wait_for(|m| m["id"] == id && m.get("method").is_none())
        .await;
    before.iter().for_each(check_sent);
    if resp.get("error").is_none() {
        check(def, &resp["result"]);
    }
    (resp, before)
}

/// Attaches a v2 client to the live `sid` (`session/resume`, with `extra`
/// params); the answer and the replay before it, checked.
async fn v2_attach(ws: &mut Ws, daemon: &Daemon, sid: &str, extra: Value) -> (Value, Vec<Value>) {
    let mut params = json!({"sessionId": sid, "cwd": daemon.cwd()});
    for (k, v) in extra.as_object().into_iter().flatten() {
        params[k] = v.clone();
    }
    let id = v2_request(ws, "session/resume", params, "ResumeSessionRequest").await;
    let (resp, replay) = v2_response(ws, id, "ResumeSessionResponse").await;
    assert!(resp.get("error").is_none(), "{resp}");
    (resp, replay)
}

/// Reads a v2 client's messages up to `state_update: idle`, each checked.
async fn v2_until_idle(ws: &mut Ws) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let m = ws.next().await;
        check_sent(&m);
        let idle = is_idle(&m);
        seen.push(m);
        if idle {
            return seen;
        }
    }
}

fn position(messages: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    messages
        .iter()
        .position(pred)
        .unwrap_or_else(|| panic!("not found among {messages:#?}"))
}

/// No v2 shape among a v1 client's messages.
fn all_v1(messages: &[Value]) {
    for m in messages {
        let kind = update_kind(m);
        assert!(
            !matches!(kind, "state_update" | "user_message" | "plan_update"),
            "a v2 update reached a v1 client: {m}"
        );
        if m["method"] == "session/request_permission" {
            assert!(m["params"]["toolCall"].is_object(), "{m}");
            assert!(m["params"].get("subject").is_none(), "{m}");
        }
    }
}

#[tokio::test]
async fn remote_v1_and_v2_clients_on_one_session_each_get_their_own_shapes() {
    let daemon = Daemon::start(&[EDITOR, PHONE], &["--protocol-v2"]).await;
    let mut v1 = v1_client(&daemon, "editor").await;
    let created = v1
        .call(
            "session/new",
            json!({"cwd": daemon.cwd(), "mcpServers": []}),
        )
        .await;
    let sid = created["result"]["sessionId"].as_str().unwrap().to_owned();
    assert!(created["result"]["modes"].is_object(), "{created}");
    let mut v2 = v2_client(&daemon, "phone").await;
    let (attached, _) = v2_attach(&mut v2, &daemon, &sid, json!({})).await;
    assert_eq!(
        attached["result"]["configOptions"][1]["configId"], "mode",
        "{attached}"
    );

    // The v2 client prompts; the v1 client answers the question first.
    daemon.mock.push(write_call());
    daemon.mock.push(mock::text_reply("written"));
    let prompt = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]});
    let id = v2_request(&mut v2, "session/prompt", prompt, "PromptRequest").await;
    let (ask_v1, before_v1) = v1.wait_for(is_permission).await;
    let (ask_v2, before_v2) = v2.wait_for(is_permission).await;
    before_v2.iter().for_each(check_sent);
    check_sent(&ask_v2);
    // v2: the prompt was acknowledged with its message id before the question.
    let ack = before_v2
        .iter()
        .find(|m| m["id"] == id && m.get("method").is_none())
        .unwrap_or_else(|| panic!("no prompt answer before the question: {before_v2:#?}"));
    check("PromptResponse", &ack["result"]);
    assert!(ack["result"]["messageId"].is_string(), "{ack}");
    assert_eq!(ask_v2["params"]["subject"]["type"], "tool_call", "{ask_v2}");
    assert!(
        before_v2.iter().any(|m| update_kind(m) == "state_update"
            && m["params"]["update"]["state"] == "requires_action"),
        "{before_v2:#?}"
    );
    // v1: the same call as `tool_call`, the question with its `toolCall`.
    assert!(
        before_v1.iter().any(|m| update_kind(m) == "tool_call"),
        "{before_v1:#?}"
    );
    all_v1(&before_v1);
    all_v1(std::slice::from_ref(&ask_v1));
    v1.respond(&ask_v1["id"], choose("allow_once")(&ask_v1).unwrap())
        .await;
    // The v2 question is withdrawn; a late v2 answer changes nothing.
    let (withdrawn, _) = v2
        .wait_for(|m| m["method"] == "$/cancel_request" && m["params"]["requestId"] == ask_v2["id"])
        .await;
    check_sent(&withdrawn);
    let late = choose("reject_once")(&ask_v2).unwrap();
    check("RequestPermissionResponse", &late);
    v2.respond(&ask_v2["id"], late).await;

    // Both see the turn end, each in its own shape.
    let rest_v2 = v2_until_idle(&mut v2).await;
    let idle = rest_v2.last().unwrap();
    assert_eq!(idle["params"]["update"]["stopReason"], "end_turn", "{idle}");
    assert_eq!(text_of(&rest_v2), "written");
    assert!(
        rest_v2.iter().all(|m| update_kind(m) != "tool_call"),
        "v1's tool_call on v2: {rest_v2:#?}"
    );
    let completed_v2 = rest_v2
        .iter()
        .filter(|m| {
            update_kind(m) == "tool_call_update" && m["params"]["update"]["status"] == "completed"
        })
        .count();
    assert_eq!(completed_v2, 1, "{rest_v2:#?}");
    let (ended, rest_v1) = v1.wait_for(|m| m["method"] == "_session/turn_ended").await;
    assert_eq!(ended["params"]["stopReason"], "end_turn", "{ended}");
    all_v1(&rest_v1);
    assert_eq!(text_of(&rest_v1), "written");
    // The first answer applied, once: the call ran and completed.
    assert_eq!(
        std::fs::read_to_string(daemon.cwd().join("out.txt")).unwrap(),
        "hello\n"
    );
    let completed_v1 = rest_v1
        .iter()
        .filter(|m| {
            update_kind(m) == "tool_call_update" && m["params"]["update"]["status"] == "completed"
        })
        .count();
    assert_eq!(completed_v1, 1, "{rest_v1:#?}");
    // Each version's updates are numbered by its own sequence, in order.
    for numbers in [seqs(&v1.seen), seqs(&v2.seen)] {
        assert!(!numbers.is_empty());
        assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{numbers:?}");
    }

    // The other way round: the v1 client prompts, the v2 client answers.
    daemon.mock.push(mock::tool_calls_reply(&[(
        "call_x",
        "Write",
        json!({"file_path": "two.txt", "content": "two\n"}),
    )]));
    daemon.mock.push(mock::text_reply("second"));
    let from = v2.seen.len();
    let id = v1
        .request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "again"}]}),
        )
        .await;
    let (ask_v2, _) = v2.wait_for(is_permission).await;
    check_sent(&ask_v2);
    let (ask_v1, _) = v1.wait_for(is_permission).await;
    let answer = choose("allow_once")(&ask_v2).unwrap();
    check("RequestPermissionResponse", &answer);
    v2.respond(&ask_v2["id"], answer).await;
    v1.wait_for(|m| m["method"] == "$/cancel_request" && m["params"]["requestId"] == ask_v1["id"])
        .await;
    let response = v1.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let rest_v2 = v2_until_idle(&mut v2).await;
    assert_eq!(text_of(&rest_v2), "second");
    // The v1 prompt reaches v2 as a `user_message` with its content, then
    // `running`.
    let turn_v2 = &v2.seen[from..];
    let message = position(turn_v2, |m| update_kind(m) == "user_message");
    let running = position(turn_v2, |m| {
        update_kind(m) == "state_update" && m["params"]["update"]["state"] == "running"
    });
    assert!(message < running, "{turn_v2:#?}");
    assert_eq!(
        turn_v2[message]["params"]["update"]["content"],
        json!([{"type": "text", "text": "again"}]),
        "{turn_v2:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(daemon.cwd().join("two.txt")).unwrap(),
        "two\n"
    );
    all_v1(&v1.seen);
}

#[tokio::test]
async fn remote_a_v2_client_reconnecting_with_since_gets_exactly_what_it_missed() {
    let daemon = Daemon::start(&[EDITOR, PHONE], &["--protocol-v2"]).await;
    let mut v2 = v2_client(&daemon, "phone").await;
    let id = v2_request(
        &mut v2,
        "session/new",
        json!({"cwd": daemon.cwd()}),
        "NewSessionRequest",
    )
    .await;
    let (created, _) = v2_response(&mut v2, id, "NewSessionResponse").await;
    let sid = created["result"]["sessionId"].as_str().unwrap().to_owned();
    daemon.mock.push(mock::text_reply("first"));
    let prompt = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "one"}]});
    v2_request(&mut v2, "session/prompt", prompt, "PromptRequest").await;
    let first = v2_until_idle(&mut v2).await;
    assert_eq!(text_of(&first), "first");
    let last = *seqs(&v2.seen).last().unwrap();
    v2.close().await;

    // Meanwhile a v1 client attaches and runs a turn.
    let mut v1 = v1_client(&daemon, "editor").await;
    let loaded = v1
        .call(
            "session/load",
            json!({"sessionId": sid, "cwd": daemon.cwd(), "mcpServers": []}),
        )
        .await;
    assert!(loaded.get("error").is_none(), "{loaded}");
    all_v1(&v1.seen);
    daemon.mock.push(mock::text_reply("second"));
    let answer = v1
        .call(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "two"}]}),
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    // The v2 client comes back and asks for what followed `last`.
    let mut back = v2_client(&daemon, "phone").await;
    let (resumed, missed) = v2_attach(
        &mut back,
        &daemon,
        &sid,
        json!({"_meta": {"maia": {"since": last}}}),
    )
    .await;
    let numbers = seqs(&missed);
    let now = resumed["result"]["_meta"]["maia"]["seq"].as_u64().unwrap();
    assert_eq!(
        numbers,
        ((last + 1)..=now).collect::<Vec<_>>(),
        "{missed:#?}"
    );
    assert_eq!(text_of(&missed), "second");
    assert!(missed.iter().any(is_idle), "{missed:#?}");
    assert!(
        missed.iter().any(|m| update_kind(m) == "user_message"),
        "{missed:#?}"
    );
    // After the replay and before the answer, the state snapshot a v2
    // resume sends (unnumbered: it repeats the state, counts nothing).
    let snapshot = missed.last().unwrap();
    assert!(
        is_idle(snapshot) && seqs(std::slice::from_ref(snapshot)).is_empty(),
        "{snapshot}"
    );
    assert!(
        snapshot["params"]["update"].get("usage").is_none(),
        "{snapshot}"
    );
    let missed = &missed[..missed.len() - 1];
    // Exactly the tail of the whole v2 log, as a client replaying it all sees.
    let mut fresh = v2_client(&daemon, "phone").await;
    let (_, all) = v2_attach(
        &mut fresh,
        &daemon,
        &sid,
        json!({"replayFrom": {"type": "start"}}),
    )
    .await;
    let tail: Vec<&Value> = all
        .iter()
        .filter(|m| m["params"]["_meta"]["maia"]["seq"].as_u64() > Some(last))
        .collect();
    assert!(
        is_idle(all.last().unwrap()),
        "the snapshot ends a full replay too"
    );
    assert_eq!(tail, missed.iter().collect::<Vec<_>>());
    assert_eq!(text_of(&all), "firstsecond");
    // And the live updates follow, once.
    daemon.mock.push(mock::text_reply("third"));
    let prompt = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "three"}]});
    v2_request(&mut back, "session/prompt", prompt, "PromptRequest").await;
    let live = v2_until_idle(&mut back).await;
    assert_eq!(text_of(&live), "third");
    let numbers = seqs(&back.seen);
    assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{numbers:?}");
}

#[tokio::test]
async fn remote_a_v2_observer_is_refused_every_write() {
    let daemon = Daemon::start(&[EDITOR, WATCHER], &["--protocol-v2"]).await;
    let mut v1 = v1_client(&daemon, "editor").await;
    let created = v1
        .call(
            "session/new",
            json!({"cwd": daemon.cwd(), "mcpServers": []}),
        )
        .await;
    let sid = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let mut watcher = v2_client(&daemon, "watcher").await;
    v2_attach(&mut watcher, &daemon, &sid, json!({})).await;
    let writes = [
        (
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}),
            "PromptRequest",
        ),
        (
            "session/set_config_option",
            json!({"sessionId": sid, "configId": "mode", "type": "id", "value": "plan"}),
            "SetSessionConfigOptionRequest",
        ),
        (
            "session/new",
            json!({"cwd": daemon.cwd()}),
            "NewSessionRequest",
        ),
        (
            "session/close",
            json!({"sessionId": sid}),
            "CloseSessionRequest",
        ),
        (
            "tool_call/cancel",
            json!({"sessionId": sid, "toolCallId": "call_x"}),
            "CancelToolCallRequest",
        ),
        (
            "terminal/cancel",
            json!({"sessionId": sid, "terminalId": "term-call_x"}),
            "CancelTerminalRequest",
        ),
    ];
    for (method, params, def) in writes {
        let id = v2_request(&mut watcher, method, params, def).await;
        let (refused, _) = watcher
            .wait_for(|m| m["id"] == id && m.get("method").is_none())
            .await;
        assert_eq!(refused["error"]["code"], -32600, "{method}: {refused}");
        assert_eq!(refused["error"]["data"]["reason"], "observer", "{refused}");
    }
    // Its cancel is ignored; it sees the turn in v2 and is never asked.
    daemon.mock.push(write_call());
    daemon.mock.push(mock::text_reply("written"));
    let id = v1
        .request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}),
        )
        .await;
    let (ask, _) = v1.wait_for(is_permission).await;
    watcher
        .send(&json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}))
        .await;
    v1.respond(&ask["id"], choose("allow_once")(&ask).unwrap())
        .await;
    let response = v1.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let seen = v2_until_idle(&mut watcher).await;
    assert_eq!(
        seen.last().unwrap()["params"]["update"]["stopReason"],
        "end_turn"
    );
    assert!(!seen.iter().any(is_permission), "{seen:#?}");
    assert_eq!(text_of(&seen), "written");
    assert_eq!(
        std::fs::read_to_string(daemon.cwd().join("out.txt")).unwrap(),
        "hello\n"
    );
}

/// The last status `messages` give the tool call `id`.
fn last_status(messages: &[Value], id: &str) -> String {
    messages
        .iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| u["toolCallId"] == id && u["status"].is_string())
        .filter_map(|u| u["status"].as_str())
        .next_back()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn remote_a_v1_and_a_v2_controller_racing_on_one_question_apply_one_answer() {
    let daemon = Daemon::start(&[EDITOR, PHONE], &["--protocol-v2"]).await;
    let mut v1 = v1_client(&daemon, "editor").await;
    let created = v1
        .call(
            "session/new",
            json!({"cwd": daemon.cwd(), "mcpServers": []}),
        )
        .await;
    let sid = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let mut v2 = v2_client(&daemon, "phone").await;
    v2_attach(&mut v2, &daemon, &sid, json!({})).await;
    daemon.mock.push(write_call());
    daemon.mock.push(mock::text_reply("done"));
    let id = v1
        .request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}),
        )
        .await;
    let (ask_v1, _) = v1.wait_for(is_permission).await;
    let (ask_v2, _) = v2.wait_for(is_permission).await;
    check_sent(&ask_v2);
    // Both answer at once: the v1 client allows, the v2 client rejects.
    v1.respond(&ask_v1["id"], choose("allow_once")(&ask_v1).unwrap())
        .await;
    v2.respond(&ask_v2["id"], choose("reject_once")(&ask_v2).unwrap())
        .await;
    let response = v1.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    v2_until_idle(&mut v2).await;
    // One answer applied: both clients see the same outcome, and the file
    // is written exactly when it was "allow".
    let call = ask_v1["params"]["toolCall"]["toolCallId"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status_v1, status_v2) = (last_status(&v1.seen, &call), last_status(&v2.seen, &call));
    assert_eq!(status_v1, status_v2, "v1: {status_v1}, v2: {status_v2}");
    let written = daemon.cwd().join("out.txt").exists();
    assert_eq!(written, status_v1 == "completed", "{status_v1}");
    // A client told its question was settled elsewhere lost the race.
    let v1_told = v1
        .seen
        .iter()
        .any(|m| m["method"] == "$/cancel_request" && m["params"]["requestId"] == ask_v1["id"]);
    let v2_told = v2
        .seen
        .iter()
        .any(|m| m["method"] == "$/cancel_request" && m["params"]["requestId"] == ask_v2["id"]);
    assert!(!(v1_told && v2_told));
    if v1_told {
        assert!(!written, "the v2 client's reject won");
    }
    if v2_told {
        assert!(written, "the v1 client's allow won");
    }
    all_v1(&v1.seen);
}

#[tokio::test]
async fn remote_after_a_restart_a_v2_resume_opens_the_session_and_a_v1_load_replays_it_in_v1() {
    let mut daemon = Daemon::start(&[EDITOR, PHONE], &["--protocol-v2"]).await;
    let mut v1 = v1_client(&daemon, "editor").await;
    let created = v1
        .send_request(acp::NewSessionRequest::new(daemon.cwd()))
        .await
        .unwrap();
    let turn = daemon
        .write_turn(&mut v1, &created.session_id, "first", "the first answer")
        .await;
    assert_eq!(turn.ok().stop_reason, acp::StopReason::EndTurn);
    let sid = created.session_id.to_string();
    daemon.restart().await;

    // Not live any more: the v2 resume opens it from its journal, in v2.
    let mut v2 = v2_client(&daemon, "phone").await;
    let (_, replay_v2) = v2_attach(
        &mut v2,
        &daemon,
        &sid,
        json!({"replayFrom": {"type": "start"}}),
    )
    .await;
    assert_eq!(text_of(&replay_v2), "the first answer");
    assert!(
        replay_v2
            .iter()
            .any(|m| update_kind(m) == "tool_call_update"
                && m["params"]["update"]["content"][0]["type"] == "diff"),
        "{replay_v2:#?}"
    );
    // A v1 client attaching gets the same history in v1's shapes.
    let mut v1 = v1_client(&daemon, "editor").await;
    let loaded = v1
        .call(
            "session/load",
            json!({"sessionId": sid, "cwd": daemon.cwd(), "mcpServers": []}),
        )
        .await;
    assert!(loaded.get("error").is_none(), "{loaded}");
    assert!(loaded["result"]["modes"].is_object(), "{loaded}");
    let replay_v1 = &v1.seen[..v1.seen.len() - 1];
    assert_eq!(text_of(replay_v1), "the first answer");
    let user: String = replay_v1
        .iter()
        .filter(|m| update_kind(m) == "user_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(user, "first");
    assert!(
        replay_v1.iter().any(|m| update_kind(m) == "tool_call"),
        "{replay_v1:#?}"
    );
    all_v1(replay_v1);
    // Both go on with the session.
    daemon.mock.push(mock::text_reply("again"));
    let prompt = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "more"}]});
    v2_request(&mut v2, "session/prompt", prompt, "PromptRequest").await;
    assert_eq!(text_of(&v2_until_idle(&mut v2).await), "again");
    let (ended, _) = v1.wait_for(|m| m["method"] == "_session/turn_ended").await;
    assert_eq!(ended["params"]["stopReason"], "end_turn", "{ended}");
}

#[tokio::test]
async fn remote_a_session_deleted_by_a_v1_client_ends_for_its_v2_clients_too() {
    let daemon = Daemon::start(&[EDITOR, PHONE], &["--protocol-v2"]).await;
    let mut v1 = v1_client(&daemon, "editor").await;
    let created = v1
        .call(
            "session/new",
            json!({"cwd": daemon.cwd(), "mcpServers": []}),
        )
        .await;
    let sid = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let mut v2 = v2_client(&daemon, "phone").await;
    v2_attach(&mut v2, &daemon, &sid, json!({})).await;
    let deleted = v1.call("session/delete", json!({"sessionId": sid})).await;
    assert!(deleted.get("error").is_none(), "{deleted}");
    // The v2 connection let go of it: a prompt there finds no session.
    let prompt = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]});
    let id = v2_request(&mut v2, "session/prompt", prompt, "PromptRequest").await;
    let (refused, _) = v2
        .wait_for(|m| m["id"] == id && m.get("method").is_none())
        .await;
    assert!(refused.get("error").is_some(), "{refused}");
    assert!(daemon.mock.requests().is_empty());
}

#[tokio::test]
async fn remote_streamable_http_serves_a_v2_client_its_turn_in_v2() {
    let daemon = Daemon::start(&[PHONE], &["--protocol-v2"]).await;
    let client = Http::client();
    let token = daemon.tokens["phone"].clone();
    let params = json!({"protocolVersion": 2, "info": {"name": "remote-v2", "version": "1"},
                        "capabilities": {}});
    check("InitializeRequest", &params);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params});
    let answered = client
        .post(daemon.url())
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 200);
    let connection = answered.headers()["acp-connection-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let body: Value = answered.json().await.unwrap();
    assert_eq!(body["result"]["protocolVersion"], 2, "{body}");
    check("InitializeResponse", &body["result"]);
    let http = Http {
        client,
        url: daemon.url(),
        token,
        connection,
    };
    let mut conn_stream = http.stream(None).await;
    let params = json!({"cwd": daemon.cwd()});
    check("NewSessionRequest", &params);
    let new = json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": params});
    assert_eq!(http.post(None, &new).send().await.unwrap().status(), 202);
    let (created, _) = wait_on(&mut conn_stream, |m| m["id"] == 2).await;
    check("NewSessionResponse", &created["result"]);
    let sid = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let mut session_stream = http.stream(Some(&sid)).await;
    daemon.mock.push(write_call());
    daemon.mock.push(mock::text_reply("written"));
    let params = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]});
    check("PromptRequest", &params);
    let prompt = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": params});
    assert_eq!(
        http.post(Some(&sid), &prompt)
            .send()
            .await
            .unwrap()
            .status(),
        202
    );
    let (ask, before) = wait_on(&mut session_stream, is_permission).await;
    before.iter().for_each(check_sent);
    check_sent(&ask);
    let ack = before
        .iter()
        .find(|m| m["id"] == 3 && m.get("method").is_none())
        .unwrap_or_else(|| panic!("no prompt answer: {before:#?}"));
    check("PromptResponse", &ack["result"]);
    let answer = choose("allow_once")(&ask).unwrap();
    check("RequestPermissionResponse", &answer);
    let reply = json!({"jsonrpc": "2.0", "id": ask["id"], "result": answer});
    assert_eq!(
        http.post(Some(&sid), &reply).send().await.unwrap().status(),
        202
    );
    let (idle, rest) = wait_on(&mut session_stream, is_idle).await;
    rest.iter().for_each(check_sent);
    check_sent(&idle);
    assert_eq!(idle["params"]["update"]["stopReason"], "end_turn", "{idle}");
    assert_eq!(text_of(&rest), "written");
    assert_eq!(
        std::fs::read_to_string(daemon.cwd().join("out.txt")).unwrap(),
        "hello\n"
    );
}

#[tokio::test]
async fn remote_two_v2_controllers_prompting_at_once_both_run() {
    let daemon = Daemon::start(&[EDITOR, PHONE], &["--protocol-v2"]).await;
    let mut editor = v2_client(&daemon, "editor").await;
    let id = v2_request(
        &mut editor,
        "session/new",
        json!({"cwd": daemon.cwd()}),
        "NewSessionRequest",
    )
    .await;
    let (created, _) = v2_response(&mut editor, id, "NewSessionResponse").await;
    let sid = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let mut phone = v2_client(&daemon, "phone").await;
    v2_attach(&mut phone, &daemon, &sid, json!({})).await;
    daemon
        .mock
        .push(mock::slow_text(20, std::time::Duration::from_millis(20)));
    daemon.mock.push(mock::text_reply("second answer"));
    let prompt = |text: &str| json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]});
    v2_request(
        &mut editor,
        "session/prompt",
        prompt("from the editor"),
        "PromptRequest",
    )
    .await;
    editor
        .wait_for(|m| update_kind(m) == "agent_message_chunk")
        .await;
    // The phone prompts while the editor's turn streams: not refused, it
    // becomes the next turn.
    let id = v2_request(
        &mut phone,
        "session/prompt",
        prompt("from the phone"),
        "PromptRequest",
    )
    .await;
    let (answered, _) = v2_response(&mut phone, id, "PromptResponse").await;
    let message_id = answered["result"]["messageId"].clone();
    assert!(message_id.is_string(), "{answered}");
    let mut seen = v2_until_idle(&mut editor).await;
    seen.extend(v2_until_idle(&mut editor).await);
    // The editor sees the phone's message, with the id the phone was
    // answered, between the two turns.
    let theirs = position(&seen, |m| {
        update_kind(m) == "user_message" && m["params"]["update"]["messageId"] == message_id
    });
    let first_idle = position(&seen, is_idle);
    assert!(first_idle < theirs, "{seen:#?}");
    let requests = daemon.mock.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[1]["messages"]
            .to_string()
            .contains("from the phone")
    );
}

/// The entries of a batch's answer (an array), by id.
fn batch_answers(answer: &Value) -> Vec<Value> {
    answer
        .as_array()
        .unwrap_or_else(|| panic!("a batch's answer must be an array: {answer}"))
        .clone()
}

/// Two requests, a notification and an invalid entry in one batch.
fn mixed_batch(cwd: &std::path::Path) -> Value {
    json!([
        {"jsonrpc": "2.0", "id": "list", "method": "session/list", "params": {}},
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "none"}},
        {"jsonrpc": "2.0", "id": 70, "method": "session/new", "params": {"cwd": cwd}},
        42,
    ])
}

/// The answer to `mixed_batch`: one array holding both requests' answers
/// and the invalid entry's `-32600`, nothing for the notification.
fn check_mixed_answer(answer: &Value) {
    let answers = batch_answers(answer);
    assert_eq!(answers.len(), 3, "{answer}");
    let by_id = |id: Value| answers.iter().find(|a| a["id"] == id).cloned();
    let list = by_id(json!("list")).unwrap_or_else(|| panic!("no list answer: {answer}"));
    check("ListSessionsResponse", &list["result"]);
    let new = by_id(json!(70)).unwrap_or_else(|| panic!("no session/new answer: {answer}"));
    check("NewSessionResponse", &new["result"]);
    assert!(
        answers
            .iter()
            .any(|a| a["id"].is_null() && a["error"]["code"] == -32600),
        "{answer}"
    );
}

#[tokio::test]
async fn remote_a_v2_websocket_client_sends_batches_and_a_v1_one_is_refused_them() {
    let daemon = Daemon::start(&[EDITOR], &["--protocol-v2"]).await;
    // v1 defines no batches: one -32600 for the array.
    let mut v1 = v1_client(&daemon, "editor").await;
    v1.send(&json!([{"jsonrpc": "2.0", "id": 5, "method": "session/list", "params": {}}]))
        .await;
    let refused = v1.next().await;
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let mut ws = v2_client(&daemon, "editor").await;
    // An empty batch: one -32600 with a null id, never an empty array.
    ws.send(&json!([])).await;
    let empty = ws.next().await;
    assert!(empty.is_object(), "{empty}");
    assert_eq!(empty["error"]["code"], -32600, "{empty}");
    assert!(empty["id"].is_null(), "{empty}");
    ws.send(&mixed_batch(&daemon.cwd())).await;
    let answer = ws.next().await;
    check_mixed_answer(&answer);
    // A batch of notifications only is answered nothing: the next message
    // is the lone request's answer.
    ws.send(&json!([{"jsonrpc": "2.0", "method": "session/cancel",
                     "params": {"sessionId": "none"}}]))
        .await;
    let id = ws.request("session/list", json!({})).await;
    let (next, before) = ws.wait_for(|m| m["id"] == id || m.is_array()).await;
    assert_eq!(next["id"], id, "{next}");
    check("ListSessionsResponse", &next["result"]);
    assert!(
        before.iter().all(|m| m["method"] == "session/update"),
        "{before:#?}"
    );
    // A batch's prompt: its answer (the acceptance) in the array, the turn
    // told as updates.
    let sid = answer
        .as_array()
        .and_then(|a| a.iter().find(|m| m["id"] == 70))
        .and_then(|m| m["result"]["sessionId"].as_str())
        .unwrap_or_default()
        .to_owned();
    daemon.mock.push(mock::text_reply("batched"));
    let prompt = json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]});
    check("PromptRequest", &prompt);
    ws.send(&json!([{"jsonrpc": "2.0", "id": "p", "method": "session/prompt", "params": prompt}]))
        .await;
    let (accepted, _) = ws.wait_for(Value::is_array).await;
    let accepted = batch_answers(&accepted);
    assert_eq!(accepted.len(), 1, "{accepted:?}");
    check("PromptResponse", &accepted[0]["result"]);
    let turn = v2_until_idle(&mut ws).await;
    assert_eq!(text_of(&turn), "batched");
}

#[tokio::test]
async fn remote_a_v2_streamable_http_client_posts_batches() {
    let daemon = Daemon::start(&[PHONE], &["--protocol-v2"]).await;
    let client = Http::client();
    let token = daemon.tokens["phone"].clone();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 2, "info": {"name": "remote-v2", "version": "1"},
                   "capabilities": {}}});
    let answered = client
        .post(daemon.url())
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 200);
    let connection = answered.headers()["acp-connection-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let http = Http {
        client,
        url: daemon.url(),
        token,
        connection,
    };
    let mut stream = http.stream(None).await;
    http.send(None, &json!([])).await;
    let (empty, _) = wait_on(&mut stream, |_| true).await;
    assert_eq!(empty["error"]["code"], -32600, "{empty}");
    assert!(empty["id"].is_null(), "{empty}");
    // The answer is one array on the connection's stream.
    http.send(None, &mixed_batch(&daemon.cwd())).await;
    let (answer, before) = wait_on(&mut stream, Value::is_array).await;
    assert!(before.is_empty(), "{before:#?}");
    check_mixed_answer(&answer);
    // A header naming another session than an entry does is refused.
    let other = json!([{"jsonrpc": "2.0", "id": 9, "method": "session/close",
                        "params": {"sessionId": "elsewhere"}}]);
    let status = http
        .post(Some("this"), &other)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 400);
}
