//! The narrowest sensible rule offered by "Always allow" / "Always reject".

use std::path::Path;

use maia_tools::ToolInput;
use serde_json::Value;

use super::rule::url_host;
use super::{Rule, has_shell_syntax};

/// The narrowest sensible rule covering `input`, or `None` when no rule
/// could safely cover it (a compound shell command).
pub fn suggest_rule(input: &ToolInput, cwd: &Path) -> Option<Rule> {
    // A MultiEdit is offered an Edit rule, which covers both (rule.rs).
    let tool = maia_tools::rule_parent(input.name()).unwrap_or(input.name());
    let rule = |pattern: String| Rule {
        tool: tool.to_owned(),
        pattern: Some(pattern),
    };
    match input {
        ToolInput::Bash(bash) => {
            let command = bash.command.trim();
            if has_shell_syntax(command) || command.is_empty() {
                return None;
            }
            Some(rule(bash_pattern(command)))
        }
        ToolInput::WebFetch(fetch) => {
            let host = url_host(&fetch.url)?;
            Some(rule(format!("domain:{host}")))
        }
        ToolInput::Glob(_) | ToolInput::Grep(_) => {
            let root = input.paths(cwd).into_iter().next()?;
            Some(rule(dir_pattern(&root, cwd)))
        }
        _ => {
            let file = input.paths(cwd).into_iter().next()?;
            let parent = file.parent()?;
            if parent == cwd {
                let name = file.file_name()?.to_string_lossy().into_owned();
                return Some(rule(escape_glob(&name)));
            }
            Some(rule(dir_pattern(parent, cwd)))
        }
    }
}

/// Programs whose second word is a subcommand (`npm test`, `git status`).
const SUBCOMMAND_TOOLS: &[&str] = &[
    "apt",
    "apt-get",
    "brew",
    "bun",
    "cargo",
    "deno",
    "docker",
    "dotnet",
    "gh",
    "git",
    "go",
    "gradle",
    "kubectl",
    "make",
    "mvn",
    "npm",
    "npx",
    "pip",
    "pip3",
    "pnpm",
    "poetry",
    "rustup",
    "systemctl",
    "terraform",
    "uv",
    "yarn",
];

/// Programs for which any prefix rule would be too broad: only the exact
/// command is offered.
const EXACT_ONLY: &[&str] = &[
    "bash", "chmod", "chown", "curl", "dd", "env", "eval", "exec", "kill", "mv", "node", "perl",
    "python", "python3", "rm", "ruby", "sh", "sudo", "wget", "xargs", "zsh",
];

/// The Bash pattern offered for "always": `cmd sub *` for tools with
/// subcommands, the exact command for risky programs, else `cmd *`.
fn bash_pattern(command: &str) -> String {
    let words: Vec<&str> = command.split_whitespace().collect();
    let Some(first) = words.first().copied() else {
        return command.to_owned();
    };
    let program = first.rsplit('/').next().unwrap_or(first);
    let plain = |w: &str| {
        w.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':'))
    };
    if EXACT_ONLY.contains(&program) || !plain(program) || first.contains(['*', '"', '\'', '\\']) {
        return command.to_owned();
    }
    match words.get(1) {
        Some(second) if SUBCOMMAND_TOOLS.contains(&program) && plain(second) => {
            format!("{first} {second} *")
        }
        _ => format!("{first} *"),
    }
}

fn dir_pattern(dir: &Path, cwd: &Path) -> String {
    if dir == cwd {
        return "**".to_owned();
    }
    let shown = match dir.strip_prefix(cwd) {
        Ok(rel) if maia_tools::path::is_within(cwd, dir) => rel.to_string_lossy().into_owned(),
        _ => dir.to_string_lossy().into_owned(),
    };
    format!("{}/**", escape_glob(&shown))
}

fn escape_glob(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '{' | '}') {
            out.push('[');
            out.push(c);
            out.push(']');
        } else {
            out.push(c);
        }
    }
    out
}

/// [`suggest_rule`] for any tool, from its JSON arguments: built-in tools
/// as above, `WebFetch(domain:<host>)`, `Skill(<name>)`, and the bare tool
/// name for custom and MCP tools (every call of that one tool). `None` when
/// nothing narrow enough exists.
pub fn suggest_rule_value(tool: &str, input: &Value, cwd: &Path) -> Option<Rule> {
    if let Ok(parsed) = ToolInput::parse(tool, &input.to_string()) {
        return suggest_rule(&parsed, cwd);
    }
    let rule = |pattern: Option<String>| {
        Some(Rule {
            tool: tool.to_owned(),
            pattern,
        })
    };
    match tool.to_ascii_lowercase().as_str() {
        "bash" | "read" | "write" | "edit" | "multiedit" | "glob" | "grep" => None,
        "webfetch" => {
            let host = url_host(input.get("url")?.as_str()?)?;
            rule(Some(format!("domain:{host}")))
        }
        "skill" => {
            let name = input.get("skill")?.as_str()?.trim();
            let plain = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if plain {
                rule(Some(name.to_owned()))
            } else {
                None
            }
        }
        _ => rule(None),
    }
}
