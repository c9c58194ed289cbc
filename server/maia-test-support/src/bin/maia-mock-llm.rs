//! `maia-mock-llm SCRIPT.json`: the scripted mock LLM as a process, for tests
//! written in other languages (the VS Code extension's node tests).
//!
//! The script is a JSON array; each item answers one chat request, in order:
//! - `{"text": "...", "piece": 4, "gap_ms": 0}`: a streamed answer cut into
//!   `piece`-character deltas sent `gap_ms` apart;
//! - `{"thought": "...", "text": "..."}`: reasoning, then the answer;
//! - `{"tool_calls": [{"id": "...", "name": "Write", "arguments": {...}}]}`;
//! - `{"hang": true}`: SSE headers, then nothing (for cancellation);
//! - `{"error": 500, "message": "..."}`: a non-streamed error.
//!
//! Prints `http://127.0.0.1:PORT` on the first stdout line, then one line
//! `request <json>` per chat request received; exits when stdin closes.

use std::time::Duration;

use maia_test_support::{
    MockLlm, Reply, error_reply, reasoning_then_text, split_chars, text_chunks, tool_calls_reply,
};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn reply(item: &Value) -> Result<Reply, String> {
    if item["hang"].as_bool() == Some(true) {
        return Ok(Reply::Hang);
    }
    if let Some(status) = item["error"].as_u64() {
        let status = u16::try_from(status).map_err(|e| e.to_string())?;
        return Ok(error_reply(
            status,
            item["message"].as_str().unwrap_or("mock error"),
        ));
    }
    if let Some(calls) = item["tool_calls"].as_array() {
        let calls: Vec<(&str, &str, Value)> = calls
            .iter()
            .map(|c| {
                (
                    c["id"].as_str().unwrap_or("call_1"),
                    c["name"].as_str().unwrap_or(""),
                    c["arguments"].clone(),
                )
            })
            .collect();
        return Ok(tool_calls_reply(&calls));
    }
    let text = item["text"]
        .as_str()
        .ok_or_else(|| format!("script item without text, tool_calls, hang or error: {item}"))?;
    if let Some(thought) = item["thought"].as_str() {
        return Ok(reasoning_then_text(thought, text));
    }
    let piece = item["piece"].as_u64().unwrap_or(4);
    let pieces = split_chars(text, usize::try_from(piece).unwrap_or(4));
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let gap = Duration::from_millis(item["gap_ms"].as_u64().unwrap_or(0));
    Ok(text_chunks(&pieces, gap))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: maia-mock-llm SCRIPT.json")?;
    let script: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    let items = script.as_array().ok_or("the script must be a JSON array")?;
    let mock = MockLlm::start().await;
    for item in items {
        mock.push(reply(item)?);
    }
    let mut out = tokio::io::stdout();
    out.write_all(format!("{}\n", mock.url()).as_bytes())
        .await?;
    out.flush().await?;

    let reporter = {
        let mock = mock.clone();
        async move {
            let mut reported = 0;
            loop {
                let requests = mock.requests();
                for request in &requests[reported..] {
                    let line = format!("request {request}\n");
                    if out.write_all(line.as_bytes()).await.is_err() || out.flush().await.is_err() {
                        return;
                    }
                }
                reported = requests.len();
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    let stdin_closed = async {
        let mut buf = [0u8; 256];
        let mut stdin = tokio::io::stdin();
        while matches!(stdin.read(&mut buf).await, Ok(n) if n > 0) {}
    };
    tokio::select! {
        () = reporter => {}
        () = stdin_closed => {}
    }
    Ok(())
}
