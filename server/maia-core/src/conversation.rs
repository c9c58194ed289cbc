//! The conversation: the model-facing history and the journal it is saved
//! in, owned together. This is the only code that writes a session's
//! journal; every change to the history goes through it, so what a restart
//! reloads is what the model saw.
//!
//! State derived from the journal lives here too and is derived the way a
//! reload derives it ([`Loaded::summary`], [`Loaded::title`],
//! [`Loaded::ledger`]): every record
//! written passes [`Conversation::absorb`], so the live thread and the
//! reloaded one cannot disagree about the summary or the title.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use maia_llm::ChatMessage;
use tokio::sync::mpsc;

use crate::event::{Event, NoticeLevel};
use crate::store::{self, Journal, Loaded, Record, StoreError};

mod records;

pub(crate) use records::repair_history;
use records::{absorb_timeline, timeline_of, titled_first};

/// One thread's conversation and its current journal file.
pub(crate) struct Conversation {
    id: String,
    cwd: PathBuf,
    home: Option<PathBuf>,
    /// The journal's name (its file name without `.jsonl`).
    name: String,
    history: Vec<ChatMessage>,
    /// The compaction summary the history continues from (`None` after a
    /// `/clear`, or before any compaction).
    summary: Option<String>,
    /// The conversation's title.
    title: Option<String>,
    /// Who wrote the title (a prompt's is replaced by a label).
    title_source: store::TitleSource,
    /// Labelling calls started for this conversation (not journaled: a
    /// reopened thread may try again).
    title_tries: u8,
    /// What the thread cost so far (its charges, see [`crate::cost`]).
    ledger: crate::cost::Ledger,
    /// The ledger when the running (or last) turn started.
    turn_mark: crate::cost::Ledger,
    /// The options the user chose for this thread.
    options: store::SessionOptions,
    /// The tools whose definitions the thread's requests carry though they
    /// are offered by name only (docs/tools.md, "MCP tools on demand").
    loaded_tools: BTreeSet<String>,
    /// The user messages of the history, with their ids.
    users: Vec<store::UserEntry>,
    /// The file checkpoints and what was reverted of them.
    timeline: crate::checkpoint::Timeline,
    journal: Option<Journal>,
    /// Creating the journal failed (told once; the conversation goes on
    /// unsaved).
    unsaved: bool,
    /// The last record could not be written (told once until a record is
    /// written again).
    append_failing: bool,
    events: mpsc::UnboundedSender<Event>,
}

impl Conversation {
    /// An empty conversation `name` without a journal yet: what every
    /// constructor starts from.
    fn blank(
        id: &str,
        cwd: &Path,
        home: Option<&Path>,
        name: String,
        events: mpsc::UnboundedSender<Event>,
    ) -> Self {
        Conversation {
            id: id.to_owned(),
            cwd: cwd.to_path_buf(),
            home: home.map(Path::to_path_buf),
            name,
            history: Vec::new(),
            summary: None,
            title: None,
            title_source: store::TitleSource::User,
            title_tries: 0,
            ledger: crate::cost::Ledger::default(),
            turn_mark: crate::cost::Ledger::default(),
            options: store::SessionOptions::new(),
            loaded_tools: BTreeSet::new(),
            users: Vec::new(),
            timeline: crate::checkpoint::Timeline::default(),
            journal: None,
            unsaved: false,
            append_failing: false,
            events,
        }
    }

    /// A fresh conversation `name`, its journal created now, so the thread
    /// is known to `load`, `resume` and `list` before its first message.
    pub fn create(
        id: &str,
        cwd: &Path,
        home: Option<&Path>,
        name: String,
        events: mpsc::UnboundedSender<Event>,
    ) -> Self {
        let mut conversation = Self::blank(id, cwd, home, name, events);
        conversation.open_journal();
        conversation
    }

    /// A conversation kept in memory only: a child session's, whose parent
    /// journals what it did ([`crate::store::Record::Subagent`]).
    pub fn ephemeral(
        id: &str,
        cwd: &Path,
        home: Option<&Path>,
        events: mpsc::UnboundedSender<Event>,
    ) -> Self {
        let mut conversation = Self::blank(id, cwd, home, format!("subagent-{id}"), events);
        conversation.unsaved = true;
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
        let mut conversation = Self::blank(id, cwd, home, name, events);
        conversation.journal = Some(journal);
        conversation.derive(loaded);
        conversation
    }

    /// Sets the state derived from the journal from `loaded` (its rewinds
    /// applied first, as every reader of a journal does).
    fn derive(&mut self, loaded: &Loaded) {
        // Every checkpoint of the file, rewound ones too: their changes
        // are still on disk until reverted.
        self.timeline = timeline_of(&loaded.records);
        let loaded = crate::timeline::rewound(loaded);
        self.history = loaded.history();
        self.users = loaded.user_messages();
        self.summary = loaded.summary().map(str::to_owned);
        let titled = loaded.titled();
        self.title = titled.map(|(title, _)| title.to_owned());
        self.title_source = titled.map_or(store::TitleSource::User, |(_, source)| source);
        self.ledger = loaded.ledger();
        self.turn_mark = loaded.ledger();
        self.options = loaded.options();
        self.loaded_tools = loaded.loaded_tools();
    }

    /// Truncates the thread before the user message `point` names: a
    /// [`Record::Rewind`] is appended and the state derived again from the
    /// journal, as a reload would (nothing is deleted). Checked first
    /// ([`crate::timeline::check`]); a refusal changes nothing.
    pub fn rewind(
        &mut self,
        point: &crate::timeline::MessagePoint,
    ) -> Result<crate::timeline::Rewound, crate::timeline::RewindError> {
        use crate::timeline::RewindError;
        let path = match &self.journal {
            Some(journal) => journal.path().to_path_buf(),
            None => return Err(RewindError::Unsaved),
        };
        let text = match crate::timeline::check(&store::load(&path)?, point) {
            Err(RewindError::UnknownMessage(message))
                if crate::timeline::in_earlier_file(&self.cwd, &self.id, &path, &message) =>
            {
                use crate::timeline::Refusal::BeforeCompaction;
                return Err(RewindError::Refused(BeforeCompaction));
            }
            checked => checked?,
        };
        let record = Record::Rewind {
            before: point.message_id.clone(),
        };
        if let Some(journal) = &mut self.journal {
            journal.append(&record)?;
        }
        let loaded = store::load(&path)?;
        let turn_mark = self.turn_mark.clone();
        self.derive(&loaded);
        self.turn_mark = turn_mark;
        Ok(crate::timeline::Rewound {
            message_id: point.message_id.clone(),
            text,
            todos: crate::timeline::todos(&crate::timeline::rewound(&loaded)),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The journal file (`None`: not saved).
    pub fn journal_path(&self) -> Option<&Path> {
        self.journal.as_ref().map(|j| j.path())
    }

    pub fn history(&self) -> &[ChatMessage] {
        &self.history
    }

    /// The user messages of the history (after the last `/clear` or
    /// compaction), oldest first, each with its stable id.
    pub fn user_messages(&self) -> &[store::UserEntry] {
        &self.users
    }

    /// The thread's file checkpoints ([`crate::checkpoint::Timeline`]).
    pub fn file_checkpoints(&self) -> &crate::checkpoint::Timeline {
        &self.timeline
    }

    /// The compaction summary the history continues from.
    pub fn summary(&self) -> Option<&str> {
        self.summary.as_deref()
    }

    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// Who wrote the title ([`store::TitleSource::User`] when there is none).
    pub fn title_source(&self) -> store::TitleSource {
        self.title_source
    }

    /// Counts a labelling call started; the count before it.
    pub fn title_try(&mut self) -> u8 {
        self.title_tries = self.title_tries.saturating_add(1);
        self.title_tries - 1
    }

    /// Labelling calls started for this conversation.
    pub fn title_tries(&self) -> u8 {
        self.title_tries
    }

    /// What the thread cost so far.
    pub fn ledger(&self) -> &crate::cost::Ledger {
        &self.ledger
    }

    /// A turn starts: its cost is counted from here.
    pub fn mark_turn(&mut self) {
        self.turn_mark.clone_from(&self.ledger);
    }

    /// What the running or last turn cost.
    pub fn turn_cost(&self) -> crate::cost::Ledger {
        self.ledger.since(&self.turn_mark)
    }

    /// The thread's option `key` when it is a string.
    pub fn option_text(&self, key: &str) -> Option<String> {
        self.options.get(key)?.as_str().map(str::to_owned)
    }

    /// The thread's options as journal records (for a new file).
    pub fn option_records(&self) -> impl Iterator<Item = Record> + '_ {
        self.options.iter().map(|(key, value)| Record::Option {
            key: key.clone(),
            value: value.clone(),
        })
    }

    /// The tools loaded in this thread (offered whole though deferred).
    pub fn loaded_tools(&self) -> &BTreeSet<String> {
        &self.loaded_tools
    }

    /// Loads tools for the rest of the thread; records the new ones.
    pub fn load_tools(&mut self, names: Vec<String>) {
        let names: Vec<String> = names
            .into_iter()
            .filter(|n| !self.loaded_tools.contains(n))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if !names.is_empty() {
            self.record(&Record::ToolsLoaded { names });
        }
    }

    /// The loaded tools as one journal record (for a new file).
    pub fn loaded_tools_record(&self) -> Option<Record> {
        (!self.loaded_tools.is_empty()).then(|| Record::ToolsLoaded {
            names: self.loaded_tools.iter().cloned().collect(),
        })
    }

    /// Sets an option for this thread and records it (unchanged: nothing
    /// is written).
    pub fn set_option(&mut self, key: String, value: serde_json::Value) {
        if self.options.get(&key) != Some(&value) {
            self.record(&Record::Option { key, value });
        }
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

    /// Keeps the derived state in step with a record written to the
    /// journal, exactly as [`Loaded`] derives it on reload.
    fn absorb(&mut self, record: &Record) {
        absorb_timeline(&mut self.timeline, record);
        match record {
            Record::Clear => {
                self.summary = None;
                self.users.clear();
                self.loaded_tools.clear();
            }
            Record::ToolsLoaded { names } => self.loaded_tools.extend(names.iter().cloned()),
            Record::Compaction { summary } => {
                self.summary = Some(summary.clone());
                self.users.clear();
            }
            Record::UserDisplay { id, text, steer } => self.users.push(store::UserEntry {
                id: id.clone(),
                text: text.clone(),
                steer: *steer,
                history_index: self.history.len(),
            }),
            Record::Title { title, source } => {
                self.title = Some(title.clone());
                self.title_source = *source;
            }
            Record::Option { key, value } => {
                self.options.insert(key.clone(), value.clone());
            }
            // Appended by `rewind` only, which derives everything again.
            Record::Rewind { .. } => {}
            other => other.absorb_cost(&mut self.ledger),
        }
    }

    /// Saves a record that is not a history message (what the user saw).
    pub fn record(&mut self, record: &Record) {
        self.absorb(record);
        self.open_journal();
        let Some(journal) = &mut self.journal else {
            return;
        };
        match journal.append(record) {
            Ok(()) => self.append_failing = false,
            Err(e) => {
                tracing::warn!("cannot save a message: {e}");
                if !std::mem::replace(&mut self.append_failing, true) {
                    let _ = self.events.send(Event::Notice {
                        level: NoticeLevel::Warning,
                        text: format!(
                            "This conversation is not being saved: {e}. What follows may be \
                             missing when it is loaded again."
                        ),
                    });
                }
            }
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
    /// exchange), in the journal too: the history restarts (after the
    /// summary it continues from, if any) with what is kept.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.history.len() {
            return;
        }
        self.history.truncate(len);
        let restart = match &self.summary {
            Some(summary) => Record::Compaction {
                summary: summary.clone(),
            },
            None => Record::Clear,
        };
        let loaded = self.loaded_tools_record();
        self.record(&restart);
        // A refused exchange is forgotten, not the tools the thread loaded.
        if let Some(loaded) = loaded {
            self.record(&loaded);
        }
        for message in self.history.clone() {
            self.record(&Record::Message { message });
        }
    }

    /// `/new`: an empty conversation in a fresh journal `name`.
    pub fn restart(&mut self, name: String) {
        self.journal = None;
        self.unsaved = false;
        self.history.clear();
        self.users.clear();
        self.timeline = crate::checkpoint::Timeline::default();
        self.summary = None;
        self.title = None;
        self.loaded_tools.clear();
        self.title_source = store::TitleSource::User;
        self.title_tries = 0;
        self.ledger = crate::cost::Ledger::default();
        self.turn_mark = crate::cost::Ledger::default();
        self.name = name;
        self.open_journal();
        // The thread's options (the editor's choices) go on in the new file.
        for (key, value) in std::mem::take(&mut self.options) {
            self.set_option(key, value);
        }
    }

    /// After a compaction: the thread continues in a new journal `name`
    /// that starts with `records`; the history restarts empty. Fails with
    /// [`StoreError::Exists`] (changing nothing) when a journal `name` exists:
    /// another thread's file is never replaced, even by one created meanwhile.
    pub fn continue_as(&mut self, name: String, records: &[Record]) -> Result<(), StoreError> {
        let header = store::new_header(&self.id, &self.cwd);
        let journal = Journal::create_new(&self.cwd, &name, &header, records)?;
        self.journal = Some(journal);
        self.unsaved = false;
        self.name = name;
        self.history.clear();
        for record in records {
            self.absorb(record);
        }
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
        let mine = std::mem::take(&mut self.options);
        self.derive(loaded);
        // The thread's options (the editor's choices) win over the adopted
        // conversation's.
        for (key, value) in mine {
            self.set_option(key, value);
        }
        Ok(())
    }

    /// A labelling call's title: the journal is rewritten in place (written
    /// aside, then moved over it, as [`Journal::create`] does) with the title
    /// as its first record, as [`Conversation::rename`] does, under the same
    /// name. Unsaved, only the title changes.
    pub fn set_label(&mut self, title: &str) -> Result<(), StoreError> {
        if let Some(journal) = &self.journal {
            let loaded = store::load(journal.path())?;
            let records = titled_first(loaded.records, title, store::TitleSource::Label);
            // The new file is locked before the old one's lock goes.
            let new = Journal::create(&self.cwd, &self.name, &loaded.header, &records)?;
            self.journal = Some(new);
        }
        self.title = Some(title.to_owned());
        self.title_source = store::TitleSource::Label;
        Ok(())
    }

    /// `/rename`: the conversation continues in the journal `name`, whose
    /// title is `name` too. The journal is copied whole into the new file
    /// (written aside, then moved into place) with the title as its first
    /// record, because listing reads only the start of each file; earlier
    /// titles are left out so the new one is the last as well. The old
    /// file is removed once the new one is in place.
    pub fn rename(&mut self, name: String) -> Result<(), StoreError> {
        let Some(journal) = self.journal.take() else {
            self.name = name;
            return Ok(());
        };
        let from = journal.path().to_path_buf();
        let loaded = match store::load(&from) {
            Ok(loaded) => loaded,
            Err(e) => {
                self.journal = Some(journal);
                return Err(e);
            }
        };
        let records = titled_first(loaded.records, &name, store::TitleSource::User);
        // The old file's lock is released before the new file is locked.
        drop(journal);
        match Journal::create_new(&self.cwd, &name, &loaded.header, &records) {
            Ok(new) => {
                self.journal = Some(new);
                self.title = Some(name.clone());
                self.title_source = store::TitleSource::User;
                if let Err(e) = std::fs::remove_file(&from) {
                    tracing::warn!(path = %from.display(), "cannot remove the renamed journal: {e}");
                }
                self.name = name;
                Ok(())
            }
            Err(e) => {
                self.journal = Journal::open(&from).ok();
                Err(e)
            }
        }
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
    fn a_label_heads_the_same_journal_and_the_list() {
        let dir = tempfile::tempdir().unwrap();
        let (mut c, _rx) = fresh(dir.path());
        c.record(&Record::Title {
            title: "fix the login".into(),
            source: store::TitleSource::Prompt,
        });
        // More records than the list reads before giving up on a title.
        for i in 0..80 {
            c.push(ChatMessage::user(format!("m{i}")));
        }
        assert_eq!(c.title_source(), store::TitleSource::Prompt);
        c.set_label("Login fix").unwrap();
        c.push(ChatMessage::assistant("after"));
        let path = store::session_path(dir.path(), "first");
        let loaded = store::load(&path).unwrap();
        assert_eq!(
            loaded.records[0],
            Record::Title {
                title: "Login fix".into(),
                source: store::TitleSource::Label,
            }
        );
        let titles = loaded
            .records
            .iter()
            .filter(|r| matches!(r, Record::Title { .. }));
        assert_eq!(titles.count(), 1);
        assert_eq!(loaded.history(), c.history());
        assert_eq!(c.title_source(), store::TitleSource::Label);
        let listed = store::list(dir.path());
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].title.as_deref(), Some("Login fix"));
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
        c.record(&Record::Title {
            title: "old title".into(),
            source: store::TitleSource::Prompt,
        });
        c.rename("second".into()).unwrap();
        c.push(ChatMessage::user("d"));
        let path = store::session_path(dir.path(), "second");
        let loaded = store::load(&path).unwrap();
        assert_eq!(loaded.history(), c.history());
        assert_eq!(
            loaded.records[0],
            Record::Title {
                title: "second".into(),
                source: store::TitleSource::User,
            }
        );
        assert_eq!(loaded.title(), Some("second"));
        assert!(!store::session_path(dir.path(), "first").exists());
        let listed = store::list(dir.path());
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].title.as_deref(), Some("second"));
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

    #[test]
    fn user_messages_live_are_those_a_reload_derives() {
        let dir = tempfile::tempdir().unwrap();
        let (mut c, _rx) = fresh(dir.path());
        let user = |c: &mut Conversation, id: &str, steer: bool| {
            c.record(&Record::UserDisplay {
                id: id.into(),
                text: format!("text {id}"),
                steer,
            });
            c.push(ChatMessage::user(id));
        };
        let reloaded = |name: &str| {
            store::load(&store::session_path(dir.path(), name))
                .unwrap()
                .user_messages()
        };
        user(&mut c, "a", false);
        c.push(ChatMessage::assistant("ok"));
        user(&mut c, "b", true);
        assert_eq!(reloaded("first"), c.user_messages());
        assert_eq!(c.user_messages()[1].history_index, 2);
        c.clear();
        assert!(c.user_messages().is_empty());
        user(&mut c, "c", false);
        assert_eq!(reloaded("first"), c.user_messages());
        c.rename("second".into()).unwrap();
        assert_eq!(reloaded("second"), c.user_messages());
        c.restart("third".into());
        assert!(c.user_messages().is_empty());
    }

    #[test]
    fn a_live_rewind_is_what_a_reload_derives_and_a_refused_one_writes_nothing() {
        use crate::session_tools::{Todo, TodoStatus};
        use crate::timeline::{MessagePoint, RewindError};
        let dir = tempfile::tempdir().unwrap();
        let (mut c, _rx) = fresh(dir.path());
        let user = |c: &mut Conversation, id: &str| {
            c.record(&Record::UserDisplay {
                id: id.into(),
                text: format!("text {id}"),
                steer: false,
            });
            c.push(ChatMessage::user(id));
            c.push(ChatMessage::assistant(format!("re {id}")));
        };
        let todo = Todo {
            content: "one".into(),
            status: TodoStatus::Pending,
            active_form: None,
        };
        user(&mut c, "a");
        c.record(&Record::Plan {
            todos: vec![todo.clone()],
        });
        user(&mut c, "b");
        c.record(&Record::Plan { todos: vec![] });
        user(&mut c, "c");
        let point = |id: &str| MessagePoint {
            message_id: id.into(),
            ..Default::default()
        };
        let path = store::session_path(dir.path(), "first");
        let before = std::fs::read(&path).unwrap();
        assert!(matches!(
            c.rewind(&point("zz")),
            Err(RewindError::UnknownMessage(_))
        ));
        assert_eq!(std::fs::read(&path).unwrap(), before);
        let done = c.rewind(&point("b")).unwrap();
        assert_eq!(done.text, "text b");
        assert_eq!(done.todos, vec![todo]);
        assert_eq!(
            c.history(),
            &[ChatMessage::user("a"), ChatMessage::assistant("re a")]
        );
        let reloaded = crate::timeline::rewound(&store::load(&path).unwrap());
        assert_eq!(reloaded.history(), c.history());
        assert_eq!(reloaded.user_messages(), c.user_messages());
        // New messages continue the rewound thread, live and on reload.
        user(&mut c, "d");
        let reloaded = crate::timeline::rewound(&store::load(&path).unwrap());
        assert_eq!(reloaded.history(), c.history());
        assert_eq!(c.user_messages().len(), 2);
    }

    #[test]
    fn the_thread_s_options_are_saved_and_follow_it_to_new_files() {
        let dir = tempfile::tempdir().unwrap();
        let (mut c, _rx) = fresh(dir.path());
        c.set_option("reasoning_effort".into(), "high".into());
        c.set_option("show_thinking".into(), false.into());
        c.set_option("reasoning_effort".into(), "low".into());
        let options = |name: &str| {
            store::load(&store::session_path(dir.path(), name))
                .unwrap()
                .options()
        };
        assert_eq!(options("first"), c.options);
        assert_eq!(c.option_text("reasoning_effort").as_deref(), Some("low"));
        // Unchanged: nothing written.
        let before = std::fs::read_to_string(store::session_path(dir.path(), "first")).unwrap();
        c.set_option("show_thinking".into(), false.into());
        let after = std::fs::read_to_string(store::session_path(dir.path(), "first")).unwrap();
        assert_eq!(before, after);
        // `/rename` and `/new` keep them.
        c.rename("second".into()).unwrap();
        assert_eq!(options("second"), c.options);
        c.restart("third".into());
        assert_eq!(options("third"), c.options);
        assert_eq!(c.option_text("reasoning_effort").as_deref(), Some("low"));
        // A saved conversation taken over (`/load`) gets the thread's.
        let loaded = store::load(&store::session_path(dir.path(), "second")).unwrap();
        c.set_option("reasoning_effort".into(), "medium".into());
        c.adopt("fourth".into(), &loaded).unwrap();
        assert_eq!(c.option_text("reasoning_effort").as_deref(), Some("medium"));
        assert_eq!(options("fourth"), c.options);
    }

    #[test]
    fn loaded_tools_follow_the_thread_until_a_clear() {
        let dir = tempfile::tempdir().unwrap();
        let (mut c, _rx) = fresh(dir.path());
        let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let reloaded = |name: &str| {
            store::load(&store::session_path(dir.path(), name))
                .unwrap()
                .loaded_tools()
        };
        c.push(ChatMessage::user("a"));
        c.load_tools(names(&["mcp__s__b", "mcp__s__a"]));
        let before = std::fs::read_to_string(store::session_path(dir.path(), "first")).unwrap();
        c.load_tools(names(&["mcp__s__a"]));
        let after = std::fs::read_to_string(store::session_path(dir.path(), "first")).unwrap();
        assert_eq!(before, after, "nothing new, nothing written");
        assert_eq!(reloaded("first"), *c.loaded_tools());
        assert_eq!(c.loaded_tools().len(), 2);
        // A refused exchange is forgotten, not the loaded tools.
        c.push(ChatMessage::assistant("b"));
        c.truncate(1);
        assert_eq!(reloaded("first").len(), 2);
        // A compaction's new file starts with them.
        let mut records = vec![Record::Compaction {
            summary: "s".into(),
        }];
        records.extend(c.loaded_tools_record());
        c.continue_as("first__1".into(), &records).unwrap();
        assert_eq!(reloaded("first__1"), *c.loaded_tools());
        // `/clear` and `/new` forget them.
        c.clear();
        assert!(c.loaded_tools().is_empty());
        assert!(reloaded("first__1").is_empty());
        c.load_tools(names(&["mcp__s__c"]));
        c.restart("second".into());
        assert!(c.loaded_tools().is_empty());
    }

    #[test]
    fn a_compaction_never_replaces_a_journal_created_meanwhile() {
        let dir = tempfile::tempdir().unwrap();
        let (mut c, _rx) = fresh(dir.path());
        c.push(ChatMessage::user("mine"));
        // Another thread took `first__1` while this one was being summarised.
        let (tx, _rx2) = mpsc::unbounded_channel();
        let mut other = Conversation::create("t2", dir.path(), None, "first__1".into(), tx);
        other.push(ChatMessage::user("theirs"));
        let summary = [Record::Compaction {
            summary: "s".into(),
        }];
        let err = c.continue_as("first__1".into(), &summary).unwrap_err();
        assert!(matches!(err, StoreError::Exists { .. }), "{err}");
        let path = store::session_path(dir.path(), "first__1");
        assert_eq!(store::load(&path).unwrap().history(), other.history());
        // Nothing changed here; the next name works.
        assert_eq!(c.name(), "first");
        assert_eq!(c.history(), &[ChatMessage::user("mine")]);
        c.continue_as("first__2".into(), &summary).unwrap();
        assert_eq!(store::find(dir.path(), "t1").unwrap().name, "first__2");
        assert_eq!(store::find(dir.path(), "t2").unwrap().name, "first__1");
    }

    #[test]
    fn rename_never_replaces_another_journal() {
        let dir = tempfile::tempdir().unwrap();
        let (mut c, _rx) = fresh(dir.path());
        c.push(ChatMessage::user("mine"));
        // Another thread saved as `other` after the name was checked.
        let (tx, _rx2) = mpsc::unbounded_channel();
        let mut other = Conversation::create("t2", dir.path(), None, "other".into(), tx);
        other.push(ChatMessage::user("theirs"));
        let err = c.rename("other".into()).unwrap_err();
        assert!(matches!(err, StoreError::Exists { .. }), "{err}");
        let path = store::session_path(dir.path(), "other");
        assert_eq!(store::load(&path).unwrap().history(), other.history());
        // This conversation goes on in its own journal.
        assert_eq!(c.name(), "first");
        c.push(ChatMessage::user("more"));
        let path = store::session_path(dir.path(), "first");
        assert_eq!(store::load(&path).unwrap().history(), c.history());
        other.push(ChatMessage::user("still theirs"));
        let path = store::session_path(dir.path(), "other");
        assert_eq!(store::load(&path).unwrap().history(), other.history());
    }
}
