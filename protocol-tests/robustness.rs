//! Bad input and misbehaving clients: oversized and non-UTF-8 lines, wrong
//! types, unknown fields, duplicate `initialize`, messages for unknown
//! sessions, editor `fs/*` failures, paths escaping the session root,
//! binary, huge and special files through Read, a catastrophic regex, and
//! stdin closing mid-turn. Each ends in a proper answer and the connection
//! (or the turn) goes on.

use std::time::{Duration, Instant};

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, Options, alive, choose, eventually, updates};

/// A session still opens and a turn still runs.
async fn still_works(maia: &mut Maia) {
    let sid = maia.new_session().await;
    let (resp, before) = maia.answered_turn(&sid, "ping", "still here").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_eq!(crate::harness::agent_text(&before), "still here");
}

/// `VmHWM` (peak resident memory) of a process, in kB.
fn peak_rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test]
async fn fifty_megabyte_line_is_answered_with_bounded_memory() {
    let (mut maia, sid) = Maia::ready().await;
    let pid = maia.child.id().unwrap();
    let before = peak_rss_kb(pid);
    let big = "x".repeat(50 * 1024 * 1024);
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"session/prompt\",\"params\":{{\"sessionId\":\"{sid}\",\"prompt\":[{{\"type\":\"text\",\"text\":\"{big}\"}}]}}}}\n"
    );
    drop(big);
    maia.send_raw(&line).await;
    drop(line);
    let m = maia.next().await;
    assert_eq!(m["error"]["code"], -32600, "{}", m["error"]);
    assert_eq!(m["id"], 77);
    assert!(
        m["error"]["message"].as_str().unwrap().contains("limit"),
        "{m}"
    );
    // An oversized line without a readable id is answered with id null.
    let mut headless = vec![b'y'; 20 * 1024 * 1024];
    headless.push(b'\n');
    maia.send_bytes(&headless).await;
    let m = maia.next().await;
    assert_eq!(m["error"]["code"], -32600);
    assert_eq!(m["id"], Value::Null);
    // The reader keeps at most the 16 MiB cap of a line (plus the copy
    // while its buffer grows), never the whole line.
    let peak = peak_rss_kb(pid);
    assert!(
        peak - before < 32 * 1024,
        "peak RSS {peak} kB (before: {before} kB) for a 50 MB line"
    );
    still_works(&mut maia).await;
}

#[tokio::test]
async fn non_utf8_bytes_are_a_parse_error() {
    let (mut maia, sid) = Maia::ready().await;
    let mut line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"session/prompt\",\"params\":{{\"sessionId\":\"{sid}\",\"prompt\":[{{\"type\":\"text\",\"text\":\""
    )
    .into_bytes();
    line.extend_from_slice(b"caf\xe9 \xff\xfe\xc3");
    line.extend_from_slice(b"\"}]}}\n");
    maia.send_bytes(&line).await;
    let m = maia.next().await;
    assert_eq!(m["error"]["code"], -32700, "{m}");
    assert_eq!(m["id"], Value::Null);
    // Bare invalid bytes, and a lone continuation byte.
    maia.send_bytes(b"\xff\xfe\xfd\n\x80\n").await;
    for _ in 0..2 {
        assert_eq!(maia.next().await["error"]["code"], -32700);
    }
    assert_eq!(maia.mock.requests().len(), 0, "nothing reached the model");
    still_works(&mut maia).await;
}

#[tokio::test]
async fn wrong_types_in_params_are_invalid_params() {
    let (mut maia, sid) = Maia::ready().await;
    let cases = [
        ("session/prompt", json!({"sessionId": 42, "prompt": []})),
        (
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": 7}]}),
        ),
        ("session/prompt", json!({"sessionId": sid, "prompt": [42]})),
        ("session/new", json!({"cwd": "/tmp", "mcpServers": "none"})),
        ("session/load", json!({"sessionId": [], "cwd": true})),
        ("session/set_mode", json!({"sessionId": sid, "modeId": 5})),
        ("initialize", json!({"protocolVersion": "one"})),
    ];
    for (method, params) in cases {
        let id = maia.request(method, params.clone()).await;
        let (resp, _) = maia.response(id).await;
        assert_eq!(resp["error"]["code"], -32602, "{method} {params}: {resp}");
        assert_eq!(resp["id"], json!(id));
    }
    // A notification with wrong types gets no answer at all.
    maia.notify("session/cancel", json!({"sessionId": {"x": 1}}))
        .await;
    // `params` that is not a structure is an invalid request.
    maia.send_raw("{\"jsonrpc\":\"2.0\",\"id\":900,\"method\":\"session/new\",\"params\":\"x\"}\n")
        .await;
    let m = maia.next().await;
    assert_eq!(
        (m["id"].clone(), m["error"]["code"].clone()),
        (json!(900), json!(-32600))
    );
    still_works(&mut maia).await;
}

#[tokio::test]
async fn unknown_fields_are_tolerated() {
    let mut maia = Maia::start().await;
    maia.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "extra": true,
        "params": {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": false,
        "futureThing": 1}, "terminal": false, "newCap": {"a": [1]}}, "somethingNew": "x",
        "_meta": {"vendor": 1}}}),
    )
    .await;
    let m = maia.next().await;
    assert!(m.get("result").is_some(), "{m}");
    let cwd = maia.cwd();
    let id = maia
        .request(
            "session/new",
            json!({"cwd": cwd, "mcpServers": [], "futureOption": {"deep": [null]}, "_meta": {}}),
        )
        .await;
    let (resp, _) = maia.response(id).await;
    let sid = resp["result"]["sessionId"].as_str().unwrap().to_owned();
    maia.mock.push(mock::text_reply("fine"));
    let id = maia
        .request(
            "session/prompt",
            json!({"sessionId": sid, "newField": 1,
                   "prompt": [{"type": "text", "text": "hi", "annotations": {"x": 1}, "unknownKey": 2}]}),
        )
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
}

#[tokio::test]
async fn duplicate_initialize_is_answered_and_sessions_keep_working() {
    let (mut maia, sid) = Maia::ready().await;
    let again = maia.initialize().await;
    assert!(again.get("result").is_some(), "{again}");
    assert_eq!(again["result"]["protocolVersion"], 1);
    let third = maia.initialize().await;
    assert_eq!(third["result"], again["result"]);
    let (resp, _) = maia
        .answered_turn(&sid, "still there?", "same session")
        .await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    still_works(&mut maia).await;
}

#[tokio::test]
async fn messages_for_unknown_sessions_and_requests() {
    let (mut maia, _) = Maia::ready().await;
    for (method, params) in [
        (
            "session/set_mode",
            json!({"sessionId": "ghost", "modeId": "default"}),
        ),
        (
            "session/prompt",
            json!({"sessionId": "ghost", "prompt": [{"type": "text", "text": "boo"}]}),
        ),
    ] {
        let id = maia.request(method, params).await;
        let (resp, _) = maia.response(id).await;
        assert_eq!(resp["error"]["code"], -32002, "{method}: {resp}");
    }
    // Notifications a client should not send, or for sessions that do not
    // exist, and responses to requests maia never made: all ignored.
    maia.notify(
        "session/update",
        json!({"sessionId": "ghost", "update": {"sessionUpdate": "agent_message_chunk",
               "content": {"type": "text", "text": "fake"}}}),
    )
    .await;
    maia.notify("session/cancel", json!({"sessionId": "ghost"}))
        .await;
    maia.respond(
        &json!(424_242),
        json!({"outcome": {"outcome": "cancelled"}}),
    )
    .await;
    maia.respond(&json!("never-sent"), Value::Null).await;
    maia.send(&json!({"jsonrpc": "2.0", "id": 77_777, "error": {"code": -1, "message": "x"}}))
        .await;
    if let Some(m) = maia.next_within(Duration::from_millis(300)).await {
        panic!("nothing should answer those: {m}");
    }
    still_works(&mut maia).await;
}

/// A session on a client that offers both `fs` methods.
async fn fs_client() -> (Maia, String) {
    let mut maia = Maia::start().await;
    maia.initialize_with(json!({"fs": {"readTextFile": true, "writeTextFile": true}}))
        .await;
    let sid = maia.new_session().await;
    (maia, sid)
}

/// The content of the tool message for `call_id` in the last model request.
fn tool_result(maia: &Maia, call_id: &str) -> String {
    let requests = maia.mock.requests();
    requests.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no tool result for {call_id}"))
        .to_owned()
}

/// The last status of every tool call among `messages`.
fn last_statuses(messages: &[Value]) -> Vec<String> {
    let mut out: Vec<(Value, String)> = Vec::new();
    for u in updates(messages) {
        if u["sessionUpdate"] != "tool_call" && u["sessionUpdate"] != "tool_call_update" {
            continue;
        }
        let Some(status) = u["status"].as_str() else {
            continue;
        };
        match out.iter_mut().find(|(id, _)| *id == u["toolCallId"]) {
            Some(entry) => entry.1 = status.to_owned(),
            None => out.push((u["toolCallId"].clone(), status.to_owned())),
        }
    }
    out.into_iter().map(|(_, s)| s).collect()
}

/// Prompts a turn whose model calls `calls` then says "done"; answers
/// permissions with allow_once and each `fs/*` request with `fs_answer`
/// (a full JSON-RPC message body: `{"result": …}` or `{"error": …}`).
async fn fs_turn(
    maia: &mut Maia,
    sid: &str,
    calls: &[(&str, &str, Value)],
    fs_answer: Value,
) -> (Value, Vec<Value>) {
    maia.mock.push(mock::tool_calls_reply(calls));
    maia.mock.push(mock::text_reply("done"));
    let id = maia.prompt(sid, "go").await;
    let mut before = Vec::new();
    loop {
        let m = maia.next().await;
        if m.get("method").is_none() && m["id"] == json!(id) {
            return (m, before);
        }
        match m["method"].as_str() {
            Some("session/request_permission") => {
                let answer = choose("allow_once")(&m).unwrap();
                maia.respond(&m["id"], answer).await;
            }
            Some(method) if method.starts_with("fs/") => {
                let mut reply = fs_answer.clone();
                reply["jsonrpc"] = json!("2.0");
                reply["id"] = m["id"].clone();
                maia.send(&reply).await;
            }
            _ => {}
        }
        before.push(m);
    }
}

#[tokio::test]
async fn editor_write_error_fails_the_call_and_the_turn_goes_on() {
    let (mut maia, sid) = fs_client().await;
    let (resp, before) = fs_turn(
        &mut maia,
        &sid,
        &[(
            "call_w",
            "Write",
            json!({"file_path": "w.txt", "content": "text"}),
        )],
        json!({"error": {"code": -32603, "message": "disk full"}}),
    )
    .await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_eq!(last_statuses(&before), ["failed"]);
    let result = tool_result(&maia, "call_w");
    assert!(result.contains("disk full"), "{result}");
    assert!(!maia.path("w.txt").exists());
    still_works(&mut maia).await;
}

#[tokio::test]
async fn editor_null_or_malformed_read_results_fail_cleanly() {
    let (mut maia, sid) = fs_client().await;
    std::fs::write(maia.path("r.txt"), "on disk\n").unwrap();
    for answer in [
        json!({"result": null}),
        json!({"result": {"content": 42}}),
        json!({"result": "just a string"}),
        json!({"error": null}),
    ] {
        let (resp, before) = fs_turn(
            &mut maia,
            &sid,
            &[("call_r", "Read", json!({"file_path": "r.txt"}))],
            answer.clone(),
        )
        .await;
        assert_eq!(resp["result"]["stopReason"], "end_turn", "{answer}: {resp}");
        assert_eq!(last_statuses(&before), ["failed"], "{answer}");
        let result = tool_result(&maia, "call_r");
        assert!(!result.contains("on disk"), "{answer}: {result}");
    }
    still_works(&mut maia).await;
}

/// Runs one tool call in its own turn, rejecting any permission request;
/// returns whether permission was asked and the result the model got.
async fn asked_for(maia: &mut Maia, sid: &str, tool: &str, args: Value) -> (bool, String) {
    maia.mock
        .push(mock::tool_calls_reply(&[("call_x", tool, args.clone())]));
    maia.mock.push(mock::text_reply("ok"));
    let id = maia.prompt(sid, "go").await;
    let mut asked = false;
    let (resp, _) = maia
        .response_with(id, |m| {
            asked = true;
            choose("reject_once")(m)
        })
        .await;
    assert_eq!(
        resp["result"]["stopReason"], "end_turn",
        "{tool} {args}: {resp}"
    );
    (asked, tool_result(maia, "call_x"))
}

#[tokio::test]
async fn paths_escaping_the_session_root_are_asked_never_silently_allowed() {
    let options = Options {
        settings: json!({"permissions": {"allow": [
            "Read(./**)", "Read(*.txt)", "Read(**)", "Write(./**)", "Edit(./**)",
            "Grep(./**)", "Glob(./**)"
        ]}}),
        ..Options::default()
    };
    let (mut maia, sid) = Maia::ready_with(options).await;
    let outside = maia.home.path().canonicalize().unwrap();
    std::fs::write(outside.join("outside.txt"), "SECRET outside\n").unwrap();
    std::fs::write(maia.path("inside.txt"), "inside text\n").unwrap();
    std::os::unix::fs::symlink(outside.join("outside.txt"), maia.path("link.txt")).unwrap();
    std::os::unix::fs::symlink(&outside, maia.path("linkdir")).unwrap();
    std::fs::create_dir_all(maia.path("sub")).unwrap();

    // The rules are in force: inside the root, no question.
    let (asked, result) =
        asked_for(&mut maia, &sid, "Read", json!({"file_path": "inside.txt"})).await;
    assert!(!asked && result.contains("inside text"), "{result}");

    let outside_file = outside.join("outside.txt").display().to_string();
    let escapes = [
        ("Read", json!({"file_path": "../outside.txt"})),
        (
            "Read",
            json!({"file_path": format!("../{}/outside.txt", outside.file_name().unwrap().to_str().unwrap())}),
        ),
        ("Read", json!({"file_path": "sub/../../outside.txt"})),
        ("Read", json!({"file_path": outside_file})),
        ("Read", json!({"file_path": "link.txt"})),
        ("Read", json!({"file_path": "linkdir/outside.txt"})),
        ("Read", json!({"file_path": "/etc/passwd"})),
        (
            "Write",
            json!({"file_path": "../escape.txt", "content": "x"}),
        ),
        (
            "Write",
            json!({"file_path": "linkdir/escape.txt", "content": "x"}),
        ),
        ("Grep", json!({"pattern": "SECRET", "path": ".."})),
        ("Grep", json!({"pattern": "SECRET", "path": "linkdir"})),
        (
            "Glob",
            json!({"pattern": "*.txt", "path": outside_file.trim_end_matches("/outside.txt")}),
        ),
    ];
    for (tool, args) in escapes {
        let (asked, result) = asked_for(&mut maia, &sid, tool, args.clone()).await;
        assert!(asked, "{tool} {args} ran without asking: {result}");
        assert!(!result.contains("SECRET"), "{tool} {args}: {result}");
    }
    assert!(!outside.join("escape.txt").exists());
    assert!(!maia.cwd().parent().unwrap().join("escape.txt").exists());
}

/// A session whose rules allow Read, Grep and Glob inside the root.
async fn reading_session() -> (Maia, String) {
    Maia::ready_with(Options {
        settings: json!({"permissions": {"allow": ["Read(./**)", "Grep(./**)", "Glob(./**)"]}}),
        ..Options::default()
    })
    .await
}

#[tokio::test]
async fn binary_and_non_utf8_files_through_read_fail_cleanly() {
    let (mut maia, sid) = reading_session().await;
    std::fs::write(maia.path("latin1.txt"), b"caf\xe9 cr\xe8me\n").unwrap();
    std::fs::write(maia.path("bin.dat"), b"\x7fELF\x00\x01\x02\xff\xfe").unwrap();
    std::fs::write(maia.path("half.txt"), b"ok line\n\xf0\x9f").unwrap();
    for file in ["latin1.txt", "bin.dat", "half.txt"] {
        let (asked, result) = asked_for(&mut maia, &sid, "Read", json!({"file_path": file})).await;
        assert!(!asked);
        assert!(
            result.contains("binary") || result.contains("UTF-8"),
            "{file}: {result}"
        );
    }
    // Grep skips the binary file and still finds text in the others.
    let (_, result) = asked_for(&mut maia, &sid, "Grep", json!({"pattern": "ok|ELF|caf"})).await;
    assert!(
        result.contains("half.txt") && !result.contains("bin.dat"),
        "{result}"
    );
    still_works(&mut maia).await;
}

#[tokio::test]
async fn huge_and_special_files_through_read_are_bounded() {
    let (mut maia, sid) = reading_session().await;
    // Over the 16 MB limit: refused without reading it whole.
    let file = std::fs::File::create(maia.path("huge.log")).unwrap();
    file.set_len(40 * 1024 * 1024).unwrap();
    drop(file);
    // Under the limit but far over what one call returns.
    let line = "0123456789".repeat(10);
    std::fs::write(maia.path("big.txt"), format!("{line}\n").repeat(100_000)).unwrap();
    // One 5 MB line.
    std::fs::write(maia.path("wide.txt"), "w".repeat(5 * 1024 * 1024)).unwrap();
    let (_, result) = asked_for(&mut maia, &sid, "Read", json!({"file_path": "huge.log"})).await;
    assert!(result.contains("too large"), "{result}");
    for file in ["big.txt", "wide.txt"] {
        let (_, result) = asked_for(&mut maia, &sid, "Read", json!({"file_path": file})).await;
        assert!(result.len() < 110 * 1024, "{file}: {} bytes", result.len());
    }
    // Files that never end or never open: refused at once.
    let fifo = maia.path("pipe.fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    for special in [fifo.display().to_string(), "/dev/zero".into()] {
        let started = Instant::now();
        let (_, result) = asked_for_allowing(&mut maia, &sid, json!({"file_path": special})).await;
        assert!(started.elapsed() < Duration::from_secs(5), "{special}");
        assert!(result.contains("not a regular file"), "{special}: {result}");
    }
    let peak = peak_rss_kb(maia.child.id().unwrap());
    assert!(peak < 100 * 1024, "peak RSS {peak} kB");
    still_works(&mut maia).await;
}

/// Like [`asked_for`] for Read, answering a permission request with allow_once.
async fn asked_for_allowing(maia: &mut Maia, sid: &str, args: Value) -> (bool, String) {
    maia.mock
        .push(mock::tool_calls_reply(&[("call_x", "Read", args)]));
    maia.mock.push(mock::text_reply("ok"));
    let id = maia.prompt(sid, "go").await;
    let mut asked = false;
    let (resp, _) = maia
        .response_with(id, |m| {
            asked = true;
            choose("allow_once")(m)
        })
        .await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    (asked, tool_result(maia, "call_x"))
}

#[tokio::test]
async fn catastrophic_regex_on_a_long_line_returns_promptly() {
    let (mut maia, sid) = reading_session().await;
    let mut text = "a".repeat(200_000);
    text.push('!');
    text.push('\n');
    std::fs::write(maia.path("long.txt"), text.repeat(5)).unwrap();
    for pattern in ["(a+)+$", "(a|a)*b", "(a*)*b", "^(a+)+b$", "(x+x+)+y"] {
        for mode in ["content", "files_with_matches"] {
            let started = Instant::now();
            let (_, result) = asked_for(
                &mut maia,
                &sid,
                "Grep",
                json!({"pattern": pattern, "output_mode": mode}),
            )
            .await;
            let took = started.elapsed();
            assert!(took < Duration::from_secs(5), "{pattern} {mode}: {took:?}");
            assert!(result.contains("No matches"), "{pattern} {mode}: {result}");
        }
    }
}

fn read_pid(path: &std::path::Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Starts a Bash call that leaves background children in several ways
/// (a `&` job, a job in a subshell that exits, `nohup`), waits until they
/// all run and returns their pids and the prompt's request id.
async fn start_forking_command(maia: &mut Maia, sid: &str) -> (u64, Vec<u32>) {
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_fork",
        "Bash",
        json!({"command": "sleep 30 & echo $! > a.pid; (sleep 30 & echo $! > b.pid); \
                           nohup sleep 30 >/dev/null 2>&1 & echo $! > c.pid; \
                           sh -c 'sleep 30 & echo $! > d.pid; wait' & exec sleep 30"}),
    )]));
    let id = maia.prompt(sid, "fork").await;
    let (ask, _) = maia
        .wait_for(|m| m["method"] == "session/request_permission")
        .await;
    let answer = choose("allow_once")(&ask).unwrap();
    maia.respond(&ask["id"], answer).await;
    let mut pids = Vec::new();
    for name in ["a.pid", "b.pid", "c.pid", "d.pid"] {
        let path = maia.path(name);
        let mut pid = None;
        assert!(
            eventually(Duration::from_secs(10), || {
                pid = read_pid(&path);
                pid.is_some()
            })
            .await,
            "{name} never written"
        );
        pids.push(pid.unwrap());
    }
    assert!(pids.iter().all(|p| alive(*p)));
    (id, pids)
}

#[tokio::test]
async fn cancel_leaves_no_background_child_behind() {
    let (mut maia, sid) = Maia::ready().await;
    let (id, pids) = start_forking_command(&mut maia, &sid).await;
    maia.notify("session/cancel", json!({"sessionId": sid}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "cancelled", "{resp}");
    assert!(
        eventually(Duration::from_secs(3), || pids.iter().all(|p| !alive(*p))).await,
        "left behind: {:?}",
        pids.iter().filter(|p| alive(**p)).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn stdin_closed_mid_stream_exits_within_a_second() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock
        .push(mock::slow_text(1000, Duration::from_millis(20)));
    maia.prompt(&sid, "talk").await;
    maia.wait_for(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .await;
    let closed = Instant::now();
    maia.close_stdin();
    maia.wait_exit(Duration::from_secs(5)).await;
    assert!(
        closed.elapsed() < Duration::from_secs(1),
        "exit took {:?}",
        closed.elapsed()
    );
}

#[tokio::test]
async fn stdin_closed_mid_tool_exits_within_a_second_leaving_no_child() {
    let (mut maia, sid) = Maia::ready().await;
    let (_, pids) = start_forking_command(&mut maia, &sid).await;
    let closed = Instant::now();
    maia.close_stdin();
    maia.wait_exit(Duration::from_secs(5)).await;
    assert!(
        closed.elapsed() < Duration::from_secs(1),
        "exit took {:?}",
        closed.elapsed()
    );
    assert!(
        eventually(Duration::from_secs(2), || pids.iter().all(|p| !alive(*p))).await,
        "left behind: {:?}",
        pids.iter().filter(|p| alive(**p)).collect::<Vec<_>>()
    );
}
