//! What the engine reports for observability that the conversation itself
//! does not show: one record per model request ([`ModelRequest`], sent as
//! `Event::ModelRequest` when the request ends, whatever its outcome).
//! An exporter at the edge (`maia-otel`) turns these and the other events
//! into spans and metrics; the engine knows nothing of how.
//!
//! A leaf: it imports nothing of the crate.

use std::time::{Duration, SystemTime};

use maia_llm::{Completion, FinishReason, LlmError, Usage};

/// One model request, as it ended.
#[derive(Clone, Debug)]
pub struct ModelRequest {
    /// The model asked for (`ChatRequest::model`).
    pub model: String,
    /// When the request was sent.
    pub started: SystemTime,
    /// How long it took, to its last byte or its failure.
    pub duration: Duration,
    /// What the server said it used, if it said.
    pub usage: Option<Usage>,
    /// What the proxy said it cost (US dollars), if it said.
    pub cost: Option<f64>,
    /// Why the answer stopped (`stop`, `length`, `tool_calls`…), once it did.
    pub finish_reason: Option<String>,
    /// The tool calls the answer asked for, by name.
    pub tool_calls: Vec<String>,
    /// Why it failed (a short class: `rate_limited`, `server_error`…);
    /// `None` when it answered.
    pub error: Option<&'static str>,
    /// The answer's text (the text streamed before a failure). An exporter
    /// sends it only when the user turned content capture on.
    pub output: String,
}

impl ModelRequest {
    /// The record of a request for `model` sent at `started`, ended now
    /// with `result` after `partial` was streamed.
    pub fn ended(
        model: &str,
        started: SystemTime,
        result: &Result<Completion, LlmError>,
        partial: &str,
    ) -> Self {
        let duration = started.elapsed().unwrap_or_default();
        let mut report = ModelRequest {
            model: model.to_owned(),
            started,
            duration,
            usage: None,
            cost: None,
            finish_reason: None,
            tool_calls: Vec::new(),
            error: None,
            output: partial.to_owned(),
        };
        match result {
            Ok(completion) => {
                report.usage = completion.usage.clone();
                report.cost = completion.response_cost;
                report.finish_reason = completion.finish_reason.as_ref().map(finish_reason);
                report.tool_calls = completion
                    .tool_calls
                    .iter()
                    .map(|c| c.name.clone())
                    .collect();
                if !completion.text.is_empty() {
                    report.output = completion.text.clone();
                }
            }
            Err(e) => report.error = Some(error_class(e)),
        }
        report
    }
}

/// The wire name of a finish reason.
fn finish_reason(reason: &FinishReason) -> String {
    match reason {
        FinishReason::Stop => "stop".into(),
        FinishReason::Length => "length".into(),
        FinishReason::ToolCalls => "tool_calls".into(),
        FinishReason::ContentFilter => "content_filter".into(),
        FinishReason::Other(other) => other.clone(),
    }
}

/// A failure's class, low in cardinality (an `error.type` value).
pub fn error_class(error: &LlmError) -> &'static str {
    match error {
        LlmError::RateLimited { .. } => "rate_limited",
        LlmError::ContextWindowExceeded { .. } => "context_window_exceeded",
        LlmError::Authentication { .. } => "authentication",
        LlmError::BadRequest { .. } => "bad_request",
        LlmError::Server { .. } => "server_error",
        LlmError::StreamInterrupted { .. } => "stream_interrupted",
        LlmError::Connection { .. } => "connection",
        LlmError::InvalidResponse { .. } => "invalid_response",
        LlmError::Cancelled => "cancelled",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_request_says_why_and_keeps_what_streamed() {
        let started = SystemTime::now();
        let result = Err(LlmError::Server {
            status: 502,
            message: "bad gateway".into(),
        });
        let report = ModelRequest::ended("m", started, &result, "half an ans");
        assert_eq!(report.error, Some("server_error"));
        assert_eq!(report.output, "half an ans");
        assert!(report.usage.is_none());
        assert_eq!(report.model, "m");
    }

    #[test]
    fn an_answer_gives_its_usage_cost_and_finish_reason() {
        let completion = Completion {
            text: "done".into(),
            reasoning: String::new(),
            tool_calls: Vec::new(),
            finish_reason: Some(FinishReason::Stop),
            usage: Some(Usage {
                prompt_tokens: 7,
                completion_tokens: 3,
                total_tokens: 10,
                ..Usage::default()
            }),
            response_cost: Some(0.25),
        };
        let report = ModelRequest::ended("m", SystemTime::now(), &Ok(completion), "");
        assert_eq!(report.error, None);
        assert_eq!(report.finish_reason.as_deref(), Some("stop"));
        assert_eq!(report.usage.map(|u| u.prompt_tokens), Some(7));
        assert_eq!(report.cost, Some(0.25));
        assert_eq!(report.output, "done");
    }
}
