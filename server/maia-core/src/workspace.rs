//! The session's workspace: its `cwd` and the additional roots a client
//! names (ACP `additionalDirectories`).
//!
//! The additional roots belong to the project as the cwd does: the
//! permission rules' relative patterns apply inside each, `accept-edits`
//! allows edits in them, sandboxed commands may write in them. Relative
//! paths still resolve against the cwd only; settings, rules, skills, the
//! context file and saved sessions are read from the cwd only.
//!
//! [`additional_roots`] checks what a client sends and returns the roots in
//! their resolved form (symlinks followed once, when the session opens), so
//! a link re-pointed later cannot move a root. A root that would make the
//! whole machine or the home folder "the project", or let sandboxed
//! commands write MAIA's own settings (`~/.maia`), is refused.

use std::path::{Path, PathBuf};

/// Folders of the home folder that hold the user's settings, keys or credentials. None of
/// them (nor anything inside) may become a root: sandboxed commands may write in roots,
/// and a root's files are read without a question.
const PRIVATE_HOME_FOLDERS: &[&str] = &[
    ".maia",
    ".claude",
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".password-store",
    ".config/gcloud",
    ".config/gh",
    ".local/share/keyrings",
];

/// Most additional roots a session takes.
pub const MAX_ROOTS: usize = 32;

/// Why an additional root was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RootError {
    #[error("additionalDirectories entries must be absolute paths, got `{0}`")]
    Relative(PathBuf),
    #[error("additional directory `{0}` is not an existing folder")]
    NotAFolder(PathBuf),
    #[error(
        "additional directory `{0}` is refused: it is the root folder, the home folder or a folder above it, which would put every file of the user in the project"
    )]
    TooBroad(PathBuf),
    #[error(
        "additional directory `{0}` is refused: it is (or is inside) `~/{1}`, a folder of the user's settings or credentials, which commands must not be allowed to write"
    )]
    Settings(PathBuf, &'static str),
    #[error("at most {MAX_ROOTS} additional directories are supported, got {0}")]
    TooMany(usize),
}

/// Checks the additional roots a client sent for a session in `cwd`:
/// each must be absolute and an existing folder, neither `/` nor the home
/// folder nor one of its parents, and not inside `~/.maia`, `~/.ssh` or another
/// private folder of [`PRIVATE_HOME_FOLDERS`] (the sandbox
/// lets commands write in the roots). Returns them resolved (`..` folded,
/// symlinks followed), in order, without duplicates and without the cwd.
pub fn additional_roots(
    cwd: &Path,
    raw: &[PathBuf],
    home: Option<&Path>,
) -> Result<Vec<PathBuf>, RootError> {
    if raw.len() > MAX_ROOTS {
        return Err(RootError::TooMany(raw.len()));
    }
    let real_cwd = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    let real_home = home.map(|h| std::fs::canonicalize(h).unwrap_or_else(|_| h.to_path_buf()));
    let mut out: Vec<PathBuf> = Vec::new();
    for given in raw {
        if !given.is_absolute() {
            return Err(RootError::Relative(given.clone()));
        }
        let real = match std::fs::canonicalize(given) {
            Ok(real) if real.is_dir() => real,
            _ => return Err(RootError::NotAFolder(given.clone())),
        };
        let broad = real.parent().is_none()
            || real_home
                .as_deref()
                .is_some_and(|home| home.starts_with(&real));
        if broad {
            return Err(RootError::TooBroad(given.clone()));
        }
        if let Some(folder) = real_home.as_deref().and_then(|home| {
            PRIVATE_HOME_FOLDERS
                .iter()
                .find(|folder| real.starts_with(home.join(folder)))
        }) {
            return Err(RootError::Settings(given.clone(), folder));
        }
        if real != real_cwd && !out.contains(&real) {
            out.push(real);
        }
    }
    Ok(out)
}

/// The system prompt's lines about the additional roots; `None` without.
pub fn prompt_section(roots: &[PathBuf]) -> Option<String> {
    if roots.is_empty() {
        return None;
    }
    let mut out = String::from(
        "# Workspace folders\n\n\
         Besides the working folder, these folders belong to the project. Name files in them \
         by absolute path (relative paths resolve against the working folder only); pass a \
         folder as Glob's or Grep's `path` to search it:\n",
    );
    for root in roots {
        out.push_str(&format!("\n- {}", root.display()));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_and_resolves_roots() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let cwd = base.join("proj");
        let other = base.join("other");
        let home = base.join("home");
        for d in [&cwd, &other, &home] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::os::unix::fs::symlink(&other, cwd.join("link")).unwrap();
        let roots = additional_roots(
            &cwd,
            &[
                other.clone(),
                cwd.join("link"),
                base.join("proj/../other"),
                cwd.clone(),
            ],
            Some(&home),
        )
        .unwrap();
        assert_eq!(roots, vec![other.clone()]);

        let err = |raw: &[PathBuf]| additional_roots(&cwd, raw, Some(&home)).unwrap_err();
        assert_eq!(
            err(&[PathBuf::from("rel/dir")]),
            RootError::Relative("rel/dir".into())
        );
        assert!(matches!(
            err(&[base.join("missing")]),
            RootError::NotAFolder(_)
        ));
        std::fs::write(base.join("file"), "x").unwrap();
        assert!(matches!(
            err(&[base.join("file")]),
            RootError::NotAFolder(_)
        ));
        assert!(matches!(err(&[PathBuf::from("/")]), RootError::TooBroad(_)));
        assert!(matches!(
            err(std::slice::from_ref(&home)),
            RootError::TooBroad(_)
        ));
        assert!(matches!(
            err(std::slice::from_ref(&base)),
            RootError::TooBroad(_)
        ));
        // A link to the home folder is the home folder.
        std::os::unix::fs::symlink(&home, base.join("h")).unwrap();
        assert!(matches!(err(&[base.join("h")]), RootError::TooBroad(_)));
        std::fs::create_dir_all(home.join(".maia/skills")).unwrap();
        assert!(matches!(
            err(&[home.join(".maia")]),
            RootError::Settings(_, ".maia")
        ));
        for private in [".ssh", ".gnupg", ".aws", ".config/gcloud", ".claude/skills"] {
            let dir = home.join(private);
            std::fs::create_dir_all(&dir).unwrap();
            assert!(
                matches!(err(std::slice::from_ref(&dir)), RootError::Settings(..)),
                "{private}"
            );
        }
        // A project kept among the user's configuration is a root like any other.
        std::fs::create_dir_all(home.join(".config/nvim")).unwrap();
        assert_eq!(
            additional_roots(&cwd, &[home.join(".config/nvim")], Some(&home)).unwrap(),
            vec![home.join(".config/nvim")]
        );
        assert!(matches!(
            err(&[home.join(".maia/skills")]),
            RootError::Settings(..)
        ));
        // Inside the home folder is fine.
        std::fs::create_dir_all(home.join("code")).unwrap();
        assert_eq!(
            additional_roots(&cwd, &[home.join("code")], Some(&home)).unwrap(),
            vec![home.join("code")]
        );
        let many = vec![other.clone(); MAX_ROOTS + 1];
        assert!(matches!(err(&many), RootError::TooMany(_)));
    }
}
