//! Clients for the `maia serve` tests: the daemon started on a loopback
//! port against the mock LLM with tokens made by `maia serve token add`,
//! a WebSocket client and a Streamable HTTP (HTTP/2, SSE) client.

use std::collections::HashMap;
use std::process::Stdio;

use futures_util::{SinkExt, StreamExt};
use maia_test_support::MockLlm;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::harness::WAIT;
use crate::harness::answers::select;
use crate::harness::client::{Acp, Exchange, Transport, acp, hold_in};
use crate::harness::flows::{Flows, init_request};

/// A model reply calling `Write` on `out.txt` ("hello\n"), id `call_w`.
pub fn write_call() -> maia_test_support::Reply {
    maia_test_support::tool_calls_reply(&[(
        "call_w",
        "Write",
        json!({"file_path": "out.txt", "content": "hello\n"}),
    )])
}

/// The `initialize` request the tests send (id 1), as one message: for the
/// connections that are not a [`Ws`] (Streamable HTTP, raw sockets).
pub fn init_message() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_request()})
}

pub struct Daemon {
    /// Killed when the test ends.
    #[allow(dead_code)]
    pub child: Child,
    pub home: TempDir,
    pub cwd: TempDir,
    pub mock: MockLlm,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    pub tokens: HashMap<String, String>,
    args: Vec<String>,
    /// The open descriptors the daemon may have (0: not limited).
    files: u64,
}

/// The `maia` binary the daemon tests run: `$MAIA_TEST_EXE` when set (a
/// copy of a build kept apart from a target folder other builds share),
/// else the one cargo built with these tests.
pub fn maia_exe() -> std::ffi::OsString {
    std::env::var_os("MAIA_TEST_EXE").unwrap_or_else(|| env!("CARGO_BIN_EXE_maia").into())
}

/// Runs `maia serve ARGS` with `home` as HOME; its stdout and whether it
/// succeeded.
pub fn serve_command(home: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(maia_exe())
        .arg("serve")
        .args(args)
        .env("HOME", home)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The managed policy's file in a daemon's home folder.
const MANAGED_FILE: &str = "managed-settings.json";

impl Daemon {
    /// Starts the daemon with one token per `(name, extra args)`.
    pub async fn start(tokens: &[(&str, &[&str])], args: &[&str]) -> Daemon {
        Daemon::start_limited(tokens, args, 0).await
    }

    /// `start`, the daemon allowed `files` open descriptors (0: as the
    /// tests are).
    pub async fn start_limited(tokens: &[(&str, &[&str])], args: &[&str], files: u64) -> Daemon {
        Daemon::start_in(tokens, args, files, None).await
    }

    /// `start` under the managed policy `policy` (docs/permissions.md).
    pub async fn start_managed(tokens: &[(&str, &[&str])], policy: &Value) -> Daemon {
        Daemon::start_in(tokens, &[], 0, Some(policy)).await
    }

    async fn start_in(
        tokens: &[(&str, &[&str])],
        args: &[&str],
        files: u64,
        policy: Option<&Value>,
    ) -> Daemon {
        let mock = MockLlm::start().await;
        let home = tempfile::tempdir().unwrap();
        if let Some(policy) = policy {
            std::fs::write(home.path().join(MANAGED_FILE), policy.to_string()).unwrap();
        }
        let cwd = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".maia")).unwrap();
        let settings = json!({"LiteLLM_URL": mock.url(), "model": "mock-model",
            "llm_retry_base_ms": 10});
        std::fs::write(
            home.path().join(".maia/settings.json"),
            settings.to_string(),
        )
        .unwrap();
        let mut made = HashMap::new();
        for (name, extra) in tokens {
            let mut add = vec!["token", "add"];
            add.extend_from_slice(extra);
            add.push(name);
            let (ok, out, err) = serve_command(home.path(), &add);
            assert!(ok, "{err}");
            let token = out.trim().to_owned();
            assert!(
                token.starts_with("maia_") && !token.contains('\n'),
                "{out:?}"
            );
            made.insert((*name).to_owned(), token);
        }
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let (child, addr) = launch(home.path(), &args, files).await;
        Daemon {
            child,
            home,
            cwd,
            mock,
            addr,
            tokens: made,
            args,
            files,
        }
    }

    /// Kills the daemon with SIGKILL and starts it again on the same HOME
    /// (a new port).
    pub async fn restart(&mut self) {
        self.child.start_kill().unwrap();
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("maia serve did not die")
            .unwrap();
        let (child, addr) = launch(self.home.path(), &self.args, self.files).await;
        self.child = child;
        self.addr = addr;
    }
}

/// Starts `maia serve --listen 127.0.0.1:0 ARGS` on `home` (with `files`
/// open descriptors at most, through the shell's `ulimit`, when not 0);
/// the child and the address it listens on.
async fn launch(home: &std::path::Path, args: &[String], files: u64) -> (Child, String) {
    let mut command = if files == 0 {
        Command::new(maia_exe())
    } else {
        let mut shell = Command::new("/bin/sh");
        shell
            .args(["-c", &format!("ulimit -n {files} && exec \"$0\" \"$@\"")])
            .arg(maia_exe());
        shell
    };
    let mut child = command
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .env("HOME", home)
        // The managed policy, when a test wrote one there (none else).
        .env("MAIA_MANAGED_SETTINGS", home.join(MANAGED_FILE))
        .env("MAIA_LOG", "info")
        .env_remove("LITELLM_API_KEY")
        .env_remove("MAIA_MODEL")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = tokio::time::timeout(WAIT, async {
        while let Ok(Some(line)) = lines.next_line().await {
            // `listening on http://ADDR/acp` (or https://).
            if let Some(rest) = line.split("listening on ").nth(1) {
                let rest = rest.split("://").nth(1).unwrap();
                return rest.split('/').next().unwrap().to_owned();
            }
        }
        panic!("maia serve did not listen");
    })
    .await
    .expect("maia serve did not start in time");
    // Keep draining stderr (the daemon must never block on it).
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, addr)
}

impl Daemon {
    pub fn url(&self) -> String {
        format!("http://{}/acp", self.addr)
    }

    pub fn cwd(&self) -> std::path::PathBuf {
        self.cwd.path().canonicalize().unwrap()
    }

    /// A WebSocket client of `token`, initialized (typed).
    pub async fn client(&self, token: &str) -> Ws {
        let mut ws = self.ws(token).await;
        ws.handshake().await;
        ws
    }

    /// A client of `token` with a session in the daemon's folder and one
    /// prompt ("hi") the model answered `reply` (saved), ended by the turn.
    pub async fn session_with_turn(&self, token: &str, reply: &str) -> (Ws, acp::SessionId) {
        let mut ws = self.client(token).await;
        let opened = ws
            .send_request(acp::NewSessionRequest::new(self.cwd()))
            .await
            .unwrap_or_else(|e| panic!("session/new failed: {e:?}"));
        self.mock.push(maia_test_support::text_reply(reply));
        let turn = ws.prompt_turn(&opened.session_id, "hi").await;
        assert_eq!(turn.ok().stop_reason, acp::StopReason::EndTurn);
        (ws, opened.session_id)
    }

    /// A turn of `sid` on `ws` prompted with `text`: the model writes
    /// `out.txt` ([`write_call`]), allowed once, then answers `reply`.
    pub async fn write_turn(
        &self,
        ws: &mut Ws,
        sid: &acp::SessionId,
        text: &str,
        reply: &str,
    ) -> Exchange<acp::PromptResponse> {
        self.mock.push(write_call());
        self.mock.push(maia_test_support::text_reply(reply));
        ws.prompt_with(sid, text, select(acp::PermissionOptionKind::AllowOnce))
            .await
    }

    pub async fn ws(&self, token: &str) -> Ws {
        match self.try_ws(token).await {
            Ok(ws) => ws,
            Err(status) => panic!("the upgrade was refused: {status}"),
        }
    }

    /// The WebSocket upgrade request of `token`'s.
    fn upgrade_request(
        &self,
        token: &str,
    ) -> tokio_tungstenite::tungstenite::handshake::client::Request {
        let mut request = format!("ws://{}/acp", self.addr)
            .into_client_request()
            .unwrap();
        request.headers_mut().insert(
            "authorization",
            format!("Bearer {}", self.tokens[token]).parse().unwrap(),
        );
        request
    }

    /// A WebSocket that nobody reads unless the test does.
    pub async fn raw_ws(
        &self,
        token: &str,
    ) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>
    {
        let request = self.upgrade_request(token);
        tokio_tungstenite::connect_async(request).await.unwrap().0
    }

    /// The daemon's resident memory, in KiB.
    pub fn rss_kib(&self) -> u64 {
        let pid = self.child.id().unwrap();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    /// A WebSocket client, or the HTTP status that refused it.
    pub async fn try_ws(&self, token: &str) -> Result<Ws, u16> {
        let request = self.upgrade_request(token);
        let (socket, response) = match tokio_tungstenite::connect_async(request).await {
            Ok(connected) => connected,
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                return Err(response.status().as_u16());
            }
            Err(e) => panic!("{e}"),
        };
        assert!(response.headers().contains_key("acp-connection-id"));
        Ok(Ws::from_socket(socket))
    }
}

type Sink = futures_util::stream::SplitSink<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    Message,
>;

/// A WebSocket client.
pub struct Ws {
    tx: Sink,
    incoming: mpsc::UnboundedReceiver<Value>,
    /// Every message received, in order.
    pub seen: Vec<Value>,
    next_id: u64,
    /// Messages a typed wait passed over, for the next reads.
    held: std::collections::VecDeque<Value>,
}

impl Ws {
    /// A client on an open socket: a task reads it into `incoming`.
    pub fn from_socket(
        socket: tokio_tungstenite::WebSocketStream<
            tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
        >,
    ) -> Ws {
        let (tx, mut rx) = socket.split();
        let (lines, incoming) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(Ok(message)) = rx.next().await {
                let value = match message {
                    Message::Text(text) => serde_json::from_str(text.as_str()).unwrap(),
                    Message::Close(frame) => {
                        json!({"closed": frame.map(|f| f.reason.to_string()).unwrap_or_default()})
                    }
                    _ => continue,
                };
                if lines.send(value).is_err() {
                    return;
                }
            }
        });
        Ws {
            tx,
            incoming,
            seen: Vec::new(),
            next_id: 1,
            held: Default::default(),
        }
    }

    pub async fn send(&mut self, message: &Value) {
        self.tx
            .send(Message::Text(message.to_string().into()))
            .await
            .unwrap();
    }

    pub async fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    pub async fn respond(&mut self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await;
    }

    pub async fn next(&mut self) -> Value {
        if let Some(held) = self.held.pop_front() {
            return held;
        }
        let message = tokio::time::timeout(WAIT, self.incoming.recv())
            .await
            .expect("timed out waiting for a message")
            .expect("the connection closed");
        self.seen.push(message.clone());
        message
    }

    /// The next message matching `pred`, and the ones before it.
    pub async fn wait_for(&mut self, pred: impl Fn(&Value) -> bool) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let message = self.next().await;
            if pred(&message) {
                return (message, before);
            }
            before.push(message);
        }
    }

    pub async fn response(&mut self, id: u64) -> Value {
        self.wait_for(|m| m["id"] == id && m.get("method").is_none())
            .await
            .0
    }

    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params).await;
        self.response(id).await
    }

    /// Whether the connection ends (a close frame, or the stream stops)
    /// within the wait.
    pub async fn ends(&mut self) -> bool {
        loop {
            match tokio::time::timeout(WAIT, self.incoming.recv()).await {
                Ok(None) => return true,
                Ok(Some(m)) if m.get("closed").is_some() => return true,
                Ok(Some(_)) => {}
                Err(_) => return false,
            }
        }
    }

    pub async fn close(mut self) {
        let _ = self.tx.send(Message::Close(None)).await;
    }
}

impl Transport for Ws {
    fn write(&mut self, message: &Value) -> impl Future<Output = ()> {
        self.send(message)
    }

    async fn read_within(&mut self, within: std::time::Duration) -> Option<Value> {
        if let Some(held) = self.held.pop_front() {
            return Some(held);
        }
        let message = tokio::time::timeout(within, self.incoming.recv())
            .await
            .ok()?
            .expect("the connection closed");
        self.seen.push(message.clone());
        Some(message)
    }

    fn hold(&mut self, messages: Vec<Value>) {
        hold_in(&mut self.held, messages);
    }

    fn fresh_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }
}

/// A Streamable HTTP client on HTTP/2 (h2c on loopback).
pub struct Http {
    pub client: reqwest::Client,
    pub url: String,
    pub token: String,
    pub connection: String,
}

impl Http {
    pub fn client() -> reqwest::Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::builder()
            .http2_prior_knowledge()
            .build()
            .unwrap()
    }

    /// A Streamable HTTP connection of `token`'s, initialized (answered
    /// `200` with its `Acp-Connection-Id`), and its connection stream.
    pub async fn open(daemon: &Daemon, token: &str) -> (Http, mpsc::UnboundedReceiver<Value>) {
        let client = Http::client();
        let init = init_message();
        let answered = client
            .post(daemon.url())
            .bearer_auth(token)
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
            token: token.to_owned(),
            connection,
        };
        let stream = http.stream(None).await;
        (http, stream)
    }

    /// POSTs `body` (with `Acp-Session-Id` when `session`) and expects it
    /// taken: `202`.
    pub async fn send(&self, session: Option<&str>, body: &Value) {
        let status = self.post(session, body).send().await.unwrap().status();
        assert_eq!(status, 202, "{body}");
    }

    pub fn post(&self, session: Option<&str>, body: &Value) -> reqwest::RequestBuilder {
        let mut request = self
            .client
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("content-type", "application/json")
            .header("acp-connection-id", &self.connection)
            .body(body.to_string());
        if let Some(session) = session {
            request = request.header("acp-session-id", session);
        }
        request
    }

    /// Opens a stream (`session`: a session's); its messages, in order.
    pub async fn stream(&self, session: Option<&str>) -> mpsc::UnboundedReceiver<Value> {
        let mut request = self
            .client
            .get(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "text/event-stream")
            .header("acp-connection-id", &self.connection);
        if let Some(session) = session {
            request = request.header("acp-session-id", session);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.version(), reqwest::Version::HTTP_2);
        let (tx, rx) = mpsc::unbounded_channel();
        let mut body = response.bytes_stream();
        tokio::spawn(async move {
            let mut buffer = String::new();
            while let Some(Ok(chunk)) = body.next().await {
                buffer.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(end) = buffer.find("\n\n") {
                    let event: String = buffer.drain(..end + 2).collect();
                    let data: Vec<&str> = event
                        .lines()
                        .filter_map(|l| l.strip_prefix("data:"))
                        .map(str::trim_start)
                        .collect();
                    if !data.is_empty()
                        && tx
                            .send(serde_json::from_str(&data.join("\n")).unwrap())
                            .is_err()
                    {
                        return;
                    }
                }
            }
        });
        rx
    }
}

/// The next message of `stream` matching `pred`, and the ones before it.
pub async fn wait_on(
    stream: &mut mpsc::UnboundedReceiver<Value>,
    pred: impl Fn(&Value) -> bool,
) -> (Value, Vec<Value>) {
    let mut before = Vec::new();
    loop {
        let message = tokio::time::timeout(WAIT, stream.recv())
            .await
            .expect("timed out waiting on a stream")
            .expect("the stream ended");
        if pred(&message) {
            return (message, before);
        }
        before.push(message);
    }
}

/// The sequence numbers of `messages`' numbered session messages.
pub fn seqs(messages: &[Value]) -> Vec<u64> {
    messages
        .iter()
        .filter(|m| m["params"]["_meta"]["maia"]["seq"].is_u64())
        .map(|m| m["params"]["_meta"]["maia"]["seq"].as_u64().unwrap())
        .collect()
}
