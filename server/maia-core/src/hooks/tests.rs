//! Tests of the hooks' configuration, matcher and trust.

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::settings::SettingsFiles;

fn files(home: &Path, cwd: &Path, user: Option<Value>, project: Option<Value>) -> SettingsFiles {
    let user_file = home.join(".maia").join("settings.json");
    let project_file = cwd.join(".maia").join("settings.json");
    SettingsFiles::read_with(Some(home), cwd, &mut |path| {
        let value = if path == user_file {
            user.clone()
        } else if path == project_file {
            project.clone()
        } else {
            None
        };
        value
            .map(|v| v.to_string())
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    })
}

fn temp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn matchers_follow_claude_code() {
    let hook = |m: Option<&str>| HookCommand {
        event: HookEvent::PreToolUse,
        matcher: m.map(str::to_owned),
        command: "x".into(),
        timeout: DEFAULT_TIMEOUT,
        source: Source::User,
    };
    assert!(hook(None).matches(Some("Bash")));
    assert!(hook(Some("")).matches(Some("Bash")));
    assert!(hook(Some("*")).matches(Some("Bash")));
    assert!(hook(Some("Bash")).matches(Some("Bash")));
    assert!(!hook(Some("Bash")).matches(Some("BashOutput")));
    assert!(hook(Some("Edit|Write")).matches(Some("Write")));
    assert!(hook(Some("mcp__.*")).matches(Some("mcp__gh__issue")));
    assert!(!hook(Some("Edit|Write")).matches(Some("Read")));
    assert!(
        hook(Some("Read")).matches(None),
        "events without a subject run all"
    );
}

#[test]
fn both_files_hooks_load_and_the_project_waits_for_trust() {
    let (home, cwd) = (temp(), temp());
    let (home, cwd) = (home.path(), cwd.path());
    let entry = |cmd: &str| {
        json!({"hooks": {"PreToolUse": [{"matcher": "Bash",
        "hooks": [{"type": "command", "command": cmd, "timeout": 5}]}]}})
    };
    let f = files(home, cwd, Some(entry("user.sh")), Some(entry("project.sh")));
    let loaded = load(&f, (Some(home), cwd), &[], false);
    assert_eq!(loaded.commands.len(), 1);
    assert_eq!(loaded.commands[0].command, "user.sh");
    assert_eq!(loaded.commands[0].timeout, Duration::from_secs(5));
    assert_eq!(loaded.untrusted, 1);
    assert!(loaded.notices().iter().any(|n| n.contains("/hooks trust")));
    let print = loaded.project_fingerprint.clone().unwrap();
    trust(home, cwd, &print).unwrap();
    let loaded = load(&f, (Some(home), cwd), &[], false);
    let names: Vec<&str> = loaded.commands.iter().map(|c| c.command.as_str()).collect();
    assert_eq!(names, vec!["user.sh", "project.sh"]);
    // A changed project hook needs a new trust.
    let f = files(home, cwd, None, Some(entry("other.sh")));
    let loaded = load(&f, (Some(home), cwd), &[], false);
    assert!(loaded.commands.is_empty());
    assert_eq!(loaded.untrusted, 1);
}

#[test]
fn bad_entries_are_reported_and_skipped() {
    let (home, cwd) = (temp(), temp());
    let (home, cwd) = (home.path(), cwd.path());
    let user = json!({"hooks": {
        "Nope": [],
        "Stop": [{"hooks": [{"type": "prompt", "prompt": "x"}, {"command": "ok.sh", "timeout": -1}]}],
        "PostToolUse": "x"
    }});
    let loaded = load(
        &files(home, cwd, Some(user), None),
        (Some(home), cwd),
        &[],
        false,
    );
    assert_eq!(loaded.commands.len(), 1);
    assert_eq!(loaded.commands[0].timeout, DEFAULT_TIMEOUT);
    assert_eq!(loaded.warnings.len(), 4, "{:?}", loaded.warnings);
}
