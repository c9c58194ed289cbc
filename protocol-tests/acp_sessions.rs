//! Saved sessions over ACP: journals in `<cwd>/.maia/.sessions`, restart of
//! the binary (SIGKILL), `session/load` replay, `session/resume`,
//! `session/list`, `session/close`, `session/delete`, titles, slash
//! commands and the context file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, agent_text, choose, updates, updates_of, user_texts};

/// The kinds of the `session/update`s among `messages`, in order.
fn kinds(messages: &[Value]) -> Vec<String> {
    updates(messages)
        .iter()
        .map(|u| u["sessionUpdate"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// A reply with some text, then one `Write` call, finishing `tool_calls`.
fn text_then_write(text: &str, call_id: &str, args: &Value) -> mock::Reply {
    let mut out = vec![mock::sse_chunk(&mock::role_chunk())];
    for piece in mock::split_chars(text, 5) {
        out.push(mock::sse_chunk(&mock::chunk(
            json!({"content": piece}),
            None,
        )));
    }
    out.push(mock::sse_chunk(&mock::chunk(
        json!({"tool_calls": [{
            "index": 0, "id": call_id, "type": "function",
            "function": {"name": "Write", "arguments": args.to_string()},
        }]}),
        None,
    )));
    out.push(mock::sse_chunk(&mock::chunk(json!({}), Some("tool_calls"))));
    out.push(mock::sse_chunk(&mock::usage_chunk(
        mock::MOCK_PROMPT_TOKENS,
        mock::MOCK_COMPLETION_TOKENS,
        true,
    )));
    out.push(mock::DONE.to_owned());
    mock::stream(out)
}

/// One prompt answered by `reply`; returns the response and what came before.
async fn turn(maia: &mut Maia, sid: &str, text: &str, reply: &str) -> (Value, Vec<Value>) {
    maia.mock.push(mock::text_reply(reply));
    let id = maia.prompt(sid, text).await;
    let (resp, before) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    (resp, before)
}

/// A slash command (or any prompt the model must not see); returns the
/// reply text.
async fn command(maia: &mut Maia, sid: &str, text: &str) -> (String, Vec<Value>) {
    let requests = maia.mock.requests().len();
    let id = maia.prompt(sid, text).await;
    let (resp, before) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{text}: {resp}");
    assert_eq!(
        maia.mock.requests().len(),
        requests,
        "{text} must not reach the model"
    );
    (agent_text(&before), before)
}

/// Checks the answer of `session/load` or `session/resume`: an object
/// (`{}`, possibly with the session's config options).
fn assert_opened(resp: &Value) {
    assert!(resp.get("error").is_none(), "{resp}");
    let result = resp["result"]
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {resp}"));
    for key in result.keys() {
        assert!(
            ["configOptions", "modes", "models", "_meta"].contains(&key.as_str()),
            "unexpected `{key}` in {resp}"
        );
    }
}

async fn load(maia: &mut Maia, sid: &str) -> (Value, Vec<Value>) {
    let cwd = maia.cwd();
    maia.call(
        "session/load",
        json!({"sessionId": sid, "cwd": cwd, "mcpServers": []}),
    )
    .await
}

async fn list(maia: &mut Maia, params: Value) -> Value {
    maia.call("session/list", params).await.0
}

/// The ids listed for the test's cwd (one page).
async fn listed_ids(maia: &mut Maia) -> Vec<String> {
    let cwd = maia.cwd();
    let resp = list(maia, json!({"cwd": cwd})).await;
    resp["result"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("no sessions in {resp}"))
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_owned())
        .collect()
}

/// Checks that `before` (what came before a load or resume response) ends
/// with the session's opening updates: the command list, and nothing else
/// for another session.
fn expect_commands_before(before: &[Value], sid: &str) {
    let commands = before
        .iter()
        .find(|m| m["params"]["update"]["sessionUpdate"] == "available_commands_update")
        .unwrap_or_else(|| panic!("the command list must precede the response: {before:?}"));
    assert_eq!(commands["params"]["sessionId"], sid);
}

/// Waits for the `available_commands_update` of `sid` that follows a
/// `session/new` response, and checks it is the first message after it.
async fn expect_commands_next(maia: &mut Maia, sid: &str) -> Value {
    let m = maia.next().await;
    assert_eq!(
        m["params"]["update"]["sessionUpdate"], "available_commands_update",
        "the command list must follow the response: {m}"
    );
    assert_eq!(m["params"]["sessionId"], sid);
    m
}

/// The messages of chat request `index` received by the mock.
fn request_messages(maia: &Maia, index: usize) -> Vec<Value> {
    let requests = maia.mock.requests();
    requests
        .get(index)
        .unwrap_or_else(|| panic!("no model request #{index}: {requests:?}"))["messages"]
        .as_array()
        .unwrap()
        .clone()
}

fn last_request_messages(maia: &Maia) -> Vec<Value> {
    let n = maia.mock.requests().len();
    assert!(n > 0, "no model request");
    request_messages(maia, n - 1)
}

fn roles(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect()
}

fn sessions_dir(maia: &Maia) -> PathBuf {
    maia.path(".maia/.sessions")
}

/// The journal files in the sessions folder.
fn journals(maia: &Maia) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(sessions_dir(maia))
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Seconds since the epoch of `YYYY-MM-DDTHH:MM:SS[.fff]Z`, or `None`.
fn parse_iso8601_utc(text: &str) -> Option<u64> {
    let body = text.strip_suffix('Z')?;
    let (date, time) = body.split_once('T')?;
    let mut d = date.split('-');
    let (y, mo, da): (i64, i64, i64) = (
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
    );
    let time = time.split('.').next()?;
    let mut t = time.split(':');
    let (h, mi, s): (i64, i64, i64) = (
        t.next()?.parse().ok()?,
        t.next()?.parse().ok()?,
        t.next()?.parse().ok()?,
    );
    if d.next().is_some() || t.next().is_some() || date.len() != 10 || time.len() != 8 {
        return None;
    }
    if !(1..=12).contains(&mo) || !(1..=31).contains(&da) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + da - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + h * 3600 + mi * 60 + s).ok()
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Writes a journal by hand, in the documented format (version 1).
fn write_journal(cwd: &Path, name: &str, id: &str, title: &str) {
    let dir = cwd.join(".maia/.sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let header = json!({"kind": "maia-session", "version": 1, "id": id, "cwd": cwd, "created": 1_700_000_000u64});
    let lines = [
        header.to_string(),
        json!({"type": "user_display", "text": title}).to_string(),
        json!({"type": "title", "title": title}).to_string(),
    ];
    std::fs::write(dir.join(format!("{name}.jsonl")), lines.join("\n") + "\n").unwrap();
}

#[tokio::test]
async fn saved_thread_survives_kill_9_and_load_replays_it_in_order() {
    let (mut maia, sid) = Maia::ready().await;
    let args = json!({"file_path": "greeting.txt", "content": "hello\n"});
    maia.mock
        .push(text_then_write("I will write it.", "call_w", &args));
    maia.mock.push(mock::text_reply("All done."));
    let id = maia.prompt(&sid, "Create the greeting file").await;
    let (resp, before) = maia.response_with(id, choose("allow_once")).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_eq!(crate::harness::read(&maia.path("greeting.txt")), "hello\n");
    let titles = updates_of(&before, "session_info_update");
    assert_eq!(titles.len(), 1, "{titles:?}");
    assert_eq!(titles[0]["title"], "Create the greeting file");
    assert_eq!(journals(&maia).len(), 1, "one journal for one thread");

    let mut maia = maia.restart().await;
    maia.initialize().await;

    // session/list shows the thread.
    let cwd = maia.cwd();
    let resp = list(&mut maia, json!({"cwd": cwd})).await;
    let sessions = resp["result"]["sessions"].as_array().unwrap().clone();
    assert_eq!(sessions.len(), 1, "{resp}");
    let s = &sessions[0];
    assert_eq!(s["sessionId"], sid);
    assert_eq!(s["cwd"], json!(cwd));
    assert_eq!(s["title"], "Create the greeting file");
    let updated = s["updatedAt"].as_str().unwrap();
    let when = parse_iso8601_utc(updated)
        .unwrap_or_else(|| panic!("updatedAt is not ISO 8601 UTC: {updated}"));
    assert!(now_secs().abs_diff(when) < 600, "updatedAt {updated}");
    assert!(resp["result"]["nextCursor"].is_null(), "{resp}");

    // session/load replays the whole thread before answering.
    let (resp, before) = load(&mut maia, &sid).await;
    assert_opened(&resp);
    assert!(
        before.iter().all(|m| m["method"] == "session/update"
            && m.get("id").is_none()
            && m["params"]["sessionId"] == sid),
        "only this session's updates before the load response: {before:?}"
    );
    // Consecutive chunks of one kind are one message; collapse them. The
    // session's opening updates (commands, notices) close the sequence.
    let mut sequence = kinds(&before);
    sequence.dedup();
    assert_eq!(
        sequence.last().map(String::as_str),
        Some("available_commands_update")
    );
    sequence.retain(|k| k != "available_commands_update" && k != "notice");
    assert_eq!(
        sequence,
        [
            "user_message_chunk",
            "session_info_update",
            "agent_message_chunk",
            "tool_call",
            "agent_message_chunk",
        ],
        "{before:?}"
    );
    assert_eq!(user_texts(&before), ["Create the greeting file"]);
    let agent: Vec<String> = updates(&before)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(agent.concat(), "I will write it.All done.");
    let call = &updates_of(&before, "tool_call")[0];
    assert_eq!(call["status"], "completed", "final status: {call}");
    assert_eq!(call["kind"], "edit");
    assert_eq!(call["title"], "Write greeting.txt");
    let path = maia.path("greeting.txt");
    let diffs: Vec<&Value> = call["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["type"] == "diff")
        .collect();
    assert_eq!(diffs.len(), 1, "{call}");
    assert_eq!(diffs[0]["path"], json!(path));
    assert_eq!(diffs[0]["newText"], "hello\n");
    assert!(diffs[0]["oldText"].is_null());
    assert!(
        updates_of(&before, "tool_call_update").is_empty(),
        "a replayed call comes in its final state"
    );
    expect_commands_before(&before, &sid);

    // The restored thread continues with its history.
    turn(&mut maia, &sid, "And now?", "Nothing more.").await;
    let messages = request_messages(&maia, 2);
    assert_eq!(
        roles(&messages),
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    assert!(
        messages[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("Create the greeting file")
    );
    assert_eq!(messages[2]["content"], "I will write it.");
    assert_eq!(messages[2]["tool_calls"][0]["id"], "call_w");
    assert_eq!(messages[3]["tool_call_id"], "call_w");
    assert_eq!(messages[4]["content"], "All done.");
    assert_eq!(messages[5]["content"], "And now?");
}

/// The `messageId`s of the replayed user messages, in order.
fn user_message_ids(messages: &[Value]) -> Vec<String> {
    updates_of(messages, "user_message_chunk")
        .iter()
        .map(|u| u["messageId"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn each_user_message_has_one_stable_id_live_and_after_a_restart() {
    let (mut maia, sid) = Maia::ready().await;
    let (first, _) = turn(&mut maia, &sid, "first question", "One.").await;
    let (second, _) = turn(&mut maia, &sid, "second question", "Two.").await;
    let ids: Vec<String> = [&first, &second]
        .iter()
        .map(|r| {
            r["result"]["_meta"]["maia"]["userMessageId"]
                .as_str()
                .unwrap_or_else(|| panic!("no userMessageId in {r}"))
                .to_owned()
        })
        .collect();
    assert_ne!(ids[0], ids[1]);
    // The same ids when the thread is replayed, in this process and after
    // a restart.
    let (_, before) = load(&mut maia, &sid).await;
    assert_eq!(user_message_ids(&before), ids);
    let mut maia = maia.restart().await;
    maia.initialize().await;
    let (_, before) = load(&mut maia, &sid).await;
    assert_eq!(user_texts(&before), ["first question", "second question"]);
    assert_eq!(user_message_ids(&before), ids);
}

#[tokio::test]
async fn resume_after_restart_answers_without_replay_and_keeps_history() {
    let (mut maia, sid) = Maia::ready().await;
    turn(&mut maia, &sid, "remember the number 7", "Noted: 7.").await;
    let mut maia = maia.restart().await;
    maia.initialize().await;
    let cwd = maia.cwd();
    let (resp, before) = maia
        .call(
            "session/resume",
            json!({"sessionId": sid, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    assert_opened(&resp);
    assert_eq!(
        kinds(&before),
        ["available_commands_update"],
        "no replay before the resume response: {before:?}"
    );
    expect_commands_before(&before, &sid);
    let (_, before) = turn(&mut maia, &sid, "which number?", "7").await;
    assert!(
        user_texts(&before).is_empty(),
        "no replay after resume either: {before:?}"
    );
    let messages = last_request_messages(&maia);
    assert_eq!(roles(&messages), ["system", "user", "assistant", "user"]);
    assert_eq!(messages[2]["content"], "Noted: 7.");
    assert_eq!(messages[3]["content"], "which number?");
}

#[tokio::test]
async fn list_filters_by_cwd_validates_and_pages() {
    let (mut maia, sid) = Maia::ready().await;
    turn(&mut maia, &sid, "hello", "hi").await;

    let elsewhere = tempfile::tempdir().unwrap();
    let resp = list(&mut maia, json!({"cwd": elsewhere.path()})).await;
    assert_eq!(resp["result"]["sessions"], json!([]), "{resp}");

    let resp = list(&mut maia, json!({"cwd": "relative/folder"})).await;
    assert_eq!(resp["error"]["code"], -32602, "{resp}");

    let cwd = maia.cwd();
    let resp = list(&mut maia, json!({"cwd": cwd, "cursor": "not-a-cursor!"})).await;
    assert!(resp["error"]["code"].is_i64(), "garbage cursor: {resp}");

    // Sessions saved by MAIA outside this process (files in the folder)
    // are listed too; 55 of them plus ours take two pages.
    for i in 0..55 {
        write_journal(
            &cwd,
            &format!("saved-{i:02}"),
            &format!("thread-{i:02}"),
            &format!("Saved thread {i}"),
        );
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut params = json!({"cwd": cwd});
        if let Some(c) = &cursor {
            params["cursor"] = json!(c);
        }
        let resp = list(&mut maia, params).await;
        let sessions = resp["result"]["sessions"]
            .as_array()
            .unwrap_or_else(|| panic!("{resp}"))
            .clone();
        pages += 1;
        assert!(!sessions.is_empty() && sessions.len() <= 50, "{resp}");
        for s in &sessions {
            assert_eq!(s["cwd"], json!(cwd));
            assert!(s["title"].as_str().is_some_and(|t| !t.is_empty()), "{s}");
            seen.push(s["sessionId"].as_str().unwrap().to_owned());
        }
        match resp["result"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
        assert!(pages < 5, "paging does not end");
    }
    assert_eq!(pages, 2);
    assert_eq!(seen.len(), 56);
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 56, "no session twice across pages");
    assert!(seen.contains(&sid));
    assert!(seen.contains(&"thread-07".to_owned()));

    // A hand-written session loads and replays.
    let (resp, before) = load(&mut maia, "thread-07").await;
    assert_opened(&resp);
    assert_eq!(user_texts(&before), ["Saved thread 7"]);
}

#[tokio::test]
async fn delete_removes_the_thread_and_unknown_ids_succeed() {
    let (mut maia, a) = Maia::ready().await;
    turn(&mut maia, &a, "thread a", "ok a").await;
    let b = maia.new_session().await;
    turn(&mut maia, &b, "thread b", "ok b").await;
    let mut ids = listed_ids(&mut maia).await;
    ids.sort();
    let mut both = vec![a.clone(), b.clone()];
    both.sort();
    assert_eq!(ids, both);

    let (resp, _) = maia.call("session/delete", json!({"sessionId": a})).await;
    assert_eq!(resp["result"], json!({}), "{resp}");
    assert_eq!(listed_ids(&mut maia).await, [b.as_str()]);
    assert_eq!(journals(&maia).len(), 1);
    let (resp, _) = maia
        .call("session/delete", json!({"sessionId": "no-such"}))
        .await;
    assert_eq!(resp["result"], json!({}), "{resp}");
    let (resp, _) = load(&mut maia, &a).await;
    assert_eq!(resp["error"]["code"], -32002, "deleted: {resp}");

    // After a restart: the editor lists the folder, then deletes.
    let mut maia = maia.restart().await;
    maia.initialize().await;
    assert_eq!(listed_ids(&mut maia).await, [b.as_str()]);
    let (resp, _) = maia.call("session/delete", json!({"sessionId": b})).await;
    assert_eq!(resp["result"], json!({}), "{resp}");
    assert_eq!(listed_ids(&mut maia).await, Vec::<String>::new());
    assert!(journals(&maia).is_empty(), "{:?}", journals(&maia));
}

#[tokio::test]
async fn close_idle_running_and_unknown() {
    let (mut maia, sid) = Maia::ready().await;
    let (resp, _) = maia.call("session/close", json!({"sessionId": sid})).await;
    assert_eq!(resp["result"], json!({}), "{resp}");
    let id = maia.prompt(&sid, "still there?").await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["error"]["code"], -32002, "closed: {resp}");

    let (resp, _) = maia
        .call("session/close", json!({"sessionId": "no-such"}))
        .await;
    assert_eq!(resp["error"]["code"], -32002, "{resp}");

    // Closing during a turn cancels it: the prompt answers `cancelled`,
    // and only then the close is answered.
    let sid = maia.new_session().await;
    maia.mock
        .push(mock::slow_text(400, Duration::from_millis(25)));
    let prompt = maia.prompt(&sid, "long story").await;
    maia.wait_for(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .await;
    let close = maia
        .request("session/close", json!({"sessionId": sid}))
        .await;
    let (first, _) = maia
        .wait_for(|m| m.get("method").is_none() && (m["id"] == prompt || m["id"] == close))
        .await;
    assert_eq!(first["id"], prompt, "the prompt is answered first: {first}");
    assert_eq!(first["result"]["stopReason"], "cancelled", "{first}");
    let (resp, between) = maia.response(close).await;
    assert_eq!(resp["result"], json!({}), "{resp}");
    assert!(
        updates(&between).is_empty(),
        "nothing of the closed turn after its response: {between:?}"
    );
    maia.mock
        .wait_for_dropped_streams(1, crate::harness::WAIT)
        .await;
}

#[tokio::test]
async fn kill_9_mid_stream_keeps_the_earlier_exchange() {
    let (mut maia, sid) = Maia::ready().await;
    turn(&mut maia, &sid, "first question", "first answer").await;
    maia.mock
        .push(mock::slow_text(400, Duration::from_millis(25)));
    maia.prompt(&sid, "second question").await;
    maia.wait_for(|m| {
        m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            && m["params"]["update"]["content"]["text"] == "word "
    })
    .await;
    let mut maia = maia.restart().await;
    maia.initialize().await;

    // Every complete line of the journal is JSON.
    let files = journals(&maia);
    assert_eq!(files.len(), 1, "{files:?}");
    let text = crate::harness::read(&files[0]);
    for line in text.lines() {
        serde_json::from_str::<Value>(line)
            .unwrap_or_else(|e| panic!("unreadable journal line {line:?}: {e}"));
    }

    let (resp, before) = load(&mut maia, &sid).await;
    assert_opened(&resp);
    let users = user_texts(&before);
    assert_eq!(
        users.first().map(String::as_str),
        Some("first question"),
        "{before:?}"
    );
    assert!(users.len() <= 2, "{users:?}");
    assert!(
        agent_text(&before).starts_with("first answer"),
        "{before:?}"
    );
    expect_commands_before(&before, &sid);

    // The thread goes on with the completed exchange in its history.
    turn(&mut maia, &sid, "third question", "third answer").await;
    let messages = last_request_messages(&maia);
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages[1]["role"], "user");
    assert_eq!(messages[1]["content"], "first question");
    assert_eq!(messages[2]["role"], "assistant");
    assert_eq!(messages[2]["content"], "first answer");
    assert_eq!(messages.last().unwrap()["content"], "third question");
}

#[tokio::test]
async fn commands_are_announced_and_help_lists_them_without_the_model() {
    let mut maia = Maia::start().await;
    maia.initialize().await;
    let cwd = maia.cwd();
    let (resp, before) = maia
        .call("session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    assert!(before.is_empty(), "{before:?}");
    let sid = resp["result"]["sessionId"].as_str().unwrap().to_owned();
    let update = expect_commands_next(&mut maia, &sid).await;
    let names: Vec<&str> = update["params"]["update"]["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for expected in ["new", "clear", "rename", "load", "model", "context", "help"] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let (text, before) = command(&mut maia, &sid, "/help").await;
    for name in &names {
        assert!(text.contains(&format!("/{name}")), "/{name} not in {text}");
    }
    assert!(user_texts(&before).is_empty());
    assert!(maia.mock.requests().is_empty());

    let (text, _) = command(&mut maia, &sid, "/context").await;
    assert!(text.contains("system prompt"), "{text}");
    assert!(text.contains("messages"), "{text}");

    // An unknown command is text for the model.
    turn(&mut maia, &sid, "/nonsense hi", "plain").await;
    let messages = last_request_messages(&maia);
    assert_eq!(messages.last().unwrap()["content"], "/nonsense hi");
}

#[tokio::test]
async fn new_starts_fresh_and_names_the_saved_conversation() {
    let (mut maia, sid) = Maia::ready().await;
    turn(&mut maia, &sid, "old topic", "old answer").await;
    let (text, _) = command(&mut maia, &sid, "/new").await;
    let name = text
        .split('`')
        .nth(1)
        .unwrap_or_else(|| panic!("no saved name in {text:?}"))
        .to_owned();
    assert!(
        maia.path(&format!(".maia/.sessions/{name}.jsonl")).exists(),
        "{name} is not saved: {:?}",
        journals(&maia)
    );
    turn(&mut maia, &sid, "new topic", "new answer").await;
    let messages = last_request_messages(&maia);
    assert_eq!(roles(&messages), ["system", "user"]);
    assert_eq!(messages[1]["content"], "new topic");
    let files = journals(&maia);
    assert_eq!(files.len(), 2, "the old conversation stays: {files:?}");
    let old = maia.path(&format!(".maia/.sessions/{name}.jsonl"));
    assert!(user_texts_in(&old).contains(&"old topic".to_owned()));
    let new = files.into_iter().find(|p| p != &old).unwrap();
    // The thread's current conversation is its most recently written file;
    // file times are coarse (a few ms), so write until the new one is newer.
    let mtime = |p: &Path| std::fs::metadata(p).unwrap().modified().unwrap();
    let mut extra = 0;
    while mtime(&new) <= mtime(&old) {
        extra += 1;
        assert!(extra < 100, "the new file never became newer");
        turn(&mut maia, &sid, "more", "ok").await;
    }
    // The thread is listed once, and after a restart it loads its current
    // conversation.
    assert_eq!(listed_ids(&mut maia).await, [sid.as_str()]);
    let mut maia = maia.restart().await;
    maia.initialize().await;
    let (resp, before) = load(&mut maia, &sid).await;
    assert_opened(&resp);
    let users = user_texts(&before);
    assert_eq!(users[0], "new topic", "{users:?}");
    assert!(!users.contains(&"old topic".to_owned()), "{users:?}");
}

/// The `user_display` texts of a journal.
fn user_texts_in(path: &Path) -> Vec<String> {
    crate::harness::read(path)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["type"] == "user_display")
        .map(|r| r["text"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn rename_then_load_from_another_thread() {
    let (mut maia, a) = Maia::ready().await;
    turn(&mut maia, &a, "remember apples", "ok apples").await;
    let (text, _) = command(&mut maia, &a, "/rename foo").await;
    assert!(text.contains("foo"), "{text}");
    let foo = maia.path(".maia/.sessions/foo.jsonl");
    assert!(foo.exists(), "{:?}", journals(&maia));
    assert_eq!(
        journals(&maia),
        std::slice::from_ref(&foo),
        "renamed, not copied"
    );
    let size = std::fs::metadata(&foo).unwrap().len();
    turn(&mut maia, &a, "and pears", "ok pears").await;
    assert!(
        std::fs::metadata(&foo).unwrap().len() > size,
        "later messages go to the renamed file"
    );

    let saved = crate::harness::read(&foo);
    let b = maia.new_session().await;
    let (text, before) = command(&mut maia, &b, "/load foo").await;
    assert!(text.contains("foo"), "{text}");
    assert_eq!(user_texts(&before), ["remember apples", "and pears"]);
    assert!(
        text.contains("ok apples") && text.contains("ok pears"),
        "{text}"
    );
    turn(&mut maia, &b, "what fruit?", "apples and pears").await;
    let messages = last_request_messages(&maia);
    assert_eq!(
        roles(&messages),
        ["system", "user", "assistant", "user", "assistant", "user"]
    );
    assert_eq!(messages[1]["content"], "remember apples");
    assert_eq!(messages[4]["content"], "ok pears");
    assert_eq!(messages[5]["content"], "what fruit?");
    // Thread a keeps its conversation: b never writes to a's file.
    assert_eq!(
        crate::harness::read(&foo),
        saved,
        "foo.jsonl is a's, unchanged"
    );
    let mut ids = listed_ids(&mut maia).await;
    ids.sort();
    let mut both = vec![a.clone(), b.clone()];
    both.sort();
    assert_eq!(ids, both);
    turn(&mut maia, &a, "and plums", "ok plums").await;
    assert!(user_texts_in(&foo).contains(&"and plums".to_owned()));
    assert!(
        journals(&maia)
            .iter()
            .filter(|p| **p != foo)
            .all(|p| !user_texts_in(p).contains(&"and plums".to_owned()))
    );

    let (text, _) = command(&mut maia, &b, "/load no-such-session").await;
    assert!(text.contains("no-such-session"), "{text}");
}

/// `/rename NAME` renames what the editor shows: a `session_info_update`
/// with the new title, the title in `session/list`, also after a restart
/// (and after the thread was titled from its first message).
#[tokio::test]
async fn rename_sets_the_title_in_the_list_and_survives_a_restart() {
    let (mut maia, sid) = Maia::ready().await;
    turn(&mut maia, &sid, "fix the login bug", "ok").await;
    let (text, before) = command(&mut maia, &sid, "/rename login work").await;
    assert!(text.contains("login work"), "{text}");
    let infos: Vec<&Value> = before
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "session_info_update")
        .collect();
    assert_eq!(infos.len(), 1, "{before:?}");
    assert_eq!(infos[0]["params"]["sessionId"], sid);
    assert_eq!(infos[0]["params"]["update"]["title"], "login work");
    let titles = |resp: &Value| -> Vec<(String, String)> {
        resp["result"]["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["sessionId"].as_str().unwrap().to_owned(),
                    s["title"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    };
    let cwd = maia.cwd();
    let listed = list(&mut maia, json!({"cwd": cwd})).await;
    assert_eq!(titles(&listed), [(sid.clone(), "login work".to_owned())]);
    // Later turns keep the name, and so does a restart.
    turn(&mut maia, &sid, "and the logout bug", "ok").await;
    let mut maia = maia.restart().await;
    maia.initialize().await;
    let listed = list(&mut maia, json!({"cwd": cwd})).await;
    assert_eq!(titles(&listed), [(sid.clone(), "login work".to_owned())]);
    let (resp, before) = load(&mut maia, &sid).await;
    assert_opened(&resp);
    let infos = updates_of(&before, "session_info_update");
    assert_eq!(infos.last().unwrap()["title"], "login work", "{infos:?}");
    assert_eq!(
        user_texts(&before),
        ["fix the login bug", "and the logout bug"]
    );
}

#[tokio::test]
async fn clear_empties_the_context() {
    let (mut maia, sid) = Maia::ready().await;
    turn(&mut maia, &sid, "one", "uno").await;
    let (text, _) = command(&mut maia, &sid, "/clear").await;
    assert!(!text.is_empty());
    turn(&mut maia, &sid, "two", "dos").await;
    let messages = last_request_messages(&maia);
    assert_eq!(roles(&messages), ["system", "user"]);
    assert_eq!(messages[1]["content"], "two");
}

#[tokio::test]
async fn model_lists_and_switches() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.set_models(vec![
        json!({"id": "mock-model", "object": "model"}),
        json!({"id": "other", "object": "model"}),
    ]);
    let (text, _) = command(&mut maia, &sid, "/model").await;
    assert!(
        text.contains("mock-model") && text.contains("other"),
        "{text}"
    );
    let (text, _) = command(&mut maia, &sid, "/model nope").await;
    assert!(text.contains("nope"), "{text}");
    turn(&mut maia, &sid, "still mock?", "yes").await;
    assert_eq!(maia.mock.requests()[0]["model"], "mock-model");
    let (text, _) = command(&mut maia, &sid, "/model other").await;
    assert!(text.contains("other"), "{text}");
    turn(&mut maia, &sid, "now other?", "yes").await;
    assert_eq!(maia.mock.requests()[1]["model"], "other");
}

/// Opens a session on a client with `caps` after writing `files` in its cwd;
/// runs one turn and returns the system prompt the model got.
async fn context_session(caps: Value, files: &[(&str, &str)]) -> (Maia, String) {
    let mut maia = Maia::start().await;
    for (name, text) in files {
        std::fs::write(maia.path(name), text).unwrap();
    }
    maia.initialize_with(caps).await;
    let sid = maia.new_session().await;
    turn(&mut maia, &sid, "hello", "hi").await;
    let messages = last_request_messages(&maia);
    assert_eq!(messages[0]["role"], "system");
    let system = messages[0]["content"].as_str().unwrap().to_owned();
    (maia, system)
}

fn notices(maia: &Maia) -> Vec<Value> {
    updates_of(&maia.seen, "notice")
}

#[tokio::test]
async fn context_file_is_loaded_and_reported_as_a_notice_when_supported() {
    let caps = json!({"session": {"notices": {}}});
    let (maia, system) = context_session(
        caps,
        &[
            ("MAIA.md", "Rule from MAIA dot md."),
            ("CLAUDE.md", "Rule from CLAUDE dot md."),
        ],
    )
    .await;
    assert!(system.contains("Rule from MAIA dot md."), "{system}");
    // Side by side, both are read, MAIA.md first.
    let claude = system.find("Rule from CLAUDE dot md.").expect(&system);
    assert!(system.find("Rule from MAIA dot md.").unwrap() < claude);
    let notices = notices(&maia);
    assert!(
        notices.iter().any(|n| n.to_string().contains("MAIA.md")),
        "{notices:?}"
    );

    let (_, system) = context_session(json!({}), &[("AGENTS.md", "Rule from AGENTS.")]).await;
    assert!(system.contains("Rule from AGENTS."), "{system}");
}

#[tokio::test]
async fn no_notice_without_the_client_capability() {
    let (mut maia, _) = context_session(json!({}), &[("MAIA.md", "Rule.")]).await;
    assert!(notices(&maia).is_empty(), "{:?}", notices(&maia));
    // Not in the conversation either; `/context` tells.
    let sid = maia.new_session().await;
    let (text, _) = command(&mut maia, &sid, "/context").await;
    assert!(text.contains("MAIA.md"), "{text}");
    assert!(notices(&maia).is_empty());
    assert!(
        !agent_text(&maia.seen).contains("Context file loaded"),
        "no notice as conversation text"
    );
}

#[tokio::test]
async fn load_or_resume_of_an_unknown_id_is_resource_not_found() {
    let mut maia = Maia::start().await;
    maia.initialize().await;
    let (resp, before) = load(&mut maia, "no-such-thread").await;
    assert_eq!(resp["error"]["code"], -32002, "{resp}");
    assert!(before.is_empty());
    let cwd = maia.cwd();
    let (resp, _) = maia
        .call(
            "session/resume",
            json!({"sessionId": "no-such-thread", "cwd": cwd, "mcpServers": []}),
        )
        .await;
    assert_eq!(resp["error"]["code"], -32002, "{resp}");
}
