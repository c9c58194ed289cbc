//! A request head as the proxy reads, checks and sends it on. It is parsed
//! with `httparse`, more strictly than `httparse` alone: every line ends in
//! CRLF (a bare LF or CR anywhere in the head is refused, though `httparse`
//! would take a bare LF as a line end), no obs-fold, one space between the
//! parts of the request line, a request target of visible ASCII. What goes
//! on is the parsed request written out again, never the bytes as they came:
//! the request line in origin form, the headers kept, one `Host` that names
//! the host (and port) the request was checked for, since behind a shared
//! front (a CDN, a reverse proxy, any virtual-host server) that header, not
//! the address, chooses the site; the body framing as parsed; and
//! `Connection: close`, for one request goes per connection. The headers
//! that route a request elsewhere (`Forwarded`, `X-Forwarded-Host`, …) are
//! dropped.

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use super::MAX_HEAD;
use super::body::Framing;

/// Headers a command may not send on: they choose another site or path
/// behind a front, or belong to the hop to this proxy (the proxy carries
/// no upgraded protocol, so `Upgrade` too).
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
    "upgrade",
];

/// The most headers a request may have.
const MAX_HEADERS: usize = 128;

/// Why a request is not sent on; each is answered with [`Refusal::status`].
#[derive(Debug, thiserror::Error)]
pub(super) enum Refusal {
    #[error("the request is not well-formed HTTP/1.1 ({0})")]
    Malformed(String),
    #[error("the request head is longer than {MAX_HEAD} bytes")]
    TooLong,
    #[error("the request has more than one Host header")]
    TwoHosts,
    #[error(
        "the Host header names {named}, not {authority} that the request goes to (a Host header chooses the site behind a shared front)"
    )]
    OtherHost { named: String, authority: String },
    #[error("the request target names {named}, not {authority} that the request goes to")]
    OtherTarget { named: String, authority: String },
    #[error("the body's framing is ambiguous or not supported ({0})")]
    Framing(&'static str),
}

impl Refusal {
    pub(super) fn status(&self) -> &'static str {
        match self {
            Refusal::TooLong => "431 Request Header Fields Too Large",
            Refusal::OtherHost { .. } | Refusal::OtherTarget { .. } => "403 Forbidden",
            Refusal::Malformed(_) | Refusal::TwoHosts | Refusal::Framing(_) => "400 Bad Request",
        }
    }
}

/// Why no request head was read.
#[derive(Debug, thiserror::Error)]
pub(super) enum HeadError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("the client closed the connection before a whole request head")]
    Closed,
    #[error(transparent)]
    Refused(#[from] Refusal),
}

/// A parsed request head.
#[derive(Debug)]
pub(super) struct Head {
    pub method: String,
    pub target: String,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub version: u8,
    pub headers: Vec<(String, Vec<u8>)>,
}

/// Reads from `conn` into `buf` (which may hold bytes read already) until
/// it starts with a whole request head: the head and the length it takes.
pub(super) async fn read(
    conn: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> Result<(Head, usize), HeadError> {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(parsed) = parse(buf)? {
            return Ok(parsed);
        }
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Err(HeadError::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The request head at the start of `buf`, and the length it takes; `None`
/// while it is not whole yet. Bytes that cannot become a request are
/// refused as soon as they are seen.
pub(super) fn parse(buf: &[u8]) -> Result<Option<(Head, usize)>, Refusal> {
    // Empty lines before the request line are ignored (RFC 9112 2.2).
    let mut start = 0;
    while buf[start..].starts_with(b"\r\n") {
        start += 2;
    }
    let rest = &buf[start..];
    let end = rest
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4);
    let head = &rest[..end.unwrap_or(rest.len())];
    strict_line_ends(head)?;
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let parsed = request
        .parse(head)
        .map_err(|e| Refusal::Malformed(e.to_string()))?;
    let len = match (parsed, end) {
        (httparse::Status::Complete(len), Some(end)) if len == end => len,
        (httparse::Status::Partial, None) if buf.len() > MAX_HEAD => {
            return Err(Refusal::TooLong);
        }
        (httparse::Status::Partial, None) => return Ok(None),
        _ => {
            return Err(Refusal::Malformed(
                "the head does not end where it should".into(),
            ));
        }
    };
    let (Some(method), Some(target), Some(version)) =
        (request.method, request.path, request.version)
    else {
        return Err(Refusal::Malformed("no request line".into()));
    };
    if !target.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Refusal::Malformed(
            "the request target is not visible ASCII".into(),
        ));
    }
    let headers = request
        .headers
        .iter()
        .map(|h| (h.name.to_owned(), h.value.to_owned()))
        .collect();
    let head = Head {
        method: method.to_owned(),
        target: target.to_owned(),
        version,
        headers,
    };
    Ok(Some((head, start + len)))
}

/// Refuses a bare LF or a bare CR (a CR not followed by LF; one at the very
/// end may still be followed by it).
fn strict_line_ends(head: &[u8]) -> Result<(), Refusal> {
    for (i, &b) in head.iter().enumerate() {
        let bare = match b {
            b'\n' => i == 0 || head[i - 1] != b'\r',
            b'\r' => head.get(i + 1).is_some_and(|&next| next != b'\n'),
            _ => false,
        };
        if bare {
            let which = if b == b'\n' { "LF" } else { "CR" };
            return Err(Refusal::Malformed(format!(
                "a bare {which} in the head; lines end in CRLF"
            )));
        }
    }
    Ok(())
}

/// The host and port of an authority (`host`, `host:port`, `[v6]:port`);
/// the port `None` when left out. Only the characters of a DNS name or an
/// address: no user info, no second colon, a port of digits.
pub(super) fn authority(text: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = match text.strip_prefix('[') {
        Some(rest) => {
            let (v6, tail) = rest.split_once(']')?;
            v6.parse::<std::net::Ipv6Addr>().ok()?;
            (v6, tail)
        }
        None => {
            let i = text.find(':').unwrap_or(text.len());
            let host = &text[..i];
            let name = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_';
            if host.is_empty() || !host.bytes().all(name) {
                return None;
            }
            (host, &text[i..])
        }
    };
    Some((host.to_owned(), tail_port(port)?))
}

/// `""` (no port) or `:digits`.
fn tail_port(tail: &str) -> Option<Option<u16>> {
    if tail.is_empty() {
        return Some(None);
    }
    let digits = tail.strip_prefix(':')?;
    if digits.is_empty() || digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(Some)
}

/// The host, port and origin-form path of an absolute `http://` target.
pub(super) fn absolute(target: &str) -> Option<(String, u16, String)> {
    let scheme = target.get(..7)?;
    if !scheme.eq_ignore_ascii_case("http://") {
        return None;
    }
    let rest = &target[7..];
    let i = rest.find(['/', '?']).unwrap_or(rest.len());
    let (host, port) = authority(&rest[..i])?;
    let path = match &rest[i..] {
        "" => "/".to_owned(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_owned(),
    };
    Some((host, port.unwrap_or(80), path))
}

fn same_host(a: &str, b: &str) -> bool {
    a.trim_end_matches('.')
        .eq_ignore_ascii_case(b.trim_end_matches('.'))
}

/// `host:port` as a Host header writes it (the port left out when 80).
fn host_header(host: &str, port: u16) -> String {
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

/// The head to send on for `head` going to `host:port`, and its body's
/// framing; or why it is refused.
pub(super) fn rewrite(head: &Head, host: &str, port: u16) -> Result<(Vec<u8>, Framing), Refusal> {
    let expected = host_header(host, port);
    let origin = head.target.starts_with('/');
    let path = if origin || (head.target == "*" && head.method == "OPTIONS") {
        head.target.clone()
    } else {
        let Some((named, named_port, path)) = absolute(&head.target) else {
            return Err(Refusal::Malformed(
                "the request target is neither /path nor http://host/path".into(),
            ));
        };
        if !same_host(&named, host) || named_port != port {
            return Err(Refusal::OtherTarget {
                named: host_header(&named, named_port),
                authority: expected,
            });
        }
        path
    };
    let mut out = format!("{} {path} HTTP/1.{}\r\n", head.method, head.version).into_bytes();
    let (mut hosts, mut lengths, mut codings) = (0, Vec::new(), Vec::new());
    for (name, value) in &head.headers {
        let lower = name.to_ascii_lowercase();
        match lower.as_str() {
            "host" => {
                hosts += 1;
                let text = String::from_utf8_lossy(value).into_owned();
                let fits = authority(&text)
                    .is_some_and(|(h, p)| same_host(&h, host) && p.unwrap_or(80) == port);
                if !fits {
                    return Err(Refusal::OtherHost {
                        named: text,
                        authority: expected,
                    });
                }
            }
            "content-length" => lengths.push(value),
            "transfer-encoding" => codings.push(value),
            _ if DROPPED.contains(&lower.as_str()) => {}
            _ => {
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(b": ");
                out.extend_from_slice(value);
                out.extend_from_slice(b"\r\n");
            }
        }
    }
    if hosts > 1 {
        return Err(Refusal::TwoHosts);
    }
    let framing = framing(head.version, &lengths, &codings)?;
    out.extend_from_slice(format!("Host: {expected}\r\n").as_bytes());
    match framing {
        Framing::None => {}
        Framing::Length(n) => out.extend_from_slice(format!("Content-Length: {n}\r\n").as_bytes()),
        Framing::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok((out, framing))
}

/// How the body is framed (RFC 9112 6.3): both headers, or either twice,
/// or a coding other than `chunked` alone, is refused.
fn framing(version: u8, lengths: &[&Vec<u8>], codings: &[&Vec<u8>]) -> Result<Framing, Refusal> {
    match (lengths, codings) {
        ([], []) => Ok(Framing::None),
        ([_, ..], [_, ..]) => Err(Refusal::Framing(
            "both Content-Length and Transfer-Encoding",
        )),
        ([length], []) => {
            let digits = length.len() <= 18 && !length.is_empty();
            match std::str::from_utf8(length) {
                Ok(n) if digits && n.bytes().all(|b| b.is_ascii_digit()) => n
                    .parse()
                    .map(Framing::Length)
                    .map_err(|_| Refusal::Framing("a Content-Length that is not a number")),
                _ => Err(Refusal::Framing("a Content-Length that is not a number")),
            }
        }
        (_, []) => Err(Refusal::Framing("more than one Content-Length")),
        ([], [coding]) if version == 1 && coding.eq_ignore_ascii_case(b"chunked") => {
            Ok(Framing::Chunked)
        }
        ([], _) => Err(Refusal::Framing(
            "a Transfer-Encoding other than one chunked in HTTP/1.1",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Head {
        parse(text.as_bytes()).unwrap().unwrap().0
    }

    fn sent(text: &str, host: &str, port: u16) -> Result<String, Refusal> {
        rewrite(&head(text), host, port).map(|(out, _)| String::from_utf8(out).unwrap())
    }

    #[test]
    fn a_matching_host_goes_on_with_the_connection_closed() {
        let text = "GET http://a.test:8080/x HTTP/1.1\r\nHost: A.test:8080\r\nAccept: */*\r\nConnection: keep-alive\r\n\r\n";
        assert_eq!(
            sent(text, "a.test", 8080).unwrap(),
            "GET /x HTTP/1.1\r\nAccept: */*\r\nHost: a.test:8080\r\nConnection: close\r\n\r\n"
        );
        let out = sent("GET / HTTP/1.0\r\n\r\n", "a.test", 80).unwrap();
        assert!(
            out.starts_with("GET / HTTP/1.0\r\nHost: a.test\r\n"),
            "{out}"
        );
        assert!(sent("GET / HTTP/1.1\r\nHost: a.test:80\r\n\r\n", "a.test", 80).is_ok());
        assert!(sent("GET / HTTP/1.1\r\nHost: [::1]:81\r\n\r\n", "::1", 81).is_ok());
    }

    #[test]
    fn another_host_or_port_is_refused() {
        for host in [
            "evil.test",
            "a.test:81",
            "a.test.evil",
            "a.test:x",
            "[::1]",
            "a@a.test",
        ] {
            let text = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
            let err = sent(&text, "a.test", 80).unwrap_err();
            assert!(matches!(err, Refusal::OtherHost { .. }), "{host}: {err}");
        }
        let two = "GET / HTTP/1.1\r\nHost: a.test\r\nhost: a.test\r\n\r\n";
        assert!(matches!(sent(two, "a.test", 80), Err(Refusal::TwoHosts)));
        assert!(parse(b"GET / HTTP/1.1\r\nnocolon\r\n\r\n").is_err());
    }

    #[test]
    fn routing_headers_are_dropped() {
        let text = "GET / HTTP/1.1\r\nHost: a.test\r\nX-Forwarded-Host: evil.test\r\nforwarded: host=evil.test\r\nX-Original-URL: /admin\r\nProxy-Authorization: x\r\nUpgrade: h2c\r\nUser-Agent: t\r\n\r\n";
        let out = sent(text, "a.test", 80).unwrap();
        assert!(!out.to_ascii_lowercase().contains("evil"), "{out}");
        assert!(!out.contains("/admin") && !out.contains("Proxy-"), "{out}");
        assert!(
            !out.contains("h2c") && out.contains("User-Agent: t"),
            "{out}"
        );
    }

    #[test]
    fn a_head_is_whole_partial_or_refused() {
        assert!(matches!(parse(b"GET / HTTP/1.1\r\nHost: a"), Ok(None)));
        assert!(matches!(parse(b"GET / HTTP/1.1\r\n\r"), Ok(None)));
        let (_, len) = parse(b"\r\nGET / HTTP/1.1\r\n\r\nbody").unwrap().unwrap();
        assert_eq!(len, 20);
        for bad in [
            &b"GET / HTTP/1.1\nHost: a"[..],
            b"GET / HTTP/1.1\r\nA: 1\rB: 2\r\n",
            b" GET / HTTP/1.1\r\n",
            b"\tGET",
            b"GET  / HTTP/1.1\r\n",
            b"GET / HTTP/1.1\r\nA: 1\r\n folded\r\n\r\n",
            b"GET / HTTP/2.0\r\n",
            b"SSH-2.0-x\r\n",
            b"\x16\x03\x01",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let long = format!("GET / HTTP/1.1\r\nA: {}", "x".repeat(MAX_HEAD));
        assert!(matches!(parse(long.as_bytes()), Err(Refusal::TooLong)));
    }

    #[test]
    fn authorities_and_targets() {
        assert_eq!(authority("a.b:8080"), Some(("a.b".into(), Some(8080))));
        assert_eq!(authority("[::1]"), Some(("::1".into(), None)));
        for bad in [
            "a.b:", "a.b:+80", "a@b", "a.b:80:1", "[x]:1", "", ":80", "a b",
        ] {
            assert_eq!(authority(bad), None, "{bad}");
        }
        assert_eq!(
            absolute("http://a.b:8080/x?y"),
            Some(("a.b".into(), 8080, "/x?y".into()))
        );
        assert_eq!(absolute("HTTP://a.b"), Some(("a.b".into(), 80, "/".into())));
        assert_eq!(
            absolute("http://a.b?q"),
            Some(("a.b".into(), 80, "/?q".into()))
        );
        assert_eq!(absolute("/relative"), None);
        assert_eq!(absolute("https://a.b/"), None);
    }

    #[test]
    fn framings() {
        let framed = |headers: &str| {
            let text = format!("POST / HTTP/1.1\r\nHost: a\r\n{headers}\r\n");
            rewrite(&head(&text), "a", 80).map(|(_, f)| f)
        };
        assert!(matches!(framed(""), Ok(Framing::None)));
        assert!(matches!(
            framed("Content-Length: 12\r\n"),
            Ok(Framing::Length(12))
        ));
        assert!(matches!(
            framed("Transfer-Encoding: CHUNKED\r\n"),
            Ok(Framing::Chunked)
        ));
        for bad in [
            "Content-Length: 1\r\nTransfer-Encoding: chunked\r\n",
            "Content-Length: 1\r\nContent-Length: 1\r\n",
            "Content-Length: -1\r\n",
            "Content-Length: 0x10\r\n",
            "Transfer-Encoding: gzip\r\n",
            "Transfer-Encoding: chunked, chunked\r\n",
        ] {
            assert!(matches!(framed(bad), Err(Refusal::Framing(_))), "{bad}");
        }
    }
}
