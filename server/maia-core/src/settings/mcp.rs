//! The `mcpServers` section: each entry read as a stdio or HTTP server
//! (with its `disabledTools`), and the session's servers merged from the
//! editor's and the settings' by name; and `mcpToolSearch`, when the MCP
//! tools are offered by name only ([`McpToolSearch`]).

use std::collections::HashMap;
use std::path::Path;

use serde_json::{Map, Value};

use super::Settings;

/// `mcpToolSearch`: whether the MCP servers' tools are offered by name
/// only, their definitions loaded when the model asks (`ToolSearch`,
/// docs/tools.md "MCP tools on demand").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpToolSearch {
    /// On demand when their definitions would take more than this share of
    /// the context window, in percent (`"auto"`: 10; a number 0–100).
    Above(u8),
    /// `true`: always on demand.
    Always,
    /// `false`: always sent whole.
    Never,
}

/// The share of the window (percent) past which MCP tools go on demand.
pub const DEFAULT_MCP_TOOL_SEARCH_PERCENT: u8 = 10;

impl Default for McpToolSearch {
    fn default() -> Self {
        McpToolSearch::Above(DEFAULT_MCP_TOOL_SEARCH_PERCENT)
    }
}

/// Reads `mcpToolSearch`: `"auto"`, `true`, `false` or a percentage; anything
/// else is reported and read as `"auto"`.
pub(super) fn mcp_tool_search(value: Option<&Value>, warnings: &mut Vec<String>) -> McpToolSearch {
    match value {
        None | Some(Value::Null) => McpToolSearch::default(),
        Some(Value::String(s)) if s.trim() == "auto" => McpToolSearch::default(),
        Some(Value::Bool(true)) => McpToolSearch::Always,
        Some(Value::Bool(false)) => McpToolSearch::Never,
        Some(Value::Number(n)) if n.as_f64().is_some_and(|p| (0.0..=100.0).contains(&p)) => {
            McpToolSearch::Above(
                n.as_f64()
                    .map_or(DEFAULT_MCP_TOOL_SEARCH_PERCENT, |p| p.round() as u8),
            )
        }
        Some(_) => {
            warnings.push(
                "mcpToolSearch must be \"auto\", true, false or a percentage of the context window (0–100); \"auto\" used"
                    .to_owned(),
            );
            McpToolSearch::default()
        }
    }
}

/// Reads the `mcpServers` entries. Stdio servers start in `cwd`.
pub(super) fn mcp_servers(
    map: &Map<String, Value>,
    cwd: &Path,
    warnings: &mut Vec<String>,
) -> (Vec<maia_mcp::McpServerConfig>, HashMap<String, Vec<String>>) {
    use maia_mcp::{McpServerConfig, McpTransport};
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| match x {
                        Value::String(s) => Some(s.clone()),
                        Value::Number(n) => Some(n.to_string()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let pairs = |v: Option<&Value>| -> Vec<(String, String)> {
        v.and_then(Value::as_object)
            .map(|o| {
                o.iter()
                    .filter_map(|(k, v)| match v {
                        Value::String(s) => Some((k.clone(), s.clone())),
                        Value::Number(_) | Value::Bool(_) => Some((k.clone(), v.to_string())),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut servers = Vec::new();
    let mut disabled_only = HashMap::new();
    for (name, entry) in map {
        let Some(entry) = entry.as_object() else {
            warnings.push(format!("mcpServers.{name} must be an object; ignored"));
            continue;
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            warnings.push(format!(
                "mcpServers.{name}: a server name may only use letters, digits, `_` and `-`; ignored"
            ));
            continue;
        }
        if entry.get("disabled").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        let disabled_tools = strings(entry.get("disabledTools"));
        let text = |key: &str| {
            entry
                .get(key)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let transport = match (text("command"), text("url")) {
            (Some(command), _) => McpTransport::Stdio {
                command,
                args: strings(entry.get("args")),
                env: pairs(entry.get("env")),
                cwd: Some(cwd.to_path_buf()),
            },
            (None, Some(url)) => {
                let headers = pairs(entry.get("headers"));
                if entry.get("type").and_then(Value::as_str) == Some("sse") {
                    McpTransport::Sse { url, headers }
                } else {
                    McpTransport::Http { url, headers }
                }
            }
            (None, None) => {
                if entry.contains_key("disabledTools") {
                    disabled_only.insert(name.clone(), disabled_tools);
                } else {
                    warnings.push(format!(
                        "mcpServers.{name} needs a `command` or a `url`; ignored"
                    ));
                }
                continue;
            }
        };
        servers.push(McpServerConfig {
            name: name.clone(),
            transport,
            disabled_tools,
        });
    }
    (servers, disabled_only)
}

/// The servers of a session: the editor's, then those of the settings
/// whose names the editor did not use. `disabledTools` from the settings
/// also apply to an editor server of the same name.
pub fn merge_mcp_servers(
    editor: Vec<maia_mcp::McpServerConfig>,
    settings: &Settings,
) -> Vec<maia_mcp::McpServerConfig> {
    let mut out: Vec<maia_mcp::McpServerConfig> = Vec::new();
    for mut server in editor {
        if out.iter().any(|s| s.name == server.name) {
            continue;
        }
        let from_settings = settings
            .mcp_servers
            .iter()
            .find(|s| s.name == server.name)
            .map(|s| &s.disabled_tools)
            .or_else(|| settings.mcp_disabled.get(&server.name));
        if let Some(disabled) = from_settings {
            for tool in disabled {
                if !server.disabled_tools.contains(tool) {
                    server.disabled_tools.push(tool.clone());
                }
            }
        }
        out.push(server);
    }
    for server in &settings.mcp_servers {
        if !out.iter().any(|s| s.name == server.name) {
            out.push(server.clone());
        }
    }
    out
}
