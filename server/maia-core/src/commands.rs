//! What the user types, routed: `!command` (run, its output joins the next
//! request), slash commands (`/help`, `/new`, …), `§skill` or `/skill`,
//! Markdown commands, else a turn with the model ([`crate::turn`]). An
//! unknown `/word` is ordinary text for the model.

use maia_tools::{BashInput, ToolInput};
use tokio_util::sync::CancellationToken;

use crate::event::{
    Event, NoticeLevel, StopReason, ToolCallPatch, ToolCallView, ToolContent, ToolStatus,
};
use crate::prompt::PromptPart;
use crate::prompt_syntax;
use crate::session::{Session, fresh_name, replay};
use crate::skills;
use crate::slash::CommandInfo;
pub use crate::slash::{COMMANDS, parse};
use crate::store;
use crate::store::Record;

/// Characters of a `!command`'s output kept for the next request.
const BANG_OUTPUT_CHARS: usize = 30_000;

fn skill_uses_arguments(skill: &skills::Skill) -> bool {
    std::fs::read_to_string(&skill.path)
        .map(|text| text.contains(skills::ARGUMENTS_PLACEHOLDER))
        .unwrap_or(false)
}

impl Session {
    /// Runs a prompt: a slash command, or a turn with the model.
    pub(crate) async fn run_prompt(
        &mut self,
        parts: Vec<PromptPart>,
        cancel: &CancellationToken,
    ) -> StopReason {
        if let [PromptPart::Text(text)] = parts.as_slice() {
            let text = text.clone();
            if let Some(bang) = prompt_syntax::parse_bang(&text) {
                return self.run_bang(bang, &text, cancel).await;
            }
            if let Some((command, args)) = parse(&text) {
                let args = args.to_owned();
                return self.run_command(command, &args, cancel).await;
            }
            let typed_skill = skills::parse_invocation(&text).or_else(|| {
                let rest = text.trim_start().strip_prefix('/')?;
                let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                Some((name, args.trim()))
            });
            if let Some((name, args)) = typed_skill
                && let Some(skill) = self.project.skills.get(name).cloned()
            {
                return self.run_skill(&skill, args, &text, cancel).await;
            }
            if let Some(rest) = text.trim_start().strip_prefix('/') {
                let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                if let Some(command) = self.project.markdown_commands.get(name).cloned() {
                    return self
                        .run_markdown_command(&command, args.trim(), &text, cancel)
                        .await;
                }
            }
        }
        let parts = self.expand_file_refs(parts);
        let stop = self.run_turn(parts, None, cancel).await;
        if stop == StopReason::Cancelled {
            self.report_estimate();
        }
        stop
    }

    /// Adds the files named by `@` references in typed text (MAIA's forms);
    /// an `@` that looks like a path but names nothing gets a warning.
    fn expand_file_refs(&self, parts: Vec<PromptPart>) -> Vec<PromptPart> {
        let mut out = Vec::with_capacity(parts.len());
        for part in parts {
            let PromptPart::Text(text) = &part else {
                out.push(part);
                continue;
            };
            let scan = prompt_syntax::scan_file_refs_in(
                text,
                &self.services.cwd,
                &self.services.roots,
                self.services.options.home.as_deref(),
            );
            for warning in &scan.warnings {
                self.emit(Event::Notice {
                    level: NoticeLevel::Warning,
                    text: warning.to_string(),
                });
            }
            out.extend(scan.prompt_parts(text));
        }
        out
    }

    /// `§name args` or `/name args`: the skill's instructions become the
    /// user's message (no permission: the user typed it).
    async fn run_skill(
        &mut self,
        skill: &skills::Skill,
        args: &str,
        typed: &str,
        cancel: &CancellationToken,
    ) -> StopReason {
        let body = match skills::body(skill, args) {
            Ok(body) => body,
            Err(e) => {
                self.say(format!("Cannot read the skill `{}`: {e}", skill.name));
                return StopReason::EndTurn;
            }
        };
        let mut message = body;
        if !args.is_empty() && !skill_uses_arguments(skill) {
            message.push_str(&format!("\n\nArguments: {args}"));
        }
        self.run_turn(
            vec![PromptPart::Text(message)],
            Some(typed.to_owned()),
            cancel,
        )
        .await
    }

    /// `/name args` for a Markdown command: its text becomes the user's
    /// message, as typed by the user (no permission; nothing is run).
    async fn run_markdown_command(
        &mut self,
        command: &crate::markdown_commands::MarkdownCommand,
        args: &str,
        typed: &str,
        cancel: &CancellationToken,
    ) -> StopReason {
        let message = match crate::markdown_commands::message(command, args) {
            Ok(message) => message,
            Err(e) => {
                self.say(format!("Cannot read the command `/{}`: {e}", command.name));
                return StopReason::EndTurn;
            }
        };
        self.run_turn(
            vec![PromptPart::Text(message)],
            Some(typed.to_owned()),
            cancel,
        )
        .await
    }

    /// `!command`: runs in the working folder without permission rules (the
    /// user typed it), shown as an `execute` tool call; the output joins the
    /// context of the user's next request.
    async fn run_bang(
        &mut self,
        bang: prompt_syntax::BangCommand,
        typed: &str,
        cancel: &CancellationToken,
    ) -> StopReason {
        let command = match bang {
            prompt_syntax::BangCommand::Help => {
                self.say(prompt_syntax::BANG_HELP.to_owned());
                return StopReason::EndTurn;
            }
            prompt_syntax::BangCommand::Run(command) => command,
        };
        self.record(&Record::UserDisplay {
            text: typed.to_owned(),
        });
        let input = ToolInput::Bash(BashInput {
            command: command.clone(),
            timeout_ms: None,
            description: None,
        });
        let mut view = ToolCallView {
            id: format!("tool-{}", uuid::Uuid::new_v4().simple()),
            name: "Bash".to_owned(),
            title: format!("{} (typed by you)", input.title(&self.services.cwd)),
            kind: Some(maia_tools::ToolKind::Execute),
            locations: Vec::new(),
            raw_input: serde_json::json!({ "command": command }),
            status: ToolStatus::InProgress,
            content: Vec::new(),
        };
        self.emit(Event::ToolCall(view.clone()));
        let ctx = maia_tools::ToolContext {
            cwd: self.services.cwd.clone(),
            fs: self.services.fs.clone(),
            reads: self.tools.reads.clone(),
            cancel: cancel.clone(),
            read_guard: None,
            sandbox: self.project.sandbox.clone(),
            // Typed by the user: run here, never in the editor's terminal
            // (docs/tools.md says why).
            terminals: None,
            on_terminal: None,
        };
        let output = match maia_tools::prepare(input, &ctx).await {
            Ok(prepared) => maia_tools::execute(prepared, &ctx).await,
            Err(e) => maia_tools::ToolOutput::error(e.to_string()),
        };
        view.status = if output.is_error {
            ToolStatus::Failed
        } else {
            ToolStatus::Completed
        };
        view.content = vec![ToolContent::Text {
            text: output.content.clone(),
        }];
        self.emit(Event::ToolCallUpdate(ToolCallPatch {
            id: view.id.clone(),
            status: Some(view.status),
            content: Some(view.content.clone()),
            raw_output: None,
        }));
        self.record(&Record::ToolCall { call: view });
        if cancel.is_cancelled() {
            return StopReason::Cancelled;
        }
        self.bang_output.push(format!(
            "The user ran `{command}` in the working folder:\n{}",
            maia_tools::truncate_middle(&output.content, BANG_OUTPUT_CHARS)
        ));
        StopReason::EndTurn
    }

    /// Runs a command; the turn then ends.
    pub(crate) async fn run_command(
        &mut self,
        command: &CommandInfo,
        args: &str,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> StopReason {
        match command.name {
            "mcp" => {
                let report = crate::mcp::report(&self.services.mcp);
                self.say(report);
            }
            "help" => {
                let mut text = String::from("Commands:\n\n");
                // Built-in commands, then skills and Markdown commands.
                for c in self.project.command_entries() {
                    let arg = c.hint.map(|h| format!(" <{h}>")).unwrap_or_default();
                    text.push_str(&format!("- `/{}{arg}` — {}\n", c.name, c.description));
                }
                self.say(text);
            }
            "new" => {
                let saved =
                    (!self.conversation.is_empty()).then(|| self.conversation.name().to_owned());
                let name = self.unused_name();
                self.reset(name);
                self.say(match saved {
                    Some(name) => format!(
                        "Started a new conversation. The previous one is saved as `{name}` (`/load {name}` brings it back)."
                    ),
                    None => "Started a new conversation.".to_owned(),
                });
                self.report_estimate();
            }
            "clear" => {
                let dropped = self.conversation.len();
                self.clear();
                self.say(format!(
                    "Context cleared ({dropped} messages dropped); settings, context file and rules reloaded."
                ));
                self.report_estimate();
            }
            "rename" => {
                if !store::valid_name(args) {
                    self.say(
                        "Usage: `/rename NAME` (letters, digits, spaces, `-`, `_`, `.`)."
                            .to_owned(),
                    );
                } else if store::session_path(&self.services.cwd, args).exists() {
                    self.say(format!("A saved session named `{args}` already exists."));
                } else {
                    let old = self.conversation.name().to_owned();
                    // The journal is copied into its new file: off the runtime.
                    match crate::blocking::off_runtime(|| self.rename(args.to_owned())) {
                        Ok(()) => self.say(format!("Renamed `{old}` to `{args}`.")),
                        Err(e) => self.say(format!("Cannot rename: {e}")),
                    }
                }
            }
            "load" => self.load_command(args),
            "compact" => match self
                .compact(crate::compaction::Trigger::Between, cancel)
                .await
            {
                Ok(()) => self.say(format!(
                    "Conversation compacted; it continues as `{}`.",
                    self.conversation.name()
                )),
                Err(crate::compaction::CompactError::Cancelled) => return StopReason::Cancelled,
                Err(e) => self.say(format!("Not compacted: {e}.")),
            },
            "model" => self.model_command(args, cancel).await,
            "context" => self.context_command(),
            "permissions" => {
                let text = self
                    .project
                    .broker
                    .lock()
                    .map(|b| b.render())
                    .unwrap_or_else(|_| "The rules cannot be read.".to_owned());
                self.say(text);
            }
            _ => self.say(format!("`/{}` is not available.", command.name)),
        }
        StopReason::EndTurn
    }

    /// A fresh name that is neither the current one nor a saved one (a
    /// second `/new` within the same second must not overwrite anything).
    fn unused_name(&self) -> String {
        let base = fresh_name(&self.id);
        let mut name = base.clone();
        let mut n = 2;
        while name == self.conversation.name()
            || store::session_path(&self.services.cwd, &name).exists()
        {
            name = format!("{base}-{n}");
            n += 1;
        }
        name
    }

    fn load_command(&mut self, name: &str) {
        crate::blocking::off_runtime(|| self.load_saved(name));
    }

    fn load_saved(&mut self, name: &str) {
        if !store::valid_name(name) {
            let saved: Vec<String> = store::list(&self.services.cwd)
                .into_iter()
                .map(|s| format!("`{}`", s.name))
                .collect();
            self.say(format!(
                "Usage: `/load NAME`. Saved sessions here: {}",
                if saved.is_empty() {
                    "none".to_owned()
                } else {
                    saved.join(", ")
                }
            ));
            return;
        }
        let path = store::session_path(&self.services.cwd, name);
        let loaded = match store::load(&path) {
            Ok(loaded) => loaded,
            Err(e) => {
                self.say(format!("Cannot load `{name}`: {e}"));
                return;
            }
        };
        // Another thread's conversation continues here as a copy: two
        // threads never write to one file, and that thread keeps its own.
        let (target, intro) = if loaded.header.id == self.id {
            (name.to_owned(), format!("Loaded `{name}`:"))
        } else {
            let copy = self.unused_name();
            let intro = format!("Loaded `{name}` (continued here as `{copy}`):");
            (copy, intro)
        };
        if let Err(e) = self.adopt(target, &loaded) {
            self.say(format!("Cannot load `{name}`: {e}"));
            return;
        }
        self.say(intro);
        for event in replay(&loaded, &self.services.cwd) {
            self.emit(event);
        }
        self.report_estimate();
    }

    async fn model_command(&mut self, args: &str, cancel: &tokio_util::sync::CancellationToken) {
        let listed = match &self.project.llm {
            Ok(llm) => {
                // What the user asks to see is asked afresh (and kept for the rest).
                let listed = self.services.windows.catalogue().refresh(llm, cancel).await;
                if cancel.is_cancelled() {
                    return;
                }
                listed.map_err(|e| e.to_string())
            }
            Err(e) => Err(e.to_string()),
        };
        if args.is_empty() {
            let current_model = self.model.clone();
            let current = current_model
                .clone()
                .unwrap_or_else(|| "(not chosen yet)".into());
            let text = match listed {
                Ok(models) => {
                    let lines: Vec<String> = models
                        .iter()
                        .map(|m| {
                            let mark = if Some(&m.id) == current_model.as_ref() {
                                " ← current"
                            } else {
                                ""
                            };
                            format!("- `{}`{mark}", m.id)
                        })
                        .collect();
                    format!(
                        "Model in use: `{current}`\n\nAvailable:\n{}",
                        lines.join("\n")
                    )
                }
                Err(e) => {
                    format!("Model in use: `{current}`\n\nThe model list could not be read: {e}")
                }
            };
            self.say(text);
            return;
        }
        let known = listed
            .as_ref()
            .map(|models| models.iter().any(|m| m.id == args))
            .unwrap_or(true);
        if !known {
            self.say(format!(
                "`{args}` is not among the endpoint's models; see `/model`."
            ));
            return;
        }
        self.model = Some(args.to_owned());
        self.emit(Event::ModelChanged(args.to_owned()));
        self.say(format!("Now using `{args}`."));
    }

    fn context_command(&self) {
        let system = self.system_prompt();
        let tools = self.tool_chars();
        let messages: usize = crate::compaction::message_chars(self.conversation.history());
        let context_file = match &self.project.context_file {
            Some(f) => format!(
                "`{}` (~{} tokens)",
                f.path.display(),
                self.meter.calibrated(f.text.len())
            ),
            None => "none (no MAIA.md, CLAUDE.md or AGENTS.md here)".to_owned(),
        };
        let model = self.model.clone();
        // The meter's numbers: what the last usage_update said, or would say.
        let used = self.context_tokens();
        let meter = match self.meter.window {
            Some(window) => format!(
                "{used} of {window} tokens ({:.0} %)",
                used as f64 * 100.0 / window.max(1) as f64
            ),
            None => format!("{used} tokens (window unknown: no meter)"),
        };
        let source = match self.context_source() {
            "measured" => {
                "measured: the server's last usage (prompt + answer, reasoning excluded), plus an estimate of what came since"
            }
            _ => "estimated: ~4 characters per token",
        };
        let window_source = match self.meter.window_source {
            Some(source) => format!(" (from {source})"),
            None => String::new(),
        };
        let last = match &self.meter.last_usage {
            Some(u) => format!(
                "prompt {} + answer {} tokens ({} of them reasoning, not kept); cached: {} read, {} written",
                u.prompt_tokens,
                u.completion_tokens,
                u.reasoning_tokens,
                u.cached_tokens,
                u.cache_write_tokens
            ),
            None => "none yet".to_owned(),
        };
        let caching = model.as_deref().map_or("no model yet", |m| {
            if self.prompt_caching(m) {
                "on (cache_control marks on the system message and the last two messages)"
            } else {
                "off"
            }
        });
        let summary_model = self
            .project
            .settings
            .small_model
            .clone()
            .or_else(|| model.clone())
            .unwrap_or_else(|| "(not chosen yet)".into());
        let text = format!(
            "Context of `{name}`:\n\n\
             - in use: {meter}, {source}\n\
             - calibration: {ratio:.2} real tokens per estimated token\n\
             - model: `{model}`, context window: {window}{window_source}\n\
             - system prompt: ~{sys} tokens\n\
             - context file: {context_file}\n\
             - tool definitions: ~{tools} tokens\n\
             - messages: {count} (~{msgs} tokens)\n\
             - pending items: {pending}\n\
             - last response: {last}\n\
             - cached prompt tokens this session: {cached}\n\
             - prompt caching: {caching}\n\
             - summaries written by: `{summary_model}`\n\
             - tool calls written as text: {retried} retried, {shown} shown as text",
            name = self.conversation.name(),
            ratio = self.meter.calibration,
            sys = self.meter.calibrated(system.len()),
            tools = self.meter.calibrated(tools),
            count = self.conversation.len(),
            msgs = self.meter.calibrated(messages),
            pending = self.bang_output.len(),
            model = model.unwrap_or_else(|| "(not chosen yet)".into()),
            window = self
                .meter
                .window
                .map_or_else(|| "unknown".to_owned(), |w| format!("{w} tokens")),
            cached = self.meter.cached_total,
            retried = self.meter.text_tool_calls.retried,
            shown = self.meter.text_tool_calls.shown,
        );
        let text = format!("{text}{}", self.workspace_report());
        self.say(text);
    }

    /// The `/context` lines about the workspace folders.
    fn workspace_report(&self) -> String {
        let mut out = format!(
            "\n- working folder: `{}`\n- additional workspace folders:",
            self.services.cwd.display()
        );
        if self.services.roots.is_empty() {
            out.push_str(" none");
        }
        for root in &self.services.roots {
            out.push_str(&format!("\n  - `{}`", root.display()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_commands_only() {
        assert_eq!(parse("/help").map(|(c, a)| (c.name, a)), Some(("help", "")));
        assert_eq!(
            parse("  /rename my work ").map(|(c, a)| (c.name, a)),
            Some(("rename", "my work"))
        );
        assert!(parse("/unknown thing").is_none());
        assert!(parse("hello /help").is_none());
        assert!(parse("/").is_none());
    }
}
