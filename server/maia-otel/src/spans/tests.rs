//! The span tree the recorder makes from a session's events, read back
//! from an exporter that keeps what it is given.

use std::sync::{Arc, Mutex};

use maia_core::{SubagentInfo, ToolCallPatch, ToolCallView, ToolStatus, TurnId};
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};

use super::*;

#[derive(Debug, Clone, Default)]
struct Kept(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for Kept {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0.lock().unwrap().extend(batch);
        Ok(())
    }
}

fn recorder() -> (Recorder, Kept) {
    let kept = Kept::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(kept.clone())
        .build();
    let meters = SdkMeterProvider::builder().build();
    let instruments = Instruments::new(&meters.meter("test"));
    (
        Recorder::new(provider.tracer("test"), instruments, false),
        kept,
    )
}

fn call(id: &str, name: &str) -> Event {
    Event::ToolCall(ToolCallView {
        id: id.into(),
        name: name.into(),
        title: name.into(),
        kind: None,
        locations: Vec::new(),
        raw_input: serde_json::json!({}),
        status: ToolStatus::Pending,
        content: Vec::new(),
    })
}

fn find<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no span {name}"))
}

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

#[test]
fn a_subagent_sits_under_its_task_call_and_a_cancelled_turn_ends_everything() {
    let (mut r, kept) = recorder();
    r.observe("s", &Event::TurnStarted(TurnId(1)));
    r.observe("s", &call("task", "Task"));
    let child = Arc::new(SubagentInfo {
        id: "child".into(),
        tool_call_id: "task".into(),
        agent: "explore".into(),
        description: "look".into(),
        prompt: "look around".into(),
    });
    let sub = |update| {
        Event::Subagent(SubagentEvent {
            child: child.clone(),
            update,
        })
    };
    r.observe("s", &sub(SubagentUpdate::Started));
    r.observe(
        "s",
        &sub(SubagentUpdate::Event(Box::new(call("g", "Grep")))),
    );
    r.observe("s", &call("bash", "Bash"));
    r.observe(
        "s",
        &Event::ToolCallUpdate(ToolCallPatch {
            id: "bash".into(),
            status: Some(ToolStatus::Completed),
            ..ToolCallPatch::default()
        }),
    );
    // Cancelled with the subagent and its Grep still running.
    r.observe("s", &Event::TurnEnded(StopReason::Cancelled));
    let spans = kept.0.lock().unwrap().clone();
    let turn = find(&spans, "invoke_agent maia");
    let task = find(&spans, "execute_tool Task");
    let agent = find(&spans, "invoke_agent explore");
    let grep = find(&spans, "execute_tool Grep");
    let bash = find(&spans, "execute_tool Bash");
    assert_eq!(task.parent_span_id, turn.span_context.span_id());
    assert_eq!(bash.parent_span_id, turn.span_context.span_id());
    assert_eq!(agent.parent_span_id, task.span_context.span_id());
    assert_eq!(grep.parent_span_id, agent.span_context.span_id());
    for cancelled in [turn, task, agent, grep] {
        assert_eq!(
            attribute(cancelled, ERROR_TYPE).as_deref(),
            Some("cancelled")
        );
    }
    assert_eq!(attribute(bash, ERROR_TYPE), None);
    // The session's span is still open; closing the session ends it.
    assert!(spans.iter().all(|s| s.name != "maia.session"));
    r.close("s");
    let spans = kept.0.lock().unwrap().clone();
    let session = find(&spans, "maia.session");
    assert_eq!(turn_parent(&spans), session.span_context.span_id());
}

fn turn_parent(spans: &[SpanData]) -> opentelemetry::trace::SpanId {
    find(spans, "invoke_agent maia").parent_span_id
}

#[test]
fn a_session_closed_mid_turn_ends_the_turn() {
    let (mut r, kept) = recorder();
    r.observe("s", &Event::TurnStarted(TurnId(1)));
    r.observe("s", &call("c", "Read"));
    r.close("s");
    let spans = kept.0.lock().unwrap().clone();
    let turn = find(&spans, "invoke_agent maia");
    assert_eq!(
        attribute(turn, ERROR_TYPE).as_deref(),
        Some("session_closed")
    );
    assert_eq!(
        attribute(find(&spans, "execute_tool Read"), ERROR_TYPE).as_deref(),
        Some("cancelled")
    );
}

#[test]
fn a_traceparent_in_meta_parents_the_turn() {
    let mut meta = serde_json::Map::new();
    meta.insert(
        "traceparent".into(),
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
    );
    let parent = crate::parent_context(&meta).expect("a valid traceparent");
    let (mut r, kept) = recorder();
    r.origin(
        "s",
        Origin {
            parent: Some(parent),
            prompt: None,
        },
    );
    r.observe("s", &Event::TurnStarted(TurnId(1)));
    r.observe("s", &Event::TurnEnded(StopReason::EndTurn));
    let spans = kept.0.lock().unwrap().clone();
    let turn = find(&spans, "invoke_agent maia");
    assert_eq!(
        turn.span_context.trace_id().to_string(),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    assert_eq!(turn.parent_span_id.to_string(), "00f067aa0ba902b7");
    assert_eq!(turn.links.links.len(), 1, "linked to the session's span");
    // An invalid one is ignored.
    meta.insert("traceparent".into(), "00-zz-00f067aa0ba902b7-01".into());
    assert!(crate::parent_context(&meta).is_none());
}
