//! Running the tool calls of one model response.
//!
//! All calls are announced first, in order. Then each runs as its own task
//! with a child cancellation token (at most [`MAX_PARALLEL`] at once); calls
//! on the same file run one after the other in the order requested;
//! permission questions are asked one at a time; one failure or refusal
//! does not stop the others; results go back to the model in the order
//! requested. Per call: look the tool up → plan → prepare →
//! [`permission::authorise`] → ask when needed → run. What the calls did to
//! the session comes back as [`TurnEffect`]s, in the order requested, for
//! the session to apply after the batch.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures_util::future::join_all;
use maia_llm::{ChatMessage, ToolCall};
use maia_tools::{ImageData, ToolContext, truncate_middle};
use serde_json::Value;
use tokio::sync::{Semaphore, oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::registry::{Batch, CallEnv, CallPlan, Ran, Tool, ToolRegistry, TurnEffect};
use crate::event::{
    ChoiceKind, Event, NoticeLevel, PermissionReply, PermissionRequest, ToolCallPatch,
    ToolCallView, ToolContent, ToolStatus,
};
use crate::permission::{self, Answer, Question, Recorded, Requirement};

/// Tool calls running at once.
pub const MAX_PARALLEL: usize = 8;
/// Characters of tool output shown in the editor.
const DISPLAY_CHARS: usize = 20_000;

/// What a call ended with.
pub(super) enum Outcome {
    /// The text for the model, the images the tool returned and what it
    /// did to the session.
    Done(String, Vec<ImageData>, Vec<TurnEffect>),
    /// Cancelled, with what the call did before.
    Cancelled(Vec<TurnEffect>),
}

/// What a batch ended with, each in the order requested.
pub(crate) struct Finished {
    /// The tool messages for the model.
    pub messages: Vec<ChatMessage>,
    /// The final state of each call.
    pub views: Vec<ToolCallView>,
    /// The images each call returned.
    pub images: Vec<Vec<ImageData>>,
    /// What the calls did to the session, for it to apply.
    pub effects: Vec<TurnEffect>,
}

/// A call's tool and plan, or the error for the model.
type Planned = Result<(Arc<dyn Tool>, CallPlan), String>;

/// The latest state of every call of a batch, as the editor sees it.
type Views = Arc<Vec<Mutex<ToolCallView>>>;

/// One call's handle on the batch.
pub(super) struct Call {
    index: usize,
    id: String,
    /// The call as the model made it.
    pub(super) request: ToolCall,
    pub(super) batch: Arc<Batch>,
    views: Views,
    /// This call's token (a child of the batch's).
    pub(super) cancel: CancellationToken,
    /// The batch's token: a cancelled permission question ends the turn.
    turn: CancellationToken,
}

impl Call {
    fn send_patch(&self, patch: ToolCallPatch) {
        if let Some(Ok(mut view)) = self.views.get(self.index).map(|v| v.lock()) {
            if let Some(status) = patch.status {
                view.status = status;
            }
            if let Some(content) = &patch.content {
                view.content = content.clone();
            }
        }
        let _ = self.batch.events.send(Event::ToolCallUpdate(patch));
    }

    /// Changes what is kept of the call (its saved state) without telling
    /// the editor.
    fn keep_view(&self, content: Vec<ToolContent>) {
        if let Some(Ok(mut view)) = self.views.get(self.index).map(|v| v.lock()) {
            view.content = content;
        }
    }

    fn update(&self, status: ToolStatus, content: Option<Vec<ToolContent>>) {
        self.send_patch(ToolCallPatch {
            id: self.id.clone(),
            status: Some(status),
            content,
            raw_output: None,
        });
    }

    pub(super) fn fail(&self, message: &str) {
        self.update(
            ToolStatus::Failed,
            Some(vec![ToolContent::Text {
                text: message.to_owned(),
            }]),
        );
    }

    fn show_note(&self, note: &str) {
        tracing::warn!(call = %self.id, %note, "protected path");
        self.send_patch(ToolCallPatch {
            id: self.id.clone(),
            content: Some(vec![ToolContent::Text {
                text: note.to_owned(),
            }]),
            ..ToolCallPatch::default()
        });
        let _ = self.batch.events.send(Event::Notice {
            level: NoticeLevel::Warning,
            text: note.to_owned(),
        });
    }

    pub(super) fn authorise(&self, plan: &CallPlan) -> Requirement {
        match self.batch.broker.lock() {
            Ok(broker) => {
                permission::authorise(&plan.gate, self.batch.mode, &broker, &self.batch.ctx.cwd)
            }
            Err(_) => Requirement::Refuse {
                to_model: "Permission denied: the permission rules are unavailable.".to_owned(),
                shown: "Denied: the permission rules are unavailable".to_owned(),
                always: false,
            },
        }
    }
}

/// The tasks of a batch: aborted when the batch is dropped (the session
/// closing mid-batch), as the calls were when they ran inside it.
struct Tasks(Vec<tokio::task::JoinHandle<Outcome>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// How a call may run.
enum Grant {
    Normal,
    /// Once outside the sandbox, as the user chose.
    Unsandboxed,
}

/// Runs the calls through `registry`.
pub(crate) async fn run_batch(
    registry: &ToolRegistry,
    calls: &[ToolCall],
    batch: Batch,
) -> Finished {
    let batch = Arc::new(batch);
    let cwd = batch.ctx.cwd.clone();
    let planned: Vec<(Planned, ToolCallView)> = calls
        .iter()
        .map(|call| {
            // Unique within the session, also across restarts.
            let id = format!("tool-{}", uuid::Uuid::new_v4().simple());
            let raw_input = serde_json::from_str::<Value>(&call.arguments)
                .unwrap_or_else(|_| Value::String(call.arguments.clone()));
            let plan = match registry.get(&call.name) {
                Some(tool) => tool
                    .plan(call, &raw_input, &cwd)
                    .map(|plan| (tool.clone(), plan)),
                None => Err(unknown_tool(&call.name, registry)),
            };
            let mut view = ToolCallView {
                id,
                name: call.name.clone(),
                title: call.name.clone(),
                kind: None,
                locations: Vec::new(),
                raw_input,
                status: ToolStatus::Pending,
                content: Vec::new(),
            };
            if let Ok((_, plan)) = &plan {
                view.title.clone_from(&plan.title);
                view.kind = plan.kind;
                view.locations.clone_from(&plan.locations);
            }
            (plan, view)
        })
        .collect();
    // Each call cancellable alone from the moment the editor learns of it.
    let turn = batch.ctx.cancel.clone();
    let registered: Vec<_> = planned
        .iter()
        .map(|(_, view)| {
            let token = turn.child_token();
            let place = batch.running.register(&view.id, token.clone());
            (token, place)
        })
        .collect();
    for (_, view) in &planned {
        let _ = batch.events.send(Event::ToolCall(view.clone()));
    }
    let views: Views = Arc::new(planned.iter().map(|(_, v)| Mutex::new(v.clone())).collect());
    let keys: Vec<Vec<PathBuf>> = planned
        .iter()
        .map(|(p, _)| p.as_ref().map(|(_, p)| p.keys.clone()).unwrap_or_default())
        .collect();
    let slots = Arc::new(Semaphore::new(MAX_PARALLEL));
    let (done_tx, done_rx): (Vec<_>, Vec<_>) =
        planned.iter().map(|_| watch::channel(false)).unzip();
    let mut tasks = Tasks(Vec::with_capacity(planned.len()));
    let each = planned.into_iter().zip(registered).zip(done_tx).enumerate();
    for (index, (((plan, view), (cancel, place)), done)) in each {
        let waits: Vec<watch::Receiver<bool>> = (0..index)
            .filter(|&j| keys[j].iter().any(|k| keys[index].contains(k)))
            .map(|j| done_rx[j].clone())
            .collect();
        let call = Call {
            index,
            id: view.id,
            request: calls[index].clone(),
            batch: batch.clone(),
            views: views.clone(),
            cancel,
            turn: turn.clone(),
        };
        let slots = slots.clone();
        tasks.0.push(tokio::spawn(async move {
            let _place = place;
            for mut w in waits {
                let _ = w.wait_for(|d| *d).await;
            }
            let outcome = match slots.acquire_owned().await {
                Ok(_permit) => run_one(plan, &call).await,
                Err(_) => Outcome::Cancelled(Vec::new()),
            };
            let _ = done.send(true);
            outcome
        }));
    }
    let outcomes = join_all(tasks.0.iter_mut()).await;
    let mut images = Vec::with_capacity(calls.len());
    let mut effects = Vec::new();
    let messages = calls
        .iter()
        .zip(outcomes)
        .map(|(call, outcome)| {
            let content = match outcome {
                Ok(Outcome::Done(text, found, did)) => {
                    images.push(found);
                    effects.extend(did);
                    text
                }
                Ok(Outcome::Cancelled(did)) => {
                    images.push(Vec::new());
                    effects.extend(did);
                    "Cancelled by the user; the tool did not complete.".into()
                }
                Err(e) => {
                    tracing::error!(tool = %call.name, "tool call task failed: {e}");
                    images.push(Vec::new());
                    "Error: the tool call failed unexpectedly.".into()
                }
            };
            ChatMessage::Tool {
                tool_call_id: call.id.clone(),
                content,
            }
        })
        .collect();
    let views = views
        .iter()
        .map(|v| {
            v.lock()
                .map(|v| v.clone())
                .unwrap_or_else(|e| e.into_inner().clone())
        })
        .collect();
    Finished {
        messages,
        views,
        images,
        effects,
    }
}

/// The answer to a call of a tool the registry does not have.
fn unknown_tool(name: &str, registry: &ToolRegistry) -> String {
    let names: Vec<&str> = registry.names().collect();
    format!(
        "Unknown tool `{name}`: it is not available in this session (an MCP tool's server may not be connected, or the tool is disabled; /mcp shows the servers). Available tools: {}.",
        names.join(", ")
    )
}

async fn run_one(plan: Planned, call: &Call) -> Outcome {
    let (tool, mut plan) = match plan {
        Ok(plan) => plan,
        Err(message) => {
            call.fail(&message);
            return Outcome::Done(format!("Error: {message}"), Vec::new(), Vec::new());
        }
    };
    if call.cancel.is_cancelled() {
        call.fail("Cancelled");
        return Outcome::Cancelled(Vec::new());
    }
    let mut ctx: ToolContext = call.batch.ctx.clone();
    ctx.cancel = call.cancel.clone();
    // Prepared first: Write and Edit show their diff before the question.
    let prepared = tokio::select! {
        () = call.cancel.cancelled() => {
            call.fail("Cancelled");
            return Outcome::Cancelled(Vec::new());
        }
        prepared = tool.prepare(&mut plan, &ctx) => prepared,
    };
    let diff = match prepared {
        Ok(diff) => diff,
        Err(message) => {
            call.fail(&message);
            return Outcome::Done(format!("Error: {message}"), Vec::new(), Vec::new());
        }
    };
    if let Some(diff) = &diff {
        call.send_patch(ToolCallPatch {
            id: call.id.clone(),
            content: Some(vec![diff.clone()]),
            ..ToolCallPatch::default()
        });
    }
    // A command that just failed in the sandbox is asked again, with the
    // choice to run it once without the sandbox.
    plan.gate.sandbox_retry = ctx.sandbox.is_some()
        && plan
            .sandbox_key
            .as_ref()
            .is_some_and(|key| call.batch.sandbox_failures.contains(key));
    let mut hooked = match super::hooked::before(&tool, &mut plan, call, &ctx).await {
        Ok(hooked) => hooked,
        Err(outcome) => return outcome,
    };
    let diff = hooked.prepared.take().unwrap_or(diff);
    let grant = match gate(&tool, &plan, diff.as_ref(), call, hooked.said).await {
        Ok(grant) => grant,
        Err(outcome) => return outcome,
    };
    call.update(ToolStatus::InProgress, None);
    // The terminal a Bash call runs in, shown live as soon as it exists.
    let terminal: Arc<Mutex<Option<String>>> = Arc::default();
    if ctx.terminals.is_some() {
        let (slot, events, id) = (terminal.clone(), call.batch.events.clone(), call.id.clone());
        ctx.on_terminal = Some(Arc::new(move |terminal_id: &str| {
            if let Ok(mut slot) = slot.lock() {
                *slot = Some(terminal_id.to_owned());
            }
            let _ = events.send(Event::ToolCallUpdate(ToolCallPatch {
                id: id.clone(),
                content: Some(vec![ToolContent::Terminal {
                    terminal_id: terminal_id.to_owned(),
                }]),
                ..ToolCallPatch::default()
            }));
        }));
    }
    // A command run here streams its output (`Event::Command`).
    if ctx.terminals.is_none() {
        ctx.on_output = Some(super::stream::observer(
            call.id.clone(),
            call.batch.events.clone(),
        ));
    }
    if let Grant::Unsandboxed = grant {
        tracing::warn!(call = %call.id, "running once without the sandbox, as the user chose");
        ctx.sandbox = None;
    }
    let sandbox_key = plan.sandbox_key.clone();
    let env = CallEnv {
        id: &call.id,
        ctx: &ctx,
        batch: &call.batch,
    };
    let Ran {
        mut output,
        mut effects,
    } = tool.run(plan, &env).await;
    effects.extend(hooked.finish(call, &mut output).await);
    let terminal = terminal.lock().ok().and_then(|t| t.clone());
    if let Some(key) = sandbox_key
        && call.batch.ctx.sandbox.is_some()
    {
        // As the command's runner found it (`maia_tools::sandbox::denial`).
        effects.push(match output.sandbox_denied {
            true => TurnEffect::SandboxDenied { key },
            false => TurnEffect::SandboxPassed { key },
        });
    }
    if call.cancel.is_cancelled() && output.is_error {
        match &terminal {
            Some(terminal_id) => {
                let cancelled = ToolContent::Text {
                    text: "Cancelled".to_owned(),
                };
                let terminal = ToolContent::Terminal {
                    terminal_id: terminal_id.clone(),
                };
                call.update(ToolStatus::Failed, Some(vec![terminal, cancelled.clone()]));
                call.keep_view(vec![cancelled]);
            }
            None => call.fail("Cancelled"),
        }
        return Outcome::Cancelled(effects);
    }
    let mut content: Vec<ToolContent> = Vec::new();
    if let Some(mut diff) = diff.filter(|_| !output.is_error) {
        // A change the user reviewed before the write: what it wrote.
        if let (ToolContent::Diff { diff }, Some(written)) = (&mut diff, output.written.take()) {
            diff.new_text = written;
        }
        content.push(diff);
        // What the language servers said of the edit is shown with it.
        if let Some(text) = crate::langs::section(&output.content) {
            content.push(ToolContent::Text { text });
        }
    }
    let text = ToolContent::Text {
        text: truncate_middle(&output.content, DISPLAY_CHARS),
    };
    if let Some(terminal_id) = &terminal {
        // The editor keeps showing the terminal after its release.
        content.push(ToolContent::Terminal {
            terminal_id: terminal_id.clone(),
        });
        if let Some(text) = crate::langs::section(&output.content) {
            content.push(ToolContent::Text { text });
        }
    } else if !output.content.is_empty() && (content.is_empty() || output.is_error) {
        content.push(text.clone());
    }
    let status = if output.is_error {
        ToolStatus::Failed
    } else if output.content.starts_with(crate::background::STARTED) {
        // Completed by the task when its command ends.
        ToolStatus::InProgress
    } else {
        ToolStatus::Completed
    };
    call.update(status, Some(content));
    if terminal.is_some() {
        // What is saved (and replayed by a later load, when the terminal is
        // long gone) is the text the model saw.
        call.keep_view(vec![text]);
    }
    Outcome::Done(output.content, output.images, effects)
}

/// The permission step: [`permission::authorise`]; on a question, one at a
/// time, decided again once it is this call's turn (an earlier "always"
/// answer may settle it), then asked and the answer recorded. `Err` is the
/// call's outcome when it does not run.
async fn gate(
    tool: &Arc<dyn Tool>,
    plan: &CallPlan,
    diff: Option<&ToolContent>,
    call: &Call,
    hook: super::hooked::Said,
) -> Result<Grant, Outcome> {
    let settled = |requirement: Requirement| match requirement {
        Requirement::Allow { note } => {
            if let Some(note) = note {
                call.show_note(&note);
            }
            Some(Ok(Grant::Normal))
        }
        Requirement::Refuse {
            to_model, shown, ..
        } => {
            call.fail(&shown);
            Some(Err(Outcome::Done(to_model, Vec::new(), Vec::new())))
        }
        Requirement::Ask(_) => None,
    };
    // The rules' decision, with what the `PreToolUse` hooks said.
    let decide = || super::hooked::decide(call.authorise(plan), hook, plan, call);
    if let Some(done) = settled(decide()) {
        return done;
    }
    let _turn = tokio::select! {
        () = call.cancel.cancelled() => {
            call.fail("Cancelled");
            return Err(Outcome::Cancelled(Vec::new()));
        }
        guard = call.batch.ask.lock() => guard,
    };
    let question = match decide() {
        Requirement::Ask(question) => question,
        other => return settled(other).unwrap_or(Ok(Grant::Normal)),
    };
    if let Some(note) = &question.note {
        call.show_note(note);
    }
    let mut view = call
        .views
        .get(call.index)
        .and_then(|v| v.lock().ok().map(|v| v.clone()))
        .ok_or(Outcome::Cancelled(Vec::new()))?;
    view.content = diff.cloned().into_iter().collect();
    super::hooked::notify(call);
    let (reply_tx, reply_rx) = oneshot::channel();
    let _ = call.batch.events.send(Event::Permission(PermissionRequest {
        tool_call: view,
        options: question.options.clone(),
        reply: reply_tx,
    }));
    let reply = tokio::select! {
        () = call.cancel.cancelled() => {
            call.fail("Cancelled");
            return Err(Outcome::Cancelled(Vec::new()));
        }
        reply = reply_rx => reply.unwrap_or(PermissionReply::Cancelled),
    };
    let answer = question.answer(reply);
    let kind = match &answer {
        Answer::Allow { kind, .. } | Answer::Reject { kind, .. } => *kind,
        Answer::Cancelled => {
            // A cancelled permission ends the turn as cancelled.
            call.turn.cancel();
            call.fail("Cancelled");
            return Err(Outcome::Cancelled(Vec::new()));
        }
    };
    if matches!(kind, ChoiceKind::AllowAlways | ChoiceKind::RejectAlways) {
        record(tool, question, kind, call).await;
    }
    match answer {
        Answer::Allow {
            unsandboxed: true, ..
        } => Ok(Grant::Unsandboxed),
        Answer::Allow { .. } => Ok(Grant::Normal),
        Answer::Reject { to_model, .. } => {
            call.fail("Rejected by the user");
            Err(Outcome::Done(to_model, Vec::new(), Vec::new()))
        }
        Answer::Cancelled => Err(Outcome::Cancelled(Vec::new())),
    }
}

/// Records an "always" answer; the files are written on the blocking pool.
async fn record(tool: &Arc<dyn Tool>, question: Question, kind: ChoiceKind, call: &Call) {
    let confirms = question.confirm.is_some() && kind == ChoiceKind::AllowAlways;
    let broker = call.batch.broker.clone();
    let home = call.batch.home.clone();
    let cwd = call.batch.ctx.cwd.clone();
    let recorded = tokio::task::spawn_blocking(move || {
        let mut broker = broker.lock().ok()?;
        Some(permission::record(
            &question,
            kind,
            &mut broker,
            home.as_deref(),
            &cwd,
        ))
    })
    .await;
    if confirms {
        tool.confirmed();
    }
    match recorded {
        Ok(Some(Recorded::Saved(rule, file))) => {
            tracing::info!(rule = %rule, file = %file.display(), "permission rule saved");
        }
        Ok(Some(Recorded::NotSaved(rule, e))) => {
            let _ = call.batch.events.send(Event::Notice {
                level: NoticeLevel::Warning,
                text: format!("The rule {rule} applies to this session but was not saved: {e}"),
            });
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::mpsc;
    use std::time::Duration;

    use maia_llm::ToolSpec;
    use maia_tools::ToolOutput;
    use serde_json::json;

    use super::*;
    use crate::mode::Mode;
    use crate::permission::{Broker, GateFacts};
    use crate::tools::registry::ToolEffect;

    /// A tool whose run blocks its thread until `Release` runs (or 5 s
    /// pass), as a synchronous step in a tool would.
    struct Blocker(Mutex<mpsc::Receiver<()>>);
    /// A tool that releases the blocker.
    struct Release(mpsc::Sender<()>);

    fn facts(name: &str) -> GateFacts {
        GateFacts {
            rule_name: name.to_owned(),
            side_effect_free: true,
            ..GateFacts::default()
        }
    }

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.to_owned(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        }
    }

    #[async_trait::async_trait]
    impl Tool for Blocker {
        fn spec(&self) -> ToolSpec {
            spec("Blocker")
        }
        fn effect(&self) -> ToolEffect {
            ToolEffect::ReadOnly
        }
        fn plan(&self, call: &ToolCall, _: &Value, _: &Path) -> Result<CallPlan, String> {
            Ok(CallPlan::new(call.name.clone(), facts(&call.name), ()))
        }
        async fn run(&self, _: CallPlan, _: &CallEnv<'_>) -> Ran {
            let Ok(rx) = self.0.lock() else {
                return ToolOutput::error("poisoned").into();
            };
            match rx.recv_timeout(Duration::from_secs(5)) {
                Ok(()) => ToolOutput::ok("released"),
                Err(_) => ToolOutput::error("stalled: the other call never ran"),
            }
            .into()
        }
    }

    #[async_trait::async_trait]
    impl Tool for Release {
        fn spec(&self) -> ToolSpec {
            spec("Release")
        }
        fn effect(&self) -> ToolEffect {
            ToolEffect::ReadOnly
        }
        fn plan(&self, call: &ToolCall, _: &Value, _: &Path) -> Result<CallPlan, String> {
            Ok(CallPlan::new(call.name.clone(), facts(&call.name), ()))
        }
        async fn run(&self, _: CallPlan, _: &CallEnv<'_>) -> Ran {
            let _ = self.0.send(());
            ToolOutput::ok("sent").into()
        }
    }

    fn batch(cwd: &Path) -> (Batch, tokio::sync::mpsc::UnboundedReceiver<Event>) {
        let (events, rx) = tokio::sync::mpsc::unbounded_channel();
        let batch = Batch {
            events,
            ctx: ToolContext::local(cwd),
            broker: Arc::new(Mutex::new(Broker::default())),
            mode: Mode::Default,
            home: None,
            sandbox_failures: Default::default(),
            ask: tokio::sync::Mutex::new(()),
            lsp: Arc::new(maia_lsp_client::LspManager::new(
                maia_lsp_client::LspSettings::default(),
                cwd.to_path_buf(),
                None,
                Arc::new(|_| {}),
                maia_lsp_client::LspPool::new(),
            )),
            records: Arc::default(),
            running: Default::default(),
            hooks: None,
        };
        (batch, rx)
    }

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: "{}".to_owned(),
        }
    }

    fn texts(messages: &[ChatMessage]) -> Vec<String> {
        messages
            .iter()
            .map(|m| match m {
                ChatMessage::Tool { content, .. } => content.clone(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_blocking_call_does_not_stall_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, rx) = mpsc::channel();
        let mut registry = ToolRegistry::default();
        registry.register(Arc::new(Blocker(Mutex::new(rx))));
        registry.register(Arc::new(Release(tx)));
        let (batch, _events) = batch(dir.path());
        let calls = [call("a", "Blocker"), call("b", "Release")];
        let Finished {
            messages, views, ..
        } = tokio::time::timeout(Duration::from_secs(20), run_batch(&registry, &calls, batch))
            .await
            .expect("the batch ends");
        assert_eq!(texts(&messages), ["released", "sent"]);
        assert!(views.iter().all(|v| v.status == ToolStatus::Completed));
    }

    /// A tool on one file whose run waits for `release` and logs its
    /// start and end.
    struct OnFile {
        log: Arc<Mutex<Vec<String>>>,
        release: tokio::sync::Mutex<Option<tokio::sync::oneshot::Receiver<()>>>,
    }

    #[async_trait::async_trait]
    impl Tool for OnFile {
        fn spec(&self) -> ToolSpec {
            spec("OnFile")
        }
        fn effect(&self) -> ToolEffect {
            ToolEffect::ReadOnly
        }
        fn plan(&self, call: &ToolCall, _: &Value, cwd: &Path) -> Result<CallPlan, String> {
            let mut plan = CallPlan::new(call.name.clone(), facts(&call.name), call.id.clone());
            plan.keys = vec![cwd.join("same.txt")];
            Ok(plan)
        }
        async fn run(&self, plan: CallPlan, _: &CallEnv<'_>) -> Ran {
            let id: String = plan.take().unwrap_or_default();
            self.log.lock().unwrap().push(format!("{id} start"));
            if let Some(release) = self.release.lock().await.take() {
                let _ = release.await;
            }
            self.log.lock().unwrap().push(format!("{id} end"));
            ToolOutput::ok(id).into()
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_on_one_file_run_in_the_order_requested() {
        let dir = tempfile::tempdir().unwrap();
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        let (release, released) = tokio::sync::oneshot::channel();
        let mut registry = ToolRegistry::default();
        registry.register(Arc::new(OnFile {
            log: log.clone(),
            release: tokio::sync::Mutex::new(Some(released)),
        }));
        let (batch, _events) = batch(dir.path());
        let calls = [call("a", "OnFile"), call("b", "OnFile")];
        let run = tokio::spawn(async move { run_batch(&registry, &calls, batch).await });
        let started = |n: usize| {
            let log = log.clone();
            async move {
                while log.lock().unwrap().len() < n {
                    tokio::task::yield_now().await;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), started(1))
            .await
            .expect("the first call starts");
        // The second call must not start while the first one runs.
        let early = tokio::time::timeout(Duration::from_millis(300), started(2)).await;
        assert!(early.is_err(), "{:?}", log.lock().unwrap());
        release.send(()).unwrap();
        let messages = tokio::time::timeout(Duration::from_secs(10), run)
            .await
            .expect("the batch ends")
            .unwrap()
            .messages;
        assert_eq!(texts(&messages), ["a", "b"]);
        assert_eq!(
            *log.lock().unwrap(),
            ["a start", "a end", "b start", "b end"]
        );
    }

    /// A tool whose run never ends; it says when its run is dropped.
    struct Forever(Arc<std::sync::atomic::AtomicBool>);

    struct SetOnDrop(Arc<std::sync::atomic::AtomicBool>);

    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Release);
        }
    }

    #[async_trait::async_trait]
    impl Tool for Forever {
        fn spec(&self) -> ToolSpec {
            spec("Forever")
        }
        fn effect(&self) -> ToolEffect {
            ToolEffect::ReadOnly
        }
        fn plan(&self, call: &ToolCall, _: &Value, _: &Path) -> Result<CallPlan, String> {
            Ok(CallPlan::new(call.name.clone(), facts(&call.name), ()))
        }
        async fn run(&self, _: CallPlan, _: &CallEnv<'_>) -> Ran {
            let _guard = SetOnDrop(self.0.clone());
            std::future::pending::<Ran>().await
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_batch_stops_its_calls() {
        let dir = tempfile::tempdir().unwrap();
        let dropped: Arc<std::sync::atomic::AtomicBool> = Arc::default();
        let mut registry = ToolRegistry::default();
        registry.register(Arc::new(Forever(dropped.clone())));
        let (batch, mut events) = batch(dir.path());
        let calls = [call("a", "Forever")];
        let running = async {
            // Until the call is in progress.
            while let Some(event) = events.recv().await {
                if let Event::ToolCallUpdate(p) = event
                    && p.status == Some(ToolStatus::InProgress)
                {
                    break;
                }
            }
        };
        tokio::select! {
            _ = run_batch(&registry, &calls, batch) => panic!("the call never ends"),
            () = running => {}
        }
        tokio::time::timeout(Duration::from_secs(10), async {
            while !dropped.load(std::sync::atomic::Ordering::Acquire) {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the call's run is dropped with its batch");
    }

    #[tokio::test]
    async fn unknown_tools_answer_the_model() {
        let dir = tempfile::tempdir().unwrap();
        let mut registry = ToolRegistry::default();
        let (tx, _rx) = mpsc::channel();
        registry.register(Arc::new(Release(tx)));
        let (batch, _events) = batch(dir.path());
        let Finished {
            messages, views, ..
        } = run_batch(&registry, &[call("a", "Nope")], batch).await;
        let text = &texts(&messages)[0];
        assert!(text.contains("Unknown tool `Nope`"), "{text}");
        assert!(text.contains("Available tools: Release."), "{text}");
        assert_eq!(views[0].status, ToolStatus::Failed);
    }

    #[test]
    fn name_clashes_keep_the_first_tool() {
        let mut registry = ToolRegistry::default();
        let (tx, _rx) = mpsc::channel();
        assert!(registry.register(Arc::new(Release(tx.clone()))));
        assert!(!registry.register(Arc::new(Release(tx))));
        assert_eq!(registry.specs().len(), 1);
    }
}
