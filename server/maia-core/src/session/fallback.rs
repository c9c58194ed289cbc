//! Fallback models (`fallbackModels`, or a subagent's own): when a request
//! failed after its retries with an overload (529), a rate limit (429) or
//! another 5xx, the turn goes on with the next model of the list. The user
//! is told (a warning notice, and [`Event::ModelChanged`] for the model
//! picker); the fallback holds for the rest of the turn, and the chosen
//! model is tried again the next turn. The window and the prices follow
//! the model actually asked (the turn loop's `model`).

use maia_llm::LlmError;
use tokio_util::sync::CancellationToken;

use crate::event::{Event, NoticeLevel};
use crate::session::Session;
use crate::session::round::TurnLoop;

/// Whether `error` (after the client's retries) sends the request to the
/// next model: an overload, a rate limit or a server error.
pub(crate) fn falls_back(error: &LlmError) -> bool {
    matches!(
        error,
        LlmError::RateLimited { .. } | LlmError::Server { .. }
    )
}

/// The model after `current` in `list`, never `chosen` again; from the
/// start of the list when `current` is the chosen model or not listed.
pub(crate) fn next_model<'a>(list: &'a [String], current: &str, chosen: &str) -> Option<&'a str> {
    let from = match list.iter().position(|m| m == current) {
        Some(at) if current != chosen => at + 1,
        _ => 0,
    };
    list[from.min(list.len())..]
        .iter()
        .map(String::as_str)
        .find(|m| *m != chosen && *m != current)
}

impl Session {
    /// The fallback list in force: a subagent's own, else the settings'.
    fn fallback_models(&self) -> &[String] {
        match self
            .role
            .as_ref()
            .and_then(|r| r.fallback_models.as_deref())
        {
            Some(own) => own,
            None => &self.project.settings.fallback_models,
        }
    }

    /// The model this turn uses: the one it fell back to, else `chosen`.
    pub(crate) fn turn_model(&self, chosen: String) -> String {
        self.turn.fallback.clone().unwrap_or(chosen)
    }

    /// After `error` ended a request (retries spent): moves the turn to
    /// the next fallback model and says so; `false` when there is none
    /// (or the error is not one that falls back).
    pub(crate) async fn fall_back(
        &mut self,
        error: &LlmError,
        state: &mut TurnLoop,
        cancel: &CancellationToken,
    ) -> bool {
        if !falls_back(error) {
            return false;
        }
        let chosen = self.model.clone().unwrap_or_default();
        let Some(next) = next_model(self.fallback_models(), &state.model, &chosen) else {
            return false;
        };
        let next = next.to_owned();
        let text = format!(
            "`{}` failed ({error}) after its retries; this turn goes on with `{next}` (fallbackModels), and `{chosen}` is tried again next turn.",
            state.model
        );
        tracing::warn!(from = %state.model, to = %next, "{text}");
        self.emit(Event::Notice {
            level: NoticeLevel::Warning,
            text,
        });
        self.emit(Event::ModelChanged(next.clone()));
        self.learn_window(&next, cancel).await;
        state.cache = self.prompt_caching(&next);
        state.model = next.clone();
        self.turn.fallback = Some(next);
        true
    }

    /// At a turn's end: a fallback is given up, and the model picker shows
    /// the chosen model again.
    pub(crate) fn end_fallback(&mut self) {
        if self.turn.fallback.take().is_some()
            && let Some(chosen) = self.model.clone()
        {
            self.emit(Event::ModelChanged(chosen));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_model_follows_the_current_one_and_skips_the_chosen() {
        let list: Vec<String> = ["b", "a", "c"].iter().map(|m| (*m).to_owned()).collect();
        assert_eq!(next_model(&list, "a", "a"), Some("b"));
        assert_eq!(next_model(&list, "b", "a"), Some("c"));
        assert_eq!(next_model(&list, "c", "a"), None);
        assert_eq!(next_model(&[], "a", "a"), None);
        assert!(falls_back(&LlmError::Server {
            status: 529,
            message: String::new()
        }));
        assert!(!falls_back(&LlmError::BadRequest {
            status: 400,
            message: String::new()
        }));
    }
}
