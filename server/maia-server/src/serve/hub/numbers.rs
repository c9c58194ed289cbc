//! Update numbers that survive the daemon: each live session's sequence
//! (per protocol version) goes on, after a restart or a close and a new
//! open, from past the last number it could have sent, never from 1 again.
//!
//! Numbers are reserved in blocks: the file of a session's sequence holds
//! the highest number the running daemon may send before it writes the file
//! again (written aside, synced, then renamed, so a crash at any byte
//! leaves the old block or the new one). A daemon that starts reads it and
//! numbers from there on: a gap, never a number sent twice. Writing once
//! per block keeps the file system out of an update's path.
//!
//! A file is named after the SHA-256 of the session id (an id is the
//! client's text until the agent has opened it).

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Numbers reserved by one write.
pub(super) const BLOCK: u64 = 4096;

/// Where the sequences are kept; `None` keeps them in memory only.
#[derive(Default)]
pub(super) struct Numbers {
    dir: Option<PathBuf>,
}

impl Numbers {
    /// The sequences of the daemon whose user folder is `home`
    /// (`~/.maia/serve-seq`).
    pub(super) fn under(home: Option<&Path>) -> Self {
        Numbers {
            dir: home.map(|h| h.join(".maia").join("serve-seq")),
        }
    }

    fn path(&self, sid: &str, wire: usize) -> Option<PathBuf> {
        let digest: String = Sha256::digest(sid.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Some(self.dir.as_ref()?.join(format!("{digest}.v{}", wire + 1)))
    }

    /// The number a session's sequence on `wire` goes on from: the end of
    /// the block last reserved, 0 for a session never numbered (or a file
    /// that cannot be read: said, and numbered from 0).
    pub(super) fn start(&self, sid: &str, wire: usize) -> u64 {
        let Some(path) = self.path(sid, wire) else {
            return 0;
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => text.trim().parse().unwrap_or_else(|_| {
                tracing::warn!(path = %path.display(), "an update sequence file is not a number; numbering from 0");
                0
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => {
                tracing::warn!(path = %path.display(), "cannot read an update sequence file: {e}");
                0
            }
        }
    }

    /// Records that numbers up to `upto` may be sent. A failure is said:
    /// numbering goes on (a restart may then number from an older block).
    pub(super) fn reserve(&self, sid: &str, wire: usize, upto: u64) {
        let Some(path) = self.path(sid, wire) else {
            return;
        };
        if let Err(e) = write_aside(&path, upto) {
            tracing::warn!(path = %path.display(), "cannot keep an update sequence: {e}");
        }
    }
}

fn write_aside(path: &Path, upto: u64) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(upto.to_string().as_bytes())?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// One view's numbering: the last number sent, where this run's numbers
/// began, and the end of the block reserved.
#[derive(Default)]
pub(super) struct Sequence {
    /// The last number sent.
    pub(super) last: u64,
    /// The number this live run went on from: a client's `since` below it
    /// was given before (by another run of the daemon, or before the
    /// session was closed), so its numbers name nothing kept here.
    pub(super) base: u64,
    reserved: u64,
}

impl Sequence {
    /// The sequence of `sid` on `wire`, going on from where `numbers` left it.
    pub(super) fn resume(numbers: &Numbers, sid: &str, wire: usize) -> Self {
        let base = numbers.start(sid, wire);
        Sequence {
            last: base,
            base,
            reserved: base,
        }
    }

    /// The next number, reserving a block first when this one is past it.
    pub(super) fn next(&mut self, numbers: &Numbers, sid: &str, wire: usize) -> u64 {
        self.last += 1;
        if self.last > self.reserved {
            self.reserved = self.last + BLOCK - 1;
            numbers.reserve(sid, wire, self.reserved);
        }
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_go_on_past_the_last_block_after_a_restart() {
        let home = tempfile::tempdir().unwrap();
        let numbers = Numbers::under(Some(home.path()));
        let mut first = Sequence::resume(&numbers, "s1", 0);
        let sent: Vec<u64> = (0..3).map(|_| first.next(&numbers, "s1", 0)).collect();
        assert_eq!(sent, [1, 2, 3]);
        // A restart (or a close and a new open): the same files, read again.
        let numbers = Numbers::under(Some(home.path()));
        let mut second = Sequence::resume(&numbers, "s1", 0);
        assert_eq!(second.base, BLOCK);
        assert_eq!(second.next(&numbers, "s1", 0), BLOCK + 1);
        // Each version and session has its own.
        assert_eq!(Sequence::resume(&numbers, "s1", 1).base, 0);
        assert_eq!(Sequence::resume(&numbers, "s2", 0).base, 0);
    }

    #[test]
    fn a_block_is_reserved_before_its_first_number_is_sent() {
        let home = tempfile::tempdir().unwrap();
        let numbers = Numbers::under(Some(home.path()));
        let mut seq = Sequence::resume(&numbers, "s", 0);
        for _ in 0..=BLOCK {
            seq.next(&numbers, "s", 0);
        }
        assert_eq!(seq.last, BLOCK + 1);
        // Killed now: the next run starts past every number sent.
        assert!(Numbers::under(Some(home.path())).start("s", 0) >= seq.last);
    }

    #[test]
    fn a_hostile_session_id_names_no_path() {
        let home = tempfile::tempdir().unwrap();
        let numbers = Numbers::under(Some(home.path()));
        let mut seq = Sequence::resume(&numbers, "../../x/\n", 0);
        seq.next(&numbers, "../../x/\n", 0);
        let names: Vec<_> = std::fs::read_dir(home.path().join(".maia/serve-seq"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 1);
        assert!(names[0].ends_with(".v1") && names[0].len() == 64 + 3);
    }

    #[test]
    fn a_damaged_file_numbers_from_zero_in_memory_only_too() {
        let home = tempfile::tempdir().unwrap();
        let numbers = Numbers::under(Some(home.path()));
        let path = numbers.path("s", 0).unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "12x").unwrap();
        assert_eq!(numbers.start("s", 0), 0);
        let memory = Numbers::default();
        let mut seq = Sequence::resume(&memory, "s", 0);
        assert_eq!(seq.next(&memory, "s", 0), 1);
    }
}
