//! The system prompt's dynamic section: today's date, the working folder,
//! its git state (branch, uncommitted changes), the language servers in
//! use, the platform and the shell `Bash` really runs. Made once a turn
//! (the date and the git state may change between turns, not within one).

use std::path::Path;
use std::time::Duration;

/// How long `git status` may take before the section goes without it.
const GIT_WAIT: Duration = Duration::from_secs(2);

/// The git state of a folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitState {
    /// The branch, or `None` on a detached head.
    pub branch: Option<String>,
    /// Whether tracked files have uncommitted changes.
    pub dirty: bool,
}

/// The environment section for a session in `cwd`.
pub async fn section(cwd: &Path, servers: &[String]) -> String {
    let git = git_state(cwd).await;
    render(cwd, &today(), git.as_ref(), servers, maia_tools::shell())
}

/// Today's date (UTC), `YYYY-MM-DD`.
pub fn today() -> String {
    crate::store::iso8601(crate::store::now_secs())
        .chars()
        .take(10)
        .collect()
}

fn render(
    cwd: &Path,
    date: &str,
    git: Option<&GitState>,
    servers: &[String],
    shell: &maia_tools::Shell,
) -> String {
    let git = match git {
        None => "no (not a git repository)".to_owned(),
        Some(state) => format!(
            "yes, on {}, {}",
            state
                .branch
                .as_deref()
                .map_or_else(|| "a detached HEAD".to_owned(), |b| format!("branch `{b}`")),
            if state.dirty {
                "with uncommitted changes"
            } else {
                "no uncommitted changes"
            }
        ),
    };
    let servers = if servers.is_empty() {
        "none".to_owned()
    } else {
        servers.join(", ")
    };
    let shell = if shell.posix {
        format!("{} (POSIX sh)", shell.path.display())
    } else {
        format!("{} (bash)", shell.path.display())
    };
    format!(
        "# Environment\n\
         - Today's date: {date}\n\
         - Working folder: {cwd} (relative paths are resolved against it)\n\
         - Git repository: {git}\n\
         - Language servers: {servers}\n\
         - Platform: {os}; Bash runs commands with {shell}",
        cwd = cwd.display(),
        os = std::env::consts::OS,
    )
}

/// The folder's git state, `None` outside a repository (or when git is
/// missing or slow).
pub async fn git_state(cwd: &Path) -> Option<GitState> {
    let output = tokio::time::timeout(
        GIT_WAIT,
        tokio::process::Command::new("git")
            .args([
                "status",
                "--porcelain=v1",
                "--branch",
                "--untracked-files=no",
            ])
            .current_dir(cwd)
            .env("GIT_OPTIONAL_LOCKS", "0")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .ok()?
    .ok()?;
    if !output.status.success() {
        return None;
    }
    Some(parse_status(&String::from_utf8_lossy(&output.stdout)))
}

/// Reads `git status --porcelain=v1 --branch`.
fn parse_status(text: &str) -> GitState {
    let mut lines = text.lines();
    let branch = lines
        .next()
        .and_then(|head| head.strip_prefix("## "))
        .and_then(|head| {
            let head = head.strip_prefix("No commits yet on ").unwrap_or(head);
            let name = head.split("...").next().unwrap_or(head).trim();
            (!name.starts_with("HEAD (no branch)") && !name.is_empty()).then(|| name.to_owned())
        });
    GitState {
        branch,
        dirty: lines.any(|l| !l.trim().is_empty()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn git_status_read() {
        assert_eq!(
            parse_status("## main...origin/main [ahead 1]\n M a.rs\n"),
            GitState {
                branch: Some("main".into()),
                dirty: true
            }
        );
        assert_eq!(
            parse_status("## No commits yet on trunk\n"),
            GitState {
                branch: Some("trunk".into()),
                dirty: false
            }
        );
        assert_eq!(parse_status("## HEAD (no branch)\n").branch, None);
    }

    #[test]
    fn the_section_names_the_date_folder_git_and_shell() {
        let bash = maia_tools::Shell {
            path: PathBuf::from("/bin/bash"),
            posix: false,
        };
        let text = render(
            Path::new("/w"),
            "2026-12-05",
            Some(&GitState {
                branch: Some("dev".into()),
                dirty: false,
            }),
            &["rust-analyzer".into()],
            &bash,
        );
        for needle in [
            "Today's date: 2026-12-05",
            "Working folder: /w",
            "branch `dev`, no uncommitted changes",
            "rust-analyzer",
            "/bin/bash (bash)",
        ] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
        assert!(render(Path::new("/w"), "d", None, &[], &bash).contains("not a git repository"));
    }

    #[tokio::test]
    async fn a_real_repository() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(git_state(dir.path()).await, None);
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .args(args)
                .current_dir(dir.path())
                .output()
                .unwrap()
        };
        git(&["init", "-q", "-b", "work"]);
        let state = git_state(dir.path()).await.unwrap();
        assert_eq!(state.branch.as_deref(), Some("work"));
        assert!(!state.dirty);
    }
}
