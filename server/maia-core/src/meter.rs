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
    /// Calls read from replies that were nothing but calls, and run.
    pub run: u64,
}

/// A context size the server reported, and how much of the history it
/// covered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Measured {
    pub tokens: u64,
    /// The history's length when it was measured.
    pub history_len: usize,
}

/// What is known of the context's size and the model's window. Its
/// fields are its own: the turn tells it what happened
/// ([`Meter::observe`], [`Meter::measure`], [`Meter::told_window`], …) and
/// everyone reads it through its methods.
#[derive(Debug)]
pub(crate) struct Meter {
    /// The last measured context size.
    measured: Option<Measured>,
    /// Real/estimated token ratio from the last response (1.0 until known).
    calibration: f64,
    /// The context window of the model in use, once known.
    window: Option<u64>,
    /// Where [`Meter::window`] came from (`manual`, `modelInfo`, …).
    window_source: Option<&'static str>,
    /// The longest answer of the model in use, when its information says.
    max_output: Option<u64>,
    /// The last response's usage and what the meter showed for it.
    last_usage: Option<maia_llm::Usage>,
    /// Cached prompt tokens over the session.
    cached_total: u64,
    /// Tool calls the model wrote as text: retried, and shown after a second time.
    text_tool_calls: TextToolCalls,
}

impl Default for Meter {
    fn default() -> Self {
        Meter {
            measured: None,
            calibration: 1.0,
            window: None,
            window_source: None,
            max_output: None,
            last_usage: None,
            cached_total: 0,
            text_tool_calls: TextToolCalls::default(),
        }
    }
}

/// The size of one request as sent: its characters without the images,
/// and the tokens of the images counted apart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RequestSize {
    pub chars: usize,
    pub image_tokens: u64,
}

/// What the meter made of a response ([`Meter::observe`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Observed {
    /// The response's usage, when its numbers are believable for a request
    /// of its size (a proxy's bug can report any number).
    pub usage: Option<maia_llm::Usage>,
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

/// Whether a response's `usage` can be of a request and answer of `chars`
/// characters (plus `image_tokens` of images): within the ratio the
/// calibration accepts (under 10 times the estimate), with prompt tokens
/// (a missing or null `prompt_tokens` reads as 0: no request has none).
pub(crate) fn believable_usage(usage: &maia_llm::Usage, image_tokens: u64, chars: usize) -> bool {
    let estimated = estimate(chars) as f64;
    let kept = usage.kept().saturating_sub(image_tokens) as f64;
    usage.prompt_tokens > 0 && estimated > 0.0 && kept < estimated * 10.0
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

    /// Forgets what was measured (the history changed under it).
    pub(crate) fn forget(&mut self) {
        self.measured = None;
    }

    /// Takes in a response to a request of `size`: its usage, if
    /// believable, becomes the last usage and adds to the cached total.
    /// Numbers no request of this size has are not believed: the estimate
    /// stands in for them.
    pub(crate) fn observe(&mut self, answer: &maia_llm::Completion, size: RequestSize) -> Observed {
        let answer_chars = message_chars(&[ChatMessage::Assistant {
            content: Some(answer.text.clone()),
            tool_calls: answer.tool_calls.clone(),
        }]);
        let usage = answer.usage.clone().filter(|u| {
            let believable =
                believable_usage(u, size.image_tokens, size.chars + answer_chars);
            if !believable {
                tracing::warn!(usage = ?u, "usage numbers out of all proportion to the request; ignored");
            }
            believable
        });
        if let Some(usage) = &usage {
            self.cached_total = self.cached_total.saturating_add(usage.cached_tokens);
            self.last_usage = Some(usage.clone());
        }
        Observed { usage }
    }

    /// Takes `usage` as the measure of a history of `history_len` messages
    /// and learns the calibration from it, both without the images: they
    /// leave the context with the turn.
    pub(crate) fn measure(
        &mut self,
        usage: &maia_llm::Usage,
        size: RequestSize,
        history_len: usize,
    ) {
        self.calibrate(
            usage.prompt_tokens.saturating_sub(size.image_tokens),
            size.chars,
        );
        self.measured = Some(Measured {
            tokens: usage.kept().saturating_sub(size.image_tokens),
            history_len,
        });
    }

    /// The window of the model in use, and where it came from (`None`:
    /// unknown).
    pub(crate) fn know_window(&mut self, window: Option<(u64, &'static str)>) {
        self.window = window.map(|(tokens, _)| tokens);
        self.window_source = window.map(|(_, source)| source);
    }

    /// The longest answer of the model in use (`None`: not said).
    pub(crate) fn know_max_output(&mut self, tokens: Option<u64>) {
        self.max_output = tokens;
    }

    /// The longest answer of the model in use, when its information says.
    pub(crate) fn max_output(&self) -> Option<u64> {
        self.max_output
    }

    /// A window the provider's error told: believed when smaller than the
    /// one known (or none is). Returns whether it was.
    pub(crate) fn told_window(&mut self, told: u64) -> bool {
        if self.window.is_some_and(|w| told >= w) {
            return false;
        }
        self.window = Some(told);
        self.window_source = Some("providerError");
        true
    }

    /// A tool call written as text, retried with a correction.
    pub(crate) fn text_tool_call_retried(&mut self) {
        self.text_tool_calls.retried += 1;
    }

    /// Replies that were nothing but tool calls written as text, run as
    /// `calls` calls.
    pub(crate) fn text_tool_calls_run(&mut self, calls: usize) {
        self.text_tool_calls.run += calls as u64;
    }

    /// A tool call written as text again, shown as text.
    pub(crate) fn text_tool_call_shown(&mut self) {
        self.text_tool_calls.shown += 1;
    }

    /// The characters `tokens` tokens take, by the calibration.
    pub(crate) fn chars_of(&self, tokens: f64) -> usize {
        (tokens * CHARS_PER_TOKEN as f64 / self.calibration.max(0.1)) as usize
    }

    /// The context window of the model in use, once known.
    pub(crate) fn window(&self) -> Option<u64> {
        self.window
    }

    /// Where [`Meter::window`] came from (`manual`, `modelInfo`, …).
    pub(crate) fn window_source(&self) -> Option<&'static str> {
        self.window_source
    }

    /// The last believed usage of a response.
    pub(crate) fn last_usage(&self) -> Option<&maia_llm::Usage> {
        self.last_usage.as_ref()
    }

    /// Cached prompt tokens over the session.
    pub(crate) fn cached_total(&self) -> u64 {
        self.cached_total
    }

    /// Real/estimated token ratio from the last response (1.0 until known).
    pub(crate) fn calibration(&self) -> f64 {
        self.calibration
    }

    /// Tool calls the model wrote as text.
    pub(crate) fn text_tool_calls(&self) -> TextToolCalls {
        self.text_tool_calls
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

    fn answer(
        prompt_tokens: u64,
        completion_tokens: u64,
        cached_tokens: u64,
    ) -> maia_llm::Completion {
        maia_llm::Completion {
            text: "an answer".repeat(10),
            usage: Some(maia_llm::Usage {
                prompt_tokens,
                completion_tokens,
                total_tokens: prompt_tokens + completion_tokens,
                cached_tokens,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn an_observed_answer_keeps_its_believable_usage_only() {
        let mut meter = Meter::default();
        let size = RequestSize {
            chars: 4_000,
            image_tokens: 0,
        };
        let seen = meter.observe(&answer(1_200, 30, 200), size);
        assert_eq!(seen.usage.as_ref().map(|u| u.prompt_tokens), Some(1_200));
        assert_eq!(meter.last_usage().map(|u| u.completion_tokens), Some(30));
        assert_eq!(meter.cached_total(), 200);
        meter.observe(&answer(1_000, 10, 100), size);
        assert_eq!(meter.cached_total(), 300, "cached tokens add up");
        // A hundred times what a request of this size can hold.
        let seen = meter.observe(&answer(100_000_000, 10, 5), size);
        assert_eq!(seen.usage, None, "not believed");
        assert_eq!(meter.last_usage().map(|u| u.prompt_tokens), Some(1_000));
        assert_eq!(meter.cached_total(), 300);
    }

    #[test]
    fn a_measure_leaves_the_images_out() {
        let mut meter = Meter::default();
        let usage = answer(1_500, 100, 0).usage.unwrap_or_default();
        let size = RequestSize {
            chars: 4_000,
            image_tokens: 500,
        };
        meter.measure(&usage, size, 3);
        assert_eq!(
            meter.measured_within(3),
            Some(Measured {
                tokens: 1_100,
                history_len: 3
            })
        );
        assert_eq!(
            meter.calibration(),
            1.0,
            "1000 real tokens for 1000 estimated"
        );
    }

    #[test]
    fn a_told_window_is_believed_only_when_smaller() {
        let mut meter = Meter::default();
        assert!(meter.told_window(50_000), "no window known yet");
        assert_eq!(meter.window(), Some(50_000));
        assert_eq!(meter.window_source(), Some("providerError"));
        meter.know_window(Some((40_000, "manual")));
        assert!(!meter.told_window(45_000));
        assert_eq!(
            (meter.window(), meter.window_source()),
            (Some(40_000), Some("manual"))
        );
        assert!(meter.told_window(30_000));
        assert_eq!(meter.window(), Some(30_000));
        meter.know_max_output(Some(2_000));
        assert_eq!(meter.max_output(), Some(2_000));
        meter.know_window(None);
        assert_eq!((meter.window(), meter.window_source()), (None, None));
    }

    #[test]
    fn text_tool_calls_and_characters_by_the_calibration() {
        let mut meter = Meter::default();
        meter.text_tool_call_retried();
        meter.text_tool_call_shown();
        meter.text_tool_call_retried();
        assert_eq!(
            meter.text_tool_calls(),
            TextToolCalls {
                retried: 2,
                shown: 1,
                run: 0
            }
        );
        assert_eq!(meter.chars_of(100.0), 400);
        meter.calibrate(200, 400);
        assert_eq!(meter.chars_of(100.0), 200);
    }
}
