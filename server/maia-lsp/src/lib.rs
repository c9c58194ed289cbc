//! `maia lsp`: MAIA as a language server next to the real one.
//!
//! A small capability footprint (code actions with resolve, execute
//! command, hover, full text sync): the user asks about a selection through
//! a code action, `maia.ask` starts an engine turn in the background and
//! returns at once, and the turn streams into `$/progress`, an answer
//! document under `.maia/answers/` and a `maia/stream` notification.
//! Writes to open documents become `workspace/applyEdit` proposals (see
//! [`edits`]); permission questions become `window/showMessageRequest`s.
//! Clients that cannot review edits or answer message requests get
//! diagnostics with code actions instead (see [`review`]).
//!
//! One engine session per workspace folder, saved in `.maia/.sessions` like
//! ACP sessions. The engine knows nothing of LSP: this crate is the only
//! place where engine events meet LSP types.

mod ask;
mod docs;
mod edits;
mod review;
mod turn;
mod undo;

/// The per-hunk review, shared with ACP's "Review in editor" answers.
pub use edits::{Hunk, applied_hunks, hunks, report};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use maia_core::{Engine, EngineOptions, Event, SessionHandle};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;
use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::ls_types::{
    ClientCapabilities, CodeAction, CodeActionOptions, CodeActionParams,
    CodeActionProviderCapability, CodeActionResponse, DidChangeTextDocumentParams,
    DidChangeWorkspaceFoldersParams, DidCloseTextDocumentParams, DidOpenTextDocumentParams,
    ExecuteCommandOptions, ExecuteCommandParams, Hover, HoverContents, HoverParams,
    HoverProviderCapability, InitializeParams, InitializeResult, InitializedParams, MarkupContent,
    MarkupKind, NumberOrString, OneOf, Range, ServerCapabilities, ServerInfo,
    TextDocumentSyncCapability, TextDocumentSyncKind, TextDocumentSyncOptions,
    WorkDoneProgressCancelParams, WorkspaceFoldersServerCapabilities, WorkspaceServerCapabilities,
};
use tower_lsp_server::{Client, LanguageServer, LspService, Server};

use crate::docs::{Documents, uri_to_path};
use crate::review::Reviews;

/// The commands `workspace/executeCommand` accepts.
pub const COMMANDS: [&str; 6] = [
    "maia.ask",
    "maia.cancel",
    "maia.newSession",
    undo::UNDO_COMMAND,
    review::REVIEW_COMMAND,
    review::PERMISSION_COMMAND,
];

/// How long a stop waits for running turns to end and sessions to close.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_millis(1500);

/// Serves LSP on this process's stdin and stdout until the client exits or
/// `stop` resolves (the server's SIGTERM, SIGINT or SIGHUP). On a stop,
/// running turns are cancelled (their answers end `cancelled`), sessions
/// end (their commands' process groups killed, journals closed) and the
/// output is given a moment to drain before returning.
pub async fn serve_stdio(
    options: EngineOptions,
    stop: impl std::future::Future<Output = &'static str>,
) {
    let engine = Engine::new(options);
    let backend: Arc<OnceLock<Arc<Inner>>> = Arc::default();
    let slot = backend.clone();
    let (service, socket) = LspService::build(move |client| {
        let backend = Backend::new(client, engine);
        let _ = slot.set(backend.inner.clone());
        backend
    })
    .custom_method("window/workDoneProgress/cancel", Backend::progress_cancel)
    .finish();
    let serve = Server::new(tokio::io::stdin(), tokio::io::stdout(), socket).serve(service);
    tokio::pin!(serve);
    tokio::select! {
        () = &mut serve => return,
        signal = stop => tracing::info!(signal, "signal received; shutting down"),
    }
    // The server keeps running (its output drains) while sessions stop.
    if let Some(inner) = backend.get().cloned() {
        tokio::select! {
            () = &mut serve => return,
            () = inner.stop_all(STOP_WAIT) => {}
        }
    }
    let _ = tokio::time::timeout(std::time::Duration::from_millis(100), &mut serve).await;
}

/// What the client can do, decided once at `initialize`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Caps {
    /// `window.workDoneProgress`: server-created progress tokens.
    pub progress: bool,
    /// `workspace.workspaceEdit.changeAnnotationSupport`: edits are
    /// reviewed in the client's UI, else through diagnostics.
    pub annotations: bool,
    /// `window.showMessage.messageActionItem`: permission questions are
    /// message requests, else diagnostics.
    pub message_actions: bool,
}

impl Caps {
    fn from(caps: &ClientCapabilities) -> Caps {
        Caps {
            progress: caps
                .window
                .as_ref()
                .and_then(|w| w.work_done_progress)
                .unwrap_or(false),
            annotations: caps
                .workspace
                .as_ref()
                .and_then(|w| w.workspace_edit.as_ref())
                .is_some_and(|e| e.change_annotation_support.is_some()),
            message_actions: caps
                .window
                .as_ref()
                .and_then(|w| w.show_message.as_ref())
                .is_some_and(|m| m.message_action_item.is_some()),
        }
    }
}

/// A folder's session once started; two asks for a new folder share the
/// one being started.
type SessionCell = Arc<tokio::sync::OnceCell<Arc<Session>>>;

/// One engine session (one per workspace folder).
pub(crate) struct Session {
    pub handle: SessionHandle,
    /// Taken by the turn being run (events between turns wait here).
    pub events: tokio::sync::Mutex<UnboundedReceiver<Event>>,
}

/// A finished answer, shown on hover over the range it was asked about.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub uri: String,
    pub range: Range,
    pub text: String,
}

/// Answers kept for hover.
const MAX_ANSWERS: usize = 50;

pub(crate) struct Inner {
    pub client: Client,
    engine: Engine,
    pub docs: Arc<Documents>,
    /// Proposals and permission questions shown as diagnostics.
    pub reviews: Arc<Reviews>,
    pub caps: OnceLock<Caps>,
    folders: Mutex<Vec<PathBuf>>,
    /// One cell per folder, filled once its session has started; the lock
    /// is held only for map operations, never while a session loads.
    sessions: Mutex<HashMap<PathBuf, SessionCell>>,
    /// Running turns by progress token.
    pub turns: Mutex<HashMap<String, SessionHandle>>,
    pub answers: Mutex<Vec<Answer>>,
    /// The answers' applied changes, for `maia.undo`.
    pub applied: Arc<undo::Applied>,
    pub counter: AtomicU64,
}

impl Inner {
    pub fn caps(&self) -> Caps {
        self.caps.get().copied().unwrap_or_default()
    }

    pub fn next(&self) -> u64 {
        self.counter.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The workspace folder a file belongs to (the innermost one), else its
    /// own folder.
    pub fn folder_for(&self, path: &Path) -> PathBuf {
        let folders = self.folders.lock().map(|f| f.clone()).unwrap_or_default();
        folders
            .into_iter()
            .filter(|f| path.starts_with(f))
            .max_by_key(|f| f.components().count())
            .or_else(|| path.parent().map(Path::to_path_buf))
            .unwrap_or_else(|| PathBuf::from("/"))
    }

    /// The folder's session, started if needed. Settings, rules, skills
    /// and the journal are read on the blocking pool; two asks for a new
    /// folder wait for the same start.
    pub async fn session_for(&self, folder: &Path) -> std::io::Result<Arc<Session>> {
        let cell = self
            .lock_sessions()
            .entry(folder.to_path_buf())
            .or_default()
            .clone();
        cell.get_or_try_init(|| self.start_session(folder))
            .await
            .cloned()
    }

    async fn start_session(&self, folder: &Path) -> std::io::Result<Arc<Session>> {
        let fs = edits::EditorFs::new(
            self.client.clone(),
            self.docs.clone(),
            self.caps().annotations,
            (!self.caps().annotations).then(|| self.reviews.clone()),
            self.applied.clone(),
            folder.to_path_buf(),
        );
        let (engine, cwd) = (self.engine.clone(), folder.to_path_buf());
        let (handle, events) =
            tokio::task::spawn_blocking(move || engine.start_session(cwd, Arc::new(fs)))
                .await
                .map_err(std::io::Error::other)?;
        tracing::info!(session = handle.id(), folder = %folder.display(), "session started");
        Ok(Arc::new(Session {
            handle,
            events: tokio::sync::Mutex::new(events),
        }))
    }

    fn lock_sessions(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, SessionCell>> {
        // Every change is one insert or remove: a panic cannot leave the
        // map half-changed.
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The live sessions of `folder`, or of every folder.
    pub(crate) fn sessions_of(&self, folder: Option<&Path>) -> Vec<Arc<Session>> {
        self.lock_sessions()
            .iter()
            .filter(|(f, _)| folder.is_none_or(|folder| f.as_path() == folder))
            .filter_map(|(_, cell)| cell.get().cloned())
            .collect()
    }

    /// Forgets the sessions of `folder` (or of every folder), cancelling
    /// their turns; returns those that had started. Each ends once its
    /// running turn is over.
    fn close_sessions(&self, folder: Option<&Path>) -> Vec<Arc<Session>> {
        let mut closed = Vec::new();
        self.lock_sessions().retain(|f, cell| {
            let drop = folder.is_none_or(|folder| f.as_path() == folder);
            if drop && let Some(session) = cell.get() {
                session.handle.cancel();
                closed.push(session.clone());
            }
            !drop
        });
        closed
    }

    /// Stops every session: turns cancelled, then waits (up to `wait`)
    /// until each has ended and released its journal.
    async fn stop_all(&self, wait: std::time::Duration) {
        let closed = self.close_sessions(None);
        if let Ok(mut turns) = self.turns.lock() {
            turns.clear();
        }
        let ended: Vec<_> = closed.iter().map(|s| s.handle.ended()).collect();
        drop(closed);
        let all = async {
            for ended in &ended {
                ended.cancelled().await;
            }
        };
        if tokio::time::timeout(wait, all).await.is_err() {
            tracing::warn!("sessions did not stop in time");
        }
    }
}

pub struct Backend {
    inner: Arc<Inner>,
}

impl Backend {
    fn new(client: Client, engine: Engine) -> Backend {
        let docs = Arc::new(Documents::default());
        Backend {
            inner: Arc::new(Inner {
                reviews: Arc::new(Reviews::new(client.clone(), docs.clone())),
                client,
                engine,
                docs,
                caps: OnceLock::new(),
                folders: Mutex::new(Vec::new()),
                sessions: Mutex::new(HashMap::new()),
                turns: Mutex::new(HashMap::new()),
                answers: Mutex::new(Vec::new()),
                applied: Arc::default(),
                counter: AtomicU64::new(0),
            }),
        }
    }

    /// `window/workDoneProgress/cancel`: cancels the turn behind the token.
    async fn progress_cancel(&self, params: WorkDoneProgressCancelParams) {
        let token = match params.token {
            NumberOrString::String(s) => s,
            NumberOrString::Number(n) => n.to_string(),
        };
        let handle = self
            .inner
            .turns
            .lock()
            .ok()
            .and_then(|t| t.get(&token).cloned());
        match handle {
            Some(handle) => {
                tracing::info!(token, "turn cancelled from the progress");
                handle.cancel();
            }
            None => tracing::debug!(token, "cancel for an unknown progress token"),
        }
    }

    /// The `{uri}` of a `maia.cancel` / `maia.newSession` argument, as the
    /// folder it belongs to.
    fn folder_arg(&self, args: &[Value]) -> Result<Option<PathBuf>> {
        let Some(uri) = args.first().and_then(|a| a.get("uri")) else {
            return Ok(None);
        };
        let uri = uri
            .as_str()
            .and_then(|u| u.parse().ok())
            .ok_or_else(|| Error::invalid_params("uri must be a URI string"))?;
        let path = uri_to_path(&uri)
            .ok_or_else(|| Error::invalid_params("only file: URIs are supported"))?;
        Ok(Some(self.inner.folder_for(&path)))
    }
}

fn folders_of(params: &InitializeParams) -> Vec<PathBuf> {
    if let Some(folders) = &params.workspace_folders
        && !folders.is_empty()
    {
        return folders.iter().filter_map(|f| uri_to_path(&f.uri)).collect();
    }
    #[allow(deprecated)]
    let root = params.root_uri.as_ref().and_then(uri_to_path);
    root.into_iter().collect()
}

impl LanguageServer for Backend {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        let _ = self.inner.caps.set(Caps::from(&params.capabilities));
        if let Ok(mut folders) = self.inner.folders.lock() {
            *folders = folders_of(&params);
        }
        tracing::info!(
            client = ?params.client_info.as_ref().map(|c| &c.name),
            caps = ?self.inner.caps(),
            "initialized"
        );
        Ok(InitializeResult {
            capabilities: ServerCapabilities {
                // Full text on open and change, nothing on save: a bare
                // kind reads as "send didSave too" to VS Code's client.
                text_document_sync: Some(TextDocumentSyncCapability::Options(
                    TextDocumentSyncOptions {
                        open_close: Some(true),
                        change: Some(TextDocumentSyncKind::FULL),
                        ..TextDocumentSyncOptions::default()
                    },
                )),
                code_action_provider: Some(CodeActionProviderCapability::Options(
                    CodeActionOptions {
                        code_action_kinds: Some(
                            ask::action_kinds()
                                .into_iter()
                                .chain(review::action_kinds())
                                .collect(),
                        ),
                        resolve_provider: Some(true),
                        ..CodeActionOptions::default()
                    },
                )),
                execute_command_provider: Some(ExecuteCommandOptions {
                    commands: COMMANDS.iter().map(|c| (*c).to_owned()).collect(),
                    ..ExecuteCommandOptions::default()
                }),
                hover_provider: Some(HoverProviderCapability::Simple(true)),
                workspace: Some(WorkspaceServerCapabilities {
                    workspace_folders: Some(WorkspaceFoldersServerCapabilities {
                        supported: Some(true),
                        change_notifications: Some(OneOf::Left(true)),
                    }),
                    file_operations: None,
                }),
                ..ServerCapabilities::default()
            },
            server_info: Some(ServerInfo {
                name: "maia".to_owned(),
                version: Some(env!("CARGO_PKG_VERSION").to_owned()),
            }),
            offset_encoding: None,
        })
    }

    async fn initialized(&self, _: InitializedParams) {
        tracing::debug!("client initialized");
    }

    async fn shutdown(&self) -> Result<()> {
        self.inner.close_sessions(None);
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        let doc = params.text_document;
        self.inner.docs.open(doc.uri, doc.version, doc.text);
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        // Full sync: the last change holds the whole text.
        if let Some(change) = params.content_changes.into_iter().last() {
            let doc = params.text_document;
            self.inner.docs.change(&doc.uri, doc.version, change.text);
        }
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        self.inner.docs.close(&params.text_document.uri);
    }

    async fn did_change_workspace_folders(&self, params: DidChangeWorkspaceFoldersParams) {
        if let Ok(mut folders) = self.inner.folders.lock() {
            let removed: Vec<PathBuf> = params
                .event
                .removed
                .iter()
                .filter_map(|f| uri_to_path(&f.uri))
                .collect();
            folders.retain(|f| !removed.contains(f));
            folders.extend(
                params
                    .event
                    .added
                    .iter()
                    .filter_map(|f| uri_to_path(&f.uri)),
            );
        }
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        // Pending reviews first: they block a turn.
        let only = params.context.only.as_ref();
        let mut actions = self
            .inner
            .reviews
            .code_actions(&params, |kind| ask::wanted(kind, only));
        actions.extend(ask::code_actions(&self.inner, &params));
        Ok(Some(actions))
    }

    async fn code_action_resolve(&self, action: CodeAction) -> Result<CodeAction> {
        Ok(ask::resolve(action))
    }

    async fn execute_command(&self, params: ExecuteCommandParams) -> Result<Option<Value>> {
        match params.command.as_str() {
            "maia.ask" => {
                let arg =
                    params.arguments.into_iter().next().ok_or_else(|| {
                        Error::invalid_params("maia.ask takes one object argument")
                    })?;
                ask::ask(&self.inner, arg).await.map(Some)
            }
            review::REVIEW_COMMAND | review::PERMISSION_COMMAND => {
                let arg = params.arguments.into_iter().next().ok_or_else(|| {
                    Error::invalid_params(format!("{} takes one object argument", params.command))
                })?;
                let reviews = &self.inner.reviews;
                if params.command == review::REVIEW_COMMAND {
                    reviews.review(arg).await.map(Some)
                } else {
                    reviews.permission(arg).await.map(Some)
                }
            }
            "maia.cancel" => {
                let folder = self.folder_arg(&params.arguments)?;
                let sessions = self.inner.sessions_of(folder.as_deref());
                let mut cancelled = 0;
                for session in &sessions {
                    if session.handle.is_busy() {
                        cancelled += 1;
                    }
                    session.handle.cancel();
                }
                Ok(Some(json!({ "cancelled": cancelled })))
            }
            undo::UNDO_COMMAND => {
                let folder = self.folder_arg(&params.arguments)?;
                undo::undo(&self.inner, folder).await.map(Some)
            }
            "maia.newSession" => {
                let folder = self.folder_arg(&params.arguments)?;
                let closed = self.inner.close_sessions(folder.as_deref()).len();
                Ok(Some(json!({ "closed": closed })))
            }
            other => Err(Error::invalid_params(format!(
                "unknown command `{other}`; MAIA offers {}",
                COMMANDS.join(", ")
            ))),
        }
    }

    async fn hover(&self, params: HoverParams) -> Result<Option<Hover>> {
        let at = params.text_document_position_params;
        let answers = self
            .inner
            .answers
            .lock()
            .map(|a| a.clone())
            .unwrap_or_default();
        let found = answers.into_iter().rev().find(|a| {
            a.uri == at.text_document.uri.as_str() && docs::contains(&a.range, at.position)
        });
        Ok(found.map(|a| Hover {
            contents: HoverContents::Markup(MarkupContent {
                kind: MarkupKind::Markdown,
                value: a.text,
            }),
            range: Some(a.range),
        }))
    }
}
