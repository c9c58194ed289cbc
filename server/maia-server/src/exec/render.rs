//! What `maia exec` prints: the answer on stdout as it streams, tool calls
//! and their results compactly on stderr, with a spinner naming the current
//! tool when stderr is a terminal; or, with `--json`, one JSON object per
//! line on stdout for every event (the shapes are in docs/exec.md).

use maia_core::store::{SavedContent, SavedStatus, SavedSubagentState, SavedToolCall};
use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use maia_core::{
    CompactionState, Event, NoticeLevel, Question, StopReason, ToolCallPatch, ToolCallView,
    ToolContent, ToolStatus,
};
use serde_json::{Value, json};

/// How often the spinner turns.
pub const TICK: Duration = Duration::from_millis(120);
const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
/// The longest line of a tool's result shown.
const SHOWN_CHARS: usize = 120;

/// The wire name of a stop reason (as ACP names them).
pub fn stop_name(stop: StopReason) -> &'static str {
    match stop {
        StopReason::EndTurn => "end_turn",
        StopReason::MaxTokens => "max_tokens",
        StopReason::MaxTurnRequests => "max_turn_requests",
        StopReason::Refusal => "refusal",
        StopReason::Cancelled => "cancelled",
    }
}

/// A tool call as far as it is known.
struct Call {
    title: String,
    content: Vec<ToolContent>,
    /// Refused for want of a person (already reported).
    refused: bool,
}

/// The printer of one run.
pub struct Output {
    json: bool,
    /// Whether stderr is a terminal (the spinner and its line).
    tty: bool,
    /// Whether stdout is the same kind of terminal (its open line matters).
    stdout_tty: bool,
    calls: HashMap<String, Call>,
    /// The tool running now, for the spinner.
    current: Option<String>,
    frame: usize,
    /// Whether the spinner's line is on the screen.
    drawn: bool,
    /// Whether the last thing written to stdout ended its line.
    stdout_at_line_start: bool,
    /// Whether any of the answer was written.
    answered: bool,
}

impl Output {
    pub fn new(json: bool) -> Output {
        Output {
            json,
            tty: std::io::stderr().is_terminal(),
            stdout_tty: std::io::stdout().is_terminal(),
            calls: HashMap::new(),
            current: None,
            frame: 0,
            drawn: false,
            stdout_at_line_start: true,
            answered: false,
        }
    }

    /// One JSON event on its own line.
    fn emit(&mut self, event: Value) {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{event}");
        let _ = stdout.flush();
    }

    /// Answer text on stdout, as it arrives.
    fn answer(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.clear_spinner();
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
        self.stdout_at_line_start = text.ends_with('\n');
        self.answered = true;
    }

    /// Ends the answer's open line on stdout.
    fn end_answer_line(&mut self) {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(b"\n");
        let _ = stdout.flush();
        self.stdout_at_line_start = true;
    }

    /// One line on stderr (plain output only).
    fn note(&mut self, line: &str) {
        self.clear_spinner();
        if self.tty && self.stdout_tty && !self.stdout_at_line_start {
            // One terminal: the answer's open line is ended first.
            self.end_answer_line();
        }
        eprintln!("{line}");
    }

    fn clear_spinner(&mut self) {
        if self.drawn {
            eprint!("\r\x1b[2K");
            let _ = std::io::stderr().flush();
            self.drawn = false;
        }
    }

    /// Turns the spinner (a terminal only, and never over an open line of
    /// the answer).
    pub fn tick(&mut self) {
        if self.json || !self.tty || (self.stdout_tty && !self.stdout_at_line_start) {
            return;
        }
        self.frame = (self.frame + 1) % FRAMES.len();
        let what = self.current.as_deref().unwrap_or("working");
        let line: String = format!("{} {what}", FRAMES[self.frame])
            .chars()
            .take(100)
            .collect();
        eprint!("\r\x1b[2K{line}");
        let _ = std::io::stderr().flush();
        self.drawn = true;
    }

    /// An error before or outside the turn.
    pub fn error(&mut self, message: &str) {
        if self.json {
            self.emit(json!({"type": "error", "message": message}));
        } else {
            self.note(&format!("maia exec: {message}"));
        }
    }

    /// `--export` wrote the thread to `path`.
    pub fn exported(&mut self, path: &Path) {
        if self.json {
            self.emit(json!({"type": "exported", "path": path}));
        } else {
            if self.answered && !self.stdout_at_line_start {
                self.end_answer_line();
            }
            self.note(&format!("• exported the thread to {}", path.display()));
        }
    }

    pub fn started(&mut self, id: &str, cwd: &Path, model: Option<&str>, resumed: bool) {
        if self.json {
            self.emit(json!({
                "type": "session_started", "session_id": id, "cwd": cwd,
                "model": model, "resumed": resumed,
            }));
        }
    }

    pub fn event(&mut self, event: Event) {
        if self.json {
            if let Some(value) = json_event(event) {
                self.emit(value);
            }
            return;
        }
        match event {
            Event::AgentText { text, .. } => self.answer(&text),
            Event::ToolCall(view) => self.tool_call(view),
            Event::ToolCallUpdate(patch) => self.tool_update(patch),
            Event::Plan(todos) => {
                let done = todos
                    .iter()
                    .filter(|t| t.status == maia_core::session_tools::TodoStatus::Completed)
                    .count();
                self.note(&format!("• plan: {done}/{} done", todos.len()));
                for todo in &todos {
                    let mark = match todo.status {
                        maia_core::session_tools::TodoStatus::Completed => "☑",
                        maia_core::session_tools::TodoStatus::InProgress => "▸",
                        maia_core::session_tools::TodoStatus::Pending => "☐",
                    };
                    self.note(&format!("  {mark} {}", todo.content));
                }
            }
            Event::Compaction { state, .. } => match state {
                CompactionState::Started => {
                    self.current = Some("compacting the conversation".to_owned());
                    self.note("• compacting the conversation");
                }
                CompactionState::Completed { before, after, .. } => {
                    self.current = None;
                    self.note(&format!("  ✓ compacted: {before} → {after} tokens"));
                }
                CompactionState::Failed(e) => {
                    self.current = None;
                    self.note(&format!("  ✗ compaction failed: {e}"));
                }
                CompactionState::Cancelled => self.current = None,
            },
            Event::Notice {
                level: NoticeLevel::Warning,
                text,
            } => self.note(&format!("! {}", text.trim())),
            Event::ModeChanged(mode) => self.note(&format!("• mode: {}", mode.id())),
            Event::Hook(r) => {
                let ended = r
                    .exit_code
                    .map_or(r.outcome.to_owned(), |c| format!("exit {c}"));
                self.note(&format!(
                    "• hook {}: {} ({ended}, {} ms)",
                    r.event, r.command, r.duration_ms
                ));
            }
            Event::PlanProposed { markdown, .. } => self.answer(&format!("\n{markdown}\n")),
            // A subagent's own tool calls, indented under its `Task` call.
            Event::Subagent(maia_core::SubagentEvent {
                update: maia_core::SubagentUpdate::Event(event),
                child,
            }) => match *event {
                Event::ToolCall(view) => self.note(&format!("  • {}: {}", child.agent, view.title)),
                Event::Subagent(grandchild) => self.render_subagent_child(grandchild),
                _ => {}
            },
            _ => {}
        }
    }

    fn render_subagent_child(&mut self, event: maia_core::SubagentEvent) {
        if let maia_core::SubagentUpdate::Started = event.update {
            self.note(&format!(
                "  • {} started {}",
                event.child.agent, event.child.description
            ));
        }
    }

    fn tool_call(&mut self, view: ToolCallView) {
        self.note(&format!("• {}", view.title));
        self.current = Some(view.title.clone());
        let call = Call {
            title: view.title,
            content: view.content,
            refused: false,
        };
        self.calls.insert(view.id, call);
    }

    fn tool_update(&mut self, patch: ToolCallPatch) {
        let Some(call) = self.calls.get_mut(&patch.id) else {
            return;
        };
        if let Some(content) = patch.content {
            call.content = content;
        }
        let done = match patch.status {
            Some(ToolStatus::Completed) => "✓",
            Some(ToolStatus::Failed) => "✗",
            _ => return,
        };
        let line = format!("  {done} {}", summary(&call.title, &call.content));
        let refused = call.refused;
        if self.current.as_deref() == Some(call.title.as_str()) {
            self.current = None;
        }
        if !refused {
            self.note(&line);
        }
    }

    /// A permission question nobody can answer, refused.
    pub fn permission_refused(&mut self, call: &ToolCallView, rule: Option<String>) {
        if self.json {
            self.emit(json!({
                "type": "permission_refused", "tool_call_id": call.id,
                "title": call.title, "rule": rule,
            }));
            return;
        }
        if let Some(known) = self.calls.get_mut(&call.id) {
            known.refused = true;
        }
        let hint = match rule {
            Some(rule) => format!("--allow '{rule}' or --mode would allow it"),
            None => "--mode would allow it".to_owned(),
        };
        self.note(&format!(
            "  ✗ refused (no one to ask in maia exec): {}; {hint}",
            call.title
        ));
    }

    /// An `AskUser` question nobody can answer, declined.
    pub fn question_refused(&mut self, question: &Question) {
        if self.json {
            self.emit(json!({
                "type": "question_refused", "tool_call_id": question.tool_call_id,
                "question": question.question, "choices": question.choices,
            }));
            return;
        }
        self.note(&format!(
            "  ✗ question declined (no one to ask in maia exec): {}",
            question.question
        ));
    }

    /// The turn failed; its message was also part of the answer.
    pub fn failed(&mut self, message: &str) {
        if self.json {
            self.emit(json!({"type": "turn_failed", "message": message}));
        }
    }

    pub fn interrupted(&mut self, signal: &str, again: bool) {
        if self.json {
            return;
        }
        if again {
            self.note(&format!("✗ {signal} again: leaving now"));
        } else {
            self.note(&format!(
                "✗ {signal}: cancelling the turn (again to leave at once)"
            ));
        }
    }

    /// The turn ended without doing its job: why.
    pub fn unfinished(&mut self, reason: maia_core::Unfinished, text: &str) {
        if self.json {
            self.emit(json!({"type": "turn_unfinished", "reason": reason.name(), "text": text}));
        } else {
            self.note(&format!("! {}", text.trim()));
        }
    }

    pub fn ended(
        &mut self,
        id: &str,
        stop_reason: &str,
        unfinished: Option<maia_core::Unfinished>,
        code: u8,
    ) {
        if self.json {
            self.emit(json!({
                "type": "turn_ended", "session_id": id, "stop_reason": stop_reason,
                "unfinished": unfinished.map(maia_core::Unfinished::name),
                "exit_code": code,
            }));
            return;
        }
        if self.answered && !self.stdout_at_line_start {
            self.end_answer_line();
        }
        let ended = if stop_reason == "end_turn" {
            String::new()
        } else {
            format!("{stop_reason}; ")
        };
        self.note(&format!(
            "• {ended}thread {id} (go on with: maia exec --resume {id} \"…\")"
        ));
    }
}

/// A finished call in one line: its title and the first line of what it
/// gave back (or the files it changed).
fn summary(title: &str, content: &[ToolContent]) -> String {
    for item in content {
        match item {
            ToolContent::Text { text } => {
                let mut lines = text.lines().filter(|l| !l.trim().is_empty());
                let Some(first) = lines.next() else { continue };
                let more = lines.count();
                let mut first: String = first
                    .trim()
                    .replace('\t', " ")
                    .chars()
                    .take(SHOWN_CHARS)
                    .collect();
                if more > 0 {
                    first.push_str(&format!(" (+{more} lines)"));
                }
                return format!("{title}: {first}");
            }
            ToolContent::Diff { diff } => {
                let verb = if diff.old_text.is_some() {
                    "changed"
                } else {
                    "created"
                };
                return format!("{title}: {verb} {}", diff.path.display());
            }
            ToolContent::Terminal { .. } => {}
        }
    }
    title.to_owned()
}

/// An engine event as a JSON line (`None`: not part of the stream).
fn json_event(event: Event) -> Option<Value> {
    Some(match event {
        Event::AgentText { message_id, text } => {
            json!({"type": "text", "message_id": message_id, "text": text})
        }
        Event::Thought { message_id, text } => {
            json!({"type": "thought", "message_id": message_id, "text": text})
        }
        // Tool calls in the journal's shapes (`maia_core::store`).
        Event::ToolCall(view) => {
            let mut value = serde_json::to_value(SavedToolCall::from(&view)).ok()?;
            value["type"] = "tool_call".into();
            value
        }
        Event::ToolCallUpdate(patch) => {
            let mut value = json!({"type": "tool_call_update", "id": patch.id});
            if let Some(status) = patch.status {
                value["status"] = serde_json::to_value(SavedStatus::from(status)).ok()?;
            }
            if let Some(content) = patch.content {
                let content: Vec<SavedContent> = content.iter().map(SavedContent::from).collect();
                value["content"] = serde_json::to_value(content).ok()?;
            }
            if let Some(output) = patch.raw_output {
                value["raw_output"] = output;
            }
            value
        }
        Event::Plan(todos) => json!({"type": "plan", "entries": todos}),
        Event::Title(title) => json!({"type": "title", "title": title}),
        Event::ModelChanged(model) => json!({"type": "model", "model": model}),
        Event::Usage {
            used,
            size,
            cost,
            map,
        } => {
            json!({"type": "usage", "used": used, "size": size, "cost_usd": cost,
                   "context_map": map})
        }
        Event::ModeChanged(mode) => json!({"type": "mode", "mode": mode.id()}),
        Event::PlanProposed { id, markdown } => {
            json!({"type": "plan_proposed", "id": id, "markdown": markdown})
        }
        Event::Findings { id, findings } => {
            let findings: Vec<Value> = findings
                .iter()
                .map(|f| json!({"path": f.path, "line": f.line, "text": f.text}))
                .collect();
            json!({"type": "findings", "id": id, "findings": findings})
        }
        Event::TurnUsage(usage) => json!({
            "type": "turn_usage",
            "input": usage.prompt_tokens,
            "output": usage.completion_tokens,
            "total": usage.total_tokens,
            "thought": usage.reasoning_tokens,
            "cached_read": usage.cached_tokens,
            "cached_write": usage.cache_write_tokens,
        }),
        Event::Subagent(maia_core::SubagentEvent { child, update }) => match update {
            maia_core::SubagentUpdate::Started => json!({
                "type": "subagent_started", "id": child.id, "tool_call_id": child.tool_call_id,
                "agent": child.agent, "description": child.description,
            }),
            maia_core::SubagentUpdate::Event(event) => {
                let mut value = json_event(*event)?;
                value["subagent"] = child.id.clone().into();
                value
            }
            maia_core::SubagentUpdate::Progress { .. } => return None,
            maia_core::SubagentUpdate::Ended { state, answer } => json!({
                "type": "subagent_ended", "id": child.id, "state": SavedSubagentState::from(state), "answer": answer,
            }),
        },
        Event::QueueChanged => json!({"type": "queue_changed"}),
        Event::QueueTurn {
            turn_id,
            queued_id,
            status,
        } => {
            let status = match status {
                maia_core::queue::QueueTurnStatus::InProgress => "in_progress",
                maia_core::queue::QueueTurnStatus::Completed => "completed",
                maia_core::queue::QueueTurnStatus::Interrupted => "interrupted",
            };
            json!({"type": "queue_turn", "turn_id": turn_id, "queued_id": queued_id, "status": status})
        }
        Event::Compaction { id, state } => {
            let mut value = json!({"type": "compaction", "id": id});
            match state {
                CompactionState::Started => value["state"] = "started".into(),
                CompactionState::Completed {
                    summary,
                    before,
                    after,
                } => {
                    value["state"] = "completed".into();
                    value["summary"] = summary.into();
                    value["before"] = before.into();
                    value["after"] = after.into();
                }
                CompactionState::Failed(message) => {
                    value["state"] = "failed".into();
                    value["message"] = message.into();
                }
                CompactionState::Cancelled => value["state"] = "cancelled".into(),
            }
            value
        }
        Event::Hook(r) => json!({
            "type": "hook", "id": r.id, "event": r.event, "command": r.command,
            "matched": r.subject, "exit_code": r.exit_code, "outcome": r.outcome,
            "duration_ms": r.duration_ms, "output": r.output,
        }),
        Event::Notice { level, text } => {
            let level = match level {
                NoticeLevel::Info => "info",
                NoticeLevel::Warning => "warning",
            };
            json!({"type": "notice", "level": level, "text": text})
        }
        // A replay, the command list, a command's live output and file
        // states (its result says them), and what the pump answers itself.
        Event::UserMessage { .. }
        | Event::UserMessageSaved { .. }
        | Event::SteerTaken { .. }
        | Event::UserImage { .. }
        | Event::Commands(_)
        | Event::Permission(_)
        | Event::TurnFailed(_)
        | Event::TurnUnfinished { .. }
        | Event::Command { .. }
        | Event::FilesChanged { .. }
        | Event::ModelRequest(_)
        | Event::TurnStarted(_)
        | Event::TurnEnded(_) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_is_one_line() {
        let text = |t: &str| vec![ToolContent::Text { text: t.to_owned() }];
        assert_eq!(
            summary("Bash: ls", &text("\na\nb\nc\n")),
            "Bash: ls: a (+2 lines)"
        );
        assert_eq!(summary("Read x", &[]), "Read x");
        let long = "x".repeat(500);
        assert_eq!(summary("T", &text(&long)).chars().count(), 3 + SHOWN_CHARS);
    }

    #[test]
    fn events_keep_their_documented_shapes() {
        let text = json_event(Event::AgentText {
            message_id: "m".into(),
            text: "hi".into(),
        });
        assert_eq!(
            text,
            Some(json!({"type": "text", "message_id": "m", "text": "hi"}))
        );
        let update = json_event(Event::ToolCallUpdate(ToolCallPatch {
            id: "c".into(),
            status: Some(ToolStatus::Completed),
            ..Default::default()
        }));
        assert_eq!(
            update,
            Some(json!({"type": "tool_call_update", "id": "c", "status": "completed"}))
        );
        assert_eq!(json_event(Event::TurnEnded(StopReason::EndTurn)), None);
    }
}
