//! What a CONNECT tunnel may carry to an allowed `host:port`: a TLS
//! connection whose ClientHello names `host` (SNI; a shared front routes by
//! it), a plain-HTTP request held to the rules of [`super::head`], or any
//! other protocol as it is (ssh, a server that speaks first). A TLS
//! connection that names another server, or none, is closed with the TLS
//! alert `unrecognized_name`, so the command's TLS library says why.
//!
//! What the tunnel cannot see: the HTTP inside TLS. A request whose SNI
//! names the allowed host and whose encrypted `Host` names another site on
//! the same front is beyond a proxy that does not break TLS
//! (docs/permissions.md).

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{MAX_HEAD, head};

/// A fatal TLS alert, `unrecognized_name` (112), in a TLS 1.0 record.
const UNRECOGNIZED_NAME: [u8; 7] = [0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x70];

/// Checks what the client sends first through the tunnel to `host:port`,
/// then relays both ways.
pub(super) async fn relay(
    conn: &mut TcpStream,
    upstream: &mut TcpStream,
    mut first: Vec<u8>,
    host: &str,
    port: u16,
) -> std::io::Result<()> {
    if first.is_empty() {
        let mut buf = [0u8; 4096];
        tokio::select! {
            n = conn.read(&mut buf) => {
                let n = n?;
                if n == 0 {
                    return Ok(());
                }
                first.extend_from_slice(&buf[..n]);
            }
            // The server speaks first (ssh banners, SMTP, a database): not
            // TLS nor HTTP from the client, so nothing to check.
            ready = upstream.readable() => ready?,
        }
    }
    if first.first() == Some(&0x16) {
        return tls(conn, upstream, first, host).await;
    }
    if head::looks_like_http(&first) {
        return http(conn, upstream, first, host, port).await;
    }
    super::forward(conn, upstream, &first).await
}

/// A TLS connection: reads its ClientHello and checks the server name.
async fn tls(
    conn: &mut TcpStream,
    upstream: &mut TcpStream,
    mut first: Vec<u8>,
    host: &str,
) -> std::io::Result<()> {
    let mut buf = [0u8; 4096];
    let named = loop {
        match server_name(&first) {
            Hello::Named(name) => break Some(name),
            Hello::Unnamed => break None,
            Hello::Invalid => {
                tracing::warn!(host, "sandbox proxy: a tunnel's TLS was not valid; closed");
                return conn.shutdown().await;
            }
            Hello::Partial if first.len() > 4 * MAX_HEAD => {
                tracing::warn!(host, "sandbox proxy: a tunnel's ClientHello is too long");
                return conn.shutdown().await;
            }
            Hello::Partial => {}
        }
        let n = conn.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        first.extend_from_slice(&buf[..n]);
    };
    let host_is_ip = host.parse::<std::net::IpAddr>().is_ok();
    let fits = match &named {
        Some(name) => same_name(name, host),
        // Clients send no server name for an address.
        None => host_is_ip,
    };
    if !fits {
        tracing::warn!(
            host,
            named = named.as_deref().unwrap_or("(none)"),
            "sandbox proxy: a tunnel's TLS names another server than its CONNECT host; closed"
        );
        conn.write_all(&UNRECOGNIZED_NAME).await?;
        return conn.shutdown().await;
    }
    super::forward(conn, upstream, &first).await
}

/// Plain HTTP in the tunnel: its first request is held to the Host rule,
/// and the connection closes after it.
async fn http(
    conn: &mut TcpStream,
    upstream: &mut TcpStream,
    mut first: Vec<u8>,
    host: &str,
    port: u16,
) -> std::io::Result<()> {
    let Some(end) = super::read_head(conn, &mut first).await? else {
        return Ok(());
    };
    let text = String::from_utf8_lossy(&first[..end]).into_owned();
    let line = text.split("\r\n").next().unwrap_or_default();
    match head::rewrite(&text, line, host, port) {
        Ok(rewritten) => {
            let bytes = [rewritten.as_bytes(), &first[end..]].concat();
            super::forward(conn, upstream, &bytes).await
        }
        Err(why) => super::refuse(conn, &why).await,
    }
}

enum Hello {
    Named(String),
    Unnamed,
    Partial,
    Invalid,
}

/// The server name of the ClientHello at the start of `bytes`.
fn server_name(bytes: &[u8]) -> Hello {
    let mut acceptor = rustls::server::Acceptor::default();
    let mut reader = bytes;
    while !reader.is_empty() {
        if acceptor.read_tls(&mut reader).is_err() {
            return Hello::Invalid;
        }
    }
    match acceptor.accept() {
        Ok(Some(accepted)) => match accepted.client_hello().server_name() {
            Some(name) => Hello::Named(name.to_owned()),
            None => Hello::Unnamed,
        },
        Ok(None) => Hello::Partial,
        Err(_) => Hello::Invalid,
    }
}

fn same_name(named: &str, host: &str) -> bool {
    named
        .trim_end_matches('.')
        .eq_ignore_ascii_case(host.trim_end_matches('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real ClientHello for `name`, made by rustls.
    fn client_hello(name: &str) -> Vec<u8> {
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        let server = rustls::pki_types::ServerName::try_from(name.to_owned()).unwrap();
        let mut client =
            rustls::ClientConnection::new(std::sync::Arc::new(config), server).unwrap();
        let mut out = Vec::new();
        client.write_tls(&mut out).unwrap();
        out
    }

    #[test]
    fn the_client_hellos_name_is_read() {
        let hello = client_hello("allowed.test");
        assert!(matches!(server_name(&hello), Hello::Named(n) if n == "allowed.test"));
        assert!(matches!(server_name(&hello[..20]), Hello::Partial));
        assert!(matches!(
            server_name(&client_hello("127.0.0.1")),
            Hello::Unnamed
        ));
        assert!(matches!(
            server_name(b"\x16\x03\x01\x00\x05garbage-bytes"),
            Hello::Invalid
        ));
    }

    #[test]
    fn names_compare_without_case_or_the_final_dot() {
        assert!(same_name("Allowed.Test.", "allowed.test"));
        assert!(!same_name("evil.test", "allowed.test"));
    }
}
