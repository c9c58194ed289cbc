//! Tool calls over ACP: announcement (`tool_call`), diffs, permission
//! requests and their four options, status updates, remembered "always"
//! answers, results sent back to the model, `fs/*` delegation to the
//! editor, parallel calls, bad arguments and path resolution.

use std::time::Duration;

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, Options, choose, permission_requests, read, updates};

/// The `tool_call` and `tool_call_update` payloads among `messages`.
fn tool_updates(messages: &[Value]) -> Vec<Value> {
    updates(messages)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call" || u["sessionUpdate"] == "tool_call_update")
        .collect()
}

/// The `tool_call` announcements, in order.
fn announced(messages: &[Value]) -> Vec<Value> {
    tool_updates(messages)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .collect()
}

/// The single `tool_call` announcement among `messages`.
fn only_call(messages: &[Value]) -> Value {
    let calls = announced(messages);
    assert_eq!(calls.len(), 1, "one tool call: {calls:?}");
    calls[0].clone()
}

/// The statuses sent by `tool_call_update`s for `tool_call_id`, in order.
fn statuses(messages: &[Value], tool_call_id: &Value) -> Vec<String> {
    tool_updates(messages)
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && &u["toolCallId"] == tool_call_id)
        .filter_map(|u| u["status"].as_str().map(str::to_owned))
        .collect()
}

/// The last status of `tool_call_id`.
fn final_status(messages: &[Value], tool_call_id: &Value) -> String {
    statuses(messages, tool_call_id)
        .pop()
        .unwrap_or_else(|| panic!("no status for {tool_call_id}"))
}

/// The requests among `messages` of `method`.
fn requests_of(messages: &[Value], method: &str) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["method"] == method && m.get("id").is_some())
        .cloned()
        .collect()
}

/// The `diff` contents sent for `tool_call_id` by its updates.
fn diffs(messages: &[Value], tool_call_id: &Value) -> Vec<Value> {
    tool_updates(messages)
        .iter()
        .filter(|u| &u["toolCallId"] == tool_call_id)
        .filter_map(|u| u["content"].as_array())
        .flatten()
        .filter(|c| c["type"] == "diff")
        .cloned()
        .collect()
}

/// The `tool` messages of model request `index`, as (tool_call_id, content).
fn tool_results(maia: &Maia, index: usize) -> Vec<(String, String)> {
    let requests = maia.mock.requests();
    let request = requests
        .get(index)
        .unwrap_or_else(|| panic!("no model request #{index}: {requests:?}"));
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The content of the tool message for model call `call_id` in the last
/// model request.
fn result_for(maia: &Maia, call_id: &str) -> String {
    let last = maia.mock.requests().len() - 1;
    tool_results(maia, last)
        .into_iter()
        .find(|(id, _)| id == call_id)
        .map(|(_, content)| content)
        .unwrap_or_else(|| panic!("no tool message for {call_id}"))
}

/// Position of the first message matching `pred`.
fn position(messages: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    messages
        .iter()
        .position(pred)
        .expect("an expected message is missing")
}

fn is_status(m: &Value, tool_call_id: &Value, status: &str) -> bool {
    let u = &m["params"]["update"];
    m["method"] == "session/update"
        && u["sessionUpdate"] == "tool_call_update"
        && &u["toolCallId"] == tool_call_id
        && u["status"] == status
}

/// The turn ended normally, and everything seen so far is well formed.
fn assert_end_turn(maia: &Maia, resp: &Value) {
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_well_formed(&maia.seen);
}

/// Checks the tool call updates of a turn: ids and titles present, only the
/// four v1 statuses, every update for a call announced before, absolute
/// paths in locations and diffs.
fn assert_well_formed(messages: &[Value]) {
    let mut known = Vec::new();
    for u in tool_updates(messages) {
        let id = u["toolCallId"].clone();
        assert!(id.as_str().is_some_and(|s| !s.is_empty()), "{u}");
        if u["sessionUpdate"] == "tool_call" {
            assert!(u["title"].as_str().is_some_and(|s| !s.is_empty()), "{u}");
            known.push(id.clone());
        } else {
            assert!(known.contains(&id), "update before its tool_call: {u}");
        }
        if let Some(status) = u["status"].as_str() {
            assert!(
                ["pending", "in_progress", "completed", "failed"].contains(&status),
                "{u}"
            );
        }
        let paths = u["locations"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(u["content"].as_array().into_iter().flatten())
            .filter_map(|v| v["path"].as_str());
        for path in paths {
            assert!(std::path::Path::new(path).is_absolute(), "{u}");
        }
    }
}

/// A session on a client that advertised both `fs` capabilities.
async fn fs_client() -> (Maia, String) {
    let mut maia = Maia::start_with(Options::default()).await;
    maia.initialize_with(json!({"fs": {"readTextFile": true, "writeTextFile": true}}))
        .await;
    let sid = maia.new_session().await;
    (maia, sid)
}

#[tokio::test]
async fn write_allowed_once_announces_diffs_asks_and_writes() {
    let (mut maia, sid) = Maia::ready().await;
    let args = json!({"file_path": "src/new.txt", "content": "hello\nworld\n"});
    let (resp, before) = maia
        .tool_turn(
            &sid,
            &[("call_w", "Write", args.clone())],
            choose("allow_once"),
        )
        .await;
    assert_end_turn(&maia, &resp);
    let path = maia.path("src/new.txt");
    let call = only_call(&before);
    let tcid = call["toolCallId"].clone();
    assert!(tcid.as_str().is_some_and(|s| !s.is_empty()), "{call}");
    assert_eq!(call["title"], "Write src/new.txt", "{call}");
    assert_eq!(call["kind"], "edit");
    // `pending` is the default and may be left out.
    assert!(
        call["status"].is_null() || call["status"] == "pending",
        "{call}"
    );
    assert_eq!(call["rawInput"], args);
    assert_eq!(call["locations"], json!([{"path": path}]));

    // The diff is shown in the call and in the permission request.
    let diff = json!({"type": "diff", "path": path, "newText": "hello\nworld\n"});
    let shown = diffs(&before, &tcid);
    assert!(!shown.is_empty(), "no diff update");
    for d in &shown {
        assert!(d["oldText"].is_null(), "new file: {d}");
        assert_eq!(d["path"], diff["path"]);
        assert_eq!(d["newText"], diff["newText"]);
    }
    let asks = permission_requests(&before);
    assert_eq!(asks.len(), 1);
    let params = &asks[0]["params"];
    assert_eq!(params["sessionId"], sid);
    assert_eq!(params["toolCall"]["toolCallId"], tcid);
    let content = params["toolCall"]["content"].as_array().unwrap();
    assert_eq!(content.len(), 1, "{params}");
    assert_eq!(content[0]["type"], "diff");
    assert_eq!(content[0]["path"], diff["path"]);
    assert!(content[0]["oldText"].is_null());
    assert_eq!(content[0]["newText"], diff["newText"]);
    let options: Vec<(String, String)> = params["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            assert!(o["optionId"].as_str().is_some_and(|s| !s.is_empty()));
            (
                o["kind"].as_str().unwrap().to_owned(),
                o["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let kinds: Vec<&str> = options.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        ["allow_once", "allow_always", "reject_once", "reject_always"]
    );
    assert_eq!(options[1].1, "Always allow Write(src/**)");
    assert_eq!(options[3].1, "Always reject Write(src/**)");

    // Pending → asked → in_progress → completed.
    assert_eq!(statuses(&before, &tcid), ["in_progress", "completed"]);
    let asked = position(&before, |m| m["method"] == "session/request_permission");
    let running = position(&before, |m| is_status(m, &tcid, "in_progress"));
    let announced_at = position(&before, |m| {
        m["params"]["update"]["sessionUpdate"] == "tool_call"
    });
    assert!(announced_at < asked && asked < running);

    assert_eq!(read(&path), "hello\nworld\n");
    let result = result_for(&maia, "call_w");
    assert!(result.starts_with("Created"), "{result}");
    // The follow-up request carries the assistant's call, then its result.
    let messages = maia.mock.requests()[1]["messages"]
        .as_array()
        .unwrap()
        .clone();
    let n = messages.len();
    assert_eq!(messages[n - 2]["role"], "assistant");
    assert_eq!(messages[n - 2]["tool_calls"][0]["id"], "call_w");
    assert_eq!(messages[n - 1]["role"], "tool");
    assert_eq!(messages[n - 1]["tool_call_id"], "call_w");
}

#[tokio::test]
async fn write_rejected_once_is_not_written_and_the_model_is_told() {
    let (mut maia, sid) = Maia::ready().await;
    let args = json!({"file_path": "no.txt", "content": "x"});
    let (resp, before) = maia
        .tool_turn(&sid, &[("call_w", "Write", args)], choose("reject_once"))
        .await;
    assert_end_turn(&maia, &resp);
    let tcid = only_call(&before)["toolCallId"].clone();
    assert!(!maia.path("no.txt").exists());
    assert_eq!(statuses(&before, &tcid), ["failed"]);
    let result = result_for(&maia, "call_w");
    assert!(result.contains("user refused"), "{result}");
    assert_eq!(maia.mock.requests().len(), 2);
}

#[tokio::test]
async fn edit_after_read_shows_the_diff_and_changes_the_file() {
    let (mut maia, sid) = Maia::ready().await;
    let path = maia.path("f.txt");
    std::fs::write(&path, "alpha\nbeta\ngamma\n").unwrap();
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_r",
        "Read",
        json!({"file_path": "f.txt"}),
    )]));
    let edit = json!({"file_path": "f.txt", "old_string": "beta", "new_string": "BETA"});
    maia.mock
        .push(mock::tool_calls_reply(&[("call_e", "Edit", edit.clone())]));
    maia.mock.push(mock::text_reply("edited"));
    let id = maia.prompt(&sid, "edit it").await;
    let (resp, before) = maia.response_with(id, choose("allow_once")).await;
    assert_end_turn(&maia, &resp);
    let calls = announced(&before);
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["kind"], "read");
    assert_eq!(calls[1]["kind"], "edit");
    assert_eq!(calls[1]["rawInput"], edit);
    let tcid = calls[1]["toolCallId"].clone();
    let shown = diffs(&before, &tcid);
    assert!(!shown.is_empty());
    for d in &shown {
        assert_eq!(d["path"], json!(path));
        assert_eq!(d["oldText"], "alpha\nbeta\ngamma\n");
        assert_eq!(d["newText"], "alpha\nBETA\ngamma\n");
    }
    let asks = permission_requests(&before);
    assert_eq!(asks.len(), 2, "Read and Edit each asked");
    assert_eq!(asks[1]["params"]["toolCall"]["content"][0]["type"], "diff");
    assert_eq!(final_status(&before, &tcid), "completed");
    assert_eq!(read(&path), "alpha\nBETA\ngamma\n");
    assert!(tool_results(&maia, 1)[0].1.contains("beta"));
    assert!(result_for(&maia, "call_e").starts_with("Edited"));
}

#[tokio::test]
async fn edit_without_read_fails_without_asking() {
    let (mut maia, sid) = Maia::ready().await;
    let path = maia.path("g.txt");
    std::fs::write(&path, "one\n").unwrap();
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_e",
        "Edit",
        json!({"file_path": "g.txt", "old_string": "one", "new_string": "two"}),
    )]));
    maia.mock.push(mock::text_reply("ok"));
    let id = maia.prompt(&sid, "edit").await;
    // `response` fails the test on any agent request, so on a permission request.
    let (resp, before) = maia.response(id).await;
    assert_end_turn(&maia, &resp);
    let tcid = only_call(&before)["toolCallId"].clone();
    assert_eq!(final_status(&before, &tcid), "failed");
    let result = result_for(&maia, "call_e");
    assert!(result.contains("must Read"), "{result}");
    assert_eq!(read(&path), "one\n");
}

#[tokio::test]
async fn edit_keeps_crlf_line_endings() {
    let (mut maia, sid) = Maia::ready().await;
    let path = maia.path("c.txt");
    std::fs::write(&path, "one\r\ntwo\r\nthree\r\n").unwrap();
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_r",
        "Read",
        json!({"file_path": "c.txt"}),
    )]));
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_e",
        "Edit",
        json!({"file_path": "c.txt", "old_string": "one\ntwo", "new_string": "uno\ndos"}),
    )]));
    maia.mock.push(mock::text_reply("ok"));
    let id = maia.prompt(&sid, "edit").await;
    let (resp, _) = maia.response_with(id, choose("allow_once")).await;
    assert_end_turn(&maia, &resp);
    assert!(result_for(&maia, "call_e").starts_with("Edited"));
    assert_eq!(read(&path), "uno\r\ndos\r\nthree\r\n");
}

#[tokio::test]
async fn bash_allowed_runs_and_reports_output_and_exit_code() {
    let (mut maia, sid) = Maia::ready().await;
    let args = json!({"command": "echo hello-from-bash"});
    let (resp, before) = maia
        .tool_turn(
            &sid,
            &[("call_b", "Bash", args.clone())],
            choose("allow_once"),
        )
        .await;
    assert_end_turn(&maia, &resp);
    let call = only_call(&before);
    assert_eq!(call["kind"], "execute");
    assert_eq!(call["rawInput"], args);
    assert_eq!(call["title"], "Run `echo hello-from-bash`");
    let tcid = call["toolCallId"].clone();
    assert_eq!(statuses(&before, &tcid), ["in_progress", "completed"]);
    let ask = &permission_requests(&before)[0]["params"];
    assert_eq!(ask["toolCall"]["kind"], "execute");
    let result = result_for(&maia, "call_b");
    assert_eq!(result, "hello-from-bash\nExit code: 0");
}

#[tokio::test]
async fn bash_rejected_does_not_run() {
    let (mut maia, sid) = Maia::ready().await;
    let (resp, before) = maia
        .tool_turn(
            &sid,
            &[("call_b", "Bash", json!({"command": "touch marker.txt"}))],
            choose("reject_once"),
        )
        .await;
    assert_end_turn(&maia, &resp);
    let tcid = only_call(&before)["toolCallId"].clone();
    assert_eq!(statuses(&before, &tcid), ["failed"]);
    assert!(!maia.path("marker.txt").exists());
    let result = result_for(&maia, "call_b");
    assert!(result.contains("user refused"), "{result}");
}

#[tokio::test]
async fn allow_always_is_remembered_for_the_session() {
    let (mut maia, sid) = Maia::ready().await;
    let (resp, before) = maia
        .tool_turn(
            &sid,
            // A dash option is not taken as a subcommand: the rule is `echo *`.
            &[("call_1", "Bash", json!({"command": "echo -n one"}))],
            choose("allow_always"),
        )
        .await;
    assert_end_turn(&maia, &resp);
    let asks = permission_requests(&before);
    let always = asks[0]["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "allow_always")
        .unwrap()
        .clone();
    assert_eq!(always["name"], "Always allow Bash(echo *)");
    assert!(result_for(&maia, "call_1").starts_with("one\n"));

    // Next turn: covered by the rule, so no question.
    let (resp, before) = maia
        .tool_turn(
            &sid,
            &[("call_2", "Bash", json!({"command": "echo two"}))],
            |m| panic!("asked again: {m}"),
        )
        .await;
    assert_end_turn(&maia, &resp);
    assert!(permission_requests(&before).is_empty());
    let tcid = only_call(&before)["toolCallId"].clone();
    assert_eq!(final_status(&before, &tcid), "completed");
    assert_eq!(result_for(&maia, "call_2"), "two\nExit code: 0");

    // The rule does not cover another command.
    let (resp, before) = maia
        .tool_turn(
            &sid,
            &[("call_3", "Bash", json!({"command": "pwd"}))],
            choose("reject_once"),
        )
        .await;
    assert_end_turn(&maia, &resp);
    assert_eq!(permission_requests(&before).len(), 1);
}

#[tokio::test]
async fn reject_always_is_remembered_for_the_session() {
    let (mut maia, sid) = Maia::ready().await;
    let (resp, before) = maia
        .tool_turn(
            &sid,
            &[("call_1", "Bash", json!({"command": "touch a.txt"}))],
            choose("reject_always"),
        )
        .await;
    assert_end_turn(&maia, &resp);
    let option = permission_requests(&before)[0]["params"]["options"][3].clone();
    assert_eq!(option["kind"], "reject_always");
    assert_eq!(option["name"], "Always reject Bash(touch *)");
    assert!(!maia.path("a.txt").exists());

    let (resp, before) = maia
        .tool_turn(
            &sid,
            &[("call_2", "Bash", json!({"command": "touch b.txt"}))],
            |m| panic!("asked again: {m}"),
        )
        .await;
    assert_end_turn(&maia, &resp);
    assert!(permission_requests(&before).is_empty());
    let tcid = only_call(&before)["toolCallId"].clone();
    assert_eq!(statuses(&before, &tcid), ["failed"]);
    assert!(!maia.path("b.txt").exists());
    let result = result_for(&maia, "call_2");
    assert!(result.contains("Bash(touch *)"), "{result}");
}

#[tokio::test]
async fn write_goes_through_the_editor_when_advertised() {
    let (mut maia, sid) = fs_client().await;
    let path = maia.path("out/w.txt");
    let (resp, before) = maia
        .tool_turn(
            &sid,
            &[(
                "call_w",
                "Write",
                json!({"file_path": "out/w.txt", "content": "via editor"}),
            )],
            |m| match m["method"].as_str() {
                Some("fs/write_text_file") => Some(Value::Null),
                _ => choose("allow_once")(m),
            },
        )
        .await;
    assert_end_turn(&maia, &resp);
    let writes = requests_of(&before, "fs/write_text_file");
    assert_eq!(writes.len(), 1, "{before:?}");
    let params = &writes[0]["params"];
    assert_eq!(params["sessionId"], sid);
    assert_eq!(params["path"], json!(path));
    assert_eq!(params["content"], "via editor");
    assert!(!path.exists(), "maia wrote the file itself");
    let tcid = only_call(&before)["toolCallId"].clone();
    assert_eq!(final_status(&before, &tcid), "completed");
    assert!(result_for(&maia, "call_w").starts_with("Created"));
}

#[tokio::test]
async fn read_goes_through_the_editor_when_advertised() {
    let (mut maia, sid) = fs_client().await;
    let path = maia.path("r.txt");
    std::fs::write(&path, "from disk\n").unwrap();
    let (resp, before) = maia
        .tool_turn(
            &sid,
            &[("call_r", "Read", json!({"file_path": "r.txt"}))],
            |m| match m["method"].as_str() {
                Some("fs/read_text_file") => Some(json!({"content": "from editor buffer"})),
                _ => choose("allow_once")(m),
            },
        )
        .await;
    assert_end_turn(&maia, &resp);
    let reads = requests_of(&before, "fs/read_text_file");
    assert_eq!(reads.len(), 1, "{before:?}");
    assert_eq!(reads[0]["params"]["sessionId"], sid);
    assert_eq!(reads[0]["params"]["path"], json!(path));
    for key in ["line", "limit"] {
        let v = &reads[0]["params"][key];
        assert!(v.is_null() || v.as_u64().is_some_and(|n| n >= 1), "{key}");
    }
    let result = result_for(&maia, "call_r");
    assert!(result.contains("from editor buffer"), "{result}");
    assert!(!result.contains("from disk"), "{result}");
}

#[tokio::test]
async fn read_of_a_fifo_through_the_editor_fails_instead_of_hanging() {
    let (mut maia, sid) = fs_client().await;
    let fifo = maia.path("pipe.txt");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let (resp, before) = maia
        .tool_turn(
            &sid,
            &[("call_r", "Read", json!({"file_path": "pipe.txt"}))],
            choose("allow_once"),
        )
        .await;
    assert_end_turn(&maia, &resp);
    assert!(requests_of(&before, "fs/read_text_file").is_empty());
    let result = result_for(&maia, "call_r");
    assert!(result.contains("not a regular file"), "{result}");
}

#[tokio::test]
async fn an_editor_error_on_read_fails_the_call_and_the_turn_goes_on() {
    let (mut maia, sid) = fs_client().await;
    std::fs::write(maia.path("r.txt"), "from disk\n").unwrap();
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_r",
        "Read",
        json!({"file_path": "r.txt"}),
    )]));
    maia.mock.push(mock::text_reply("done"));
    let id = maia.prompt(&sid, "go").await;
    let (ask, _) = maia
        .wait_for(|m| m["method"] == "session/request_permission")
        .await;
    let answer = choose("allow_once")(&ask).unwrap();
    maia.respond(&ask["id"], answer).await;
    let (fs_read, _) = maia.wait_for(|m| m["method"] == "fs/read_text_file").await;
    maia.send(&json!({"jsonrpc": "2.0", "id": fs_read["id"],
        "error": {"code": -32002, "message": "Resource not found"}}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert_end_turn(&maia, &resp);
    let tcid = only_call(&maia.seen)["toolCallId"].clone();
    assert_eq!(final_status(&maia.seen, &tcid), "failed");
    let result = result_for(&maia, "call_r");
    assert!(result.contains("editor could not read"), "{result}");
}

#[tokio::test]
async fn without_fs_capabilities_the_disk_is_used_and_no_fs_request_is_sent() {
    let (mut maia, sid) = Maia::ready().await;
    std::fs::write(maia.path("r.txt"), "on disk\n").unwrap();
    let (resp, _) = maia
        .tool_turn(
            &sid,
            &[
                ("call_r", "Read", json!({"file_path": "r.txt"})),
                (
                    "call_w",
                    "Write",
                    json!({"file_path": "w/x.txt", "content": "written"}),
                ),
            ],
            choose("allow_once"),
        )
        .await;
    assert_end_turn(&maia, &resp);
    assert!(result_for(&maia, "call_r").contains("on disk"));
    assert_eq!(read(&maia.path("w/x.txt")), "written");
    let fs: Vec<&Value> = maia
        .seen
        .iter()
        .filter(|m| m["method"].as_str().is_some_and(|s| s.starts_with("fs/")))
        .collect();
    assert!(fs.is_empty(), "fs requests without the capability: {fs:?}");
}

/// Reads the messages of a prompt turn, answering permission requests with
/// allow_once. Before answering one, it watches for `window` whether
/// another arrives: a second question while the first is open fails.
async fn answer_one_at_a_time(maia: &mut Maia, id: u64, window: Duration) -> (Value, Vec<Value>) {
    let mut before = Vec::new();
    let mut open: Option<Value> = None;
    loop {
        let m = match &open {
            Some(_) => match tokio::time::timeout(window, maia.next()).await {
                Ok(m) => m,
                Err(_) => {
                    let ask = open.take().unwrap();
                    let answer = choose("allow_once")(&ask).unwrap();
                    maia.respond(&ask["id"], answer).await;
                    continue;
                }
            },
            None => maia.next().await,
        };
        if m.get("method").is_none() && m["id"] == json!(id) {
            assert!(open.is_none(), "turn ended with a question open");
            return (m, before);
        }
        if m["method"] == "session/request_permission" {
            assert!(
                open.is_none(),
                "a second permission request while one is open: {m}"
            );
            open = Some(m.clone());
        }
        before.push(m);
    }
}

#[tokio::test]
async fn parallel_calls_ask_one_at_a_time_and_report_in_order() {
    let (mut maia, sid) = Maia::ready().await;
    std::fs::write(maia.path("p.txt"), "paragraph\n").unwrap();
    maia.mock.push(mock::tool_calls_reply(&[
        // The first call ends after the second (it waits for its file).
        (
            "call_1",
            "Bash",
            json!({"command": "while [ ! -e b.done ]; do sleep 0.02; done; echo a"}),
        ),
        ("call_2", "Bash", json!({"command": "echo b; touch b.done"})),
        ("call_3", "Read", json!({"file_path": "p.txt"})),
    ]));
    maia.mock.push(mock::text_reply("done"));
    let id = maia.prompt(&sid, "go").await;
    let (resp, before) = answer_one_at_a_time(&mut maia, id, Duration::from_millis(300)).await;
    assert_end_turn(&maia, &resp);
    let calls = announced(&before);
    assert_eq!(calls.len(), 3);
    // All announced before the first question.
    let first_ask = position(&before, |m| m["method"] == "session/request_permission");
    let last_announce = before
        .iter()
        .rposition(|m| m["params"]["update"]["sessionUpdate"] == "tool_call")
        .unwrap();
    assert!(last_announce < first_ask);
    assert_eq!(permission_requests(&before).len(), 3);
    let mut asked: Vec<Value> = permission_requests(&before)
        .iter()
        .map(|m| m["params"]["toolCall"]["toolCallId"].clone())
        .collect();
    asked.sort_by_key(Value::to_string);
    asked.dedup();
    assert_eq!(asked.len(), 3, "each call asked once");
    for call in &calls {
        assert_eq!(final_status(&before, &call["toolCallId"]), "completed");
    }
    let results = tool_results(&maia, 1);
    let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["call_1", "call_2", "call_3"]);
    assert_eq!(results[0].1, "a\nExit code: 0");
    assert_eq!(results[1].1, "b\nExit code: 0");
    assert!(results[2].1.contains("paragraph"), "{}", results[2].1);
}

#[tokio::test]
async fn calls_on_one_file_run_in_the_order_requested() {
    let (mut maia, sid) = Maia::ready().await;
    let path = maia.path("same.txt");
    std::fs::write(&path, "old\n").unwrap();
    let (resp, _) = maia
        .tool_turn(
            &sid,
            &[
                ("call_r", "Read", json!({"file_path": "same.txt"})),
                (
                    "call_e",
                    "Edit",
                    json!({"file_path": "same.txt", "old_string": "old", "new_string": "new"}),
                ),
            ],
            choose("allow_once"),
        )
        .await;
    assert_end_turn(&maia, &resp);
    // The Edit needs the Read done first.
    let edit = result_for(&maia, "call_e");
    assert!(edit.starts_with("Edited"), "{edit}");
    assert_eq!(read(&path), "new\n");
}

#[tokio::test]
async fn bad_arguments_and_unknown_tools_fail_and_the_turn_goes_on() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::tool_calls_reply(&[
        ("call_bad", "Read", json!({})),
        ("call_nope", "Nope", json!({"x": 1})),
    ]));
    let (resp, before) = maia.answered_turn(&sid, "go", "sorry").await;
    assert_end_turn(&maia, &resp);
    let calls = announced(&before);
    assert_eq!(calls.len(), 2);
    for call in &calls {
        assert_eq!(final_status(&before, &call["toolCallId"]), "failed");
    }
    let bad = result_for(&maia, "call_bad");
    assert!(
        bad.contains("Invalid arguments") && bad.contains("file_path"),
        "{bad}"
    );
    // The editor sees the error too.
    let shown: Vec<String> = tool_updates(&before)
        .iter()
        .filter(|u| u["status"] == "failed")
        .map(|u| {
            u["content"][0]["content"]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    // The calls run as tasks: their updates may come in either order.
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert!(shown.iter().any(|s| s.contains("file_path")), "{shown:?}");
    assert!(shown.iter().any(|s| s.contains("Nope")), "{shown:?}");
    let nope = result_for(&maia, "call_nope");
    assert!(nope.contains("Unknown tool `Nope`"), "{nope}");
    assert_eq!(crate::harness::agent_text(&before), "sorry");
}

#[tokio::test]
async fn relative_paths_resolve_against_the_session_cwd() {
    let (mut maia, sid) = Maia::ready().await;
    let (resp, before) = maia
        .tool_turn(
            &sid,
            &[
                (
                    "call_w",
                    "Write",
                    json!({"file_path": "sub/x.txt", "content": "here"}),
                ),
                ("call_b", "Bash", json!({"command": "pwd"})),
            ],
            choose("allow_once"),
        )
        .await;
    assert_end_turn(&maia, &resp);
    let target = maia.path("sub/x.txt");
    assert_eq!(read(&target), "here");
    let process_cwd = std::env::current_dir().unwrap().join("sub/x.txt");
    assert!(!process_cwd.exists(), "written relative to the process cwd");
    let calls = announced(&before);
    assert_eq!(calls[0]["locations"][0]["path"], json!(target));
    let pwd = result_for(&maia, "call_b");
    assert_eq!(pwd, format!("{}\nExit code: 0", maia.cwd().display()));
}
