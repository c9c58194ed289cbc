//! Server-sent events: turns the HTTP body's byte stream into chat-stream events.
//!
//! Decoding (lines split across network chunks, CRLF, comments, multi-line data) is done by
//! `eventsource-stream`; this wrapper recognises the `[DONE]` sentinel and `event: error`, skips
//! empty events, and maps transport failures to [`LlmError::StreamInterrupted`].

use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};

use crate::error::{LlmError, error_chain, truncate};

/// One meaningful SSE event of a chat stream.
#[derive(Clone, Debug, PartialEq)]
pub enum SseEvent {
    /// A `data:` payload (normally one JSON chunk).
    Data(String),
    /// `data: [DONE]`: the stream is complete.
    Done,
    /// An `event: error` with its data.
    Error(String),
}

/// Decodes a byte stream into [`SseEvent`]s.
pub fn events<S, B, E>(bytes: S) -> impl Stream<Item = Result<SseEvent, LlmError>> + Send
where
    S: Stream<Item = Result<B, E>> + Send,
    B: AsRef<[u8]> + Send,
    E: std::error::Error + Send,
{
    bytes.eventsource().filter_map(|item| async move {
        match item {
            Ok(event) => {
                let data = event.data.trim();
                if event.event == "error" {
                    Some(Ok(SseEvent::Error(data.to_owned())))
                } else if data.is_empty() {
                    None
                } else if data == "[DONE]" {
                    Some(Ok(SseEvent::Done))
                } else {
                    Some(Ok(SseEvent::Data(data.to_owned())))
                }
            }
            Err(EventStreamError::Transport(err)) => Some(Err(LlmError::StreamInterrupted {
                message: error_chain(&err),
            })),
            Err(EventStreamError::Utf8(err)) => Some(Err(LlmError::InvalidResponse {
                message: format!("stream is not UTF-8: {err}"),
            })),
            Err(EventStreamError::Parser(err)) => Some(Err(LlmError::InvalidResponse {
                message: format!("malformed event stream: {}", truncate(&err.to_string())),
            })),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::stream;

    async fn decode(pieces: &[&str]) -> Vec<Result<SseEvent, String>> {
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
            pieces.iter().map(|p| Ok(p.as_bytes().to_vec())).collect();
        events(stream::iter(chunks))
            .map(|r| r.map_err(|e| e.to_string()))
            .collect()
            .await
    }

    fn data(s: &str) -> Result<SseEvent, String> {
        Ok(SseEvent::Data(s.to_owned()))
    }

    #[tokio::test]
    async fn events_and_done() {
        let got = decode(&["data: {\"a\":1}\n\n", "data: {\"b\":2}\n\ndata: [DONE]\n\n"]).await;
        assert_eq!(
            got,
            vec![data("{\"a\":1}"), data("{\"b\":2}"), Ok(SseEvent::Done)]
        );
    }

    #[tokio::test]
    async fn event_split_mid_line_across_chunks() {
        let got = decode(&[
            "da",
            "ta: {\"choi",
            "ces\":[]}",
            "\n",
            "\ndata: [DO",
            "NE]\n\n",
        ])
        .await;
        assert_eq!(got, vec![data("{\"choices\":[]}"), Ok(SseEvent::Done)]);
    }

    #[tokio::test]
    async fn multibyte_char_split_across_chunks() {
        let bytes = "data: {\"t\":\"é\"}\n\n".as_bytes();
        let (a, b) = bytes.split_at(14); // inside the two-byte 'é'
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> = vec![Ok(a.to_vec()), Ok(b.to_vec())];
        let got: Vec<_> = events(stream::iter(chunks))
            .map(|r| r.map_err(|e| e.to_string()))
            .collect()
            .await;
        assert_eq!(got, vec![data("{\"t\":\"é\"}")]);
    }

    #[tokio::test]
    async fn crlf_line_endings() {
        let got = decode(&["data: {\"a\":1}\r\n\r\n", "data: [DONE]\r\n\r\n"]).await;
        assert_eq!(got, vec![data("{\"a\":1}"), Ok(SseEvent::Done)]);
    }

    #[tokio::test]
    async fn comments_and_empty_events_are_skipped() {
        let got = decode(&[": keep-alive\n\n", "data:\n\n", "data: x\n\n"]).await;
        assert_eq!(got, vec![data("x")]);
    }

    #[tokio::test]
    async fn error_event_type() {
        let got = decode(&["event: error\ndata: {\"error\":{\"message\":\"boom\"}}\n\n"]).await;
        assert_eq!(
            got,
            vec![Ok(SseEvent::Error(
                "{\"error\":{\"message\":\"boom\"}}".into()
            ))]
        );
    }

    #[tokio::test]
    async fn unterminated_last_event_is_dropped() {
        let got = decode(&["data: {\"a\":1}\n\ndata: {\"b\""]).await;
        assert_eq!(got, vec![data("{\"a\":1}")]);
    }

    #[tokio::test]
    async fn transport_error_is_interruption() {
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> = vec![
            Ok(b"data: x\n\n".to_vec()),
            Err(std::io::Error::other("connection reset")),
        ];
        let got: Vec<_> = events(stream::iter(chunks)).collect().await;
        assert!(matches!(got[0], Ok(SseEvent::Data(_))));
        match &got[1] {
            Err(LlmError::StreamInterrupted { message }) => {
                assert!(message.contains("connection reset"))
            }
            other => panic!("{other:?}"),
        }
    }
}
