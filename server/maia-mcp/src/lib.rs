//! MCP client manager: connects the MCP servers of a session (stdio child
//! processes, streamable HTTP endpoints, legacy SSE endpoints) with the official Rust SDK
//! (`rmcp`), lists their tools and calls them; keeps each server's
//! `instructions` (its `initialize` result).
//!
//! The engine knows only this crate's types: [`McpServerConfig`] in,
//! [`McpTool`] / [`ServerStatus`] / `maia_tools::ToolOutput` out.
//!
//! - Servers connect in the background; [`McpManager::start`] never waits.
//! - A server that stopped is reported and restarted once, on its next use.
//! - [`McpManager::shutdown`] (also run on drop) stops every server and kills
//!   the process group of every stdio server, so no server outlives its
//!   session.

mod confine;
mod connection;
mod content;
mod sse;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use maia_tools::ToolOutput;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ServiceError, ServiceExt};
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use confine::{Confinement, McpSandbox};
use connection::{connect, mark_stopped, set_slot, stopped_reason};
pub use content::{MAX_OUTPUT_CHARS, render_result};

/// How long one server may take to start and list its tools.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How one server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// A child process speaking MCP on its stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        /// The folder the process starts in.
        cwd: Option<PathBuf>,
    },
    /// A streamable HTTP endpoint.
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
    /// A legacy HTTP+SSE endpoint (MCP 2024-11-05; [`sse`]).
    Sse {
        url: String,
        headers: Vec<(String, String)>,
    },
}

/// One MCP server to connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    pub name: String,
    pub transport: McpTransport,
    /// Tool names (as the server names them) not offered to the model.
    pub disabled_tools: Vec<String>,
}

/// Where a server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    Starting,
    /// Connected; the names of the tools it offers (disabled ones left out).
    Connected {
        tools: Vec<String>,
    },
    Failed(String),
}

/// One server's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    pub name: String,
    pub state: ServerState,
    /// Tools turned off by `disabledTools`.
    pub disabled: Vec<String>,
}

/// A tool offered by a connected server.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    pub server: String,
    /// The server's own name for the tool.
    pub name: String,
    /// `mcp__<server>__<tool>`.
    pub full_name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub input_schema: Value,
    /// A human title (the tool's title, else its annotation title, else its name).
    pub title: String,
    /// The server says the tool only reads.
    pub read_only: bool,
    /// The server says the tool reaches the outside world.
    pub open_world: bool,
}

/// The model-facing name of a server's tool: `mcp__<server>__<tool>`, with
/// characters model APIs refuse in tool names replaced by `_`.
pub fn full_name(server: &str, tool: &str) -> String {
    format!("mcp__{}__{}", sanitize(server), sanitize(tool))
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

type Client = RunningService<RoleClient, ClientConfig>;

struct Connection {
    client: Client,
    tools: Vec<McpTool>,
    /// What the server's `initialize` result says about using it.
    instructions: Option<String>,
}

enum Slot {
    Starting,
    Connected(Arc<Connection>),
    Failed(String),
}

struct Server {
    config: McpServerConfig,
    slot: Mutex<Slot>,
    /// The process group of the running stdio child, if any.
    pgid: Mutex<Option<i32>>,
    /// Restarted once already.
    restarted: AtomicBool,
    /// The tools of the last connection (offered again after a crash, so
    /// that the next call restarts the server).
    known_tools: Mutex<Vec<McpTool>>,
    /// Serialises (re)connections.
    connecting: tokio::sync::Mutex<()>,
    /// How a stdio server runs, and the sandbox it runs in if it must.
    confinement: Confinement,
    sandbox: Option<Arc<maia_tools::sandbox::Sandbox>>,
}

struct Inner {
    servers: Vec<Arc<Server>>,
    changed: watch::Sender<u64>,
    stopped: CancellationToken,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    closed: AtomicBool,
}

/// The MCP servers of one session. Dropping it stops them.
pub struct McpManager {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for McpManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpManager")
            .field("servers", &self.status())
            .finish()
    }
}

impl Default for McpManager {
    fn default() -> Self {
        McpManager::start(Vec::new())
    }
}

impl McpManager {
    /// Starts connecting every server in the background (from within a
    /// Tokio runtime) and returns at once. Servers with the same name: the
    /// first one wins.
    pub fn start(configs: Vec<McpServerConfig>) -> McpManager {
        Self::start_sandboxed(configs, None)
    }

    /// [`McpManager::start`] with stdio servers inside `sandbox`'s
    /// file-system sandbox (they write only where a command may and cannot
    /// read the secrets), each as [`McpSandbox::servers`] says.
    pub fn start_sandboxed(
        configs: Vec<McpServerConfig>,
        sandbox: Option<McpSandbox>,
    ) -> McpManager {
        let mut servers: Vec<Arc<Server>> = Vec::new();
        for config in configs {
            if servers.iter().any(|s| s.config.name == config.name) {
                tracing::warn!(server = %config.name, "duplicate MCP server name; ignored");
                continue;
            }
            let (confinement, sandbox) = match &sandbox {
                Some(s) => (
                    s.servers.get(&config.name).cloned().unwrap_or_default(),
                    s.sandbox.clone(),
                ),
                None => (Confinement::AsConfigured, None),
            };
            servers.push(Arc::new(Server {
                confinement,
                sandbox,
                config,
                slot: Mutex::new(Slot::Starting),
                pgid: Mutex::new(None),
                restarted: AtomicBool::new(false),
                known_tools: Mutex::new(Vec::new()),
                connecting: tokio::sync::Mutex::new(()),
            }));
        }
        let (changed, _) = watch::channel(0u64);
        let inner = Arc::new(Inner {
            servers,
            changed,
            stopped: CancellationToken::new(),
            tasks: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
        });
        let mut tasks = Vec::new();
        if tokio::runtime::Handle::try_current().is_ok() {
            for server in &inner.servers {
                let server = server.clone();
                let inner2 = inner.clone();
                tasks.push(tokio::spawn(async move {
                    let _ = connect(&inner2, &server).await;
                }));
            }
        } else {
            for server in &inner.servers {
                set_slot(&inner, server, Slot::Failed("no async runtime".into()));
            }
        }
        if let Ok(mut t) = inner.tasks.lock() {
            *t = tasks;
        }
        McpManager { inner }
    }

    /// The configuration of server `name`, and whether it runs in the
    /// sandbox.
    pub fn config(&self, name: &str) -> Option<(McpServerConfig, bool)> {
        self.inner
            .servers
            .iter()
            .find(|s| s.config.name == name)
            .map(|s| {
                let confined = matches!(s.confinement, Confinement::Sandboxed { .. });
                (s.config.clone(), confined)
            })
    }

    /// Whether there are no servers.
    pub fn is_empty(&self) -> bool {
        self.inner.servers.is_empty()
    }

    /// Waits until no server is starting any more, or `timeout`.
    pub async fn wait_ready(&self, timeout: Duration) {
        let mut rx = self.inner.changed.subscribe();
        let all_settled = || {
            self.inner
                .servers
                .iter()
                .all(|s| !matches!(*lock(&s.slot), Slot::Starting))
        };
        let wait = async {
            while !all_settled() {
                if rx.changed().await.is_err() {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(timeout, wait).await;
    }

    /// A receiver that sees a change each time a server's state changes.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.inner.changed.subscribe()
    }

    /// Cancelled once the manager is shut down.
    pub fn stopped(&self) -> CancellationToken {
        self.inner.stopped.clone()
    }

    /// Every server's state, in configuration order.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.inner
            .servers
            .iter()
            .map(|s| ServerStatus {
                name: s.config.name.clone(),
                state: match &*lock(&s.slot) {
                    Slot::Starting => ServerState::Starting,
                    Slot::Connected(conn) => ServerState::Connected {
                        tools: conn.tools.iter().map(|t| t.name.clone()).collect(),
                    },
                    Slot::Failed(reason) => ServerState::Failed(reason.clone()),
                },
                disabled: s.config.disabled_tools.clone(),
            })
            .collect()
    }

    /// The tools of the connected servers (disabled ones left out), and
    /// those of a server that stopped and may still be restarted.
    pub fn tools(&self) -> Vec<McpTool> {
        let mut out = Vec::new();
        for server in &self.inner.servers {
            match &*lock(&server.slot) {
                Slot::Connected(conn) => out.extend(conn.tools.iter().cloned()),
                Slot::Failed(_) if !server.restarted.load(Ordering::Acquire) => {
                    out.extend(lock(&server.known_tools).iter().cloned());
                }
                _ => {}
            }
        }
        out
    }

    /// The `instructions` of each connected server that gave some (from
    /// its `initialize` result), in configuration order: `(server, text)`.
    pub fn instructions(&self) -> Vec<(String, String)> {
        self.inner
            .servers
            .iter()
            .filter_map(|server| match &*lock(&server.slot) {
                Slot::Connected(conn) => conn
                    .instructions
                    .as_ref()
                    .filter(|text| !text.trim().is_empty())
                    .map(|text| (server.config.name.clone(), text.clone())),
                _ => None,
            })
            .collect()
    }

    /// Looks a tool up by its full name.
    pub fn tool(&self, full_name: &str) -> Option<McpTool> {
        self.tools().into_iter().find(|t| t.full_name == full_name)
    }

    /// Whether `name` looks like a tool of one of this manager's servers,
    /// connected or not.
    pub fn owns(&self, name: &str) -> bool {
        self.server_of(name).is_some()
    }

    /// The server of a full tool name, and the tool's own name.
    fn server_of(&self, full: &str) -> Option<(Arc<Server>, String)> {
        let rest = full.strip_prefix("mcp__")?;
        let (server, tool) = self
            .inner
            .servers
            .iter()
            .filter_map(|s| {
                let tool = rest
                    .strip_prefix(&sanitize(&s.config.name))?
                    .strip_prefix("__")?;
                Some((s.clone(), tool.to_owned()))
            })
            // The longest server name wins (`a` vs `a__b`).
            .max_by_key(|(s, _)| s.config.name.len())?;
        let known = lock(&server.known_tools)
            .iter()
            .find(|t| t.full_name == full)
            .map(|t| t.name.clone());
        Some((server, known.unwrap_or(tool)))
    }

    /// Calls a tool by its full name. Cancelling `cancel` abandons the
    /// request (the server is told) and returns a cancelled output.
    pub async fn call(&self, full: &str, args: Value, cancel: &CancellationToken) -> ToolOutput {
        let Some((server, tool)) = self.server_of(full) else {
            return ToolOutput::error(format!("no MCP server offers `{full}`"));
        };
        if server.config.disabled_tools.iter().any(|d| d == &tool) {
            return ToolOutput::error(format!(
                "the tool `{tool}` of MCP server `{}` is disabled in the settings",
                server.config.name
            ));
        }
        let arguments = match args {
            Value::Object(map) => Some(map),
            Value::Null => None,
            other => {
                return ToolOutput::error(format!(
                    "the arguments must be a JSON object, got {other}"
                ));
            }
        };
        // A request that could not even be sent (the server had died
        // unnoticed) is sent again once after a restart.
        let mut retried = false;
        loop {
            let conn = tokio::select! {
                () = cancel.cancelled() => return ToolOutput::cancelled(),
                conn = self.connection(&server) => conn,
            };
            let conn = match conn {
                Ok(conn) => conn,
                Err(reason) => {
                    return ToolOutput::error(format!(
                        "MCP server `{}` is not available: {reason}",
                        server.config.name
                    ));
                }
            };
            let mut params = CallToolRequestParams::new(tool.clone());
            params.arguments = arguments.clone();
            // Dropping the call's future sends `notifications/cancelled`.
            let result = tokio::select! {
                () = cancel.cancelled() => return ToolOutput::cancelled(),
                () = self.inner.stopped.cancelled() => return ToolOutput::error("the session ended"),
                result = conn.client.call_tool(params) => result,
            };
            let e = match result {
                Ok(result) => return render_result(&result),
                Err(e) => e,
            };
            let unsent = matches!(e, ServiceError::TransportSend(_));
            if !unsent
                && !conn.client.is_transport_closed()
                && !matches!(e, ServiceError::TransportClosed)
            {
                return ToolOutput::error(format!("MCP error: {e}"));
            }
            let reason = stopped_reason(&server);
            mark_stopped(&self.inner, &server, &conn, &reason);
            if unsent && !retried {
                retried = true;
                continue;
            }
            return ToolOutput::error(format!(
                "MCP server `{}` stopped during the call ({reason}); it will be restarted on its next use",
                server.config.name
            ));
        }
    }

    /// The live connection of `server`, restarting it once if it stopped.
    async fn connection(&self, server: &Arc<Server>) -> Result<Arc<Connection>, String> {
        loop {
            let current = match &*lock(&server.slot) {
                Slot::Connected(conn) => Some(Ok(conn.clone())),
                Slot::Failed(reason) => Some(Err(reason.clone())),
                Slot::Starting => None,
            };
            match current {
                Some(Ok(conn)) if !conn.client.is_transport_closed() => return Ok(conn),
                Some(Ok(conn)) => mark_stopped(&self.inner, server, &conn, &stopped_reason(server)),
                Some(Err(reason)) => {
                    if server.restarted.swap(true, Ordering::AcqRel) {
                        return Err(reason);
                    }
                    tracing::info!(server = %server.config.name, "restarting the MCP server");
                    set_slot(&self.inner, server, Slot::Starting);
                    return connect(&self.inner, server).await;
                }
                None => {
                    // Another task is connecting: wait for it.
                    let guard = server.connecting.lock().await;
                    if matches!(*lock(&server.slot), Slot::Starting) {
                        // Nobody is connecting (the first attempt was aborted).
                        drop(guard);
                        return connect(&self.inner, server).await;
                    }
                }
            }
        }
    }

    /// Stops every server: closes the connections and kills the process
    /// group of every stdio server. Idempotent.
    pub fn shutdown(&self) {
        shutdown(&self.inner);
    }
}

impl Drop for McpManager {
    fn drop(&mut self) {
        shutdown(&self.inner);
    }
}

fn shutdown(inner: &Inner) {
    if inner.closed.swap(true, Ordering::AcqRel) {
        return;
    }
    inner.stopped.cancel();
    if let Ok(mut tasks) = inner.tasks.lock() {
        for task in tasks.drain(..) {
            task.abort();
        }
    }
    for server in &inner.servers {
        kill_group(server);
        let old = std::mem::replace(&mut *lock(&server.slot), Slot::Failed("stopped".to_owned()));
        drop(old);
    }
    inner.changed.send_modify(|n| *n += 1);
}

fn kill_group(server: &Server) {
    if let Some(pgid) = lock(&server.pgid).take() {
        use nix::sys::signal::{Signal, killpg};
        use nix::unistd::Pid;
        // The group leader is not reaped before its transport is dropped,
        // so the group id cannot have been reused. A guard (the leader)
        // kills every descendant on SIGTERM; a bare server group is killed.
        let signal = if maia_tools::process::guarded() {
            Signal::SIGTERM
        } else {
            Signal::SIGKILL
        };
        let _ = killpg(Pid::from_raw(pgid), signal);
        tracing::debug!(server = %server.config.name, pgid, "MCP server stopped");
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
