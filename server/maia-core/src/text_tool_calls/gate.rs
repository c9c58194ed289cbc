//! Whether a reply's text is shown as it streams or held back because it
//! may be tool calls written as text ([`super::parse`]): a reply that
//! begins like a call (`{`, `[`, a ```` ```json ```` fence, `<tool_call>`,
//! `<|python_tag|>`, `[TOOL_CALLS]`, `<function=`) is held until it ends,
//! so a call is shown as a tool call and not first as JSON in the answer.
//! Anything else is shown at once, and so is the rest of that reply.

/// The fence info strings of a held fence ([`super::parse`] reads these).
const FENCE_INFOS: [&str; 5] = ["", "json", "tool_call", "tool_code", "xml"];
/// Markers that begin a call written as text.
const MARKERS: [&str; 4] = [
    "<tool_call>",
    "<|python_tag|>",
    "[TOOL_CALLS]",
    "<function=",
];

/// A reply's text, shown or held as it streams.
#[derive(Debug)]
pub struct Gate {
    state: State,
    held: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not yet known: what came is held.
    Undecided,
    /// May be calls: held until the reply ends.
    Holding,
    /// Text: shown as it comes.
    Open,
}

impl Gate {
    /// A gate; `enabled: false` shows everything at once.
    pub fn new(enabled: bool) -> Self {
        Gate {
            state: if enabled {
                State::Undecided
            } else {
                State::Open
            },
            held: String::new(),
        }
    }

    /// A piece of the reply; returns what to show now.
    pub fn push(&mut self, text: &str) -> Option<String> {
        match self.state {
            State::Open => Some(text.to_owned()),
            State::Holding => {
                self.held.push_str(text);
                None
            }
            State::Undecided => {
                self.held.push_str(text);
                self.state = decide(&self.held);
                (self.state == State::Open).then(|| std::mem::take(&mut self.held))
            }
        }
    }

    /// What is held when the reply ended (shown unless it was calls).
    pub fn take_held(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}

/// What the start of a reply says about it.
fn decide(prefix: &str) -> State {
    let text = prefix.trim_start();
    if text.is_empty() {
        return State::Undecided;
    }
    if text.starts_with('{') {
        return State::Holding;
    }
    if let Some(after) = text.strip_prefix('[') {
        let after = after.trim_start();
        if after.starts_with('{') {
            return State::Holding;
        }
        if after.is_empty() {
            return State::Undecided;
        }
    }
    for marker in MARKERS {
        if starts_with_ci(text, marker) {
            return State::Holding;
        }
        if text.len() < marker.len() && starts_with_ci(marker, text) {
            return State::Undecided;
        }
    }
    if let Some(after) = text.strip_prefix("```") {
        return match after.find('\n') {
            Some(end) => {
                let info = after[..end].trim().to_ascii_lowercase();
                if FENCE_INFOS.contains(&info.as_str()) {
                    State::Holding
                } else {
                    State::Open
                }
            }
            None => {
                let info = after.trim_start().to_ascii_lowercase();
                if FENCE_INFOS.iter().any(|i| i.starts_with(info.as_str())) {
                    State::Undecided
                } else {
                    State::Open
                }
            }
        };
    }
    if "```".starts_with(text) {
        return State::Undecided;
    }
    State::Open
}

fn starts_with_ci(text: &str, prefix: &str) -> bool {
    text.get(..prefix.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(pieces: &[&str]) -> (String, String) {
        let mut gate = Gate::new(true);
        let mut out = String::new();
        for piece in pieces {
            if let Some(text) = gate.push(piece) {
                out.push_str(&text);
            }
        }
        (out, gate.take_held())
    }

    #[test]
    fn prose_streams_at_once() {
        assert_eq!(
            shown(&["Hel", "lo ", "there"]),
            ("Hello there".into(), String::new())
        );
        assert_eq!(
            shown(&["\n", "The [fix]"]),
            ("\nThe [fix]".into(), String::new())
        );
        assert_eq!(
            shown(&["``", "`python\nprint(1)", "\n```"]),
            ("```python\nprint(1)\n```".into(), String::new())
        );
        assert_eq!(shown(&["<b>", "bold"]), ("<b>bold".into(), String::new()));
        assert_eq!(
            shown(&["[", "link](x)"]),
            ("[link](x)".into(), String::new())
        );
    }

    #[test]
    fn what_may_be_calls_is_held() {
        for pieces in [
            &["```", "json\n{\"name\": \"Read\"", "}\n```"][..],
            &[" {\"na", "me\": 1}"],
            &["<tool", "_call>{}</tool_call>"],
            &["<|python_tag|>{}"],
            &["[TOOL_", "CALLS][{}]"],
            &["<function=Read>{}</function>"],
            &["```\n{}\n```"],
            &["[{\"name\": \"Read\"}]"],
        ] {
            let (out, held) = shown(pieces);
            assert_eq!(out, "", "{pieces:?}");
            assert_eq!(held, pieces.concat());
        }
    }

    #[test]
    fn a_disabled_gate_holds_nothing() {
        let mut gate = Gate::new(false);
        assert_eq!(gate.push("{\"name\"").as_deref(), Some("{\"name\""));
        assert_eq!(gate.take_held(), "");
    }
}
