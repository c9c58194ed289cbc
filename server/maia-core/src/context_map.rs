//! The map of the context: where the model's window goes (system prompt,
//! instruction files, skills, tool schemas, MCP tools, conversation, the
//! output reserve, free space), the output reserve itself, and the token
//! count at which auto-compaction fires (the `autoCompact` setting).
//!
//! One computation for every reader: the session builds a [`ContextMap`]
//! for each usage report (sent to clients with it) and for `/context`.
//! The total is the meter's (the server's last usage plus an estimate of
//! what came since, else an estimate); the segments are character
//! estimates (~4 characters a token) scaled so that they add up to it
//! exactly ([`build`]). It imports only the compaction constants and the
//! meter's estimate.

use serde::Serialize;
use serde_json::Value;

use crate::compaction::{MARGIN, SUMMARY_TOKENS};

/// The output reserve when the model's information does not say how long
/// an answer may be, in tokens.
pub const DEFAULT_OUTPUT_RESERVE: u64 = 8_192;
/// The reserve never takes more than this share of the window (1/8).
pub const RESERVE_SHARE_DIVISOR: u64 = 8;
/// The lowest `autoCompact.threshold` accepted.
pub const MIN_THRESHOLD: f64 = 0.3;

/// The tokens kept free for the model's answer: the model's own maximum
/// output (`max_output_tokens` of the proxy's model information), else
/// [`DEFAULT_OUTPUT_RESERVE`], never more than an eighth of the window.
pub fn output_reserve(window: u64, max_output: Option<u64>) -> u64 {
    max_output
        .unwrap_or(DEFAULT_OUTPUT_RESERVE)
        .min(window / RESERVE_SHARE_DIVISOR)
}

/// The `autoCompact` setting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AutoCompact {
    /// `false`: the conversation is compacted only by `/compact`.
    pub enabled: bool,
    /// The share of the usable window (the window less the output
    /// reserve) at which compaction fires; `None`: the usable window less
    /// room for the summary ([`SUMMARY_TOKENS`] + [`MARGIN`]).
    pub threshold: Option<f64>,
}

impl Default for AutoCompact {
    fn default() -> Self {
        AutoCompact {
            enabled: true,
            threshold: None,
        }
    }
}

/// Reads `autoCompact`: `true`/`false`, or `{"enabled": bool, "threshold":
/// 0.3..=1}`. A bad value is reported in `warnings` and the default kept.
pub fn parse_setting(value: Option<&Value>, warnings: &mut Vec<String>) -> AutoCompact {
    let mut setting = AutoCompact::default();
    let entries = match value {
        None | Some(Value::Null) => return setting,
        Some(Value::Bool(enabled)) => {
            setting.enabled = *enabled;
            return setting;
        }
        Some(Value::Object(entries)) => entries,
        Some(_) => {
            warnings.push(
                "autoCompact must be true, false or an object (enabled, threshold); ignored"
                    .to_owned(),
            );
            return setting;
        }
    };
    for (key, value) in entries {
        match (key.as_str(), value) {
            ("enabled", Value::Bool(enabled)) => setting.enabled = *enabled,
            ("enabled", _) => {
                warnings.push("autoCompact.enabled must be true or false; ignored".to_owned());
            }
            ("threshold", value) => match value.as_f64() {
                Some(share) if (MIN_THRESHOLD..=1.0).contains(&share) => {
                    setting.threshold = Some(share);
                }
                _ => warnings.push(format!(
                    "autoCompact.threshold must be a number from {MIN_THRESHOLD} to 1 (a share of the window less the output reserve); ignored"
                )),
            },
            (other, _) => warnings.push(format!(
                "autoCompact.{other} is not a setting of autoCompact (enabled, threshold); ignored"
            )),
        }
    }
    setting
}

/// The context size above which auto-compaction fires, for a `window` and
/// its output `reserve`; `None` when the setting turns it off.
pub fn trigger(window: u64, reserve: u64, setting: AutoCompact) -> Option<u64> {
    if !setting.enabled {
        return None;
    }
    let usable = window.saturating_sub(reserve);
    Some(match setting.threshold {
        Some(share) => (usable as f64 * share) as u64,
        None => usable.saturating_sub(u64::from(SUMMARY_TOKENS) + MARGIN),
    })
}

/// What a segment of the context holds. Clients draw kinds they do not
/// know as "other".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SegmentKind {
    /// The doctrine (or `SYSTEM.md`), the environment, the workspace
    /// folders: the system prompt less the parts below.
    SystemPrompt,
    /// One instruction file (`MAIA.md`, `AGENTS.md`, `CLAUDE.md`), with its path.
    Instructions,
    /// The skills' list in the system prompt.
    Skills,
    /// The schemas of MAIA's own tools.
    Tools,
    /// The schemas of the MCP servers' tools.
    McpTools,
    /// The messages (and a compaction summary, which stands for earlier ones).
    Conversation,
    /// Kept free for the model's answer.
    Reserve,
    /// What is left.
    Free,
}

/// One part of the context.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Segment {
    pub kind: SegmentKind,
    pub tokens: u64,
    /// The file, for [`SegmentKind::Instructions`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// Where the context goes; serialized as is for clients (docs/acp.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextMap {
    /// The model's context window.
    pub window: u64,
    /// Tokens in use: the sum of the segments before `reserve` and `free`.
    pub used: u64,
    /// The output reserve ([`output_reserve`]).
    pub reserve: u64,
    /// The context size at which auto-compaction fires; `None`: off.
    pub auto_compact_at: Option<u64>,
    /// `measured` (the server's usage) or `estimated`.
    pub source: &'static str,
    /// In order; the content segments add up to `used`, and with the
    /// reserve and free space to the window (or to `used`, when over it).
    pub segments: Vec<Segment>,
}

/// What a request carries, in characters, as the session sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parts {
    /// The whole system prompt.
    pub system_chars: usize,
    /// Each instruction file in it (path, characters).
    pub instructions: Vec<(String, usize)>,
    /// The skills' section in it.
    pub skills_chars: usize,
    /// A compaction summary in it.
    pub summary_chars: usize,
    /// MAIA's own tool schemas.
    pub tools_chars: usize,
    /// The MCP servers' tool schemas.
    pub mcp_chars: usize,
    /// The messages.
    pub conversation_chars: usize,
    /// Tokens counted apart (the turn's images).
    pub extra_tokens: u64,
}

/// The numbers a map is drawn against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Frame {
    pub window: u64,
    pub used: u64,
    pub reserve: u64,
    pub auto_compact_at: Option<u64>,
    pub source: &'static str,
}

/// Builds the map: each part's estimate (characters / 4) scaled so that
/// the content segments add up to `frame.used` exactly (the rounding left
/// over goes to the conversation), then the reserve (at most what the
/// window has left) and the free space.
pub fn build(parts: &Parts, frame: Frame) -> ContextMap {
    let tokens = |chars: usize| crate::meter::estimate(chars);
    let instruction_chars: usize = parts.instructions.iter().map(|(_, c)| c).sum();
    let system = parts
        .system_chars
        .saturating_sub(instruction_chars + parts.skills_chars + parts.summary_chars);
    let mut raw: Vec<(SegmentKind, u64, Option<String>)> =
        vec![(SegmentKind::SystemPrompt, tokens(system), None)];
    raw.extend(parts.instructions.iter().map(|(path, chars)| {
        (
            SegmentKind::Instructions,
            tokens(*chars),
            Some(path.clone()),
        )
    }));
    raw.push((SegmentKind::Skills, tokens(parts.skills_chars), None));
    raw.push((SegmentKind::Tools, tokens(parts.tools_chars), None));
    raw.push((SegmentKind::McpTools, tokens(parts.mcp_chars), None));
    raw.push((
        SegmentKind::Conversation,
        tokens(parts.conversation_chars + parts.summary_chars) + parts.extra_tokens,
        None,
    ));
    let total: u64 = raw.iter().map(|(_, t, _)| t).sum();
    let mut segments: Vec<Segment> = raw
        .into_iter()
        .map(|(kind, estimate, path)| Segment {
            kind,
            tokens: if total == 0 {
                0
            } else {
                (u128::from(estimate) * u128::from(frame.used) / u128::from(total)) as u64
            },
            path,
        })
        .collect();
    let spread: u64 = segments.iter().map(|s| s.tokens).sum();
    if let Some(conversation) = segments.last_mut() {
        conversation.tokens += frame.used.saturating_sub(spread);
    }
    let left = frame.window.saturating_sub(frame.used);
    let reserve = frame.reserve.min(left);
    segments.push(Segment {
        kind: SegmentKind::Reserve,
        tokens: reserve,
        path: None,
    });
    segments.push(Segment {
        kind: SegmentKind::Free,
        tokens: left - reserve,
        path: None,
    });
    ContextMap {
        window: frame.window,
        used: frame.used,
        reserve: frame.reserve,
        auto_compact_at: frame.auto_compact_at,
        source: frame.source,
        segments,
    }
}

impl ContextMap {
    /// Tokens of the segments of `kind`.
    pub fn tokens_of(&self, kind: SegmentKind) -> u64 {
        self.segments
            .iter()
            .filter(|s| s.kind == kind)
            .map(|s| s.tokens)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_reserve_is_the_models_output_capped_to_an_eighth() {
        assert_eq!(output_reserve(200_000, Some(64_000)), 25_000);
        assert_eq!(output_reserve(200_000, Some(4_096)), 4_096);
        assert_eq!(output_reserve(128_000, None), DEFAULT_OUTPUT_RESERVE);
        assert_eq!(output_reserve(16_000, None), 2_000);
    }

    #[test]
    fn the_trigger_keeps_the_reserve_and_follows_the_setting() {
        let on = AutoCompact::default();
        assert_eq!(trigger(100_000, 8_000, on), Some(100_000 - 8_000 - 4_500));
        let share = AutoCompact {
            enabled: true,
            threshold: Some(0.5),
        };
        assert_eq!(trigger(100_000, 8_000, share), Some(46_000));
        let off = AutoCompact {
            enabled: false,
            threshold: Some(0.5),
        };
        assert_eq!(trigger(100_000, 8_000, off), None);
        assert_eq!(trigger(1_000, 125, on), Some(0), "never below zero");
    }

    #[test]
    fn the_setting_takes_a_switch_or_an_object_and_reports_bad_values() {
        let mut warnings = Vec::new();
        assert_eq!(parse_setting(None, &mut warnings), AutoCompact::default());
        assert!(!parse_setting(Some(&json!(false)), &mut warnings).enabled);
        let read = parse_setting(
            Some(&json!({"enabled": true, "threshold": 0.8})),
            &mut warnings,
        );
        assert_eq!(read.threshold, Some(0.8));
        assert!(warnings.is_empty(), "{warnings:?}");
        let read = parse_setting(
            Some(&json!({"enabled": "no", "threshold": 1.5, "buffer": 3})),
            &mut warnings,
        );
        assert_eq!(read, AutoCompact::default());
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        parse_setting(Some(&json!(0.9)), &mut warnings);
        assert_eq!(warnings.len(), 4);
    }

    fn parts() -> Parts {
        Parts {
            system_chars: 4_000 + 800 + 400,
            instructions: vec![("/p/MAIA.md".to_owned(), 800)],
            skills_chars: 400,
            summary_chars: 0,
            tools_chars: 2_000,
            mcp_chars: 1_000,
            conversation_chars: 1_800,
            extra_tokens: 0,
        }
    }

    #[test]
    fn estimates_are_scaled_to_the_measured_total_exactly() {
        let frame = Frame {
            window: 10_000,
            used: 3_001,
            reserve: 1_000,
            auto_compact_at: Some(4_500),
            source: "measured",
        };
        let map = build(&parts(), frame);
        let content: u64 = map.segments[..map.segments.len() - 2]
            .iter()
            .map(|s| s.tokens)
            .sum();
        assert_eq!(content, 3_001);
        // 10,000 characters, 2,500 estimated tokens: each part × 3001/2500.
        assert_eq!(map.tokens_of(SegmentKind::SystemPrompt), 1_200);
        assert_eq!(map.tokens_of(SegmentKind::Instructions), 240);
        assert_eq!(map.tokens_of(SegmentKind::McpTools), 300);
        assert_eq!(
            map.tokens_of(SegmentKind::Conversation),
            541,
            "540.2 and the rest"
        );
        assert_eq!(map.tokens_of(SegmentKind::Reserve), 1_000);
        assert_eq!(map.tokens_of(SegmentKind::Free), 10_000 - 3_001 - 1_000);
        assert_eq!(map.segments[1].path.as_deref(), Some("/p/MAIA.md"));
        let shape = serde_json::to_value(&map).unwrap();
        assert_eq!(shape["autoCompactAt"], 4_500);
        assert_eq!(shape["segments"][0]["kind"], "systemPrompt");
        assert_eq!(shape["segments"][4]["kind"], "mcpTools");
        assert!(shape["segments"][0].get("path").is_none());
    }

    #[test]
    fn over_the_window_the_reserve_shrinks_and_nothing_is_free() {
        let frame = Frame {
            window: 3_000,
            used: 2_800,
            reserve: 1_000,
            auto_compact_at: None,
            source: "estimated",
        };
        let map = build(&parts(), frame);
        assert_eq!(map.tokens_of(SegmentKind::Reserve), 200);
        assert_eq!(map.tokens_of(SegmentKind::Free), 0);
        assert_eq!(map.reserve, 1_000, "the chosen reserve stays told");
        let empty = build(&Parts::default(), frame);
        assert_eq!(empty.tokens_of(SegmentKind::Conversation), 2_800);
    }
}
