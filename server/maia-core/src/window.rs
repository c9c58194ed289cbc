//! A model's maximum context window, from the most reliable source available.
//!
//! Order (MAIA's): the manual setting (`"contextWindows": {"<model>": <tokens>}`) > LiteLLM's
//! `/model/info` (`model_info.max_input_tokens`) > `max_input_tokens` in the models list (or
//! llama-server's `meta.n_ctx`, as read by [`maia_llm::ModelInfo`]) > asking the model itself
//! (60 s limit) > unknown, in which case only manual compaction works.
//!
//! [`WindowCache`] keeps, per server, what `/model/info` and the models list said, and per
//! (server, model) the final answer, including "unknown": each source is asked at most once
//! per process, and concurrent resolutions of the same model share one discovery. The manual
//! setting is read on every call and never cached, so a settings change applies at once.
//!
//! Failures that say nothing about the server's answer are not cached, so that the next
//! resolution tries again: cancellation, connection failures and rate limits. Any other
//! failure (HTTP 4xx/5xx, a body that cannot be read) counts as "this source does not know".

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use maia_llm::{LlmClient, LlmError, MODEL_INFO_PATH};
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
type Windows = HashMap<String, u64>;
/// (base URL, model).
type ModelKey = (String, String);

/// Process-wide memory of discovered context windows. Share one (e.g. in an `Arc`) between
/// all sessions.
#[derive(Debug, Default)]
pub struct WindowCache {
    /// `/model/info` URL → its `model_name` → `max_input_tokens` map.
    model_info: Mutex<HashMap<String, Cell<Windows>>>,
    /// Models list URL → its `id` → `max_input_tokens` map (entries without a size omitted).
    model_list: Mutex<HashMap<String, Cell<Windows>>>,
    /// (base URL, model) → the discovered window, `None` for unknown.
    resolved: Mutex<HashMap<ModelKey, Cell<Option<Window>>>>,
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
        lock(&self.model_list).clear();
        lock(&self.resolved).clear();
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
async fn fetch_once<F, Fut>(
    cell: &OnceCell<Windows>,
    what: &str,
    cancel: &CancellationToken,
    fetch: F,
) -> Result<Windows, LlmError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Windows, LlmError>>,
{
    let windows = cell
        .get_or_try_init(|| async {
            match or_cancel(cancel, fetch()).await {
                Ok(windows) => Ok(windows),
                Err(err) if is_transient(&err) => Err(err),
                Err(err) => {
                    tracing::warn!(error = %err, "cannot read {what}; context windows not taken from it");
                    Ok(Windows::new())
                }
            }
        })
        .await?;
    Ok(windows.clone())
}

/// Why a discovery result is not cached.
struct NotCached(Option<Window>);

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
    if let Some(&tokens) = manual.get(model).filter(|&&t| t > 0) {
        return Some(Window {
            tokens,
            source: WindowSource::Manual,
        });
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

async fn discover(
    cache: &WindowCache,
    client: &LlmClient,
    model: &str,
    cancel: &CancellationToken,
) -> Result<Option<Window>, NotCached> {
    let mut transient = false;
    let found = |tokens: u64, source: WindowSource| {
        tracing::debug!(model, tokens, source = source.as_str(), "context window");
        Ok(Some(Window { tokens, source }))
    };

    let info = cell(&cache.model_info, client.config().join(MODEL_INFO_PATH));
    match fetch_once(&info, "the model info", cancel, || {
        client.model_info_windows()
    })
    .await
    {
        Ok(windows) => {
            if let Some(&tokens) = windows.get(model) {
                return found(tokens, WindowSource::ModelInfo);
            }
        }
        Err(LlmError::Cancelled) => return Err(NotCached(None)),
        Err(err) => {
            tracing::debug!(error = %err, "model info unavailable for now");
            transient = true;
        }
    }

    let list = cell(&cache.model_list, client.models_url());
    let fetch_list = || async {
        let models = client.list_models().await?;
        Ok(models
            .into_iter()
            .filter_map(|m| Some((m.id, m.max_input_tokens.filter(|&t| t > 0)?)))
            .collect())
    };
    match fetch_once(&list, "the model list", cancel, fetch_list).await {
        Ok(windows) => {
            if let Some(&tokens) = windows.get(model) {
                return found(tokens, WindowSource::ModelList);
            }
        }
        Err(LlmError::Cancelled) => return Err(NotCached(None)),
        Err(err) => {
            tracing::debug!(error = %err, "model list unavailable for now");
            transient = true;
        }
    }

    match client.ask_context_window(model, cancel).await {
        Ok(Some(tokens)) => return found(tokens, WindowSource::AskedModel),
        Ok(None) => {}
        Err(LlmError::Cancelled) => return Err(NotCached(None)),
        Err(err) => {
            tracing::warn!(model, error = %err, "cannot ask the model its context size");
            transient |= is_transient(&err);
        }
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
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            cancel_soon.cancel();
        });
        assert_eq!(resolve(&cache, &client, "m", &none, &cancel).await, None);
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

    #[test]
    fn cache_is_send_and_sync() {
        fn check<T: Send + Sync + Default>() {}
        check::<WindowCache>();
        assert_eq!(WindowSource::AskedModel.as_str(), "askedModel");
    }
}
