//! Path resolution against the session's working directory.
//!
//! Every path the model sends is resolved with [`resolve`] against the
//! session `cwd`; the process working directory is never consulted.
//! [`is_within`] answers whether a path stays inside a root once symlinks
//! are taken into account.

use std::path::{Component, Path, PathBuf};

/// Relative paths are joined to `cwd`; the result is absolute and lexically
/// normalised (`.`/`..` removed). `~` is NOT expanded. Never uses the process
/// working directory.
pub fn resolve(cwd: &Path, raw: &str) -> PathBuf {
    let raw = Path::new(raw);
    if raw.is_absolute() {
        normalize(raw)
    } else {
        normalize(&cwd.join(raw))
    }
}

/// Lexically normalises `path`: removes `.` components and folds `..` into
/// its parent (never climbing above the root).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(prefix) => out.push(prefix.as_os_str()),
            Component::RootDir => out.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                match out.components().next_back() {
                    Some(Component::Normal(_)) => {
                        out.pop();
                    }
                    // `..` at the root stays at the root.
                    Some(Component::RootDir | Component::Prefix(_)) => {}
                    // A relative path that climbs above its start keeps the `..`.
                    Some(Component::ParentDir | Component::CurDir) | None => out.push(".."),
                }
            }
            Component::Normal(part) => out.push(part),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// True when `path` (after resolving symlinks of its longest existing
/// ancestor) lies inside `root` (also canonicalised).
pub fn is_within(root: &Path, path: &Path) -> bool {
    let root = canonical_or_normal(root);
    match canonicalize_existing_prefix(&normalize(path)) {
        Some(real) => real.starts_with(&root),
        None => false,
    }
}

/// Shows `path` relative to `cwd` when it lies inside it, otherwise as is.
pub fn display_relative(cwd: &Path, path: &Path) -> String {
    match path.strip_prefix(cwd) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
        Ok(rel) => rel.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

fn canonical_or_normal(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| normalize(path))
}

/// Canonicalises the longest existing ancestor of `path` and appends the
/// remaining (not yet existing) components. Returns `None` when a component
/// exists as a symlink that cannot be resolved (dangling link), since its
/// target is unknown and may lie anywhere.
fn canonicalize_existing_prefix(path: &Path) -> Option<PathBuf> {
    let mut existing = path.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        match std::fs::canonicalize(&existing) {
            Ok(real) => {
                let mut result = real;
                for part in rest.iter().rev() {
                    result.push(part);
                }
                return Some(result);
            }
            Err(_) => {
                if std::fs::symlink_metadata(&existing).is_ok() {
                    // Exists but cannot be resolved: a dangling or looping symlink.
                    return None;
                }
                let name = existing.file_name()?.to_os_string();
                rest.push(name);
                if !existing.pop() {
                    return None;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_relative_against_cwd() {
        assert_eq!(
            resolve(Path::new("/work/proj"), "src/main.rs"),
            PathBuf::from("/work/proj/src/main.rs")
        );
    }

    #[test]
    fn keeps_absolute_paths() {
        assert_eq!(
            resolve(Path::new("/work/proj"), "/etc/hosts"),
            PathBuf::from("/etc/hosts")
        );
    }

    #[test]
    fn folds_dot_and_dotdot() {
        let cwd = Path::new("/work/proj");
        assert_eq!(
            resolve(cwd, "../other/./a.rs"),
            PathBuf::from("/work/other/a.rs")
        );
        assert_eq!(
            resolve(cwd, "./src//lib.rs"),
            PathBuf::from("/work/proj/src/lib.rs")
        );
        assert_eq!(resolve(cwd, "."), PathBuf::from("/work/proj"));
        assert_eq!(resolve(cwd, "../../../../x"), PathBuf::from("/x"));
        assert_eq!(resolve(cwd, "/a/b/../c/."), PathBuf::from("/a/c"));
    }

    #[test]
    fn does_not_expand_tilde() {
        assert_eq!(resolve(Path::new("/w"), "~/x"), PathBuf::from("/w/~/x"));
    }

    #[test]
    fn within_plain_and_missing_paths() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("src")).unwrap();
        assert!(is_within(root, &root.join("src")));
        assert!(is_within(root, &root.join("src/new/file.rs")));
        assert!(is_within(root, root));
        assert!(!is_within(root, &root.join("../elsewhere")));
        assert!(!is_within(&root.join("src"), root));
    }

    #[test]
    fn symlink_escaping_root_is_outside() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::os::unix::fs::symlink(outside.path(), root.join("link")).unwrap();
        assert!(!is_within(root, &root.join("link")));
        assert!(!is_within(root, &root.join("link/new.txt")));
        std::os::unix::fs::symlink(root.join("missing-target"), root.join("dangling")).unwrap();
        assert!(!is_within(root, &root.join("dangling")));
    }

    #[test]
    fn display_relative_paths() {
        let cwd = Path::new("/w/p");
        assert_eq!(
            display_relative(cwd, Path::new("/w/p/src/a.rs")),
            "src/a.rs"
        );
        assert_eq!(display_relative(cwd, Path::new("/w/p")), ".");
        assert_eq!(display_relative(cwd, Path::new("/etc/x")), "/etc/x");
    }
}
