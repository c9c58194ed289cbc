//! One MCP server's connection: connecting it (a stdio child in its
//! confinement, a streamable HTTP endpoint, a legacy SSE endpoint) within
//! [`CONNECT_TIMEOUT`], watching it so a stop is seen before the next call,
//! the last lines of a stdio server's stderr for the reason it stopped,
//! and the slot state every change goes through.

use super::*;

pub(super) fn set_slot(inner: &Inner, server: &Server, slot: Slot) {
    if inner.closed.load(Ordering::Acquire) {
        return;
    }
    match &slot {
        Slot::Connected(c) => {
            tracing::info!(server = %server.config.name, tools = c.tools.len(), "MCP server connected")
        }
        Slot::Failed(reason) => {
            tracing::warn!(server = %server.config.name, %reason, "MCP server failed")
        }
        Slot::Starting => {}
    }
    let old = std::mem::replace(&mut *lock(&server.slot), slot);
    if let Slot::Connected(_) = old {
        // The old connection's child (if any) is gone or replaced.
        kill_group(server);
    }
    drop(old);
    inner.changed.send_modify(|n| *n += 1);
}

/// Records that `conn` (if still the current connection) has stopped.
pub(super) fn mark_stopped(inner: &Inner, server: &Server, conn: &Arc<Connection>, reason: &str) {
    let current = matches!(&*lock(&server.slot), Slot::Connected(c) if Arc::ptr_eq(c, conn));
    if current {
        set_slot(inner, server, Slot::Failed(reason.to_owned()));
    }
}

/// How often a connected server is checked for having stopped.
const MONITOR_EVERY: Duration = Duration::from_millis(500);

/// Reports a server that stops while idle (until the manager stops or
/// the connection is replaced).
fn monitor(inner: &Arc<Inner>, server: &Arc<Server>, conn: &Arc<Connection>) {
    let weak = Arc::downgrade(conn);
    let stopped = inner.stopped.clone();
    let inner = Arc::downgrade(inner);
    let server = server.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = stopped.cancelled() => break,
                () = tokio::time::sleep(MONITOR_EVERY) => {}
            }
            let (Some(conn), Some(inner)) = (weak.upgrade(), inner.upgrade()) else {
                break;
            };
            if conn.client.is_transport_closed() {
                mark_stopped(&inner, &server, &conn, &stopped_reason(&server));
                break;
            }
        }
    });
}

pub(super) fn stopped_reason(server: &Server) -> String {
    match &server.config.transport {
        McpTransport::Stdio { .. } => "the server process exited".to_owned(),
        McpTransport::Http { .. } | McpTransport::Sse { .. } => {
            "the connection was closed".to_owned()
        }
    }
}

fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("maia", env!("CARGO_PKG_VERSION")),
    )
}

/// Connects `server` and lists its tools; records the outcome.
pub(super) async fn connect(
    inner: &Arc<Inner>,
    server: &Arc<Server>,
) -> Result<Arc<Connection>, String> {
    let _guard = server.connecting.lock().await;
    if let Slot::Connected(conn) = &*lock(&server.slot)
        && !conn.client.is_transport_closed()
    {
        return Ok(conn.clone());
    }
    kill_group(server);
    let outcome = tokio::select! {
        () = inner.stopped.cancelled() => Err("stopped".to_owned()),
        outcome = tokio::time::timeout(CONNECT_TIMEOUT, open(server)) => match outcome {
            Ok(outcome) => outcome,
            Err(_) => Err(format!("no answer within {} s", CONNECT_TIMEOUT.as_secs())),
        },
    };
    match outcome {
        Ok(conn) => {
            let conn = Arc::new(conn);
            *lock(&server.known_tools) = conn.tools.clone();
            set_slot(inner, server, Slot::Connected(conn.clone()));
            monitor(inner, server, &conn);
            Ok(conn)
        }
        Err(reason) => {
            kill_group(server);
            let reason = match &server.confinement {
                Confinement::Sandboxed {
                    note: Some(note), ..
                } => {
                    format!("{reason} ({note})")
                }
                _ => reason,
            };
            set_slot(inner, server, Slot::Failed(reason.clone()));
            Err(reason)
        }
    }
}

async fn open(server: &Server) -> Result<Connection, String> {
    let client = match &server.config.transport {
        McpTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            // Its own process group under MAIA's guard, so that stopping it
            // also stops what it started (`npx` → node), and so that it
            // dies with MAIA.
            maia_tools::process::ensure_runnable(command.as_ref(), cwd.as_deref())
                .map_err(|e| format!("cannot start `{command}`: {e}"))?;
            let mut cmd = maia_tools::process::command(command);
            cmd.args(args);
            confine::before_env(&mut cmd, &server.confinement);
            cmd.envs(env.iter().map(|(k, v)| (k, v)));
            if let Some(cwd) = cwd {
                cmd.current_dir(cwd);
            }
            confine::attach(&mut cmd, &server.confinement, server.sandbox.as_deref())
                .map_err(|e| format!("cannot start `{command}`{e}"))?;
            let (transport, stderr) = TokioChildProcess::builder(cmd)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start `{command}`: {e}"))?;
            if let Some(pid) = transport.id() {
                *lock(&server.pgid) = i32::try_from(pid).ok();
            }
            let tail = Arc::new(Mutex::new(Vec::<String>::new()));
            if let Some(stderr) = stderr {
                tokio::spawn(log_stderr(server.config.name.clone(), stderr, tail.clone()));
            }
            match client_config().serve(transport).await {
                Ok(client) => client,
                Err(e) => {
                    // Let the stderr reader catch the last words.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    let last: Vec<String> = lock(&tail).clone();
                    if last.is_empty() {
                        return Err(format!("{e}"));
                    }
                    tracing::debug!(server = %server.config.name, "MCP start-up failed: {e}");
                    return Err(format!("it stopped while starting: {}", last.join(" | ")));
                }
            }
        }
        McpTransport::Http { url, headers } => {
            let mut custom = HashMap::new();
            let mut auth = None;
            for (name, value) in headers {
                if name.eq_ignore_ascii_case("authorization") {
                    // rmcp adds `Bearer ` itself.
                    auth = Some(value.strip_prefix("Bearer ").unwrap_or(value).to_owned());
                    continue;
                }
                let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|e| format!("invalid header name `{name}`: {e}"))?;
                let value = reqwest::header::HeaderValue::from_str(value)
                    .map_err(|e| format!("invalid value for header `{name}`: {e}"))?;
                custom.insert(name, value);
            }
            let mut config =
                StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(custom);
            if let Some(auth) = auth {
                config = config.auth_header(auth);
            }
            let transport = StreamableHttpClientTransport::with_client(http_client(url)?, config);
            client_config()
                .serve(transport)
                .await
                .map_err(|e| format!("cannot connect to {url}: {e}"))?
        }
        McpTransport::Sse { url, headers } => {
            let stream = sse::connect(http_client(url)?, url, headers).await?;
            client_config()
                .serve(stream)
                .await
                .map_err(|e| format!("cannot connect to {url}: {e}"))?
        }
    };
    let listed = client
        .list_all_tools()
        .await
        .map_err(|e| format!("cannot list the tools: {e}"))?;
    let name = &server.config.name;
    let tools = listed
        .into_iter()
        .filter(|t| !server.config.disabled_tools.iter().any(|d| d == &*t.name))
        .map(|t| {
            let annotations = t.annotations.as_ref();
            McpTool {
                server: name.clone(),
                full_name: full_name(name, &t.name),
                name: t.name.to_string(),
                description: t.description.as_deref().unwrap_or_default().to_owned(),
                input_schema: Value::Object((*t.input_schema).clone()),
                title: t
                    .title
                    .clone()
                    .or_else(|| annotations.and_then(|a| a.title.clone()))
                    .unwrap_or_else(|| t.name.to_string()),
                read_only: annotations.and_then(|a| a.read_only_hint) == Some(true),
                open_world: annotations.and_then(|a| a.open_world_hint) == Some(true),
            }
        })
        .collect();
    let instructions = client
        .peer_info()
        .and_then(|info| info.instructions.clone());
    Ok(Connection {
        client,
        tools,
        instructions,
    })
}

/// The HTTP client for a streamable HTTP server. Without a process-wide
/// TLS provider (the `maia` binary installs one) a private one lets plain
/// http work.
fn http_client(url: &str) -> Result<reqwest::Client, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("invalid URL `{url}`: {e}"))?;
    let builder = maia_http::builder(parsed.host_str(), None)
        .map_err(|e| e.to_string())?
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0);
    builder
        .build()
        .map_err(|e| format!("cannot set up the HTTP client: {e}"))
}

/// Lines of a server's stderr kept for a failure message.
const STDERR_TAIL: usize = 5;

async fn log_stderr(
    server: String,
    stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<Vec<String>>>,
) {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(server = %server, "mcp stderr: {line}");
        let mut tail = lock(&tail);
        tail.push(line.chars().take(300).collect());
        if tail.len() > STDERR_TAIL {
            tail.remove(0);
        }
    }
}
