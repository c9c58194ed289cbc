//! `maia serve` through the binary on loopback: the ACP transport RFD's
//! WebSocket and Streamable HTTP, clients attached to one live session,
//! disconnects, observers, tokens and the browser-facing checks, and the
//! `maia acp --connect` bridge.

use std::time::Duration;

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::client::{Acp, acp};
use crate::harness::{WAIT, choose, eventually, is_permission};
use crate::remote_client::{Daemon, Http, seqs, serve_command, wait_on, write_call};

const EDITOR: (&str, &[&str]) = ("editor", &[]);
const PHONE: (&str, &[&str]) = ("phone", &[]);
const WATCHER: (&str, &[&str]) = ("watcher", &["--observer"]);

fn init_params() -> Value {
    json!({"protocolVersion": 1, "clientCapabilities": {},
           "clientInfo": {"name": "remote-tests", "version": "1"}})
}

fn new_params(daemon: &Daemon) -> Value {
    json!({"cwd": daemon.cwd(), "mcpServers": []})
}

fn load_params(daemon: &Daemon, sid: &str, since: Option<u64>) -> Value {
    let mut params = json!({"sessionId": sid, "cwd": daemon.cwd(), "mcpServers": []});
    if let Some(since) = since {
        params["_meta"] = json!({"maia": {"since": since}});
    }
    params
}

/// Whether `m` is the `$/cancel_request` of the question `id`.
fn cancels(m: &Value, id: &Value) -> bool {
    m["method"] == "$/cancel_request" && m["params"]["requestId"] == *id
}

async fn ws_session(daemon: &Daemon, token: &str) -> (crate::remote_client::Ws, String) {
    let mut ws = daemon.ws(token).await;
    let init = ws.call("initialize", init_params()).await;
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    let created = ws.call("session/new", new_params(daemon)).await;
    let sid = created["result"]["sessionId"].as_str().unwrap().to_owned();
    (ws, sid)
}

/// The editor's session, with the phone attached to it as a second
/// controller.
async fn editor_and_phone(
    daemon: &Daemon,
) -> (crate::remote_client::Ws, crate::remote_client::Ws, String) {
    let (a, sid) = ws_session(daemon, "editor").await;
    let mut b = daemon.client("phone").await;
    let loaded = b
        .call("session/load", load_params(daemon, &sid, None))
        .await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    (a, b, sid)
}

/// Sends `text` as a prompt of `sid`; the request's id.
async fn prompt(ws: &mut crate::remote_client::Ws, sid: &str, text: &str) -> u64 {
    ws.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
    )
    .await
}

#[tokio::test]
async fn remote_websocket_serves_a_prompt_with_a_tool_call_and_a_permission() {
    let daemon = Daemon::start(&[EDITOR], &[]).await;
    let mut ws = daemon.ws("editor").await;
    let init = ws.call("initialize", init_params()).await;
    assert_eq!(
        init["result"]["_meta"]["maia"]["remote"]["role"],
        "controller"
    );
    assert_eq!(init["result"]["agentCapabilities"]["loadSession"], true);
    let created = ws
        .send_request(acp::NewSessionRequest::new(daemon.cwd()))
        .await
        .unwrap();
    let turn = daemon
        .write_turn(&mut ws, &created.session_id, "go", "written")
        .await;
    assert_eq!(turn.ok().stop_reason, acp::StopReason::EndTurn);
    assert_eq!(
        std::fs::read_to_string(daemon.cwd().join("out.txt")).unwrap(),
        "hello\n"
    );
    // Every update is numbered by the session's sequence, in order, once.
    let numbers = seqs(&ws.seen);
    assert!(!numbers.is_empty());
    assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{numbers:?}");
    assert!(
        ws.seen
            .iter()
            .any(|m| m["params"]["update"]["sessionUpdate"] == "tool_call"),
        "no tool call"
    );
}

#[tokio::test]
async fn remote_streamable_http_follows_the_rfd() {
    let daemon = Daemon::start(&[EDITOR], &[]).await;
    let client = Http::client();
    let token = daemon.tokens["editor"].clone();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params()});
    // Not JSON: 415.
    let refused = client
        .post(daemon.url())
        .bearer_auth(&token)
        .header("content-type", "text/plain")
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 415);
    let answered = client
        .post(daemon.url())
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 200);
    assert_eq!(answered.version(), reqwest::Version::HTTP_2);
    let connection = answered.headers()["acp-connection-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let body: Value = answered.json().await.unwrap();
    assert_eq!(body["id"], 1);
    assert_eq!(body["result"]["protocolVersion"], 1);
    let http = Http {
        client: client.clone(),
        url: daemon.url(),
        token: token.clone(),
        connection: connection.clone(),
    };
    // A stream without text/event-stream: 406; an unknown connection: 404.
    let no_accept = client
        .get(daemon.url())
        .bearer_auth(&token)
        .header("acp-connection-id", &connection)
        .send()
        .await
        .unwrap();
    assert_eq!(no_accept.status(), 406);
    let unknown = Http {
        connection: "nope".into(),
        ..Http {
            client: client.clone(),
            url: daemon.url(),
            token: token.clone(),
            connection: String::new(),
        }
    };
    let status = unknown
        .post(
            None,
            &json!({"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}),
        )
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 404);
    let mut conn_stream = http.stream(None).await;
    let new =
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": new_params(&daemon)});
    assert_eq!(http.post(None, &new).send().await.unwrap().status(), 202);
    let (created, _) = wait_on(&mut conn_stream, |m| m["id"] == 2).await;
    let sid = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let status = client
        .get(daemon.url())
        .bearer_auth(&token)
        .header("accept", "text/event-stream")
        .header("acp-connection-id", &connection)
        .header("acp-session-id", "not-opened-yet")
        .send()
        .await
        .unwrap()
        .status();
    // A session's stream may be opened before its session (the TS SDK
    // opens it before `session/load`).
    assert_eq!(status, 200);
    let mut session_stream = http.stream(Some(&sid)).await;
    daemon.mock.push(write_call());
    daemon.mock.push(mock::text_reply("written"));
    let prompt = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}});
    // Acp-Session-Id naming another session: 400.
    assert_eq!(
        http.post(Some("another"), &prompt)
            .send()
            .await
            .unwrap()
            .status(),
        400
    );
    // Without it (the Python SDK leaves it off most requests): taken, and
    // its answer comes on the connection's stream.
    assert_eq!(http.post(None, &prompt).send().await.unwrap().status(), 202);
    let (ask, before) = wait_on(&mut session_stream, is_permission).await;
    assert!(
        before
            .iter()
            .any(|m| m["params"]["update"]["sessionUpdate"] == "tool_call")
    );
    let answer =
        json!({"jsonrpc": "2.0", "id": ask["id"], "result": choose("allow_once")(&ask).unwrap()});
    assert_eq!(
        http.post(Some(&sid), &answer)
            .send()
            .await
            .unwrap()
            .status(),
        202
    );
    let (response, _) = wait_on(&mut conn_stream, |m| m["id"] == 3).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(daemon.cwd().join("out.txt").exists());
    // Batches: 501. DELETE ends the connection: 202, then 404.
    let batch = client
        .post(daemon.url())
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .header("acp-connection-id", &connection)
        .body("[]")
        .send()
        .await
        .unwrap();
    assert_eq!(batch.status(), 501);
    let deleted = client
        .delete(daemon.url())
        .bearer_auth(&token)
        .header("acp-connection-id", &connection)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 202);
    let list = json!({"jsonrpc": "2.0", "id": 4, "method": "session/list", "params": {}});
    assert_eq!(http.post(None, &list).send().await.unwrap().status(), 404);
}

#[tokio::test]
async fn remote_two_controllers_race_on_one_permission_and_one_answer_applies() {
    let daemon = Daemon::start(&[EDITOR, PHONE], &[]).await;
    let (mut a, mut b, sid) = editor_and_phone(&daemon).await;
    daemon.mock.push(write_call());
    daemon.mock.push(mock::text_reply("done"));
    let id = a
        .request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}),
        )
        .await;
    let (ask_a, _) = a.wait_for(is_permission).await;
    let (ask_b, _) = b.wait_for(is_permission).await;
    assert_eq!(ask_a["id"], ask_b["id"]);
    // Both answer at once: A allows, B rejects.
    a.respond(&ask_a["id"], choose("allow_once")(&ask_a).unwrap())
        .await;
    b.respond(&ask_b["id"], choose("reject_once")(&ask_b).unwrap())
        .await;
    let response = a.response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    // Both see the end: the last update A saw reaches B too.
    let last = *seqs(&a.seen).last().unwrap();
    b.wait_for(|m| m["params"]["_meta"]["maia"]["seq"].as_u64() == Some(last))
        .await;
    let b_seqs = seqs(&b.seen);
    assert!(b_seqs.windows(2).all(|w| w[1] == w[0] + 1), "{b_seqs:?}");
    // Exactly one of them is told the question was settled elsewhere (the
    // cancel precedes the turn's next updates on its stream).
    let a_told = a.seen.iter().any(|m| cancels(m, &ask_a["id"]));
    let b_told = b.seen.iter().any(|m| cancels(m, &ask_b["id"]));
    assert!(a_told != b_told, "a told {a_told}, b told {b_told}");
    // The winner's answer applied, once: the file is written iff A won.
    let written = daemon.cwd().join("out.txt").exists();
    assert_eq!(written, b_told, "A won: {b_told}; written: {written}");
    assert_eq!(a.seen.iter().filter(|m| is_permission(m)).count(), 1);
    assert_eq!(b.seen.iter().filter(|m| is_permission(m)).count(), 1);
}

#[tokio::test]
async fn remote_disconnect_mid_turn_then_load_since_misses_nothing_and_doubles_nothing() {
    let daemon = Daemon::start(&[EDITOR], &[]).await;
    let (mut a, sid) = ws_session(&daemon, "editor").await;
    let words = 40;
    daemon
        .mock
        .push(mock::slow_text(words, Duration::from_millis(30)));
    a.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}),
    )
    .await;
    // A few words arrive, then the editor goes away.
    let text = |messages: &[Value]| -> String {
        messages
            .iter()
            .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
            .collect()
    };
    loop {
        a.next().await;
        if text(&a.seen).matches("word").count() >= 3 {
            break;
        }
    }
    let seen_before = a.seen.clone();
    let since = *seqs(&seen_before).last().unwrap();
    a.close().await;
    // The turn goes on without anybody: the model's stream is read to the end.
    assert!(
        eventually(WAIT, || daemon.mock.requests().len() == 1).await,
        "the turn did not reach the model"
    );
    let mut b = daemon.client("editor").await;
    let loaded = b
        .call("session/load", load_params(&daemon, &sid, Some(since)))
        .await;
    assert!(loaded["result"]["_meta"]["maia"]["seq"].as_u64().unwrap() >= since);
    // Whatever was missed, then the rest live, until the whole answer.
    while text(&b.seen).matches("word").count() + text(&seen_before).matches("word").count() < words
    {
        b.next().await;
    }
    let after = seqs(&b.seen);
    assert_eq!(after.first(), Some(&(since + 1)), "{after:?}");
    assert!(after.windows(2).all(|w| w[1] == w[0] + 1), "{after:?}");
    let whole = text(&seen_before) + &text(&b.seen);
    assert_eq!(whole, "word ".repeat(words), "lost or doubled");
    assert_eq!(daemon.mock.dropped_streams(), 0, "the turn was cancelled");
    // The turn finished, and every client attached is told.
    let (ended, _) = b.wait_for(|m| m["method"] == "_session/turn_ended").await;
    assert_eq!(ended["params"]["stopReason"], "end_turn", "{ended}");
    // The turn finished: the next prompt runs at once.
    daemon.mock.push(mock::text_reply("again"));
    let response = b
        .call(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "more"}]}),
        )
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
}

#[tokio::test]
async fn remote_observer_sees_the_turn_and_every_write_is_refused() {
    let daemon = Daemon::start(&[EDITOR, WATCHER], &[]).await;
    let (mut a, sid) = ws_session(&daemon, "editor").await;
    let mut watcher = daemon.ws("watcher").await;
    let init = watcher.call("initialize", init_params()).await;
    assert_eq!(
        init["result"]["_meta"]["maia"]["remote"]["role"],
        "observer"
    );
    for (method, params) in [
        ("session/new", new_params(&daemon)),
        (
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}),
        ),
        (
            "session/set_mode",
            json!({"sessionId": sid, "modeId": "bypass"}),
        ),
        ("session/close", json!({"sessionId": sid})),
    ] {
        let refused = watcher.call(method, params).await;
        assert_eq!(
            refused["error"]["data"]["reason"], "observer",
            "{method}: {refused}"
        );
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("observer")
        );
    }
    let loaded = watcher
        .call("session/resume", load_params(&daemon, &sid, None))
        .await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    daemon.mock.push(write_call());
    daemon.mock.push(mock::text_reply("done"));
    let id = a
        .request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}),
        )
        .await;
    let (ask, _) = a.wait_for(is_permission).await;
    // The observer may not answer: its answer is ignored.
    watcher
        .respond(&ask["id"], choose("allow_once")(&ask).unwrap())
        .await;
    a.respond(&ask["id"], choose("reject_once")(&ask).unwrap())
        .await;
    a.response(id).await;
    assert!(
        !daemon.cwd().join("out.txt").exists(),
        "the observer's answer applied"
    );
    let last = *seqs(&a.seen).last().unwrap();
    watcher
        .wait_for(|m| m["params"]["_meta"]["maia"]["seq"].as_u64() == Some(last))
        .await;
    assert!(
        !watcher.seen.iter().any(is_permission),
        "the observer was asked"
    );
}

#[tokio::test]
async fn remote_refuses_missing_and_wrong_tokens_foreign_origins_and_big_bodies() {
    let daemon = Daemon::start(&[EDITOR], &["--max-message-bytes", "4096"]).await;
    let client = Http::client();
    let token = daemon.tokens["editor"].clone();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params()})
        .to_string();
    let post = |auth: Option<String>, origin: Option<&str>, body: String| {
        let mut request = client
            .post(daemon.url())
            .header("content-type", "application/json")
            .body(body);
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    assert_eq!(post(None, None, init.clone()).await.unwrap().status(), 401);
    let wrong = post(Some("Bearer maia_wrong".into()), None, init.clone())
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert_eq!(wrong.headers()["www-authenticate"], "Bearer");
    let bearer = format!("Bearer {token}");
    let foreign = post(
        Some(bearer.clone()),
        Some("https://evil.example"),
        init.clone(),
    );
    assert_eq!(foreign.await.unwrap().status(), 403);
    let local = post(
        Some(bearer.clone()),
        Some(&format!("http://{}", daemon.addr)),
        init.clone(),
    );
    assert_eq!(local.await.unwrap().status(), 200);
    let rebound = client
        .post(daemon.url())
        .header("host", "attacker.example")
        .header("authorization", &bearer)
        .header("content-type", "application/json")
        .body(init.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"padding": "x".repeat(8000)}});
    assert_eq!(
        post(Some(bearer), None, big.to_string())
            .await
            .unwrap()
            .status(),
        413
    );
    // A WebSocket message over the bound closes that connection only.
    let mut ws = daemon.ws("editor").await;
    ws.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"padding": "x".repeat(8000)}}))
        .await;
    assert!(ws.ends().await, "an oversized message was taken");
    let mut fresh = daemon.ws("editor").await;
    let answer = fresh.call("initialize", init_params()).await;
    assert_eq!(answer["result"]["protocolVersion"], 1);
}

#[tokio::test]
async fn remote_a_revoked_tokens_open_connection_is_closed() {
    let daemon = Daemon::start(&[EDITOR, PHONE], &[]).await;
    let mut phone = daemon.client("phone").await;
    let (ok, _, err) = serve_command(daemon.home.path(), &["token", "revoke", "phone"]);
    assert!(ok, "{err}");
    let (closed, _) = phone.wait_for(|m| m.get("closed").is_some()).await;
    assert!(
        closed["closed"].as_str().unwrap().contains("revoked"),
        "{closed}"
    );
    let (_, listed, _) = serve_command(daemon.home.path(), &["token", "list"]);
    assert_eq!(listed.trim(), "editor\tcontroller\tall sessions");
}

#[tokio::test]
async fn remote_serve_refuses_non_loopback_without_a_proxy_and_a_start_without_tokens() {
    let home = tempfile::tempdir().unwrap();
    let (ok, _, err) = serve_command(home.path(), &["--listen", "127.0.0.1:0"]);
    assert!(!ok && err.contains("maia serve token add"), "{err}");
    serve_command(home.path(), &["token", "add", "x"]);
    let (ok, _, err) = serve_command(home.path(), &["--listen", "0.0.0.0:0"]);
    assert!(!ok && err.contains("--insecure-behind-proxy"), "{err}");
}

/// The next stdout message of the bridge answering `id`.
async fn until(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    id: u64,
) -> Value {
    loop {
        let line = tokio::time::timeout(WAIT, lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == id {
            return message;
        }
    }
}

#[tokio::test]
async fn remote_connect_bridges_a_stdio_editor_to_the_daemon() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    // Pings every 300 ms: the bridge of an editor that says nothing for a
    // while answers them and keeps its connection.
    let daemon = Daemon::start(&[EDITOR], &["--ping-interval", "300ms"]).await;
    let mut bridge = tokio::process::Command::new(env!("CARGO_BIN_EXE_maia"))
        .args(["acp", "--connect", &format!("ws://{}/acp", daemon.addr)])
        .env("MAIA_TOKEN", &daemon.tokens["editor"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = bridge.stdin.take().unwrap();
    let mut lines = BufReader::new(bridge.stdout.take().unwrap()).lines();
    let send = |v: Value| format!("{v}\n");
    stdin
        .write_all(
            send(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params()}),
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    assert_eq!(until(&mut lines, 1).await["result"]["protocolVersion"], 1);
    stdin
        .write_all(send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": new_params(&daemon)})).as_bytes())
        .await
        .unwrap();
    let sid = until(&mut lines, 2).await["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    // The editor is quiet for more than two ping intervals.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    daemon.mock.push(mock::text_reply("over the bridge"));
    stdin
        .write_all(
            send(
                json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}}),
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    assert_eq!(
        until(&mut lines, 3).await["result"]["stopReason"],
        "end_turn"
    );
    drop(stdin);
    let status = tokio::time::timeout(WAIT, bridge.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn remote_a_question_asked_while_nobody_is_there_waits_for_the_next_controller() {
    let daemon = Daemon::start(&[EDITOR, PHONE], &[]).await;
    let (mut a, sid) = ws_session(&daemon, "editor").await;
    daemon.mock.push(write_call());
    daemon.mock.push(mock::text_reply("written"));
    a.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}),
    )
    .await;
    let (ask, _) = a.wait_for(is_permission).await;
    let since = *seqs(&a.seen).last().unwrap();
    a.close().await;
    // The phone attaches later: the missed updates, then the question.
    let mut b = daemon.client("phone").await;
    let loaded = b
        .call("session/load", load_params(&daemon, &sid, Some(since)))
        .await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    let (again, _) = b.wait_for(is_permission).await;
    assert_eq!(again["id"], ask["id"]);
    assert_eq!(
        again["params"]["toolCall"]["toolCallId"],
        ask["params"]["toolCall"]["toolCallId"]
    );
    b.respond(&again["id"], choose("allow_once")(&again).unwrap())
        .await;
    let (ended, _) = b.wait_for(|m| m["method"] == "_session/turn_ended").await;
    assert_eq!(ended["params"]["stopReason"], "end_turn", "{ended}");
    assert!(daemon.cwd().join("out.txt").exists());
}

#[tokio::test]
async fn remote_a_second_controller_cancels_the_running_turn() {
    let daemon = Daemon::start(&[EDITOR, PHONE], &[]).await;
    let (mut a, sid) = ws_session(&daemon, "editor").await;
    daemon
        .mock
        .push(mock::slow_text(400, Duration::from_millis(20)));
    let id = a
        .request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}),
        )
        .await;
    a.wait_for(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .await;
    let mut b = daemon.client("phone").await;
    b.call("session/resume", load_params(&daemon, &sid, None))
        .await;
    b.send(&json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}))
        .await;
    let response = a.response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    let (ended, _) = b.wait_for(|m| m["method"] == "_session/turn_ended").await;
    assert_eq!(ended["params"]["stopReason"], "cancelled");
}

#[tokio::test]
async fn remote_a_token_may_hold_only_so_many_connections() {
    let daemon = Daemon::start(&[EDITOR, PHONE], &["--max-connections-per-token", "2"]).await;
    let first = daemon.ws("editor").await;
    let _second = daemon.ws("editor").await;
    let third = daemon.try_ws("editor").await;
    assert!(matches!(third, Err(429)), "a third connection was taken");
    // Another token is not counted against it; a closed one frees its place.
    daemon.ws("phone").await;
    first.close().await;
    let mut again = None;
    for _ in 0..100 {
        if let Ok(ws) = daemon.try_ws("editor").await {
            again = Some(ws);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        again.is_some(),
        "the closed connection's place was not freed"
    );
}

#[tokio::test]
async fn remote_kill_9_mid_turn_and_a_restart_load_every_session() {
    let mut daemon = Daemon::start(&[EDITOR], &[]).await;
    let (mut a, sid) = ws_session(&daemon, "editor").await;
    daemon.mock.push(mock::text_reply("the first answer"));
    let first = a
        .call(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "one"}]}),
        )
        .await;
    assert_eq!(first["result"]["stopReason"], "end_turn");
    daemon
        .mock
        .push(mock::slow_text(400, Duration::from_millis(20)));
    a.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "two"}]}),
    )
    .await;
    a.wait_for(|m| m["params"]["update"]["content"]["text"] == "word ")
        .await;
    daemon.restart().await;
    let mut b = daemon.client("editor").await;
    let id = b
        .request("session/load", load_params(&daemon, &sid, None))
        .await;
    let (loaded, replay) = b.wait_for(|m| m["id"] == id).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    let replayed: String = replay
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(replayed.contains("the first answer"), "{replayed}");
    daemon.mock.push(mock::text_reply("three"));
    let third = b
        .call(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "three"}]}),
        )
        .await;
    assert_eq!(third["result"]["stopReason"], "end_turn", "{third}");
}

#[tokio::test]
async fn remote_a_client_that_never_reads_is_dropped_and_stalls_nothing() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let daemon = Daemon::start(&[EDITOR, WATCHER], &["--max-unread", "512"]).await;
    let (mut a, sid) = ws_session(&daemon, "editor").await;
    // The watcher attaches, then stops reading.
    let mut stuck = daemon.raw_ws("watcher").await;
    for (id, method, params) in [
        (1, "initialize", init_params()),
        (2, "session/resume", load_params(&daemon, &sid, None)),
    ] {
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        stuck
            .send(Message::Text(message.to_string().into()))
            .await
            .unwrap();
        loop {
            let Some(Ok(Message::Text(text))) = stuck.next().await else {
                panic!("the watcher's connection ended")
            };
            if serde_json::from_str::<Value>(text.as_str()).unwrap()["id"] == id {
                break;
            }
        }
    }
    // 1,200 deltas of 16 KiB: far more than the socket buffers and the
    // watcher's 512 unread messages hold.
    let piece = "x".repeat(16 * 1024);
    let pieces: Vec<&str> = vec![piece.as_str(); 1200];
    daemon.mock.push(mock::text_chunks(&pieces, Duration::ZERO));
    let response = a
        .call(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}),
        )
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let numbers = seqs(&a.seen);
    assert!(
        numbers.windows(2).all(|w| w[1] == w[0] + 1),
        "the controller lost updates"
    );
    let rss = daemon.rss_kib();
    // The watcher was dropped: reading now finds the end of what the
    // socket held, then the close (or the end of the stream).
    let ended = tokio::time::timeout(WAIT, async {
        let mut texts = 0usize;
        loop {
            match stuck.next().await {
                Some(Ok(Message::Text(_))) => texts += 1,
                Some(Ok(Message::Close(frame))) => {
                    return (texts, frame.map(|f| f.reason.to_string()));
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return (texts, None),
            }
        }
    })
    .await
    .expect("the stuck watcher was never dropped");
    assert!(ended.0 < 1200, "the watcher got everything: {}", ended.0);
    if let Some(reason) = ended.1 {
        assert!(reason.contains("fell behind"), "{reason}");
    }
    eprintln!("daemon RSS after a 19 MiB turn with a stuck watcher: {rss} KiB");
}

#[tokio::test]
async fn remote_an_idle_streamable_http_connection_is_closed_and_a_streaming_one_is_not() {
    let daemon = Daemon::start(&[EDITOR], &["--idle-timeout", "300ms"]).await;
    let client = Http::client();
    let token = daemon.tokens["editor"].clone();
    let open = || async {
        let init =
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params()});
        let answered = client
            .post(daemon.url())
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .body(init.to_string())
            .send()
            .await
            .unwrap();
        Http {
            client: client.clone(),
            url: daemon.url(),
            token: token.clone(),
            connection: answered.headers()["acp-connection-id"]
                .to_str()
                .unwrap()
                .to_owned(),
        }
    };
    let idle = open().await;
    let streaming = open().await;
    let _stream = streaming.stream(None).await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}});
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let status = idle.post(None, &list).send().await.unwrap().status();
        if status == 404 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the idle connection stayed"
        );
        // Each request counts as use: ask again only after the timeout.
        tokio::time::sleep(Duration::from_millis(450)).await;
    }
    assert_eq!(
        streaming.post(None, &list).send().await.unwrap().status(),
        202
    );
}

#[tokio::test]
async fn remote_a_thousand_idle_connections_leave_the_daemon_serving() {
    let daemon = Daemon::start(&[EDITOR], &["--max-connections-per-token", "1100"]).await;
    let (mut a, sid) = ws_session(&daemon, "editor").await;
    let before = daemon.rss_kib();
    let mut idle = Vec::new();
    for _ in 0..1000 {
        let ws = daemon.client("editor").await;
        idle.push(ws);
    }
    let after = daemon.rss_kib();
    daemon.mock.push(mock::text_reply("still here"));
    let response = a
        .call(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}),
        )
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let per = after.saturating_sub(before) as f64 / 1000.0;
    eprintln!("1,000 idle WebSocket connections: {before} KiB → {after} KiB ({per:.1} KiB each)");
    assert!(per < 64.0, "{per} KiB per idle connection");
}

fn tls_fixture(name: &str) -> String {
    format!(
        "{}/../../protocol-tests/fixtures/tls/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[tokio::test]
async fn remote_tls_serves_http2_and_the_bridge_over_wss() {
    let (cert, key) = (tls_fixture("server.pem"), tls_fixture("server.key"));
    let daemon = Daemon::start(&[EDITOR], &["--tls-cert", &cert, "--tls-key", &key]).await;
    // HTTPS, HTTP/2 by ALPN, for a client that trusts the test CA.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    let ca = std::fs::read_to_string(tls_fixture("ca.pem")).unwrap();
    let der: Vec<u8> = {
        use base64::Engine;
        let body: String = ca.lines().filter(|l| !l.starts_with("-----")).collect();
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap()
    };
    roots.add(der.into()).unwrap();
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let client = reqwest::Client::builder()
        .tls_backend_preconfigured(config)
        .build()
        .unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params()});
    let answered = client
        .post(format!("https://{}/acp", daemon.addr))
        .bearer_auth(&daemon.tokens["editor"])
        .header("content-type", "application/json")
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 200);
    assert_eq!(answered.version(), reqwest::Version::HTTP_2);
    // Plain HTTP on the TLS port is not served.
    let plain = Http::client()
        .post(daemon.url())
        .bearer_auth(&daemon.tokens["editor"])
        .header("content-type", "application/json")
        .body(init.to_string())
        .send()
        .await;
    assert!(plain.is_err(), "plain HTTP was answered on the TLS port");
    // The bridge over wss://, verifying against the test CA.
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mut bridge = tokio::process::Command::new(env!("CARGO_BIN_EXE_maia"))
        .args([
            "acp",
            "--connect",
            &format!(
                "wss://localhost:{}/acp",
                daemon.addr.split(':').nth(1).unwrap()
            ),
        ])
        .env("MAIA_TOKEN", &daemon.tokens["editor"])
        .env("SSL_CERT_FILE", tls_fixture("ca.pem"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = bridge.stdin.take().unwrap();
    let mut lines = BufReader::new(bridge.stdout.take().unwrap()).lines();
    stdin
        .write_all(format!("{init}\n").as_bytes())
        .await
        .unwrap();
    assert_eq!(until(&mut lines, 1).await["result"]["protocolVersion"], 1);
}

#[tokio::test]
async fn remote_a_client_may_ask_that_its_leaving_cancels_the_turn() {
    let daemon = Daemon::start(&[EDITOR, PHONE], &[]).await;
    let mut a = daemon.client("editor").await;
    let mut params = new_params(&daemon);
    params["_meta"] = json!({"maia": {"cancelOnDisconnect": true}});
    let created = a.call("session/new", params).await;
    let sid = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let mut b = daemon.client("phone").await;
    b.call("session/resume", load_params(&daemon, &sid, None))
        .await;
    daemon
        .mock
        .push(mock::slow_text(400, Duration::from_millis(20)));
    a.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}),
    )
    .await;
    a.wait_for(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .await;
    a.close().await;
    let (ended, _) = b.wait_for(|m| m["method"] == "_session/turn_ended").await;
    assert_eq!(ended["params"]["stopReason"], "cancelled", "{ended}");
}

#[tokio::test]
async fn remote_a_hundred_observers_each_receive_every_update_once_in_order() {
    let daemon = Daemon::start(&[EDITOR, WATCHER], &["--max-connections-per-token", "200"]).await;
    let (mut a, sid) = ws_session(&daemon, "editor").await;
    let mut observers = Vec::new();
    for _ in 0..100 {
        let mut ws = daemon.client("watcher").await;
        ws.call("session/resume", load_params(&daemon, &sid, None))
            .await;
        observers.push(ws);
    }
    let pieces: Vec<String> = (0..200).map(|n| format!("{n} ")).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    daemon
        .mock
        .push(mock::text_chunks(&pieces, Duration::from_millis(1)));
    let started = std::time::Instant::now();
    let response = a
        .call(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}),
        )
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    a.wait_for(|m| m["method"] == "_session/turn_ended").await;
    let last = *seqs(&a.seen).last().unwrap();
    let whole: String = pieces.concat();
    for ws in &mut observers {
        ws.wait_for(|m| m["method"] == "_session/turn_ended").await;
        let text: String = ws
            .seen
            .iter()
            .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
            .collect();
        assert_eq!(text, whole);
        let got = seqs(&ws.seen);
        assert!(got.windows(2).all(|w| w[1] == w[0] + 1), "{got:?}");
        assert_eq!(got.last(), Some(&last));
    }
    eprintln!(
        "200 deltas to 1 controller and 100 observers: {:?} until the last observer had the end",
        started.elapsed()
    );
}

#[tokio::test]
async fn remote_a_websocket_peer_that_answers_no_ping_is_closed_and_frees_its_place() {
    let daemon = Daemon::start(
        &[EDITOR],
        &[
            "--max-connections-per-token",
            "1",
            "--ping-interval",
            "300ms",
        ],
    )
    .await;
    // Gone without a close frame: never reads (so never answers a ping) and
    // never writes.
    let _gone = daemon.raw_ws("editor").await;
    assert!(
        matches!(daemon.try_ws("editor").await, Err(429)),
        "the token's one place was free while the first connection was open"
    );
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut live = loop {
        if let Ok(ws) = daemon.try_ws("editor").await {
            break ws;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "a connection that answered no ping kept its place"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // A client that talks (and so answers the pings as it reads) stays,
    // across several ping intervals.
    live.call("initialize", init_params()).await;
    let until = tokio::time::Instant::now() + Duration::from_millis(1000);
    while tokio::time::Instant::now() < until {
        let answer = live.call("session/list", json!({})).await;
        assert!(answer.get("result").is_some(), "{answer}");
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
}

#[tokio::test]
async fn remote_a_prompt_sent_right_behind_its_load_is_served_live_and_after_a_restart() {
    let mut daemon = Daemon::start(&[EDITOR, PHONE], &[]).await;
    let (mut a, sid) = ws_session(&daemon, "editor").await;
    // A second client resumes the live session and prompts without waiting
    // for the resume's answer.
    let mut b = daemon.client("phone").await;
    daemon.mock.push(mock::text_reply("live"));
    b.request("session/resume", load_params(&daemon, &sid, None))
        .await;
    let id = b
        .request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "one"}]}),
        )
        .await;
    let answer = b.response(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    a.wait_for(|m| m["method"] == "_session/turn_ended").await;
    // After a restart the session is not live: the load opens it, and the
    // prompt behind it waits for the open.
    daemon.restart().await;
    let mut c = daemon.client("editor").await;
    daemon.mock.push(mock::text_reply("reopened"));
    c.request("session/load", load_params(&daemon, &sid, None))
        .await;
    let id = c
        .request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "two"}]}),
        )
        .await;
    let answer = c.response(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
}

/// The text of the last user message of the model's request `index`.
fn asked_in(daemon: &Daemon, index: usize) -> String {
    let requests = daemon.mock.requests();
    let messages = requests[index]["messages"].as_array().unwrap();
    let user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    match &user["content"] {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[tokio::test]
async fn remote_two_controllers_prompting_at_once_get_two_turns_one_after_the_other() {
    let daemon = Daemon::start(&[EDITOR, PHONE], &[]).await;
    let (mut a, mut b, sid) = editor_and_phone(&daemon).await;
    daemon
        .mock
        .push(mock::slow_text(20, Duration::from_millis(20)));
    daemon.mock.push(mock::text_reply("second answer"));
    let first = prompt(&mut a, &sid, "from the editor").await;
    a.wait_for(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .await;
    // The phone prompts while the editor's turn streams: it is not refused,
    // it waits for that turn.
    let second = prompt(&mut b, &sid, "from the phone").await;
    let answered = a.response(first).await;
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    let answered = b.response(second).await;
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    // Two model requests, the phone's after the editor's whole turn.
    assert_eq!(daemon.mock.requests().len(), 2);
    assert_eq!(asked_in(&daemon, 0), "from the editor");
    assert_eq!(asked_in(&daemon, 1), "from the phone");
    let history = daemon.mock.requests()[1]["messages"].to_string();
    assert!(history.contains("from the editor"), "{history}");
    // The editor is told the phone's prompt when its turn starts, after
    // its own turn's answer (read above), then sees that turn end too.
    a.wait_for(|m| {
        m["params"]["update"]["sessionUpdate"] == "user_message_chunk"
            && m["params"]["update"]["content"]["text"] == "from the phone"
    })
    .await;
    let (ended, _) = a.wait_for(|m| m["method"] == "_session/turn_ended").await;
    assert_eq!(ended["params"]["stopReason"], "end_turn", "{ended}");
    let a_seqs = seqs(&a.seen);
    assert!(a_seqs.windows(2).all(|w| w[1] == w[0] + 1), "{a_seqs:?}");
}

#[tokio::test]
async fn remote_a_cancel_answers_the_prompts_waiting_behind_the_turn() {
    let daemon = Daemon::start(&[EDITOR, PHONE], &[]).await;
    let (mut a, mut b, sid) = editor_and_phone(&daemon).await;
    daemon
        .mock
        .push(mock::slow_text(400, Duration::from_millis(20)));
    let first = prompt(&mut a, &sid, "long").await;
    a.wait_for(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .await;
    let held = prompt(&mut b, &sid, "then this").await;
    let withdrawn = prompt(&mut a, &sid, "and this").await;
    // A held prompt its client gives up is answered at once, without a turn.
    a.send(&json!({"jsonrpc": "2.0", "method": "$/cancel_request",
        "params": {"requestId": withdrawn}}))
        .await;
    let answered = a.response(withdrawn).await;
    assert_eq!(answered["result"]["stopReason"], "cancelled", "{answered}");
    b.send(&json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}))
        .await;
    let answered = b.response(held).await;
    assert_eq!(answered["result"]["stopReason"], "cancelled", "{answered}");
    let answered = a.response(first).await;
    assert_eq!(answered["result"]["stopReason"], "cancelled", "{answered}");
    // Neither waiting prompt reached the model, then or later.
    daemon.mock.push(mock::text_reply("after"));
    let next = prompt(&mut b, &sid, "next").await;
    let answered = b.response(next).await;
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    assert_eq!(daemon.mock.requests().len(), 2);
    assert_eq!(asked_in(&daemon, 1), "next");
}

#[tokio::test]
async fn remote_a_close_answers_the_prompts_waiting_behind_the_turn() {
    let daemon = Daemon::start(&[EDITOR, PHONE], &[]).await;
    let (mut a, mut b, sid) = editor_and_phone(&daemon).await;
    daemon
        .mock
        .push(mock::slow_text(400, Duration::from_millis(20)));
    let first = prompt(&mut a, &sid, "long").await;
    a.wait_for(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .await;
    let held = prompt(&mut b, &sid, "then this").await;
    let close = a.request("session/close", json!({"sessionId": sid})).await;
    let answered = b.response(held).await;
    assert_eq!(answered["error"]["data"]["reason"], "closed", "{answered}");
    // The close and the running prompt are both answered, in either order.
    let is_answer = |m: &Value, id: u64| m["id"] == id && m.get("method").is_none();
    while !(a.seen.iter().any(|m| is_answer(m, close))
        && a.seen.iter().any(|m| is_answer(m, first)))
    {
        a.next().await;
    }
    let closed = a.seen.iter().find(|m| is_answer(m, close)).unwrap();
    assert!(closed.get("result").is_some(), "{closed}");
    let ended = a.seen.iter().find(|m| is_answer(m, first)).unwrap();
    assert!(
        ended.get("error").is_some() || ended["result"]["stopReason"] == "cancelled",
        "{ended}"
    );
    assert_eq!(daemon.mock.requests().len(), 1);
}

#[tokio::test]
async fn remote_two_prompts_pipelined_on_one_connection_run_in_order() {
    let daemon = Daemon::start(&[EDITOR], &[]).await;
    let (mut a, sid) = ws_session(&daemon, "editor").await;
    daemon.mock.push(mock::text_reply("one done"));
    daemon.mock.push(mock::text_reply("two done"));
    // Sent back to back, the second before the first is even read.
    let one = prompt(&mut a, &sid, "one").await;
    let two = prompt(&mut a, &sid, "two").await;
    let answered = a.response(one).await;
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    let answered = a.response(two).await;
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    assert_eq!(asked_in(&daemon, 0), "one");
    assert_eq!(asked_in(&daemon, 1), "two");
    let history = daemon.mock.requests()[1]["messages"].to_string();
    assert!(history.contains("one done"), "{history}");
}

#[tokio::test]
async fn remote_a_waiting_prompt_runs_after_its_client_left() {
    let daemon = Daemon::start(&[EDITOR, PHONE], &[]).await;
    let (mut a, mut b, sid) = editor_and_phone(&daemon).await;
    daemon
        .mock
        .push(mock::slow_text(20, Duration::from_millis(20)));
    daemon.mock.push(mock::text_reply("answered anyway"));
    let first = prompt(&mut a, &sid, "from the editor").await;
    a.wait_for(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .await;
    prompt(&mut b, &sid, "from the phone").await;
    // The phone leaves without reading: its prompt waits, then runs.
    b.close().await;
    let answered = a.response(first).await;
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    a.wait_for(|m| {
        m["params"]["update"]["sessionUpdate"] == "user_message_chunk"
            && m["params"]["update"]["content"]["text"] == "from the phone"
    })
    .await;
    let (ended, _) = a.wait_for(|m| m["method"] == "_session/turn_ended").await;
    assert_eq!(ended["params"]["stopReason"], "end_turn", "{ended}");
    assert_eq!(asked_in(&daemon, 1), "from the phone");
}

#[tokio::test]
async fn remote_a_client_leaving_with_cancel_on_disconnect_leaves_no_waiting_prompt_to_run() {
    let daemon = Daemon::start(&[EDITOR, PHONE], &[]).await;
    let mut a = daemon.client("editor").await;
    let mut params = new_params(&daemon);
    params["_meta"] = json!({"maia": {"cancelOnDisconnect": true}});
    let created = a.call("session/new", params).await;
    let sid = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let mut b = daemon.client("phone").await;
    b.call("session/resume", load_params(&daemon, &sid, None))
        .await;
    daemon
        .mock
        .push(mock::slow_text(400, Duration::from_millis(20)));
    prompt(&mut a, &sid, "go").await;
    a.wait_for(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .await;
    // Waiting behind the turn: the editor's own next prompt and the phone's.
    prompt(&mut a, &sid, "and then this").await;
    let held = prompt(&mut b, &sid, "from the phone").await;
    a.close().await;
    // The editor's leaving is its cancel: the turn ends cancelled and the
    // waiting prompts are answered without running.
    let answered = b.response(held).await;
    assert_eq!(answered["result"]["stopReason"], "cancelled", "{answered}");
    let (ended, _) = b.wait_for(|m| m["method"] == "_session/turn_ended").await;
    assert_eq!(ended["params"]["stopReason"], "cancelled", "{ended}");
    daemon.mock.push(mock::text_reply("after"));
    let next = prompt(&mut b, &sid, "next").await;
    let answered = b.response(next).await;
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    assert_eq!(daemon.mock.requests().len(), 2);
    assert_eq!(asked_in(&daemon, 1), "next");
}

#[tokio::test]
async fn remote_a_burst_of_prompts_and_cancels_sent_unread_is_answered_in_full() {
    let daemon = Daemon::start(&[EDITOR], &[]).await;
    let (mut a, sid) = ws_session(&daemon, "editor").await;
    daemon
        .mock
        .push(mock::slow_text(400, Duration::from_millis(20)));
    // All before reading a single byte.
    let one = prompt(&mut a, &sid, "one").await;
    let two = prompt(&mut a, &sid, "two").await;
    let three = prompt(&mut a, &sid, "three").await;
    a.send(&json!({"jsonrpc": "2.0", "method": "$/cancel_request",
        "params": {"requestId": two}}))
        .await;
    a.send(&json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}))
        .await;
    let is_answer = |m: &Value, id: u64| m["id"] == id && m.get("method").is_none();
    while ![one, two, three]
        .iter()
        .all(|id| a.seen.iter().any(|m| is_answer(m, *id)))
    {
        a.next().await;
    }
    for id in [one, two, three] {
        let answered = a.seen.iter().find(|m| is_answer(m, id)).unwrap();
        assert_eq!(
            answered["result"]["stopReason"], "cancelled",
            "{id}: {answered}"
        );
    }
    // Each answered once, and the session takes the next prompt.
    daemon.mock.push(mock::text_reply("after"));
    let next = prompt(&mut a, &sid, "next").await;
    let answered = a.response(next).await;
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    for id in [one, two, three, next] {
        let answers = a.seen.iter().filter(|m| is_answer(m, id)).count();
        assert_eq!(answers, 1, "request {id} answered {answers} times");
    }
    let asked: Vec<String> = (0..daemon.mock.requests().len())
        .map(|i| asked_in(&daemon, i))
        .collect();
    assert!(asked.iter().all(|t| t == "one" || t == "next"), "{asked:?}");
}

#[tokio::test]
async fn remote_sigterm_mid_turn_answers_cancelled_and_keeps_what_streamed() {
    let mut daemon = Daemon::start(&[EDITOR], &[]).await;
    let (mut a, sid) = ws_session(&daemon, "editor").await;
    daemon
        .mock
        .push(mock::slow_text(400, Duration::from_millis(20)));
    let id = prompt(&mut a, &sid, "long").await;
    a.wait_for(|m| m["params"]["update"]["content"]["text"] == "word ")
        .await;
    let pid = nix::unistd::Pid::from_raw(daemon.child.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    // As under `maia acp`: the running prompt is answered `cancelled`.
    let answer = a.response(id).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    tokio::time::timeout(WAIT, daemon.child.wait())
        .await
        .expect("maia serve did not exit")
        .unwrap();
    // What streamed before the signal is in the journal.
    daemon.restart().await;
    let mut b = daemon.client("editor").await;
    let id = b
        .request("session/load", load_params(&daemon, &sid, None))
        .await;
    let (loaded, replay) = b.wait_for(|m| m["id"] == id).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    let replayed: String = replay
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(replayed.contains("word"), "{replayed}");
}
