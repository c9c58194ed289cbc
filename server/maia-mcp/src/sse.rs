//! MCP over the legacy HTTP+SSE transport (MCP 2024-11-05), which editors
//! such as Zed still let users configure: `GET <url>` opens an event
//! stream whose first `endpoint` event names where to `POST` our messages;
//! the server's messages arrive as `message` events on the stream.
//!
//! rmcp dropped its client for this transport, so it is bridged here onto
//! the one it keeps for byte streams (newline-delimited JSON-RPC): each
//! `message` event becomes a line rmcp reads, each line rmcp writes is
//! posted to the endpoint. The bridge ends when either side does: the
//! stream closing closes rmcp's input, and rmcp letting go stops the
//! stream.

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, DuplexStream};

/// How long the server may take to name its message endpoint.
const ENDPOINT_WAIT: Duration = Duration::from_secs(10);

/// Bytes buffered between the bridge and rmcp.
const PIPE: usize = 1 << 20;

/// Opens the event stream at `url` and returns the byte stream rmcp speaks
/// MCP over, once the server has named its message endpoint.
pub(crate) async fn connect(
    client: reqwest::Client,
    url: &str,
    headers: &[(String, String)],
) -> Result<DuplexStream, String> {
    let base = reqwest::Url::parse(url).map_err(|e| format!("invalid URL `{url}`: {e}"))?;
    let mut request = client
        .get(base.clone())
        .header(reqwest::header::ACCEPT, "text/event-stream");
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let response = request
        .send()
        .await
        .map_err(|e| format!("cannot connect to {url}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!(
            "{url} answered HTTP {} to the event stream request",
            response.status().as_u16()
        ));
    }
    let mut events = response.bytes_stream().eventsource();
    let endpoint = tokio::time::timeout(ENDPOINT_WAIT, async {
        while let Some(event) = events.next().await {
            match event {
                Ok(event) if event.event == "endpoint" => return Ok(event.data),
                Ok(_) => continue,
                Err(e) => return Err(format!("the event stream of {url} failed: {e}")),
            }
        }
        Err(format!(
            "{url} closed its event stream before naming an endpoint"
        ))
    })
    .await
    .map_err(|_| {
        format!(
            "{url} named no message endpoint within {} s (is it an SSE server?)",
            ENDPOINT_WAIT.as_secs()
        )
    })??;
    let endpoint = base
        .join(endpoint.trim())
        .map_err(|e| format!("invalid endpoint `{endpoint}` from {url}: {e}"))?;
    if endpoint.origin() != base.origin() {
        return Err(format!(
            "{url} named an endpoint on another origin ({endpoint}); refused"
        ));
    }
    let (ours, theirs) = tokio::io::duplex(PIPE);
    let (from_rmcp, mut to_rmcp) = tokio::io::split(ours);
    let incoming = tokio::spawn(async move {
        while let Some(event) = events.next().await {
            let Ok(event) = event else { break };
            if !(event.event.is_empty() || event.event == "message") {
                continue;
            }
            let line = format!("{}\n", event.data.replace('\n', ""));
            if to_rmcp.write_all(line.as_bytes()).await.is_err() {
                break;
            }
        }
        // rmcp sees the end of its input: the connection is closed.
        let _ = to_rmcp.shutdown().await;
    });
    let headers = headers.to_vec();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(from_rmcp).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let mut post = client
                .post(endpoint.clone())
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(line);
            for (name, value) in &headers {
                post = post.header(name.as_str(), value.as_str());
            }
            match post.send().await {
                Ok(answer) if answer.status().is_success() => {}
                Ok(answer) => tracing::warn!(
                    status = answer.status().as_u16(),
                    "the SSE MCP server refused a message"
                ),
                Err(e) => {
                    tracing::warn!("cannot post to the SSE MCP server: {e}");
                    break;
                }
            }
        }
        // rmcp let go (or the server is gone): stop listening.
        incoming.abort();
    });
    Ok(theirs)
}
