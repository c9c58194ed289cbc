//! The way out of a sandbox whose network is refused, for the domains of
//! `sandbox.allowedDomains`: an HTTP proxy (CONNECT and plain HTTP) MAIA
//! serves on a socket listening at `127.0.0.1:PORT` *inside* the session's
//! network namespace (made there by the namespace holder and taken over by
//! MAIA), so commands reach it through `HTTP_PROXY`/`HTTPS_PROXY`/
//! `ALL_PROXY` and nothing else. A listed domain (or `*.domain` for its
//! subdomains) is connected from MAIA's side; any other is refused with a
//! clear message. What is forwarded is checked too, not only where: a
//! plain request's `Host` must name its target ([`head`]), and a tunnel's
//! TLS must name its CONNECT host ([`tunnel`]).

mod head;
mod tunnel;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The most a request head may take.
pub(super) const MAX_HEAD: usize = 16 * 1024;

/// What the proxy lets through.
#[derive(Debug, Clone, Default)]
pub struct Allowed {
    /// `example.com` (that host) or `*.example.com` (its subdomains).
    pub domains: Vec<String>,
    /// Names resolved to these addresses instead of DNS (tests).
    pub hosts: Vec<(String, SocketAddr)>,
}

impl Allowed {
    /// Whether `host` is listed.
    pub fn allows(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.domains.iter().any(|d| {
            let d = d.trim().to_ascii_lowercase();
            match d.strip_prefix("*.") {
                Some(parent) => host.ends_with(&format!(".{parent}")),
                None => host == d,
            }
        })
    }

    async fn connect(&self, host: &str, port: u16) -> std::io::Result<TcpStream> {
        let fixed = self
            .hosts
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(host));
        match fixed {
            Some((_, addr)) => TcpStream::connect(addr).await,
            None => TcpStream::connect((host, port)).await,
        }
    }
}

/// Serves the proxy on `listener` until the runtime stops.
pub(super) fn serve(listener: std::net::TcpListener, allowed: Allowed) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let handle = tokio::runtime::Handle::try_current().map_err(std::io::Error::other)?;
    let allowed = Arc::new(allowed);
    handle.spawn(async move {
        let Ok(listener) = TcpListener::from_std(listener) else {
            return;
        };
        loop {
            let Ok((conn, _)) = listener.accept().await else {
                continue;
            };
            let allowed = allowed.clone();
            tokio::spawn(async move {
                if let Err(e) = handle_one(conn, &allowed).await {
                    tracing::debug!(%e, "sandbox proxy connection");
                }
            });
        }
    });
    Ok(())
}

/// The host and port of a request target (`host:port`, `http://host/…`).
fn target(method: &str, target: &str) -> Option<(String, u16, String)> {
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = target.rsplit_once(':')?;
        return Some((
            host.trim_matches(['[', ']']).to_owned(),
            port.parse().ok()?,
            String::new(),
        ));
    }
    let rest = target.strip_prefix("http://")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, p.parse().ok()?),
        None => (authority, 80),
    };
    Some((host.to_owned(), port, path.to_owned()))
}

/// Reads into `head` until it holds a whole request head; its length, or
/// `None` when the client closed first or sent an over-long head (answered
/// with a 431).
pub(super) async fn read_head(
    conn: &mut TcpStream,
    head: &mut Vec<u8>,
) -> std::io::Result<Option<usize>> {
    let mut buf = [0u8; 4096];
    loop {
        if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok(Some(i + 4));
        }
        if head.len() > MAX_HEAD {
            answer(conn, "431 Request Header Fields Too Large", "").await?;
            return Ok(None);
        }
        let n = conn.read(&mut buf).await?;
        if n == 0 {
            return Ok(None);
        }
        head.extend_from_slice(&buf[..n]);
    }
}

/// Sends `first` upstream, then relays both ways until either side closes.
pub(super) async fn forward(
    conn: &mut TcpStream,
    upstream: &mut TcpStream,
    first: &[u8],
) -> std::io::Result<()> {
    upstream.write_all(first).await?;
    tokio::io::copy_bidirectional(conn, upstream).await?;
    Ok(())
}

async fn handle_one(mut conn: TcpStream, allowed: &Allowed) -> std::io::Result<()> {
    let mut head = Vec::new();
    let Some(end) = read_head(&mut conn, &mut head).await? else {
        return Ok(());
    };
    let text = String::from_utf8_lossy(&head[..end]).into_owned();
    let line = text.lines().next().unwrap_or_default();
    let mut words = line.split_whitespace();
    let (method, raw_target, version) = (
        words.next().unwrap_or_default(),
        words.next().unwrap_or_default(),
        words.next().unwrap_or("HTTP/1.1"),
    );
    let Some((host, port, path)) = target(method, raw_target) else {
        return answer(
            &mut conn,
            "400 Bad Request",
            "[MAIA sandbox] this proxy takes CONNECT host:port and http:// requests only\n",
        )
        .await;
    };
    if !allowed.allows(&host) {
        let message = format!(
            "[MAIA sandbox] {host} is not in sandbox.allowedDomains: the connection was refused. The network is off in the sandbox but for the listed domains.\n"
        );
        return answer(&mut conn, "403 Forbidden", &message).await;
    }
    let mut upstream = match allowed.connect(&host, port).await {
        Ok(upstream) => upstream,
        Err(e) => {
            let message = format!("[MAIA sandbox] cannot reach {host}:{port}: {e}\n");
            return answer(&mut conn, "502 Bad Gateway", &message).await;
        }
    };
    if method.eq_ignore_ascii_case("CONNECT") {
        conn.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .await?;
        let first = head[end..].to_vec();
        return tunnel::relay(&mut conn, &mut upstream, first, &host, port).await;
    }
    // The origin form of the request line; the headers checked.
    let first = format!("{method} {path} {version}");
    match head::rewrite(&text, &first, &host, port) {
        Ok(rewritten) => {
            let bytes = [rewritten.as_bytes(), &head[end..]].concat();
            forward(&mut conn, &mut upstream, &bytes).await
        }
        Err(why) => refuse(&mut conn, &why).await,
    }
}

/// A 403 for a request whose head breaks a rule, with the reason.
async fn refuse(conn: &mut TcpStream, why: &str) -> std::io::Result<()> {
    tracing::warn!(why, "sandbox proxy: a request was refused");
    let message = format!("[MAIA sandbox] refused: {why}.\n");
    answer(conn, "403 Forbidden", &message).await
}

async fn answer(conn: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(response.as_bytes()).await?;
    conn.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_and_wildcards() {
        let a = Allowed {
            domains: vec!["crates.io".into(), "*.npmjs.org".into()],
            hosts: Vec::new(),
        };
        assert!(a.allows("crates.io") && a.allows("CRATES.IO."));
        assert!(a.allows("registry.npmjs.org"));
        assert!(!a.allows("npmjs.org") && !a.allows("evilcrates.io"));
        assert!(!a.allows("crates.io.evil.com"));
    }

    #[test]
    fn targets() {
        assert_eq!(
            target("CONNECT", "a.b:443"),
            Some(("a.b".into(), 443, String::new()))
        );
        assert_eq!(
            target("GET", "http://a.b:8080/x?y"),
            Some(("a.b".into(), 8080, "/x?y".into()))
        );
        assert_eq!(
            target("GET", "http://a.b"),
            Some(("a.b".into(), 80, "/".into()))
        );
        assert_eq!(target("GET", "/relative"), None);
    }
}
