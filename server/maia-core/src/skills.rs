//! Skills: `.maia/skills/<name>/SKILL.md` (or `skill.md`) from
//! `~/.maia/skills`, the working folder's parent and the working folder,
//! and in the layout of the agentskills format other agents use,
//! `~/.claude/skills` and `<cwd>/.claude/skills`. MAIA's own places win
//! over `.claude` ones; within each, the most specific place wins when two
//! skills share a name ([`roots`]).
//!
//! A skill file starts with a YAML front matter between `---` lines:
//! `description` (required) and `name` (optional; the folder name wins when
//! they differ). A space before the colon (`description : …`) is tolerated.
//! Only names and descriptions go into the system prompt; the body is loaded
//! on demand by the `Skill` tool, or run directly by the user with
//! `§name args` (`$ARGUMENTS` in the body is replaced by the arguments).

use std::path::{Path, PathBuf};

use maia_llm::ToolSpec;
use serde_json::json;
use yaml_rust2::{Yaml, YamlLoader};

/// Name of the tool that loads a skill's instructions.
pub const TOOL_NAME: &str = "Skill";
/// File names tried in a skill folder, in order.
pub const FILE_NAMES: [&str; 2] = ["SKILL.md", "skill.md"];
/// The character that starts a direct invocation typed by the user.
pub const INVOCATION_PREFIX: char = '§';
/// Placeholder replaced by the arguments in a skill's body.
pub const ARGUMENTS_PLACEHOLDER: &str = "$ARGUMENTS";

/// One skill available to the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// The folder's name (it wins over a front-matter `name`).
    pub name: String,
    pub description: String,
    /// The `SKILL.md` (or `skill.md`) file.
    pub path: PathBuf,
    /// The skill's folder.
    pub dir: PathBuf,
    /// The front matter's `argument-hint`.
    pub hint: Option<String>,
    /// For a project's skill, the folder its file must resolve inside (symlinks followed):
    /// a cloned repository's `SKILL.md` must not be a link to the user's keys.
    pub inside: Option<PathBuf>,
}

/// The result of [`load`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadedSkills {
    /// Sorted by name.
    pub skills: Vec<Skill>,
    /// Problems found (each names the file or folder).
    pub warnings: Vec<String>,
}

impl LoadedSkills {
    /// The skill called `name`, if any.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        find(&self.skills, name)
    }
}

/// The `skills` folders read, lowest precedence first (duplicates removed,
/// e.g. when the working folder's parent is the home folder): the
/// `.claude/skills` folders of the home and working folders, then MAIA's
/// own `.maia/skills` of the home folder, the working folder's parent and
/// the working folder. A later folder wins a name: MAIA's places always
/// win over `.claude` ones, and within each the most specific wins.
pub fn roots(home: Option<&Path>, cwd: &Path) -> Vec<PathBuf> {
    let claude = [home, Some(cwd)]
        .into_iter()
        .flatten()
        .map(|base| base.join(".claude").join("skills"));
    let maia = [home, cwd.parent(), Some(cwd)]
        .into_iter()
        .flatten()
        .map(|base| base.join(".maia").join("skills"));
    crate::md_files::unique(claude.chain(maia))
}

/// Loads the skills for a session in `cwd`; `home` is the user's home
/// folder. Problems are returned as warnings (and logged), never errors.
pub fn load(home: Option<&Path>, cwd: &Path) -> LoadedSkills {
    let personal: Vec<PathBuf> = home
        .map(|home| {
            [".claude", ".maia"]
                .iter()
                .map(|dot| home.join(dot).join("skills"))
                .collect()
        })
        .unwrap_or_default();
    let roots = roots(home, cwd).into_iter().map(|root| {
        // `<project>/.maia/skills` → `<project>`; the user's own folders may link anywhere.
        let inside = (!personal.contains(&root))
            .then(|| root.parent().and_then(Path::parent).map(Path::to_path_buf))
            .flatten();
        (root, inside)
    });
    // A more specific place replaces a skill of the same name.
    let (skills, warnings) = crate::md_files::load_layered(roots, load_root, |s| &s.name);
    LoadedSkills { skills, warnings }
}

/// The skill called `name` in `skills`.
pub fn find<'a>(skills: &'a [Skill], name: &str) -> Option<&'a Skill> {
    skills.iter().find(|s| s.name == name)
}

fn load_root(root: &Path, inside: Option<&Path>, warnings: &mut Vec<String>) -> Vec<Skill> {
    let dirs = crate::md_files::list(root, warnings, Path::is_dir);
    dirs.iter()
        .filter_map(|dir| load_skill(dir, inside, warnings))
        .collect()
}

fn load_skill(dir: &Path, inside: Option<&Path>, warnings: &mut Vec<String>) -> Option<Skill> {
    let Some(folder) = dir.file_name().and_then(|n| n.to_str()) else {
        warnings.push(format!(
            "skill folder {} has a name that is not valid UTF-8; skipped",
            dir.display()
        ));
        return None;
    };
    let Some(path) = FILE_NAMES.iter().map(|n| dir.join(n)).find(|p| p.is_file()) else {
        warnings.push(format!(
            "skill folder {} has no SKILL.md; skipped",
            dir.display()
        ));
        return None;
    };
    let text = match crate::md_files::read_bounded(&path, inside) {
        Ok(text) => text,
        Err(e) => {
            warnings.push(format!(
                "cannot read skill {}: {e}; skipped",
                path.display()
            ));
            return None;
        }
    };
    let header = match parse_front_matter(&text) {
        Ok(header) => header,
        Err(e) => {
            warnings.push(format!(
                "skill {}: invalid front matter ({e}); skipped",
                path.display()
            ));
            return None;
        }
    };
    let description = match header.description {
        Some(d) if !d.trim().is_empty() => d.trim().to_string(),
        _ => {
            warnings.push(format!(
                "skill {}: the front matter has no description; skipped",
                path.display()
            ));
            return None;
        }
    };
    if let Some(name) = header.name
        && name != folder
    {
        warnings.push(format!(
            "skill {}: name `{name}` differs from its folder `{folder}`; the folder name `{folder}` is used",
            path.display()
        ));
    }
    Some(Skill {
        name: folder.to_string(),
        description,
        path,
        dir: dir.to_path_buf(),
        hint: header.argument_hint.filter(|h| !h.trim().is_empty()),
        inside: inside.map(Path::to_path_buf),
    })
}

/// What the front matter says.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Header {
    pub name: Option<String>,
    pub description: Option<String>,
    /// `argument-hint`: what the arguments are, shown by the editor.
    pub argument_hint: Option<String>,
}

/// Splits `text` into its front matter (the lines between a first `---`
/// line and the next `---` line) and the rest. `None` when the text does not
/// start with a front matter.
pub(crate) fn split_front_matter(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let first_end = text.find('\n').unwrap_or(text.len());
    if text[..first_end].trim_end() != "---" {
        return None;
    }
    let mut pos = (first_end + 1).min(text.len());
    let yaml_start = pos;
    while pos < text.len() {
        let end = text[pos..].find('\n').map_or(text.len(), |i| pos + i);
        if text[pos..end].trim_end() == "---" {
            let rest = text.get(end + 1..).unwrap_or("");
            return Some((&text[yaml_start..pos], rest));
        }
        pos = end + 1;
    }
    None
}

/// Removes spaces before the colon of a top-level key (`description : x`
/// → `description: x`), which MAIA tolerates, and makes the separator after
/// the colon one space (YAML rejects a tab there).
fn normalise_keys(yaml: &str) -> String {
    let mut out = String::with_capacity(yaml.len());
    for line in yaml.split_inclusive('\n') {
        let key_len = line
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(line.len());
        let after = &line[key_len..];
        let trimmed = after.trim_start_matches([' ', '\t']);
        if key_len > 0
            && trimmed.starts_with(':')
            && trimmed[1..]
                .chars()
                .next()
                .is_none_or(|c| c.is_whitespace())
        {
            out.push_str(&line[..key_len]);
            out.push(':');
            let value = trimmed[1..].trim_start_matches([' ', '\t']);
            if !value.is_empty() && !value.starts_with(['\r', '\n']) {
                out.push(' ');
            }
            out.push_str(value);
        } else {
            out.push_str(line);
        }
    }
    out
}

pub(crate) fn parse_front_matter(text: &str) -> Result<Header, String> {
    let Some((yaml, _)) = split_front_matter(text) else {
        // No front matter: there is no description.
        return Ok(Header::default());
    };
    let docs = YamlLoader::load_from_str(&normalise_keys(yaml)).map_err(|e| e.to_string())?;
    let doc = match docs.into_iter().next() {
        None | Some(Yaml::Null) => return Ok(Header::default()),
        Some(doc @ Yaml::Hash(_)) => doc,
        Some(_) => return Err("it is not a mapping of keys to values".into()),
    };
    let text_field = |key: &str| -> Result<Option<String>, String> {
        match &doc[key] {
            Yaml::BadValue | Yaml::Null => Ok(None),
            Yaml::String(s) => Ok(Some(s.clone())),
            Yaml::Integer(i) => Ok(Some(i.to_string())),
            Yaml::Real(r) => Ok(Some(r.clone())),
            Yaml::Boolean(b) => Ok(Some(b.to_string())),
            _ => Err(format!("`{key}` must be text")),
        }
    };
    Ok(Header {
        name: text_field("name")?,
        description: text_field("description")?,
        argument_hint: text_field("argument-hint")?,
    })
}

/// The system prompt's section listing the skills; `None` when there are
/// none.
pub fn prompt_section(skills: &[Skill]) -> Option<String> {
    if skills.is_empty() {
        return None;
    }
    let mut out = String::from(
        "# Skills\n\n\
         Skills are instructions written for particular tasks. When a task matches a skill's \
         description, call the `Skill` tool with the skill's name to load its instructions, \
         then follow them. The available skills (name: description):\n",
    );
    for skill in skills {
        let description = skill.description.split_whitespace().collect::<Vec<_>>();
        out.push_str(&format!("\n- {}: {}", skill.name, description.join(" ")));
    }
    Some(out)
}

/// The skill's instructions: its file without the front matter, with
/// `$ARGUMENTS` replaced by `arguments`.
pub fn body(skill: &Skill, arguments: &str) -> std::io::Result<String> {
    let text = crate::md_files::read_bounded(&skill.path, skill.inside.as_deref())?;
    Ok(body_of(&text, arguments))
}

/// What a skill typed by the user sends (`§name args`, `/name args`): its
/// instructions, read once, with the arguments put in (see
/// [`message_of`]).
pub fn typed_message(skill: &Skill, arguments: &str) -> std::io::Result<String> {
    let text = crate::md_files::read_bounded(&skill.path, skill.inside.as_deref())?;
    Ok(message_of(&text, arguments))
}

/// A skill's or Markdown command's `text` as a message: its body with
/// `$ARGUMENTS` replaced by `arguments`, or the arguments appended when the
/// body does not use them.
pub(crate) fn message_of(text: &str, arguments: &str) -> String {
    let mut out = body_of(text, arguments);
    if !arguments.is_empty() && !text.contains(ARGUMENTS_PLACEHOLDER) {
        out.push_str(&format!("\n\nArguments: {arguments}"));
    }
    out
}

pub(crate) fn body_of(text: &str, arguments: &str) -> String {
    let body = match split_front_matter(text) {
        Some((_, rest)) => rest,
        None => text.strip_prefix('\u{feff}').unwrap_or(text),
    };
    let body = body.trim_start_matches(['\r', '\n']);
    body.replace(ARGUMENTS_PLACEHOLDER, arguments)
}

/// A direct invocation typed by the user at the start of a prompt:
/// `§name args` → `(name, args)` (arguments trimmed, possibly empty).
pub fn parse_invocation(text: &str) -> Option<(&str, &str)> {
    let rest = text.trim_start().strip_prefix(INVOCATION_PREFIX)?;
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let name = &rest[..end];
    if name.is_empty() {
        return None;
    }
    Some((name, rest[end..].trim()))
}

/// The `Skill` tool as offered to the model.
pub fn tool_definition() -> ToolSpec {
    ToolSpec {
        name: TOOL_NAME.to_string(),
        description: "Loads the full instructions of a skill listed in the system prompt's \
                      Skills section. Call it when the task matches the skill's description, \
                      then follow the instructions it returns."
            .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "skill": {
                    "type": "string",
                    "description": "The skill's name, exactly as listed."
                },
                "arguments": {
                    "type": "string",
                    "description": "Optional arguments for the skill (they replace $ARGUMENTS in its instructions)."
                }
            },
            "required": ["skill"],
            "additionalProperties": false
        }),
    }
}

/// The `Skill` tool's input.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct SkillInput {
    pub skill: String,
    #[serde(default)]
    pub arguments: String,
}

impl SkillInput {
    /// Parses the model's JSON arguments.
    pub fn parse(arguments: &str) -> Result<Self, String> {
        let text = if arguments.trim().is_empty() {
            "{}"
        } else {
            arguments
        };
        serde_json::from_str(text).map_err(|e| format!("invalid Skill input: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_skill(base: &Path, folder: &str, file: &str, text: &str) -> PathBuf {
        let dir = base.join(".maia").join("skills").join(folder);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(file);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn names(loaded: &LoadedSkills) -> Vec<&str> {
        loaded.skills.iter().map(|s| s.name.as_str()).collect()
    }

    /// home, parent (`/X`) and cwd (`/X/Y`) in separate trees.
    struct Places {
        _tmp: tempfile::TempDir,
        home: PathBuf,
        parent: PathBuf,
        cwd: PathBuf,
    }

    fn places() -> Places {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let parent = tmp.path().join("X");
        let cwd = parent.join("Y");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&cwd).unwrap();
        Places {
            _tmp: tmp,
            home,
            parent,
            cwd,
        }
    }

    #[test]
    fn loads_from_three_places_most_specific_wins() {
        let p = places();
        write_skill(
            &p.home,
            "shared",
            "SKILL.md",
            "---\ndescription: from home\n---\nH",
        );
        write_skill(
            &p.home,
            "home_only",
            "SKILL.md",
            "---\ndescription: h\n---\n",
        );
        write_skill(
            &p.parent,
            "shared",
            "SKILL.md",
            "---\ndescription: from parent\n---\nP",
        );
        write_skill(
            &p.parent,
            "parent_only",
            "skill.md",
            "---\ndescription: p\n---\n",
        );
        write_skill(
            &p.cwd,
            "shared",
            "SKILL.md",
            "---\ndescription: from cwd\n---\nC",
        );
        write_skill(&p.home, "hp", "SKILL.md", "---\ndescription: home\n---\n");
        write_skill(
            &p.parent,
            "hp",
            "SKILL.md",
            "---\ndescription: parent\n---\n",
        );

        let loaded = load(Some(&p.home), &p.cwd);
        assert_eq!(loaded.warnings, Vec::<String>::new());
        assert_eq!(names(&loaded), ["home_only", "hp", "parent_only", "shared"]);
        let shared = loaded.get("shared").unwrap();
        assert_eq!(shared.description, "from cwd");
        assert_eq!(shared.dir, p.cwd.join(".maia/skills/shared"));
        assert_eq!(shared.path, p.cwd.join(".maia/skills/shared/SKILL.md"));
        assert_eq!(body(shared, "").unwrap(), "C");
        assert_eq!(loaded.get("hp").unwrap().description, "parent");
        assert_eq!(
            loaded.get("parent_only").unwrap().path,
            p.parent.join(".maia/skills/parent_only/skill.md")
        );

        // Without a home folder the home skills are simply absent.
        let loaded = load(None, &p.cwd);
        assert_eq!(names(&loaded), ["hp", "parent_only", "shared"]);
    }

    #[test]
    fn project_skills_stay_in_the_project_and_are_bounded() {
        let p = places();
        let secret = p.home.join("id_ed25519");
        std::fs::write(&secret, "---\ndescription: key\n---\nPRIVATE KEY").unwrap();
        // A cloned repository's skill that links to the user's key is skipped …
        let linked = p.cwd.join(".claude/skills/review");
        std::fs::create_dir_all(&linked).unwrap();
        std::os::unix::fs::symlink(&secret, linked.join("SKILL.md")).unwrap();
        let folder = p.cwd.join(".maia/skills/leak");
        std::fs::create_dir_all(p.cwd.join(".maia/skills")).unwrap();
        std::os::unix::fs::symlink(p.home.join("keys"), &folder).unwrap();
        std::fs::create_dir_all(p.home.join("keys")).unwrap();
        std::fs::copy(&secret, p.home.join("keys/SKILL.md")).unwrap();
        // … as is a huge one; a link inside the project is fine.
        let huge = p.cwd.join(".maia/skills/huge");
        std::fs::create_dir_all(&huge).unwrap();
        let mut text = String::from("---\ndescription: big\n---\n");
        text.push_str(&"x".repeat(300 * 1024));
        std::fs::write(huge.join("SKILL.md"), text).unwrap();
        let ok = p.cwd.join(".maia/skills/ok");
        std::fs::create_dir_all(&ok).unwrap();
        std::fs::write(p.cwd.join("ok.md"), "---\ndescription: fine\n---\nOK").unwrap();
        std::os::unix::fs::symlink(p.cwd.join("ok.md"), ok.join("SKILL.md")).unwrap();
        // The user's own folders may link anywhere.
        let mine = p.home.join(".maia/skills/mine");
        std::fs::create_dir_all(&mine).unwrap();
        std::os::unix::fs::symlink(&secret, mine.join("SKILL.md")).unwrap();

        let loaded = load(Some(&p.home), &p.cwd);
        let names: Vec<&str> = loaded.skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["mine", "ok"], "{:?}", loaded.warnings);
        for skipped in ["review", "leak", "huge"] {
            assert!(
                loaded.warnings.iter().any(|w| w.contains(skipped)),
                "{skipped}: {:?}",
                loaded.warnings
            );
        }
        // A skill re-pointed after loading is refused when it runs.
        std::fs::remove_file(p.cwd.join("ok.md")).unwrap();
        std::os::unix::fs::symlink(&secret, p.cwd.join("ok.md")).unwrap();
        let skill = loaded.get("ok").unwrap();
        assert!(body(skill, "").is_err());
    }

    #[test]
    fn claude_layout_loads_and_maia_places_win() {
        let p = places();
        let claude = |base: &Path, folder: &str, text: &str| {
            let dir = base.join(".claude/skills").join(folder);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("SKILL.md"), text).unwrap();
        };
        claude(
            &p.home,
            "review",
            "---\nname: review\ndescription: claude home\n---\nCH",
        );
        claude(
            &p.cwd,
            "review",
            "---\nname: review\ndescription: claude project\n---\nCP",
        );
        claude(
            &p.home,
            "both",
            "---\nname: both\ndescription: claude home\n---\n",
        );
        claude(
            &p.cwd,
            "pdf",
            "---\nname: pdf\ndescription: fill PDF forms\nlicense: MIT\nallowed-tools: Bash\n---\nP $ARGUMENTS",
        );
        write_skill(
            &p.home,
            "both",
            "SKILL.md",
            "---\ndescription: maia home\n---\n",
        );
        let loaded = load(Some(&p.home), &p.cwd);
        assert_eq!(names(&loaded), ["both", "pdf", "review"]);
        // The project's .claude skill wins over the home's .claude one…
        assert_eq!(loaded.get("review").unwrap().description, "claude project");
        // …and any MAIA place wins over any .claude one.
        assert_eq!(loaded.get("both").unwrap().description, "maia home");
        let pdf = loaded.get("pdf").unwrap();
        assert_eq!(body(pdf, "a.pdf").unwrap(), "P a.pdf");
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    }

    #[test]
    fn no_skills_folder_is_not_an_error() {
        let p = places();
        let loaded = load(Some(&p.home), &p.cwd);
        assert_eq!(loaded, LoadedSkills::default());
        assert_eq!(prompt_section(&loaded.skills), None);
    }

    #[test]
    fn same_folder_read_once() {
        // Home is the working folder's parent: its skills load once, no
        // duplicate.
        let p = places();
        write_skill(&p.parent, "a", "SKILL.md", "---\ndescription: a\n---\n");
        // Two .claude folders (home, cwd) and two .maia ones.
        assert_eq!(roots(Some(&p.parent), &p.cwd).len(), 4);
        let loaded = load(Some(&p.parent), &p.cwd);
        assert_eq!(names(&loaded), ["a"]);
        // Root folder: no parent.
        assert_eq!(
            roots(None, Path::new("/")),
            [
                PathBuf::from("/.claude/skills"),
                PathBuf::from("/.maia/skills")
            ]
        );
    }

    #[test]
    fn missing_or_empty_description_is_skipped_with_a_warning() {
        let p = places();
        write_skill(&p.cwd, "nodesc", "SKILL.md", "---\nname: nodesc\n---\nbody");
        write_skill(
            &p.cwd,
            "emptydesc",
            "SKILL.md",
            "---\ndescription: \"  \"\n---\n",
        );
        write_skill(&p.cwd, "nofront", "SKILL.md", "just a body\n");
        write_skill(&p.cwd, "emptyfront", "SKILL.md", "---\n---\nbody\n");
        write_skill(&p.cwd, "ok", "SKILL.md", "---\ndescription: fine\n---\n");
        let loaded = load(None, &p.cwd);
        assert_eq!(names(&loaded), ["ok"]);
        assert_eq!(loaded.warnings.len(), 4, "{:?}", loaded.warnings);
        for folder in ["nodesc", "emptydesc", "nofront", "emptyfront"] {
            let file = p.cwd.join(".maia/skills").join(folder).join("SKILL.md");
            assert!(
                loaded.warnings.iter().any(
                    |w| w.contains(&file.display().to_string()) && w.contains("no description")
                ),
                "{folder}: {:?}",
                loaded.warnings
            );
        }
    }

    #[test]
    fn invalid_front_matter_is_skipped_with_a_warning() {
        let p = places();
        let bad = write_skill(
            &p.cwd,
            "bad",
            "SKILL.md",
            "---\ndescription: [unclosed\n---\nbody",
        );
        let list = write_skill(&p.cwd, "list", "SKILL.md", "---\n- a\n- b\n---\n");
        let unclosed = write_skill(
            &p.cwd,
            "unclosed",
            "SKILL.md",
            "---\ndescription: never closed\n",
        );
        write_skill(
            &p.cwd,
            "nested",
            "SKILL.md",
            "---\ndescription:\n  a: b\n---\n",
        );
        write_skill(
            &p.cwd,
            "good",
            "SKILL.md",
            "---\ndescription: good one\n---\n",
        );
        let loaded = load(None, &p.cwd);
        assert_eq!(names(&loaded), ["good"]);
        assert_eq!(loaded.warnings.len(), 4, "{:?}", loaded.warnings);
        let warned = |path: &Path, what: &str| {
            loaded
                .warnings
                .iter()
                .any(|w| w.contains(&path.display().to_string()) && w.contains(what))
        };
        assert!(
            warned(&bad, "invalid front matter"),
            "{:?}",
            loaded.warnings
        );
        assert!(
            warned(&list, "invalid front matter"),
            "{:?}",
            loaded.warnings
        );
        // An unclosed front matter reads as no front matter: no description.
        assert!(warned(&unclosed, "no description"), "{:?}", loaded.warnings);
        assert!(
            loaded
                .warnings
                .iter()
                .any(|w| w.contains("nested") && w.contains("`description` must be text")),
            "{:?}",
            loaded.warnings
        );
    }

    #[test]
    fn folder_without_skill_file_is_reported() {
        let p = places();
        std::fs::create_dir_all(p.cwd.join(".maia/skills/empty")).unwrap();
        std::fs::write(p.cwd.join(".maia/skills/README.md"), "not a folder").unwrap();
        let loaded = load(None, &p.cwd);
        assert!(loaded.skills.is_empty());
        assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
        assert!(loaded.warnings[0].contains("has no SKILL.md"));
    }

    #[test]
    fn name_differing_from_folder_warns_and_folder_wins() {
        let p = places();
        let path = write_skill(
            &p.cwd,
            "deploy",
            "SKILL.md",
            "---\nname: release\ndescription: Ship it\n---\nSteps",
        );
        write_skill(
            &p.cwd,
            "same",
            "SKILL.md",
            "---\nname: same\ndescription: Same name\n---\n",
        );
        let loaded = load(None, &p.cwd);
        assert_eq!(names(&loaded), ["deploy", "same"]);
        assert_eq!(loaded.warnings.len(), 1);
        let w = &loaded.warnings[0];
        assert!(w.contains(&path.display().to_string()), "{w}");
        assert!(
            w.contains("`release`") && w.contains("`deploy` is used"),
            "{w}"
        );
    }

    #[test]
    fn space_before_colon_is_tolerated() {
        let p = places();
        write_skill(
            &p.cwd,
            "sk_test",
            "SKILL.md",
            "---\nname : sk_test\ndescription : Lance les tests du projet et résume les échecs\n---\nInstructions",
        );
        write_skill(
            &p.cwd,
            "tabs",
            "SKILL.md",
            "---\r\ndescription\t:\tWith tabs and CRLF\r\n---\r\nBody\r\n",
        );
        let loaded = load(None, &p.cwd);
        assert_eq!(loaded.warnings, Vec::<String>::new());
        assert_eq!(
            loaded.get("sk_test").unwrap().description,
            "Lance les tests du projet et résume les échecs"
        );
        assert_eq!(
            loaded.get("tabs").unwrap().description,
            "With tabs and CRLF"
        );
        assert_eq!(body(loaded.get("tabs").unwrap(), "").unwrap(), "Body\r\n");
    }

    #[test]
    fn normalise_keys_only_touches_key_colons() {
        assert_eq!(
            normalise_keys("description : a: b\n"),
            "description: a: b\n"
        );
        assert_eq!(normalise_keys("name:x\n"), "name:x\n");
        assert_eq!(normalise_keys("key :\n"), "key:\n");
        assert_eq!(normalise_keys("key :\r\n"), "key:\r\n");
        assert_eq!(normalise_keys("key\t:\t v\n"), "key: v\n");
        assert_eq!(normalise_keys("key: |\n  a : b\n"), "key: |\n  a : b\n");
        assert_eq!(normalise_keys("  - item : x\n"), "  - item : x\n");
        assert_eq!(normalise_keys("a b : c\n"), "a b : c\n");
        assert_eq!(normalise_keys("url :http://x\n"), "url :http://x\n");
    }

    #[test]
    fn yaml_features_work() {
        let header = parse_front_matter(
            "---\n# a comment\ndescription: >\n  Folded\n  text\nname: 'quoted'\nextra: [1, 2]\n---\n",
        )
        .unwrap();
        assert_eq!(header.description.as_deref(), Some("Folded text\n"));
        assert_eq!(header.name.as_deref(), Some("quoted"));
        // Leading BOM.
        let header = parse_front_matter("\u{feff}---\ndescription: d\n---\n").unwrap();
        assert_eq!(header.description.as_deref(), Some("d"));
    }

    #[test]
    fn body_strips_front_matter_and_replaces_arguments() {
        let p = places();
        write_skill(
            &p.cwd,
            "greet",
            "SKILL.md",
            "---\ndescription: Greets\n---\n\nSay hello to $ARGUMENTS.\nAgain: $ARGUMENTS\n---\nnot front matter\n",
        );
        let loaded = load(None, &p.cwd);
        let skill = loaded.get("greet").unwrap();
        assert_eq!(
            body(skill, "Ada Lovelace").unwrap(),
            "Say hello to Ada Lovelace.\nAgain: Ada Lovelace\n---\nnot front matter\n"
        );
        assert_eq!(
            body(skill, "").unwrap(),
            "Say hello to .\nAgain: \n---\nnot front matter\n"
        );
        // A value containing the placeholder is not expanded again.
        assert_eq!(body_of("x $ARGUMENTS y", "$ARGUMENTS!"), "x $ARGUMENTS! y");
        assert_eq!(body_of("no front matter", "a"), "no front matter");

        std::fs::remove_file(&skill.path).unwrap();
        assert!(body(skill, "").is_err());
    }

    #[test]
    fn prompt_section_lists_names_and_descriptions() {
        let p = places();
        write_skill(
            &p.cwd,
            "b",
            "SKILL.md",
            "---\ndescription: Second\n  line\n---\n",
        );
        write_skill(
            &p.cwd,
            "a",
            "SKILL.md",
            "---\ndescription: First\n---\nSECRET BODY",
        );
        let loaded = load(None, &p.cwd);
        let section = prompt_section(&loaded.skills).unwrap();
        assert!(section.contains("`Skill` tool"), "{section}");
        assert!(
            section.ends_with("\n- a: First\n- b: Second line"),
            "{section}"
        );
        assert!(!section.contains("SECRET BODY"));
    }

    #[test]
    fn invocations() {
        assert_eq!(parse_invocation("§sk_test"), Some(("sk_test", "")));
        assert_eq!(
            parse_invocation("§sk_test  run the unit tests \n"),
            Some(("sk_test", "run the unit tests"))
        );
        assert_eq!(
            parse_invocation("  §deploy\nline two"),
            Some(("deploy", "line two"))
        );
        assert_eq!(parse_invocation("§"), None);
        assert_eq!(parse_invocation("§ name"), None);
        assert_eq!(parse_invocation("run §name"), None);
        assert_eq!(parse_invocation("/name"), None);
        assert_eq!(parse_invocation("§été à"), Some(("été", "à")));
    }

    #[test]
    fn tool_definition_schema() {
        let def = tool_definition();
        assert_eq!(def.name, "Skill");
        assert!(!def.description.is_empty());
        assert_eq!(def.parameters["required"], json!(["skill"]));
        assert_eq!(def.parameters["properties"]["skill"]["type"], "string");
        assert_eq!(def.parameters["properties"]["arguments"]["type"], "string");
        assert_eq!(
            SkillInput::parse(r#"{"skill":"a"}"#).unwrap(),
            SkillInput {
                skill: "a".into(),
                arguments: String::new()
            }
        );
        assert_eq!(
            SkillInput::parse(r#"{"skill":"a","arguments":"x y"}"#)
                .unwrap()
                .arguments,
            "x y"
        );
        assert!(SkillInput::parse("").is_err());
        assert!(SkillInput::parse(r#"{"arguments":"x"}"#).is_err());
    }
}
