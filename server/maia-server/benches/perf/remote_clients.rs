//! `maia serve` from its own clients, without the bridge: per-delta latency
//! over a WebSocket and over Streamable HTTP (SSE on HTTP/2 cleartext),
//! against the same stream over stdio; one session's fan-out to 100
//! observers (each delta timed at the last observer to have it); the memory
//! of an idle connection.
//!
//! The mock LLM runs on the setup's runtime and the clients on a runtime of
//! their own, so a client's reading never delays the model's stream. All
//! times are on one clock: the mock's send of a piece → the client's parse
//! of the message that carries it.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use maia_test_support as mock;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::harness::{Maia, Table, WAIT, env_usize, proc_kb, text_of};
use crate::stats::{Stats, ms};

/// A `maia serve` on a loopback port, killed when dropped.
pub(crate) struct Daemon {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub(crate) addr: String,
    pub(crate) tokens: HashMap<String, String>,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `maia serve` on `home` with one token per `(name, observer)`.
pub(crate) fn start_daemon(home: &Path, tokens: &[(&str, bool)], args: &[&str]) -> Daemon {
    let mut made = HashMap::new();
    for (name, observer) in tokens {
        let mut add = vec!["serve", "token", "add"];
        if *observer {
            add.push("--observer");
        }
        add.push(name);
        let out = Command::new(env!("CARGO_BIN_EXE_maia"))
            .args(&add)
            .env("HOME", home)
            .output()
            .unwrap();
        assert!(out.status.success(), "token add {name}");
        let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        made.insert((*name).to_owned(), token);
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_maia"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .env("HOME", home)
        .env("MAIA_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().unwrap().unwrap();
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest.split('/').next().unwrap().to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    Daemon {
        child,
        addr,
        tokens: made,
    }
}

/// Messages as they arrive, each stamped when it was parsed.
type Stamped = (Instant, Value);

struct Ws {
    tx: SplitSink<WebSocketStream<MaybeTlsStream<TcpStream>>, Message>,
    rx: mpsc::UnboundedReceiver<Stamped>,
    next_id: u64,
}

async fn ws(addr: &str, token: &str) -> Ws {
    let mut request = format!("ws://{addr}/acp").into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let (socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let (tx, mut incoming) = socket.split();
    let (sender, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(Ok(message)) = incoming.next().await {
            if let Message::Text(text) = message {
                let value: Value = serde_json::from_str(text.as_str()).unwrap();
                if sender.send((Instant::now(), value)).is_err() {
                    return;
                }
            }
        }
    });
    Ws { tx, rx, next_id: 1 }
}

impl Ws {
    async fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.tx
            .send(Message::Text(message.to_string().into()))
            .await
            .unwrap();
        id
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params).await;
        until(&mut self.rx, |m| is_response(m, id))
            .await
            .pop()
            .unwrap()
            .1
    }
}

fn is_response(m: &Value, id: u64) -> bool {
    m["id"] == id && m.get("method").is_none()
}

/// Every message up to and including the first that matches `pred`.
async fn until(
    rx: &mut mpsc::UnboundedReceiver<Stamped>,
    pred: impl Fn(&Value) -> bool,
) -> Vec<Stamped> {
    let mut seen = Vec::new();
    loop {
        let message = tokio::time::timeout(WAIT, rx.recv())
            .await
            .expect("timed out")
            .expect("the connection closed");
        let done = pred(&message.1);
        seen.push(message);
        if done {
            return seen;
        }
    }
}

fn init() -> Value {
    json!({"protocolVersion": 1, "clientCapabilities": {},
           "clientInfo": {"name": "bench", "version": "1"}})
}

fn prompt(sid: &str) -> Value {
    json!({"sessionId": sid, "prompt": [{"type": "text", "text": "stream"}]})
}

/// `n` words for the mock to stream 1 ms apart.
fn words(tag: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{tag}{i} ")).collect()
}

fn push_words(mock: &mock::MockLlm, words: &[String]) -> usize {
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    mock.push(mock::text_chunks(&refs, Duration::from_millis(1)));
    mock.piece_times().len()
}

/// When each of `words` arrived in `messages` (in order, each once).
fn arrivals(messages: &[Stamped], words: &[String]) -> Vec<Instant> {
    let mut at = Vec::with_capacity(words.len());
    for (when, m) in messages {
        if let Some(text) = text_of(m)
            && at.len() < words.len()
            && text == words[at.len()]
        {
            at.push(*when);
        }
    }
    assert_eq!(
        at.len(),
        words.len(),
        "every delta forwarded once, in order"
    );
    at
}

/// Latencies (ms) of `at` against the mock's sends, the stream's first piece
/// (its role) being `before`.
fn latencies(mock: &mock::MockLlm, before: usize, at: &[Instant]) -> Stats {
    let times = mock.piece_times();
    Stats::new(
        at.iter()
            .enumerate()
            .map(|(i, when)| ms(*when - times[before + 1 + i]))
            .collect(),
    )
}

fn row(stats: &Stats) -> String {
    format!(
        "p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        stats.pct(50.0),
        stats.pct(99.0),
        stats.max()
    )
}

pub(crate) fn bench_remote_clients(table: &mut Table) {
    let s = crate::setup();
    let cwd = s.cwd.path().canonicalize().unwrap();
    let n = env_usize("MAIA_BENCH_CHUNKS", 2000);
    let fan = env_usize("MAIA_BENCH_FANOUT_CHUNKS", 500);
    let home = s.home.path();
    let daemon = start_daemon(
        home,
        &[("editor", false), ("watcher", true)],
        &["--max-connections-per-token", "1100"],
    );
    let clients = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let new = json!({"cwd": cwd, "mcpServers": []});

    // stdio, the reference.
    let (mut local, _) = Maia::spawn(home);
    local.initialize();
    let (sid, _) = local.new_session(&cwd);
    let stdio_words = words("s", n);
    let before = push_words(&s.mock, &stdio_words);
    let (id, _) = local.prompt(&sid, "stream");
    let messages = local.until_response(id);
    let at = arrivals(&messages, &stdio_words);
    let stdio = latencies(&s.mock, before, &at);
    local.kill();

    // A WebSocket client.
    let editor = daemon.tokens["editor"].clone();
    let websocket = clients.block_on(async {
        let mut c = ws(&daemon.addr, &editor).await;
        c.call("initialize", init()).await;
        let created = c.call("session/new", new.clone()).await;
        let sid = created["result"]["sessionId"].as_str().unwrap().to_owned();
        let ws_words = words("w", n);
        let before = push_words(&s.mock, &ws_words);
        let id = c.request("session/prompt", prompt(&sid)).await;
        let messages = until(&mut c.rx, |m| is_response(m, id)).await;
        latencies(&s.mock, before, &arrivals(&messages, &ws_words))
    });

    // A Streamable HTTP client: HTTP/2 cleartext, the session's SSE stream.
    let sse = clients.block_on(sse_latency(&daemon, &editor, &new, &s.mock, n));

    table.add(
        format!("per-delta latency over stdio ({n} deltas, 1 ms apart)"),
        row(&stdio),
    );
    for (name, stats) in [
        ("a WebSocket", &websocket),
        ("Streamable HTTP (SSE, h2c)", &sse),
    ] {
        table.add(
            format!("per-delta latency from `maia serve` over {name} ({n} deltas)"),
            row(stats),
        );
        let added = stats.pct(50.0) - stdio.pct(50.0);
        table.check(
            format!("added by {name} at p50"),
            format!("{added:.3} ms"),
            "< 0.2 ms",
            Some(added < 0.2),
        );
    }

    // Fan-out: one controller and 100 observers on one session.
    let (fanout, took) = clients.block_on(fan_out(&daemon, &new, &s.mock, fan, 100));
    table.add(
        format!(
            "{fan} deltas to 1 controller + 100 observers over WebSockets: per delta at the last observer"
        ),
        format!("{} (the end at the last observer {took:.0} ms after the prompt)", row(&fanout)),
    );

    // Memory of an idle connection.
    let pid = daemon.child.id();
    let per = clients.block_on(async {
        let before = proc_kb(pid, "VmRSS:");
        let mut idle = Vec::new();
        for _ in 0..1000 {
            let mut c = ws(&daemon.addr, &editor).await;
            c.call("initialize", init()).await;
            idle.push(c);
        }
        let after = proc_kb(pid, "VmRSS:");
        after.saturating_sub(before) as f64 / 1000.0
    });
    table.add(
        "memory per idle WebSocket connection (1,000 initialized connections, the daemon's RSS delta)",
        format!("{per:.1} KiB"),
    );
    drop(clients);
}

async fn sse_latency(
    daemon: &Daemon,
    token: &str,
    new: &Value,
    mock: &mock::MockLlm,
    n: usize,
) -> Stats {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let url = format!("http://{}/acp", daemon.addr);
    let post = |connection: Option<&str>, session: Option<&str>, body: Value| {
        let mut request = client
            .post(&url)
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(connection) = connection {
            request = request.header("acp-connection-id", connection);
        }
        if let Some(session) = session {
            request = request.header("acp-session-id", session);
        }
        request
    };
    let stream = |connection: &str, session: Option<&str>| {
        let mut request = client
            .get(&url)
            .bearer_auth(token)
            .header("accept", "text/event-stream")
            .header("acp-connection-id", connection);
        if let Some(session) = session {
            request = request.header("acp-session-id", session);
        }
        request
    };
    let answered = post(
        None,
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init()}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(answered.status(), 200);
    let connection = answered.headers()["acp-connection-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut on_connection = events(stream(&connection, None).send().await.unwrap());
    let status = post(
        Some(&connection),
        None,
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": new}),
    )
    .send()
    .await
    .unwrap()
    .status();
    assert_eq!(status, 202);
    let created = until(&mut on_connection, |m| m["id"] == 2)
        .await
        .pop()
        .unwrap()
        .1;
    let sid = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let mut on_session = events(stream(&connection, Some(&sid)).send().await.unwrap());
    let sse_words = words("h", n);
    let before = push_words(mock, &sse_words);
    let status = post(
        Some(&connection),
        Some(&sid),
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt(&sid)}),
    )
    .send()
    .await
    .unwrap()
    .status();
    assert_eq!(status, 202);
    let messages = until(&mut on_session, |m| is_response(m, 3)).await;
    latencies(mock, before, &arrivals(&messages, &sse_words))
}

/// The JSON-RPC messages of an SSE response, stamped when parsed.
fn events(response: reqwest::Response) -> mpsc::UnboundedReceiver<Stamped> {
    assert_eq!(response.status(), 200);
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
                if data.is_empty() {
                    continue;
                }
                let value = serde_json::from_str(&data.join("\n")).unwrap();
                if tx.send((Instant::now(), value)).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// Per-delta latency at the last of `observers` observers to have each
/// delta, and when the last one had the turn's end (ms after the prompt).
async fn fan_out(
    daemon: &Daemon,
    new: &Value,
    mock: &mock::MockLlm,
    n: usize,
    observers: usize,
) -> (Stats, f64) {
    let mut controller = ws(&daemon.addr, &daemon.tokens["editor"]).await;
    controller.call("initialize", init()).await;
    let created = controller.call("session/new", new.clone()).await;
    let sid = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let mut resume = new.clone();
    resume["sessionId"] = json!(sid);
    let mut readers = Vec::new();
    for _ in 0..observers {
        let mut o = ws(&daemon.addr, &daemon.tokens["watcher"]).await;
        o.call("initialize", init()).await;
        let answer = o.call("session/resume", resume.clone()).await;
        assert!(answer.get("result").is_some(), "{answer}");
        readers.push(tokio::spawn(async move {
            until(&mut o.rx, |m| m["method"] == "_session/turn_ended").await
        }));
    }
    let fan_words = words("f", n);
    let before = push_words(mock, &fan_words);
    let started = Instant::now();
    let id = controller.request("session/prompt", prompt(&sid)).await;
    until(&mut controller.rx, |m| is_response(m, id)).await;
    let mut last = vec![started; n];
    let mut end = started;
    for reader in readers {
        let seen = reader.await.unwrap();
        end = end.max(seen.last().unwrap().0);
        for (i, at) in arrivals(&seen, &fan_words).into_iter().enumerate() {
            last[i] = last[i].max(at);
        }
    }
    (latencies(mock, before, &last), ms(end - started))
}
