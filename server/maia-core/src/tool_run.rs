//! Running the tool calls of one model response.
//!
//! All calls are announced first, in order. Then they run concurrently (at
//! most [`MAX_PARALLEL`]); calls on the same file run one after the other in
//! the order requested; permission questions are asked one at a time; one
//! failure or refusal does not stop the others; results go back to the
//! model in the order requested. Every call — built-in, session, skill or
//! custom tool — passes the broker.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures_util::future::join_all;
use maia_llm::{ChatMessage, ToolCall};
use maia_tools::{ToolContext, ToolInput, ToolKind, ToolOutput, truncate_middle};
use serde_json::Value;
use tokio::sync::{Semaphore, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::custom_tools::LoadedTools;
use crate::event::{
    ChoiceKind, Event, NoticeLevel, PermissionReply, PermissionRequest, ToolCallPatch,
    ToolCallView, ToolContent, ToolStatus,
};
use crate::mode::Mode;
use crate::permission::gate::{self, CallFacts, Verdict};
use crate::permission::{Broker, Decision, choices, suggest_rule, suggest_rule_value};
use crate::session::Session;
use crate::session_tools::{self, CURRENT_MODEL, TODO_WRITE, Todo};
use crate::skills::{self, LoadedSkills, SkillInput};

/// Tool calls running at once.
pub const MAX_PARALLEL: usize = 8;
/// Characters of tool output shown in the editor.
const DISPLAY_CHARS: usize = 20_000;

/// What a tool call asks for, once understood.
#[derive(Debug, Clone)]
enum Invocation {
    Builtin(ToolInput),
    CurrentModel,
    TodoWrite(Vec<Todo>),
    /// `AskUser`: the question and its choices.
    AskUser(String, Vec<String>),
    Skill(SkillInput),
    /// A custom tool (its index in the session's custom tools) and its input.
    Custom(usize, Value),
    /// A tool of an MCP server (`mcp__<server>__<tool>`) and its input.
    Mcp(maia_mcp::McpTool, Value),
}

impl Invocation {
    fn mutating(&self) -> bool {
        match self {
            Invocation::Builtin(input) => input.is_mutating(),
            // MCP annotations are hints from the server, not guarantees.
            Invocation::Custom(..) | Invocation::Mcp(..) => true,
            Invocation::CurrentModel
            | Invocation::TodoWrite(_)
            | Invocation::AskUser(..)
            | Invocation::Skill(_) => false,
        }
    }
}

struct Planned {
    call: ToolCall,
    input: Result<Invocation, String>,
    view: ToolCallView,
    /// Files this call touches; calls sharing one run in order.
    keys: Vec<PathBuf>,
}

/// What a call ended with.
enum Outcome {
    /// The text for the model and the images the tool returned.
    Done(String, Vec<maia_tools::ImageData>),
    Cancelled,
}

/// The session's tools other than the built-in ones, for one batch.
pub(crate) struct SessionTools {
    pub skills: Arc<LoadedSkills>,
    pub custom: Arc<LoadedTools>,
    pub todos: Arc<Mutex<Vec<Todo>>>,
    pub mcp: Arc<maia_mcp::McpManager>,
    /// Commands whose last run failed, maybe because of the sandbox: their
    /// next question offers a run without it.
    pub sandbox_failures: Arc<Mutex<std::collections::HashSet<String>>>,
    /// Custom tools the user has not confirmed as they are now.
    pub pending_tools: Arc<Mutex<std::collections::HashSet<String>>>,
    /// The editor's services (terminals, questions).
    pub client: crate::client::ClientTools,
    /// Set when an `AskUser` question was shown as text.
    pub asked_as_text: Arc<std::sync::atomic::AtomicBool>,
}

/// The id of the "run once without the sandbox" choice.
const UNSANDBOXED: &str = "allow_once_unsandboxed";

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
    model: Option<String>,
    tools: &'a SessionTools,
    home: Option<PathBuf>,
}

impl Shared<'_> {
    fn send_patch(&self, patch: ToolCallPatch) {
        if let Some(mut view) = self
            .views
            .iter()
            .find_map(|v| v.lock().ok().filter(|v| v.id == patch.id))
        {
            if let Some(status) = patch.status {
                view.status = status;
            }
            if let Some(content) = &patch.content {
                view.content = content.clone();
            }
        }
        let _ = self.events.send(Event::ToolCallUpdate(patch));
    }

    /// Changes what is kept of a call (its saved state) without telling
    /// the editor.
    fn keep_view(&self, id: &str, content: Vec<ToolContent>) {
        if let Some(mut view) = self
            .views
            .iter()
            .find_map(|v| v.lock().ok().filter(|v| v.id == id))
        {
            view.content = content;
        }
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

    /// The broker's decision, adjusted by the session's mode and protected
    /// paths ([`gate::apply_mode`]).
    fn decide(&self, p: &Planned, invocation: &Invocation) -> Verdict {
        let (rules, roots) = match self.broker.lock() {
            Ok(broker) => {
                let decision = match invocation {
                    Invocation::Builtin(input) => broker.decide(input, &self.ctx.cwd),
                    _ => broker.decide_value(&p.call.name, &p.view.raw_input, &self.ctx.cwd),
                };
                let decision = match decision {
                    Decision::Deny(rule) => Decision::Deny(format!("the rule {rule}")),
                    other => other,
                };
                (decision, broker.roots().to_vec())
            }
            Err(_) => (Decision::Ask, Vec::new()),
        };
        let input = match invocation {
            Invocation::Builtin(input) => crate::permission::input_value(input),
            _ => p.view.raw_input.clone(),
        };
        let facts = CallFacts {
            tool: &p.call.name,
            input: &input,
            mutating: invocation.mutating(),
        };
        gate::apply_mode(self.mode, rules, facts, &self.ctx.cwd, &roots)
    }
}

impl Session {
    /// The tools other than the built-in ones, for a batch of calls.
    pub(crate) fn session_tools(&self) -> SessionTools {
        SessionTools {
            skills: self.skills.clone(),
            custom: self.custom_tools.clone(),
            todos: self.todos.clone(),
            mcp: self.mcp.clone(),
            sandbox_failures: self.sandbox_failures.clone(),
            pending_tools: self.pending_tools.clone(),
            client: self.client.clone(),
            asked_as_text: self.asked_as_text.clone(),
        }
    }

    /// Runs the calls; returns the tool messages for the model, the final
    /// state of each call and the images each returned, in the order
    /// requested.
    pub(crate) async fn run_tool_calls(
        &mut self,
        calls: &[ToolCall],
        cancel: &CancellationToken,
    ) -> (
        Vec<ChatMessage>,
        Vec<ToolCallView>,
        Vec<Vec<maia_tools::ImageData>>,
    ) {
        // A checkpoint: mode and client changes sent meanwhile apply here.
        self.apply_changes();
        let tools = self.session_tools();
        let planned: Vec<Planned> = calls.iter().map(|call| self.plan(call, &tools)).collect();
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
                read_guard: Some(crate::permission::read_guard(
                    self.broker.clone(),
                    self.cwd.clone(),
                )),
                sandbox: self.sandbox.clone(),
                terminals: tools.client.terminals.clone(),
                on_terminal: None,
            },
            broker: &self.broker,
            ask: tokio::sync::Mutex::new(()),
            slots: Semaphore::new(MAX_PARALLEL),
            cancel,
            views: planned.iter().map(|p| Mutex::new(p.view.clone())).collect(),
            mode: self.mode,
            model: self.model.clone(),
            tools: &tools,
            home: self.options.home.clone(),
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
        let mut images = Vec::with_capacity(planned.len());
        let messages = planned
            .iter()
            .zip(outcomes)
            .map(|(p, outcome)| {
                let content = match outcome {
                    Outcome::Done(text, found) => {
                        images.push(found);
                        text
                    }
                    Outcome::Cancelled => {
                        images.push(Vec::new());
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
        (messages, views, images)
    }

    fn plan(&self, call: &ToolCall, tools: &SessionTools) -> Planned {
        // Unique within the session, also across restarts.
        let id = format!("tool-{}", uuid::Uuid::new_v4().simple());
        let raw_input = serde_json::from_str::<Value>(&call.arguments)
            .unwrap_or_else(|_| Value::String(call.arguments.clone()));
        let input = understand(call, &raw_input, tools);
        let (title, kind, locations) = match &input {
            Ok(Invocation::Builtin(input)) => (
                input.title(&self.cwd),
                Some(input.kind()),
                input.paths(&self.cwd),
            ),
            Ok(Invocation::CurrentModel) => ("Current model".to_owned(), None, Vec::new()),
            Ok(Invocation::AskUser(question, _)) => (format!("Ask: {question}"), None, Vec::new()),
            Ok(Invocation::TodoWrite(todos)) => (
                format!("Update the task list ({} tasks)", todos.len()),
                None,
                Vec::new(),
            ),
            Ok(Invocation::Skill(skill)) => {
                let path = tools.skills.get(&skill.skill).map(|s| s.path.clone());
                (
                    format!("Load skill {}", skill.skill),
                    Some(ToolKind::Read),
                    path.into_iter().collect(),
                )
            }
            Ok(Invocation::Custom(..)) => (call.name.clone(), Some(ToolKind::Execute), Vec::new()),
            Ok(Invocation::Mcp(tool, _)) => (
                format!("{} ({})", tool.title, tool.server),
                (tool.read_only && tool.open_world).then_some(ToolKind::Fetch),
                Vec::new(),
            ),
            Err(_) => (call.name.clone(), None, Vec::new()),
        };
        let keys = match &input {
            Ok(Invocation::Builtin(
                i @ (ToolInput::Read(_) | ToolInput::Write(_) | ToolInput::Edit(_)),
            )) => i.paths(&self.cwd),
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

/// Reads a call: a built-in tool, a session tool, a skill or a custom tool.
fn understand(call: &ToolCall, raw: &Value, tools: &SessionTools) -> Result<Invocation, String> {
    match call.name.as_str() {
        CURRENT_MODEL => Ok(Invocation::CurrentModel),
        TODO_WRITE => session_tools::parse_todos(&call.arguments).map(Invocation::TodoWrite),
        session_tools::ASK_USER => session_tools::parse_question(&call.arguments)
            .map(|(question, choices)| Invocation::AskUser(question, choices)),
        skills::TOOL_NAME if !tools.skills.skills.is_empty() => {
            let input = SkillInput::parse(&call.arguments)?;
            if tools.skills.get(&input.skill).is_none() {
                let known: Vec<&str> = tools
                    .skills
                    .skills
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect();
                return Err(format!(
                    "unknown skill `{}`; available: {}",
                    input.skill,
                    known.join(", ")
                ));
            }
            Ok(Invocation::Skill(input))
        }
        name if name.starts_with("mcp__") && tools.mcp.owns(name) => match tools.mcp.tool(name) {
            Some(tool) => Ok(Invocation::Mcp(tool, raw.clone())),
            None => Err(format!(
                "the MCP tool `{name}` is not available (its server is not connected or the tool is disabled; /mcp shows the servers)"
            )),
        },
        name => match tools.custom.tools.iter().position(|t| t.name == name) {
            Some(index) => Ok(Invocation::Custom(index, raw.clone())),
            None => ToolInput::parse(name, &call.arguments)
                .map(Invocation::Builtin)
                .map_err(|e| e.to_string()),
        },
    }
}

async fn run_one(p: &Planned, s: &Shared<'_>) -> Outcome {
    let id = p.view.id.as_str();
    let invocation = match &p.input {
        Ok(invocation) => invocation.clone(),
        Err(message) => {
            s.fail(id, message);
            return Outcome::Done(format!("Error: {message}"), Vec::new());
        }
    };
    if s.cancel.is_cancelled() {
        s.fail(id, "Cancelled");
        return Outcome::Cancelled;
    }
    // Built-in tools are prepared first: Write and Edit show their diff
    // before the permission question.
    let (prepared, diff) = match &invocation {
        Invocation::Builtin(input) => {
            let prepared = tokio::select! {
                () = s.cancel.cancelled() => {
                    s.fail(id, "Cancelled");
                    return Outcome::Cancelled;
                }
                prepared = maia_tools::prepare(input.clone(), &s.ctx) => prepared,
            };
            match prepared {
                Ok(prepared) => {
                    let diff = prepared.diff.clone().map(|diff| ToolContent::Diff { diff });
                    (Some(prepared), diff)
                }
                Err(e) => {
                    let message = e.to_string();
                    s.fail(id, &message);
                    return Outcome::Done(format!("Error: {message}"), Vec::new());
                }
            }
        }
        _ => (None, None),
    };
    if let Some(diff) = &diff {
        s.send_patch(ToolCallPatch {
            id: id.to_owned(),
            content: Some(vec![diff.clone()]),
            ..ToolCallPatch::default()
        });
    }
    let mut unsandboxed = false;
    match authorize(p, &invocation, diff.as_ref(), s).await {
        Authorization::Granted => {}
        Authorization::GrantedUnsandboxed => unsandboxed = true,
        Authorization::Refused(to_model) => return Outcome::Done(to_model, Vec::new()),
        Authorization::Cancelled => {
            s.fail(id, "Cancelled");
            return Outcome::Cancelled;
        }
    }
    s.update(id, ToolStatus::InProgress, None);
    // The terminal a Bash call runs in, shown live as soon as it exists.
    let terminal: Arc<Mutex<Option<String>>> = Arc::default();
    let mut ctx = s.ctx.clone();
    if ctx.terminals.is_some() {
        let (slot, events, call) = (terminal.clone(), s.events.clone(), id.to_owned());
        ctx.on_terminal = Some(Arc::new(move |terminal_id: &str| {
            if let Ok(mut slot) = slot.lock() {
                *slot = Some(terminal_id.to_owned());
            }
            let _ = events.send(Event::ToolCallUpdate(ToolCallPatch {
                id: call.clone(),
                content: Some(vec![ToolContent::Terminal {
                    terminal_id: terminal_id.to_owned(),
                }]),
                ..ToolCallPatch::default()
            }));
        }));
    }
    let output = match (prepared, &invocation) {
        (Some(prepared), _) if unsandboxed => {
            tracing::warn!(command = ?p.view.raw_input, "running once without the sandbox, as the user chose");
            ctx.sandbox = None;
            maia_tools::execute(prepared, &ctx).await
        }
        (Some(prepared), _) => maia_tools::execute(prepared, &ctx).await,
        (None, invocation) => run_session_tool(id, invocation, s).await,
    };
    let terminal = terminal.lock().ok().and_then(|t| t.clone());
    if let Some(command) = sandboxed_command(&invocation)
        && let Ok(mut failed) = s.tools.sandbox_failures.lock()
    {
        if output.content.contains(maia_tools::sandbox::DENIAL_MARK) {
            failed.insert(command.to_owned());
        } else {
            failed.remove(command);
        }
    }
    if s.cancel.is_cancelled() && output.is_error {
        match &terminal {
            Some(terminal_id) => {
                let cancelled = ToolContent::Text {
                    text: "Cancelled".to_owned(),
                };
                let terminal = ToolContent::Terminal {
                    terminal_id: terminal_id.clone(),
                };
                s.update(
                    id,
                    ToolStatus::Failed,
                    Some(vec![terminal, cancelled.clone()]),
                );
                s.keep_view(id, vec![cancelled]);
            }
            None => s.fail(id, "Cancelled"),
        }
        return Outcome::Cancelled;
    }
    let mut content: Vec<ToolContent> = Vec::new();
    if let Some(diff) = diff.filter(|_| !output.is_error) {
        content.push(diff);
    }
    let text = ToolContent::Text {
        text: truncate_middle(&output.content, DISPLAY_CHARS),
    };
    if let Some(terminal_id) = &terminal {
        // The editor keeps showing the terminal after its release.
        content.push(ToolContent::Terminal {
            terminal_id: terminal_id.clone(),
        });
    } else if !output.content.is_empty() && (content.is_empty() || output.is_error) {
        content.push(text.clone());
    }
    let status = if output.is_error {
        ToolStatus::Failed
    } else {
        ToolStatus::Completed
    };
    s.update(id, status, Some(content));
    if terminal.is_some() {
        // What is saved (and replayed by a later load, when the terminal is
        // long gone) is the text the model saw.
        s.keep_view(id, vec![text]);
    }
    Outcome::Done(output.content, output.images)
}

/// Runs a tool that is not a built-in one.
async fn run_session_tool(id: &str, invocation: &Invocation, s: &Shared<'_>) -> ToolOutput {
    match invocation {
        Invocation::AskUser(question, choices) => ask_user(id, question, choices, s).await,
        Invocation::CurrentModel => match &s.model {
            Some(model) => ToolOutput::ok(format!("The current model is `{model}`.")),
            None => ToolOutput::error("No model is chosen yet."),
        },
        Invocation::TodoWrite(todos) => {
            if let Ok(mut list) = s.tools.todos.lock() {
                list.clone_from(todos);
            }
            let _ = s.events.send(Event::Plan(todos.clone()));
            ToolOutput::ok(session_tools::todo_result(todos))
        }
        Invocation::Skill(input) => match s.tools.skills.get(&input.skill) {
            Some(skill) => match skills::body(skill, &input.arguments) {
                Ok(body) => ToolOutput::ok(body),
                Err(e) => ToolOutput::error(format!("cannot read {}: {e}", skill.path.display())),
            },
            None => ToolOutput::error(format!("unknown skill `{}`", input.skill)),
        },
        Invocation::Custom(index, input) => match s.tools.custom.tools.get(*index) {
            Some(tool) => {
                tool.run_sandboxed(input, &s.ctx.cwd, &s.ctx.cancel, s.ctx.sandbox.as_deref())
                    .await
            }
            None => ToolOutput::error("this custom tool is no longer loaded"),
        },
        Invocation::Mcp(tool, input) => {
            s.tools
                .mcp
                .call(&tool.full_name, input.clone(), &s.ctx.cancel)
                .await
        }
        Invocation::Builtin(_) => ToolOutput::error("internal error: built-in tool not prepared"),
    }
}

/// `AskUser`: through the editor's form when it has one; else the question
/// is shown as text and the turn ends after this batch, so the user
/// answers in their next prompt.
async fn ask_user(id: &str, question: &str, choices: &[String], s: &Shared<'_>) -> ToolOutput {
    let Some(asker) = &s.tools.client.asker else {
        let _ = s.events.send(Event::AgentText {
            message_id: uuid::Uuid::new_v4().to_string(),
            text: session_tools::question_text(question, choices),
        });
        s.tools
            .asked_as_text
            .store(true, std::sync::atomic::Ordering::Release);
        return ToolOutput::ok(
            "The question was shown to the user as text and the turn ends now: their answer \
will be their next message. Do not guess it.",
        );
    };
    let question = crate::client::Question {
        question: question.to_owned(),
        choices: choices.to_vec(),
        tool_call_id: id.to_owned(),
    };
    // Questions are asked one at a time, like permissions.
    let asked = async {
        let _turn = s.ask.lock().await;
        asker.ask(&question).await
    };
    let answer = tokio::select! {
        biased;
        () = s.cancel.cancelled() => return ToolOutput::cancelled(),
        answer = asked => answer,
    };
    match answer {
        Ok(answer) => ToolOutput::ok(session_tools::answer_result(&answer)),
        Err(e) => ToolOutput::error(format!(
            "The question could not be asked: {e}. Ask it in your answer instead."
        )),
    }
}

/// The command of a Bash call when the session has a sandbox.
fn sandboxed_command(invocation: &Invocation) -> Option<&str> {
    match invocation {
        Invocation::Builtin(ToolInput::Bash(bash)) => Some(bash.command.as_str()),
        _ => None,
    }
}

enum Authorization {
    Granted,
    /// Granted, to run once outside the sandbox.
    GrantedUnsandboxed,
    /// Not run; the text tells the model why.
    Refused(String),
    Cancelled,
}

async fn authorize(
    p: &Planned,
    invocation: &Invocation,
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
    let refuse_always = |why: String| {
        s.fail(id, &format!("Refused: {why}"));
        Authorization::Refused(format!(
            "Refused: {why}. MAIA never runs such a command, in any mode and whatever the rules. Do not retry it or a variant of it."
        ))
    };
    let verdict = s.decide(p, invocation);
    if let Some(note) = &verdict.note {
        tracing::warn!(tool = %p.call.name, %note, "protected path");
        s.send_patch(ToolCallPatch {
            id: id.to_owned(),
            content: Some(vec![ToolContent::Text { text: note.clone() }]),
            ..ToolCallPatch::default()
        });
        let _ = s.events.send(Event::Notice {
            level: NoticeLevel::Warning,
            text: note.clone(),
        });
    }
    // A command that just failed in the sandbox is asked again, with the
    // choice to run it once without the sandbox.
    let offer_unsandboxed = s.ctx.sandbox.is_some()
        && sandboxed_command(invocation)
            .is_some_and(|c| s.tools.sandbox_failures.lock().is_ok_and(|f| f.contains(c)));
    // A custom tool that is new or changed since the user last confirmed
    // it is asked, whatever the rules and the mode.
    let new_tool = match invocation {
        Invocation::Custom(index, _) => s.tools.custom.tools.get(*index).filter(|t| {
            s.tools
                .pending_tools
                .lock()
                .is_ok_and(|p| p.contains(&t.name))
        }),
        _ => None,
    };
    let must_ask = offer_unsandboxed || new_tool.is_some();
    match verdict.decision {
        Decision::Allow if must_ask => {}
        Decision::Allow => return Authorization::Granted,
        Decision::Deny(rule) => return refuse_by_rule(rule),
        Decision::Refuse(why) => return refuse_always(why),
        Decision::Ask => {}
    }
    // One question at a time; an earlier "always" answer may settle it.
    let _turn = tokio::select! {
        () = s.cancel.cancelled() => return Authorization::Cancelled,
        guard = s.ask.lock() => guard,
    };
    match s.decide(p, invocation).decision {
        Decision::Allow if must_ask => {}
        Decision::Allow => return Authorization::Granted,
        Decision::Deny(rule) => return refuse_by_rule(rule),
        Decision::Refuse(why) => return refuse_always(why),
        Decision::Ask => {}
    }
    // A project rule not confirmed yet would allow this call: ask to
    // confirm it rather than suggest another.
    let input_json = match invocation {
        Invocation::Builtin(input) => crate::permission::input_value(input),
        _ => p.view.raw_input.clone(),
    };
    let pending = s
        .broker
        .lock()
        .ok()
        .and_then(|b| b.pending_cover(&p.call.name, &input_json, &s.ctx.cwd));
    let rule = match (&pending, invocation) {
        (Some(rule), _) => Some(rule.clone()),
        (None, Invocation::Builtin(input)) => suggest_rule(input, &s.ctx.cwd),
        (None, _) => suggest_rule_value(&p.call.name, &p.view.raw_input, &s.ctx.cwd),
    };
    let mut options = choices(rule.as_ref());
    if let Some(rule) = &pending
        && let Some(o) = options
            .iter_mut()
            .find(|o| o.kind == ChoiceKind::AllowAlways)
    {
        o.label = format!("Always allow {rule} (confirms this rule of the project's settings)");
    }
    if let Some(tool) = new_tool {
        match options
            .iter_mut()
            .find(|o| o.kind == ChoiceKind::AllowAlways)
        {
            Some(o) => o.label = format!("{} (confirms this new or changed custom tool)", o.label),
            None => options.insert(
                1,
                crate::event::PermissionChoice {
                    id: "allow_always".to_owned(),
                    label: format!(
                        "Always allow {} (confirms this new or changed custom tool)",
                        tool.name
                    ),
                    kind: ChoiceKind::AllowAlways,
                },
            ),
        }
    }
    if offer_unsandboxed {
        options.insert(
            1,
            crate::event::PermissionChoice {
                id: UNSANDBOXED.to_owned(),
                label: "Allow once without the sandbox (it failed inside it)".to_owned(),
                kind: ChoiceKind::AllowOnce,
            },
        );
    }
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
    let mut outside = false;
    let (chosen, reason) = match reply {
        PermissionReply::Selected { option, reason } => {
            outside = option == UNSANDBOXED;
            (
                options.iter().find(|o| o.id == option).map(|o| o.kind),
                reason,
            )
        }
        PermissionReply::Cancelled => (None, None),
    };
    let Some(kind) = chosen else {
        // A cancelled permission ends the turn as cancelled.
        s.cancel.cancel();
        return Authorization::Cancelled;
    };
    if let (Some(tool), ChoiceKind::AllowAlways) = (new_tool, kind) {
        crate::permission::confirm_tool(
            s.home.as_deref(),
            &s.ctx.cwd,
            &tool.name,
            &tool.fingerprint(),
        );
        if let Ok(mut pending) = s.tools.pending_tools.lock() {
            pending.remove(&tool.name);
        }
        tracing::info!(tool = %tool.name, "custom tool confirmed");
    }
    if let Some(rule) = rule {
        // Saving writes the settings files: off the async worker.
        let answered = crate::blocking::off_runtime(|| {
            s.broker
                .lock()
                .map(|mut broker| broker.answer(kind, rule.clone(), pending.is_some(), &s.ctx.cwd))
        });
        match answered {
            Ok(Ok(Some(file))) => {
                tracing::info!(rule = %rule, file = %file.display(), "permission rule saved")
            }
            Ok(Err(e)) => {
                let _ = s.events.send(Event::Notice {
                    level: NoticeLevel::Warning,
                    text: format!("The rule {rule} applies to this session but was not saved: {e}"),
                });
            }
            _ => {}
        }
    }
    match kind {
        ChoiceKind::AllowOnce if outside => Authorization::GrantedUnsandboxed,
        ChoiceKind::AllowOnce | ChoiceKind::AllowAlways => Authorization::Granted,
        ChoiceKind::RejectOnce | ChoiceKind::RejectAlways => {
            s.fail(id, "Rejected by the user");
            let what = match invocation {
                Invocation::Builtin(input) => match input.kind() {
                    ToolKind::Execute => "run this command",
                    ToolKind::Edit => "make this change",
                    _ => "run this tool call",
                },
                Invocation::Custom(..) | Invocation::Mcp(..) => "run this tool",
                _ => "run this tool call",
            };
            let because = reason
                .filter(|r| !r.trim().is_empty())
                .map(|r| format!(" The user's reason: {r}"))
                .unwrap_or_default();
            Authorization::Refused(format!(
                "The user refused to let you {what}.{because} Do not retry it unchanged; ask the user how to proceed if needed."
            ))
        }
    }
}
