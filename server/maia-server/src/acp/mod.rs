//! The ACP front door: typed dispatch of client requests onto the engine,
//! and engine events turned into `session/update`s and client requests.
//!
//! Invariants:
//! - every request gets exactly one response; notifications none;
//! - a session's updates and its prompt response go through one ordered
//!   writer, and the response is written only after the turn's last event
//!   (the engine's `TurnEnded`), so no update of a turn follows its response;
//! - nothing is sent for a session before its `session/new` response;
//! - `fs/*` requests are sent only when the client advertised them.

mod ask;
mod auth;
mod convert;
mod fs;
mod peer;
#[cfg(feature = "llm-providers")]
mod providers;
mod terminal;

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1::{
    AgentCapabilities, ClientCapabilities, ClientNotification, ClientRequest, ConfigOptionUpdate,
    ContentBlock, CurrentModeUpdate, EmbeddedResourceResource, Implementation, InitializeResponse,
    ListSessionsRequest, ListSessionsResponse, LoadSessionResponse, McpCapabilities,
    NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse, ResumeSessionResponse,
    SessionAdditionalDirectoriesCapabilities, SessionCapabilities, SessionCloseCapabilities,
    SessionDeleteCapabilities, SessionInfo, SessionListCapabilities, SessionResumeCapabilities,
    SessionUpdate, SetSessionConfigOptionResponse,
};
use agent_client_protocol_schema::{MethodDispatchError, ProtocolVersion};
use maia_core::{Engine, EngineOptions, Event, PromptPart, SessionHandle};
use maia_rpc::{Connection, ErrorCode, Id, Incoming, RpcError};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Serves ACP on this process's stdin and stdout until stdin closes or a
/// SIGTERM, SIGINT or SIGHUP arrives. Either way running prompts are
/// answered `cancelled` while the output is open, sessions stop (their
/// commands and MCP servers killed, journals closed) and the output is
/// flushed before returning.
pub async fn serve_stdio(options: EngineOptions) -> anyhow::Result<()> {
    let (conn, mut incoming, writer) = maia_rpc::serve_blocking_writer(
        tokio::io::stdin(),
        std::io::stdout(),
        maia_rpc::framing::DEFAULT_MAX_LINE,
    );
    let agent = Arc::new(Agent::new(conn.clone(), Engine::new(options)));
    let mut stop = crate::signals::Stop::new()?;
    loop {
        tokio::select! {
            message = incoming.recv() => match message {
                Some(Incoming::Request { id, method, params }) => {
                    agent.handle_request(id, &method, params)
                }
                Some(Incoming::Notification { method, params }) => {
                    agent.handle_notification(&method, params)
                }
                None => {
                    tracing::info!("input closed; shutting down");
                    break;
                }
            },
            signal = stop.next() => {
                tracing::info!(signal, "signal received; shutting down");
                break;
            }
        }
    }
    agent.shutdown().await;
    drop(agent);
    let _ = tokio::time::timeout(std::time::Duration::from_millis(500), conn.flush()).await;
    drop(conn);
    // The writer ends once the reader (blocked on stdin) lets go too; do
    // not wait for it after the flush.
    let _ = tokio::time::timeout(std::time::Duration::from_millis(100), writer).await;
    Ok(())
}

/// The id of the `session/prompt` request being served, if any.
type Pending = Arc<Mutex<Option<Id>>>;

/// The models offered for a session (shared with its pump).
type Models = Arc<Mutex<Vec<String>>>;

struct SessionEntry {
    handle: SessionHandle,
    pending: Pending,
    models: Models,
    /// Cancelled when the session's pump has ended (the session stopped and
    /// its last prompt was answered).
    done: tokio_util::sync::CancellationToken,
}

/// How long `session/close` waits for the session to stop.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long opening a session waits for the endpoint's model list.
const MODEL_LIST_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// What the agent knows of a session id.
enum Slot {
    /// Being opened (`session/load` / `resume`, or reopened): messages
    /// naming it wait in `queue` (as read from the input), in arrival order. `entry` is set once the
    /// session is ready, while the queue drains.
    Opening {
        /// Which open this is (a reopening while the queue drains starts
        /// a new one, which takes over the rest of the queue).
        generation: u64,
        entry: Option<Arc<SessionEntry>>,
        queue: VecDeque<Incoming>,
    },
    Open(Arc<SessionEntry>),
}

impl Slot {
    fn entry(&self) -> Option<Arc<SessionEntry>> {
        match self {
            Slot::Open(entry) => Some(entry.clone()),
            Slot::Opening { entry, .. } => entry.clone(),
        }
    }
}

struct Agent {
    conn: Connection,
    engine: Engine,
    /// The client's capabilities, once `initialize` was answered.
    client: Mutex<Option<ClientCapabilities>>,
    /// Every session id this connection opened or is opening. One lock, held
    /// only for map operations, so a state change is atomic with the
    /// routing decision of every message.
    sessions: Mutex<HashMap<String, Slot>>,
    /// Numbers the opens of [`Slot::Opening`].
    generations: std::sync::atomic::AtomicU64,
    pumps: Mutex<Vec<JoinHandle<()>>>,
    /// Folders sessions were opened in (what `session/list` without a
    /// `cwd` and `session/delete` search).
    known_cwds: Mutex<BTreeSet<PathBuf>>,
    /// The folder of the last `session/new` refused with `auth_required`
    /// (what `authenticate` checks; else the user's settings alone).
    auth_cwd: Mutex<Option<PathBuf>>,
}

/// Sessions per `session/list` page.
const LIST_PAGE: usize = 50;

fn invalid_params(message: impl Into<String>) -> RpcError {
    RpcError::new(ErrorCode::InvalidParams, message)
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

fn unknown_session(id: &str) -> RpcError {
    RpcError::new(
        ErrorCode::ResourceNotFound,
        format!("unknown session `{id}`"),
    )
    .with_data(json!({ "sessionId": id }))
}

fn to_value<T: serde::Serialize>(value: &T) -> Result<Value, RpcError> {
    serde_json::to_value(value).map_err(|e| RpcError::new(ErrorCode::InternalError, e.to_string()))
}

impl Agent {
    fn new(conn: Connection, engine: Engine) -> Self {
        Agent {
            conn,
            engine,
            client: Mutex::new(None),
            sessions: Mutex::new(HashMap::new()),
            generations: std::sync::atomic::AtomicU64::new(1),
            pumps: Mutex::new(Vec::new()),
            known_cwds: Mutex::new(BTreeSet::new()),
            auth_cwd: Mutex::new(None),
        }
    }

    fn client_caps(&self) -> Option<ClientCapabilities> {
        self.client.lock().ok().and_then(|c| c.clone())
    }

    /// A request from the client's input: one that names a session being
    /// opened waits for it (in order); the rest is handled now.
    fn handle_request(self: &Arc<Self>, id: Id, method: &str, params: Value) {
        if let Some(sid) = named_session(&params) {
            let mut sessions = self.lock_sessions();
            if let Some(Slot::Opening { queue, .. }) = sessions.get_mut(&sid) {
                queue.push_back(Incoming::Request {
                    id,
                    method: method.to_owned(),
                    params,
                });
                return;
            }
        }
        self.handle_request_now(id, method, params);
    }

    fn handle_request_now(self: &Arc<Self>, id: Id, method: &str, params: Value) {
        let request = match ClientRequest::from_method_and_params(method, &params) {
            Ok(request) => request,
            Err(MethodDispatchError::UnknownMethod { .. }) => {
                self.conn.respond(
                    id,
                    Err(RpcError::new(
                        ErrorCode::MethodNotFound,
                        format!("method not found: {method}"),
                    )),
                );
                return;
            }
            #[cfg(feature = "llm-providers")]
            Err(MethodDispatchError::InvalidPayload { .. }) if method.starts_with("providers/") => {
                self.conn
                    .respond(id, Err(providers::invalid_payload(method, &params)));
                return;
            }
            Err(MethodDispatchError::InvalidPayload { source, .. }) => {
                self.conn.respond(
                    id,
                    Err(invalid_params(format!(
                        "invalid params for {method}: {source}"
                    ))),
                );
                return;
            }
            Err(e) => {
                self.conn.respond(id, Err(invalid_params(e.to_string())));
                return;
            }
        };
        let initialized = self.client_caps().is_some();
        let result = match request {
            ClientRequest::InitializeRequest(req) => {
                let methods = auth::methods(&req.client_capabilities);
                if let Ok(mut client) = self.client.lock() {
                    *client = Some(req.client_capabilities);
                }
                tracing::info!(client = ?req.client_info.map(|c| c.name), asked = ?req.protocol_version, "initialized");
                to_value(&initialize_response().auth_methods(methods))
            }
            _ if !initialized => Err(RpcError::new(
                ErrorCode::InvalidRequest,
                "the connection is not initialized: call `initialize` first",
            )),
            ClientRequest::NewSessionRequest(req) => {
                let prompt = req.system_prompt.is_some();
                return self.spawn_open(
                    id,
                    (req.cwd, req.additional_directories),
                    req.mcp_servers,
                    Open::New,
                    prompt,
                );
            }
            ClientRequest::LoadSessionRequest(req) => {
                let how = Open::Load(req.session_id.0.to_string());
                let prompt = req.system_prompt.is_some();
                return self.spawn_open(
                    id,
                    (req.cwd, req.additional_directories),
                    req.mcp_servers,
                    how,
                    prompt,
                );
            }
            ClientRequest::ResumeSessionRequest(req) => {
                let how = Open::Resume(req.session_id.0.to_string());
                let prompt = req.system_prompt.is_some();
                return self.spawn_open(
                    id,
                    (req.cwd, req.additional_directories),
                    req.mcp_servers,
                    how,
                    prompt,
                );
            }
            ClientRequest::CloseSessionRequest(req) => {
                return self.close_session(id, req.session_id.0.as_ref());
            }
            ClientRequest::DeleteSessionRequest(req) => {
                let removed = self
                    .lock_sessions()
                    .remove(req.session_id.0.as_ref())
                    .and_then(|slot| slot.entry());
                let agent = self.clone();
                // Folders are searched off the runtime.
                tokio::spawn(async move {
                    let sid = req.session_id.0.to_string();
                    let work = agent.clone();
                    let result =
                        tokio::task::spawn_blocking(move || work.delete_session(&sid, removed))
                            .await
                            .unwrap_or_else(|e| {
                                Err(RpcError::new(ErrorCode::InternalError, e.to_string()))
                            });
                    agent.conn.respond(id, result);
                });
                return;
            }
            ClientRequest::ListSessionsRequest(req) => {
                let agent = self.clone();
                tokio::spawn(async move {
                    let work = agent.clone();
                    let result = tokio::task::spawn_blocking(move || work.list_sessions(&req))
                        .await
                        .unwrap_or_else(|e| {
                            Err(RpcError::new(ErrorCode::InternalError, e.to_string()))
                        });
                    agent.conn.respond(id, result);
                });
                return;
            }
            ClientRequest::SetSessionConfigOptionRequest(req) => self.set_config_option(&req),
            ClientRequest::SetSessionModeRequest(req) => self.set_mode(&req),
            ClientRequest::PromptRequest(req) => match self.prompt(&id, req) {
                // Answered when the turn ends.
                Ok(()) => return,
                Err(e) => Err(e),
            },
            #[cfg(feature = "llm-providers")]
            ClientRequest::ListProvidersRequest(_) => to_value(&providers::list(&self.engine)),
            #[cfg(feature = "llm-providers")]
            ClientRequest::SetProviderRequest(req) => {
                providers::set(&self.engine, req).and_then(|r| to_value(&r))
            }
            #[cfg(feature = "llm-providers")]
            ClientRequest::DisableProviderRequest(req) => Err(providers::disable(&req)),
            ClientRequest::AuthenticateRequest(req) => {
                let method = req.method_id.0.to_string();
                let caps = self.client_caps().unwrap_or_default();
                if !auth::known(&method, &caps) {
                    let offered: Vec<String> = auth::methods(&caps)
                        .iter()
                        .map(|m| format!("`{}`", m.id().0))
                        .collect();
                    Err(invalid_params(format!(
                        "unknown authentication method `{method}` (offered: {})",
                        offered.join(", ")
                    )))
                } else {
                    let agent = self.clone();
                    tokio::spawn(async move {
                        let result = agent.authenticate().await;
                        agent.conn.respond(id, result);
                    });
                    return;
                }
            }
            _ => Err(RpcError::new(
                ErrorCode::MethodNotFound,
                format!("method not supported: {method}"),
            )),
        };
        self.conn.respond(id, result);
    }

    fn handle_notification(self: &Arc<Self>, method: &str, params: Value) {
        if let Some(sid) = named_session(&params) {
            let mut sessions = self.lock_sessions();
            if let Some(Slot::Opening { queue, .. }) = sessions.get_mut(&sid) {
                queue.push_back(Incoming::Notification {
                    method: method.to_owned(),
                    params,
                });
                return;
            }
        }
        self.handle_notification_now(method, params);
    }

    fn handle_notification_now(&self, method: &str, params: Value) {
        match ClientNotification::from_method_and_params(method, &params) {
            Ok(ClientNotification::CancelNotification(n)) => {
                match self.entry(n.session_id.0.as_ref()) {
                    Some(entry) => {
                        tracing::info!(session = %n.session_id, "cancel requested");
                        entry.handle.cancel();
                    }
                    None => {
                        tracing::debug!(session = %n.session_id, "cancel for an unknown session")
                    }
                }
            }
            Ok(_) => tracing::debug!(method, "notification ignored"),
            Err(e) => tracing::debug!(method, "notification ignored: {e}"),
        }
    }

    fn lock_sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        // A panic while the lock was held cannot leave the map half-changed
        // (every change is one insert or remove): keep using it.
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The session `id`, when it is open (or opened and draining its queue).
    fn entry(&self, id: &str) -> Option<Arc<SessionEntry>> {
        self.lock_sessions().get(id).and_then(Slot::entry)
    }

    /// `session/new`, `session/load` and `session/resume`: checked here,
    /// opened on a task (it may wait for the model list). A load or resume
    /// marks its id as opening at once, so every later message naming it
    /// waits for the open, in order.
    fn spawn_open(
        self: &Arc<Self>,
        id: Id,
        (cwd, additional): (PathBuf, Vec<PathBuf>),
        mcp_servers: Vec<agent_client_protocol_schema::v1::McpServer>,
        how: Open,
        system_prompt: bool,
    ) {
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
            Open::New => None,
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
        tokio::spawn(async move {
            agent
                .open_session(id, (cwd, roots), how, mcp, (live, generation))
                .await
        });
    }

    /// Opens a session and answers the request itself. For a load or a
    /// resume, everything the session sends on opening (the replay, the
    /// command list, notices) goes before the answer; for `session/new` it
    /// follows (the client learns the id from the answer). The session is
    /// registered before the answer is written, so a request sent the
    /// instant it arrives finds it.
    async fn open_session(
        self: Arc<Self>,
        id: Id,
        (cwd, roots): (PathBuf, Vec<PathBuf>),
        how: Open,
        mcp: Vec<maia_core::McpServerConfig>,
        (live, generation): (Option<Arc<SessionEntry>>, u64),
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
        let listed = match auth::check(&self.engine, &cwd, MODEL_LIST_WAIT, false).await {
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
            Open::Load(sid) | Open::Resume(sid) => {
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
        fs.bind(handle.id());
        handle.use_client(client_tools(&self.conn, &caps, handle.id()));
        let session_id = handle.id().to_owned();
        handle.default_model_from(&listed);
        let models: Models = Arc::new(Mutex::new(listed.clone()));
        let forwarder = Forwarder {
            conn: self.conn.clone(),
            session_id: session_id.clone(),
            pending: Pending::default(),
            caps: caps.clone(),
            model: handle.shared_model(),
            mode: handle.shared_mode(),
            models: models.clone(),
        };
        if !matches!(how, Open::New) {
            if matches!(how, Open::Load(_)) {
                for event in replay {
                    self.forward(&session_id, event, &caps);
                }
            }
            // The session's opening events are queued by now.
            while let Ok(event) = events.try_recv() {
                forwarder.forward(event);
            }
        }
        let options = convert::config_options(handle.model(), &listed, handle.mode());
        let modes = convert::modes(handle.mode());
        let result = match how {
            Open::New => to_value(
                &NewSessionResponse::new(session_id.clone())
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
        };
        let done = tokio_util::sync::CancellationToken::new();
        let entry = Arc::new(SessionEntry {
            handle: handle.clone(),
            pending: forwarder.pending.clone(),
            models,
            done: done.clone(),
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
        self.conn.respond(id, result);
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
    async fn authenticate(&self) -> Result<Value, RpcError> {
        let cwd = self
            .auth_cwd
            .lock()
            .ok()
            .and_then(|c| c.clone())
            .or_else(|| self.engine.home().map(Path::to_path_buf))
            .unwrap_or_else(std::env::temp_dir);
        match auth::check(&self.engine, &cwd, MODEL_LIST_WAIT, true).await {
            Ok(_) => Ok(json!({})),
            Err(problem) => Err(auth::required(&problem)),
        }
    }

    /// Answers a failed open, and hands the messages that waited for it to
    /// the ordinary path (they find no session and say so).
    fn fail_open(
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
    fn drain_queue(self: &Arc<Self>, session_id: &str, generation: u64) {
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

    fn dispatch(self: &Arc<Self>, message: Incoming) {
        match message {
            Incoming::Request { id, method, params } => {
                self.handle_request_now(id, &method, params)
            }
            Incoming::Notification { method, params } => {
                self.handle_notification_now(&method, params)
            }
        }
    }

    fn send_update(&self, session_id: &str, update: SessionUpdate) {
        match convert::notification(session_id, update) {
            Ok(params) => self.conn.notify("session/update", params),
            Err(e) => tracing::error!("cannot encode an update: {e}"),
        }
    }

    fn forward(&self, session_id: &str, event: Event, caps: &ClientCapabilities) {
        if let Some(update) = convert::session_update(event, caps) {
            self.send_update(session_id, update);
        }
    }

    fn set_mode(
        &self,
        req: &agent_client_protocol_schema::v1::SetSessionModeRequest,
    ) -> Result<Value, RpcError> {
        let session_id = req.session_id.0.to_string();
        let entry = self
            .entry(&session_id)
            .ok_or_else(|| unknown_session(&session_id))?;
        let mode = maia_core::Mode::from_id(&req.mode_id.0)
            .ok_or_else(|| invalid_params(format!("unknown mode `{}`", req.mode_id.0)))?;
        entry.handle.set_mode(mode);
        // Keep the mode config option in sync.
        let models = entry.models.lock().map(|m| m.clone()).unwrap_or_default();
        let options = convert::config_options(entry.handle.model(), &models, mode);
        self.send_update(
            &session_id,
            SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(options)),
        );
        Ok(json!({}))
    }

    fn set_config_option(
        &self,
        req: &agent_client_protocol_schema::v1::SetSessionConfigOptionRequest,
    ) -> Result<Value, RpcError> {
        let session_id = req.session_id.0.to_string();
        let entry = self
            .entry(&session_id)
            .ok_or_else(|| unknown_session(&session_id))?;
        let agent_client_protocol_schema::v1::SessionConfigOptionValue::ValueId { value } =
            &req.value
        else {
            return Err(invalid_params("this option takes a value id"));
        };
        let value = value.0.to_string();
        let models = entry.models.lock().map(|m| m.clone()).unwrap_or_default();
        match req.config_id.0.as_ref() {
            convert::MODEL_OPTION => {
                if !models.contains(&value)
                    && entry.handle.model().as_deref() != Some(value.as_str())
                {
                    return Err(invalid_params(format!("unknown model `{value}`")));
                }
                entry.handle.set_model(value);
            }
            convert::MODE_OPTION => {
                let mode = maia_core::Mode::from_id(&value)
                    .ok_or_else(|| invalid_params(format!("unknown mode `{value}`")))?;
                entry.handle.set_mode(mode);
                self.send_update(
                    &session_id,
                    SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode.id())),
                );
            }
            other => return Err(invalid_params(format!("unknown config option `{other}`"))),
        }
        let options = convert::config_options(entry.handle.model(), &models, entry.handle.mode());
        to_value(&SetSessionConfigOptionResponse::new(options))
    }

    /// Cancels a running turn and answers once the session has stopped, so
    /// a cancelled prompt is answered (`cancelled`) before the close.
    fn close_session(&self, id: Id, session_id: &str) {
        let Some(entry) = self
            .lock_sessions()
            .remove(session_id)
            .and_then(|slot| slot.entry())
        else {
            self.conn.respond(id, Err(unknown_session(session_id)));
            return;
        };
        entry.handle.cancel();
        let done = entry.done.clone();
        // The entry holds the session's handle: dropping it ends the session
        // once its turn is over.
        drop(entry);
        let conn = self.conn.clone();
        tokio::spawn(async move {
            if tokio::time::timeout(CLOSE_WAIT, done.cancelled())
                .await
                .is_err()
            {
                tracing::warn!("the closed session did not stop in time");
            }
            conn.respond(id, Ok(json!({})));
        });
    }

    /// Deletes every file of a thread, in every folder that may hold it;
    /// `removed` is the live session it was, if any.
    fn delete_session(
        &self,
        session_id: &str,
        removed: Option<Arc<SessionEntry>>,
    ) -> Result<Value, RpcError> {
        let mut cwds = self.all_folders();
        if let Some(entry) = removed {
            entry.handle.cancel();
            cwds.insert(entry.handle.cwd().to_path_buf());
        }
        for cwd in cwds {
            if let Err(e) = self.engine.delete_session(&cwd, session_id) {
                return Err(RpcError::new(ErrorCode::InternalError, e.to_string()));
            }
        }
        Ok(json!({}))
    }

    /// The folders this user's threads may be in: the index under
    /// `~/.maia` and every folder this process has seen.
    fn all_folders(&self) -> BTreeSet<PathBuf> {
        let mut folders: BTreeSet<PathBuf> = self
            .known_cwds
            .lock()
            .map(|k| k.clone())
            .unwrap_or_default();
        folders.extend(self.engine.session_folders());
        folders
    }

    fn list_sessions(&self, req: &ListSessionsRequest) -> Result<Value, RpcError> {
        let cwds: Vec<PathBuf> = match &req.cwd {
            Some(cwd) if !cwd.is_absolute() => {
                return Err(invalid_params("cwd must be an absolute path"));
            }
            Some(cwd) => {
                // `session/delete` (which has no cwd) searches the listed folders.
                if let Ok(mut known) = self.known_cwds.lock() {
                    known.insert(cwd.clone());
                }
                vec![cwd.clone()]
            }
            None => self.all_folders().into_iter().collect(),
        };
        let start = match &req.cursor {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .map_err(|_| invalid_params(format!("invalid cursor `{cursor}`")))?,
        };
        let mut all: Vec<maia_core::SessionSummary> = cwds
            .iter()
            .flat_map(|cwd| self.engine.list_sessions(cwd))
            .collect();
        all.sort_by(|a, b| b.updated_at.cmp(&a.updated_at));
        let sessions: Vec<SessionInfo> = all
            .iter()
            .skip(start)
            .take(LIST_PAGE)
            .map(|s| {
                SessionInfo::new(s.id.clone(), s.cwd.clone())
                    .additional_directories(s.roots.clone())
                    .title(s.title.clone().unwrap_or_else(|| s.name.clone()))
                    .updated_at(s.updated_at.clone())
            })
            .collect();
        let mut response = ListSessionsResponse::new(sessions);
        if all.len() > start + LIST_PAGE {
            response.next_cursor = Some((start + LIST_PAGE).to_string());
        }
        to_value(&response)
    }

    fn prompt(&self, id: &Id, req: PromptRequest) -> Result<(), RpcError> {
        let session_id = req.session_id.0.to_string();
        let entry = self
            .entry(&session_id)
            .ok_or_else(|| unknown_session(&session_id))?;
        let parts = prompt_parts(req.prompt)?;
        let mut pending = entry
            .pending
            .lock()
            .map_err(|_| RpcError::new(ErrorCode::InternalError, "session state poisoned"))?;
        if pending.is_some() {
            return Err(RpcError::new(
                ErrorCode::InvalidRequest,
                "this session is already running a prompt; wait for it or send session/cancel",
            ));
        }
        entry
            .handle
            .prompt(parts)
            .map_err(|e| RpcError::new(ErrorCode::InvalidRequest, e.to_string()))?;
        *pending = Some(id.clone());
        Ok(())
    }

    async fn shutdown(&self) {
        let slots: Vec<Slot> = self.lock_sessions().drain().map(|(_, s)| s).collect();
        for entry in slots.iter().filter_map(Slot::entry) {
            entry.handle.cancel();
        }
        drop(slots);
        let pumps: Vec<JoinHandle<()>> = self
            .pumps
            .lock()
            .map(|mut p| std::mem::take(&mut *p))
            .unwrap_or_default();
        // Give running tools a moment to kill their process groups.
        let all = futures_util::future::join_all(pumps);
        let _ = tokio::time::timeout(std::time::Duration::from_millis(800), all).await;
    }
}

/// How `open_session` opens a session.
#[derive(Clone)]
enum Open {
    New,
    Load(String),
    Resume(String),
}

impl Open {
    /// The id a load or resume names.
    fn session_id(&self) -> Option<String> {
        match self {
            Open::New => None,
            Open::Load(sid) | Open::Resume(sid) => Some(sid.clone()),
        }
    }
}

/// The session a request or notification names (`params.sessionId`).
fn named_session(params: &Value) -> Option<String> {
    params
        .get("sessionId")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn check_cwd(cwd: &Path, system_prompt: bool) -> Result<(), RpcError> {
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

fn initialize_response() -> InitializeResponse {
    let capabilities = AgentCapabilities::new();
    #[cfg(feature = "llm-providers")]
    let capabilities =
        capabilities.providers(agent_client_protocol_schema::v1::ProvidersCapabilities::new());
    InitializeResponse::new(ProtocolVersion::V1)
        .agent_capabilities(
            capabilities
                .load_session(true)
                .mcp_capabilities(McpCapabilities::new().http(true))
                .prompt_capabilities(PromptCapabilities::new().embedded_context(true).image(true))
                .session_capabilities(
                    SessionCapabilities::new()
                        .list(SessionListCapabilities::new())
                        .resume(SessionResumeCapabilities::new())
                        .additional_directories(SessionAdditionalDirectoriesCapabilities::new())
                        .close(SessionCloseCapabilities::new())
                        .delete(SessionDeleteCapabilities::new()),
                ),
        )
        .agent_info(Implementation::new("maia", env!("CARGO_PKG_VERSION")).title("MAIA"))
}

/// Converts ACP prompt content into engine parts. An image comes as its
/// bytes (`data`) or, without them, as a `file://` `uri` read like a
/// linked file; its limits are the engine's.
fn prompt_parts(blocks: Vec<ContentBlock>) -> Result<Vec<PromptPart>, RpcError> {
    let mut parts = Vec::with_capacity(blocks.len());
    let mut pasted = 0;
    let mut image_name = |uri: Option<&str>| match uri {
        Some(uri) => uri.to_owned(),
        None => {
            pasted += 1;
            format!("pasted-image-{pasted}")
        }
    };
    for block in blocks {
        match block {
            ContentBlock::Text(text) => parts.push(PromptPart::Text(text.text)),
            ContentBlock::ResourceLink(link) => match maia_core::prompt::uri_path(&link.uri) {
                Some(path) => parts.push(PromptPart::File(path)),
                None => parts.push(PromptPart::Note(format!(
                    "link {} was not read: only file:// links are supported",
                    link.uri
                ))),
            },
            ContentBlock::Resource(resource) => match resource.resource {
                EmbeddedResourceResource::TextResourceContents(text) => {
                    parts.push(PromptPart::Embedded {
                        uri: text.uri,
                        text: text.text,
                    });
                }
                EmbeddedResourceResource::BlobResourceContents(blob)
                    if blob
                        .mime_type
                        .as_deref()
                        .is_some_and(|m| m.starts_with("image/")) =>
                {
                    parts.push(PromptPart::Image {
                        name: blob.uri.clone(),
                        mime_type: blob.mime_type.clone().unwrap_or_default(),
                        data: decode_base64(&blob.blob, &blob.uri)?,
                    });
                }
                EmbeddedResourceResource::BlobResourceContents(blob) => parts.push(
                    PromptPart::Note(format!("binary resource {} skipped", blob.uri)),
                ),
                _ => parts.push(PromptPart::Note("unsupported resource skipped".into())),
            },
            ContentBlock::Image(image) if !image.data.is_empty() => {
                let name = image_name(image.uri.as_deref());
                let data = decode_base64(&image.data, &name)?;
                parts.push(PromptPart::Image {
                    name,
                    mime_type: image.mime_type,
                    data,
                });
            }
            ContentBlock::Image(image) => {
                match image.uri.as_deref().and_then(maia_core::prompt::uri_path) {
                    Some(path) => parts.push(PromptPart::File(path)),
                    None => {
                        return Err(invalid_params(
                            "an image block needs its base64 `data` or a file:// `uri`",
                        ));
                    }
                }
            }
            ContentBlock::Audio(_) => {
                return Err(invalid_params(
                    "audio content is not supported (promptCapabilities.audio is false)",
                ));
            }
            _ => return Err(invalid_params("unsupported content block")),
        }
    }
    Ok(parts)
}

/// Base64 bytes of a prompt block (an invalid encoding is the client's error).
fn decode_base64(data: &str, what: &str) -> Result<Vec<u8>, RpcError> {
    use base64::Engine;
    let compact: String = data.split_ascii_whitespace().collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact.as_bytes())
        .map_err(|e| invalid_params(format!("the data of {what} is not valid base64: {e}")))
}

/// Forwards one session's engine events to the client, in order, and
/// answers its pending prompt when the turn's last event passes.
struct Forwarder {
    conn: Connection,
    session_id: String,
    pending: Pending,
    caps: ClientCapabilities,
    model: maia_core::SharedModel,
    mode: maia_core::SharedMode,
    models: Models,
}

impl Forwarder {
    async fn run(self, mut events: mpsc::UnboundedReceiver<Event>) {
        while let Some(event) = events.recv().await {
            self.forward(event);
        }
        // The engine is gone: never leave a prompt unanswered.
        let id = self.pending.lock().ok().and_then(|mut p| p.take());
        if let Some(id) = id {
            self.conn.respond(
                id,
                to_value(&PromptResponse::new(
                    agent_client_protocol_schema::v1::StopReason::Cancelled,
                )),
            );
        }
    }

    fn notify(&self, update: SessionUpdate) {
        match convert::notification(&self.session_id, update) {
            Ok(params) => self.conn.notify("session/update", params),
            Err(e) => tracing::error!("cannot encode an update: {e}"),
        }
    }

    /// Sends what `event` means to the client; never waits.
    fn forward(&self, event: Event) {
        match event {
            Event::TurnEnded(stop) => {
                let id = self.pending.lock().ok().and_then(|mut p| p.take());
                if let Some(id) = id {
                    let response = to_value(&PromptResponse::new(convert::stop_reason(stop)));
                    self.conn.respond(id, response);
                }
            }
            Event::Permission(request) => {
                // Queued now, in order with this turn's other messages (so
                // never after its response); answered on a task.
                let answer = match convert::permission_request(&self.session_id, &request) {
                    Ok(params) => Some(
                        self.conn
                            .start_request("session/request_permission", params),
                    ),
                    Err(e) => {
                        tracing::error!("cannot encode a permission request: {e}");
                        None
                    }
                };
                tokio::spawn(async move {
                    let reply = match answer {
                        Some(answer) => convert::permission_reply(answer.await),
                        None => maia_core::PermissionReply::Cancelled,
                    };
                    let _ = request.reply.send(reply);
                });
            }
            Event::ModelChanged(name) => {
                let listed = match self.models.lock() {
                    Ok(mut models) => {
                        if !models.contains(&name) {
                            models.push(name);
                        }
                        models.clone()
                    }
                    Err(_) => Vec::new(),
                };
                let options = convert::config_options(self.model.get(), &listed, self.mode.get());
                self.notify(SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(
                    options,
                )));
            }
            other => {
                if let Some(update) = convert::session_update(other, &self.caps) {
                    self.notify(update);
                }
            }
        }
    }
}
