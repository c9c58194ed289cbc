//! The impolite client: requests pipelined without waiting for earlier
//! responses, a prompt written the instant a session opens, reopening
//! threads that were never prompted or are mid-turn, many sessions at
//! once, torn journals, and signals with MCP servers and commands running.
//! Every request naming a session must be valid the instant the response
//! that created or opened it is written.

use std::path::Path;
use std::time::Duration;

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::acp_mcp::mock_mcp;
use crate::harness::{
    Maia, Options, agent_text, alive, choose, eventually, updates, updates_of, user_texts,
};

fn session_of(m: &Value) -> Option<&str> {
    m["params"]["sessionId"].as_str()
}

/// Opens a session with `session/new` and sends a prompt the instant the
/// response is read, 20 times in a row, each in a fresh session.
#[tokio::test]
async fn prompt_the_instant_session_new_answers() {
    let mut maia = Maia::start().await;
    maia.initialize().await;
    let cwd = maia.cwd();
    for round in 0..20 {
        maia.mock.push(mock::text_reply(&format!("answer {round}")));
        let id = maia
            .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        let (resp, _) = maia.response(id).await;
        let sid = resp["result"]["sessionId"].as_str().unwrap().to_owned();
        let pid = maia.prompt(&sid, "hi").await;
        let (resp, before) = maia.response(pid).await;
        assert_eq!(
            resp["result"]["stopReason"], "end_turn",
            "round {round}: {resp}"
        );
        assert_eq!(agent_text(&before), format!("answer {round}"));
    }
}

/// The same right after `session/load` and `session/resume` of a saved
/// thread, and with the prompt pipelined behind the load (sent before the
/// load's response arrived).
#[tokio::test]
async fn prompt_the_instant_load_or_resume_answers_and_pipelined() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::text_reply("first"));
    let id = maia.prompt(&sid, "one").await;
    maia.response(id).await;
    let cwd = maia.cwd();
    let mut maia = maia.restart().await;
    maia.initialize().await;
    for round in 0..10 {
        let method = if round % 2 == 0 {
            "session/load"
        } else {
            "session/resume"
        };
        maia.mock.push(mock::text_reply(&format!("r{round}")));
        let (resp, _) = maia.reopen(method, &sid).await;
        assert!(resp.get("result").is_some(), "{method}: {resp}");
        let pid = maia.prompt(&sid, "again").await;
        let (resp, _) = maia.response(pid).await;
        assert_eq!(resp["result"]["stopReason"], "end_turn", "{method}: {resp}");
    }
    // Pipelined: load, set_mode, prompt in one write, nothing awaited.
    maia.mock.push(mock::text_reply("pipelined"));
    let lines = [
        json!({"jsonrpc":"2.0","id":900,"method":"session/load",
               "params":{"sessionId": sid, "cwd": cwd, "mcpServers": []}}),
        json!({"jsonrpc":"2.0","id":901,"method":"session/set_mode",
               "params":{"sessionId": sid, "modeId": "accept-edits"}}),
        json!({"jsonrpc":"2.0","id":902,"method":"session/prompt",
               "params":{"sessionId": sid, "prompt": [{"type":"text","text":"piped"}]}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    maia.send_raw(&text).await;
    let (load, _) = maia.response(900).await;
    assert!(load.get("result").is_some(), "{load}");
    let (mode, _) = maia.response(901).await;
    assert_eq!(mode["result"], json!({}), "{mode}");
    let (prompt, before) = maia.response(902).await;
    assert_eq!(prompt["result"]["stopReason"], "end_turn", "{prompt}");
    assert_eq!(agent_text(&before), "pipelined");
}

/// A session that never had a prompt exists: `session/load`,
/// `session/resume` and `session/list` know it, in this process and after
/// a restart.
#[tokio::test]
async fn never_prompted_sessions_load_resume_and_list() {
    let (mut maia, sid) = Maia::ready().await;
    let cwd = maia.cwd();
    // Same process: load, then resume without mcpServers (ACP-RESUME-001).
    let (resp, _) = maia.load(&sid).await;
    assert!(resp["result"].is_object(), "{resp}");
    let id = maia
        .request("session/resume", json!({"sessionId": sid, "cwd": cwd}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert!(resp["result"].is_object(), "{resp}");
    let id = maia.request("session/list", json!({"cwd": cwd})).await;
    let (resp, _) = maia.response(id).await;
    let listed: Vec<&str> = resp["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["sessionId"].as_str())
        .collect();
    assert!(listed.contains(&sid.as_str()), "{resp}");

    // Another process.
    let mut maia = maia.restart().await;
    maia.initialize().await;
    let id = maia
        .request("session/resume", json!({"sessionId": sid, "cwd": cwd}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert!(resp["result"].is_object(), "{resp}");
    let mut maia = maia.restart().await;
    maia.initialize().await;
    let (resp, _) = maia.load(&sid).await;
    assert!(resp["result"].is_object(), "{resp}");
    // And it still works.
    let (resp, _) = maia.answered_turn(&sid, "finally", "late").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
}

/// Everything a load or resume sends for its session comes before its
/// response (replay, command list, notices); nothing follows it while the
/// client is quiet (ACP-LOAD-002).
#[tokio::test]
async fn load_and_resume_send_nothing_after_their_response() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::text_reply("saved answer"));
    let id = maia.prompt(&sid, "question").await;
    maia.response(id).await;
    let mut maia = maia.restart().await;
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;
    for method in ["session/load", "session/resume"] {
        let (resp, before) = maia.reopen(method, &sid).await;
        assert!(resp["result"].is_object(), "{method}: {resp}");
        let kinds: Vec<Value> = updates(&before)
            .iter()
            .map(|u| u["sessionUpdate"].clone())
            .collect();
        assert!(
            kinds.contains(&json!("available_commands_update")),
            "{method}: the command list must come before the response: {kinds:?}"
        );
        if method == "session/load" {
            assert_eq!(agent_text(&before), "saved answer");
        }
        let quiet = maia.next_within(Duration::from_millis(700)).await;
        assert!(
            quiet.is_none(),
            "{method}: a message followed the response: {quiet:?}"
        );
    }
}

/// Reopening a live thread mid-turn ends that turn and waits for its last
/// append; a prompt follows; after a restart every message is there once.
#[tokio::test]
async fn load_of_a_live_session_mid_turn_then_prompt_then_restart() {
    let (mut maia, sid) = Maia::ready().await;
    let cwd = maia.cwd();
    maia.mock
        .push(mock::slow_text(200, Duration::from_millis(20)));
    let first = maia.prompt(&sid, "first question").await;
    maia.wait_for(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .await;
    let id = maia
        .request(
            "session/load",
            json!({"sessionId": sid, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    // The running prompt is answered (cancelled) before the load's response.
    let (cancelled, _) = maia.response(first).await;
    assert_eq!(
        cancelled["result"]["stopReason"], "cancelled",
        "{cancelled}"
    );
    let (resp, _) = maia.response(id).await;
    assert!(resp["result"].is_object(), "{resp}");
    let (resp, _) = maia
        .answered_turn(&sid, "second question", "second answer")
        .await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");

    let mut maia = maia.restart().await;
    maia.initialize().await;
    let (_, before) = maia.load(&sid).await;
    let users = user_texts(&before);
    assert_eq!(
        users
            .iter()
            .filter(|t| t.contains("first question"))
            .count(),
        1,
        "{users:?}"
    );
    assert_eq!(
        users
            .iter()
            .filter(|t| t.contains("second question"))
            .count(),
        1,
        "{users:?}"
    );
    assert_eq!(
        agent_text(&before).matches("second answer").count(),
        1,
        "{}",
        agent_text(&before)
    );
    // The journal parses whole.
    for entry in std::fs::read_dir(cwd.join(".maia/.sessions")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) == Some("jsonl") {
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                serde_json::from_str::<Value>(line)
                    .unwrap_or_else(|e| panic!("{}: bad line {line:?}: {e}", path.display()));
            }
        }
    }
}

/// The journal files of `cwd`.
fn journals(cwd: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(cwd.join(".maia/.sessions"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("jsonl"))
        .collect()
}

/// A crash tore the journal's last record: the next turn is still saved,
/// and reloads with its question.
#[tokio::test]
async fn a_torn_journal_tail_does_not_swallow_the_next_turn() {
    let (mut maia, sid) = Maia::ready().await;
    let cwd = maia.cwd();
    maia.mock.push(mock::text_reply("answer one"));
    let id = maia.prompt(&sid, "question one").await;
    maia.response(id).await;
    let mut maia = maia.restart().await;
    let files = journals(&cwd);
    assert_eq!(files.len(), 1, "{files:?}");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&files[0])
        .unwrap();
    std::io::Write::write_all(&mut f, b"{\"type\":\"message\",\"message\":{\"role\":\"ass")
        .unwrap();
    drop(f);
    maia.initialize().await;
    maia.load(&sid).await;
    maia.mock.push(mock::text_reply("answer two"));
    let id = maia.prompt(&sid, "question two").await;
    maia.response(id).await;
    let mut maia = maia.restart().await;
    maia.initialize().await;
    let (_, before) = maia.load(&sid).await;
    let users = user_texts(&before);
    assert!(
        users.iter().any(|t| t.contains("question two")),
        "the question after the torn line is lost: {users:?}"
    );
    assert!(agent_text(&before).contains("answer two"));
    // And the model sees it too.
    maia.mock.push(mock::text_reply("three"));
    let id = maia.prompt(&sid, "question three").await;
    maia.response(id).await;
    let last = maia.mock.requests().last().cloned().unwrap();
    let texts: Vec<String> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect();
    assert!(
        texts.iter().any(|t| t.contains("question two")),
        "{texts:?}"
    );
}

/// Sixteen sessions streaming at once in one process: every answer arrives
/// whole, in its own session, each prompt answered after its updates.
#[tokio::test]
async fn sixteen_sessions_stream_at_once() {
    let mut maia = Maia::start().await;
    maia.initialize().await;
    let mut sids = Vec::new();
    for _ in 0..16 {
        sids.push(maia.new_session().await);
    }
    for _ in 0..16 {
        maia.mock.push(mock::text_chunks(
            &["a", "b", "c", "d", "e", "f", "g", "h"],
            Duration::from_millis(5),
        ));
    }
    let mut ids = Vec::new();
    for sid in &sids {
        ids.push(maia.prompt(sid, "go").await);
    }
    let mut answered = std::collections::HashSet::new();
    let mut text: std::collections::HashMap<String, String> = Default::default();
    while answered.len() < ids.len() {
        let m = maia.next().await;
        if let Some(id) = m["id"].as_u64()
            && m.get("method").is_none()
        {
            assert_eq!(m["result"]["stopReason"], "end_turn", "{m}");
            answered.insert(id);
            continue;
        }
        if m["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            let sid = session_of(&m).unwrap().to_owned();
            let index = sids.iter().position(|s| *s == sid).unwrap();
            assert!(
                !answered.contains(&ids[index]),
                "an update followed its prompt's response"
            );
            text.entry(sid)
                .or_default()
                .push_str(m["params"]["update"]["content"]["text"].as_str().unwrap());
        }
    }
    assert_eq!(text.len(), 16);
    assert!(text.values().all(|t| t == "abcdefgh"), "{text:?}");
}

/// A Bash call whose command leaves `sleep` children (one in the group, one
/// that called `setsid`), their pids written to files in `dir`.
fn sleepers_call(dir: &Path) -> Value {
    // The escapee writes its own pid once it has left the group.
    let command = format!(
        "sleep 300 & echo $! > {g}; setsid sh -c 'echo $$ > {s}; exec sleep 301' & wait",
        g = dir.join("group.pid").display(),
        s = dir.join("setsid.pid").display(),
    );
    json!({"command": command})
}

fn pid_file(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Starts a session with a stdio MCP server and a running Bash call that
/// left sleepers; returns the session, the prompt's id and every pid
/// MAIA started (directly or not).
async fn busy_agent(maia: &mut Maia) -> (String, u64, Vec<u32>) {
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;
    // In the project: the sandbox lets commands write there.
    let cwd = maia.cwd();
    let dir = cwd.clone();
    let mcp_pid = dir.join("mcp.pid");
    let server = json!({"name": "mock", "command": mock_mcp(), "args": [],
                        "env": [{"name": "MOCK_MCP_PID_FILE", "value": mcp_pid}]});
    let id = maia
        .request("session/new", json!({"cwd": cwd, "mcpServers": [server]}))
        .await;
    let (resp, _) = maia.response(id).await;
    let sid = resp["result"]["sessionId"].as_str().unwrap().to_owned();
    maia.mock.push(mock::tool_calls_reply(&[(
        "c1",
        "Bash",
        sleepers_call(&dir),
    )]));
    maia.mock.push(mock::text_reply("done"));
    let prompt = maia.prompt(&sid, "run it").await;
    // Allow the command, then wait until both sleepers run.
    let (req, _) = maia
        .wait_for(|m| m["method"] == "session/request_permission")
        .await;
    let answer = choose("allow_once")(&req).unwrap();
    maia.respond(&req["id"], answer).await;
    let files = [dir.join("group.pid"), dir.join("setsid.pid"), mcp_pid];
    assert!(
        eventually(Duration::from_secs(10), || files
            .iter()
            .all(|f| pid_file(f).is_some()))
        .await,
        "the command or the MCP server did not start: {:?} {:?}",
        files.iter().map(|f| (f, pid_file(f))).collect::<Vec<_>>(),
        updates_of(&maia.seen, "notice")
    );
    let pids: Vec<u32> = files.iter().filter_map(|f| pid_file(f)).collect();
    assert!(pids.iter().all(|p| alive(*p)), "{pids:?}");
    (sid, prompt, pids)
}

async fn signal_mid_turn(signal: nix::sys::signal::Signal) {
    let mut maia = Maia::start().await;
    let (_sid, prompt, pids) = busy_agent(&mut maia).await;
    let pid = nix::unistd::Pid::from_raw(maia.child.id().unwrap() as i32);
    let sent = std::time::Instant::now();
    nix::sys::signal::kill(pid, signal).unwrap();
    // The running prompt is answered `cancelled` while the output is open.
    let (resp, _) = maia.response(prompt).await;
    assert_eq!(
        resp["result"]["stopReason"], "cancelled",
        "{signal}: {resp}"
    );
    maia.wait_exit(Duration::from_secs(5)).await;
    assert!(
        sent.elapsed() < Duration::from_secs(2),
        "{signal}: shutdown took {:?}",
        sent.elapsed()
    );
    assert!(
        eventually(Duration::from_secs(2), || pids.iter().all(|p| !alive(*p))).await,
        "{signal}: processes left behind: {:?}",
        pids.iter().filter(|p| alive(**p)).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn sigterm_mid_turn_answers_and_leaves_no_process() {
    signal_mid_turn(nix::sys::signal::Signal::SIGTERM).await;
}

#[tokio::test]
async fn sighup_mid_turn_answers_and_leaves_no_process() {
    signal_mid_turn(nix::sys::signal::Signal::SIGHUP).await;
}

#[tokio::test]
async fn sigint_mid_turn_answers_and_leaves_no_process() {
    signal_mid_turn(nix::sys::signal::Signal::SIGINT).await;
}

/// `kill -9`: nothing MAIA started survives it for more than a moment.
#[tokio::test]
async fn sigkill_mid_turn_leaves_no_process() {
    let mut maia = Maia::start_with(Options::default()).await;
    let (_sid, _prompt, pids) = busy_agent(&mut maia).await;
    maia.child.start_kill().unwrap();
    maia.wait_exit(Duration::from_secs(5)).await;
    assert!(
        eventually(Duration::from_secs(3), || pids.iter().all(|p| !alive(*p))).await,
        "processes left behind after SIGKILL: {:?}",
        pids.iter().filter(|p| alive(**p)).collect::<Vec<_>>()
    );
}

/// A command whose child escaped with `setsid` and outlived the command
/// is killed when the call ends.
#[tokio::test]
async fn a_setsid_escapee_dies_with_its_call() {
    let (mut maia, sid) = Maia::ready().await;
    let file = maia.cwd().join("escaped.pid");
    // The call ends only once the child has left the group.
    let command = format!(
        "setsid sh -c 'echo $$ > {f}; exec sleep 302' > /dev/null 2>&1 & while [ ! -s {f} ]; do sleep 0.01; done",
        f = file.display()
    );
    let (resp, _) = maia
        .tool_turn(
            &sid,
            &[("c1", "Bash", json!({"command": command}))],
            choose("allow_once"),
        )
        .await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let pid = pid_file(&file).expect("the command ran");
    assert!(
        eventually(Duration::from_secs(3), || !alive(pid)).await,
        "the setsid child {pid} outlived its call"
    );
}

/// A line over the size cap whose prefix holds a non-scalar id is answered
/// with a null id (a response id is null, a number or a string).
#[tokio::test]
async fn an_oversized_line_with_a_structured_id_is_answered_with_null() {
    let mut maia = Maia::start().await;
    maia.initialize().await;
    let mut line = String::from("{\"jsonrpc\":\"2.0\",\"id\":[[1]],\"method\":\"x\",\"params\":\"");
    line.push_str(&"a".repeat(16 * 1024 * 1024 + 10));
    line.push_str("\"}\n");
    maia.send_raw(&line).await;
    let m = maia.next().await;
    assert_eq!(m["error"]["code"], -32600, "{m}");
    assert_eq!(m["id"], Value::Null, "{m}");
}

/// `session/list` without a `cwd` lists this user's threads of every
/// project, also in a process that never opened those folders.
#[tokio::test]
async fn list_without_cwd_finds_threads_of_every_project() {
    let (mut maia, sid) = Maia::ready().await;
    // A second project folder.
    let other = tempfile::tempdir().unwrap();
    let other_cwd = other.path().canonicalize().unwrap();
    let id = maia
        .request("session/new", json!({"cwd": other_cwd, "mcpServers": []}))
        .await;
    let (resp, _) = maia.response(id).await;
    let other_sid = resp["result"]["sessionId"].as_str().unwrap().to_owned();
    let mut maia = maia.restart().await;
    maia.initialize().await;
    let id = maia.request("session/list", json!({})).await;
    let (resp, _) = maia.response(id).await;
    let listed: Vec<(String, String)> = resp["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["sessionId"].as_str().unwrap().to_owned(),
                s["cwd"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        listed.contains(&(sid.clone(), maia.cwd().display().to_string())),
        "{listed:?}"
    );
    assert!(
        listed.contains(&(other_sid.clone(), other_cwd.display().to_string())),
        "{listed:?}"
    );
    // Deleting without a cwd finds it too.
    let id = maia
        .request("session/delete", json!({"sessionId": other_sid}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"], json!({}), "{resp}");
    let id = maia.request("session/list", json!({})).await;
    let (resp, _) = maia.response(id).await;
    assert!(!resp.to_string().contains(&other_sid), "{resp}");
}

/// Two MAIA processes (two editor windows) never write one journal: the
/// second opener of a live thread gets a clear error, the first goes on.
#[tokio::test]
async fn a_thread_open_in_another_process_is_refused_clearly() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::text_reply("one"));
    let id = maia.prompt(&sid, "first").await;
    maia.response(id).await;
    let cwd = maia.cwd();
    let mut other = tokio::process::Command::new(env!("CARGO_BIN_EXE_maia"))
        .arg("acp")
        .env("HOME", maia.home.path())
        .env("MAIA_LOG", "warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = other.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(other.stdout.take().unwrap()).lines();
    let requests = [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}),
        json!({"jsonrpc":"2.0","id":2,"method":"session/load",
               "params":{"sessionId": sid, "cwd": cwd, "mcpServers": []}}),
    ];
    for r in &requests {
        stdin.write_all(format!("{r}\n").as_bytes()).await.unwrap();
    }
    let answer = loop {
        let line = tokio::time::timeout(crate::harness::WAIT, lines.next_line())
            .await
            .expect("the second process answered")
            .unwrap()
            .expect("stdout open");
        let m: Value = serde_json::from_str(&line).unwrap();
        if m["id"] == 2 {
            break m;
        }
    };
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("open in another MAIA"),
        "{answer}"
    );
    // The first process goes on writing its thread.
    let (resp, _) = maia.answered_turn(&sid, "second", "two").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    drop(stdin);
    let _ = other.wait().await;
}
