//! Tracking of what the agent has seen.
//!
//! [`ReadTracker`] remembers a hash of the content the agent last read or
//! wrote per file, so edits can be refused when the model has never seen the
//! file or when it changed behind the agent's back.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Why an edit is refused by [`ReadTracker::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StaleRead {
    #[error("the file has not been read in this session")]
    NotRead,
    #[error("the file has changed since it was last read")]
    Changed,
}

/// Remembers, per absolute path, a hash of the content the agent last read or
/// wrote, and one per line (so a change made outside can be described
/// without keeping the text). Shared by a session (Send + Sync, interior
/// mutability).
#[derive(Debug, Default)]
pub struct ReadTracker {
    seen: Mutex<HashMap<PathBuf, Known>>,
}

#[derive(Debug)]
struct Known {
    hash: u64,
    lines: Vec<u64>,
}

fn line_hashes(content: &str) -> Vec<u64> {
    content.lines().map(hash_content).collect()
}

/// Line ranges (1-based, of the current text) as `3–5, 9`.
fn ranges(lines: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let start = lines[i];
        while i + 1 < lines.len() && lines[i + 1] == lines[i] + 1 {
            i += 1;
        }
        out.push(if lines[i] == start {
            start.to_string()
        } else {
            format!("{start}–{}", lines[i])
        });
        i += 1;
    }
    if out.len() > 8 {
        let more = out.len() - 8;
        out.truncate(8);
        out.push(format!("and {more} more"));
    }
    out.join(", ")
}

fn hash_content(content: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    content.hash(&mut hasher);
    hasher.finish()
}

impl ReadTracker {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Known>> {
        // A poisoned lock only means another thread panicked mid-insert; the
        // map itself is still usable.
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records `content` as what the agent now knows of `path`.
    pub fn record(&self, path: &Path, content: &str) {
        let known = Known {
            hash: hash_content(content),
            lines: line_hashes(content),
        };
        self.map().insert(path.to_path_buf(), known);
    }

    /// Checks that `path` was read (or written) and still has that content.
    pub fn check(&self, path: &Path, current: &str) -> Result<(), StaleRead> {
        match self.map().get(path) {
            None => Err(StaleRead::NotRead),
            Some(known) if known.hash == hash_content(current) => Ok(()),
            Some(_) => Err(StaleRead::Changed),
        }
    }

    /// What changed in `path` outside since the agent last read or wrote
    /// it, in a few words (which lines of `current` differ, how many were
    /// removed); `None` when it was not seen or has not changed.
    pub fn outside_change(&self, path: &Path, current: &str) -> Option<String> {
        let map = self.map();
        let known = map.get(path)?;
        if known.hash == hash_content(current) {
            return None;
        }
        let now = line_hashes(current);
        let ops = similar::capture_diff_slices(similar::Algorithm::Myers, &known.lines, &now);
        let mut changed = Vec::new();
        let mut removed = 0;
        for op in ops {
            match op {
                similar::DiffOp::Equal { .. } => {}
                similar::DiffOp::Delete { old_len, .. } => removed += old_len,
                similar::DiffOp::Insert {
                    new_index, new_len, ..
                } => changed.extend(new_index + 1..=new_index + new_len),
                similar::DiffOp::Replace {
                    old_len,
                    new_index,
                    new_len,
                    ..
                } => {
                    changed.extend(new_index + 1..=new_index + new_len);
                    removed += old_len.saturating_sub(new_len);
                }
            }
        }
        let mut parts = Vec::new();
        if !changed.is_empty() {
            let unit = if changed.len() == 1 { "line" } else { "lines" };
            parts.push(format!("{unit} {} new or changed", ranges(&changed)));
        }
        if removed > 0 {
            let unit = if removed == 1 { "line" } else { "lines" };
            parts.push(format!("{removed} {unit} removed"));
        }
        if parts.is_empty() {
            parts.push("line endings or whitespace changed".to_owned());
        }
        Some(parts.join(", "))
    }

    /// Forgets `path` (e.g. after it was deleted).
    pub fn forget(&self, path: &Path) {
        self.map().remove(path);
    }

    /// True when `path` has been read or written in this session.
    pub fn has_seen(&self, path: &Path) -> bool {
        self.map().contains_key(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_check_forget() {
        let t = ReadTracker::default();
        let p = Path::new("/x/a.rs");
        assert_eq!(t.check(p, "a"), Err(StaleRead::NotRead));
        t.record(p, "a");
        assert!(t.has_seen(p));
        assert_eq!(t.check(p, "a"), Ok(()));
        assert_eq!(t.check(p, "b"), Err(StaleRead::Changed));
        t.forget(p);
        assert_eq!(t.check(p, "a"), Err(StaleRead::NotRead));
    }

    #[test]
    fn an_outside_change_is_described_by_lines() {
        let t = ReadTracker::default();
        let p = Path::new("/x/a.rs");
        assert_eq!(t.outside_change(p, "a"), None);
        t.record(p, "one\ntwo\nthree\nfour\nfive\n");
        assert_eq!(t.outside_change(p, "one\ntwo\nthree\nfour\nfive\n"), None);
        let note = t
            .outside_change(p, "zero\none\nTWO\nthree\nfive\n")
            .unwrap();
        assert_eq!(note, "lines 1, 3 new or changed, 1 line removed");
    }
}
