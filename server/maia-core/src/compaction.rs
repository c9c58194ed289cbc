//! Compaction: the conversation is summarised by the model and the thread
//! continues from the summary, under the name `name__n`.
//!
//! MAIA's procedure: the conversation as it stands stays saved; the model
//! writes a summary under five headings, at most 4,000 tokens (and at most a
//! quarter of a small window); the history
//! is cleared and the summary replaces the context file as starting context;
//! settings and rules are reloaded; the thread continues in a new file
//! `name__1`, `name__2`… A cancelled or failed compaction changes nothing.
//!
//! The user's words are never summarised away: during a turn, the user's
//! latest message (whatever its content parts) is kept verbatim and starts
//! the continued history and journal; only the rest is summarised (what
//! came before it, and the steps of the turn so far).
//!
//! The summary request is sized to the window of the model it goes to
//! (`smallModel`, else the session's model): it is counted before sending
//! (estimate × calibration); when too large, old tool results are cut to
//! their head and tail with a note, then the conversation is summarised in
//! parts, oldest first, each part's summary merged into the next. It is
//! never larger than a request the provider just rejected; if the provider
//! rejects it anyway, it is planned again at 60 % of its size once, then
//! the compaction fails with a message and the conversation stays as it was.
//!
//! This module writes the summary ([`Compactor`], given borrows of the
//! parts it needs); the session applies it (`Session::compact`: the new
//! journal, the kept prompt, the reload).
//!
//! Names: `name` → `name__1` → `name__2`…; after `__1000` back to `__1`.
//! An existing file is never overwritten: taken names are skipped (and the
//! compaction refused when all 1,000 are taken).

use maia_llm::{ChatMessage, ChatRequest, LlmError};
use tokio_util::sync::CancellationToken;

use crate::meter::Meter;

/// Tokens the summary may take.
pub const SUMMARY_TOKENS: u32 = 4000;
/// Safety margin kept free below the window.
pub const MARGIN: u64 = 500;
/// Characters per token for estimates.
use crate::meter::{CHARS_PER_TOKEN, estimate, message_chars};
/// Highest `__n` suffix before it wraps to `__1`.
pub(crate) const MAX_SUFFIX: u32 = 1000;
/// Characters kept of an old tool result, tried in this order until the
/// summary request fits.
const TOOL_RESULT_CAPS: [usize; 3] = [8_000, 2_000, 600];
/// Share of its rejected size a summary request is planned at on retry.
const RETRY_SHARE: f64 = 0.6;

/// The summary request's system message.
const SUMMARY_SYSTEM: &str = "You summarise a coding session between a user and MAIA, a coding agent \
working in the user's editor, so that the work can continue from your summary alone.";

/// The request sent to the model.
pub const INSTRUCTION: &str = "Write a compact summary of the whole conversation above (and of the \
earlier summary, if one is given), so that work can continue from it alone. Use exactly these five headings:\n\
## Project context\n## Current goal\n## Relevant files\n## Decisions and conclusions\n## Next steps\n\
Keep file paths, names and facts exact. At most 4,000 tokens. Reply with the summary only.";

/// Added when the user's latest message is kept out of the summary.
const KEPT_NOTE: &str = "The user's latest message is not shown: it is kept word for word after \
your summary. If work on it already started above, say under Next steps what was done and what remains.";

/// The thread's next name after `name`: `__n+1` (after `__1000`, `__1`),
/// skipping names for which `taken` is true; `None` when all are taken.
pub fn next_name(name: &str, taken: impl Fn(&str) -> bool) -> Option<String> {
    let (base, n) = match name.rsplit_once("__") {
        Some((base, n)) => match n.parse::<u32>() {
            Ok(n) if (1..=MAX_SUFFIX).contains(&n) => (base, n),
            _ => (name, 0),
        },
        None => (name, 0),
    };
    (1..=MAX_SUFFIX)
        .map(|step| (n + step - 1) % MAX_SUFFIX + 1)
        .map(|k| format!("{base}__{k}"))
        .find(|candidate| candidate != name && !taken(candidate))
}

/// Why a compaction did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactError {
    #[error("there is nothing to compact yet")]
    Empty,
    #[error("the compaction was cancelled")]
    Cancelled,
    #[error(
        "your message is about {message} tokens; with MAIA's instructions and tools (about {fixed} tokens) it does not fit the model's context window of {window} tokens. Shorten it or attach less, then send it again"
    )]
    PromptTooLarge {
        message: u64,
        fixed: u64,
        window: u64,
    },
    #[error("every name from `{0}__1` to `{0}__1000` is taken; rename the session (/rename) first")]
    NoFreeName(String),
    #[error("the compaction failed: {0}")]
    Failed(String),
}

/// What a compaction sent, for the log.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SummaryStats {
    /// Estimated tokens of each summary request, in order.
    pub requests: Vec<u64>,
    /// Tool results cut to head and tail.
    pub shrunk: usize,
}

/// The length of `text` once written as a JSON string.
fn json_len(text: &str) -> usize {
    serde_json::to_string(text).map_or(text.len(), |s| s.len())
}

/// One message of the conversation written for the summary request.
#[derive(Debug, Clone)]
struct Entry {
    text: String,
    /// A tool result (what is cut first).
    tool: bool,
}

/// The conversation as a transcript, one entry per message. A transcript
/// (not the messages themselves) lets any slice be sent alone: no tool
/// result without its call, no tool calls without tool definitions.
fn transcript(messages: &[ChatMessage]) -> Vec<Entry> {
    let mut names = std::collections::HashMap::new();
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        match message {
            ChatMessage::System { content } => out.push(Entry {
                text: format!("[system]\n{content}"),
                tool: false,
            }),
            ChatMessage::User { content, images } => out.push(Entry {
                text: if images.is_empty() {
                    format!("[user]\n{content}")
                } else {
                    format!("[user]\n{content}\n({} image(s) attached)", images.len())
                },
                tool: false,
            }),
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => {
                let mut text = "[assistant]".to_owned();
                if let Some(content) = content {
                    text.push('\n');
                    text.push_str(content);
                }
                for call in tool_calls {
                    names.insert(call.id.clone(), call.name.clone());
                    text.push_str(&format!("\n(tool call {}: {})", call.name, call.arguments));
                }
                out.push(Entry { text, tool: false });
            }
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => {
                let name = names.get(tool_call_id).map_or("tool", String::as_str);
                out.push(Entry {
                    text: format!("[{name} result]\n{content}"),
                    tool: true,
                });
            }
        }
    }
    out
}

/// `text` cut to about `max` characters, keeping its head and tail, with a
/// note of what was cut.
fn cut_middle(text: &str, max: usize, what: &str) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_owned();
    }
    let keep = max / 2;
    let head: String = text.chars().take(keep).collect();
    let tail: String = text.chars().skip(total - keep).collect();
    let cut_lines = text
        .chars()
        .skip(keep)
        .take(total - 2 * keep)
        .filter(|&c| c == '\n')
        .count();
    format!(
        "{head}\n[… {} characters ({cut_lines} lines) of this {what} cut for the summary …]\n{tail}",
        total - 2 * keep
    )
}

/// The text of one summary request's user message.
fn part_text(earlier: Option<&str>, part: &str, index: usize, count: usize, kept: bool) -> String {
    let mut text = String::new();
    if let Some(earlier) = earlier {
        text.push_str("Summary of the conversation before this part:\n<summary>\n");
        text.push_str(earlier);
        text.push_str("\n</summary>\n\n");
    }
    if count > 1 {
        text.push_str(&format!(
            "The conversation, part {} of {count} (oldest first):\n",
            index + 1
        ));
    } else {
        text.push_str("The conversation:\n");
    }
    text.push_str("<conversation>\n");
    text.push_str(part);
    text.push_str("\n</conversation>\n\n");
    text.push_str(INSTRUCTION);
    if kept {
        text.push_str("\n\n");
        text.push_str(KEPT_NOTE);
    }
    text
}

/// Fixed characters of a summary request besides the transcript.
fn overhead_chars(earlier_chars: usize, kept: bool) -> usize {
    let empty = part_text(Some(""), "", 0, 2, kept);
    // The message JSON around the two contents, generously.
    json_len(SUMMARY_SYSTEM) + json_len(&empty) + earlier_chars + 120
}

/// The plan of a summary: the parts, the tool results cut, and the
/// `max_tokens` of the summaries of all parts but the last (they travel
/// with the next part).
#[derive(Debug)]
struct Plan {
    parts: Vec<String>,
    shrunk: usize,
    interim_tokens: u32,
}

/// The transcripts of the parts to summarise, oldest first, each within
/// `limit` characters of request (`None`: no limit, one part).
fn plan(
    messages: &[ChatMessage],
    earlier: Option<&str>,
    limit: Option<usize>,
    kept: bool,
) -> Result<Plan, CompactError> {
    let whole = |parts, shrunk| Plan {
        parts,
        shrunk,
        interim_tokens: SUMMARY_TOKENS,
    };
    let mut entries = transcript(messages);
    let join = |entries: &[Entry]| {
        entries
            .iter()
            .map(|e| e.text.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    };
    let Some(limit) = limit else {
        return Ok(whole(vec![join(&entries)], 0));
    };
    let earlier_chars = earlier.map_or(0, json_len);
    let size = |entries: &[Entry]| {
        entries.iter().map(|e| json_len(&e.text) + 2).sum::<usize>()
            + overhead_chars(earlier_chars, kept)
    };
    let mut shrunk = 0;
    // 1. Old tool results: head and tail only.
    for cap in TOOL_RESULT_CAPS {
        if size(&entries) <= limit {
            break;
        }
        for entry in entries.iter_mut().filter(|e| e.tool) {
            if entry.text.chars().count() > cap {
                if !entry
                    .text
                    .contains("of this tool result cut for the summary")
                {
                    shrunk += 1;
                }
                entry.text = cut_middle(&entry.text, cap, "tool result");
            }
        }
    }
    if size(&entries) <= limit {
        return Ok(whole(vec![join(&entries)], shrunk));
    }
    // 2. In parts, oldest first; each part's request also carries the
    // summary so far (up to a third of the request, 4,000 tokens at most).
    let interim_chars = (SUMMARY_TOKENS as usize * CHARS_PER_TOKEN).min(limit / 3);
    let running = earlier_chars.max(interim_chars);
    let room = limit.saturating_sub(overhead_chars(running, kept));
    if room < 1_000 {
        return Err(CompactError::Failed(format!(
            "the context window leaves no room for a summary request (about {} tokens allowed)",
            estimate(limit)
        )));
    }
    let mut parts = Vec::new();
    let mut current: Vec<Entry> = Vec::new();
    let mut current_size = 0;
    for mut entry in entries {
        let mut entry_size = json_len(&entry.text) + 2;
        if entry_size > room {
            // A single message larger than a part: its middle is cut.
            let what = if entry.tool { "tool result" } else { "message" };
            // JSON escaping can grow a text; aim below the room.
            let mut target = room * 3 / 4;
            loop {
                entry.text = cut_middle(&entry.text, target, what);
                entry_size = json_len(&entry.text) + 2;
                if entry_size <= room || target < 200 {
                    break;
                }
                target = target * 3 / 4;
            }
            shrunk += usize::from(entry.tool);
        }
        if current_size + entry_size > room && !current.is_empty() {
            parts.push(join(&current));
            current.clear();
            current_size = 0;
        }
        current_size += entry_size;
        current.push(entry);
    }
    if !current.is_empty() {
        parts.push(join(&current));
    }
    Ok(Plan {
        parts,
        shrunk,
        interim_tokens: u32::try_from(interim_chars / CHARS_PER_TOKEN).unwrap_or(SUMMARY_TOKENS),
    })
}

/// A window size read from a provider's "too long" message, e.g. "maximum
/// context length is 8192 tokens" or "context size (4096 tokens)"; a number
/// no model window has (under 256 or over [`maia_llm::MAX_TOKEN_COUNT`]) is
/// not one.
pub(crate) fn window_from_error(message: &str) -> Option<u64> {
    let lower = message.to_lowercase();
    for marker in [
        "maximum context length is ",
        "available context size (",
        "context window of ",
        "maximum context length of ",
    ] {
        if let Some(at) = lower.find(marker) {
            let digits: String = lower[at + marker.len()..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == ',')
                .filter(char::is_ascii_digit)
                .collect();
            if let Ok(n) = digits.parse::<u64>()
                && maia_llm::plausible_window(n)
            {
                return Some(n);
            }
        }
    }
    None
}

/// How a compaction was asked for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Trigger {
    /// `/compact`, or after a turn: nothing is kept aside.
    Between,
    /// During a turn, before a request: the turn's prompt is kept.
    InTurn,
    /// During a turn, after the provider rejected a request of this many
    /// (estimated) tokens: the prompt is kept.
    Rejected(u64),
}

/// Why one summary attempt stopped.
enum Attempt {
    Rejected(u64),
    Other(CompactError),
}

/// What writing a summary needs of the session: the endpoint, the
/// calibration of its token counts and the earlier summary. Built by the
/// session for one compaction; the session applies the result.
pub(crate) struct Compactor<'a> {
    pub(crate) llm: &'a Result<maia_llm::LlmClient, LlmError>,
    pub(crate) meter: &'a Meter,
    /// The summary the conversation continues from, if any.
    pub(crate) earlier: Option<&'a str>,
    /// The usage and the proxy's cost of each summary response, for the
    /// session to charge.
    pub(crate) spent: &'a std::sync::Mutex<Vec<(Option<maia_llm::Usage>, Option<f64>)>>,
}

impl Compactor<'_> {
    /// Writes the summary of `messages` with `model` (whose window is
    /// `window` when known); `kept`: the user's latest message is kept out
    /// of it; `rejected`: the size of a request the provider just refused.
    pub(crate) async fn summarise(
        &self,
        (model, window): (String, Option<u64>),
        messages: &[ChatMessage],
        kept: bool,
        rejected: Option<u64>,
        cancel: &CancellationToken,
    ) -> Result<String, CompactError> {
        // At most 4,000 tokens, and a quarter of a small window.
        let summary_tokens = window.map_or(SUMMARY_TOKENS, |w| {
            SUMMARY_TOKENS.min(u32::try_from(w / 4).unwrap_or(SUMMARY_TOKENS))
        });
        // The request's own budget: the window less the summary and the
        // margin, and below what was just rejected.
        let mut limit_tokens = window
            .map(|w| w.saturating_sub(u64::from(summary_tokens) + MARGIN))
            .into_iter()
            .chain(rejected.map(|r| r.saturating_sub(1)))
            .min();
        let mut retried = false;
        loop {
            match self
                .summarise_within(
                    &model,
                    messages,
                    kept,
                    (limit_tokens, summary_tokens),
                    cancel,
                )
                .await
            {
                Ok((summary, stats)) => {
                    tracing::info!(
                        model,
                        requests = ?stats.requests,
                        rejected,
                        shrunk = stats.shrunk,
                        parts = stats.requests.len(),
                        "summary written"
                    );
                    return Ok(summary);
                }
                Err(Attempt::Rejected(tokens)) if !retried => {
                    retried = true;
                    tracing::warn!(
                        model,
                        tokens,
                        "summary request rejected as too large; retrying smaller"
                    );
                    limit_tokens = Some((tokens as f64 * RETRY_SHARE) as u64);
                }
                Err(Attempt::Rejected(tokens)) => {
                    return Err(CompactError::Failed(format!(
                        "the summary request (about {tokens} tokens) does not fit the context window of `{model}` even when made smaller"
                    )));
                }
                Err(Attempt::Other(e)) => return Err(e),
            }
        }
    }

    /// One attempt: the plan for `limit_tokens`, sent part by part.
    async fn summarise_within(
        &self,
        model: &str,
        messages: &[ChatMessage],
        kept: bool,
        (limit_tokens, summary_tokens): (Option<u64>, u32),
        cancel: &CancellationToken,
    ) -> Result<(String, SummaryStats), Attempt> {
        let llm = self
            .llm
            .as_ref()
            .map_err(|e| Attempt::Other(CompactError::Failed(e.to_string())))?
            .clone();
        // Tokens to characters, with the calibration of the last response.
        let limit_chars = limit_tokens.map(|t| self.meter.chars_of(t as f64));
        let earlier = self.earlier.map(str::to_owned);
        let Plan {
            parts,
            shrunk,
            interim_tokens,
        } = plan(messages, earlier.as_deref(), limit_chars, kept).map_err(Attempt::Other)?;
        let mut stats = SummaryStats {
            shrunk,
            ..SummaryStats::default()
        };
        let mut running = earlier;
        let count = parts.len();
        for (index, part) in parts.iter().enumerate() {
            let request = ChatRequest {
                model: model.to_owned(),
                messages: vec![
                    ChatMessage::system(SUMMARY_SYSTEM),
                    ChatMessage::user(part_text(running.as_deref(), part, index, count, kept)),
                ],
                tools: Vec::new(),
                max_tokens: Some(if index + 1 == count {
                    summary_tokens
                } else {
                    interim_tokens.min(summary_tokens)
                }),
                cache: false,
                reasoning_effort: None,
            };
            let tokens = self.meter.calibrated(message_chars(&request.messages));
            stats.requests.push(tokens);
            let result = llm.stream_chat(&request, cancel, &mut |_| {}).await;
            if let (Ok(completion), Ok(mut spent)) = (&result, self.spent.lock()) {
                spent.push((completion.usage.clone(), completion.response_cost));
            }
            match result {
                Ok(completion) if completion.text.trim().is_empty() => {
                    return Err(Attempt::Other(CompactError::Failed(
                        "the model returned an empty summary".into(),
                    )));
                }
                Ok(completion) => running = Some(completion.text.trim().to_owned()),
                Err(LlmError::Cancelled) => return Err(Attempt::Other(CompactError::Cancelled)),
                Err(LlmError::ContextWindowExceeded { .. }) => {
                    return Err(Attempt::Rejected(tokens));
                }
                Err(e) => return Err(Attempt::Other(CompactError::Failed(e.to_string()))),
            }
        }
        running
            .map(|s| (s, stats))
            .ok_or(Attempt::Other(CompactError::Empty))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use maia_llm::ToolCall;

    fn next(name: &str) -> String {
        next_name(name, |_| false).unwrap()
    }

    #[test]
    fn names_continue_and_wrap() {
        assert_eq!(next("work"), "work__1");
        assert_eq!(next("work__1"), "work__2");
        assert_eq!(next("work__999"), "work__1000");
        assert_eq!(next("work__1000"), "work__1");
        assert_eq!(next("a__b"), "a__b__1");
        assert_eq!(next("a__0"), "a__0__1");
    }

    #[test]
    fn taken_names_are_skipped_never_overwritten() {
        let taken = ["x__1", "x__2"];
        assert_eq!(
            next_name("x__1000", |n| taken.contains(&n)).as_deref(),
            Some("x__3")
        );
        assert_eq!(
            next_name("work", |n| n == "work__1").as_deref(),
            Some("work__2")
        );
        // All taken but the current one: refused.
        assert_eq!(next_name("x__5", |n| n != "x__5"), None);
    }

    #[test]
    fn error_messages_tell_the_window() {
        assert_eq!(
            window_from_error(
                "litellm.ContextWindowExceededError: This model's maximum context length is 8192 tokens. However"
            ),
            Some(8192)
        );
        assert_eq!(
            window_from_error(
                "request (6033 tokens) exceeds the available context size (4096 tokens)"
            ),
            Some(4096)
        );
        assert_eq!(window_from_error("too long"), None);
    }

    #[test]
    fn absurd_windows_in_errors_are_not_adopted() {
        let says = |n: &str| format!("This model's maximum context length is {n} tokens. However");
        assert_eq!(window_from_error(&says("1")), None);
        assert_eq!(window_from_error(&says("1000000000000")), None);
        assert_eq!(window_from_error(&says("99999999999999999999999")), None);
        assert_eq!(window_from_error(&says("100000000")), Some(100_000_000));
    }

    fn history(results: usize, size: usize) -> Vec<ChatMessage> {
        let mut out = vec![ChatMessage::user("start the work")];
        for i in 0..results {
            let id = format!("c{i}");
            out.push(ChatMessage::Assistant {
                content: None,
                tool_calls: vec![ToolCall {
                    id: id.clone(),
                    name: "Read".into(),
                    arguments: format!("{{\"file_path\":\"f{i}.rs\"}}"),
                }],
            });
            out.push(ChatMessage::tool(
                id,
                format!("HEAD{i} {} TAIL{i}", "x".repeat(size)),
            ));
        }
        out
    }

    #[test]
    fn small_conversations_go_whole() {
        let Plan { parts, shrunk, .. } = plan(&history(2, 100), None, Some(100_000), true).unwrap();
        assert_eq!((parts.len(), shrunk), (1, 0));
        assert!(parts[0].contains("(tool call Read"));
        assert!(parts[0].contains("[Read result]"));
        let plan = plan(&history(2, 100), None, None, false).unwrap();
        assert_eq!(plan.parts.len(), 1);
    }

    #[test]
    fn tool_results_shrink_first_keeping_head_and_tail() {
        let Plan { parts, shrunk, .. } =
            plan(&history(3, 20_000), None, Some(40_000), true).unwrap();
        assert_eq!(parts.len(), 1);
        assert_eq!(shrunk, 3);
        for i in 0..3 {
            assert!(
                parts[0].contains(&format!("HEAD{i}")) && parts[0].contains(&format!("TAIL{i}"))
            );
        }
        assert!(parts[0].contains("of this tool result cut for the summary"));
        assert!(parts[0].len() < 40_000);
    }

    #[test]
    fn then_parts_oldest_first_each_within_the_limit() {
        let mut messages = Vec::new();
        for i in 0..40 {
            messages.push(ChatMessage::user(format!("Q{i} {}", "words ".repeat(400))));
            messages.push(ChatMessage::assistant(format!("A{i}")));
        }
        let limit = 30_000;
        let Plan {
            parts,
            interim_tokens,
            ..
        } = plan(&messages, Some("old summary"), Some(limit), true).unwrap();
        assert!(parts.len() > 1, "{}", parts.len());
        assert_eq!(interim_tokens as usize, limit / 3 / 4);
        assert!(parts[0].contains("Q0 ") && parts.last().unwrap().contains("Q39 "));
        let running = "s".repeat(interim_tokens as usize * 4);
        for (i, part) in parts.iter().enumerate() {
            let text = part_text(Some(&running), part, i, parts.len(), true);
            let size = json_len(SUMMARY_SYSTEM) + json_len(&text);
            assert!(size <= limit, "part {i}: {size}");
        }
        // Nothing lost but what was cut with a note: every question is there.
        let all = parts.concat();
        assert!((0..40).all(|i| all.contains(&format!("Q{i} "))));
    }

    #[test]
    fn a_single_huge_message_is_cut_in_the_middle() {
        let messages = vec![ChatMessage::user(format!(
            "BEGIN {} END",
            "\"quoted\" ".repeat(20_000)
        ))];
        let Plan { parts, .. } = plan(&messages, None, Some(30_000), false).unwrap();
        assert_eq!(parts.len(), 1);
        assert!(parts[0].starts_with("[user]\nBEGIN") && parts[0].ends_with("END"));
        assert!(parts[0].contains("of this message cut for the summary"));
        assert!(json_len(&parts[0]) < 30_000);
    }

    #[test]
    fn a_window_too_small_is_a_clear_failure() {
        let err = plan(&history(3, 20_000), None, Some(1_500), false).unwrap_err();
        assert!(matches!(err, CompactError::Failed(m) if m.contains("no room")));
    }
}
