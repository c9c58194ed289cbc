//! Managed policy: the administrator's file (`/etc/maia/managed-settings.json`,
//! or the path in `MAIA_MANAGED_SETTINGS`), read once when the process
//! starts, whose keys can only tighten what the user's and the project's
//! settings allow (docs/permissions.md, "Managed policy").
//!
//! Keys, in Claude Code's spelling where MAIA has the concept:
//! `permissions.deny` / `permissions.ask` (added above every other rule),
//! `permissions.disableBypassPermissionsMode: "disable"` (or
//! `disableBypassMode: true`), `sandbox` (`mode`, `network`,
//! `allowedDomains`, `allowUnsandboxedCommands`: a floor), `availableModels`,
//! `hooks` (always run) with `allowManagedHooksOnly`, and `telemetry`.
//!
//! A file that exists but cannot be read, is not JSON, or holds a known key
//! with a value that does not parse is a [`PolicyError`]: the front end
//! refuses to start (fail closed). Here: reading and parsing; how each key
//! bounds a session is `apply`.

mod apply;

pub use apply::{Refusal, SandboxFloor};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::hooks::{HookCommand, Source};
use crate::permission::{Family, Rule, RuleSet};

/// Where the policy is read when `MAIA_MANAGED_SETTINGS` does not say.
pub const DEFAULT_PATH: &str = "/etc/maia/managed-settings.json";

/// The environment variable naming another policy file (tests, or a
/// system that keeps it elsewhere).
pub const PATH_VARIABLE: &str = "MAIA_MANAGED_SETTINGS";

/// Why a policy file cannot be applied. Every message names the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("the managed policy {path} cannot be read: {reason}")]
    Unreadable { path: PathBuf, reason: String },
    #[error("the managed policy {path} is not valid JSON: {reason}")]
    Invalid { path: PathBuf, reason: String },
    #[error("the managed policy {path} is malformed: {}", problems.join("; "))]
    Malformed {
        path: PathBuf,
        problems: Vec<String>,
    },
}

/// Telemetry the policy turns on (`telemetry`): `true`, or
/// `{"enabled": true, "otel": {"OTEL_…": "…"}, "logPrompts": false}`. The
/// exporter is configured elsewhere; this is what it must honour.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManagedTelemetry {
    /// Telemetry must be on, whatever the user's environment says.
    pub enabled: bool,
    /// `OTEL_*` variables set by the policy (endpoint, protocol, headers,
    /// resource attributes); they win over the process environment.
    pub otel: BTreeMap<String, String>,
    /// Whether prompt and output contents may be exported (`logPrompts`;
    /// `None`: the user's choice).
    pub log_prompts: Option<bool>,
}

/// The managed policy in force for the process.
#[derive(Debug, Clone, Default)]
pub struct ManagedPolicy {
    /// The file it was read from.
    pub path: PathBuf,
    /// `permissions.deny` and `permissions.ask` (no allow: a policy only
    /// tightens).
    pub rules: RuleSet,
    /// The `bypass` mode is refused everywhere.
    pub disable_bypass: bool,
    /// What the sandbox may not go below.
    pub sandbox: SandboxFloor,
    /// `availableModels`: the only models a session may use (`None`: any).
    pub available_models: Option<Vec<String>>,
    /// Hooks that always run (even when the project's are not trusted).
    pub hooks: Vec<HookCommand>,
    /// `allowManagedHooksOnly`: the user's and the project's hooks do not run.
    pub managed_hooks_only: bool,
    /// `telemetry`, when the policy says anything of it.
    pub telemetry: Option<ManagedTelemetry>,
    /// Keys the policy holds that MAIA does not read (told by `maia doctor`).
    pub ignored: Vec<String>,
}

impl ManagedPolicy {
    /// Reads the policy at `path`: `Ok(None)` when there is no such file.
    pub fn read(path: &Path) -> Result<Option<ManagedPolicy>, PolicyError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(path, &text).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(PolicyError::Unreadable {
                path: path.to_path_buf(),
                reason: e.to_string(),
            }),
        }
    }

    /// Parses the text of the policy file at `path`.
    pub fn parse(path: &Path, text: &str) -> Result<ManagedPolicy, PolicyError> {
        let value: Value = serde_json::from_str(text).map_err(|e| PolicyError::Invalid {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let Value::Object(map) = value else {
            return Err(PolicyError::Malformed {
                path: path.to_path_buf(),
                problems: vec!["it must hold one JSON object".to_owned()],
            });
        };
        let mut problems = Vec::new();
        let mut policy = ManagedPolicy {
            path: path.to_path_buf(),
            ..Default::default()
        };
        for (key, value) in &map {
            match key.as_str() {
                "permissions" => policy.permissions(value, &mut problems),
                "disableBypassMode" => match value {
                    Value::Bool(b) => policy.disable_bypass |= b,
                    _ => problems.push("disableBypassMode must be true or false".to_owned()),
                },
                "sandbox" => policy.sandbox = SandboxFloor::parse(value, &mut problems),
                "availableModels" => match string_list(value) {
                    Some(models) => policy.available_models = Some(models),
                    None => problems.push("availableModels must be a list of model names".into()),
                },
                "hooks" => {
                    let mut warnings = Vec::new();
                    policy.hooks =
                        crate::hooks::parse_value(value, Source::Managed, path, &mut warnings);
                    problems.extend(warnings);
                }
                "allowManagedHooksOnly" => match value {
                    Value::Bool(b) => policy.managed_hooks_only = *b,
                    _ => problems.push("allowManagedHooksOnly must be true or false".to_owned()),
                },
                "telemetry" => policy.telemetry = telemetry(value, &mut problems),
                "$schema" => {}
                other => policy.ignored.push(other.to_owned()),
            }
        }
        // The same list whatever order the JSON object's keys come in.
        policy.ignored.sort();
        if problems.is_empty() {
            Ok(policy)
        } else {
            Err(PolicyError::Malformed {
                path: path.to_path_buf(),
                problems,
            })
        }
    }

    fn permissions(&mut self, value: &Value, problems: &mut Vec<String>) {
        let Value::Object(permissions) = value else {
            problems.push("permissions must be an object".to_owned());
            return;
        };
        for (key, value) in permissions {
            let family = match key.as_str() {
                "deny" => Family::Deny,
                "ask" => Family::Ask,
                "disableBypassPermissionsMode" => {
                    match value.as_str() {
                        Some("disable") => self.disable_bypass = true,
                        _ => problems.push(
                            "permissions.disableBypassPermissionsMode must be \"disable\"".into(),
                        ),
                    }
                    continue;
                }
                other => {
                    // `allow` (and any other key) would loosen or means
                    // nothing here.
                    self.ignored.push(format!("permissions.{other}"));
                    continue;
                }
            };
            let Some(items) = value.as_array() else {
                problems.push(format!("permissions.{key} must be a list of rules"));
                continue;
            };
            for item in items {
                match item.as_str().map(Rule::parse) {
                    Some(Ok(rule)) => self.rules.add(family, rule),
                    _ => problems.push(format!(
                        "permissions.{key}: {item} is not a rule (`Tool` or `Tool(pattern)`)"
                    )),
                }
            }
        }
    }

    /// The telemetry the policy asks for (`None`: it says nothing of it).
    pub fn telemetry(&self) -> Option<&ManagedTelemetry> {
        self.telemetry.as_ref()
    }

    /// Whether the policy lets a session use `model`.
    pub fn allows_model(&self, model: &str) -> bool {
        self.available_models
            .as_ref()
            .is_none_or(|models| models.iter().any(|m| m == model))
    }

    /// `listed` without the models the policy does not allow.
    pub fn filter_models(&self, listed: Vec<String>) -> Vec<String> {
        listed
            .into_iter()
            .filter(|m| self.allows_model(m))
            .collect()
    }
}

/// A list of strings, or `None` when `value` is anything else.
fn string_list(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect()
}

fn telemetry(value: &Value, problems: &mut Vec<String>) -> Option<ManagedTelemetry> {
    let map: Map<String, Value> = match value {
        Value::Bool(enabled) => {
            return Some(ManagedTelemetry {
                enabled: *enabled,
                ..Default::default()
            });
        }
        Value::Object(map) => map.clone(),
        _ => {
            problems.push("telemetry must be true, false or an object".to_owned());
            return None;
        }
    };
    let mut out = ManagedTelemetry::default();
    match map.get("enabled") {
        None => out.enabled = true,
        Some(Value::Bool(b)) => out.enabled = *b,
        Some(_) => problems.push("telemetry.enabled must be true or false".to_owned()),
    }
    match map.get("logPrompts") {
        None => {}
        Some(Value::Bool(b)) => out.log_prompts = Some(*b),
        Some(_) => problems.push("telemetry.logPrompts must be true or false".to_owned()),
    }
    match map.get("otel") {
        None => {}
        Some(Value::Object(vars)) => {
            for (name, value) in vars {
                match value.as_str() {
                    Some(v) if name.starts_with("OTEL_") => {
                        out.otel.insert(name.clone(), v.to_owned());
                    }
                    _ => problems.push(format!(
                        "telemetry.otel.{name}: only OTEL_* variables with string values"
                    )),
                }
            }
        }
        Some(_) => problems.push("telemetry.otel must be an object of OTEL_* variables".into()),
    }
    Some(out)
}

#[cfg(test)]
mod tests;
