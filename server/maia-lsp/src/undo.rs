//! `maia.undo`: reverts the hunks the last answer applied.
//!
//! [`crate::edits::EditorFs`] records every write of an answer that changed
//! a file: the hunks the user applied in an open document (read from the
//! document, as the model is told), and whole writes of files that were
//! not open. `maia.undo` takes the latest answer of the folder that still
//! has recorded changes and restores the text those hunks replaced: one
//! `workspace/applyEdit` for the open documents, the disk for the others
//! (a file the answer created is removed). A hunk whose lines the user has
//! changed since is a conflict: it is kept, and named in a
//! `window/showMessage` and in the command's result. Each `maia.undo`
//! reverts one answer, newest first.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use maia_tools::{FileSystem, FsError, LocalFs};
use serde_json::{Value, json};
use tower_lsp_server::jsonrpc::{Error, ErrorCode, Result};
use tower_lsp_server::ls_types::request::ApplyWorkspaceEdit;
use tower_lsp_server::ls_types::{
    ApplyWorkspaceEditParams, DocumentChanges, MessageType, OneOf,
    OptionalVersionedTextDocumentIdentifier, Range, TextDocumentEdit, TextEdit, WorkspaceEdit,
};

use crate::Inner;
use crate::docs::{Doc, position_at};
use crate::edits::{Hunk, hunks, rebase, splice};

/// The command name.
pub const UNDO_COMMAND: &str = "maia.undo";

/// One write of an answer, as it can be reverted.
#[derive(Debug, Clone)]
struct Write {
    path: PathBuf,
    /// The file did not exist before the write (reverting removes it).
    created: bool,
    /// The text right after the write.
    after: String,
    /// The applied hunks in `after`'s coordinates; `new_text` is the text
    /// each replaced (what a revert puts back).
    hunks: Vec<Hunk>,
}

/// The changes of one answer.
#[derive(Debug)]
struct AnswerEdits {
    id: u64,
    folder: PathBuf,
    writes: Vec<Write>,
}

/// The answers' applied changes, oldest first (bounded).
#[derive(Debug, Default)]
pub struct Applied {
    answers: Mutex<Vec<AnswerEdits>>,
    next: std::sync::atomic::AtomicU64,
}

/// Answers whose changes are kept for `maia.undo`.
const MAX_KEPT: usize = 50;

/// A hunk that was not reverted because the user changed its lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub path: PathBuf,
    /// 1-based first line of the hunk as the answer left the file.
    pub line: usize,
    pub lines: usize,
}

impl Conflict {
    fn label(&self) -> String {
        let name = self.path.file_name().map_or_else(
            || self.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        if self.lines > 1 {
            format!("{name} lines {}-{}", self.line, self.line + self.lines - 1)
        } else {
            format!("{name} line {}", self.line)
        }
    }
}

/// Hunks of `base` replaced by spans `(start, end, new)` (in order, not
/// overlapping), expressed in the coordinates of the result: each hunk's
/// range covers its new text there and its `new_text` is the replaced one.
fn reverse_spans(base: &str, spans: &[(usize, usize, &str)]) -> (String, Vec<Hunk>) {
    let after = splice(base, spans);
    let mut out = Vec::with_capacity(spans.len());
    let mut delta: isize = 0;
    for &(start, end, new) in spans {
        let at = start.saturating_add_signed(delta);
        let stop = at + new.len();
        let replaced = &base[start..end];
        out.push(Hunk {
            start: at,
            end: stop,
            new_text: replaced.to_owned(),
            line: after[..at].matches('\n').count() + 1,
            old_lines: line_count(new),
            new_lines: line_count(replaced),
        });
        delta += new.len() as isize - (end - start) as isize;
    }
    (after, out)
}

/// Lines of a line-aligned piece of text (a last line may lack its break).
fn line_count(text: &str) -> usize {
    text.matches('\n').count() + usize::from(!text.is_empty() && !text.ends_with('\n'))
}

impl Applied {
    /// Starts recording a new answer in `folder`; returns its id.
    pub fn begin(&self, folder: &Path) -> u64 {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut answers) = self.answers.lock() {
            answers.push(AnswerEdits {
                id,
                folder: folder.to_path_buf(),
                writes: Vec::new(),
            });
            let excess = answers.len().saturating_sub(MAX_KEPT);
            answers.drain(..excess);
        }
        id
    }

    /// Forgets answer `id` (its turn did not start).
    pub fn abandon(&self, id: u64) {
        if let Ok(mut answers) = self.answers.lock() {
            answers.retain(|a| a.id != id);
        }
    }

    fn push(&self, folder: &Path, write: Write) {
        if write.hunks.is_empty() {
            return;
        }
        let Ok(mut answers) = self.answers.lock() else {
            return;
        };
        match answers.iter_mut().rev().find(|a| a.folder == folder) {
            Some(answer) => answer.writes.push(write),
            None => tracing::debug!("a write outside any answer is not recorded for undo"),
        }
    }

    /// Records that `spans` (in `base`'s coordinates) were applied to the
    /// open document `path`.
    pub fn record_spans(
        &self,
        folder: &Path,
        path: &Path,
        base: &str,
        spans: &[(usize, usize, &str)],
    ) {
        let (after, hunks) = reverse_spans(base, spans);
        self.push(
            folder,
            Write {
                path: path.to_path_buf(),
                created: false,
                after,
                hunks,
            },
        );
    }

    /// Records that the hunks of `hunks` flagged in `kept` were applied to
    /// the open document `path`, which held `old`.
    pub fn record_hunks(&self, folder: &Path, path: &Path, old: &str, all: &[Hunk], kept: &[bool]) {
        let spans: Vec<(usize, usize, &str)> = all
            .iter()
            .zip(kept)
            .filter(|(_, k)| **k)
            .map(|(h, _)| (h.start, h.end, h.new_text.as_str()))
            .collect();
        self.record_spans(folder, path, old, &spans);
    }

    /// Records a write of the file `path` (not open in the editor) from
    /// `before` (`None`: it did not exist) to `after`.
    pub fn record_disk(&self, folder: &Path, path: &Path, before: Option<&str>, after: &str) {
        let old = before.unwrap_or("");
        let all = hunks(old, after);
        let spans: Vec<(usize, usize, &str)> = all
            .iter()
            .map(|h| (h.start, h.end, h.new_text.as_str()))
            .collect();
        let (after, hunks) = reverse_spans(old, &spans);
        self.push(
            folder,
            Write {
                path: path.to_path_buf(),
                created: before.is_none(),
                after,
                hunks,
            },
        );
    }

    /// Takes the latest answer (of `folder`, else of any folder) that has
    /// recorded changes.
    fn take_last(&self, folder: Option<&Path>) -> Option<AnswerEdits> {
        let mut answers = self.answers.lock().ok()?;
        let at = answers
            .iter()
            .rposition(|a| !a.writes.is_empty() && folder.is_none_or(|f| a.folder == f))?;
        Some(answers.remove(at))
    }
}

/// What reverting one file comes to.
struct Plan {
    path: PathBuf,
    /// The open document, else `None` (the disk).
    doc: Option<Doc>,
    /// The text now (`None`: the file is gone).
    now: Option<String>,
    /// The text after the revert (`None`: remove the file).
    target: Option<String>,
    reverted: usize,
}

/// Reverts `writes` of one file (in the order they were made) from `now`.
fn plan_file(writes: &[&Write], now: &str) -> (String, usize, Vec<Conflict>) {
    let mut text = now.to_owned();
    let (mut reverted, mut conflicts) = (0, Vec::new());
    for write in writes.iter().rev() {
        let spans = rebase(&write.after, &text, &write.hunks);
        let mut edits = Vec::new();
        for (hunk, span) in write.hunks.iter().zip(spans) {
            match span {
                Some((start, end)) => edits.push((start, end, hunk.new_text.as_str())),
                None => conflicts.push(Conflict {
                    path: write.path.clone(),
                    line: hunk.line,
                    lines: hunk.old_lines.max(1),
                }),
            }
        }
        reverted += edits.len();
        text = splice(&text, &edits);
    }
    (text, reverted, conflicts)
}

fn busy(message: String) -> Error {
    Error {
        code: ErrorCode::InvalidRequest,
        message: message.into(),
        data: None,
    }
}

/// `maia.undo [{uri?}]`: reverts the applied hunks of the folder's (else
/// the latest) answer. Answers `{undone, files, conflicts}`.
pub async fn undo(inner: &Inner, folder: Option<PathBuf>) -> Result<Value> {
    if inner
        .sessions_of(folder.as_deref())
        .iter()
        .any(|s| s.handle.is_busy())
    {
        return Err(busy(
            "MAIA is answering; wait for it or run maia.cancel before maia.undo".to_owned(),
        ));
    }
    let Some(answer) = inner.applied.take_last(folder.as_deref()) else {
        inner
            .client
            .show_message(MessageType::INFO, "MAIA: nothing to undo")
            .await;
        return Ok(json!({"undone": 0, "files": [], "conflicts": []}));
    };
    let mut order: Vec<&Path> = Vec::new();
    let mut by_path: HashMap<&Path, Vec<&Write>> = HashMap::new();
    for write in &answer.writes {
        if !by_path.contains_key(write.path.as_path()) {
            order.push(&write.path);
        }
        by_path.entry(&write.path).or_default().push(write);
    }
    let mut plans = Vec::new();
    let mut conflicts = Vec::new();
    for path in order {
        let writes = &by_path[path];
        let doc = inner.docs.by_path(path);
        let now = match &doc {
            Some(d) => Some(d.text.clone()),
            None => match LocalFs.read_to_string(path).await {
                Ok(text) => Some(text),
                Err(FsError::NotFound(_)) => None,
                Err(e) => {
                    tracing::info!("cannot read {} to undo: {e}", path.display());
                    None
                }
            },
        };
        let Some(now) = now else {
            // Gone since: every hunk is the user's business now.
            conflicts.extend(writes.iter().flat_map(|w| {
                w.hunks.iter().map(|h| Conflict {
                    path: w.path.clone(),
                    line: h.line,
                    lines: h.old_lines.max(1),
                })
            }));
            continue;
        };
        let (text, reverted, mut found) = plan_file(writes, &now);
        conflicts.append(&mut found);
        let created = writes.first().is_some_and(|w| w.created);
        let target =
            (!(created && doc.is_none() && text.is_empty() && reverted > 0)).then_some(text);
        if target.as_deref() != Some(now.as_str()) {
            plans.push(Plan {
                path: path.to_path_buf(),
                doc,
                now: Some(now),
                target,
                reverted,
            });
        }
    }
    let mut undone = 0;
    let mut files = Vec::new();
    // Open documents: one edit, applied (or not) as a whole.
    let open: Vec<&Plan> = plans.iter().filter(|p| p.doc.is_some()).collect();
    if !open.is_empty() {
        let edit = WorkspaceEdit {
            document_changes: Some(DocumentChanges::Edits(
                open.iter().filter_map(|p| document_edit(p)).collect(),
            )),
            ..WorkspaceEdit::default()
        };
        let answer = inner
            .client
            .send_request::<ApplyWorkspaceEdit>(ApplyWorkspaceEditParams {
                label: Some("MAIA: undo the last answer".to_owned()),
                edit,
            })
            .await;
        match answer {
            Ok(r) if r.applied => {
                for plan in &open {
                    undone += plan.reverted;
                    files.push(plan.path.display().to_string());
                }
            }
            Ok(r) => {
                let reason = r.failure_reason.unwrap_or_default();
                inner
                    .client
                    .show_message(
                        MessageType::WARNING,
                        format!("MAIA: the editor did not apply the undo {reason}")
                            .trim_end()
                            .to_owned(),
                    )
                    .await;
            }
            Err(e) => tracing::info!("the undo edit failed: {e}"),
        }
    }
    for plan in plans.iter().filter(|p| p.doc.is_none()) {
        let done = match &plan.target {
            Some(text) => LocalFs
                .write(&plan.path, text)
                .await
                .map_err(|e| e.to_string()),
            None => tokio::fs::remove_file(&plan.path)
                .await
                .map_err(|e| e.to_string()),
        };
        match done {
            Ok(()) => {
                undone += plan.reverted;
                files.push(plan.path.display().to_string());
            }
            Err(e) => {
                tracing::info!("cannot undo {}: {e}", plan.path.display());
                inner
                    .client
                    .show_message(
                        MessageType::WARNING,
                        format!("MAIA: cannot undo {}: {e}", plan.path.display()),
                    )
                    .await;
            }
        }
    }
    if !conflicts.is_empty() {
        let named: Vec<String> = conflicts.iter().map(Conflict::label).collect();
        inner
            .client
            .show_message(
                MessageType::WARNING,
                format!(
                    "MAIA: undo kept {} hunk(s) you changed since the answer: {}",
                    conflicts.len(),
                    named.join(", ")
                ),
            )
            .await;
    }
    Ok(json!({
        "undone": undone,
        "files": files,
        "conflicts": conflicts
            .iter()
            .map(|c| json!({"path": c.path.display().to_string(), "line": c.line, "lines": c.lines}))
            .collect::<Vec<_>>(),
    }))
}

/// The edit turning the plan's open document into its target text.
fn document_edit(plan: &Plan) -> Option<TextDocumentEdit> {
    let doc = plan.doc.as_ref()?;
    let now = plan.now.as_deref()?;
    let target = plan.target.as_deref()?;
    let edits = hunks(now, target)
        .into_iter()
        .map(|h| {
            OneOf::Left(TextEdit::new(
                Range::new(position_at(now, h.start), position_at(now, h.end)),
                h.new_text,
            ))
        })
        .collect();
    Some(TextDocumentEdit {
        text_document: OptionalVersionedTextDocumentIdentifier {
            uri: doc.uri.clone(),
            version: Some(doc.version),
        },
        edits,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edits::apply;

    fn recorded(old: &str, new: &str, kept: &[bool]) -> Write {
        let all = hunks(old, new);
        let spans: Vec<(usize, usize, &str)> = all
            .iter()
            .zip(kept)
            .filter(|(_, k)| **k)
            .map(|(h, _)| (h.start, h.end, h.new_text.as_str()))
            .collect();
        let (after, hunks) = reverse_spans(old, &spans);
        assert_eq!(after, apply(old, &all, kept));
        Write {
            path: PathBuf::from("/p/a.txt"),
            created: false,
            after,
            hunks,
        }
    }

    #[test]
    fn applied_hunks_revert_to_the_old_text() {
        let old = "one\ntwo\nthree\nfour\nfive\n";
        let new = "one\nTWO\nthree\nfive\nsix";
        for mask in 0..8u8 {
            let kept: Vec<bool> = (0..3).map(|i| mask & (1 << i) != 0).collect();
            let write = recorded(old, new, &kept);
            let (text, n, conflicts) = plan_file(&[&write], &write.after);
            assert_eq!(text, old, "mask {kept:?}");
            assert_eq!(n, kept.iter().filter(|k| **k).count());
            assert!(conflicts.is_empty());
        }
    }

    #[test]
    fn a_hunk_the_user_changed_is_a_conflict_and_kept() {
        let old = "one\ntwo\nthree\nfour\nfive\n";
        let write = recorded(old, "one\nTWO\nthree\nFOUR\nfive\n", &[true, true]);
        // The user typed on top and changed FOUR since.
        let now = "zero\none\nTWO\nthree\nFOUR!\nfive\n";
        let (text, n, conflicts) = plan_file(&[&write], now);
        assert_eq!(text, "zero\none\ntwo\nthree\nFOUR!\nfive\n");
        assert_eq!(n, 1);
        assert_eq!(
            conflicts,
            vec![Conflict {
                path: PathBuf::from("/p/a.txt"),
                line: 4,
                lines: 1
            }]
        );
        assert_eq!(conflicts[0].label(), "a.txt line 4");
    }

    #[test]
    fn two_writes_of_one_answer_revert_newest_first() {
        let first = recorded("a\nb\nc\n", "a\nB\nc\n", &[true]);
        let second = recorded("a\nB\nc\n", "a\nB\nc\nd\n", &[true]);
        let (text, n, conflicts) = plan_file(&[&first, &second], "a\nB\nc\nd\n");
        assert_eq!((text.as_str(), n), ("a\nb\nc\n", 2));
        assert!(conflicts.is_empty());
    }

    #[test]
    fn answers_are_taken_newest_first_per_folder() {
        let applied = Applied::default();
        let (a, b) = (Path::new("/a"), Path::new("/b"));
        applied.begin(a);
        applied.record_disk(a, Path::new("/a/x"), None, "x\n");
        let empty = applied.begin(a);
        applied.begin(b);
        applied.record_disk(b, Path::new("/b/y"), Some("y\n"), "Y\n");
        assert_eq!(applied.take_last(Some(a)).map(|x| x.folder), Some(a.into()));
        assert!(applied.take_last(Some(a)).is_none());
        assert_eq!(applied.take_last(None).map(|x| x.folder), Some(b.into()));
        applied.abandon(empty);
        assert!(applied.answers.lock().unwrap().is_empty());
    }
}
