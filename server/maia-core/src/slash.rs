//! The slash commands MAIA knows (`/help`, `/new`, …): their table and the
//! split of `/name args`. What each does is in `commands.rs`.

/// A command the user can type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandInfo {
    pub name: &'static str,
    pub description: &'static str,
    /// What the argument is, for commands that take one.
    pub hint: Option<&'static str>,
}

/// Every command, in the order `/help` lists them.
pub const COMMANDS: &[CommandInfo] = &[
    CommandInfo {
        name: "new",
        description: "Start a fresh conversation in this thread (the current one stays saved)",
        hint: None,
    },
    CommandInfo {
        name: "clear",
        description: "Empty the context and reload settings, context file and rules",
        hint: None,
    },
    CommandInfo {
        name: "rename",
        description: "Rename the saved conversation",
        hint: Some("new name"),
    },
    CommandInfo {
        name: "load",
        description: "Continue a saved conversation of this folder in this thread",
        hint: Some("saved session name"),
    },
    CommandInfo {
        name: "rewind",
        description: "List the user messages, or drop message N and what follows it (--files: restore the files too)",
        hint: Some("N [--files] (optional)"),
    },
    CommandInfo {
        name: "fork",
        description: "Fork this conversation into a new session (--worktree: in a new git worktree)",
        hint: Some("--worktree (optional)"),
    },
    CommandInfo {
        name: "export",
        description: "Write this thread (messages, tool calls, diffs) to a Markdown or JSON file; --force replaces an existing one",
        hint: Some("md|json PATH --force (optional)"),
    },
    CommandInfo {
        name: "compact",
        description: "Summarise the conversation to free the context (it continues as NAME__n)",
        hint: None,
    },
    CommandInfo {
        name: "model",
        description: "List the models, or switch to one",
        hint: Some("model name (optional)"),
    },
    CommandInfo {
        name: "permissions",
        description: "Show the permission rules in force, file by file",
        hint: None,
    },
    CommandInfo {
        name: "context",
        description: "Show what fills the context",
        hint: None,
    },
    CommandInfo {
        name: "cost",
        description: "Show what this thread and its last turn cost, per model",
        hint: None,
    },
    CommandInfo {
        name: "tasks",
        description: "List the background tasks and their state",
        hint: None,
    },
    CommandInfo {
        name: "undo",
        description: "Undo the file changes of the last turn (again: the turn before); files you changed since are kept",
        hint: None,
    },
    CommandInfo {
        name: "mcp",
        description: "List the MCP servers, their state and their tools; `trust NAME` lets a project's server run as configured",
        hint: Some("trust NAME (optional)"),
    },
    CommandInfo {
        name: "hooks",
        description: "List the hooks in force; `trust` lets this project's hooks run as they are now",
        hint: Some("trust (optional)"),
    },
    CommandInfo {
        name: "help",
        description: "List the commands",
        hint: None,
    },
];

/// Splits `/name args` when `name` is a known command.
pub fn parse(text: &str) -> Option<(&'static CommandInfo, &str)> {
    let rest = text.trim_start().strip_prefix('/')?;
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let info = COMMANDS.iter().find(|c| c.name == name)?;
    Some((info, args.trim()))
}
