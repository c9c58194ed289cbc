//! One `maia.ask` turn on its own task: a cancellable `$/progress`, the
//! answer document, `maia/stream` notifications, and the permission
//! questions of the turn's tool calls.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use maia_core::{
    ChoiceKind, Event, PermissionChoice, PermissionReply, PermissionRequest, StopReason,
};
use serde_json::{Value, json};
use tower_lsp_server::Client;
use tower_lsp_server::ls_types::notification::{Notification, Progress};
use tower_lsp_server::ls_types::request::{ApplyWorkspaceEdit, ShowDocument, ShowMessageRequest};
use tower_lsp_server::ls_types::{
    ApplyWorkspaceEditParams, DocumentChanges, MessageActionItem, MessageType, NumberOrString,
    OneOf, OptionalVersionedTextDocumentIdentifier, ProgressParams, ProgressParamsValue, Range,
    ShowDocumentParams, ShowMessageRequestParams, TextDocumentEdit, TextEdit, Uri,
    WorkDoneProgress, WorkDoneProgressBegin, WorkDoneProgressEnd, WorkDoneProgressReport,
    WorkspaceEdit,
};

use crate::docs::position_at;
use crate::{Answer, Inner, MAX_ANSWERS, Session};

/// Hunks of a proposed edit left undecided this long count as rejected.
pub const PERMISSION_WAIT: Duration = Duration::from_secs(120);
/// Least time between two writes of the answer document.
const FLUSH_EVERY: Duration = Duration::from_millis(150);
/// Least time between two progress reports about streamed text.
const REPORT_EVERY: Duration = Duration::from_millis(250);
/// How long to wait for the client to answer `window/showDocument`.
const SHOW_WAIT: Duration = Duration::from_secs(10);

/// The raw stream for MAIA's own editor plugins.
pub enum MaiaStream {}

impl Notification for MaiaStream {
    type Params = Value;
    const METHOD: &'static str = "maia/stream";
}

/// A turn started by `maia.ask`.
pub struct Turn {
    pub token: String,
    pub title: String,
    pub asked_uri: String,
    pub range: Range,
    pub answer_path: PathBuf,
    pub answer_uri: Uri,
    pub header: String,
}

struct WorkDone {
    client: Client,
    token: NumberOrString,
    on: bool,
    last: Option<Instant>,
}

impl WorkDone {
    async fn send(&self, value: WorkDoneProgress) {
        if self.on {
            self.client
                .send_notification::<Progress>(ProgressParams {
                    token: self.token.clone(),
                    value: ProgressParamsValue::WorkDone(value),
                })
                .await;
        }
    }

    async fn begin(&mut self, title: &str) {
        self.send(WorkDoneProgress::Begin(WorkDoneProgressBegin {
            title: title.to_owned(),
            cancellable: Some(true),
            message: Some("asking the model…".to_owned()),
            percentage: None,
        }))
        .await;
    }

    /// Reports `message`; unless `now`, at most once per [`REPORT_EVERY`].
    async fn report(&mut self, message: String, now: bool) {
        if !now && self.last.is_some_and(|t| t.elapsed() < REPORT_EVERY) {
            return;
        }
        self.last = Some(Instant::now());
        self.send(WorkDoneProgress::Report(WorkDoneProgressReport {
            cancellable: Some(true),
            message: Some(message),
            percentage: None,
        }))
        .await;
    }

    async fn end(&self, message: &str) {
        self.send(WorkDoneProgress::End(WorkDoneProgressEnd {
            message: Some(message.to_owned()),
        }))
        .await;
    }
}

/// The answer document: a Markdown file rewritten on disk while the editor
/// does not have it open, appended to through `workspace/applyEdit` once
/// it does (so the buffer never goes stale).
struct AnswerDoc {
    path: PathBuf,
    uri: Uri,
    /// Header and answer so far.
    text: String,
    header_len: usize,
    /// Bytes of `text` the document holds.
    sent: usize,
    /// What the editor's buffer holds, once it is open.
    editor: Option<String>,
    last: Option<Instant>,
}

impl AnswerDoc {
    fn due(&self) -> bool {
        self.last.is_none_or(|t| t.elapsed() >= FLUSH_EVERY)
    }

    fn body(&self) -> &str {
        &self.text[self.header_len..]
    }

    async fn flush(&mut self, inner: &Inner) {
        if self.last.is_some() && self.sent == self.text.len() {
            return;
        }
        self.last = Some(Instant::now());
        let Some(doc) = inner.docs.get(self.uri.as_str()) else {
            self.editor = None;
            if let Some(parent) = self.path.parent()
                && let Err(e) = tokio::fs::create_dir_all(parent).await
            {
                tracing::warn!("cannot create {}: {e}", parent.display());
            }
            match tokio::fs::write(&self.path, &self.text).await {
                Ok(()) => self.sent = self.text.len(),
                Err(e) => tracing::warn!("cannot write {}: {e}", self.path.display()),
            }
            return;
        };
        let editor = self.editor.get_or_insert_with(|| {
            if self.text.starts_with(&doc.text) {
                self.sent = doc.text.len();
            }
            doc.text.clone()
        });
        let tail = self.text[self.sent..].to_owned();
        let at = position_at(editor, editor.len());
        let edit = WorkspaceEdit {
            document_changes: Some(DocumentChanges::Edits(vec![TextDocumentEdit {
                text_document: OptionalVersionedTextDocumentIdentifier {
                    uri: doc.uri.clone(),
                    version: None,
                },
                edits: vec![OneOf::Left(TextEdit::new(Range::new(at, at), tail.clone()))],
            }])),
            ..WorkspaceEdit::default()
        };
        let answer = inner
            .client
            .send_request::<ApplyWorkspaceEdit>(ApplyWorkspaceEditParams {
                label: Some("MAIA: answer".to_owned()),
                edit,
            })
            .await;
        match answer {
            Ok(r) if r.applied => {
                editor.push_str(&tail);
                self.sent = self.text.len();
            }
            Ok(r) => tracing::debug!(reason = ?r.failure_reason, "the answer append was refused"),
            Err(e) => tracing::debug!("the answer append failed: {e}"),
        }
    }
}

async fn stream(client: &Client, turn: &Turn, session: &str, mut value: Value) {
    if let Some(map) = value.as_object_mut() {
        map.insert("token".into(), json!(turn.token));
        map.insert("session".into(), json!(session));
        map.insert("answer".into(), json!(turn.answer_uri.as_str()));
    }
    client.send_notification::<MaiaStream>(value).await;
}

fn stop_name(stop: Option<StopReason>) -> &'static str {
    match stop {
        Some(StopReason::EndTurn) => "end_turn",
        Some(StopReason::MaxTokens) => "max_tokens",
        Some(StopReason::MaxTurnRequests) => "max_turn_requests",
        Some(StopReason::Refusal) => "refusal",
        Some(StopReason::Cancelled) | None => "cancelled",
    }
}

/// Runs the turn's side of the protocol until the engine ends the turn.
pub async fn run(inner: Arc<Inner>, session: Arc<Session>, turn: Turn) {
    let client = inner.client.clone();
    let sid = session.handle.id().to_owned();
    let mut events = session.events.lock().await;
    let token = NumberOrString::String(turn.token.clone());
    let on = inner.caps().progress
        && client
            .create_work_done_progress(token.clone())
            .await
            .is_ok();
    let mut progress = WorkDone {
        client: client.clone(),
        token,
        on,
        last: None,
    };
    progress.begin(&turn.title).await;
    let mut answer = AnswerDoc {
        path: turn.answer_path.clone(),
        uri: turn.answer_uri.clone(),
        text: turn.header.clone(),
        header_len: turn.header.len(),
        sent: 0,
        editor: None,
        last: None,
    };
    answer.flush(&inner).await;
    let show = client.send_request::<ShowDocument>(ShowDocumentParams {
        uri: turn.answer_uri.clone(),
        external: Some(false),
        take_focus: Some(true),
        selection: None,
    });
    match tokio::time::timeout(SHOW_WAIT, show).await {
        Ok(Ok(r)) if r.success => {}
        Ok(Ok(_)) => tracing::debug!("the client did not show the answer"),
        Ok(Err(e)) => tracing::debug!("showDocument failed: {e}"),
        Err(_) => tracing::debug!("showDocument was not answered in time"),
    }
    stream(
        &client,
        &turn,
        &sid,
        json!({"kind": "begin", "title": turn.title}),
    )
    .await;
    let mut stop = None;
    while let Some(event) = events.recv().await {
        match event {
            Event::AgentText { text, .. } => {
                stream(&client, &turn, &sid, json!({"kind": "text", "text": text})).await;
                answer.text.push_str(&text);
                if answer.due() {
                    answer.flush(&inner).await;
                }
                let chars = answer.body().chars().count();
                progress
                    .report(format!("answering… ({chars} characters)"), false)
                    .await;
            }
            Event::Thought { text, .. } => {
                stream(
                    &client,
                    &turn,
                    &sid,
                    json!({"kind": "thought", "text": text}),
                )
                .await;
                progress.report("thinking…".to_owned(), false).await;
            }
            Event::ToolCall(call) => {
                stream(
                    &client,
                    &turn,
                    &sid,
                    json!({"kind": "tool", "id": call.id, "title": call.title, "status": call.status.as_str()}),
                )
                .await;
                progress.report(call.title.clone(), true).await;
            }
            Event::ToolCallUpdate(patch) => {
                stream(
                    &client,
                    &turn,
                    &sid,
                    json!({"kind": "toolUpdate", "id": patch.id, "status": patch.status.map(maia_core::ToolStatus::as_str)}),
                )
                .await;
            }
            Event::Permission(request) => {
                if inner.caps().message_actions {
                    tokio::spawn(ask_permission(client.clone(), request));
                } else {
                    // No message actions (Helix 25.07): a diagnostic with
                    // Approve / Deny code actions.
                    let reviews = inner.reviews.clone();
                    match reviews.permission_uri(&request, &turn.asked_uri) {
                        Some(uri) => {
                            tokio::spawn(reviews.ask_permission(uri, request));
                        }
                        None => {
                            tokio::spawn(ask_permission(client.clone(), request));
                        }
                    }
                }
            }
            Event::Notice { text, .. } => {
                client.log_message(MessageType::INFO, text).await;
            }
            // A hook's run: a line in the client's log, like a notice.
            Event::Hook(r) => {
                let ended = r
                    .exit_code
                    .map_or(r.outcome.to_owned(), |c| format!("exit {c}"));
                let line = format!(
                    "hook {}: {} ({ended}, {} ms)",
                    r.event, r.command, r.duration_ms
                );
                client.log_message(MessageType::INFO, line).await;
            }
            Event::Compaction { .. } => {
                progress
                    .report("compacting the conversation…".to_owned(), true)
                    .await;
            }
            Event::TurnEnded(reason) => {
                stop = Some(reason);
                break;
            }
            _ => {}
        }
    }
    drop(events);
    let stopped = stop_name(stop);
    if stopped == "cancelled" {
        answer.text.push_str("\n\n_(cancelled)_\n");
    } else if !answer.text.ends_with('\n') {
        answer.text.push('\n');
    }
    answer.flush(&inner).await;
    // Kept for hover before the client hears the turn ended: a hover sent
    // the instant it does finds the answer.
    if let Ok(mut answers) = inner.answers.lock() {
        answers.push(Answer {
            uri: turn.asked_uri.clone(),
            range: turn.range,
            text: answer.body().trim().to_owned(),
        });
        let excess = answers.len().saturating_sub(MAX_ANSWERS);
        answers.drain(..excess);
    }
    progress
        .end(if stopped == "end_turn" {
            "done"
        } else {
            stopped
        })
        .await;
    stream(
        &client,
        &turn,
        &sid,
        json!({"kind": "end", "stopReason": stopped}),
    )
    .await;
    if let Ok(mut turns) = inner.turns.lock() {
        turns.remove(&turn.token);
    }
}

/// Asks the user with `window/showMessageRequest`: "Allow once", "Always
/// allow <rule>", "Deny". An error or `null` is a deny; the question waits
/// until answered or the turn is cancelled.
async fn ask_permission(client: Client, request: PermissionRequest) {
    let choices: Vec<(String, String)> = request
        .options
        .iter()
        .filter_map(|o| match o.kind {
            ChoiceKind::AllowOnce => Some(("Allow once".to_owned(), o.id.clone())),
            ChoiceKind::AllowAlways => Some((o.label.clone(), o.id.clone())),
            ChoiceKind::RejectOnce => Some(("Deny".to_owned(), o.id.clone())),
            ChoiceKind::RejectAlways => None,
        })
        .collect();
    let params = ShowMessageRequestParams {
        typ: MessageType::WARNING,
        message: format!("MAIA wants to run: {}", request.tool_call.title),
        actions: Some(
            choices
                .iter()
                .map(|(title, _)| MessageActionItem {
                    title: title.clone(),
                    properties: Default::default(),
                })
                .collect(),
        ),
    };
    // No deadline: a user who never answers cancels the turn, and the
    // engine then drops the question.
    let mut reply = request.reply;
    let answer = tokio::select! {
        answer = client.send_request::<ShowMessageRequest>(params) => answer,
        () = reply.closed() => return,
    };
    let (chosen, reason) = match answer {
        Ok(Some(item)) => (
            choices
                .iter()
                .find(|(title, _)| *title == item.title)
                .map(|(_, id)| id.clone()),
            None,
        ),
        Ok(None) => (None, Some("the user dismissed the permission prompt")),
        Err(e) => {
            tracing::debug!("showMessageRequest failed: {e}");
            (
                None,
                Some("the editor could not show the permission prompt"),
            )
        }
    };
    let _ = reply.send(permission_reply(&request.options, chosen, reason));
}

/// The engine's answer: the chosen option, else the deny option with the
/// reason the user did not choose (else a cancel, when there is no deny).
pub(crate) fn permission_reply(
    options: &[PermissionChoice],
    chosen: Option<String>,
    reason: Option<&str>,
) -> PermissionReply {
    let deny = options
        .iter()
        .find(|o| o.kind == ChoiceKind::RejectOnce)
        .map(|o| o.id.clone());
    match (chosen, deny) {
        (Some(option), _) => PermissionReply::Selected {
            option,
            reason: None,
        },
        (None, Some(option)) => PermissionReply::Selected {
            option,
            reason: reason.map(str::to_owned),
        },
        (None, None) => PermissionReply::Cancelled,
    }
}
