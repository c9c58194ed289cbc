//! What a client asks, told to the session's other clients: a prompt or a
//! steer becomes a `session/update` `user_message_chunk` (with
//! `_meta.maia.echo: true`; a steer's also `_meta.steering: true`, as on
//! replay), kept like the agent's updates, so observers, a second
//! controller and a later attach see what was asked. The client that sent
//! it shows what it sent: it gets `_session/echoed` with the echo's number
//! instead, so every client's numbers stay contiguous. A prompt sent while
//! a prompt of the session is in flight waits (`lineup.rs`) and is echoed
//! when it is sent.
//! Only v1 clients are echoed, to v1 clients: v2 tells every prompt as its
//! own `user_message` (`acp/mirror.rs` gives it to the other wire).

use maia_core::PromptPart;
use serde_json::{Value, json};

use super::State;
use super::agent::publish_as;

/// The text of a prompt as MAIA replays it (`maia_core::display_text`):
/// its blocks in order, a link or a resource as a line `@…`, images left
/// out (shown by their own updates). Built without reading or decoding
/// anything: only what is shown is taken.
fn prompt_text(blocks: &Value) -> String {
    let str_of = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let file = |uri: &Value| uri.as_str().and_then(maia_core::prompt::uri_path);
    let mut parts = Vec::new();
    for block in blocks.as_array().into_iter().flatten() {
        let part = match block["type"].as_str() {
            Some("text") => Some(PromptPart::Text(str_of(&block["text"]))),
            Some("resource_link") => file(&block["uri"]).map(PromptPart::File),
            Some("resource") if block["resource"].get("text").is_some() => {
                Some(PromptPart::Embedded {
                    uri: str_of(&block["resource"]["uri"]),
                    text: String::new(),
                })
            }
            Some("image") if block["data"].as_str().is_none_or(str::is_empty) => {
                file(&block["uri"]).map(PromptPart::File)
            }
            _ => None,
        };
        parts.extend(part);
    }
    maia_core::display_text(&parts)
}

pub(super) fn echo(state: &mut State, conn: u64, sid: &str, method: &str, message: &Value) {
    let steer = match method {
        "session/prompt" => false,
        "_session/steering" => true,
        _ => return,
    };
    if (!steer && super::lineup::in_flight(state, sid)) || !state.live.contains_key(sid) {
        return;
    }
    let text = prompt_text(&message["params"]["prompt"]);
    if text.is_empty() {
        return;
    }
    let mut update = json!({"sessionUpdate": "user_message_chunk",
        "content": {"type": "text", "text": text}});
    if steer {
        update["_meta"] = json!({"steering": true});
    }
    let notification = json!({"jsonrpc": "2.0", "method": "session/update",
        "params": {"sessionId": sid, "update": update, "_meta": {"maia": {"echo": true}}}});
    publish_as(state, sid, 0, notification, Some(conn));
}
