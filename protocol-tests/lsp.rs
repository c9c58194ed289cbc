//! `maia lsp` over stdio (Content-Length framing) against the mock LLM:
//! initialize, code actions, `maia.ask` → progress → answer document,
//! proposed edits through `workspace/applyEdit` (applied, rejected,
//! partially applied) reported to the model, permissions through
//! `window/showMessageRequest`, and cancellation. `maia.undo` is tested in
//! `lsp_undo`. Clients without change
//! annotations or message actions (Helix) review edits and answer
//! permissions through diagnostics and their code actions.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use maia_test_support::{self as mock, MockLlm};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use crate::harness::WAIT;

/// An LSP client driving a `maia lsp` process.
pub(crate) struct Lsp {
    pub(crate) child: Child,
    stdin: ChildStdin,
    rx: mpsc::UnboundedReceiver<Result<Value, String>>,
    next_id: u64,
    pub(crate) mock: MockLlm,
    #[allow(dead_code)]
    home: TempDir,
    cwd: TempDir,
    /// Every message received, in order.
    log: Vec<Value>,
}

/// What a test does with a request from the server.
pub(crate) type Answer<'a> = &'a mut dyn FnMut(&Value) -> Option<Vec<Value>>;

pub(crate) fn response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

pub(crate) fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

pub(crate) fn is_request(m: &Value, method: &str) -> bool {
    m["method"] == method && m.get("id").is_some()
}

pub(crate) fn progress_kind(m: &Value) -> Option<&str> {
    (m["method"] == "$/progress").then(|| m["params"]["value"]["kind"].as_str())?
}

/// Client capabilities like VS Code's, as far as MAIA looks at them.
pub(crate) fn vscode_caps() -> Value {
    json!({
        "window": {"workDoneProgress": true, "showDocument": {"support": true},
                   "showMessage": {"messageActionItem": {"additionalPropertiesSupport": true}}},
        "workspace": {"applyEdit": true, "workspaceEdit": {
            "documentChanges": true,
            "changeAnnotationSupport": {"groupsOnLabel": true}}}
    })
}

impl Lsp {
    pub(crate) async fn start(settings: Value) -> Lsp {
        let mock = MockLlm::start().await;
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let mut all = json!({
            "LiteLLM_URL": mock.url(),
            "model": "mock-model",
            "llm_retry_base_ms": 10,
        });
        for (k, v) in settings.as_object().unwrap() {
            all[k] = v.clone();
        }
        std::fs::create_dir_all(home.path().join(".maia")).unwrap();
        std::fs::write(home.path().join(".maia/settings.json"), all.to_string()).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_maia"))
            .arg("lsp")
            .env("HOME", home.path())
            .env_remove("LITELLM_API_KEY")
            .env_remove("MAIA_MODEL")
            .env(
                "MAIA_LOG",
                std::env::var("MAIA_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn maia lsp");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut length = None;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    match line.split_once(':') {
                        Some((name, value)) if name.eq_ignore_ascii_case("content-length") => {
                            length = value.trim().parse::<usize>().ok();
                        }
                        Some((name, _)) if name.eq_ignore_ascii_case("content-type") => {}
                        _ => {
                            let _ = tx.send(Err(format!("not an LSP header: {line:?}")));
                            return;
                        }
                    }
                }
                let Some(length) = length else {
                    let _ = tx.send(Err("a message without Content-Length".into()));
                    return;
                };
                let mut body = vec![0u8; length];
                if reader.read_exact(&mut body).await.is_err() {
                    return;
                }
                let parsed = match serde_json::from_slice::<Value>(&body) {
                    Ok(v) if v["jsonrpc"] == "2.0" => Ok(v),
                    _ => Err(String::from_utf8_lossy(&body).into_owned()),
                };
                if tx.send(parsed).is_err() {
                    return;
                }
            }
        });
        Lsp {
            child,
            stdin,
            rx,
            next_id: 1,
            mock,
            home,
            cwd,
            log: Vec::new(),
        }
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.cwd.path().canonicalize().unwrap().join(rel)
    }

    pub(crate) fn uri(&self, rel: &str) -> String {
        format!("file://{}", self.path(rel).display())
    }

    pub(crate) async fn send(&mut self, message: &Value) {
        let body = message.to_string();
        let framed = format!("Content-Length: {}\r\n\r\n{body}", body.len());
        self.stdin.write_all(framed.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    pub(crate) async fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    pub(crate) async fn notify(&mut self, method: &str, params: Value) {
        self.send(&notification(method, params)).await;
    }

    pub(crate) async fn next(&mut self) -> Value {
        let got = tokio::time::timeout(WAIT, self.rx.recv())
            .await
            .expect("timed out waiting for a message from maia lsp")
            .expect("maia lsp closed stdout");
        let m = got.unwrap_or_else(|e| panic!("stdout carried a non-LSP message: {e}"));
        self.log.push(m.clone());
        m
    }

    /// Handles one server request: `answer` first, then the defaults
    /// (progress creation and showDocument succeed).
    pub(crate) async fn answer_request(&mut self, m: &Value, answer: Answer<'_>) {
        let replies = answer(m).unwrap_or_else(|| {
            if is_request(m, "window/workDoneProgress/create") {
                vec![response(&m["id"], Value::Null)]
            } else if is_request(m, "window/showDocument") {
                vec![response(&m["id"], json!({"success": true}))]
            } else {
                panic!("unexpected request from the server: {m}")
            }
        });
        for reply in replies {
            self.send(&reply).await;
        }
    }

    /// Reads messages until `done` holds for one (returned last), answering
    /// server requests on the way.
    pub(crate) async fn until(
        &mut self,
        done: impl Fn(&Value) -> bool,
        answer: Answer<'_>,
    ) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let m = self.next().await;
            if m.get("method").is_some() && m.get("id").is_some() {
                self.answer_request(&m, answer).await;
            }
            let stop = done(&m);
            seen.push(m);
            if stop {
                return seen;
            }
        }
    }

    /// The response to request `id`.
    pub(crate) async fn response(&mut self, id: u64, answer: Answer<'_>) -> Value {
        let seen = self
            .until(|m| m.get("method").is_none() && m["id"] == id, answer)
            .await;
        seen.last().unwrap().clone()
    }

    pub(crate) async fn initialize(&mut self, caps: Value) -> Value {
        let root = self.uri("");
        let id = self
            .request(
                "initialize",
                json!({"processId": null, "rootUri": root, "capabilities": caps,
                       "workspaceFolders": [{"uri": root, "name": "ws"}],
                       "clientInfo": {"name": "protocol-tests"}}),
            )
            .await;
        let r = self.response(id, &mut |_| None).await;
        self.notify("initialized", json!({})).await;
        r
    }

    pub(crate) async fn open(&mut self, rel: &str, text: &str) {
        std::fs::write(self.path(rel), text).unwrap();
        let uri = self.uri(rel);
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "plaintext", "version": 1, "text": text}}),
        )
        .await;
    }

    /// Sends `maia.ask` without waiting for anything; returns the request id.
    pub(crate) async fn start_ask(&mut self, rel: &str, range: Value, intent: &str) -> u64 {
        let uri = self.uri(rel);
        self.request(
            "workspace/executeCommand",
            json!({"command": "maia.ask", "arguments": [
                {"uri": uri, "version": 1, "range": range, "intent": intent}]}),
        )
        .await
    }

    /// The code actions on `range` of `rel`.
    pub(crate) async fn code_actions(
        &mut self,
        rel: &str,
        range: Value,
        answer: Answer<'_>,
    ) -> Vec<Value> {
        let uri = self.uri(rel);
        let id = self
            .request(
                "textDocument/codeAction",
                json!({"textDocument": {"uri": uri}, "range": range,
                       "context": {"diagnostics": []}}),
            )
            .await;
        let r = self.response(id, answer).await;
        r["result"].as_array().expect("code actions").clone()
    }

    /// Runs the command of a code action, as a client does when the user
    /// picks it; returns the result.
    pub(crate) async fn execute(&mut self, action: &Value, answer: Answer<'_>) -> Value {
        let command = &action["command"];
        let id = self
            .request(
                "workspace/executeCommand",
                json!({"command": command["command"], "arguments": command["arguments"]}),
            )
            .await;
        let r = self.response(id, answer).await;
        assert!(r.get("error").is_none(), "{action}: {r}");
        r["result"].clone()
    }

    /// The diagnostics last published for `rel`.
    pub(crate) fn diagnostics(&self, rel: &str) -> Option<Vec<Value>> {
        let uri = self.uri(rel);
        self.log
            .iter()
            .rfind(|m| is_diagnostics(m, &uri))
            .map(|m| m["params"]["diagnostics"].as_array().unwrap().clone())
    }

    /// Runs `maia.ask`; returns its result.
    pub(crate) async fn ask(&mut self, rel: &str, range: Value, intent: &str) -> Value {
        let uri = self.uri(rel);
        let id = self
            .request(
                "workspace/executeCommand",
                json!({"command": "maia.ask", "arguments": [
                    {"uri": uri, "version": 1, "range": range, "intent": intent}]}),
            )
            .await;
        let r = self.response(id, &mut |_| None).await;
        assert!(r.get("error").is_none(), "maia.ask failed: {r}");
        r["result"].clone()
    }

    /// Runs `maia.ask` and its whole turn, answering server requests with
    /// `answer` (they may come before the command's response); returns the
    /// command's result and every message of the turn.
    pub(crate) async fn ask_turn(
        &mut self,
        rel: &str,
        range: Value,
        intent: &str,
        answer: Answer<'_>,
    ) -> (Value, Vec<Value>) {
        let uri = self.uri(rel);
        let id = self
            .request(
                "workspace/executeCommand",
                json!({"command": "maia.ask", "arguments": [
                    {"uri": uri, "version": 1, "range": range, "intent": intent}]}),
            )
            .await;
        let seen = self.turn(answer).await;
        let response = seen
            .iter()
            .find(|m| m.get("method").is_none() && m["id"] == id)
            .expect("maia.ask answered before the turn ended");
        assert!(
            response.get("error").is_none(),
            "maia.ask failed: {response}"
        );
        (response["result"].clone(), seen)
    }

    /// Reads until the turn's `maia/stream` end.
    pub(crate) async fn turn(&mut self, answer: Answer<'_>) -> Vec<Value> {
        self.until(
            |m| m["method"] == "maia/stream" && m["params"]["kind"] == "end",
            answer,
        )
        .await
    }
}

fn is_diagnostics(m: &Value, uri: &str) -> bool {
    m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri
}

fn titles(actions: &[Value]) -> Vec<&str> {
    actions
        .iter()
        .map(|a| a["title"].as_str().unwrap())
        .collect()
}

/// The action titled `title` (or starting with it, when it ends in `…`).
fn find_action<'a>(actions: &'a [Value], title: &str) -> &'a Value {
    actions
        .iter()
        .find(|a| {
            let t = a["title"].as_str().unwrap();
            match title.strip_suffix('…') {
                Some(prefix) => t.starts_with(prefix),
                None => t == title,
            }
        })
        .unwrap_or_else(|| panic!("no action `{title}` in {:?}", titles(actions)))
}

/// Client capabilities like Helix 25.07's: no change annotations and no
/// message actions.
fn helix_caps() -> Value {
    json!({"window": {"workDoneProgress": true},
           "workspace": {"applyEdit": true, "workspaceEdit": {"documentChanges": true}}})
}

pub(crate) fn range(l1: u32, c1: u32, l2: u32, c2: u32) -> Value {
    json!({"start": {"line": l1, "character": c1}, "end": {"line": l2, "character": c2}})
}

/// Applies LSP text edits (ASCII text) to `text`, last first.
pub(crate) fn apply_edits(text: &str, edits: &[Value]) -> String {
    let offset = |pos: &Value| -> usize {
        let line = pos["line"].as_u64().unwrap() as usize;
        let character = pos["character"].as_u64().unwrap() as usize;
        let start: usize = text.split_inclusive('\n').take(line).map(str::len).sum();
        (start + character).min(text.len())
    };
    let mut spans: Vec<(usize, usize, String)> = edits
        .iter()
        .map(|e| {
            (
                offset(&e["range"]["start"]),
                offset(&e["range"]["end"]),
                e["newText"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    spans.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut out = text.to_owned();
    for (start, end, new) in spans {
        out.replace_range(start..end, &new);
    }
    out
}

/// The tool message answering `call_id` in model request `n`.
fn tool_message(mock: &MockLlm, n: usize, call_id: &str) -> String {
    let requests = mock.requests();
    let messages = requests[n]["messages"].as_array().unwrap();
    messages
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .unwrap_or_else(|| panic!("no tool message for {call_id} in {messages:?}"))["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

pub(crate) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[tokio::test]
async fn initialize_and_code_actions() {
    let mut lsp = Lsp::start(json!({})).await;
    let init = lsp.initialize(vscode_caps()).await;
    let caps = &init["result"]["capabilities"];
    assert_eq!(
        caps["codeActionProvider"]["resolveProvider"], true,
        "{init}"
    );
    assert_eq!(
        caps["executeCommandProvider"]["commands"],
        json!([
            "maia.ask",
            "maia.cancel",
            "maia.newSession",
            "maia.undo",
            "maia.review",
            "maia.permission"
        ])
    );
    assert_eq!(caps["hoverProvider"], true);
    assert!(caps.get("completionProvider").is_none(), "{caps}");
    assert!(caps.get("documentFormattingProvider").is_none(), "{caps}");
    assert_eq!(init["result"]["serverInfo"]["name"], "maia");
    // Full sync of open documents and nothing about saving: a bare kind
    // (`1`) reads as "send didSave too" to VS Code's client, and every save
    // then logged "didSave is not implemented".
    assert_eq!(
        caps["textDocumentSync"],
        json!({"openClose": true, "change": 1}),
        "{caps}"
    );

    lsp.open("a.rs", "fn main() {\n    println!(\"hi\");\n}\n")
        .await;
    let uri = lsp.uri("a.rs");
    let id = lsp
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": uri}, "range": range(0, 0, 2, 1),
                   "context": {"diagnostics": []}}),
        )
        .await;
    let r = lsp.response(id, &mut |_| None).await;
    let actions = r["result"].as_array().unwrap();
    let titles: Vec<&str> = actions
        .iter()
        .map(|a| a["title"].as_str().unwrap())
        .collect();
    assert_eq!(
        titles,
        [
            "MAIA: Ask about selection…",
            "MAIA: Explain",
            "MAIA: Fix",
            "MAIA: Edit selection…"
        ]
    );
    let intents: Vec<&str> = actions
        .iter()
        .map(|a| {
            let command = &a["command"];
            assert_eq!(command["command"], "maia.ask", "{a}");
            let arg = &command["arguments"][0];
            assert_eq!(arg["uri"], uri);
            assert_eq!(arg["version"], 1);
            assert_eq!(arg["range"], range(0, 0, 2, 1));
            arg["intent"].as_str().unwrap()
        })
        .collect();
    assert_eq!(intents, ["ask", "explain", "fix", "edit"]);

    // Resolve gives back a runnable action even without its command.
    let mut bare = actions[2].clone();
    bare.as_object_mut().unwrap().remove("command");
    let id = lsp.request("codeAction/resolve", bare).await;
    let r = lsp.response(id, &mut |_| None).await;
    assert_eq!(
        r["result"]["command"]["arguments"][0]["intent"], "fix",
        "{r}"
    );

    // `only` filters by kind.
    let id = lsp
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": uri}, "range": range(1, 0, 1, 0),
                   "context": {"diagnostics": [], "only": ["quickfix"]}}),
        )
        .await;
    let r = lsp.response(id, &mut |_| None).await;
    let actions = r["result"].as_array().unwrap();
    assert_eq!(actions.len(), 1, "{r}");
    assert_eq!(actions[0]["title"], "MAIA: Fix");
    // An empty range stands for its line.
    assert_eq!(
        actions[0]["command"]["arguments"][0]["range"],
        range(1, 0, 2, 0)
    );
}

#[tokio::test]
async fn ask_streams_progress_and_the_answer_document() {
    let mut lsp = Lsp::start(json!({})).await;
    lsp.initialize(vscode_caps()).await;
    lsp.open("a.rs", "fn main() {\n    let unsaved = 1;\n}\n")
        .await;
    lsp.mock.push(mock::text_chunks(
        &["It prints ", "**nothing**", " at all."],
        Duration::from_millis(20),
    ));
    let asked = range(1, 4, 1, 20);
    let result = lsp.ask("a.rs", asked.clone(), "explain").await;
    let token = result["token"].as_str().unwrap().to_owned();
    let answer_uri = result["answer"].as_str().unwrap().to_owned();
    assert!(
        answer_uri.starts_with(&lsp.uri(".maia/answers/")) && answer_uri.ends_with(".md"),
        "{result}"
    );

    lsp.turn(&mut |_| None).await;
    // The turn's messages may start before the command's response.
    let seen = lsp.log.clone();
    // Progress: created by the server, then begin, report(s), end, in order.
    let create = seen
        .iter()
        .position(|m| is_request(m, "window/workDoneProgress/create"))
        .expect("progress token created");
    assert_eq!(seen[create]["params"]["token"], token);
    let kinds: Vec<&str> = seen.iter().filter_map(progress_kind).collect();
    assert_eq!(kinds.first(), Some(&"begin"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"end"), "{kinds:?}");
    assert!(kinds.contains(&"report"), "{kinds:?}");
    let begin = seen
        .iter()
        .find(|m| progress_kind(m) == Some("begin"))
        .unwrap();
    assert_eq!(begin["params"]["token"], token);
    assert_eq!(begin["params"]["value"]["title"], "MAIA: Explain");
    assert_eq!(begin["params"]["value"]["cancellable"], true);
    let begin_at = seen.iter().position(|m| progress_kind(m) == Some("begin"));
    assert!(begin_at > Some(create));
    // The answer document is opened.
    let show = seen
        .iter()
        .find(|m| is_request(m, "window/showDocument"))
        .expect("showDocument");
    assert_eq!(show["params"]["uri"], answer_uri);
    // The raw stream.
    let streamed: String = seen
        .iter()
        .filter(|m| m["method"] == "maia/stream" && m["params"]["kind"] == "text")
        .map(|m| m["params"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, "It prints **nothing** at all.");
    // The answer file holds the streamed text.
    let file = lsp.path(answer_uri.strip_prefix(&lsp.uri("")).unwrap());
    let text = read(&file);
    assert!(text.starts_with("# MAIA: Explain\n"), "{text}");
    assert!(text.contains("`a.rs` line 2"), "{text}");
    assert!(text.contains("It prints **nothing** at all.\n"), "{text}");

    // The model saw the selection and the editor's buffer as @file context.
    let request = &lsp.mock.requests()[0];
    let user = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "user")
        .unwrap()["content"]
        .to_string();
    assert!(user.contains("Explain the selected code"), "{user}");
    assert!(user.contains("let unsaved = 1"), "{user}");
    assert!(user.contains("<file path="), "{user}");

    // Hover on the asked range returns the answer.
    let uri = lsp.uri("a.rs");
    let id = lsp
        .request(
            "textDocument/hover",
            json!({"textDocument": {"uri": uri}, "position": {"line": 1, "character": 8}}),
        )
        .await;
    let r = lsp.response(id, &mut |_| None).await;
    assert_eq!(r["result"]["contents"]["kind"], "markdown", "{r}");
    assert_eq!(
        r["result"]["contents"]["value"],
        "It prints **nothing** at all."
    );
    let id = lsp
        .request(
            "textDocument/hover",
            json!({"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}),
        )
        .await;
    let r = lsp.response(id, &mut |_| None).await;
    assert_eq!(r["result"], Value::Null, "{r}");

    // The session is saved like ACP sessions.
    let sessions = std::fs::read_dir(lsp.path(".maia/.sessions"))
        .unwrap()
        .count();
    assert!(sessions >= 1);
}

#[tokio::test]
async fn an_open_answer_document_is_appended_to_with_apply_edit() {
    let mut lsp = Lsp::start(json!({})).await;
    lsp.initialize(vscode_caps()).await;
    lsp.open("a.rs", "x\n").await;
    lsp.mock.push(mock::text_chunks(
        &["one ", "two ", "three"],
        Duration::from_millis(200),
    ));
    let mut buffer = String::new();
    let mut version = 1;
    let mut appends = 0;
    let mut pending = Vec::new();
    let (_, seen) = lsp
        .ask_turn("a.rs", range(0, 0, 0, 1), "explain", &mut |m| {
            if is_request(m, "window/showDocument") {
                // The editor opens the document it was shown.
                let uri = m["params"]["uri"].as_str().unwrap();
                let path = uri.strip_prefix("file://").unwrap();
                buffer = std::fs::read_to_string(path).unwrap();
                return Some(vec![
                    notification(
                        "textDocument/didOpen",
                        json!({"textDocument": {"uri": uri, "languageId": "markdown",
                                "version": version, "text": buffer}}),
                    ),
                    response(&m["id"], json!({"success": true})),
                ]);
            }
            if is_request(m, "workspace/applyEdit") {
                let change = &m["params"]["edit"]["documentChanges"][0];
                buffer = apply_edits(&buffer, change["edits"].as_array().unwrap());
                version += 1;
                appends += 1;
                pending.push(change["textDocument"]["uri"].clone());
                return Some(vec![
                    notification(
                        "textDocument/didChange",
                        json!({"textDocument": {"uri": change["textDocument"]["uri"], "version": version},
                               "contentChanges": [{"text": buffer}]}),
                    ),
                    response(&m["id"], json!({"applied": true})),
                ]);
            }
            None
        })
        .await;
    assert!(appends >= 2, "streamed in several appends: {appends}");
    assert!(buffer.starts_with("# MAIA: Explain\n"), "{buffer}");
    assert!(buffer.ends_with("one two three\n"), "{buffer:?}");
    let answer = seen
        .iter()
        .find(|m| is_request(m, "window/showDocument"))
        .unwrap()["params"]["uri"]
        .clone();
    assert!(pending.iter().all(|u| *u == answer));
}

/// A file, a Read then an Edit of two separate lines by the model, and a
/// final answer; `review` answers the `workspace/applyEdit` (given the
/// request and the buffer), returning the new buffer (if changed) and the
/// `applied` flag. Returns the tool message the model got for the edit and
/// the applyEdit request.
async fn edit_turn(
    caps: Value,
    review: impl Fn(&Value, &str) -> (Option<String>, bool),
) -> (String, Value, Lsp) {
    edit_turn_with(
        json!({"permissions": {"allow": ["Read", "Edit"]}}),
        caps,
        review,
    )
    .await
}

/// [`edit_turn`] under `settings`.
async fn edit_turn_with(
    settings: Value,
    caps: Value,
    review: impl Fn(&Value, &str) -> (Option<String>, bool),
) -> (String, Value, Lsp) {
    let mut lsp = Lsp::start(settings).await;
    lsp.initialize(caps).await;
    let old = "one\ntwo\nthree\nfour\nfive\n";
    lsp.open("a.txt", old).await;
    let path = lsp.path("a.txt").display().to_string();
    lsp.mock.push(mock::tool_calls_reply(&[(
        "r1",
        "Read",
        json!({"file_path": path}),
    )]));
    lsp.mock.push(mock::tool_calls_reply(&[(
        "e1",
        "Edit",
        json!({"file_path": path, "old_string": "two\nthree\nfour", "new_string": "TWO\nthree\nFOUR"}),
    )]));
    lsp.mock.push(mock::text_reply("Done."));
    let uri = lsp.uri("a.txt");
    let mut request = Value::Null;
    lsp.ask_turn("a.txt", range(1, 0, 4, 0), "fix", &mut |m| {
        if !is_request(m, "workspace/applyEdit") {
            return None;
        }
        request = m.clone();
        let (buffer, applied) = review(m, old);
        let mut out = Vec::new();
        if let Some(buffer) = buffer {
            out.push(notification(
                "textDocument/didChange",
                json!({"textDocument": {"uri": uri, "version": 2},
                       "contentChanges": [{"text": buffer}]}),
            ));
        }
        out.push(response(&m["id"], json!({"applied": applied})));
        Some(out)
    })
    .await;
    assert_eq!(lsp.mock.requests().len(), 3);
    let message = tool_message(&lsp.mock, 2, "e1");
    (message, request, lsp)
}

pub(crate) fn edits_of(request: &Value) -> Vec<Value> {
    request["params"]["edit"]["documentChanges"][0]["edits"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn proposed_edit_applied_in_full() {
    let (message, request, lsp) = edit_turn(vscode_caps(), |m, old| {
        (Some(apply_edits(old, &edits_of(m))), true)
    })
    .await;
    // One annotated edit per hunk, versioned, each to be confirmed.
    let change = &request["params"]["edit"]["documentChanges"][0];
    assert_eq!(change["textDocument"]["uri"], lsp.uri("a.txt"));
    assert_eq!(change["textDocument"]["version"], 1);
    let edits = edits_of(&request);
    assert_eq!(edits.len(), 2, "{request}");
    let annotations = &request["params"]["edit"]["changeAnnotations"];
    for edit in &edits {
        let id = edit["annotationId"].as_str().expect("annotated edit");
        assert_eq!(annotations[id]["needsConfirmation"], true, "{request}");
        assert!(
            annotations[id]["label"]
                .as_str()
                .unwrap()
                .starts_with("MAIA")
        );
    }
    assert_eq!(edits[0]["newText"], "TWO\n");
    assert_eq!(edits[0]["range"], range(1, 0, 2, 0));
    assert_eq!(edits[1]["newText"], "FOUR\n");
    assert!(
        message.contains("applied all 2 hunk(s)"),
        "tool message: {message}"
    );
    // The disk is left to the editor (the buffer is unsaved).
    assert_eq!(read(&lsp.path("a.txt")), "one\ntwo\nthree\nfour\nfive\n");
}

/// An edit of an open document is approved once, hunk by hunk: no rule
/// allows Edit, yet no permission question comes first (the harness fails
/// on an unexpected `showMessageRequest`).
#[tokio::test]
async fn an_edit_of_an_open_document_is_approved_once() {
    let (message, _, _lsp) = edit_turn_with(
        json!({"permissions": {"allow": ["Read"]}}),
        vscode_caps(),
        |m, old| (Some(apply_edits(old, &edits_of(m))), true),
    )
    .await;
    assert!(
        message.contains("applied all 2 hunk(s)"),
        "tool message: {message}"
    );
}

/// A write to a file that is not open is asked first, as any call; so is
/// one to a protected path even when it is open.
#[tokio::test]
async fn writes_not_reviewed_hunk_by_hunk_are_asked_first() {
    let mut lsp = Lsp::start(json!({"permissions": {"allow": ["Read"]}})).await;
    lsp.initialize(vscode_caps()).await;
    lsp.open("a.txt", "one\n").await;
    lsp.open("package.json", "{}\n").await;
    let closed = lsp.path("b.txt").display().to_string();
    let protected = lsp.path("package.json").display().to_string();
    lsp.mock.push(mock::tool_calls_reply(&[(
        "r1",
        "Read",
        json!({"file_path": protected}),
    )]));
    lsp.mock.push(mock::tool_calls_reply(&[(
        "w1",
        "Write",
        json!({"file_path": closed, "content": "new\n"}),
    )]));
    lsp.mock.push(mock::tool_calls_reply(&[(
        "w2",
        "Write",
        json!({"file_path": protected, "content": "{\"x\": 1}\n"}),
    )]));
    lsp.mock.push(mock::text_reply("Done."));
    let mut asked = Vec::new();
    lsp.ask_turn("a.txt", range(0, 0, 0, 3), "fix", &mut |m| {
        if !is_request(m, "window/showMessageRequest") {
            return None;
        }
        asked.push(m["params"]["message"].as_str().unwrap_or("").to_owned());
        Some(vec![response(&m["id"], json!({"title": "Deny"}))])
    })
    .await;
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked[0].contains("b.txt"), "{asked:?}");
    assert!(asked[1].contains("package.json"), "{asked:?}");
    for (n, id) in [(2, "w1"), (3, "w2")] {
        let message = tool_message(&lsp.mock, n, id);
        assert!(message.contains("refused"), "tool message: {message}");
    }
    assert!(!lsp.path("b.txt").exists());
}

#[tokio::test]
async fn proposed_edit_not_applied() {
    let (message, _, _lsp) = edit_turn(vscode_caps(), |_, _| (None, false)).await;
    assert!(
        message.contains("rejected the change") && message.contains("all 2 hunk(s) rejected"),
        "tool message: {message}"
    );
}

#[tokio::test]
async fn proposed_edit_partially_applied_is_read_from_the_document() {
    // Like VS Code when a hunk is unticked: `applied: true`, one hunk in.
    let (message, _, _lsp) = edit_turn(vscode_caps(), |m, old| {
        (Some(apply_edits(old, &edits_of(m)[..1])), true)
    })
    .await;
    assert!(
        message.contains("partially")
            && message.contains("Applied: #1 (replace line 2")
            && message.contains("Rejected: #2 (replace line 4"),
        "tool message: {message}"
    );
}

/// Without change annotations, a Read then an Edit of two separate lines
/// reviewed as hint diagnostics: `choices` are the code actions picked in
/// turn (`Some(n)`: the Apply/Discard on hunk `n`'s diagnostic, `None`:
/// Apply all/Discard all). The client applies what the server sends, as
/// an editor would. Returns the tool message of the edit, the applyEdit
/// requests, the buffer at the end, the first diagnostics and the client.
async fn diagnostic_review(
    choices: &[(Option<usize>, bool)],
) -> (String, Vec<Value>, String, Vec<Value>, Lsp) {
    let mut lsp = Lsp::start(json!({"permissions": {"allow": ["Read", "Edit"]}})).await;
    lsp.initialize(helix_caps()).await;
    let old = "one\ntwo\nthree\nfour\nfive\n";
    lsp.open("a.txt", old).await;
    let path = lsp.path("a.txt").display().to_string();
    lsp.mock.push(mock::tool_calls_reply(&[(
        "r1",
        "Read",
        json!({"file_path": path}),
    )]));
    lsp.mock.push(mock::tool_calls_reply(&[(
        "e1",
        "Edit",
        json!({"file_path": path, "old_string": "two\nthree\nfour", "new_string": "TWO\nthree\nFOUR"}),
    )]));
    lsp.mock.push(mock::text_reply("Done."));
    let uri = lsp.uri("a.txt");
    let mut buffer = old.to_owned();
    let mut version = 1;
    let mut applies = Vec::new();
    let mut client = |m: &Value| {
        if !is_request(m, "workspace/applyEdit") {
            return None;
        }
        applies.push(m.clone());
        buffer = apply_edits(&buffer, &edits_of(m));
        version += 1;
        Some(vec![
            notification(
                "textDocument/didChange",
                json!({"textDocument": {"uri": uri, "version": version},
                       "contentChanges": [{"text": buffer}]}),
            ),
            response(&m["id"], json!({"applied": true})),
        ])
    };
    lsp.start_ask("a.txt", range(1, 0, 4, 0), "fix").await;
    let uri = lsp.uri("a.txt");
    lsp.until(
        |m| is_diagnostics(m, &uri) && m["params"]["diagnostics"] != json!([]),
        &mut client,
    )
    .await;
    let shown = lsp.diagnostics("a.txt").unwrap();
    assert_eq!(shown.len(), 2, "{shown:?}");
    for &(hunk, accept) in choices {
        let (on, title) = match (hunk, accept) {
            (Some(n), true) => (shown[n - 1]["range"].clone(), "MAIA: Apply"),
            (Some(n), false) => (shown[n - 1]["range"].clone(), "MAIA: Discard"),
            (None, true) => (range(0, 0, 0, 0), "MAIA: Apply all…"),
            (None, false) => (range(0, 0, 0, 0), "MAIA: Discard all…"),
        };
        let actions = lsp.code_actions("a.txt", on, &mut client).await;
        if hunk.is_some() {
            // Both answers are offered on the hunk.
            find_action(&actions, "MAIA: Apply");
            find_action(&actions, "MAIA: Discard");
        }
        let action = find_action(&actions, title).clone();
        lsp.execute(&action, &mut client).await;
    }
    lsp.turn(&mut client).await;
    assert_eq!(lsp.mock.requests().len(), 3);
    let message = tool_message(&lsp.mock, 2, "e1");
    // The diagnostics are withdrawn.
    assert_eq!(lsp.diagnostics("a.txt"), Some(Vec::new()));
    (message, applies, buffer, shown, lsp)
}

#[tokio::test]
async fn without_annotation_support_hunks_are_reviewed_as_diagnostics() {
    let (message, applies, buffer, shown, lsp) =
        diagnostic_review(&[(Some(1), true), (Some(2), false)]).await;
    // One hint per hunk, on its old lines, showing its diff.
    assert_eq!(shown[0]["severity"], 4, "{shown:?}");
    assert_eq!(shown[0]["source"], "maia");
    assert_eq!(shown[0]["range"], range(1, 0, 1, 3));
    assert_eq!(shown[1]["range"], range(3, 0, 3, 4));
    let diff = shown[0]["message"].as_str().unwrap();
    assert!(diff.contains("- two\n+ TWO"), "{diff}");
    assert!(
        shown[1]["message"]
            .as_str()
            .unwrap()
            .contains("- four\n+ FOUR")
    );
    // Once hunk 1 is decided, only hunk 2 is left on screen.
    let uri = lsp.uri("a.txt");
    let published: Vec<usize> = lsp
        .log
        .iter()
        .filter(|m| is_diagnostics(m, &uri))
        .map(|m| m["params"]["diagnostics"].as_array().unwrap().len())
        .collect();
    assert!(published.contains(&1), "{published:?}");
    // Exactly the applied hunk is sent, as a plain versioned edit.
    assert_eq!(applies.len(), 1, "{applies:?}");
    let change = &applies[0]["params"]["edit"]["documentChanges"][0];
    assert_eq!(change["textDocument"]["version"], 1);
    assert!(
        applies[0]["params"]["edit"]
            .get("changeAnnotations")
            .is_none()
    );
    let edits = edits_of(&applies[0]);
    assert_eq!(edits.len(), 1, "{edits:?}");
    assert!(edits[0].get("annotationId").is_none());
    assert_eq!(edits[0]["newText"], "TWO\n");
    assert_eq!(edits[0]["range"], range(1, 0, 2, 0));
    assert_eq!(buffer, "one\nTWO\nthree\nfour\nfive\n");
    assert!(
        message.contains("partially")
            && message.contains("Applied: #1 (replace line 2")
            && message.contains("Rejected: #2 (replace line 4"),
        "tool message: {message}"
    );
    // The disk is left to the editor.
    assert_eq!(read(&lsp.path("a.txt")), "one\ntwo\nthree\nfour\nfive\n");
}

#[tokio::test]
async fn diagnostic_review_apply_all_and_discard_all() {
    let (message, applies, buffer, _, _lsp) = diagnostic_review(&[(None, true)]).await;
    assert_eq!(applies.len(), 1);
    assert_eq!(edits_of(&applies[0]).len(), 2);
    assert_eq!(buffer, "one\nTWO\nthree\nFOUR\nfive\n");
    assert!(message.contains("applied all 2 hunk(s)"), "{message}");

    let (message, applies, buffer, _, _lsp) = diagnostic_review(&[(None, false)]).await;
    assert!(applies.is_empty(), "nothing to apply: {applies:?}");
    assert_eq!(buffer, "one\ntwo\nthree\nfour\nfive\n");
    assert!(
        message.contains("rejected the change") && message.contains("all 2 hunk(s) rejected"),
        "tool message: {message}"
    );
}

/// A Read that needs permission, answered by `reply` (a result, or an
/// error when `None`); returns the showMessageRequest and the tool message.
async fn permission_turn(reply: Option<Value>) -> (Value, String) {
    let mut lsp = Lsp::start(json!({})).await;
    lsp.initialize(vscode_caps()).await;
    lsp.open("a.txt", "secret\n").await;
    let path = lsp.path("a.txt").display().to_string();
    lsp.mock.push(mock::tool_calls_reply(&[(
        "r1",
        "Read",
        json!({"file_path": path}),
    )]));
    lsp.mock.push(mock::text_reply("Done."));
    let mut asked = Value::Null;
    lsp.ask_turn("a.txt", range(0, 0, 0, 6), "explain", &mut |m| {
        if !is_request(m, "window/showMessageRequest") {
            return None;
        }
        asked = m.clone();
        Some(vec![match &reply {
            Some(result) => response(&m["id"], result.clone()),
            None => json!({"jsonrpc": "2.0", "id": m["id"],
                           "error": {"code": -32601, "message": "no prompts here"}}),
        }])
    })
    .await;
    (asked, tool_message(&lsp.mock, 1, "r1"))
}

#[tokio::test]
async fn permission_allow_once() {
    let (asked, message) = permission_turn(Some(json!({"title": "Allow once"}))).await;
    let titles: Vec<&str> = asked["params"]["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles.len(), 3, "{asked}");
    assert_eq!(titles[0], "Allow once");
    assert!(titles[1].starts_with("Always allow Read"), "{titles:?}");
    assert_eq!(titles[2], "Deny");
    assert!(
        asked["params"]["message"]
            .as_str()
            .unwrap()
            .contains("Read")
    );
    assert!(message.contains("secret"), "tool message: {message}");
}

#[tokio::test]
async fn permission_deny_null_and_error_deny() {
    let cases = [
        (Some(json!({"title": "Deny"})), None),
        (Some(Value::Null), Some("dismissed the permission prompt")),
        (None, Some("could not show the permission prompt")),
    ];
    for (reply, reason) in cases {
        let (_, message) = permission_turn(reply.clone()).await;
        assert!(!message.contains("secret"), "{reply:?}: {message}");
        assert!(message.contains("refused"), "{reply:?}: {message}");
        if let Some(reason) = reason {
            assert!(message.contains(reason), "{reply:?}: {message}");
        }
    }
}

/// Without message actions, a Read that needs permission is asked as a
/// diagnostic; the code action titled `choice` answers it. Returns the
/// diagnostic, the actions offered on it and the tool message.
async fn diagnostic_permission(choice: &str) -> (Value, Vec<Value>, String) {
    let mut lsp = Lsp::start(json!({})).await;
    lsp.initialize(helix_caps()).await;
    lsp.open("a.txt", "secret\n").await;
    let path = lsp.path("a.txt").display().to_string();
    lsp.mock.push(mock::tool_calls_reply(&[(
        "r1",
        "Read",
        json!({"file_path": path}),
    )]));
    lsp.mock.push(mock::text_reply("Done."));
    lsp.start_ask("a.txt", range(0, 0, 0, 6), "explain").await;
    let uri = lsp.uri("a.txt");
    // No showMessageRequest: the default answers panic on one.
    lsp.until(
        |m| is_diagnostics(m, &uri) && m["params"]["diagnostics"] != json!([]),
        &mut |_| None,
    )
    .await;
    let shown = lsp.diagnostics("a.txt").unwrap();
    assert_eq!(shown.len(), 1, "{shown:?}");
    let diagnostic = shown[0].clone();
    let actions = lsp
        .code_actions("a.txt", diagnostic["range"].clone(), &mut |_| None)
        .await;
    let action = find_action(&actions, choice).clone();
    lsp.execute(&action, &mut |_| None).await;
    lsp.turn(&mut |_| None).await;
    assert_eq!(lsp.diagnostics("a.txt"), Some(Vec::new()));
    (diagnostic, actions, tool_message(&lsp.mock, 1, "r1"))
}

#[tokio::test]
async fn without_message_actions_permission_is_approved_in_a_diagnostic() {
    let (diagnostic, actions, message) = diagnostic_permission("MAIA: Approve once").await;
    // At the start of the file being read, describing the call.
    assert_eq!(diagnostic["severity"], 3, "{diagnostic}");
    assert_eq!(diagnostic["range"], range(0, 0, 0, 6));
    let text = diagnostic["message"].as_str().unwrap();
    assert!(text.starts_with("MAIA wants to run: Read"), "{text}");
    let offered = titles(&actions);
    assert_eq!(offered[0], "MAIA: Approve once", "{offered:?}");
    assert!(
        offered[1].starts_with("MAIA: Always allow Read"),
        "{offered:?}"
    );
    assert_eq!(offered[2], "MAIA: Deny", "{offered:?}");
    assert!(message.contains("secret"), "tool message: {message}");
}

#[tokio::test]
async fn without_message_actions_permission_is_denied_in_a_diagnostic() {
    let (_, _, message) = diagnostic_permission("MAIA: Deny").await;
    assert!(!message.contains("secret"), "{message}");
    assert!(message.contains("refused"), "{message}");
}

#[tokio::test]
async fn progress_cancel_stops_the_turn() {
    let mut lsp = Lsp::start(json!({})).await;
    lsp.initialize(vscode_caps()).await;
    lsp.open("a.txt", "x\n").await;
    lsp.mock
        .push(mock::slow_text(200, Duration::from_millis(25)));
    let result = lsp.ask("a.txt", range(0, 0, 0, 1), "explain").await;
    let token = result["token"].clone();
    // Wait for the answer to start streaming, then press Cancel.
    lsp.until(|m| progress_kind(m) == Some("report"), &mut |_| None)
        .await;
    lsp.notify("window/workDoneProgress/cancel", json!({"token": token}))
        .await;
    let seen = lsp.turn(&mut |_| None).await;
    let end = seen
        .iter()
        .find(|m| progress_kind(m) == Some("end"))
        .expect("progress end");
    assert_eq!(end["params"]["value"]["message"], "cancelled");
    assert_eq!(seen.last().unwrap()["params"]["stopReason"], "cancelled");
    lsp.mock
        .wait_for_dropped_streams(1, Duration::from_secs(5))
        .await;
    let answer = result["answer"].as_str().unwrap();
    let text = read(Path::new(answer.strip_prefix("file://").unwrap()));
    assert!(
        text.contains("word") && text.ends_with("_(cancelled)_\n"),
        "{text}"
    );

    // The session takes a new question afterwards; maia.cancel answers at once.
    lsp.mock.push(mock::text_reply("Fine."));
    let (_, seen) = lsp
        .ask_turn("a.txt", range(0, 0, 0, 1), "ask", &mut |_| None)
        .await;
    assert_eq!(seen.last().unwrap()["params"]["stopReason"], "end_turn");
    let id = lsp
        .request(
            "workspace/executeCommand",
            json!({"command": "maia.cancel", "arguments": [{}]}),
        )
        .await;
    let r = lsp.response(id, &mut |_| None).await;
    assert_eq!(r["result"]["cancelled"], 0, "{r}");
}

/// "Fix" on a range the editor marks with a diagnostic: the code action
/// carries the editor's diagnostic (MAIA's own review notes left out) and
/// the model's prompt lists it.
#[tokio::test]
async fn fix_takes_the_editors_diagnostics_from_the_code_action_context() {
    let mut lsp = Lsp::start(json!({})).await;
    lsp.initialize(vscode_caps()).await;
    lsp.open("a.py", "x: int = \"one\"\n").await;
    let uri = lsp.uri("a.py");
    let id = lsp
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": uri}, "range": range(0, 0, 0, 14),
                   "context": {"diagnostics": [
                {"range": range(0, 10, 0, 15), "severity": 1, "source": "Pylance",
                 "message": "\"Literal['one']\" is not assignable to \"int\""},
                {"range": range(0, 0, 0, 1), "severity": 3, "source": "maia",
                 "message": "a review note"}]}}),
        )
        .await;
    let actions = lsp.response(id, &mut |_| None).await["result"]
        .as_array()
        .unwrap()
        .clone();
    let fix = find_action(&actions, "MAIA: Fix");
    let args = &fix["command"]["arguments"][0];
    assert_eq!(
        args["diagnostics"],
        json!([{"line": 1, "severity": "error", "source": "Pylance",
                "message": "\"Literal['one']\" is not assignable to \"int\""}]),
        "{fix}"
    );
    lsp.mock.push(mock::text_reply("Use an int."));
    lsp.execute(fix, &mut |_| None).await;
    lsp.turn(&mut |_| None).await;
    let request = lsp.mock.requests()[0].to_string();
    assert!(
        request.contains(
            "The editor reports these problems in the selection:\\n- line 1: error: \\\"Literal['one']\\\" is not assignable to \\\"int\\\" (Pylance)"
        ),
        "{request}"
    );
    assert!(!request.contains("a review note"), "{request}");
}
