//! What the turn does after a round's tool calls ran: their effects
//! applied (the round's tools rebuilt on a mode switch), their images
//! attached, each result cut to its share of the window and pushed to the
//! history, then the checks that end the turn (cancelled, a question
//! shown as text, a loop) and the steers sent meanwhile.

use std::ops::ControlFlow;

use maia_llm::{ChatMessage, ToolCall};
use tokio_util::sync::CancellationToken;

use crate::event::StopReason;
use crate::images;
use crate::session::Session;
use crate::session::round::TurnLoop;
use crate::session::text::LoopGuard;
use crate::store::Record;

impl Session {
    /// Runs the round's `calls` and takes in what they did; `Break` ends
    /// the turn, `Continue` goes on to the next request.
    pub(crate) async fn after_tools(
        &mut self,
        calls: &[ToolCall],
        as_text: bool,
        state: &mut TurnLoop,
        cancel: &CancellationToken,
    ) -> ControlFlow<StopReason> {
        let done = self.run_tool_calls(calls, &mut state.round, cancel).await;
        let mut applied = self.apply_effects(done.effects);
        if applied.mode_changed {
            self.refresh_round(&mut state.round);
        }
        let mut results = done.messages;
        self.attach_tool_images(&mut results, done.images, cancel)
            .await;
        let failed: Vec<bool> = done
            .views
            .iter()
            .map(|v| v.status == crate::event::ToolStatus::Failed)
            .collect();
        for call in done.views {
            self.record(&Record::tool_call(&call));
        }
        applied.record_todos(self);
        let mut looping = false;
        for (call, message) in calls.iter().zip(&mut results) {
            if let ChatMessage::Tool { content, .. } = message {
                looping |= state.guard.step(call, content);
                if let Some(more) = self.sub_folder_addendum(call) {
                    content.push_str(&more);
                }
            }
        }
        if as_text {
            // Text mode: the results as one user message; edits that all
            // applied end the turn.
            if self.push_text_results(calls, results, &failed, state) && !cancel.is_cancelled() {
                return ControlFlow::Break(StopReason::EndTurn);
            }
        } else {
            self.push_results(calls, results, state);
        }
        if cancel.is_cancelled() {
            return ControlFlow::Break(StopReason::Cancelled);
        }
        if let Some(reason) = applied.hook_stopped.take() {
            self.hook_stopped(reason);
            return ControlFlow::Break(StopReason::EndTurn);
        }
        if applied.asked_as_text {
            // The user answers in their next prompt.
            return ControlFlow::Break(StopReason::EndTurn);
        }
        if looping {
            return ControlFlow::Break(self.fail(format!(
                "\n\nStopped: the same tool call with the same result came back more than {} times in the last {} steps; the model seems stuck in a loop.\n",
                LoopGuard::MAX_REPEATS,
                LoopGuard::WINDOW
            )));
        }
        // The tool-round boundary: steers join before the next request.
        self.inject_steers(cancel).await;
        ControlFlow::Continue(())
    }

    /// Pushes the results to the history, each cut to its share of the
    /// window with the hint its tool gives for asking less.
    fn push_results(&mut self, calls: &[ToolCall], results: Vec<ChatMessage>, state: &TurnLoop) {
        let limit = self.tool_result_limit();
        for (call, mut message) in calls.iter().zip(results) {
            if let (Some(limit), ChatMessage::Tool { content, .. }) = (limit, &mut message)
                && content.chars().count() > limit
            {
                tracing::info!(tool = %call.name, chars = content.chars().count(), limit, "tool result cut to fit the window");
                // Kept whole in the thread's outputs folder, but a Read's
                // file is already on disk.
                let on_disk = state
                    .round
                    .registry
                    .get(&call.name)
                    .is_some_and(|tool| tool.result_on_disk())
                    || content.starts_with(maia_tools::kept::STUB_START);
                if !on_disk && let Some(stub) = self.keep_whole(&call.name, content) {
                    *content = stub;
                    if content.chars().count() > limit {
                        // A window too small even for the previews.
                        let how = "Read or Grep the kept file named above";
                        *content =
                            crate::oversize::cap_tool_result(content, limit, &call.name, how);
                    }
                    self.push_message(message);
                    continue;
                }
                let how = state
                    .round
                    .registry
                    .get(&call.name)
                    .map_or(maia_tools::GENERIC_NARROW_HINT, |tool| tool.narrow_hint());
                *content = crate::oversize::cap_tool_result(content, limit, &call.name, how);
            }
            self.push_message(message);
        }
    }

    /// Writes `content` whole to the thread's outputs folder; the stub the
    /// model gets instead (`None`: no folder, or the write failed).
    fn keep_whole(&self, tool: &str, content: &str) -> Option<String> {
        let dir = self.outputs_dir()?;
        let kept =
            crate::blocking::off_runtime(|| maia_tools::kept::keep_text(&dir, tool, content));
        match kept {
            Ok(path) => Some(maia_tools::kept::stub(
                tool,
                content,
                content,
                content.len() as u64,
                content.matches('\n').count() as u64,
                &path,
                0,
            )),
            Err(e) => {
                tracing::warn!(%e, "a big tool result could not be kept in a file");
                None
            }
        }
    }

    /// The characters one tool result may take: its share of the window.
    fn tool_result_limit(&self) -> Option<usize> {
        let window = self.meter.window()?;
        Some(
            self.meter
                .chars_of(window as f64 * self.project.settings.tool_result_share),
        )
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
}
