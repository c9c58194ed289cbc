//! What a session tells the user when it starts, loads or resumes: the
//! settings, rules, skills, tools, MCP servers and context file loaded,
//! the workspace folders (and when the editor changed them since last
//! time), and the command list.

use std::path::PathBuf;

use super::Session;
use crate::event::{Event, NoticeLevel};

/// `a, b, c` for paths.
fn list_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Session {
    /// On a load or resume: says when the editor opened the conversation
    /// with other additional folders than last time (the request's list is
    /// the one that applies, as ACP says; an omitted list means none).
    pub(crate) fn announce_roots_change(&self, previous: &[PathBuf]) {
        if previous == self.services.roots.as_slice() {
            return;
        }
        let text = if self.services.roots.is_empty() {
            format!(
                "This conversation was last opened with the workspace folders {}; the editor did not pass them this time, so they are not part of the workspace now.",
                list_paths(previous)
            )
        } else if previous.is_empty() {
            // The start notice lists them.
            return;
        } else {
            format!(
                "The workspace folders changed since this conversation was last opened: {} (before: {}).",
                list_paths(&self.services.roots),
                list_paths(previous)
            )
        };
        tracing::info!("{text}");
        self.emit(Event::Notice {
            level: NoticeLevel::Info,
            text,
        });
    }

    /// Tells the user which settings, rules, skills, tools and context
    /// file were loaded, and announces the commands.
    pub(crate) fn announce_start(&self) {
        let warn = |text: String| {
            tracing::warn!("{text}");
            self.emit(Event::Notice {
                level: NoticeLevel::Warning,
                text,
            });
        };
        let info = |text: String| {
            tracing::info!("{text}");
            self.emit(Event::Notice {
                level: NoticeLevel::Info,
                text,
            });
        };
        let home = self.services.options.home.as_deref();
        for (level, text) in self.project.load_notices(home, &self.services.cwd) {
            match level {
                NoticeLevel::Warning => warn(text),
                _ => info(text),
            }
        }
        if !self.services.roots.is_empty() {
            info(format!(
                "Workspace folders besides {}: {}",
                self.services.cwd.display(),
                list_paths(&self.services.roots)
            ));
        }
        for text in self.project.inventory() {
            info(text);
        }
        let servers = self.services.mcp.status();
        if !servers.is_empty() {
            let list: Vec<String> = servers
                .iter()
                .map(|s| {
                    let state = match &s.state {
                        maia_mcp::ServerState::Starting => "starting",
                        maia_mcp::ServerState::Connected { .. } => "connected",
                        maia_mcp::ServerState::Failed(_) => "failed",
                    };
                    format!("{} ({state})", s.name)
                })
                .collect();
            info(format!(
                "MCP servers: {} — /mcp shows their tools",
                list.join(", ")
            ));
        }
        self.emit(Event::Commands(self.project.command_entries()));
        let files = &self.project.context_files.files;
        let (level, text) = match files.as_slice() {
            [] => (
                NoticeLevel::Info,
                "No instruction file (MAIA.md, AGENTS.md or CLAUDE.md) here, in the folders up to the repository root, or in ~/.maia".to_owned(),
            ),
            [file] => (
                NoticeLevel::Info,
                format!("Context file loaded: {}", file.path.display()),
            ),
            _ => (
                NoticeLevel::Info,
                format!(
                    "Instruction files loaded: {}",
                    files
                        .iter()
                        .map(|f| f.path.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
        };
        tracing::info!("{text}");
        self.emit(Event::Notice { level, text });
    }
}

impl Session {
    /// Agent files are read again at each turn (a listing of a few small
    /// files): one written, changed or removed since the last turn applies
    /// at once, and the user is told which.
    pub(crate) fn refresh_agents(&mut self) {
        let home = self.services.options.home.as_deref();
        let fresh = crate::blocking::off_runtime(|| {
            crate::subagent::agents::load(home, &self.services.cwd)
        });
        let old = &self.project.agents;
        if fresh.agents == old.agents {
            return;
        }
        let names = |from: &crate::subagent::LoadedAgents, of: &crate::subagent::LoadedAgents| {
            from.agents
                .iter()
                .filter(|a| of.get(&a.name).is_none())
                .map(|a| format!("`{}`", a.name))
                .collect::<Vec<_>>()
        };
        let added = names(&fresh, old);
        let removed = names(old, &fresh);
        let changed: Vec<String> = fresh
            .agents
            .iter()
            .filter(|a| old.get(&a.name).is_some_and(|o| o != *a))
            .map(|a| format!("`{}`", a.name))
            .collect();
        let mut parts = Vec::new();
        for (what, list) in [("added", added), ("changed", changed), ("removed", removed)] {
            if !list.is_empty() {
                parts.push(format!("{what} {}", list.join(", ")));
            }
        }
        let text = format!("Agent files changed: {}.", parts.join("; "));
        tracing::info!("{text}");
        for warning in fresh.warnings.iter().filter(|w| !old.warnings.contains(w)) {
            self.emit(Event::Notice {
                level: NoticeLevel::Warning,
                text: warning.clone(),
            });
        }
        self.project.agents = std::sync::Arc::new(fresh);
        self.emit(Event::Notice {
            level: NoticeLevel::Info,
            text,
        });
    }
}
