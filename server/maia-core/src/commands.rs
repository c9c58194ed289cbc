//! Slash commands typed at the start of a prompt (`/help`, `/new`, …).
//! An unknown `/word` is ordinary text for the model.

use crate::event::{Event, StopReason};
use crate::session::{Session, fresh_name, replay};
use crate::slash::CommandInfo;
pub use crate::slash::{COMMANDS, parse};
use crate::store;

impl Session {
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
