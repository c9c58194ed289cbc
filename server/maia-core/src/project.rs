//! What a session reads from files, read in one go: [`Project::load`].
//!
//! A session loads its project when it starts and again on `/clear`,
//! `/new` and after a compaction; both go through the one function here.
//! The settings files are read and parsed once per load
//! ([`SettingsFiles`]), and the settings, the sandbox policy and the
//! permission rules are all taken from that one snapshot. The load is
//! blocking file work: callers run it on the blocking pool.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use maia_llm::{LlmClient, LlmError};
use maia_tools::sandbox::Sandbox;

use crate::context_file::{self, ContextFiles};
use crate::custom_tools::{self, LoadedTools};
use crate::event::{CommandEntry, NoticeLevel};
use crate::markdown_commands::{self, LoadedCommands};
use crate::options::EngineOptions;
use crate::permission::{self, Broker};
use crate::policy::ManagedPolicy;
use crate::settings::{self, Settings, SettingsFiles};
use crate::skills::{self, LoadedSkills};

/// Everything a session takes from files, as loaded at one moment.
pub(crate) struct Project {
    pub settings: Settings,
    /// The model server's client, built from [`Project::settings`].
    pub llm: Result<LlmClient, LlmError>,
    /// The instruction files read at the start ([`context_file::load`]).
    pub context_files: ContextFiles,
    /// A `SYSTEM.md` replacing the built-in doctrine.
    pub system_md: Option<crate::system_prompt::SystemMd>,
    /// The permission rules (with the session's additional roots set),
    /// shared with the turn's tool calls.
    pub broker: Arc<Mutex<Broker>>,
    /// The sandbox of the session's commands (`None`: off or unsupported).
    pub sandbox: Option<Arc<Sandbox>>,
    /// What to tell the user about the sandbox.
    pub sandbox_notes: Vec<String>,
    pub skills: Arc<LoadedSkills>,
    /// Markdown commands (`.maia/commands`, `.claude/commands`).
    pub markdown_commands: Arc<LoadedCommands>,
    pub custom_tools: Arc<LoadedTools>,
    /// Custom tools not confirmed since they appeared or changed: every
    /// call is asked, in every mode (the tool confirms it after a "yes").
    pub pending_tools: Arc<Mutex<HashSet<String>>>,
    /// The language servers (`lsp`), for the session's manager.
    pub lsp: maia_lsp_client::LspSettings,
    /// The file checkpoints' settings (`checkpoints`).
    pub checkpoints: crate::checkpoint::Settings,
    /// The agents a `Task` call can start ([`crate::subagent::agents`]).
    pub agents: Arc<crate::subagent::LoadedAgents>,
    /// The hooks in force (`hooks`; a project's only once trusted).
    pub hooks: Arc<crate::hooks::LoadedHooks>,
    /// The proxy's search tool, asked before the first turn
    /// ([`crate::web_search::probe`]); shared with child sessions.
    pub web_search: Arc<tokio::sync::OnceCell<crate::web_search::Found>>,
}

/// Where a session's project is: its options, folder, additional roots and
/// id (the sandbox's private temp folder is named after it).
#[derive(Clone, Copy)]
pub(crate) struct Place<'a> {
    pub options: &'a EngineOptions,
    pub cwd: &'a Path,
    pub roots: &'a [PathBuf],
    pub id: &'a str,
}

impl Project {
    /// What to tell the user about this load, in order: the warnings of
    /// every file read, the sandbox's limits, tools not yet confirmed, and
    /// the rules in force (`home` and `cwd` decide which project rules were
    /// seen before).
    pub(crate) fn load_notices(
        &self,
        home: Option<&Path>,
        cwd: &Path,
    ) -> Vec<(NoticeLevel, String)> {
        let mut out = Vec::new();
        let mut say = |level, text| out.push((level, text));
        for warning in self
            .settings
            .warnings
            .iter()
            .chain(&self.context_files.warnings)
        {
            say(NoticeLevel::Warning, warning.clone());
        }
        for note in &self.sandbox_notes {
            say(NoticeLevel::Warning, note.clone());
        }
        for note in self.hooks.notices() {
            say(NoticeLevel::Warning, note);
        }
        if let Ok(pending) = self.pending_tools.lock()
            && !pending.is_empty()
        {
            let mut names: Vec<&str> = pending.iter().map(String::as_str).collect();
            names.sort_unstable();
            say(
                NoticeLevel::Warning,
                format!(
                    "New or changed custom tools: {}. Each call is asked, in every mode, until you confirm the tool (\"Always allow\").",
                    names.join(", ")
                ),
            );
        }
        if let Ok(broker) = self.broker.lock() {
            say(NoticeLevel::Info, broker.loaded().summary());
            for warning in &broker.loaded().warnings {
                say(NoticeLevel::Warning, warning.clone());
            }
            let unseen = permission::unseen_allow_rules(home, cwd, broker.loaded());
            if !unseen.is_empty() {
                say(
                    NoticeLevel::Warning,
                    format!(
                        "This project's .maia/settings.json allows without asking: {}. Read it before you trust it (/permissions lists every rule); each takes effect only once you confirm it, when MAIA first asks about a call it would allow.",
                        unseen.join(", ")
                    ),
                );
            }
        }
        for warning in self
            .skills
            .warnings
            .iter()
            .chain(&self.markdown_commands.warnings)
            .chain(&self.agents.warnings)
            .chain(&self.custom_tools.warnings)
        {
            say(NoticeLevel::Warning, warning.clone());
        }
        out
    }

    /// What was found, one line per kind: skills, Markdown commands,
    /// custom tools.
    pub(crate) fn inventory(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.skills.skills.is_empty() {
            let names: Vec<&str> = self.skills.skills.iter().map(|s| s.name.as_str()).collect();
            out.push(format!("Skills: {}", names.join(", ")));
        }
        if !self.markdown_commands.commands.is_empty() {
            let names: Vec<String> = self
                .markdown_commands
                .commands
                .iter()
                .map(|c| format!("/{}", c.name))
                .collect();
            out.push(format!("Commands: {}", names.join(", ")));
        }
        if !self.custom_tools.tools.is_empty() {
            let names: Vec<&str> = self
                .custom_tools
                .tools
                .iter()
                .map(|t| t.name.as_str())
                .collect();
            out.push(format!("Custom tools: {}", names.join(", ")));
        }
        out
    }

    /// Loads the project of a session in `place`.
    pub fn load(place: Place<'_>) -> Self {
        Self::load_with(place, &mut |path| std::fs::read_to_string(path))
    }

    /// Like [`Project::load`], reading the settings files through `read`.
    pub fn load_with(
        place: Place<'_>,
        read: &mut dyn FnMut(&Path) -> std::io::Result<String>,
    ) -> Self {
        let Place {
            options,
            cwd,
            roots,
            id,
        } = place;
        let home = options.home.as_deref();
        let files = SettingsFiles::read_with(home, cwd, read);
        let mut settings = settings::from_files_with(options, &files, cwd);
        let policy = options.policy.as_deref();
        if let Some(policy) = policy {
            bound_models(policy, &mut settings);
        }
        let (lsp, lsp_warnings) = crate::langs::settings(&files);
        settings.warnings.extend(lsp_warnings);
        let (checkpoints, checkpoint_warnings) = crate::checkpoint::settings(&files);
        settings.warnings.extend(checkpoint_warnings);
        let llm = LlmClient::new(settings.llm.clone());
        let mut broker = Broker::from_files(&files, cwd);
        if let Some(policy) = policy {
            broker.add_managed(&policy.path, policy.rules.clone());
        }
        broker.set_roots(roots.to_vec());
        broker.add_rules(process_rules(&options.allow));
        // The thread's kept outputs ([`maia_tools::kept`]): the stubs name
        // them, so Read and Grep of them are not asked.
        if let Some(dir) = home.and_then(|h| maia_tools::kept::thread_dir(h, id)) {
            let dir = dir.display();
            broker.add_rules(process_rules(&[
                format!("Read({dir}/**)"),
                format!("Grep({dir}/**)"),
            ]));
        }
        let (sandbox, sandbox_notes) = build_sandbox(&files, (cwd, roots), id, policy);
        let custom_tools = custom_tools::load(cwd, &crate::tools::reserved_tool_names());
        let pending_tools = pending_tools(home, cwd, &custom_tools);
        let hooks = crate::hooks::load(
            &files,
            (home, cwd),
            policy.map_or(&[][..], |p| &p.hooks),
            policy.is_some_and(|p| p.managed_hooks_only),
        );
        Project {
            hooks: Arc::new(hooks),
            context_files: context_file::load(home, cwd),
            system_md: crate::system_prompt::system_md(home, cwd),
            skills: Arc::new(skills::load(home, cwd)),
            markdown_commands: Arc::new(markdown_commands::load(home, cwd)),
            settings,
            llm,
            broker: Arc::new(Mutex::new(broker)),
            sandbox,
            sandbox_notes,
            custom_tools: Arc::new(custom_tools),
            pending_tools: Arc::new(Mutex::new(pending_tools)),
            lsp,
            checkpoints,
            agents: Arc::new(crate::subagent::agents::load(home, cwd)),
            web_search: Arc::default(),
        }
    }

    /// The same project for a child session: everything shared (the rules
    /// and their answers, the sandbox, the settings), nothing read again.
    /// `None` when the model server's client could not be built.
    pub(crate) fn share(&self) -> Option<Project> {
        Some(Project {
            settings: self.settings.clone(),
            llm: Ok(self.llm.as_ref().ok()?.clone()),
            context_files: self.context_files.clone(),
            system_md: self.system_md.clone(),
            broker: self.broker.clone(),
            sandbox: self.sandbox.clone(),
            sandbox_notes: Vec::new(),
            skills: self.skills.clone(),
            markdown_commands: self.markdown_commands.clone(),
            custom_tools: self.custom_tools.clone(),
            pending_tools: self.pending_tools.clone(),
            lsp: self.lsp.clone(),
            agents: self.agents.clone(),
            hooks: self.hooks.clone(),
            web_search: self.web_search.clone(),
            // The parent's checkpoints around the `Task` call hold the
            // child's changes.
            checkpoints: crate::checkpoint::Settings {
                enabled: false,
                ..self.checkpoints.clone()
            },
        })
    }
}

impl Project {
    /// Asks the proxy for its search tools, once per load
    /// ([`crate::web_search::probe`]).
    pub(crate) async fn probe_web_search(&self, cancel: &tokio_util::sync::CancellationToken) {
        if let Ok(llm) = &self.llm {
            let choice = &self.settings.web_search;
            crate::web_search::probe(llm, choice, &self.web_search, cancel).await;
        }
    }

    /// The commands the user can type: MAIA's, then one per skill, then
    /// the Markdown commands (a name already taken is skipped).
    pub(crate) fn command_entries(&self) -> Vec<CommandEntry> {
        let mut out: Vec<CommandEntry> = crate::slash::COMMANDS
            .iter()
            .map(|c| CommandEntry {
                name: c.name.to_owned(),
                description: c.description.to_owned(),
                hint: c.hint.map(str::to_owned),
            })
            .collect();
        for skill in &self.skills.skills {
            if out.iter().any(|c| c.name == skill.name) {
                continue;
            }
            out.push(CommandEntry {
                name: skill.name.clone(),
                description: format!("Skill: {}", skill.description),
                hint: Some(skill.hint.clone().unwrap_or_else(|| "arguments".to_owned())),
            });
        }
        for command in &self.markdown_commands.commands {
            if out.iter().any(|c| c.name == command.name) {
                continue;
            }
            out.push(CommandEntry {
                name: command.name.clone(),
                description: command.description.clone(),
                hint: command
                    .hint
                    .clone()
                    .or_else(|| command.takes_arguments.then(|| "arguments".to_owned())),
            });
        }
        // Built in, but a skill or Markdown command of its name replaces it.
        if !out.iter().any(|c| c.name == crate::review::NAME) {
            out.push(CommandEntry {
                name: crate::review::NAME.to_owned(),
                description: crate::review::DESCRIPTION.to_owned(),
                hint: Some(crate::review::HINT.to_owned()),
            });
        }
        out
    }
}

/// The custom tools the user has not confirmed as they are now.
fn pending_tools(home: Option<&Path>, cwd: &Path, tools: &LoadedTools) -> HashSet<String> {
    let prints: Vec<(String, String)> = tools
        .tools
        .iter()
        .map(|t| (t.name.clone(), t.fingerprint.clone()))
        .collect();
    permission::unconfirmed_tools(home, cwd, &prints)
        .into_iter()
        .collect()
}

/// The session's sandbox from the settings ([`settings::sandbox_policy`]),
/// with what to tell the user: why it is off, what it cannot enforce.
fn build_sandbox(
    files: &SettingsFiles,
    (cwd, roots): (&Path, &[PathBuf]),
    id: &str,
    managed: Option<&ManagedPolicy>,
) -> (Option<Arc<Sandbox>>, Vec<String>) {
    use maia_tools::sandbox::SandboxMode;
    let (mut policy, mut notes) = settings::sandbox_policy(files, cwd, id);
    notes.extend(maia_tools::process::containment_note().map(|n| format!("{n}.")));
    if let Some(managed) = managed {
        notes.extend(managed.sandbox.apply(&mut policy, &managed.path));
    }
    // Commands may write in the additional roots as in the cwd.
    policy.roots.extend(roots.iter().cloned());
    if policy.mode == SandboxMode::Off {
        return (None, notes);
    }
    match Sandbox::new(policy) {
        Ok(sandbox) => {
            for limit in sandbox.limits() {
                notes.push(format!("Command sandbox: {limit}."));
            }
            tracing::info!(mode = sandbox.policy().mode.id(), limits = ?sandbox.limits(), "command sandbox");
            (Some(Arc::new(sandbox)), notes)
        }
        Err(e) => {
            notes.push(format!(
                "Commands run without a sandbox: {e}. Bash, custom tools and !command can write anywhere you can."
            ));
            (None, notes)
        }
    }
}

/// Drops the settings' `model` and `smallModel` when the managed policy
/// does not allow them, with a warning naming the policy file (the session
/// then takes the first allowed model the endpoint lists).
pub(crate) fn bound_models(policy: &ManagedPolicy, settings: &mut settings::Settings) {
    for (key, slot) in [
        ("model", &mut settings.model),
        ("smallModel", &mut settings.small_model),
    ] {
        if let Some(model) = slot.as_deref()
            && let Err(refusal) = policy.check_model(model)
        {
            settings
                .warnings
                .push(format!("{refusal}; the settings' {key} is not used."));
            *slot = None;
        }
    }
}

/// The allow rules given to the process ([`EngineOptions::allow`]); one
/// that does not parse is logged and left out (front doors check them
/// before they start a session).
fn process_rules(allow: &[String]) -> crate::permission::RuleSet {
    let mut set = crate::permission::RuleSet::default();
    for text in allow {
        match crate::permission::Rule::parse(text) {
            Ok(rule) => set.add(crate::permission::Family::Allow, rule),
            Err(_) => tracing::warn!(rule = %text, "an allow rule that does not parse is left out"),
        }
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// One load reads each settings file once, and the settings, the
    /// sandbox and the rules all come from that read.
    #[test]
    fn a_load_reads_each_settings_file_once() {
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".maia")).unwrap();
        std::fs::create_dir_all(cwd.path().join(".maia")).unwrap();
        std::fs::write(
            home.path().join(".maia/settings.json"),
            r#"{"model":"from-home","sandbox":"off","permissions":{"deny":["Bash(rm *)"]}}"#,
        )
        .unwrap();
        std::fs::write(
            cwd.path().join(".maia/settings.json"),
            r#"{"max_turn_requests":7,"permissions":{"ask":["Read(./x)"]}}"#,
        )
        .unwrap();
        let options = EngineOptions {
            home: Some(home.path().to_path_buf()),
            ..Default::default()
        };
        let mut reads: HashMap<PathBuf, usize> = HashMap::new();
        let project = Project::load_with(
            Place {
                options: &options,
                cwd: cwd.path(),
                roots: &[],
                id: "0123",
            },
            &mut |path| {
                *reads.entry(path.to_path_buf()).or_default() += 1;
                std::fs::read_to_string(path)
            },
        );
        assert_eq!(reads.len(), 2, "{reads:?}");
        assert!(reads.values().all(|&n| n == 1), "{reads:?}");
        // Everything came from that one read.
        assert_eq!(project.settings.model.as_deref(), Some("from-home"));
        assert_eq!(project.settings.max_turn_requests, 7);
        assert!(project.sandbox.is_none(), "sandbox: off");
        assert_eq!(project.broker.lock().unwrap().loaded().count(), 2);
    }
}
