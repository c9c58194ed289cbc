//! Bash through the editor's terminals (`terminal/*`), against a client
//! that serves them by really running the process, as Zed does: live
//! embedding, request order, release on every path, kill on cancel and
//! timeout, the model's tool result, a refused `terminal/create`, and the
//! sandbox kept in the editor's terminal.

use std::collections::HashMap;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use maia_test_support as mock;
use serde_json::{Value, json};
use std::io::Read;
use tokio::sync::watch;

use crate::harness::{Maia, last_tool_results, updates};

/// How a fake terminal's process ended: (exit code, signal).
type Exit = (Option<i32>, Option<String>);

struct Term {
    output: Arc<Mutex<Vec<u8>>>,
    limit: usize,
    exit: watch::Receiver<Option<Exit>>,
    pgid: i32,
    released: bool,
}

/// The editor side: terminals, and every agent request in order.
#[derive(Default)]
struct Editor {
    terms: HashMap<String, Term>,
    /// (method, params) of every agent → client request.
    log: Vec<(String, Value)>,
    /// Answer `terminal/create` with this error.
    refuse_create: Option<String>,
    /// Run like Zed: `command` and `args` joined with spaces, unquoted,
    /// into one line for `sh -c` (Zed's `ShellBuilder`), instead of
    /// executing them as given.
    zed: bool,
    /// Answer loosely, as the schema allows or a lax client does:
    /// `wait_for_exit` with a null code and signal (the code comes with
    /// the output), `release` with `true` instead of an object.
    lax: bool,
}

type Waiter = std::pin::Pin<Box<dyn std::future::Future<Output = (Value, Value)> + Send>>;

impl Editor {
    fn spawn(&mut self, params: &Value) -> String {
        let id = format!("term-{}", self.terms.len() + 1);
        // Plain threads: the output keeps arriving while a test callback
        // blocks the runtime.
        let program = params["command"].as_str().unwrap().to_owned();
        let args: Vec<String> = params["args"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect();
        let mut cmd = if self.zed {
            let mut line = program;
            for arg in &args {
                line.push(' ');
                line.push_str(arg);
            }
            let mut cmd = std::process::Command::new("/bin/sh");
            cmd.arg("-c").arg(format!("({line}) </dev/null"));
            cmd
        } else {
            let mut cmd = std::process::Command::new(program);
            cmd.args(&args);
            cmd
        };
        for var in params["env"].as_array().cloned().unwrap_or_default() {
            cmd.env(
                var["name"].as_str().unwrap(),
                var["value"].as_str().unwrap(),
            );
        }
        if let Some(cwd) = params["cwd"].as_str() {
            cmd.current_dir(cwd);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd.spawn().expect("the terminal's command starts");
        let pgid = child.id() as i32;
        let output = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = watch::channel(None);
        let readers: Vec<std::thread::JoinHandle<()>> = [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ]
        .into_iter()
        .map(|mut pipe| {
            let buf = output.clone();
            std::thread::spawn(move || {
                let mut chunk = [0u8; 4096];
                while let Ok(n) = pipe.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    buf.lock().unwrap().extend_from_slice(&chunk[..n]);
                }
            })
        })
        .collect();
        std::thread::spawn(move || {
            use std::os::unix::process::ExitStatusExt;
            let status = child.wait().unwrap();
            for reader in readers {
                let _ = reader.join();
            }
            let _ = tx.send(Some((
                status.code(),
                status.signal().map(|n| format!("signal {n}")),
            )));
        });
        self.terms.insert(
            id.clone(),
            Term {
                output,
                limit: params["outputByteLimit"].as_u64().unwrap_or(u64::MAX) as usize,
                exit: rx,
                pgid,
                released: false,
            },
        );
        id
    }

    fn term(&self, params: &Value) -> &Term {
        let id = params["terminalId"].as_str().unwrap();
        let term = self
            .terms
            .get(id)
            .unwrap_or_else(|| panic!("unknown terminal {id}"));
        assert!(!term.released, "{id} used after its release");
        term
    }

    fn running(&self, id: &str) -> bool {
        self.terms[id].exit.borrow().is_none()
    }

    fn output_of(&self, id: &str) -> String {
        String::from_utf8_lossy(&self.terms[id].output.lock().unwrap()).into_owned()
    }

    fn kill(&self, params: &Value) {
        let pgid = self.term(params).pgid;
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pgid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }

    fn methods(&self) -> Vec<&str> {
        self.log.iter().map(|(m, _)| m.as_str()).collect()
    }

    /// Answers a request now (`Ok` result / `Err` error message), or
    /// returns a waiter for `terminal/wait_for_exit`.
    fn serve(&mut self, m: &Value) -> Result<Result<Value, String>, Waiter> {
        let method = m["method"].as_str().unwrap().to_owned();
        let params = m["params"].clone();
        self.log.push((method.clone(), params.clone()));
        Ok(Ok(match method.as_str() {
            "session/request_permission" => {
                let option = params["options"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|o| o["kind"] == "allow_once")
                    .unwrap()["optionId"]
                    .clone();
                json!({"outcome": {"outcome": "selected", "optionId": option}})
            }
            "terminal/create" => {
                if let Some(message) = &self.refuse_create {
                    return Ok(Err(message.clone()));
                }
                json!({"terminalId": self.spawn(&params)})
            }
            "terminal/output" => {
                let term = self.term(&params);
                let bytes = term.output.lock().unwrap().clone();
                let truncated = bytes.len() > term.limit;
                let kept = &bytes[bytes.len().saturating_sub(term.limit)..];
                let mut result = json!({
                    "output": String::from_utf8_lossy(kept),
                    "truncated": truncated,
                });
                if let Some((code, signal)) = term.exit.borrow().clone() {
                    result["exitStatus"] = json!({"exitCode": code, "signal": signal});
                }
                result
            }
            "terminal/wait_for_exit" => {
                let mut exit = self.term(&params).exit.clone();
                let id = m["id"].clone();
                let lax = self.lax;
                return Err(Box::pin(async move {
                    let (code, signal) = exit
                        .wait_for(Option::is_some)
                        .await
                        .unwrap()
                        .clone()
                        .unwrap();
                    if lax {
                        return (id, json!({"exitCode": null, "signal": null}));
                    }
                    (id, json!({"exitCode": code, "signal": signal}))
                }));
            }
            "terminal/kill" => {
                self.kill(&params);
                json!({})
            }
            "terminal/release" => {
                self.kill(&params);
                let id = params["terminalId"].as_str().unwrap().to_owned();
                self.terms.get_mut(&id).unwrap().released = true;
                if self.lax { json!(true) } else { json!({}) }
            }
            other => panic!("unexpected agent request {other}: {m}"),
        }))
    }
}

/// The `terminalId` embedded in a tool call update, if any.
fn embedded(m: &Value) -> Option<String> {
    let update = &m["params"]["update"];
    (m["method"] == "session/update" && update["sessionUpdate"] == "tool_call_update")
        .then(|| update["content"].as_array())
        .flatten()?
        .iter()
        .find(|c| c["type"] == "terminal")
        .map(|c| c["terminalId"].as_str().unwrap().to_owned())
}

/// Runs prompt `id` to its response, serving the editor side; `on` sees
/// every message first (with the editor) and may act on the world.
async fn serve_turn(
    maia: &mut Maia,
    editor: &mut Editor,
    id: u64,
    mut on: impl FnMut(&mut Maia, &Editor, &Value) -> Option<Value>,
) -> (Value, Vec<Value>) {
    let mut waits: FuturesUnordered<Waiter> = FuturesUnordered::new();
    let mut seen = Vec::new();
    loop {
        tokio::select! {
            m = maia.next() => {
                if m.get("method").is_none() && m["id"] == json!(id) {
                    return (m, seen);
                }
                if let Some(notification) = on(maia, editor, &m) {
                    maia.send(&notification).await;
                }
                if m.get("method").is_some() && m.get("id").is_some() {
                    match editor.serve(&m) {
                        Ok(Ok(result)) => maia.respond(&m["id"], result).await,
                        Ok(Err(message)) => {
                            maia.send(&json!({"jsonrpc": "2.0", "id": m["id"],
                                "error": {"code": -32603, "message": message}})).await;
                        }
                        Err(waiter) => waits.push(waiter),
                    }
                }
                seen.push(m);
            }
            Some((rid, result)) = waits.next(), if !waits.is_empty() => {
                maia.respond(&rid, result).await;
            }
        }
    }
}

async fn terminal_client() -> (Maia, String) {
    let mut maia = Maia::start().await;
    maia.initialize_with(json!({"terminal": true})).await;
    let sid = maia.new_session().await;
    (maia, sid)
}

fn bash(maia: &Maia, args: Value) {
    maia.mock
        .push(mock::tool_calls_reply(&[("call_1", "Bash", args)]));
    maia.mock.push(mock::text_reply("done"));
}

#[tokio::test]
async fn bash_runs_in_the_editor_terminal_shown_live_and_released() {
    live_and_released(false).await;
}

/// The same against a client that joins `command` and `args` into one
/// line for its shell, unquoted, as Zed does.
#[tokio::test]
async fn bash_runs_the_same_in_a_zed_like_terminal() {
    live_and_released(true).await;
}

async fn live_and_released(zed: bool) {
    let (mut maia, sid) = terminal_client().await;
    let command = "echo first; while [ ! -e go ]; do sleep 0.05; done; echo second";
    bash(&maia, json!({ "command": command }));
    let id = maia.prompt(&sid, "run it").await;
    let go = maia.path("go");
    let mut live = None;
    let mut editor = Editor {
        zed,
        ..Editor::default()
    };
    let (resp, seen) = serve_turn(&mut maia, &mut editor, id, |_, editor, m| {
        if live.is_none()
            && let Some(tid) = embedded(m)
        {
            // Shown while it runs: the terminal exists, its process has
            // not finished, and it has already printed its first line.
            assert!(
                editor.terms.contains_key(&tid),
                "embedded before create answered"
            );
            assert!(
                editor.running(&tid),
                "embedded only after the process ended"
            );
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !editor.output_of(&tid).contains("first") {
                assert!(std::time::Instant::now() < deadline, "no live output");
                std::thread::sleep(Duration::from_millis(10));
            }
            assert!(editor.running(&tid));
            std::fs::write(&go, "").unwrap();
            live = Some(tid);
        }
        None
    })
    .await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let tid = live.expect("the terminal was embedded in the tool call");
    assert_eq!(
        editor.methods(),
        [
            "session/request_permission",
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/output",
            "terminal/release"
        ]
    );
    let create = &editor.log[1].1;
    assert_eq!(create["sessionId"], sid);
    assert_eq!(create["cwd"], json!(maia.cwd()));
    assert_eq!(create["outputByteLimit"], 120_000);
    // One program and one plain word: the same whether the client runs
    // them as given or joins them for its shell.
    assert!(
        create["command"].as_str().unwrap().ends_with("maia"),
        "{create}"
    );
    assert_eq!(create["args"], json!(["__terminal"]));
    let env = create["env"].as_array().unwrap();
    let var = |name: &str| {
        env.iter()
            .find(|v| v["name"] == name)
            .map(|v| v["value"].clone())
    };
    assert_eq!(var("MAIA_CWD"), Some(json!(maia.cwd())), "{env:?}");
    assert_eq!(var("MAIA_TERMINAL_COMMAND"), Some(json!(command)));
    for (_, params) in &editor.log[2..] {
        assert_eq!(params["terminalId"], tid);
    }
    assert_eq!(last_tool_results(&maia), ["first\nsecond\nExit code: 0"]);
    // The last update keeps the terminal and completes the call.
    let last = updates(&seen)
        .into_iter()
        .rfind(|u| u["sessionUpdate"] == "tool_call_update")
        .unwrap();
    assert_eq!(last["status"], "completed");
    assert_eq!(
        last["content"],
        json!([{"type": "terminal", "terminalId": tid}])
    );
}

#[tokio::test]
async fn a_failing_command_reports_its_exit_code_and_is_released() {
    let (mut maia, sid) = terminal_client().await;
    bash(&maia, json!({"command": "echo oops >&2; exit 3"}));
    let id = maia.prompt(&sid, "run").await;
    let mut editor = Editor::default();
    let (_, seen) = serve_turn(&mut maia, &mut editor, id, |_, _, _| None).await;
    assert_eq!(editor.methods().last(), Some(&"terminal/release"));
    assert_eq!(last_tool_results(&maia), ["oops\nExit code: 3"]);
    let last = updates(&seen)
        .into_iter()
        .rfind(|u| u["sessionUpdate"] == "tool_call_update")
        .unwrap();
    assert_eq!(last["status"], "failed");
}

#[tokio::test]
async fn lax_answers_still_give_the_exit_code_and_success() {
    let (mut maia, sid) = terminal_client().await;
    bash(&maia, json!({"command": "echo fine"}));
    let id = maia.prompt(&sid, "run").await;
    let mut editor = Editor {
        lax: true,
        ..Editor::default()
    };
    let (resp, seen) = serve_turn(&mut maia, &mut editor, id, |_, _, _| None).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    assert_eq!(editor.methods().last(), Some(&"terminal/release"));
    assert_eq!(last_tool_results(&maia), ["fine\nExit code: 0"]);
    let last = updates(&seen)
        .into_iter()
        .rfind(|u| u["sessionUpdate"] == "tool_call_update")
        .unwrap();
    assert_eq!(last["status"], "completed");
}

/// Two sessions run Bash in terminals at the same time: each terminal is
/// created, used and released under its own session, ids never cross, and
/// each session's model gets its own command's output.
#[tokio::test]
async fn two_sessions_run_terminals_at_once_without_crossing() {
    let (mut maia, s1) = terminal_client().await;
    let s2 = maia.new_session().await;
    let wait = "while [ ! -e go ]; do sleep 0.02; done";
    for word in ["alpha", "beta"] {
        let args = json!({"command": format!("{wait}; echo {word}")});
        maia.mock
            .push(mock::tool_calls_reply(&[("call_1", "Bash", args)]));
    }
    maia.mock.push(mock::text_reply("done"));
    maia.mock.push(mock::text_reply("done"));
    let p1 = maia.prompt(&s1, "run").await;
    let p2 = maia.prompt(&s2, "run").await;
    let go = maia.path("go");
    let mut editor = Editor::default();
    let mut waits: FuturesUnordered<Waiter> = FuturesUnordered::new();
    let mut done = Vec::new();
    // terminal id -> session that created it; tool call id -> session.
    let mut owner: HashMap<String, String> = HashMap::new();
    let mut embedded_in: Vec<(String, String)> = Vec::new();
    while done.len() < 2 {
        tokio::select! {
            m = maia.next() => {
                if m.get("method").is_none() && (m["id"] == json!(p1) || m["id"] == json!(p2)) {
                    assert_eq!(m["result"]["stopReason"], "end_turn", "{m}");
                    done.push(m);
                    continue;
                }
                if let Some(tid) = embedded(&m) {
                    embedded_in.push((tid, m["params"]["sessionId"].as_str().unwrap().to_owned()));
                }
                if m.get("method").is_some() && m.get("id").is_some() {
                    let method = m["method"].as_str().unwrap().to_owned();
                    let sid = m["params"]["sessionId"].as_str().unwrap_or("").to_owned();
                    if method.starts_with("terminal/") && method != "terminal/create" {
                        let tid = m["params"]["terminalId"].as_str().unwrap();
                        assert_eq!(owner.get(tid), Some(&sid), "{m}");
                    }
                    match editor.serve(&m) {
                        Ok(Ok(result)) => {
                            if method == "terminal/create" {
                                let tid = result["terminalId"].as_str().unwrap().to_owned();
                                owner.insert(tid, sid);
                                if owner.len() == 2 {
                                    std::fs::write(&go, "").unwrap();
                                }
                            }
                            maia.respond(&m["id"], result).await;
                        }
                        Ok(Err(message)) => panic!("{message}"),
                        Err(waiter) => waits.push(waiter),
                    }
                }
            }
            Some((rid, result)) = waits.next(), if !waits.is_empty() => {
                maia.respond(&rid, result).await;
            }
        }
    }
    assert_eq!(owner.len(), 2);
    let sessions: std::collections::HashSet<&String> = owner.values().collect();
    assert_eq!(sessions.len(), 2, "one terminal per session: {owner:?}");
    for (tid, sid) in &embedded_in {
        assert_eq!(owner.get(tid), Some(sid), "embedded in another session");
    }
    for (tid, term) in &editor.terms {
        assert!(term.released, "{tid} not released");
    }
    let mut outputs: Vec<String> = maia
        .mock
        .requests()
        .iter()
        .filter_map(|r| {
            r["messages"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["role"] == "tool")
                .map(|m| m["content"].as_str().unwrap().to_owned())
        })
        .collect();
    outputs.sort();
    assert_eq!(outputs, ["alpha\nExit code: 0", "beta\nExit code: 0"]);
}

/// What a later `session/load` replays is the text the model saw: the
/// terminal is long gone by then.
#[tokio::test]
async fn a_load_replays_the_output_not_the_released_terminal() {
    let (mut maia, sid) = terminal_client().await;
    bash(&maia, json!({"command": "echo from-the-terminal"}));
    let id = maia.prompt(&sid, "run").await;
    let mut editor = Editor::default();
    let (_, seen) = serve_turn(&mut maia, &mut editor, id, |_, _, _| None).await;
    assert!(seen.iter().any(|m| embedded(m).is_some()));
    let mut maia = maia.restart().await;
    maia.initialize_with(json!({"terminal": true})).await;
    let (resp, before) = maia.load(&sid).await;
    assert!(resp.get("error").is_none(), "{resp}");
    let calls: Vec<Value> = updates(&before)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .collect();
    assert_eq!(calls.len(), 1, "{before:?}");
    let content = &calls[0]["content"];
    assert_eq!(content[0]["type"], "content", "{content}");
    assert_eq!(
        content[0]["content"]["text"],
        "from-the-terminal\nExit code: 0"
    );
    assert!(!content.to_string().contains("terminalId"), "{content}");
}

#[tokio::test]
async fn cancel_kills_the_terminal_then_releases_it() {
    let (mut maia, sid) = terminal_client().await;
    bash(&maia, json!({"command": "echo started; sleep 30"}));
    let id = maia.prompt(&sid, "run").await;
    let mut editor = Editor::default();
    let sid2 = sid.clone();
    let (resp, seen) = serve_turn(&mut maia, &mut editor, id, |_, _, m| {
        embedded(m).map(|_| {
            json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid2}})
        })
    })
    .await;
    assert_eq!(resp["result"]["stopReason"], "cancelled", "{resp}");
    let methods = editor.methods();
    assert_eq!(
        methods[methods.len() - 2..],
        ["terminal/kill", "terminal/release"],
        "{methods:?}"
    );
    // The wait MAIA gave up is cancelled (`$/cancel_request`) before the kill.
    let at = |pred: &dyn Fn(&Value) -> bool| seen.iter().position(pred);
    let wait = at(&|m| m["method"] == "terminal/wait_for_exit").expect("a wait");
    let cancelled =
        at(&|m| m["method"] == "$/cancel_request" && m["params"]["requestId"] == seen[wait]["id"])
            .unwrap_or_else(|| panic!("the wait was not cancelled: {seen:?}"));
    let kill = at(&|m| m["method"] == "terminal/kill").expect("a kill");
    assert!(wait < cancelled && cancelled < kill, "{seen:?}");
    let term = editor
        .terms
        .values()
        .next()
        .expect("a terminal was created");
    assert!(term.released);
    let mut exit = term.exit.clone();
    tokio::time::timeout(Duration::from_secs(10), exit.wait_for(Option::is_some))
        .await
        .expect("the killed command ended")
        .unwrap();
    // The history stays valid for the next turn.
    let (resp, _) = maia.answered_turn(&sid, "next", "ok").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
}

#[tokio::test]
async fn the_timeout_kills_reads_and_releases() {
    let (mut maia, sid) = terminal_client().await;
    bash(
        &maia,
        json!({"command": "echo started; sleep 30", "timeout_ms": 500}),
    );
    let id = maia.prompt(&sid, "run").await;
    let mut editor = Editor::default();
    let started = std::time::Instant::now();
    serve_turn(&mut maia, &mut editor, id, |_, _, _| None).await;
    assert!(started.elapsed() < Duration::from_secs(15));
    assert_eq!(
        editor.methods()[1..],
        [
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/kill",
            "terminal/output",
            "terminal/release"
        ]
    );
    let result = &last_tool_results(&maia)[0];
    assert!(
        result.starts_with("started\n") && result.contains("timed out after 500 ms"),
        "{result}"
    );
}

#[tokio::test]
async fn a_refused_create_fails_the_call_and_nothing_runs_here() {
    let (mut maia, sid) = terminal_client().await;
    bash(&maia, json!({"command": "touch marker"}));
    let id = maia.prompt(&sid, "run").await;
    let mut editor = Editor {
        refuse_create: Some("no terminals in this window".into()),
        ..Editor::default()
    };
    let (resp, seen) = serve_turn(&mut maia, &mut editor, id, |_, _, _| None).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    assert_eq!(
        editor.methods(),
        ["session/request_permission", "terminal/create"]
    );
    let result = &last_tool_results(&maia)[0];
    assert!(
        result.contains("could not start a terminal")
            && result.contains("no terminals in this window"),
        "{result}"
    );
    assert!(!maia.path("marker").exists(), "the command ran locally");
    assert!(seen.iter().all(|m| embedded(m).is_none()));
}

#[tokio::test]
async fn the_editor_truncation_and_the_model_cap_are_both_said() {
    let (mut maia, sid) = terminal_client().await;
    bash(&maia, json!({"command": "seq 1 100000"}));
    let id = maia.prompt(&sid, "run").await;
    let mut editor = Editor::default();
    serve_turn(&mut maia, &mut editor, id, |_, _, _| None).await;
    let result = &last_tool_results(&maia)[0];
    assert!(
        result.contains("dropped by the editor's terminal"),
        "{}",
        &result[..200]
    );
    assert!(result.contains("characters truncated"));
    assert!(
        result.ends_with("99999\n100000\nExit code: 0"),
        "{}",
        &result[result.len() - 50..]
    );
    assert!(result.chars().count() < 30_200);
}

#[tokio::test]
async fn the_sandbox_holds_in_the_editor_terminal() {
    let (mut maia, sid) = terminal_client().await;
    let outside = maia.cwd().join("../maia-terminal-outside-probe.txt");
    bash(
        &maia,
        json!({"command": "echo x > ../maia-terminal-outside-probe.txt"}),
    );
    let id = maia.prompt(&sid, "run").await;
    let mut editor = Editor {
        zed: true,
        ..Editor::default()
    };
    serve_turn(&mut maia, &mut editor, id, |_, _, _| None).await;
    let leaked = outside.exists();
    let _ = std::fs::remove_file(&outside);
    assert!(!leaked, "the editor's terminal ran the command unsandboxed");
    let create = &editor.log[1];
    assert_eq!(create.0, "terminal/create", "{:?}", editor.methods());
    let env = create.1["env"].as_array().unwrap();
    assert!(
        env.iter().any(|v| v["name"] == "MAIA_SANDBOX_POLICY"),
        "{env:?}"
    );
    let result = &last_tool_results(&maia)[0];
    assert!(result.contains("MAIA sandbox"), "{result}");
}

#[tokio::test]
async fn without_the_capability_bash_runs_here() {
    let (mut maia, sid) = Maia::ready().await;
    bash(&maia, json!({"command": "echo here"}));
    let id = maia.prompt(&sid, "run").await;
    let mut editor = Editor::default();
    serve_turn(&mut maia, &mut editor, id, |_, _, _| None).await;
    assert_eq!(editor.methods(), ["session/request_permission"]);
    assert_eq!(last_tool_results(&maia), ["here\nExit code: 0"]);
}

#[tokio::test]
async fn sigterm_while_the_editor_runs_a_command_kills_and_releases_it() {
    let (mut maia, sid) = terminal_client().await;
    bash(&maia, json!({"command": "echo started; sleep 30"}));
    let id = maia.prompt(&sid, "run").await;
    let mut editor = Editor::default();
    let pid = nix::unistd::Pid::from_raw(maia.child.id().unwrap() as i32);
    let mut signalled = false;
    // The signal arrives the instant the terminal is shown, while MAIA waits for its exit.
    let (resp, _) = serve_turn(&mut maia, &mut editor, id, |_, _, m| {
        if !signalled && embedded(m).is_some() {
            signalled = true;
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        }
        None
    })
    .await;
    assert_eq!(resp["result"]["stopReason"], "cancelled", "{resp}");
    let methods = editor.methods();
    assert_eq!(
        methods[methods.len() - 2..],
        ["terminal/kill", "terminal/release"],
        "{methods:?}"
    );
    let term = editor
        .terms
        .values()
        .next()
        .expect("a terminal was created");
    assert!(term.released);
    maia.wait_exit(Duration::from_secs(10)).await;
}
