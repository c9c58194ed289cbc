//! The `execute_tool` spans of one agent's running tool calls (a turn's,
//! or a subagent's), their end with the call's result, the tool-call and
//! lines-changed metrics, and the spans of hooks.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::SdkTracer;

use maia_core::{Event, HookReport, ToolCallPatch, ToolCallView};
use maia_core::{ToolContent, ToolStatus};

use crate::metrics::Instruments;
use crate::names::*;

/// The most text of a tool's arguments or result kept in a span.
const CONTENT_CAP: usize = 16 * 1024;

/// A running call.
pub(crate) struct Tool {
    cx: Context,
    name: String,
    /// The last diff it showed: (old text, new text).
    diff: Option<(String, String)>,
}

/// The running calls of one agent, by call id, in the order they started.
#[derive(Default)]
pub(crate) struct Tools {
    running: HashMap<String, Tool>,
    order: Vec<String>,
}

impl Tools {
    /// The context of the running call `id`.
    pub(crate) fn context(&self, id: &str) -> Option<Context> {
        self.running.get(id).map(|t| t.cx.clone())
    }

    /// The context of the latest running call of tool `name` (a hook's
    /// subject).
    pub(crate) fn running(&self, name: Option<&str>) -> Option<Context> {
        let name = name?;
        self.order
            .iter()
            .rev()
            .filter_map(|id| self.running.get(id))
            .find(|t| t.name == name)
            .map(|t| t.cx.clone())
    }

    /// A tool call's event: a call starts, shows a diff, or ends.
    pub(crate) fn observe(
        &mut self,
        event: &Event,
        (tracer, parent, capture): (&SdkTracer, &Context, bool),
        instruments: &Instruments,
    ) {
        match event {
            Event::ToolCall(view) => self.start(view, (tracer, parent, capture)),
            Event::ToolCallUpdate(patch) => self.update(patch, capture, instruments),
            _ => {}
        }
    }

    fn start(
        &mut self,
        view: &ToolCallView,
        (tracer, parent, capture): (&SdkTracer, &Context, bool),
    ) {
        if self.running.contains_key(&view.id) {
            return;
        }
        let mut attributes = vec![
            KeyValue::new(OPERATION_NAME, "execute_tool"),
            KeyValue::new(TOOL_NAME, view.name.clone()),
            KeyValue::new(TOOL_CALL_ID, view.id.clone()),
            KeyValue::new(TOOL_TYPE, "function"),
        ];
        if capture {
            attributes.push(KeyValue::new(
                TOOL_ARGUMENTS,
                cap(view.raw_input.to_string()),
            ));
        }
        let span = tracer
            .span_builder(format!("execute_tool {}", view.name))
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes)
            .start_with_context(tracer, parent);
        let tool = Tool {
            cx: parent.with_span(span),
            name: view.name.clone(),
            diff: last_diff(&view.content),
        };
        self.order.push(view.id.clone());
        self.running.insert(view.id.clone(), tool);
        if matches!(view.status, ToolStatus::Completed | ToolStatus::Failed) {
            // Told already ended (a refused call).
            let patch = ToolCallPatch {
                id: view.id.clone(),
                status: Some(view.status),
                ..ToolCallPatch::default()
            };
            self.end(&patch, false, None);
        }
    }

    fn update(&mut self, patch: &ToolCallPatch, capture: bool, instruments: &Instruments) {
        let Some(tool) = self.running.get_mut(&patch.id) else {
            return;
        };
        if let Some(diff) = patch.content.as_deref().and_then(last_diff) {
            tool.diff = Some(diff);
        }
        if matches!(
            patch.status,
            Some(ToolStatus::Completed | ToolStatus::Failed)
        ) {
            self.end(patch, capture, Some(instruments));
        }
    }

    fn end(&mut self, patch: &ToolCallPatch, capture: bool, instruments: Option<&Instruments>) {
        let Some(tool) = self.running.remove(&patch.id) else {
            return;
        };
        self.order.retain(|id| *id != patch.id);
        let span = tool.cx.span();
        let failed = patch.status == Some(ToolStatus::Failed);
        if capture && let Some(result) = result_text(patch) {
            span.set_attribute(KeyValue::new(TOOL_RESULT, cap(result)));
        }
        if failed {
            span.set_attribute(KeyValue::new(ERROR_TYPE, "tool_error"));
            span.set_status(Status::error("tool_error"));
        }
        let result = if failed { "failure" } else { "success" };
        if let Some(instruments) = instruments {
            instruments.tool_call(&tool.name, result);
            if !failed && let Some((old, new)) = &tool.diff {
                let (added, removed) = count_lines(old, new);
                instruments.lines(added, removed);
            }
        }
        span.end();
    }

    /// The agent stops: its running calls end, cancelled.
    pub(crate) fn end_all(mut self, instruments: &Instruments) {
        for id in std::mem::take(&mut self.order) {
            if let Some(tool) = self.running.remove(&id) {
                instruments.tool_call(&tool.name, "cancelled");
                let span = tool.cx.span();
                span.set_attribute(KeyValue::new(ERROR_TYPE, "cancelled"));
                span.set_status(Status::error("cancelled"));
                span.end();
            }
        }
    }
}

/// A hook's span (it ran for `duration_ms`, up to now).
pub(crate) fn hook_span(tracer: &SdkTracer, parent: &Context, report: &HookReport, capture: bool) {
    let end = SystemTime::now();
    let start = end
        .checked_sub(Duration::from_millis(report.duration_ms))
        .unwrap_or(end);
    let mut attributes = vec![
        KeyValue::new("maia.hook.event", report.event),
        KeyValue::new("maia.hook.outcome", report.outcome),
    ];
    if let Some(code) = report.exit_code {
        attributes.push(KeyValue::new("maia.hook.exit_code", i64::from(code)));
    }
    if let Some(subject) = &report.subject {
        attributes.push(KeyValue::new(TOOL_NAME, subject.clone()));
    }
    if capture {
        attributes.push(KeyValue::new("maia.hook.command", report.command.clone()));
    }
    let mut span = tracer
        .span_builder(format!("hook {}", report.event))
        .with_kind(SpanKind::Internal)
        .with_start_time(start)
        .with_attributes(attributes)
        .start_with_context(tracer, parent);
    if matches!(report.outcome, "error" | "timeout") {
        span.set_attribute(KeyValue::new(ERROR_TYPE, report.outcome));
        span.set_status(Status::error(report.outcome));
    }
    span.end_with_timestamp(end);
}

fn last_diff(content: &[ToolContent]) -> Option<(String, String)> {
    content.iter().rev().find_map(|c| match c {
        ToolContent::Diff { diff } => Some((
            diff.old_text.clone().unwrap_or_default(),
            diff.new_text.clone(),
        )),
        _ => None,
    })
}

/// What a call returned: its raw output, else its text.
fn result_text(patch: &ToolCallPatch) -> Option<String> {
    if let Some(raw) = &patch.raw_output {
        return Some(match raw {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        });
    }
    let texts: Vec<&str> = patch
        .content
        .iter()
        .flatten()
        .filter_map(|c| match c {
            ToolContent::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

fn cap(mut text: String) -> String {
    if text.len() > CONTENT_CAP {
        let mut end = CONTENT_CAP;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// Lines added and removed from `old` to `new`.
pub(crate) fn count_lines(old: &str, new: &str) -> (u64, u64) {
    let diff = similar::TextDiff::from_lines(old, new);
    let (mut added, mut removed) = (0, 0);
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => added += 1,
            similar::ChangeTag::Delete => removed += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    (added, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_counted_per_change() {
        assert_eq!(count_lines("a\nb\nc\n", "a\nB\nc\nd\n"), (2, 1));
        assert_eq!(count_lines("", "x\ny\n"), (2, 0));
        assert_eq!(count_lines("same\n", "same\n"), (0, 0));
    }

    #[test]
    fn content_is_capped_on_a_char_boundary() {
        let long = "é".repeat(CONTENT_CAP);
        let capped = cap(long);
        assert!(capped.len() <= CONTENT_CAP);
        assert!(capped.chars().all(|c| c == 'é'));
    }
}
