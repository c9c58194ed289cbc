//! MAIA as a language client (issue 24), through the binary: an Edit that
//! breaks a type gets the error appended to its result in the same turn
//! (and shown in the editor); the model's next request holds it; a fixing
//! edit reports it gone; a harmless edit appends nothing; a Bash command
//! that breaks an open file is told too; `Diagnostics` and
//! `References` on a small project; two sessions on one root share one
//! pyright until the last of them closes; a server that crashes mid-turn
//! and one that never answers leave the turn intact and say so.
//!
//! The real server is pyright (`MAIA_PYRIGHT`: the path of
//! `pyright-langserver`, installed by `.ci/run` from npm); its tests skip,
//! saying so loudly, when the variable is unset, or fail with
//! `MAIA_REQUIRE_ALL=1` (`mock::require`). The misbehaving servers are
//! `fixtures/fake_lsp.py`.

use std::time::{Duration, Instant};

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, Options, eventually, updates_of};

const GOOD: &str = "def double(x: int) -> int:\n    return x * 2\n\n\ntotal: int = double(2)\n";

fn pyright() -> Option<String> {
    let path = mock::env_path("MAIA_PYRIGHT");
    mock::require(
        "pyright: MAIA_PYRIGHT, the path of pyright-langserver (.ci/run installs it from npm)",
        path.is_some(),
    );
    path.map(|p| p.display().to_string())
}

fn fake(mode: &str) -> Value {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../protocol-tests/fixtures/fake_lsp.py"
    );
    json!({"command": "python3", "args": [script, mode], "fileTypes": ["py"], "rootMarkers": []})
}

/// A session whose settings hold `lsp` and allow reading and editing.
async fn open(lsp: Value, wait_ms: u64, files: &[(&str, &str)]) -> (Maia, String) {
    let mut maia = Maia::start_with(Options {
        settings: json!({
            "lsp": lsp,
            "lspWaitMs": wait_ms,
            "permissions": {"allow": ["Read", "Edit", "Write", "Bash"]},
        }),
        ..Options::default()
    })
    .await;
    for (name, text) in files {
        std::fs::write(maia.path(name), text).unwrap();
    }
    maia.initialize().await;
    let sid = maia.new_session().await;
    (maia, sid)
}

/// The `tool` message of `call_id` in the model's last request.
fn result_for(maia: &Maia, call_id: &str) -> String {
    let requests = maia.mock.requests();
    requests.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .and_then(|m| m["content"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no tool message for {call_id}"))
}

/// One turn: the model calls `calls` one response after the other, then
/// answers "done"; returns the messages before the prompt's response.
async fn turn(maia: &mut Maia, sid: &str, calls: &[(&str, &str, Value)]) -> Vec<Value> {
    for call in calls {
        maia.mock
            .push(mock::tool_calls_reply(std::slice::from_ref(call)));
    }
    maia.mock.push(mock::text_reply("done"));
    let id = maia.prompt(sid, "go").await;
    let (resp, before) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    before
}

fn edit(old: &str, new: &str) -> Value {
    json!({"file_path": "a.py", "old_string": old, "new_string": new})
}

/// The text contents the editor was last shown for tool calls.
fn shown_texts(messages: &[Value]) -> Vec<String> {
    updates_of(messages, "tool_call_update")
        .iter()
        .filter_map(|u| u["content"].as_array().cloned())
        .flatten()
        .filter(|c| c["type"] == "content")
        .filter_map(|c| c["content"]["text"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pyright_reports_what_an_edit_breaks_and_fixes_and_nothing_else() {
    let Some(pyright) = pyright() else { return };
    let lsp = json!({"pyright": {"command": pyright, "args": ["--stdio"],
                                 "fileTypes": ["py"], "rootMarkers": ["pyproject.toml"]}});
    let (mut maia, sid) = open(lsp, 10_000, &[("pyproject.toml", ""), ("a.py", GOOD)]).await;

    // Read (opens the file in pyright), then an Edit that breaks a type.
    let before = turn(
        &mut maia,
        &sid,
        &[
            ("call_r", "Read", json!({"file_path": "a.py"})),
            ("call_e", "Edit", edit("double(2)", "double(\"two\")")),
        ],
    )
    .await;
    let result = result_for(&maia, "call_e");
    assert!(
        result.contains("Diagnostics after this edit (pyright)"),
        "{result}"
    );
    assert!(result.contains("New in a.py:"), "{result}");
    assert!(result.contains("line 5, col "), "{result}");
    assert!(result.contains("error: "), "{result}");
    assert!(
        result.contains("Literal['two']"),
        "the type error: {result}"
    );
    // The editor is shown it with the diff.
    assert!(
        shown_texts(&before)
            .iter()
            .any(|t| t.starts_with("Diagnostics after this edit")),
        "{before:?}"
    );
    // The model's next request (the "done" one) held it: it is the last.
    let requests = maia.mock.requests();
    assert_eq!(requests.len(), 3);

    // A fixing edit reports the error gone.
    turn(
        &mut maia,
        &sid,
        &[("call_f", "Edit", edit("double(\"two\")", "double(2)"))],
    )
    .await;
    let result = result_for(&maia, "call_f");
    assert!(
        result.contains("Gone after this edit (1 problem)"),
        "{result}"
    );
    assert!(!result.contains("New in"), "{result}");

    // An edit that breaks nothing appends nothing.
    turn(
        &mut maia,
        &sid,
        &[("call_h", "Edit", edit("total", "grand_total"))],
    )
    .await;
    let result = result_for(&maia, "call_h");
    assert!(!result.contains("Diagnostics"), "{result}");

    // Diagnostics and References on the project.
    std::fs::write(
        maia.path("b.py"),
        "from a import double\n\nn: str = double(3)\n",
    )
    .unwrap();
    turn(
        &mut maia,
        &sid,
        &[
            ("call_d", "Diagnostics", json!({"path": "b.py"})),
            (
                "call_x",
                "References",
                json!({"path": "a.py", "line": 1, "column": 5}),
            ),
        ],
    )
    .await;
    let diags = result_for(&maia, "call_d");
    assert!(
        diags.starts_with("b.py:\n  line 3, col 10: error: "),
        "{diags}"
    );
    let refs = result_for(&maia, "call_x");
    assert!(
        refs.contains("a.py:1:5: def double(x: int) -> int:"),
        "{refs}"
    );
    assert!(refs.contains("a.py:5:"), "{refs}");

    // A command that breaks an open file is told too.
    let command =
        json!({"command": "python3 -c \"open('a.py', 'a').write('bad: int = None\\n')\""});
    turn(&mut maia, &sid, &[("call_b", "Bash", command)]).await;
    let result = result_for(&maia, "call_b");
    assert!(
        result.contains("Diagnostics after this command (pyright):\nNew in a.py:"),
        "{result}"
    );
    assert!(result.contains("line 6, col 12: error: "), "{result}");
}

/// The processes (Linux) whose environment holds `var` (`NAME=value`):
/// pyright changes its working folder, so its environment marks it.
fn processes_with(var: &str) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter(|e| {
            std::fs::read(e.path().join("environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == var.as_bytes()))
        })
        .count()
}

/// The servers among [`processes_with`]: the marked processes whose parent
/// is not marked (a server is its guard and the processes it starts, which
/// appear one after the other; counting them all raced its start).
fn servers_with(var: &str) -> usize {
    let marked = |pid: &str| {
        std::fs::read(format!("/proc/{pid}/environ"))
            .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == var.as_bytes()))
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().into_owned();
            pid.parse::<u32>().is_ok().then_some(pid)
        })
        .filter(|pid| marked(pid))
        .filter(|pid| {
            // `/proc/PID/stat`: "pid (comm) state ppid …"; comm may hold spaces.
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .unwrap_or("0");
            !marked(ppid)
        })
        .count()
}

async fn close(maia: &mut Maia, sid: &str) {
    let id = maia
        .request("session/close", json!({"sessionId": sid}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"], json!({}), "{resp}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_on_one_root_share_one_pyright_until_both_close() {
    let Some(pyright) = pyright() else { return };
    let mark = format!("shared-{}", std::process::id());
    let var = format!("MAIA_TEST_MARK={mark}");
    let lsp = json!({"pyright": {"command": pyright, "args": ["--stdio"],
                                 "env": {"MAIA_TEST_MARK": mark},
                                 "fileTypes": ["py"], "rootMarkers": ["pyproject.toml"]}});
    let (mut maia, first) = open(lsp, 10_000, &[("pyproject.toml", ""), ("a.py", GOOD)]).await;
    let second = maia.new_session().await;

    // The first session reads the file: pyright starts for it.
    turn(
        &mut maia,
        &first,
        &[("call_r", "Read", json!({"file_path": "a.py"}))],
    )
    .await;
    assert!(
        eventually(Duration::from_secs(30), || servers_with(&var) > 0).await,
        "pyright never started"
    );
    let servers = servers_with(&var);

    // The second session's edit is checked by the same server.
    turn(
        &mut maia,
        &second,
        &[
            ("call_s", "Read", json!({"file_path": "a.py"})),
            ("call_e", "Edit", edit("double(2)", "double(\"two\")")),
        ],
    )
    .await;
    let result = result_for(&maia, "call_e");
    assert!(result.contains("New in a.py:"), "{result}");
    assert_eq!(servers_with(&var), servers, "one server for both");

    // The first session sees the error the other one's edit made.
    turn(
        &mut maia,
        &first,
        &[("call_d", "Diagnostics", json!({"path": "a.py"}))],
    )
    .await;
    let diags = result_for(&maia, "call_d");
    assert!(diags.starts_with("a.py:\n  line 5, col "), "{diags}");

    // The first session closes: the server stays for the second.
    close(&mut maia, &first).await;
    turn(
        &mut maia,
        &second,
        &[("call_f", "Edit", edit("double(\"two\")", "double(2)"))],
    )
    .await;
    let result = result_for(&maia, "call_f");
    assert!(
        result.contains("Gone after this edit (1 problem)"),
        "{result}"
    );
    assert_eq!(servers_with(&var), servers);

    // The last one closes: the server stops.
    close(&mut maia, &second).await;
    assert!(
        eventually(Duration::from_secs(10), || processes_with(&var) == 0).await,
        "pyright outlived the last session using it"
    );
}

#[tokio::test]
async fn a_server_that_crashes_mid_turn_leaves_the_turn_intact_and_says_so() {
    let (mut maia, sid) = open(json!({"fake": fake("crash")}), 3_000, &[("a.py", GOOD)]).await;
    let before = turn(
        &mut maia,
        &sid,
        &[
            ("call_r", "Read", json!({"file_path": "a.py"})),
            ("call_e", "Edit", edit("double(2)", "double(3)")),
        ],
    )
    .await;
    let result = result_for(&maia, "call_e");
    assert!(result.starts_with("Edited"), "the edit is made: {result}");
    assert!(
        result.contains("Diagnostics unavailable: `fake` stopped"),
        "{result}"
    );
    assert!(result.contains("not checked"), "{result}");
    assert!(
        std::fs::read_to_string(maia.path("a.py"))
            .unwrap()
            .contains("double(3)")
    );
    assert!(
        shown_texts(&before)
            .iter()
            .any(|t| t.starts_with("Diagnostics unavailable")),
        "{before:?}"
    );
}

#[tokio::test]
async fn a_server_that_never_answers_leaves_the_turn_intact_and_says_so() {
    let (mut maia, sid) = open(json!({"fake": fake("mute")}), 1_000, &[("a.py", GOOD)]).await;
    let started = Instant::now();
    turn(
        &mut maia,
        &sid,
        &[
            ("call_r", "Read", json!({"file_path": "a.py"})),
            ("call_e", "Edit", edit("double(2)", "double(3)")),
        ],
    )
    .await;
    let result = result_for(&maia, "call_e");
    assert!(result.starts_with("Edited"), "{result}");
    assert!(
        result.contains("Diagnostics unavailable: `fake` is still starting"),
        "{result}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    // Its tools say the server is unavailable, not "no errors": still
    // starting, or (when the turn comes after its start timeout, as on a
    // loaded machine) stopped while starting.
    turn(
        &mut maia,
        &sid,
        &[("call_d", "Diagnostics", json!({"path": "a.py"}))],
    )
    .await;
    let result = result_for(&maia, "call_d");
    assert!(
        result.starts_with("Language server unavailable: `fake` is still starting")
            || result.starts_with(
                "Language server unavailable: `fake` stopped (it stopped while starting"
            ),
        "{result}"
    );
}
