//! The in-process mock server: an axum app on `127.0.0.1:0` answering from a FIFO of
//! scripted [`Reply`]s, recording every chat request and noticing dropped streams.
//!
//! Here: the scripted replies and the [`MockLlm`] handle tests drive; the
//! HTTP routes are [`routes`]'s, the streamed answers [`stream`]'s.

mod routes;
mod stream;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use routes::{chat, default_model, model_info, models, not_found};

/// One scripted answer to a chat request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// Raw SSE body pieces written one by one with `gap` between them (each piece is sent as
    /// its own body chunk; a piece may end mid-line).
    Stream { pieces: Vec<String>, gap: Duration },
    /// A non-streamed HTTP error: status, JSON body text, extra headers (e.g.
    /// `("retry-after","1")`).
    Error {
        status: u16,
        body: String,
        headers: Vec<(String, String)>,
    },
    /// Sends `200` and SSE headers, then nothing until the client disconnects (counted in
    /// [`MockLlm::dropped_streams`]); for cancellation tests.
    Hang,
    /// `reply`, once `gate` is open: the request is recorded at once (so
    /// [`MockLlm::wait_for_requests`] sees it) and answered later; for tests
    /// of requests that must all be in flight together.
    Gated { gate: Gate, reply: Box<Reply> },
}

/// Holds [`Reply::Gated`] answers until [`Gate::open`].
#[derive(Clone, Debug)]
pub struct Gate(Arc<tokio::sync::Semaphore>);

impl Default for Gate {
    fn default() -> Self {
        Gate(Arc::new(tokio::sync::Semaphore::new(0)))
    }
}

impl Gate {
    /// Lets every held and later answer through.
    pub fn open(&self) {
        self.0.add_permits(tokio::sync::Semaphore::MAX_PERMITS / 2);
    }

    async fn pass(&self) {
        let _ = self.0.acquire().await;
    }
}

/// A standing answer: the reply for a chat request it matches, `None` otherwise.
pub type Rule = Arc<dyn Fn(&Value) -> Option<Reply> + Send + Sync>;

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    /// Replies to the context-size question, kept apart from `replies`.
    window_replies: Mutex<VecDeque<Reply>>,
    window_requests: Mutex<Vec<Value>>,
    /// Replies to the thread-labelling requests, kept apart from `replies`.
    title_replies: Mutex<VecDeque<Reply>>,
    title_requests: Mutex<Vec<Value>>,
    models: Mutex<Vec<Value>>,
    model_info: Mutex<Value>,
    models_gets: AtomicUsize,
    /// How long `GET /v1/models` takes to answer.
    models_delay: Mutex<Duration>,
    /// When set, every route answers 401 unless `Authorization: Bearer <key>`.
    required_key: Mutex<Option<String>>,
    model_info_gets: AtomicUsize,
    requests: Mutex<Vec<Value>>,
    headers: Mutex<Vec<Vec<(String, String)>>>,
    /// Headers added to every streamed reply (e.g. `x-litellm-response-cost`).
    stream_headers: Mutex<Vec<(String, String)>>,
    dropped: AtomicUsize,
    /// When each streamed piece was handed to the HTTP body, and the
    /// piece, in order.
    sent: Mutex<Vec<(Instant, String)>>,
    /// The enforced context window, if any.
    window: Mutex<Option<(u64, WindowError)>>,
    /// Indexes (in `requests`) of the requests rejected for their size.
    rejected: Mutex<Vec<usize>>,
    /// Answers the requests it matches before the queue is used.
    rule: Mutex<Option<Rule>>,
    changed: Notify,
}

/// The error body a mock with an enforced window answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowError {
    /// LiteLLM's: HTTP 400, `invalid_request_error`, `code: "400"`, the message starting
    /// `litellm.ContextWindowExceededError:` (the upstream's text inside).
    LiteLlm,
    /// OpenAI's: HTTP 400, `invalid_request_error`, `code: "context_length_exceeded"`.
    OpenAi,
}

/// The mock's count of a chat request's prompt tokens: the characters of its `messages`
/// and `tools` as JSON, divided by 4 (rounded up). The enforced window compares this
/// number with its limit, and replies then report it as `usage.prompt_tokens`.
pub fn estimate_tokens(request: &Value) -> u64 {
    let chars = request["messages"].to_string().len()
        + request.get("tools").map_or(0, |t| t.to_string().len());
    chars.div_ceil(4) as u64
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Aborts the server task when the last [`MockLlm`] handle goes away.
struct ServerTask(JoinHandle<()>);

impl Drop for ServerTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A scripted OpenAI-compatible server. Clones share the same server and state.
#[derive(Clone)]
pub struct MockLlm {
    shared: Arc<Shared>,
    addr: SocketAddr,
    _task: Arc<ServerTask>,
}

impl std::fmt::Debug for MockLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockLlm").field("addr", &self.addr).finish()
    }
}

impl MockLlm {
    /// Starts the server on `127.0.0.1:0` on the current tokio runtime.
    ///
    /// # Panics
    /// If no loopback port can be bound.
    pub async fn start() -> MockLlm {
        let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
            Ok(l) => l,
            Err(err) => panic!("mock LLM: cannot bind 127.0.0.1:0: {err}"),
        };
        let addr = match listener.local_addr() {
            Ok(a) => a,
            Err(err) => panic!("mock LLM: no local address: {err}"),
        };
        let shared = Arc::new(Shared::default());
        *lock(&shared.models) = vec![default_model()];
        *lock(&shared.model_info) = json!({"data": []});
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/chat/completions", post(chat))
            .route("/v1/models", get(models))
            .route("/models", get(models))
            .route("/model/info", get(model_info))
            .route("/v1/model/info", get(model_info))
            .fallback(not_found)
            .with_state(Arc::clone(&shared));
        let task = tokio::spawn(async move {
            // Small SSE pieces must leave at once, as a real proxy's do.
            let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
                let _ = tcp.set_nodelay(true);
            });
            let _ = axum::serve(listener, app).await;
        });
        MockLlm {
            shared,
            addr,
            _task: Arc::new(ServerTask(task)),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requires `Authorization: Bearer <key>` on every route (`None`: no
    /// key needed, the default); others get LiteLLM's 401.
    pub fn require_key(&self, key: Option<&str>) {
        *lock(&self.shared.required_key) = key.map(str::to_owned);
    }

    /// Queues a reply for the next chat request.
    pub fn push(&self, reply: Reply) {
        lock(&self.shared.replies).push_back(reply);
    }

    /// Scripts the answer to the agent's "maximum context size" question.
    /// Such questions never take replies from [`MockLlm::push`]'s queue and
    /// are not recorded in [`MockLlm::requests`]; unscripted, they get a 404
    /// (the model does not know).
    pub fn push_window_answer(&self, reply: Reply) {
        lock(&self.shared.window_replies).push_back(reply);
    }

    /// Scripts the answer to the agent's next thread-labelling request (the
    /// title it asks for after a first answer). Such requests never take
    /// replies from [`MockLlm::push`]'s queue and are not recorded in
    /// [`MockLlm::requests`]; unscripted, they get a 404 (no title).
    pub fn push_title_answer(&self, reply: Reply) {
        lock(&self.shared.title_replies).push_back(reply);
    }

    /// The recorded bodies of the thread-labelling requests.
    pub fn title_requests(&self) -> Vec<Value> {
        lock(&self.shared.title_requests).clone()
    }

    /// How many times the context-size question was asked.
    pub fn window_questions(&self) -> usize {
        lock(&self.shared.window_requests).len()
    }

    /// The recorded bodies of the context-size questions.
    pub fn window_question_requests(&self) -> Vec<Value> {
        lock(&self.shared.window_requests).clone()
    }

    /// Enforces a context window of `tokens`: from now on a chat request whose
    /// [`estimate_tokens`] exceeds it is answered with HTTP 400 in the `shape` given (no
    /// scripted reply is used), as real providers do; the replies to the others report
    /// their estimate as `usage.prompt_tokens`. Rejected requests are recorded in
    /// [`MockLlm::requests`] too, and listed by [`MockLlm::rejected`].
    pub fn enforce_context_window(&self, tokens: u64, shape: WindowError) {
        *lock(&self.shared.window) = Some((tokens, shape));
    }

    /// Sets a standing rule: every chat request it answers (`Some`) gets that reply, without
    /// using the queue (e.g. all summary requests get a summary, whenever they come).
    pub fn set_rule(&self, rule: impl Fn(&Value) -> Option<Reply> + Send + Sync + 'static) {
        *lock(&self.shared.rule) = Some(Arc::new(rule));
    }

    /// Indexes in [`MockLlm::requests`] of the requests rejected for exceeding the window.
    pub fn rejected(&self) -> Vec<usize> {
        lock(&self.shared.rejected).clone()
    }

    /// Scripted replies not used yet.
    pub fn pending_replies(&self) -> usize {
        lock(&self.shared.replies).len()
    }

    /// Adds these headers to every streamed reply from now on (LiteLLM's
    /// `x-litellm-response-cost`, say).
    pub fn set_stream_headers(&self, headers: Vec<(String, String)>) {
        *lock(&self.shared.stream_headers) = headers;
    }

    /// Sets the `data` of `GET /v1/models`.
    pub fn set_models(&self, models: Vec<Value>) {
        *lock(&self.shared.models) = models;
    }

    /// Sets the whole body of `GET /model/info` and `GET /v1/model/info` (LiteLLM's shape:
    /// `{"data":[{"model_name":..,"model_info":{"max_input_tokens":..}}]}`). Default:
    /// `{"data": []}`.
    pub fn set_model_info(&self, body: Value) {
        *lock(&self.shared.model_info) = body;
    }

    /// Makes `GET /v1/models` answer only after `delay` (a slow proxy).
    pub fn set_models_delay(&self, delay: Duration) {
        *lock(&self.shared.models_delay) = delay;
    }

    /// Number of `GET /v1/models` (or `/models`) requests received so far.
    pub fn models_requests(&self) -> usize {
        self.shared.models_gets.load(Ordering::SeqCst)
    }

    /// Number of `GET /model/info` (or `/v1/model/info`) requests received so far.
    pub fn model_info_requests(&self) -> usize {
        self.shared.model_info_gets.load(Ordering::SeqCst)
    }

    /// JSON bodies of the chat requests received so far, in order (a body that is not JSON is
    /// recorded as `{"invalid_json": "<text>"}`).
    pub fn requests(&self) -> Vec<Value> {
        lock(&self.shared.requests).clone()
    }

    /// Headers of each chat request (names lower-case), in order.
    pub fn headers(&self) -> Vec<Vec<(String, String)>> {
        lock(&self.shared.headers).clone()
    }

    /// Number of streams whose client went away before their last piece was sent.
    pub fn dropped_streams(&self) -> usize {
        self.shared.dropped.load(Ordering::SeqCst)
    }

    /// When each piece of the scripted streams so far was handed to the HTTP
    /// body (all streams, in order); for latency benchmarks.
    pub fn piece_times(&self) -> Vec<Instant> {
        lock(&self.shared.sent).iter().map(|(t, _)| *t).collect()
    }

    /// Every piece sent so far with the time it was handed to the body (all
    /// streams, interleaved as they were sent); for benchmarks of
    /// concurrent streams.
    pub fn piece_log(&self) -> Vec<(Instant, String)> {
        lock(&self.shared.sent).clone()
    }

    /// Waits until at least `n` chat requests arrived and returns them.
    ///
    /// # Panics
    /// On timeout, with the number received.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> Vec<Value> {
        let ok = self
            .wait_until(timeout, || lock(&self.shared.requests).len() >= n)
            .await;
        if !ok {
            panic!(
                "mock LLM: expected {n} chat request(s) within {timeout:?}, got {}",
                lock(&self.shared.requests).len()
            );
        }
        self.requests()
    }

    /// Waits until at least `n` streams were dropped by their client.
    ///
    /// # Panics
    /// On timeout, with the number observed.
    pub async fn wait_for_dropped_streams(&self, n: usize, timeout: Duration) {
        let ok = self
            .wait_until(timeout, || self.dropped_streams() >= n)
            .await;
        if !ok {
            panic!(
                "mock LLM: expected {n} dropped stream(s) within {timeout:?}, saw {}",
                self.dropped_streams()
            );
        }
    }

    async fn wait_until(&self, timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.changed.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if done() {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return done();
            }
        }
    }
}
