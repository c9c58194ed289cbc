//! What a turn says besides the model's words: the text a prompt is
//! replayed as, the title taken from it, the message of a failed model
//! request; and the guard that ends a turn whose model repeats itself.

use maia_llm::LlmError;

use crate::prompt::PromptPart;

/// Ends a turn whose model repeats the same call with the same result.
#[derive(Debug, Default)]
pub(super) struct LoopGuard {
    recent: std::collections::VecDeque<String>,
}

impl LoopGuard {
    pub(super) const WINDOW: usize = 10;
    pub(super) const MAX_REPEATS: usize = 5;

    /// Records a step; true when it repeats too often.
    pub(super) fn step(&mut self, call: &maia_llm::ToolCall, output: &str) -> bool {
        let key = format!("{}\u{0}{}\u{0}{}", call.name, call.arguments, output);
        self.recent.push_back(key.clone());
        if self.recent.len() > Self::WINDOW {
            self.recent.pop_front();
        }
        self.recent.iter().filter(|k| **k == key).count() > Self::MAX_REPEATS
    }
}

/// Characters kept in a title derived from the first message.
const TITLE_CHARS: usize = 60;

/// What the user typed, as shown again when the conversation is replayed
/// (and as a front door shows one client's prompt to the others).
pub fn display_text(parts: &[PromptPart]) -> String {
    let mut out: Vec<String> = Vec::new();
    for part in parts {
        match part {
            PromptPart::Text(text) => out.push(text.clone()),
            PromptPart::File(path) => out.push(format!("@{}", path.display())),
            PromptPart::Embedded { uri, .. } => out.push(format!("@{uri}")),
            // Replayed as images of their own (`Record::UserImage`).
            PromptPart::Image { .. } | PromptPart::Note(_) | PromptPart::Undone(_) => {}
        }
    }
    out.join("\n")
}

/// The text a title is made from: the prompt's text blocks and mentions
/// read as one sentence (a client may send "Please rewrite ", a link and
/// " for me." as three blocks), a mention as its file name.
pub(crate) fn title_text(parts: &[PromptPart]) -> String {
    let name = |s: &str| {
        let s = s.trim_end_matches('/');
        s.rsplit('/').next().unwrap_or(s).to_owned()
    };
    let mut out = String::new();
    for part in parts {
        let piece = match part {
            PromptPart::Text(text) => text.clone(),
            PromptPart::File(path) => path.file_name().map_or_else(
                || path.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            ),
            PromptPart::Embedded { uri, .. } => name(uri),
            PromptPart::Image { .. } | PromptPart::Note(_) | PromptPart::Undone(_) => continue,
        };
        // A mention the text already names ("Read @notes.md" sent with
        // notes.md attached, once as a link and once embedded) adds nothing.
        if !matches!(part, PromptPart::Text(_)) && !piece.is_empty() && out.contains(&piece) {
            continue;
        }
        let joins = out.is_empty()
            || out.ends_with(char::is_whitespace)
            || piece.starts_with(char::is_whitespace)
            || piece.starts_with([',', '.', ';', ':', '!', '?', ')']);
        if !joins {
            out.push(' ');
        }
        out.push_str(&piece);
    }
    out
}

/// A title from the first line of the first message.
pub(super) fn title_from(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    if line.chars().count() <= TITLE_CHARS {
        return Some(line.to_owned());
    }
    let cut: String = line.chars().take(TITLE_CHARS).collect();
    let cut = match cut.rfind(' ') {
        Some(space) if space > TITLE_CHARS / 2 => cut[..space].to_owned(),
        _ => cut,
    };
    Some(format!("{}…", cut.trim_end()))
}

pub(super) fn new_message_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// What the user is told when a model request fails.
pub(super) fn describe_failure(error: &LlmError, url: &str) -> String {
    let what = match error {
        LlmError::ContextWindowExceeded { .. } => {
            "the conversation no longer fits in the model's context window"
        }
        LlmError::Authentication { .. } => {
            "the endpoint refused the API key (set LiteLLM_API_Key or LITELLM_API_KEY)"
        }
        LlmError::RateLimited { .. } => "the endpoint is still rate limiting after retries",
        LlmError::Server { .. } => "the endpoint kept failing after retries",
        LlmError::Connection { .. } => "the endpoint could not be reached",
        LlmError::StreamInterrupted { .. } => "the answer stream was interrupted",
        LlmError::InvalidResponse { .. } => "the endpoint sent a response MAIA cannot read",
        LlmError::BadRequest { .. } => "the endpoint rejected the request",
        LlmError::Cancelled => "the request was cancelled",
    };
    format!("\n\n**Model request failed**: {what}.\n\nEndpoint: `{url}`\n\nError: {error}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use maia_llm::ToolCall;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "Read".into(),
            arguments: "{}".into(),
        }
    }

    #[test]
    fn loop_guard_trips_after_five_repeats_in_ten_steps() {
        let mut guard = LoopGuard::default();
        let same = call("x");
        for _ in 0..5 {
            assert!(!guard.step(&same, "out"));
        }
        assert!(guard.step(&same, "out"));
        let mut guard = LoopGuard::default();
        for i in 0..20 {
            assert!(!guard.step(&same, &i.to_string()));
        }
    }

    #[test]
    fn titles() {
        assert_eq!(
            title_from("\n  Fix the bug\nmore").as_deref(),
            Some("Fix the bug")
        );
        let long = "word ".repeat(30);
        let t = title_from(&long).unwrap();
        assert!(
            t.ends_with('…') && t.chars().count() <= TITLE_CHARS + 1,
            "{t}"
        );
        assert_eq!(title_from("  \n "), None);
        let parts = [
            PromptPart::Text("Please rewrite".into()),
            PromptPart::File("/p/notes.txt".into()),
            PromptPart::Text(" for me.".into()),
        ];
        assert_eq!(
            title_from(&title_text(&parts)).as_deref(),
            Some("Please rewrite notes.txt for me.")
        );
        // The VS Code panel types "@notes.md" and attaches the file twice.
        let parts = [
            PromptPart::Text("Read @notes.md".into()),
            PromptPart::File("/p/notes.md".into()),
            PromptPart::Embedded {
                uri: "file:///p/notes.md".into(),
                text: "x".into(),
            },
        ];
        assert_eq!(title_text(&parts), "Read @notes.md");
    }
}
