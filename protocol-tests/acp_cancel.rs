//! Prompt-turn cancellation (`session/cancel`, digest §7.2; checks 28, 32,
//! 33, 36, 38): the prompt resolves `cancelled` (a result, never an error),
//! nothing of the turn follows its response, and nothing it started keeps
//! running.

use std::path::Path;
use std::time::{Duration, Instant};

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{
    Maia, agent_text, alive, choose, eventually, is_permission, updates, updates_of,
};

/// How soon after `session/cancel` the prompt must resolve.
const PROMPTLY: Duration = Duration::from_secs(3);

fn is_update(m: &Value, kind: &str) -> bool {
    m["method"] == "session/update" && m["params"]["update"]["sessionUpdate"] == kind
}

fn is_in_progress(m: &Value) -> bool {
    is_update(m, "tool_call_update") && m["params"]["update"]["status"] == "in_progress"
}

async fn cancel(maia: &mut Maia, sid: &str) {
    maia.notify("session/cancel", json!({"sessionId": sid}))
        .await;
}

/// The last status given to tool call `id` among `messages`.
fn last_status(messages: &[Value], id: &Value) -> Value {
    updates(messages)
        .iter()
        .rfind(|u| {
            (u["sessionUpdate"] == "tool_call" || u["sessionUpdate"] == "tool_call_update")
                && &u["toolCallId"] == id
                && u.get("status").is_some_and(|s| !s.is_null())
        })
        .map(|u| u["status"].clone())
        .unwrap_or(Value::Null)
}

/// Asserts a cancelled prompt response.
fn assert_cancelled(resp: &Value) {
    assert_eq!(
        resp["result"]["stopReason"], "cancelled",
        "a cancelled turn answers with a result, not an error: {resp}"
    );
    // Besides the stop reason, only what the turn used and the prompt's id.
    let keys: Vec<&String> = resp["result"].as_object().unwrap().keys().collect();
    assert!(
        keys.iter()
            .all(|k| ["stopReason", "usage", "_meta"].contains(&k.as_str())),
        "{resp}"
    );
    assert!(resp.get("error").is_none(), "{resp}");
}

/// After a cancelled response: nothing more arrives for that turn, and a
/// fresh turn works and sees only its own updates. Returns the messages the
/// model got for the fresh turn.
async fn fresh_turn_is_clean(maia: &mut Maia, sid: &str) -> Vec<Value> {
    if let Some(late) = maia.next_within(Duration::from_millis(300)).await {
        panic!("a message arrived after the cancelled response: {late}");
    }
    let before_count = maia.mock.requests().len();
    maia.mock.push(mock::text_reply("fresh start"));
    let id = maia.prompt(sid, "again").await;
    let (resp, before) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_eq!(agent_text(&before), "fresh start");
    for m in &before {
        assert_eq!(
            m["method"], "session/update",
            "only updates before the new response: {m}"
        );
        let kind = &m["params"]["update"]["sessionUpdate"];
        assert!(
            kind == "agent_message_chunk"
                || kind == "usage_update"
                || kind == "session_info_update",
            "an update of the cancelled turn leaked into the next: {m}"
        );
    }
    let requests = maia.mock.requests();
    assert_eq!(requests.len(), before_count + 1);
    requests.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone()
}

fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

async fn wait_pid(path: &Path) -> u32 {
    let mut pid = None;
    let found = eventually(Duration::from_secs(10), || {
        pid = read_pid(path);
        pid.is_some()
    })
    .await;
    assert!(found, "the command never wrote {}", path.display());
    pid.unwrap()
}

#[tokio::test]
async fn cancel_mid_stream_keeps_the_partial_text() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock
        .push(mock::slow_text(400, Duration::from_millis(25)));
    let id = maia.prompt(&sid, "write a lot").await;
    let (first, mut before) = maia.wait_for(|m| is_update(m, "agent_message_chunk")).await;
    before.push(first);
    let sent = Instant::now();
    cancel(&mut maia, &sid).await;
    let (resp, rest) = maia.response(id).await;
    assert!(
        sent.elapsed() < PROMPTLY,
        "cancel took {:?}",
        sent.elapsed()
    );
    assert_cancelled(&resp);
    before.extend(rest);
    let streamed = agent_text(&before);
    assert!(streamed.starts_with("word "), "{streamed:?}");
    assert!(
        streamed.len() < 400 * "word ".len(),
        "the stream was not cut"
    );
    maia.mock
        .wait_for_dropped_streams(1, Duration::from_secs(5))
        .await;

    let messages = fresh_turn_is_clean(&mut maia, &sid).await;
    let roles: Vec<_> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "user"],
        "{messages:?}"
    );
    assert_eq!(
        messages[2]["content"], streamed,
        "the history keeps exactly the text the user saw"
    );
}

#[tokio::test]
async fn cancel_while_the_model_request_hangs() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::Reply::Hang);
    let id = maia.prompt(&sid, "hello?").await;
    maia.mock
        .wait_for_requests(1, Duration::from_secs(10))
        .await;
    let sent = Instant::now();
    cancel(&mut maia, &sid).await;
    let (resp, before) = maia.response(id).await;
    assert!(sent.elapsed() < PROMPTLY);
    assert_cancelled(&resp);
    assert_eq!(agent_text(&before), "");
    maia.mock
        .wait_for_dropped_streams(1, Duration::from_secs(5))
        .await;
    let messages = fresh_turn_is_clean(&mut maia, &sid).await;
    assert!(
        messages.iter().all(|m| m["role"] != "assistant"),
        "no empty assistant message for a turn that said nothing: {messages:?}"
    );
    assert_eq!(messages.last().unwrap()["content"], "again");
}

#[tokio::test]
async fn cancel_right_behind_the_prompt() {
    let (mut maia, sid) = Maia::ready().await;
    // Nothing scripted: were the request made, the mock would answer 500.
    let prompt = json!({"jsonrpc": "2.0", "id": 99, "method": "session/prompt",
        "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}});
    let cancel = json!({"jsonrpc": "2.0", "method": "session/cancel",
        "params": {"sessionId": sid}});
    maia.send_raw(&format!("{prompt}\n{cancel}\n")).await;
    let (resp, before) = maia.response(99).await;
    assert_cancelled(&resp);
    assert_eq!(
        agent_text(&before),
        "",
        "no failure message for a cancelled turn"
    );
    assert!(maia.mock.requests().len() <= 1);
    fresh_turn_is_clean(&mut maia, &sid).await;
}

#[tokio::test]
async fn cancel_mid_tool_kills_the_command_and_its_children() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_sleep",
        "Bash",
        json!({"command": "sleep 30 & echo $! > bg.pid; echo $$ > fg.pid; exec sleep 30"}),
    )]));
    let id = maia.prompt(&sid, "sleep").await;
    let (permission, mut seen) = maia.wait_for(is_permission).await;
    let answer = choose("allow_once")(&permission).unwrap();
    maia.respond(&permission["id"], answer).await;
    let (running, rest) = maia.wait_for(is_in_progress).await;
    seen.extend(rest);
    seen.push(running.clone());
    let call_id = running["params"]["update"]["toolCallId"].clone();
    let fg = wait_pid(&maia.path("fg.pid")).await;
    let bg = wait_pid(&maia.path("bg.pid")).await;
    assert!(alive(fg) && alive(bg));

    let sent = Instant::now();
    cancel(&mut maia, &sid).await;
    let (resp, rest) = maia.response(id).await;
    assert!(
        sent.elapsed() < PROMPTLY,
        "cancel took {:?}",
        sent.elapsed()
    );
    assert_cancelled(&resp);
    seen.extend(rest);
    assert_eq!(last_status(&seen, &call_id), "failed", "{seen:?}");
    assert!(
        eventually(Duration::from_secs(3), || !alive(fg) && !alive(bg)).await,
        "processes left behind: fg {fg} alive {}, bg {bg} alive {}",
        alive(fg),
        alive(bg)
    );
    // Only the one model request: no second request after the cancel.
    assert_eq!(maia.mock.requests().len(), 1);

    let messages = fresh_turn_is_clean(&mut maia, &sid).await;
    let tool = messages
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the cancelled call still has its tool result");
    assert_eq!(tool["tool_call_id"], "call_sleep");
    assert!(
        tool["content"].as_str().unwrap().contains("ancel"),
        "{tool}"
    );
}

#[tokio::test]
async fn cancel_while_a_permission_is_pending() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_w",
        "Write",
        json!({"file_path": "out.txt", "content": "must not be written"}),
    )]));
    let id = maia.prompt(&sid, "write").await;
    let (permission, mut seen) = maia.wait_for(is_permission).await;
    assert_eq!(permission["params"]["sessionId"], sid);
    let call_id = permission["params"]["toolCall"]["toolCallId"].clone();
    cancel(&mut maia, &sid).await;
    // The client MUST answer pending permissions with `cancelled`.
    maia.respond(
        &permission["id"],
        json!({"outcome": {"outcome": "cancelled"}}),
    )
    .await;
    let (resp, rest) = maia.response(id).await;
    assert_cancelled(&resp);
    seen.extend(rest);
    assert_eq!(last_status(&seen, &call_id), "failed", "{seen:?}");
    assert!(!maia.path("out.txt").exists(), "the file was written");
    fresh_turn_is_clean(&mut maia, &sid).await;
    assert!(!maia.path("out.txt").exists());
}

#[tokio::test]
async fn cancel_resolves_even_if_the_permission_is_never_answered() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_w",
        "Write",
        json!({"file_path": "out.txt", "content": "must not be written"}),
    )]));
    let id = maia.prompt(&sid, "write").await;
    let (permission, mut seen) = maia.wait_for(is_permission).await;
    let call_id = permission["params"]["toolCall"]["toolCallId"].clone();
    let sent = Instant::now();
    cancel(&mut maia, &sid).await;
    let (resp, rest) = maia.response_with(id, |_| None).await;
    assert!(sent.elapsed() < PROMPTLY);
    assert_cancelled(&resp);
    // MAIA gives the question up before it answers the prompt (ACP's
    // cancellation cascade): one `$/cancel_request` naming it.
    let given_up: Vec<&Value> = rest
        .iter()
        .filter(|m| m["method"] == "$/cancel_request")
        .collect();
    assert_eq!(given_up.len(), 1, "{rest:?}");
    assert_eq!(given_up[0]["params"]["requestId"], permission["id"]);
    assert!(given_up[0].get("id").is_none(), "a notification");
    seen.extend(rest);
    assert_eq!(last_status(&seen, &call_id), "failed", "{seen:?}");

    // A late "allow" for the stale question changes nothing.
    let answer = choose("allow_once")(&permission).unwrap();
    maia.respond(&permission["id"], answer).await;
    fresh_turn_is_clean(&mut maia, &sid).await;
    assert!(!maia.path("out.txt").exists(), "the file was written");
}

#[tokio::test]
async fn cancel_storm_gets_one_response_and_stray_cancels_none() {
    let (mut maia, sid) = Maia::ready().await;

    // Cancels for an unknown and an idle session: no answer, no crash.
    maia.notify("session/cancel", json!({"sessionId": "no-such-session"}))
        .await;
    cancel(&mut maia, &sid).await;
    maia.notify("session/cancel", json!({})).await;
    let probe = maia
        .request("session/new", json!({"cwd": maia.cwd(), "mcpServers": []}))
        .await;
    let next = maia.next().await;
    assert_eq!(
        next["id"], probe,
        "stray cancels must not be answered: {next}"
    );
    assert!(next["result"]["sessionId"].is_string(), "{next}");
    // The new session's command list follows its response.
    maia.wait_for(|m| is_update(m, "available_commands_update"))
        .await;

    // An idle-session cancel does not poison the next turn.
    let (resp, before) = maia.answered_turn(&sid, "hi", "still fine").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    assert_eq!(agent_text(&before), "still fine");

    // 100 cancels during one turn.
    maia.mock
        .push(mock::slow_text(400, Duration::from_millis(25)));
    let id = maia.prompt(&sid, "long").await;
    maia.wait_for(|m| is_update(m, "agent_message_chunk")).await;
    let line = format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    );
    maia.send_raw(&line.repeat(100)).await;
    let (resp, before) = maia.response(id).await;
    assert_cancelled(&resp);
    assert!(
        before.iter().all(|m| m.get("id").is_none()),
        "no response to a notification: {before:?}"
    );
    // Nothing else answers: the next message after a probe is its response.
    let probe = maia
        .request("session/new", json!({"cwd": maia.cwd(), "mcpServers": []}))
        .await;
    let next = maia.next().await;
    assert_eq!(next["id"], probe, "{next}");
    maia.wait_for(|m| is_update(m, "available_commands_update"))
        .await;
    assert!(maia.child.try_wait().unwrap().is_none(), "maia exited");
    fresh_turn_is_clean(&mut maia, &sid).await;
    let responses = maia
        .seen
        .iter()
        .filter(|m| m.get("method").is_none() && m["id"] == json!(id))
        .count();
    assert_eq!(responses, 1, "exactly one response to the cancelled prompt");
}

#[tokio::test]
async fn closing_stdin_mid_tool_exits_and_kills_the_command() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_sleep",
        "Bash",
        json!({"command": "sleep 30 & echo $! > bg.pid; echo $$ > fg.pid; exec sleep 30"}),
    )]));
    maia.prompt(&sid, "sleep").await;
    let (permission, _) = maia.wait_for(is_permission).await;
    let answer = choose("allow_once")(&permission).unwrap();
    maia.respond(&permission["id"], answer).await;
    maia.wait_for(is_in_progress).await;
    let fg = wait_pid(&maia.path("fg.pid")).await;
    let bg = wait_pid(&maia.path("bg.pid")).await;
    assert!(alive(fg) && alive(bg));

    let closed = Instant::now();
    maia.close_stdin();
    maia.wait_exit(Duration::from_secs(5)).await;
    assert!(
        closed.elapsed() < Duration::from_millis(2500),
        "exit took {:?}",
        closed.elapsed()
    );
    assert!(
        eventually(Duration::from_secs(2), || !alive(fg) && !alive(bg)).await,
        "processes left behind: fg {fg} alive {}, bg {bg} alive {}",
        alive(fg),
        alive(bg)
    );
}

#[tokio::test]
async fn cancel_during_a_retry_wait() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::rate_limited(30, false));
    let id = maia.prompt(&sid, "hi").await;
    // The retry notice comes as a thought before the wait.
    maia.wait_for(|m| is_update(m, "agent_thought_chunk")).await;
    let sent = Instant::now();
    cancel(&mut maia, &sid).await;
    let (resp, before) = maia.response(id).await;
    assert!(
        sent.elapsed() < PROMPTLY,
        "cancel took {:?}",
        sent.elapsed()
    );
    assert_cancelled(&resp);
    assert_eq!(agent_text(&before), "", "no failure message when cancelled");
    assert_eq!(maia.mock.requests().len(), 1, "no retry after the cancel");
    fresh_turn_is_clean(&mut maia, &sid).await;
}

#[tokio::test]
async fn closing_stdin_while_the_model_hangs_exits() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::Reply::Hang);
    maia.prompt(&sid, "hello?").await;
    maia.mock
        .wait_for_requests(1, Duration::from_secs(10))
        .await;
    let closed = Instant::now();
    maia.close_stdin();
    maia.wait_exit(Duration::from_secs(5)).await;
    assert!(
        closed.elapsed() < Duration::from_millis(2500),
        "exit took {:?}",
        closed.elapsed()
    );
    maia.mock
        .wait_for_dropped_streams(1, Duration::from_secs(2))
        .await;
}

#[tokio::test]
async fn closing_stdin_while_a_permission_is_pending_exits() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_w",
        "Write",
        json!({"file_path": "out.txt", "content": "must not be written"}),
    )]));
    maia.prompt(&sid, "write").await;
    maia.wait_for(is_permission).await;
    let closed = Instant::now();
    maia.close_stdin();
    maia.wait_exit(Duration::from_secs(5)).await;
    assert!(
        closed.elapsed() < Duration::from_millis(2500),
        "exit took {:?}",
        closed.elapsed()
    );
    assert!(!maia.path("out.txt").exists());
}

#[tokio::test]
async fn cancel_while_tool_calls_are_streaming_leaves_no_orphan_call() {
    let (mut maia, sid) = Maia::ready().await;
    // The call's pieces: role, start (id, name), three parts of its
    // arguments, finish, usage, [DONE].
    let calls = match mock::tool_calls_reply(&[("call_g", "Glob", json!({"pattern": "*.rs"}))]) {
        mock::Reply::Stream { pieces, .. } => pieces,
        _ => unreachable!(),
    };
    // The first piece holds the role, the call's start, the first part of
    // its arguments and then the text: once the text is shown, MAIA has
    // read a half-streamed call. The rest follows a long gap later, so the
    // cancel lands inside the call.
    let mut pieces = vec![format!(
        "{}{}",
        calls[..3].concat(),
        mock::sse_chunk(&mock::chunk(json!({"content": "Let me look."}), None))
    )];
    pieces.extend(calls[3..].iter().cloned());
    let total = pieces.len();
    maia.mock.push(mock::Reply::Stream {
        pieces,
        gap: Duration::from_secs(10),
    });
    let sent_before = maia.mock.piece_times().len();
    let id = maia.prompt(&sid, "look").await;
    maia.wait_for(|m| is_update(m, "agent_message_chunk")).await;
    cancel(&mut maia, &sid).await;
    let (resp, before) = maia.response(id).await;
    assert_cancelled(&resp);
    assert!(
        updates_of(&before, "tool_call").is_empty(),
        "no half-streamed tool call is announced: {before:?}"
    );
    // The cancel cut the stream after its first piece, not after its end.
    maia.mock
        .wait_for_dropped_streams(1, Duration::from_secs(5))
        .await;
    assert_eq!(
        maia.mock.piece_times().len() - sent_before,
        1,
        "pieces sent of {total}"
    );
    let messages = fresh_turn_is_clean(&mut maia, &sid).await;
    let roles: Vec<_> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "user"],
        "{messages:?}"
    );
    assert_eq!(messages[2]["content"], "Let me look.");
    assert!(
        messages[2]
            .get("tool_calls")
            .is_none_or(|t| t.is_null() || t.as_array().is_some_and(Vec::is_empty)),
        "an assistant tool call without its result would break the next request: {messages:?}"
    );
}
