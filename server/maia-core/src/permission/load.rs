//! Rule files: `permissions.allow` / `ask` / `deny` of
//! `~/.maia/settings.json` and `<cwd>/.maia/settings.json` (both add up; the
//! parent folder's file is never read).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Family, Rule, RuleSet};
use crate::settings::{FileContent, SettingsFile, SettingsFiles};

/// The rules read from the settings files, file by file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadedRules {
    /// Files with a `permissions` object, most general first.
    pub sets: Vec<(PathBuf, RuleSet)>,
    /// Problems: unreadable file, invalid JSON, malformed rule (each names
    /// the file and the rule; the rest still loads).
    pub warnings: Vec<String>,
}

/// Reads the permission rules for a session in `cwd`.
pub fn load_rules(home: Option<&Path>, cwd: &Path) -> LoadedRules {
    rules_from(&SettingsFiles::read(home, cwd))
}

/// The permission rules of settings files already read.
pub fn rules_from(files: &SettingsFiles) -> LoadedRules {
    let mut out = LoadedRules::default();
    for file in files.files() {
        load_file(file, &mut out);
    }
    for w in &out.warnings {
        tracing::warn!("{w}");
    }
    out
}

fn load_file(file: &SettingsFile, out: &mut LoadedRules) {
    let shown = file.path.display();
    let value = match &file.content {
        FileContent::Json(value) => value,
        FileContent::Unreadable(e) => {
            out.warnings.push(format!(
                "cannot read {shown} ({e}); its permission rules are ignored"
            ));
            return;
        }
        FileContent::Invalid(e) => {
            out.warnings.push(format!(
                "{shown} is not valid JSON ({e}); its permission rules are ignored"
            ));
            return;
        }
    };
    let Some(permissions) = value.get("permissions") else {
        return;
    };
    let Value::Object(permissions) = permissions else {
        out.warnings.push(format!(
            "{shown}: `permissions` must be an object with allow/ask/deny lists; ignored"
        ));
        return;
    };
    let mut set = RuleSet::default();
    for family in [Family::Allow, Family::Ask, Family::Deny] {
        let key = family.key();
        let Some(list) = permissions.get(key) else {
            continue;
        };
        let Value::Array(items) = list else {
            out.warnings.push(format!(
                "{shown}: `permissions.{key}` must be a list of rules; ignored"
            ));
            continue;
        };
        for item in items {
            match item.as_str().map(Rule::parse) {
                Some(Ok(rule)) => set.add(family, rule),
                Some(Err(_)) => out.warnings.push(format!(
                    "{shown}: malformed rule `{}` in permissions.{key}; ignored",
                    item.as_str().unwrap_or_default()
                )),
                None => out.warnings.push(format!(
                    "{shown}: rule {item} in permissions.{key} is not a string; ignored"
                )),
            }
        }
    }
    out.sets.push((file.path.clone(), set));
}

impl LoadedRules {
    /// Total number of rules.
    pub fn count(&self) -> usize {
        self.sets.iter().map(|(_, s)| s.len()).sum()
    }

    /// The rules of one file, if it was loaded.
    pub fn file(&self, path: &Path) -> Option<&RuleSet> {
        self.sets.iter().find(|(p, _)| p == path).map(|(_, s)| s)
    }

    /// Adds a rule to the set of `file` (created at the end if missing):
    /// used after an "always" answer was written there.
    pub fn add(&mut self, file: &Path, family: Family, rule: Rule) {
        match self.sets.iter_mut().find(|(p, _)| p == file) {
            Some((_, set)) => set.add(family, rule),
            None => {
                let mut set = RuleSet::default();
                set.add(family, rule);
                self.sets.push((file.to_path_buf(), set));
            }
        }
    }

    /// One line for the start notice: `3 rules from ~/.maia/settings.json
    /// (1 allow, 0 ask, 2 deny); 1 rule from …`, or `no permission rules
    /// defined`. Warnings are in [`LoadedRules::warnings`].
    pub fn summary(&self) -> String {
        let parts: Vec<String> = self
            .sets
            .iter()
            .filter(|(_, s)| !s.is_empty())
            .map(|(p, s)| {
                let n = s.len();
                format!(
                    "{n} rule{} from {} ({} allow, {} ask, {} deny)",
                    if n == 1 { "" } else { "s" },
                    p.display(),
                    s.allow.len(),
                    s.ask.len(),
                    s.deny.len()
                )
            })
            .collect();
        if parts.is_empty() {
            "no permission rules defined".to_owned()
        } else {
            format!("Permission rules: {}", parts.join("; "))
        }
    }

    /// The `/permissions` text (Markdown): the rules file by file, grouped
    /// ALLOW / ASK / DENY, then the warnings.
    pub fn render(&self) -> String {
        let mut out = String::from(
            "## Permission rules\n\nEvaluated deny, then ask, then allow: the first family \
             with a matching rule decides; with no match, MAIA asks.\n",
        );
        if self.sets.iter().all(|(_, s)| s.is_empty()) {
            out.push_str("\nNo permission rules defined.\n");
        }
        for (path, set) in &self.sets {
            out.push_str(&format!("\n### `{}`\n\n", path.display()));
            out.push_str(&render_set(set));
        }
        if !self.warnings.is_empty() {
            out.push_str("\n### Warnings\n\n");
            for w in &self.warnings {
                out.push_str(&format!("- {w}\n"));
            }
        }
        out
    }
}

/// One set as Markdown, grouped ALLOW / ASK / DENY.
pub(crate) fn render_set(set: &RuleSet) -> String {
    if set.is_empty() {
        return "(no rules)\n".to_owned();
    }
    let mut out = String::new();
    for family in [Family::Allow, Family::Ask, Family::Deny] {
        let rules = set.family(family);
        if rules.is_empty() {
            continue;
        }
        out.push_str(&format!("**{}**\n", family.badge()));
        for r in rules {
            out.push_str(&format!("- `{r}`\n"));
        }
        out.push('\n');
    }
    out
}
