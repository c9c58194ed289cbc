//! Session modes: how much the broker lets through without asking.
//!
//! - `default`: the permission rules (no match → ask);
//! - `accept-edits`: Write and Edit inside the workspace (the working folder
//!   and its additional roots) are allowed without asking (deny rules and
//!   protected paths still apply), the rest follows the rules;
//! - `read-only`: every tool that changes files or runs programs is denied;
//! - `plan`: as `read-only`, and the model is offered only the read-only
//!   tools plus `ExitPlanMode`, whose approval by the user switches the mode
//!   (see the `plan_mode` module);
//! - `bypass`: everything is allowed except what a deny rule forbids.

/// A session mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Default,
    AcceptEdits,
    ReadOnly,
    Plan,
    Bypass,
}

impl Mode {
    /// Every mode, in the order offered.
    pub const ALL: [Mode; 5] = [
        Mode::Default,
        Mode::AcceptEdits,
        Mode::ReadOnly,
        Mode::Plan,
        Mode::Bypass,
    ];

    pub fn id(self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::AcceptEdits => "accept-edits",
            Mode::ReadOnly => "read-only",
            Mode::Plan => "plan",
            Mode::Bypass => "bypass",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Default => "Default",
            Mode::AcceptEdits => "Accept edits",
            Mode::ReadOnly => "Read-only",
            Mode::Plan => "Plan",
            Mode::Bypass => "Bypass permissions (dangerous)",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Mode::Default => "Permission rules apply; without a matching rule MAIA asks",
            Mode::AcceptEdits => {
                "File edits inside the project are allowed without asking; the rest follows the rules"
            }
            Mode::ReadOnly => "Nothing is changed or run: edits and commands are refused",
            Mode::Plan => {
                "MAIA researches with read-only tools and proposes a plan; nothing changes until you approve it"
            }
            Mode::Bypass => {
                "DANGEROUS: every tool runs without asking, except what deny rules forbid"
            }
        }
    }

    /// Whether nothing that changes files or runs programs is let through.
    pub fn is_read_only(self) -> bool {
        matches!(self, Mode::ReadOnly | Mode::Plan)
    }

    pub fn from_id(id: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.id() == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip() {
        for mode in Mode::ALL {
            assert_eq!(Mode::from_id(mode.id()), Some(mode));
        }
        assert_eq!(Mode::from_id("plan"), Some(Mode::Plan));
        assert_eq!(Mode::from_id("planning"), None);
    }
}
