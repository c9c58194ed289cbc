//! Request and response types of the Chat Completions API, with their OpenAI wire shapes.
//!
//! [`ChatMessage`], [`ToolCall`] and [`ToolSpec`] serialize to exactly what the API expects, so
//! the same JSON can be sent to the server and persisted by the engine. Deserialization is
//! lenient: `content` may be a string, `null`, or an array of `{"type":"text","text":..}` parts,
//! and the `developer` role is read as a system message.
//!
//! A user message may carry [`Image`]s: its `content` is then an array of a text part and
//! `image_url` parts holding `data:` URLs (the OpenAI vision shape, which LiteLLM translates for
//! every provider).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(into = "WireMessage", try_from = "WireMessage")]
pub enum ChatMessage {
    /// Instructions for the model.
    System { content: String },
    /// A message from the user, with the images shown with it.
    User { content: String, images: Vec<Image> },
    /// A reply of the model: text, tool calls, or both.
    Assistant {
        content: Option<String>,
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    Tool {
        tool_call_id: String,
        content: String,
    },
}

impl ChatMessage {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::System {
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::User {
            content: content.into(),
            images: Vec::new(),
        }
    }

    /// An assistant message with text only.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::Assistant {
            content: Some(content.into()),
            tool_calls: Vec::new(),
        }
    }

    /// A tool result.
    pub fn tool(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self::Tool {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
        }
    }

    /// The wire role name.
    pub fn role(&self) -> &'static str {
        match self {
            Self::System { .. } => "system",
            Self::User { .. } => "user",
            Self::Assistant { .. } => "assistant",
            Self::Tool { .. } => "tool",
        }
    }
}

/// An image sent to the model, as a `data:` URL.
#[derive(Clone, PartialEq, Eq)]
pub struct Image {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub mime_type: String,
    pub data: std::sync::Arc<[u8]>,
}

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Image")
            .field("mime_type", &self.mime_type)
            .field("bytes", &self.data.len())
            .finish()
    }
}

impl Image {
    /// `data:<type>;base64,<data>`.
    pub fn data_url(&self) -> String {
        use base64::Engine;
        format!(
            "data:{};base64,{}",
            self.mime_type,
            base64::engine::general_purpose::STANDARD.encode(&self.data)
        )
    }

    /// Characters of [`Self::data_url`], without building it.
    pub fn data_url_len(&self) -> usize {
        "data:;base64,".len() + self.mime_type.len() + self.data.len().div_ceil(3) * 4
    }

    /// Reads a `data:<type>;base64,…` URL.
    pub fn from_data_url(url: &str) -> Option<Self> {
        use base64::Engine;
        let rest = url.strip_prefix("data:")?;
        let (mime_type, data) = rest.split_once(";base64,")?;
        let data = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .ok()?;
        Some(Self {
            mime_type: mime_type.to_owned(),
            data: data.into(),
        })
    }
}

/// A complete tool call requested by the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(into = "WireToolCall", from = "WireToolCall")]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as the model produced them: a JSON text, possibly invalid.
    pub arguments: String,
}

/// A tool offered to the model; sent as `{"type":"function","function":{..}}`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(into = "WireToolSpec", from = "WireToolSpec")]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

/// One streamed completion request.
#[derive(Clone, Debug)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
    pub max_tokens: Option<u32>,
    /// Mark the system message and the last two messages with
    /// `cache_control: {"type": "ephemeral"}` (Anthropic-family prompt
    /// caching, passed through by LiteLLM). Never for other providers.
    pub cache: bool,
    /// LiteLLM's `reasoning_effort` (`low`, `medium`, `high`…), for models
    /// that take one; `None` leaves it out (the model's default).
    pub reasoning_effort: Option<String>,
}

/// Sets `cache_control` on a message's text: its `content` becomes one text part carrying
/// the marker. `false` when the message has no text to carry it.
fn mark_cached(message: &mut Value) -> bool {
    let Some(text) = message.get("content").and_then(Value::as_str) else {
        if let Some(Value::Array(parts)) = message.get_mut("content")
            && let Some(last) = parts.last_mut().and_then(Value::as_object_mut)
        {
            last.insert(
                "cache_control".into(),
                serde_json::json!({"type": "ephemeral"}),
            );
            return true;
        }
        return false;
    };
    let part = serde_json::json!([{
        "type": "text",
        "text": text,
        "cache_control": {"type": "ephemeral"},
    }]);
    message["content"] = part;
    true
}

impl ChatRequest {
    /// The JSON body sent to the chat endpoint (always streaming, with usage requested).
    pub fn body(&self) -> Value {
        let mut messages = serde_json::json!(self.messages);
        if self.cache
            && let Some(list) = messages.as_array_mut()
        {
            if let Some(system) = list.iter_mut().find(|m| m["role"] == "system") {
                mark_cached(system);
            }
            // The last two messages with text (a reply made only of tool calls has none).
            let mut marked = 0;
            for message in list.iter_mut().rev() {
                if marked == 2 {
                    break;
                }
                if message["role"] != "system" && mark_cached(message) {
                    marked += 1;
                }
            }
        }
        let mut body = serde_json::json!({
            "model": self.model,
            "messages": messages,
            "stream": true,
            "stream_options": { "include_usage": true },
        });
        if let Some(map) = body.as_object_mut() {
            if !self.tools.is_empty() {
                map.insert("tools".into(), serde_json::json!(self.tools));
            }
            if let Some(max) = self.max_tokens {
                map.insert("max_tokens".into(), max.into());
            }
            if let Some(effort) = &self.reasoning_effort {
                map.insert("reasoning_effort".into(), effort.clone().into());
            }
        }
        body
    }
}

/// An incremental event reported while a completion streams.
#[derive(Clone, Debug, PartialEq)]
pub enum Delta {
    /// Visible answer text.
    Text(String),
    /// Reasoning ("thinking") text, from `reasoning_content` or `reasoning`.
    Reasoning(String),
    /// A tool call's id and name became known; its arguments are still streaming.
    ToolCallStarted {
        index: usize,
        id: String,
        name: String,
    },
    /// The request failed with a retryable error; the client waits `wait` and tries again.
    Retrying {
        attempt: u32,
        wait: Duration,
        reason: String,
    },
}

/// Why the model stopped.
#[derive(Clone, Debug, PartialEq)]
pub enum FinishReason {
    Stop,
    Length,
    ToolCalls,
    ContentFilter,
    Other(String),
}

impl FinishReason {
    /// Maps the wire value (`function_call` counts as tool calls).
    pub fn from_wire(value: &str) -> Self {
        match value {
            "stop" => Self::Stop,
            "length" => Self::Length,
            "tool_calls" | "function_call" => Self::ToolCalls,
            "content_filter" => Self::ContentFilter,
            other => Self::Other(other.to_owned()),
        }
    }
}

/// Token counts reported by the server.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// Of `completion_tokens`, the reasoning ones
    /// (`completion_tokens_details.reasoning_tokens`): not kept in the conversation.
    pub reasoning_tokens: u64,
    /// Of `prompt_tokens`, those read from the provider's prompt cache
    /// (`prompt_tokens_details.cached_tokens`, or Anthropic's `cache_read_input_tokens`).
    pub cached_tokens: u64,
    /// Prompt tokens written to the cache (Anthropic's `cache_creation_input_tokens`).
    pub cache_write_tokens: u64,
}

impl Usage {
    /// Adds `other`'s counts to these (the usage of several requests).
    pub fn add(&mut self, other: &Usage) {
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.total_tokens = self.total_tokens.saturating_add(other.total_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(other.reasoning_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(other.cached_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(other.cache_write_tokens);
    }

    /// What stays in the conversation: the prompt and the answer, without reasoning.
    pub fn kept(&self) -> u64 {
        self.prompt_tokens
            .saturating_add(self.completion_tokens.saturating_sub(self.reasoning_tokens))
    }
}

/// The assembled result of one streamed completion.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Completion {
    pub text: String,
    pub reasoning: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<FinishReason>,
    pub usage: Option<Usage>,
    /// What the proxy says the response cost (LiteLLM's
    /// `x-litellm-response-cost` header, US dollars), when it says.
    pub response_cost: Option<f64>,
}

/// One model of the models endpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelInfo {
    pub id: String,
    /// Context size when the server reports it (`max_input_tokens`, else llama-server's
    /// `meta.n_ctx`, else `context_length`).
    pub max_input_tokens: Option<u64>,
    /// Whether the model accepts images, when the list says so ([`entry_supports_vision`]).
    pub supports_vision: Option<bool>,
}

/// Whether a models-list or `/model/info` entry says the model accepts images: LiteLLM's
/// `supports_vision` (at the top or under `model_info`), `capabilities.vision`, or an
/// `architecture.input_modalities` / `modalities.input` list (OpenRouter, some servers) that
/// does or does not name `image`.
pub fn entry_supports_vision(value: &Value) -> Option<bool> {
    let flag = [
        "/supports_vision",
        "/model_info/supports_vision",
        "/capabilities/vision",
    ]
    .iter()
    .find_map(|p| value.pointer(p).and_then(Value::as_bool));
    flag.or_else(|| {
        ["/architecture/input_modalities", "/modalities/input"]
            .iter()
            .find_map(|p| value.pointer(p).and_then(Value::as_array))
            .map(|list| list.iter().any(|m| m.as_str() == Some("image")))
    })
}

impl ModelInfo {
    /// Reads one entry of `{"data":[..]}`; `None` without a string `id`.
    pub fn from_json(value: &Value) -> Option<Self> {
        let id = value.get("id")?.as_str()?.to_owned();
        let max_input_tokens = value
            .get("max_input_tokens")
            .and_then(lenient_u64)
            .or_else(|| value.pointer("/meta/n_ctx").and_then(lenient_u64))
            .or_else(|| value.get("context_length").and_then(lenient_u64))
            .filter(|&t| crate::model_info::plausible_window(t));
        Some(Self {
            id,
            max_input_tokens,
            supports_vision: entry_supports_vision(value),
        })
    }
}

/// Reads a non-negative integer given as an int, a float like `32768.0`, or a numeric string.
pub(crate) fn lenient_u64(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.is_finite() && *f >= 0.0 && *f <= u64::MAX as f64)
                .map(|f| f.round() as u64)
        }),
        Value::String(s) => s.trim().parse::<f64>().ok().and_then(|f| {
            (f.is_finite() && f >= 0.0 && f <= u64::MAX as f64).then(|| f.round() as u64)
        }),
        _ => None,
    }
}

// ---- wire shapes -------------------------------------------------------------------------

#[derive(Clone, Serialize, Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: String,
    #[serde(default)]
    arguments: String,
}

#[derive(Clone, Serialize, Deserialize)]
struct WireToolCall {
    #[serde(default)]
    id: String,
    #[serde(rename = "type", default = "function_type")]
    kind: String,
    function: WireFunction,
}

fn function_type() -> String {
    "function".to_owned()
}

impl From<ToolCall> for WireToolCall {
    fn from(call: ToolCall) -> Self {
        Self {
            id: call.id,
            kind: function_type(),
            function: WireFunction {
                name: call.name,
                arguments: call.arguments,
            },
        }
    }
}

impl From<WireToolCall> for ToolCall {
    fn from(wire: WireToolCall) -> Self {
        Self {
            id: wire.id,
            name: wire.function.name,
            arguments: wire.function.arguments,
        }
    }
}

#[derive(Clone, Serialize, Deserialize)]
struct WireFunctionSpec {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    parameters: Value,
}

#[derive(Clone, Serialize, Deserialize)]
struct WireToolSpec {
    #[serde(rename = "type", default = "function_type")]
    kind: String,
    function: WireFunctionSpec,
}

impl From<ToolSpec> for WireToolSpec {
    fn from(spec: ToolSpec) -> Self {
        Self {
            kind: function_type(),
            function: WireFunctionSpec {
                name: spec.name,
                description: spec.description,
                parameters: spec.parameters,
            },
        }
    }
}

impl From<WireToolSpec> for ToolSpec {
    fn from(wire: WireToolSpec) -> Self {
        Self {
            name: wire.function.name,
            description: wire.function.description,
            parameters: wire.function.parameters,
        }
    }
}

#[derive(Clone, Serialize, Deserialize)]
struct WireMessage {
    role: String,
    /// Serialized as `null` for an assistant message without text (what the API expects).
    #[serde(default)]
    content: Value,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<String>,
}

impl From<ChatMessage> for WireMessage {
    fn from(message: ChatMessage) -> Self {
        let role = message.role().to_owned();
        let (content, tool_calls, tool_call_id) = match message {
            ChatMessage::System { content } => (Value::String(content), Vec::new(), None),
            ChatMessage::User { content, images } if images.is_empty() => {
                (Value::String(content), Vec::new(), None)
            }
            ChatMessage::User { content, images } => {
                let mut parts = Vec::with_capacity(images.len() + 1);
                if !content.is_empty() {
                    parts.push(serde_json::json!({"type": "text", "text": content}));
                }
                parts.extend(images.iter().map(|image| {
                    serde_json::json!({"type": "image_url", "image_url": {"url": image.data_url()}})
                }));
                (Value::Array(parts), Vec::new(), None)
            }
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => (
                content.map_or(Value::Null, Value::String),
                tool_calls.into_iter().map(WireToolCall::from).collect(),
                None,
            ),
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => (Value::String(content), Vec::new(), Some(tool_call_id)),
        };
        Self {
            role,
            content,
            tool_calls,
            tool_call_id,
        }
    }
}

/// Text of a `content` value: a string, `null`, or an array of text parts.
fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect(),
        ),
        other => Some(other.to_string()),
    }
}

/// The `data:` URL images of a `content` array.
fn content_images(content: &Value) -> Vec<Image> {
    let Value::Array(parts) = content else {
        return Vec::new();
    };
    parts
        .iter()
        .filter_map(|p| {
            let url = p.pointer("/image_url/url").or_else(|| p.get("image_url"))?;
            Image::from_data_url(url.as_str()?)
        })
        .collect()
}

impl TryFrom<WireMessage> for ChatMessage {
    type Error = String;

    fn try_from(wire: WireMessage) -> Result<Self, String> {
        let text = content_text(&wire.content);
        Ok(match wire.role.as_str() {
            "system" | "developer" => Self::System {
                content: text.unwrap_or_default(),
            },
            "user" => Self::User {
                content: text.unwrap_or_default(),
                images: content_images(&wire.content),
            },
            "assistant" => Self::Assistant {
                content: text,
                tool_calls: wire.tool_calls.into_iter().map(ToolCall::from).collect(),
            },
            "tool" => Self::Tool {
                tool_call_id: wire.tool_call_id.unwrap_or_default(),
                content: text.unwrap_or_default(),
            },
            other => return Err(format!("unknown message role {other:?}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str, name: &str, args: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args.into(),
        }
    }

    #[test]
    fn assistant_with_tool_calls_has_wire_shape() {
        let msg = ChatMessage::Assistant {
            content: None,
            tool_calls: vec![call("call_1", "read_file", r#"{"path":"a"}"#)],
        };
        assert_eq!(
            serde_json::to_value(&msg).unwrap(),
            json!({"role":"assistant","content":null,"tool_calls":[
                {"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\"}"}}
            ]})
        );
    }

    #[test]
    fn cache_marks_the_system_and_the_last_two_messages_with_text() {
        let mut req = ChatRequest {
            model: "m".into(),
            messages: vec![
                ChatMessage::system("sys"),
                ChatMessage::user("one"),
                ChatMessage::user("two"),
                ChatMessage::Assistant {
                    content: None,
                    tool_calls: vec![call("c1", "Read", "{}")],
                },
                ChatMessage::tool("c1", "result"),
            ],
            tools: vec![],
            max_tokens: None,
            cache: true,
            reasoning_effort: None,
        };
        let body = req.body();
        let marked: Vec<usize> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .filter(|(_, m)| m.to_string().contains("ephemeral"))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(marked, [0, 2, 4]);
        assert_eq!(
            body["messages"][4]["content"],
            json!([{"type":"text","text":"result","cache_control":{"type":"ephemeral"}}])
        );
        req.cache = false;
        assert!(!req.body().to_string().contains("cache_control"));
    }

    #[test]
    fn empty_tool_calls_are_omitted() {
        let v = serde_json::to_value(ChatMessage::assistant("hi")).unwrap();
        assert_eq!(v, json!({"role":"assistant","content":"hi"}));
        let v = serde_json::to_value(ChatMessage::tool("c1", "ok")).unwrap();
        assert_eq!(v, json!({"role":"tool","content":"ok","tool_call_id":"c1"}));
    }

    #[test]
    fn messages_round_trip() {
        let msgs = vec![
            ChatMessage::system("s"),
            ChatMessage::user("u"),
            ChatMessage::Assistant {
                content: Some("t".into()),
                tool_calls: vec![call("a", "b", "{}"), call("c", "d", "")],
            },
            ChatMessage::Assistant {
                content: None,
                tool_calls: vec![],
            },
            ChatMessage::tool("a", "out"),
        ];
        let text = serde_json::to_string(&msgs).unwrap();
        let back: Vec<ChatMessage> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, msgs);
    }

    #[test]
    fn user_images_are_image_url_parts() {
        let msg = ChatMessage::User {
            content: "look".into(),
            images: vec![Image {
                mime_type: "image/png".into(),
                data: b"\x89PNG".to_vec().into(),
            }],
        };
        let v = serde_json::to_value(&msg).unwrap();
        assert_eq!(
            v,
            json!({"role":"user","content":[{"type":"text","text":"look"},
                {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw=="}}]})
        );
        if let ChatMessage::User { images, .. } = &msg {
            assert_eq!(images[0].data_url_len(), images[0].data_url().len());
        }
        let back: ChatMessage = serde_json::from_value(v).unwrap();
        assert_eq!(back, msg);
    }

    #[test]
    fn lenient_deserialization() {
        let m: ChatMessage = serde_json::from_value(
            json!({"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}),
        )
        .unwrap();
        assert_eq!(m, ChatMessage::user("ab"));
        let m: ChatMessage =
            serde_json::from_value(json!({"role":"developer","content":"x"})).unwrap();
        assert_eq!(m, ChatMessage::system("x"));
        assert!(serde_json::from_value::<ChatMessage>(json!({"role":"robot"})).is_err());
    }

    #[test]
    fn request_body_shape() {
        let mut req = ChatRequest {
            model: "m".into(),
            messages: vec![ChatMessage::user("hi")],
            tools: vec![],
            max_tokens: None,
            cache: false,
            reasoning_effort: None,
        };
        assert_eq!(
            req.body(),
            json!({"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,
                   "stream_options":{"include_usage":true}})
        );
        req.tools.push(ToolSpec {
            name: "t".into(),
            description: "d".into(),
            parameters: json!({"type":"object"}),
        });
        req.max_tokens = Some(100);
        let body = req.body();
        assert_eq!(
            body["tools"],
            json!([{"type":"function","function":{"name":"t","description":"d","parameters":{"type":"object"}}}])
        );
        assert_eq!(body["max_tokens"], json!(100));
    }

    #[test]
    fn finish_reasons_map() {
        assert_eq!(FinishReason::from_wire("stop"), FinishReason::Stop);
        assert_eq!(FinishReason::from_wire("length"), FinishReason::Length);
        assert_eq!(
            FinishReason::from_wire("tool_calls"),
            FinishReason::ToolCalls
        );
        assert_eq!(
            FinishReason::from_wire("function_call"),
            FinishReason::ToolCalls
        );
        assert_eq!(
            FinishReason::from_wire("content_filter"),
            FinishReason::ContentFilter
        );
        assert_eq!(
            FinishReason::from_wire("eos"),
            FinishReason::Other("eos".into())
        );
    }

    #[test]
    fn model_info_is_lenient() {
        let m = ModelInfo::from_json(&json!({"id":"a","max_input_tokens":32768.0})).unwrap();
        assert_eq!(m.max_input_tokens, Some(32768));
        let m = ModelInfo::from_json(&json!({"id":"a","max_input_tokens":8192})).unwrap();
        assert_eq!(m.max_input_tokens, Some(8192));
        for absurd in [json!(0), json!(1), json!(1e13)] {
            let m = ModelInfo::from_json(&json!({"id":"a","max_input_tokens":absurd})).unwrap();
            assert_eq!(m.max_input_tokens, None, "{absurd}");
        }
        let m = ModelInfo::from_json(&json!({"id":"a","meta":{"n_ctx":4096}})).unwrap();
        assert_eq!(m.max_input_tokens, Some(4096));
        let m = ModelInfo::from_json(&json!({"id":"a","max_input_tokens":null})).unwrap();
        assert_eq!(m.max_input_tokens, None);
        assert!(ModelInfo::from_json(&json!({"object":"model"})).is_none());
        assert_eq!(m.supports_vision, None);
        let v = |j| ModelInfo::from_json(&j).unwrap().supports_vision;
        assert_eq!(v(json!({"id":"a","supports_vision":true})), Some(true));
        assert_eq!(
            v(json!({"id":"a","architecture":{"input_modalities":["text","image"]}})),
            Some(true)
        );
        assert_eq!(
            v(json!({"id":"a","modalities":{"input":["text"]}})),
            Some(false)
        );
    }
}
