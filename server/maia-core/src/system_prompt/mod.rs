//! The system prompt sent first in every request: the doctrine (static,
//! so prompt caching keeps it cheap; or the user's own `SYSTEM.md`), the
//! skills, the MCP servers' instructions, the project's instructions (or the compaction summary that
//! replaced them), then the environment ([`environment`]), the only part
//! that changes from turn to turn.

pub mod environment;

use std::path::{Path, PathBuf};

use crate::context_file::ContextFile;

/// The built-in doctrine: what doing a task well means, for every model
/// family (no vendor-specific markup).
pub const DOCTRINE: &str = include_str!("doctrine.md");

/// Characters of a `SYSTEM.md` kept.
const MAX_SYSTEM_MD_CHARS: usize = 50_000;

/// A `SYSTEM.md` that replaces the built-in doctrine.
#[derive(Debug, Clone, PartialEq)]
pub struct SystemMd {
    pub path: PathBuf,
    pub text: String,
}

/// The `SYSTEM.md` in force: the project's `.maia/SYSTEM.md`, else the
/// user's `~/.maia/SYSTEM.md`. One wins (two prompts cannot both be the
/// prompt); an empty or unreadable file counts as absent.
pub fn system_md(home: Option<&Path>, cwd: &Path) -> Option<SystemMd> {
    let project = cwd.join(".maia").join("SYSTEM.md");
    let user = home.map(|h| h.join(".maia").join("SYSTEM.md"));
    [Some(project), user]
        .into_iter()
        .flatten()
        .find_map(|path| {
            let text = std::fs::read_to_string(&path).ok()?;
            (!text.trim().is_empty()).then(|| SystemMd {
                text: maia_tools::truncate_middle(text.trim(), MAX_SYSTEM_MD_CHARS),
                path,
            })
        })
}

/// What a session's system prompt is made of.
#[derive(Debug, Default)]
pub struct Parts<'a> {
    /// A `SYSTEM.md` in place of [`DOCTRINE`].
    pub system_md: Option<&'a SystemMd>,
    /// The instruction files, broad to narrow.
    pub context_files: &'a [ContextFile],
    /// A compaction summary: it replaces the instruction files.
    pub summary: Option<&'a str>,
    pub skills: Option<&'a str>,
    /// The MCP servers' instructions (`crate::mcp::instructions_section`):
    /// kept by a compaction, before the project's, which win.
    pub mcp_instructions: Option<&'a str>,
    /// The environment section ([`environment::section`]).
    pub environment: &'a str,
    /// Text mode: the short doctrine of [`crate::text_edits::PROMPT`].
    pub text_mode: bool,
}

/// Builds the system prompt.
pub fn build(parts: &Parts) -> String {
    let doctrine = if parts.text_mode {
        crate::text_edits::PROMPT
    } else {
        DOCTRINE.trim_end()
    };
    let mut prompt = parts
        .system_md
        .map_or(doctrine, |own| own.text.as_str())
        .to_owned();
    for section in [parts.skills, parts.mcp_instructions].into_iter().flatten() {
        prompt.push_str("\n\n");
        prompt.push_str(section);
    }
    if let Some(summary) = parts.summary {
        prompt.push_str(&format!(
            "\n\n# Summary of the conversation so far (it was compacted)\n\n{summary}"
        ));
    } else if let [only] = parts.context_files {
        prompt.push_str(&format!(
            "\n\n# Project instructions (from {})\n\nFollow these instructions from the project; where they conflict with the guidance above, they win.\n\n{}",
            only.path.display(),
            only.text.trim_end()
        ));
    } else if !parts.context_files.is_empty() {
        prompt.push_str(
            "\n\n# Project instructions\n\nFollow these instructions from the user and the project; where they conflict with the guidance above, they win. They run from the broadest (the user's) to the narrowest (the working folder's): where two conflict, the later one wins.",
        );
        for file in parts.context_files {
            prompt.push_str(&format!(
                "\n\n## From {} ({})\n\n{}",
                file.path.display(),
                file.scope.why(),
                file.text.trim_end()
            ));
        }
    }
    if !parts.environment.is_empty() {
        prompt.push_str("\n\n");
        prompt.push_str(parts.environment);
    }
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_doctrine_says_what_done_means_within_its_budget() {
        assert!(
            (3_000..=5_000).contains(&DOCTRINE.len()),
            "{}",
            DOCTRINE.len()
        );
        for needle in [
            "Do the whole task",
            "run its tests",
            "Do not commit, push",
            "change approach",
            "`path:line`",
            "user's language",
        ] {
            assert!(DOCTRINE.contains(needle), "{needle}");
        }
    }

    #[test]
    fn the_parts_in_their_order() {
        let file = ContextFile {
            path: PathBuf::from("/p/AGENTS.md"),
            text: "Use tabs.".into(),
            scope: crate::context_file::Scope::Root,
            chars: 9,
            cut: false,
        };
        let files = [file.clone()];
        let prompt = build(&Parts {
            context_files: &files,
            skills: Some("# Skills"),
            mcp_instructions: Some("# Instructions from MCP servers"),
            environment: "# Environment",
            ..Parts::default()
        });
        let at = |s: &str| prompt.find(s).unwrap();
        assert!(prompt.starts_with("You are MAIA"));
        assert!(at("# Skills") < at("# Instructions from MCP"));
        assert!(at("# Instructions from MCP") < at("Follow these instructions"));
        assert!(at("Use tabs.") < at("# Environment"));
        let two = [
            ContextFile {
                path: PathBuf::from("/home/.maia/MAIA.md"),
                text: "Be brief.".into(),
                scope: crate::context_file::Scope::User,
                chars: 9,
                cut: false,
            },
            file.clone(),
        ];
        let both = build(&Parts {
            context_files: &two,
            ..Parts::default()
        });
        assert!(both.find("Be brief.").unwrap() < both.find("Use tabs.").unwrap());
        assert!(
            both.contains("## From /p/AGENTS.md (repository root)"),
            "{both}"
        );
        let summary = build(&Parts {
            context_files: &files,
            summary: Some("we did x"),
            ..Parts::default()
        });
        assert!(summary.contains("we did x") && !summary.contains("Use tabs."));
    }

    #[test]
    fn a_system_md_replaces_the_doctrine_project_first() {
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        assert_eq!(system_md(Some(home.path()), cwd.path()), None);
        std::fs::create_dir_all(home.path().join(".maia")).unwrap();
        std::fs::write(home.path().join(".maia/SYSTEM.md"), "mine").unwrap();
        assert_eq!(
            system_md(Some(home.path()), cwd.path()).unwrap().text,
            "mine"
        );
        std::fs::create_dir_all(cwd.path().join(".maia")).unwrap();
        std::fs::write(cwd.path().join(".maia/SYSTEM.md"), "  \n").unwrap();
        assert_eq!(
            system_md(Some(home.path()), cwd.path()).unwrap().text,
            "mine",
            "an empty file counts as absent"
        );
        std::fs::write(cwd.path().join(".maia/SYSTEM.md"), "project's").unwrap();
        let own = system_md(Some(home.path()), cwd.path()).unwrap();
        assert_eq!(own.text, "project's");
        let prompt = build(&Parts {
            system_md: Some(&own),
            ..Parts::default()
        });
        assert_eq!(prompt, "project's");
    }
}
