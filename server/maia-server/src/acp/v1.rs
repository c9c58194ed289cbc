//! ACP v1 on a connection: its requests, decoded with the schema crate's
//! v1 types (MAIA's `_session/*` extensions first), routed to their
//! handlers, and `initialize`'s v1 answer (what MAIA advertises).

use std::sync::Arc;

use agent_client_protocol_schema::v1::{
    AgentAuthCapabilities, AgentCapabilities, ClientRequest, Implementation, InitializeResponse,
    LogoutCapabilities, McpCapabilities, PromptCapabilities,
    SessionAdditionalDirectoriesCapabilities, SessionArchiveCapabilities, SessionCapabilities,
    SessionCloseCapabilities, SessionDeleteCapabilities, SessionListCapabilities,
    SessionResumeCapabilities, SessionTitleCapabilities,
};
use agent_client_protocol_schema::{MethodDispatchError, ProtocolVersion};
use maia_rpc::{ErrorCode, Id, RpcError};
use serde_json::Value;

#[cfg(feature = "llm-providers")]
use super::providers;
use super::{
    Agent, auth, invalid_params, meta, open, queue, revert, rewind, steer, tasks, to_value,
};

impl Agent {
    pub(super) fn handle_v1(self: &Arc<Self>, id: Id, method: &str, params: Value) {
        if method == steer::METHOD {
            return self.steer(id, params);
        }
        if method == queue::METHOD {
            return self.queue(id, params);
        }
        if method == revert::METHOD {
            return self.revert_files(id, params);
        }
        if method == rewind::METHOD {
            return self.rewind(id, params);
        }
        if method == tasks::METHOD {
            return self.conn.respond(id, self.stop_task(params));
        }
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
            request @ (ClientRequest::NewSessionRequest(_)
            | ClientRequest::LoadSessionRequest(_)
            | ClientRequest::ResumeSessionRequest(_)) => {
                if let Some(open) = open::OpenRequest::from_request(request) {
                    self.spawn_open(id, open);
                }
                return;
            }
            ClientRequest::ForkSessionRequest(req) => return self.fork(id, req),
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
                // `$/cancel_request` answers at once; the walk stops at its
                // next folder.
                let cancel = self.conn.cancellation(&id);
                tokio::spawn(async move {
                    let work = agent.clone();
                    let walk =
                        tokio::task::spawn_blocking(move || work.list_sessions(&req, &cancel));
                    let result = async {
                        walk.await.unwrap_or_else(|e| {
                            Err(RpcError::new(ErrorCode::InternalError, e.to_string()))
                        })
                    };
                    agent.conn.respond_cancellable(id, result).await;
                });
                return;
            }
            ClientRequest::SetSessionConfigOptionRequest(req) => self.set_config_option(&req),
            ClientRequest::SetSessionTitleRequest(req) => return self.set_title(id, req),
            // Folders are searched off the runtime.
            ClientRequest::ArchiveSessionRequest(r) => {
                let sid = r.session_id.0.to_string();
                return self.respond_off_runtime(id, move |a| a.archive_session(&sid, true));
            }
            ClientRequest::UnarchiveSessionRequest(r) => {
                let sid = r.session_id.0.to_string();
                return self.respond_off_runtime(id, move |a| a.archive_session(&sid, false));
            }
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
            ClientRequest::LogoutRequest(_) => {
                return self.respond_off_runtime(id, |a| auth::logout(&a.engine));
            }
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
                        // The probe is dropped on `$/cancel_request`.
                        let probe = agent.authenticate();
                        agent.conn.respond_cancellable(id, probe).await;
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
}

fn initialize_response() -> InitializeResponse {
    let capabilities = AgentCapabilities::new();
    #[cfg(feature = "llm-providers")]
    let capabilities =
        capabilities.providers(agent_client_protocol_schema::v1::ProvidersCapabilities::new());
    InitializeResponse::new(ProtocolVersion::V1)
        .agent_capabilities(
            capabilities
                .auth(AgentAuthCapabilities::new().logout(LogoutCapabilities::new()))
                .load_session(true)
                .mcp_capabilities(McpCapabilities::new().http(true).sse(true))
                .prompt_capabilities(PromptCapabilities::new().embedded_context(true).image(true))
                .session_capabilities(
                    SessionCapabilities::new()
                        .list(SessionListCapabilities::new())
                        .resume(SessionResumeCapabilities::new())
                        .additional_directories(SessionAdditionalDirectoriesCapabilities::new())
                        .close(SessionCloseCapabilities::new())
                        .delete(SessionDeleteCapabilities::new())
                        .archive(SessionArchiveCapabilities::new())
                        .fork(agent_client_protocol_schema::v1::SessionForkCapabilities::new())
                        .title(SessionTitleCapabilities::new()),
                ),
        )
        .agent_info(Implementation::new("maia", env!("CARGO_PKG_VERSION")).title("MAIA"))
        .meta(meta())
}
