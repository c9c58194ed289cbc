//! The session's MCP servers: their state as notices, the short wait
//! before a turn, the tool definitions and `/mcp`.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use maia_mcp::{McpManager, ServerState, ServerStatus};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::event::{Event, NoticeLevel};

/// How long a turn waits for servers still starting before its first
/// model request.
pub const TURN_WAIT: Duration = Duration::from_secs(5);

/// Longest tool name the model APIs accept.
const MAX_TOOL_NAME: usize = 64;

/// A notice for a server's new state, if it is one worth telling.
fn state_notice(status: &ServerStatus) -> Option<(NoticeLevel, String)> {
    match &status.state {
        ServerState::Starting => None,
        ServerState::Connected { tools } => Some((
            NoticeLevel::Info,
            format!(
                "MCP server `{}` connected ({} tool{}{})",
                status.name,
                tools.len(),
                if tools.len() == 1 { "" } else { "s" },
                if tools.is_empty() {
                    String::new()
                } else {
                    format!(": {}", tools.join(", "))
                }
            ),
        )),
        ServerState::Failed(reason) => Some((
            NoticeLevel::Warning,
            format!("MCP server `{}` failed: {reason}", status.name),
        )),
    }
}

/// Reports each server's state changes as notices until the manager stops.
pub(crate) fn watch(manager: &Arc<McpManager>, events: mpsc::UnboundedSender<Event>) {
    if manager.is_empty() {
        return;
    }
    let weak: Weak<McpManager> = Arc::downgrade(manager);
    let mut changes = manager.changes();
    let stopped = manager.stopped();
    tokio::spawn(async move {
        let mut told: HashMap<String, ServerState> = HashMap::new();
        loop {
            {
                let Some(manager) = weak.upgrade() else { break };
                for status in manager.status() {
                    if told.get(&status.name) == Some(&status.state) {
                        continue;
                    }
                    told.insert(status.name.clone(), status.state.clone());
                    if let Some((level, text)) = state_notice(&status) {
                        let _ = events.send(Event::Notice { level, text });
                    }
                }
            }
            tokio::select! {
                () = stopped.cancelled() => break,
                changed = changes.changed() => if changed.is_err() { break },
            }
        }
    });
}

/// The MCP tools offered to the model (names the APIs would refuse are
/// left out).
pub(crate) fn offered_tools(manager: &McpManager) -> Vec<maia_mcp::McpTool> {
    manager
        .tools()
        .into_iter()
        .filter(|t| {
            let ok = t.full_name.len() <= MAX_TOOL_NAME;
            if !ok {
                tracing::warn!(tool = %t.full_name, "MCP tool name too long for the model; left out");
            }
            ok
        })
        .collect()
}

/// Before a turn's first model request: waits (at most [`TURN_WAIT`])
/// for servers still starting, then tells which ones are left out.
pub(crate) async fn wait_for_servers(
    manager: &McpManager,
    events: &mpsc::UnboundedSender<Event>,
    cancel: &CancellationToken,
) {
    let starting = |m: &McpManager| {
        m.status()
            .into_iter()
            .filter(|s| s.state == ServerState::Starting)
            .map(|s| s.name)
            .collect::<Vec<_>>()
    };
    if starting(manager).is_empty() {
        return;
    }
    tokio::select! {
        () = cancel.cancelled() => return,
        () = manager.wait_ready(TURN_WAIT) => {}
    }
    let late = starting(manager);
    if !late.is_empty() {
        let _ = events.send(Event::Notice {
            level: NoticeLevel::Warning,
            text: format!(
                "MCP server{} still starting, not used in this turn: {}",
                if late.len() == 1 { "" } else { "s" },
                late.join(", ")
            ),
        });
    }
}

/// The `/mcp` report.
pub(crate) fn report(manager: &McpManager) -> String {
    let status = manager.status();
    if status.is_empty() {
        return "No MCP servers. Editors pass them when they open a session; \
                    `mcpServers` in .maia/settings.json adds more \
                    (`{\"name\": {\"command\": …, \"args\": […]}}` or `{\"name\": {\"url\": …}}`)."
            .to_owned();
    }
    let mut text = String::from("MCP servers:\n");
    for server in status {
        match &server.state {
            ServerState::Starting => {
                text.push_str(&format!("\n- `{}` — starting\n", server.name));
            }
            ServerState::Failed(reason) => {
                text.push_str(&format!("\n- `{}` — failed: {reason}\n", server.name));
            }
            ServerState::Connected { tools } => {
                text.push_str(&format!(
                    "\n- `{}` — connected, {} tool{}\n",
                    server.name,
                    tools.len(),
                    if tools.len() == 1 { "" } else { "s" }
                ));
                for tool in tools {
                    text.push_str(&format!(
                        "  - `{}`\n",
                        maia_mcp::full_name(&server.name, tool)
                    ));
                }
            }
        }
        if manager
            .config(&server.name)
            .is_some_and(|(_, confined)| confined)
        {
            text.push_str("  - runs in the sandbox\n");
        }
        if !server.disabled.is_empty() {
            text.push_str(&format!(
                "  - disabled in the settings: {}\n",
                server.disabled.join(", ")
            ));
        }
    }
    text.push_str(
        "\nTheir tool calls ask for permission unless a rule allows them \
             (`mcp__<server>__<tool>` or `mcp__<server>__<tool>(pattern)`). \
             A project's server runs in the sandbox until `/mcp trust NAME`.",
    );
    text
}
