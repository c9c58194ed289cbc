//! The engine: creates, restores, lists and deletes sessions.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

pub use maia_mcp::{McpServerConfig, McpTransport};
use maia_tools::FileSystem;
use tokio::sync::mpsc;

use crate::event::Event;
use crate::handle::{self, SessionHandle, Start};
pub use crate::options::EngineOptions;
use crate::session;
use crate::store;
use crate::window::WindowCache;

/// Why a saved session could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("no saved session `{0}` in this folder")]
    NotFound(String),
    /// Another session or MAIA process writes this thread.
    #[error(transparent)]
    Locked(store::StoreError),
    #[error(transparent)]
    Store(store::StoreError),
}

impl From<store::StoreError> for LoadError {
    fn from(e: store::StoreError) -> Self {
        match e {
            store::StoreError::Locked { .. } => LoadError::Locked(e),
            other => LoadError::Store(other),
        }
    }
}

/// A saved session, as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    pub id: String,
    pub cwd: PathBuf,
    /// The additional workspace roots it was last opened with.
    pub roots: Vec<PathBuf>,
    pub name: String,
    pub title: Option<String>,
    /// ISO 8601.
    pub updated_at: String,
    /// Archived (`session/archive`): listed only when asked for.
    pub archived: bool,
}

/// A started session: its handle and its events.
pub type Started = (SessionHandle, mpsc::UnboundedReceiver<Event>);

/// Creates sessions. Cheap to clone.
#[derive(Clone, Default)]
pub struct Engine {
    options: Arc<EngineOptions>,
    /// Context windows found so far, shared by every session.
    windows: Arc<WindowCache>,
    /// The route set by the front end, for sessions opened from now on.
    route: Arc<RwLock<Option<crate::settings::LlmRoute>>>,
    /// The language servers, shared by every session on the same root.
    lsp: Arc<maia_lsp_client::LspPool>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Engine {
    pub fn new(options: EngineOptions) -> Self {
        // The models' answers about their windows outlive the process.
        let windows = match &options.home {
            Some(home) => WindowCache::with_disk(crate::window::DiskCache::in_home(home)),
            None => WindowCache::default(),
        };
        let route = options.route.clone();
        Engine {
            options: Arc::new(options),
            windows: Arc::new(windows),
            route: Arc::new(RwLock::new(route)),
            lsp: maia_lsp_client::LspPool::new(),
        }
    }

    /// Sends the model requests of sessions opened from now on through
    /// `route` (`None`: back to the settings). Open sessions keep the route
    /// they started with, so no turn changes server midway.
    pub fn set_route(&self, route: Option<crate::settings::LlmRoute>) {
        *self.route.write().unwrap_or_else(PoisonError::into_inner) = route;
    }

    /// The route set with [`Engine::set_route`], if any.
    pub fn route(&self) -> Option<crate::settings::LlmRoute> {
        self.route
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The options a session opened now gets: the process's, with the
    /// current route.
    fn session_options(&self) -> Arc<EngineOptions> {
        Arc::new(EngineOptions {
            route: self.route(),
            ..(*self.options).clone()
        })
    }

    /// The settings a session opened now in `cwd` would use (read afresh).
    pub fn settings(&self, cwd: &Path) -> crate::settings::Settings {
        let mut settings = crate::settings::load_with(&self.session_options(), cwd);
        if let Some(policy) = &self.options.policy {
            crate::project::bound_models(policy, &mut settings);
        }
        settings
    }

    /// The user's home folder, if known.
    pub fn home(&self) -> Option<&Path> {
        self.options.home.as_deref()
    }

    /// Starts a new session rooted at `cwd` (absolute). File reads and
    /// writes of its tools go through `fs`. The session ends when the
    /// handle and its clones are dropped.
    pub fn start_session(&self, cwd: PathBuf, fs: Arc<dyn FileSystem>) -> Started {
        self.start_session_with_mcp(cwd, fs, Vec::new(), Vec::new())
    }

    /// Like [`Engine::start_session`], with the MCP servers the front door
    /// was given (they win over settings entries of the same name) and the
    /// additional workspace roots, as checked by
    /// [`crate::workspace::additional_roots`]. The servers connect in the
    /// background.
    pub fn start_session_with_mcp(
        &self,
        cwd: PathBuf,
        fs: Arc<dyn FileSystem>,
        mcp_servers: Vec<McpServerConfig>,
        roots: Vec<PathBuf>,
    ) -> Started {
        let id = uuid::Uuid::new_v4().to_string();
        handle::spawn(
            &self.session_options(),
            (&self.windows, &self.lsp),
            id,
            (cwd, roots),
            fs,
            Start::New,
            mcp_servers,
        )
    }

    /// Restores thread `id` saved in `cwd`, with the front door's MCP
    /// servers and the additional workspace roots (the complete list: saved
    /// roots are not restored behind the editor's back; a notice says when
    /// they differ). Returns the session and the replay of its
    /// conversation.
    pub fn load_session_with_mcp(
        &self,
        cwd: PathBuf,
        fs: Arc<dyn FileSystem>,
        id: &str,
        mcp_servers: Vec<McpServerConfig>,
        roots: Vec<PathBuf>,
    ) -> Result<(Started, Vec<Event>), LoadError> {
        let summary = store::find(&cwd, id).ok_or_else(|| LoadError::NotFound(id.to_owned()))?;
        // Lock first, then read: what is read is what this session appends to.
        let journal = store::Journal::open(&summary.path)?;
        // The session derives its state from every record (the checkpoints
        // of rewound turns stay revertible); the replay shows the thread.
        let loaded = store::load(&summary.path)?;
        let replay = session::replay(&crate::timeline::rewound(&loaded), &cwd);
        let started = handle::spawn(
            &self.session_options(),
            (&self.windows, &self.lsp),
            id.to_owned(),
            (cwd, roots),
            fs,
            Start::Restore {
                name: summary.name,
                loaded,
                journal,
            },
            mcp_servers,
        );
        Ok((started, replay))
    }

    /// Saves `fork` ([`crate::timeline::Fork::prepare`]) as a new thread
    /// in `cwd`; returns its id, to open with
    /// [`Engine::load_session_with_mcp`].
    pub fn save_fork(
        &self,
        fork: &crate::timeline::Fork,
        cwd: &Path,
    ) -> Result<String, crate::timeline::ForkError> {
        let id = uuid::Uuid::new_v4().to_string();
        let name = session::fresh_name(&id);
        fork.save((cwd, &id, &name), self.options.home.as_deref())?;
        Ok(id)
    }

    /// The folders this user's threads are saved in (from the index under
    /// `~/.maia`), for listing without a folder.
    pub fn session_folders(&self) -> Vec<PathBuf> {
        store::indexed_folders(self.options.home.as_deref())
    }

    /// The sessions saved in `cwd`, newest first.
    pub fn list_sessions(&self, cwd: &Path) -> Vec<SessionSummary> {
        store::list(cwd)
            .into_iter()
            .map(|s| SessionSummary {
                roots: store::saved_roots(cwd, &s.id),
                archived: store::is_archived(cwd, &s.id),
                id: s.id,
                cwd: s.cwd,
                name: s.name,
                title: s.title,
                updated_at: store::iso8601(s.updated),
            })
            .collect()
    }

    /// The models the server of `llm` lists, from the process's model
    /// catalogue: once a server has answered for these credentials, no
    /// request is sent until the answer is [`catalogue::MAX_AGE`] old or
    /// the key is refused ([`crate::catalogue`]). `fresh` asks the server
    /// whatever is kept (an explicit check). The typed error lets a front
    /// door tell "cannot connect" and "key refused" from other failures.
    ///
    /// [`catalogue::MAX_AGE`]: crate::catalogue::MAX_AGE
    pub async fn probe_models(
        &self,
        llm: &maia_llm::LlmConfig,
        fresh: bool,
    ) -> Result<Vec<String>, Arc<maia_llm::LlmError>> {
        let catalogue = self.windows.catalogue();
        // Only the models the managed policy allows are offered.
        let policy = self.options.policy.clone();
        let ids = |models: &[maia_llm::ModelInfo]| {
            models
                .iter()
                .map(|m| m.id.clone())
                .filter(|m| policy.as_ref().is_none_or(|p| p.allows_model(m)))
                .collect()
        };
        if !fresh && let Some(models) = catalogue.known(llm) {
            return Ok(ids(&models));
        }
        let client = maia_llm::LlmClient::new(llm.clone()).map_err(Arc::new)?;
        let never = tokio_util::sync::CancellationToken::new();
        let listed = if fresh {
            catalogue.refresh(&client, &never).await
        } else {
            catalogue.list(&client, &never).await
        };
        listed.map(|models| ids(&models))
    }

    /// Archives thread `id` of `cwd` (or brings it back): `false` when no
    /// such thread is saved there.
    pub fn archive_session(
        &self,
        cwd: &Path,
        id: &str,
        archived: bool,
    ) -> Result<bool, store::StoreError> {
        if store::find(cwd, id).is_none() {
            return Ok(false);
        }
        store::set_archived(cwd, id, archived)?;
        Ok(true)
    }

    /// The models of the server a session in `cwd` would use that take a
    /// reasoning effort: those `/model/info` says `supports_reasoning` of
    /// (read once per server, shared with window discovery), then the
    /// `reasoningModels` setting, which wins. Waits at most `wait` for the
    /// server.
    pub async fn reasoning_models(
        &self,
        cwd: &Path,
        wait: std::time::Duration,
    ) -> std::collections::HashSet<String> {
        let settings = self.settings(cwd);
        let mut models = std::collections::HashMap::new();
        if let Ok(client) = maia_llm::LlmClient::new(settings.llm.clone()) {
            let never = tokio_util::sync::CancellationToken::new();
            if let Ok(infos) =
                tokio::time::timeout(wait, self.windows.model_infos(&client, &never)).await
            {
                for (name, info) in infos {
                    if let Some(reasoning) = info.supports_reasoning {
                        models.insert(name, reasoning);
                    }
                }
            }
        }
        models.extend(settings.reasoning_models);
        models
            .into_iter()
            .filter_map(|(name, reasoning)| reasoning.then_some(name))
            .collect()
    }

    /// Forgets every model list the proxies gave (after `logout`: the next
    /// check asks the proxy with the credentials then saved).
    pub fn forget_models(&self) {
        self.windows.catalogue().clear();
    }

    /// Deletes every saved file of thread `id` in `cwd`, its kept tool
    /// outputs, and the stored images no other thread names.
    pub fn delete_session(&self, cwd: &Path, id: &str) -> Result<usize, store::StoreError> {
        let removed = store::delete(cwd, id)?;
        // Its kept tool outputs go with it.
        if let Some(home) = self.home() {
            maia_tools::kept::remove_thread(home, id);
        }
        // Its checkpoints go with it: refs, index, then unreachable objects.
        if store::sessions_dir(cwd).join(".checkpoints").is_dir()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let (cwd, id) = (cwd.to_path_buf(), id.to_owned());
            let sessions = store::sessions_dir(&cwd);
            runtime.spawn(async move {
                crate::checkpoint::Checkpoints::forget(&sessions, &cwd, &id).await;
            });
        }
        let images = crate::images::remove_unreferenced(cwd);
        if images > 0 {
            tracing::debug!(images, "removed the images of a deleted session");
        }
        Ok(removed)
    }
}
