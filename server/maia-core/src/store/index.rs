//! The home folder's index of project folders that hold threads
//! (`~/.maia/session-folders.txt`), what `session/list` without a `cwd`
//! reads.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The index of project folders that hold threads, under the user's
/// `~/.maia`: one absolute folder per line, appended when a folder's first
/// thread is created. The journals stay the truth about threads; the index
/// only says where to look (`session/list` without a `cwd`).
pub(super) fn index_path(home: &Path) -> PathBuf {
    home.join(".maia").join("session-folders.txt")
}

/// Records that `cwd` holds threads (once per folder; errors are logged).
pub fn index_thread(home: Option<&Path>, cwd: &Path) {
    let Some(home) = home else { return };
    if indexed_folders(Some(home)).iter().any(|f| f == cwd) {
        return;
    }
    let path = index_path(home);
    let torn = std::fs::read(&path).is_ok_and(|t| t.last().is_some_and(|b| *b != b'\n'));
    let result = (|| {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = OpenOptions::new().create(true).append(true).open(&path)?;
        // One write of one line (after a newline that ends a torn one): a
        // crash tears at most this line.
        let lead = if torn { "\n" } else { "" };
        file.write_all(format!("{lead}{}\n", cwd.display()).as_bytes())
    })();
    if let Err(e) = result {
        tracing::warn!("cannot update {}: {e}", path.display());
    }
}

/// The folders the index names (each once, in order; torn lines and
/// relative paths ignored). Reading never writes.
pub fn indexed_folders(home: Option<&Path>) -> Vec<PathBuf> {
    let Some(home) = home else {
        return Vec::new();
    };
    let Ok(text) = std::fs::read_to_string(index_path(home)) else {
        return Vec::new();
    };
    let complete = match text.rfind('\n') {
        Some(end) => &text[..end],
        None => "",
    };
    let mut out: Vec<PathBuf> = Vec::new();
    for line in complete.lines() {
        let folder = PathBuf::from(line);
        if folder.is_absolute() && !out.contains(&folder) {
            out.push(folder);
        }
    }
    out
}
