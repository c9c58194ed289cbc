//! A custom tool's command line: `command.run` split into words once
//! (quotes group, no shell), each word cut into text and `{{param}}`
//! references, and the program's argv for one call, each value within
//! its word (defaults applied, types checked).

use serde_json::{Map, Value};

use super::{CustomTool, Param, ParamType, Segment};

/// Splits a command line into words: whitespace separates words; single
/// quotes keep everything literally; double quotes keep everything except
/// that `\"` and `\\` stand for `"` and `\`. Quotes group text into the
/// word around them (`a'b c'd` is one word `ab cd`; `''` is an empty word).
/// Backslashes outside quotes are literal (Windows paths). A `{{…}}`
/// outside quotes is kept whole, so `{{ param }}` is one reference.
pub(super) fn split_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("`command.run` has an unclosed single quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') if matches!(chars.peek(), Some('"' | '\\')) => {
                            if let Some(c) = chars.next() {
                                word.push(c);
                            }
                        }
                        Some(c) => word.push(c),
                        None => return Err("`command.run` has an unclosed double quote".into()),
                    }
                }
            }
            '{' if chars.peek() == Some(&'{') => {
                // `{{ param }}` stays in one word even with spaces inside.
                in_word = true;
                word.push_str("{{");
                chars.next();
                let rest: String = chars.clone().collect();
                if let Some(close) = rest.find("}}") {
                    let inner = &rest[..close];
                    word.push_str(inner);
                    word.push_str("}}");
                    for _ in 0..inner.chars().count() + 2 {
                        chars.next();
                    }
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// Cuts a word into text and `{{param}}` references (spaces inside the
/// braces are allowed). A `{{` without a closing `}}` is text.
pub(super) fn parse_word(word: &str, params: &[Param]) -> Result<Vec<Segment>, String> {
    let mut segments = Vec::new();
    let mut rest = word;
    let mut text = String::new();
    while let Some(open) = rest.find("{{") {
        let Some(close) = rest[open + 2..].find("}}") else {
            break;
        };
        let name = rest[open + 2..open + 2 + close].trim();
        let Some(index) = params.iter().position(|p| p.name == name) else {
            return Err(format!(
                "`{{{{{name}}}}}` in `command.run` is not a declared parameter"
            ));
        };
        text.push_str(&rest[..open]);
        if !text.is_empty() {
            segments.push(Segment::Text(std::mem::take(&mut text)));
        }
        segments.push(Segment::Param(index));
        rest = &rest[open + 2 + close + 2..];
    }
    text.push_str(rest);
    if !text.is_empty() || segments.is_empty() {
        segments.push(Segment::Text(text));
    }
    Ok(segments)
}

/// A number as JavaScript prints it (`5`, not `5.0`).
fn format_number(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    match n.as_f64() {
        Some(0.0) => "0".into(),
        Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{f:.0}"),
        _ => n.to_string(),
    }
}

impl CustomTool {
    /// The parameter values for `input` (defaults applied), as text, in the
    /// order of [`CustomTool::parameters`]. Errors list every problem.
    pub fn values(&self, input: &Value) -> Result<Vec<String>, String> {
        let empty = Map::new();
        let map = match input {
            Value::Null => &empty,
            Value::Object(map) => map,
            _ => return Err(format!("The input of {} must be a JSON object.", self.name)),
        };
        let mut errors = Vec::new();
        for key in map.keys() {
            if !self.parameters.iter().any(|p| &p.name == key) {
                errors.push(format!("unknown parameter `{key}`"));
            }
        }
        let mut values = Vec::with_capacity(self.parameters.len());
        for p in &self.parameters {
            let value = match map.get(&p.name) {
                None | Some(Value::Null) => match &p.default {
                    Some(d) => d,
                    None => {
                        errors.push(format!(
                            "missing required {} parameter `{}`",
                            p.kind.as_str(),
                            p.name
                        ));
                        continue;
                    }
                },
                Some(v) => v,
            };
            match (p.kind, value) {
                (ParamType::Number, Value::Number(n)) => values.push(format_number(n)),
                (ParamType::String, Value::String(s)) => values.push(s.clone()),
                (kind, v) => errors.push(format!(
                    "parameter `{}` must be a {}, got {v}",
                    p.name,
                    kind.as_str()
                )),
            }
        }
        if errors.is_empty() {
            Ok(values)
        } else {
            Err(format!(
                "Invalid input for {}: {}.",
                self.name,
                errors.join("; ")
            ))
        }
    }

    /// The program and its arguments for `input`, as written in
    /// `command.run` with each `{{param}}` replaced inside its word. A value
    /// is never split or interpreted: it always stays within one argument.
    pub fn argv(&self, input: &Value) -> Result<Vec<String>, String> {
        let values = self.values(input)?;
        Ok(self
            .run_words
            .iter()
            .map(|word| {
                word.iter()
                    .map(|s| match s {
                        Segment::Text(t) => t.as_str(),
                        Segment::Param(i) => values[*i].as_str(),
                    })
                    .collect::<String>()
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_splitting() {
        assert_eq!(split_words("a  b\tc").unwrap(), ["a", "b", "c"]);
        assert_eq!(
            split_words(r#"a 'b c' "d e""#).unwrap(),
            ["a", "b c", "d e"]
        );
        assert_eq!(split_words(r#"x'a b'y"c"z"#).unwrap(), ["xa bycz"]);
        assert_eq!(split_words(r#"'' """#).unwrap(), ["", ""]);
        assert_eq!(
            split_words(r#""say \"hi\" \\ \n""#).unwrap(),
            [r#"say "hi" \ \n"#]
        );
        assert!(split_words(r#"'it\'s'"#).is_err());
        assert_eq!(
            split_words(r"C:\tools\x.exe 'a\b'").unwrap(),
            [r"C:\tools\x.exe", r"a\b"]
        );
        assert_eq!(
            split_words(r#"echo "$HOME" | wc > f"#).unwrap(),
            ["echo", "$HOME", "|", "wc", ">", "f"]
        );
        assert!(split_words("\"open").is_err());
        assert_eq!(
            split_words("a {{ x }}b {{ c").unwrap(),
            ["a", "{{ x }}b", "{{", "c"]
        );
    }
}
