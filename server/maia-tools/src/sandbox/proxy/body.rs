//! What follows a checked request head: its body, sent on as its framing
//! was parsed (exactly `Content-Length` bytes, or the chunks of a chunked
//! body written out again), and then nothing more from the client, since
//! one request goes per connection; the answer is relayed back as it comes
//! until the server closes.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::MAX_HEAD;

/// How a request's body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// No body.
    None,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// The most a chunk-size line or a trailer line may take.
const MAX_LINE: usize = 4096;

fn invalid(why: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_owned())
}

/// The client's side as it is read: bytes read already, then `conn`.
pub(super) struct Input<R> {
    buf: Vec<u8>,
    pos: usize,
    conn: R,
}

impl<R: AsyncRead + Unpin> Input<R> {
    pub(super) fn new(buf: Vec<u8>, conn: R) -> Self {
        Input { buf, pos: 0, conn }
    }

    /// The bytes read and not taken yet.
    pub(super) fn buffered(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// Reads more; false at the end of the client's stream.
    async fn fill(&mut self) -> std::io::Result<bool> {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let mut chunk = [0u8; 8192];
        let n = self.conn.read(&mut chunk).await?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n > 0)
    }

    /// Reads until `n` bytes are buffered; false when the stream ends
    /// before any, an error when it ends after some.
    pub(super) async fn fill_to(&mut self, n: usize) -> std::io::Result<bool> {
        while self.buffered().len() < n {
            if !self.fill().await? {
                return match self.buffered().is_empty() {
                    true => Ok(false),
                    false => Err(std::io::ErrorKind::UnexpectedEof.into()),
                };
            }
        }
        Ok(true)
    }

    /// Takes a line ending in CRLF (without it); a bare CR or LF, or a line
    /// longer than `max`, is an error.
    async fn line(&mut self, max: usize) -> std::io::Result<Vec<u8>> {
        loop {
            let rest = self.buffered();
            if let Some(i) = rest.iter().position(|&b| b == b'\n') {
                let line = &rest[..i];
                let Some(line) = line.strip_suffix(b"\r") else {
                    return Err(invalid("a bare LF in a chunked body"));
                };
                if line.contains(&b'\r') {
                    return Err(invalid("a bare CR in a chunked body"));
                }
                let line = line.to_vec();
                self.pos += i + 1;
                return Ok(line);
            }
            if rest.len() > max {
                return Err(invalid("an over-long line in a chunked body"));
            }
            if !self.fill().await? {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    /// Sends the next `n` bytes to `out`.
    pub(super) async fn copy<W: AsyncWrite + Unpin>(
        &mut self,
        mut n: u64,
        out: &mut W,
    ) -> std::io::Result<()> {
        while n > 0 {
            if self.buffered().is_empty() && !self.fill().await? {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            let rest = self.buffered();
            let take = rest.len().min(usize::try_from(n).unwrap_or(usize::MAX));
            out.write_all(&rest[..take]).await?;
            self.pos += take;
            n -= take as u64;
        }
        Ok(())
    }
}

/// Sends the body framed by `framing` from `input` to `out`.
pub(super) async fn forward<R, W>(
    framing: Framing,
    input: &mut Input<R>,
    out: &mut W,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    match framing {
        Framing::None => Ok(()),
        Framing::Length(n) => input.copy(n, out).await,
        Framing::Chunked => chunked(input, out).await,
    }
}

/// A chunked body, each chunk's size written out again (extensions and
/// trailers, which the proxy does not check, are not sent on).
async fn chunked<R, W>(input: &mut Input<R>, out: &mut W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    loop {
        let line = input.line(MAX_LINE).await?;
        let size = line.split(|&b| b == b';').next().unwrap_or_default();
        if size.is_empty() || size.len() > 15 || !size.iter().all(u8::is_ascii_hexdigit) {
            return Err(invalid("a chunk size that is not a hex number"));
        }
        let text = String::from_utf8_lossy(size);
        let size =
            u64::from_str_radix(&text, 16).map_err(|_| invalid("a chunk size out of range"))?;
        out.write_all(format!("{size:x}\r\n").as_bytes()).await?;
        if size == 0 {
            let mut taken = 0;
            loop {
                let trailer = input.line(MAX_LINE).await?;
                if trailer.is_empty() {
                    break;
                }
                taken += trailer.len();
                if taken > MAX_HEAD || !trailer.contains(&b':') {
                    return Err(invalid("a malformed trailer section"));
                }
            }
            return out.write_all(b"\r\n").await;
        }
        input.copy(size, out).await?;
        if !input.line(0).await?.is_empty() {
            return Err(invalid("a chunk longer than its size"));
        }
        out.write_all(b"\r\n").await?;
    }
}

/// One request: sends `head` and the body `framing` says (`rest` holds the
/// bytes read after the head) to `upstream`, relaying the answer back until
/// the server closes. Nothing the client sends after the body goes on.
pub(super) async fn exchange(
    conn: &mut TcpStream,
    upstream: &mut TcpStream,
    head: &[u8],
    framing: Framing,
    rest: Vec<u8>,
) -> std::io::Result<()> {
    let (client_in, mut client_out) = conn.split();
    let (mut server_in, mut server_out) = upstream.split();
    let send = async {
        server_out.write_all(head).await?;
        let mut input = Input::new(rest, client_in);
        forward(framing, &mut input, &mut server_out).await
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
                tracing::warn!(%e, "sandbox proxy: a request body was refused; closed");
                Err(e)
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn run(framing: Framing, body: &[u8]) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
        let mut input = Input::new(body.to_vec(), &b""[..]);
        let mut out = Vec::new();
        forward(framing, &mut input, &mut out).await?;
        Ok((out, input.buffered().to_vec()))
    }

    #[tokio::test]
    async fn a_length_takes_that_many_bytes() {
        let (out, left) = run(Framing::Length(3), b"abcdef").await.unwrap();
        assert_eq!((&out[..], &left[..]), (&b"abc"[..], &b"def"[..]));
        assert!(run(Framing::Length(7), b"abcdef").await.is_err());
        let (out, left) = run(Framing::None, b"GET").await.unwrap();
        assert_eq!((&out[..], &left[..]), (&b""[..], &b"GET"[..]));
    }

    #[tokio::test]
    async fn chunks_are_written_out_again() {
        let body = b"3;name=value\r\nabc\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        let (out, left) = run(Framing::Chunked, body).await.unwrap();
        assert_eq!(out, b"3\r\nabc\r\na\r\n0123456789\r\n0\r\n\r\n");
        assert_eq!(left, b"NEXT");
        for bad in [
            &b"3\nabc\r\n0\r\n\r\n"[..],
            b"3\r\nabcd\r\n0\r\n\r\n",
            b" 3\r\nabc\r\n0\r\n\r\n",
            b"-3\r\nabc\r\n0\r\n\r\n",
            b"ffffffffffffffff\r\n",
            b"0\r\nno colon\r\n\r\n",
            b"3\r\nabc\r\n0\r\n\n",
            b"3\r\nab",
        ] {
            assert!(run(Framing::Chunked, bad).await.is_err(), "{bad:?}");
        }
    }
}
