//! The permission gate every tool call passes: [`authorise()`] decides
//! from what the tool says about the call ([`GateFacts`]), the mode and
//! the broker's rules ([`Broker::decide_call`]); [`gate`] is its mode and
//! protected-path step, and [`record`] saves the user's answers (rules
//! saved, project rules and custom tools confirmed). The tool router only
//! asks the questions.
//!
//! Rules have MAIA's form `Tool` or `Tool(pattern)` and come from
//! `permissions.allow` / `ask` / `deny` in `~/.maia/settings.json` and
//! `<cwd>/.maia/settings.json` (both add up; [`load_rules`]), plus the
//! "always" answers of the session ([`Broker::always`] also writes them to
//! the cwd's file, [`persist_rule`]).
//!
//! Evaluation: deny, then ask, then allow; the first family with a matching
//! rule decides, whatever the precision of the rules. With no match the
//! answer is ask, for every tool, except the tools without side effects
//! outside the conversation ([`GateFacts::side_effect_free`]), which are
//! allowed.
//! Tool names match case-insensitively. What each pattern means:
//!
//! - `Bash(...)`: the command; `*` is any sequence, `cmd *` covers `cmd`
//!   alone or with arguments but not `cmdx`, no `*` is the exact command.
//!   Commands are parsed with `brush-parser` ([`shell`]): a deny or ask
//!   applies when one part matches (hidden parts in `$(…)`, backticks,
//!   process substitutions, `sh -c`, `eval` included; also with wrappers
//!   such as `sudo`/`env`/`command` or a program path dropped); an allow
//!   only when every part matches as written and the command has no
//!   redirection (`2>&1` included) and no substitution. A command that
//!   does not parse is checked as raw text by deny/ask and never allowed.
//! - `Read/Write/Edit(...)` (the file) and `Glob/Grep(...)` (the search
//!   root; `src/**` covers `src` itself): gitignore-style globs. `./x` and
//!   `a/b` are relative to the cwd, a bare name (`.env`, `*.pem`) matches at
//!   any depth, a trailing `/` is the folder and all below, `/abs/**` and
//!   `~/x` are absolute. An allow matches the resolved path only (`..`
//!   folded, symlinks of the longest existing ancestor followed; a dangling
//!   symlink is never allowed); deny/ask match the path as written or
//!   resolved. Relative patterns apply inside the cwd and inside each
//!   additional workspace root alike ([`Broker::set_roots`]); a path
//!   outside every root never matches a relative pattern.
//! - `WebFetch(domain:host)`: the URL's host, case-insensitive, port
//!   ignored; `domain:*.example.org` is any subdomain but not
//!   `example.org` itself; `domain:*` is any host.
//! - `WebSearch(domain:host)`, same patterns, against the search's
//!   `allowed_domains`: a deny or ask rule meets a search kept to a domain
//!   it covers, an allow only a search kept to domains it all covers (a
//!   search of the whole web needs a bare `WebSearch`); a deny rule also
//!   drops the results from the hosts it covers ([`Broker::url_denied`]).
//! - `Skill(name)`: the `skill` argument (`*` allowed).
//! - Any other tool (custom, MCP, `TodoWrite`…): `*`-pattern against any
//!   string or number value of the input (`Addition(5)` for `{"a": 5}`).

mod authorise;
mod catastrophe;
pub mod gate;
mod load;
mod options;
mod persist;
mod rule;
mod seen;
mod shell;
mod suggest;

#[cfg(test)]
mod attacks;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use maia_tools::ToolInput;
use serde_json::Value;

use crate::event::{ChoiceKind, PermissionChoice};

pub(crate) use authorise::builtin_facts;
pub use authorise::{
    Answer, Confirm, Effect, GateFacts, Question, Recorded, Requirement, UNSANDBOXED, authorise,
    question_for, record,
};
pub use load::{LoadedRules, load_rules, rules_from};
pub use persist::{PersistError, persist_rule};
pub(crate) use rule::input_value;
pub use rule::{Family, Rule, RuleError};
pub use seen::{
    SEEN_FILE, confirm_rule, confirm_tool, trust_mcp_server, trusted_mcp_servers,
    unconfirmed_allow_rules, unconfirmed_tools, unseen_allow_rules,
};
pub use suggest::{suggest_rule, suggest_rule_value};

/// The broker's verdict for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Ask,
    /// Denied by the named rule.
    Deny(String),
    /// Refused in every mode (`bypass` included), whatever the rules: a
    /// catastrophic command; the text says why.
    Refuse(String),
}

/// A source of rules, sorted by family.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleSet {
    pub allow: Vec<Rule>,
    pub ask: Vec<Rule>,
    pub deny: Vec<Rule>,
}

impl RuleSet {
    pub fn family(&self, family: Family) -> &[Rule] {
        match family {
            Family::Allow => &self.allow,
            Family::Ask => &self.ask,
            Family::Deny => &self.deny,
        }
    }

    pub fn family_mut(&mut self, family: Family) -> &mut Vec<Rule> {
        match family {
            Family::Allow => &mut self.allow,
            Family::Ask => &mut self.ask,
            Family::Deny => &mut self.deny,
        }
    }

    pub fn len(&self) -> usize {
        self.allow.len() + self.ask.len() + self.deny.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds `rule` unless the family already holds it.
    pub fn add(&mut self, family: Family, rule: Rule) {
        let list = self.family_mut(family);
        if !list.contains(&rule) {
            list.push(rule);
        }
    }
}

/// The broker of one session.
#[derive(Debug, Clone, Default)]
pub struct Broker {
    /// Rules from files (with their file) and from code (`None`).
    loaded: LoadedRules,
    sets: Vec<RuleSet>,
    /// "Always" answers that could not be written to a file.
    remembered: RuleSet,
    /// Allow rules of the project's file the user has not confirmed: they
    /// do not apply until confirmed ([`Broker::confirm`]).
    pending: Vec<Rule>,
    /// The project's settings file (where pending rules live).
    project_file: Option<PathBuf>,
    /// The home folder (where confirmations are recorded).
    home: Option<PathBuf>,
    /// The session's additional workspace roots: relative patterns apply
    /// inside each of them as inside the cwd.
    roots: Vec<PathBuf>,
}

impl Broker {
    /// A broker over rule sets that come from no file (tests, code).
    pub fn new(sets: Vec<RuleSet>) -> Self {
        Broker {
            sets,
            ..Default::default()
        }
    }

    /// A broker over the rules of the settings files (tests).
    #[cfg(test)]
    pub(crate) fn from_loaded(loaded: LoadedRules) -> Self {
        Broker {
            loaded,
            ..Default::default()
        }
    }

    /// Loads the rules of `~/.maia/settings.json` and
    /// `<cwd>/.maia/settings.json` ([`load_rules`]).
    ///
    /// Allow rules of the project file that the user has not confirmed
    /// ([`seen::unconfirmed_allow_rules`]) are pending: they apply only
    /// once confirmed.
    pub fn load(home: Option<&Path>, cwd: &Path) -> Self {
        Self::from_files(&crate::settings::SettingsFiles::read(home, cwd), cwd)
    }

    /// Like [`Broker::load`], from settings files already read (their
    /// home is the one confirmations are recorded in).
    pub fn from_files(files: &crate::settings::SettingsFiles, cwd: &Path) -> Self {
        let home = files.home();
        let loaded = rules_from(files);
        let pending = seen::unconfirmed_allow_rules(home, cwd, &loaded);
        Broker {
            loaded,
            pending,
            project_file: Some(persist::local_settings_file(cwd)),
            home: home.map(Path::to_path_buf),
            ..Default::default()
        }
    }

    /// Adds the managed policy's rules (`file`: the policy file), above
    /// every settings file's; `/permissions` shows them under that file.
    pub fn add_managed(&mut self, file: &Path, set: RuleSet) {
        if !set.is_empty() {
            self.loaded.sets.insert(0, (file.to_path_buf(), set));
        }
    }

    /// Adds rules that come from no file (the process's own, see
    /// [`crate::EngineOptions::allow`]); an empty set changes nothing.
    pub fn add_rules(&mut self, set: RuleSet) {
        if !set.is_empty() {
            self.sets.push(set);
        }
    }

    /// Sets the session's additional workspace roots (absolute, existing
    /// folders; see [`crate::workspace`]).
    pub fn set_roots(&mut self, roots: Vec<PathBuf>) {
        self.roots = roots;
    }

    /// The additional workspace roots the rules apply in.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// The home folder: what `~` means in rules and commands.
    pub fn home(&self) -> Option<&Path> {
        self.home.as_deref()
    }

    /// The pending rules (not yet confirmed by the user).
    pub fn pending(&self) -> &[Rule] {
        &self.pending
    }

    /// A pending rule that would allow this call on its own (to ask the
    /// user to confirm it).
    pub fn pending_cover(&self, tool: &str, input: &Value, cwd: &Path) -> Option<Rule> {
        self.pending
            .iter()
            .find(|r| r.matches_in(tool, input, (cwd, &self.roots, self.home()), true))
            .cloned()
    }

    /// Confirms a pending rule: it applies from now on, and in later
    /// sessions (recorded in `~/.maia/seen-rules.json`). False when the
    /// rule was not pending.
    pub fn confirm(&mut self, rule: &Rule, home: Option<&Path>, cwd: &Path) -> bool {
        let before = self.pending.len();
        self.pending.retain(|r| r != rule);
        if self.pending.len() == before {
            return false;
        }
        seen::confirm_rule(home, cwd, &rule.to_string());
        true
    }

    /// The allow rules in force: every file's, except the project's
    /// pending ones.
    fn allow_rules(&self) -> impl Iterator<Item = &Rule> {
        let pending = &self.pending;
        let project = self.project_file.as_deref();
        self.loaded
            .sets
            .iter()
            .flat_map(move |(path, set)| {
                let is_project = Some(path.as_path()) == project;
                set.allow
                    .iter()
                    .filter(move |r| !(is_project && pending.contains(r)))
            })
            .chain(self.sets.iter().flat_map(|s| s.allow.iter()))
            .chain(self.remembered.allow.iter())
    }

    /// The file rules this broker was built from (for the start notice).
    pub fn loaded(&self) -> &LoadedRules {
        &self.loaded
    }

    fn all(&self) -> impl Iterator<Item = &RuleSet> {
        self.loaded
            .sets
            .iter()
            .map(|(_, s)| s)
            .chain(&self.sets)
            .chain(std::iter::once(&self.remembered))
    }

    /// Deny, then ask, then allow; no match → ask.
    pub fn decide(&self, input: &ToolInput, cwd: &Path) -> Decision {
        self.decide_value(input.name(), &rule::input_value(input), cwd)
    }

    /// The rules' decision for a call: [`Broker::decide_value`], except
    /// that a call without side effects is allowed when no rule matches.
    pub fn decide_call(&self, facts: &GateFacts, cwd: &Path) -> Decision {
        self.decide_rules(
            &facts.rule_name,
            &facts.rule_input,
            cwd,
            facts.side_effect_free,
        )
    }

    /// [`Broker::decide`] for any tool: `tool` is the tool's name, `input`
    /// its JSON arguments (`{"url": …}` for WebFetch, `{"skill": …}` for
    /// Skill, anything for custom and MCP tools).
    pub fn decide_value(&self, tool: &str, input: &Value, cwd: &Path) -> Decision {
        self.decide_rules(tool, input, cwd, false)
    }

    fn decide_rules(
        &self,
        tool: &str,
        input: &Value,
        cwd: &Path,
        unmatched_allow: bool,
    ) -> Decision {
        let subject = rule::Subject::in_roots(tool, input, (cwd, &self.roots, self.home()));
        let family = |f: Family| {
            self.all()
                .flat_map(move |s| s.family(f))
                .filter(|r| r.names(tool))
        };
        if let rule::Subject::Bash { analysis, .. } = &subject
            && let Some(why) = &analysis.catastrophic
        {
            return Decision::Refuse(format!("a catastrophic command: {why}"));
        }
        if let Some(rule) = family(Family::Deny).find(|r| r.hits(&subject, false)) {
            return Decision::Deny(rule.to_string());
        }
        let mut ask = false;
        if let rule::Subject::Bash { analysis, .. } = &subject {
            match self.command_writes(analysis, cwd) {
                Some(Decision::Deny(rule)) => return Decision::Deny(rule),
                Some(_) => ask = true,
                None => {}
            }
        }
        if ask || family(Family::Ask).any(|r| r.hits(&subject, false)) {
            return Decision::Ask;
        }
        let allow = || self.allow_rules().filter(|r| r.names(tool));
        let allowed = match &subject {
            // Every part must be covered, each by any allow rule; wrappers
            // such as `timeout 5` need no rule of their own.
            rule::Subject::Bash { analysis, .. } => {
                let rules: Vec<&Rule> = allow().collect();
                !rules.is_empty()
                    && rule::bash_allowable(analysis)
                    && analysis
                        .parts
                        .iter()
                        .all(|p| p.transparent || rules.iter().any(|r| r.covers_part(p)))
            }
            _ => allow().any(|r| r.hits(&subject, true)),
        };
        if allowed || unmatched_allow {
            return Decision::Allow;
        }
        Decision::Ask
    }

    /// The files a command writes (redirections, `tee`, `dd of=`, options
    /// of the table), checked as `Write` and `Edit` calls: `Some(Deny)` when
    /// a deny rule covers one (or one is computed and a deny rule exists),
    /// `Some(Ask)` when an ask rule covers one, `None` otherwise.
    fn command_writes(&self, analysis: &shell::Analysis, cwd: &Path) -> Option<Decision> {
        let rules = |f: Family| -> Vec<&Rule> {
            self.all()
                .flat_map(move |s| s.family(f))
                .filter(|r| r.names("Write") || r.names("Edit"))
                .collect()
        };
        let deny = rules(Family::Deny);
        let ask = rules(Family::Ask);
        if deny.is_empty() && ask.is_empty() {
            return None;
        }
        let mut asked = false;
        for target in &analysis.writes {
            if harmless_target(target) {
                continue;
            }
            let moved = analysis.changes_dir
                && !Path::new(target).is_absolute()
                && !target.starts_with('~');
            if moved || target.contains(['$', '`', '*', '?', '[']) {
                // Unsure means no.
                if let Some(rule) = deny.first() {
                    return Some(Decision::Deny(format!(
                        "{rule} (the command writes to a file computed at run time or after changing folder)"
                    )));
                }
                asked = true;
                continue;
            }
            let path = expand_home(target, self.home());
            let value = serde_json::json!({ "file_path": path });
            for tool in ["Write", "Edit"] {
                let subject =
                    rule::Subject::in_roots(tool, &value, (cwd, &self.roots, self.home()));
                if let Some(rule) = deny
                    .iter()
                    .find(|r| r.names(tool) && r.hits(&subject, false))
                {
                    return Some(Decision::Deny(format!(
                        "{rule} (the command writes to `{target}`)"
                    )));
                }
                asked |= ask.iter().any(|r| r.names(tool) && r.hits(&subject, false));
            }
        }
        asked.then_some(Decision::Ask)
    }

    /// Whether a Read deny rule covers `path` (for Grep and Glob, which
    /// read many files: [`read_guard`]).
    pub fn read_denied(&self, path: &Path, cwd: &Path) -> bool {
        let value = serde_json::json!({ "file_path": path });
        let subject = rule::Subject::in_roots("Read", &value, (cwd, &self.roots, self.home()));
        self.all()
            .flat_map(|s| s.family(Family::Deny))
            .any(|r| r.names("Read") && r.hits(&subject, false))
    }

    /// The deny rule of `tool` whose `domain:` pattern covers `url`'s host,
    /// if any (a web search leaves out the results it denies).
    pub fn url_denied(&self, tool: &str, url: &str) -> Option<String> {
        let subject = rule::Subject::Host(rule::url_host(url));
        self.all()
            .flat_map(|s| s.family(Family::Deny))
            .find(|r| r.names(tool) && r.pattern.is_some() && r.hits(&subject, false))
            .map(Rule::to_string)
    }

    /// Remembers an "always" answer for the rest of the session, in memory
    /// only. Prefer [`Broker::always`], which also writes it to the file.
    pub fn remember(&mut self, kind: ChoiceKind, rule: Rule) {
        match kind {
            ChoiceKind::AllowAlways => self.remembered.add(Family::Allow, rule),
            ChoiceKind::RejectAlways => self.remembered.add(Family::Deny, rule),
            ChoiceKind::AllowOnce | ChoiceKind::RejectOnce => {}
        }
    }

    /// An "always" answer: writes `rule` to `<cwd>/.maia/settings.json`
    /// ([`persist_rule`]) and applies it at once. `Ok(None)` for a "once"
    /// answer, `Ok(Some(file))` once written. On a write error the rule
    /// still applies for the rest of the session (shown by `/permissions`
    /// as not saved) and the error is returned for a warning.
    pub fn always(
        &mut self,
        kind: ChoiceKind,
        rule: Rule,
        cwd: &Path,
    ) -> Result<Option<PathBuf>, PersistError> {
        let family = match kind {
            ChoiceKind::AllowAlways => Family::Allow,
            ChoiceKind::RejectAlways => Family::Deny,
            ChoiceKind::AllowOnce | ChoiceKind::RejectOnce => return Ok(None),
        };
        match persist_rule(cwd, family, &rule) {
            Ok(file) => {
                if family == Family::Allow {
                    // The user's own rule needs no confirmation later.
                    seen::confirm_rule(self.home.as_deref(), cwd, &rule.to_string());
                }
                self.loaded.add(&file, family, rule);
                Ok(Some(file))
            }
            Err(e) => {
                self.remember(kind, rule);
                Err(e)
            }
        }
    }

    /// The user's answer to a permission question that offered `rule`: a
    /// confirmation when `rule` was a pending project rule and the answer
    /// is "always allow" ([`Broker::confirm`]), otherwise an "always"
    /// answer ([`Broker::always`]; a saved allow rule is also recorded as
    /// seen, so it is no news at the next start). "Once" answers change
    /// nothing.
    pub fn answer(
        &mut self,
        kind: ChoiceKind,
        rule: Rule,
        pending: bool,
        cwd: &Path,
    ) -> Result<Option<PathBuf>, PersistError> {
        if pending && kind == ChoiceKind::AllowAlways {
            let home = self.home.clone();
            self.confirm(&rule, home.as_deref(), cwd);
            tracing::info!(rule = %rule, "project rule confirmed");
            return Ok(None);
        }
        let saved = self.always(kind, rule, cwd)?;
        if saved.is_some() && kind == ChoiceKind::AllowAlways {
            unseen_allow_rules(self.home.as_deref(), cwd, &self.loaded);
        }
        Ok(saved)
    }

    /// The `/permissions` text: the file rules grouped ALLOW / ASK / DENY,
    /// then the session's unsaved rules, then loading warnings.
    pub fn render(&self) -> String {
        let mut out = self.loaded.render();
        if !self.pending.is_empty() {
            out.push_str("\n### Project allow rules waiting for your confirmation\n\n");
            out.push_str("They apply once you confirm them (MAIA asks the first time one would allow a call).\n\n");
            for r in &self.pending {
                out.push_str(&format!("- `{r}`\n"));
            }
        }
        let extra: Vec<&RuleSet> = self
            .sets
            .iter()
            .chain(std::iter::once(&self.remembered))
            .filter(|s| !s.is_empty())
            .collect();
        if !extra.is_empty() {
            let mut merged = RuleSet::default();
            for s in extra {
                for family in [Family::Allow, Family::Ask, Family::Deny] {
                    for r in s.family(family) {
                        merged.add(family, r.clone());
                    }
                }
            }
            out.push_str("\n### This session only (not saved)\n\n");
            out.push_str(&load::render_set(&merged));
        }
        out
    }
}

/// The guard Grep and Glob consult for every file they would read or
/// list: false when a Read deny rule of the session covers it.
pub fn read_guard(broker: Arc<Mutex<Broker>>, cwd: PathBuf) -> maia_tools::ReadGuard {
    Arc::new(move |path: &Path| {
        broker
            .lock()
            .map(|b| !b.read_denied(path, &cwd))
            .unwrap_or(false)
    })
}

/// Write targets no rule is about.
fn harmless_target(target: &str) -> bool {
    matches!(
        target,
        "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty" | "-"
    ) || target.starts_with("/dev/fd/")
}

/// `~/x` → `<home>/x` (the shell does it before writing), `home` being
/// the engine's home folder.
pub(crate) fn expand_home(target: &str, home: Option<&Path>) -> String {
    match (target.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest).to_string_lossy().into_owned(),
        _ => target.to_owned(),
    }
}

/// True when a command uses shell syntax that can hide or chain commands
/// (used to decide whether a prefix rule may be suggested).
pub fn has_shell_syntax(command: &str) -> bool {
    command.chars().any(|c| {
        matches!(
            c,
            ';' | '&' | '|' | '<' | '>' | '$' | '`' | '(' | ')' | '\n'
        )
    })
}

/// The options offered for `input`, with labels that say what they cover.
pub fn choices(rule: Option<&Rule>) -> Vec<PermissionChoice> {
    let choice = |id: &str, label: String, kind| PermissionChoice {
        id: id.to_owned(),
        label,
        kind,
    };
    let mut out = vec![choice(
        "allow_once",
        "Allow once".to_owned(),
        ChoiceKind::AllowOnce,
    )];
    if let Some(rule) = rule {
        out.push(choice(
            "allow_always",
            format!("Always allow {rule}"),
            ChoiceKind::AllowAlways,
        ));
    }
    out.push(choice(
        "reject_once",
        "Reject".to_owned(),
        ChoiceKind::RejectOnce,
    ));
    if let Some(rule) = rule {
        out.push(choice(
            "reject_always",
            format!("Always reject {rule}"),
            ChoiceKind::RejectAlways,
        ));
    }
    out
}
