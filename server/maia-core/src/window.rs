//! A model's maximum context window, from the most reliable source available.
//!
//! Order (MAIA's): the manual setting (`"contextWindows": {"<model>": <tokens>}`) > LiteLLM's
//! `/model/info` (`model_info.max_input_tokens`) > `max_input_tokens` in the models list (or
//! llama-server's `meta.n_ctx`, as read by [`maia_llm::ModelInfo`]) > asking the model itself
//! (60 s limit) > unknown, in which case only manual compaction works.
//!
//! [`WindowCache`] keeps, per server, what `/model/info` said (the models list is the
//! process's [`crate::catalogue::ModelCatalogue`], which it owns), and per
//! (server, model) the final answer, including "unknown": each source is asked at most once
//! per process, and concurrent resolutions of the same model share one discovery. The manual
//! setting is read on every call and never cached, so a settings change applies at once.
//!
//! Failures that say nothing about the server's answer are not cached, so that the next
//! resolution tries again: cancellation, connection failures and rate limits. Any other
//! failure (HTTP 4xx/5xx, a body that cannot be read) counts as "this source does not know".
//!
//! Asking the model (up to 60 s) happens at most once per (server, model): its answer, a
//! number or "unknown", is written to a disk cache (`~/.maia/cache/windows.json`, see
//! [`DiskCache`]) that later processes read instead of asking. [`resolve_quick`], used by
//! turns and when a session opens, never waits for that question: it starts it in the
//! background and answers "unknown for now"; the next request picks the answer up.

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use maia_llm::{LlmClient, LlmError, MODEL_INFO_PATH, ModelInfoEntry};
use serde::{Deserialize, Serialize};
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

/// Where a context window size came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WindowSource {
    /// The `contextWindows` setting.
    Manual,
    /// LiteLLM's `/model/info` route.
    ModelInfo,
    /// The models list (`max_input_tokens`, or llama-server's `meta.n_ctx`).
    ModelList,
    /// The model's own answer to MAIA's question.
    AskedModel,
}

impl WindowSource {
    /// A stable name for logs and front ends: `manual`, `modelInfo`, `modelList`,
    /// `askedModel`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Manual => "manual",
            Self::ModelInfo => "modelInfo",
            Self::ModelList => "modelList",
            Self::AskedModel => "askedModel",
        }
    }
}

/// A model's maximum context size, in tokens, and where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub tokens: u64,
    pub source: WindowSource,
}

type Cell<T> = Arc<OnceCell<T>>;
type Infos = HashMap<String, ModelInfoEntry>;
/// (base URL, model).
type ModelKey = (String, String);

/// Process-wide memory of discovered context windows. Share one (e.g. in an `Arc`) between
/// all sessions.
#[derive(Debug, Default)]
pub struct WindowCache {
    /// `/model/info` URL → what it says per `model_name`.
    model_info: Mutex<HashMap<String, Cell<Infos>>>,
    /// What each server lists (shared with vision and the model picker).
    catalogue: Arc<crate::catalogue::ModelCatalogue>,
    /// (base URL, model) → the discovered window, `None` for unknown.
    resolved: Mutex<HashMap<ModelKey, Cell<Option<Window>>>>,
    /// (base URL, model) → the model's own answer (`None`: it does not know).
    asked: Mutex<HashMap<ModelKey, Cell<Option<u64>>>>,
    /// Where the model's answers are kept between processes.
    disk: Option<DiskCache>,
}

/// One answer kept in the disk cache.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskEntry {
    /// The server's base URL (`LiteLLM_URL`).
    pub server: String,
    pub model: String,
    /// The window in tokens; `null` when the model did not tell it.
    pub tokens: Option<u64>,
    /// Where it came from (`askedModel`).
    pub source: String,
    /// When it was learned (ISO 8601, UTC).
    pub date: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct DiskFile {
    version: u32,
    #[serde(default)]
    windows: Vec<DiskEntry>,
}

/// Largest windows cache file read (a few hundred bytes per model).
const MAX_DISK_BYTES: u64 = 1024 * 1024;

/// The file `~/.maia/cache/windows.json`:
/// `{"version": 1, "windows": [{"server", "model", "tokens", "source", "date"}]}`. Read at
/// each lookup (it is small), written whole to a temporary file then renamed. An unreadable
/// file is ignored (and replaced at the next write).
#[derive(Debug, Clone)]
pub struct DiskCache {
    path: PathBuf,
}

impl DiskCache {
    /// The cache under `home`: `home/.maia/cache/windows.json`.
    pub fn in_home(home: &Path) -> Self {
        Self {
            path: home.join(".maia").join("cache").join("windows.json"),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's entries; nothing when it is not a regular file of at most
    /// [`MAX_DISK_BYTES`] (a FIFO or `/dev/zero` in its place must not hang
    /// or fill memory) or not the expected JSON.
    fn read(&self) -> DiskFile {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        let Ok(file) = std::fs::File::options()
            .read(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(&self.path)
        else {
            return DiskFile::default();
        };
        if !file
            .metadata()
            .is_ok_and(|m| m.is_file() && m.len() <= MAX_DISK_BYTES)
        {
            return DiskFile::default();
        }
        let mut text = String::new();
        if file.take(MAX_DISK_BYTES).read_to_string(&mut text).is_err() {
            return DiskFile::default();
        }
        serde_json::from_str(&text).unwrap_or_default()
    }

    /// The kept answer for `model` on `server` (a number no model could have
    /// is not one: the file may have been edited).
    pub fn get(&self, server: &str, model: &str) -> Option<DiskEntry> {
        self.read().windows.into_iter().find(|e| {
            e.server == server
                && e.model == model
                && e.tokens.is_none_or(|t| {
                    (maia_llm::MIN_TOKEN_COUNT..=maia_llm::MAX_TOKEN_COUNT).contains(&t)
                })
        })
    }

    /// Keeps `tokens` as the answer for `model` on `server` (replacing an older one).
    pub fn put(&self, server: &str, model: &str, tokens: Option<u64>) {
        let mut file = self.read();
        file.version = 1;
        file.windows
            .retain(|e| !(e.server == server && e.model == model));
        file.windows.push(DiskEntry {
            server: server.to_owned(),
            model: model.to_owned(),
            tokens,
            source: WindowSource::AskedModel.as_str().to_owned(),
            date: crate::store::iso8601(crate::store::now_secs()),
        });
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir)?;
                // Not into a folder a link leads to (it may be anywhere).
                if std::fs::symlink_metadata(dir)?.file_type().is_symlink() {
                    return Err(std::io::Error::other("its folder is a symbolic link"));
                }
            }
            // A name of its own, created new: writers in this process or
            // another never share it, and a link planted there is not followed.
            let tmp = self.path.with_extension(format!(
                "json.{}.{}.tmp",
                std::process::id(),
                uuid::Uuid::new_v4().simple()
            ));
            let text = serde_json::to_string_pretty(&file).unwrap_or_default();
            let written = std::fs::File::options()
                .write(true)
                .create_new(true)
                .open(&tmp)
                .and_then(|mut f| f.write_all(text.as_bytes()))
                .and_then(|()| std::fs::rename(&tmp, &self.path));
            if written.is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
            written
        };
        if let Err(e) = write() {
            tracing::warn!(path = %self.path.display(), "cannot write the context window cache: {e}");
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn cell<K: std::hash::Hash + Eq, T>(map: &Mutex<HashMap<K, Cell<T>>>, key: K) -> Cell<T> {
    Arc::clone(lock(map).entry(key).or_default())
}

fn base_key(client: &LlmClient) -> String {
    client.config().base_url.trim_end_matches('/').to_owned()
}

impl WindowCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty cache that keeps the models' answers in `disk`.
    pub fn with_disk(disk: DiskCache) -> Self {
        Self {
            disk: Some(disk),
            ..Self::default()
        }
    }

    /// What each server lists: the one model catalogue of the process,
    /// shared with vision, the default model and the model picker.
    pub fn catalogue(&self) -> &Arc<crate::catalogue::ModelCatalogue> {
        &self.catalogue
    }

    /// What `/model/info` says of each model of `client`'s server, read
    /// once (the same read as window discovery's); empty when the server
    /// cannot say.
    pub async fn model_infos(&self, client: &LlmClient, cancel: &CancellationToken) -> Infos {
        let info = cell(&self.model_info, client.config().join(MODEL_INFO_PATH));
        fetch_once(&info, "the model info", cancel, || client.model_info())
            .await
            .unwrap_or_default()
    }

    /// What `/model/info` said of `model`, if it was read already.
    pub fn model_info(&self, client: &LlmClient, model: &str) -> Option<ModelInfoEntry> {
        let url = client.config().join(MODEL_INFO_PATH);
        lock(&self.model_info)
            .get(&url)
            .and_then(|cell| cell.get().and_then(|infos| infos.get(model).cloned()))
    }

    /// The cached discovery result for `model` on the server of `client`: `None` when not
    /// resolved yet, `Some(None)` when known to be unknown. Ignores the manual setting.
    pub fn cached(&self, client: &LlmClient, model: &str) -> Option<Option<Window>> {
        let key = (base_key(client), model.to_owned());
        lock(&self.resolved)
            .get(&key)
            .and_then(|cell| cell.get().copied())
    }

    /// Forgets everything learned, so that the next resolutions ask the server again.
    pub fn clear(&self) {
        lock(&self.model_info).clear();
        lock(&self.resolved).clear();
        lock(&self.asked).clear();
        self.catalogue.clear();
    }
}

/// Failures worth trying again later rather than caching as "unknown".
fn is_transient(err: &LlmError) -> bool {
    matches!(
        err,
        LlmError::Cancelled | LlmError::Connection { .. } | LlmError::RateLimited { .. }
    )
}

/// Runs `fut` unless `cancel` fires first.
async fn or_cancel<T>(
    cancel: &CancellationToken,
    fut: impl Future<Output = Result<T, LlmError>>,
) -> Result<T, LlmError> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(LlmError::Cancelled),
        result = fut => result,
    }
}

/// The cached map of `cell`, fetched once. A non-transient failure is logged and cached as an
/// empty map; a transient one is returned and not cached.
async fn fetch_once<T, F, Fut>(
    cell: &OnceCell<HashMap<String, T>>,
    what: &str,
    cancel: &CancellationToken,
    fetch: F,
) -> Result<HashMap<String, T>, LlmError>
where
    T: Clone,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<HashMap<String, T>, LlmError>>,
{
    let windows = cell
        .get_or_try_init(|| async {
            match or_cancel(cancel, fetch()).await {
                Ok(windows) => Ok(windows),
                Err(err) if is_transient(&err) => Err(err),
                Err(err) => {
                    tracing::warn!(error = %err, "cannot read {what}; context windows not taken from it");
                    Ok(HashMap::new())
                }
            }
        })
        .await?;
    Ok(windows.clone())
}

/// Why a discovery result is not cached.
struct NotCached(Option<Window>);

/// `model`'s window from the `contextWindows` setting (zero is ignored).
fn manual_window(manual: &HashMap<String, u64>, model: &str) -> Option<Window> {
    manual.get(model).filter(|&&t| t > 0).map(|&tokens| Window {
        tokens,
        source: WindowSource::Manual,
    })
}

/// `model`'s context window: manual setting > `/model/info` > models list > asking the model
/// > unknown (`None`). See the module documentation for what is cached.
///
/// `manual` is the `contextWindows` setting (model name → tokens; zero is ignored). When
/// `cancel` fires, the discovery stops, `None` is returned and nothing is cached for this
/// model.
pub async fn resolve(
    cache: &WindowCache,
    client: &LlmClient,
    model: &str,
    manual: &HashMap<String, u64>,
    cancel: &CancellationToken,
) -> Option<Window> {
    if let Some(window) = manual_window(manual, model) {
        return Some(window);
    }
    let resolved = cell(&cache.resolved, (base_key(client), model.to_owned()));
    // Waiting for another task's discovery also stops when `cancel` fires.
    tokio::select! {
        biased;
        () = cancel.cancelled() => None,
        result = resolved.get_or_try_init(|| discover(cache, client, model, cancel)) => {
            match result {
                Ok(window) => *window,
                Err(NotCached(window)) => window,
            }
        }
    }
}

/// What `/model/info` says of `model` (asked once per server and process,
/// shared with window discovery); `None` when it says nothing or cannot be
/// read now.
pub async fn model_info_entry(
    cache: &WindowCache,
    client: &LlmClient,
    model: &str,
    cancel: &CancellationToken,
) -> Option<ModelInfoEntry> {
    let info = cell(&cache.model_info, client.config().join(MODEL_INFO_PATH));
    let infos = fetch_once(&info, "the model info", cancel, || client.model_info()).await;
    infos.ok()?.get(model).cloned()
}

/// The proxy's own sources: `/model/info`, then the models list. `Err(None)` when
/// cancelled; `Ok((None, transient))` when neither knows.
async fn fast_sources(
    cache: &WindowCache,
    client: &LlmClient,
    model: &str,
    cancel: &CancellationToken,
) -> Result<(Option<Window>, bool), ()> {
    let mut transient = false;
    let found = |tokens: u64, source: WindowSource| {
        tracing::debug!(model, tokens, source = source.as_str(), "context window");
        Ok((Some(Window { tokens, source }), false))
    };

    let info = cell(&cache.model_info, client.config().join(MODEL_INFO_PATH));
    match fetch_once(&info, "the model info", cancel, || client.model_info()).await {
        Ok(infos) => {
            if let Some(tokens) = infos.get(model).and_then(|e| e.max_input_tokens) {
                return found(tokens, WindowSource::ModelInfo);
            }
        }
        Err(LlmError::Cancelled) => return Err(()),
        Err(err) => {
            tracing::debug!(error = %err, "model info unavailable for now");
            transient = true;
        }
    }

    match cache.catalogue.list(client, cancel).await {
        Ok(models) => {
            let listed = models.iter().find(|m| m.id == model);
            if let Some(tokens) = listed.and_then(|m| m.max_input_tokens).filter(|&t| t > 0) {
                return found(tokens, WindowSource::ModelList);
            }
        }
        Err(err) if matches!(*err, LlmError::Cancelled) => return Err(()),
        Err(err) if is_transient(&err) => {
            tracing::debug!(error = %err, "model list unavailable for now");
            transient = true;
        }
        Err(err) => {
            tracing::warn!(error = %err, "cannot read the model list; context windows not taken from it");
        }
    }
    Ok((None, transient))
}

/// The model's own answer: from the disk cache, else asked (once per process and model;
/// a final answer is written to the disk cache). `Err(transient)` when not known for now.
async fn ask(
    cache: &WindowCache,
    client: &LlmClient,
    model: &str,
    cancel: &CancellationToken,
) -> Result<Option<u64>, bool> {
    let server = base_key(client);
    let asked = cell(&cache.asked, (server.clone(), model.to_owned()));
    let result = asked
        .get_or_try_init(|| async {
            if let Some(entry) = cache.disk.as_ref().and_then(|d| d.get(&server, model)) {
                tracing::debug!(model, tokens = ?entry.tokens, date = %entry.date, "context window from the disk cache");
                return Ok(entry.tokens);
            }
            match client.ask_context_window(model, cancel).await {
                Ok(tokens) => {
                    if let Some(disk) = &cache.disk {
                        disk.put(&server, model, tokens);
                    }
                    Ok(tokens)
                }
                Err(LlmError::Cancelled) => Err(true),
                Err(err) => {
                    tracing::warn!(model, error = %err, "cannot ask the model its context size");
                    if is_transient(&err) {
                        Err(true)
                    } else {
                        if let Some(disk) = &cache.disk {
                            disk.put(&server, model, None);
                        }
                        Ok(None)
                    }
                }
            }
        })
        .await;
    result.copied()
}

/// `model`'s context window without waiting for the model to tell it: the manual setting,
/// `/model/info`, the models list (the proxy's latency), else the model's answer if already
/// known (this process or the disk cache). Otherwise the question is started in the
/// background (once) and `None` returned for now.
pub async fn resolve_quick(
    cache: &Arc<WindowCache>,
    client: &LlmClient,
    model: &str,
    manual: &HashMap<String, u64>,
    cancel: &CancellationToken,
) -> Option<Window> {
    if let Some(window) = manual_window(manual, model) {
        return Some(window);
    }
    let key = (base_key(client), model.to_owned());
    if let Some(Some(window)) = lock(&cache.resolved)
        .get(&key)
        .and_then(|cell| cell.get().copied())
    {
        return Some(window);
    }
    if let (Some(window), _) = fast_sources(cache, client, model, cancel).await.ok()? {
        return Some(window);
    }
    let asked = cell(&cache.asked, key.clone());
    if let Some(answer) = asked.get() {
        return answer.map(|tokens| Window {
            tokens,
            source: WindowSource::AskedModel,
        });
    }
    if let Some(entry) = cache.disk.as_ref().and_then(|d| d.get(&key.0, model)) {
        let _ = asked.set(entry.tokens);
        return entry.tokens.map(|tokens| Window {
            tokens,
            source: WindowSource::AskedModel,
        });
    }
    if asked.initialized() {
        return None;
    }
    // Ask in the background; the task ends with the question (60 s at most).
    let (cache, client, model) = (Arc::clone(cache), client.clone(), model.to_owned());
    tokio::spawn(async move {
        let never = CancellationToken::new();
        let _ = ask(&cache, &client, &model, &never).await;
    });
    None
}

async fn discover(
    cache: &WindowCache,
    client: &LlmClient,
    model: &str,
    cancel: &CancellationToken,
) -> Result<Option<Window>, NotCached> {
    let found = |tokens: u64, source: WindowSource| {
        tracing::debug!(model, tokens, source = source.as_str(), "context window");
        Ok(Some(Window { tokens, source }))
    };
    let mut transient = match fast_sources(cache, client, model, cancel).await {
        Ok((Some(window), _)) => return Ok(Some(window)),
        Ok((None, transient)) => transient,
        Err(()) => return Err(NotCached(None)),
    };
    match ask(cache, client, model, cancel).await {
        Ok(Some(tokens)) => return found(tokens, WindowSource::AskedModel),
        Ok(None) => {}
        Err(_) if cancel.is_cancelled() => return Err(NotCached(None)),
        Err(t) => transient |= t,
    }

    tracing::warn!(
        model,
        "context window unknown; set it with \"contextWindows\" in settings"
    );
    if transient {
        Err(NotCached(None))
    } else {
        Ok(None)
    }
}

#[cfg(test)]
mod tests;
