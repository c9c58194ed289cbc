//! The walk before a snapshot: the files git would take (the user's
//! `.gitignore`s apply, as git applies them), with the ones over the size
//! bound set aside (named, never silently skipped), the exact modes of
//! files whose mode git would not keep (anything but 644 and 755), the
//! ignored files to capture all the same, and a signature of everything
//! git cannot hold (files in ignored folders, paths named `.git`, the files
//! of nested repositories), so that a change there is named, not lost.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use serde::{Deserialize, Serialize};

/// At most this many ignored files are captured in a snapshot; the rest
/// are watched and named.
pub const MAX_IGNORED_CAPTURED: usize = 1_000;
/// At most this many entries of ignored folders and nested repositories
/// are watched one by one; past it a folder is watched by its own
/// signature (entries added or removed in it, not deeper).
pub const MAX_WATCHED: usize = 5_000;

/// Why a change is not restored by an undo.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Escape {
    /// In an ignored folder, or an ignored file past the capture bound.
    Ignored,
    /// A path named `.git` (git never stores one).
    GitName,
    /// Inside a nested repository (a folder with its own `.git`).
    NestedRepository,
    /// Outside the project.
    OutsideProject,
}

impl Escape {
    /// Why, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Escape::Ignored => "ignored by .gitignore, not captured",
            Escape::GitName => "git cannot store a path named .git",
            Escape::NestedRepository => "inside a nested git repository",
            Escape::OutsideProject => "outside the project",
        }
    }
}

/// What tells a file changed without reading it: kind, size, mode,
/// inode and modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signature {
    kind: u32,
    len: u64,
    ino: u64,
    mtime: (i64, i64),
}

impl Signature {
    fn of(meta: &std::fs::Metadata) -> Self {
        Signature {
            kind: meta.mode(),
            len: meta.len(),
            ino: meta.ino(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
        }
    }
}

/// Something git cannot hold: its signature, why, and the folder it is
/// named by (an ignored folder's or a nested repository's; else itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    pub signature: Signature,
    pub why: Escape,
    pub named_as: String,
}

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
    /// Ignored files outside ignored folders, to capture as the others.
    pub ignored: Vec<String>,
    /// What git cannot hold, by relative path.
    pub watched: BTreeMap<String, Watched>,
    /// The folders git's view of the project holds.
    pub dirs: BTreeSet<String>,
    /// Nested repositories (folders with a `.git` of their own), left out
    /// of the snapshot: git would store a bare commit id, or fail on one
    /// without commits.
    pub nested: Vec<String>,
    /// A folder was watched by its own signature because of
    /// [`MAX_WATCHED`] (what is watched then depends on the walk's order).
    pub collapsed: bool,
    /// An ignored file was not captured because of
    /// [`MAX_IGNORED_CAPTURED`] (which ones depends on the walk's order).
    pub capped: bool,
}

/// What the walk made of one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A file, link or folder git holds.
    Held,
    /// Ignored (captured all the same or not).
    Ignored,
    /// A nested repository.
    Nested,
    /// Named `.git`, or the sessions folder: never held.
    Left,
}

/// Walks `root` as git would see it as a work tree (its `.gitignore`s, no
/// global or parent ignore files, `.git` folders and MAIA's sessions
/// folder left out).
pub fn walk(root: &Path, sessions: &Path, max_file_bytes: u64, max_files: usize) -> Walk {
    let mut walker = Walker {
        sessions,
        max_file_bytes,
        max_files,
        out: Walk::default(),
        matchers: Vec::new(),
    };
    walker.folder(root, "");
    walker.finish()
}

pub(super) struct Walker<'a> {
    pub(super) sessions: &'a Path,
    pub(super) max_file_bytes: u64,
    pub(super) max_files: usize,
    pub(super) out: Walk,
    /// The `.gitignore`s of the folders being walked, outermost first.
    pub(super) matchers: Vec<Gitignore>,
}

/// The matcher of a folder's `.gitignore`, if it has one.
pub(super) fn gitignore_of(dir: &Path) -> Option<Gitignore> {
    let gitignore = dir.join(".gitignore");
    if !gitignore.is_file() {
        return None;
    }
    let mut builder = GitignoreBuilder::new(dir);
    builder.add(&gitignore);
    builder.build().ok()
}

impl Walker<'_> {
    /// The walk, its lists in order.
    pub(super) fn finish(mut self) -> Walk {
        self.out.oversize.sort();
        self.out.ignored.sort();
        self.out.nested.sort();
        self.out
    }

    fn ignored(&self, path: &Path, is_dir: bool) -> bool {
        for matcher in self.matchers.iter().rev() {
            match matcher.matched(path, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
        false
    }

    /// Walks a folder git holds (`relative` to the root, `""` for it).
    fn folder(&mut self, dir: &Path, relative: &str) {
        let pushed = match gitignore_of(dir) {
            Some(matcher) => {
                self.matchers.push(matcher);
                true
            }
            None => false,
        };
        for (path, name, meta) in entries(dir) {
            if self.out.too_many {
                break;
            }
            self.entry(&path, &name, &meta, relative);
        }
        if pushed {
            self.matchers.pop();
        }
    }

    /// One entry of a folder git holds (`relative` to the root), and
    /// everything under it.
    pub(super) fn entry(
        &mut self,
        path: &Path,
        name: &str,
        meta: &std::fs::Metadata,
        relative: &str,
    ) -> Kind {
        let rel = join(relative, name);
        if name == ".git" {
            if !relative.is_empty() {
                self.watch(&rel, meta, Escape::GitName, &rel);
            }
            return Kind::Left;
        }
        if path == self.sessions {
            return Kind::Left;
        }
        let is_dir = meta.is_dir();
        if self.ignored(path, is_dir) {
            if is_dir {
                self.watch_folder(path, &rel, Escape::Ignored, &format!("{rel}/"));
            } else if self.out.ignored.len() < MAX_IGNORED_CAPTURED
                && meta.len() <= self.max_file_bytes
            {
                self.file(&rel, meta);
                self.out.ignored.push(rel);
            } else {
                self.out.capped |= self.out.ignored.len() >= MAX_IGNORED_CAPTURED;
                self.watch(&rel, meta, Escape::Ignored, &rel);
            }
            return Kind::Ignored;
        }
        if is_dir {
            if nested_repository(path) {
                self.count();
                self.out.nested.push(rel.clone());
                self.watch_folder(path, &rel, Escape::NestedRepository, &format!("{rel}/"));
                return Kind::Nested;
            }
            self.out.dirs.insert(rel.clone());
            self.folder(path, &rel);
            return Kind::Held;
        }
        self.file(&rel, meta);
        Kind::Held
    }

    fn count(&mut self) {
        self.out.files += 1;
        if self.out.files > self.max_files {
            self.out.too_many = true;
        }
    }

    /// A file (or link) git holds.
    fn file(&mut self, rel: &str, meta: &std::fs::Metadata) {
        self.count();
        if meta.file_type().is_symlink() {
            return;
        }
        if meta.len() > self.max_file_bytes {
            self.out.oversize.push(rel.to_owned());
        }
        let mode = meta.mode() & 0o7777;
        if mode != 0o644 && mode != 0o755 {
            self.out.modes.insert(rel.to_owned(), mode);
        }
    }

    fn watch(&mut self, rel: &str, meta: &std::fs::Metadata, why: Escape, named_as: &str) {
        self.out.watched.insert(
            rel.to_owned(),
            Watched {
                signature: Signature::of(meta),
                why,
                named_as: named_as.to_owned(),
            },
        );
    }

    /// A folder git does not hold: its entries watched one by one while
    /// within [`MAX_WATCHED`], else the folder itself.
    fn watch_folder(&mut self, top: &Path, rel: &str, why: Escape, named_as: &str) {
        let mut stack = vec![(top.to_path_buf(), rel.to_owned())];
        let mut mine = Vec::new();
        while let Some((dir, dir_rel)) = stack.pop() {
            for (path, name, meta) in entries(&dir) {
                if self.out.watched.len() + mine.len() >= MAX_WATCHED {
                    // Too many to watch one by one: the folder alone.
                    self.out.collapsed = true;
                    if let Ok(meta) = top.symlink_metadata() {
                        self.watch(rel, &meta, why, named_as);
                    }
                    return;
                }
                let child = join(&dir_rel, &name);
                if meta.is_dir() {
                    if name != ".git" {
                        stack.push((path, child));
                    }
                } else {
                    mine.push((child, Signature::of(&meta)));
                }
            }
        }
        if mine.is_empty()
            && let Ok(meta) = top.symlink_metadata()
        {
            // An empty one: its own signature tells when files come.
            self.watch(rel, &meta, why, named_as);
        }
        for (path, signature) in mine {
            self.out.watched.insert(
                path,
                Watched {
                    signature,
                    why,
                    named_as: named_as.to_owned(),
                },
            );
        }
    }
}

/// A folder's entries (links not followed), by name.
pub(super) fn entries(dir: &Path) -> Vec<(std::path::PathBuf, String, std::fs::Metadata)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let path = entry.path();
            let meta = path.symlink_metadata().ok()?;
            let name = entry.file_name().to_string_lossy().into_owned();
            Some((path, name, meta))
        })
        .collect();
    out.sort_by(|a, b| a.1.cmp(&b.1));
    out
}

pub(super) fn join(relative: &str, name: &str) -> String {
    match relative {
        "" => name.to_owned(),
        _ => format!("{relative}/{name}"),
    }
}

/// Whether git sees `dir` as a repository of its own: a `.git` folder
/// with a `HEAD`, or a `.git` file naming one.
fn nested_repository(dir: &Path) -> bool {
    let dot = dir.join(".git");
    let Ok(meta) = dot.symlink_metadata() else {
        return false;
    };
    if meta.is_dir() {
        return dot.join("HEAD").is_file();
    }
    std::fs::read_to_string(&dot).is_ok_and(|text| {
        text.strip_prefix("gitdir: ")
            .map(|target| dir.join(target.trim()).join("HEAD").is_file())
            .unwrap_or(false)
    })
}

/// What changed between two walks among what git cannot hold: each name
/// (a file, or the folder it sits in) with why and how many files.
pub fn escaped(before: &Walk, after: &Walk) -> Vec<(String, Escape, usize)> {
    let mut named: BTreeMap<(String, Escape), usize> = BTreeMap::new();
    // A folder watched by its own signature counts no file.
    let mut note = |path: &str, w: &Watched| {
        let files = usize::from(w.named_as.strip_suffix('/') != Some(path));
        *named.entry((w.named_as.clone(), w.why)).or_default() += files;
    };
    for (path, now) in &after.watched {
        match before.watched.get(path) {
            Some(was) if was.signature == now.signature => {}
            // Captured before (an ignored file past the bound now): the
            // snapshot holds what it was.
            None if before.ignored.binary_search(path).is_ok() => {}
            _ => note(path, now),
        }
    }
    for (path, was) in &before.watched {
        if !after.watched.contains_key(path) && after.ignored.binary_search(path).is_err() {
            note(path, was);
        }
    }
    named.into_iter().map(|((n, w), c)| (n, w, c)).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn ignored_files_are_captured_and_odd_modes_and_big_files_named() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join(".gitignore"), "build/\n*.env\n").unwrap();
        std::fs::create_dir_all(root.join("build")).unwrap();
        std::fs::write(root.join("build/out.o"), "x").unwrap();
        std::fs::write(root.join("secret.env"), "k").unwrap();
        std::fs::write(root.join("big.bin"), vec![0u8; 2048]).unwrap();
        std::fs::write(root.join("secret"), "s").unwrap();
        for (name, mode) in [
            ("secret", 0o600),
            ("big.bin", 0o644),
            (".gitignore", 0o644),
            ("secret.env", 0o644),
        ] {
            std::fs::set_permissions(root.join(name), std::fs::Permissions::from_mode(mode))
                .unwrap();
        }
        let sessions = root.join(".maia/.sessions");
        let walk = walk(root, &sessions, 1024, 100);
        assert_eq!(walk.files, 4, "{walk:?}");
        assert_eq!(walk.oversize, vec!["big.bin".to_owned()]);
        assert_eq!(walk.modes.get("secret"), Some(&0o600));
        assert_eq!(walk.ignored, vec!["secret.env".to_owned()]);
        assert_eq!(walk.watched["build/out.o"].named_as, "build/");
        assert!(!walk.too_many);
        assert!(super::walk(root, &sessions, 1024, 2).too_many);
    }

    #[test]
    fn what_git_cannot_hold_is_named_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let sessions = root.join(".maia/.sessions");
        std::fs::write(root.join(".gitignore"), "build/\n").unwrap();
        std::fs::create_dir_all(root.join("build")).unwrap();
        std::fs::create_dir_all(root.join("repo/.git")).unwrap();
        std::fs::write(root.join("repo/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(root.join("repo/a.txt"), "a").unwrap();
        let before = walk(root, &sessions, 1024, 100);
        assert!(escaped(&before, &walk(root, &sessions, 1024, 100)).is_empty());
        std::fs::write(root.join("build/new.o"), "o").unwrap();
        std::fs::write(root.join("repo/a.txt"), "changed, longer").unwrap();
        std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
        std::fs::write(root.join("sub/.git"), "not a repository").unwrap();
        let after = walk(root, &sessions, 1024, 100);
        assert_eq!(
            escaped(&before, &after),
            vec![
                ("build/".to_owned(), Escape::Ignored, 1),
                ("repo/".to_owned(), Escape::NestedRepository, 1),
                ("sub/.git".to_owned(), Escape::GitName, 1),
            ]
        );
        assert!(after.dirs.contains("sub/deeper") && !before.dirs.contains("sub"));
    }
}
