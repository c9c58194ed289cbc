//! The turn loop: send the conversation to the model, stream its answer,
//! run the tools it asks for, and repeat until it answers without tools.
//!
//! Invariants: every assistant message with tool calls is followed in the
//! history by one tool message per call (also when cancelled); a failed
//! model request ends the turn with a message to the user, never a
//! protocol error; partial text already streamed is kept.

use std::ops::ControlFlow;

use maia_llm::{ChatMessage, ChatRequest, Completion, Delta, LlmError};
use tokio_util::sync::CancellationToken;

use crate::compaction::CompactError;
use crate::event::{Event, StopReason};
use crate::images;
use crate::prompt::{PromptPart, build_user_message};
use crate::session::Session;
use crate::session::round::{Answered, TurnLoop};
use crate::session::text::{display_text, new_message_id, title_from, title_text};
use crate::store::Record;
use crate::system_prompt;
use crate::telemetry::ModelRequest;

impl Session {
    /// The model to use: forced, configured, else the first listed.
    pub(crate) async fn resolve_model(
        &mut self,
        cancel: &CancellationToken,
    ) -> Result<String, String> {
        self.apply_changes();
        if let Some(model) = self.model.clone() {
            return Ok(model);
        }
        let llm = self.project.llm.as_ref().map_err(|e| e.to_string())?;
        let listed = self.services.windows.catalogue().list(llm, cancel).await;
        if cancel.is_cancelled() {
            return Err(String::new());
        }
        match listed {
            Ok(models) => match crate::session::default_model(models.iter().map(|m| m.id.as_str()))
            {
                Some(first) => {
                    tracing::info!(model = %first, "using the first model listed");
                    self.use_model(Some(first.to_owned()));
                    Ok(first.to_owned())
                }
                None => Err(format!(
                    "no model is configured and {} lists none",
                    self.project
                        .settings
                        .llm
                        .join(&self.project.settings.llm.models_endpoint)
                )),
            },
            Err(e) => Err(format!(
                "no model is configured and the model list at {} could not be read: {e}",
                self.project
                    .settings
                    .llm
                    .join(&self.project.settings.llm.models_endpoint)
            )),
        }
    }

    pub(crate) fn system_prompt(&self) -> String {
        self.system_prompt_for(false)
    }

    /// Which doctrine starts the system prompt, for `/context`.
    pub(crate) fn doctrine_in_force(&self) -> String {
        match &self.project.system_md {
            Some(own) => format!(
                "from {} (replaces the built-in doctrine)",
                own.path.display()
            ),
            None if self.text_mode => {
                "the text-mode doctrine (the model edits with text blocks)".to_owned()
            }
            None => format!(
                "the built-in doctrine ({} bytes) and the environment",
                system_prompt::DOCTRINE.len()
            ),
        }
    }

    /// The system prompt; `text_mode` for a turn in text mode.
    pub(crate) fn system_prompt_for(&self, text_mode: bool) -> String {
        if let Some(own) = self.role.as_ref().and_then(|r| r.prompt.as_deref()) {
            // A subagent's own prompt, with where it works.
            let mut prompt = format!(
                "{own}\n\nWorking folder: {}\nPlatform: {}",
                self.services.cwd.display(),
                std::env::consts::OS
            );
            if let Some(section) = self.tool_set_section() {
                prompt.push_str("\n\n");
                prompt.push_str(section);
            }
            return prompt;
        }
        let skills = crate::skills::prompt_section(&self.project.skills.skills);
        let mcp = crate::mcp::instructions_section(&self.mcp_instructions());
        let mut prompt = system_prompt::build(&system_prompt::Parts {
            system_md: self.project.system_md.as_ref(),
            context_files: &self.project.context_files.files,
            summary: self.conversation.summary(),
            skills: skills.as_deref(),
            mcp_instructions: mcp.as_deref(),
            environment: &self.turn.environment,
            text_mode,
        });
        if let Some(roots) = crate::workspace::prompt_section(&self.services.roots) {
            prompt.push_str("\n\n");
            prompt.push_str(&roots);
        }
        if let Some(section) = self.tool_set_section() {
            prompt.push_str("\n\n");
            prompt.push_str(section);
        }
        prompt
    }

    pub(crate) async fn run_turn(
        &mut self,
        parts: Vec<PromptPart>,
        display: Option<String>,
        cancel: &CancellationToken,
    ) -> StopReason {
        self.refresh_agents();
        self.turn.take_halted();
        self.begin_turn_budget();
        // A child's prompt is the model's task: no `UserPromptSubmit`.
        let hook_context = match self.role {
            Some(_) => Vec::new(),
            None => {
                let prompt = display.clone().unwrap_or_else(|| display_text(&parts));
                match self.prompt_hooks(&prompt, cancel).await {
                    super::hooks::PromptVerdict::Go(context) => context,
                    super::hooks::PromptVerdict::Refused => return StopReason::EndTurn,
                }
            }
        };
        self.turn.environment =
            system_prompt::environment::section(&self.services.cwd, &self.services.lsp.running())
                .await;
        let message = build_user_message(&parts, self.services.fs.as_ref()).await;
        // What the model was given of a file counts as read for Edit.
        for (path, text) in &message.seen {
            self.tools.reads.record(path, text);
        }
        let mut user_text = message.text;
        if !self.bang_output.is_empty() {
            let pending = std::mem::take(&mut self.bang_output).join("\n\n");
            user_text = format!("{pending}\n\n{user_text}");
        }
        if let Some(notes) = self.task_notes() {
            user_text = format!("{notes}\n\n{user_text}");
        }
        let mut context = self.take_hook_context();
        context.extend(hook_context);
        if !context.is_empty() {
            user_text = format!("{user_text}\n\n[hook context]\n{}", context.join("\n"));
        }
        let titled = display.clone().unwrap_or_else(|| title_text(&parts));
        let display = display.unwrap_or_else(|| display_text(&parts));
        let turn_start = self.conversation.len();
        self.conversation.mark_turn();
        self.begin_checkpoints();
        let message_id = new_message_id();
        self.record(&Record::UserDisplay {
            id: message_id.clone(),
            text: display.clone(),
            steer: false,
        });
        self.emit(Event::UserMessageSaved {
            message_id: message_id.clone(),
        });
        for refused in &message.refused {
            self.say(format!("**Image not attached**: {refused}.\n\n"));
        }
        let shown = self
            .attach_images(&mut user_text, message.images, cancel)
            .await;
        self.push_message(ChatMessage::user(user_text.clone()));
        if !shown.is_empty() {
            self.turn
                .images
                .push((images::Anchor::User(user_text), shown));
        }
        self.turn.prompt = Some(crate::session::TurnPrompt {
            index: turn_start,
            display: display.clone(),
            id: message_id,
        });
        // Titled from the first message, early in the file (listing reads
        // only the start of each file).
        if self.conversation.title().is_none()
            && let Some(title) = title_from(&titled)
        {
            self.record(&Record::Title {
                title: title.clone(),
                source: crate::store::TitleSource::Prompt,
            });
            self.emit(Event::Title(title));
        }
        let mut stop = self.model_loop(cancel).await;
        // `Stop` hooks may send the model back to work, a bounded number
        // of times (docs/hooks.md).
        let mut continued = 0;
        let mut halted = false;
        while stop == StopReason::EndTurn {
            if self.turn.take_halted() {
                halted = true;
                break;
            }
            let Some(reason) = self.stop_hooks(continued, cancel).await else {
                break;
            };
            continued += 1;
            self.push_message(ChatMessage::user(format!("[Stop hook feedback]\n{reason}")));
            stop = self.model_loop(cancel).await;
        }
        self.turn.prompt = None;
        self.end_fallback();
        // Images are ephemeral: later turns see their stand-ins only.
        self.turn.images.clear();
        // Checked after each turn too; reported before the turn's end. Not
        // after a turn that failed: its failure (a provider that rejected
        // even the compacted request, a broken connection) would only
        // repeat; the next request checks again.
        if stop == StopReason::EndTurn
            && !halted
            && self.needs_compaction()
            && let Err(CompactError::Cancelled) = self.compact_with_hooks("auto", cancel).await
        {
            stop = StopReason::Cancelled;
        }
        stop
    }

    /// Tells the user their message cannot fit and takes it out of the
    /// model's history (the journal keeps what they saw).
    pub(super) fn refuse_prompt(&mut self, error: &CompactError) -> StopReason {
        if let Some(prompt) = self.turn.prompt.take() {
            self.conversation.truncate(prompt.index);
        }
        self.fail(format!("\n\n**Not sent**: {error}.\n"))
    }

    /// Whether requests to `model` carry prompt-caching marks: the
    /// `promptCaching` setting, else Anthropic-family models per `/model/info`.
    pub(crate) fn prompt_caching(&self, model: &str) -> bool {
        if let Some(forced) = self.project.settings.prompt_caching {
            return forced;
        }
        self.project.llm.as_ref().is_ok_and(|llm| {
            self.services
                .windows
                .model_info(llm, model)
                .is_some_and(|e| e.is_anthropic_family())
        })
    }

    /// The turn number the next user message has in the model's history.
    pub(super) fn next_turn(&self) -> usize {
        self.conversation
            .history()
            .iter()
            .filter(|m| matches!(m, ChatMessage::User { .. }))
            .count()
            + 1
    }

    /// The turn's model requests: once [`Session::start_loop`] found the
    /// model and its window, each round is [`Session::before_request`],
    /// [`Session::request`], then [`Session::on_error`] or
    /// [`Session::on_answer`], then [`Session::after_tools`] when the
    /// answer asked for tools, until a step ends the turn.
    async fn model_loop(&mut self, cancel: &CancellationToken) -> StopReason {
        let mut state = match self.start_loop(cancel).await {
            Ok(state) => state,
            Err(stop) => return stop,
        };
        if state.text_mode {
            // Text mode shows the files the prompt names.
            let prompt = self.turn.prompt.as_ref().map(|p| p.display.clone());
            let files = self
                .files_text(prompt.as_deref().unwrap_or(""), &mut state)
                .await;
            // The files, then the request again and the format: what a
            // small model reads last is what it does.
            self.push_message(ChatMessage::user(format!(
                "{files}\n\n{}\n\n{}",
                prompt.as_deref().unwrap_or(""),
                crate::text_edits::REMINDER
            )));
        }
        loop {
            if let ControlFlow::Break(stop) = self.before_request(&mut state, cancel).await {
                return stop;
            }
            let sent = match self.request(&mut state, cancel).await {
                ControlFlow::Continue(sent) => sent,
                ControlFlow::Break(stop) => return stop,
            };
            let completion = match sent.result {
                Ok(completion) => completion,
                Err(error) => {
                    self.show_held(sent.held);
                    match self
                        .on_error(error, sent.partial, sent.size, &mut state, cancel)
                        .await
                    {
                        ControlFlow::Continue(()) => continue,
                        ControlFlow::Break(stop) => return stop,
                    }
                }
            };
            let (calls, as_text) = match self
                .on_answer(completion, sent.held, sent.size, &mut state, cancel)
                .await
            {
                Answered::Retry | Answered::Again => continue,
                Answered::Stop(stop) => return stop,
                Answered::Tools(calls) => (calls, false),
                Answered::TextSteps(calls) => (calls, true),
            };
            if let ControlFlow::Break(stop) =
                self.after_tools(&calls, as_text, &mut state, cancel).await
            {
                return stop;
            }
        }
    }

    /// Before the first request: a model to ask, its window, the MCP
    /// servers ready, a prompt that fits; then the loop's state with the
    /// first round's tools.
    async fn start_loop(&mut self, cancel: &CancellationToken) -> Result<TurnLoop, StopReason> {
        if cancel.is_cancelled() {
            return Err(StopReason::Cancelled);
        }
        if let Err(e) = &self.project.llm {
            return Err(self.fail(format!(
                "MAIA cannot reach a model: {e}. Check `LiteLLM_URL` in .maia/settings.json."
            )));
        }
        let model = match self.resolve_model(cancel).await {
            Ok(model) => self.turn_model(model),
            Err(_) if cancel.is_cancelled() => return Err(StopReason::Cancelled),
            Err(e) => {
                return Err(self.fail(format!(
                    "MAIA cannot start: {e}. Set `model` in .maia/settings.json or start MAIA with --model."
                )));
            }
        };
        self.learn_window(&model, cancel).await;
        crate::mcp::wait_for_servers(&self.services.mcp, &self.services.events, cancel).await;
        self.project.probe_web_search(cancel).await;
        if cancel.is_cancelled() {
            return Err(StopReason::Cancelled);
        }
        if let Some((message, fixed, window)) = self.prompt_overflow() {
            return Err(self.refuse_prompt(&CompactError::PromptTooLarge {
                message,
                fixed,
                window,
            }));
        }
        Ok(self.turn_loop(model))
    }

    /// The context window of `model`, from the settings, the endpoint or
    /// the model itself (cached, on disk for the model's answer), without
    /// waiting for the model to answer (see [`crate::window::resolve_quick`]).
    pub(crate) async fn known_window(
        &self,
        model: &str,
        cancel: &CancellationToken,
    ) -> Option<crate::window::Window> {
        let llm = self.project.llm.as_ref().ok()?;
        let window = crate::window::resolve_quick(
            &self.services.windows,
            llm,
            model,
            &self.project.settings.context_windows,
            cancel,
        )
        .await?;
        tracing::debug!(
            model,
            tokens = window.tokens,
            source = window.source.as_str(),
            "context window"
        );
        Some(window)
    }

    /// One model request, streaming text and reasoning to the front door.
    /// Returns the result and the text streamed so far.
    /// Streams `request`: the answer's text shown as it comes, except
    /// what `gate` holds back as possible tool calls written as text
    /// (returned in [`Streamed::held`], for the caller to show or not).
    pub(super) async fn stream(
        &self,
        request: &ChatRequest,
        gate: bool,
        cancel: &CancellationToken,
    ) -> Streamed {
        let message_id = new_message_id();
        let llm = match &self.project.llm {
            Ok(llm) => llm,
            Err(e) => {
                return Streamed {
                    result: Err(e.clone()),
                    partial: String::new(),
                    thought: String::new(),
                    held: Held::default(),
                };
            }
        };
        let thought_id = new_message_id();
        let events = self.services.events.clone();
        let mut partial = String::new();
        let mut thought = String::new();
        let mut gate = crate::text_tool_calls::Gate::new(gate);
        let mut on_delta = |delta: Delta| match delta {
            Delta::Text(text) => {
                partial.push_str(&text);
                if let Some(text) = gate.push(&text) {
                    let _ = events.send(Event::AgentText {
                        message_id: message_id.clone(),
                        text,
                    });
                }
            }
            Delta::Reasoning(text) => {
                thought.push_str(&text);
                let _ = events.send(Event::Thought {
                    message_id: thought_id.clone(),
                    text,
                });
            }
            Delta::Retrying {
                attempt,
                wait,
                reason,
            } => {
                let _ = events.send(Event::Thought {
                    message_id: new_message_id(),
                    text: format!(
                        "The model endpoint failed ({reason}); retry {attempt} in {:.1} s.\n",
                        wait.as_secs_f32()
                    ),
                });
            }
            Delta::ToolCallStarted { .. } => {}
        };
        let started = std::time::SystemTime::now();
        let result = llm.stream_chat(request, cancel, &mut on_delta).await;
        let report = ModelRequest::ended(&request.model, started, &result, &partial);
        let _ = self.services.events.send(Event::ModelRequest(report));
        Streamed {
            result,
            partial,
            thought,
            held: Held {
                text: gate.take_held(),
                message_id,
            },
        }
    }

    /// Shows what a reply's gate held back (it was not calls).
    pub(crate) fn show_held(&self, held: Held) {
        if !held.text.is_empty() {
            self.emit(Event::AgentText {
                message_id: held.message_id,
                text: held.text,
            });
        }
    }
}

/// A streamed request: its result, the text that came before any failure,
/// the reasoning, and the text held back unshown.
pub(super) struct Streamed {
    pub(super) result: Result<Completion, LlmError>,
    pub(super) partial: String,
    pub(super) thought: String,
    pub(super) held: Held,
}

/// The text of a reply held back while it streamed, under the message id
/// its shown part (if any) used.
#[derive(Debug, Default)]
pub(crate) struct Held {
    pub(crate) message_id: String,
    pub(crate) text: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use maia_llm::ToolCall;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "Read".into(),
            arguments: "{}".into(),
        }
    }

    #[test]
    fn repair_drops_orphan_results_and_fills_missing_ones() {
        use crate::conversation::repair_history;
        let mut history = vec![
            ChatMessage::user("hi"),
            ChatMessage::tool("ghost", "stray"),
            ChatMessage::Assistant {
                content: None,
                tool_calls: vec![call("a"), call("b")],
            },
            ChatMessage::tool("b", "done"),
            ChatMessage::user("next"),
        ];
        repair_history(&mut history);
        let roles: Vec<_> = history.iter().map(ChatMessage::role).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "tool", "user"]);
        assert!(
            matches!(&history[2], ChatMessage::Tool { tool_call_id, .. } if tool_call_id == "b")
        );
        assert!(
            matches!(&history[3], ChatMessage::Tool { tool_call_id, content } if tool_call_id == "a" && content.contains("no result"))
        );
        let mut trailing = vec![ChatMessage::Assistant {
            content: None,
            tool_calls: vec![call("c")],
        }];
        repair_history(&mut trailing);
        assert_eq!(trailing.len(), 2);
    }
}
