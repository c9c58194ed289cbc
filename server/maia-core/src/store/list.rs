//! Listing saved threads: what `session/list` shows of a journal, the
//! pointer to the file a thread continues in (after `/new`, `/rename`,
//! `/load` or a compaction), and the newest current file of each thread.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::{Record, StoreError, io, parse_header, sessions_dir, valid_name};

/// What `session/list` shows of a saved session.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub id: String,
    pub name: String,
    pub cwd: PathBuf,
    pub title: Option<String>,
    /// Last modification, seconds since the Unix epoch.
    pub updated: u64,
    pub path: PathBuf,
}

pub(super) fn pointer_path(cwd: &Path, id: &str) -> Option<PathBuf> {
    // Thread ids become file names: accept only plain ones.
    let plain = !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    plain.then(|| sessions_dir(cwd).join(".current").join(id))
}

/// Records that thread `id` continues in the file `name` (after `/new`,
/// `/rename`, `/load` or a compaction), so the thread is reopened there
/// whatever the files' modification times.
pub fn set_current(cwd: &Path, id: &str, name: &str) -> Result<(), StoreError> {
    let Some(path) = pointer_path(cwd, id) else {
        return Ok(());
    };
    let dir = sessions_dir(cwd).join(".current");
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let tmp = dir.join(format!(".{id}.tmp"));
    std::fs::write(&tmp, name).map_err(io(&tmp))?;
    std::fs::rename(&tmp, &path).map_err(io(&path))
}

/// The file thread `id` continues in, if recorded.
fn current(cwd: &Path, id: &str) -> Option<String> {
    let name = std::fs::read_to_string(pointer_path(cwd, id)?).ok()?;
    let name = name.trim();
    valid_name(name).then(|| name.to_owned())
}

/// The sessions saved in `cwd`, newest first. For each thread id only its
/// current file counts (a thread continues under another name after `/new`
/// or a compaction): the recorded one, else the newest.
pub fn list(cwd: &Path) -> Vec<Summary> {
    let dir = sessions_dir(cwd);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    // With the full-precision modification time: a thread that moved to a
    // new file (`/new`, compaction) within the same second lists its newest.
    let mut out: Vec<(std::time::Duration, Summary)> = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        let modified = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .unwrap_or_default();
        let Some(summary) = summarize(&path, modified.as_secs()) else {
            continue;
        };
        let is_current = |s: &Summary| current(cwd, &s.id).as_deref() == Some(s.name.as_str());
        match out.iter_mut().find(|(_, s)| s.id == summary.id) {
            Some(existing)
                if is_current(&summary) || (!is_current(&existing.1) && existing.0 < modified) =>
            {
                *existing = (modified, summary);
            }
            Some(_) => {}
            None => out.push((modified, summary)),
        }
    }
    out.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
    out.into_iter().map(|(_, s)| s).collect()
}

/// Reads the header and the first title (titles come early) of a journal.
pub(super) fn summarize(path: &Path, updated: u64) -> Option<Summary> {
    const SCAN: usize = 64;
    let file = File::open(path).ok()?;
    let mut lines = BufReader::new(file).lines();
    let header = parse_header(path, &lines.next()?.ok()?).ok()?;
    let title = lines.take(SCAN).map_while(Result::ok).find_map(|l| {
        match serde_json::from_str::<Record>(&l) {
            Ok(Record::Title { title, .. }) => Some(title),
            _ => None,
        }
    });
    Some(Summary {
        id: header.id,
        name: path.file_stem()?.to_string_lossy().into_owned(),
        cwd: header.cwd,
        title,
        updated,
        path: path.to_path_buf(),
    })
}

/// Finds the newest file of thread `id` in `cwd`.
pub fn find(cwd: &Path, id: &str) -> Option<Summary> {
    list(cwd).into_iter().find(|s| s.id == id)
}
