//! Reading newline-delimited frames with a size cap.
//!
//! A line longer than the cap is skipped (never buffered whole) and reported
//! as [`Frame::TooLong`], so a hostile or broken client cannot make the
//! server hold an unbounded line in memory.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Default cap on one incoming line: 16 MiB.
pub const DEFAULT_MAX_LINE: usize = 16 * 1024 * 1024;

/// One result of [`read_frame`].
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A complete line, without its trailing `\n` (and `\r`).
    Line(Vec<u8>),
    /// A line longer than the cap was read and dropped; `prefix` holds its
    /// first bytes (at most 4 KiB) so the caller can try to recover an id.
    TooLong { prefix: Vec<u8> },
    /// End of input.
    Eof,
}

/// Reads the next frame. Blank lines are skipped.
pub async fn read_frame<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> std::io::Result<Frame> {
    loop {
        let mut line = Vec::new();
        let mut too_long = false;
        loop {
            let buf = reader.fill_buf().await?;
            if buf.is_empty() {
                if line.is_empty() && !too_long {
                    return Ok(Frame::Eof);
                }
                break;
            }
            let (chunk, found) = match buf.iter().position(|b| *b == b'\n') {
                Some(pos) => (&buf[..pos], Some(pos + 1)),
                None => (buf, None),
            };
            if !too_long {
                if line.len() + chunk.len() > max {
                    too_long = true;
                    let keep = 4096usize.saturating_sub(line.len()).min(chunk.len());
                    line.extend_from_slice(&chunk[..keep]);
                    line.truncate(4096);
                } else {
                    line.extend_from_slice(chunk);
                }
            }
            let consumed = found.unwrap_or(buf.len());
            reader.consume(consumed);
            if found.is_some() {
                break;
            }
        }
        if too_long {
            return Ok(Frame::TooLong { prefix: line });
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        return Ok(Frame::Line(line));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    async fn frames(input: &[u8], max: usize) -> Vec<Frame> {
        let mut reader = BufReader::with_capacity(8, input);
        let mut out = Vec::new();
        loop {
            let frame = read_frame(&mut reader, max).await.unwrap();
            let end = frame == Frame::Eof;
            out.push(frame);
            if end {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn splits_lines_and_skips_blank_ones() {
        let out = frames(b"{\"a\":1}\n\n  \r\n{\"b\":2}\r\n{\"c\":3}", 100).await;
        assert_eq!(
            out,
            vec![
                Frame::Line(b"{\"a\":1}".to_vec()),
                Frame::Line(b"{\"b\":2}".to_vec()),
                Frame::Line(b"{\"c\":3}".to_vec()),
                Frame::Eof
            ]
        );
    }

    #[tokio::test]
    async fn oversized_line_is_dropped_and_reading_goes_on() {
        let mut input = vec![b'x'; 10_000];
        input.extend_from_slice(b"\n{\"ok\":true}\n");
        let out = frames(&input, 64).await;
        match &out[0] {
            Frame::TooLong { prefix } => assert!(prefix.len() <= 4096 && !prefix.is_empty()),
            other => panic!("expected TooLong, got {other:?}"),
        }
        assert_eq!(out[1], Frame::Line(b"{\"ok\":true}".to_vec()));
        assert_eq!(out[2], Frame::Eof);
    }
}
