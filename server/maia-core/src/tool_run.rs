//! Running the tool calls of one model response.
//!
//! All calls are announced first, in order. Then they run concurrently (at
//! most [`MAX_PARALLEL`]); calls on the same file run one after the other in
//! the order requested; permission questions are asked one at a time; one
//! failure or refusal does not stop the others; results go back to the
//! model in the order requested. Every call passes the broker.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures_util::future::join_all;
use maia_llm::{ChatMessage, ToolCall};
use maia_tools::{ToolContext, ToolInput, ToolKind, truncate_middle};
use serde_json::Value;
use tokio::sync::{Semaphore, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::event::{
    ChoiceKind, Event, PermissionReply, PermissionRequest, ToolCallPatch, ToolCallView,
    ToolContent, ToolStatus,
};
use crate::mode::Mode;
use crate::permission::{Broker, Decision, choices, suggest_rule};
use crate::session::Session;

/// Tool calls running at once.
pub const MAX_PARALLEL: usize = 8;
/// Characters of tool output shown in the editor.
const DISPLAY_CHARS: usize = 20_000;

struct Planned {
    call: ToolCall,
    input: Result<ToolInput, String>,
    view: ToolCallView,
    /// Files this call touches; calls sharing one run in order.
    keys: Vec<PathBuf>,
}

/// What a call ended with.
enum Outcome {
    Done(String),
    Cancelled,
}

struct Shared<'a> {
    events: &'a tokio::sync::mpsc::UnboundedSender<Event>,
    ctx: ToolContext,
    broker: &'a Arc<Mutex<Broker>>,
    ask: tokio::sync::Mutex<()>,
    slots: Semaphore,
    cancel: &'a CancellationToken,
    /// The latest state of every call, as the editor sees it.
    views: Vec<Mutex<ToolCallView>>,
    mode: Mode,
}

/// Deny rules always win; then the mode may allow or refuse what the rules
/// would have asked or allowed.
fn apply_mode(mode: Mode, rules: Decision, input: &ToolInput, cwd: &std::path::Path) -> Decision {
    if matches!(rules, Decision::Deny(_)) {
        return rules;
    }
    match mode {
        Mode::Default => rules,
        Mode::AcceptEdits => {
            let edit = matches!(input, ToolInput::Write(_) | ToolInput::Edit(_))
                && input
                    .paths(cwd)
                    .iter()
                    .all(|p| maia_tools::path::is_within(cwd, p));
            if edit { Decision::Allow } else { rules }
        }
        Mode::ReadOnly if input.is_mutating() => {
            Decision::Deny("the read-only mode (nothing may be changed or run)".to_owned())
        }
        Mode::ReadOnly => rules,
        Mode::Bypass => Decision::Allow,
    }
}

impl Shared<'_> {
    fn send_patch(&self, patch: ToolCallPatch) {
        if let Some(view) = self
            .views
            .iter()
            .find_map(|v| v.lock().ok().filter(|v| v.id == patch.id))
        {
            let mut view = view;
            if let Some(status) = patch.status {
                view.status = status;
            }
            if let Some(content) = &patch.content {
                view.content = content.clone();
            }
        }
        let _ = self.events.send(Event::ToolCallUpdate(patch));
    }

    fn update(&self, id: &str, status: ToolStatus, content: Option<Vec<ToolContent>>) {
        self.send_patch(ToolCallPatch {
            id: id.to_owned(),
            status: Some(status),
            content,
            raw_output: None,
        });
    }

    fn fail(&self, id: &str, message: &str) {
        self.update(
            id,
            ToolStatus::Failed,
            Some(vec![ToolContent::Text {
                text: message.to_owned(),
            }]),
        );
    }

    /// The broker's decision, adjusted by the session's mode.
    fn decide(&self, input: &ToolInput) -> Decision {
        let rules = match self.broker.lock() {
            Ok(broker) => match broker.decide(input, &self.ctx.cwd) {
                Decision::Deny(rule) => Decision::Deny(format!("the rule {rule}")),
                other => other,
            },
            Err(_) => Decision::Ask,
        };
        apply_mode(self.mode, rules, input, &self.ctx.cwd)
    }
}

impl Session {
    /// Runs the calls; returns the tool messages for the model and the final
    /// state of each call, both in the order requested.
    pub(crate) async fn run_tool_calls(
        &mut self,
        calls: &[ToolCall],
        cancel: &CancellationToken,
    ) -> (Vec<ChatMessage>, Vec<ToolCallView>) {
        let planned: Vec<Planned> = calls.iter().map(|call| self.plan(call)).collect();
        for p in &planned {
            self.emit(Event::ToolCall(p.view.clone()));
        }
        let shared = Shared {
            events: &self.events,
            ctx: ToolContext {
                cwd: self.cwd.clone(),
                fs: self.fs.clone(),
                reads: self.reads.clone(),
                cancel: cancel.clone(),
            },
            broker: &self.broker,
            ask: tokio::sync::Mutex::new(()),
            slots: Semaphore::new(MAX_PARALLEL),
            cancel,
            views: planned.iter().map(|p| Mutex::new(p.view.clone())).collect(),
            mode: self.mode.get(),
        };
        let (done_tx, done_rx): (Vec<_>, Vec<_>) =
            planned.iter().map(|_| watch::channel(false)).unzip();
        let runs = planned.iter().enumerate().map(|(i, p)| {
            let waits: Vec<watch::Receiver<bool>> = (0..i)
                .filter(|&j| planned[j].keys.iter().any(|k| p.keys.contains(k)))
                .map(|j| done_rx[j].clone())
                .collect();
            let shared = &shared;
            let done = &done_tx[i];
            async move {
                for mut w in waits {
                    let _ = w.wait_for(|d| *d).await;
                }
                let outcome = match shared.slots.acquire().await {
                    Ok(_permit) => run_one(p, shared).await,
                    Err(_) => Outcome::Cancelled,
                };
                let _ = done.send(true);
                outcome
            }
        });
        let outcomes = join_all(runs).await;
        let messages = planned
            .iter()
            .zip(outcomes)
            .map(|(p, outcome)| {
                let content = match outcome {
                    Outcome::Done(text) => text,
                    Outcome::Cancelled => {
                        "Cancelled by the user; the tool did not complete.".into()
                    }
                };
                ChatMessage::Tool {
                    tool_call_id: p.call.id.clone(),
                    content,
                }
            })
            .collect();
        let views = shared
            .views
            .into_iter()
            .map(|v| v.into_inner().unwrap_or_else(|e| e.into_inner()))
            .collect();
        (messages, views)
    }

    fn plan(&self, call: &ToolCall) -> Planned {
        // Unique within the session, also across restarts.
        let id = format!("tool-{}", uuid::Uuid::new_v4().simple());
        let raw_input = serde_json::from_str::<Value>(&call.arguments)
            .unwrap_or_else(|_| Value::String(call.arguments.clone()));
        let input = ToolInput::parse(&call.name, &call.arguments).map_err(|e| e.to_string());
        let (title, kind, locations) = match &input {
            Ok(input) => (
                input.title(&self.cwd),
                Some(input.kind()),
                input.paths(&self.cwd),
            ),
            Err(_) => (call.name.clone(), None, Vec::new()),
        };
        let keys = match &input {
            Ok(i @ (ToolInput::Read(_) | ToolInput::Write(_) | ToolInput::Edit(_))) => {
                i.paths(&self.cwd)
            }
            _ => Vec::new(),
        };
        Planned {
            call: call.clone(),
            view: ToolCallView {
                id,
                name: call.name.clone(),
                title,
                kind,
                locations,
                raw_input,
                status: ToolStatus::Pending,
                content: Vec::new(),
            },
            input,
            keys,
        }
    }
}

async fn run_one(p: &Planned, s: &Shared<'_>) -> Outcome {
    let id = p.view.id.as_str();
    let input = match &p.input {
        Ok(input) => input.clone(),
        Err(message) => {
            s.fail(id, message);
            return Outcome::Done(format!("Error: {message}"));
        }
    };
    if s.cancel.is_cancelled() {
        s.fail(id, "Cancelled");
        return Outcome::Cancelled;
    }
    let prepared = tokio::select! {
        () = s.cancel.cancelled() => {
            s.fail(id, "Cancelled");
            return Outcome::Cancelled;
        }
        prepared = maia_tools::prepare(input, &s.ctx) => prepared,
    };
    let prepared = match prepared {
        Ok(prepared) => prepared,
        Err(e) => {
            let message = e.to_string();
            s.fail(id, &message);
            return Outcome::Done(format!("Error: {message}"));
        }
    };
    let diff = prepared.diff.clone().map(|diff| ToolContent::Diff { diff });
    if let Some(diff) = &diff {
        s.send_patch(ToolCallPatch {
            id: id.to_owned(),
            content: Some(vec![diff.clone()]),
            ..ToolCallPatch::default()
        });
    }
    match authorize(p, &prepared.input, diff.as_ref(), s).await {
        Authorization::Granted => {}
        Authorization::Refused(to_model) => return Outcome::Done(to_model),
        Authorization::Cancelled => {
            s.fail(id, "Cancelled");
            return Outcome::Cancelled;
        }
    }
    s.update(id, ToolStatus::InProgress, None);
    let output = maia_tools::execute(prepared, &s.ctx).await;
    if s.cancel.is_cancelled() && output.is_error {
        s.fail(id, "Cancelled");
        return Outcome::Cancelled;
    }
    let mut content: Vec<ToolContent> = Vec::new();
    if let Some(diff) = diff.filter(|_| !output.is_error) {
        content.push(diff);
    }
    if !output.content.is_empty() && (content.is_empty() || output.is_error) {
        content.push(ToolContent::Text {
            text: truncate_middle(&output.content, DISPLAY_CHARS),
        });
    }
    let status = if output.is_error {
        ToolStatus::Failed
    } else {
        ToolStatus::Completed
    };
    s.update(id, status, Some(content));
    Outcome::Done(output.content)
}

enum Authorization {
    Granted,
    /// Not run; the text tells the model why.
    Refused(String),
    Cancelled,
}

async fn authorize(
    p: &Planned,
    input: &ToolInput,
    diff: Option<&ToolContent>,
    s: &Shared<'_>,
) -> Authorization {
    let id = p.view.id.as_str();
    let refuse_by_rule = |reason: String| {
        s.fail(id, &format!("Denied by {reason}"));
        Authorization::Refused(format!(
            "Permission denied by {reason}. Do not retry this call."
        ))
    };
    match s.decide(input) {
        Decision::Allow => return Authorization::Granted,
        Decision::Deny(rule) => return refuse_by_rule(rule),
        Decision::Ask => {}
    }
    // One question at a time; an earlier "always" answer may settle it.
    let _turn = tokio::select! {
        () = s.cancel.cancelled() => return Authorization::Cancelled,
        guard = s.ask.lock() => guard,
    };
    match s.decide(input) {
        Decision::Allow => return Authorization::Granted,
        Decision::Deny(rule) => return refuse_by_rule(rule),
        Decision::Ask => {}
    }
    let rule = suggest_rule(input, &s.ctx.cwd);
    let options = choices(rule.as_ref());
    let mut view = p.view.clone();
    view.content = diff.cloned().into_iter().collect();
    let (reply_tx, reply_rx) = oneshot::channel();
    let _ = s.events.send(Event::Permission(PermissionRequest {
        tool_call: view,
        options: options.clone(),
        reply: reply_tx,
    }));
    let reply = tokio::select! {
        () = s.cancel.cancelled() => return Authorization::Cancelled,
        reply = reply_rx => reply.unwrap_or(PermissionReply::Cancelled),
    };
    let chosen = match reply {
        PermissionReply::Selected(option) => {
            options.iter().find(|o| o.id == option).map(|o| o.kind)
        }
        PermissionReply::Cancelled => None,
    };
    let Some(kind) = chosen else {
        // A cancelled permission ends the turn as cancelled.
        s.cancel.cancel();
        return Authorization::Cancelled;
    };
    if let (Some(rule), Ok(mut broker)) = (rule, s.broker.lock()) {
        broker.remember(kind, rule);
    }
    match kind {
        ChoiceKind::AllowOnce | ChoiceKind::AllowAlways => Authorization::Granted,
        ChoiceKind::RejectOnce | ChoiceKind::RejectAlways => {
            s.fail(id, "Rejected by the user");
            let what = match input.kind() {
                ToolKind::Execute => "run this command",
                ToolKind::Edit => "make this change",
                _ => "run this tool call",
            };
            Authorization::Refused(format!(
                "The user refused to let you {what}. Do not retry it unchanged; ask the user how to proceed if needed."
            ))
        }
    }
}
