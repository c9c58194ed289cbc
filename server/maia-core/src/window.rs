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
mod tests {
    use super::*;
    use std::time::Duration;

    use maia_llm::LlmConfig;
    use maia_test_support::{MockLlm, Reply, error_reply, text_chunks, text_reply};
    use serde_json::json;

    fn client(url: &str) -> LlmClient {
        LlmClient::new(LlmConfig {
            base_url: url.to_owned(),
            max_retries: 0,
            retry_base: Duration::from_millis(10),
            request_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(5),
            ..LlmConfig::default()
        })
        .unwrap()
    }

    fn model_info(name: &str, tokens: serde_json::Value) -> serde_json::Value {
        json!({"data": [{"model_name": name, "litellm_params": {"model": "openai/x"},
                         "model_info": {"max_input_tokens": tokens, "mode": "chat"}}]})
    }

    fn manual(pairs: &[(&str, u64)]) -> HashMap<String, u64> {
        pairs.iter().map(|(m, t)| ((*m).to_owned(), *t)).collect()
    }

    /// The mock's default model list has `mock-model` with `max_input_tokens` 32768.
    async fn start() -> (MockLlm, LlmClient) {
        let mock = MockLlm::start().await;
        let client = client(&mock.url());
        (mock, client)
    }

    #[tokio::test]
    async fn manual_wins_without_any_request() {
        let (mock, client) = start().await;
        mock.set_model_info(model_info("mock-model", json!(100_000)));
        let cache = WindowCache::new();
        let cancel = CancellationToken::new();
        let window = resolve(
            &cache,
            &client,
            "mock-model",
            &manual(&[("mock-model", 5_000)]),
            &cancel,
        )
        .await;
        assert_eq!(
            window,
            Some(Window {
                tokens: 5_000,
                source: WindowSource::Manual
            })
        );
        assert_eq!(mock.model_info_requests(), 0);
        assert_eq!(mock.models_requests(), 0);
        assert!(mock.window_question_requests().is_empty());
        // A zero manual value is ignored; another model's value does not apply.
        let window = resolve(
            &cache,
            &client,
            "mock-model",
            &manual(&[("mock-model", 0), ("other", 9_000)]),
            &cancel,
        )
        .await;
        assert_eq!(window.map(|w| w.source), Some(WindowSource::ModelInfo));
    }

    #[tokio::test]
    async fn model_info_beats_the_list() {
        let (mock, client) = start().await;
        mock.set_model_info(model_info("mock-model", json!(100_000.0)));
        let cache = WindowCache::new();
        let window = resolve(
            &cache,
            &client,
            "mock-model",
            &HashMap::new(),
            &CancellationToken::new(),
        )
        .await;
        assert_eq!(
            window,
            Some(Window {
                tokens: 100_000,
                source: WindowSource::ModelInfo
            })
        );
        assert_eq!(mock.model_info_requests(), 1);
        assert_eq!(mock.models_requests(), 0);
        assert!(mock.window_question_requests().is_empty());
        // The manual setting still overrides a cached answer.
        let window = resolve(
            &cache,
            &client,
            "mock-model",
            &manual(&[("mock-model", 7_000)]),
            &CancellationToken::new(),
        )
        .await;
        assert_eq!(window.map(|w| w.tokens), Some(7_000));
    }

    #[tokio::test]
    async fn the_list_beats_asking() {
        let (mock, client) = start().await;
        // `/model/info` knows the model but not its size (LiteLLM's `null`).
        mock.set_model_info(model_info("mock-model", json!(null)));
        let cache = WindowCache::new();
        let window = resolve(
            &cache,
            &client,
            "mock-model",
            &HashMap::new(),
            &CancellationToken::new(),
        )
        .await;
        assert_eq!(
            window,
            Some(Window {
                tokens: 32_768,
                source: WindowSource::ModelList
            })
        );
        assert_eq!(mock.model_info_requests(), 1);
        assert_eq!(mock.models_requests(), 1);
        assert!(mock.window_question_requests().is_empty());
    }

    #[tokio::test]
    async fn llama_server_list_shape() {
        let mock = MockLlm::start().await;
        mock.set_models(vec![
            json!({"id": "smollm2-135m", "owned_by": "llamacpp", "meta": {"n_ctx": 4096}}),
        ]);
        let client = client_for(&mock);
        let window = resolve(
            &WindowCache::new(),
            &client,
            "smollm2-135m",
            &HashMap::new(),
            &CancellationToken::new(),
        )
        .await;
        assert_eq!(
            window,
            Some(Window {
                tokens: 4_096,
                source: WindowSource::ModelList
            })
        );
        assert_eq!(mock.model_info_requests(), 1);
    }

    #[tokio::test]
    async fn asking_the_model_is_the_fallback() {
        let (mock, client) = start().await;
        mock.set_models(vec![json!({"id": "mystery"})]);
        mock.push_window_answer(text_reply("128k"));
        let cache = WindowCache::new();
        let window = resolve(
            &cache,
            &client,
            "mystery",
            &HashMap::new(),
            &CancellationToken::new(),
        )
        .await;
        assert_eq!(
            window,
            Some(Window {
                tokens: 128_000,
                source: WindowSource::AskedModel
            })
        );
        let requests = mock.window_question_requests();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0]["model"], "mystery");
        assert_eq!(requests[0]["max_tokens"], 50);
        assert_eq!(
            requests[0]["messages"][0]["content"],
            maia_llm::CONTEXT_WINDOW_QUESTION
        );
    }

    #[tokio::test]
    async fn unknown_when_all_fail_and_cached() {
        let (mock, client) = start().await;
        mock.set_models(vec![json!({"id": "mystery"})]);
        mock.push_window_answer(text_reply("I do not know."));
        let cache = WindowCache::new();
        let cancel = CancellationToken::new();
        let none = HashMap::new();
        assert_eq!(
            resolve(&cache, &client, "mystery", &none, &cancel).await,
            None
        );
        assert_eq!(cache.cached(&client, "mystery"), Some(None));
        // Unknown is remembered: no second question, no second fetch.
        assert_eq!(
            resolve(&cache, &client, "mystery", &none, &cancel).await,
            None
        );
        assert_eq!(mock.window_question_requests().len(), 1);
        assert_eq!(mock.model_info_requests(), 1);
        assert_eq!(mock.models_requests(), 1);

        // An HTTP error while asking is also a final "unknown".
        mock.push_window_answer(error_reply(400, "unknown model"));
        assert_eq!(
            resolve(&cache, &client, "ghost", &none, &cancel).await,
            None
        );
        assert_eq!(
            resolve(&cache, &client, "ghost", &none, &cancel).await,
            None
        );
        assert_eq!(mock.window_question_requests().len(), 2);
        // `/model/info` and the list were fetched once for the server, not per model.
        assert_eq!(mock.model_info_requests(), 1);
        assert_eq!(mock.models_requests(), 1);
        assert_eq!(mock.pending_replies(), 0);
    }

    #[tokio::test]
    async fn cache_hit_does_not_request_again() {
        let (mock, client) = start().await;
        mock.set_model_info(json!({"data": [
            {"model_name": "a", "model_info": {"max_input_tokens": 200_000}},
        ]}));
        mock.set_models(vec![
            json!({"id": "a"}),
            json!({"id": "b", "max_input_tokens": 8192}),
            json!({"id": "c"}),
        ]);
        mock.push_window_answer(text_reply("The maximum context is 1,5 million tokens."));
        let cache = WindowCache::new();
        let cancel = CancellationToken::new();
        let none = HashMap::new();
        for _ in 0..3 {
            let a = resolve(&cache, &client, "a", &none, &cancel).await;
            let b = resolve(&cache, &client, "b", &none, &cancel).await;
            let c = resolve(&cache, &client, "c", &none, &cancel).await;
            assert_eq!(
                a.map(|w| (w.tokens, w.source)),
                Some((200_000, WindowSource::ModelInfo))
            );
            assert_eq!(
                b.map(|w| (w.tokens, w.source)),
                Some((8_192, WindowSource::ModelList))
            );
            assert_eq!(
                c.map(|w| (w.tokens, w.source)),
                Some((1_500_000, WindowSource::AskedModel))
            );
        }
        assert_eq!(mock.model_info_requests(), 1);
        assert_eq!(mock.models_requests(), 1);
        assert_eq!(mock.window_question_requests().len(), 1);

        // Another server is another cache entry.
        let other = MockLlm::start().await;
        other.set_model_info(json!({"data": [
            {"model_name": "a", "model_info": {"max_input_tokens": 4_000}},
        ]}));
        let a = resolve(&cache, &client_for(&other), "a", &none, &cancel).await;
        assert_eq!(a.map(|w| w.tokens), Some(4_000));

        // `clear` forgets.
        cache.clear();
        assert_eq!(cache.cached(&client, "a"), None);
        resolve(&cache, &client, "a", &none, &cancel).await;
        assert_eq!(mock.model_info_requests(), 2);
    }

    fn client_for(mock: &MockLlm) -> LlmClient {
        client(&mock.url())
    }

    #[tokio::test]
    async fn concurrent_resolutions_share_one_discovery() {
        let (mock, client) = start().await;
        mock.set_models(vec![json!({"id": "slow"})]);
        mock.push_window_answer(text_chunks(&["64", " 0", "00"], Duration::from_millis(50)));
        let cache = Arc::new(WindowCache::new());
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let cache = Arc::clone(&cache);
                let client = client.clone();
                tokio::spawn(async move {
                    resolve(
                        &cache,
                        &client,
                        "slow",
                        &HashMap::new(),
                        &CancellationToken::new(),
                    )
                    .await
                })
            })
            .collect();
        let mut results = Vec::new();
        for task in tasks {
            results.push(task.await.unwrap());
        }
        let expected = Some(Window {
            tokens: 64_000,
            source: WindowSource::AskedModel,
        });
        assert!(results.iter().all(|r| *r == expected), "{results:?}");
        assert_eq!(mock.window_question_requests().len(), 1);
        assert_eq!(mock.model_info_requests(), 1);
        assert_eq!(mock.models_requests(), 1);
    }

    #[tokio::test]
    async fn cancellation_and_unreachable_server_are_not_cached() {
        let (mock, client) = start().await;
        mock.set_models(vec![json!({"id": "m"})]);
        mock.push_window_answer(Reply::Hang);
        let cache = WindowCache::new();
        let none = HashMap::new();
        let cancel = CancellationToken::new();
        let cancel_soon = cancel.clone();
        let server = mock.clone();
        // Cancelled while the model holds the question: mid-flight.
        let canceller = tokio::spawn(async move {
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while server.window_questions() == 0 && std::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            cancel_soon.cancel();
            server.window_questions()
        });
        let resolved = tokio::time::timeout(
            Duration::from_secs(5),
            resolve(&cache, &client, "m", &none, &cancel),
        )
        .await
        .expect("the cancel ends the question");
        assert_eq!(canceller.await.unwrap(), 1, "cancelled before asking");
        assert_eq!(resolved, None);
        assert_eq!(cache.cached(&client, "m"), None);
        // The next resolution asks again (the sources already read are not fetched again).
        mock.push_window_answer(text_reply("32k"));
        let window = resolve(&cache, &client, "m", &none, &CancellationToken::new()).await;
        assert_eq!(window.map(|w| w.tokens), Some(32_000));
        assert_eq!(mock.window_question_requests().len(), 2);
        assert_eq!(mock.model_info_requests(), 1);
        assert_eq!(mock.models_requests(), 1);

        // Nothing listens on port 1: unknown, but not remembered.
        let down = client_at_port_1();
        assert_eq!(
            resolve(&cache, &down, "m", &none, &CancellationToken::new()).await,
            None
        );
        assert_eq!(cache.cached(&down, "m"), None);
    }

    fn client_at_port_1() -> LlmClient {
        client("http://127.0.0.1:1")
    }

    #[tokio::test]
    async fn quick_resolution_asks_in_the_background_once_and_keeps_it_on_disk() {
        let (mock, client) = start().await;
        mock.set_models(vec![json!({"id": "mystery"})]);
        mock.push_window_answer(text_chunks(&["128", "k"], Duration::from_millis(100)));
        let home = tempfile::tempdir().unwrap();
        let disk = DiskCache::in_home(home.path());
        let cache = Arc::new(WindowCache::with_disk(disk.clone()));
        let none = HashMap::new();
        let cancel = CancellationToken::new();
        // Not known yet: the answer is being asked, the caller does not wait.
        let started = std::time::Instant::now();
        assert_eq!(
            resolve_quick(&cache, &client, "mystery", &none, &cancel).await,
            None
        );
        assert!(started.elapsed() < Duration::from_millis(100));
        assert_eq!(
            resolve_quick(&cache, &client, "mystery", &none, &cancel).await,
            None
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while disk.get(&mock.url(), "mystery").is_none() {
            assert!(std::time::Instant::now() < deadline, "never written");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let asked = Some(Window {
            tokens: 128_000,
            source: WindowSource::AskedModel,
        });
        assert_eq!(
            resolve_quick(&cache, &client, "mystery", &none, &cancel).await,
            asked
        );
        let entry = disk.get(&mock.url(), "mystery").unwrap();
        assert_eq!(
            (entry.tokens, entry.source.as_str()),
            (Some(128_000), "askedModel")
        );
        // Another process (a fresh cache on the same file) does not ask again.
        let later = Arc::new(WindowCache::with_disk(disk.clone()));
        assert_eq!(
            resolve_quick(&later, &client, "mystery", &none, &cancel).await,
            asked
        );
        assert_eq!(
            resolve(&later, &client, "mystery", &none, &cancel).await,
            asked
        );
        assert_eq!(mock.window_question_requests().len(), 1);
        // The manual setting still wins.
        let manual = manual(&[("mystery", 9_000)]);
        assert_eq!(
            resolve_quick(&later, &client, "mystery", &manual, &cancel)
                .await
                .map(|w| w.tokens),
            Some(9_000)
        );
        // An unreadable file is ignored and replaced.
        std::fs::write(disk.path(), "not json").unwrap();
        assert_eq!(disk.get(&mock.url(), "mystery"), None);
        disk.put(&mock.url(), "other", None);
        assert_eq!(disk.get(&mock.url(), "other").unwrap().tokens, None);
    }

    #[test]
    fn cache_is_send_and_sync() {
        fn check<T: Send + Sync + Default>() {}
        check::<WindowCache>();
        assert_eq!(WindowSource::AskedModel.as_str(), "askedModel");
    }

    #[test]
    fn a_broken_cache_file_is_survived() {
        let home = tempfile::tempdir().unwrap();
        let disk = DiskCache::in_home(home.path());
        disk.put("http://s", "m", Some(32_768));
        let good = std::fs::read_to_string(disk.path()).unwrap();
        // Cut at any byte: never a panic, the entry is there or not.
        for cut in 0..good.len() {
            std::fs::write(disk.path(), &good.as_bytes()[..cut]).unwrap();
            let _ = disk.get("http://s", "m");
        }
        // Numbers no model has (an edited file): asked again.
        for tokens in ["0", "1", "1000000000000"] {
            std::fs::write(disk.path(), good.replace("32768", tokens)).unwrap();
            assert_eq!(disk.get("http://s", "m"), None, "{tokens}");
        }
        // A FIFO in its place: no hang; a directory: no write, no panic.
        std::fs::remove_file(disk.path()).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(disk.path())
            .status()
            .unwrap();
        assert!(made.success());
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = disk.clone();
        std::thread::spawn(move || {
            let _ = tx.send(reader.get("http://s", "m"));
        });
        assert_eq!(
            rx.recv_timeout(std::time::Duration::from_secs(5)),
            Ok(None),
            "a FIFO must not be waited on"
        );
        std::fs::remove_file(disk.path()).unwrap();
        std::fs::create_dir(disk.path()).unwrap();
        disk.put("http://s", "m", Some(32_768));
        assert_eq!(disk.get("http://s", "m"), None);
    }

    #[test]
    fn the_cache_is_not_written_through_links() {
        let home = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let disk = DiskCache::in_home(home.path());
        let dir = disk.path().parent().unwrap().to_owned();
        std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
        // The cache folder a link to elsewhere: nothing written there.
        std::os::unix::fs::symlink(elsewhere.path(), &dir).unwrap();
        disk.put("http://s", "m", Some(32_768));
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
        std::fs::remove_file(&dir).unwrap();
        // The file a link to elsewhere: the link is replaced, its target kept.
        std::fs::create_dir_all(&dir).unwrap();
        let target = elsewhere.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        std::os::unix::fs::symlink(&target, disk.path()).unwrap();
        disk.put("http://s", "m", Some(32_768));
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        assert_eq!(disk.get("http://s", "m").unwrap().tokens, Some(32_768));
    }

    #[test]
    fn concurrent_writers_never_corrupt_the_cache() {
        let home = tempfile::tempdir().unwrap();
        let disk = DiskCache::in_home(home.path());
        disk.put("http://s", "seed", Some(8_192));
        // A reader (another process starting, say) never sees a half-written file.
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (path, done) = (disk.path().to_path_buf(), done.clone());
            std::thread::spawn(move || {
                let mut torn = Vec::new();
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Ok(text) = std::fs::read_to_string(&path)
                        && serde_json::from_str::<DiskFile>(&text).is_err()
                    {
                        torn.push(text.len());
                    }
                }
                torn
            })
        };
        let writers: Vec<_> = (0..8)
            .map(|i| {
                let disk = disk.clone();
                std::thread::spawn(move || {
                    for j in 0..40 {
                        disk.put("http://s", &format!("model-{i}-{j}"), Some(8_192 + j));
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let torn = reader.join().unwrap();
        assert!(
            torn.is_empty(),
            "a reader saw {} torn files (sizes {:?}…)",
            torn.len(),
            &torn[..torn.len().min(5)]
        );
        let text = std::fs::read_to_string(disk.path()).unwrap();
        assert!(serde_json::from_str::<DiskFile>(&text).is_ok(), "{text}");
        let dir = disk.path().parent().unwrap();
        assert_eq!(
            std::fs::read_dir(dir).unwrap().count(),
            1,
            "temporary files left"
        );
    }
}
