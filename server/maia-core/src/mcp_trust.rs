//! Whose MCP server it is, and so where it may write
//! (docs/permissions.md, "MCP servers: whose they are").
//!
//! - A server the user configured — `~/.maia/settings.json` or the
//!   editor's `mcpServers` — runs as configured, outside the sandbox, as
//!   other agents and editors run it (`npx`, `uvx`, `docker run` keep their
//!   caches and sockets). `"network": false` keeps it in the sandbox, off
//!   the network, with the usual package caches writable.
//! - A server the project configured (`<project>/.maia/settings.json`,
//!   which a cloned repository controls) runs in the sandbox with a
//!   package cache of its own (`~/.cache/maia/mcp/<project>`, where
//!   `npm`, `uv`, `pip`, `pipx` and `bun` are pointed), until the user
//!   trusts it with `/mcp trust NAME`; the trust holds for that command
//!   line (command, arguments, environment, folder), per project.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use maia_mcp::{Confinement, McpServerConfig, McpTransport};
use sha2::{Digest, Sha256};

use crate::settings::Settings;

/// The user's package caches a sandboxed server of the user's may write.
const USER_CACHES: &[&str] = &[
    ".npm",
    ".cache",
    ".local/share/uv",
    ".local/share/pipx",
    ".local/pipx",
    ".bun/install/cache",
];

/// Where a session's servers run.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub home: Option<&'a Path>,
    pub cwd: &'a Path,
    /// The session has a sandbox (not off, supported by the kernel).
    pub sandboxed: bool,
}

/// How each stdio server of a session runs. `editor`: the names of the
/// servers the editor passed (they are the user's, whatever the settings
/// say under the same name). Without a sandbox the user's servers run as
/// configured and a project's untrusted one does not start.
pub fn confinement(
    place: Place<'_>,
    servers: &[McpServerConfig],
    editor: &[String],
    settings: &Settings,
) -> HashMap<String, Confinement> {
    let Place {
        home,
        cwd,
        sandboxed,
    } = place;
    let trusted = crate::permission::trusted_mcp_servers(home, cwd);
    let mut out = HashMap::new();
    for server in servers {
        if !matches!(server.transport, McpTransport::Stdio { .. }) {
            continue;
        }
        let name = &server.name;
        let offline = settings.mcp_offline.contains(name);
        let project = settings.mcp_project.contains(name) && !editor.contains(name);
        let as_configured = !project || trusted.contains(&trust_key(server));
        let how = match (as_configured, offline && sandboxed) {
            (true, false) => Confinement::AsConfigured,
            (true, true) => Confinement::Sandboxed {
                network: false,
                writable: home
                    .map(|h| USER_CACHES.iter().map(|c| h.join(c)).collect())
                    .unwrap_or_default(),
                env: Vec::new(),
                note: None,
            },
            (false, _) => {
                let cache = home.map(|h| project_cache(h, cwd));
                Confinement::Sandboxed {
                    network: !offline,
                    env: cache.as_deref().map(cache_env).unwrap_or_default(),
                    writable: cache.into_iter().collect(),
                    note: Some(format!(
                        "a project's server runs {}; `/mcp trust {name}` \
                         lets it run as configured from the next session",
                        if sandboxed {
                            "in the sandbox"
                        } else {
                            "only in the sandbox, which is off here"
                        }
                    )),
                }
            }
        };
        out.insert(name.clone(), how);
    }
    out
}

/// Whether what server `name` says of itself (its `instructions`) may
/// reach the model: yes for the user's servers (the editor's, the home
/// settings'), for a project's stdio server only once the user trusted it
/// as it is configured, never for a project's HTTP server (nothing runs
/// here to trust: a user who wants its instructions configures it in the
/// home settings).
pub(crate) fn vouched(
    home: Option<&Path>,
    cwd: &Path,
    manager: &maia_mcp::McpManager,
    settings: &Settings,
    name: &str,
) -> bool {
    let Some((config, _)) = manager.config(name) else {
        return false;
    };
    // The project's entry, unless the editor's server of that name replaced it.
    let project = settings.mcp_project.iter().any(|n| n == name)
        && settings
            .mcp_servers
            .iter()
            .any(|s| s.name == name && s.transport == config.transport);
    if !project {
        return true;
    }
    matches!(config.transport, McpTransport::Stdio { .. })
        && crate::permission::trusted_mcp_servers(home, cwd).contains(&trust_key(&config))
}

/// `/mcp trust NAME`: trusts the session's project server `name` as it
/// is configured now; the answer for the user.
pub(crate) fn trust(
    home: Option<&Path>,
    cwd: &Path,
    manager: &maia_mcp::McpManager,
    settings: &Settings,
    name: &str,
) -> String {
    let Some((config, sandboxed)) = manager.config(name) else {
        return format!("No MCP server `{name}` in this session (`/mcp` lists them).");
    };
    if !matches!(config.transport, McpTransport::Stdio { .. }) {
        return format!("`{name}` is reached over HTTP: nothing runs here to trust.");
    }
    if !settings.mcp_project.contains(&config.name) || !sandboxed {
        return format!("`{name}` already runs as configured: it is yours, or trusted.");
    }
    let Some(home) = home else {
        return "There is no home folder to remember the trust in.".to_owned();
    };
    match crate::permission::trust_mcp_server(home, cwd, name, &fingerprint(&config)) {
        Ok(()) => format!(
            "Trusted `{name}` of this project as it is configured now: from the next \
             session it runs as configured, outside the sandbox. A change of its command, \
             arguments or environment needs `/mcp trust {name}` again."
        ),
        Err(e) => format!("Cannot record the trust: {e}"),
    }
}

fn trust_key(server: &McpServerConfig) -> String {
    format!("{}#{}", server.name, fingerprint(server))
}

/// A digest of what a stdio server runs (its environment may hold secrets,
/// so only the digest is stored).
fn fingerprint(server: &McpServerConfig) -> String {
    let mut hash = Sha256::new();
    if let McpTransport::Stdio {
        command,
        args,
        env,
        cwd,
    } = &server.transport
    {
        let mut env = env.clone();
        env.sort();
        let text = serde_json::json!([command, args, env, cwd]).to_string();
        hash.update(text.as_bytes());
    }
    hash.finalize()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The package cache of a project's sandboxed servers.
fn project_cache(home: &Path, cwd: &Path) -> PathBuf {
    let digest = Sha256::digest(cwd.to_string_lossy().as_bytes());
    let key: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    home.join(".cache").join("maia").join("mcp").join(key)
}

/// The variables that point the package managers at `cache`.
fn cache_env(cache: &Path) -> Vec<(String, String)> {
    let at = |sub: &str| cache.join(sub).to_string_lossy().into_owned();
    [
        ("npm_config_cache", at("npm")),
        ("UV_CACHE_DIR", at("uv")),
        ("UV_TOOL_DIR", at("uv-tools")),
        ("UV_PYTHON_INSTALL_DIR", at("uv-python")),
        ("PIP_CACHE_DIR", at("pip")),
        ("PIPX_HOME", at("pipx")),
        ("PIPX_BIN_DIR", at("pipx/bin")),
        ("BUN_INSTALL_CACHE_DIR", at("bun")),
        ("XDG_CACHE_HOME", at("cache")),
        ("XDG_DATA_HOME", at("data")),
        ("XDG_STATE_HOME", at("state")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio(name: &str, command: &str) -> McpServerConfig {
        McpServerConfig {
            name: name.to_owned(),
            transport: McpTransport::Stdio {
                command: command.to_owned(),
                args: vec!["-y".to_owned()],
                env: Vec::new(),
                cwd: Some(PathBuf::from("/p")),
            },
            disabled_tools: Vec::new(),
        }
    }

    fn place<'a>(
        home: &'a tempfile::TempDir,
        cwd: &'a tempfile::TempDir,
        sandboxed: bool,
    ) -> Place<'a> {
        Place {
            home: Some(home.path()),
            cwd: cwd.path(),
            sandboxed,
        }
    }

    #[test]
    fn the_users_run_as_configured_the_projects_in_the_sandbox_until_trusted() {
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let mut settings = crate::settings::from_files(
            &crate::settings::SettingsFiles::default(),
            cwd.path(),
            None,
        );
        settings.mcp_project = vec!["proj".to_owned(), "ed".to_owned()];
        settings.mcp_offline = vec!["quiet".to_owned()];
        let servers = [
            stdio("mine", "npx"),
            stdio("quiet", "uvx"),
            stdio("proj", "npx"),
            stdio("ed", "npx"),
        ];
        let editor = ["ed".to_owned()];
        let how = confinement(place(&home, &cwd, true), &servers, &editor, &settings);
        assert_eq!(how["mine"], Confinement::AsConfigured);
        assert_eq!(how["ed"], Confinement::AsConfigured);
        let Confinement::Sandboxed {
            network, writable, ..
        } = &how["quiet"]
        else {
            panic!("{how:?}")
        };
        assert!(!network);
        assert!(writable.contains(&home.path().join(".npm")));
        let Confinement::Sandboxed {
            network,
            writable,
            env,
            note,
        } = &how["proj"]
        else {
            panic!("{how:?}")
        };
        assert!(network);
        assert_eq!(writable.len(), 1);
        assert!(writable[0].starts_with(home.path().join(".cache/maia/mcp")));
        assert!(env.iter().any(|(k, _)| k == "npm_config_cache"));
        assert!(
            note.as_deref()
                .unwrap_or_default()
                .contains("/mcp trust proj")
        );

        crate::permission::trust_mcp_server(
            home.path(),
            cwd.path(),
            "proj",
            &fingerprint(&servers[2]),
        )
        .unwrap();
        // Other confirmations written later keep the trust.
        crate::permission::confirm_tool(Some(home.path()), cwd.path(), "t", "f");
        crate::permission::confirm_rule(Some(home.path()), cwd.path(), "Bash(ls)");
        let how = confinement(place(&home, &cwd, true), &servers, &editor, &settings);
        assert_eq!(how["proj"], Confinement::AsConfigured);
        // Another command line under the same name is not trusted.
        let changed = [stdio("proj", "node")];
        let how = confinement(place(&home, &cwd, true), &changed, &editor, &settings);
        assert!(matches!(how["proj"], Confinement::Sandboxed { .. }));
    }

    #[test]
    fn without_a_sandbox_a_projects_untrusted_server_does_not_start() {
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let mut settings = crate::settings::from_files(
            &crate::settings::SettingsFiles::default(),
            cwd.path(),
            None,
        );
        settings.mcp_project = vec!["proj".to_owned()];
        settings.mcp_offline = vec!["quiet".to_owned()];
        let servers = [stdio("quiet", "uvx"), stdio("proj", "npx")];
        let how = confinement(place(&home, &cwd, false), &servers, &[], &settings);
        assert_eq!(how["quiet"], Confinement::AsConfigured);
        let Confinement::Sandboxed { note, .. } = &how["proj"] else {
            panic!("{how:?}")
        };
        assert!(note.as_deref().unwrap_or_default().contains("which is off"));
    }
}
