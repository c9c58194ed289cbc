//! Tools that act on the session itself: `TodoWrite` (the task list, shown
//! to the user as a plan) and `CurrentModel`. They have no effect outside
//! the conversation, so they never ask for permission (a deny or ask rule on
//! them still applies).

use maia_llm::ToolSpec;
use serde::{Deserialize, Serialize};
use serde_json::json;

pub const TODO_WRITE: &str = "TodoWrite";
pub const CURRENT_MODEL: &str = "CurrentModel";

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
}
