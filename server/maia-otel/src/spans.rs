//! The spans of every session, made from the engine's events: a session's
//! span, each turn's `invoke_agent` span under it (or under the client's
//! `traceparent`), and under a turn its model requests (`chat`), tool
//! calls (`execute_tool`), hooks and subagents (`invoke_agent`, with their
//! own requests and calls). The one owner of the open spans; every span
//! it opens ends, at the latest when its turn or its session ends.

use std::collections::HashMap;
use std::time::SystemTime;

use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::SdkTracer;

use maia_core::{Event, StopReason, SubagentEvent, SubagentUpdate, telemetry::ModelRequest};

use crate::metrics::Instruments;
use crate::names::*;
use crate::tools::Tools;

/// What the next turn of a session comes from: the client's trace
/// context, the prompt's text (kept only when contents are captured).
#[derive(Default)]
pub(crate) struct Origin {
    pub(crate) parent: Option<Context>,
    pub(crate) prompt: Option<String>,
}

/// A session's open spans.
struct Session {
    root: Context,
    next: Option<Origin>,
    turn: Option<Turn>,
}

struct Turn {
    cx: Context,
    /// The answer's text so far (contents captured only).
    output: String,
    model: Option<String>,
    input_tokens: u64,
    output_tokens: u64,
    tools: Tools,
    /// The running subagents, by the child session's id.
    children: HashMap<String, Child>,
}

struct Child {
    cx: Context,
    tools: Tools,
}

/// The most text of an answer kept for `gen_ai.output.messages`.
const OUTPUT_CAP: usize = 64 * 1024;

/// Spans and metrics of every session of the process.
pub(crate) struct Recorder {
    tracer: SdkTracer,
    pub(crate) instruments: Instruments,
    pub(crate) capture: bool,
    sessions: HashMap<String, Session>,
}

impl Recorder {
    pub(crate) fn new(tracer: SdkTracer, instruments: Instruments, capture: bool) -> Self {
        Recorder {
            tracer,
            instruments,
            capture,
            sessions: HashMap::new(),
        }
    }

    fn session(&mut self, id: &str) -> &mut Session {
        let (tracer, instruments) = (&self.tracer, &self.instruments);
        self.sessions.entry(id.to_owned()).or_insert_with(|| {
            let span = tracer
                .span_builder("maia.session")
                .with_kind(SpanKind::Internal)
                .with_attributes([KeyValue::new(CONVERSATION_ID, id.to_owned())])
                .start_with_context(tracer, &Context::new());
            instruments.session();
            Session {
                root: Context::new().with_span(span),
                next: None,
                turn: None,
            }
        })
    }

    /// The next turn of `session` comes from `origin`.
    pub(crate) fn origin(&mut self, session: &str, origin: Origin) {
        self.session(session).next = Some(origin);
    }

    /// The session ended: every span of it ends.
    pub(crate) fn close(&mut self, session: &str) {
        if let Some(mut s) = self.sessions.remove(session) {
            if let Some(turn) = s.turn.take() {
                self.end_turn(turn, Some("session_closed"), None);
            }
            s.root.span().end();
        }
    }

    /// Every session ended (the process stops).
    pub(crate) fn close_all(&mut self) {
        let ids: Vec<String> = self.sessions.keys().cloned().collect();
        for id in ids {
            self.close(&id);
        }
    }

    pub(crate) fn observe(&mut self, session: &str, event: &Event) {
        match event {
            Event::TurnStarted(_) => self.start_turn(session),
            Event::TurnEnded(stop) => {
                if let Some(turn) = self.session(session).turn.take() {
                    self.end_turn(turn, stop_error(*stop), Some(*stop));
                }
            }
            Event::TurnFailed(message) => {
                if let Some(turn) = &self.session(session).turn {
                    turn.cx
                        .span()
                        .set_attribute(KeyValue::new(ERROR_TYPE, "turn_failed"));
                    turn.cx.span().set_status(Status::error(message.clone()));
                }
            }
            Event::AgentText { text, .. } => {
                let capture = self.capture;
                if let Some(turn) = &mut self.session(session).turn
                    && capture
                    && turn.output.len() < OUTPUT_CAP
                {
                    turn.output.push_str(text);
                }
            }
            Event::ModelRequest(report) => {
                self.instruments.request(report);
                let capture = self.capture;
                let tracer = self.tracer.clone();
                let s = self.session(session);
                let parent = match &mut s.turn {
                    Some(turn) => {
                        turn.model.get_or_insert_with(|| report.model.clone());
                        if let Some(usage) = &report.usage {
                            turn.input_tokens += usage.prompt_tokens;
                            turn.output_tokens += usage.completion_tokens;
                        }
                        turn.cx.clone()
                    }
                    None => s.root.clone(),
                };
                chat_span(&tracer, &parent, report, capture);
            }
            Event::Subagent(event) => self.subagent(session, event),
            Event::Hook(report) => {
                let tracer = self.tracer.clone();
                let capture = self.capture;
                let s = self.session(session);
                let parent = match &s.turn {
                    Some(turn) => turn
                        .tools
                        .running(report.subject.as_deref())
                        .unwrap_or_else(|| turn.cx.clone()),
                    None => s.root.clone(),
                };
                crate::tools::hook_span(&tracer, &parent, report, capture);
            }
            Event::ToolCall(_) | Event::ToolCallUpdate(_) => {
                let (tracer, capture) = (self.tracer.clone(), self.capture);
                let instruments = &self.instruments;
                let Some(s) = self.sessions.get_mut(session) else {
                    return;
                };
                if let Some(turn) = &mut s.turn {
                    let cx = turn.cx.clone();
                    turn.tools
                        .observe(event, (&tracer, &cx, capture), instruments);
                }
            }
            _ => {}
        }
    }

    fn start_turn(&mut self, session: &str) {
        let (tracer, capture) = (self.tracer.clone(), self.capture);
        let stale = {
            let s = self.session(session);
            s.turn.take()
        };
        if let Some(stale) = stale {
            self.end_turn(stale, Some("superseded"), None);
        }
        let s = self.session(session);
        let origin = s.next.take().unwrap_or_default();
        let root_context = s.root.span().span_context().clone();
        let mut attributes = vec![
            KeyValue::new(OPERATION_NAME, "invoke_agent"),
            KeyValue::new(AGENT_NAME, AGENT),
            KeyValue::new(PROVIDER_NAME, PROVIDER),
            KeyValue::new(CONVERSATION_ID, session.to_owned()),
        ];
        if capture && let Some(prompt) = &origin.prompt {
            attributes.push(KeyValue::new(
                INPUT_MESSAGES,
                messages("user", prompt, None),
            ));
        }
        let mut builder = tracer
            .span_builder(format!("invoke_agent {AGENT}"))
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes);
        let parent = match origin.parent {
            Some(parent) => {
                // The client's trace: the session's span is linked.
                builder = builder
                    .with_links(vec![opentelemetry::trace::Link::with_context(root_context)]);
                parent
            }
            None => s.root.clone(),
        };
        let span = builder.start_with_context(&tracer, &parent);
        s.turn = Some(Turn {
            cx: parent.with_span(span),
            output: String::new(),
            model: None,
            input_tokens: 0,
            output_tokens: 0,
            tools: Tools::default(),
            children: HashMap::new(),
        });
    }

    fn end_turn(&self, mut turn: Turn, error: Option<&'static str>, stop: Option<StopReason>) {
        let span = turn.cx.span();
        for (_, child) in turn.children.drain() {
            child.tools.end_all(&self.instruments);
            child
                .cx
                .span()
                .set_attribute(KeyValue::new(ERROR_TYPE, "cancelled"));
            child.cx.span().end();
        }
        turn.tools.end_all(&self.instruments);
        if let Some(model) = turn.model.take() {
            span.set_attribute(KeyValue::new(REQUEST_MODEL, model));
        }
        span.set_attribute(KeyValue::new(INPUT_TOKENS, turn.input_tokens as i64));
        span.set_attribute(KeyValue::new(OUTPUT_TOKENS, turn.output_tokens as i64));
        if let Some(stop) = stop {
            span.set_attribute(KeyValue::new("maia.turn.stop_reason", stop_name(stop)));
        }
        if self.capture && !turn.output.is_empty() {
            let finish = stop.map(stop_name);
            span.set_attribute(KeyValue::new(
                OUTPUT_MESSAGES,
                messages("assistant", &turn.output, finish),
            ));
        }
        if let Some(error) = error {
            span.set_attribute(KeyValue::new(ERROR_TYPE, error));
            span.set_status(Status::error(error));
        }
        span.end();
    }

    fn subagent(&mut self, session: &str, event: &SubagentEvent) {
        let (tracer, capture) = (self.tracer.clone(), self.capture);
        let instruments = &self.instruments;
        let Some(turn) = self.sessions.get_mut(session).and_then(|s| s.turn.as_mut()) else {
            return;
        };
        let id = event.child.id.clone();
        match &event.update {
            SubagentUpdate::Started => {
                let parent = turn
                    .tools
                    .context(&event.child.tool_call_id)
                    .unwrap_or_else(|| turn.cx.clone());
                let span = tracer
                    .span_builder(format!("invoke_agent {}", event.child.agent))
                    .with_kind(SpanKind::Internal)
                    .with_attributes([
                        KeyValue::new(OPERATION_NAME, "invoke_agent"),
                        KeyValue::new(AGENT_NAME, event.child.agent.clone()),
                        KeyValue::new(AGENT_ID, id.clone()),
                        KeyValue::new(PROVIDER_NAME, PROVIDER),
                        KeyValue::new(CONVERSATION_ID, id.clone()),
                    ])
                    .start_with_context(&tracer, &parent);
                let child = Child {
                    cx: parent.with_span(span),
                    tools: Tools::default(),
                };
                turn.children.insert(id, child);
            }
            SubagentUpdate::Event(inner) => {
                let Some(child) = turn.children.get_mut(&id) else {
                    return;
                };
                match inner.as_ref() {
                    Event::ModelRequest(report) => {
                        instruments.request(report);
                        chat_span(&tracer, &child.cx, report, capture);
                    }
                    other => {
                        let cx = child.cx.clone();
                        child
                            .tools
                            .observe(other, (&tracer, &cx, capture), instruments);
                    }
                }
            }
            SubagentUpdate::Ended { state, .. } => {
                if let Some(child) = turn.children.remove(&id) {
                    child.tools.end_all(instruments);
                    let span = child.cx.span();
                    let state = format!("{state:?}").to_ascii_lowercase();
                    if state != "completed" {
                        span.set_attribute(KeyValue::new(ERROR_TYPE, state.clone()));
                        span.set_status(Status::error(state));
                    }
                    span.end();
                }
            }
            SubagentUpdate::Progress { .. } => {}
        }
    }
}

/// A model request's `chat` span, with the times it ran.
fn chat_span(tracer: &SdkTracer, parent: &Context, report: &ModelRequest, capture: bool) {
    let mut attributes = vec![
        KeyValue::new(OPERATION_NAME, "chat"),
        KeyValue::new(PROVIDER_NAME, PROVIDER),
        KeyValue::new(REQUEST_MODEL, report.model.clone()),
    ];
    if let Some(usage) = &report.usage {
        attributes.push(KeyValue::new(INPUT_TOKENS, usage.prompt_tokens as i64));
        attributes.push(KeyValue::new(OUTPUT_TOKENS, usage.completion_tokens as i64));
    }
    if let Some(reason) = &report.finish_reason {
        attributes.push(KeyValue::new(
            RESPONSE_FINISH_REASONS,
            opentelemetry::Value::Array(
                vec![opentelemetry::StringValue::from(reason.clone())].into(),
            ),
        ));
    }
    if let Some(cost) = report.cost {
        attributes.push(KeyValue::new("maia.cost.usd", cost));
    }
    if capture && !report.output.is_empty() {
        attributes.push(KeyValue::new(
            OUTPUT_MESSAGES,
            messages("assistant", &report.output, report.finish_reason.as_deref()),
        ));
    }
    if let Some(error) = report.error {
        attributes.push(KeyValue::new(ERROR_TYPE, error));
    }
    let mut span = tracer
        .span_builder(format!("chat {}", report.model))
        .with_kind(SpanKind::Client)
        .with_start_time(report.started)
        .with_attributes(attributes)
        .start_with_context(tracer, parent);
    if let Some(error) = report.error {
        span.set_status(Status::error(error));
    }
    span.end_with_timestamp(
        report
            .started
            .checked_add(report.duration)
            .unwrap_or_else(SystemTime::now),
    );
}

/// One message in the conventions' JSON shape (`role`, `parts`).
pub(crate) fn messages(role: &str, text: &str, finish: Option<&str>) -> String {
    let mut message = serde_json::json!({
        "role": role,
        "parts": [{"type": "text", "content": text}],
    });
    if let Some(finish) = finish {
        message["finish_reason"] = finish.into();
    }
    serde_json::Value::Array(vec![message]).to_string()
}

fn stop_name(stop: StopReason) -> &'static str {
    match stop {
        StopReason::EndTurn => "end_turn",
        StopReason::MaxTokens => "max_tokens",
        StopReason::MaxTurnRequests => "max_turn_requests",
        StopReason::Refusal => "refusal",
        StopReason::Cancelled => "cancelled",
    }
}

/// The `error.type` of a turn that stopped so, if it is one.
fn stop_error(stop: StopReason) -> Option<&'static str> {
    match stop {
        StopReason::Cancelled => Some("cancelled"),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
