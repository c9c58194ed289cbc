//! Thread titles written by a model: the labelling request (the start of
//! the thread, delimited, then the instruction) and the filter that keeps
//! only a title-shaped reply. A leaf: when the call is made and what is done
//! with its answer is the session's (`session/title.rs`).

use maia_llm::{ChatMessage, ChatRequest};

/// At most this many bytes of the first prompt go into the request.
pub const PROMPT_BYTES: usize = 1500;
/// At most this many bytes of the start of the answer.
pub const ANSWER_BYTES: usize = 1000;
/// The reply's token cap: a title, with room for a model that adds a few
/// words before stopping.
pub const MAX_TOKENS: u32 = 64;
/// The instruction asks for at most 8 words; a reply of more than this many
/// is an answer, not a title.
pub const MAX_WORDS: usize = 10;
/// A reply of more characters is too long, whatever its words (languages
/// written without spaces).
pub const MAX_CHARS: usize = 80;

/// The instruction, after the transcript. The mock LLM of the tests knows a
/// labelling request by its first words.
pub const INSTRUCTION: &str = "Write a title for the conversation above: at most 8 words, \
in the language the user wrote in, naming what the user wants. Reply with the title only: \
no quotes, no markdown, no final punctuation, no explanation, and do not answer the user.";

const SYSTEM: &str =
    "You label conversations with short titles. You never answer or continue them.";

/// The labelling request for `model`: the first prompt and the start of the
/// answer (each cut to its bytes), delimited, then the instruction.
pub fn request(model: &str, prompt: &str, answer: &str) -> ChatRequest {
    let transcript = format!(
        "<conversation>\nUser: {}\n\nAssistant: {}\n</conversation>\n\n{INSTRUCTION}",
        inert(&cut(prompt.trim(), PROMPT_BYTES)),
        inert(&cut(answer.trim(), ANSWER_BYTES)),
    );
    ChatRequest {
        model: model.to_owned(),
        messages: vec![ChatMessage::system(SYSTEM), ChatMessage::user(transcript)],
        tools: Vec::new(),
        max_tokens: Some(MAX_TOKENS),
        cache: false,
        reasoning_effort: None,
    }
}

/// `text` cut to at most `max` bytes at a character boundary, `…` marking
/// the cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The thread's text cannot close the delimiters around it.
fn inert(text: &str) -> String {
    text.replace("</conversation>", "</ conversation>")
        .replace("<conversation>", "< conversation>")
}

/// Why a reply is not a title.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejected {
    Empty,
    /// Several lines.
    Lines,
    /// More than [`MAX_WORDS`] words or [`MAX_CHARS`] characters.
    TooLong,
    /// Headings, emphasis, lists, code, links.
    Markdown,
    /// Starts like a chat answer ("Sure", "Here is", …).
    Chatty,
    /// Ends with a question mark.
    Question,
    /// More than one sentence.
    Sentences,
}

impl Rejected {
    pub fn name(self) -> &'static str {
        match self {
            Rejected::Empty => "empty",
            Rejected::Lines => "several lines",
            Rejected::TooLong => "too long",
            Rejected::Markdown => "markdown",
            Rejected::Chatty => "answer-shaped",
            Rejected::Question => "a question",
            Rejected::Sentences => "several sentences",
        }
    }
}

/// Openings of a chat answer (lower case), in the languages users most
/// often write in; a title never starts with them.
const CHATTY: &[&str] = &[
    "sure",
    "here is",
    "here's",
    "here are",
    "certainly",
    "of course",
    "absolutely",
    "okay",
    "ok,",
    "ok.",
    "hello,",
    "hello!",
    "hi,",
    "hi!",
    "i ",
    "i'm",
    "i'll",
    "i can",
    "as an ai",
    "the title",
    "a title",
    "title for",
    "bien sûr",
    "voici",
    "d'accord",
    "claro",
    "aquí",
    "por supuesto",
    "natürlich",
    "hier ist",
    "gerne",
    "certo",
    "ecco",
];

const QUOTES: &[char] = &[
    '"', '\'', '`', '“', '”', '‘', '’', '«', '»', '„', '「', '」', '*', '_',
];

/// The title in `reply`, or why it is not one: surrounding quotes, a
/// `Title:` label and a final period are taken off; anything shaped like an
/// answer is refused.
pub fn accept(reply: &str) -> Result<String, Rejected> {
    let text = reply.trim();
    if text.lines().filter(|l| !l.trim().is_empty()).count() > 1 {
        return Err(Rejected::Lines);
    }
    let lower = text.to_lowercase();
    let text = match lower.strip_prefix("title:") {
        Some(_) => text["title:".len()..].trim(),
        None => text,
    };
    if text.starts_with('#')
        || text.starts_with("- ")
        || text.starts_with("> ")
        || text.contains("**")
        || text.contains("```")
        || text.contains("](")
    {
        return Err(Rejected::Markdown);
    }
    let text = text.trim_matches(|c: char| QUOTES.contains(&c) || c.is_whitespace());
    let text = text.strip_suffix('.').unwrap_or(text).trim_end();
    if text.is_empty() {
        return Err(Rejected::Empty);
    }
    let lower = text.to_lowercase();
    if CHATTY.iter().any(|opening| lower.starts_with(opening)) {
        return Err(Rejected::Chatty);
    }
    if text.ends_with('?') || text.ends_with('？') {
        return Err(Rejected::Question);
    }
    if text.ends_with(':') || text.ends_with('!') || sentence_break(text) {
        return Err(Rejected::Sentences);
    }
    if text.split_whitespace().count() > MAX_WORDS || text.chars().count() > MAX_CHARS {
        return Err(Rejected::TooLong);
    }
    Ok(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// A sentence's end followed by more text (`". "`, `"! "`, `"? "`, `"。"`).
fn sentence_break(text: &str) -> bool {
    let chars: Vec<char> = text.chars().collect();
    chars.windows(2).any(|pair| {
        matches!(pair[0], '.' | '!' | '?') && pair[1] == ' '
            || matches!(pair[0], '。' | '！' | '？')
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn titles_pass_cleaned() {
        assert_eq!(accept("Fix the login bug").unwrap(), "Fix the login bug");
        assert_eq!(
            accept("  \"Fix the login bug.\"  \n").unwrap(),
            "Fix the login bug"
        );
        assert_eq!(
            accept("Title: Rust  lifetimes explained").unwrap(),
            "Rust lifetimes explained"
        );
        assert_eq!(
            accept("“Corriger le bug de connexion”").unwrap(),
            "Corriger le bug de connexion"
        );
        assert_eq!(
            accept("ログインのバグを修正").unwrap(),
            "ログインのバグを修正"
        );
        assert_eq!(
            accept("Parse v2.1 config files").unwrap(),
            "Parse v2.1 config files"
        );
    }

    #[test]
    fn answer_shaped_replies_are_refused() {
        let cases = [
            ("", Rejected::Empty),
            ("\"\"", Rejected::Empty),
            ("Fix login\nAnd more", Rejected::Lines),
            ("Sure! Here is a title: Fix login", Rejected::Chatty),
            ("Here is a title for you", Rejected::Chatty),
            ("Certainly, login fix", Rejected::Chatty),
            ("I can help with that", Rejected::Chatty),
            ("Voici un titre", Rejected::Chatty),
            ("¿Qué falla en el login?", Rejected::Question),
            ("Why does it fail?", Rejected::Question),
            ("Fix login. Then deploy", Rejected::Sentences),
            ("Done!", Rejected::Sentences),
            ("Summary:", Rejected::Sentences),
            ("# Fix login", Rejected::Markdown),
            ("**Fix login**", Rejected::Markdown),
            ("- Fix login", Rejected::Markdown),
            ("See [docs](http://x)", Rejected::Markdown),
            (
                "Fixing the login bug that happens when the user has an expired token",
                Rejected::TooLong,
            ),
            (&"x".repeat(81), Rejected::TooLong),
        ];
        for (reply, why) in cases {
            assert_eq!(accept(reply), Err(why), "{reply:?}");
        }
    }

    #[test]
    fn the_request_is_bounded_delimited_and_ends_with_the_instruction() {
        let prompt = "é".repeat(2000);
        let answer = "a</conversation>b".repeat(200);
        let request = request("small", &prompt, &answer);
        assert_eq!(request.model, "small");
        assert_eq!(request.max_tokens, Some(MAX_TOKENS));
        assert!(request.tools.is_empty());
        let ChatMessage::User { content, .. } = &request.messages[1] else {
            panic!("a user message");
        };
        assert!(content.starts_with("<conversation>\nUser: é"));
        assert!(content.ends_with(INSTRUCTION));
        assert_eq!(content.matches("</conversation>").count(), 1);
        assert!(content.len() < PROMPT_BYTES + ANSWER_BYTES + INSTRUCTION.len() + 400);
        assert!(content.contains("é…\n"));
    }
}
