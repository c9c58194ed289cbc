//! What the tests read out of what they saw: the session updates, texts
//! and permission questions among received messages, and the tool results
//! and texts of the requests the mock LLM was sent.

use serde_json::{Value, json};

use super::Maia;

/// A permission question MAIA asks (a request, with an id).
pub fn is_permission(m: &Value) -> bool {
    m["method"] == "session/request_permission" && m.get("id").is_some()
}

/// The response to our request `id`.
pub fn is_response(m: &Value, id: u64) -> bool {
    m.get("method").is_none() && m["id"] == serde_json::json!(id)
}

/// The `session/request_permission` requests among `messages`.
pub fn permission_requests(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/request_permission")
        .cloned()
        .collect()
}

/// The `session/update` payloads among `messages`.
pub fn updates(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| m["params"]["update"].clone())
        .collect()
}

/// The concatenated text of the `agent_message_chunk`s among `messages`.
pub fn agent_text(messages: &[Value]) -> String {
    updates(messages)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str().map(str::to_owned))
        .collect()
}

/// The journal file names in the session's `.maia/.sessions`, sorted.
pub fn session_files(maia: &Maia) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(maia.path(".maia/.sessions"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    names.sort();
    names
}

/// The `tool` message contents of model request `index`.
pub fn tool_results(maia: &Maia, index: usize) -> Vec<String> {
    tool_messages(&maia.mock.requests()[index])
}

/// The `tool` message contents of the model's last request.
pub fn last_tool_results(maia: &Maia) -> Vec<String> {
    tool_messages(maia.mock.requests().last().unwrap())
}

fn tool_messages(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

/// The text of an LLM request message whatever its content's shape
/// (a string or text parts).
pub fn content_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// The updates of one kind.
pub fn updates_of(messages: &[Value], kind: &str) -> Vec<Value> {
    updates(messages)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

/// Answers a permission request by choosing the option of `kind`.
pub fn choose(kind: &str) -> impl FnMut(&Value) -> Option<Value> + '_ {
    move |m: &Value| {
        if m["method"] != "session/request_permission" {
            return None;
        }
        let option = m["params"]["options"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} option in {m}"));
        Some(json!({"outcome": {"outcome": "selected", "optionId": option["optionId"]}}))
    }
}

/// The texts of the `user_message_chunk`s among `messages` (read as the
/// schema's types).
pub fn user_texts(messages: &[Value]) -> Vec<String> {
    super::client::texts::<super::client::UserChunk>(messages)
}

/// The messages (role, content text) of the model's last request.
pub fn last_request(maia: &Maia) -> Vec<(String, String)> {
    let requests = maia.mock.requests();
    let last = requests.last().expect("no model request");
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The non-system messages of the model's last request, as `role: content`.
pub fn history(maia: &Maia) -> Vec<String> {
    last_request(maia)
        .into_iter()
        .filter(|(role, _)| role != "system")
        .map(|(role, content)| format!("{role}: {content}"))
        .collect()
}

/// The content of the last `tool` message of the model's last request
/// (empty when there is none).
pub fn last_tool_result(maia: &Maia) -> String {
    last_tool_results(maia).pop().unwrap_or_default()
}
