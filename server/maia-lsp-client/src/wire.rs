//! The LSP base protocol on a byte stream: `Content-Length` headers, a
//! blank line, a JSON body; every message and header line capped, so a
//! server that floods cannot make MAIA buffer without bound.

use std::io;

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest message body read from a server.
pub const MAX_MESSAGE: usize = 16 << 20;
/// Longest header line.
const MAX_HEADER: u64 = 1024;

fn invalid(text: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, text)
}

/// Reads one message; `None` at the end of the stream.
pub async fn read<R: AsyncBufRead + Unpin>(r: &mut R, cap: usize) -> io::Result<Option<Value>> {
    let mut length: Option<usize> = None;
    let mut first = true;
    loop {
        let mut line = Vec::new();
        let n = (&mut *r)
            .take(MAX_HEADER)
            .read_until(b'\n', &mut line)
            .await?;
        if n == 0 {
            return if first {
                Ok(None)
            } else {
                Err(io::ErrorKind::UnexpectedEof.into())
            };
        }
        first = false;
        if line.last() != Some(&b'\n') {
            return Err(invalid("header line too long".to_owned()));
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            break;
        }
        if let Some((name, value)) = text.split_once(':')
            && name.trim().eq_ignore_ascii_case("content-length")
        {
            length = Some(
                value
                    .trim()
                    .parse()
                    .map_err(|_| invalid(format!("bad Content-Length `{}`", value.trim())))?,
            );
        }
    }
    let length = length.ok_or_else(|| invalid("no Content-Length header".to_owned()))?;
    if length > cap {
        return Err(invalid(format!(
            "a message of {length} bytes, over the cap of {cap}"
        )));
    }
    let mut body = vec![0; length];
    r.read_exact(&mut body).await?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| invalid(format!("a message that is not JSON: {e}")))
}

/// Writes one message.
pub async fn write<W: AsyncWrite + Unpin>(w: &mut W, message: &Value) -> io::Result<()> {
    let body = serde_json::to_vec(message)?;
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(&body);
    w.write_all(&out).await?;
    w.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn round_trip_and_caps() {
        let mut buf = Vec::new();
        write(&mut buf, &json!({"a": 1})).await.unwrap();
        write(&mut buf, &json!({"b": "é"})).await.unwrap();
        let mut r = tokio::io::BufReader::new(&buf[..]);
        assert_eq!(read(&mut r, 100).await.unwrap(), Some(json!({"a": 1})));
        assert_eq!(read(&mut r, 100).await.unwrap(), Some(json!({"b": "é"})));
        assert_eq!(read(&mut r, 100).await.unwrap(), None);

        let mut r = tokio::io::BufReader::new(&buf[..]);
        assert!(read(&mut r, 3).await.is_err(), "over the cap");
        let long = vec![b'x'; 5000];
        let mut r = tokio::io::BufReader::new(&long[..]);
        assert!(read(&mut r, 100).await.is_err(), "endless header");
    }
}
