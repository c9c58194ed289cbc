//! Saved sessions: one append-only JSON Lines journal per conversation in
//! `<cwd>/.maia/.sessions/<name>.jsonl`.
//!
//! Format (version 1, documented in docs/sessions.md): the first line is a
//! [`Header`]; every later line is one [`Record`]. Appending a record is one
//! `write` of one line, so a crash (even `kill -9`) loses at most the record
//! being written: a torn last line is ignored on load and cut off when the
//! journal is next opened for appending, so the next record starts on a
//! line of its own. Records are never rewritten. One writer per journal:
//! [`Journal::open`] takes an exclusive advisory lock (`flock`) held until
//! the journal is dropped, so two sessions or two processes never append to
//! one file.
//!
//! Here: a journal's file (created, opened, appended to, loaded) and the
//! thread-wide operations; listing threads and the pointers to their
//! current files are `list`'s, the side files beside the journals
//! (roots, queue, archive marks) `side_files`'s.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use maia_llm::ChatMessage;
use serde::Serialize;

mod index;
mod list;
mod record;
mod side_files;
pub use index::{index_thread, indexed_folders};
pub use list::{Summary, find, list, set_current};
use list::{pointer_path, summarize};
pub use record::{
    FORMAT_VERSION, Header, ImageRef, Record, SavedContent, SavedDiff, SavedKind, SavedStatus,
    SavedSubagent, SavedSubagentState, SavedToolCall, SessionOptions, TitleSource,
};
pub(crate) use side_files::queue_path;
use side_files::{archived_path, roots_path};
pub use side_files::{is_archived, save_roots, saved_roots, set_archived};

/// Why a journal could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot access {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0} is not a MAIA session file")]
    NotASession(PathBuf),
    #[error("{path} has format version {version}, newer than this MAIA ({FORMAT_VERSION})")]
    TooNew { path: PathBuf, version: u32 },
    /// Another session (in this process or another MAIA) writes this file.
    #[error(
        "this conversation is open in another MAIA session or window ({path} is locked); close it there first"
    )]
    Locked { path: PathBuf },
    /// [`Journal::create_new`]: the name is taken.
    #[error("a saved session named `{name}` already exists")]
    Exists { name: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The sessions folder of a working folder.
pub fn sessions_dir(cwd: &Path) -> PathBuf {
    cwd.join(".maia").join(".sessions")
}

/// The file of a named session.
pub fn session_path(cwd: &Path, name: &str) -> PathBuf {
    sessions_dir(cwd).join(format!("{name}.jsonl"))
}

/// Whether `name` is usable as a file name.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 120
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | ' '))
}

pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Writes `header` and `records` whole to the temporary file `tmp_name` in
/// the sessions folder (created if missing) and returns its path.
fn write_aside(
    cwd: &Path,
    tmp_name: &str,
    header: &Header,
    records: &[Record],
) -> Result<PathBuf, StoreError> {
    let dir = sessions_dir(cwd);
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let tmp = dir.join(tmp_name);
    let mut text = line(header);
    for r in records {
        text.push_str(&line(r));
    }
    std::fs::write(&tmp, text).map_err(io(&tmp))?;
    Ok(tmp)
}

/// How many times [`Journal::open`] tries the lock, 10 ms apart.
const LOCK_ATTEMPTS: u32 = 20;

/// An open journal, appended to after every message.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
}

impl Journal {
    /// Creates (or replaces) the journal `name`, with `records`.
    pub fn create(
        cwd: &Path,
        name: &str,
        header: &Header,
        records: &[Record],
    ) -> Result<Journal, StoreError> {
        let path = session_path(cwd, name);
        // Written whole to a temporary file, then renamed: a reader never
        // sees a half-written new journal.
        let tmp = write_aside(cwd, &format!(".{name}.tmp"), header, records)?;
        std::fs::rename(&tmp, &path).map_err(io(&path))?;
        set_current(cwd, &header.id, name)?;
        Self::open(&path)
    }

    /// Creates the journal `name`, with `records`, failing with
    /// [`StoreError::Exists`] when a journal of that name exists: written
    /// aside, then linked into place (a link never replaces a file, so
    /// another thread's journal is never overwritten, even by a race).
    pub fn create_new(
        cwd: &Path,
        name: &str,
        header: &Header,
        records: &[Record],
    ) -> Result<Journal, StoreError> {
        let path = session_path(cwd, name);
        // Its own temporary file: two writers racing for one name never
        // link each other's text.
        let tmp = write_aside(
            cwd,
            &format!(".{name}.{}.tmp", uuid::Uuid::new_v4()),
            header,
            records,
        )?;
        let linked = std::fs::hard_link(&tmp, &path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(StoreError::Exists {
                    name: name.to_owned(),
                });
            }
            Err(e) => return Err(io(&path)(e)),
        }
        set_current(cwd, &header.id, name)?;
        Self::open(&path)
    }

    /// Opens an existing journal for appending: takes its lock (failing
    /// with [`StoreError::Locked`] if another writer holds it), then cuts
    /// off a torn last line left by a crash.
    pub fn open(path: &Path) -> Result<Journal, StoreError> {
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(path)
            .map_err(io(path))?;
        // A lock held only between another thread's fork and exec (the
        // child shares the open file for that moment) goes away at once:
        // try a few times before saying another writer holds it.
        let mut attempts = 0;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) if attempts < LOCK_ATTEMPTS => {
                    attempts += 1;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(StoreError::Locked {
                        path: path.to_path_buf(),
                    });
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(io(path)(e)),
            }
        }
        repair_tail(&mut file).map_err(io(path))?;
        Ok(Journal {
            path: path.to_path_buf(),
            file,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record as one line (one write).
    pub fn append(&mut self, record: &Record) -> Result<(), StoreError> {
        let text = line(record);
        crate::fault_point!("journal.append").map_err(io(&self.path))?;
        self.file.write_all(text.as_bytes()).map_err(io(&self.path))
    }
}

/// Truncates `file` after its last newline when its last line is torn
/// (a record is always written with its newline in one write, so a last
/// line without one was cut by a crash and was never acknowledged).
fn repair_tail(file: &mut File) -> std::io::Result<()> {
    let len = file.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok(());
    }
    let mut last = [0u8; 1];
    file.seek(SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    if last[0] == b'\n' {
        return Ok(());
    }
    // Search backwards for the last newline, a block at a time.
    const BLOCK: u64 = 8192;
    let mut end = len;
    let mut buf = vec![0u8; BLOCK as usize];
    let keep = loop {
        if end == 0 {
            break 0;
        }
        let start = end.saturating_sub(BLOCK);
        let n = (end - start) as usize;
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut buf[..n])?;
        if let Some(pos) = buf[..n].iter().rposition(|b| *b == b'\n') {
            break start + pos as u64 + 1;
        }
        end = start;
    };
    tracing::warn!(
        cut = len - keep,
        "cut a torn last line from a session journal"
    );
    file.set_len(keep)?;
    Ok(())
}

fn line<T: Serialize>(value: &T) -> String {
    let mut text = serde_json::to_string(value).unwrap_or_default();
    text.push('\n');
    text
}

/// A loaded journal.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub header: Header,
    pub records: Vec<Record>,
}

impl Loaded {
    /// The summary the conversation starts from, when the last reset was a
    /// compaction.
    pub fn summary(&self) -> Option<&str> {
        match self
            .records
            .iter()
            .rev()
            .find(|r| matches!(r, Record::Clear | Record::Compaction { .. }))
        {
            Some(Record::Compaction { summary }) => Some(summary.as_str()),
            _ => None,
        }
    }

    /// The last title recorded, if any.
    pub fn title(&self) -> Option<&str> {
        self.titled().map(|(title, _)| title)
    }

    /// The last title recorded and who wrote it, if any.
    pub fn titled(&self) -> Option<(&str, TitleSource)> {
        self.records.iter().rev().find_map(|r| match r {
            Record::Title { title, source } => Some((title.as_str(), *source)),
            _ => None,
        })
    }

    /// What the thread cost: the last carried [`Record::Costs`] plus the
    /// charges after it (as the live conversation adds them up).
    pub fn ledger(&self) -> crate::cost::Ledger {
        let mut ledger = crate::cost::Ledger::default();
        for record in &self.records {
            record.absorb_cost(&mut ledger);
        }
        ledger
    }

    /// The session options recorded, the last value of each key.
    pub fn options(&self) -> SessionOptions {
        let mut options = SessionOptions::new();
        for record in &self.records {
            if let Record::Option { key, value } = record {
                options.insert(key.clone(), value.clone());
            }
        }
        options
    }

    /// The tools loaded since the last `/clear` ([`Record::ToolsLoaded`]).
    pub fn loaded_tools(&self) -> std::collections::BTreeSet<String> {
        let mut loaded = std::collections::BTreeSet::new();
        for record in &self.records {
            match record {
                Record::Clear => loaded.clear(),
                Record::ToolsLoaded { names } => loaded.extend(names.iter().cloned()),
                _ => {}
            }
        }
        loaded
    }

    /// The user messages of the model-facing history (what follows the
    /// last `/clear` or compaction), each with where it sits in
    /// [`Loaded::history`].
    pub fn user_messages(&self) -> Vec<UserEntry> {
        let mut users = Vec::new();
        let mut messages = 0;
        for record in &self.records[self.history_start()..] {
            match record {
                Record::Message { .. } => messages += 1,
                Record::UserDisplay { id, text, steer } => users.push(UserEntry {
                    id: id.clone(),
                    text: text.clone(),
                    steer: *steer,
                    history_index: messages,
                }),
                _ => {}
            }
        }
        users
    }

    fn history_start(&self) -> usize {
        self.records
            .iter()
            .rposition(|r| matches!(r, Record::Clear | Record::Compaction { .. }))
            .map_or(0, |i| i + 1)
    }

    /// The model-facing history (what follows the last `/clear` or
    /// compaction).
    pub fn history(&self) -> Vec<ChatMessage> {
        self.records[self.history_start()..]
            .iter()
            .filter_map(|r| match r {
                Record::Message { message } => Some(message.clone()),
                _ => None,
            })
            .collect()
    }
}

fn parse_header(path: &Path, first: &str) -> Result<Header, StoreError> {
    let header: Header =
        serde_json::from_str(first).map_err(|_| StoreError::NotASession(path.to_path_buf()))?;
    if header.kind != "maia-session" {
        return Err(StoreError::NotASession(path.to_path_buf()));
    }
    if header.version > FORMAT_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            version: header.version,
        });
    }
    Ok(header)
}

/// Reads a journal. A record is a line that ends with a newline: a last
/// line without one was torn by a crash and is not read (opening the
/// journal for appending cuts it off). An unreadable line is skipped with
/// a warning; the rest loads.
pub fn load(path: &Path) -> Result<Loaded, StoreError> {
    let file = File::open(path).map_err(io(path))?;
    let mut reader = BufReader::new(file);
    let mut first = Vec::new();
    reader.read_until(b'\n', &mut first).map_err(io(path))?;
    if first.last() != Some(&b'\n') {
        return Err(StoreError::NotASession(path.to_path_buf()));
    }
    let header = parse_header(path, &String::from_utf8_lossy(&first))?;
    let mut records = Vec::new();
    let mut bytes = Vec::new();
    loop {
        bytes.clear();
        reader.read_until(b'\n', &mut bytes).map_err(io(path))?;
        if bytes.pop() != Some(b'\n') {
            if !bytes.is_empty() {
                tracing::warn!(path = %path.display(), "ignored a torn last line");
            }
            break;
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Record>(&bytes) {
            Ok(record) => records.push(record),
            Err(e) => {
                tracing::warn!(path = %path.display(), "skipped an unreadable session line: {e}")
            }
        }
    }
    let mut users = 0usize;
    for record in &mut records {
        if let Record::UserDisplay { id, .. } = record {
            if id.is_empty() {
                *id = format!("u{users}");
            }
            users += 1;
        }
    }
    Ok(Loaded { header, records })
}

/// A user message of the thread: its stable id, what the user saw, and
/// the index in the history of the model-facing message it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct UserEntry {
    pub id: String,
    pub text: String,
    /// Sent while a turn ran (`_session/steering`).
    pub steer: bool,
    pub history_index: usize,
}

/// A new header for thread `id`.
pub fn new_header(id: &str, cwd: &Path) -> Header {
    Header {
        kind: "maia-session".to_owned(),
        version: FORMAT_VERSION,
        id: id.to_owned(),
        cwd: cwd.to_path_buf(),
        created: now_secs(),
    }
}

/// A conversation title as a session name (what `/rename` takes): the
/// characters a name cannot hold become spaces, runs of spaces one, no
/// leading dot, at most 120 bytes. `None` when nothing is left.
pub fn name_from_title(title: &str) -> Option<String> {
    let kept: String = title
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                ' '
            }
        })
        .collect();
    let mut name = kept.split_whitespace().collect::<Vec<_>>().join(" ");
    name = name.trim_start_matches('.').trim().to_owned();
    while name.len() > 120 {
        name.pop();
    }
    let name = name.trim_end().to_owned();
    valid_name(&name).then_some(name)
}

/// Deletes every file of thread `id` in `cwd`.
pub fn delete(cwd: &Path, id: &str) -> Result<usize, StoreError> {
    let dir = sessions_dir(cwd);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(0);
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        if summarize(&path, 0).is_some_and(|s| s.id == id) {
            std::fs::remove_file(&path).map_err(io(&path))?;
            removed += 1;
        }
    }
    if let Some(pointer) = pointer_path(cwd, id) {
        let _ = std::fs::remove_file(pointer);
    }
    if let Some(roots) = roots_path(cwd, id) {
        let _ = std::fs::remove_file(roots);
    }
    if let Some(queue) = queue_path(cwd, id) {
        let _ = std::fs::remove_file(queue);
    }
    if let Some(archived) = archived_path(cwd, id) {
        let _ = std::fs::remove_file(archived);
    }
    Ok(removed)
}

/// Formats seconds since the epoch as ISO 8601 (UTC).
pub fn iso8601(secs: u64) -> String {
    humantime::format_rfc3339_seconds(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(cwd: &Path, id: &str) -> Header {
        Header {
            kind: "maia-session".into(),
            version: FORMAT_VERSION,
            id: id.into(),
            cwd: cwd.to_path_buf(),
            created: 1,
        }
    }

    #[test]
    fn appends_and_loads_ignoring_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let mut j = Journal::create(cwd, "first", &header(cwd, "t1"), &[]).unwrap();
        j.append(&Record::UserDisplay {
            id: "m1".into(),
            text: "hi".into(),
            steer: false,
        })
        .unwrap();
        j.append(&Record::Message {
            message: ChatMessage::user("hi"),
        })
        .unwrap();
        j.append(&Record::Title {
            title: "Greeting".into(),
            source: TitleSource::User,
        })
        .unwrap();
        // A crash in the middle of a write.
        let mut f = OpenOptions::new().append(true).open(j.path()).unwrap();
        f.write_all(b"{\"type\":\"message\",\"mess").unwrap();
        let loaded = load(j.path()).unwrap();
        assert_eq!(loaded.records.len(), 3);
        assert_eq!(loaded.title(), Some("Greeting"));
        assert_eq!(loaded.history(), vec![ChatMessage::user("hi")]);
        let listed = list(cwd);
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].title.as_deref(), Some("Greeting"));
        assert_eq!(find(cwd, "t1").unwrap().name, "first");
    }

    #[test]
    fn rejects_foreign_and_newer_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.jsonl");
        std::fs::write(&p, "{\"hello\":1}\n").unwrap();
        assert!(matches!(load(&p), Err(StoreError::NotASession(_))));
        let mut h = header(dir.path(), "a");
        h.version = FORMAT_VERSION + 1;
        std::fs::write(&p, line(&h)).unwrap();
        assert!(matches!(load(&p), Err(StoreError::TooNew { .. })));
    }

    #[test]
    fn a_torn_tail_is_cut_when_reopened_and_the_next_record_survives() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let mut j = Journal::create(cwd, "t", &header(cwd, "t1"), &[]).unwrap();
        j.append(&Record::UserDisplay {
            id: "m2".into(),
            text: "one".into(),
            steer: false,
        })
        .unwrap();
        let path = j.path().to_path_buf();
        drop(j);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"type\":\"user_disp").unwrap();
        drop(f);
        let mut j = Journal::open(&path).unwrap();
        j.append(&Record::UserDisplay {
            id: "m3".into(),
            text: "two".into(),
            steer: false,
        })
        .unwrap();
        let loaded = load(&path).unwrap();
        assert_eq!(
            loaded.records,
            vec![
                Record::UserDisplay {
                    id: "m2".into(),
                    text: "one".into(),
                    steer: false,
                },
                Record::UserDisplay {
                    id: "m3".into(),
                    text: "two".into(),
                    steer: false,
                }
            ]
        );
    }

    #[test]
    fn user_messages_without_ids_get_stable_ones_and_their_place_in_the_history() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let j = Journal::create(cwd, "old", &header(cwd, "t1"), &[]).unwrap();
        let path = j.path().to_path_buf();
        drop(j);
        // Written before ids existed, then one with an id.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(
            concat!(
                "{\"type\":\"user_display\",\"text\":\"one\"}\n",
                "{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"one\"}}\n",
                "{\"type\":\"message\",\"message\":{\"role\":\"assistant\",\"content\":\"ok\"}}\n",
                "{\"type\":\"user_display\",\"id\":\"abc\",\"text\":\"two\"}\n",
                "{\"type\":\"user_display\",\"text\":\"three\"}\n",
            )
            .as_bytes(),
        )
        .unwrap();
        drop(f);
        let loaded = load(&path).unwrap();
        let users: Vec<_> = loaded
            .user_messages()
            .into_iter()
            .map(|u| (u.id, u.text, u.history_index))
            .collect();
        assert_eq!(
            users,
            vec![
                ("u0".to_owned(), "one".to_owned(), 0),
                ("abc".to_owned(), "two".to_owned(), 2),
                ("u2".to_owned(), "three".to_owned(), 2),
            ]
        );
        // The same ids on every load.
        assert_eq!(load(&path).unwrap().user_messages()[2].id, "u2");
    }

    #[test]
    fn one_writer_per_journal() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let j = Journal::create(cwd, "t", &header(cwd, "t1"), &[]).unwrap();
        let path = j.path().to_path_buf();
        assert!(matches!(
            Journal::open(&path),
            Err(StoreError::Locked { .. })
        ));
        // Reading is always possible.
        assert!(load(&path).is_ok());
        drop(j);
        assert!(Journal::open(&path).is_ok());
    }

    /// What the property test does to a journal.
    #[derive(Debug, Clone)]
    enum Step {
        Append(String),
        /// A crash while writing this record, after `cut` bytes of its line.
        Crash(String, usize),
        Reopen,
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            4 => "[a-z\\\\\"\n é]{0,40}".prop_map(Step::Append),
            2 => ("[a-z\n é]{0,40}", 0usize..200).prop_map(|(t, c)| Step::Crash(t, c)),
            1 => Just(Step::Reopen),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
        /// Every acknowledged record survives any sequence of appends,
        /// crashes at any byte and reopenings, and the file always parses.
        #[test]
        fn acknowledged_records_survive_crashes(steps in proptest::collection::vec(step(), 1..30)) {
            let dir = tempfile::tempdir().unwrap();
            let cwd = dir.path();
            let mut journal = Some(Journal::create(cwd, "p", &header(cwd, "p1"), &[]).unwrap());
            let path = journal.as_ref().unwrap().path().to_path_buf();
            let mut acknowledged = Vec::new();
            for step in steps {
                match step {
                    Step::Append(text) => {
                        let j = match journal.as_mut() {
                            Some(j) => j,
                            None => journal.insert(Journal::open(&path).unwrap()),
                        };
                        let record = Record::UserDisplay { id: format!("m{}", acknowledged.len()), text, steer: false };
                        j.append(&record).unwrap();
                        acknowledged.push(record);
                    }
                    Step::Crash(text, cut) => {
                        drop(journal.take());
                        let bytes = line(&Record::UserDisplay { id: "torn".into(), text, steer: false });
                        // A crash tears the line before its newline.
                        let cut = cut % bytes.len();
                        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
                        f.write_all(&bytes.as_bytes()[..cut]).unwrap();
                    }
                    Step::Reopen => {
                        drop(journal.take());
                        journal = Some(Journal::open(&path).unwrap());
                        // Once reopened, every line parses.
                        let text = std::fs::read_to_string(&path).unwrap();
                        let mut lines = text.lines();
                        proptest::prop_assert!(lines.next().is_some());
                        for l in lines {
                            proptest::prop_assert!(serde_json::from_str::<Record>(l).is_ok(), "bad line {:?}", l);
                        }
                    }
                }
                let loaded = load(&path).unwrap();
                proptest::prop_assert_eq!(&loaded.records, &acknowledged);
            }
        }
    }

    #[test]
    fn the_folder_index_lists_each_folder_once_and_skips_a_torn_line() {
        let home = tempfile::tempdir().unwrap();
        let a = home.path().join("a");
        let b = home.path().join("b");
        index_thread(Some(home.path()), &a);
        index_thread(Some(home.path()), &b);
        index_thread(Some(home.path()), &a);
        let mut f = OpenOptions::new()
            .append(true)
            .open(index::index_path(home.path()))
            .unwrap();
        f.write_all(b"/torn/no-newl").unwrap();
        assert_eq!(
            indexed_folders(Some(home.path())),
            vec![a.clone(), b.clone()]
        );
        let c = home.path().join("c");
        index_thread(Some(home.path()), &c);
        assert_eq!(
            indexed_folders(Some(home.path())),
            vec![a, b, PathBuf::from("/torn/no-newl"), c]
        );
        assert!(indexed_folders(None).is_empty());
    }

    #[test]
    fn names_and_dates() {
        assert!(valid_name("my session__2"));
        assert!(!valid_name("../x"));
        assert!(!valid_name(""));
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
    }
}
