//! One decision per tool call: [`authorise`] turns what the tool says about
//! the call ([`GateFacts`]), the session's mode and the rules of the [`Broker`]
//! into [`Requirement::Allow`], [`Requirement::Ask`] (the question with its
//! options already built and labelled) or [`Requirement::Refuse`].
//!
//! It is a pure function: the router asks the question and records the
//! answer ([`Question::answer`], [`record`]) — the only steps around it
//! that wait or write. The attack table (`attacks.rs`) calls this same
//! function.
//!
//! Order: the rules ([`Broker::decide_call`]), then the mode and protected
//! paths ([`gate::apply_mode`]), then the must-ask rules (a custom tool the
//! user has not confirmed as it is now; a command that failed in the
//! sandbox, which is offered a run without it), then a front door that
//! reviews the edits of a file itself turns a question about that edit into
//! an allow (a deny rule, the read-only mode and protected paths still
//! apply).

use std::path::{Path, PathBuf};

use maia_tools::{ToolInput, ToolKind};
use serde_json::Value;

use super::{Broker, Decision, Rule, choices, gate, input_value, suggest_rule};
use crate::event::{ChoiceKind, PermissionChoice, PermissionReply};
use crate::mode::Mode;

/// The id of the "run once without the sandbox" choice.
pub const UNSANDBOXED: &str = "allow_once_unsandboxed";

/// What a call does, as far as modes and protected paths care.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Effect {
    /// Nothing the modes single out.
    #[default]
    Other,
    /// Writes or edits this file (as the model wrote the path).
    EditsFile(String),
    /// Runs this shell command.
    RunsCommand(String),
}

/// A custom tool the user must confirm as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirm {
    pub name: String,
    pub fingerprint: String,
}

/// What the gate needs to know about one call. The tool fills it in;
/// nothing outside the tool matches its name.
#[derive(Debug, Clone, Default)]
pub struct GateFacts {
    /// The name rules are written against (`Bash`, `mcp__srv__tool`).
    pub rule_name: String,
    /// What rule patterns match.
    pub rule_input: Value,
    pub effect: Effect,
    /// Changes files or runs programs (refused by `read-only`).
    pub mutating: bool,
    /// No effect outside the conversation: allowed when no rule matches.
    pub side_effect_free: bool,
    /// The rule "always" answers save.
    pub suggestion: Option<Rule>,
    /// Set for a custom tool that is new or changed since confirmed.
    pub confirm: Option<Confirm>,
    /// The command failed in the sandbox last time: ask, offering a run
    /// without it.
    pub sandbox_retry: bool,
    /// The front door shows this edit to the user hunk by hunk, who
    /// accepts or rejects each.
    pub edit_reviewed: bool,
    /// What the user refuses, for the model ("run this command").
    pub action: &'static str,
}

/// The answer of [`authorise`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// Run it; `note` is shown with the call (a protected path let through
    /// by the bypass mode).
    Allow { note: Option<String> },
    /// Ask the user first.
    Ask(Question),
    /// Do not run it: what the model is told, what the editor shows, and
    /// whether it is refused in every mode whatever the rules (a
    /// catastrophic command) rather than by a rule or the mode.
    Refuse {
        to_model: String,
        shown: String,
        always: bool,
    },
}

/// A permission question, ready to be shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub options: Vec<PermissionChoice>,
    /// The rule an "always" answer saves or confirms.
    pub rule: Option<Rule>,
    /// `rule` is a project rule waiting for the user's confirmation.
    pub pending: bool,
    /// The custom tool an "always allow" confirms.
    pub confirm: Option<Confirm>,
    /// Shown with the call (a protected path).
    pub note: Option<String>,
    action: &'static str,
}

/// What the user answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Run it, once or always; `unsandboxed`: once outside the sandbox.
    Allow { kind: ChoiceKind, unsandboxed: bool },
    /// Do not run it; the text for the model.
    Reject { kind: ChoiceKind, to_model: String },
    /// No answer: the turn is cancelled.
    Cancelled,
}

/// The decision for one call; see the module documentation.
pub fn authorise(facts: &GateFacts, mode: Mode, broker: &Broker, cwd: &Path) -> Requirement {
    let rules = match broker.decide_call(facts, cwd) {
        Decision::Deny(rule) => Decision::Deny(format!("the rule {rule}")),
        other => other,
    };
    let verdict = gate::apply_mode(mode, rules, facts, cwd, (broker.roots(), broker.home()));
    let must_ask = facts.sandbox_retry || facts.confirm.is_some();
    match verdict.decision {
        Decision::Deny(reason) => {
            return Requirement::Refuse {
                to_model: format!("Permission denied by {reason}. Do not retry this call."),
                shown: format!("Denied by {reason}"),
                always: false,
            };
        }
        Decision::Refuse(why) => {
            return Requirement::Refuse {
                to_model: format!(
                    "Refused: {why}. MAIA never runs such a command, in any mode and whatever the rules. Do not retry it or a variant of it."
                ),
                shown: format!("Refused: {why}"),
                always: true,
            };
        }
        Decision::Allow if !must_ask => return Requirement::Allow { note: verdict.note },
        Decision::Ask if !must_ask && facts.edit_reviewed && !verdict.protected => {
            return Requirement::Allow { note: None };
        }
        Decision::Allow | Decision::Ask => {}
    }
    Requirement::Ask(question(facts, broker, cwd, verdict.note))
}

/// The question for a call, asked though [`authorise`] would allow it (a
/// hook's `ask`, docs/hooks.md).
pub fn question_for(facts: &GateFacts, broker: &Broker, cwd: &Path) -> Question {
    question(facts, broker, cwd, None)
}

/// The question for a call [`authorise`] does not settle.
fn question(facts: &GateFacts, broker: &Broker, cwd: &Path, note: Option<String>) -> Question {
    // A project rule not confirmed yet would allow this call: ask to
    // confirm it rather than suggest another.
    let pending = broker.pending_cover(&facts.rule_name, &facts.rule_input, cwd);
    let rule = pending.clone().or_else(|| facts.suggestion.clone());
    let mut options = choices(rule.as_ref());
    if let Some(rule) = &pending
        && let Some(o) = options
            .iter_mut()
            .find(|o| o.kind == ChoiceKind::AllowAlways)
    {
        o.label = format!("Always allow {rule} (confirms this rule of the project's settings)");
    }
    if let Some(tool) = &facts.confirm {
        match options
            .iter_mut()
            .find(|o| o.kind == ChoiceKind::AllowAlways)
        {
            Some(o) => o.label = format!("{} (confirms this new or changed custom tool)", o.label),
            None => options.insert(
                1,
                PermissionChoice {
                    id: "allow_always".to_owned(),
                    label: format!(
                        "Always allow {} (confirms this new or changed custom tool)",
                        tool.name
                    ),
                    kind: ChoiceKind::AllowAlways,
                },
            ),
        }
    }
    if facts.sandbox_retry {
        options.insert(
            1,
            PermissionChoice {
                id: UNSANDBOXED.to_owned(),
                label: "Allow once without the sandbox (it failed inside it)".to_owned(),
                kind: ChoiceKind::AllowOnce,
            },
        );
    }
    Question {
        options,
        rule,
        pending: pending.is_some(),
        confirm: facts.confirm.clone(),
        note,
        action: facts.action,
    }
}

impl Question {
    /// Reads the front door's reply.
    pub fn answer(&self, reply: PermissionReply) -> Answer {
        let (chosen, reason) = match reply {
            PermissionReply::Selected { option, reason } => (
                self.options
                    .iter()
                    .find(|o| o.id == option)
                    .map(|o| (o.kind, o.id == UNSANDBOXED)),
                reason,
            ),
            PermissionReply::Rejected { reason } => (Some((ChoiceKind::RejectOnce, false)), reason),
            PermissionReply::Cancelled => (None, None),
        };
        match chosen {
            None => Answer::Cancelled,
            Some((kind @ (ChoiceKind::AllowOnce | ChoiceKind::AllowAlways), unsandboxed)) => {
                Answer::Allow { kind, unsandboxed }
            }
            Some((kind, _)) => {
                let to_model = match reason.filter(|r| !r.trim().is_empty()) {
                    Some(reason) => format!(
                        "The user rejected this: {}. They refused to let you {}; do not retry it unchanged, take their reason into account and go on.",
                        reason.trim(),
                        self.action
                    ),
                    None => format!(
                        "The user refused to let you {}. Do not retry it unchanged; ask the user how to proceed if needed.",
                        self.action
                    ),
                };
                Answer::Reject { kind, to_model }
            }
        }
    }
}

/// What recording an answer changed, for the log or a warning.
#[derive(Debug)]
pub enum Recorded {
    Nothing,
    /// The rule was saved to this file.
    Saved(Rule, PathBuf),
    /// The rule applies to this session but could not be saved.
    NotSaved(Rule, super::PersistError),
}

/// Records an answer to `question`: confirms the custom tool (written to
/// `~/.maia/seen-rules.json`), confirms the pending project rule or saves
/// the "always" rule. Writes files: run it off the async workers.
pub fn record(
    question: &Question,
    kind: ChoiceKind,
    broker: &mut Broker,
    home: Option<&Path>,
    cwd: &Path,
) -> Recorded {
    if let (Some(tool), ChoiceKind::AllowAlways) = (&question.confirm, kind) {
        super::confirm_tool(home, cwd, &tool.name, &tool.fingerprint);
        tracing::info!(tool = %tool.name, "custom tool confirmed");
    }
    let Some(rule) = question.rule.clone() else {
        return Recorded::Nothing;
    };
    match broker.answer(kind, rule.clone(), question.pending, cwd) {
        Ok(Some(file)) => Recorded::Saved(rule, file),
        Ok(None) => Recorded::Nothing,
        Err(e) => Recorded::NotSaved(rule, e),
    }
}

/// What the gate needs to know about a built-in call.
pub(crate) fn builtin_facts(input: &ToolInput, cwd: &Path) -> GateFacts {
    let effect = match (input, input.edited_file()) {
        (_, Some(path)) => Effect::EditsFile(path.to_owned()),
        (ToolInput::Bash(i), None) => Effect::RunsCommand(i.command.clone()),
        _ => Effect::Other,
    };
    GateFacts {
        rule_name: input.name().to_owned(),
        rule_input: input_value(input),
        effect,
        mutating: input.is_mutating(),
        side_effect_free: false,
        suggestion: suggest_rule(input, cwd),
        confirm: None,
        sandbox_retry: false,
        edit_reviewed: false,
        action: match input.kind() {
            ToolKind::Execute => "run this command",
            ToolKind::Edit => "make this change",
            _ => "run this tool call",
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::permission::RuleSet;

    fn broker(allow: &[&str], deny: &[&str]) -> Broker {
        let p = |l: &[&str]| l.iter().map(|r| Rule::parse(r).unwrap()).collect();
        Broker::new(vec![RuleSet {
            allow: p(allow),
            ask: Vec::new(),
            deny: p(deny),
        }])
    }

    fn edit(path: &str) -> GateFacts {
        GateFacts {
            rule_name: "Edit".to_owned(),
            rule_input: json!({ "file_path": path }),
            effect: Effect::EditsFile(path.to_owned()),
            mutating: true,
            action: "make this change",
            ..GateFacts::default()
        }
    }

    fn tool(name: &str) -> GateFacts {
        GateFacts {
            rule_name: name.to_owned(),
            rule_input: json!({}),
            mutating: true,
            action: "run this tool",
            ..GateFacts::default()
        }
    }

    fn ids(requirement: &Requirement) -> Vec<String> {
        match requirement {
            Requirement::Ask(q) => q.options.iter().map(|o| o.id.clone()).collect(),
            other => panic!("not a question: {other:?}"),
        }
    }

    #[test]
    fn must_ask_rules_override_allow_rules_and_modes() {
        let cwd = Path::new("/p");
        let b = broker(&["hello"], &[]);
        assert_eq!(
            authorise(&tool("hello"), Mode::Default, &b, cwd),
            Requirement::Allow { note: None }
        );
        let mut unconfirmed = tool("hello");
        unconfirmed.confirm = Some(Confirm {
            name: "hello".to_owned(),
            fingerprint: "f".to_owned(),
        });
        for mode in [Mode::Default, Mode::Bypass] {
            let asked = authorise(&unconfirmed, mode, &b, cwd);
            assert_eq!(ids(&asked), ["allow_once", "allow_always", "reject_once"]);
            let Requirement::Ask(q) = asked else {
                unreachable!()
            };
            assert!(
                q.options[1]
                    .label
                    .contains("confirms this new or changed custom tool")
            );
            assert_eq!(q.confirm, unconfirmed.confirm);
        }
        let mut retry = tool("hello");
        retry.sandbox_retry = true;
        assert_eq!(
            ids(&authorise(&retry, Mode::Bypass, &b, cwd)),
            ["allow_once", UNSANDBOXED, "reject_once"]
        );
    }

    #[test]
    fn a_reviewed_edit_needs_no_question_unless_something_else_says_so() {
        let cwd = Path::new("/p");
        let none = broker(&[], &[]);
        let mut reviewed = edit("src/a.rs");
        assert!(matches!(
            authorise(&reviewed, Mode::Default, &none, cwd),
            Requirement::Ask(_)
        ));
        reviewed.edit_reviewed = true;
        assert_eq!(
            authorise(&reviewed, Mode::Default, &none, cwd),
            Requirement::Allow { note: None }
        );
        // Deny rules and the read-only mode still refuse.
        let deny = broker(&[], &["Edit(src/**)"]);
        assert!(matches!(
            authorise(&reviewed, Mode::Default, &deny, cwd),
            Requirement::Refuse { always: false, .. }
        ));
        assert!(matches!(
            authorise(&reviewed, Mode::ReadOnly, &none, cwd),
            Requirement::Refuse { always: false, .. }
        ));
        // A protected path is still asked.
        let mut protected = edit("package.json");
        protected.edit_reviewed = true;
        assert!(matches!(
            authorise(&protected, Mode::Default, &none, cwd),
            Requirement::Ask(_)
        ));
        // Bypass lets it through with a note.
        let Requirement::Allow { note: Some(note) } =
            authorise(&protected, Mode::Bypass, &none, cwd)
        else {
            panic!("bypass allows a protected path with a note");
        };
        assert!(note.contains("package.json"), "{note}");
    }

    #[test]
    fn calls_without_side_effects_are_allowed_unless_a_rule_says_otherwise() {
        let cwd = Path::new("/p");
        let mut quiet = tool("TodoWrite");
        quiet.mutating = false;
        quiet.side_effect_free = true;
        assert_eq!(
            authorise(&quiet, Mode::ReadOnly, &broker(&[], &[]), cwd),
            Requirement::Allow { note: None }
        );
        assert!(matches!(
            authorise(&quiet, Mode::Default, &broker(&[], &["TodoWrite"]), cwd),
            Requirement::Refuse { .. }
        ));
        quiet.side_effect_free = false;
        assert!(matches!(
            authorise(&quiet, Mode::Default, &broker(&[], &[]), cwd),
            Requirement::Ask(_)
        ));
    }

    #[test]
    fn replies_become_answers() {
        let cwd = Path::new("/p");
        let mut retry = tool("hello");
        retry.sandbox_retry = true;
        let Requirement::Ask(q) = authorise(&retry, Mode::Default, &broker(&[], &[]), cwd) else {
            panic!("asked");
        };
        let selected = |option: &str, reason: Option<&str>| PermissionReply::Selected {
            option: option.to_owned(),
            reason: reason.map(str::to_owned),
        };
        assert_eq!(
            q.answer(selected(UNSANDBOXED, None)),
            Answer::Allow {
                kind: ChoiceKind::AllowOnce,
                unsandboxed: true
            }
        );
        assert_eq!(
            q.answer(selected("allow_once", None)),
            Answer::Allow {
                kind: ChoiceKind::AllowOnce,
                unsandboxed: false
            }
        );
        let Answer::Reject { kind, to_model } = q.answer(selected("reject_once", Some("no")))
        else {
            panic!("rejected");
        };
        assert_eq!(kind, ChoiceKind::RejectOnce);
        assert!(
            to_model.contains("run this tool")
                && to_model.starts_with("The user rejected this: no.")
        );
        // A rejection without an option (ACP client error) is a rejection.
        assert!(matches!(
            q.answer(PermissionReply::Rejected { reason: None }),
            Answer::Reject {
                kind: ChoiceKind::RejectOnce,
                ..
            }
        ));
        assert_eq!(q.answer(selected("nope", None)), Answer::Cancelled);
        assert_eq!(q.answer(PermissionReply::Cancelled), Answer::Cancelled);
    }
}
