//! The context meter: how full the model's context is, from the server's
//! usage figures where there are some and a calibrated estimate elsewhere.
//! One owner (the session's `meter`); compaction and the
//! turn read and update it.

use maia_llm::ChatMessage;

/// Counts of tool calls written as text instead of through the tool-calling interface.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TextToolCalls {
    /// Requests retried with the corrective instruction.
    pub retried: u32,
    /// Retries that came back as text again (shown to the user as text).
    pub shown: u32,
}

/// A context size the server reported, and how much of the history it
/// covered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Measured {
    pub tokens: u64,
    /// The history's length when it was measured.
    pub history_len: usize,
}

/// What is known of the context's size and the model's window.
#[derive(Debug)]
pub(crate) struct Meter {
    /// The last measured context size.
    pub measured: Option<Measured>,
    /// Real/estimated token ratio from the last response (1.0 until known).
    pub calibration: f64,
    /// The context window of the model in use, once known.
    pub window: Option<u64>,
    /// Where [`Meter::window`] came from (`manual`, `modelInfo`, …).
    pub window_source: Option<&'static str>,
    /// The last response's usage and what the meter showed for it.
    pub last_usage: Option<maia_llm::Usage>,
    /// Cached prompt tokens over the session.
    pub cached_total: u64,
    /// Tool calls the model wrote as text: retried, and shown after a second time.
    pub text_tool_calls: TextToolCalls,
}

impl Default for Meter {
    fn default() -> Self {
        Meter {
            measured: None,
            calibration: 1.0,
            window: None,
            window_source: None,
            last_usage: None,
            cached_total: 0,
            text_tool_calls: TextToolCalls::default(),
        }
    }
}

/// Characters per token of the estimate.
pub(crate) const CHARS_PER_TOKEN: usize = 4;

/// Characters of `messages` as sent (their JSON).
pub(crate) fn message_chars(messages: &[ChatMessage]) -> usize {
    messages
        .iter()
        .map(|m| serde_json::to_string(m).map(|s| s.len()).unwrap_or(0))
        .sum()
}

/// Tokens of `chars` characters, uncalibrated.
pub(crate) fn estimate(chars: usize) -> u64 {
    chars.div_ceil(CHARS_PER_TOKEN) as u64
}

impl Meter {
    /// Tokens of `chars` characters: the estimate, calibrated by the last
    /// measured real/estimated ratio.
    pub(crate) fn calibrated(&self, chars: usize) -> u64 {
        (estimate(chars) as f64 * self.calibration).round() as u64
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

    /// The measurement, while it still covers a prefix of a history of
    /// `history_len` messages.
    pub(crate) fn measured_within(&self, history_len: usize) -> Option<Measured> {
        self.measured.filter(|m| m.history_len <= history_len)
    }

    /// Forgets what was measured (the history changed under it).
    /// Tokens of the next request's text: the last measured size plus an
    /// estimate of what `history` gained since, else an estimate of
    /// everything, with the `fixed` characters every request carries
    /// (the system prompt and the tools; asked only when needed).
    pub(crate) fn text_tokens(
        &self,
        history: &[ChatMessage],
        fixed: impl FnOnce() -> usize,
    ) -> u64 {
        match self.measured_within(history.len()) {
            Some(Measured {
                tokens,
                history_len,
            }) => tokens + self.calibrated(message_chars(&history[history_len..])),
            None => self.calibrated(fixed() + message_chars(history)),
        }
    }

    /// Whether the context size of `history` comes from the server
    /// (`measured`) or from an estimate.
    pub(crate) fn source(&self, history_len: usize) -> &'static str {
        match self.measured_within(history_len) {
            Some(_) => "measured",
            None => "estimated",
        }
    }

    pub(crate) fn forget(&mut self) {
        self.measured = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_follows_believable_ratios_only() {
        let mut meter = Meter::default();
        assert_eq!(meter.calibrated(400), 100);
        meter.calibrate(150, 400);
        assert_eq!(meter.calibrated(400), 150);
        meter.calibrate(100_000, 400);
        assert_eq!(meter.calibrated(400), 150, "a 1000× ratio is not believed");
        meter.calibrate(0, 400);
        assert_eq!(meter.calibrated(400), 150);
    }

    #[test]
    fn a_measurement_covers_only_the_history_it_saw() {
        let mut meter = Meter {
            measured: Some(Measured {
                tokens: 10,
                history_len: 4,
            }),
            ..Meter::default()
        };
        assert!(meter.measured_within(4).is_some());
        assert!(meter.measured_within(3).is_none(), "the history was cut");
        meter.forget();
        assert!(meter.measured_within(10).is_none());
    }

    #[test]
    fn text_tokens_add_an_estimate_of_what_came_after_the_measurement() {
        let history = vec![
            ChatMessage::user("a".repeat(400)),
            ChatMessage::user("b".repeat(800)),
        ];
        let second = message_chars(&history[1..]);
        let all = message_chars(&history);
        let mut meter = Meter::default();
        assert_eq!(meter.text_tokens(&history, || 40), estimate(40 + all));
        assert_eq!(meter.source(history.len()), "estimated");
        meter.measured = Some(Measured {
            tokens: 1_000,
            history_len: 1,
        });
        let fixed_asked = std::cell::Cell::new(false);
        let tokens = meter.text_tokens(&history, || {
            fixed_asked.set(true);
            40
        });
        assert_eq!(tokens, 1_000 + estimate(second));
        assert!(
            !fixed_asked.get(),
            "a measurement already counts the fixed part"
        );
        assert_eq!(meter.source(history.len()), "measured");
    }
}
