//! Parsing the managed policy: every key, and failing closed on what does
//! not parse.

use std::path::Path;

use super::*;
use crate::mode::Mode;

const FILE: &str = "/etc/maia/managed-settings.json";

fn parse(text: &str) -> Result<ManagedPolicy, PolicyError> {
    ManagedPolicy::parse(Path::new(FILE), text)
}

#[test]
fn every_key_is_read() {
    let policy = parse(
        r#"{"permissions":{"deny":["Bash(curl *)"],"ask":["Edit(**)"],"disableBypassPermissionsMode":"disable","allow":["Bash"]},
            "sandbox":{"mode":"workspace-write","network":false,"allowedDomains":["crates.io"],"allowUnsandboxedCommands":false},
            "availableModels":["a","b"],
            "hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"/opt/check"}]}]},
            "allowManagedHooksOnly":true,
            "telemetry":{"otel":{"OTEL_EXPORTER_OTLP_ENDPOINT":"http://c:4318"},"logPrompts":false},
            "cleanupPeriodDays":3}"#,
    )
    .unwrap();
    assert_eq!(policy.rules.deny.len(), 1);
    assert_eq!(policy.rules.ask.len(), 1);
    assert!(policy.rules.allow.is_empty(), "a policy never allows");
    assert!(policy.disable_bypass);
    assert_eq!(
        policy.sandbox.mode,
        Some(maia_tools::sandbox::SandboxMode::WorkspaceWrite)
    );
    assert!(policy.sandbox.no_network && policy.sandbox.no_unsandboxed);
    assert!(policy.allows_model("a") && !policy.allows_model("c"));
    assert_eq!(policy.hooks.len(), 1);
    assert_eq!(policy.hooks[0].source, crate::hooks::Source::Managed);
    assert!(policy.managed_hooks_only);
    let telemetry = policy.telemetry().unwrap();
    assert!(telemetry.enabled);
    assert_eq!(telemetry.log_prompts, Some(false));
    assert_eq!(
        telemetry.otel.get("OTEL_EXPORTER_OTLP_ENDPOINT").unwrap(),
        "http://c:4318"
    );
    assert_eq!(policy.ignored, ["cleanupPeriodDays", "permissions.allow"]);
    assert!(policy.check_mode(Mode::Bypass).is_err());
    assert!(!policy.modes().contains(&Mode::Bypass));
    let refusal = policy.check_model("c").unwrap_err().to_string();
    assert!(refusal.contains(FILE), "{refusal}");
    assert!(!policy.lines().is_empty());
}

#[test]
fn the_short_bypass_key_and_no_policy_keys() {
    let policy = parse(r#"{"disableBypassMode":true}"#).unwrap();
    assert!(policy.check_mode(Mode::Bypass).is_err());
    let policy = parse("{}").unwrap();
    assert!(policy.check_mode(Mode::Bypass).is_ok());
    assert!(policy.allows_model("anything"));
    assert!(policy.telemetry().is_none());
}

#[test]
fn what_does_not_parse_fails_closed_naming_the_file() {
    for text in [
        "{oops",
        "[]",
        r#"{"permissions":{"deny":"Bash"}}"#,
        r#"{"permissions":{"deny":["Bash("]}}"#,
        r#"{"permissions":{"disableBypassPermissionsMode":true}}"#,
        r#"{"sandbox":{"mode":"off"}}"#,
        r#"{"sandbox":{"network":"no"}}"#,
        r#"{"availableModels":"a"}"#,
        r#"{"hooks":{"NoSuchEvent":[]}}"#,
        r#"{"hooks":{"Stop":[{"hooks":[{"type":"command"}]}]}}"#,
        r#"{"telemetry":{"otel":{"PATH":"/x"}}}"#,
        r#"{"disableBypassMode":"yes"}"#,
    ] {
        let error = parse(text).expect_err(text).to_string();
        assert!(error.contains(FILE), "{text}: {error}");
    }
}

#[test]
fn a_missing_file_is_no_policy_and_an_unreadable_one_an_error() {
    let dir = tempfile::tempdir().unwrap();
    assert!(
        ManagedPolicy::read(&dir.path().join("none.json"))
            .unwrap()
            .is_none()
    );
    // A folder where the file should be cannot be read as one.
    let error = ManagedPolicy::read(dir.path()).unwrap_err();
    assert!(matches!(error, PolicyError::Unreadable { .. }), "{error}");
}

#[test]
fn the_floor_raises_the_users_sandbox() {
    use maia_tools::sandbox::{SandboxMode, SandboxPolicy};
    let policy = parse(
        r#"{"sandbox":{"mode":"workspace-write","network":false,"allowedDomains":["*.npmjs.org"]}}"#,
    )
    .unwrap();
    let mut user = SandboxPolicy {
        mode: SandboxMode::Off,
        network: true,
        allowed_domains: vec!["registry.npmjs.org".into(), "evil.test".into()],
        ..Default::default()
    };
    let notes = policy.sandbox.apply(&mut user, Path::new(FILE));
    assert_eq!(user.mode, SandboxMode::WorkspaceWrite);
    assert!(!user.network);
    assert_eq!(user.allowed_domains, ["registry.npmjs.org"]);
    assert_eq!(notes.len(), 3, "{notes:?}");
    assert!(notes.iter().all(|n| n.contains(FILE)));
    // A stricter user sandbox is kept as it is.
    let mut strict = SandboxPolicy {
        mode: SandboxMode::ReadOnly,
        ..Default::default()
    };
    assert!(
        policy
            .sandbox
            .apply(&mut strict, Path::new(FILE))
            .is_empty()
    );
    assert_eq!(strict.mode, SandboxMode::ReadOnly);
}
