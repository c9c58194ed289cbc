//! Markdown files the user or a project provides (skills and Markdown
//! commands): bounded reads that stay inside the project, folder listing,
//! and loading several folders where a later one wins a name.

use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest skill or command file read (bigger ones are skipped with a
/// warning).
pub const MAX_FILE_BYTES: u64 = 256 * 1024;

/// `paths` without repeats, in order.
pub(crate) fn unique(paths: impl IntoIterator<Item = PathBuf>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for path in paths {
        if !out.contains(&path) {
            out.push(path);
        }
    }
    out
}

/// Loads every root (lowest precedence first, each with the folder its files
/// must resolve inside) with `load_root`; an item of a later root replaces
/// one of the same name. Returns the items sorted by name and the warnings,
/// which are also logged.
pub(crate) fn load_layered<T>(
    roots: impl IntoIterator<Item = (PathBuf, Option<PathBuf>)>,
    mut load_root: impl FnMut(&Path, Option<&Path>, &mut Vec<String>) -> Vec<T>,
    name: impl Fn(&T) -> &str,
) -> (Vec<T>, Vec<String>) {
    let mut items: Vec<T> = Vec::new();
    let mut warnings = Vec::new();
    for (root, inside) in roots {
        for item in load_root(&root, inside.as_deref(), &mut warnings) {
            items.retain(|i| name(i) != name(&item));
            items.push(item);
        }
    }
    items.sort_by(|a, b| name(a).cmp(name(b)));
    for w in &warnings {
        tracing::warn!("{w}");
    }
    (items, warnings)
}

/// The entries of `root` that `keep` accepts, sorted; a missing folder is
/// empty, an unreadable one a warning.
pub(crate) fn list(
    root: &Path,
    warnings: &mut Vec<String>,
    keep: impl Fn(&Path) -> bool,
) -> Vec<PathBuf> {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            warnings.push(format!("cannot read {}: {e}", root.display()));
            return Vec::new();
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| keep(p))
        .collect();
    paths.sort();
    paths
}

/// Reads a command or skill file: inside `inside` (symlinks followed) when
/// given, at most [`MAX_FILE_BYTES`], UTF-8.
pub(crate) fn read_bounded(path: &Path, inside: Option<&Path>) -> std::io::Result<String> {
    use std::io::{Error, ErrorKind};
    if let Some(folder) = inside {
        let real = std::fs::canonicalize(path)?;
        let folder = std::fs::canonicalize(folder)?;
        if !real.starts_with(&folder) {
            return Err(Error::new(
                ErrorKind::PermissionDenied,
                format!(
                    "it leads to {}, outside the project folder {}",
                    real.display(),
                    folder.display()
                ),
            ));
        }
    }
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!("it is larger than {MAX_FILE_BYTES} bytes"),
        ));
    }
    String::from_utf8(bytes).map_err(|_| Error::new(ErrorKind::InvalidData, "it is not UTF-8"))
}
