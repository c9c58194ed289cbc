//! What the proxy forwards of a plain-HTTP request head: the `Host` header
//! must name the host (and port) the request was checked for, since behind
//! a shared front (a CDN, a reverse proxy, any virtual-host server) that
//! header, not the address, chooses the site; the headers that route a
//! request elsewhere (`Forwarded`, `X-Forwarded-Host`, …) are dropped; and
//! the connection is closed after one request (`Connection: close`), so a
//! second request on a kept-alive connection cannot pass unchecked.

/// Headers a command may not send on: they choose another site or path
/// behind a front, or belong to the hop to this proxy.
const DROPPED: &[&str] = &[
    "forwarded",
    "x-forwarded-host",
    "x-forwarded-server",
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-port",
    "x-forwarded-prefix",
    "x-host",
    "x-http-host-override",
    "x-original-url",
    "x-original-host",
    "x-rewrite-url",
    "x-real-ip",
    "proxy-connection",
    "proxy-authorization",
    "keep-alive",
    "connection",
];

/// Whether `bytes` start like an HTTP/1 request line (`GET /…`): the
/// method is a token of capital letters followed by a space.
pub(super) fn looks_like_http(bytes: &[u8]) -> bool {
    let method: Vec<u8> = bytes
        .iter()
        .copied()
        .take_while(u8::is_ascii_uppercase)
        .collect();
    !method.is_empty() && method.len() <= 16 && bytes.get(method.len()) == Some(&b' ')
}

/// The request head to send on, with `first` as its request line, for a
/// request checked against `host:port`; or why it is refused.
///
/// `head` is the whole head as it came (request line included, ending in
/// the blank line).
pub(super) fn rewrite(head: &str, first: &str, host: &str, port: u16) -> Result<String, String> {
    let mut out = format!("{first}\r\n");
    let mut named = None;
    for line in head.split("\r\n").skip(1) {
        if line.is_empty() {
            continue;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(format!("a malformed header line: {line:?}"));
        };
        let name_lower = name.trim().to_ascii_lowercase();
        if name_lower == "host" {
            if named.is_some() {
                return Err("the request has more than one Host header".into());
            }
            named = Some(value.trim().to_owned());
            continue;
        }
        if DROPPED.contains(&name_lower.as_str()) {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    let authority = authority(host, port);
    if let Some(named) = named
        && !same_authority(&named, host, port)
    {
        return Err(format!(
            "the Host header names {named}, not {authority} that the request goes to (a Host header chooses the site behind a shared front)"
        ));
    }
    out.push_str(&format!("Host: {authority}\r\nConnection: close\r\n\r\n"));
    Ok(out)
}

/// `host:port` as a Host header writes it (the port left out when 80).
fn authority(host: &str, port: u16) -> String {
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    if port == 80 {
        host
    } else {
        format!("{host}:{port}")
    }
}

/// Whether the Host header value `named` names `host` and `port`.
fn same_authority(named: &str, host: &str, port: u16) -> bool {
    let (named_host, named_port) = match named.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((h, tail)) => (h, tail.strip_prefix(':')),
            None => return false,
        },
        None => match named.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (named, None),
        },
    };
    let named_port = match named_port {
        Some(p) => match p.parse::<u16>() {
            Ok(p) => p,
            Err(_) => return false,
        },
        None => 80,
    };
    let norm = |h: &str| h.trim_end_matches('.').to_ascii_lowercase();
    norm(named_host) == norm(host) && named_port == port
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "GET /x HTTP/1.1";

    #[test]
    fn a_matching_host_goes_on_with_the_connection_closed() {
        let head = "GET http://a.test:8080/x HTTP/1.1\r\nHost: A.test:8080\r\nAccept: */*\r\nConnection: keep-alive\r\n\r\n";
        let out = rewrite(head, LINE, "a.test", 8080).unwrap();
        assert_eq!(
            out,
            "GET /x HTTP/1.1\r\nAccept: */*\r\nHost: a.test:8080\r\nConnection: close\r\n\r\n"
        );
        let out = rewrite("GET / HTTP/1.0\r\n\r\n", LINE, "a.test", 80).unwrap();
        assert!(out.contains("Host: a.test\r\n"), "{out}");
        assert!(rewrite("G\r\nHost: a.test:80\r\n\r\n", LINE, "a.test", 80).is_ok());
        assert!(rewrite("G\r\nHost: [::1]:81\r\n\r\n", LINE, "::1", 81).is_ok());
    }

    #[test]
    fn another_host_or_port_is_refused() {
        for host in ["evil.test", "a.test:81", "a.test.evil", "a.test:x", "[::1]"] {
            let head = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
            let err = rewrite(&head, LINE, "a.test", 80).unwrap_err();
            assert!(err.contains("Host header names"), "{host}: {err}");
        }
        let two = "GET / HTTP/1.1\r\nHost: a.test\r\nhost: evil.test\r\n\r\n";
        assert!(
            rewrite(two, LINE, "a.test", 80)
                .unwrap_err()
                .contains("more than one")
        );
        assert!(rewrite("GET / HTTP/1.1\r\nnocolon\r\n\r\n", LINE, "a.test", 80).is_err());
    }

    #[test]
    fn routing_headers_are_dropped() {
        let head = "GET / HTTP/1.1\r\nHost: a.test\r\nX-Forwarded-Host: evil.test\r\nforwarded: host=evil.test\r\nX-Original-URL: /admin\r\nProxy-Authorization: x\r\nUser-Agent: t\r\n\r\n";
        let out = rewrite(head, LINE, "a.test", 80).unwrap();
        assert!(!out.to_ascii_lowercase().contains("evil"), "{out}");
        assert!(!out.contains("/admin") && !out.contains("Proxy-"), "{out}");
        assert!(out.contains("User-Agent: t"), "{out}");
    }

    #[test]
    fn http_is_told_from_other_bytes() {
        assert!(looks_like_http(b"GET / HTTP/1.1\r\n"));
        assert!(looks_like_http(b"POST /x HTTP/1.1\r\n"));
        assert!(!looks_like_http(b"\x16\x03\x01"));
        assert!(!looks_like_http(b"SSH-2.0-OpenSSH"));
        assert!(!looks_like_http(b""));
    }
}
