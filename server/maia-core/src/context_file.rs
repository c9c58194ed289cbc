//! Instruction files: the user's (`~/.maia/MAIA.md`, then
//! `~/.maia/AGENTS.md`), then every `MAIA.md`, `AGENTS.md` and `CLAUDE.md`
//! from the repository root (the nearest folder above the session folder
//! holding `.git`; the session folder alone when there is none) down to the
//! session folder, broad to narrow. Side by side in one folder they are all
//! read, in that order; a file that is the same file (its real path) or has
//! the same text as one already read is left out. Each file is cut at
//! [`MAX_FILE_CHARS`] and all of them together at [`MAX_TOTAL_CHARS`] (the
//! narrowest keep their text first). A project file whose real path leads
//! out of the repository, one that is not a regular file, or one that cannot
//! be read is skipped with a warning.
//!
//! A sub-folder's files are read when a tool first works there
//! ([`in_folders_below`]); the session adds them to that tool's result.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Names read in every folder, in this order.
pub const NAMES: [&str; 3] = ["MAIA.md", "AGENTS.md", "CLAUDE.md"];
/// Names read in the user's `~/.maia`, in this order.
pub const USER_NAMES: [&str; 2] = ["MAIA.md", "AGENTS.md"];
/// Characters of one file kept (the head; a note says the rest was cut).
pub const MAX_FILE_CHARS: usize = 50_000;
/// Characters of all the files read at the start kept together.
pub const MAX_TOTAL_CHARS: usize = 100_000;
/// A file's budget below this is not worth sending: the file is left out.
const MIN_USEFUL_CHARS: usize = 500;

/// Why a file was loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// In the user's `~/.maia`.
    User,
    /// In the repository root (which may be the session folder).
    Root,
    /// In a folder between the repository root and the session folder.
    Parent,
    /// In the session folder (not the repository root).
    Session,
    /// In a sub-folder of the session folder, when a tool first worked there.
    SubFolder,
}

impl Scope {
    /// Why, in words, for `/context` and the doctor.
    pub fn why(self) -> &'static str {
        match self {
            Scope::User => "user-level",
            Scope::Root => "repository root",
            Scope::Parent => "folder above the session folder",
            Scope::Session => "session folder",
            Scope::SubFolder => "sub-folder a tool worked in",
        }
    }
}

/// A loaded instruction file.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextFile {
    pub path: PathBuf,
    /// The text sent (cut when the file was over its budget).
    pub text: String,
    pub scope: Scope,
    /// Characters of the whole file (as far as it was read).
    pub chars: usize,
    /// True when `text` is not the whole file.
    pub cut: bool,
}

/// The instruction files of a session, broad to narrow, and what went wrong.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextFiles {
    pub files: Vec<ContextFile>,
    pub warnings: Vec<String>,
    /// The repository root the project files were read from.
    pub root: PathBuf,
}

impl ContextFiles {
    /// Characters of all the texts sent.
    pub fn chars(&self) -> usize {
        self.files.iter().map(|f| f.text.chars().count()).sum()
    }
}

/// Real paths and text hashes already read: the same file twice is sent once.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    paths: HashSet<PathBuf>,
    texts: HashSet<u64>,
}

impl Seen {
    /// The seen set of `files`.
    pub fn of(files: &[ContextFile]) -> Self {
        let mut seen = Seen::default();
        for file in files {
            seen.paths
                .insert(std::fs::canonicalize(&file.path).unwrap_or_else(|_| file.path.clone()));
            seen.texts.insert(hash(&file.text));
        }
        seen
    }

    /// True (and remembered) when neither `real` nor `text` was seen.
    fn first(&mut self, real: &Path, text: &str) -> bool {
        let fresh = !self.paths.contains(real) && !self.texts.contains(&hash(text));
        self.paths.insert(real.to_path_buf());
        self.texts.insert(hash(text));
        fresh
    }
}

fn hash(text: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.trim().hash(&mut hasher);
    hasher.finish()
}

/// The nearest folder at or above `cwd` holding `.git` (a folder or, in a
/// worktree, a file).
pub fn repository_root(cwd: &Path) -> Option<PathBuf> {
    cwd.ancestors()
        .find(|dir| dir.join(".git").exists())
        .map(Path::to_path_buf)
}

/// Loads the instruction files of a session in `cwd` (`home`: the user's
/// home, whose `.maia` holds the user's files).
pub fn load(home: Option<&Path>, cwd: &Path) -> ContextFiles {
    let root = repository_root(cwd).unwrap_or_else(|| cwd.to_path_buf());
    let mut seen = Seen::default();
    let mut out = ContextFiles {
        root: root.clone(),
        ..ContextFiles::default()
    };
    if let Some(home) = home {
        let dir = home.join(".maia");
        for name in USER_NAMES {
            read_into(&dir.join(name), Scope::User, None, &mut seen, &mut out);
        }
    }
    let folders: Vec<&Path> = cwd
        .ancestors()
        .take_while(|dir| dir.starts_with(&root))
        .collect();
    for dir in folders.into_iter().rev() {
        let scope = if dir == root {
            Scope::Root
        } else if dir == cwd {
            Scope::Session
        } else {
            Scope::Parent
        };
        for name in NAMES {
            read_into(&dir.join(name), scope, Some(&root), &mut seen, &mut out);
        }
    }
    fit_total(&mut out, MAX_TOTAL_CHARS);
    for w in &out.warnings {
        tracing::warn!("{w}");
    }
    out
}

/// The files of the folders from below `cwd` down to `dir` (a folder inside
/// `cwd`), broad to narrow, that `seen` does not hold yet; `seen` learns them.
pub fn in_folders_below(
    cwd: &Path,
    dir: &Path,
    seen: &mut Seen,
) -> (Vec<ContextFile>, Vec<String>) {
    let mut out = ContextFiles::default();
    if dir == cwd || !dir.starts_with(cwd) {
        return (Vec::new(), Vec::new());
    }
    let folders: Vec<&Path> = dir
        .ancestors()
        .take_while(|d| *d != cwd && d.starts_with(cwd))
        .collect();
    for folder in folders.into_iter().rev() {
        for name in NAMES {
            read_into(
                &folder.join(name),
                Scope::SubFolder,
                Some(cwd),
                seen,
                &mut out,
            );
        }
    }
    (out.files, out.warnings)
}

/// Reads `path` into `out` when it is a new, readable, regular file (inside
/// `inside`, symlinks followed, when given).
fn read_into(
    path: &Path,
    scope: Scope,
    inside: Option<&Path>,
    seen: &mut Seen,
    out: &mut ContextFiles,
) {
    // Absent is the common case: no warning.
    let Ok(meta) = std::fs::metadata(path) else {
        if std::fs::symlink_metadata(path).is_ok() {
            out.warnings.push(format!(
                "Instruction file {} skipped: it is a link to nothing",
                path.display()
            ));
        }
        return;
    };
    let skip = |why: String| format!("Instruction file {} skipped: {why}", path.display());
    if !meta.is_file() {
        out.warnings.push(skip("it is not a regular file".into()));
        return;
    }
    let real = match std::fs::canonicalize(path) {
        Ok(real) => real,
        Err(e) => return out.warnings.push(skip(e.to_string())),
    };
    if let Some(folder) = inside {
        let folder = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_path_buf());
        if !real.starts_with(&folder) {
            out.warnings.push(skip(format!(
                "it leads to {}, outside {}",
                real.display(),
                folder.display()
            )));
            return;
        }
    }
    let (text, whole_chars, cut) = match read_head(path, meta.len()) {
        Ok(read) => read,
        Err(e) => return out.warnings.push(skip(e.to_string())),
    };
    if text.trim().is_empty() || !seen.first(&real, &text) {
        return;
    }
    out.files.push(ContextFile {
        path: path.to_path_buf(),
        text,
        scope,
        chars: whole_chars,
        cut,
    });
}

/// The file's text, cut at [`MAX_FILE_CHARS`] with a note; reads at most
/// four bytes per character kept, whatever the file's size.
fn read_head(path: &Path, size: u64) -> std::io::Result<(String, usize, bool)> {
    let limit = (MAX_FILE_CHARS * 4 + 4) as u64;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(limit)
        .read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let chars = text.chars().count();
    if chars <= MAX_FILE_CHARS && size <= limit {
        return Ok((text.into_owned(), chars, false));
    }
    let head: String = text.chars().take(MAX_FILE_CHARS).collect();
    Ok((
        cut_note(head, path, &format!("it is {size} bytes")),
        chars,
        true,
    ))
}

fn cut_note(head: String, path: &Path, why: &str) -> String {
    format!(
        "{head}\n\n[MAIA kept the start of this instruction file only: {why}. Read {} for the rest.]",
        path.display()
    )
}

/// Cuts the files so that together they keep at most `max` characters, the
/// narrowest first served; a file left too small a share is left out.
fn fit_total(out: &mut ContextFiles, max: usize) {
    let mut left = max;
    let mut keep = vec![true; out.files.len()];
    for (i, file) in out.files.iter_mut().enumerate().rev() {
        let chars = file.text.chars().count();
        if chars <= left {
            left -= chars;
            continue;
        }
        if left < MIN_USEFUL_CHARS {
            keep[i] = false;
            out.warnings.push(format!(
                "Instruction file {} left out: the instruction files together may not pass {max} characters",
                file.path.display()
            ));
            continue;
        }
        let head: String = file.text.chars().take(left - 200).collect();
        file.text = cut_note(
            head,
            &file.path,
            &format!("the instruction files together may not pass {max} characters"),
        );
        file.cut = true;
        left = left.saturating_sub(file.text.chars().count());
    }
    let mut flags = keep.into_iter();
    out.files.retain(|_| flags.next().unwrap_or(true));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(files: &ContextFiles) -> Vec<&str> {
        files.files.iter().map(|f| f.text.as_str()).collect()
    }

    #[test]
    fn user_then_root_down_to_the_session_folder_all_names() {
        let home = tempfile::tempdir().unwrap();
        let repo = tempfile::tempdir().unwrap();
        let cwd = repo.path().join("a/b");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(repo.path().join(".git")).unwrap();
        std::fs::create_dir_all(home.path().join(".maia")).unwrap();
        std::fs::write(home.path().join(".maia/AGENTS.md"), "user agents").unwrap();
        std::fs::write(home.path().join(".maia/MAIA.md"), "user maia").unwrap();
        std::fs::write(repo.path().join("CLAUDE.md"), "root claude").unwrap();
        std::fs::write(repo.path().join("AGENTS.md"), "root agents").unwrap();
        std::fs::write(repo.path().join("a/MAIA.md"), "a maia").unwrap();
        std::fs::write(cwd.join("AGENTS.md"), "b agents").unwrap();
        // The same text again, and the same file by a link: once.
        std::fs::write(cwd.join("CLAUDE.md"), "root agents").unwrap();
        std::os::unix::fs::symlink(repo.path().join("a/MAIA.md"), cwd.join("MAIA.md")).unwrap();
        let files = load(Some(home.path()), &cwd);
        assert_eq!(
            texts(&files),
            [
                "user maia",
                "user agents",
                "root agents",
                "root claude",
                "a maia",
                "b agents"
            ]
        );
        let scopes: Vec<Scope> = files.files.iter().map(|f| f.scope).collect();
        assert_eq!(
            scopes,
            [
                Scope::User,
                Scope::User,
                Scope::Root,
                Scope::Root,
                Scope::Parent,
                Scope::Session
            ]
        );
        assert!(files.warnings.is_empty(), "{:?}", files.warnings);
    }

    #[test]
    fn without_a_repository_only_the_session_folder() {
        let outer = tempfile::tempdir().unwrap();
        let cwd = outer.path().join("in");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::write(outer.path().join("AGENTS.md"), "outside").unwrap();
        std::fs::write(cwd.join("AGENTS.md"), "inside").unwrap();
        // (The temp folder may sit in a repository; only check ours.)
        if repository_root(&cwd).is_none() {
            assert_eq!(texts(&load(None, &cwd)), ["inside"]);
        }
    }

    #[test]
    fn hostile_files_are_skipped_or_cut_with_a_warning() {
        use std::os::unix::fs::PermissionsExt;
        let outside = tempfile::tempdir().unwrap();
        let repo = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(repo.path().join(".git")).unwrap();
        std::fs::write(outside.path().join("secret"), "secret text").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), repo.path().join("MAIA.md"))
            .unwrap();
        let huge = "x".repeat(3 * 1024 * 1024);
        std::fs::write(repo.path().join("AGENTS.md"), &huge).unwrap();
        std::fs::write(repo.path().join("CLAUDE.md"), "locked").unwrap();
        std::fs::set_permissions(
            repo.path().join("CLAUDE.md"),
            std::fs::Permissions::from_mode(0o000),
        )
        .unwrap();
        let files = load(None, repo.path());
        let all = format!("{:?}", files.warnings);
        assert!(!texts(&files).iter().any(|t| t.contains("secret text")));
        assert!(all.contains("outside"), "{all}");
        let big = &files.files[0];
        assert!(big.cut && big.text.chars().count() < MAX_FILE_CHARS + 300);
        assert!(big.text.contains("kept the start"));
        // Root reads anything: the unreadable case holds for other users.
        if std::fs::read(repo.path().join("CLAUDE.md")).is_err() {
            assert!(all.contains("CLAUDE.md skipped"), "{all}");
            assert_eq!(files.files.len(), 1);
        }
    }

    #[test]
    fn the_total_is_capped_narrowest_first() {
        let repo = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(repo.path().join(".git/x")).unwrap();
        let cwd = repo.path().join("sub");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::write(repo.path().join("MAIA.md"), "r".repeat(40_000)).unwrap();
        std::fs::write(repo.path().join("AGENTS.md"), "a".repeat(40_000)).unwrap();
        std::fs::write(cwd.join("MAIA.md"), "s".repeat(40_000)).unwrap();
        let files = load(None, &cwd);
        assert!(files.chars() <= MAX_TOTAL_CHARS + 300, "{}", files.chars());
        assert!(!files.files[2].cut && !files.files[1].cut);
        assert!(files.files[0].cut, "the broadest is cut");
    }

    #[test]
    fn sub_folders_once() {
        let cwd = tempfile::tempdir().unwrap();
        let deep = cwd.path().join("x/y");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(cwd.path().join("x/AGENTS.md"), "x rules").unwrap();
        std::fs::write(deep.join("MAIA.md"), "y rules").unwrap();
        let mut seen = Seen::default();
        let (files, _) = in_folders_below(cwd.path(), &deep, &mut seen);
        let got: Vec<&str> = files.iter().map(|f| f.text.as_str()).collect();
        assert_eq!(got, ["x rules", "y rules"]);
        assert!(in_folders_below(cwd.path(), &deep, &mut seen).0.is_empty());
        assert!(
            in_folders_below(cwd.path(), cwd.path(), &mut seen)
                .0
                .is_empty()
        );
    }
}
