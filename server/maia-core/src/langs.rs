//! The session's language servers, a service like MCP: their settings
//! (`lsp`, `lspWaitMs`) from the settings files, the manager started with
//! the session (its one notice per server that goes off becomes a
//! warning), and what the result of an edit or a command gains: the
//! diagnostics it introduced or removed, or why they were not available.

use std::path::Path;
use std::sync::Arc;

use maia_lsp_client::{LspManager, LspPool, LspSettings, config};
use tokio::sync::mpsc;

use crate::event::{Event, NoticeLevel};
use crate::settings::{FileContent, SettingsFiles};

/// Where the diagnostics section of an edit's result begins.
const SECTION: &str = "\n\nDiagnostics ";

/// The language-server settings of the files, over the servers found on
/// `PATH`, and the problems found in them.
pub fn settings(files: &SettingsFiles) -> (LspSettings, Vec<String>) {
    let maps: Vec<&serde_json::Map<String, serde_json::Value>> = files
        .files()
        .iter()
        .filter_map(|f| match &f.content {
            FileContent::Json(serde_json::Value::Object(map)) => Some(map),
            _ => None,
        })
        .collect();
    config::from_values(&maps, found_defaults())
}

/// The default servers whose command is on `PATH`, looked up once per
/// process: settings are read again at every session start, `/clear`,
/// `/new` and compaction, and `PATH` does not change under a running MAIA.
fn found_defaults() -> Vec<config::ServerConfig> {
    static FOUND: std::sync::OnceLock<Vec<config::ServerConfig>> = std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| config::defaults(&config::on_path))
        .clone()
}

/// The manager of a session's servers, shared through the process's
/// `pool` with the other sessions on the same roots; nothing starts until
/// a file of their type is read or edited.
pub(crate) fn manager(
    settings: LspSettings,
    cwd: &Path,
    sandbox: Option<Arc<maia_tools::sandbox::Sandbox>>,
    events: mpsc::UnboundedSender<Event>,
    pool: &Arc<LspPool>,
) -> Arc<LspManager> {
    let notify: maia_lsp_client::Notify = Arc::new(move |text: String| {
        let _ = events.send(Event::Notice {
            level: NoticeLevel::Warning,
            text,
        });
    });
    Arc::new(LspManager::new(
        settings,
        cwd.to_path_buf(),
        sandbox,
        notify,
        pool.clone(),
    ))
}

/// What the result of an edit of `path` (from `old`, `None` for a new
/// file, to `new`) gains: nothing when no server serves the file or
/// nothing changed.
pub(crate) async fn after_edit(
    lsp: &LspManager,
    path: &Path,
    old: Option<&str>,
    new: &str,
    cwd: &Path,
) -> Option<String> {
    let report = lsp.after_edit(path, old, new).await?;
    let text = maia_lsp_client::format_edit_report(&report, cwd, "edit")?;
    Some(format!(
        "{SECTION}{}",
        text.trim_start_matches("Diagnostics ")
    ))
}

/// What the result of a command gains: the diagnostics it changed in the
/// files the servers have open (those it changed on disk).
pub(crate) async fn after_command(lsp: &LspManager, cwd: &Path) -> Option<String> {
    let report = lsp.after_command().await?;
    let text = maia_lsp_client::format_edit_report(&report, cwd, "command")?;
    Some(format!(
        "{SECTION}{}",
        text.trim_start_matches("Diagnostics ")
    ))
}

/// The diagnostics section of a tool result, shown in the editor too.
pub(crate) fn section(result: &str) -> Option<String> {
    result
        .find(SECTION)
        .map(|at| result[at..].trim_start().to_owned())
}
