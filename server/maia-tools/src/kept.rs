//! Tool outputs kept whole: an output over its cap is written to a file in
//! the thread's outputs folder ([`thread_dir`], outside the project), and
//! the model gets a stub ([`stub`]) with its head, tail, size and path,
//! which `Read` and `Grep` accept. A command's output is streamed to the
//! file as it comes ([`Spill`]), so memory stays bounded whatever it prints.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The largest file one output is kept in (the rest is dropped, said so).
pub const MAX_FILE_BYTES: u64 = 512 * 1024 * 1024;
/// The outputs of one thread together: past it, the oldest files go.
pub const MAX_THREAD_BYTES: u64 = 1024 * 1024 * 1024;
/// Characters of the head, and of the tail, the stub shows.
pub const PREVIEW_CHARS: usize = 8_000;

/// The outputs folder of thread `id` for the user whose home is `home`:
/// `~/.cache/maia/outputs/<id>` (readable by the sandbox, unlike `~/.maia`).
/// `None` for an id that is not a plain name.
pub fn thread_dir(home: &Path, id: &str) -> Option<PathBuf> {
    let plain = !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    plain.then(|| home.join(".cache/maia/outputs").join(id))
}

/// A new file name in `dir` for an output of `tool`.
pub fn file_for(dir: &Path, tool: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let tool: String = tool
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    dir.join(format!(
        "{tool}-{ms}-{}.txt",
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// A file an output is streamed into, opened at the first write.
#[derive(Debug)]
pub struct Spill {
    path: PathBuf,
    file: Option<std::io::BufWriter<std::fs::File>>,
    written: u64,
    /// Bytes not written: past [`MAX_FILE_BYTES`].
    pub dropped: u64,
    error: Option<String>,
}

impl Spill {
    pub fn new(path: PathBuf) -> Self {
        Spill {
            path,
            file: None,
            written: 0,
            dropped: 0,
            error: None,
        }
    }

    /// True once something was written (or tried).
    pub fn started(&self) -> bool {
        self.file.is_some() || self.error.is_some()
    }

    pub fn write(&mut self, bytes: &[u8]) {
        if self.error.is_some() {
            return;
        }
        if self.file.is_none() {
            match open_new(&self.path) {
                Ok(file) => self.file = Some(std::io::BufWriter::with_capacity(1 << 16, file)),
                Err(e) => {
                    self.error = Some(e.to_string());
                    return;
                }
            }
        }
        let room = MAX_FILE_BYTES.saturating_sub(self.written) as usize;
        let (now, over) = bytes.split_at(room.min(bytes.len()));
        self.dropped += over.len() as u64;
        if let Some(file) = &mut self.file
            && let Err(e) = file.write_all(now)
        {
            self.error = Some(e.to_string());
        }
        self.written += now.len() as u64;
    }

    /// Flushes; the file's path and size, or why it could not be kept.
    pub fn finish(mut self) -> Result<(PathBuf, u64, u64), String> {
        if let Some(mut file) = self.file.take()
            && let Err(e) = file.flush()
        {
            self.error.get_or_insert(e.to_string());
        }
        if let Some(e) = self.error {
            let _ = std::fs::remove_file(&self.path);
            return Err(e);
        }
        if let Some(dir) = self.path.parent() {
            prune(dir, &self.path);
        }
        Ok((self.path, self.written, self.dropped))
    }
}

/// Creates `path` new, private to the user, its folder too.
fn open_new(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

/// Writes `text` whole to a new file of `dir` for `tool`; its path.
pub fn keep_text(dir: &Path, tool: &str, text: &str) -> Result<PathBuf, String> {
    let mut spill = Spill::new(file_for(dir, tool));
    spill.write(text.as_bytes());
    spill.finish().map(|(path, _, _)| path)
}

/// Removes the oldest files of `dir` (never `keep`) while they pass
/// [`MAX_THREAD_BYTES`] together.
fn prune(dir: &Path, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            let modified = meta.modified().ok()?;
            meta.is_file().then(|| (modified, meta.len(), e.path()))
        })
        .collect();
    let mut total: u64 = files.iter().map(|f| f.1).sum();
    files.sort();
    for (_, len, path) in files {
        if total <= MAX_THREAD_BYTES {
            break;
        }
        if path != keep && std::fs::remove_file(&path).is_ok() {
            total -= len;
        }
    }
}

/// How every stub starts: a result that is a stub already is cut, not kept
/// again (its head names the file).
pub const STUB_START: &str = "[MAIA kept this ";

/// The stub the model gets in place of an output kept in `path`.
pub fn stub(
    tool: &str,
    head: &str,
    tail: &str,
    size: u64,
    lines: u64,
    path: &Path,
    dropped: u64,
) -> String {
    let head: String = head.chars().take(PREVIEW_CHARS).collect();
    let tail_chars = tail.chars().count();
    let tail: String = tail
        .chars()
        .skip(tail_chars.saturating_sub(PREVIEW_CHARS))
        .collect();
    let cut = if dropped > 0 {
        format!(
            " (the file holds its first {} bytes; the last {dropped} bytes are only in the tail below)",
            size - dropped
        )
    } else {
        String::new()
    };
    format!(
        "{STUB_START}{tool} output whole in a file: {size} bytes, {lines} lines, at {}{cut}. Its first and last {PREVIEW_CHARS} characters follow. Read that file with offset and limit, or Grep it, for the rest.]\n{head}\n[... the middle is in {} ...]\n{tail}",
        path.display(),
        path.display()
    )
}

/// Removes thread `id`'s outputs folder.
pub fn remove_thread(home: &Path, id: &str) {
    if let Some(dir) = thread_dir(home, id) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spill_streams_and_the_thread_is_bounded_and_removed() {
        let home = tempfile::tempdir().unwrap();
        assert!(thread_dir(home.path(), "../x").is_none());
        let dir = thread_dir(home.path(), "t1").unwrap();
        let mut spill = Spill::new(file_for(&dir, "Bash"));
        assert!(!spill.started());
        spill.write(b"abc");
        spill.write(b"def");
        let (path, size, dropped) = spill.finish().unwrap();
        assert_eq!(
            (
                std::fs::read_to_string(&path).unwrap().as_str(),
                size,
                dropped
            ),
            ("abcdef", 6, 0)
        );
        let text = stub("Bash", "abc", "def", 6, 0, &path, 0);
        assert!(text.contains(&path.display().to_string()) && text.contains("6 bytes"));
        remove_thread(home.path(), "t1");
        assert!(!dir.exists());
    }
}
