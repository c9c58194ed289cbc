//! Tests of the context window's resolution: settings, the proxy's
//! model information, the model asked, the caches, cancellation.

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
