//! Agent definitions: `<name>.md` files in `.maia/agents` and
//! `.claude/agents` (of the home folder and of the working folder), in
//! Claude Code's format: a front matter with `name`, `description`, `tools`
//! (a comma list or a YAML list) and `model`, and the system prompt as the
//! body; plus the built-in read-only `explore` agent.
//!
//! A project's files must resolve inside the project and are bounded in
//! size, as Markdown commands are ([`crate::md_files::read_bounded`]). A
//! file that cannot be used is skipped with a warning that says why.

use std::path::{Path, PathBuf};

use yaml_rust2::{Yaml, YamlLoader};

use crate::md_files::{self, read_bounded};

/// The built-in read-only agent.
pub const EXPLORE: &str = "explore";

/// Which model an agent runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelChoice {
    /// The parent session's model (`inherit`, `sonnet`, `opus`, no `model`,
    /// or an alias MAIA does not know).
    Inherit,
    /// `smallModel` when set, else the session's model (`haiku`, and the
    /// built-in `explore`).
    Small,
    /// A model id, as written.
    Named(String),
}

/// One agent a `Task` call can start.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentDef {
    pub name: String,
    pub description: String,
    /// The tools it may use (`None`: every tool the rules allow). It only
    /// narrows: a name the session does not offer stays unavailable.
    pub tools: Option<Vec<String>>,
    /// Only the tools that declare they read, whatever their name (the
    /// built-in `explore`): the tool's own answer, no list of names.
    pub reads_only: bool,
    pub model: ModelChoice,
    /// Its own `fallbackModels` (`None`: the settings').
    pub fallback_models: Option<Vec<String>>,
    /// Its system prompt (the file's body); `None`: MAIA's own.
    pub prompt: Option<String>,
    /// The file it came from (`None`: built in).
    pub path: Option<PathBuf>,
}

/// The agents of a session and what went wrong loading them.
#[derive(Debug, Clone, Default)]
pub struct LoadedAgents {
    pub agents: Vec<AgentDef>,
    pub warnings: Vec<String>,
}

impl LoadedAgents {
    /// The agent called `name` (case-insensitive).
    pub fn get(&self, name: &str) -> Option<&AgentDef> {
        self.agents
            .iter()
            .find(|a| a.name.eq_ignore_ascii_case(name))
    }
}

/// The built-in `explore` agent: read-only tools, on `smallModel`.
pub fn explore() -> AgentDef {
    AgentDef {
        fallback_models: None,
        name: EXPLORE.to_owned(),
        description: "Read-only research in the project: finds files, reads code, searches text and the web, and reports what it found. Cannot change anything.".to_owned(),
        tools: None,
        reads_only: true,
        model: ModelChoice::Small,
        prompt: None,
        path: None,
    }
}

/// The folders agent files are read from, lowest precedence first.
fn roots(home: Option<&Path>, cwd: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(home) = home {
        out.push(home.join(".claude").join("agents"));
        out.push(home.join(".maia").join("agents"));
    }
    out.push(cwd.join(".claude").join("agents"));
    out.push(cwd.join(".maia").join("agents"));
    md_files::unique(out)
}

/// Loads the agents of a session in `cwd`: `explore`, then the files (a
/// later folder wins a name, and a file may replace `explore`).
pub fn load(home: Option<&Path>, cwd: &Path) -> LoadedAgents {
    let roots = roots(home, cwd).into_iter().map(|root| {
        let inside = root.starts_with(cwd).then(|| cwd.to_path_buf());
        (root, inside)
    });
    let (files, warnings) = md_files::load_layered(roots, load_root, |a: &AgentDef| &a.name);
    let mut agents = vec![explore()];
    for agent in files {
        agents.retain(|a| !a.name.eq_ignore_ascii_case(&agent.name));
        agents.push(agent);
    }
    agents.sort_by(|a, b| a.name.cmp(&b.name));
    LoadedAgents { agents, warnings }
}

fn load_root(root: &Path, inside: Option<&Path>, warnings: &mut Vec<String>) -> Vec<AgentDef> {
    md_files::list(root, warnings, |p| {
        p.extension().is_some_and(|e| e == "md") && p.is_file()
    })
    .iter()
    .filter_map(|path| match load_file(path, inside) {
        Ok(agent) => Some(agent),
        Err(e) => {
            warnings.push(format!("agent {}: {e}; skipped", path.display()));
            None
        }
    })
    .collect()
}

/// Reads one agent file (inside `inside` when given, bounded in size).
pub fn load_file(path: &Path, inside: Option<&Path>) -> Result<AgentDef, String> {
    let text = read_bounded(path, inside).map_err(|e| format!("cannot read it: {e}"))?;
    let stem = path.file_stem().and_then(|n| n.to_str()).unwrap_or("");
    let mut agent = parse(&text, stem)?;
    agent.path = Some(path.to_path_buf());
    Ok(agent)
}

/// A name a `Task` call can give.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

/// Parses an agent file's text; `stem` names it when the front matter
/// does not.
pub fn parse(text: &str, stem: &str) -> Result<AgentDef, String> {
    let Some((yaml, body)) = crate::skills::split_front_matter(text) else {
        return Err("it has no front matter (`---` lines with name and description)".into());
    };
    let docs =
        YamlLoader::load_from_str(yaml).map_err(|e| format!("invalid front matter ({e})"))?;
    let doc = match docs.into_iter().next() {
        Some(doc @ Yaml::Hash(_)) => doc,
        _ => return Err("invalid front matter (not a mapping of keys to values)".into()),
    };
    let text_field = |key: &str| -> Result<Option<String>, String> {
        match &doc[key] {
            Yaml::BadValue | Yaml::Null => Ok(None),
            Yaml::String(s) => Ok(Some(s.trim().to_owned()).filter(|s| !s.is_empty())),
            _ => Err(format!("invalid front matter (`{key}` must be text)")),
        }
    };
    let name = text_field("name")?.unwrap_or_else(|| stem.to_owned());
    if !valid_name(&name) {
        return Err(format!(
            "the name `{name}` must be letters, digits, `-`, `_`, `.` or `:`"
        ));
    }
    let description = text_field("description")?
        .ok_or_else(|| "the front matter has no description".to_owned())?;
    let tools = match &doc["tools"] {
        Yaml::BadValue | Yaml::Null => None,
        Yaml::String(list) => Some(
            list.split(',')
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty())
                .collect(),
        ),
        Yaml::Array(items) => Some(
            items
                .iter()
                .map(|item| match item {
                    Yaml::String(s) => Ok(s.trim().to_owned()),
                    _ => Err("invalid front matter (`tools` items must be tool names)".to_owned()),
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        _ => return Err("invalid front matter (`tools` must be a comma list or a list)".into()),
    };
    let model = match text_field("model")?.as_deref() {
        None | Some("inherit" | "sonnet" | "opus") => ModelChoice::Inherit,
        Some("haiku") => ModelChoice::Small,
        // A model id has a digit or a separator; another word is an alias
        // MAIA does not know: the session's model.
        Some(id) if id.contains(|c: char| c.is_ascii_digit() || "-/.:".contains(c)) => {
            ModelChoice::Named(id.to_owned())
        }
        Some(_) => ModelChoice::Inherit,
    };
    let fallback_models = match &doc["fallbackModels"] {
        Yaml::BadValue | Yaml::Null => None,
        Yaml::String(list) => Some(
            list.split(',')
                .map(|m| m.trim().to_owned())
                .filter(|m| !m.is_empty())
                .collect(),
        ),
        Yaml::Array(items) => Some(
            items
                .iter()
                .map(|item| match item {
                    Yaml::String(s) => Ok(s.trim().to_owned()),
                    _ => Err(
                        "invalid front matter (`fallbackModels` items must be model names)"
                            .to_owned(),
                    ),
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        _ => return Err("invalid front matter (`fallbackModels` must be a list)".into()),
    };
    let prompt = Some(body.trim().to_owned()).filter(|b| !b.is_empty());
    Ok(AgentDef {
        name,
        description,
        tools,
        reads_only: false,
        model,
        fallback_models,
        prompt,
        path: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_code_files_parse_with_either_tools_list() {
        let agent = parse(
            "---\nname: reviewer\ndescription: Reviews code\ntools: Read, Grep,Glob\nmodel: haiku\n---\nYou review.\n",
            "file",
        )
        .unwrap();
        assert_eq!(agent.name, "reviewer");
        assert_eq!(
            agent.tools.as_deref(),
            Some(&["Read".to_owned(), "Grep".into(), "Glob".into()][..])
        );
        assert_eq!(agent.model, ModelChoice::Small);
        assert_eq!(agent.prompt.as_deref(), Some("You review."));
        let listed = parse(
            "---\ndescription: d\ntools:\n  - Read\n  - Bash\nmodel: gpt-4o-mini\n---\nbody",
            "stem",
        )
        .unwrap();
        assert_eq!(listed.name, "stem");
        assert_eq!(listed.tools.unwrap(), ["Read", "Bash"]);
        assert_eq!(listed.model, ModelChoice::Named("gpt-4o-mini".into()));
        for inherit in ["inherit", "sonnet", "opus", "fancy"] {
            let text = format!("---\ndescription: d\nmodel: {inherit}\n---\n");
            assert_eq!(parse(&text, "x").unwrap().model, ModelChoice::Inherit);
        }
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let err = parse("---\ndescription: [unclosed\n---\n", "x").unwrap_err();
        assert!(err.contains("invalid front matter"), "{err}");
        let err = parse("no front matter", "x").unwrap_err();
        assert!(err.contains("no front matter"), "{err}");
        let err = parse("---\nname: x\n---\n", "x").unwrap_err();
        assert!(err.contains("no description"), "{err}");
        let err = parse("---\ndescription: d\ntools: 3\n---\n", "x").unwrap_err();
        assert!(err.contains("`tools`"), "{err}");
        let err = parse("---\nname: a b\ndescription: d\n---\n", "x").unwrap_err();
        assert!(err.contains("the name"), "{err}");
    }

    #[test]
    fn project_files_stay_inside_and_small_and_win_over_explore() {
        let cwd = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let dir = cwd.path().join(".maia/agents");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("explore.md"),
            "---\ndescription: my explorer\n---\nLook around.",
        )
        .unwrap();
        std::fs::write(
            outside.path().join("evil.md"),
            "---\ndescription: evil\n---\n",
        )
        .unwrap();
        std::os::unix::fs::symlink(outside.path().join("evil.md"), dir.join("evil.md")).unwrap();
        let big = format!(
            "---\ndescription: big\n---\n{}",
            "x".repeat(md_files::MAX_FILE_BYTES as usize)
        );
        std::fs::write(dir.join("big.md"), big).unwrap();
        let loaded = load(None, cwd.path());
        let names: Vec<&str> = loaded.agents.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["explore"]);
        assert_eq!(loaded.agents[0].description, "my explorer");
        let warnings = loaded.warnings.join("\n");
        assert!(
            warnings.contains("outside the project folder"),
            "{warnings}"
        );
        assert!(warnings.contains("larger than"), "{warnings}");
    }

    #[test]
    fn explore_is_built_in() {
        let cwd = tempfile::tempdir().unwrap();
        let loaded = load(None, cwd.path());
        let explore = loaded.get("Explore").unwrap();
        assert_eq!(explore.model, ModelChoice::Small);
        assert!(explore.reads_only && explore.tools.is_none());
    }
}
