//! The turn loop: send the conversation to the model, stream its answer,
//! run the tools it asks for, and repeat until it answers without tools.
//!
//! Invariants: every assistant message with tool calls is followed in the
//! history by one tool message per call (also when cancelled); a failed
//! model request ends the turn with a message to the user, never a
//! protocol error; partial text already streamed is kept.

use maia_llm::{ChatMessage, ChatRequest, Completion, Delta, FinishReason, LlmError};
use tokio_util::sync::CancellationToken;

use crate::compaction::{CompactError, Trigger};
use crate::event::{Event, StopReason};
use crate::images;
use crate::prompt::{PromptPart, build_user_message};
use crate::session::Session;
use crate::session::text::{
    LoopGuard, describe_failure, display_text, new_message_id, title_from, title_text,
};
use crate::store::Record;
use crate::system_prompt;

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
        let mut prompt = system_prompt::build(
            &self.services.cwd,
            self.project.context_file.as_ref(),
            self.conversation.summary(),
            crate::skills::prompt_section(&self.project.skills.skills).as_deref(),
        );
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
            });
            self.emit(Event::Title(title));
        }
        let mut stop = self.model_loop(cancel).await;
        self.turn.prompt = None;
        // Images are ephemeral: later turns see their stand-ins only.
        self.turn.images.clear();
        if stop == StopReason::EndTurn && self.needs_compaction() {
            // Checked after each turn too; reported before the turn's end.
            if let Err(CompactError::Cancelled) = self.compact(Trigger::Between, cancel).await {
                stop = StopReason::Cancelled;
            }
        }
        stop
    }

    /// Tells the user their message cannot fit and takes it out of the
    /// model's history (the journal keeps what they saw).
    fn refuse_prompt(&mut self, error: &CompactError) -> StopReason {
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

    /// The characters one tool result may take: its share of the window.
    fn tool_result_limit(&self) -> Option<usize> {
        let window = self.meter.window?;
        let tokens = window as f64 * self.project.settings.tool_result_share;
        Some((tokens * 4.0 / self.meter.calibration.max(0.1)) as usize)
    }

    /// After a compaction that kept the turn's prompt: the turn's images
    /// (of the prompt and of tool results now summarised) go on with it.
    fn keep_images_with_prompt(&mut self) {
        if self.turn.images.is_empty() {
            return;
        }
        let Some(ChatMessage::User { content, .. }) = self
            .turn
            .prompt
            .as_ref()
            .and_then(|p| self.conversation.history().get(p.index))
        else {
            return;
        };
        let anchor = images::Anchor::User(content.clone());
        let all: Vec<maia_tools::ImageData> = self
            .turn
            .images
            .drain(..)
            .flat_map(|(_, images)| images)
            .collect();
        self.turn.images.push((anchor, all));
    }

    /// The turn number the next user message has in the model's history.
    fn next_turn(&self) -> usize {
        self.conversation
            .history()
            .iter()
            .filter(|m| matches!(m, ChatMessage::User { .. }))
            .count()
            + 1
    }

    /// The model in use and whether it is shown images.
    async fn vision(&mut self, cancel: &CancellationToken) -> Option<(String, images::Vision)> {
        let model = self.resolve_model(cancel).await.ok()?;
        let llm = self.project.llm.as_ref().ok()?;
        let prefetched = self
            .services
            .windows
            .model_info(llm, &model)
            .and_then(|entry| entry.supports_vision);
        let vision = images::sees_images(
            &self.services.vision,
            llm,
            &model,
            &self.project.settings.vision_models,
            prefetched,
            cancel,
        )
        .await;
        tracing::debug!(model, ?vision, "vision");
        Some((model, vision))
    }

    /// Stores the prompt's images beside the journal and records them for
    /// replay; names them in `text` as shown, or as not shown when the model
    /// does not accept images (and tells the user). Returns those to show.
    pub(super) async fn attach_images(
        &mut self,
        text: &mut String,
        found: Vec<maia_tools::ImageData>,
        cancel: &CancellationToken,
    ) -> Vec<maia_tools::ImageData> {
        if found.is_empty() {
            return found;
        }
        for image in &found {
            match images::store(&self.services.cwd, image) {
                Ok(image) => self.record(&Record::UserImage { image }),
                Err(e) => tracing::warn!("cannot store an image of the conversation: {e}"),
            }
        }
        let turn = self.next_turn();
        let vision = self.vision(cancel).await;
        let mut lines = Vec::with_capacity(found.len());
        let shown = match &vision {
            Some((_, v)) if v.sees() => {
                lines.extend(found.iter().map(|i| images::stand_in(i, turn)));
                found
            }
            Some((model, v)) => {
                self.say(images::not_shown_to_user(found.len(), model, *v));
                lines.extend(found.iter().map(|i| images::not_shown(i, model)));
                Vec::new()
            }
            // No model: the turn fails and says why.
            None => {
                lines.extend(found.iter().map(|i| images::not_shown(i, "(none)")));
                Vec::new()
            }
        };
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&lines.join("\n"));
        shown
    }

    /// Names a response's tool images in their results: kept for the
    /// turn's requests when the model accepts images (within the per-message
    /// limits), else said to be not shown.
    async fn attach_tool_images(
        &mut self,
        results: &mut [ChatMessage],
        found: Vec<Vec<maia_tools::ImageData>>,
        cancel: &CancellationToken,
    ) {
        if found.iter().all(Vec::is_empty) {
            return;
        }
        let turn = self.next_turn().saturating_sub(1).max(1);
        let vision = self.vision(cancel).await;
        let (mut count, mut bytes) = (0usize, 0usize);
        for (message, images_of_call) in results.iter_mut().zip(found) {
            let ChatMessage::Tool {
                tool_call_id,
                content,
            } = message
            else {
                continue;
            };
            let mut shown = Vec::new();
            for image in images_of_call {
                let line = match &vision {
                    Some((_, v)) if v.sees() => {
                        count += 1;
                        bytes += image.bytes.len();
                        if count > maia_tools::image::MAX_IMAGES_PER_MESSAGE {
                            format!(
                                "[Image {} not shown: more than {} images in one response's results]",
                                image.name,
                                maia_tools::image::MAX_IMAGES_PER_MESSAGE
                            )
                        } else if bytes > maia_tools::image::MAX_MESSAGE_IMAGE_BYTES {
                            format!(
                                "[Image {} not shown: the images of one response's results may not pass {}]",
                                image.name,
                                maia_tools::image::human_size(
                                    maia_tools::image::MAX_MESSAGE_IMAGE_BYTES as u64
                                )
                            )
                        } else {
                            let line = images::stand_in(&image, turn);
                            shown.push(image);
                            line
                        }
                    }
                    Some((model, _)) => images::not_shown(&image, model),
                    None => images::not_shown(&image, "(none)"),
                };
                content.push('\n');
                content.push_str(&line);
            }
            if !shown.is_empty() {
                self.turn
                    .images
                    .push((images::Anchor::Tool(tool_call_id.clone()), shown));
            }
        }
    }

    async fn model_loop(&mut self, cancel: &CancellationToken) -> StopReason {
        if cancel.is_cancelled() {
            return StopReason::Cancelled;
        }
        if let Err(e) = &self.project.llm {
            return self.fail(format!(
                "MAIA cannot reach a model: {e}. Check `LiteLLM_URL` in .maia/settings.json."
            ));
        }
        let model = match self.resolve_model(cancel).await {
            Ok(model) => model,
            Err(_) if cancel.is_cancelled() => return StopReason::Cancelled,
            Err(e) => {
                return self.fail(format!(
                    "MAIA cannot start: {e}. Set `model` in .maia/settings.json or start MAIA with --model."
                ));
            }
        };
        let window = self.known_window(&model, cancel).await;
        self.meter.window = window.map(|w| w.tokens);
        self.meter.window_source = window.map(|w| w.source.as_str());
        crate::mcp::wait_for_servers(&self.services.mcp, &self.services.events, cancel).await;
        if cancel.is_cancelled() {
            return StopReason::Cancelled;
        }
        if let Some((message, fixed, window)) = self.prompt_overflow() {
            return self.refuse_prompt(&CompactError::PromptTooLarge {
                message,
                fixed,
                window,
            });
        }
        let mut tools = self.tool_specs();
        let mut tool_names: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
        let cache = self.prompt_caching(&model);
        let mut requests = 0u32;
        let mut compacted = false;
        let mut guard = LoopGuard::default();
        // A reply that wrote a tool call as text, retried once with a correction.
        let mut correction: Option<String> = None;
        let mut corrected = false;
        loop {
            if requests >= self.project.settings.max_turn_requests {
                self.say(format!(
                    "Stopped after {requests} model requests in this turn (max_turn_requests)."
                ));
                return StopReason::MaxTurnRequests;
            }
            requests += 1;
            // A conversation that is only the kept prompt cannot shrink
            // further (what is left over is the turn's images).
            let just_compacted = compacted && self.conversation.len() <= 1;
            if !just_compacted && self.needs_compaction() {
                match self.compact(Trigger::InTurn, cancel).await {
                    Ok(()) => {
                        compacted = true;
                        self.keep_images_with_prompt();
                    }
                    Err(CompactError::Cancelled) => return StopReason::Cancelled,
                    Err(e @ CompactError::PromptTooLarge { .. }) => return self.refuse_prompt(&e),
                    Err(CompactError::Empty) => {}
                    Err(e) => tracing::warn!("automatic compaction: {e}"),
                }
            }
            // The history is repaired in the copy sent, never in place: the
            // turn's prompt index and the journal stay true.
            let mut messages = Vec::with_capacity(self.conversation.len() + 3);
            messages.push(ChatMessage::System {
                content: self.system_prompt(),
            });
            messages.extend(self.conversation.history().iter().cloned());
            crate::conversation::repair_history(&mut messages);
            if let Some(text) = correction.take() {
                messages.push(ChatMessage::assistant(text));
                messages.push(ChatMessage::user(crate::text_tool_calls::CORRECTION));
            }
            let request = ChatRequest {
                model: model.clone(),
                messages,
                tools: tools.clone(),
                max_tokens: None,
                cache,
                reasoning_effort: self.reasoning_effort(&model),
            };
            // Measured without the images, whose tokens are counted apart.
            let request_chars = serde_json::to_string(&request.body())
                .map(|b| b.len())
                .unwrap_or(0);
            let shown = images::within_request_limits(&self.turn.images);
            let image_tokens = images::overlay_tokens(&shown);
            let request = ChatRequest {
                messages: images::with_images(request.messages, &shown),
                ..request
            };
            let (result, partial, thought) = self.stream(&request, cancel).await;
            if !thought.is_empty() {
                self.record(&Record::Thought { text: thought });
            }
            let completion = match result {
                Ok(c) => c,
                Err(LlmError::Cancelled) => {
                    if !partial.is_empty() {
                        self.push_message(ChatMessage::assistant(partial));
                    }
                    return StopReason::Cancelled;
                }
                Err(LlmError::ContextWindowExceeded { message })
                    if !compacted && partial.is_empty() =>
                {
                    // The model is the final judge of its window: compact once and retry.
                    compacted = true;
                    let rejected = self.meter.calibrated(request_chars);
                    if let Some(told) = crate::compaction::window_from_error(&message)
                        && self.meter.window.is_none_or(|w| told < w)
                    {
                        tracing::info!(
                            model,
                            tokens = told,
                            "context window told by the provider's error"
                        );
                        self.meter.window = Some(told);
                        self.meter.window_source = Some("providerError");
                    }
                    tracing::info!(rejected, window = ?self.meter.window, "request over the context window");
                    match self.compact(Trigger::Rejected(rejected), cancel).await {
                        Ok(()) => {
                            self.keep_images_with_prompt();
                            continue;
                        }
                        Err(CompactError::Cancelled) => return StopReason::Cancelled,
                        Err(e @ CompactError::PromptTooLarge { .. }) => {
                            return self.refuse_prompt(&e);
                        }
                        Err(CompactError::Empty) => {
                            let window = self
                                .meter
                                .window
                                .map_or_else(String::new, |w| format!(" of {w} tokens"));
                            return self.refuse_prompt(&CompactError::Failed(format!(
                                "the model rejected the request (about {rejected} tokens) as larger than its context window{window}, and there is nothing before your message to summarise. Shorten it or attach less, then send it again"
                            )));
                        }
                        Err(e) => {
                            return self.fail(format!(
                                "\n\n**The conversation no longer fits in the model's context window** and could not be compacted: {e}\n"
                            ));
                        }
                    }
                }
                Err(e) => {
                    if !partial.is_empty() {
                        self.push_message(ChatMessage::assistant(partial));
                    }
                    tracing::warn!(error = %e, "model request failed");
                    if let (LlmError::Authentication { .. }, Ok(llm)) = (&e, &self.project.llm) {
                        self.services.windows.catalogue().refused(llm.config());
                    }
                    let url = self
                        .project
                        .llm
                        .as_ref()
                        .map(|c| c.chat_url())
                        .unwrap_or_default();
                    return self.fail(describe_failure(&e, &url));
                }
            };
            let Completion {
                text,
                tool_calls,
                finish_reason,
                usage,
                response_cost,
                ..
            } = completion;
            // The turn's usage is what the server billed, believed or not.
            if let Some(usage) = &usage {
                self.turn
                    .usage
                    .get_or_insert_with(Default::default)
                    .add(usage);
            }
            // Numbers no request of this size has (a proxy's bug) are not
            // believed: the estimate stands in for them.
            let answer_chars = crate::meter::message_chars(&[ChatMessage::Assistant {
                content: Some(text.clone()),
                tool_calls: tool_calls.clone(),
            }]);
            let usage = usage.filter(|u| {
                let believable = crate::compaction::believable_usage(
                    u,
                    image_tokens,
                    request_chars + answer_chars,
                );
                if !believable {
                    tracing::warn!(model, usage = ?u, "usage numbers out of all proportion to the request; ignored");
                }
                believable
            });
            self.charge(&model, usage.as_ref(), response_cost, cancel)
                .await;
            if let (Some(usage), Some(size)) = (&usage, self.meter.window) {
                // What stays in the conversation: the prompt and the answer
                // (reasoning is not kept).
                self.emit_usage(usage.kept(), size);
            }
            if let Some(usage) = &usage {
                self.meter.cached_total =
                    self.meter.cached_total.saturating_add(usage.cached_tokens);
                self.meter.last_usage = Some(usage.clone());
            }
            if tool_calls.is_empty()
                && finish_reason != Some(FinishReason::Length)
                && let Some(what) = crate::text_tool_calls::detect(&text, &tool_names)
            {
                if !corrected {
                    corrected = true;
                    self.meter.text_tool_calls.retried += 1;
                    tracing::warn!(model, form = %what, "a tool call came as text; retrying once with a correction");
                    correction = Some(text);
                    if let Some(usage) = &usage {
                        self.meter.calibrate(usage.prompt_tokens, request_chars);
                    }
                    continue;
                }
                self.meter.text_tool_calls.shown += 1;
                tracing::warn!(model, form = %what, "a tool call came as text again; shown as text");
            }
            self.push_message(ChatMessage::Assistant {
                content: (!text.is_empty()).then_some(text),
                tool_calls: tool_calls.clone(),
            });
            if let Some(usage) = &usage {
                // Without the images: they leave the context with the turn.
                self.meter.calibrate(
                    usage.prompt_tokens.saturating_sub(image_tokens),
                    request_chars,
                );
                self.meter.measured = Some(crate::meter::Measured {
                    tokens: usage.kept().saturating_sub(image_tokens),
                    history_len: self.conversation.len(),
                });
            } else {
                self.report_estimate();
            }
            if tool_calls.is_empty() {
                return match finish_reason {
                    Some(FinishReason::Length) => StopReason::MaxTokens,
                    Some(FinishReason::ContentFilter) => {
                        // The client drops the refused exchange; so does the model's view.
                        if let Some(prompt) = &self.turn.prompt {
                            self.conversation.truncate(prompt.index);
                        }
                        StopReason::Refusal
                    }
                    _ => StopReason::EndTurn,
                };
            }
            let done = self.run_tool_calls(&tool_calls, cancel).await;
            let mut applied = self.apply_effects(done.effects);
            if applied.mode_changed {
                tools = self.tool_specs();
                tool_names = tools.iter().map(|t| t.name.clone()).collect();
            }
            let mut results = done.messages;
            self.attach_tool_images(&mut results, done.images, cancel)
                .await;
            for call in done.views {
                self.record(&Record::tool_call(&call));
            }
            applied.record_todos(self);
            let mut looping = false;
            for (call, message) in tool_calls.iter().zip(&results) {
                if let ChatMessage::Tool { content, .. } = message {
                    looping |= guard.step(call, content);
                }
            }
            let limit = self.tool_result_limit();
            let registry = self.tool_registry();
            for (call, mut message) in tool_calls.iter().zip(results) {
                if let (Some(limit), ChatMessage::Tool { content, .. }) = (limit, &mut message)
                    && content.chars().count() > limit
                {
                    tracing::info!(tool = %call.name, chars = content.chars().count(), limit, "tool result cut to fit the window");
                    let how = registry
                        .get(&call.name)
                        .map_or(maia_tools::GENERIC_NARROW_HINT, |tool| tool.narrow_hint());
                    *content = crate::oversize::cap_tool_result(content, limit, &call.name, how);
                }
                self.push_message(message);
            }
            if cancel.is_cancelled() {
                return StopReason::Cancelled;
            }
            if applied.asked_as_text {
                // The user answers in their next prompt.
                return StopReason::EndTurn;
            }
            if looping {
                return self.fail(format!(
                    "\n\nStopped: the same tool call with the same result came back more than {} times in the last {} steps; the model seems stuck in a loop.\n",
                    LoopGuard::MAX_REPEATS,
                    LoopGuard::WINDOW
                ));
            }
            // The tool-round boundary: steers join before the next request.
            self.inject_steers(cancel).await;
        }
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
    async fn stream(
        &self,
        request: &ChatRequest,
        cancel: &CancellationToken,
    ) -> (Result<Completion, LlmError>, String, String) {
        let llm = match &self.project.llm {
            Ok(llm) => llm,
            Err(e) => {
                return (Err(e.clone()), String::new(), String::new());
            }
        };
        let message_id = new_message_id();
        let thought_id = new_message_id();
        let events = self.services.events.clone();
        let mut partial = String::new();
        let mut thought = String::new();
        let mut on_delta = |delta: Delta| match delta {
            Delta::Text(text) => {
                partial.push_str(&text);
                let _ = events.send(Event::AgentText {
                    message_id: message_id.clone(),
                    text,
                });
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
        let result = llm.stream_chat(request, cancel, &mut on_delta).await;
        (result, partial, thought)
    }
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
