//! How a managed policy bounds a session: the sandbox floor, the modes and
//! models it refuses (with a reason naming the policy file), and the lines
//! `maia doctor` and `/context` show.

use std::path::PathBuf;

use serde_json::Value;

use super::ManagedPolicy;
use crate::mode::Mode;

/// Something a policy refuses: what was asked, and the file that says no.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} is refused by the managed policy {}", path.display())]
pub struct Refusal {
    pub what: String,
    pub path: PathBuf,
}

/// What the command sandbox may not go below (`sandbox` of the policy,
/// spelled as in `~/.maia/settings.json`): `mode` (`workspace-write` or
/// `read-only`; the user's `off`, or a looser mode, is raised to it),
/// `network: false` (the user's `network: true` is refused),
/// `allowedDomains` (with the network refused: the only domains the
/// user's list may keep; absent, none) and `allowUnsandboxedCommands:
/// false` (no "Allow once without the sandbox").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxFloor {
    pub mode: Option<maia_tools::sandbox::SandboxMode>,
    pub no_network: bool,
    pub allowed_domains: Option<Vec<String>>,
    pub no_unsandboxed: bool,
}

impl SandboxFloor {
    pub(super) fn parse(value: &Value, problems: &mut Vec<String>) -> SandboxFloor {
        use maia_tools::sandbox::SandboxMode;
        let mut floor = SandboxFloor::default();
        let object = match value {
            Value::Object(o) => o.clone(),
            Value::String(_) => {
                let mut o = serde_json::Map::new();
                o.insert("mode".to_owned(), value.clone());
                o
            }
            _ => {
                problems.push("sandbox must be an object".to_owned());
                return floor;
            }
        };
        for (key, value) in &object {
            match (key.as_str(), value) {
                ("mode", Value::String(m)) => match SandboxMode::parse(m) {
                    Some(SandboxMode::Off) | None => problems.push(
                        "sandbox.mode must be \"workspace-write\" or \"read-only\"".to_owned(),
                    ),
                    Some(mode) => floor.mode = Some(mode),
                },
                ("network", Value::Bool(b)) => floor.no_network = !b,
                ("allowUnsandboxedCommands", Value::Bool(b)) => floor.no_unsandboxed = !b,
                ("allowedDomains", v) => match super::string_list(v) {
                    Some(list) => floor.allowed_domains = Some(list),
                    None => problems.push("sandbox.allowedDomains must be a list of names".into()),
                },
                (key, _) => problems.push(format!("sandbox.{key} is not a valid floor value")),
            }
        }
        floor
    }

    /// Raises the user's sandbox `policy` to the floor; returns a note for
    /// each thing it changed.
    pub fn apply(
        &self,
        policy: &mut maia_tools::sandbox::SandboxPolicy,
        file: &std::path::Path,
    ) -> Vec<String> {
        use maia_tools::sandbox::SandboxMode;
        let mut notes = Vec::new();
        let file = file.display();
        if let Some(floor) = self.mode {
            let rank = |m: SandboxMode| match m {
                SandboxMode::Off => 0,
                SandboxMode::WorkspaceWrite => 1,
                SandboxMode::ReadOnly => 2,
            };
            if rank(policy.mode) < rank(floor) {
                notes.push(format!(
                    "Command sandbox: \"{}\" is refused by the managed policy {file}; \"{}\" is used.",
                    policy.mode.id(),
                    floor.id()
                ));
                policy.mode = floor;
            }
        }
        if self.no_network {
            if policy.network {
                notes.push(format!(
                    "Command sandbox: \"network\": true is refused by the managed policy {file}; commands reach no network."
                ));
                policy.network = false;
            }
            let kept: Vec<String> = policy
                .allowed_domains
                .iter()
                .filter(|d| {
                    self.allowed_domains
                        .as_ref()
                        .is_some_and(|list| list.iter().any(|m| covers(m, d)))
                })
                .cloned()
                .collect();
            let dropped: Vec<&String> = policy
                .allowed_domains
                .iter()
                .filter(|d| !kept.contains(d))
                .collect();
            if !dropped.is_empty() {
                let names: Vec<&str> = dropped.iter().map(|d| d.as_str()).collect();
                notes.push(format!(
                    "Command sandbox: sandbox.allowedDomains {} refused by the managed policy {file}.",
                    names.join(", ")
                ));
            }
            policy.allowed_domains = kept;
        }
        notes
    }
}

/// Whether the policy's domain pattern `managed` covers the user's `user`
/// (the same name, or `*.x` covering `x`'s subdomains and narrower
/// patterns below them).
fn covers(managed: &str, user: &str) -> bool {
    let (managed, user) = (managed.to_ascii_lowercase(), user.to_ascii_lowercase());
    if managed == user {
        return true;
    }
    match managed.strip_prefix("*.") {
        Some(base) => {
            let name = user.strip_prefix("*.").unwrap_or(&user);
            name.ends_with(&format!(".{base}"))
        }
        None => false,
    }
}

impl ManagedPolicy {
    fn refuse(&self, what: String) -> Refusal {
        Refusal {
            what,
            path: self.path.clone(),
        }
    }

    /// Whether a session may switch to `mode`.
    pub fn check_mode(&self, mode: Mode) -> Result<(), Refusal> {
        if self.disable_bypass && mode == Mode::Bypass {
            return Err(self.refuse(format!("the `{}` mode", mode.id())));
        }
        Ok(())
    }

    /// The modes offered (`bypass` left out when the policy refuses it).
    pub fn modes(&self) -> Vec<Mode> {
        Mode::ALL
            .into_iter()
            .filter(|m| self.check_mode(*m).is_ok())
            .collect()
    }

    /// Whether a session may use `model`.
    pub fn check_model(&self, model: &str) -> Result<(), Refusal> {
        if self.allows_model(model) {
            Ok(())
        } else {
            let allowed = self.available_models.clone().unwrap_or_default();
            Err(self.refuse(format!(
                "the model `{model}` (availableModels: {})",
                allowed.join(", ")
            )))
        }
    }

    /// Whether the "Allow once without the sandbox" choice may be offered.
    pub fn allows_unsandboxed(&self) -> bool {
        !self.sandbox.no_unsandboxed
    }

    /// What the policy enforces, one line each (`maia doctor`, `/context`).
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let rules: Vec<String> = self
            .rules
            .deny
            .iter()
            .map(|r| format!("deny {r}"))
            .chain(self.rules.ask.iter().map(|r| format!("ask {r}")))
            .collect();
        if !rules.is_empty() {
            out.push(format!("permission rules: {}", rules.join(", ")));
        }
        if self.disable_bypass {
            out.push("the bypass mode is disabled".to_owned());
        }
        let floor = &self.sandbox;
        if let Some(mode) = floor.mode {
            out.push(format!("sandbox at least \"{}\"", mode.id()));
        }
        if floor.no_network {
            let domains = floor
                .allowed_domains
                .as_ref()
                .filter(|d| !d.is_empty())
                .map_or("none".to_owned(), |d| d.join(", "));
            out.push(format!(
                "sandboxed commands reach no network (domains the user may allow: {domains})"
            ));
        }
        if floor.no_unsandboxed {
            out.push("no command runs outside the sandbox".to_owned());
        }
        if let Some(models) = &self.available_models {
            out.push(format!("models allowed: {}", models.join(", ")));
        }
        if !self.hooks.is_empty() {
            out.push(format!(
                "{} hook command(s) always run{}",
                self.hooks.len(),
                if self.managed_hooks_only {
                    "; the user's and the project's hooks do not"
                } else {
                    ""
                }
            ));
        } else if self.managed_hooks_only {
            out.push("the user's and the project's hooks do not run".to_owned());
        }
        if let Some(t) = &self.telemetry {
            out.push(format!(
                "telemetry {}",
                if t.enabled { "on" } else { "off" }
            ));
        }
        if !self.ignored.is_empty() {
            out.push(format!(
                "keys not read (MAIA does not know them, or they would loosen): {}",
                self.ignored.join(", ")
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_managed_pattern_covers_subdomains_only() {
        assert!(covers("crates.io", "crates.io"));
        assert!(covers("*.npmjs.org", "registry.npmjs.org"));
        assert!(covers("*.npmjs.org", "*.a.npmjs.org"));
        assert!(!covers("*.npmjs.org", "npmjs.org"));
        assert!(!covers("crates.io", "static.crates.io"));
        assert!(!covers("*.npmjs.org", "evilnpmjs.org"));
    }
}
