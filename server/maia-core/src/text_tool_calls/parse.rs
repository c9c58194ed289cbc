//! A reply whose whole content is tool calls written as text, read as
//! those calls: one or more JSON objects `{"name": …, "arguments": {…}}`
//! (also `parameters`/`input`/`args`, or inside `"function"`), bare or as a
//! JSON array, in ```` ```json ```` fences, or in the wrappers models use:
//! `<tool_call>…</tool_call>`, `<|python_tag|>…`, `[TOOL_CALLS]…`,
//! `<function=NAME>{…}</function>`.
//!
//! The rule is strict on purpose: anything else in the reply (a sentence
//! before or after, an unclosed fence, an object without a name and
//! arguments) makes it not calls, and the turn treats it as text. Names and
//! arguments are not judged here: the tool registry refuses an unknown
//! name or invalid arguments with its usual error, and nothing runs.
//!
//! Repair rule: models write raw newlines and tabs inside JSON strings,
//! which JSON forbids. When a reply does not read as calls, it is read once
//! more with every raw control character inside a string literal escaped
//! (`\n`, `\r`, `\t`, others as `\u00XX`); nothing else is repaired.

use serde_json::{Map, Value};

/// One call read from text: the tool's name and its arguments object.
#[derive(Debug, Clone, PartialEq)]
pub struct TextCall {
    pub name: String,
    pub arguments: Value,
}

/// Calls at most in one reply.
const MAX_CALLS: usize = 32;

/// The calls a reply's whole content makes, if that is all it is.
pub fn parse(text: &str) -> Option<Vec<TextCall>> {
    read_all(text).or_else(|| {
        let repaired = escape_raw_controls(text);
        (repaired != text).then(|| read_all(&repaired)).flatten()
    })
}

fn read_all(text: &str) -> Option<Vec<TextCall>> {
    let mut calls = Vec::new();
    read_sequence(text, &mut calls)?;
    (!calls.is_empty() && calls.len() <= MAX_CALLS).then_some(calls)
}

/// Reads `text` whole as a sequence of wrapped or bare calls.
fn read_sequence(text: &str, calls: &mut Vec<TextCall>) -> Option<()> {
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        rest = read_one(rest, calls)?.trim_start();
        if calls.len() > MAX_CALLS {
            return None;
        }
    }
    Some(())
}

/// Reads one wrapped or bare call (or a marker) at the start of `rest`;
/// returns what follows it.
fn read_one<'a>(rest: &'a str, calls: &mut Vec<TextCall>) -> Option<&'a str> {
    if let Some(after) = strip_marker(rest, "<tool_call>") {
        let (inner, after) = match find_ci(after, "</tool_call>") {
            Some(end) => (&after[..end], &after[end + "</tool_call>".len()..]),
            // A closing tag left off at the very end.
            None => (after, ""),
        };
        read_sequence(inner, calls)?;
        return Some(after);
    }
    for marker in ["<|python_tag|>", "[TOOL_CALLS]"] {
        if let Some(after) = strip_marker(rest, marker) {
            return Some(after);
        }
    }
    if let Some(after) = strip_marker(rest, "<function=") {
        let close = after.find('>')?;
        let name = after[..close].trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_alphanumeric() || "_-.:".contains(c))
        {
            return None;
        }
        let (value, after) = json_value(after[close + 1..].trim_start())?;
        let arguments = arguments_object(value)?;
        calls.push(TextCall {
            name: name.to_owned(),
            arguments,
        });
        let after = after.trim_start();
        return Some(strip_marker(after, "</function>").unwrap_or(after));
    }
    if let Some(after) = rest.strip_prefix("```") {
        let line_end = after.find('\n')?;
        let info = after[..line_end].trim().to_ascii_lowercase();
        if !matches!(
            info.as_str(),
            "" | "json" | "tool_call" | "tool_code" | "xml"
        ) {
            return None;
        }
        let body = &after[line_end + 1..];
        let end = body.find("```")?;
        read_sequence(&body[..end], calls)?;
        return Some(&body[end + 3..]);
    }
    if rest.starts_with('{') || rest.starts_with('[') {
        let (value, after) = json_value(rest)?;
        push_calls(value, calls)?;
        return Some(after);
    }
    None
}

/// One JSON value at the start of `text`, and what follows it.
fn json_value(text: &str) -> Option<(Value, &str)> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let value = stream.next()?.ok()?;
    Some((value, &text[stream.byte_offset()..]))
}

/// The calls a JSON value holds: a call object, or an array of them.
fn push_calls(value: Value, calls: &mut Vec<TextCall>) -> Option<()> {
    match value {
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                calls.push(call(item)?);
            }
            Some(())
        }
        value => {
            calls.push(call(value)?);
            Some(())
        }
    }
}

/// A call object: `{"name", "arguments"}` (or the aliases), or the same
/// inside `"function"` (`{"type":"function","function":{…}}`).
fn call(value: Value) -> Option<TextCall> {
    let Value::Object(mut object) = value else {
        return None;
    };
    if let Some(Value::Object(inner)) = object.remove("function") {
        return call(Value::Object(inner));
    }
    let name = ["name", "tool", "tool_name"]
        .iter()
        .find_map(|k| object.get(*k)?.as_str().map(str::to_owned))?;
    let arguments = ["arguments", "parameters", "input", "args"]
        .iter()
        .find_map(|k| object.remove(*k))?;
    Some(TextCall {
        name,
        arguments: arguments_object(arguments)?,
    })
}

/// Arguments as an object; a JSON text holding one is read (as the API
/// sends them), `null` is no arguments.
fn arguments_object(value: Value) -> Option<Value> {
    match value {
        Value::Object(_) => Some(value),
        Value::Null => Some(Value::Object(Map::new())),
        Value::String(text) => match serde_json::from_str::<Value>(&text).ok()? {
            object @ Value::Object(_) => Some(object),
            _ => None,
        },
        _ => None,
    }
}

/// `rest` after `marker` when it starts with it (ASCII case ignored).
fn strip_marker<'a>(rest: &'a str, marker: &str) -> Option<&'a str> {
    let head = rest.get(..marker.len())?;
    head.eq_ignore_ascii_case(marker)
        .then(|| &rest[marker.len()..])
}

/// Where `needle` (ASCII) starts in `haystack`, ASCII case ignored.
fn find_ci(haystack: &str, needle: &str) -> Option<usize> {
    let bytes = haystack.as_bytes();
    let needle = needle.as_bytes();
    (0..bytes.len().saturating_sub(needle.len() - 1))
        .find(|&i| bytes[i..i + needle.len()].eq_ignore_ascii_case(needle))
}

/// `text` with raw control characters inside JSON string literals
/// escaped; everything outside strings is kept as it is.
pub(crate) fn escape_raw_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            } else if c.is_control() && (c as u32) < 0x20 {
                match c {
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c => out.push_str(&format!("\\u{:04x}", c as u32)),
                }
                continue;
            }
        } else if c == '"' {
            in_string = true;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
