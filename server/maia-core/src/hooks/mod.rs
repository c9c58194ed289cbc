//! Hooks: commands the user or the project configures under `hooks` in
//! `~/.maia/settings.json` and `<project>/.maia/settings.json`, in Claude
//! Code's format (docs/hooks.md):
//!
//! ```json
//! {"hooks": {"PreToolUse": [{"matcher": "Bash|Write",
//!   "hooks": [{"type": "command", "command": "./check.sh", "timeout": 30}]}]}}
//! ```
//!
//! Both files' hooks run (they are not merged key by key like the other
//! settings). A project's hooks run only once the user trusted them as
//! they are (`/hooks trust`, recorded in `~/.maia/trusted-hooks.json` with
//! a fingerprint of the project's `hooks` value; a change needs a new
//! trust). Here: the configuration, the matcher and the trust; running a
//! hook is `run`, reading what it answered `verdict`, firing an event at
//! every matching hook `fire`.

mod fire;
mod run;
mod verdict;

pub(crate) use fire::{Env, fire};
pub use verdict::Verdict;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::settings::{FileContent, SettingsFiles};

/// How long a hook may run when its entry says nothing (Claude Code's).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// How many times `Stop` hooks may send the model back to work in one
/// prompt's turn.
pub const MAX_STOP_CONTINUATIONS: u32 = 5;
/// The file recording which projects' hooks the user trusts.
pub const TRUST_FILE: &str = "trusted-hooks.json";

/// The events a hook can be configured for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HookEvent {
    PreToolUse,
    PostToolUse,
    UserPromptSubmit,
    Stop,
    SubagentStop,
    SessionStart,
    SessionEnd,
    PreCompact,
    Notification,
}

impl HookEvent {
    pub const ALL: [HookEvent; 9] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::UserPromptSubmit,
        HookEvent::Stop,
        HookEvent::SubagentStop,
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
        HookEvent::PreCompact,
        HookEvent::Notification,
    ];

    /// The name in the settings and in `hook_event_name`.
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::Stop => "Stop",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::Notification => "Notification",
        }
    }

    fn parse(name: &str) -> Option<HookEvent> {
        HookEvent::ALL.into_iter().find(|e| e.name() == name)
    }
}

/// Whose settings file a hook comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    User,
    Project,
    /// The managed policy's: always runs.
    Managed,
}

/// One configured hook command.
#[derive(Debug, Clone, PartialEq)]
pub struct HookCommand {
    pub event: HookEvent,
    /// The matcher as written (`None`: matches everything).
    pub matcher: Option<String>,
    pub command: String,
    pub timeout: Duration,
    pub source: Source,
}

impl HookCommand {
    /// Whether this hook runs for `subject` (the tool name for tool
    /// events, the trigger or source for the others; `None`: the event
    /// has none, and every hook of it runs). Claude Code's rule: empty or
    /// `*` matches all, otherwise a regular expression that must match the
    /// whole subject (so a plain name matches exactly).
    pub fn matches(&self, subject: Option<&str>) -> bool {
        let Some(subject) = subject else {
            return true;
        };
        let pattern = match self.matcher.as_deref().map(str::trim) {
            None | Some("") | Some("*") => return true,
            Some(p) => p,
        };
        match regex::Regex::new(&format!("^(?:{pattern})$")) {
            Ok(re) => re.is_match(subject),
            Err(_) => pattern == subject,
        }
    }
}

/// The hooks in force for a session.
#[derive(Debug, Clone, Default)]
pub struct LoadedHooks {
    /// The hooks that run (the user's, and the project's when trusted).
    pub commands: Vec<HookCommand>,
    /// The project's hooks held back because the user has not trusted
    /// them as they are (their count; `0` when none or trusted).
    pub untrusted: usize,
    /// The fingerprint of the project's `hooks` value (what `/hooks trust`
    /// records).
    pub project_fingerprint: Option<String>,
    /// Problems found in the configuration.
    pub warnings: Vec<String>,
}

impl LoadedHooks {
    /// The hooks of `event` that match `subject`.
    pub fn matching(&self, event: HookEvent, subject: Option<&str>) -> Vec<&HookCommand> {
        self.commands
            .iter()
            .filter(|h| h.event == event && h.matches(subject))
            .collect()
    }

    /// Whether any hook of `event` is configured.
    pub fn has(&self, event: HookEvent) -> bool {
        self.commands.iter().any(|h| h.event == event)
    }

    /// What to tell the user when the session starts.
    pub fn notices(&self) -> Vec<String> {
        let mut out = self.warnings.clone();
        if self.untrusted > 0 {
            out.push(format!(
                "This project's .maia/settings.json configures {} hook command(s) that do not run until you trust them: read them, then type /hooks trust.",
                self.untrusted
            ));
        }
        out
    }

    /// A list of the hooks for `/hooks`.
    pub fn report(&self) -> String {
        let mut text = String::new();
        if self.commands.is_empty() {
            text.push_str("No hooks run in this session.\n");
        } else {
            text.push_str("Hooks in force:\n\n");
            for h in &self.commands {
                let whose = match h.source {
                    Source::User => "user",
                    Source::Project => "project",
                    Source::Managed => "managed policy",
                };
                let matcher = h.matcher.as_deref().unwrap_or("*");
                text.push_str(&format!(
                    "- {} [{matcher}] `{}` ({whose}, timeout {} s)\n",
                    h.event.name(),
                    h.command,
                    h.timeout.as_secs()
                ));
            }
        }
        if self.untrusted > 0 {
            text.push_str(&format!(
                "\n{} project hook command(s) are not trusted and do not run; `/hooks trust` trusts them as they are now.\n",
                self.untrusted
            ));
        }
        text
    }
}

/// The hooks of the settings `files`: the managed policy's (`managed`,
/// always), then the user's, then the project's when the user trusts them
/// (`home`'s trust file) — neither when the policy allows only its own.
pub fn load(
    files: &SettingsFiles,
    (home, cwd): (Option<&Path>, &Path),
    managed: &[HookCommand],
    managed_only: bool,
) -> LoadedHooks {
    let mut out = LoadedHooks {
        commands: managed.to_vec(),
        ..LoadedHooks::default()
    };
    if managed_only {
        return out;
    }
    let user_file = home.map(|h| h.join(".maia").join("settings.json"));
    for file in files.files() {
        let FileContent::Json(Value::Object(map)) = &file.content else {
            continue;
        };
        let Some(value) = map.get("hooks") else {
            continue;
        };
        let source = if user_file.as_ref() == Some(&file.path) {
            Source::User
        } else {
            Source::Project
        };
        let commands = parse(value, source, &file.path, &mut out.warnings);
        if source == Source::Project {
            let print = fingerprint(value);
            let trusted = home.is_some_and(|h| is_trusted(h, cwd, &print));
            out.project_fingerprint = Some(print);
            if !trusted {
                out.untrusted = commands.len();
                continue;
            }
        }
        out.commands.extend(commands);
    }
    out
}

/// The hook commands of a `hooks` value from `path` (the managed policy
/// reads its own with this); problems go to `warnings`.
pub(crate) fn parse_value(
    value: &Value,
    source: Source,
    path: &Path,
    warnings: &mut Vec<String>,
) -> Vec<HookCommand> {
    parse(value, source, path, warnings)
}

/// The hook commands of one file's `hooks` value.
fn parse(
    value: &Value,
    source: Source,
    path: &Path,
    warnings: &mut Vec<String>,
) -> Vec<HookCommand> {
    let mut out = Vec::new();
    let mut warn = |what: String| warnings.push(format!("hooks in {}: {what}", path.display()));
    let Some(events) = value.as_object() else {
        warn("must be an object of events; ignored".to_owned());
        return out;
    };
    for (name, groups) in events {
        let Some(event) = HookEvent::parse(name) else {
            warn(format!("unknown event {name}; ignored"));
            continue;
        };
        let Some(groups) = groups.as_array() else {
            warn(format!("{name} must be a list; ignored"));
            continue;
        };
        for group in groups {
            let matcher = group
                .get("matcher")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if let Some(m) = matcher.as_deref()
                && !matches!(m.trim(), "" | "*")
                && regex::Regex::new(m).is_err()
            {
                warn(format!(
                    "{name} matcher `{m}` is not a regular expression; matched as a plain name"
                ));
            }
            let Some(hooks) = group.get("hooks").and_then(Value::as_array) else {
                warn(format!("{name} entry without a `hooks` list; ignored"));
                continue;
            };
            for hook in hooks {
                let kind = hook
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("command");
                if kind != "command" {
                    warn(format!(
                        "{name} hook of type `{kind}` is not supported (only `command`); ignored"
                    ));
                    continue;
                }
                let Some(command) = hook
                    .get("command")
                    .and_then(Value::as_str)
                    .filter(|c| !c.trim().is_empty())
                else {
                    warn(format!("{name} hook without a `command`; ignored"));
                    continue;
                };
                let timeout = match hook.get("timeout") {
                    None | Some(Value::Null) => DEFAULT_TIMEOUT,
                    Some(v) => match v.as_f64().filter(|s| *s > 0.0 && s.is_finite()) {
                        Some(secs) => Duration::from_secs_f64(secs.min(86_400.0)),
                        None => {
                            warn(format!(
                                "{name} hook timeout must be a positive number of seconds; 60 s used"
                            ));
                            DEFAULT_TIMEOUT
                        }
                    },
                };
                out.push(HookCommand {
                    event,
                    matcher: matcher.clone(),
                    command: command.to_owned(),
                    timeout,
                    source,
                });
            }
        }
    }
    out
}

/// A fingerprint of a project's `hooks` value (its canonical JSON).
pub fn fingerprint(value: &Value) -> String {
    let text = serde_json::to_string(value).unwrap_or_default();
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().take(12).map(|b| format!("{b:02x}")).collect()
}

/// The key a project is recorded under: its settings file, canonical.
fn project_key(cwd: &Path) -> String {
    let file = cwd.join(".maia").join("settings.json");
    std::fs::canonicalize(&file)
        .unwrap_or(file)
        .to_string_lossy()
        .into_owned()
}

fn trust_file(home: &Path) -> PathBuf {
    home.join(".maia").join(TRUST_FILE)
}

fn read_trust(home: &Path) -> serde_json::Map<String, Value> {
    std::fs::read_to_string(trust_file(home))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| match v {
            Value::Object(map) => Some(map),
            _ => None,
        })
        .unwrap_or_default()
}

/// Whether the user trusts the project hooks of `cwd` with `print`.
pub fn is_trusted(home: &Path, cwd: &Path, print: &str) -> bool {
    read_trust(home)
        .get(&project_key(cwd))
        .and_then(Value::as_str)
        == Some(print)
}

/// Records that the user trusts the project hooks of `cwd` as they are
/// (`print`); an earlier trust of that project is replaced.
pub fn trust(home: &Path, cwd: &Path, print: &str) -> std::io::Result<()> {
    let mut map = read_trust(home);
    map.insert(project_key(cwd), Value::String(print.to_owned()));
    let path = trust_file(home);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let text = serde_json::to_string_pretty(&Value::Object(map)).unwrap_or_default();
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(tmp, path)
}

#[cfg(test)]
mod tests;
