//! The `sandbox` section: the sandbox of a session's commands, read from
//! the home folder's settings file only (a project cannot loosen its own
//! sandbox), with its path lists and the session's private temp folder.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{FileContent, SettingsFiles};

/// The sandbox of a session's commands, from `~/.maia/settings.json` only
/// (a project cannot loosen its own sandbox): `"sandbox": "workspace-write"
/// | "read-only" | "off"` or `{"mode": …, "network": bool, "writable":
/// [paths], "denyRead": [paths], "allowRead": [paths], "allowedDomains":
/// [names]}`, also each as
/// `"sandbox.KEY"`. Returns
/// the policy (roots and temp folder filled in) and warnings.
pub fn sandbox_policy(
    files: &SettingsFiles,
    cwd: &Path,
    session_id: &str,
) -> (maia_tools::sandbox::SandboxPolicy, Vec<String>) {
    use maia_tools::sandbox::{SandboxMode, SandboxPolicy};
    let mut warnings = Vec::new();
    let mut policy = SandboxPolicy {
        roots: vec![cwd.to_path_buf()],
        temp_dir: Some(temp_root().join(format!("maia-{session_id}"))),
        ..Default::default()
    };
    let Some(home) = files.home() else {
        return (policy, warnings);
    };
    policy.home = Some(home.to_path_buf());
    let Some(user) = files.user() else {
        return (policy, warnings);
    };
    let file = &user.path;
    let FileContent::Json(Value::Object(map)) = &user.content else {
        return (policy, warnings);
    };
    let object = match map.get("sandbox") {
        Some(Value::Object(o)) => Some(o),
        _ => None,
    };
    // `"sandbox.KEY"` wins over `"sandbox": {"KEY": …}`.
    let key = |name: &str| {
        map.get(&format!("sandbox.{name}"))
            .or_else(|| object.and_then(|o| o.get(name)))
    };
    let mode = match map.get("sandbox") {
        Some(Value::Object(o)) => o.get("mode"),
        other => other,
    };
    match mode {
        None => {}
        Some(Value::String(s)) => match SandboxMode::parse(s) {
            Some(m) => policy.mode = m,
            None => warnings.push(format!(
                "sandbox in {} must be \"workspace-write\", \"read-only\" or \"off\"; using workspace-write",
                file.display()
            )),
        },
        Some(_) => warnings.push(format!("sandbox in {} must be a string; ignored", file.display())),
    }
    match key("network") {
        None => {}
        Some(Value::Bool(b)) => policy.network = *b,
        Some(_) => warnings.push("sandbox.network must be true or false; ignored".to_owned()),
    }
    match key("allowedDomains") {
        None => {}
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
            policy.allowed_domains = items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
        }
        Some(_) => warnings
            .push("sandbox.allowedDomains must be a list of domain names; ignored".to_owned()),
    }
    for (name, into) in [
        ("writable", &mut policy.writable),
        ("denyRead", &mut policy.deny_read),
        ("allowRead", &mut policy.allow_read),
    ] {
        into.extend(sandbox_paths(home, name, key(name), &mut warnings));
    }
    (policy, warnings)
}

/// The paths of the `sandbox.NAME` list (`~` is the home folder).
fn sandbox_paths(
    home: &Path,
    name: &str,
    value: Option<&Value>,
    warnings: &mut Vec<String>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    match value {
        None => {}
        Some(Value::Array(items)) => {
            for item in items {
                match item.as_str() {
                    Some(p) => out.push(maia_tools::path::resolve(
                        home,
                        &p.replacen(
                            '~',
                            &home.to_string_lossy(),
                            usize::from(p.starts_with('~')),
                        ),
                    )),
                    None => warnings.push(format!("sandbox.{name} entries must be paths; ignored")),
                }
            }
        }
        Some(_) => warnings.push(format!("sandbox.{name} must be a list of paths; ignored")),
    }
    out
}

/// The system's folder for temporary files (sessions' private temp
/// folders go below it).
#[allow(
    clippy::disallowed_methods,
    reason = "the OS temp folder is not a user setting; TMPDIR is the system's to choose"
)]
fn temp_root() -> PathBuf {
    std::env::temp_dir()
}
