//! Tool calls written as text instead of through the tool-calling
//! interface, as weaker or local models behind LiteLLM produce.
//!
//! A reply that is nothing but calls ([`parse`]) is run as those calls
//! (the turn holds such a reply back while it streams, [`gate`]). A reply
//! that mixes prose with something that looks like a call
//! (`<tool_call>{…}</tool_call>`, `default_api:Read(…)`, or a JSON object
//! naming a known tool with its arguments: [`detect`]) is asked again with
//! [`CORRECTION`], at most twice a turn; then the turn says so.

pub mod gate;
pub mod parse;

use serde_json::Value;

pub use gate::Gate;
pub use parse::parse;

/// Sent (for one request only) after a reply that mixed a tool call with text.
pub const CORRECTION: &str = "Your last reply mixed a tool call with other text, so it was not run. \
To use a tool, call it through the tool-calling interface, or reply with nothing but the call as \
one JSON object {\"name\": \"<tool>\", \"arguments\": {...}}, with no text before or after it. \
If you meant to answer, answer in plain text without tool-call syntax.";

/// Objects tried at most in one reply (bounds the work on long answers).
const MAX_OBJECTS: usize = 64;

/// What in `text` looks like a tool call written as text, if anything:
/// `<tool_call>`, `default_api:NAME`, or the name of a known tool given in a
/// JSON object with its arguments.
pub fn detect(text: &str, known: &[String]) -> Option<String> {
    // ASCII lowering keeps every byte where it is, so positions found in
    // `lower` are positions in `text` (the markers are ASCII).
    let lower = text.to_ascii_lowercase();
    if lower.contains("<tool_call>") || lower.contains("<function_call>") {
        return Some("<tool_call>".to_owned());
    }
    for marker in ["default_api:", "default_api."] {
        if let Some(at) = lower.find(marker) {
            let name: String = text[at + marker.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                return Some(format!("default_api:{name}"));
            }
        }
    }
    for (at, _) in text.match_indices('{').take(MAX_OBJECTS) {
        let mut stream = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
        if let Some(Ok(value)) = stream.next()
            && let Some(name) = named_call(&value, known)
        {
            return Some(name);
        }
    }
    None
}

/// The known tool a JSON object calls: `{"name": T, "arguments": …}` (also
/// `parameters`/`input`/`args`, `tool` for `name`), or the same inside
/// `"function"`.
fn named_call(value: &Value, known: &[String]) -> Option<String> {
    let object = value.as_object()?;
    if let Some(inner) = object.get("function").filter(|f| f.is_object()) {
        return named_call(inner, known);
    }
    let name = ["name", "tool", "tool_name"]
        .iter()
        .find_map(|k| object.get(*k)?.as_str())?;
    let has_arguments = ["arguments", "parameters", "input", "args"]
        .iter()
        .any(|k| object.contains_key(*k));
    (has_arguments && known.iter().any(|t| t == name)).then(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> Vec<String> {
        vec!["Read".to_owned(), "Bash".to_owned()]
    }

    #[test]
    fn the_three_forms() {
        assert_eq!(
            detect(
                "Let me look.\n<tool_call>{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a\"}}</tool_call>",
                &known()
            )
            .as_deref(),
            Some("<tool_call>")
        );
        assert_eq!(
            detect("default_api:Bash(command=\"ls\")", &known()).as_deref(),
            Some("default_api:Bash")
        );
        assert_eq!(
            detect(
                "```json\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"src/main.rs\"}}\n```",
                &known()
            )
            .as_deref(),
            Some("Read")
        );
        assert_eq!(
            detect(
                "{\"type\":\"function\",\"function\":{\"name\":\"Bash\",\"parameters\":{\"command\":\"ls\"}}}",
                &known()
            )
            .as_deref(),
            Some("Bash")
        );
    }

    #[test]
    fn ordinary_answers_are_not_tool_calls() {
        for text in [
            "The config is {\"name\": \"Read\"} without arguments.",
            "Use {\"name\": \"Write\", \"arguments\": {}} — not a tool here.",
            "A map: {a: 1}, and code `fn main() {}`",
            "plain text",
        ] {
            assert_eq!(detect(text, &known()), None, "{text}");
        }
    }

    #[test]
    fn text_whose_lowercase_is_longer_does_not_panic() {
        // `İ` is 2 bytes and lowercases to 3: positions found in a
        // lowercased copy are not positions in the text.
        let text = "İstanbul: default_api:Read(é)";
        assert_eq!(detect(text, &known()).as_deref(), Some("default_api:Read"));
        assert_eq!(detect("İdefault_api:é", &known()), None);
        assert_eq!(
            detect("İİİ DEFAULT_API.Bash", &known()).as_deref(),
            Some("default_api:Bash")
        );
    }
}
