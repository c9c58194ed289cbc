//! Opening sessions: `session/new`, `session/load` and `session/resume`
//! as one path (checked, opened off the runtime, registered, answered),
//! and the opening queue that holds messages naming a session until it
//! is open.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_client_protocol_schema::v1::{
    ClientCapabilities, ClientRequest, LoadSessionResponse, McpServer, NewSessionResponse,
    ResumeSessionResponse, SessionConfigOption, SessionModeState,
};
use maia_rpc::{Connection, ErrorCode, Id, RpcError};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::forward::Forwarder;
use super::{
    Agent, CLOSE_WAIT, Choices, MODEL_LIST_WAIT, SessionEntry, SharedChoices, Slot, ask, auth,
    convert, fs, invalid_params, peer, terminal, to_value, unknown_session,
};

/// How a session is opened.
#[derive(Clone)]
pub(super) enum Open {
    New,
    Load(String),
    Resume(String),
    /// A fork already saved as the thread `id` (`fork.rs`), opened as a
    /// load is but answered as a new session: nothing of it is sent before
    /// the answer, and its history is not replayed (the client holds it);
    /// `meta` goes into the answer's `_meta`.
    Fork {
        id: String,
        meta: Option<serde_json::Map<String, Value>>,
    },
}

/// What `session/new`, `session/load` and `session/resume` ask for, in
/// one shape (the three requests differ only in `how`).
pub(super) struct OpenRequest {
    how: Open,
    cwd: PathBuf,
    additional: Vec<PathBuf>,
    mcp_servers: Vec<McpServer>,
    system_prompt: bool,
}

impl OpenRequest {
    /// The open `request` asks for; `None` for any other request.
    pub(super) fn from_request(request: ClientRequest) -> Option<OpenRequest> {
        let (how, cwd, additional, mcp_servers, system_prompt) = match request {
            ClientRequest::NewSessionRequest(r) => (
                Open::New,
                r.cwd,
                r.additional_directories,
                r.mcp_servers,
                r.system_prompt.is_some(),
            ),
            ClientRequest::LoadSessionRequest(r) => (
                Open::Load(r.session_id.0.to_string()),
                r.cwd,
                r.additional_directories,
                r.mcp_servers,
                r.system_prompt.is_some(),
            ),
            ClientRequest::ResumeSessionRequest(r) => (
                Open::Resume(r.session_id.0.to_string()),
                r.cwd,
                r.additional_directories,
                r.mcp_servers,
                r.system_prompt.is_some(),
            ),
            _ => return None,
        };
        Some(OpenRequest {
            how,
            cwd,
            additional,
            mcp_servers,
            system_prompt,
        })
    }
}

/// The editor's services for a session's tools, as far as the client
/// advertised them: Bash in its terminals (`terminal`), `AskUser` as a
/// form (`elicitation.form`).
fn client_tools(
    conn: &Connection,
    caps: &ClientCapabilities,
    session_id: &str,
) -> maia_core::ClientTools {
    let peer = peer::Peer::new(conn.clone());
    peer.bind(session_id);
    // Commands reach the editor's terminal as `maia __terminal`: without a
    // path to this binary, Bash runs here as for a client without terminals.
    let terminals = (caps.terminal && maia_tools::process::maia_exe().is_some()).then(|| {
        let terminals = terminal::ClientTerminals::new(peer.clone());
        Arc::new(terminals) as Arc<dyn maia_tools::Terminals>
    });
    let form = caps.elicitation.as_ref().is_some_and(|e| e.supports_form());
    let asker =
        form.then(|| Arc::new(ask::ClientAsker::new(peer.clone())) as Arc<dyn maia_core::Asker>);
    maia_core::ClientTools { terminals, asker }
}

impl Agent {
    /// `session/new`, `session/load` and `session/resume`: checked here,
    /// opened on a task (it may wait for the model list). A load or resume
    /// marks its id as opening at once, so every later message naming it
    /// waits for the open, in order.
    pub(super) fn spawn_open(self: &Arc<Self>, id: Id, request: OpenRequest) {
        let OpenRequest {
            how,
            cwd,
            additional,
            mcp_servers,
            system_prompt,
        } = request;
        if let Err(e) = check_cwd(&cwd, system_prompt) {
            self.conn.respond(id, Err(e));
            return;
        }
        let roots =
            match maia_core::workspace::additional_roots(&cwd, &additional, self.engine.home()) {
                Ok(roots) => roots,
                Err(e) => {
                    self.conn.respond(id, Err(invalid_params(e.to_string())));
                    return;
                }
            };
        let mcp = convert::mcp_servers(mcp_servers, &cwd);
        let generation = self
            .generations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let live = match &how {
            Open::New | Open::Fork { .. } => None,
            Open::Load(sid) | Open::Resume(sid) => {
                let mut sessions = self.lock_sessions();
                // Messages still waiting behind an earlier open now wait
                // for this one.
                let (live, queue) = match sessions.remove(sid) {
                    Some(Slot::Open(entry)) => (Some(entry), VecDeque::new()),
                    Some(Slot::Opening { entry, queue, .. }) => (entry, queue),
                    None => (None, VecDeque::new()),
                };
                sessions.insert(
                    sid.clone(),
                    Slot::Opening {
                        generation,
                        entry: None,
                        queue,
                    },
                );
                live
            }
        };
        let agent = self.clone();
        let cancel = self.conn.cancellation(&id);
        tokio::spawn(async move {
            agent
                .open_session(id, (cwd, roots), how, mcp, (live, generation, cancel))
                .await
        });
    }

    /// Opens a session and answers the request itself. For a load or a
    /// resume, everything the session sends on opening (the replay, the
    /// command list, notices) goes before the answer; for `session/new` it
    /// follows (the client learns the id from the answer). The session is
    /// registered before the answer is written, so a request sent the
    /// instant it arrives finds it. A `$/cancel_request` for the request
    /// (`cancel`) stops the open at its next step (the proxy check, the
    /// journal read, each replayed event): the answer is `-32800`, nothing
    /// of the session follows it, and the session is closed.
    pub(super) async fn open_session(
        self: Arc<Self>,
        id: Id,
        (cwd, roots): (PathBuf, Vec<PathBuf>),
        how: Open,
        mcp: Vec<maia_core::McpServerConfig>,
        (live, generation, cancel): (Option<Arc<SessionEntry>>, u64, CancellationToken),
    ) {
        if let Ok(mut known) = self.known_cwds.lock() {
            known.insert(cwd.clone());
        }
        if let Some(live) = live {
            // Reopening a live thread: end its turn and wait until it has
            // answered its prompt and released its journal.
            live.handle.cancel();
            let (done, ended) = (live.done.clone(), live.handle.ended());
            drop(live);
            let both = async {
                done.cancelled().await;
                ended.cancelled().await;
            };
            if tokio::time::timeout(CLOSE_WAIT, both).await.is_err() {
                tracing::warn!("the reopened session did not stop in time");
            }
        }
        // The proxy is asked first: a new session that could not answer a
        // prompt is refused with `auth_required`, so the editor offers its
        // login; a saved one opens anyway (its history is readable).
        // Which models take a reasoning effort is asked alongside.
        let checks = async {
            tokio::join!(
                crate::probe::check_proxy(&self.engine, &cwd, MODEL_LIST_WAIT, false),
                self.engine.reasoning_models(&cwd, MODEL_LIST_WAIT)
            )
        };
        let checked = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            checked = checks => Some(checked),
        };
        let Some((checked, reasoning_models)) = checked else {
            self.fail_open(
                id,
                how.session_id().as_deref(),
                generation,
                maia_rpc::cancelled(),
            );
            return;
        };
        let listed = match checked {
            Ok(models) => models,
            Err(problem) if matches!(how, Open::New) => {
                if let Ok(mut last) = self.auth_cwd.lock() {
                    *last = Some(cwd.clone());
                }
                self.fail_open(id, None, generation, auth::required(&problem));
                return;
            }
            Err(_) => Vec::new(),
        };
        let caps = self.client_caps().unwrap_or_default();
        let fs = fs::ClientFs::new(self.conn.clone(), &caps);
        let engine = self.engine.clone();
        let (sid_opened, opening) = (how.session_id(), how.clone());
        let fs_for_engine = Arc::new(fs.clone());
        let cwd_for_engine = cwd.clone();
        // Settings, rules, skills and the journal are read off the runtime.
        let opened = tokio::task::spawn_blocking(move || match opening {
            Open::New => Ok((
                engine.start_session_with_mcp(cwd_for_engine, fs_for_engine, mcp, roots),
                Vec::new(),
            )),
            Open::Load(sid) | Open::Resume(sid) | Open::Fork { id: sid, .. } => {
                engine.load_session_with_mcp(cwd_for_engine, fs_for_engine, &sid, mcp, roots)
            }
        })
        .await;
        let ((handle, mut events), replay) = match opened {
            Ok(Ok(opened)) => opened,
            Ok(Err(e)) => {
                let error = match (&e, &sid_opened) {
                    (maia_core::LoadError::NotFound(_), Some(sid)) => unknown_session(sid),
                    (maia_core::LoadError::Locked(_), _) => {
                        RpcError::new(ErrorCode::InvalidRequest, e.to_string())
                    }
                    _ => RpcError::new(ErrorCode::InternalError, e.to_string()),
                };
                self.fail_open(id, sid_opened.as_deref(), generation, error);
                return;
            }
            Err(e) => {
                let error = RpcError::new(ErrorCode::InternalError, e.to_string());
                self.fail_open(id, sid_opened.as_deref(), generation, error);
                return;
            }
        };
        if cancel.is_cancelled() {
            // Dropping the handle ends the session and releases its journal.
            self.fail_open(id, sid_opened.as_deref(), generation, maia_rpc::cancelled());
            return;
        }
        fs.bind(handle.id());
        handle.use_client(client_tools(&self.conn, &caps, handle.id()));
        let session_id = handle.id().to_owned();
        handle.default_model_from(&listed);
        let mut choices = Choices {
            models: listed,
            reasoning_models,
            booleans: caps
                .session
                .as_ref()
                .and_then(|s| s.config_options.as_ref())
                .is_some_and(|c| c.boolean.is_some()),
            modes: handle.modes(),
            ..Choices::default()
        };
        choices.restore(handle.saved_options());
        let show_thinking = choices.show_thinking;
        let state = handle.state();
        let (options, modes) = (
            choices.options(&state),
            convert::modes(state.mode, &choices.modes),
        );
        let choices = SharedChoices::new(choices);
        // The daemon's other connection serves the session too (`mirror`).
        let (tee, copies) = match &self.shared {
            Some(_) => {
                let (tee, copies) = super::mirror::tee();
                (Some(tee), Some(copies))
            }
            None => (None, None),
        };
        let replayed: Vec<maia_core::Event> = match (&copies, &how) {
            (Some(_), Open::Load(_)) => replay
                .iter()
                .filter_map(maia_core::Event::try_clone)
                .collect(),
            _ => Vec::new(),
        };
        let book = super::mirror::Prompts::default();
        let link = copies.is_some().then(|| super::mirror::Link {
            tee,
            book: book.clone(),
        });
        let forwarder = Forwarder::new(
            &self,
            (&session_id, &handle, cwd.clone()),
            (caps.clone(), choices.clone()),
            fs.reviewed(),
            link,
        );
        let fork_cursors: Vec<String> = match how {
            Open::Fork { .. } => replay
                .iter()
                .filter_map(|event| match event {
                    maia_core::Event::UserMessage { message_id, .. } => Some(message_id.clone()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        if matches!(how, Open::Load(_) | Open::Resume(_)) {
            if matches!(how, Open::Load(_)) {
                for event in replay {
                    if !show_thinking && matches!(event, maia_core::Event::Thought { .. }) {
                        continue;
                    }
                    if cancel.is_cancelled() {
                        self.fail_open(id, Some(&session_id), generation, maia_rpc::cancelled());
                        return;
                    }
                    self.forward(&session_id, event, &caps);
                }
            }
            // The session's opening events are queued by now.
            while let Ok(event) = events.try_recv() {
                forwarder.forward(forwarder.split(event));
            }
            if self.wire.is_v2() {
                super::v2::turn::snapshot(&self.conn, &session_id, handle.is_busy());
            }
        }
        let mut result = how.response(&session_id, modes, options);
        if self.wire.is_v2() {
            let resumed = matches!(how, Open::Load(_) | Open::Resume(_));
            result = super::v2::open_response(result, resumed);
        }
        let done = tokio_util::sync::CancellationToken::new();
        let entry = Arc::new(SessionEntry {
            handle: handle.clone(),
            pending: forwarder.pending.clone(),
            choices: choices.clone(),
            done: done.clone(),
            v2: forwarder.v2.clone(),
            book: forwarder.link.is_some().then(|| book.clone()),
        });
        // Registered before the answer is written: a request sent the
        // instant the answer arrives finds the session.
        {
            let mut sessions = self.lock_sessions();
            match sessions.get_mut(&session_id) {
                Some(Slot::Opening {
                    generation: g,
                    entry: slot,
                    ..
                }) if *g == generation => *slot = Some(entry),
                Some(_) => {
                    // Cannot happen: messages naming an opening session wait.
                    drop(sessions);
                    tracing::error!(session = %session_id, "opened twice at once");
                    let error = RpcError::new(
                        ErrorCode::InternalError,
                        "this session was reopened while opening",
                    );
                    self.conn.respond(id, Err(error));
                    return;
                }
                None => {
                    sessions.insert(session_id.clone(), Slot::Open(entry));
                }
            }
        }
        if let (Some(shared), Some(events)) = (&self.shared, copies) {
            let waiting = super::mirror::Waiting {
                handle: handle.clone(),
                events,
                replay: replayed,
                choices,
                cwd: cwd.clone(),
                book,
            };
            shared.leave(&session_id, waiting);
        }
        self.conn.respond(id, result);
        // A fork's cursors, so it can be forked in turn.
        for message_id in fork_cursors {
            if let Some(cursor) = convert::cursor_update(&message_id, &caps) {
                self.send_update(&session_id, cursor);
            }
        }
        self.drain_queue(&session_id, generation);
        // The pump does not own the handle: dropping the entry ends the session.
        let pump = tokio::spawn(async move {
            let _done = done.drop_guard();
            forwarder.run(events).await;
        });
        drop(handle);
        if let Ok(mut pumps) = self.pumps.lock() {
            pumps.retain(|p| !p.is_finished());
            pumps.push(pump);
        }
    }

    /// `authenticate`: the settings are read again and the proxy asked.
    pub(super) async fn authenticate(&self) -> Result<Value, RpcError> {
        let cwd = self
            .auth_cwd
            .lock()
            .ok()
            .and_then(|c| c.clone())
            .or_else(|| self.engine.home().map(Path::to_path_buf))
            .unwrap_or_else(std::env::temp_dir);
        match crate::probe::check_proxy(&self.engine, &cwd, MODEL_LIST_WAIT, true).await {
            Ok(_) => Ok(json!({})),
            Err(problem) => Err(auth::required(&problem)),
        }
    }

    /// Answers a failed open, and hands the messages that waited for it to
    /// the ordinary path (they find no session and say so).
    pub(super) fn fail_open(
        self: &Arc<Self>,
        id: Id,
        session_id: Option<&str>,
        generation: u64,
        error: RpcError,
    ) {
        let queue = match session_id {
            Some(sid) => {
                let mut sessions = self.lock_sessions();
                match sessions.get(sid) {
                    Some(Slot::Opening { generation: g, .. }) if *g == generation => {
                        match sessions.remove(sid) {
                            Some(Slot::Opening { queue, .. }) => queue,
                            _ => VecDeque::new(),
                        }
                    }
                    _ => VecDeque::new(),
                }
            }
            None => VecDeque::new(),
        };
        self.conn.respond(id, Err(error));
        for message in queue {
            self.dispatch(message);
        }
    }

    /// Handles, in order, the messages that waited for `session_id` to
    /// open, then marks it open. Messages arriving meanwhile keep queueing,
    /// so none overtakes an earlier one.
    pub(super) fn drain_queue(self: &Arc<Self>, session_id: &str, generation: u64) {
        loop {
            let next = {
                let mut sessions = self.lock_sessions();
                match sessions.get_mut(session_id) {
                    Some(Slot::Opening {
                        generation: g,
                        entry,
                        queue,
                    }) if *g == generation => match queue.pop_front() {
                        Some(message) => Some(message),
                        None => {
                            if let Some(entry) = entry.take() {
                                sessions.insert(session_id.to_owned(), Slot::Open(entry));
                            }
                            None
                        }
                    },
                    _ => None,
                }
            };
            match next {
                Some(message) => self.dispatch(message),
                None => return,
            }
        }
    }
}

impl Open {
    /// The id a load or resume names.
    pub(super) fn session_id(&self) -> Option<String> {
        match self {
            // A fork's id is new: no message can name it before the answer.
            Open::New | Open::Fork { .. } => None,
            Open::Load(sid) | Open::Resume(sid) => Some(sid.clone()),
        }
    }

    /// The answer to the request that opened `session_id`.
    pub(super) fn response(
        &self,
        session_id: &str,
        modes: SessionModeState,
        options: Vec<SessionConfigOption>,
    ) -> Result<Value, RpcError> {
        match self {
            Open::New => to_value(
                &NewSessionResponse::new(session_id.to_owned())
                    .modes(modes)
                    .config_options(options),
            ),
            Open::Load(_) => to_value(
                &LoadSessionResponse::new()
                    .modes(modes)
                    .config_options(options),
            ),
            Open::Resume(_) => to_value(
                &ResumeSessionResponse::new()
                    .modes(modes)
                    .config_options(options),
            ),
            Open::Fork { meta, .. } => to_value(
                &agent_client_protocol_schema::v1::ForkSessionResponse::new(session_id.to_owned())
                    .modes(modes)
                    .config_options(options)
                    .meta(meta.clone()),
            ),
        }
    }
}

pub(super) fn check_cwd(cwd: &Path, system_prompt: bool) -> Result<(), RpcError> {
    if !cwd.is_absolute() {
        return Err(invalid_params(format!(
            "cwd must be an absolute path, got `{}`",
            cwd.display()
        )));
    }
    if !cwd.is_dir() {
        return Err(invalid_params(format!(
            "cwd `{}` is not an existing folder",
            cwd.display()
        )));
    }
    if system_prompt {
        return Err(invalid_params(
            "systemPrompt is not supported by this agent",
        ));
    }
    Ok(())
}
