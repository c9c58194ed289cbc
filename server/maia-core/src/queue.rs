//! The prompt queue of a session: prompts the user lines up while a turn
//! runs, run one by one as turns end (codex-acp's `_session/queue` action
//! set: list, add, update, delete, reorder, start). The session task owns
//! it; the handle sends [`QueueRequest`]s, answered at once, also while a
//! turn runs. It is saved beside the journal
//! (`.maia/.sessions/.queue/<id>.json`, replaced whole on every change), so it
//! survives a restart; a restored queue waits for `start` or the end of the
//! next turn. A cancelled turn pauses it (nothing is dropped) until `start`
//! or the next turn that ends otherwise. Adding never starts a turn by itself.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::prompt::PromptPart;

/// One item of a queued prompt (the native codex input shapes MAIA takes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum QueueInput {
    Text {
        text: String,
    },
    /// A file, as `@path`.
    Mention {
        name: String,
        path: PathBuf,
    },
}

/// A queued prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Queued {
    pub id: String,
    pub input: Vec<QueueInput>,
    pub client_user_message_id: String,
}

/// What a client asks of the queue.
#[derive(Debug, Clone)]
pub enum QueueOp {
    List,
    Add {
        input: Vec<QueueInput>,
        client_user_message_id: String,
    },
    Update {
        id: String,
        input: Vec<QueueInput>,
    },
    Delete {
        id: String,
    },
    /// Every queued id, each once, in the new order.
    Reorder {
        ids: Vec<String>,
    },
    /// Runs `id` (else the head) now; the rest follows in order.
    Start {
        id: Option<String>,
    },
}

/// The answer to a [`QueueOp`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueAnswer {
    List(Vec<Queued>),
    Written(Queued),
    Deleted(bool),
    Reordered,
    /// The turn started, with its id (as `Event::QueueTurn` names it).
    Started {
        turn_id: String,
    },
}

/// Why a queue request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    #[error("no queued prompt `{0}`; list the queue again")]
    Unknown(String),
    #[error("reorder must name every queued prompt exactly once; list the queue again")]
    Order,
    #[error("a queued prompt needs some input")]
    EmptyInput,
    #[error("the queue is empty")]
    Empty,
    #[error("a turn is running; the queue continues when it ends")]
    Busy,
    #[error("the session has ended")]
    Ended,
}

/// How a queued turn went (`Event::QueueTurn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueTurnStatus {
    InProgress,
    Completed,
    Interrupted,
}

pub(crate) struct QueueRequest {
    pub(crate) op: QueueOp,
    pub(crate) reply: oneshot::Sender<Result<QueueAnswer, QueueError>>,
}

/// The queue, as the session task holds it.
pub(crate) struct Queue {
    items: Vec<Queued>,
    /// Set by a cancelled turn: no turn is taken from the queue by itself.
    pub(crate) paused: bool,
    path: Option<PathBuf>,
}

impl Queue {
    /// The queue saved at `path` (empty when none; `None`: not saved).
    pub(crate) fn load(path: Option<PathBuf>) -> Self {
        let items = path
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default();
        Queue {
            items,
            paused: false,
            path,
        }
    }

    fn save(&self) {
        let Some(path) = &self.path else { return };
        let result = if self.items.is_empty() {
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            }
        } else {
            let tmp = path.with_extension("tmp");
            path.parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| {
                    std::fs::write(&tmp, serde_json::to_string(&self.items).unwrap_or_default())
                })
                .and_then(|()| std::fs::rename(&tmp, path))
        };
        if let Err(e) = result {
            tracing::warn!("cannot save the prompt queue at {}: {e}", path.display());
        }
    }

    /// Applies an op that starts nothing; returns the answer and whether
    /// the queue changed.
    pub(crate) fn edit(&mut self, op: QueueOp) -> Result<(QueueAnswer, bool), QueueError> {
        let answer = match op {
            QueueOp::List => return Ok((QueueAnswer::List(self.items.clone()), false)),
            QueueOp::Add {
                input,
                client_user_message_id,
            } => {
                if input.is_empty() {
                    return Err(QueueError::EmptyInput);
                }
                let item = Queued {
                    id: format!("queued-{}", uuid::Uuid::new_v4().simple()),
                    input,
                    client_user_message_id,
                };
                self.items.push(item.clone());
                QueueAnswer::Written(item)
            }
            QueueOp::Update { id, input } => {
                if input.is_empty() {
                    return Err(QueueError::EmptyInput);
                }
                let item = self
                    .items
                    .iter_mut()
                    .find(|i| i.id == id)
                    .ok_or(QueueError::Unknown(id))?;
                item.input = input;
                QueueAnswer::Written(item.clone())
            }
            QueueOp::Delete { id } => {
                let before = self.items.len();
                self.items.retain(|i| i.id != id);
                if self.items.len() == before {
                    return Ok((QueueAnswer::Deleted(false), false));
                }
                QueueAnswer::Deleted(true)
            }
            QueueOp::Reorder { ids } => {
                let mut sorted = ids.clone();
                sorted.sort();
                sorted.dedup();
                let mut current: Vec<&str> = self.items.iter().map(|i| i.id.as_str()).collect();
                current.sort_unstable();
                if sorted.len() != ids.len() || sorted != current {
                    return Err(QueueError::Order);
                }
                self.items
                    .sort_by_key(|i| ids.iter().position(|id| *id == i.id));
                QueueAnswer::Reordered
            }
            QueueOp::Start { .. } => return Err(QueueError::Busy),
        };
        self.save();
        Ok((answer, true))
    }

    /// Takes `id` (else the head) out of the queue, to run it.
    pub(crate) fn take(&mut self, id: Option<&str>) -> Result<Queued, QueueError> {
        let at = match id {
            Some(id) => self
                .items
                .iter()
                .position(|i| i.id == id)
                .ok_or_else(|| QueueError::Unknown(id.to_owned()))?,
            None if self.items.is_empty() => return Err(QueueError::Empty),
            None => 0,
        };
        let item = self.items.remove(at);
        self.save();
        Ok(item)
    }

    /// The head, taken out, when the queue runs by itself.
    pub(crate) fn next(&mut self) -> Option<Queued> {
        if self.paused || self.items.is_empty() {
            return None;
        }
        self.take(None).ok()
    }
}

/// A queued prompt as the parts of a prompt.
pub(crate) fn parts(input: &[QueueInput]) -> Vec<PromptPart> {
    input
        .iter()
        .map(|i| match i {
            QueueInput::Text { text } => PromptPart::Text(text.clone()),
            QueueInput::Mention { path, .. } => PromptPart::File(path.clone()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(queue: &mut Queue, text: &str) -> String {
        let op = QueueOp::Add {
            input: vec![QueueInput::Text { text: text.into() }],
            client_user_message_id: format!("c-{text}"),
        };
        match queue.edit(op) {
            Ok((QueueAnswer::Written(item), true)) => item.id,
            other => panic!("{other:?}"),
        }
    }

    fn texts(queue: &mut Queue) -> Vec<String> {
        match queue.edit(QueueOp::List) {
            Ok((QueueAnswer::List(items), false)) => items
                .iter()
                .map(|i| match &i.input[0] {
                    QueueInput::Text { text } => text.clone(),
                    QueueInput::Mention { name, .. } => name.clone(),
                })
                .collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reorder_takes_every_id_once_and_the_queue_is_saved_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".queue").join("t.json");
        let mut queue = Queue::load(Some(path.clone()));
        let (a, b, c) = (
            add(&mut queue, "a"),
            add(&mut queue, "b"),
            add(&mut queue, "c"),
        );
        for stale in [
            vec![a.clone(), b.clone()],
            vec![a.clone(), a.clone(), b.clone()],
        ] {
            assert_eq!(
                queue.edit(QueueOp::Reorder { ids: stale }).unwrap_err(),
                QueueError::Order
            );
        }
        let ids = vec![c.clone(), a.clone(), b.clone()];
        queue.edit(QueueOp::Reorder { ids }).unwrap();
        assert_eq!(texts(&mut queue), ["c", "a", "b"]);
        assert_eq!(queue.take(Some(&a)).unwrap().id, a);
        let mut reloaded = Queue::load(Some(path.clone()));
        assert_eq!(texts(&mut reloaded), ["c", "b"]);
        reloaded.paused = true;
        assert!(
            reloaded.next().is_none(),
            "a paused queue runs nothing by itself"
        );
        assert_eq!(reloaded.take(None).unwrap().id, c);
        assert_eq!(reloaded.take(Some(&b)).unwrap().id, b);
        assert_eq!(reloaded.take(None).unwrap_err(), QueueError::Empty);
        assert!(!path.exists(), "an empty queue leaves no file");
        assert!(matches!(
            reloaded.edit(QueueOp::Delete { id: b }),
            Ok((QueueAnswer::Deleted(false), false))
        ));
    }
}
