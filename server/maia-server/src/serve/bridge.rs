//! `maia acp --connect URL`: a stdio-only editor's ACP bridged to a
//! `maia serve` daemon over a WebSocket, one stdin line per text frame
//! and one text frame per stdout line (`wss://` verified against the
//! platform's roots). The token comes from an environment variable, never
//! the command line.

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

/// Bridges stdin and stdout to `url` until either side ends.
pub async fn run(url: &str, token: &str) -> anyhow::Result<()> {
    let url = url
        .replacen("https://", "wss://", 1)
        .replacen("http://", "ws://", 1);
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|e| anyhow::anyhow!("--connect {url}: {e}"))?;
    request.headers_mut().insert(
        "authorization",
        HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| anyhow::anyhow!("the token is not a header value"))?,
    );
    // `wss://`: the process's TLS verifier (the platform's roots).
    let connector = if url.starts_with("wss://") {
        let config = maia_http::websocket_tls().map_err(|e| anyhow::anyhow!("{e}"))?;
        Some(tokio_tungstenite::Connector::Rustls(std::sync::Arc::new(
            config,
        )))
    } else {
        None
    };
    let (socket, _) =
        tokio_tungstenite::connect_async_tls_with_config(request, None, false, connector)
            .await
            .map_err(|e| anyhow::anyhow!("cannot connect to {url}: {e}"))?;
    tracing::info!(url, "connected");
    let (mut tx, mut rx) = socket.split();
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut stdout = tokio::io::stdout();
    loop {
        tokio::select! {
            line = lines.next_line() => match line? {
                Some(line) if line.trim().is_empty() => {}
                Some(line) => tx.send(Message::Text(line.into())).await?,
                None => {
                    let _ = tx.send(Message::Close(None)).await;
                    break;
                }
            },
            message = rx.next() => match message {
                Some(Ok(Message::Text(text))) => {
                    stdout.write_all(text.as_bytes()).await?;
                    stdout.write_all(b"\n").await?;
                    stdout.flush().await?;
                }
                Some(Ok(Message::Close(frame))) => {
                    let reason = frame.map(|f| f.reason.to_string()).unwrap_or_default();
                    anyhow::bail!("the daemon closed the connection: {reason}");
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => anyhow::bail!("the connection failed: {e}"),
                None => anyhow::bail!("the daemon closed the connection"),
            },
        }
    }
    Ok(())
}
