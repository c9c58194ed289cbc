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

mod convert;
mod fs;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1::{
    AgentCapabilities, ClientCapabilities, ClientNotification, ClientRequest, ConfigOptionUpdate,
    ContentBlock, CurrentModeUpdate, EmbeddedResourceResource, Implementation, InitializeResponse,
    ListSessionsRequest, ListSessionsResponse, LoadSessionResponse, McpCapabilities,
    NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse, ResumeSessionResponse,
    SessionCapabilities, SessionCloseCapabilities, SessionDeleteCapabilities, SessionInfo,
    SessionListCapabilities, SessionResumeCapabilities, SessionUpdate,
    SetSessionConfigOptionResponse,
};
use agent_client_protocol_schema::{MethodDispatchError, ProtocolVersion};
use dashmap::DashMap;
use maia_core::{Engine, EngineOptions, Event, PromptPart, SessionHandle};
use maia_rpc::{Connection, ErrorCode, Id, Incoming, RpcError};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Serves ACP on this process's stdin and stdout until stdin closes.
pub async fn serve_stdio(options: EngineOptions) -> anyhow::Result<()> {
    let (conn, mut incoming, writer) = maia_rpc::serve_blocking_writer(
        tokio::io::stdin(),
        std::io::stdout(),
        maia_rpc::framing::DEFAULT_MAX_LINE,
    );
    let agent = Arc::new(Agent::new(conn, Engine::new(options)));
    while let Some(message) = incoming.recv().await {
        match message {
            Incoming::Request { id, method, params } => agent.handle_request(id, &method, params),
            Incoming::Notification { method, params } => agent.handle_notification(&method, params),
        }
    }
    tracing::info!("input closed; shutting down");
    agent.shutdown().await;
    drop(agent);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), writer).await;
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

struct Agent {
    conn: Connection,
    engine: Engine,
    /// The client's capabilities, once `initialize` was answered.
    client: Mutex<Option<ClientCapabilities>>,
    sessions: DashMap<String, Arc<SessionEntry>>,
    pumps: Mutex<Vec<JoinHandle<()>>>,
    /// Folders sessions were opened in (what `session/list` without a
    /// `cwd` and `session/delete` search).
    known_cwds: Mutex<BTreeSet<PathBuf>>,
}

/// Sessions per `session/list` page.
const LIST_PAGE: usize = 50;

fn invalid_params(message: impl Into<String>) -> RpcError {
    RpcError::new(ErrorCode::InvalidParams, message)
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
            sessions: DashMap::new(),
            pumps: Mutex::new(Vec::new()),
            known_cwds: Mutex::new(BTreeSet::new()),
        }
    }

    fn client_caps(&self) -> Option<ClientCapabilities> {
        self.client.lock().ok().and_then(|c| c.clone())
    }

    fn handle_request(self: &Arc<Self>, id: Id, method: &str, params: Value) {
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
                if let Ok(mut client) = self.client.lock() {
                    *client = Some(req.client_capabilities);
                }
                tracing::info!(client = ?req.client_info.map(|c| c.name), asked = ?req.protocol_version, "initialized");
                to_value(&initialize_response())
            }
            _ if !initialized => Err(RpcError::new(
                ErrorCode::InvalidRequest,
                "the connection is not initialized: call `initialize` first",
            )),
            ClientRequest::NewSessionRequest(req) => {
                let prompt = req.system_prompt.is_some();
                return self.spawn_open(id, req.cwd, req.mcp_servers, Open::New, prompt);
            }
            ClientRequest::LoadSessionRequest(req) => {
                let (how, prompt) = (
                    Open::Load(req.session_id.0.to_string()),
                    req.system_prompt.is_some(),
                );
                return self.spawn_open(id, req.cwd, req.mcp_servers, how, prompt);
            }
            ClientRequest::ResumeSessionRequest(req) => {
                let (how, prompt) = (
                    Open::Resume(req.session_id.0.to_string()),
                    req.system_prompt.is_some(),
                );
                return self.spawn_open(id, req.cwd, req.mcp_servers, how, prompt);
            }
            ClientRequest::CloseSessionRequest(req) => {
                return self.close_session(id, req.session_id.0.as_ref());
            }
            ClientRequest::DeleteSessionRequest(req) => {
                self.delete_session(req.session_id.0.as_ref())
            }
            ClientRequest::ListSessionsRequest(req) => self.list_sessions(&req),
            ClientRequest::SetSessionConfigOptionRequest(req) => self.set_config_option(&req),
            ClientRequest::SetSessionModeRequest(req) => self.set_mode(&req),
            ClientRequest::PromptRequest(req) => match self.prompt(&id, req) {
                // Answered when the turn ends.
                Ok(()) => return,
                Err(e) => Err(e),
            },
            ClientRequest::AuthenticateRequest(_) => Ok(json!({})),
            _ => Err(RpcError::new(
                ErrorCode::MethodNotFound,
                format!("method not supported: {method}"),
            )),
        };
        self.conn.respond(id, result);
    }

    fn handle_notification(&self, method: &str, params: Value) {
        match ClientNotification::from_method_and_params(method, &params) {
            Ok(ClientNotification::CancelNotification(n)) => {
                match self.sessions.get(n.session_id.0.as_ref()) {
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

    /// `session/new`, `session/load` and `session/resume`: checked here,
    /// opened on a task (it may wait for the model list).
    fn spawn_open(
        self: &Arc<Self>,
        id: Id,
        cwd: PathBuf,
        mcp_servers: Vec<agent_client_protocol_schema::v1::McpServer>,
        how: Open,
        system_prompt: bool,
    ) {
        if let Err(e) = check_cwd(&cwd, system_prompt) {
            self.conn.respond(id, Err(e));
            return;
        }
        let mcp = convert::mcp_servers(mcp_servers, &cwd);
        let agent = self.clone();
        tokio::spawn(async move { agent.open_session(id, cwd, how, mcp).await });
    }

    /// Opens a session and answers the request itself: a load replays the
    /// conversation before its answer, and the session's own updates start
    /// only after the answer.
    async fn open_session(
        &self,
        id: Id,
        cwd: PathBuf,
        how: Open,
        mcp: Vec<maia_core::McpServerConfig>,
    ) {
        if let Ok(mut known) = self.known_cwds.lock() {
            known.insert(cwd.clone());
        }
        let caps = self.client_caps().unwrap_or_default();
        let fs = fs::ClientFs::new(self.conn.clone(), &caps);
        let (started, replay) = match &how {
            Open::New => (
                self.engine
                    .start_session_with_mcp(cwd.clone(), Arc::new(fs.clone()), mcp),
                Vec::new(),
            ),
            Open::Load(sid) | Open::Resume(sid) => {
                if let Some((_, live)) = self.sessions.remove(sid) {
                    // Reopening a live thread replaces it.
                    live.handle.cancel();
                }
                match self
                    .engine
                    .load_session_with_mcp(cwd.clone(), Arc::new(fs.clone()), sid, mcp)
                {
                    Ok((started, replay)) => (started, replay),
                    Err(maia_core::LoadError::NotFound(_)) => {
                        self.conn.respond(id, Err(unknown_session(sid)));
                        return;
                    }
                    Err(e) => {
                        self.conn.respond(
                            id,
                            Err(RpcError::new(ErrorCode::InternalError, e.to_string())),
                        );
                        return;
                    }
                }
            }
        };
        let (handle, events) = started;
        fs.bind(handle.id());
        let session_id = handle.id().to_owned();
        if matches!(how, Open::Load(_)) {
            for event in replay {
                self.forward(&session_id, event, &caps);
            }
        }
        let listed =
            match tokio::time::timeout(MODEL_LIST_WAIT, self.engine.list_models(&cwd)).await {
                Ok(Ok(models)) => models,
                Ok(Err(e)) => {
                    tracing::warn!("cannot list the models: {e}");
                    Vec::new()
                }
                Err(_) => {
                    tracing::warn!("the model list did not arrive in time");
                    Vec::new()
                }
            };
        if handle.model().is_none()
            && let Some(first) = listed.first()
        {
            handle.set_model(first.clone());
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
        let pending = Pending::default();
        let models: Models = Arc::new(Mutex::new(listed));
        let done = tokio_util::sync::CancellationToken::new();
        self.sessions.insert(
            session_id.clone(),
            Arc::new(SessionEntry {
                handle: handle.clone(),
                pending: pending.clone(),
                models: models.clone(),
                done: done.clone(),
            }),
        );
        // Answered once the session is registered: a prompt sent right after
        // the answer finds it.
        self.conn.respond(id, result);
        // The pump does not own the handle: dropping the entry ends the session.
        let pump = pump(
            self.conn.clone(),
            session_id,
            pending,
            events,
            caps,
            (handle.shared_model(), handle.shared_mode(), models),
        );
        let pump = tokio::spawn(async move {
            let _done = done.drop_guard();
            pump.await;
        });
        drop(handle);
        if let Ok(mut pumps) = self.pumps.lock() {
            pumps.retain(|p| !p.is_finished());
            pumps.push(pump);
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
            .sessions
            .get(&session_id)
            .map(|e| e.clone())
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
            .sessions
            .get(&session_id)
            .map(|e| e.clone())
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
        let Some((_, entry)) = self.sessions.remove(session_id) else {
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

    fn delete_session(&self, session_id: &str) -> Result<Value, RpcError> {
        let mut cwds: BTreeSet<PathBuf> = self
            .known_cwds
            .lock()
            .map(|k| k.clone())
            .unwrap_or_default();
        if let Some((_, entry)) = self.sessions.remove(session_id) {
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
            None => self
                .known_cwds
                .lock()
                .map(|k| k.iter().cloned().collect())
                .unwrap_or_default(),
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
            .sessions
            .get(&session_id)
            .map(|e| e.clone())
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
        for entry in self.sessions.iter() {
            entry.handle.cancel();
        }
        self.sessions.clear();
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
enum Open {
    New,
    Load(String),
    Resume(String),
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
    InitializeResponse::new(ProtocolVersion::V1)
        .agent_capabilities(
            AgentCapabilities::new()
                .load_session(true)
                .mcp_capabilities(McpCapabilities::new().http(true))
                .prompt_capabilities(PromptCapabilities::new().embedded_context(true))
                .session_capabilities(
                    SessionCapabilities::new()
                        .list(SessionListCapabilities::new())
                        .resume(SessionResumeCapabilities::new())
                        .close(SessionCloseCapabilities::new())
                        .delete(SessionDeleteCapabilities::new()),
                ),
        )
        .agent_info(Implementation::new("maia", env!("CARGO_PKG_VERSION")).title("MAIA"))
}

/// Converts ACP prompt content into engine parts.
fn prompt_parts(blocks: Vec<ContentBlock>) -> Result<Vec<PromptPart>, RpcError> {
    let mut parts = Vec::with_capacity(blocks.len());
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
                EmbeddedResourceResource::BlobResourceContents(blob) => parts.push(
                    PromptPart::Note(format!("binary resource {} skipped", blob.uri)),
                ),
                _ => parts.push(PromptPart::Note("unsupported resource skipped".into())),
            },
            ContentBlock::Image(_) => {
                return Err(invalid_params(
                    "image content is not supported (promptCapabilities.image is false)",
                ));
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

/// Forwards one session's engine events to the client, in order.
async fn pump(
    conn: Connection,
    session_id: String,
    pending: Pending,
    mut events: mpsc::UnboundedReceiver<Event>,
    caps: ClientCapabilities,
    (model, mode, models): (maia_core::SharedModel, maia_core::SharedMode, Models),
) {
    while let Some(event) = events.recv().await {
        match event {
            Event::TurnEnded(stop) => {
                let id = pending.lock().ok().and_then(|mut p| p.take());
                if let Some(id) = id {
                    let response = to_value(&PromptResponse::new(convert::stop_reason(stop)));
                    conn.respond(id, response);
                }
            }
            Event::Permission(request) => {
                let params = convert::permission_request(&session_id, &request);
                let conn = conn.clone();
                tokio::spawn(async move {
                    let reply = match params {
                        Ok(params) => {
                            let answer = conn.request("session/request_permission", params).await;
                            convert::permission_reply(answer)
                        }
                        Err(_) => maia_core::PermissionReply::Cancelled,
                    };
                    let _ = request.reply.send(reply);
                });
            }
            Event::ModelChanged(name) => {
                let listed = match models.lock() {
                    Ok(mut models) => {
                        if !models.contains(&name) {
                            models.push(name);
                        }
                        models.clone()
                    }
                    Err(_) => Vec::new(),
                };
                {
                    let options = convert::config_options(model.get(), &listed, mode.get());
                    let update =
                        SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(options));
                    match convert::notification(&session_id, update) {
                        Ok(params) => conn.notify("session/update", params),
                        Err(e) => tracing::error!("cannot encode an update: {e}"),
                    }
                }
            }
            other => {
                if let Some(update) = convert::session_update(other, &caps) {
                    match convert::notification(&session_id, update) {
                        Ok(params) => conn.notify("session/update", params),
                        Err(e) => tracing::error!("cannot encode an update: {e}"),
                    }
                }
            }
        }
    }
    // The engine is gone: never leave a prompt unanswered.
    let id = pending.lock().ok().and_then(|mut p| p.take());
    if let Some(id) = id {
        conn.respond(
            id,
            to_value(&PromptResponse::new(
                agent_client_protocol_schema::v1::StopReason::Cancelled,
            )),
        );
    }
}
