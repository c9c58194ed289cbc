//! One model request of a turn and what comes back: the tools a round
//! offers ([`Round`], built once and rebuilt only when the mode, the model
//! or the client changed), the turn loop's state ([`TurnLoop`]), the checks
//! before a request ([`Session::before_request`]), the request built and
//! streamed ([`Session::request`]), a failed request
//! ([`Session::on_error`]) and an answer ([`Session::on_answer`]).

use std::ops::ControlFlow;
use std::sync::Arc;

use maia_llm::{ChatMessage, ChatRequest, Completion, FinishReason, LlmError, ToolCall};
use tokio_util::sync::CancellationToken;

use crate::compaction::{CompactError, Trigger};
use crate::event::StopReason;
use crate::images;
use crate::meter::RequestSize;
use crate::mode::Mode;
use crate::session::Session;
use crate::session::text::{LoopGuard, describe_failure};
use crate::store::Record;
use crate::tools::ToolRegistry;

/// The tools of a round: the registry that runs the calls (each request
/// offers its definitions, [`Session::offered_tools`]) and their names (to
/// spot a tool call written as text).
pub(crate) struct Round {
    pub(crate) registry: ToolRegistry,
    pub(crate) names: Vec<String>,
    /// What the registry was built from.
    key: ToolsKey,
}

/// What of the session a registry depends on that may change in a turn:
/// the mode (a tool's effect, the client), the model, the client's tools.
#[derive(Debug, PartialEq, Eq)]
struct ToolsKey {
    mode: Mode,
    read_only: bool,
    model: Option<String>,
    asker: Option<usize>,
    terminals: Option<usize>,
}

/// The address of a shared object, to tell whether it was replaced.
fn address<T: ?Sized>(shared: &Option<Arc<T>>) -> Option<usize> {
    shared
        .as_ref()
        .map(|a| Arc::as_ptr(a).cast::<()>() as usize)
}

/// The state of one turn's loop of model requests.
pub(crate) struct TurnLoop {
    pub(crate) model: String,
    /// Whether requests carry prompt-caching marks.
    pub(crate) cache: bool,
    pub(crate) round: Round,
    /// Model requests made in this turn.
    pub(crate) requests: u32,
    /// Whether the turn compacted (once only for a rejected request).
    pub(crate) compacted: bool,
    pub(super) guard: LoopGuard,
    /// A reply that mixed a tool call with text, asked again with a correction.
    pub(crate) correction: Option<String>,
    /// Corrections sent in this turn (at most [`MAX_CORRECTIONS`]).
    pub(crate) corrections: u8,
    /// Whether a reply that is nothing but tool calls written as text is
    /// run as those calls (`textToolCalls`, on unless turned off).
    pub(crate) text_calls: bool,
    /// Edits come as text blocks, no tool is offered (`text_mode`).
    pub(crate) text_mode: bool,
    /// Files text mode showed this turn.
    pub(crate) shown_files: Vec<std::path::PathBuf>,
    /// The last text-mode reply ran a command (its output is to be read).
    pub(crate) text_commands: bool,
    /// The last text-mode reply's text (the same again ends the turn).
    pub(crate) last_text_reply: String,
    /// Only the core tools are offered (a local model, or a small window).
    pub(crate) core_tools: bool,
}

/// A window up to this many tokens counts as small.
const SMALL_WINDOW: u64 = 16_384;
/// The most a local model (or one with a small window) may answer in one
/// reply, in tokens.
const LOCAL_MAX_OUTPUT: u64 = 4096;

/// Corrections sent at most in one turn for tool calls mixed with text.
const MAX_CORRECTIONS: u8 = 2;

/// One request as sent and what came back.
pub(crate) struct Sent {
    pub(crate) result: Result<Completion, LlmError>,
    /// The text streamed before a failure.
    pub(crate) partial: String,
    pub(crate) size: RequestSize,
    /// The reply's text held back while it streamed.
    pub(crate) held: crate::session::turn::Held,
}

/// What the turn does after an answer.
pub(crate) enum Answered {
    /// Ask again (a tool call written as text, with a correction).
    Retry,
    /// The turn ends.
    Stop(StopReason),
    /// Run these tool calls ([`Session::after_tools`]).
    Tools(Vec<ToolCall>),
    /// Run these calls from text blocks, their results told as text.
    TextSteps(Vec<ToolCall>),
    /// Ask again (text mode showed files the reply named).
    Again,
}

/// What a reply that wrote a tool call as text leads to.
enum WrittenAsText {
    No,
    /// Ask again with a correction.
    Correct,
    /// Corrections failed: edit with text blocks from now on.
    TextMode,
}

impl Session {
    /// The tools of a round, as the session stands.
    pub(crate) fn round(&self) -> Round {
        let registry = self.tool_registry();
        let names = registry.names().map(str::to_owned).collect();
        Round {
            registry,
            names,
            key: self.tools_key(),
        }
    }

    /// Rebuilds `round` when what its registry was built from changed
    /// (a mode switch, a new model or client); returns whether it did.
    pub(crate) fn refresh_round(&self, round: &mut Round) -> bool {
        if round.key == self.tools_key() {
            return false;
        }
        *round = self.round();
        true
    }

    /// The definitions a request of `round` carries: the MCP tools offered
    /// by name only while they weigh too much, except those the thread
    /// loaded ([`crate::tools::deferred`]).
    pub(crate) fn offered_tools(&self, round: &Round) -> crate::tools::deferred::Offer {
        crate::tools::deferred::offer(
            &round.registry,
            self.project.settings.mcp_tool_search,
            self.meter.window(),
            self.conversation.loaded_tools(),
        )
    }

    fn tools_key(&self) -> ToolsKey {
        ToolsKey {
            mode: self.mode,
            read_only: self.read_only(),
            model: self.model.clone(),
            asker: address(&self.client.asker),
            terminals: address(&self.client.terminals),
        }
    }

    /// The turn's loop state for `model`, with the round's tools.
    pub(crate) fn turn_loop(&self, model: String) -> TurnLoop {
        TurnLoop {
            cache: self.prompt_caching(&model),
            round: self.round(),
            requests: 0,
            compacted: false,
            guard: LoopGuard::default(),
            correction: None,
            corrections: 0,
            text_calls: crate::settings::model_flag(&self.project.settings.text_tool_calls, &model)
                .unwrap_or(true),
            text_mode: self.text_mode
                || self.text_edits_setting(&model).unwrap_or_else(|| {
                    crate::settings::model_flag(&self.project.settings.local_models, &model)
                        == Some(true)
                }),
            shown_files: Vec::new(),
            text_commands: false,
            last_text_reply: String::new(),
            core_tools: crate::settings::model_flag(&self.project.settings.local_models, &model)
                .unwrap_or_else(|| self.meter.window().is_some_and(|w| w <= SMALL_WINDOW)),
            model,
        }
    }

    /// Before each request: the turn's request limit, then an automatic
    /// compaction when the meter says the context is nearly full.
    pub(crate) async fn before_request(
        &mut self,
        state: &mut TurnLoop,
        cancel: &CancellationToken,
    ) -> ControlFlow<StopReason> {
        if state.requests >= self.project.settings.max_turn_requests {
            self.say(format!(
                "Stopped after {} model requests in this turn (max_turn_requests).",
                state.requests
            ));
            return ControlFlow::Break(StopReason::MaxTurnRequests);
        }
        state.requests += 1;
        // A conversation that is only the kept prompt cannot shrink
        // further (what is left over is the turn's images).
        let just_compacted = state.compacted && self.conversation.len() <= 1;
        if !just_compacted && self.needs_compaction() {
            match self.compact(Trigger::InTurn, cancel).await {
                Ok(()) => {
                    state.compacted = true;
                    self.keep_images_with_prompt();
                }
                Err(CompactError::Cancelled) => return ControlFlow::Break(StopReason::Cancelled),
                Err(e @ CompactError::PromptTooLarge { .. }) => {
                    return ControlFlow::Break(self.refuse_prompt(&e));
                }
                Err(CompactError::Empty) => {}
                Err(e) => tracing::warn!("automatic compaction: {e}"),
            }
        }
        ControlFlow::Continue(())
    }

    /// Builds the request from a repaired copy of the history (never in
    /// place: the turn's prompt index and the journal stay true), with the
    /// round's tools and the turn's images, and streams it once the
    /// budget lets it go (`Break`: the turn ends).
    pub(crate) async fn request(
        &mut self,
        state: &mut TurnLoop,
        cancel: &CancellationToken,
    ) -> ControlFlow<StopReason, Sent> {
        let mut messages = Vec::with_capacity(self.conversation.len() + 3);
        messages.push(ChatMessage::System {
            content: self.system_prompt_for(state.text_mode),
        });
        messages.extend(self.conversation.history().iter().cloned());
        crate::conversation::repair_history(&mut messages);
        if let Some(text) = state.correction.take() {
            messages.push(ChatMessage::assistant(text));
            messages.push(ChatMessage::user(crate::text_tool_calls::CORRECTION));
        }
        let offered = self.offered_tools(&state.round).specs;
        let request = ChatRequest {
            model: state.model.clone(),
            messages,
            tools: if state.text_mode {
                Vec::new()
            } else if state.core_tools {
                offered
                    .into_iter()
                    .filter(|s| crate::tools::CORE_TOOLS.contains(&s.name.as_str()))
                    .collect()
            } else {
                offered
            },
            // A local model's answer is bounded: a small model caught in a
            // repetition loop would otherwise write until its window is full.
            max_tokens: state.core_tools.then(|| {
                self.meter
                    .window()
                    .map_or(LOCAL_MAX_OUTPUT, |w| (w / 8).clamp(1024, LOCAL_MAX_OUTPUT))
                    as u32
            }),
            cache: state.cache,
            reasoning_effort: self.reasoning_effort(&state.model),
        };
        // Measured without the images, whose tokens are counted apart.
        let chars = serde_json::to_string(&request.body())
            .map(|b| b.len())
            .unwrap_or(0);
        let shown = images::within_request_limits(&self.turn.images);
        let size = RequestSize {
            chars,
            image_tokens: images::overlay_tokens(&shown),
        };
        let request = ChatRequest {
            messages: images::with_images(request.messages, &shown),
            ..request
        };
        self.budget_gate(&request, size, cancel).await?;
        let streamed = self.stream(&request, state.text_calls, cancel).await;
        if !streamed.thought.is_empty() {
            self.record(&Record::Thought {
                text: streamed.thought,
            });
        }
        ControlFlow::Continue(Sent {
            result: streamed.result,
            partial: streamed.partial,
            size,
            held: streamed.held,
        })
    }

    /// A failed request: cancelled, rejected as over the window (compact
    /// once and ask again: `Continue`), else the turn ends saying why. The
    /// text already streamed is kept.
    pub(crate) async fn on_error(
        &mut self,
        error: LlmError,
        partial: String,
        size: RequestSize,
        state: &mut TurnLoop,
        cancel: &CancellationToken,
    ) -> ControlFlow<StopReason> {
        if partial.is_empty() && self.fall_back(&error, state, cancel).await {
            return ControlFlow::Continue(());
        }
        match error {
            LlmError::ContextWindowExceeded { message }
                if !state.compacted && partial.is_empty() =>
            {
                state.compacted = true;
                self.on_rejected(&message, size, &state.model, cancel).await
            }
            LlmError::Cancelled => {
                if !partial.is_empty() {
                    self.push_message(ChatMessage::assistant(partial));
                }
                ControlFlow::Break(StopReason::Cancelled)
            }
            e => {
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
                ControlFlow::Break(self.fail(describe_failure(&e, &url)))
            }
        }
    }

    /// The model is the final judge of its window: learn what its error
    /// told, compact once and ask again.
    async fn on_rejected(
        &mut self,
        message: &str,
        size: RequestSize,
        model: &str,
        cancel: &CancellationToken,
    ) -> ControlFlow<StopReason> {
        let rejected = self.meter.calibrated(size.chars);
        if let Some(told) = crate::compaction::window_from_error(message)
            && self.meter.told_window(told)
        {
            tracing::info!(
                model,
                tokens = told,
                "context window told by the provider's error"
            );
        }
        tracing::info!(rejected, window = ?self.meter.window(), "request over the context window");
        if !self.auto_compact_enabled() {
            // The user turned compaction by itself off: they compact.
            return ControlFlow::Break(self.fail(format!(
                "\n\n**The conversation no longer fits in the model's context window** (about {rejected} tokens were rejected). Automatic compaction is off (`autoCompact` in .maia/settings.json): run `/compact`, then send your message again.\n"
            )));
        }
        match self.compact(Trigger::Rejected(rejected), cancel).await {
            Ok(()) => {
                self.keep_images_with_prompt();
                ControlFlow::Continue(())
            }
            Err(CompactError::Cancelled) => ControlFlow::Break(StopReason::Cancelled),
            Err(e @ CompactError::PromptTooLarge { .. }) => {
                ControlFlow::Break(self.refuse_prompt(&e))
            }
            Err(CompactError::Empty) => {
                let window = self
                    .meter
                    .window()
                    .map_or_else(String::new, |w| format!(" of {w} tokens"));
                ControlFlow::Break(self.refuse_prompt(&CompactError::Failed(format!(
                    "the model rejected the request (about {rejected} tokens) as larger than its context window{window}, and there is nothing before your message to summarise. Shorten it or attach less, then send it again"
                ))))
            }
            Err(e) => ControlFlow::Break(self.fail(format!(
                "\n\n**The conversation no longer fits in the model's context window** and could not be compacted: {e}\n"
            ))),
        }
    }

    /// An answer: its usage billed and metered; a reply that is nothing
    /// but tool calls written as text run as those calls, one that mixes a
    /// call with text asked again with a correction; the answer kept; it
    /// ends the turn unless it asks for tools.
    pub(crate) async fn on_answer(
        &mut self,
        completion: Completion,
        held: crate::session::turn::Held,
        size: RequestSize,
        state: &mut TurnLoop,
        cancel: &CancellationToken,
    ) -> Answered {
        // The turn's usage is what the server billed, believed or not.
        if let Some(usage) = &completion.usage {
            self.turn
                .usage
                .get_or_insert_with(Default::default)
                .add(usage);
        }
        let usage = self.meter.observe(&completion, size).usage;
        self.charge(
            &state.model,
            usage.as_ref(),
            completion.response_cost,
            cancel,
        )
        .await;
        if let (Some(usage), Some(window)) = (&usage, self.meter.window()) {
            // What stays in the conversation: the prompt and the answer
            // (reasoning is not kept).
            let answer = crate::meter::message_chars(&[ChatMessage::Assistant {
                content: Some(completion.text.clone()),
                tool_calls: completion.tool_calls.clone(),
            }]);
            self.emit_usage_of(usage.kept(), window, "measured", answer);
        }
        let Completion {
            mut text,
            mut tool_calls,
            finish_reason,
            ..
        } = completion;
        let unanswered = tool_calls.is_empty() && finish_reason != Some(FinishReason::Length);
        if let Some(calls) = (unanswered && state.text_calls)
            .then(|| crate::text_tool_calls::parse(&text))
            .flatten()
        {
            // Run as the calls they are; the history carries them as
            // calls, so the next request is well formed for the server.
            tracing::info!(
                model = state.model,
                calls = calls.len(),
                "tool calls written as text, run as calls"
            );
            self.meter.text_tool_calls_run(calls.len());
            tool_calls = calls
                .into_iter()
                .map(|call| ToolCall {
                    id: format!("call_{}", uuid::Uuid::new_v4().simple()),
                    name: call.name,
                    arguments: call.arguments.to_string(),
                })
                .collect();
            text.clear();
        } else {
            self.show_held(held);
            let written = if unanswered {
                self.written_as_text(&text, usage.as_ref(), size, state)
            } else {
                WrittenAsText::No
            };
            match written {
                WrittenAsText::No => {}
                WrittenAsText::Correct => {
                    state.correction = Some(text);
                    return Answered::Retry;
                }
                WrittenAsText::TextMode => {
                    self.push_message(ChatMessage::assistant(text.clone()));
                    self.enter_text_mode(state, &text).await;
                    return Answered::Again;
                }
            }
        }
        self.push_message(ChatMessage::Assistant {
            content: (!text.is_empty()).then_some(text),
            tool_calls: tool_calls.clone(),
        });
        match &usage {
            Some(usage) => self.meter.measure(usage, size, self.conversation.len()),
            None => self.report_estimate(),
        }
        if !tool_calls.is_empty() {
            return Answered::Tools(tool_calls);
        }
        if state.text_mode && finish_reason != Some(FinishReason::Length) {
            let text = self.conversation.history().last().and_then(|m| match m {
                ChatMessage::Assistant { content, .. } => content.clone(),
                _ => None,
            });
            match self.text_reply(text.as_deref().unwrap_or(""), state).await {
                super::text_mode::TextReply::Steps(calls) => return Answered::TextSteps(calls),
                super::text_mode::TextReply::ShowFiles => return Answered::Again,
                super::text_mode::TextReply::Answer => {}
            }
        }
        if finish_reason != Some(FinishReason::Length) && self.empty_turn() {
            self.unfinished(
                crate::event::Unfinished::EmptyAnswer,
                "The model gave an empty answer and did nothing; the task is not done.".to_owned(),
            );
        }
        Answered::Stop(match finish_reason {
            Some(FinishReason::Length) => StopReason::MaxTokens,
            Some(FinishReason::ContentFilter) => {
                // The client drops the refused exchange; so does the model's view.
                if let Some(prompt) = &self.turn.prompt {
                    self.conversation.truncate(prompt.index);
                }
                StopReason::Refusal
            }
            _ => StopReason::EndTurn,
        })
    }
    /// Whether the turn's answers so far hold no text and no tool call.
    fn empty_turn(&self) -> bool {
        let start = self.turn.prompt.as_ref().map_or(0, |p| p.index);
        self.conversation
            .history()
            .iter()
            .skip(start)
            .all(|m| match m {
                ChatMessage::Assistant {
                    content,
                    tool_calls,
                } => {
                    tool_calls.is_empty() && content.as_deref().is_none_or(|t| t.trim().is_empty())
                }
                _ => true,
            })
    }

    /// Whether an answer without tool calls mixed one with text and is to
    /// be asked again with a correction (at most [`MAX_CORRECTIONS`] times
    /// a turn; then it is shown as text and the turn says so).
    fn written_as_text(
        &mut self,
        text: &str,
        usage: Option<&maia_llm::Usage>,
        size: RequestSize,
        state: &mut TurnLoop,
    ) -> WrittenAsText {
        if state.text_mode {
            return WrittenAsText::No;
        }
        let Some(what) = crate::text_tool_calls::detect(text, &state.round.names) else {
            return WrittenAsText::No;
        };
        if state.corrections >= 1 && self.text_edits_setting(&state.model) != Some(false) {
            tracing::warn!(model = state.model, form = %what, "a tool call came mixed with text after a correction; text mode from now on");
            self.say(
                "\n\n*The model could not call tools; it edits with text blocks from now on.*\n\n"
                    .to_owned(),
            );
            return WrittenAsText::TextMode;
        }
        if state.corrections >= MAX_CORRECTIONS {
            self.meter.text_tool_call_shown();
            tracing::warn!(model = state.model, form = %what, "a tool call came as text again; shown as text");
            self.unfinished(
                crate::event::Unfinished::TextToolCall,
                format!(
                    "The model wrote a tool call ({what}) as text again after {MAX_CORRECTIONS} corrections; it was not run, so the task may be undone."
                ),
            );
            return WrittenAsText::No;
        }
        state.corrections += 1;
        self.meter.text_tool_call_retried();
        tracing::warn!(model = state.model, form = %what, "a tool call came as text; retrying once with a correction");
        if let Some(usage) = usage {
            self.meter.calibrate(usage.prompt_tokens, size.chars);
        }
        WrittenAsText::Correct
    }
}
