//! The permission broker: the single gate every tool call passes.
//!
//! Rules have MAIA's form `Tool` or `Tool(pattern)`. The broker evaluates
//! deny, then ask, then allow: the first family with a matching rule
//! decides; with no match the answer is ask, for every tool. Rules come from
//! [`RuleSet`]s (the session's remembered "always" answers today; rule files
//! plug in the same way).

use std::path::Path;

use globset::GlobBuilder;
use maia_tools::ToolInput;

use crate::event::{ChoiceKind, PermissionChoice};

/// The broker's verdict for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Ask,
    /// Denied by the named rule.
    Deny(String),
}

/// One rule, `Tool` or `Tool(pattern)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub tool: String,
    pub pattern: Option<String>,
}

/// Why a rule could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed permission rule `{0}`")]
pub struct RuleError(pub String);

impl Rule {
    /// Parses `Tool` or `Tool(pattern)`.
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        let text = text.trim();
        let bad = || RuleError(text.to_owned());
        let (tool, pattern) = match text.find('(') {
            None => (text, None),
            Some(open) => {
                let inner = text[open + 1..].strip_suffix(')').ok_or_else(bad)?;
                (&text[..open], Some(inner.to_owned()))
            }
        };
        let valid_name = !tool.is_empty()
            && tool
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_name || pattern.as_deref().is_some_and(|p| p.trim().is_empty()) {
            return Err(bad());
        }
        Ok(Rule {
            tool: tool.to_owned(),
            pattern,
        })
    }

    /// Whether this rule covers `input` in a session rooted at `cwd`.
    /// `for_allow` is true when the rule is an allow rule: an allow never
    /// covers a shell command with operators, redirections or substitutions.
    pub fn matches(&self, input: &ToolInput, cwd: &Path, for_allow: bool) -> bool {
        if self.tool != input.name() {
            return false;
        }
        let Some(pattern) = &self.pattern else {
            return !(for_allow && input.command().is_some_and(has_shell_syntax));
        };
        match input {
            ToolInput::Bash(bash) => {
                if for_allow && has_shell_syntax(&bash.command) {
                    return false;
                }
                command_matches(pattern, bash.command.trim())
            }
            ToolInput::Glob(_) | ToolInput::Grep(_) => input
                .paths(cwd)
                .iter()
                .all(|p| path_matches(pattern, p, cwd, true)),
            _ => input
                .paths(cwd)
                .iter()
                .all(|p| path_matches(pattern, p, cwd, false)),
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.pattern {
            Some(p) => write!(f, "{}({p})", self.tool),
            None => f.write_str(&self.tool),
        }
    }
}

/// True when a command uses shell syntax that can hide or chain commands.
pub fn has_shell_syntax(command: &str) -> bool {
    command.chars().any(|c| {
        matches!(
            c,
            ';' | '&' | '|' | '<' | '>' | '$' | '`' | '(' | ')' | '\n'
        )
    })
}

/// `*` is any sequence; `cmd *` also covers `cmd` alone but not `cmdx`.
fn command_matches(pattern: &str, command: &str) -> bool {
    let pattern = pattern.trim();
    let to_regex = |p: &str| {
        p.split('*')
            .map(regex::escape)
            .collect::<Vec<_>>()
            .join(".*")
    };
    let body = match pattern.strip_suffix(" *") {
        Some(prefix) => format!("{}(?: .*)?", to_regex(prefix)),
        None => to_regex(pattern),
    };
    regex::Regex::new(&format!("^(?s:{body})$")).is_ok_and(|re| re.is_match(command))
}

/// Matches a glob relative to `cwd` (or absolute) against a resolved path.
/// For a search root (`dir`), `src/**` covers `src` itself.
fn path_matches(pattern: &str, path: &Path, cwd: &Path, dir: bool) -> bool {
    let pattern = pattern.trim().trim_start_matches("./");
    let Ok(glob) = GlobBuilder::new(pattern).literal_separator(true).build() else {
        return false;
    };
    let matcher = glob.compile_matcher();
    let inside = maia_tools::path::is_within(cwd, path);
    let candidate = if Path::new(pattern).is_absolute() || !inside {
        path.to_path_buf()
    } else {
        path.strip_prefix(cwd)
            .map(Path::to_path_buf)
            .unwrap_or_default()
    };
    if matcher.is_match(&candidate) {
        return true;
    }
    dir && matcher.is_match(candidate.join("_"))
}

/// A source of rules, sorted by family.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    pub allow: Vec<Rule>,
    pub ask: Vec<Rule>,
    pub deny: Vec<Rule>,
}

/// The broker of one session.
#[derive(Debug, Clone, Default)]
pub struct Broker {
    /// Rules loaded from files (none yet) and remembered "always" answers.
    sets: Vec<RuleSet>,
    remembered: RuleSet,
}

impl Broker {
    pub fn new(sets: Vec<RuleSet>) -> Self {
        Broker {
            sets,
            remembered: RuleSet::default(),
        }
    }

    /// Deny, then ask, then allow; no match → ask.
    pub fn decide(&self, input: &ToolInput, cwd: &Path) -> Decision {
        let all = || self.sets.iter().chain(std::iter::once(&self.remembered));
        if let Some(rule) = all()
            .flat_map(|s| &s.deny)
            .find(|r| r.matches(input, cwd, false))
        {
            return Decision::Deny(rule.to_string());
        }
        if all()
            .flat_map(|s| &s.ask)
            .any(|r| r.matches(input, cwd, false))
        {
            return Decision::Ask;
        }
        if all()
            .flat_map(|s| &s.allow)
            .any(|r| r.matches(input, cwd, true))
        {
            return Decision::Allow;
        }
        Decision::Ask
    }

    /// Remembers an "always" answer for the rest of the session.
    pub fn remember(&mut self, kind: ChoiceKind, rule: Rule) {
        match kind {
            ChoiceKind::AllowAlways => self.remembered.allow.push(rule),
            ChoiceKind::RejectAlways => self.remembered.deny.push(rule),
            ChoiceKind::AllowOnce | ChoiceKind::RejectOnce => {}
        }
    }
}

/// The narrowest sensible rule covering `input`, or `None` when no rule
/// could safely cover it (a compound shell command).
pub fn suggest_rule(input: &ToolInput, cwd: &Path) -> Option<Rule> {
    let rule = |pattern: String| Rule {
        tool: input.name().to_owned(),
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

/// The options offered for `input`, with labels that say what they cover.
pub fn choices(rule: Option<&Rule>) -> Vec<PermissionChoice> {
    let choice = |id: &str, label: String, kind| PermissionChoice {
        id: id.to_owned(),
        label,
        kind,
    };
    let mut out = vec![choice(
        "allow_once",
        "Allow once".to_owned(),
        ChoiceKind::AllowOnce,
    )];
    if let Some(rule) = rule {
        out.push(choice(
            "allow_always",
            format!("Always allow {rule}"),
            ChoiceKind::AllowAlways,
        ));
    }
    out.push(choice(
        "reject_once",
        "Reject".to_owned(),
        ChoiceKind::RejectOnce,
    ));
    if let Some(rule) = rule {
        out.push(choice(
            "reject_always",
            format!("Always reject {rule}"),
            ChoiceKind::RejectAlways,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: &str) -> ToolInput {
        ToolInput::parse(name, args).unwrap()
    }

    fn bash(cmd: &str) -> ToolInput {
        call("Bash", &serde_json::json!({ "command": cmd }).to_string())
    }

    #[test]
    fn parses_rules() {
        assert_eq!(Rule::parse("Bash").unwrap().pattern, None);
        let r = Rule::parse("Bash(npm test *)").unwrap();
        assert_eq!(
            (r.tool.as_str(), r.pattern.as_deref()),
            ("Bash", Some("npm test *"))
        );
        assert!(Rule::parse("Bash(").is_err());
        assert!(Rule::parse("Ba sh").is_err());
        assert!(Rule::parse("Edit()").is_err());
        assert_eq!(r.to_string(), "Bash(npm test *)");
    }

    #[test]
    fn bash_patterns() {
        let cwd = Path::new("/p");
        let r = Rule::parse("Bash(npm test *)").unwrap();
        assert!(r.matches(&bash("npm test"), cwd, true));
        assert!(r.matches(&bash("npm test --watch"), cwd, true));
        assert!(!r.matches(&bash("npm testx"), cwd, true));
        assert!(!r.matches(&bash("npm test && rm -rf /"), cwd, true));
        let exact = Rule::parse("Bash(git status)").unwrap();
        assert!(exact.matches(&bash("git status"), cwd, true));
        assert!(!exact.matches(&bash("git status -s"), cwd, true));
        let any = Rule::parse("Bash").unwrap();
        assert!(!any.matches(&bash("ls > x"), cwd, true));
        assert!(any.matches(&bash("ls > x"), cwd, false));
    }

    #[test]
    fn path_patterns_are_relative_to_cwd() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let r = Rule::parse("Edit(src/**)").unwrap();
        let edit = |p: &str| {
            call(
                "Edit",
                &serde_json::json!({"file_path": p, "old_string": "a", "new_string": "b"})
                    .to_string(),
            )
        };
        assert!(r.matches(&edit("src/a/b.rs"), cwd, true));
        assert!(!r.matches(&edit("lib/b.rs"), cwd, true));
        assert!(!r.matches(&edit("src/../lib/b.rs"), cwd, true));
        let env = Rule::parse("Read(./.env)").unwrap();
        assert!(env.matches(&call("Read", r#"{"file_path":".env"}"#), cwd, false));
    }

    #[test]
    fn deny_then_ask_then_allow_and_default_ask() {
        let cwd = Path::new("/p");
        let set = RuleSet {
            allow: vec![Rule::parse("Bash(aws s3 ls)").unwrap()],
            ask: vec![],
            deny: vec![Rule::parse("Bash(aws *)").unwrap()],
        };
        let broker = Broker::new(vec![set]);
        assert!(matches!(
            broker.decide(&bash("aws s3 ls"), cwd),
            Decision::Deny(_)
        ));
        assert_eq!(broker.decide(&bash("ls"), cwd), Decision::Ask);
        let mut broker = Broker::default();
        broker.remember(ChoiceKind::AllowAlways, Rule::parse("Bash(ls *)").unwrap());
        assert_eq!(broker.decide(&bash("ls -la"), cwd), Decision::Allow);
        broker.remember(
            ChoiceKind::RejectAlways,
            Rule::parse("Bash(ls -la)").unwrap(),
        );
        assert!(matches!(
            broker.decide(&bash("ls -la"), cwd),
            Decision::Deny(_)
        ));
    }

    #[test]
    fn suggestions_are_narrow() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let s = |i: &ToolInput| suggest_rule(i, cwd).map(|r| r.to_string());
        assert_eq!(
            s(&bash("npm test --watch")).as_deref(),
            Some("Bash(npm test *)")
        );
        assert_eq!(s(&bash("ls -la")).as_deref(), Some("Bash(ls *)"));
        assert_eq!(s(&bash("ls | wc")), None);
        assert_eq!(s(&bash("echo one")).as_deref(), Some("Bash(echo *)"));
        assert_eq!(
            s(&bash("git status -s")).as_deref(),
            Some("Bash(git status *)")
        );
        assert_eq!(
            s(&bash("rm -rf build")).as_deref(),
            Some("Bash(rm -rf build)")
        );
        assert_eq!(s(&bash("./run.sh x")).as_deref(), Some("Bash(./run.sh x)"));
        let write = |p: &str| {
            call(
                "Write",
                &serde_json::json!({"file_path": p, "content": ""}).to_string(),
            )
        };
        assert_eq!(s(&write("src/a.rs")).as_deref(), Some("Write(src/**)"));
        assert_eq!(s(&write("README.md")).as_deref(), Some("Write(README.md)"));
        assert_eq!(
            s(&call("Grep", r#"{"pattern":"x"}"#)).as_deref(),
            Some("Grep(**)")
        );
        // The suggested rule covers the call it was made for.
        for input in [
            bash("npm test --watch"),
            write("src/a.rs"),
            write("README.md"),
        ] {
            let rule = suggest_rule(&input, cwd).unwrap();
            assert!(rule.matches(&input, cwd, true), "{rule}");
        }
        let grep = call("Grep", r#"{"pattern":"x","path":"src"}"#);
        let rule = suggest_rule(&grep, cwd).unwrap();
        assert_eq!(rule.to_string(), "Grep(src/**)");
        assert!(rule.matches(&grep, cwd, true));
    }
}
