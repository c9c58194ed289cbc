//! `parse`'s tests: every wrapper, calls inside an explanation (not calls),
//! the repair rule, and replies recorded from the real model (`fixtures/`).

use super::*;
use serde_json::json;

fn one(text: &str) -> TextCall {
    let calls = parse(text).unwrap_or_else(|| panic!("not calls: {text}"));
    assert_eq!(calls.len(), 1, "{text}");
    calls.into_iter().next().unwrap()
}

#[test]
fn every_wrapper_models_use() {
    let read = TextCall {
        name: "Read".into(),
        arguments: json!({"file_path": "a.py"}),
    };
    for text in [
        r#"{"name": "Read", "arguments": {"file_path": "a.py"}}"#,
        "```json\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a.py\"}}\n```",
        "```\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a.py\"}}\n```\n",
        "<tool_call>\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a.py\"}}\n</tool_call>",
        "<tool_call>{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a.py\"}}",
        "<|python_tag|>{\"name\": \"Read\", \"parameters\": {\"file_path\": \"a.py\"}}",
        "[TOOL_CALLS][{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a.py\"}}]",
        "<function=Read>{\"file_path\": \"a.py\"}</function>",
        r#"{"type": "function", "function": {"name": "Read", "arguments": "{\"file_path\": \"a.py\"}"}}"#,
        "  \n```json\n<tool_call>\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a.py\"}}\n</tool_call>\n```  ",
    ] {
        assert_eq!(one(text), read, "{text}");
    }
}

#[test]
fn several_calls_in_one_reply() {
    let text = "```json\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a\"}}\n```\n\n```json\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"b\"}}\n```";
    assert_eq!(parse(text).unwrap().len(), 2);
    let array = r#"[{"name": "Glob", "arguments": {"pattern": "*.py"}}, {"name": "Grep", "arguments": {"pattern": "x"}}]"#;
    let calls = parse(array).unwrap();
    assert_eq!(calls[0].name, "Glob");
    assert_eq!(calls[1].name, "Grep");
    let bare = "{\"name\": \"Read\", \"arguments\": {}}\n{\"name\": \"Read\", \"arguments\": null}";
    assert_eq!(parse(bare).unwrap()[1].arguments, json!({}));
}

#[test]
fn a_call_inside_an_explanation_is_not_calls() {
    for text in [
        "To read it, call:\n```json\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a\"}}\n```",
        "```json\n{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a\"}}\n```\nThis reads the file.",
        "{\"name\": \"Read\", \"arguments\": {\"file_path\": \"a\"}} and then I edit it",
        "Use <tool_call>{\"name\": \"Read\", \"arguments\": {}}</tool_call> like this.",
        "```python\n{\"name\": \"Read\", \"arguments\": {}}\n```",
        // Unclosed fence: the reply was cut.
        "```json\n{\"name\": \"Read\", \"arguments\": {}}",
        // JSON that is not a call.
        "{\"name\": \"Read\"}",
        "{\"file_path\": \"a\"}",
        "[1, 2]",
        "[]",
        "{\"name\": \"Read\", \"arguments\": [1]}",
        "{\"name\": 3, \"arguments\": {}}",
        "<function=>{}</function>",
        "<function=rm -rf>{}</function>",
        "",
        "   ",
        "plain text",
    ] {
        assert_eq!(parse(text), None, "{text}");
    }
}

#[test]
fn unknown_names_are_left_to_the_registry() {
    // Read as a call: the registry answers "unknown tool" and runs nothing.
    assert_eq!(
        one(r#"{"name": "DeleteEverything", "arguments": {}}"#).name,
        "DeleteEverything"
    );
}

#[test]
fn raw_newlines_inside_strings_are_escaped() {
    // The model writes multi-line code with raw newlines, which JSON
    // forbids: they are escaped inside strings, nowhere else.
    let text = "```json\n{\"name\": \"Edit\", \"arguments\": {\"file_path\": \"m.py\", \"old_string\": \"def add(a, b):\n\treturn a + b\", \"new_string\": \"x\\\"y\"}}\n```";
    let call = one(text);
    assert_eq!(
        call.arguments["old_string"],
        "def add(a, b):\n\treturn a + b"
    );
    assert_eq!(call.arguments["new_string"], "x\"y");
    assert_eq!(
        escape_raw_controls("{\n\"a\": \"b\nc\"\n}"),
        "{\n\"a\": \"b\\nc\"\n}"
    );
    assert_eq!(escape_raw_controls("\"\u{1}\""), "\"\\u0001\"");
}

#[test]
fn too_many_calls_are_not_calls() {
    let text = r#"{"name": "Read", "arguments": {}}"#.repeat(MAX_CALLS + 1);
    assert_eq!(parse(&text), None);
}

#[test]
fn hostile_text_does_not_panic() {
    for text in [
        "<tool_call>",
        "<TOOL_CALL></tool_call>",
        "```",
        "```\n",
        "<function=a",
        "[TOOL_CALLS]",
        "<|python_tag|>",
        "{\"name\": \"Read\", \"arguments\": {\"a\": \"é\u{0}",
        "İ<tool_call>",
        "{{{{{{{{",
    ] {
        let _ = parse(text);
    }
}

/// Replies recorded from Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) served by
/// llama.cpp, in the real-model suite: each is run as the calls it names.
#[test]
fn replies_recorded_from_the_real_model() {
    let fixtures = include_str!("fixtures/qwen2.5-coder-1.5b.jsonl");
    let mut seen = 0;
    for line in fixtures.lines().filter(|l| !l.trim().is_empty()) {
        let case: serde_json::Value = serde_json::from_str(line).unwrap();
        let content = case["content"].as_str().unwrap();
        let expected = &case["calls"];
        match parse(content) {
            Some(calls) => {
                let names: Vec<_> = calls.iter().map(|c| json!(c.name)).collect();
                assert_eq!(&json!(names), expected, "{content}");
            }
            None => assert_eq!(expected, &json!(null), "{content}"),
        }
        seen += 1;
    }
    assert!(seen >= 5, "{seen} recorded replies");
}
