//! Export of a thread to a file (`/export`, `maia exec --export`): the
//! thread as its replay shows it ([`crate::session::replay`], what
//! `session/load` sends a client), as Markdown ([`markdown`]) or JSON
//! ([`document`], the shape in docs/sessions.md).
//!
//! The file is written beside its target and renamed onto it, so an
//! interrupted export leaves no half file under the name asked for. An
//! existing file is replaced only with `force`; without it the name is
//! taken atomically (a hard link) or refused. Where it may go is
//! [`Place`]'s to say.

pub mod document;
mod markdown;

use std::io::Write as _;
use std::path::{Component, Path, PathBuf};

use crate::store::{self, Loaded};

/// The file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Markdown,
    Json,
}

impl Format {
    pub fn extension(self) -> &'static str {
        match self {
            Format::Markdown => "md",
            Format::Json => "json",
        }
    }

    /// JSON for a path ending in `.json`, else Markdown.
    pub fn for_path(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some(ext) if ext.eq_ignore_ascii_case("json") => Format::Json,
            _ => Format::Markdown,
        }
    }
}

/// Where an export may be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Inside the session folder or one of its workspace roots (`/export`:
    /// an editor or a remote client types it, and the server's files
    /// elsewhere are not theirs to write).
    InsideFolders,
    /// Anywhere the process may write (`maia exec --export`, typed in the
    /// user's own shell).
    Anywhere,
}

/// What to export where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub format: Format,
    /// As typed; `None`: `.maia/exports/<name>-<time>.<ext>`.
    pub path: Option<PathBuf>,
    /// Replace an existing file.
    pub force: bool,
}

/// Why nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("this thread has nothing saved yet")]
    Empty,
    #[error("`{0}` already exists; add `--force` to replace it, or name another file")]
    Exists(PathBuf),
    #[error("`{0}` is a folder")]
    IsFolder(PathBuf),
    #[error("`{0}` is outside the session folder; name a file inside it")]
    Outside(PathBuf),
    #[error("the file name is empty or holds control characters")]
    BadName,
    #[error("cannot read the thread: {0}")]
    Load(#[from] store::StoreError),
    #[error("cannot write `{0}`: {1}")]
    Io(PathBuf, std::io::Error),
}

/// What was written.
#[derive(Debug)]
pub struct Written {
    pub path: PathBuf,
    pub bytes: usize,
    pub entries: usize,
    pub truncated: bool,
}

/// Parses `/export`'s arguments: `[md|json] [PATH] [--force]` (the path
/// may hold spaces; its `.json` ending chooses JSON when no format is
/// named).
pub fn parse_args(args: &str) -> Result<Request, String> {
    let mut force = false;
    let mut format = None;
    let mut words: Vec<&str> = Vec::new();
    for word in args.split_whitespace() {
        match word {
            "--force" => force = true,
            "md" | "markdown" if format.is_none() && words.is_empty() => {
                format = Some(Format::Markdown)
            }
            "json" if format.is_none() && words.is_empty() => format = Some(Format::Json),
            w if w.starts_with("--") => return Err(format!("unknown option `{w}`")),
            w => words.push(w),
        }
    }
    let path = (!words.is_empty()).then(|| PathBuf::from(words.join(" ")));
    let format =
        format.unwrap_or_else(|| path.as_deref().map_or(Format::Markdown, Format::for_path));
    Ok(Request {
        format,
        path,
        force,
    })
}

/// Exports the thread saved as `name` in `cwd` (the live thread's
/// journal, or a finished one's).
pub fn export_thread(
    cwd: &Path,
    roots: &[PathBuf],
    name: &str,
    request: &Request,
    place: Place,
) -> Result<Written, ExportError> {
    let path = store::session_path(cwd, name);
    if !path.exists() {
        return Err(ExportError::Empty);
    }
    let loaded = store::load(&path)?;
    export_loaded(cwd, roots, name, &loaded, request, place)
}

/// Exports thread `id` of `cwd` (`maia exec --export`, after the run).
pub fn export_saved(
    cwd: &Path,
    id: &str,
    request: &Request,
    place: Place,
) -> Result<Written, ExportError> {
    let summary = store::find(cwd, id).ok_or(ExportError::Empty)?;
    let loaded = store::load(&summary.path)?;
    export_loaded(cwd, &[], &summary.name, &loaded, request, place)
}

fn export_loaded(
    cwd: &Path,
    roots: &[PathBuf],
    name: &str,
    loaded: &Loaded,
    request: &Request,
    place: Place,
) -> Result<Written, ExportError> {
    let events = crate::session::replay(&crate::timeline::rewound(loaded), cwd);
    let now = store::iso8601(store::now_secs());
    let thread = document::ThreadInfo {
        id: loaded.header.id.clone(),
        name: name.to_owned(),
        title: loaded.title().map(str::to_owned),
        cwd: cwd.to_path_buf(),
    };
    let doc = document::build(thread, &events, now.clone());
    let text = match request.format {
        Format::Markdown => markdown::render(&doc),
        Format::Json => serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n",
    };
    let (target, force) = match &request.path {
        Some(typed) => (resolve(cwd, roots, typed, place)?, request.force),
        None => (default_path(cwd, name, &now, request.format), false),
    };
    write_new(&target, text.as_bytes(), force)?;
    Ok(Written {
        path: target,
        bytes: text.len(),
        entries: doc.entries.len(),
        truncated: doc.truncated,
    })
}

/// `.maia/exports/<name>-<time>.<ext>`, with `-2`, `-3`… when taken.
fn default_path(cwd: &Path, name: &str, now: &str, format: Format) -> PathBuf {
    let dir = cwd.join(".maia").join("exports");
    let stamp: String = now
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .collect::<String>()
        .replace('T', "-");
    let base = format!("{}-{stamp}", safe_file_name(name));
    let mut path = dir.join(format!("{base}.{}", format.extension()));
    let mut n = 2;
    while path.exists() {
        path = dir.join(format!("{base}-{n}.{}", format.extension()));
        n += 1;
    }
    path
}

/// `name` as a portable file name: letters, digits, `-`, `_` and `.`
/// kept, anything else a `-`; never empty nor hidden.
pub fn safe_file_name(name: &str) -> String {
    let safe: String = name
        .chars()
        .take(80)
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let safe = safe.trim_start_matches('.');
    if safe.is_empty() {
        "thread".to_owned()
    } else {
        safe.to_owned()
    }
}

/// The absolute target of a typed path (relative: to `cwd`), refused
/// outside the folders `place` allows, through a link included.
fn resolve(
    cwd: &Path,
    roots: &[PathBuf],
    typed: &Path,
    place: Place,
) -> Result<PathBuf, ExportError> {
    let text = typed.to_string_lossy();
    if text.trim().is_empty() || text.chars().any(char::is_control) {
        return Err(ExportError::BadName);
    }
    let target = normalize(&cwd.join(typed));
    if target.file_name().is_none() {
        return Err(ExportError::IsFolder(typed.to_path_buf()));
    }
    if target.is_dir() {
        return Err(ExportError::IsFolder(target));
    }
    if place == Place::Anywhere {
        return Ok(target);
    }
    let allowed: Vec<&Path> = std::iter::once(cwd)
        .chain(roots.iter().map(PathBuf::as_path))
        .collect();
    let inside = |p: &Path| allowed.iter().any(|root| p.starts_with(root));
    if !inside(&target) {
        return Err(ExportError::Outside(typed.to_path_buf()));
    }
    // A linked folder on the way must not lead out: its nearest existing
    // ancestor, resolved, is still inside a resolved allowed folder.
    let existing = target.ancestors().skip(1).find(|p| p.exists());
    if let Some(existing) = existing {
        let real = existing
            .canonicalize()
            .map_err(|e| ExportError::Io(existing.into(), e))?;
        let inside_real = allowed
            .iter()
            .filter_map(|root| root.canonicalize().ok())
            .any(|root| real.starts_with(root));
        if !inside_real {
            return Err(ExportError::Outside(typed.to_path_buf()));
        }
    }
    Ok(target)
}

/// `path` with `.` and `..` resolved without touching the disk.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Writes `bytes` beside `target` then renames it there; an existing
/// target is replaced only with `force`.
fn write_new(target: &Path, bytes: &[u8], force: bool) -> Result<(), ExportError> {
    let io = |e| ExportError::Io(target.to_path_buf(), e);
    if !force && std::fs::symlink_metadata(target).is_ok() {
        return Err(ExportError::Exists(target.to_path_buf()));
    }
    let dir = target.parent().ok_or(ExportError::BadName)?;
    std::fs::create_dir_all(dir).map_err(io)?;
    let name = target.file_name().ok_or(ExportError::BadName)?;
    let aside = dir.join(format!(
        ".{}.{}.part",
        name.to_string_lossy(),
        uuid::Uuid::new_v4().simple()
    ));
    let written = (|| {
        let mut file = std::fs::File::create_new(&aside)?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&aside);
        return Err(io(e));
    }
    let placed = if force {
        std::fs::rename(&aside, target).map_err(io)
    } else {
        // A hard link takes the name only if it is free, atomically.
        match std::fs::hard_link(&aside, target) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(ExportError::Exists(target.to_path_buf()))
            }
            // A file system without hard links: checked above, renamed.
            Err(_) => std::fs::rename(&aside, target).map_err(io),
        }
    };
    let _ = std::fs::remove_file(&aside);
    placed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_name_the_format_the_path_and_force() {
        let r = parse_args("").unwrap();
        assert_eq!((r.format, r.path, r.force), (Format::Markdown, None, false));
        let r = parse_args("json").unwrap();
        assert_eq!((r.format, r.path), (Format::Json, None));
        let r = parse_args("md notes/my thread.md --force").unwrap();
        assert_eq!(r.path, Some(PathBuf::from("notes/my thread.md")));
        assert!(r.force);
        let r = parse_args("out.json").unwrap();
        assert_eq!(r.format, Format::Json);
        assert!(parse_args("--overwrite").is_err());
    }

    #[test]
    fn odd_names_make_plain_file_names() {
        assert_eq!(safe_file_name("my work: é/..\\x"), "my-work--é-..-x");
        assert_eq!(safe_file_name("..."), "thread");
    }

    #[test]
    fn paths_stay_inside_the_folder_unless_anywhere() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        assert!(matches!(
            resolve(cwd, &[], Path::new("../x.md"), Place::InsideFolders),
            Err(ExportError::Outside(_))
        ));
        assert!(matches!(
            resolve(cwd, &[], Path::new("/tmp/x.md"), Place::InsideFolders),
            Err(ExportError::Outside(_))
        ));
        assert_eq!(
            resolve(cwd, &[], Path::new("a/../b.md"), Place::InsideFolders).unwrap(),
            cwd.join("b.md")
        );
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), cwd.join("link")).unwrap();
        assert!(matches!(
            resolve(cwd, &[], Path::new("link/x.md"), Place::InsideFolders),
            Err(ExportError::Outside(_))
        ));
        assert!(resolve(cwd, &[], Path::new("/tmp/x.md"), Place::Anywhere).is_ok());
    }

    #[test]
    fn an_existing_file_is_kept_unless_forced() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("t.md");
        std::fs::write(&target, "mine").unwrap();
        assert!(matches!(
            write_new(&target, b"new", false),
            Err(ExportError::Exists(_))
        ));
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "mine");
        write_new(&target, b"new", true).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        // Nothing is left beside it.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
