//! Each [`ConnectFailure`] kind, produced by a real failure against a local socket (or an
//! unresolvable name), through the public client.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use maia_llm::{ConnectFailure, LlmClient, LlmConfig, LlmError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

fn config(url: &str, timeout: Duration) -> LlmConfig {
    LlmConfig {
        base_url: url.to_owned(),
        request_timeout: timeout,
        max_retries: 0,
        ..LlmConfig::default()
    }
}

/// The failure of listing the models of `url`, which must be a connection failure.
async fn failure(url: &str, timeout: Duration) -> (ConnectFailure, String) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = LlmClient::new(config(url, timeout)).unwrap();
    match client.list_models().await {
        Err(err @ LlmError::Connection { .. }) => {
            let text = err.to_string();
            assert!(text.starts_with("connection failed: "), "{text}");
            assert!(!text.contains('\n'), "{text}");
            (err.connect_failure().cloned().unwrap(), text)
        }
        other => panic!("{other:?}"),
    }
}

/// A local port where nothing listens, held by a socket that is bound but
/// not listening (a connection to it is refused) for as long as the caller
/// keeps it: a port merely freed could be taken meanwhile by another test's
/// server, whose reset would then be read instead of the refusal.
fn closed_port() -> (tokio::net::TcpSocket, u16) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = socket.local_addr().unwrap().port();
    (socket, port)
}

/// A local server that runs `serve` on every connection it accepts.
async fn server<F, Fut>(serve: F) -> u16
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream));
        }
    });
    port
}

#[tokio::test]
async fn a_closed_port_is_refused() {
    let (_held, port) = closed_port();
    let url = format!("http://127.0.0.1:{port}");
    let (kind, text) = failure(&url, Duration::from_secs(10)).await;
    assert_eq!(kind, ConnectFailure::Refused, "{text}");
}

#[tokio::test]
async fn an_unresolvable_host_is_a_dns_failure() {
    let (kind, text) = failure("http://nonexistent.invalid:4000", Duration::from_secs(30)).await;
    assert_eq!(kind, ConnectFailure::Dns, "{text}");
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let (hold, _keep) = tokio::sync::mpsc::channel::<tokio::net::TcpStream>(16);
    let port = server(move |stream| {
        let hold = hold.clone();
        async move {
            // Kept open, never answered.
            let _ = hold.send(stream).await;
        }
    })
    .await;
    let url = format!("http://127.0.0.1:{port}");
    let (kind, text) = failure(&url, Duration::from_millis(300)).await;
    assert_eq!(kind, ConnectFailure::Timeout, "{text}");
    assert!(text.contains("no response within 0.3 s"), "{text}");
}

#[tokio::test]
async fn tls_to_a_plain_http_server_is_a_tls_failure() {
    let port = server(|mut stream| async move {
        let mut buf = [0u8; 1024];
        let _ = stream.read(&mut buf).await;
        let _ = stream
            .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
            .await;
    })
    .await;
    let url = format!("https://127.0.0.1:{port}");
    let (kind, text) = failure(&url, Duration::from_secs(10)).await;
    assert_eq!(kind, ConnectFailure::Tls, "{text}");
}

#[tokio::test]
async fn a_server_closing_during_the_handshake_is_a_tls_failure() {
    let port = server(|stream| async move { drop(stream) }).await;
    let (kind, text) = failure(
        &format!("https://127.0.0.1:{port}"),
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(kind, ConnectFailure::Tls, "{text}");
    // The same over plain HTTP is no TLS matter.
    let (kind, text) = failure(&format!("http://127.0.0.1:{port}"), Duration::from_secs(10)).await;
    assert_eq!(kind, ConnectFailure::Other, "{text}");
}

#[tokio::test]
async fn malformed_and_unsupported_urls_are_bad_urls() {
    let err = LlmClient::new(config("http://exa mple.com", Duration::from_secs(1))).unwrap_err();
    assert!(
        matches!(
            err.connect_failure(),
            Some(ConnectFailure::BadUrl { reason }) if reason == "invalid international domain name"
        ),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    assert_eq!(
        err.to_string(),
        "connection failed: invalid base URL \"http://exa mple.com\": invalid international domain name"
    );

    // Parsed, but not a scheme the client speaks: refused before any connection.
    let (kind, text) = failure("ftp://127.0.0.1:21", Duration::from_secs(1)).await;
    assert!(matches!(kind, ConnectFailure::BadUrl { .. }), "{text}");
}
