//! Compaction: the conversation is summarised by the model and the thread
//! continues from the summary, under the name `name__n`.
//!
//! MAIA's procedure: the conversation as it stands stays saved; the model
//! writes a summary under five headings, at most 4,000 tokens; the history
//! is cleared and the summary replaces the context file as starting context;
//! settings and rules are reloaded; the thread continues in a new file
//! `name__1`, `name__2`… (after `__1000`, back to `__1`). A cancelled or
//! failed compaction changes nothing.

use maia_llm::{ChatMessage, ChatRequest, LlmError};
use tokio_util::sync::CancellationToken;

use crate::event::{CompactionState, Event};
use crate::session::Session;
use crate::store::Record;

/// Tokens the summary may take.
pub const SUMMARY_TOKENS: u32 = 4000;
/// Safety margin kept free below the window.
pub const MARGIN: u64 = 500;
/// Characters per token for estimates.
const CHARS_PER_TOKEN: usize = 4;
/// Highest `__n` suffix before it wraps to `__1`.
const MAX_SUFFIX: u32 = 1000;

/// The request sent to the model.
pub const INSTRUCTION: &str = "Write a compact summary of our whole conversation so far, so that \
work can continue from it alone. Use exactly these five headings:\n\
## Project context\n## Current goal\n## Relevant files\n## Decisions and conclusions\n## Next steps\n\
Keep file paths, names and facts exact. At most 4,000 tokens. Reply with the summary only.";

/// The name the thread continues under after compacting `name`.
pub fn next_name(name: &str) -> String {
    if let Some((base, n)) = name.rsplit_once("__")
        && let Ok(n) = n.parse::<u32>()
    {
        let next = if n >= MAX_SUFFIX { 1 } else { n + 1 };
        return format!("{base}__{next}");
    }
    format!("{name}__1")
}

/// Why a compaction did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactError {
    #[error("there is nothing to compact yet")]
    Empty,
    #[error("the compaction was cancelled")]
    Cancelled,
    #[error("the compaction failed: {0}")]
    Failed(String),
}

fn estimate(chars: usize) -> u64 {
    chars.div_ceil(CHARS_PER_TOKEN) as u64
}

fn message_chars(messages: &[ChatMessage]) -> usize {
    messages
        .iter()
        .map(|m| serde_json::to_string(m).map(|s| s.len()).unwrap_or(0))
        .sum()
}

impl Session {
    /// Tokens the next request would carry: the last measured size plus an
    /// estimate of what was added since, else an estimate of everything;
    /// plus the current turn's images at their token cost (measured sizes
    /// exclude them).
    pub(crate) fn context_tokens(&self) -> u64 {
        crate::images::overlay_tokens(&self.turn_images) + self.text_tokens()
    }

    fn text_tokens(&self) -> u64 {
        match self.measured {
            Some((tokens, len)) if len <= self.conversation.len() => {
                tokens + estimate(message_chars(&self.conversation.history()[len..]))
            }
            _ => {
                let tools = serde_json::to_string(
                    &self
                        .tool_specs()
                        .iter()
                        .map(|t| (&t.name, &t.description, &t.parameters))
                        .collect::<Vec<_>>(),
                )
                .map(|s| s.len())
                .unwrap_or(0);
                let raw = estimate(
                    self.system_prompt().len() + tools + message_chars(self.conversation.history()),
                );
                // Calibrated by the last measured real/estimated ratio.
                (raw as f64 * self.calibration).round() as u64
            }
        }
    }

    /// Learns the real/estimated ratio from a response's usage.
    pub(crate) fn calibrate(&mut self, prompt_tokens: u64, request_chars: usize) {
        let estimated = estimate(request_chars);
        if estimated == 0 || prompt_tokens == 0 {
            return;
        }
        let ratio = prompt_tokens as f64 / estimated as f64;
        if (0.1..10.0).contains(&ratio) {
            self.calibration = ratio;
        }
    }

    /// Sends an estimate of the context size between responses (after
    /// `/clear`, `/new`, `/load`, a cancelled turn), when the window is known.
    pub(crate) fn report_estimate(&self) {
        if let Some(size) = self.window {
            self.emit(Event::Usage {
                used: self.context_tokens(),
                size,
            });
        }
    }

    /// Whether the context passed `window − (4000 + 500)`; never when the
    /// window is unknown.
    pub(crate) fn needs_compaction(&self) -> bool {
        match self.window {
            Some(window) if !self.conversation.is_empty() => {
                self.context_tokens() > window.saturating_sub(u64::from(SUMMARY_TOKENS) + MARGIN)
            }
            _ => false,
        }
    }

    /// Compacts the conversation, reporting progress as events.
    pub(crate) async fn compact(&mut self, cancel: &CancellationToken) -> Result<(), CompactError> {
        if self.conversation.is_empty() {
            return Err(CompactError::Empty);
        }
        let id = format!("compaction-{}", uuid::Uuid::new_v4().simple());
        let report = |s: &Session, state: CompactionState| {
            s.emit(Event::Compaction {
                id: id.clone(),
                state,
            });
        };
        report(self, CompactionState::Started);
        let before = self.context_tokens();
        let result = self.summarise(cancel).await;
        let summary = match result {
            Ok(summary) => summary,
            Err(CompactError::Cancelled) => {
                report(self, CompactionState::Cancelled);
                return Err(CompactError::Cancelled);
            }
            Err(e) => {
                report(self, CompactionState::Failed(e.to_string()));
                return Err(e);
            }
        };
        let name = super::compaction::next_name(self.conversation.name());
        let mut records = vec![Record::Compaction {
            summary: summary.clone(),
        }];
        if let Some(title) = &self.title {
            records.push(Record::Title {
                title: title.clone(),
            });
        }
        if let Err(e) = self.conversation.continue_as(name, &records) {
            let e = CompactError::Failed(format!("cannot save the compacted session: {e}"));
            report(self, CompactionState::Failed(e.to_string()));
            return Err(e);
        }
        let context_file = self.context_file.take();
        // Tools, skills and permissions are reloaded (the MAIA behaviour),
        // without repeating the start-up notices.
        self.reload_quietly();
        self.emit(Event::Commands(self.command_entries()));
        self.context_file = context_file.or(self.context_file.take());
        self.reads = std::sync::Arc::new(maia_tools::ReadTracker::default());
        self.summary = Some(summary.clone());
        self.measured = None;
        let after = self.context_tokens();
        tracing::info!(before, after, name = %self.conversation.name(), "compacted");
        report(
            self,
            CompactionState::Completed {
                summary,
                before,
                after,
            },
        );
        if let Some(size) = self.window {
            self.emit(Event::Usage { used: after, size });
        }
        Ok(())
    }

    async fn summarise(&mut self, cancel: &CancellationToken) -> Result<String, CompactError> {
        let model = match self.resolve_model(cancel).await {
            Ok(model) => model,
            Err(_) if cancel.is_cancelled() => return Err(CompactError::Cancelled),
            Err(e) => return Err(CompactError::Failed(e)),
        };
        let llm = self
            .llm
            .as_ref()
            .map_err(|e| CompactError::Failed(e.to_string()))?;
        let mut messages = Vec::with_capacity(self.conversation.len() + 2);
        messages.push(ChatMessage::System {
            content: self.system_prompt(),
        });
        messages.extend(self.conversation.history().iter().cloned());
        messages.push(ChatMessage::user(INSTRUCTION));
        let request = ChatRequest {
            model,
            messages,
            tools: Vec::new(),
            max_tokens: Some(SUMMARY_TOKENS),
        };
        match llm.stream_chat(&request, cancel, &mut |_| {}).await {
            Ok(completion) if completion.text.trim().is_empty() => Err(CompactError::Failed(
                "the model returned an empty summary".into(),
            )),
            Ok(completion) => Ok(completion.text.trim().to_owned()),
            Err(LlmError::Cancelled) => Err(CompactError::Cancelled),
            Err(e) => Err(CompactError::Failed(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_continue_and_wrap() {
        assert_eq!(next_name("work"), "work__1");
        assert_eq!(next_name("work__1"), "work__2");
        assert_eq!(next_name("work__999"), "work__1000");
        assert_eq!(next_name("work__1000"), "work__1");
        assert_eq!(next_name("a__b"), "a__b__1");
    }
}
