//! The way out of a sandbox whose network is refused, for the domains of
//! `sandbox.allowedDomains`: an HTTP proxy (CONNECT and plain HTTP) MAIA
//! serves on a socket listening at `127.0.0.1:PORT` *inside* the session's
//! network namespace (made there by the namespace holder and taken over by
//! MAIA), so commands reach it through `HTTP_PROXY`/`HTTPS_PROXY`/
//! `ALL_PROXY` and nothing else. A listed domain (or `*.domain` for its
//! subdomains) is connected from MAIA's side; any other is refused with a
//! clear message. What is forwarded is checked too, not only where:
//! requests are parsed (with `httparse`, strictly) and what goes on is the
//! parsed request written out again, its `Host` naming its target
//! ([`head`]), its body as framed ([`body`]), one request per connection;
//! a tunnel carries TLS that names its CONNECT host or such HTTP, nothing
//! else ([`tunnel`]).

#[cfg(test)]
mod attacks;
mod body;
mod head;
mod tunnel;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use head::{HeadError, Refusal};

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

/// The host and port of a CONNECT target (`host:port`, `[v6]:port`).
fn connect_target(target: &str) -> Option<(String, u16)> {
    match head::authority(target)? {
        (host, Some(port)) => Some((host, port)),
        (_, None) => None,
    }
}

async fn handle_one(mut conn: TcpStream, allowed: &Allowed) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let (request, end) = match head::read(&mut conn, &mut buf).await {
        Ok(read) => read,
        Err(HeadError::Refused(why)) => return refuse(&mut conn, &why).await,
        Err(HeadError::Closed) => return Ok(()),
        Err(HeadError::Io(e)) => return Err(e),
    };
    let connect = request.method == "CONNECT";
    let target = if connect {
        connect_target(&request.target).map(|(host, port)| (host, port, String::new()))
    } else {
        head::absolute(&request.target)
    };
    let Some((host, port, _)) = target else {
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
    // A plain request is checked before anything is connected.
    let checked = match connect {
        true => None,
        false => match head::rewrite(&request, &host, port) {
            Ok(checked) => Some(checked),
            Err(why) => return refuse(&mut conn, &why).await,
        },
    };
    let mut upstream = match allowed.connect(&host, port).await {
        Ok(upstream) => upstream,
        Err(e) => {
            let message = format!("[MAIA sandbox] cannot reach {host}:{port}: {e}\n");
            return answer(&mut conn, "502 Bad Gateway", &message).await;
        }
    };
    let rest = buf.split_off(end);
    match checked {
        Some((out, framing)) => body::exchange(&mut conn, &mut upstream, &out, framing, rest).await,
        None => {
            conn.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await?;
            tunnel::relay(&mut conn, &mut upstream, rest, &host, port).await
        }
    }
}

/// Answers a request that breaks a rule with its status and the reason.
async fn refuse(conn: &mut TcpStream, why: &Refusal) -> std::io::Result<()> {
    tracing::warn!(%why, "sandbox proxy: a request was refused");
    let message = format!("[MAIA sandbox] refused: {why}.\n");
    answer(conn, why.status(), &message).await
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
    fn connect_targets() {
        assert_eq!(connect_target("a.b:443"), Some(("a.b".into(), 443)));
        assert_eq!(connect_target("[::1]:22"), Some(("::1".into(), 22)));
        for bad in [
            "a.b",
            "a.b:",
            "evil.test@a.b:443",
            "a.b:443/x",
            "http://a.b/",
        ] {
            assert_eq!(connect_target(bad), None, "{bad}");
        }
    }
}
