//! MAIA as a language client: the language servers of a session
//! ([`LspManager`]), started lazily on the first file of their type, one
//! per root, under the guard and the sandbox, restarted with backoff and
//! stopped with the session; diagnostics after an edit
//! ([`LspManager::after_edit`]), and the read-only questions the model's
//! `Diagnostics`, `References`, `Definition` and `Symbols` tools ask.
//!
//! The client stack: the protocol's types come from `ls-types` (the
//! maintained `lsp-types` fork that `tower-lsp-server`, MAIA's LSP front
//! door, already builds on), and the client is a small one over the base
//! protocol's framing ([`wire`]): MAIA needs a handful of requests with
//! time limits and output caps, and owns how the process starts (the
//! guard, the sandbox), which an async client framework would hide.
//!
//! The engine knows only this crate's own types ([`Diag`], [`Place`],
//! [`EditReport`], [`ServerConfig`]), never LSP's.

mod client;
pub mod config;
mod convert;
mod manager;
mod report;
pub mod wire;

use std::path::PathBuf;

pub use config::{LspSettings, ServerConfig};
pub use manager::{LspManager, LspPool, Notify, ServerCheck};
pub use report::{format_diags, format_edit_report, format_places};

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
    Info,
    Hint,
}

impl Severity {
    /// Its name as the model reads it.
    pub fn label(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
            Severity::Hint => "hint",
        }
    }

    /// Errors and warnings are reported after edits; the rest is noise.
    pub fn counts(self) -> bool {
        matches!(self, Severity::Error | Severity::Warning)
    }
}

/// One diagnostic, 1-based.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diag {
    pub path: PathBuf,
    pub line: u32,
    pub column: u32,
    pub severity: Severity,
    pub message: String,
    pub source: Option<String>,
    pub code: Option<String>,
}

/// A place in a file, 1-based (a reference, a definition, a symbol).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub path: PathBuf,
    pub line: u32,
    pub column: u32,
    /// A symbol's name and kind, when the place is one.
    pub label: Option<String>,
}

/// What an edit changed in the diagnostics of its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditReport {
    /// The servers answered.
    Checked {
        /// The servers that checked it.
        servers: Vec<String>,
        /// Errors and warnings the edit introduced.
        introduced: Vec<Diag>,
        /// Errors and warnings the edit made go away.
        resolved: Vec<Diag>,
        /// Errors known in other files, and in how many files.
        elsewhere: (usize, usize),
    },
    /// Diagnostics could not be had (why); not "no errors".
    Unavailable(String),
}

impl EditReport {
    /// Whether there is something to tell the model.
    pub fn worth_telling(&self) -> bool {
        match self {
            EditReport::Checked {
                introduced,
                resolved,
                ..
            } => !introduced.is_empty() || !resolved.is_empty(),
            EditReport::Unavailable(_) => true,
        }
    }
}
