//! Reviews through diagnostics, for clients that cannot review in their own
//! UI (Helix, Neovim without MAIA's plugin):
//!
//! - a proposed edit, when the client lacks change-annotation support, is
//!   published as one Hint diagnostic per hunk showing its diff, with
//!   "MAIA: Apply" / "MAIA: Discard" code actions on it (and "Apply all" /
//!   "Discard all" for the file); the tool waits for the decisions;
//! - a permission question, when the client lacks message actions, is an
//!   Information diagnostic at the start of the file concerned, with
//!   "MAIA: Approve once" / "MAIA: Always allow <rule>" / "MAIA: Deny".
//!
//! The code actions run `maia.review` / `maia.permission`, which record the
//! decision here and wake the waiting tool or permission. A diagnostic is
//! withdrawn as soon as it is decided (or no longer awaited).

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use maia_core::{ChoiceKind, PermissionRequest};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tower_lsp_server::Client;
use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::ls_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, CodeActionParams, Command, Diagnostic,
    DiagnosticSeverity, NumberOrString, Position, Range, Uri,
};

use crate::docs::{Doc, Documents, position_at};
use crate::edits::{Hunk, describe, mini_diff};
use crate::turn::permission_reply;

/// The command of the Apply / Discard actions.
pub const REVIEW_COMMAND: &str = "maia.review";
/// The command of the Approve / Deny actions.
pub const PERMISSION_COMMAND: &str = "maia.permission";
const REVIEW_KIND: &str = "quickfix.maia.review";
const PERMISSION_KIND: &str = "quickfix.maia.permission";
pub(crate) const SOURCE: &str = "maia";

/// The code action kinds of reviews, advertised at `initialize`.
pub fn action_kinds() -> Vec<CodeActionKind> {
    vec![
        CodeActionKind::new(REVIEW_KIND),
        CodeActionKind::new(PERMISSION_KIND),
    ]
}

/// One hunk as shown in its diagnostic.
struct Note {
    range: Range,
    message: String,
}

/// A proposal waiting for the user's decisions.
struct Proposal {
    uri: Uri,
    notes: Vec<Note>,
    /// `Some(true)` applied, `Some(false)` discarded, `None` undecided.
    decisions: Vec<Option<bool>>,
    done: Option<oneshot::Sender<()>>,
}

impl Proposal {
    fn undecided(&self) -> usize {
        self.decisions.iter().filter(|d| d.is_none()).count()
    }

    fn diagnostic(&self, id: u64, i: usize) -> Diagnostic {
        let note = &self.notes[i];
        Diagnostic {
            range: note.range,
            severity: Some(DiagnosticSeverity::HINT),
            code: Some(NumberOrString::String(format!("maia.hunk.{}", i + 1))),
            source: Some(SOURCE.to_owned()),
            message: note.message.clone(),
            data: Some(json!({"maia": "proposal", "id": id, "hunk": i})),
            ..Diagnostic::default()
        }
    }
}

/// A permission question waiting for an answer.
struct Question {
    uri: Uri,
    range: Range,
    message: String,
    /// Action title and engine option id.
    choices: Vec<(String, String)>,
    answer: oneshot::Sender<String>,
}

impl Question {
    fn diagnostic(&self, id: u64) -> Diagnostic {
        Diagnostic {
            range: self.range,
            severity: Some(DiagnosticSeverity::INFORMATION),
            code: Some(NumberOrString::String("maia.permission".to_owned())),
            source: Some(SOURCE.to_owned()),
            message: self.message.clone(),
            data: Some(json!({"maia": "permission", "id": id})),
            ..Diagnostic::default()
        }
    }
}

#[derive(Default)]
struct State {
    proposals: HashMap<u64, Proposal>,
    questions: HashMap<u64, Question>,
}

/// The pending reviews of all sessions.
pub struct Reviews {
    client: Client,
    docs: Arc<Documents>,
    next: AtomicU64,
    state: Mutex<State>,
    /// Keeps the diagnostics of a document published in snapshot order.
    publishing: tokio::sync::Mutex<()>,
}

/// Whether two ranges share a position (ends included).
fn overlaps(a: &Range, b: &Range) -> bool {
    let key = |p: Position| (p.line, p.character);
    key(a.start) <= key(b.end) && key(b.start) <= key(a.end)
}

fn command(title: &str, name: &str, arg: Value) -> Command {
    Command {
        title: title.to_owned(),
        command: name.to_owned(),
        arguments: Some(vec![arg]),
    }
}

fn action(
    title: String,
    kind: &'static str,
    command: Command,
    diagnostics: Vec<Diagnostic>,
    preferred: bool,
) -> CodeActionOrCommand {
    CodeActionOrCommand::CodeAction(CodeAction {
        title,
        kind: Some(CodeActionKind::new(kind)),
        diagnostics: (!diagnostics.is_empty()).then_some(diagnostics),
        command: Some(command),
        is_preferred: preferred.then_some(true),
        ..CodeAction::default()
    })
}

/// Removes a proposal that is no longer awaited (the tool was cancelled)
/// and withdraws its diagnostics.
struct Withdraw {
    reviews: Arc<Reviews>,
    id: u64,
}

impl Drop for Withdraw {
    fn drop(&mut self) {
        let removed = self
            .reviews
            .state
            .lock()
            .ok()
            .and_then(|mut s| s.proposals.remove(&self.id));
        if let Some(proposal) = removed
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let reviews = self.reviews.clone();
            runtime.spawn(async move { reviews.publish(&proposal.uri).await });
        }
    }
}

impl Reviews {
    pub fn new(client: Client, docs: Arc<Documents>) -> Reviews {
        Reviews {
            client,
            docs,
            next: AtomicU64::new(0),
            state: Mutex::new(State::default()),
            publishing: tokio::sync::Mutex::new(()),
        }
    }

    fn next_id(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Publishes the pending diagnostics of `uri` (none clears them).
    async fn publish(&self, uri: &Uri) {
        let _order = self.publishing.lock().await;
        let diagnostics = {
            let Ok(state) = self.state.lock() else {
                return;
            };
            let mut out: Vec<(u64, Diagnostic)> = Vec::new();
            for (id, q) in state.questions.iter().filter(|(_, q)| q.uri == *uri) {
                out.push((*id, q.diagnostic(*id)));
            }
            for (id, p) in state.proposals.iter().filter(|(_, p)| p.uri == *uri) {
                for i in (0..p.notes.len()).filter(|&i| p.decisions[i].is_none()) {
                    out.push((*id, p.diagnostic(*id, i)));
                }
            }
            out.sort_by_key(|(id, d)| (d.range.start.line, d.range.start.character, *id));
            out.into_iter().map(|(_, d)| d).collect()
        };
        self.client
            .publish_diagnostics(uri.clone(), diagnostics, None)
            .await;
    }

    /// Shows `hunks` of `doc` as diagnostics and waits (at most `wait`) for
    /// the user's decisions (`None`: not decided in time). The diagnostics
    /// are withdrawn before this returns (or when it is dropped).
    pub async fn decide(
        self: &Arc<Self>,
        doc: &Doc,
        hunks: &[Hunk],
        wait: Duration,
    ) -> Vec<Option<bool>> {
        let name = doc.path.as_deref().and_then(Path::file_name).map_or_else(
            || doc.uri.as_str().to_owned(),
            |n| n.to_string_lossy().into(),
        );
        let n = hunks.len();
        let notes = hunks
            .iter()
            .enumerate()
            .map(|(i, hunk)| {
                // Shown on the old lines, without the last line break.
                let old = &doc.text[hunk.start..hunk.end];
                let end = if old.ends_with('\n') {
                    hunk.end - 1
                } else {
                    hunk.end
                };
                Note {
                    range: Range::new(
                        position_at(&doc.text, hunk.start),
                        position_at(&doc.text, end),
                    ),
                    message: format!(
                        "MAIA proposes hunk {}/{n} in {name} ({}):\n{}",
                        i + 1,
                        describe(hunk),
                        mini_diff(old, &hunk.new_text).trim_end()
                    ),
                }
            })
            .collect();
        let (done, decided) = oneshot::channel();
        let id = self.next_id();
        if let Ok(mut state) = self.state.lock() {
            state.proposals.insert(
                id,
                Proposal {
                    uri: doc.uri.clone(),
                    notes,
                    decisions: vec![None; n],
                    done: Some(done),
                },
            );
        }
        let withdraw = Withdraw {
            reviews: self.clone(),
            id,
        };
        self.publish(&doc.uri).await;
        if tokio::time::timeout(wait, decided).await.is_err() {
            tracing::info!(id, "proposal not decided in time: the rest is discarded");
        }
        let proposal = self
            .state
            .lock()
            .ok()
            .and_then(|mut s| s.proposals.remove(&id));
        drop(withdraw);
        self.publish(&doc.uri).await;
        proposal.map_or_else(|| vec![None; n], |p| p.decisions)
    }

    /// The document a permission question is shown in: the first file the
    /// call touches that is open, else the document asked about.
    pub fn permission_uri(&self, request: &PermissionRequest, asked: &str) -> Option<Uri> {
        request
            .tool_call
            .locations
            .iter()
            .find_map(|p| self.docs.by_path(p))
            .map(|d| d.uri)
            .or_else(|| asked.parse().ok())
    }

    /// Asks the permission question as a diagnostic at the start of `uri`;
    /// the answer goes to the engine (none while the turn runs: the
    /// question waits), and the diagnostic is withdrawn.
    pub async fn ask_permission(self: Arc<Self>, uri: Uri, request: PermissionRequest) {
        let choices: Vec<(String, String)> = request
            .options
            .iter()
            .filter_map(|o| match o.kind {
                ChoiceKind::AllowOnce => Some(("MAIA: Approve once".to_owned(), o.id.clone())),
                ChoiceKind::AllowAlways => Some((format!("MAIA: {}", o.label), o.id.clone())),
                ChoiceKind::RejectOnce => Some(("MAIA: Deny".to_owned(), o.id.clone())),
                ChoiceKind::RejectAlways => None,
            })
            .collect();
        let first_line = self.docs.get(uri.as_str()).map_or(0, |d| {
            let line = d.text.split('\n').next().unwrap_or("");
            line.strip_suffix('\r')
                .unwrap_or(line)
                .encode_utf16()
                .count()
        });
        let (answer, answered) = oneshot::channel();
        let id = self.next_id();
        let message = format!(
            "MAIA wants to run: {}\nApprove or deny it with a code action on this line.",
            request.tool_call.title,
        );
        if let Ok(mut state) = self.state.lock() {
            state.questions.insert(
                id,
                Question {
                    uri: uri.clone(),
                    range: Range::new(
                        Position::new(0, 0),
                        Position::new(0, u32::try_from(first_line).unwrap_or(0)),
                    ),
                    message,
                    choices,
                    answer,
                },
            );
        }
        self.publish(&uri).await;
        let mut reply = request.reply;
        // No deadline: a user who never answers cancels the turn.
        let (chosen, reason) = tokio::select! {
            answer = answered => (answer.ok(), None::<&str>),
            () = reply.closed() => (None, None),
        };
        if let Ok(mut state) = self.state.lock() {
            state.questions.remove(&id);
        }
        self.publish(&uri).await;
        let _ = reply.send(permission_reply(&request.options, chosen, reason));
    }

    /// The Apply/Discard and Approve/Deny actions for `params.range`:
    /// per-hunk actions on the hunks it touches, "all" actions and
    /// permission answers anywhere in the document.
    pub fn code_actions(
        &self,
        params: &CodeActionParams,
        wanted: impl Fn(&CodeActionKind) -> bool,
    ) -> Vec<CodeActionOrCommand> {
        let uri = &params.text_document.uri;
        let range = params.range;
        let Ok(state) = self.state.lock() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if wanted(&CodeActionKind::new(PERMISSION_KIND)) {
            let mut questions: Vec<_> = state
                .questions
                .iter()
                .filter(|(_, q)| q.uri == *uri)
                .collect();
            questions.sort_by_key(|(id, _)| **id);
            for (id, q) in questions {
                for (title, option) in &q.choices {
                    out.push(action(
                        title.clone(),
                        PERMISSION_KIND,
                        command(
                            title,
                            PERMISSION_COMMAND,
                            json!({"id": id, "option": option}),
                        ),
                        vec![q.diagnostic(*id)],
                        false,
                    ));
                }
            }
        }
        if wanted(&CodeActionKind::new(REVIEW_KIND)) {
            let mut proposals: Vec<_> = state
                .proposals
                .iter()
                .filter(|(_, p)| p.uri == *uri)
                .collect();
            proposals.sort_by_key(|(id, _)| **id);
            for (id, p) in proposals {
                let touched: Vec<usize> = (0..p.notes.len())
                    .filter(|&i| p.decisions[i].is_none() && overlaps(&p.notes[i].range, &range))
                    .collect();
                for &i in &touched {
                    let suffix = if touched.len() > 1 {
                        format!(" #{}", i + 1)
                    } else {
                        String::new()
                    };
                    for (verb, accept) in [("Apply", true), ("Discard", false)] {
                        let title = format!("MAIA: {verb}{suffix}");
                        out.push(action(
                            title.clone(),
                            REVIEW_KIND,
                            command(
                                &title,
                                REVIEW_COMMAND,
                                json!({"proposal": id, "hunk": i + 1, "accept": accept}),
                            ),
                            vec![p.diagnostic(*id, i)],
                            accept,
                        ));
                    }
                }
                let undecided = p.undecided();
                if undecided > 1 || (undecided == 1 && touched.is_empty()) {
                    for (verb, accept) in [("Apply", true), ("Discard", false)] {
                        let title = format!("MAIA: {verb} all ({undecided} hunks in this file)");
                        out.push(action(
                            title.clone(),
                            REVIEW_KIND,
                            command(
                                &title,
                                REVIEW_COMMAND,
                                json!({"proposal": id, "accept": accept}),
                            ),
                            Vec::new(),
                            false,
                        ));
                    }
                }
            }
        }
        out
    }

    /// `maia.review {proposal, hunk?, accept}`: decides one hunk (1-based),
    /// or every undecided one. Answers `{decided, remaining}`.
    pub async fn review(&self, arg: Value) -> Result<Value> {
        #[derive(Deserialize)]
        struct Args {
            proposal: u64,
            #[serde(default)]
            hunk: Option<usize>,
            accept: bool,
        }
        let args: Args = serde_json::from_value(arg)
            .map_err(|e| Error::invalid_params(format!("invalid maia.review argument: {e}")))?;
        let (uri, decided, remaining) = {
            let mut state = self.state.lock().map_err(|_| Error::internal_error())?;
            let p = state.proposals.get_mut(&args.proposal).ok_or_else(|| {
                Error::invalid_params("this MAIA proposal is no longer waiting for a decision")
            })?;
            let which: Vec<usize> = match args.hunk {
                Some(h) if (1..=p.decisions.len()).contains(&h) => vec![h - 1],
                Some(h) => {
                    return Err(Error::invalid_params(format!(
                        "the proposal has no hunk #{h}"
                    )));
                }
                None => (0..p.decisions.len()).collect(),
            };
            let mut decided = 0;
            for i in which {
                if p.decisions[i].is_none() {
                    p.decisions[i] = Some(args.accept);
                    decided += 1;
                }
            }
            let remaining = p.undecided();
            if remaining == 0
                && let Some(done) = p.done.take()
            {
                let _ = done.send(());
            }
            (p.uri.clone(), decided, remaining)
        };
        self.publish(&uri).await;
        Ok(json!({"decided": decided, "remaining": remaining}))
    }

    /// `maia.permission {id, option}`: answers a permission question.
    pub async fn permission(&self, arg: Value) -> Result<Value> {
        #[derive(Deserialize)]
        struct Args {
            id: u64,
            option: String,
        }
        let args: Args = serde_json::from_value(arg)
            .map_err(|e| Error::invalid_params(format!("invalid maia.permission argument: {e}")))?;
        let question = {
            let mut state = self.state.lock().map_err(|_| Error::internal_error())?;
            let question = state.questions.get(&args.id).ok_or_else(|| {
                Error::invalid_params("this MAIA permission question is no longer waiting")
            })?;
            if !question.choices.iter().any(|(_, o)| *o == args.option) {
                return Err(Error::invalid_params(format!(
                    "`{}` is not an option of this permission question",
                    args.option
                )));
            }
            state
                .questions
                .remove(&args.id)
                .ok_or_else(Error::internal_error)?
        };
        let _ = question.answer.send(args.option.clone());
        self.publish(&question.uri).await;
        Ok(json!({"chosen": args.option}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_overlap_inclusively() {
        let r = |a, b, c, d| Range::new(Position::new(a, b), Position::new(c, d));
        assert!(overlaps(&r(1, 0, 1, 3), &r(1, 3, 1, 3)));
        assert!(overlaps(&r(1, 0, 2, 0), &r(0, 0, 5, 0)));
        assert!(!overlaps(&r(1, 0, 1, 3), &r(2, 0, 2, 0)));
        assert!(!overlaps(&r(1, 0, 1, 3), &r(0, 0, 0, 9)));
    }
}
