//! The walk before a snapshot: the files git would take (the user's
//! `.gitignore`s apply, as git applies them), with the ones over the size
//! bound set aside (named, never silently skipped) and the exact modes of
//! files whose mode git would not keep (anything but 644 and 755).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// What the walk found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Walk {
    /// Files (and links) seen.
    pub files: usize,
    /// Files over the size bound (relative paths with `/`).
    pub oversize: Vec<String>,
    /// Full permission bits of files whose mode is not 644 or 755.
    pub modes: BTreeMap<String, u32>,
    /// Stopped early: more than `max_files`.
    pub too_many: bool,
}

/// Walks `root` as git would see it as a work tree (its `.gitignore`s, no
/// global or parent ignore files, `.git` folders and MAIA's sessions
/// folder left out).
pub fn walk(root: &Path, sessions: &Path, max_file_bytes: u64, max_files: usize) -> Walk {
    let mut out = Walk::default();
    let sessions = sessions.to_path_buf();
    let walker = ignore::WalkBuilder::new(root)
        .hidden(false)
        .ignore(false)
        .parents(false)
        .git_global(false)
        .git_exclude(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(move |entry| entry.file_name() != ".git" && entry.path() != sessions)
        .build();
    for entry in walker.flatten() {
        let Some(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            continue;
        }
        out.files += 1;
        if out.files > max_files {
            out.too_many = true;
            break;
        }
        let Ok(relative) = entry.path().strip_prefix(root) else {
            continue;
        };
        let relative = relative.to_string_lossy().into_owned();
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        if kind.is_symlink() {
            continue;
        }
        if meta.len() > max_file_bytes {
            out.oversize.push(relative.clone());
        }
        let mode = meta.mode() & 0o7777;
        if mode != 0o644 && mode != 0o755 {
            out.modes.insert(relative, mode);
        }
    }
    out.oversize.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn ignored_files_are_left_out_and_odd_modes_and_big_files_named() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join(".gitignore"), "build/\n").unwrap();
        std::fs::create_dir_all(root.join("build")).unwrap();
        std::fs::write(root.join("build/out.o"), "x").unwrap();
        std::fs::write(root.join("big.bin"), vec![0u8; 2048]).unwrap();
        std::fs::write(root.join("secret"), "s").unwrap();
        std::fs::set_permissions(root.join("secret"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        std::fs::set_permissions(root.join("big.bin"), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        std::fs::set_permissions(
            root.join(".gitignore"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let sessions = root.join(".maia/.sessions");
        let walk = walk(root, &sessions, 1024, 100);
        assert_eq!(walk.files, 3, "{walk:?}");
        assert_eq!(walk.oversize, vec!["big.bin".to_owned()]);
        assert_eq!(walk.modes.get("secret"), Some(&0o600));
        assert!(!walk.too_many);
        assert!(super::walk(root, &sessions, 1024, 2).too_many);
    }
}
