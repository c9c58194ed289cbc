//! Session modes: how much the broker lets through without asking.
//!
//! - `default`: the permission rules (no match → ask);
//! - `accept-edits`: Write and Edit inside the working folder are allowed
//!   without asking (deny rules still apply), the rest follows the rules;
//! - `read-only`: every tool that changes files or runs programs is denied —
//!   a planning mode;
//! - `bypass`: everything is allowed except what a deny rule forbids.

use std::sync::{Arc, Mutex};

/// A session mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Default,
    AcceptEdits,
    ReadOnly,
    Bypass,
}

impl Mode {
    /// Every mode, in the order offered.
    pub const ALL: [Mode; 4] = [
        Mode::Default,
        Mode::AcceptEdits,
        Mode::ReadOnly,
        Mode::Bypass,
    ];

    pub fn id(self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::AcceptEdits => "accept-edits",
            Mode::ReadOnly => "read-only",
            Mode::Bypass => "bypass",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Default => "Default",
            Mode::AcceptEdits => "Accept edits",
            Mode::ReadOnly => "Read-only (plan)",
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
            Mode::Bypass => {
                "DANGEROUS: every tool runs without asking, except what deny rules forbid"
            }
        }
    }

    pub fn from_id(id: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.id() == id)
    }
}

/// The mode of a session, shared between the session and its handle.
#[derive(Debug, Clone, Default)]
pub struct SharedMode(Arc<Mutex<Mode>>);

impl SharedMode {
    pub fn get(&self) -> Mode {
        self.0.lock().map(|m| *m).unwrap_or_default()
    }

    pub fn set(&self, mode: Mode) {
        if let Ok(mut m) = self.0.lock() {
            *m = mode;
        }
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
        assert_eq!(Mode::from_id("plan"), None);
    }
}
