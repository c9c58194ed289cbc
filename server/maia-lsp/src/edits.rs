//! Proposed edits: a tool's write to a file open in the editor becomes a
//! `workspace/applyEdit` with one annotated edit per hunk, and the model
//! is told which hunks the document holds afterwards. This review is the
//! edit's one approval: [`EditorFs`] tells the engine so
//! (`FileSystem::reviews_writes`), which then asks no permission question
//! first (deny rules, the read-only mode and protected paths still apply). Clients without
//! change annotations review the hunks as diagnostics first (see
//! [`crate::review`]); the accepted ones are then applied as plain edits.
//!
//! Outcomes are read from the document, not from the `applied` flag: VS Code
//! answers `applied: true` even when the user unticked some hunks in its
//! refactor preview. After the answer the document state (from `didChange`)
//! is matched against the old text with each subset of hunks applied.

use std::collections::HashMap;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use maia_tools::{FileSystem, FsError, LocalFs, WriteOutcome};
use tower_lsp_server::Client;
use tower_lsp_server::ls_types::{
    AnnotatedTextEdit, ApplyWorkspaceEditParams, ChangeAnnotation, DocumentChanges, OneOf,
    OptionalVersionedTextDocumentIdentifier, Range, TextDocumentEdit, TextEdit, WorkspaceEdit,
    request::ApplyWorkspaceEdit,
};

use crate::docs::{Doc, Documents, position_at};
use crate::review::Reviews;
use crate::turn::PERMISSION_WAIT;
use crate::undo::Applied;

/// How long to wait for the `didChange` of an edit the client applied.
const SETTLE: Duration = Duration::from_millis(1500);

/// One contiguous change of lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// Byte range replaced in the old text.
    pub start: usize,
    pub end: usize,
    pub new_text: String,
    /// 1-based first old line and the number of old lines replaced.
    pub line: usize,
    pub old_lines: usize,
    pub new_lines: usize,
}

/// The hunks (no context lines) turning `old` into `new`.
pub fn hunks(old: &str, new: &str) -> Vec<Hunk> {
    let diff = similar::TextDiff::from_lines(old, new);
    let mut old_offsets = vec![0usize];
    for line in diff.old_slices() {
        old_offsets.push(old_offsets.last().copied().unwrap_or(0) + line.len());
    }
    let new_slices = diff.new_slices();
    diff.grouped_ops(0)
        .into_iter()
        .filter_map(|group| {
            let first = group.first()?;
            let last = group.last()?;
            let old_range = first.old_range().start..last.old_range().end;
            let new_range = first.new_range().start..last.new_range().end;
            Some(Hunk {
                start: old_offsets[old_range.start],
                end: old_offsets[old_range.end],
                new_text: new_slices[new_range.clone()].concat(),
                line: old_range.start + 1,
                old_lines: old_range.len(),
                new_lines: new_range.len(),
            })
        })
        .collect()
}

/// `old` with the hunks whose flag is set applied.
#[cfg(test)]
pub fn apply(old: &str, hunks: &[Hunk], keep: &[bool]) -> String {
    let mut out = String::with_capacity(old.len());
    let mut at = 0;
    for (hunk, keep) in hunks.iter().zip(keep) {
        out.push_str(&old[at..hunk.start]);
        out.push_str(if *keep {
            &hunk.new_text
        } else {
            &old[hunk.start..hunk.end]
        });
        at = hunk.end;
    }
    out.push_str(&old[at..]);
    out
}

/// Which hunks `current` holds, if it is `old` with some of them applied.
/// Prefers applied hunks when both readings fit.
pub fn applied_hunks(old: &str, hunks: &[Hunk], current: &str) -> Option<Vec<bool>> {
    fn walk(
        old: &[u8],
        hunks: &[Hunk],
        current: &[u8],
        k: usize,
        pos: usize,
        failed: &mut HashSet<(usize, usize)>,
    ) -> Option<Vec<bool>> {
        if failed.contains(&(k, pos)) {
            return None;
        }
        let gap_start = if k == 0 { 0 } else { hunks[k - 1].end };
        let gap_end = hunks.get(k).map_or(old.len(), |h| h.start);
        let gap = &old[gap_start..gap_end];
        let rest = &current[pos..];
        let found = if !rest.starts_with(gap) {
            None
        } else if k == hunks.len() {
            (rest.len() == gap.len()).then(Vec::new)
        } else {
            let pos = pos + gap.len();
            let hunk = &hunks[k];
            let choices = [
                (true, hunk.new_text.as_bytes()),
                (false, &old[hunk.start..hunk.end]),
            ];
            choices.into_iter().find_map(|(keep, piece)| {
                if !current[pos..].starts_with(piece) {
                    return None;
                }
                let mut tail = walk(old, hunks, current, k + 1, pos + piece.len(), failed)?;
                tail.insert(0, keep);
                Some(tail)
            })
        };
        if found.is_none() {
            failed.insert((k, pos));
        }
        found
    }
    walk(
        old.as_bytes(),
        hunks,
        current.as_bytes(),
        0,
        0,
        &mut HashSet::new(),
    )
}

pub(crate) fn describe(hunk: &Hunk) -> String {
    let lines = |n: usize| if n == 1 { "line" } else { "lines" };
    if hunk.old_lines == 0 {
        format!(
            "insert {} {} before line {}",
            hunk.new_lines,
            lines(hunk.new_lines),
            hunk.line
        )
    } else {
        let last = hunk.line + hunk.old_lines - 1;
        let span = if last == hunk.line {
            format!("line {}", hunk.line)
        } else {
            format!("lines {}-{}", hunk.line, last)
        };
        format!(
            "replace {span} with {} {}",
            hunk.new_lines,
            lines(hunk.new_lines)
        )
    }
}

fn list(hunks: &[Hunk], which: &[usize]) -> String {
    which
        .iter()
        .map(|&i| format!("#{} ({})", i + 1, describe(&hunks[i])))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the model is told about a reviewed change.
pub fn report(path: &Path, hunks: &[Hunk], kept: Option<&[bool]>) -> (bool, String) {
    let name = path.display();
    let n = hunks.len();
    let Some(kept) = kept else {
        return (
            true,
            format!(
                "The change to {name} was proposed in the editor, but the document now differs \
                 from both the old text and your proposal (the user may have edited it). Read it \
                 again before changing it further."
            ),
        );
    };
    let applied: Vec<usize> = (0..n).filter(|&i| kept[i]).collect();
    let rejected: Vec<usize> = (0..n).filter(|&i| !kept[i]).collect();
    if rejected.is_empty() {
        let text = format!(
            "Edited {name}: the user applied all {n} hunk(s) of the change in the editor: {}.",
            list(hunks, &applied)
        );
        (true, text)
    } else if applied.is_empty() {
        let text = format!(
            "The user rejected the change to {name} in the editor: all {n} hunk(s) rejected ({}). \
             The file is unchanged.",
            list(hunks, &rejected)
        );
        (false, text)
    } else {
        let text = format!(
            "Edited {name} partially: the user applied {} of {n} hunks and rejected the others.\n\
             Applied: {}.\nRejected: {}.\nThe file now holds only the applied hunks; Read it \
             again before changing it further.",
            applied.len(),
            list(hunks, &applied),
            list(hunks, &rejected)
        );
        (true, text)
    }
}

/// The workspace edit proposing `hunks` on `doc`: one edit per hunk,
/// annotated (and to be confirmed) when the client supports annotations.
pub fn proposal(doc: &Doc, hunks: &[Hunk], annotated: bool) -> WorkspaceEdit {
    let name = doc.path.as_deref().and_then(Path::file_name).map_or_else(
        || doc.uri.as_str().to_owned(),
        |n| n.to_string_lossy().into(),
    );
    let mut annotations = HashMap::new();
    let edits = hunks
        .iter()
        .enumerate()
        .map(|(i, hunk)| {
            let text_edit = TextEdit::new(
                Range::new(
                    position_at(&doc.text, hunk.start),
                    position_at(&doc.text, hunk.end),
                ),
                hunk.new_text.clone(),
            );
            if !annotated {
                return OneOf::Left(text_edit);
            }
            let id = format!("maia.hunk.{}", i + 1);
            let old = &doc.text[hunk.start..hunk.end];
            annotations.insert(
                id.clone(),
                ChangeAnnotation {
                    label: format!(
                        "MAIA: hunk {}/{} in {name}: {}",
                        i + 1,
                        hunks.len(),
                        describe(hunk)
                    ),
                    needs_confirmation: Some(true),
                    description: Some(mini_diff(old, &hunk.new_text)),
                },
            );
            OneOf::Right(AnnotatedTextEdit {
                text_edit,
                annotation_id: id,
            })
        })
        .collect();
    WorkspaceEdit {
        changes: None,
        document_changes: Some(DocumentChanges::Edits(vec![TextDocumentEdit {
            text_document: OptionalVersionedTextDocumentIdentifier {
                uri: doc.uri.clone(),
                version: Some(doc.version),
            },
            edits,
        }])),
        change_annotations: annotated.then_some(annotations),
    }
}

pub(crate) fn mini_diff(old: &str, new: &str) -> String {
    let mut out = String::new();
    for line in old.lines() {
        out.push_str("- ");
        out.push_str(line);
        out.push('\n');
    }
    for line in new.lines() {
        out.push_str("+ ");
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `text` with each `(start, end, new)` span replaced (spans in order,
/// not overlapping).
pub(crate) fn splice(text: &str, edits: &[(usize, usize, &str)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for &(start, end, new) in edits {
        out.push_str(&text[at..start]);
        out.push_str(new);
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

/// Where each hunk of `old` lies in `now` (the same text, perhaps edited by
/// the user since): its byte range there, or `None` when the user changed
/// its lines.
pub(crate) fn rebase(old: &str, now: &str, hunks: &[Hunk]) -> Vec<Option<(usize, usize)>> {
    if old == now {
        return hunks.iter().map(|h| Some((h.start, h.end))).collect();
    }
    let diff = similar::TextDiff::from_lines(old, now);
    let mut now_offsets = vec![0usize];
    for line in diff.new_slices() {
        now_offsets.push(now_offsets.last().copied().unwrap_or(0) + line.len());
    }
    let equal: Vec<(usize, usize, usize)> = diff
        .ops()
        .iter()
        .filter_map(|op| match *op {
            similar::DiffOp::Equal {
                old_index,
                new_index,
                len,
            } => Some((old_index, new_index, len)),
            _ => None,
        })
        .collect();
    hunks
        .iter()
        .map(|h| {
            let (first, last) = (h.line - 1, h.line - 1 + h.old_lines);
            let &(old_index, new_index, _) = equal
                .iter()
                .find(|(o, _, len)| *o <= first && last <= o + len)?;
            let at = new_index + (first - old_index);
            Some((now_offsets[at], now_offsets[at + h.old_lines]))
        })
        .collect()
}

/// Plain (unannotated) edits of `doc`, versioned.
fn plain_edit(doc: &Doc, edits: &[(usize, usize, &str)]) -> WorkspaceEdit {
    let edits = edits
        .iter()
        .map(|&(start, end, new)| {
            OneOf::Left(TextEdit::new(
                Range::new(position_at(&doc.text, start), position_at(&doc.text, end)),
                new.to_owned(),
            ))
        })
        .collect();
    WorkspaceEdit {
        changes: None,
        document_changes: Some(DocumentChanges::Edits(vec![TextDocumentEdit {
            text_document: OptionalVersionedTextDocumentIdentifier {
                uri: doc.uri.clone(),
                version: Some(doc.version),
            },
            edits,
        }])),
        change_annotations: None,
    }
}

/// File access for the tools of an LSP session: open documents are read
/// from the editor's buffers and changed through `workspace/applyEdit`;
/// other files go to the disk.
pub struct EditorFs {
    client: Client,
    docs: Arc<Documents>,
    annotations: bool,
    /// Set for clients without change annotations: hunks are reviewed
    /// as diagnostics before anything is applied.
    reviews: Option<Arc<Reviews>>,
    /// Where the applied changes are recorded for `maia.undo`.
    applied: Arc<Applied>,
    /// The session's workspace folder.
    folder: PathBuf,
}

impl EditorFs {
    pub fn new(
        client: Client,
        docs: Arc<Documents>,
        annotations: bool,
        reviews: Option<Arc<Reviews>>,
        applied: Arc<Applied>,
        folder: PathBuf,
    ) -> Self {
        EditorFs {
            client,
            docs,
            annotations,
            reviews,
            applied,
            folder,
        }
    }

    /// Sends `edit`; returns whether the client applied it and the
    /// document's state afterwards (after the `didChange` of an applied
    /// edit, which may come after the answer).
    async fn apply_edit(
        &self,
        path: &Path,
        label: String,
        edit: WorkspaceEdit,
        version: i32,
    ) -> Result<(bool, String), FsError> {
        let answer = self
            .client
            .send_request::<ApplyWorkspaceEdit>(ApplyWorkspaceEditParams {
                label: Some(label),
                edit,
            })
            .await
            .map_err(|e| FsError::Client(format!("the editor could not apply the edit: {e}")))?;
        tracing::debug!(applied = answer.applied, reason = ?answer.failure_reason, "applyEdit answered");
        let after = if answer.applied {
            self.docs.wait_newer(path, version, SETTLE).await
        } else {
            self.docs.by_path(path)
        };
        let current = match after {
            Some(d) => d.text,
            None => LocalFs.read_to_string(path).await?,
        };
        Ok((answer.applied, current))
    }

    /// Shows the hunks as diagnostics, waits for the user's decisions, then
    /// applies the accepted hunks as plain edits and reports what the
    /// document holds.
    async fn propose_in_diagnostics(
        &self,
        reviews: &Arc<Reviews>,
        path: &Path,
        doc: Doc,
        hunks: Vec<Hunk>,
    ) -> Result<WriteOutcome, FsError> {
        let decisions = reviews.decide(&doc, &hunks, PERMISSION_WAIT).await;
        let unanswered = decisions.iter().filter(|d| d.is_none()).count();
        let accepted: Vec<bool> = decisions.iter().map(|d| *d == Some(true)).collect();
        let now = self.docs.by_path(path).unwrap_or_else(|| doc.clone());
        // The user may have typed meanwhile: the hunks move with the text
        // around them, and one whose lines were touched is dropped.
        let spans = rebase(&doc.text, &now.text, &hunks);
        let kept: Vec<bool> = accepted
            .iter()
            .zip(&spans)
            .map(|(&a, span)| a && span.is_some())
            .collect();
        if kept.iter().zip(&accepted).any(|(k, a)| k != a) {
            tracing::info!("accepted hunks conflict with the user's typing; dropped");
        }
        let edits: Vec<(usize, usize, &str)> = spans
            .iter()
            .zip(&hunks)
            .zip(&kept)
            .filter(|(_, k)| **k)
            .filter_map(|((span, hunk), _)| span.map(|(s, e)| (s, e, hunk.new_text.as_str())))
            .collect();
        let expected = splice(&now.text, &edits);
        let current = if edits.is_empty() {
            now.text.clone()
        } else {
            let edit = plain_edit(&now, &edits);
            let n = edits.len();
            let label = format!("MAIA: apply {n} hunk(s) to {}", path.display());
            self.apply_edit(path, label, edit, now.version).await?.1
        };
        let outcome = if now.text == doc.text {
            applied_hunks(&doc.text, &hunks, &current)
        } else if current == expected {
            self.applied
                .record_spans(&self.folder, path, &now.text, &edits);
            Some(kept)
        } else {
            None
        };
        if now.text == doc.text
            && let Some(kept) = &outcome
        {
            self.applied
                .record_hunks(&self.folder, path, &doc.text, &hunks, kept);
        }
        let (applied, mut report) = report(path, &hunks, outcome.as_deref());
        if unanswered > 0 {
            report.push_str(&format!(
                "\n({unanswered} hunk(s) were not answered within {} s and count as rejected.)",
                PERMISSION_WAIT.as_secs()
            ));
        }
        Ok(WriteOutcome::Reviewed {
            text: current,
            applied,
            report,
        })
    }

    /// Proposes `content` for the open document `doc` and reports what the
    /// document holds afterwards.
    async fn propose(&self, path: &Path, doc: Doc, content: &str) -> Result<WriteOutcome, FsError> {
        let hunks = hunks(&doc.text, content);
        if hunks.is_empty() {
            return Ok(WriteOutcome::Written);
        }
        if let Some(reviews) = &self.reviews {
            return self.propose_in_diagnostics(reviews, path, doc, hunks).await;
        }
        let label = format!("MAIA: edit {}", path.display());
        let edit = proposal(&doc, &hunks, self.annotations);
        let (applied, current) = self.apply_edit(path, label, edit, doc.version).await?;
        let kept = applied_hunks(&doc.text, &hunks, &current);
        if let Some(kept) = &kept {
            self.applied
                .record_hunks(&self.folder, path, &doc.text, &hunks, kept);
        }
        if !applied && kept.as_ref().is_some_and(|k| k.iter().any(|&x| x)) {
            tracing::debug!("the client said not applied, but the document holds hunks");
        }
        let (applied, report) = report(path, &hunks, kept.as_deref());
        Ok(WriteOutcome::Reviewed {
            text: current,
            applied,
            report,
        })
    }
}

#[async_trait::async_trait]
impl FileSystem for EditorFs {
    async fn read_to_string(&self, path: &Path) -> Result<String, FsError> {
        match self.docs.by_path(path) {
            Some(doc) => Ok(doc.text),
            None => LocalFs.read_to_string(path).await,
        }
    }

    async fn write(&self, path: &Path, content: &str) -> Result<(), FsError> {
        self.write_reviewed(path, content).await.map(|_| ())
    }

    /// A write to an open document is proposed hunk by hunk: the user
    /// approves it there, so the engine does not ask first.
    fn reviews_writes(&self, path: &Path) -> bool {
        self.docs.by_path(path).is_some()
    }

    async fn write_reviewed(&self, path: &Path, content: &str) -> Result<WriteOutcome, FsError> {
        match self.docs.by_path(path) {
            Some(doc) => self.propose(path, doc, content).await,
            None => {
                let before = match LocalFs.read_to_string(path).await {
                    Ok(text) => Some(Some(text)),
                    Err(FsError::NotFound(_)) => Some(None),
                    Err(_) => None,
                };
                LocalFs.write(path, content).await?;
                match before {
                    Some(before) => {
                        self.applied
                            .record_disk(&self.folder, path, before.as_deref(), content);
                    }
                    None => tracing::debug!("{} not recorded for undo", path.display()),
                }
                Ok(WriteOutcome::Written)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hunks_apply_and_are_recognised() {
        let old = "a\nb\nc\nd\ne\nf\ng";
        let new = "a\nB\nc\nd\nx\ny\nf\ng!";
        let hs = hunks(old, new);
        assert_eq!(hs.len(), 3, "{hs:?}");
        assert_eq!(hs[0].line, 2);
        assert_eq!(apply(old, &hs, &[true, true, true]), new);
        assert_eq!(apply(old, &hs, &[false, false, false]), old);
        for mask in 0..8u8 {
            let keep: Vec<bool> = (0..3).map(|i| mask & (1 << i) != 0).collect();
            let text = apply(old, &hs, &keep);
            assert_eq!(applied_hunks(old, &hs, &text), Some(keep));
        }
        assert_eq!(applied_hunks(old, &hs, "something else"), None);
        let (applied, text) = report(Path::new("/p/f"), &hs, Some(&[true, false, true]));
        assert!(applied);
        assert!(
            text.contains("Applied: #1 (replace line 2 with 1 line), #3"),
            "{text}"
        );
        assert!(
            text.contains("Rejected: #2 (replace line 5 with 2 lines)"),
            "{text}"
        );
    }

    #[test]
    fn hunks_follow_the_users_typing() {
        let old = "a\nb\nc\nd\ne\n";
        let hs = hunks(old, "a\nB\nc\nd\nE\n");
        assert_eq!(rebase(old, old, &hs), vec![Some((2, 4)), Some((8, 10))]);
        // A line added on top moves both hunks; a change to `e` drops #2.
        let now = "top\na\nb\nc\nd\nx\n";
        let spans = rebase(old, now, &hs);
        assert_eq!(spans[0], Some((6, 8)));
        assert_eq!(spans[1], None);
        let edits: Vec<(usize, usize, &str)> = vec![(6, 8, "B\n")];
        assert_eq!(splice(now, &edits), "top\na\nB\nc\nd\nx\n");
    }
}
