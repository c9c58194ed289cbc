//! The ways around the proxy's checks, tried through a served proxy: raw
//! bytes in, what the client is answered and what reached the upstream
//! out. `allowed.test` is listed and resolves to a local server that keeps
//! every byte it is sent; `evil.test` is the site an attack tries to reach
//! behind it, so it must never appear in what the upstream got.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{Allowed, serve};

type Seen = Arc<Mutex<Vec<u8>>>;

/// A served proxy for `allowed.test`, and what its upstream was sent.
async fn setup() -> (SocketAddr, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = listener.local_addr().unwrap();
    let seen = Seen::default();
    let kept = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let quiet = Duration::from_millis(300);
                while let Ok(Ok(n)) = tokio::time::timeout(quiet, conn.read(&mut buf)).await {
                    if n == 0 {
                        break;
                    }
                    kept.lock().unwrap().extend_from_slice(&buf[..n]);
                }
                let _ = conn
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nupstream")
                    .await;
            });
        }
    });
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy = listener.local_addr().unwrap();
    let allowed = Allowed {
        domains: vec!["allowed.test".into()],
        hosts: vec![("allowed.test".into(), upstream)],
    };
    serve(listener, allowed).unwrap();
    (proxy, seen)
}

/// Everything the connection is sent until it closes (or 5 s).
async fn read_all(conn: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, conn.read(&mut buf)).await {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Sends `bytes` as a plain proxy request; the answer.
async fn plain(proxy: SocketAddr, bytes: &[u8]) -> String {
    let mut conn = TcpStream::connect(proxy).await.unwrap();
    conn.write_all(bytes).await.unwrap();
    read_all(&mut conn).await
}

/// Opens a CONNECT tunnel to `allowed.test:80`, then sends `bytes` through
/// it; the answer after the tunnel's own.
async fn tunnel(proxy: SocketAddr, bytes: &[u8]) -> String {
    let mut conn = TcpStream::connect(proxy).await.unwrap();
    conn.write_all(b"CONNECT allowed.test:80 HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n")
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(conn.read(&mut byte).await.unwrap(), 1, "the tunnel closed");
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 200"), "{head:?}");
    conn.write_all(bytes).await.unwrap();
    read_all(&mut conn).await
}

fn seen(seen: &Seen) -> String {
    String::from_utf8_lossy(&seen.lock().unwrap()).into_owned()
}

/// The request was refused with `status` and nothing of it reached the
/// upstream.
fn refused(answer: &str, status: &str, upstream: &Seen, case: &str) {
    assert!(
        answer.starts_with(&format!("HTTP/1.1 {status}")),
        "{case}: answered {answer:?}"
    );
    let got = seen(upstream);
    assert!(got.is_empty(), "{case}: the upstream got {got:?}");
}

/// The request went on, and nothing the upstream got names `evil.test`.
fn passed(answer: &str, upstream: &Seen, case: &str) -> String {
    assert!(answer.ends_with("upstream"), "{case}: answered {answer:?}");
    let got = seen(upstream);
    assert!(
        !got.to_ascii_lowercase().contains("evil") && !got.contains("/admin"),
        "{case}: the upstream got {got:?}"
    );
    got
}

#[tokio::test]
async fn a_bare_lf_or_cr_inside_a_header_line_is_refused() {
    for (name, line) in [("bare LF", "X-A: 1\nHost"), ("bare CR", "X-A: 1\rHost")] {
        let head = format!("GET http://allowed.test/ HTTP/1.1\r\n{line}: evil.test\r\n\r\n");
        let (proxy, upstream) = setup().await;
        let answer = plain(proxy, head.as_bytes()).await;
        refused(&answer, "400", &upstream, name);
        let head = format!("GET / HTTP/1.1\r\n{line}: evil.test\r\n\r\n");
        let (proxy, upstream) = setup().await;
        let answer = tunnel(proxy, head.as_bytes()).await;
        refused(&answer, "400", &upstream, &format!("{name} in a tunnel"));
    }
}

#[tokio::test]
async fn a_request_smuggled_after_a_bare_blank_line_is_refused() {
    let (proxy, upstream) = setup().await;
    let head = "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nX-A: 1\n\nGET /admin HTTP/1.1\nHost: evil.test\r\n\r\n";
    let answer = plain(proxy, head.as_bytes()).await;
    refused(&answer, "400", &upstream, "LF LF");
    let (proxy, upstream) = setup().await;
    let head = "GET / HTTP/1.1\r\nHost: allowed.test\r\nX-A: 1\n\nGET /admin HTTP/1.1\nHost: evil.test\r\n\r\n";
    let answer = tunnel(proxy, head.as_bytes()).await;
    refused(&answer, "400", &upstream, "LF LF in a tunnel");
}

#[tokio::test]
async fn a_pipelined_second_request_is_not_forwarded() {
    let second = "GET /admin HTTP/1.1\r\nHost: evil.test\r\n\r\n";
    let (proxy, upstream) = setup().await;
    let head = format!("GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n{second}");
    let answer = plain(proxy, head.as_bytes()).await;
    let got = passed(&answer, &upstream, "pipelined");
    assert!(got.starts_with("GET / HTTP/1.1\r\n"), "{got:?}");
    let (proxy, upstream) = setup().await;
    let head = format!("GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n{second}");
    let answer = tunnel(proxy, head.as_bytes()).await;
    let got = passed(&answer, &upstream, "pipelined in a tunnel");
    assert!(got.starts_with("GET / HTTP/1.1\r\n"), "{got:?}");
}

#[tokio::test]
async fn http_in_a_tunnel_after_whitespace_is_parsed_and_checked() {
    for lead in [" ", "\t", "\r\n", "\r\n\r\n", "\n"] {
        let (proxy, upstream) = setup().await;
        let head = format!("{lead}GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n");
        let answer = tunnel(proxy, head.as_bytes()).await;
        let status = if lead.starts_with("\r\n") {
            "403"
        } else {
            "400"
        };
        refused(&answer, status, &upstream, &format!("{lead:?}"));
    }
    // An empty line before the request line is allowed (RFC 9112 2.2),
    // and not sent on.
    let (proxy, upstream) = setup().await;
    let head = "\r\nGET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
    let got = passed(&tunnel(proxy, head.as_bytes()).await, &upstream, "CRLF");
    assert!(got.starts_with("GET / HTTP/1.1\r\n"), "{got:?}");
}

#[tokio::test]
async fn a_tunnel_carries_tls_or_http_only() {
    for other in [
        "SSH-2.0-OpenSSH_9.6\r\n",
        "\x00\x01",
        "\x7fGET / HTTP/1.1\r\n\r\n",
    ] {
        let (proxy, upstream) = setup().await;
        let answer = tunnel(proxy, other.as_bytes()).await;
        refused(&answer, "400", &upstream, &format!("{other:?}"));
    }
}

#[tokio::test]
async fn two_host_headers_or_a_folded_one_are_refused() {
    for hosts in [
        "Host: allowed.test\r\nHost: evil.test",
        "Host: allowed.test\r\nhost: allowed.test",
        "Host: allowed.test\r\n evil.test",
        "Host : evil.test",
        "Host: allowed.test, evil.test",
    ] {
        let (proxy, upstream) = setup().await;
        let head = format!("GET http://allowed.test/ HTTP/1.1\r\n{hosts}\r\n\r\n");
        let answer = plain(proxy, head.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 40"), "{hosts:?}: {answer:?}");
        refused(&answer, &answer[9..12], &upstream, hosts);
        let (proxy, upstream) = setup().await;
        let head = format!("GET / HTTP/1.1\r\n{hosts}\r\n\r\n");
        let answer = tunnel(proxy, head.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 40"), "{hosts:?}: {answer:?}");
        refused(&answer, &answer[9..12], &upstream, hosts);
    }
}

#[tokio::test]
async fn the_host_must_name_the_port_its_case_does_not_matter() {
    for host in [
        "allowed.test:81",
        "allowed.test:+80",
        "allowed.test:",
        "evil.test:80",
    ] {
        let (proxy, upstream) = setup().await;
        let head = format!("GET http://allowed.test/ HTTP/1.1\r\nHost: {host}\r\n\r\n");
        refused(&plain(proxy, head.as_bytes()).await, "403", &upstream, host);
    }
    for host in ["ALLOWED.Test", "allowed.test.:80"] {
        let (proxy, upstream) = setup().await;
        let head = format!("GET http://allowed.test/x HTTP/1.1\r\nHost: {host}\r\n\r\n");
        let got = passed(&plain(proxy, head.as_bytes()).await, &upstream, host);
        assert!(got.starts_with("GET /x HTTP/1.1\r\n"), "{got:?}");
        assert!(got.contains("\r\nHost: allowed.test\r\n"), "{got:?}");
    }
}

#[tokio::test]
async fn an_absolute_target_must_name_the_host_the_request_goes_to() {
    // Through a tunnel to allowed.test: a server takes the target's host
    // over the Host header (RFC 9112 3.2.2).
    for target in [
        "http://evil.test/",
        "http://allowed.test:81/",
        "http://allowed.test@evil.test/",
        "evil.test:80",
    ] {
        let (proxy, upstream) = setup().await;
        let head = format!("GET {target} HTTP/1.1\r\nHost: allowed.test\r\n\r\n");
        let answer = tunnel(proxy, head.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 40"), "{target}: {answer:?}");
        refused(&answer, &answer[9..12], &upstream, target);
    }
    let (proxy, upstream) = setup().await;
    let head = "GET http://allowed.test/y HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
    let got = passed(&tunnel(proxy, head.as_bytes()).await, &upstream, "same");
    assert!(got.starts_with("GET /y HTTP/1.1\r\n"), "{got:?}");
    // A plain request: the Host header against the target.
    let (proxy, upstream) = setup().await;
    let head = "GET http://allowed.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n";
    refused(
        &plain(proxy, head.as_bytes()).await,
        "403",
        &upstream,
        "plain",
    );
}

#[tokio::test]
async fn content_length_with_transfer_encoding_is_refused() {
    let smuggled = "0\r\n\r\nGET /admin HTTP/1.1\r\nHost: evil.test\r\n\r\n";
    for framing in [
        "Content-Length: 4\r\nTransfer-Encoding: chunked",
        "Transfer-Encoding: chunked\r\nContent-Length: 4",
        "Content-Length: 4\r\nContent-Length: 5",
        "Content-Length: 4, 4",
        "Transfer-Encoding: gzip, chunked",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked",
    ] {
        let (proxy, upstream) = setup().await;
        let head = format!(
            "POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n{framing}\r\n\r\n{smuggled}"
        );
        let answer = plain(proxy, head.as_bytes()).await;
        refused(&answer, "400", &upstream, framing);
        let (proxy, upstream) = setup().await;
        let head = format!("POST / HTTP/1.1\r\nHost: allowed.test\r\n{framing}\r\n\r\n{smuggled}");
        let answer = tunnel(proxy, head.as_bytes()).await;
        refused(&answer, "400", &upstream, framing);
    }
}

#[tokio::test]
async fn a_body_goes_on_as_its_framing_says_and_nothing_after_it() {
    let after = "GET /admin HTTP/1.1\r\nHost: evil.test\r\n\r\n";
    let (proxy, upstream) = setup().await;
    let head = format!(
        "POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 4\r\n\r\nabcd{after}"
    );
    let got = passed(&plain(proxy, head.as_bytes()).await, &upstream, "length");
    assert!(got.ends_with("\r\n\r\nabcd"), "{got:?}");
    let (proxy, upstream) = setup().await;
    let head = format!(
        "POST / HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: Chunked\r\n\r\n4;x=y\r\nabcd\r\n0\r\nT: 1\r\n\r\n{after}"
    );
    let got = passed(&tunnel(proxy, head.as_bytes()).await, &upstream, "chunked");
    assert!(got.ends_with("\r\n\r\n4\r\nabcd\r\n0\r\n\r\n"), "{got:?}");
    // A chunk whose data does not end where its size says.
    let (proxy, upstream) = setup().await;
    let head = format!(
        "POST / HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcd\r\n0\r\n\r\n{after}"
    );
    let answer = tunnel(proxy, head.as_bytes()).await;
    let got = seen(&upstream);
    assert!(!answer.contains("upstream"), "{answer:?}");
    assert!(!got.contains("abcd") && !got.contains("evil"), "{got:?}");
}

/// A ClientHello naming `name`, made by rustls.
fn client_hello(name: &str) -> Vec<u8> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let server = rustls::pki_types::ServerName::try_from(name.to_owned()).unwrap();
    let mut client = rustls::ClientConnection::new(Arc::new(config), server).unwrap();
    let mut out = Vec::new();
    client.write_tls(&mut out).unwrap();
    out
}

#[tokio::test]
async fn after_a_client_hello_only_tls_records_go_on() {
    let hello = client_hello("allowed.test");
    let (proxy, upstream) = setup().await;
    let bytes = [&hello[..], b"GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n"].concat();
    let _ = tunnel(proxy, &bytes).await;
    let got = seen(&upstream);
    assert!(!got.contains("evil"), "{got:?}");
    // Records after it go on as they are.
    let (proxy, upstream) = setup().await;
    let record = [0x17, 0x03, 0x03, 0x00, 0x03, b'a', b'b', b'c'];
    let _ = tunnel(proxy, &[&hello[..], &record].concat()).await;
    let got = upstream.lock().unwrap().clone();
    assert_eq!(got, [&hello[..], &record].concat());
}
