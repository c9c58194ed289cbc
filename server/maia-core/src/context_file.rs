//! The project's context file: `MAIA.md`, else `CLAUDE.md`, else
//! `AGENTS.md`, in the working folder only (never its parents). Its text
//! starts the system prompt's project context.

use std::path::{Path, PathBuf};

/// Names tried, in order.
pub const NAMES: [&str; 3] = ["MAIA.md", "CLAUDE.md", "AGENTS.md"];
/// Characters of the file kept.
const MAX_CHARS: usize = 50_000;

/// A loaded context file.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextFile {
    pub path: PathBuf,
    pub text: String,
}

/// Loads the first context file found in `cwd`.
pub fn load(cwd: &Path) -> Option<ContextFile> {
    NAMES.iter().find_map(|name| {
        let path = cwd.join(name);
        let text = std::fs::read_to_string(&path).ok()?;
        Some(ContextFile {
            path,
            text: maia_tools::truncate_middle(&text, MAX_CHARS),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maia_md_wins_then_claude_then_agents() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()), None);
        std::fs::write(dir.path().join("AGENTS.md"), "agents").unwrap();
        assert_eq!(load(dir.path()).unwrap().text, "agents");
        std::fs::write(dir.path().join("CLAUDE.md"), "claude").unwrap();
        assert_eq!(load(dir.path()).unwrap().text, "claude");
        std::fs::write(dir.path().join("MAIA.md"), "maia").unwrap();
        assert_eq!(load(dir.path()).unwrap().text, "maia");
    }
}
