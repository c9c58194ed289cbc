//! The `PreToolUse` and `PostToolUse` hooks of one tool call
//! (docs/hooks.md). `PreToolUse` runs after the permission rules and the
//! mode decided, and only for a call they do not refuse: a hook can block
//! it (exit 2, `deny`, `decision: "block"`), rewrite its input
//! (`updatedInput`: the call is planned, prepared and authorised again
//! with the new input, so a rewrite never escapes the rules), or answer a
//! plain permission question with `allow` ([`plain`]). `PostToolUse` runs
//! after a call that succeeded; what it says (exit 2's stderr, a `block`
//! reason, `additionalContext`) is added to the result the model reads.

use std::sync::Arc;

use maia_llm::ToolCall;
use maia_tools::{ToolContext, ToolOutput};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::registry::{CallPlan, Tool, TurnEffect};
use super::router::{Call, Outcome};
use crate::event::ToolContent;
use crate::hooks::{Env, HookEvent, Verdict};
use crate::permission::{Question, Requirement};

/// What the `PreToolUse` hooks said of the permission question.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Said {
    /// `allow`: a plain question is not asked ([`plain`]).
    pub allow: bool,
    /// `ask`: the call is asked even where the rules allow it.
    pub ask: bool,
}

/// What the `PreToolUse` hooks left for the rest of the call.
pub(super) struct Hooked {
    /// What they said of the permission question.
    pub said: Said,
    /// The input was rewritten: the call's new diff (if it has one).
    pub prepared: Option<Option<ToolContent>>,
    /// Context for the model, added to the call's result.
    pub context: Vec<String>,
    /// The call's input as it runs (rewritten or not).
    pub input: Value,
}

/// Whether a hook's `allow` may answer `question`: not when it confirms a
/// new or changed custom tool, names a protected path, or offers a run
/// outside the sandbox; those stay the user's to answer.
pub(super) fn plain(question: &Question, plan: &CallPlan) -> bool {
    question.confirm.is_none() && question.note.is_none() && !plan.gate.sandbox_retry
}

/// The rules' `requirement` for a call, with what its hooks `said`: a
/// plain question answered by an `allow`, a call the rules allow asked
/// after an `ask`; a refusal stays a refusal.
pub(super) fn decide(
    requirement: Requirement,
    said: Said,
    plan: &CallPlan,
    call: &Call,
) -> Requirement {
    match requirement {
        Requirement::Ask(q) if said.allow && plain(&q, plan) => Requirement::Allow { note: None },
        Requirement::Allow { note } if said.ask => match call.batch.broker.lock() {
            Ok(broker) => {
                let mut question =
                    crate::permission::question_for(&plan.gate, &broker, &call.batch.ctx.cwd);
                question.note = question.note.or(note);
                Requirement::Ask(question)
            }
            Err(_) => Requirement::Allow { note },
        },
        other => other,
    }
}

/// The input fields of a tool event.
fn fields(request: &ToolCall, input: &Value) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("tool_name".into(), request.name.clone().into());
    map.insert("tool_input".into(), input.clone());
    map.insert("tool_use_id".into(), request.id.clone().into());
    map
}

/// The `PreToolUse` step; `Err` is the call's outcome when it does not run.
pub(super) async fn before(
    tool: &Arc<dyn Tool>,
    plan: &mut CallPlan,
    call: &Call,
    ctx: &ToolContext,
) -> Result<Hooked, Outcome> {
    let input = serde_json::from_str::<Value>(&call.request.arguments)
        .unwrap_or_else(|_| Value::String(call.request.arguments.clone()));
    let mut out = Hooked {
        said: Said::default(),
        prepared: None,
        context: Vec::new(),
        input,
    };
    let hooks = call.batch.hooks.as_ref();
    let Some(env) = hooks.filter(|e| e.hooks.has(HookEvent::PreToolUse)) else {
        return Ok(out);
    };
    // A call the rules refuse is refused without asking a hook.
    if matches!(call.authorise(plan), Requirement::Refuse { .. }) {
        return Ok(out);
    }
    let fired = crate::hooks::fire(
        env,
        HookEvent::PreToolUse,
        Some(&call.request.name),
        fields(&call.request, &out.input),
        &call.cancel,
    );
    let Some(verdict) = fired.await else {
        return Ok(out);
    };
    if call.cancel.is_cancelled() {
        call.fail("Cancelled");
        return Err(Outcome::Cancelled(Vec::new()));
    }
    let stop: Vec<TurnEffect> = verdict
        .stop
        .clone()
        .map(TurnEffect::HookStopped)
        .into_iter()
        .collect();
    if let Some(reason) = verdict.block.as_ref().or(verdict.stop.as_ref()) {
        call.fail(&format!("Blocked by a PreToolUse hook: {reason}"));
        return Err(Outcome::Done(
            format!("A PreToolUse hook blocked this call: {reason}"),
            Vec::new(),
            stop,
        ));
    }
    out.said = Said {
        allow: verdict.allows(),
        ask: verdict.ask,
    };
    if let Some(new) = verdict.updated_input {
        let request = ToolCall {
            arguments: new.to_string(),
            ..call.request.clone()
        };
        let retry = plan.gate.sandbox_retry;
        *plan = match tool.plan(&request, &new, &ctx.cwd) {
            Ok(plan) => plan,
            Err(message) => {
                let message = format!("the input a PreToolUse hook wrote is not valid: {message}");
                call.fail(&message);
                return Err(Outcome::Done(
                    format!("Error: {message}"),
                    Vec::new(),
                    Vec::new(),
                ));
            }
        };
        plan.gate.sandbox_retry = retry;
        let diff = match tool.prepare(plan, ctx).await {
            Ok(diff) => diff,
            Err(message) => {
                call.fail(&message);
                return Err(Outcome::Done(
                    format!("Error: {message}"),
                    Vec::new(),
                    Vec::new(),
                ));
            }
        };
        tracing::info!(tool = %request.name, input = %new, "input rewritten by a PreToolUse hook");
        out.prepared = Some(diff);
        out.input = new;
    }
    out.context = verdict.context;
    Ok(out)
}

impl Hooked {
    /// After the call ran: its `PostToolUse` hooks (not after a
    /// cancellation), then the `PreToolUse` hooks' context, added to
    /// `output`; the effects on the turn.
    pub(super) async fn finish(self, call: &Call, output: &mut ToolOutput) -> Vec<TurnEffect> {
        let mut effects = Vec::new();
        if let Some(hooks) = call.batch.hooks.as_ref()
            && !(call.cancel.is_cancelled() && output.is_error)
        {
            let ran = after(hooks, &call.request, &self.input, output, &call.cancel).await;
            effects = ran.apply(output);
        }
        if !self.context.is_empty() {
            output.content.push_str(&context_note(&self.context));
        }
        effects
    }
}

/// The `PostToolUse` hooks of a call that ran (none after a failure).
async fn after(
    env: &Env,
    request: &ToolCall,
    input: &Value,
    output: &ToolOutput,
    cancel: &CancellationToken,
) -> After {
    if output.is_error || !env.hooks.has(HookEvent::PostToolUse) {
        return After(None);
    }
    let mut fields = fields(request, input);
    fields.insert(
        "tool_response".into(),
        serde_json::json!({ "output": output.content, "success": true }),
    );
    let fired = crate::hooks::fire(
        env,
        HookEvent::PostToolUse,
        Some(&request.name),
        fields,
        cancel,
    );
    After(fired.await)
}

/// What the `PostToolUse` hooks said.
struct After(Option<Verdict>);

impl After {
    /// Adds what the hooks said to `output`; the effects on the turn.
    fn apply(self, output: &mut ToolOutput) -> Vec<TurnEffect> {
        let Some(verdict) = self.0 else {
            return Vec::new();
        };
        if let Some(reason) = &verdict.block {
            output
                .content
                .push_str(&format!("\n\n[PostToolUse hook feedback]\n{reason}"));
        }
        if !verdict.context.is_empty() {
            output.content.push_str(&context_note(&verdict.context));
        }
        verdict
            .stop
            .map(TurnEffect::HookStopped)
            .into_iter()
            .collect()
    }
}

/// Context from hooks, as added to a tool's result.
fn context_note(context: &[String]) -> String {
    format!("\n\n[hook context]\n{}", context.join("\n"))
}

/// `Notification` hooks, as `call` waits for the user's answer (not
/// waited for).
pub(super) fn notify(call: &Call) {
    let Some(env) = call.batch.hooks.as_ref() else {
        return;
    };
    if !env.hooks.has(HookEvent::Notification) {
        return;
    }
    let env = env.clone();
    let message = format!("MAIA needs your permission to use {}", call.request.name);
    let mut fields = Map::new();
    fields.insert("message".into(), message.into());
    fields.insert("notification_type".into(), "permission_prompt".into());
    tokio::spawn(async move {
        let cancel = CancellationToken::new();
        let subject = Some("permission_prompt");
        crate::hooks::fire(&env, HookEvent::Notification, subject, fields, &cancel).await;
    });
}
