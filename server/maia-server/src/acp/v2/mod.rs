//! ACP v2 (the draft) beside v1 on one connection: which version this
//! connection speaks, `initialize`'s negotiation, and the v2 requests read
//! with the schema crate's `v2` types and served by the v1 paths (the
//! engine never learns the version).
//!
//! A client is answered in v2 only when MAIA runs with `--protocol-v2`
//! (the draft asks implementers to gate v2 behind a flag as well as the
//! negotiation) and its `initialize` asks for version 2 or later; every
//! other client gets v1 exactly as before. Requests whose v2 params and
//! answer are spelled as in v1 (`session/close`, `session/list`,
//! `session/delete`, MAIA's `_session/*` extensions) are checked against
//! their v2 type and handed to the v1 path; `initialize`, `session/new`,
//! `session/resume` (with `replayFrom`: v1's load),
//! `session/set_config_option` (`configId` where v1 says `id`) and
//! `session/prompt` have their own shapes here and in `turn`. The updates
//! are turned into v2 in `update`.

pub(super) mod terminal;
pub(super) mod turn;
pub(super) mod update;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agent_client_protocol_schema::v2::{
    self, AgentCapabilities, Implementation, InitializeResponse, McpCapabilities,
    McpHttpCapabilities, McpStdioCapabilities, PromptCapabilities,
    PromptEmbeddedContextCapabilities, PromptImageCapabilities,
    SessionAdditionalDirectoriesCapabilities, SessionCapabilities, SessionDeleteCapabilities,
};
use agent_client_protocol_schema::{ProtocolVersion, v1};
use maia_rpc::{ErrorCode, Id, RpcError};
use serde_json::Value;

use super::{Agent, invalid_params, to_value};

/// The protocol version of one connection.
#[derive(Default)]
pub(super) struct Wire {
    /// MAIA runs with `--protocol-v2`: a client asking for v2 gets it.
    offered: bool,
    /// This connection's `initialize` chose v2.
    chosen: AtomicBool,
}

impl Wire {
    pub(super) fn new(offered: bool) -> Self {
        Wire {
            offered,
            chosen: AtomicBool::new(false),
        }
    }

    /// Whether this connection speaks v2.
    pub(super) fn is_v2(&self) -> bool {
        self.chosen.load(Ordering::Acquire)
    }

    /// Whether the request `method` (`params`) is read as v2: on a v2
    /// connection every one; before it, an `initialize` asking for v2 when
    /// MAIA offers it.
    pub(super) fn speaks_v2(&self, method: &str, params: &Value) -> bool {
        self.is_v2()
            || (self.offered
                && method == "initialize"
                && params
                    .get("protocolVersion")
                    .and_then(Value::as_u64)
                    .is_some_and(|v| v >= u64::from(ProtocolVersion::V2.as_u16())))
    }
}

/// `value` read as `T` (the same JSON in both versions), or an
/// invalid-params error naming `what`.
fn reread<T: serde::de::DeserializeOwned>(
    value: &impl serde::Serialize,
    what: &str,
) -> Result<T, RpcError> {
    serde_json::to_value(value)
        .and_then(serde_json::from_value)
        .map_err(|e| invalid_params(format!("{what} is not served on ACP v2: {e}")))
}

/// v2 requests answered through the v1 path unchanged.
const SAME_AS_V1: [&str; 3] = ["session/close", "session/list", "session/delete"];

/// v1's unstable session methods the draft has no place for yet: served on
/// v2 with v1's params and answers (a fork's MCP servers read as v2 spells
/// them, its answer as `session/new`'s), advertised in `initialize`'s
/// `_meta.unstableSessionMethods`.
const UNSTABLE_AS_V1: [&str; 4] = [
    "session/fork",
    "session/set_title",
    "session/archive",
    "session/unarchive",
];

impl Agent {
    /// A request on a v2 connection (or v2's `initialize`).
    pub(super) fn handle_v2(self: &Arc<Self>, id: Id, method: &str, params: Value) {
        if method.starts_with("_session/") {
            // MAIA's own extensions: one shape in both versions.
            return self.handle_v1(id, method, params);
        }
        if UNSTABLE_AS_V1.contains(&method) {
            let params = if method == "session/fork" {
                match open_params(&params) {
                    Ok(params) => params,
                    Err(e) => return self.conn.respond(id, Err(e)),
                }
            } else {
                params
            };
            return self.handle_v1(id, method, params);
        }
        let request = match v2::ClientRequest::from_method_and_params(method, &params) {
            Ok(request) => request,
            Err(agent_client_protocol_schema::MethodDispatchError::UnknownMethod { .. }) => {
                let error = RpcError::new(
                    ErrorCode::MethodNotFound,
                    format!("method not found: {method}"),
                );
                return self.conn.respond(id, Err(error));
            }
            Err(e) => {
                let error = invalid_params(format!("invalid params for {method}: {e}"));
                return self.conn.respond(id, Err(error));
            }
        };
        if let v2::ClientRequest::InitializeRequest(req) = request {
            return self.conn.respond(id, self.initialize_v2(&req));
        }
        if self.client_caps().is_none() {
            let error = RpcError::new(
                ErrorCode::InvalidRequest,
                "the connection is not initialized: call `initialize` first",
            );
            return self.conn.respond(id, Err(error));
        }
        let opened = match request {
            v2::ClientRequest::NewSessionRequest(req) => open_params(&req)
                .and_then(|p| reread(&p, "this session/new"))
                .map(v1::ClientRequest::NewSessionRequest),
            v2::ClientRequest::ResumeSessionRequest(req) => resume_as_v1(&req),
            v2::ClientRequest::LoginAuthRequest(req) => {
                let method = req.method_id.0.to_string();
                if method != super::auth::AGENT_METHOD {
                    let error = invalid_params(format!(
                        "unknown authentication method `{method}` (offered: `{}`)",
                        super::auth::AGENT_METHOD
                    ));
                    return self.conn.respond(id, Err(error));
                }
                let agent = self.clone();
                tokio::spawn(async move {
                    let check = agent.authenticate();
                    agent.conn.respond_cancellable(id, check).await;
                });
                return;
            }
            v2::ClientRequest::LogoutAuthRequest(_) => {
                return self.respond_off_runtime(id, |a| super::auth::logout(&a.engine));
            }
            v2::ClientRequest::PromptRequest(req) => {
                if let Err(e) = self.prompt_v2(&id, *req) {
                    self.conn.respond(id, Err(e));
                }
                return;
            }
            v2::ClientRequest::SetSessionConfigOptionRequest(req) => {
                let result = reread(&req, "this session/set_config_option")
                    .and_then(|req| self.set_config_option(&req))
                    .and_then(|mut value| {
                        update::config_options(&mut value["configOptions"]);
                        to_value(&reread::<v2::SetSessionConfigOptionResponse>(
                            &value,
                            "the answer",
                        )?)
                    });
                return self.conn.respond(id, result);
            }
            v2::ClientRequest::CancelToolCallRequest(req) => {
                let call = req.tool_call_id.0.to_string();
                let result = self.cancel_call(&req.session_id.0, &call, "tool call");
                return self.conn.respond(id, result);
            }
            v2::ClientRequest::CancelTerminalRequest(req) => {
                let result = match terminal::call_of(&req.terminal_id.0) {
                    Some(call) => self.cancel_call(&req.session_id.0, call, "terminal"),
                    None => Err(invalid_params(format!(
                        "unknown terminal `{}`",
                        req.terminal_id.0
                    ))),
                };
                return self.conn.respond(id, result);
            }
            _ if SAME_AS_V1.contains(&method) => return self.handle_v1(id, method, params),
            _ => {
                let error = RpcError::new(
                    ErrorCode::MethodNotFound,
                    format!("{method} is not served on ACP v2 yet"),
                );
                return self.conn.respond(id, Err(error));
            }
        };
        match opened.map(super::open::OpenRequest::from_request) {
            Ok(Some(open)) => self.spawn_open(id, open),
            Ok(None) => {}
            Err(e) => self.conn.respond(id, Err(e)),
        }
    }

    /// `tool_call/cancel` and `terminal/cancel` (a terminal is its call's
    /// command): the call is cancelled alone, its process tree killed; it
    /// then ends `failed` "Cancelled" and the turn goes on. `-32602` for an
    /// unknown session, or a call that is not running (never started,
    /// finished, or cancelled already), as the draft says.
    fn cancel_call(&self, session: &str, call: &str, what: &str) -> Result<Value, RpcError> {
        let entry = self
            .entry(session)
            .ok_or_else(|| super::unknown_session(session))?;
        if entry.handle.cancel_call(call) {
            tracing::info!(session, call, "a {what} was cancelled alone");
            Ok(serde_json::json!({}))
        } else {
            Err(invalid_params(format!(
                "this {what} is not running (unknown, finished or cancelled already)"
            )))
        }
    }

    /// v2's `initialize`: the connection speaks v2 from now on. v2 clients
    /// offer no file system or terminal: MAIA reads and writes files and runs
    /// commands itself (each an agent-owned terminal, `terminal`). A client's forms
    /// (`elicitation`, spelled as in v1) serve `AskUser` and "reject with a
    /// reason" as on v1.
    fn initialize_v2(&self, req: &v2::InitializeRequest) -> Result<Value, RpcError> {
        let mut caps = v1::ClientCapabilities::default();
        // v2 notices and compaction updates need no client capability:
        // every v2 client is sent them (a compaction is its
        // `compaction_update`, never the `Compact` tool call).
        caps.session = Some(
            v1::ClientSessionCapabilities::new()
                .notices(v1::NoticeCapabilities::new())
                .compaction(v1::CompactionCapabilities::new()),
        );
        caps.elicitation = req
            .capabilities
            .elicitation
            .as_ref()
            .and_then(|e| reread(e, "elicitation").ok());
        if let Ok(mut client) = self.client.lock() {
            *client = Some(caps);
        }
        self.wire.chosen.store(true, Ordering::Release);
        // v2's transports take JSON-RPC batches; v1 defines none.
        self.conn.allow_batches();
        tracing::info!(client = %req.info.name, asked = %req.protocol_version, "initialized (ACP v2)");
        to_value(&initialize_response())
    }
}

/// What MAIA serves on v2: the baseline session methods (`{}`), images and
/// embedded context in prompts, stdio and HTTP MCP servers, extra folders,
/// `session/delete`; the `agent` login (`auth/login` re-reads the settings
/// and asks the proxy, `auth/logout` forgets the saved key, as v1's
/// `authenticate` and `logout`); MAIA's extensions in `_meta` as on v1.
fn initialize_response() -> InitializeResponse {
    let mcp = McpCapabilities::new()
        .stdio(McpStdioCapabilities::new())
        .http(McpHttpCapabilities::new());
    let session = SessionCapabilities::new()
        .mcp(mcp)
        .prompt(
            PromptCapabilities::new()
                .image(PromptImageCapabilities::new())
                .embedded_context(PromptEmbeddedContextCapabilities::new()),
        )
        .additional_directories(SessionAdditionalDirectoriesCapabilities::new())
        .delete(SessionDeleteCapabilities::new());
    InitializeResponse::new(
        ProtocolVersion::V2,
        Implementation::new("maia", env!("CARGO_PKG_VERSION")).title("MAIA"),
    )
    .capabilities(AgentCapabilities::new().session(session))
    .auth_methods(auth_methods())
    .meta(meta())
}

/// MAIA's `_meta` on v2: v1's, and the unstable session methods served.
fn meta() -> serde_json::Map<String, Value> {
    let mut meta = super::meta();
    meta.insert(
        "unstableSessionMethods".into(),
        serde_json::json!({ "version": 1, "methods": UNSTABLE_AS_V1 }),
    );
    meta
}

/// v1's methods for a client without terminals, in v2's shape: the
/// `agent` check.
fn auth_methods() -> Vec<v2::AuthMethod> {
    super::auth::methods(&v1::ClientCapabilities::default())
        .into_iter()
        .filter_map(|method| match method {
            v1::AuthMethod::Agent(m) => Some(v2::AuthMethod::Agent(
                v2::AuthMethodAgent::new(m.id.0.to_string(), m.name).description(m.description),
            )),
            _ => None,
        })
        .collect()
}

/// v2's `session/resume`: with `replayFrom: {type: start}` it replays the
/// history as v1's `session/load` does; without, v1's resume.
fn resume_as_v1(req: &v2::ResumeSessionRequest) -> Result<v1::ClientRequest, RpcError> {
    let mut params = open_params(req)?;
    let replay = params
        .as_object_mut()
        .and_then(|p| p.remove("replayFrom"))
        .filter(|r| !r.is_null());
    match replay {
        None => reread(&params, "this session/resume").map(v1::ClientRequest::ResumeSessionRequest),
        Some(from) if from["type"] == "start" => {
            reread(&params, "this session/resume").map(v1::ClientRequest::LoadSessionRequest)
        }
        Some(from) => Err(invalid_params(format!(
            "replayFrom {from} is not served: only {{\"type\": \"start\"}}"
        ))),
    }
}

/// An open's params as v1 reads them: v2 leaves out empty lists
/// (`mcpServers`, a server's `args`, `env`, `headers`; v1 requires them) and
/// tags a stdio server `type: "stdio"` (v1's has no tag); the rest is
/// spelled alike.
fn open_params(req: &impl serde::Serialize) -> Result<Value, RpcError> {
    let mut params = serde_json::to_value(req)
        .map_err(|e| RpcError::new(ErrorCode::InternalError, e.to_string()))?;
    if let Some(object) = params.as_object_mut() {
        let servers = object
            .entry("mcpServers")
            .or_insert_with(|| Value::Array(Vec::new()));
        for server in servers.as_array_mut().into_iter().flatten() {
            let stdio = server["type"] == "stdio";
            let Some(server) = server.as_object_mut() else {
                continue;
            };
            // v2 leaves out empty lists; v1 requires them.
            let lists: &[&str] = if stdio {
                &["args", "env"]
            } else {
                &["headers"]
            };
            for list in lists {
                server
                    .entry(*list)
                    .or_insert_with(|| Value::Array(Vec::new()));
            }
            if stdio {
                server.remove("type");
            }
        }
    }
    Ok(params)
}

/// The answer to an open in v2's shape: `session/new`'s (`sessionId`,
/// `configOptions`) or `session/resume`'s (`configOptions`); v1's modes
/// are the `mode` config option there.
pub(super) fn open_response(
    result: Result<Value, RpcError>,
    resumed: bool,
) -> Result<Value, RpcError> {
    let mut value = result?;
    update::config_options(&mut value["configOptions"]);
    if resumed {
        to_value(&reread::<v2::ResumeSessionResponse>(&value, "the answer")?)
    } else {
        to_value(&reread::<v2::NewSessionResponse>(&value, "the answer")?)
    }
}
