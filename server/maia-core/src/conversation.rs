//! The conversation: the model-facing history and the journal it is saved
//! in, owned together. This is the only code that writes a session's
//! journal; every change to the history goes through it, so what a restart
//! reloads is what the model saw.

use std::path::{Path, PathBuf};

use maia_llm::ChatMessage;
use tokio::sync::mpsc;

use crate::event::{Event, NoticeLevel};
use crate::store::{self, Journal, Loaded, Record, StoreError};

/// One thread's conversation and its current journal file.
pub(crate) struct Conversation {
    id: String,
    cwd: PathBuf,
    home: Option<PathBuf>,
    /// The journal's name (its file name without `.jsonl`).
    name: String,
    history: Vec<ChatMessage>,
    journal: Option<Journal>,
    /// Creating the journal failed (told once; the conversation goes on
    /// unsaved).
    unsaved: bool,
    events: mpsc::UnboundedSender<Event>,
}

impl Conversation {
    /// A fresh conversation `name`, its journal created now, so the thread
    /// is known to `load`, `resume` and `list` before its first message.
    pub fn create(
        id: &str,
        cwd: &Path,
        home: Option<&Path>,
        name: String,
        events: mpsc::UnboundedSender<Event>,
    ) -> Self {
        let mut conversation = Conversation {
            id: id.to_owned(),
            cwd: cwd.to_path_buf(),
            home: home.map(Path::to_path_buf),
            name,
            history: Vec::new(),
            journal: None,
            unsaved: false,
            events,
        };
        conversation.open_journal();
        conversation
    }

    /// A saved conversation, continued in `journal` (opened and locked).
    pub fn restore(
        id: &str,
        cwd: &Path,
        home: Option<&Path>,
        (name, loaded, journal): (String, &Loaded, Journal),
        events: mpsc::UnboundedSender<Event>,
    ) -> Self {
        Conversation {
            id: id.to_owned(),
            cwd: cwd.to_path_buf(),
            home: home.map(Path::to_path_buf),
            name,
            history: loaded.history(),
            journal: Some(journal),
            unsaved: false,
            events,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn history(&self) -> &[ChatMessage] {
        &self.history
    }

    pub fn len(&self) -> usize {
        self.history.len()
    }

    pub fn is_empty(&self) -> bool {
        self.history.is_empty()
    }

    fn open_journal(&mut self) {
        if self.journal.is_some() || self.unsaved {
            return;
        }
        let header = store::new_header(&self.id, &self.cwd);
        match Journal::create(&self.cwd, &self.name, &header, &[]) {
            Ok(journal) => {
                self.journal = Some(journal);
                store::index_thread(self.home.as_deref(), &self.cwd);
            }
            Err(e) => {
                self.unsaved = true;
                tracing::warn!("cannot save the session: {e}");
                let _ = self.events.send(Event::Notice {
                    level: NoticeLevel::Warning,
                    text: format!("This conversation cannot be saved: {e}"),
                });
            }
        }
    }

    /// Saves a record that is not a history message (what the user saw).
    pub fn record(&mut self, record: &Record) {
        self.open_journal();
        if let Some(journal) = &mut self.journal
            && let Err(e) = journal.append(record)
        {
            tracing::warn!("cannot save a message: {e}");
        }
    }

    /// Appends a message to the history and the journal.
    pub fn push(&mut self, message: ChatMessage) {
        self.record(&Record::Message {
            message: message.clone(),
        });
        self.history.push(message);
    }

    /// `/clear`: the history restarts (the journal says so).
    pub fn clear(&mut self) {
        self.record(&Record::Clear);
        self.history.clear();
    }

    /// Forgets everything after the first `len` messages (a refused
    /// exchange), in the journal too: a `clear` followed by what is kept.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.history.len() {
            return;
        }
        self.history.truncate(len);
        self.record(&Record::Clear);
        for message in self.history.clone() {
            self.record(&Record::Message { message });
        }
    }

    /// Fixes the history in place before a request (unanswered tool calls,
    /// orphan results): a view for the model, not a change to save.
    pub fn repair(&mut self, fix: impl FnOnce(&mut Vec<ChatMessage>)) {
        fix(&mut self.history);
    }

    /// `/new`: an empty conversation in a fresh journal `name`.
    pub fn restart(&mut self, name: String) {
        self.journal = None;
        self.unsaved = false;
        self.history.clear();
        self.name = name;
        self.open_journal();
    }

    /// After a compaction: the thread continues in a new journal `name`
    /// that starts with `records`; the history restarts empty.
    pub fn continue_as(&mut self, name: String, records: &[Record]) -> Result<(), StoreError> {
        let header = store::new_header(&self.id, &self.cwd);
        let journal = Journal::create(&self.cwd, &name, &header, records)?;
        self.journal = Some(journal);
        self.unsaved = false;
        self.name = name;
        self.history.clear();
        Ok(())
    }

    /// After [`Conversation::continue_as`] whose records already hold
    /// `message`: it starts the new history (not written again).
    pub fn restore_kept(&mut self, message: ChatMessage) {
        self.history.push(message);
    }

    /// `/load`: this thread continues a saved conversation, copied into the
    /// journal `name`.
    pub fn adopt(&mut self, name: String, loaded: &Loaded) -> Result<(), StoreError> {
        let header = store::new_header(&self.id, &self.cwd);
        let journal = Journal::create(&self.cwd, &name, &header, &loaded.records)?;
        self.journal = Some(journal);
        self.unsaved = false;
        self.name = name;
        self.history = loaded.history();
        Ok(())
    }

    /// `/rename`: the journal file takes the new name.
    pub fn rename(&mut self, name: String) -> Result<(), StoreError> {
        let to = store::session_path(&self.cwd, &name);
        if let Some(journal) = self.journal.take() {
            let from = journal.path().to_path_buf();
            if let Err(source) = std::fs::rename(&from, &to) {
                self.journal = Some(journal);
                return Err(StoreError::Io { path: to, source });
            }
            // Release the lock on the renamed file before taking it again.
            drop(journal);
            self.journal = Some(Journal::open(&to)?);
            store::set_current(&self.cwd, &self.id, &name)?;
        }
        self.name = name;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn fresh(dir: &Path) -> (Conversation, mpsc::UnboundedReceiver<Event>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Conversation::create("t1", dir, None, "first".into(), tx),
            rx,
        )
    }

    #[test]
    fn the_journal_exists_from_creation_and_follows_every_change() {
        let dir = tempfile::tempdir().unwrap();
        let (mut c, _rx) = fresh(dir.path());
        assert_eq!(store::find(dir.path(), "t1").unwrap().name, "first");
        c.push(ChatMessage::user("a"));
        c.push(ChatMessage::assistant("b"));
        c.push(ChatMessage::user("c"));
        c.truncate(1);
        assert_eq!(c.history(), &[ChatMessage::user("a")]);
        let path = store::session_path(dir.path(), "first");
        assert_eq!(store::load(&path).unwrap().history(), c.history());
        c.rename("second".into()).unwrap();
        c.push(ChatMessage::user("d"));
        let path = store::session_path(dir.path(), "second");
        assert_eq!(store::load(&path).unwrap().history(), c.history());
        c.continue_as(
            "second__1".into(),
            &[Record::Compaction {
                summary: "s".into(),
            }],
        )
        .unwrap();
        assert!(c.is_empty());
        assert_eq!(store::find(dir.path(), "t1").unwrap().name, "second__1");
    }
}
