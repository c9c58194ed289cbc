//! The model catalogue: what each model server lists (`GET /v1/models`),
//! kept once per process and shared by everyone who needs it — the
//! front door's login check and model picker, the default model of a
//! session, window discovery, vision, and `/model`.
//!
//! Entries are keyed by the models URL and the identity of the
//! credentials sent with it (the key and the gateway headers, hashed, so
//! two keys never share an answer and no secret is kept twice).
//! Concurrent askers of one entry share one request. A list is kept for
//! [`MAX_AGE`]; a failure, or an empty list, is never kept beyond the
//! askers who waited for that very request, so the next one asks again
//! (a server that lists no model yet may list one a moment later). An
//! explicit look (`/model`, `authenticate`) asks afresh
//! ([`ModelCatalogue::refresh`]) and updates the entry. A refused key
//! ([`ModelCatalogue::refused`], called when any request with that key
//! gets HTTP 401/403) drops the entry, so the next asker hears it from
//! the server.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use maia_llm::{LlmClient, LlmConfig, LlmError, ModelInfo, redact_userinfo};
use tokio_util::sync::CancellationToken;

/// How long a list is trusted before it is asked again.
pub const MAX_AGE: Duration = Duration::from_secs(15 * 60);

/// The models a server listed, or why it could not be listed.
pub type Listing = Result<Arc<[ModelInfo]>, Arc<LlmError>>;

/// (models URL, credentials digest).
type Key = (String, u64);

/// One server's entry.
#[derive(Debug, Default)]
struct Entry {
    /// Held while a request is out, so concurrent askers share it.
    state: tokio::sync::Mutex<State>,
    /// Requests completed for this entry.
    fetches: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    /// The list kept (not empty) and when it arrived.
    listed: Option<(Arc<[ModelInfo]>, Instant)>,
    /// The last request's answer and its number (for those who waited).
    last: Option<(Listing, u64)>,
}

/// Process-wide memory of the servers' model lists. Share one.
#[derive(Debug, Default)]
pub struct ModelCatalogue {
    entries: Mutex<HashMap<Key, Arc<Entry>>>,
    hasher: RandomState,
}

impl ModelCatalogue {
    fn key(&self, config: &LlmConfig) -> Key {
        let secrets: (Option<&str>, Vec<(&str, &str)>) = (
            config.api_key.as_ref().map(|k| k.expose()),
            config
                .headers
                .iter()
                .map(|(name, value)| (name.as_str(), value.expose()))
                .collect(),
        );
        (
            config.join(&config.models_endpoint),
            self.hasher.hash_one(secrets),
        )
    }

    fn entry(&self, config: &LlmConfig) -> Arc<Entry> {
        let key = self.key(config);
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.entry(key).or_default().clone()
    }

    /// The list the server of `config` gave within [`MAX_AGE`], without
    /// asking (and without building a client).
    pub fn known(&self, config: &LlmConfig) -> Option<Arc<[ModelInfo]>> {
        let key = self.key(config);
        let entry = self
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .cloned()?;
        let state = entry.state.try_lock().ok()?;
        state
            .listed
            .as_ref()
            .filter(|(_, at)| at.elapsed() < MAX_AGE)
            .map(|(list, _)| list.clone())
    }

    /// The models `client`'s server lists: the kept list, else asked (one
    /// request for every concurrent asker). `Err(Cancelled)` when `cancel`
    /// fires first; nothing is kept then.
    pub async fn list(&self, client: &LlmClient, cancel: &CancellationToken) -> Listing {
        let entry = self.entry(client.config());
        let seen = entry.fetches.load(Ordering::Acquire);
        let mut state = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(Arc::new(LlmError::Cancelled)),
            state = entry.state.lock() => state,
        };
        if let Some((list, at)) = &state.listed
            && at.elapsed() < MAX_AGE
        {
            return Ok(list.clone());
        }
        // A request that ended while this asker waited answers it too.
        if let Some((answer, number)) = &state.last
            && *number > seen
        {
            return answer.clone();
        }
        let listed = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(Arc::new(LlmError::Cancelled)),
            listed = client.list_models() => listed,
        };
        let number = entry.fetches.fetch_add(1, Ordering::AcqRel) + 1;
        let answer: Listing = match listed {
            Ok(models) => Ok(models.into()),
            Err(error) => {
                tracing::debug!(%error, url = %redact_userinfo(&client.models_url()), "cannot list the models");
                Err(Arc::new(error))
            }
        };
        state.listed = match &answer {
            Ok(models) if !models.is_empty() => Some((models.clone(), Instant::now())),
            _ => None,
        };
        state.last = Some((answer.clone(), number));
        answer
    }

    /// Forgets `client`'s entry and asks again (an explicit check).
    pub async fn refresh(&self, client: &LlmClient, cancel: &CancellationToken) -> Listing {
        self.refused(client.config());
        self.list(client, cancel).await
    }

    /// Forgets every entry.
    pub fn clear(&self) {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Says that `client`'s server refused its credentials (HTTP 401 or
    /// 403 on any request): its kept list is dropped, so the next asker
    /// hears the refusal from the server.
    pub fn refused(&self, config: &LlmConfig) {
        let key = self.key(config);
        let removed = self
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key);
        if removed.is_some() {
            tracing::debug!(url = %redact_userinfo(&key.0), "the model list is asked again after a refused key");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use maia_llm::ApiKey;
    use maia_test_support::MockLlm;

    fn client(mock: &MockLlm, key: Option<&str>) -> LlmClient {
        LlmClient::new(LlmConfig {
            base_url: mock.url(),
            api_key: key.map(ApiKey::new),
            max_retries: 0,
            ..Default::default()
        })
        .unwrap()
    }

    #[tokio::test]
    async fn one_request_serves_every_asker_and_keys_do_not_share() {
        let mock = MockLlm::start().await;
        let catalogue = Arc::new(ModelCatalogue::default());
        let never = CancellationToken::new();
        let a = client(&mock, Some("sk-a"));
        assert!(catalogue.known(a.config()).is_none());
        let asks: Vec<_> = (0..8)
            .map(|_| {
                let (catalogue, a, never) = (catalogue.clone(), a.clone(), never.clone());
                tokio::spawn(async move { catalogue.list(&a, &never).await.map(|l| l.len()) })
            })
            .collect();
        for ask in asks {
            assert!(ask.await.unwrap().unwrap() > 0);
        }
        assert_eq!(mock.models_requests(), 1);
        assert!(catalogue.known(a.config()).is_some());
        // A client built anew with the same settings shares the entry.
        catalogue
            .list(&client(&mock, Some("sk-a")), &never)
            .await
            .unwrap();
        assert_eq!(mock.models_requests(), 1);
        // Another key is another entry.
        catalogue
            .list(&client(&mock, Some("sk-b")), &never)
            .await
            .unwrap();
        assert_eq!(mock.models_requests(), 2);
    }

    #[tokio::test]
    async fn failures_are_asked_again_and_a_refusal_drops_the_list() {
        let mock = MockLlm::start().await;
        let catalogue = ModelCatalogue::default();
        let never = CancellationToken::new();
        let a = client(&mock, Some("sk-a"));
        mock.require_key(Some("sk-other"));
        let error = catalogue.list(&a, &never).await.unwrap_err();
        assert!(matches!(*error, LlmError::Authentication { .. }), "{error}");
        assert!(catalogue.known(a.config()).is_none());
        // Not kept: the next asker asks, and now the key is accepted.
        mock.require_key(Some("sk-a"));
        catalogue.list(&a, &never).await.unwrap();
        assert_eq!(mock.models_requests(), 2);
        catalogue.list(&a, &never).await.unwrap();
        assert_eq!(mock.models_requests(), 2);
        // The key is refused elsewhere: the list is asked again.
        mock.require_key(Some("sk-other"));
        catalogue.refused(a.config());
        assert!(catalogue.known(a.config()).is_none());
        assert!(catalogue.list(&a, &never).await.is_err());
        assert_eq!(mock.models_requests(), 3);
        // A cancelled ask keeps nothing and sends nothing.
        let cancelled = CancellationToken::new();
        cancelled.cancel();
        let error = catalogue.list(&a, &cancelled).await.unwrap_err();
        assert!(matches!(*error, LlmError::Cancelled));
        assert_eq!(mock.models_requests(), 3);
        // An empty list is not kept either: a model may appear.
        mock.require_key(None);
        mock.set_models(Vec::new());
        assert!(catalogue.list(&a, &never).await.unwrap().is_empty());
        mock.set_models(vec![serde_json::json!({"id": "late"})]);
        assert_eq!(catalogue.list(&a, &never).await.unwrap()[0].id, "late");
        assert_eq!(mock.models_requests(), 5);
    }
}
