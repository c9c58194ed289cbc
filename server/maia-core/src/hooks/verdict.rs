//! What a hook's run decides, read as Claude Code reads it: exit 0 goes
//! on (stdout, when it is a JSON object, may decide; otherwise it is
//! context for `UserPromptSubmit` and `SessionStart` and only shown for the
//! others), exit 2 blocks with stderr (to the model, or to the user for the
//! events where the model is not there to read it), any other ending is
//! reported and ignored. The verdicts of an event's hooks are combined:
//! any block blocks, a deny beats an allow, contexts add up.

use serde_json::Value;

use super::HookEvent;
use super::run::{Ended, RunResult};

/// What an event's hooks decided, together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    /// Blocked (exit 2, `decision: "block"`, `permissionDecision: "deny"`):
    /// the reason, for the model (or the user, see [`HookEvent`]).
    pub block: Option<String>,
    /// `permissionDecision: "allow"` (or the older `decision: "approve"`).
    pub allow: bool,
    /// `permissionDecision: "ask"`: the call is asked whatever the mode.
    pub ask: bool,
    /// Context for the model (`additionalContext`, or plain stdout where
    /// Claude Code adds it).
    pub context: Vec<String>,
    /// `updatedInput` of a `PreToolUse` hook: the tool's new input.
    pub updated_input: Option<Value>,
    /// `continue: false`: the turn stops after this step (`stopReason`).
    pub stop: Option<String>,
    /// Messages for the user (`systemMessage`, stderr of a failed hook).
    pub to_user: Vec<String>,
}

impl Verdict {
    /// Adds `other` (another hook of the same event) to this verdict.
    pub fn merge(&mut self, other: Verdict) {
        self.block = match (self.block.take(), other.block) {
            (Some(a), Some(b)) => Some(format!("{a}\n{b}")),
            (a, b) => a.or(b),
        };
        self.allow |= other.allow;
        self.ask |= other.ask;
        self.context.extend(other.context);
        if other.updated_input.is_some() {
            self.updated_input = other.updated_input;
        }
        if self.stop.is_none() {
            self.stop = other.stop;
        }
        self.to_user.extend(other.to_user);
    }

    /// Whether the hook allows the call (and nothing blocked or asked).
    pub fn allows(&self) -> bool {
        self.allow && !self.ask && self.block.is_none()
    }
}

/// How a run is shown: `ok`, `blocked`, `error`, `timeout`, `cancelled`.
pub fn outcome_name(verdict: &Verdict, ended: &Ended) -> &'static str {
    match ended {
        Ended::TimedOut => "timeout",
        Ended::Cancelled => "cancelled",
        Ended::Exited(0) | Ended::Exited(2) if verdict.block.is_some() => "blocked",
        Ended::Exited(0) => "ok",
        _ => "error",
    }
}

/// What one run of a hook of `event` decides.
pub fn read(event: HookEvent, run: &RunResult, command: &str) -> Verdict {
    let mut verdict = Verdict::default();
    match &run.ended {
        Ended::Exited(0) => {}
        Ended::Exited(2) => {
            let stderr = run.stderr.trim();
            let reason = if stderr.is_empty() {
                format!("blocked by the hook `{command}` (exit 2)")
            } else {
                stderr.to_owned()
            };
            verdict.block = Some(reason);
            return verdict;
        }
        other => {
            let how = match other {
                Ended::Exited(code) => format!("exited with {code}"),
                Ended::Killed(signal) => format!("was killed by {signal}"),
                Ended::TimedOut => "timed out and was killed".to_owned(),
                Ended::Cancelled => return verdict,
                Ended::Failed(why) => why.clone(),
            };
            let stderr = run.stderr.trim();
            let mut text = format!("{} hook `{command}` {how}; ignored", event.name());
            if !stderr.is_empty() {
                text.push_str(&format!(": {stderr}"));
            }
            verdict.to_user.push(text);
            return verdict;
        }
    }
    let stdout = run.stdout.trim();
    let json = serde_json::from_str::<Value>(stdout)
        .ok()
        .filter(Value::is_object);
    let Some(json) = json else {
        if !stdout.is_empty()
            && matches!(event, HookEvent::UserPromptSubmit | HookEvent::SessionStart)
        {
            verdict.context.push(stdout.to_owned());
        }
        return verdict;
    };
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    if json.get("continue").and_then(Value::as_bool) == Some(false) {
        verdict.stop = Some(
            text(json.get("stopReason"))
                .unwrap_or_else(|| format!("stopped by the hook `{command}`")),
        );
    }
    if let Some(message) = text(json.get("systemMessage")) {
        verdict.to_user.push(message);
    }
    let reason = text(json.get("reason"));
    match json.get("decision").and_then(Value::as_str) {
        Some("block") => {
            verdict.block =
                Some(reason.unwrap_or_else(|| format!("blocked by the hook `{command}`")));
        }
        Some("approve") if event == HookEvent::PreToolUse => verdict.allow = true,
        _ => {}
    }
    let specific = json.get("hookSpecificOutput").filter(|s| {
        s.get("hookEventName")
            .and_then(Value::as_str)
            .is_none_or(|name| name == event.name())
    });
    if let Some(specific) = specific {
        if let Some(context) = text(specific.get("additionalContext")) {
            verdict.context.push(context);
        }
        if event == HookEvent::PreToolUse {
            let why = text(specific.get("permissionDecisionReason"));
            match specific.get("permissionDecision").and_then(Value::as_str) {
                Some("deny") => {
                    verdict.block =
                        Some(why.unwrap_or_else(|| format!("denied by the hook `{command}`")));
                    verdict.allow = false;
                }
                Some("allow") => verdict.allow = true,
                Some("ask") => verdict.ask = true,
                _ => {}
            }
            if let Some(input) = specific.get("updatedInput").filter(|v| v.is_object()) {
                verdict.updated_input = Some(input.clone());
            }
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn ran(code: i32, stdout: &str, stderr: &str) -> RunResult {
        RunResult {
            ended: Ended::Exited(code),
            stdout: stdout.to_owned(),
            stderr: stderr.to_owned(),
            elapsed: Duration::ZERO,
        }
    }

    #[test]
    fn exit_two_blocks_with_stderr() {
        let v = read(
            HookEvent::PreToolUse,
            &ran(2, "{\"decision\":\"approve\"}", "no rm\n"),
            "c",
        );
        assert_eq!(v.block.as_deref(), Some("no rm"));
        assert!(!v.allow, "stdout is ignored on exit 2");
    }

    #[test]
    fn other_codes_are_reported_and_ignored() {
        let v = read(HookEvent::PreToolUse, &ran(1, "", "boom"), "c");
        assert_eq!(v.block, None);
        assert!(v.to_user[0].contains("exited with 1") && v.to_user[0].contains("boom"));
    }

    #[test]
    fn plain_stdout_is_context_only_where_claude_code_adds_it() {
        let v = read(
            HookEvent::UserPromptSubmit,
            &ran(0, "today is Friday\n", ""),
            "c",
        );
        assert_eq!(v.context, vec!["today is Friday".to_owned()]);
        let v = read(HookEvent::PostToolUse, &ran(0, "formatted", ""), "c");
        assert!(v.context.is_empty());
        let v = read(HookEvent::PreToolUse, &ran(0, "{not json", ""), "c");
        assert_eq!(v, Verdict::default());
    }

    #[test]
    fn pre_tool_use_json_decides() {
        let out = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
            "permissionDecision": "allow", "updatedInput": {"command": "ls -a"}}});
        let v = read(HookEvent::PreToolUse, &ran(0, &out.to_string(), ""), "c");
        assert!(v.allows());
        assert_eq!(v.updated_input, Some(json!({"command": "ls -a"})));
        let out = json!({"hookSpecificOutput": {"permissionDecision": "deny",
            "permissionDecisionReason": "secrets"}});
        let v = read(HookEvent::PreToolUse, &ran(0, &out.to_string(), ""), "c");
        assert_eq!(v.block.as_deref(), Some("secrets"));
        let out = json!({"continue": false, "stopReason": "enough", "systemMessage": "hi"});
        let v = read(HookEvent::PostToolUse, &ran(0, &out.to_string(), ""), "c");
        assert_eq!(v.stop.as_deref(), Some("enough"));
        assert_eq!(v.to_user, vec!["hi".to_owned()]);
    }

    #[test]
    fn a_deny_beats_an_allow_when_merged() {
        let mut v = Verdict {
            allow: true,
            ..Verdict::default()
        };
        v.merge(Verdict {
            block: Some("no".into()),
            ..Verdict::default()
        });
        assert!(!v.allows());
        assert_eq!(v.block.as_deref(), Some("no"));
    }
}
