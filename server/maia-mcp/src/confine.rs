//! How a stdio MCP server runs: as configured, or inside the session's
//! sandbox with the folders and variables its owner's trust allows (the
//! engine decides which, per server; docs/permissions.md, "MCP servers:
//! whose they are").

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use maia_tools::sandbox::Sandbox;

/// The sandbox stdio servers may run in, and how each one runs.
#[derive(Debug, Clone)]
pub struct McpSandbox {
    /// `None`: no sandbox (off, or the kernel lacks it); a server that must
    /// run in it is then not started.
    pub sandbox: Option<Arc<Sandbox>>,
    /// How each stdio server runs, by name; a server not named here runs
    /// in the sandbox with the network ([`Confinement::default`]).
    pub servers: HashMap<String, Confinement>,
}

/// How one stdio server runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// As configured, outside the sandbox (a server the user configured
    /// or trusted).
    AsConfigured,
    /// In the sandbox's file-system rules (not started without a sandbox).
    Sandboxed {
        /// It may use the network.
        network: bool,
        /// Folders it may write besides where a command may (created
        /// before it starts).
        writable: Vec<PathBuf>,
        /// Variables set before the server's own `env` (which wins).
        env: Vec<(String, String)>,
        /// Added to its failure reason (what the user can do about it).
        note: Option<String>,
    },
}

impl Default for Confinement {
    fn default() -> Self {
        Confinement::Sandboxed {
            network: true,
            writable: Vec::new(),
            env: Vec::new(),
            note: None,
        }
    }
}

/// Sets a sandboxed server's variables (before its own `env`, which
/// wins) and makes its extra writable folders.
pub(crate) fn before_env(cmd: &mut tokio::process::Command, how: &Confinement) {
    if let Confinement::Sandboxed { env, writable, .. } = how {
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        for dir in writable {
            if let Err(e) = std::fs::create_dir_all(dir) {
                tracing::warn!("cannot create {}: {e}", dir.display());
            }
        }
    }
}

/// Puts a sandboxed server in `sandbox`; without one it cannot start (the
/// error follows "cannot start `command`").
pub(crate) fn attach(
    cmd: &mut tokio::process::Command,
    how: &Confinement,
    sandbox: Option<&Sandbox>,
) -> Result<(), String> {
    let Confinement::Sandboxed {
        network, writable, ..
    } = how
    else {
        return Ok(());
    };
    let Some(sandbox) = sandbox else {
        return Err(": it must run in the sandbox, which is off or not available here".to_owned());
    };
    sandbox
        .attach_server(cmd, *network, writable)
        .map_err(|e| format!(" in the sandbox: {e}"))
}
