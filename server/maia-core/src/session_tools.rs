//! Tools that act on the session itself: `TodoWrite` (the task list, shown
//! to the user as a plan), `CurrentModel` and `AskUser` (a question with
//! choices, see [`crate::client::Asker`]). They have no effect outside the
//! conversation, so they never ask for permission (a deny or ask rule on
//! them still applies).

use maia_llm::ToolSpec;
use serde::{Deserialize, Serialize};
use serde_json::json;

pub const TODO_WRITE: &str = "TodoWrite";
pub const CURRENT_MODEL: &str = "CurrentModel";
pub const ASK_USER: &str = "AskUser";

/// Choices an `AskUser` question may offer.
pub const ASK_CHOICES: std::ops::RangeInclusive<usize> = 2..=6;
/// Longest question and choice, in characters.
const MAX_QUESTION_CHARS: usize = 2_000;
const MAX_CHOICE_CHARS: usize = 200;

/// The state of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

/// One task of the session's list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Todo {
    pub content: String,
    pub status: TodoStatus,
    /// The present-continuous form shown while the task is in progress.
    #[serde(
        rename = "activeForm",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub active_form: Option<String>,
}

#[derive(Deserialize)]
struct TodoInput {
    todos: Vec<Todo>,
}

pub fn todo_definition() -> ToolSpec {
    ToolSpec {
        name: TODO_WRITE.to_owned(),
        description: "Replace the session's task list. Use it to plan multi-step work and to show \
progress: mark one task in_progress while you work on it, completed when done. Each call replaces \
the whole list."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string", "description": "The task, imperative form"},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                            "activeForm": {"type": "string", "description": "Present-continuous form shown while in progress"}
                        },
                        "required": ["content", "status"]
                    }
                }
            },
            "required": ["todos"]
        }),
    }
}

pub fn current_model_definition() -> ToolSpec {
    ToolSpec {
        name: CURRENT_MODEL.to_owned(),
        description: "Return the name of the model this session currently uses.".to_owned(),
        parameters: json!({"type": "object", "properties": {}}),
    }
}

pub fn ask_user_definition() -> ToolSpec {
    ToolSpec {
        name: ASK_USER.to_owned(),
        description: "Ask the user a question with a few choices, when you cannot go on without \
their decision (which approach, which file, whether to proceed). The user picks a choice and may \
add their own words; they may also decline. Ask one short question; do not ask what you can find \
out yourself. Never ask for passwords, keys or other secrets."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "question": {"type": "string", "description": "The question, one or two sentences"},
                "choices": {
                    "type": "array",
                    "items": {"type": "string"},
                    "minItems": ASK_CHOICES.start(),
                    "maxItems": ASK_CHOICES.end(),
                    "description": "The answers the user can pick, short and distinct"
                }
            },
            "required": ["question", "choices"]
        }),
    }
}

#[derive(Deserialize)]
struct AskInput {
    question: String,
    choices: Vec<String>,
}

/// Reads `AskUser` arguments: a question and 2 to 6 distinct choices.
pub fn parse_question(arguments: &str) -> Result<(String, Vec<String>), String> {
    let input: AskInput = serde_json::from_str(arguments).map_err(|e| {
        format!("invalid AskUser arguments ({e}); expected {{\"question\": \"…\", \"choices\": [\"…\", \"…\"]}}")
    })?;
    let question = input.question.trim().to_owned();
    if question.is_empty() {
        return Err("the question is empty".to_owned());
    }
    if question.chars().count() > MAX_QUESTION_CHARS {
        return Err(format!(
            "the question is longer than {MAX_QUESTION_CHARS} characters"
        ));
    }
    let mut choices: Vec<String> = Vec::new();
    for choice in input.choices {
        let choice = choice.trim().to_owned();
        if choice.is_empty() {
            return Err("a choice is empty".to_owned());
        }
        if choice.chars().count() > MAX_CHOICE_CHARS {
            return Err(format!(
                "a choice is longer than {MAX_CHOICE_CHARS} characters"
            ));
        }
        if choices.contains(&choice) {
            return Err(format!("the choice `{choice}` is given twice"));
        }
        choices.push(choice);
    }
    if !ASK_CHOICES.contains(&choices.len()) {
        return Err(format!(
            "give {} to {} choices (got {})",
            ASK_CHOICES.start(),
            ASK_CHOICES.end(),
            choices.len()
        ));
    }
    Ok((question, choices))
}

/// What the model gets back for an answer.
pub fn answer_result(answer: &crate::client::Answer) -> String {
    use crate::client::Answer;
    match answer {
        Answer::Chosen { choice, note } => {
            let mut out = match choice {
                Some(choice) => format!("The user chose: {choice}"),
                None => "The user picked no choice.".to_owned(),
            };
            if let Some(note) = note.as_deref().map(str::trim).filter(|n| !n.is_empty()) {
                out.push_str(&format!("\nThe user added: {note}"));
            }
            out
        }
        Answer::Declined => "The user declined to answer. Do not ask again; go on without \
their answer if you can, or stop and say what you need."
            .to_owned(),
        Answer::Cancelled => "The user dismissed the question without answering. Do not ask \
again; go on without their answer if you can, or stop and say what you need."
            .to_owned(),
    }
}

/// The question as text, for a client that cannot show a form.
pub fn question_text(question: &str, choices: &[String]) -> String {
    let mut out = format!("\n\n**{question}**\n\n");
    for (i, choice) in choices.iter().enumerate() {
        out.push_str(&format!("{}. {choice}\n", i + 1));
    }
    out.push_str("\nAnswer in your next message (a number or your own words).\n");
    out
}

/// Reads `TodoWrite` arguments.
pub fn parse_todos(arguments: &str) -> Result<Vec<Todo>, String> {
    let arguments = if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    };
    let input: TodoInput = serde_json::from_str(arguments).map_err(|e| {
        format!("invalid TodoWrite arguments ({e}); expected {{\"todos\": [{{\"content\", \"status\", \"activeForm\"}}]}}")
    })?;
    if let Some(empty) = input.todos.iter().position(|t| t.content.trim().is_empty()) {
        return Err(format!("task {} has no content", empty + 1));
    }
    Ok(input.todos)
}

/// What the model gets back: the list, and a warning when several tasks
/// are in progress.
pub fn todo_result(todos: &[Todo]) -> String {
    if todos.is_empty() {
        return "The task list is now empty.".to_owned();
    }
    let mut out = String::from("Task list updated:\n");
    for todo in todos {
        let mark = match todo.status {
            TodoStatus::Pending => "[ ]",
            TodoStatus::InProgress => "[~]",
            TodoStatus::Completed => "[x]",
        };
        out.push_str(&format!("{mark} {}\n", todo.content));
    }
    let running = todos
        .iter()
        .filter(|t| t.status == TodoStatus::InProgress)
        .count();
    if running > 1 {
        out.push_str(&format!(
            "\nWarning: {running} tasks are in progress; keep exactly one in progress at a time.\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn todos_parse_and_warn() {
        let todos = parse_todos(
            r#"{"todos":[{"content":"a","status":"in_progress","activeForm":"Doing a"},{"content":"b","status":"in_progress"}]}"#,
        )
        .unwrap();
        assert_eq!(todos[0].active_form.as_deref(), Some("Doing a"));
        assert!(todo_result(&todos).contains("2 tasks are in progress"));
        assert!(parse_todos(r#"{"todos":[{"content":"a","status":"done"}]}"#).is_err());
        assert!(parse_todos(r#"{"todos":[{"content":" ","status":"pending"}]}"#).is_err());
        assert!(parse_todos("").unwrap_err().contains("expected"));
    }

    #[test]
    fn questions_are_checked() {
        let (q, c) = parse_question(r#"{"question":" Which? ","choices":["a"," b "]}"#).unwrap();
        assert_eq!(
            (q.as_str(), c),
            ("Which?", vec!["a".to_owned(), "b".to_owned()])
        );
        for bad in [
            r#"{"question":"Which?","choices":["a"]}"#,
            r#"{"question":"Which?","choices":["a","a"]}"#,
            r#"{"question":"Which?","choices":["a",""]}"#,
            r#"{"question":" ","choices":["a","b"]}"#,
            r#"{"question":"Which?","choices":["1","2","3","4","5","6","7"]}"#,
            r#"{"choices":["a","b"]}"#,
        ] {
            assert!(parse_question(bad).is_err(), "{bad}");
        }
        let text = question_text("Which?", &["a".into(), "b".into()]);
        assert!(
            text.contains("**Which?**") && text.contains("1. a\n2. b\n"),
            "{text}"
        );
        use crate::client::Answer;
        let chosen = Answer::Chosen {
            choice: Some("a".into()),
            note: Some("but quickly".into()),
        };
        assert_eq!(
            answer_result(&chosen),
            "The user chose: a\nThe user added: but quickly"
        );
        assert!(answer_result(&Answer::Declined).contains("declined"));
        assert!(answer_result(&Answer::Cancelled).contains("dismissed"));
    }
}
