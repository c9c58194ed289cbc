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
/// wrote. Shared by a session (Send + Sync, interior mutability).
#[derive(Debug, Default)]
pub struct ReadTracker {
    seen: Mutex<HashMap<PathBuf, u64>>,
}

fn hash_content(content: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    content.hash(&mut hasher);
    hasher.finish()
}

impl ReadTracker {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, u64>> {
        // A poisoned lock only means another thread panicked mid-insert; the
        // map itself is still usable.
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records `content` as what the agent now knows of `path`.
    pub fn record(&self, path: &Path, content: &str) {
        self.map().insert(path.to_path_buf(), hash_content(content));
    }

    /// Checks that `path` was read (or written) and still has that content.
    pub fn check(&self, path: &Path, current: &str) -> Result<(), StaleRead> {
        match self.map().get(path) {
            None => Err(StaleRead::NotRead),
            Some(&hash) if hash == hash_content(current) => Ok(()),
            Some(_) => Err(StaleRead::Changed),
        }
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
}
