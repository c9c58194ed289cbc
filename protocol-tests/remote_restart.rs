//! `maia serve` across restarts and as the SDK clients' Streamable HTTP
//! transports use it: update numbers that go on after a restart (a client
//! following docs/remote.md with its last `since` misses nothing), a
//! session's stream opened before its `session/load` (the TS client), a
//! request without `Acp-Session-Id` (the Python client), a load's answer
//! naming its session and coming after its replay (on the stream the
//! answer takes: the connection's for a load sent without the header).

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::remote_client::{Daemon, Http, seqs, wait_on};

const EDITOR: (&str, &[&str]) = ("editor", &[]);

fn load_params(daemon: &Daemon, sid: &str, since: Option<u64>) -> Value {
    let mut params = json!({"sessionId": sid, "cwd": daemon.cwd(), "mcpServers": []});
    if let Some(since) = since {
        params["_meta"] = json!({"maia": {"since": since}});
    }
    params
}

fn seq_of(m: &Value) -> Option<u64> {
    m["params"]["_meta"]["maia"]["seq"]
        .as_u64()
        .or_else(|| m["result"]["_meta"]["maia"]["seq"].as_u64())
}

/// A session with one answered prompt; the last number its client saw.
async fn one_turn(daemon: &Daemon, text: &str) -> (String, u64) {
    let mut ws = daemon.client("editor").await;
    let created = ws
        .call(
            "session/new",
            json!({"cwd": daemon.cwd(), "mcpServers": []}),
        )
        .await;
    let sid = created["result"]["sessionId"].as_str().unwrap().to_owned();
    daemon.mock.push(mock::text_reply(text));
    ws.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}),
    )
    .await;
    // The turn's end is the last numbered message.
    let (ended, _) = ws.wait_for(|m| m["method"] == "_session/turn_ended").await;
    (sid, seq_of(&ended).expect("the turn's end is numbered"))
}

#[tokio::test]
async fn remote_update_numbers_go_on_after_a_restart_and_an_old_since_gets_the_whole_session() {
    let mut daemon = Daemon::start(&[EDITOR], &[]).await;
    let (sid, seen) = one_turn(&daemon, "before the restart").await;
    daemon.restart().await;
    // The web page's reconnect: load with the last number it saw.
    let mut ws = daemon.client("editor").await;
    let id = ws
        .request("session/load", load_params(&daemon, &sid, Some(seen)))
        .await;
    let (loaded, replay) = ws.wait_for(|m| m["id"] == id).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    assert_eq!(
        replay.first().map(|m| m["method"].clone()),
        Some(json!("_session/reset")),
        "the replay is announced as the whole session: {replay:?}"
    );
    let replayed: String = replay
        .iter()
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(replayed.contains("before the restart"), "{replayed}");
    let numbers = seqs(&replay);
    assert!(
        numbers.iter().all(|n| *n > seen),
        "numbers restarted below {seen}: {numbers:?}"
    );
    let answered = seq_of(&loaded).unwrap();
    assert!(answered > seen, "the load's seq {answered} ≤ {seen}");
    // A new turn's updates are numbered past everything the client saw, so
    // a client dropping what it saw before keeps them.
    daemon.mock.push(mock::text_reply("after the restart"));
    let id = ws
        .request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "again"}]}),
        )
        .await;
    let (_, live) = ws.wait_for(|m| m["id"] == id).await;
    let live_numbers = seqs(&live);
    assert!(!live_numbers.is_empty());
    assert!(
        live_numbers.iter().all(|n| *n > answered),
        "{live_numbers:?}"
    );
    // A client that saw everything of this run attaches with its number:
    // no reset, nothing twice.
    let last = *live_numbers.iter().max().unwrap();
    let mut again = daemon.client("editor").await;
    let id = again
        .request("session/load", load_params(&daemon, &sid, Some(last)))
        .await;
    let (_, replay) = again.wait_for(|m| m["id"] == id).await;
    assert!(
        replay
            .iter()
            .all(|m| m["method"] != "_session/reset" && seq_of(m).is_none_or(|n| n > last)),
        "{replay:?}"
    );
}

#[tokio::test]
async fn remote_http_a_saved_sessions_stream_opened_before_its_load_gets_the_replay_then_the_answer()
 {
    let mut daemon = Daemon::start(&[EDITOR], &[]).await;
    let (sid, _) = one_turn(&daemon, "kept in the journal").await;
    daemon.restart().await;
    // The TS SDK: the session's stream first, then the load with the header.
    let (http, _conn_stream) = Http::open(&daemon, &daemon.tokens["editor"]).await;
    let mut session_stream = http.stream(Some(&sid)).await;
    let load = json!({"jsonrpc": "2.0", "id": 2, "method": "session/load",
        "params": load_params(&daemon, &sid, None)});
    http.send(Some(&sid), &load).await;
    let (loaded, replay) = wait_on(&mut session_stream, |m| m["id"] == 2).await;
    assert_eq!(loaded["result"]["sessionId"], sid, "{loaded}");
    let replayed: String = replay
        .iter()
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(
        replayed.contains("kept in the journal"),
        "the replay comes before the answer on the session's stream: {replay:?}"
    );
}

#[tokio::test]
async fn remote_http_requests_without_the_session_header_are_served_as_the_python_sdk_sends_them() {
    let mut daemon = Daemon::start(&[EDITOR], &[]).await;
    let (sid, _) = one_turn(&daemon, "first").await;
    daemon.restart().await;
    // The Python SDK: load without the header, before it has the
    // session's stream; the replay, then the answer naming the session, on
    // the connection's stream (ACP answers a load after its replay); then
    // it opens the session's stream.
    let (http, mut conn_stream) = Http::open(&daemon, &daemon.tokens["editor"]).await;
    let load = json!({"jsonrpc": "2.0", "id": 2, "method": "session/load",
        "params": load_params(&daemon, &sid, None)});
    http.send(None, &load).await;
    let (loaded, replay) = wait_on(&mut conn_stream, |m| m["id"] == 2).await;
    assert_eq!(loaded["result"]["sessionId"], sid, "{loaded}");
    let replayed: String = replay
        .iter()
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(
        replayed.contains("first"),
        "the replay comes before the answer on the connection's stream: {replay:?}"
    );
    let mut session_stream = http.stream(Some(&sid)).await;
    // `session/set_title` without the header (the Python SDK sends it so).
    let title = json!({"jsonrpc": "2.0", "id": 3, "method": "session/set_title",
        "params": {"sessionId": sid, "title": "renamed"}});
    http.send(None, &title).await;
    let (titled, _) = wait_on(&mut conn_stream, |m| m["id"] == 3).await;
    assert!(titled.get("error").is_none(), "{titled}");
    // A prompt with the header: its answer on the session's stream.
    daemon.mock.push(mock::text_reply("second"));
    let prompt = json!({"jsonrpc": "2.0", "id": 4, "method": "session/prompt",
        "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "again"}]}});
    http.send(Some(&sid), &prompt).await;
    let (answer, _) = wait_on(&mut session_stream, |m| m["id"] == 4).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
}

#[tokio::test]
async fn remote_http_a_live_load_without_the_session_header_gets_its_replay_before_its_answer() {
    let daemon = Daemon::start(&[EDITOR], &[]).await;
    let (sid, _) = one_turn(&daemon, "said live").await;
    // A second client (the Python SDK) attaches to the live session
    // without the header: replay, then answer, on the connection's stream.
    let (http, mut conn_stream) = Http::open(&daemon, &daemon.tokens["editor"]).await;
    let load = json!({"jsonrpc": "2.0", "id": 2, "method": "session/load",
        "params": load_params(&daemon, &sid, None)});
    http.send(None, &load).await;
    let (loaded, replay) = wait_on(&mut conn_stream, |m| m["id"] == 2).await;
    assert_eq!(loaded["result"]["sessionId"], sid, "{loaded}");
    let replayed: String = replay
        .iter()
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(replayed.contains("said live"), "{replay:?}");
    // Live updates then take the session's stream.
    let mut session_stream = http.stream(Some(&sid)).await;
    daemon.mock.push(mock::text_reply("said later"));
    let prompt = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "more"}]}});
    http.send(Some(&sid), &prompt).await;
    let (answer, live) = wait_on(&mut session_stream, |m| m["id"] == 3).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let streamed: String = live
        .iter()
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(streamed, "said later", "{live:?}");
}
