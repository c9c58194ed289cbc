//! Plan mode and read-only turns: which tools the model is offered, and
//! the `ExitPlanMode {plan}` question that ends planning.
//!
//! In the `plan` mode the model is offered only the tools that declare they
//! change nothing outside the conversation
//! ([`ToolEffect::read_only_turns_offer`]) and `ExitPlanMode`; the gate
//! refuses anything that changes files or runs programs as in `read-only`.
//! A read-only turn (`/review`) gets the same tools without `ExitPlanMode`. `ExitPlanMode`
//! puts the whole plan (Markdown) to the user as a permission question with
//! three answers ([`choices`]): accepting switches the session's mode
//! (`accept-edits` or `default`) and the turn goes on with every tool;
//! "No, keep planning" (or a rejection, with the user's reason) keeps the
//! mode and tells the model why.

use maia_llm::ToolSpec;
use serde::Deserialize;
use serde_json::json;

use crate::effect::ToolEffect;
use crate::event::{ChoiceKind, PermissionChoice, PermissionReply};
use crate::mode::Mode;

/// The tool that ends planning.
pub const EXIT_PLAN_MODE: &str = "ExitPlanMode";

/// The id of the plan shown to clients that take Markdown plans.
pub const PLAN_ID: &str = "maia-plan";

/// Which tools a turn offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolSet {
    /// Every tool of the session.
    #[default]
    All,
    /// The tools that change nothing outside the conversation (`/review`).
    ReadOnly,
    /// Those and `ExitPlanMode` (the `plan` mode).
    Planning,
}

impl ToolSet {
    /// The tool set of a turn in `mode`; `read_only` for a read-only turn.
    pub fn of(mode: Mode, read_only: bool) -> ToolSet {
        match (mode, read_only) {
            (_, true) => ToolSet::ReadOnly,
            (Mode::Plan, false) => ToolSet::Planning,
            _ => ToolSet::All,
        }
    }

    /// Whether a tool that declares `effect` is offered. (A subagent is
    /// offered in a read-only turn: its child is read-only too.)
    pub fn offers(self, effect: ToolEffect) -> bool {
        match self {
            ToolSet::All => true,
            ToolSet::ReadOnly | ToolSet::Planning => effect.read_only_turns_offer(),
        }
    }

    /// Whether `ExitPlanMode` is offered (the `plan` mode only).
    pub fn ends_planning(self) -> bool {
        self == ToolSet::Planning
    }
}

/// The `ExitPlanMode` tool as offered to the model.
pub fn definition() -> ToolSpec {
    ToolSpec {
        name: EXIT_PLAN_MODE.to_owned(),
        description: "You are in plan mode: nothing may be changed or run yet. When you have \
researched enough and know what to do, call this tool with your plan (Markdown: the steps, the \
files to change, how to check the result). The user reads the whole plan and either approves it \
(the mode switches and you carry the plan out in this same turn, with every tool) or tells you to \
keep planning, maybe saying why. Do not call it before you have a concrete plan."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "plan": {"type": "string", "description": "The plan, in Markdown"}
            },
            "required": ["plan"]
        }),
    }
}

#[derive(Deserialize)]
struct Input {
    plan: String,
}

/// The plan of an `ExitPlanMode` call.
pub fn parse(arguments: &str) -> Result<String, String> {
    let input: Input = serde_json::from_str(arguments).map_err(|e| {
        format!("invalid arguments for ExitPlanMode: {e}; expected {{\"plan\": \"…\"}}")
    })?;
    if input.plan.trim().is_empty() {
        return Err("ExitPlanMode needs the plan (Markdown) in `plan`".to_owned());
    }
    Ok(input.plan)
}

/// What the system prompt says in the `plan` mode.
pub const PROMPT_SECTION: &str = "# Plan mode\n\nThe session is in plan mode: you may only read \
and search (Read, Glob, Grep, WebFetch), keep a task list and ask the user. Investigate, then call \
ExitPlanMode with a concrete plan in Markdown. Nothing is changed until the user approves it.";

/// What the system prompt says in a read-only turn.
pub const READ_ONLY_SECTION: &str = "# Read-only\n\nIn this turn you may only read and search \
(Read, Glob, Grep, WebFetch); do not try to change files or run commands.";

/// The answers of the plan question, in the order offered (as
/// claude-agent-acp offers them: the option ids are the modes).
pub fn choices() -> Vec<PermissionChoice> {
    vec![
        PermissionChoice {
            id: Mode::AcceptEdits.id().to_owned(),
            label: "Yes, and accept edits".to_owned(),
            kind: ChoiceKind::AllowAlways,
        },
        PermissionChoice {
            id: Mode::Default.id().to_owned(),
            label: "Yes, ask before edits".to_owned(),
            kind: ChoiceKind::AllowOnce,
        },
        PermissionChoice {
            id: Mode::Plan.id().to_owned(),
            label: "No, keep planning".to_owned(),
            kind: ChoiceKind::RejectOnce,
        },
    ]
}

/// What the user's answer to the plan question means: the mode to switch
/// to (`None`: keep planning) and what the model is told. `None` as a
/// whole when the question was cancelled.
pub fn answer(reply: PermissionReply) -> Option<(Option<Mode>, String)> {
    let (option, reason) = match reply {
        PermissionReply::Selected { option, reason } => (Some(option), reason),
        PermissionReply::Rejected { reason } => (None, reason),
        PermissionReply::Cancelled => return None,
    };
    let mode = option
        .as_deref()
        .and_then(Mode::from_id)
        .filter(|m| matches!(m, Mode::AcceptEdits | Mode::Default));
    Some(match mode {
        Some(mode) => (
            Some(mode),
            format!(
                "The user approved the plan. The session is now in the `{}` mode: carry the plan out now, step by step.",
                mode.id()
            ),
        ),
        None => {
            let why = reason
                .filter(|r| !r.trim().is_empty())
                .map(|r| format!("The user rejected this: {}. ", r.trim()))
                .unwrap_or_default();
            (
                None,
                format!(
                    "{why}The user wants to keep planning: the session stays in plan mode. Revise the plan (ask if something is unclear), then call ExitPlanMode again."
                ),
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_mode_offers_what_changes_nothing_and_exit_plan_mode() {
        use ToolEffect::*;
        let planning = ToolSet::of(Mode::Plan, false);
        for effect in [ReadOnly, Conversation, Subagent] {
            assert!(planning.offers(effect), "{effect:?}");
        }
        for effect in [Files, Process, Session] {
            assert!(!planning.offers(effect), "{effect:?}");
        }
        assert!(planning.ends_planning());
        let review = ToolSet::of(Mode::Bypass, true);
        assert!(review.offers(ReadOnly) && !review.offers(Process));
        assert!(!review.ends_planning());
        let all = ToolSet::of(Mode::Default, false);
        assert!(all.offers(Process) && !all.ends_planning());
    }

    #[test]
    fn answers_switch_the_mode_or_keep_planning() {
        let selected = |option: &str, reason: Option<&str>| PermissionReply::Selected {
            option: option.to_owned(),
            reason: reason.map(str::to_owned),
        };
        assert_eq!(
            answer(selected("accept-edits", None)).unwrap().0,
            Some(Mode::AcceptEdits)
        );
        assert_eq!(
            answer(selected("default", None)).unwrap().0,
            Some(Mode::Default)
        );
        let (mode, told) = answer(selected("plan", Some("use sqlite"))).unwrap();
        assert_eq!(mode, None);
        assert!(told.starts_with("The user rejected this: use sqlite."));
        assert_eq!(answer(selected("bypass", None)).unwrap().0, None);
        assert_eq!(
            answer(PermissionReply::Rejected { reason: None })
                .unwrap()
                .0,
            None
        );
        assert!(answer(PermissionReply::Cancelled).is_none());
        assert!(parse(r#"{"plan": " "}"#).is_err());
        assert_eq!(parse(r#"{"plan": "1. do"}"#).unwrap(), "1. do");
    }
}
