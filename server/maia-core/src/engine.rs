//! The engine: creates sessions with the settings of their folder.

use std::path::PathBuf;
use std::sync::Arc;

use maia_tools::FileSystem;
use tokio::sync::mpsc;

use crate::event::Event;
use crate::session::{self, SessionHandle};

/// Process-wide options, fixed at start.
#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// The user's home folder (for `~/.maia`); `None` reads no user settings.
    pub home: Option<PathBuf>,
    /// A model forced by `--model` or `MAIA_MODEL`.
    pub model: Option<String>,
    /// The `LITELLM_API_KEY` environment variable.
    pub env_api_key: Option<String>,
}

/// Creates sessions. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Engine {
    options: Arc<EngineOptions>,
}

impl Engine {
    pub fn new(options: EngineOptions) -> Self {
        Engine {
            options: Arc::new(options),
        }
    }

    /// Starts a session rooted at `cwd` (absolute). File reads and writes of
    /// its tools go through `fs`. Events arrive on the returned receiver;
    /// the session ends when the handle and its clones are dropped.
    pub fn start_session(
        &self,
        cwd: PathBuf,
        fs: Arc<dyn FileSystem>,
    ) -> (SessionHandle, mpsc::UnboundedReceiver<Event>) {
        session::spawn(&self.options, cwd, fs)
    }
}
