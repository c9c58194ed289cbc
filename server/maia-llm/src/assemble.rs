//! Assembles streamed `chat.completion.chunk` payloads into a [`Completion`].
//!
//! Each `data:` payload is fed to [`Assembler::push`], which returns the [`Delta`]s to report at
//! once. Tool calls are accumulated per `index`: the id and name usually come only in a call's
//! first delta, the arguments are concatenated from all of them. The usage chunk is read
//! whatever its `choices` shape (`[]` from OpenAI, `[{"index":0,"delta":{}}]` from LiteLLM).
//!
//! Policy for malformed input: a payload that is not JSON is an error
//! ([`LlmError::InvalidResponse`]), not skipped, so that a broken proxy is noticed; an
//! `{"error":{..}}` payload is [`LlmError::StreamInterrupted`].

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::error::{ErrorInfo, LlmError, truncate};
use crate::types::{Completion, Delta, FinishReason, ToolCall, Usage, lenient_u64};

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
    started: bool,
}

/// Accumulates one streamed completion.
#[derive(Debug, Default)]
pub struct Assembler {
    text: String,
    reasoning: String,
    /// Tool calls by slot (normally the wire `index`).
    calls: BTreeMap<usize, PartialCall>,
    /// Wire index → slot, for providers that reuse one index for several calls.
    slots: HashMap<usize, usize>,
    last_slot: Option<usize>,
    finish_reason: Option<FinishReason>,
    usage: Option<Usage>,
}

impl Assembler {
    /// An empty assembler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a `finish_reason` has been seen.
    pub fn has_finish_reason(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// Feeds one `data:` payload and returns the deltas it carries, in order.
    pub fn push(&mut self, data: &str) -> Result<Vec<Delta>, LlmError> {
        let chunk: Value = serde_json::from_str(data).map_err(|err| LlmError::InvalidResponse {
            message: format!("chunk is not JSON ({err}): {}", truncate(data)),
        })?;
        self.push_value(&chunk)
    }

    /// Feeds one parsed chunk.
    pub fn push_value(&mut self, chunk: &Value) -> Result<Vec<Delta>, LlmError> {
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            let message = ErrorInfo::from_value(chunk)
                .map(|info| info.message)
                .unwrap_or_else(|| truncate(&error.to_string()));
            return Err(LlmError::StreamInterrupted { message });
        }
        if !chunk.is_object() {
            return Err(LlmError::InvalidResponse {
                message: format!("chunk is not an object: {}", truncate(&chunk.to_string())),
            });
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(parse_usage(usage));
        }
        let mut deltas = Vec::new();
        let choices = chunk.get("choices").and_then(Value::as_array);
        for choice in choices.into_iter().flatten() {
            // Only the first choice is assembled (n = 1 is always requested).
            if choice.get("index").and_then(lenient_u64).unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.get("delta").filter(|d| d.is_object()) {
                self.push_delta(delta, &mut deltas);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(FinishReason::from_wire(reason));
            }
        }
        Ok(deltas)
    }

    fn push_delta(&mut self, delta: &Value, out: &mut Vec<Delta>) {
        let reasoning = delta
            .get("reasoning_content")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .or_else(|| {
                delta
                    .get("reasoning")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
            });
        if let Some(reasoning) = reasoning {
            self.reasoning.push_str(reasoning);
            out.push(Delta::Reasoning(reasoning.to_owned()));
        }
        if let Some(text) = delta
            .get("content")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            self.text.push_str(text);
            out.push(Delta::Text(text.to_owned()));
        }
        let tool_calls = delta.get("tool_calls").and_then(Value::as_array);
        for call in tool_calls.into_iter().flatten() {
            self.push_tool_call(call, out);
        }
    }

    fn push_tool_call(&mut self, call: &Value, out: &mut Vec<Delta>) {
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let function = call.get("function");
        let name = function
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let arguments = match function.and_then(|f| f.get("arguments")) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };

        let slot = self.slot_for(call.get("index").and_then(lenient_u64), id);
        self.last_slot = Some(slot);
        let entry = self.calls.entry(slot).or_default();
        if let Some(id) = id.filter(|_| entry.id.is_empty()) {
            entry.id = id.to_owned();
        }
        if let Some(name) = name.filter(|_| entry.name.is_empty()) {
            entry.name = name.to_owned();
        }
        entry.arguments.push_str(&arguments);
        if !entry.started && !entry.id.is_empty() && !entry.name.is_empty() {
            entry.started = true;
            out.push(Delta::ToolCallStarted {
                index: slot,
                id: entry.id.clone(),
                name: entry.name.clone(),
            });
        }
    }

    /// The slot a tool-call delta belongs to.
    fn slot_for(&mut self, wire_index: Option<u64>, id: Option<&str>) -> usize {
        let Some(wire) = wire_index.and_then(|i| usize::try_from(i).ok()) else {
            // No index: a new id opens a new call, otherwise continue the last one.
            return match (id, self.last_slot) {
                (None, Some(last)) => last,
                (Some(id), Some(last)) if self.calls.get(&last).is_some_and(|c| c.id == id) => last,
                _ => self.next_free_slot(),
            };
        };
        let slot = *self.slots.entry(wire).or_insert(wire);
        match (id, self.calls.get(&slot)) {
            (Some(id), Some(existing)) if !existing.id.is_empty() && existing.id != id => {
                // A different call reusing the index: give it a fresh slot.
                let fresh = self.next_free_slot();
                self.slots.insert(wire, fresh);
                fresh
            }
            _ => slot,
        }
    }

    fn next_free_slot(&self) -> usize {
        self.calls
            .keys()
            .next_back()
            .map_or(0, |last| last + 1)
            .max(self.slots.keys().copied().max().map_or(0, |m| m + 1))
    }

    /// Ends the stream. Without `[DONE]` the result is accepted only if a finish reason came.
    pub fn finish(self, saw_done: bool) -> Result<Completion, LlmError> {
        if !saw_done && self.finish_reason.is_none() {
            return Err(LlmError::StreamInterrupted {
                message: "the stream ended without [DONE] and without a finish reason".to_owned(),
            });
        }
        let tool_calls = self
            .calls
            .into_iter()
            .filter_map(|(slot, call)| {
                if call.name.is_empty() {
                    tracing::warn!(slot, "dropping a streamed tool call without a name");
                    return None;
                }
                let id = if call.id.is_empty() {
                    tracing::warn!(slot, "streamed tool call without an id; generating one");
                    format!("call_{slot}")
                } else {
                    call.id
                };
                Some(ToolCall {
                    id,
                    name: call.name,
                    arguments: call.arguments,
                })
            })
            .collect();
        Ok(Completion {
            text: self.text,
            reasoning: self.reasoning,
            tool_calls,
            finish_reason: self.finish_reason,
            usage: self.usage,
            response_cost: None,
        })
    }
}

fn parse_usage(usage: &Value) -> Usage {
    let get = |key: &str| usage.get(key).and_then(lenient_u64);
    let at = |pointer: &str| usage.pointer(pointer).and_then(lenient_u64);
    let prompt_tokens = get("prompt_tokens").unwrap_or(0);
    let completion_tokens = get("completion_tokens").unwrap_or(0);
    Usage {
        prompt_tokens,
        completion_tokens,
        total_tokens: get("total_tokens")
            .unwrap_or(prompt_tokens.saturating_add(completion_tokens)),
        reasoning_tokens: at("/completion_tokens_details/reasoning_tokens")
            .unwrap_or(0)
            .min(completion_tokens),
        cached_tokens: at("/prompt_tokens_details/cached_tokens")
            .or_else(|| get("cache_read_input_tokens"))
            .unwrap_or(0),
        cache_write_tokens: get("cache_creation_input_tokens")
            .or_else(|| at("/prompt_tokens_details/cache_creation_tokens"))
            .unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn chunk(delta: Value, finish: Option<&str>) -> String {
        json!({"id":"c","object":"chat.completion.chunk","model":"m",
               "choices":[{"index":0,"delta":delta,"finish_reason":finish}]})
        .to_string()
    }

    fn feed(asm: &mut Assembler, chunks: &[String]) -> Vec<Delta> {
        chunks.iter().flat_map(|c| asm.push(c).unwrap()).collect()
    }

    #[test]
    fn text_and_usage_litellm_shape() {
        let mut asm = Assembler::new();
        let deltas = feed(
            &mut asm,
            &[
                chunk(json!({"role":"assistant","content":"Hel"}), None),
                chunk(json!({"content":"lo"}), None),
                chunk(json!({}), Some("stop")),
                json!({"choices":[{"index":0,"delta":{}}],
                       "usage":{"prompt_tokens":9,"completion_tokens":16,"total_tokens":25}})
                .to_string(),
            ],
        );
        assert_eq!(
            deltas,
            vec![Delta::Text("Hel".into()), Delta::Text("lo".into())]
        );
        let done = asm.finish(true).unwrap();
        assert_eq!(done.text, "Hello");
        assert_eq!(done.finish_reason, Some(FinishReason::Stop));
        assert_eq!(
            done.usage,
            Some(Usage {
                prompt_tokens: 9,
                completion_tokens: 16,
                total_tokens: 25,
                ..Usage::default()
            })
        );
    }

    #[test]
    fn usage_openai_shape_and_missing_total() {
        let mut asm = Assembler::new();
        feed(
            &mut asm,
            &[
                chunk(json!({"content":"x"}), Some("length")),
                json!({"choices":[],"usage":{"prompt_tokens":42,"completion_tokens":7}})
                    .to_string(),
            ],
        );
        let done = asm.finish(true).unwrap();
        assert_eq!(done.usage.unwrap().total_tokens, 49);
        assert_eq!(done.finish_reason, Some(FinishReason::Length));
    }

    #[test]
    fn usage_details_reasoning_and_cache() {
        let mut asm = Assembler::new();
        asm.push(
            &json!({"choices":[],"usage":{"prompt_tokens":3517,"completion_tokens":158,
                "completion_tokens_details":{"reasoning_tokens":100},
                "prompt_tokens_details":{"cached_tokens":3000}}})
            .to_string(),
        )
        .unwrap();
        let usage = asm.finish(true).unwrap().usage.unwrap();
        assert_eq!(usage.kept(), 3575);
        assert_eq!(usage.cached_tokens, 3000);
        let mut asm = Assembler::new();
        asm.push(
            &json!({"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,
                "cache_read_input_tokens":7,"cache_creation_input_tokens":2}})
            .to_string(),
        )
        .unwrap();
        let usage = asm.finish(true).unwrap().usage.unwrap();
        assert_eq!(
            (usage.cached_tokens, usage.cache_write_tokens, usage.kept()),
            (7, 2, 15)
        );
    }

    #[test]
    fn null_usage_is_ignored() {
        let mut asm = Assembler::new();
        asm.push(&json!({"choices":[],"usage":null}).to_string())
            .unwrap();
        assert_eq!(asm.finish(true).unwrap().usage, None);
    }

    #[test]
    fn two_parallel_tool_calls_interleaved() {
        let tc = |v: Value| chunk(json!({"tool_calls":[v]}), None);
        let mut asm = Assembler::new();
        let deltas = feed(
            &mut asm,
            &[
                tc(
                    json!({"index":0,"id":"call_A","type":"function","function":{"name":"read_file","arguments":""}}),
                ),
                tc(json!({"index":0,"type":"function","function":{"arguments":"{\"pa"}})),
                tc(
                    json!({"index":1,"id":"call_B","type":"function","function":{"name":"shell","arguments":"{\"cmd\":"}}),
                ),
                tc(json!({"index":0,"type":"function","function":{"arguments":"th\": \"src/ma"}})),
                tc(json!({"index":1,"type":"function","function":{"arguments":" \"ls -la\"}"}})),
                tc(json!({"index":0,"type":"function","function":{"arguments":"in.rs\"}"}})),
                chunk(json!({}), Some("tool_calls")),
            ],
        );
        assert_eq!(
            deltas,
            vec![
                Delta::ToolCallStarted {
                    index: 0,
                    id: "call_A".into(),
                    name: "read_file".into()
                },
                Delta::ToolCallStarted {
                    index: 1,
                    id: "call_B".into(),
                    name: "shell".into()
                },
            ]
        );
        let done = asm.finish(true).unwrap();
        assert_eq!(done.finish_reason, Some(FinishReason::ToolCalls));
        assert_eq!(
            done.tool_calls,
            vec![
                ToolCall {
                    id: "call_A".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path": "src/main.rs"}"#.into()
                },
                ToolCall {
                    id: "call_B".into(),
                    name: "shell".into(),
                    arguments: r#"{"cmd": "ls -la"}"#.into()
                },
            ]
        );
    }

    #[test]
    fn reused_index_with_new_id_opens_new_call() {
        let tc = |v: Value| chunk(json!({"tool_calls":[v]}), None);
        let mut asm = Assembler::new();
        feed(
            &mut asm,
            &[
                tc(json!({"index":0,"id":"a","function":{"name":"x","arguments":"{}"}})),
                tc(json!({"index":0,"id":"b","function":{"name":"y","arguments":"{\"k\":1}"}})),
            ],
        );
        let calls = asm.finish(true).unwrap().tool_calls;
        assert_eq!(calls.len(), 2);
        assert_eq!((calls[1].id.as_str(), calls[1].name.as_str()), ("b", "y"));
        assert_eq!(calls[1].arguments, "{\"k\":1}");
    }

    #[test]
    fn missing_id_is_generated() {
        let mut asm = Assembler::new();
        asm.push(&chunk(
            json!({"tool_calls":[{"index":0,"function":{"name":"x","arguments":{"a":1}}}]}),
            Some("tool_calls"),
        ))
        .unwrap();
        let calls = asm.finish(false).unwrap().tool_calls;
        assert_eq!(calls[0].id, "call_0");
        assert_eq!(calls[0].arguments, "{\"a\":1}");
    }

    #[test]
    fn reasoning_content_and_reasoning() {
        let mut asm = Assembler::new();
        let deltas = feed(
            &mut asm,
            &[
                chunk(json!({"reasoning_content":"think "}), None),
                chunk(json!({"reasoning":"more"}), None),
                // Both present: reasoning_content wins, no duplicate.
                chunk(json!({"reasoning_content":"!","reasoning":"!"}), None),
                chunk(json!({"content":"answer","reasoning_content":null}), None),
            ],
        );
        assert_eq!(
            deltas,
            vec![
                Delta::Reasoning("think ".into()),
                Delta::Reasoning("more".into()),
                Delta::Reasoning("!".into()),
                Delta::Text("answer".into()),
            ]
        );
        let done = asm.finish(true).unwrap();
        assert_eq!(done.reasoning, "think more!");
        assert_eq!(done.text, "answer");
    }

    #[test]
    fn finish_reasons() {
        for (wire, want) in [
            ("stop", FinishReason::Stop),
            ("length", FinishReason::Length),
            ("tool_calls", FinishReason::ToolCalls),
            ("content_filter", FinishReason::ContentFilter),
            ("weird", FinishReason::Other("weird".into())),
        ] {
            let mut asm = Assembler::new();
            asm.push(&chunk(json!({}), Some(wire))).unwrap();
            assert!(asm.has_finish_reason());
            assert_eq!(asm.finish(true).unwrap().finish_reason, Some(want));
        }
    }

    #[test]
    fn error_object_mid_stream() {
        let mut asm = Assembler::new();
        asm.push(&chunk(json!({"content":"a"}), None)).unwrap();
        let err = asm
            .push(r#"{"error": {"message": "litellm.APIConnectionError: upstream overloaded mid-stream", "type": null, "param": null, "code": "500"}}"#)
            .unwrap_err();
        match err {
            LlmError::StreamInterrupted { message } => {
                assert_eq!(
                    message,
                    "litellm.APIConnectionError: upstream overloaded mid-stream"
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn missing_done() {
        let mut asm = Assembler::new();
        asm.push(&chunk(json!({"content":"a"}), None)).unwrap();
        assert!(matches!(
            asm.finish(false),
            Err(LlmError::StreamInterrupted { .. })
        ));
        let mut asm = Assembler::new();
        asm.push(&chunk(json!({"content":"a"}), Some("stop")))
            .unwrap();
        assert_eq!(asm.finish(false).unwrap().text, "a");
    }

    #[test]
    fn invalid_json_is_an_error() {
        let mut asm = Assembler::new();
        assert!(matches!(
            asm.push("{not json"),
            Err(LlmError::InvalidResponse { .. })
        ));
        assert!(matches!(
            asm.push("[1,2]"),
            Err(LlmError::InvalidResponse { .. })
        ));
    }
}
