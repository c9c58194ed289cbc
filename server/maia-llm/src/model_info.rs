//! Context window discovery helpers: LiteLLM's `/model/info`, asking the model itself, and
//! [`parse_token_count`] for the model's free-text answer.
//!
//! The order in which these sources are consulted (manual setting first) is the engine's
//! business; this module only talks to the server and reads answers.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::client::LlmClient;
use crate::error::LlmError;
use crate::types::{ChatMessage, ChatRequest, lenient_u64};

/// LiteLLM's model information route, relative to the base URL (`LiteLLM_URL`).
pub const MODEL_INFO_PATH: &str = "/model/info";

/// The question MAIA asks a model about its own context window.
pub const CONTEXT_WINDOW_QUESTION: &str =
    "What is the maximum context size of this model, in tokens? Answer with the number only.";

/// Overall limit for [`LlmClient::ask_context_window`] (request, retries and stream).
pub const ASK_CONTEXT_WINDOW_TIMEOUT: Duration = Duration::from_secs(60);

/// `max_tokens` of the question: the answer is a number.
const ASK_MAX_TOKENS: u32 = 50;

/// Smallest token count [`parse_token_count`] accepts.
pub const MIN_TOKEN_COUNT: u64 = 1_000;
/// Largest token count [`parse_token_count`] accepts.
pub const MAX_TOKEN_COUNT: u64 = 100_000_000;

/// Whether a context window a server reports is one a model can have (256 tokens to
/// [`MAX_TOKEN_COUNT`]). A value outside is treated as not reported: adopting a window of
/// 1 token would refuse every message, one of 10^12 would never compact.
pub fn plausible_window(tokens: u64) -> bool {
    (256..=MAX_TOKEN_COUNT).contains(&tokens)
}

impl LlmClient {
    /// Reads LiteLLM's `GET <base_url>/model/info` and maps each entry's `model_name` to its
    /// `model_info.max_input_tokens` (an integer, a float such as `32768.0`, or a numeric
    /// string). Entries whose value is `null`, missing, zero or not a number are skipped. When
    /// several deployments share a `model_name`, the smallest value is kept.
    ///
    /// A server without this route (HTTP 404 or 405, e.g. llama-server or OpenAI directly)
    /// gives `Ok` with an empty map; other failures (connection, auth, 5xx, a body that is
    /// not JSON or has no `data` array) are errors. No retries.
    pub async fn model_info_windows(&self) -> Result<HashMap<String, u64>, LlmError> {
        Ok(self
            .model_info()
            .await?
            .into_iter()
            .filter_map(|(name, entry)| Some((name, entry.max_input_tokens?)))
            .collect())
    }

    /// Reads LiteLLM's `GET <base_url>/model/info`: per `model_name`, its window (as
    /// [`LlmClient::model_info_windows`]) and its provider. Same errors.
    pub async fn model_info(&self) -> Result<HashMap<String, ModelInfoEntry>, LlmError> {
        match self.model_info_body().await? {
            None => Ok(HashMap::new()),
            Some(value) => {
                entries_from_model_info(&value).ok_or_else(|| LlmError::InvalidResponse {
                    message: "model info has no \"data\" array".to_owned(),
                })
            }
        }
    }

    /// The `/model/info` body; `None` when the server has no such route.
    async fn model_info_body(&self) -> Result<Option<Value>, LlmError> {
        let url = self.config().join(MODEL_INFO_PATH);
        let (status, headers, text) = self.get_text(&url, "the model info").await?;
        if status.as_u16() == 404 || status.as_u16() == 405 {
            tracing::debug!(%url, status = status.as_u16(), "no model info route");
            return Ok(None);
        }
        if !status.is_success() {
            return Err(LlmError::from_http(status.as_u16(), &headers, &text));
        }
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|err| LlmError::InvalidResponse {
                message: format!("model info is not JSON: {err}"),
            })
    }

    /// Asks `model` for its maximum context size (one streamed request, no tools,
    /// `max_tokens` 50) and reads the answer with [`parse_token_count`].
    ///
    /// Limited to [`ASK_CONTEXT_WINDOW_TIMEOUT`] overall: on timeout, or when the answer has no
    /// plausible number, a warning is logged and `Ok(None)` returned. Request errors are
    /// returned as they are; `Err(Cancelled)` when `cancel` fires.
    pub async fn ask_context_window(
        &self,
        model: &str,
        cancel: &CancellationToken,
    ) -> Result<Option<u64>, LlmError> {
        self.ask_context_window_within(model, cancel, ASK_CONTEXT_WINDOW_TIMEOUT)
            .await
    }

    pub(crate) async fn ask_context_window_within(
        &self,
        model: &str,
        cancel: &CancellationToken,
        limit: Duration,
    ) -> Result<Option<u64>, LlmError> {
        let request = ChatRequest {
            model: model.to_owned(),
            messages: vec![ChatMessage::user(CONTEXT_WINDOW_QUESTION)],
            tools: Vec::new(),
            max_tokens: Some(ASK_MAX_TOKENS),
            cache: false,
            reasoning_effort: None,
        };
        let mut ignore = |_| {};
        let completion = match tokio::time::timeout(
            limit,
            self.stream_chat(&request, cancel, &mut ignore),
        )
        .await
        {
            Ok(result) => result?,
            Err(_) => {
                tracing::warn!(
                    model,
                    seconds = limit.as_secs_f64(),
                    "the model did not tell its context size in time"
                );
                return Ok(None);
            }
        };
        let answer = strip_think(&completion.text);
        let tokens = parse_token_count(&answer);
        match tokens {
            Some(tokens) => tracing::debug!(model, tokens, "the model told its context size"),
            None => tracing::warn!(
                model,
                answer = %answer.chars().take(200).collect::<String>(),
                "unreadable context size answer"
            ),
        }
        Ok(tokens)
    }
}

/// What one model costs, per token (LiteLLM's `/model/info` names:
/// `input_cost_per_token`, `output_cost_per_token`,
/// `cache_read_input_token_cost`, `cache_creation_input_token_cost`), in
/// US dollars as LiteLLM counts. Cache prices default to the input price.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prices {
    pub input: f64,
    pub output: f64,
    pub cache_read: Option<f64>,
    pub cache_write: Option<f64>,
}

impl Prices {
    /// The prices in a `/model/info` `model_info` object (or a settings
    /// entry of the same shape): `None` without both the input and the
    /// output price (never a made-up number).
    pub fn from_model_info(info: &Value) -> Option<Prices> {
        let price = |key: &str| {
            info.get(key)
                .and_then(lenient_f64)
                .filter(|p| p.is_finite() && *p >= 0.0)
        };
        Some(Prices {
            input: price("input_cost_per_token")?,
            output: price("output_cost_per_token")?,
            cache_read: price("cache_read_input_token_cost"),
            cache_write: price("cache_creation_input_token_cost"),
        })
    }

    /// The cost of one response's usage: uncached prompt tokens at the input
    /// price, cache reads and writes at theirs, the completion (reasoning
    /// included) at the output price.
    pub fn cost(&self, usage: &crate::Usage) -> f64 {
        let cached = usage.cached_tokens.min(usage.prompt_tokens);
        let written = usage
            .cache_write_tokens
            .min(usage.prompt_tokens.saturating_sub(cached));
        let plain = usage.prompt_tokens - cached - written;
        plain as f64 * self.input
            + cached as f64 * self.cache_read.unwrap_or(self.input)
            + written as f64 * self.cache_write.unwrap_or(self.input)
            + usage.completion_tokens as f64 * self.output
    }
}

/// A number, or a numeric string.
fn lenient_f64(value: &Value) -> Option<f64> {
    value
        .as_f64()
        .or_else(|| value.as_str().and_then(|s| s.trim().parse().ok()))
}

/// What `/model/info` says of one model name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelInfoEntry {
    /// `model_info.max_input_tokens` (the smallest of the name's deployments).
    pub max_input_tokens: Option<u64>,
    /// `model_info.max_output_tokens`: the longest answer the model writes (the smallest of
    /// the name's deployments).
    pub max_output_tokens: Option<u64>,
    /// `model_info.litellm_provider`, else the prefix of `litellm_params.model`
    /// (`anthropic/claude-…` → `anthropic`).
    pub provider: Option<String>,
    /// `litellm_params.model`, the upstream model.
    pub upstream: Option<String>,
    /// Whether it accepts images (`model_info.supports_vision`); `None` when no deployment
    /// says, `false` when deployments of one name disagree.
    pub supports_vision: Option<bool>,
    /// Its prices, when the first deployment that has them says.
    pub prices: Option<Prices>,
    /// Whether it takes a reasoning effort (`model_info.supports_reasoning`); `None` when no
    /// deployment says, `false` when deployments of one name disagree.
    pub supports_reasoning: Option<bool>,
}

impl ModelInfoEntry {
    /// Whether the upstream is an Anthropic model (Anthropic, Bedrock or Vertex Claude),
    /// which caches prompts only where it is told to (`cache_control`).
    pub fn is_anthropic_family(&self) -> bool {
        let provider = self.provider.as_deref().unwrap_or("").to_lowercase();
        let upstream = self.upstream.as_deref().unwrap_or("").to_lowercase();
        provider == "anthropic"
            || upstream.starts_with("anthropic/")
            || ((provider.starts_with("bedrock") || provider.starts_with("vertex_ai"))
                && (upstream.contains("claude") || upstream.contains("anthropic")))
    }
}

/// The `model_name` → entry map of a `/model/info` body; `None` without a `data` array.
fn entries_from_model_info(value: &Value) -> Option<HashMap<String, ModelInfoEntry>> {
    let data = value.get("data")?.as_array()?;
    let mut entries: HashMap<String, ModelInfoEntry> = HashMap::new();
    for entry in data {
        let Some(name) = entry.get("model_name").and_then(Value::as_str) else {
            continue;
        };
        let tokens = entry
            .pointer("/model_info/max_input_tokens")
            .and_then(lenient_u64)
            .filter(|&t| plausible_window(t));
        let output = entry
            .pointer("/model_info/max_output_tokens")
            .and_then(lenient_u64)
            .filter(|&t| t > 0);
        let upstream = entry
            .pointer("/litellm_params/model")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let provider = entry
            .pointer("/model_info/litellm_provider")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| Some(upstream.as_deref()?.split_once('/')?.0.to_owned()));
        let known = entries.entry(name.to_owned()).or_default();
        known.max_input_tokens = match (known.max_input_tokens, tokens) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        known.max_output_tokens = match (known.max_output_tokens, output) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(vision) = crate::types::entry_supports_vision(entry) {
            known.supports_vision = Some(known.supports_vision.unwrap_or(true) && vision);
        }
        if let Some(reasoning) = entry
            .pointer("/model_info/supports_reasoning")
            .and_then(Value::as_bool)
        {
            known.supports_reasoning = Some(known.supports_reasoning.unwrap_or(true) && reasoning);
        }
        if known.provider.is_none() {
            known.provider = provider;
        }
        if known.prices.is_none() {
            known.prices = entry.get("model_info").and_then(Prices::from_model_info);
        }
        if known.upstream.is_none() {
            known.upstream = upstream;
        }
    }
    Some(entries)
}

/// `text` without `<think>…</think>` blocks (an unclosed block runs to the end).
fn strip_think(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find("<think>") {
        out.push_str(&rest[..open]);
        match rest[open..].find("</think>") {
            Some(close) => rest = &rest[open + close + "</think>".len()..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

// ---- parse_token_count -------------------------------------------------------------------

/// Reads a token count from a free-text answer: `128000`, `128 000 tokens`, `128,000`,
/// `128.000`, `200k`, `200K tokens`, `1,5 million`, `1.5 million`, `1M`, `2 millions`,
/// `32 768` (also with U+00A0 / U+202F / U+2009 or `'` between groups), or a sentence such as
/// "The maximum context is 128000 tokens.".
///
/// Returns the first number, with its unit (`k`, `thousand`, `M`, `million(s)`, `mio`,
/// `B`, `billion`, `milliard`…), whose value lies between [`MIN_TOKEN_COUNT`] and
/// [`MAX_TOKEN_COUNT`]; numbers glued to a word (`gpt4`, `llama-3.1`, `gpt-4-32k`) are
/// skipped.
///
/// Separators: a space-like separator is a thousands separator when exactly three digits
/// follow. A `,` or `.` followed by exactly three digits is a thousands separator
/// (`128,000`, `128.000`); followed by another number of digits it is the decimal mark
/// (`1,5 million`, `1.5 million`). When that reading is implausible and a unit follows, a
/// last three-digit group is read as decimals instead (`1.048 million` = 1,048,000).
pub fn parse_token_count(text: &str) -> Option<u64> {
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let (number, end) = read_number(&chars, i);
        let glued = glued_to_word(&chars, i);
        i = end.max(i + 1);
        if glued {
            continue;
        }
        if let Some(value) = number.plausible_value() {
            return Some(value);
        }
    }
    None
}

#[derive(Clone, Copy, PartialEq)]
enum SepKind {
    /// Space-like: only ever a thousands separator.
    Space,
    /// `,` or `.`: thousands separator or decimal mark.
    Punct,
}

fn separator_kind(c: char) -> Option<SepKind> {
    match c {
        ' ' | '\u{00A0}' | '\u{202F}' | '\u{2009}' | '\'' | '\u{2019}' => Some(SepKind::Space),
        ',' | '.' => Some(SepKind::Punct),
        _ => None,
    }
}

/// Horizontal spaces allowed between a number and its unit.
fn is_gap(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{00A0}' | '\u{202F}' | '\u{2009}')
}

struct Group {
    sep: Option<SepKind>,
    digits: String,
}

struct Number {
    groups: Vec<Group>,
    multiplier: u64,
}

impl Number {
    fn plausible_value(&self) -> Option<u64> {
        let plausible = |v: &u64| (MIN_TOKEN_COUNT..=MAX_TOKEN_COUNT).contains(v);
        let last = self.groups.len() - 1;
        let primary = self.value(None).filter(plausible);
        if primary.is_some() {
            return primary;
        }
        let last_group = &self.groups[last];
        if self.multiplier > 1
            && last > 0
            && last_group.sep == Some(SepKind::Punct)
            && last_group.digits.len() == 3
        {
            return self.value(Some(last)).filter(plausible);
        }
        None
    }

    /// The value with punctuation groups of three digits as thousands, another punctuation
    /// group (or group `decimal_at`) as the decimal part. Rounded to the nearest integer.
    fn value(&self, decimal_at: Option<usize>) -> Option<u64> {
        let mut digits = String::new();
        let mut decimals = 0u32;
        for (index, group) in self.groups.iter().enumerate() {
            let is_decimal = decimal_at == Some(index)
                || (group.sep == Some(SepKind::Punct) && group.digits.len() != 3);
            digits.push_str(&group.digits);
            if is_decimal {
                decimals = u32::try_from(group.digits.len()).ok()?;
                break;
            }
        }
        let digits = digits.trim_start_matches('0');
        if digits.len() > 30 {
            return None;
        }
        let mantissa: u128 = if digits.is_empty() {
            0
        } else {
            digits.parse().ok()?
        };
        let scaled = mantissa.checked_mul(u128::from(self.multiplier))?;
        let divisor = 10u128.checked_pow(decimals)?;
        let rounded = (scaled + divisor / 2) / divisor;
        u64::try_from(rounded).ok()
    }
}

/// The run of ASCII digits starting at `start`.
fn digit_run(chars: &[char], start: usize) -> String {
    chars
        .iter()
        .skip(start)
        .take_while(|c| c.is_ascii_digit())
        .collect()
}

/// Reads the number starting at `start` (a digit) and its unit; returns it with the index
/// just after what was read.
fn read_number(chars: &[char], start: usize) -> (Number, usize) {
    let first = digit_run(chars, start);
    let mut end = start + first.len();
    let mut groups = vec![Group {
        sep: None,
        digits: first,
    }];
    while let Some(kind) = chars.get(end).copied().and_then(separator_kind) {
        let digits = digit_run(chars, end + 1);
        if digits.is_empty() || (kind == SepKind::Space && digits.len() != 3) {
            break;
        }
        let decimal = kind == SepKind::Punct && digits.len() != 3;
        end += 1 + digits.len();
        groups.push(Group {
            sep: Some(kind),
            digits,
        });
        if decimal {
            break;
        }
    }

    let mut unit_start = end;
    while chars.get(unit_start).is_some_and(|&c| is_gap(c)) {
        unit_start += 1;
    }
    let word: String = chars
        .iter()
        .skip(unit_start)
        .take_while(|c| c.is_alphabetic())
        .collect();
    let multiplier = unit_multiplier(&word.to_lowercase());
    if multiplier.is_some() {
        end = unit_start + word.chars().count();
    }
    (
        Number {
            groups,
            multiplier: multiplier.unwrap_or(1),
        },
        end,
    )
}

fn unit_multiplier(word: &str) -> Option<u64> {
    Some(match word {
        "k" | "thousand" | "thousands" | "mille" => 1_000,
        "m" | "mn" | "mio" | "mln" | "million" | "millions" => 1_000_000,
        "b" | "bn" | "billion" | "billions" | "milliard" | "milliards" => 1_000_000_000,
        _ => return None,
    })
}

/// Whether the digit at `start` belongs to an identifier: right after a letter (`gpt4`), or
/// after `-`, `_` or `.` that follows a letter or digit (`gpt-4-32k`, `llama-3.1`).
fn glued_to_word(chars: &[char], start: usize) -> bool {
    let Some(prev) = start.checked_sub(1).and_then(|i| chars.get(i)) else {
        return false;
    };
    if prev.is_alphabetic() {
        return true;
    }
    matches!(prev, '-' | '_' | '.')
        && start
            .checked_sub(2)
            .and_then(|i| chars.get(i))
            .is_some_and(|c| c.is_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(text: &str, expected: Option<u64>) {
        assert_eq!(parse_token_count(text), expected, "{text:?}");
    }

    #[test]
    fn plain_and_grouped_integers() {
        check("128000", Some(128_000));
        check("  128000\n", Some(128_000));
        check("128 000 tokens", Some(128_000));
        check("128,000", Some(128_000));
        check("128.000", Some(128_000));
        check("1,048,576", Some(1_048_576));
        check("1 048 576 tokens", Some(1_048_576));
        check("32 768", Some(32_768));
        check("32\u{202F}768", Some(32_768));
        check("32\u{00A0}768 tokens", Some(32_768));
        check("1\u{202F}000\u{202F}000", Some(1_000_000));
        check("128'000", Some(128_000));
        check("**131072**", Some(131_072));
        check("`8192`", Some(8_192));
    }

    #[test]
    fn units() {
        check("200k", Some(200_000));
        check("200K tokens", Some(200_000));
        check("200 K", Some(200_000));
        check("128k.", Some(128_000));
        check("1M", Some(1_000_000));
        check("1m tokens", Some(1_000_000));
        check("2 millions", Some(2_000_000));
        check("2 million tokens", Some(2_000_000));
        check("1,5 million", Some(1_500_000));
        check("1.5 million", Some(1_500_000));
        check("1,5\u{00A0}million de tokens", Some(1_500_000));
        check("1.5M", Some(1_500_000));
        check("128.5k", Some(128_500));
        check("32 thousand", Some(32_000));
        check("128 mille jetons", Some(128_000));
        check("1.048 million", Some(1_048_000));
        check("1,000k", Some(1_000_000));
    }

    #[test]
    fn sentences() {
        check("The maximum context is 128000 tokens.", Some(128_000));
        check("The maximum context is 128,000 tokens.", Some(128_000));
        check("My context window is 200K tokens", Some(200_000));
        check("Answer: 8 192", Some(8_192));
        check("1. 4096", Some(4_096));
        check("GPT-4 supports 8192 tokens", Some(8_192));
        check("gpt-4-32k has a context of 32768 tokens", Some(32_768));
        check("Llama 3.1 8B: 128k tokens", Some(128_000));
        check("llama-3.1-70b supports 131072 tokens", Some(131_072));
        check("between 100 000 and 200 000 tokens", Some(100_000));
        check("128000tokens", Some(128_000));
        check("Context: 4096 (n_ctx)", Some(4_096));
    }

    #[test]
    fn rejects_absurd_or_missing_values() {
        check("", None);
        check("I don't know.", None);
        check("42", None);
        check("999", None);
        check("512 tokens", None);
        check("1000", Some(1_000));
        check("100000000", Some(100_000_000));
        check("100000001", None);
        check("2 billion", None);
        check("8B", None);
        check("1e6", None);
        check("99999999999999999999999999999999999999999999", None);
        check("0", None);
        check("0.5k", None);
        check("3.7", None);
        // The first plausible number wins, even after implausible ones.
        check("Version 2, 4 models, 16384 tokens", Some(16_384));
    }

    #[test]
    fn think_blocks_are_ignored() {
        assert_eq!(strip_think("<think>maybe 4096?</think>128k"), "128k");
        assert_eq!(strip_think("a<think>x</think>b<think>y</think>c"), "abc");
        assert_eq!(strip_think("128k<think>unfinished 4096"), "128k");
        assert_eq!(strip_think("plain"), "plain");
    }

    #[test]
    fn model_info_body() {
        let body = serde_json::json!({"data": [
            {"model_name": "a", "model_info": {"max_input_tokens": 32768}},
            {"model_name": "b", "model_info": {"max_input_tokens": 32768.0}},
            {"model_name": "c", "model_info": {"max_input_tokens": null}},
            {"model_name": "d", "model_info": {}},
            {"model_name": "e"},
            {"model_info": {"max_input_tokens": 1000}},
            {"model_name": "f", "model_info": {"max_input_tokens": 0}},
            {"model_name": "tiny", "model_info": {"max_input_tokens": 1}},
            {"model_name": "vast", "model_info": {"max_input_tokens": 1e13}},
            {"model_name": "g", "model_info": {"max_input_tokens": 8192}},
            {"model_name": "g", "model_info": {"max_input_tokens": 4096}},
            {"model_name": "h", "model_info": {"max_input_tokens": "16384"}},
        ]});
        let windows = entries_from_model_info(&body).unwrap();
        let mut got: Vec<_> = windows
            .into_iter()
            .filter_map(|(n, e)| Some((n, e.max_input_tokens?)))
            .collect();
        got.sort();
        assert_eq!(
            got,
            vec![
                ("a".to_owned(), 32768),
                ("b".to_owned(), 32768),
                ("g".to_owned(), 4096),
                ("h".to_owned(), 16384),
            ]
        );
        assert!(entries_from_model_info(&serde_json::json!({"detail": "x"})).is_none());
    }

    #[test]
    fn max_output_tokens_smallest_of_the_deployments() {
        let body = serde_json::json!({"data": [
            {"model_name": "a", "model_info": {"max_output_tokens": 8192}},
            {"model_name": "a", "model_info": {"max_output_tokens": "4096"}},
            {"model_name": "b", "model_info": {"max_output_tokens": 0}},
            {"model_name": "c", "model_info": {"max_output_tokens": null}},
        ]});
        let entries = entries_from_model_info(&body).unwrap();
        assert_eq!(entries["a"].max_output_tokens, Some(4096));
        assert_eq!(entries["b"].max_output_tokens, None, "0 says nothing");
        assert_eq!(entries["c"].max_output_tokens, None);
    }

    #[test]
    fn providers_of_the_anthropic_family() {
        let body = serde_json::json!({"data": [
            {"model_name": "claude", "litellm_params": {"model": "anthropic/claude-sonnet-4-5"}},
            {"model_name": "bedrock", "litellm_params": {"model": "bedrock/anthropic.claude-3-5-sonnet"},
             "model_info": {"litellm_provider": "bedrock"}},
            {"model_name": "vertex", "litellm_params": {"model": "vertex_ai/claude-opus-4"}},
            {"model_name": "gemini", "litellm_params": {"model": "vertex_ai/gemini-2.5-pro"}},
            {"model_name": "gpt", "litellm_params": {"model": "openai/gpt-4o"},
             "model_info": {"litellm_provider": "openai"}},
        ]});
        let entries = entries_from_model_info(&body).unwrap();
        let family = |n: &str| entries[n].is_anthropic_family();
        assert!(family("claude") && family("bedrock") && family("vertex"));
        assert!(!family("gemini") && !family("gpt"));
        assert_eq!(entries["gpt"].provider.as_deref(), Some("openai"));
    }

    // ---- against the mock server ---------------------------------------------------------

    use crate::config::LlmConfig;
    use maia_test_support::{MockLlm, Reply, error_reply, text_reply};

    #[test]
    fn vision_is_read_with_the_other_fields_and_false_wins() {
        let body = serde_json::json!({"data": [
            {"model_name": "eye", "model_info": {"supports_vision": true}},
            {"model_name": "mixed", "model_info": {"supports_vision": true}},
            {"model_name": "mixed", "model_info": {"supports_vision": false}},
            {"model_name": "blind", "model_info": {"supports_vision": false}},
            {"model_name": "silent", "model_info": {"max_input_tokens": 8192}},
        ]});
        let entries = entries_from_model_info(&body).unwrap();
        let vision = |name: &str| entries[name].supports_vision;
        assert_eq!(vision("eye"), Some(true));
        assert_eq!(vision("mixed"), Some(false));
        assert_eq!(vision("blind"), Some(false));
        assert_eq!(vision("silent"), None);
    }

    fn client_at(url: &str) -> LlmClient {
        LlmClient::new(LlmConfig {
            base_url: url.to_owned(),
            retry_base: Duration::from_millis(10),
            request_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(5),
            ..LlmConfig::default()
        })
        .unwrap()
    }

    #[tokio::test]
    async fn model_info_windows_reads_litellm_shape() {
        let mock = MockLlm::start().await;
        let client = client_at(&mock.url());
        assert!(client.model_info_windows().await.unwrap().is_empty());
        mock.set_model_info(serde_json::json!({"data": [
            {"model_name": "mock-gpt", "litellm_params": {"model": "openai/x"},
             "model_info": {"max_input_tokens": 32768.0, "max_output_tokens": 4096}},
            {"model_name": "unknown", "model_info": {"max_input_tokens": null}},
        ]}));
        let windows = client.model_info_windows().await.unwrap();
        assert_eq!(windows.len(), 1);
        assert_eq!(windows["mock-gpt"], 32768);
        assert_eq!(mock.model_info_requests(), 2);

        // A base URL ending in /v1 reaches LiteLLM's /v1/model/info.
        let windows = client_at(&format!("{}/v1/", mock.url()))
            .model_info_windows()
            .await
            .unwrap();
        assert_eq!(windows["mock-gpt"], 32768);
        assert_eq!(mock.model_info_requests(), 3);
    }

    #[tokio::test]
    async fn model_info_windows_without_route_or_json() {
        let mock = MockLlm::start().await;
        // No such route under this prefix: the mock answers 404.
        let windows = client_at(&format!("{}/nothing", mock.url()))
            .model_info_windows()
            .await
            .unwrap();
        assert!(windows.is_empty());
        mock.set_model_info(serde_json::json!({"detail": "no"}));
        let err = client_at(&mock.url())
            .model_info_windows()
            .await
            .unwrap_err();
        assert!(matches!(err, LlmError::InvalidResponse { .. }), "{err}");
        // Nothing listens on port 1.
        let err = client_at("http://127.0.0.1:1")
            .model_info_windows()
            .await
            .unwrap_err();
        assert!(matches!(err, LlmError::Connection { .. }), "{err}");
    }

    #[tokio::test]
    async fn ask_context_window_sends_the_question() {
        let mock = MockLlm::start().await;
        mock.push_window_answer(text_reply(
            "<think>hmm, 4096?</think>The answer is 128k tokens.",
        ));
        let cancel = CancellationToken::new();
        let tokens = client_at(&mock.url())
            .ask_context_window("mock-model", &cancel)
            .await
            .unwrap();
        assert_eq!(tokens, Some(128_000));
        let requests = mock.window_question_requests();
        assert_eq!(requests.len(), 1);
        let body = &requests[0];
        assert_eq!(body["model"], "mock-model");
        assert_eq!(body["max_tokens"], 50);
        assert_eq!(body["stream"], true);
        assert!(body.get("tools").is_none());
        assert_eq!(
            body["messages"],
            serde_json::json!([{"role": "user", "content": CONTEXT_WINDOW_QUESTION}])
        );
    }

    #[tokio::test]
    async fn ask_context_window_unreadable_error_timeout_cancel() {
        let mock = MockLlm::start().await;
        let client = client_at(&mock.url());
        let cancel = CancellationToken::new();

        mock.push_window_answer(text_reply("I am not sure."));
        assert_eq!(client.ask_context_window("m", &cancel).await.unwrap(), None);

        mock.push_window_answer(error_reply(400, "unknown model"));
        let err = client.ask_context_window("m", &cancel).await.unwrap_err();
        assert!(matches!(err, LlmError::BadRequest { .. }), "{err}");

        mock.push_window_answer(Reply::Hang);
        let started = std::time::Instant::now();
        let tokens = client
            .ask_context_window_within("m", &cancel, Duration::from_millis(200))
            .await
            .unwrap();
        assert_eq!(tokens, None);
        assert!(started.elapsed() < Duration::from_secs(3));
        mock.wait_for_dropped_streams(1, Duration::from_secs(2))
            .await;

        mock.push_window_answer(Reply::Hang);
        let cancel_soon = cancel.clone();
        let (server, asked) = (mock.clone(), mock.window_questions());
        // Cancelled while the model holds the question: mid-flight.
        let canceller = tokio::spawn(async move {
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while server.window_questions() == asked && std::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            cancel_soon.cancel();
            server.window_questions() - asked
        });
        let err = tokio::time::timeout(
            Duration::from_secs(5),
            client.ask_context_window("m", &cancel),
        )
        .await
        .expect("the cancel ends the question")
        .unwrap_err();
        assert_eq!(canceller.await.unwrap(), 1, "cancelled before asking");
        assert!(matches!(err, LlmError::Cancelled), "{err}");
    }
}
