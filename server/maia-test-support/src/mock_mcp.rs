//! A small MCP server for tests, built with `rmcp`: tools `echo` (returns
//! its input as text), `picture` (returns its input, base64, as a PNG image
//! after a caption), `fail` (returns an error result) and `slow` (sleeps
//! 30 s, or until the call is cancelled). Run by the `maia-mock-mcp` binary
//! on stdio, or over streamable HTTP with `--http PORT` (0 picks a port,
//! printed on stdout as `listening on http://127.0.0.1:PORT/mcp`).
//!
//! Environment: `MOCK_MCP_PID_FILE` — the process writes its pid there;
//! `MOCK_MCP_LOG` — each call is appended there as one JSON line
//! (`{"tool":..,"arguments":..,"event":"start"|"end"|"cancelled"}`);
//! `MOCK_MCP_FAIL_START` — the process exits at once with this message on
//! stderr (a server that cannot start); `MOCK_MCP_INSTRUCTIONS` — the
//! `instructions` of its `initialize` result; `MOCK_MCP_EXTRA_TOOLS` — N
//! more tools, `extra_1` … `extra_N`, each with a large schema (a server
//! whose tool definitions weigh several kilobytes; they echo like `echo`).

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

/// The mock server's handler.
#[derive(Debug, Clone, Default)]
pub struct MockMcp;

fn schema(value: Value) -> Arc<serde_json::Map<String, Value>> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(serde_json::Map::new()),
    }
}

fn log(tool: &str, arguments: &Value, event: &str) {
    if let Ok(path) = std::env::var("MOCK_MCP_LOG") {
        use std::io::Write;
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let line = json!({"tool": tool, "arguments": arguments, "event": event});
            let _ = writeln!(file, "{line}");
        }
    }
}

/// The tools the mock offers.
pub fn tools() -> Vec<Tool> {
    let text_schema = || {
        schema(json!({
            "type": "object",
            "properties": {"text": {"type": "string", "description": "Text to echo"}},
            "required": ["text"]
        }))
    };
    let mut echo = Tool::new("echo", "Returns its input", text_schema());
    echo.title = Some("Echo text".to_owned());
    let mut tools = vec![
        echo,
        Tool::new(
            "picture",
            "Returns its input (base64) as a PNG image",
            text_schema(),
        ),
        Tool::new("fail", "Always fails", text_schema()),
        Tool::new(
            "slow",
            "Sleeps 30 seconds",
            schema(json!({"type": "object", "properties": {}})),
        ),
    ];
    tools.extend((1..=extra_tools()).map(extra_tool));
    tools
}

/// How many extra tools `MOCK_MCP_EXTRA_TOOLS` asks for.
fn extra_tools() -> usize {
    std::env::var("MOCK_MCP_EXTRA_TOOLS")
        .ok()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Extra tool `n`: a long description and a schema of several documented
/// fields, as real servers' tools have.
fn extra_tool(n: usize) -> Tool {
    let mut properties = serde_json::Map::new();
    properties.insert(
        "text".to_owned(),
        json!({"type": "string", "description": "Text to echo"}),
    );
    for field in ["owner", "repository", "branch", "path", "query", "limit"] {
        properties.insert(
            field.to_owned(),
            json!({
                "type": "string",
                "description": format!("The {field} this operation works on; see the server's documentation for the accepted forms and limits.")
            }),
        );
    }
    Tool::new(
        format!("extra_{n}"),
        format!(
            "Extra operation number {n}: returns its input.\nIt exists so that the server's tool definitions weigh what a real server's do; every field is optional except `text`."
        ),
        schema(json!({"type": "object", "properties": properties, "required": ["text"]})),
    )
}

impl ServerHandler for MockMcp {
    fn get_info(&self) -> ServerConfig {
        let info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("maia-mock-mcp", "0.1.0"));
        match std::env::var("MOCK_MCP_INSTRUCTIONS") {
            Ok(text) => info.with_instructions(text),
            Err(_) => info,
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        let text = arguments
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        log(&request.name, &arguments, "start");
        let result = match &*request.name {
            "echo" => CallToolResult::success(vec![ContentBlock::text(format!("echo: {text}"))]),
            extra if extra.starts_with("extra_") => {
                CallToolResult::success(vec![ContentBlock::text(format!("echo: {text}"))])
            }
            "picture" => CallToolResult::success(vec![
                ContentBlock::text("a picture"),
                ContentBlock::image(text, "image/png"),
            ]),
            "fail" => CallToolResult::error(vec![ContentBlock::text(format!("failed: {text}"))]),
            "slow" => {
                tokio::select! {
                    () = context.ct.cancelled() => {
                        log(&request.name, &arguments, "cancelled");
                        return Err(ErrorData::internal_error("cancelled", None));
                    }
                    () = tokio::time::sleep(Duration::from_secs(30)) => {}
                }
                CallToolResult::success(vec![ContentBlock::text("slept")])
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool `{other}`"),
                    None,
                ));
            }
        };
        log(&request.name, &arguments, "end");
        Ok(result.into())
    }
}

/// Serves the mock over streamable HTTP at `http://127.0.0.1:PORT/mcp`
/// until the process ends; prints the address on stdout first.
pub async fn serve_http(port: u16) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    let url = format!("http://{addr}/mcp");
    let router = router();
    {
        use std::io::Write;
        let mut out = std::io::stdout();
        writeln!(out, "listening on {url}")?;
        out.flush()?;
    }
    axum::serve(listener, router).await
}

/// The mock as an axum router serving `/mcp`.
pub fn router() -> axum::Router {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    let service = StreamableHttpService::new(
        || Ok(MockMcp),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    axum::Router::new().nest_service("/mcp", service)
}

/// Serves the mock over streamable HTTP on a free local port in this
/// process; returns its URL.
pub async fn spawn_http() -> std::io::Result<String> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    tokio::spawn(async move {
        let _ = axum::serve(listener, router()).await;
    });
    Ok(url)
}

/// Serves the mock over the legacy HTTP+SSE transport (MCP 2024-11-05) on
/// a free local port in this process: `GET /sse` opens a stream whose first
/// event (`endpoint`) names `/message?sessionId=N`, where the client posts
/// its messages; the answers come back as `message` events. Returns the
/// stream's URL.
pub async fn spawn_sse() -> std::io::Result<String> {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use axum::body::{Body, Bytes};
    use axum::extract::State;
    use axum::http::{StatusCode, header};
    use axum::response::Response;
    use rmcp::ServiceExt;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    type Writer = Arc<tokio::sync::Mutex<tokio::io::WriteHalf<tokio::io::DuplexStream>>>;
    type Writers = Arc<Mutex<HashMap<String, Writer>>>;
    let writers: Writers = Arc::default();
    let next = Arc::new(std::sync::atomic::AtomicU64::new(1));

    let open = move |State(writers): State<Writers>| {
        let next = next.clone();
        async move {
            let id = next
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                .to_string();
            let (client_side, server_side) = tokio::io::duplex(1 << 20);
            tokio::spawn(async move {
                if let Ok(running) = MockMcp.serve(server_side).await {
                    let _ = running.waiting().await;
                }
            });
            let (read, write) = tokio::io::split(client_side);
            if let Ok(mut writers) = writers.lock() {
                writers.insert(id.clone(), Arc::new(tokio::sync::Mutex::new(write)));
            }
            let first = format!("event: endpoint\ndata: /message?sessionId={id}\n\n");
            let lines = tokio::io::BufReader::new(read).lines();
            let stream = futures_util::stream::unfold(
                (Some(first), lines),
                |(first, mut lines)| async move {
                    if let Some(first) = first {
                        return Some((
                            Ok::<_, std::convert::Infallible>(Bytes::from(first)),
                            (None, lines),
                        ));
                    }
                    let line = lines.next_line().await.ok()??;
                    let event = format!("event: message\ndata: {line}\n\n");
                    Some((Ok(Bytes::from(event)), (None, lines)))
                },
            );
            let mut response = Response::new(Body::from_stream(stream));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/event-stream"),
            );
            response
        }
    };
    let post = |State(writers): State<Writers>, uri: axum::http::Uri, body: Bytes| async move {
        let id = uri
            .query()
            .unwrap_or_default()
            .split('&')
            .find_map(|pair| pair.strip_prefix("sessionId="))
            .unwrap_or_default()
            .to_owned();
        let writer = writers.lock().ok().and_then(|w| w.get(&id).cloned());
        let Some(writer) = writer else {
            return StatusCode::NOT_FOUND;
        };
        let mut line = body.to_vec();
        line.push(b'\n');
        let ok = writer.lock().await.write_all(&line).await.is_ok();
        if ok {
            StatusCode::ACCEPTED
        } else {
            StatusCode::GONE
        }
    };
    let app = axum::Router::new()
        .route("/sse", axum::routing::get(open))
        .route("/message", axum::routing::post(post))
        .with_state(writers);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let url = format!("http://{}/sse", listener.local_addr()?);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(url)
}
