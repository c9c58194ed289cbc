//! JSON-RPC errors: each answered with the right code, and the connection
//! keeps working after every one of them.

use serde_json::{Value, json};

use crate::harness::Maia;

async fn still_works(maia: &mut Maia) {
    let sid = maia.new_session().await;
    assert!(!sid.is_empty());
}

#[tokio::test]
async fn malformed_json_is_a_parse_error_with_null_id() {
    let (mut maia, _) = Maia::ready().await;
    maia.send_raw("{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": \n")
        .await;
    let m = maia.next().await;
    assert_eq!(m["error"]["code"], -32700, "{m}");
    assert_eq!(m["id"], Value::Null);
    maia.send_raw("\u{1}\u{2}garbage\n").await;
    assert_eq!(maia.next().await["error"]["code"], -32700);
    still_works(&mut maia).await;
}

#[tokio::test]
async fn batches_and_non_objects_are_invalid_requests() {
    let (mut maia, _) = Maia::ready().await;
    maia.send_raw("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}]\n")
        .await;
    assert_eq!(maia.next().await["error"]["code"], -32600);
    maia.send_raw("42\n").await;
    assert_eq!(maia.next().await["error"]["code"], -32600);
    still_works(&mut maia).await;
}

#[tokio::test]
async fn unknown_methods_and_unadvertised_ones() {
    let (mut maia, sid) = Maia::ready().await;
    let cwd = maia.cwd();
    for method in ["nope", "_vendor/thing", "session/status"] {
        let id = maia
            .request(
                method,
                json!({"sessionId": sid, "cwd": cwd, "mcpServers": [], "modeId": "x"}),
            )
            .await;
        let (resp, _) = maia.response(id).await;
        assert_eq!(resp["error"]["code"], -32601, "{method}: {resp}");
        assert_eq!(resp["id"], json!(id));
    }
    // Notifications never get a response, known or not.
    maia.notify("_vendor/notify", json!({})).await;
    maia.notify("session/cancel", json!({"sessionId": "unknown"}))
        .await;
    still_works(&mut maia).await;
}

#[tokio::test]
async fn invalid_params() {
    let (mut maia, _) = Maia::ready().await;
    for params in [
        json!({"cwd": "relative/path", "mcpServers": []}),
        json!({"cwd": 42, "mcpServers": []}),
        json!({"mcpServers": []}),
    ] {
        let id = maia.request("session/new", params.clone()).await;
        let (resp, _) = maia.response(id).await;
        assert_eq!(resp["error"]["code"], -32602, "{params}: {resp}");
        assert!(!resp["error"]["message"].as_str().unwrap().contains('\n'));
    }
    let sid = maia.new_session().await;
    let id = maia
        .request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": "not a list"}),
        )
        .await;
    assert_eq!(maia.response(id).await.0["error"]["code"], -32602);
    let id = maia
        .prompt_blocks(
            &sid,
            json!([{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]),
        )
        .await;
    assert_eq!(maia.response(id).await.0["error"]["code"], -32602);
    // An image whose data is not base64, or with neither data nor a file URI.
    for image in [
        json!({"type": "image", "data": "@@@", "mimeType": "image/png"}),
        json!({"type": "image", "data": "", "mimeType": "image/png", "uri": "https://x/y.png"}),
    ] {
        let id = maia.prompt_blocks(&sid, json!([image])).await;
        assert_eq!(maia.response(id).await.0["error"]["code"], -32602);
    }
    still_works(&mut maia).await;
}

#[tokio::test]
async fn unknown_session_is_32002_with_the_id() {
    let (mut maia, _) = Maia::ready().await;
    let id = maia.prompt("does-not-exist", "hi").await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["error"]["code"], -32002, "{resp}");
    assert_eq!(resp["error"]["data"]["sessionId"], "does-not-exist");
    still_works(&mut maia).await;
}

#[tokio::test]
async fn ids_are_echoed_exactly() {
    let mut maia = Maia::start().await;
    for id in [json!("str-id"), json!(0), json!(null)] {
        maia.send(&json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {"protocolVersion": 1}}))
            .await;
        let m = maia.next().await;
        assert_eq!(m["id"], id);
        assert!(m.get("result").is_some());
    }
}

#[tokio::test]
async fn oversized_line_is_rejected_and_connection_survives() {
    let (mut maia, sid) = Maia::ready().await;
    // 17 MiB, over the 16 MiB limit.
    let big = "x".repeat(17 * 1024 * 1024);
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"session/prompt\",\"params\":{{\"sessionId\":\"{sid}\",\"prompt\":[{{\"type\":\"text\",\"text\":\"{big}\"}}]}}}}\n"
    );
    maia.send_raw(&line).await;
    let m = maia.next().await;
    assert_eq!(m["error"]["code"], -32600, "{}", m["error"]);
    assert_eq!(m["id"], 99);
    still_works(&mut maia).await;
}
