//! A session's context accounting (the tokens the next request would
//! carry, measured or estimated, against the model's window) and its
//! compaction: the summary is written by [`crate::compaction::Compactor`]
//! from borrowed parts, then the session continues from it in a new
//! journal, the running turn's prompt kept.

use maia_llm::ChatMessage;
use tokio_util::sync::CancellationToken;

use super::{Session, TurnPrompt};
use crate::compaction::{CompactError, MARGIN, MAX_SUFFIX, Trigger, next_name};
use crate::event::{CompactionState, Event};
use crate::meter::message_chars;
use crate::store::{self, Record};

/// The context accounting and the compaction of the conversation: the
/// summary is written by [`crate::compaction::Compactor`], the session then continues from it.
impl Session {
    /// Tokens the next request would carry: the last measured size plus an
    /// estimate of what was added since, else an estimate of everything;
    /// plus the current turn's images at their token cost (measured sizes
    /// exclude them).
    pub(crate) fn context_tokens(&self) -> u64 {
        crate::images::overlay_tokens(&crate::images::within_request_limits(&self.turn.images))
            + self.text_tokens()
    }

    fn text_tokens(&self) -> u64 {
        self.meter
            .text_tokens(self.conversation.history(), || self.fixed_chars())
    }

    /// Whether the context size comes from the server (`measured`) or from
    /// an estimate.
    pub(crate) fn context_source(&self) -> &'static str {
        self.meter.source(self.conversation.len())
    }

    /// Characters every request carries: the system prompt and the tools.
    pub(crate) fn fixed_chars(&self) -> usize {
        self.system_prompt().len() + self.tool_chars()
    }

    /// Characters of the tool definitions every request carries.
    pub(crate) fn tool_chars(&self) -> usize {
        super::context_map::schema_chars(self.tool_specs().iter())
    }

    /// Sends an estimate of the context size between responses (after
    /// `/clear`, `/new`, `/load`, a cancelled turn), when the window is known.
    pub(crate) fn report_estimate(&self) {
        if let Some(size) = self.meter.window() {
            self.emit_usage(self.context_tokens(), size);
        }
    }

    /// Whether the context passed the auto-compaction trigger (by default
    /// `window − output reserve − (4000 + 500)`, [`crate::context_map::trigger`]);
    /// never when the window is unknown or `autoCompact` is off.
    pub(crate) fn needs_compaction(&self) -> bool {
        match self.auto_compact_at() {
            Some(at) if !self.conversation.is_empty() => self.context_tokens() > at,
            _ => false,
        }
    }

    /// The kept prompt's size, when it cannot fit the window even alone:
    /// `(message, fixed, window)` tokens.
    pub(crate) fn prompt_overflow(&self) -> Option<(u64, u64, u64)> {
        let window = self.meter.window()?;
        let index = self.turn.prompt.as_ref()?.index;
        let message = self.conversation.history().get(index)?;
        let message = self
            .meter
            .calibrated(message_chars(std::slice::from_ref(message)));
        // Without any summary: the smallest system prompt it can go with.
        let fixed = self.meter.calibrated(self.fixed_chars());
        (message + fixed + MARGIN > window).then_some((message, fixed, window))
    }

    /// Compacts the conversation, reporting progress as events.
    pub(crate) async fn compact(
        &mut self,
        trigger: Trigger,
        cancel: &CancellationToken,
    ) -> Result<(), CompactError> {
        if !matches!(trigger, Trigger::Between) {
            self.pre_compact_hooks("auto", cancel).await;
        }
        let keep = match trigger {
            Trigger::Between => None,
            Trigger::InTurn | Trigger::Rejected(_) => self
                .turn
                .prompt
                .clone()
                .filter(|p| p.index < self.conversation.len()),
        };
        if keep.is_some()
            && let Some((message, fixed, window)) = self.prompt_overflow()
        {
            return Err(CompactError::PromptTooLarge {
                message,
                fixed,
                window,
            });
        }
        let mut to_summarise: Vec<ChatMessage> = self
            .conversation
            .history()
            .iter()
            .enumerate()
            .filter(|(i, _)| keep.as_ref().is_none_or(|k| k.index != *i))
            .map(|(_, m)| m.clone())
            .collect();
        // Output of `!commands` not sent yet is part of what is summarised
        // (it would otherwise be dropped by the reload below).
        if !self.bang_output.is_empty() {
            to_summarise.push(ChatMessage::user(self.bang_output.join("\n\n")));
        }
        if to_summarise.is_empty() {
            return Err(CompactError::Empty);
        }
        // Checked before the summary is asked (no request when every name is taken); the
        // name is chosen again when the new journal is written, as one may be taken meanwhile.
        let free = |s: &Session| {
            next_name(s.conversation.name(), |n| {
                store::session_path(&s.services.cwd, n).exists()
            })
            .ok_or_else(|| CompactError::NoFreeName(s.conversation.name().to_owned()))
        };
        free(self)?;
        let id = format!("compaction-{}", uuid::Uuid::new_v4().simple());
        let report = |s: &Session, state: CompactionState| {
            s.emit(Event::Compaction {
                id: id.clone(),
                state,
            });
        };
        report(self, CompactionState::Started);
        let before = self.context_tokens();
        let rejected = match trigger {
            Trigger::Rejected(tokens) => Some(tokens),
            _ => None,
        };
        let result = self
            .write_summary(&to_summarise, keep.is_some(), rejected, cancel)
            .await;
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
        let mut records = vec![Record::Compaction {
            summary: summary.clone(),
        }];
        records.push(Record::Costs {
            ledger: self.conversation.ledger().clone(),
        });
        if let Some(title) = self.conversation.title() {
            records.push(Record::Title {
                title: title.to_owned(),
                source: self.conversation.title_source(),
            });
        }
        // The thread's options and loaded tools go on in the new file.
        records.extend(self.conversation.option_records());
        records.extend(self.conversation.loaded_tools_record());
        let kept = keep
            .as_ref()
            .and_then(|k| Some((k, self.conversation.history().get(k.index)?.clone())));
        if let Some((prompt, message)) = &kept {
            records.push(Record::UserDisplay {
                id: prompt.id.clone(),
                text: prompt.display.clone(),
                steer: false,
            });
            records.push(Record::Message {
                message: message.clone(),
            });
        }
        let mut attempts = 0;
        let saved = loop {
            let name = match free(self) {
                Ok(name) => name,
                Err(e) => break Err(e),
            };
            match self.conversation.continue_as(name, &records) {
                Ok(()) => break Ok(()),
                // Taken between the check and the write: the next free name.
                Err(store::StoreError::Exists { .. }) if attempts < MAX_SUFFIX => attempts += 1,
                Err(e) => {
                    break Err(CompactError::Failed(format!(
                        "cannot save the compacted session: {e}"
                    )));
                }
            }
        };
        if let Err(e) = saved {
            report(self, CompactionState::Failed(e.to_string()));
            return Err(e);
        }
        if let Some((prompt, message)) = kept {
            self.conversation.restore_kept(message);
            self.turn.prompt = Some(TurnPrompt {
                index: 0,
                display: prompt.display.clone(),
                id: prompt.id.clone(),
            });
        }
        let context_files = std::mem::take(&mut self.project.context_files);
        // Tools, skills and permissions are reloaded (the MAIA behaviour),
        // without repeating the start-up notices.
        self.reload_quietly();
        self.emit(Event::Commands(self.project.command_entries()));
        if !context_files.files.is_empty() {
            self.project.context_files = context_files;
        }
        self.tools.reads = std::sync::Arc::new(maia_tools::ReadTracker::default());
        self.meter.forget();
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
        if let Some(size) = self.meter.window() {
            self.emit_usage(after, size);
        }
        Ok(())
    }

    /// The model that writes summaries (`smallModel`, else the session's)
    /// and its window when known.
    pub(super) async fn summary_model(
        &mut self,
        cancel: &CancellationToken,
    ) -> Result<(String, Option<u64>), CompactError> {
        let session_model = match self.resolve_model(cancel).await {
            Ok(model) => model,
            Err(_) if cancel.is_cancelled() => return Err(CompactError::Cancelled),
            Err(e) => return Err(CompactError::Failed(e)),
        };
        match self.project.settings.small_model.clone() {
            Some(small) if small != session_model => {
                let window = self
                    .known_window(&small, cancel)
                    .await
                    .map(|w| w.tokens)
                    .or(self.meter.window());
                Ok((small, window))
            }
            _ => Ok((session_model, self.meter.window())),
        }
    }
}
