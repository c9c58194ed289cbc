//! What a CONNECT tunnel to an allowed `host:port` may carry: TLS or plain
//! HTTP, nothing else. A first byte of 0x16 (a TLS handshake record) must
//! begin a ClientHello that names `host` (SNI; a shared front routes by
//! it), and then only TLS records go on, each checked for a record header;
//! a TLS connection that names another server, or none, is closed with the
//! TLS alert `unrecognized_name`, so the command's TLS library says why.
//! Anything else must parse as an HTTP request for `host:port`, held to
//! the rules of [`super::head`] (leading whitespace, a bare LF, another
//! protocol: refused with a 400 and closed). A server that speaks first
//! (ssh, SMTP) closes the tunnel: its client's bytes would pass unchecked.
//!
//! What the tunnel cannot see: the HTTP inside TLS. A request whose SNI
//! names the allowed host and whose encrypted `Host` names another site on
//! the same front is beyond a proxy that does not break TLS
//! (docs/permissions.md).

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::MAX_HEAD;
use super::body::{Input, exchange};
use super::head::{self, HeadError};

/// A fatal TLS alert, `unrecognized_name` (112), in a TLS 1.0 record.
const UNRECOGNIZED_NAME: [u8; 7] = [0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x70];

/// The largest TLS record body (a TLS 1.2 ciphertext: 2^14 + 2048).
const MAX_RECORD: usize = 16384 + 2048;

/// Checks what the client sends first through the tunnel to `host:port`,
/// then carries it on.
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
            ready = upstream.readable() => {
                ready?;
                tracing::warn!(host, "sandbox proxy: a tunnel's server spoke first (not TLS nor HTTP); closed");
                return conn.shutdown().await;
            }
        }
    }
    if first.first() == Some(&0x16) {
        return tls(conn, upstream, first, host).await;
    }
    http(conn, upstream, first, host, port).await
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
    let (client_in, mut client_out) = conn.split();
    let (mut server_in, mut server_out) = upstream.split();
    let send = async {
        let mut input = Input::new(first, client_in);
        records(&mut input, &mut server_out).await
    };
    let back = async {
        tokio::io::copy(&mut server_in, &mut client_out).await?;
        client_out.shutdown().await
    };
    tokio::pin!(send, back);
    tokio::select! {
        done = &mut back => done,
        sent = &mut send => match sent {
            Ok(()) => back.await,
            Err(e) => {
                tracing::warn!(host, %e, "sandbox proxy: a tunnel's TLS stream was broken; closed");
                Err(e)
            }
        },
    }
}

/// Sends on TLS records from `input` while they are whole records (a type
/// of 20 to 24, version 3.x, a length within the limit); at the end of the
/// client's stream, shuts `out` down.
async fn records<R, W>(input: &mut Input<R>, out: &mut W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    while input.fill_to(5).await? {
        let header = &input.buffered()[..5];
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if !(20..=24).contains(&header[0]) || header[1] != 3 || header[2] > 4 || len > MAX_RECORD {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "bytes that are not a TLS record",
            ));
        }
        input.copy(5 + len as u64, out).await?;
    }
    out.shutdown().await
}

/// Plain HTTP in the tunnel: one request, parsed and held to the rules of
/// [`head`], its body as framed; then the connection closes.
async fn http(
    conn: &mut TcpStream,
    upstream: &mut TcpStream,
    mut first: Vec<u8>,
    host: &str,
    port: u16,
) -> std::io::Result<()> {
    let parsed = match head::read(conn, &mut first).await {
        Ok((parsed, end)) => head::rewrite(&parsed, host, port).map(|(out, f)| (out, f, end)),
        Err(HeadError::Refused(why)) => Err(why),
        Err(HeadError::Closed) => return Ok(()),
        Err(HeadError::Io(e)) => return Err(e),
    };
    match parsed {
        Ok((out, framing, end)) => {
            let rest = first.split_off(end);
            exchange(conn, upstream, &out, framing, rest).await
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
