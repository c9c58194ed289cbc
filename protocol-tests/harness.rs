//! A client for the tests: spawns `maia acp` with an isolated HOME whose
//! settings point at a mock LLM, speaks JSON-RPC to it, and checks that
//! every stdout line is a JSON-RPC message.
//!
//! Its modules: [`client`], the typed client (ACP calls and session updates
//! as the schema crate's types, over this process or a daemon's WebSocket);
//! [`messages`], what the tests read out of received messages and of the
//! requests the mock LLM was sent; [`fixtures`], the folders tests set up;
//! [`flows`], the typed handshake / session / prompt pairs; [`answers`],
//! typed answers to the agent's requests.

pub mod answers;
pub mod client;
pub mod fixtures;
pub mod flows;
pub mod messages;

pub use fixtures::{alive, eventually, read};
pub use messages::*;

use std::collections::VecDeque;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use maia_test_support::MockLlm;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// How long any single wait may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(20);

pub struct Maia {
    pub child: Child,
    stdin: Option<ChildStdin>,
    rx: Lines,
    next_id: u64,
    /// Every message received so far, in order.
    pub seen: Vec<Value>,
    /// Messages received but passed over by a typed wait
    /// ([`client::Acp::expect`]), for the next reads.
    held: VecDeque<Value>,
    pub mock: MockLlm,
    /// The isolated HOME (kept alive as long as the process runs).
    #[allow(dead_code)]
    pub home: TempDir,
    pub cwd: TempDir,
    /// What maia wrote on stderr, when started with [`Maia::start_capturing_stderr`].
    pub stderr: Arc<Mutex<String>>,
    /// What the process was started with (for [`Maia::restart`]).
    args: Vec<String>,
    launcher: Option<Launcher>,
    env: Vec<(String, String)>,
    capture_log: Option<String>,
    /// The named fault points armed in the process (`MAIA_FAULT`).
    fault: Option<String>,
}

type Lines = mpsc::UnboundedReceiver<Result<Value, String>>;

pub struct Options {
    pub settings: Value,
    pub args: Vec<String>,
    /// Environment variables of the process, besides the harness's own.
    pub env: Vec<(String, String)>,
    /// What starts MAIA instead of the built binary (`None`: the binary).
    pub launcher: Option<Launcher>,
}

/// A program that starts `maia` (an installed npm package's `npx …`): run
/// in `dir` with `env` added, given `args`, then `acp` and the options'.
#[derive(Debug, Clone)]
pub struct Launcher {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub dir: PathBuf,
    pub env: Vec<(String, String)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            settings: json!({}),
            args: Vec::new(),
            launcher: None,
            env: Vec::new(),
        }
    }
}

impl Maia {
    pub async fn start() -> Maia {
        Self::start_with(Options::default()).await
    }

    pub async fn start_with(options: Options) -> Maia {
        Self::spawn(options, None).await
    }

    /// Like [`Maia::start_with`], under the managed policy `policy`
    /// (written as `managed-settings.json` in the home folder, which
    /// `MAIA_MANAGED_SETTINGS` names), or `text` as that file when it is a
    /// string.
    pub async fn start_managed(options: Options, policy: &Value) -> Maia {
        Self::spawn_in(options, None, Some(policy)).await
    }

    /// Like [`Maia::start_with`], logging at `log_level` (`MAIA_LOG`) with
    /// stderr collected in [`Maia::stderr`].
    pub async fn start_capturing_stderr(options: Options, log_level: &str) -> Maia {
        Self::spawn(options, Some(log_level)).await
    }

    async fn spawn(options: Options, capture_log: Option<&str>) -> Maia {
        Self::spawn_in(options, capture_log, None).await
    }

    async fn spawn_in(options: Options, capture_log: Option<&str>, policy: Option<&Value>) -> Maia {
        let mock = MockLlm::start().await;
        let home = tempfile::tempdir().unwrap();
        if let Some(policy) = policy {
            let text = match policy.as_str() {
                Some(text) => text.to_owned(),
                None => policy.to_string(),
            };
            std::fs::write(home.path().join(MANAGED_FILE), text).unwrap();
        }
        let cwd = tempfile::tempdir().unwrap();
        let mut settings = json!({
            "LiteLLM_URL": mock.url(),
            "model": "mock-model",
            "llm_retry_base_ms": 10,
        });
        if let (Some(base), Some(extra)) = (settings.as_object_mut(), options.settings.as_object())
        {
            for (k, v) in extra {
                base.insert(k.clone(), v.clone());
            }
        }
        std::fs::create_dir_all(home.path().join(".maia")).unwrap();
        std::fs::write(
            home.path().join(".maia/settings.json"),
            serde_json::to_string_pretty(&settings).unwrap(),
        )
        .unwrap();
        let (child, stdin, rx, stderr_text) = launch(
            home.path(),
            (&options.args, &options.env),
            options.launcher.as_ref(),
            capture_log,
            None,
        );
        Maia {
            child,
            stdin,
            rx,
            next_id: 1,
            seen: Vec::new(),
            held: VecDeque::new(),
            mock,
            home,
            cwd,
            stderr: stderr_text,
            args: options.args,
            launcher: options.launcher,
            env: options.env,
            capture_log: capture_log.map(str::to_owned),
            fault: None,
        }
    }

    /// Kills the process with SIGKILL (no chance to flush or clean up) and
    /// starts a new one on the same HOME, cwd and mock LLM. The new process
    /// is not initialized; [`Maia::seen`] starts empty.
    pub async fn restart(self) -> Maia {
        let fault = self.fault.clone();
        self.restart_with_fault(fault.as_deref()).await
    }

    /// Like [`Maia::restart`], the new process with the named fault points
    /// `fault` armed (`MAIA_FAULT`, `docs/architecture.md` "Fault points"),
    /// or none.
    pub async fn restart_with_fault(mut self, fault: Option<&str>) -> Maia {
        // Already gone when a fault point killed it.
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("maia did not die after SIGKILL");
        let (child, stdin, rx, stderr) = launch(
            self.home.path(),
            (&self.args, &self.env),
            self.launcher.as_ref(),
            self.capture_log.as_deref(),
            fault,
        );
        Maia {
            child,
            stdin,
            rx,
            next_id: 1,
            seen: Vec::new(),
            held: VecDeque::new(),
            mock: self.mock,
            home: self.home,
            cwd: self.cwd,
            stderr,
            args: self.args,
            launcher: self.launcher,
            env: self.env,
            capture_log: self.capture_log,
            fault: fault.map(str::to_owned),
        }
    }

    pub fn cwd(&self) -> PathBuf {
        self.cwd.path().canonicalize().unwrap()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.cwd().join(rel)
    }

    pub async fn send(&mut self, message: &Value) {
        self.send_raw(&format!("{message}\n")).await;
    }

    pub async fn send_raw(&mut self, text: &str) {
        self.send_bytes(text.as_bytes()).await;
    }

    /// Writes raw bytes (not necessarily UTF-8) to maia's stdin.
    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).await.unwrap();
        stdin.flush().await.unwrap();
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    pub async fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}))
            .await;
        id
    }

    /// Writes the requests `calls` (method, params) in one write, with no
    /// wait between them; their ids, in order.
    pub async fn pipeline(&mut self, calls: &[(&str, Value)]) -> Vec<u64> {
        let mut text = String::new();
        let mut ids = Vec::new();
        for (method, params) in calls {
            let id = self.next_id;
            self.next_id += 1;
            let message = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params});
            text.push_str(&format!("{message}\n"));
            ids.push(id);
        }
        self.send_raw(&text).await;
        ids
    }

    pub async fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc":"2.0","method":method,"params":params}))
            .await;
    }

    pub async fn respond(&mut self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc":"2.0","id":id,"result":result}))
            .await;
    }

    /// The next message (one a typed wait passed over first); fails the
    /// test on a non-JSON-RPC stdout line.
    pub async fn next(&mut self) -> Value {
        if let Some(held) = self.held.pop_front() {
            return held;
        }
        let got = tokio::time::timeout(WAIT, self.rx.recv())
            .await
            .expect("timed out waiting for a message from maia")
            .expect("maia closed stdout");
        let value =
            got.unwrap_or_else(|line| panic!("stdout carried a non JSON-RPC line: {line:?}"));
        self.seen.push(value.clone());
        value
    }

    /// The next stdout line, which must be a JSON-RPC batch's answer (an
    /// array of messages).
    pub async fn next_batch(&mut self) -> Value {
        let got = tokio::time::timeout(WAIT, self.rx.recv())
            .await
            .expect("timed out waiting for a batch from maia")
            .expect("maia closed stdout");
        match got {
            Ok(message) => panic!("a message, not a batch: {message}"),
            Err(line) => serde_json::from_str::<Value>(&line)
                .ok()
                .filter(Value::is_array)
                .unwrap_or_else(|| panic!("stdout carried a line that is no batch: {line:?}")),
        }
    }

    /// The next message if one arrives within `within`.
    pub async fn next_within(&mut self, within: Duration) -> Option<Value> {
        if let Some(held) = self.held.pop_front() {
            return Some(held);
        }
        let got = tokio::time::timeout(within, self.rx.recv()).await.ok()?;
        let value = got
            .expect("maia closed stdout")
            .unwrap_or_else(|line| panic!("stdout carried a non JSON-RPC line: {line:?}"));
        self.seen.push(value.clone());
        Some(value)
    }

    /// Waits for the first message matching `pred`; returns it and the
    /// messages received before it.
    pub async fn wait_for(&mut self, pred: impl Fn(&Value) -> bool) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let m = self.next().await;
            if pred(&m) {
                return (m, before);
            }
            before.push(m);
        }
    }

    /// Waits for the response to request `id`, answering agent requests
    /// with `answer` (which returns the `result` to send, or `None` to
    /// leave the request alone). Returns the response and what came before.
    pub async fn response_with(
        &mut self,
        id: u64,
        mut answer: impl FnMut(&Value) -> Option<Value>,
    ) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let m = self.next().await;
            if m.get("method").is_none() && m["id"] == json!(id) {
                return (m, before);
            }
            if m.get("method").is_some()
                && m.get("id").is_some()
                && let Some(result) = answer(&m)
            {
                let rid = m["id"].clone();
                self.respond(&rid, result).await;
            }
            before.push(m);
        }
    }

    pub async fn response(&mut self, id: u64) -> (Value, Vec<Value>) {
        self.response_with(id, |m| panic!("unexpected agent request: {m}"))
            .await
    }

    pub async fn initialize_with(&mut self, client_capabilities: Value) -> Value {
        let id = self
            .request(
                "initialize",
                json!({"protocolVersion": 1, "clientCapabilities": client_capabilities,
                       "clientInfo": {"name": "protocol-tests", "version": "1"}}),
            )
            .await;
        self.response(id).await.0
    }

    pub async fn initialize(&mut self) -> Value {
        self.initialize_with(json!({})).await
    }

    pub async fn new_session(&mut self) -> String {
        self.new_session_result().await.0
    }

    /// Opens a session; returns its id and the whole `session/new` result
    /// (modes, config options), once the command list has followed it.
    pub async fn new_session_result(&mut self) -> (String, Value) {
        let cwd = self.cwd();
        let id = self
            .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        let (resp, _) = self.response(id).await;
        let sid = resp["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no sessionId in {resp}"))
            .to_owned();
        // The command list always follows the response.
        let (commands, _) = self
            .wait_for(|m| m["params"]["update"]["sessionUpdate"] == "available_commands_update")
            .await;
        assert_eq!(commands["params"]["sessionId"], sid);
        (sid, resp["result"].clone())
    }

    /// Scripts one model response with `calls`, then a final text answer,
    /// and prompts; returns the prompt response and the messages before it.
    pub async fn tool_turn(
        &mut self,
        sid: &str,
        calls: &[(&str, &str, Value)],
        answer: impl FnMut(&Value) -> Option<Value>,
    ) -> (Value, Vec<Value>) {
        self.mock.push(maia_test_support::tool_calls_reply(calls));
        self.mock.push(maia_test_support::text_reply("done"));
        let id = self.prompt(sid, "go").await;
        self.response_with(id, answer).await
    }

    /// Initializes and opens a session.
    pub async fn ready() -> (Maia, String) {
        let mut maia = Maia::start().await;
        maia.initialize().await;
        let sid = maia.new_session().await;
        (maia, sid)
    }

    /// Starts with `options`, initializes and opens a session.
    pub async fn ready_with(options: Options) -> (Maia, String) {
        let mut maia = Maia::start_with(options).await;
        maia.initialize().await;
        let sid = maia.new_session().await;
        (maia, sid)
    }

    /// Prompts `sid` with `text`; returns the response and the messages
    /// before it.
    pub async fn turn(&mut self, sid: &str, text: &str) -> (Value, Vec<Value>) {
        let id = self.prompt(sid, text).await;
        self.response(id).await
    }

    /// Scripts the text answer `reply` and prompts `sid` with `text`;
    /// returns the prompt response and the messages before it.
    pub async fn answered_turn(
        &mut self,
        sid: &str,
        text: &str,
        reply: &str,
    ) -> (Value, Vec<Value>) {
        self.mock.push(maia_test_support::text_reply(reply));
        self.turn(sid, text).await
    }

    /// One answered turn, `/rename` to `name`, then `/compact` (answered
    /// "summary"); returns the messages before the compaction's response.
    pub async fn compact_renamed(&mut self, sid: &str, name: &str) -> Vec<Value> {
        self.answered_turn(sid, "hello", "answer").await;
        self.turn(sid, &format!("/rename {name}")).await;
        self.mock.push(maia_test_support::text_reply("summary"));
        self.turn(sid, "/compact").await.1
    }

    /// Sends `method` (`session/load` or `session/resume`) for `sid` in the
    /// session's cwd with no MCP servers; returns the response and the
    /// messages before it.
    pub async fn reopen(&mut self, method: &str, sid: &str) -> (Value, Vec<Value>) {
        let cwd = self.cwd();
        let id = self
            .request(
                method,
                json!({"sessionId": sid, "cwd": cwd, "mcpServers": []}),
            )
            .await;
        self.response(id).await
    }

    /// `session/load` of `sid`; returns the response and the replay before it.
    pub async fn load(&mut self, sid: &str) -> (Value, Vec<Value>) {
        self.reopen("session/load", sid).await
    }

    pub async fn prompt(&mut self, sid: &str, text: &str) -> u64 {
        self.prompt_blocks(sid, json!([{"type": "text", "text": text}]))
            .await
    }

    pub async fn prompt_blocks(&mut self, sid: &str, blocks: Value) -> u64 {
        self.request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": blocks}),
        )
        .await
    }

    /// Waits until the process exits, failing after `within`.
    pub async fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        tokio::time::timeout(within, self.child.wait())
            .await
            .expect("maia did not exit in time")
            .unwrap()
    }
}

/// The managed policy's file name in a test's home folder.
pub const MANAGED_FILE: &str = "managed-settings.json";

/// Spawns `maia acp` (or what `launcher` starts) with `home` as HOME;
/// returns the child, its stdin, its stdout lines (parsed) and its
/// collected stderr.
fn launch(
    home: &Path,
    (args, env): (&[String], &[(String, String)]),
    launcher: Option<&Launcher>,
    capture_log: Option<&str>,
    fault: Option<&str>,
) -> (Child, Option<ChildStdin>, Lines, Arc<Mutex<String>>) {
    let mut command = match launcher {
        None => Command::new(env!("CARGO_BIN_EXE_maia")),
        Some(l) => {
            let mut c = Command::new(&l.program);
            c.args(&l.args).current_dir(&l.dir);
            c.envs(l.env.iter().map(|(k, v)| (k, v)));
            c
        }
    };
    match fault {
        Some(fault) => command.env("MAIA_FAULT", fault),
        None => command.env_remove("MAIA_FAULT"),
    };
    let mut child = command
        .arg("acp")
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("HOME", home)
        // The managed policy, when a test wrote one there.
        .env("MAIA_MANAGED_SETTINGS", home.join(MANAGED_FILE))
        .env_remove("LITELLM_API_KEY")
        .env_remove("MAIA_MODEL")
        .env(
            "MAIA_LOG",
            capture_log.map_or_else(
                || std::env::var("MAIA_LOG").unwrap_or_else(|_| "warn".into()),
                str::to_owned,
            ),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(if capture_log.is_some() {
            Stdio::piped()
        } else {
            Stdio::inherit()
        })
        .kill_on_drop(true)
        .spawn()
        .expect("spawn maia");
    let stdin = child.stdin.take();
    let stdout = child.stdout.take().unwrap();
    let stderr_text = Arc::new(Mutex::new(String::new()));
    if let Some(stderr) = child.stderr.take() {
        let sink = stderr_text.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut text = sink.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
            }
        });
    }
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let parsed = match serde_json::from_str::<Value>(&line) {
                Ok(v) if v.get("jsonrpc") == Some(&json!("2.0")) => Ok(v),
                _ => Err(line),
            };
            if tx.send(parsed).is_err() {
                return;
            }
        }
    });
    (child, stdin, rx, stderr_text)
}
