//! The gate: the broker's rule decision adjusted by the session's mode and
//! by protected paths: [`apply_mode`], one step of [`super::authorise()`].
//!
//! Order: a deny rule or a catastrophic command ends it (every mode); the
//! `read-only` and `plan` modes refuse anything that changes files or runs programs; a
//! call that writes a protected path ([`PROTECTED`]) is asked in `default`
//! and `accept-edits` (whatever the allow rules), allowed but reported in
//! `bypass`; then `accept-edits` allows Write/Edit inside the project (the
//! cwd or an additional workspace root) and `bypass` allows the rest.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use super::authorise::{Effect, GateFacts};
use super::{Decision, Rule, rule, shell};
use crate::mode::Mode;

/// Paths that decide what MAIA, git, editors or allowed commands run:
/// writing one is always asked (gitignore-style, as `Write(...)` rules).
pub const PROTECTED: &[&str] = &[
    ".maia/",
    "~/.maia/",
    ".git/",
    ".claude/",
    ".vscode/",
    ".idea/",
    ".envrc",
    ".gitattributes",
    ".gitmodules",
    "package.json",
    "Makefile",
    "makefile",
    "GNUmakefile",
    "*.mk",
];

static PROTECTED_RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    PROTECTED
        .iter()
        .filter_map(|p| Rule::parse(&format!("Write({p})")).ok())
        .collect()
});

/// The gate's answer: the decision and, for a protected path let through
/// by `bypass`, the note to show with the call; `protected` when the call
/// writes a protected path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub decision: Decision,
    pub note: Option<String>,
    pub protected: bool,
}

/// The protected path a call writes, if any: the file of Write/Edit, the
/// files a Bash command redirects into or writes with `tee`, `dd of=`….
/// Protected names apply inside the cwd and each additional root (`roots`);
/// `~` is `home`, the engine's home folder.
pub fn protected_path(
    effect: &Effect,
    cwd: &Path,
    (roots, home): (&[PathBuf], Option<&Path>),
) -> Option<PathBuf> {
    let targets: Vec<String> = match effect {
        Effect::EditsFile(path) => vec![path.clone()],
        Effect::RunsCommand(command) => shell::analyse(command, cwd, home).writes,
        Effect::Other => Vec::new(),
    };
    targets.into_iter().find_map(|t| {
        let value = serde_json::json!({ "file_path": super::expand_home(&t, home) });
        let subject = rule::Subject::in_roots("Write", &value, (cwd, roots, home));
        PROTECTED_RULES
            .iter()
            .any(|r| r.hits(&subject, false))
            .then(|| maia_tools::path::resolve(cwd, &t))
    })
}

/// Whether `path` (resolved, symlinks followed) lies in the workspace: the
/// cwd or one of the additional roots.
pub fn in_workspace(path: &Path, cwd: &Path, roots: &[PathBuf]) -> bool {
    std::iter::once(cwd)
        .chain(roots.iter().map(PathBuf::as_path))
        .any(|root| maia_tools::path::is_within(root, path))
}

/// The rules' decision adjusted by `mode` and protected paths, in a
/// session rooted at `cwd` with the additional workspace `roots`.
pub fn apply_mode(
    mode: Mode,
    rules: Decision,
    call: &GateFacts,
    cwd: &Path,
    (roots, home): (&[PathBuf], Option<&Path>),
) -> Verdict {
    let verdict = |decision| Verdict {
        decision,
        note: None,
        protected: false,
    };
    if matches!(rules, Decision::Deny(_) | Decision::Refuse(_)) {
        return verdict(rules);
    }
    if mode.is_read_only() && call.mutating {
        return verdict(Decision::Deny(
            "the read-only mode (nothing may be changed or run)".to_owned(),
        ));
    }
    if let Some(path) = protected_path(&call.effect, cwd, (roots, home)) {
        return match mode {
            Mode::Bypass => Verdict {
                decision: Decision::Allow,
                note: Some(format!(
                    "Writes the protected path {} (allowed only because of the bypass mode).",
                    path.display()
                )),
                protected: true,
            },
            _ => Verdict {
                decision: Decision::Ask,
                note: None,
                protected: true,
            },
        };
    }
    match mode {
        Mode::Default | Mode::ReadOnly | Mode::Plan => verdict(rules),
        Mode::AcceptEdits => {
            let inside = match &call.effect {
                Effect::EditsFile(p) => {
                    in_workspace(&maia_tools::path::resolve(cwd, p), cwd, roots)
                }
                _ => false,
            };
            if inside {
                verdict(Decision::Allow)
            } else {
                verdict(rules)
            }
        }
        Mode::Bypass => verdict(Decision::Allow),
    }
}
