//! The session timeline: rewinds and forks of a thread. A rewind is a
//! journal record ([`Record::Rewind`]) that truncates the thread before one
//! of its user messages; nothing is deleted. [`rewound`] derives the
//! records in effect, the one derivation a reload and the live
//! conversation share. A fork copies the records in effect, up to a user
//! message, into a new thread ([`fork`]), in the same folder or in a git
//! worktree of its own ([`add_worktree`]).

use std::path::Path;

use sha2::{Digest, Sha256};

use crate::session_tools::Todo;
use crate::store::{self, Journal, Loaded, Record, StoreError};

/// A user message as a client names it (`beforeMessage`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MessagePoint {
    pub message_id: String,
    /// `sha256:<hex>` of the message's text ([`fingerprint`]).
    pub fingerprint: Option<String>,
    /// Which of the messages with that text it is, from 1.
    pub occurrence: Option<u32>,
}

/// Why a rewind was refused with nothing changed (the wire's `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The message is before the latest compaction or `/clear`.
    BeforeCompaction,
    /// The fingerprint or occurrence given does not match the message.
    FingerprintMismatch,
}

impl Refusal {
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::BeforeCompaction => "before_compaction",
            Refusal::FingerprintMismatch => "fingerprint_mismatch",
        }
    }
}

/// Why a rewind did not happen.
#[derive(Debug, thiserror::Error)]
pub enum RewindError {
    #[error("a turn is running; cancel it first")]
    Busy,
    #[error("no user message `{0}` in this thread")]
    UnknownMessage(String),
    #[error("not rewound ({})", .0.reason())]
    Refused(Refusal),
    #[error("this conversation is not saved, so it cannot be rewound")]
    Unsaved,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the session has ended")]
    Ended,
    /// The files were to be restored too, and their preview failed:
    /// nothing changed.
    #[error("cannot restore the files: {0}")]
    Files(crate::checkpoint::RevertError),
}

/// A rewind done.
#[derive(Debug, Clone, PartialEq)]
pub struct Rewound {
    /// The user message the thread now ends before.
    pub message_id: String,
    /// Its text (what "edit and resend" starts from).
    pub text: String,
    /// The task list in effect (the last one before the message).
    pub todos: Vec<Todo>,
}

/// A rewind a live session did ([`crate::SessionHandle::rewind`]), with
/// the files restored when they were asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct RewindDone {
    pub rewound: Rewound,
    /// The files restored as a revert from the message would do it:
    /// `None` when not asked for or nothing was to restore.
    pub files: Option<Result<crate::checkpoint::RevertReport, crate::checkpoint::RevertError>>,
}

/// `sha256:` and the hex SHA-256 of a message's text (as codex-acp and
/// claude-agent-acp compute `messageFingerprint`).
pub fn fingerprint(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// The id of the user message `record` is, if it is one ([`store::load`]
/// gives one to every user message, `u<N>` in journals older than ids).
fn user_id(record: &Record) -> Option<String> {
    match record {
        Record::UserDisplay { id, .. } => Some(id.clone()),
        _ => None,
    }
}

/// Whether a record stays in effect after a rewind drops its part of the
/// thread: what belongs to the thread, not to its messages (money spent,
/// the title, the editor's options).
fn outlives_rewind(record: &Record) -> bool {
    matches!(
        record,
        Record::Usage { .. } | Record::Costs { .. } | Record::Title { .. } | Record::Option { .. }
    )
}

/// The records in effect, each with its user message id: the journal with
/// its rewinds applied. A rewind naming no message of the current thread
/// is ignored (it was never written so: [`check`] refuses it).
fn in_effect(records: &[Record]) -> Vec<(Option<String>, Record)> {
    let mut out: Vec<(Option<String>, Record)> = Vec::with_capacity(records.len());
    for record in records {
        if let Record::Rewind { before } = record {
            let start = thread_start_of(&out);
            let at = out[start..]
                .iter()
                .position(|(id, _)| id.as_deref() == Some(before.as_str()));
            match at {
                Some(at) => {
                    let tail = out.split_off(start + at);
                    out.extend(tail.into_iter().filter(|(_, r)| outlives_rewind(r)));
                }
                None => tracing::warn!(before, "ignored a rewind to an unknown message"),
            }
            continue;
        }
        out.push((user_id(record), record.clone()));
    }
    out
}

fn thread_start_of(records: &[(Option<String>, Record)]) -> usize {
    records
        .iter()
        .rposition(|(_, r)| matches!(r, Record::Clear | Record::Compaction { .. }))
        .map_or(0, |i| i + 1)
}

/// The journal `loaded` as it is in effect, its rewinds applied (what a
/// reload, the replay and the live conversation derive their state from).
pub fn rewound(loaded: &Loaded) -> Loaded {
    Loaded {
        header: loaded.header.clone(),
        records: in_effect(&loaded.records)
            .into_iter()
            .map(|(_, r)| r)
            .collect(),
    }
}

/// Checks that the thread `loaded` can be rewound before `point`; the
/// message's text when it can.
pub fn check(loaded: &Loaded, point: &MessagePoint) -> Result<String, RewindError> {
    let records = in_effect(&loaded.records);
    let at = records
        .iter()
        .position(|(id, _)| id.as_deref() == Some(point.message_id.as_str()))
        .ok_or_else(|| RewindError::UnknownMessage(point.message_id.clone()))?;
    let start = thread_start_of(&records);
    if at < start {
        return Err(RewindError::Refused(Refusal::BeforeCompaction));
    }
    let text_of = |r: &Record| match r {
        Record::UserDisplay { text, .. } => Some(text.clone()),
        _ => None,
    };
    let text = text_of(&records[at].1).unwrap_or_default();
    let print = fingerprint(&text);
    if point.fingerprint.as_ref().is_some_and(|f| *f != print) {
        return Err(RewindError::Refused(Refusal::FingerprintMismatch));
    }
    if let Some(occurrence) = point.occurrence {
        let nth = records[start..=at]
            .iter()
            .filter(|(id, r)| id.is_some() && text_of(r).is_some_and(|t| fingerprint(&t) == print))
            .count();
        if usize::try_from(occurrence).ok() != Some(nth) {
            return Err(RewindError::Refused(Refusal::FingerprintMismatch));
        }
    }
    Ok(text)
}

/// Whether the user message `message_id` is in a journal file of thread
/// `id` in `cwd` other than `current` (one a compaction or `/new` left
/// behind): a message the thread can no longer be rewound to.
pub fn in_earlier_file(cwd: &Path, id: &str, current: &Path, message_id: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(store::sessions_dir(cwd)) else {
        return false;
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p != current && p.extension().is_some_and(|e| e == "jsonl"))
        .filter_map(|p| store::load(&p).ok())
        .filter(|l| l.header.id == id)
        .any(|l| {
            l.records
                .iter()
                .any(|r| matches!(r, Record::UserDisplay { id: m, .. } if m == message_id))
        })
}

/// The task list in effect in `loaded` (the last one written).
pub fn todos(loaded: &Loaded) -> Vec<Todo> {
    loaded
        .records
        .iter()
        .rev()
        .find_map(|r| match r {
            Record::Plan { todos } => Some(todos.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// Why a fork was not made.
#[derive(Debug, thiserror::Error)]
pub enum ForkError {
    #[error("no saved session `{0}` in this folder")]
    NotFound(String),
    #[error("unknown cursor `{0}`: it names no user message of this session")]
    UnknownCursor(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The records of a fork of `loaded` before the user message `before`
/// (all of it without one), as a new thread: its messages, tool calls,
/// task lists, summary and options in effect; its title `"<title>
/// (fork)"`, first so listing finds it. The source's costs stay the
/// source's: the fork's ledger starts empty.
pub fn fork_records(loaded: &Loaded, before: Option<&str>) -> Result<Vec<Record>, ForkError> {
    let mut records = in_effect(&loaded.records);
    if let Some(before) = before {
        let at = records
            .iter()
            .position(|(id, _)| id.as_deref() == Some(before))
            .ok_or_else(|| ForkError::UnknownCursor(before.to_owned()))?;
        records.truncate(at);
    }
    let title = loaded.title().unwrap_or("Conversation");
    let mut out = vec![Record::Title {
        title: format!("{title} (fork)"),
        source: crate::store::TitleSource::User,
    }];
    out.extend(records.into_iter().map(|(_, r)| r).filter(|r| {
        !matches!(
            r,
            Record::Title { .. } | Record::Usage { .. } | Record::Costs { .. }
        )
    }));
    Ok(out)
}

/// A fork ready to be saved: the records of its new thread.
#[derive(Debug, Clone, PartialEq)]
pub struct Fork {
    records: Vec<Record>,
}

impl Fork {
    /// The fork of thread `source_id` of `source_cwd` before the user
    /// message `before` (all of it without one). The source is only read,
    /// so it may be open.
    pub fn prepare(
        source_cwd: &Path,
        source_id: &str,
        before: Option<&str>,
    ) -> Result<Fork, ForkError> {
        let summary = store::find(source_cwd, source_id)
            .ok_or_else(|| ForkError::NotFound(source_id.to_owned()))?;
        let loaded = store::load(&summary.path)?;
        Ok(Fork {
            records: fork_records(&loaded, before)?,
        })
    }

    /// Saves the fork as the new thread `id` in `cwd`, in the journal
    /// `name` (written whole, never replacing a file).
    pub fn save(
        &self,
        (cwd, id, name): (&Path, &str, &str),
        home: Option<&Path>,
    ) -> Result<(), ForkError> {
        let header = store::new_header(id, cwd);
        drop(Journal::create_new(cwd, name, &header, &self.records)?);
        store::index_thread(home, cwd);
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use maia_llm::ChatMessage;

    fn loaded(records: Vec<Record>) -> Loaded {
        Loaded {
            header: store::new_header("t", Path::new("/x")),
            records,
        }
    }

    fn user(id: &str, text: &str) -> Vec<Record> {
        vec![
            Record::UserDisplay {
                id: id.into(),
                text: text.into(),
                steer: false,
            },
            Record::Message {
                message: ChatMessage::user(text),
            },
        ]
    }

    #[test]
    fn the_fingerprint_is_the_peers() {
        // sha256("abc"), as `createHash("sha256").update("abc")` gives it.
        assert_eq!(
            fingerprint("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_rewind_drops_the_message_and_what_follows_but_not_the_costs() {
        let charge = crate::cost::Charge {
            model: "m".into(),
            prompt_tokens: 10,
            completion_tokens: 5,
            cached_tokens: 0,
            cache_write_tokens: 0,
            cost: Some(0.5),
            source: None,
            agent: None,
        };
        let mut records = user("u0", "one");
        records.push(Record::Plan { todos: vec![] });
        records.extend(user("u1", "two"));
        records.push(Record::Usage {
            charge: charge.clone(),
        });
        records.push(Record::Title {
            title: "T".into(),
            source: Default::default(),
        });
        records.push(Record::Rewind {
            before: "u1".into(),
        });
        let effect = rewound(&loaded(records.clone()));
        assert_eq!(effect.history(), vec![ChatMessage::user("one")]);
        assert_eq!(effect.title(), Some("T"));
        assert_eq!(effect.ledger(), loaded(records.clone()).ledger());
        assert_eq!(effect.user_messages().len(), 1);
        records.extend(user("u2", "three"));
        let listed: Vec<_> = rewound(&loaded(records))
            .user_messages()
            .into_iter()
            .map(|u| (u.id, u.text, u.history_index))
            .collect();
        assert_eq!(
            listed,
            vec![
                ("u0".into(), "one".into(), 0),
                ("u2".into(), "three".into(), 1)
            ]
        );
    }

    #[test]
    fn check_refuses_what_it_must() {
        let mut records = user("u0", "same");
        records.push(Record::Clear);
        records.extend(user("u1", "same"));
        records.extend(user("u2", "same"));
        let l = loaded(records);
        let point = |id: &str| MessagePoint {
            message_id: id.into(),
            ..Default::default()
        };
        assert!(matches!(
            check(&l, &point("u0")),
            Err(RewindError::Refused(Refusal::BeforeCompaction))
        ));
        assert!(matches!(
            check(&l, &point("nope")),
            Err(RewindError::UnknownMessage(_))
        ));
        let mut p = point("u2");
        p.fingerprint = Some(fingerprint("same"));
        p.occurrence = Some(2);
        assert_eq!(check(&l, &p).unwrap(), "same");
        p.occurrence = Some(1);
        assert!(matches!(
            check(&l, &p),
            Err(RewindError::Refused(Refusal::FingerprintMismatch))
        ));
        p.occurrence = None;
        p.fingerprint = Some(fingerprint("other"));
        assert!(matches!(
            check(&l, &p),
            Err(RewindError::Refused(Refusal::FingerprintMismatch))
        ));
    }

    #[test]
    fn a_fork_before_a_message_keeps_what_precedes_it() {
        let mut records = vec![Record::Title {
            title: "T".into(),
            source: Default::default(),
        }];
        records.extend(user("u0", "one"));
        records.extend(user("u1", "two"));
        let l = loaded(records);
        let fork = loaded(fork_records(&l, Some("u1")).unwrap());
        assert_eq!(fork.history(), vec![ChatMessage::user("one")]);
        assert_eq!(fork.title(), Some("T (fork)"));
        assert!(matches!(
            fork_records(&l, Some("u9")),
            Err(ForkError::UnknownCursor(_))
        ));
        assert_eq!(loaded(fork_records(&l, None).unwrap()).history().len(), 2);
    }

    /// What the property test does to a thread.
    #[derive(Debug, Clone)]
    enum Op {
        Prompt(String),
        /// Rewind before the live message at this index (modulo).
        Rewind(usize),
        /// Fork before the live message at this index (modulo; the end
        /// forks all of it).
        Fork(usize),
        /// A crash while writing a rewind (`true`) or a prompt, after this
        /// many bytes of its line.
        Crash(bool, usize),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            4 => "[a-z é]{0,12}".prop_map(Op::Prompt),
            2 => (0usize..8).prop_map(Op::Rewind),
            1 => (0usize..8).prop_map(Op::Fork),
            2 => (any::<bool>(), 0usize..200).prop_map(|(r, c)| Op::Crash(r, c)),
        ]
    }

    /// The history a thread of these user messages has (each answered).
    fn model_history(model: &[(String, String)]) -> Vec<ChatMessage> {
        model
            .iter()
            .flat_map(|(_, text)| {
                [
                    ChatMessage::user(text.as_str()),
                    ChatMessage::assistant(format!("re {text}")),
                ]
            })
            .collect()
    }

    fn texts(loaded: &Loaded) -> Vec<String> {
        rewound(loaded)
            .user_messages()
            .into_iter()
            .map(|u| u.text)
            .collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(150))]
        /// Prompts, rewinds, forks and crashes at any byte keep the journal
        /// loadable, and the thread it derives is always the model's: the
        /// messages sent minus the rewound ones, a fork the prefix it was
        /// made before.
        #[test]
        fn the_thread_a_journal_derives_follows_the_model(
            ops in proptest::collection::vec(op(), 1..30)
        ) {
            use std::io::Write;
            let dir = tempfile::tempdir().unwrap();
            let cwd = dir.path();
            let header = store::new_header("p", cwd);
            let mut journal = Journal::create(cwd, "p", &header, &[]).unwrap();
            let path = journal.path().to_path_buf();
            let mut model: Vec<(String, String)> = Vec::new();
            for (n, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Prompt(text) => {
                        let id = format!("m{n}");
                        for record in [
                            Record::UserDisplay { id: id.clone(), text: text.clone(), steer: false },
                            Record::Message { message: ChatMessage::user(text.as_str()) },
                            Record::Message { message: ChatMessage::assistant(format!("re {text}")) },
                        ] {
                            journal.append(&record).unwrap();
                        }
                        model.push((id, text));
                    }
                    Op::Rewind(k) if !model.is_empty() => {
                        let k = k % model.len();
                        let point = MessagePoint { message_id: model[k].0.clone(), ..Default::default() };
                        let loaded = store::load(&path).unwrap();
                        proptest::prop_assert_eq!(check(&loaded, &point).unwrap(), model[k].1.clone());
                        journal.append(&Record::Rewind { before: model[k].0.clone() }).unwrap();
                        model.truncate(k);
                    }
                    Op::Rewind(_) => {}
                    Op::Fork(k) => {
                        let k = k % (model.len() + 1);
                        let before = model.get(k).map(|(id, _)| id.as_str());
                        let loaded = store::load(&path).unwrap();
                        let records = fork_records(&loaded, before).unwrap();
                        let name = format!("f{n}");
                        drop(Journal::create_new(cwd, &name, &store::new_header(&name, cwd), &records).unwrap());
                        let fork = store::load(&store::session_path(cwd, &name)).unwrap();
                        let expected: Vec<String> = model[..k].iter().map(|(_, t)| t.clone()).collect();
                        proptest::prop_assert_eq!(texts(&fork), expected);
                        proptest::prop_assert_eq!(rewound(&fork).history(), model_history(&model[..k]));
                    }
                    Op::Crash(rewinding, cut) => {
                        drop(journal);
                        let record = match model.first() {
                            Some((id, _)) if rewinding => Record::Rewind { before: id.clone() },
                            _ => Record::UserDisplay { id: "torn".into(), text: "torn".into(), steer: false },
                        };
                        let mut bytes = serde_json::to_vec(&record).unwrap();
                        bytes.push(b'\n');
                        let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
                        file.write_all(&bytes[..cut % bytes.len()]).unwrap();
                        drop(file);
                        // Loadable as it is, and the torn record is not in it.
                        let loaded = store::load(&path).unwrap();
                        proptest::prop_assert_eq!(texts(&loaded), model.iter().map(|(_, t)| t.clone()).collect::<Vec<_>>());
                        journal = Journal::open(&path).unwrap();
                    }
                }
                let loaded = store::load(&path).unwrap();
                proptest::prop_assert_eq!(texts(&loaded), model.iter().map(|(_, t)| t.clone()).collect::<Vec<_>>());
                proptest::prop_assert_eq!(rewound(&loaded).history(), model_history(&model));
            }
        }
    }
}
