//! The typed test client: ACP requests, their responses and errors, the
//! session updates and the agent's requests as the schema crate's types
//! (`agent-client-protocol-schema`, v1), over any JSON-RPC peer a test
//! speaks to (the stdio process [`super::Maia`], a daemon's WebSocket
//! [`crate::remote_client::Ws`]).
//!
//! - [`Acp::send_request`]: typed params in, the typed result out, or the
//!   JSON-RPC error as [`acp::Error`]; what came meanwhile is kept.
//! - [`Acp::expect`] / [`Acp::expect_where`]: waits (at most [`WAIT`]) for
//!   the next session update of a kind, keeping the others for later reads.
//! - [`Acp::exchange`] / [`Acp::start`] + [`Acp::finish`]: a call whose
//!   agent requests (permission questions, `fs/*`, `terminal/*`) an
//!   [`Answerer`] answers, with the messages that came before its response.
//!
//! The shared flows (initialize, open a session, prompt until it stops)
//! live in [`super::flows`]; the answerers in [`super::answers`].

use std::collections::VecDeque;
use std::future::Future;
use std::marker::PhantomData;
use std::time::Duration;

pub use agent_client_protocol_schema::v1 as acp;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::WAIT;

/// A JSON-RPC peer the typed client speaks through.
pub trait Transport {
    /// Writes one message.
    fn write(&mut self, message: &Value) -> impl Future<Output = ()>;
    /// The next message (one held back first) if one comes within `within`.
    fn read_within(&mut self, within: Duration) -> impl Future<Output = Option<Value>>;
    /// Puts `messages` back, in order, ahead of whatever comes next.
    fn hold(&mut self, messages: Vec<Value>);
    /// A request id this connection has not used yet.
    fn fresh_id(&mut self) -> u64;
}

/// Prepends `messages`, in order, to `held`.
pub fn hold_in(held: &mut VecDeque<Value>, messages: Vec<Value>) {
    for message in messages.into_iter().rev() {
        held.push_front(message);
    }
}

/// An ACP request a client sends, with its method and response type.
pub trait Call: Serialize {
    const METHOD: &'static str;
    type Response: DeserializeOwned;
}

macro_rules! calls {
    ($($request:ident => $response:ident: $method:ident,)*) => {
        $(impl Call for acp::$request {
            const METHOD: &'static str = acp::AGENT_METHOD_NAMES.$method;
            type Response = acp::$response;
        })*
    };
}

calls! {
    InitializeRequest => InitializeResponse: initialize,
    AuthenticateRequest => AuthenticateResponse: authenticate,
    LogoutRequest => LogoutResponse: logout,
    NewSessionRequest => NewSessionResponse: session_new,
    LoadSessionRequest => LoadSessionResponse: session_load,
    ResumeSessionRequest => ResumeSessionResponse: session_resume,
    ListSessionsRequest => ListSessionsResponse: session_list,
    DeleteSessionRequest => DeleteSessionResponse: session_delete,
    CloseSessionRequest => CloseSessionResponse: session_close,
    ForkSessionRequest => ForkSessionResponse: session_fork,
    SetSessionTitleRequest => SetSessionTitleResponse: session_set_title,
    SetSessionModeRequest => SetSessionModeResponse: session_set_mode,
    SetSessionConfigOptionRequest => SetSessionConfigOptionResponse: session_set_config_option,
    PromptRequest => PromptResponse: session_prompt,
}

/// A request sent and not answered yet ([`Acp::start`]).
#[must_use = "finish the call to read its response"]
pub struct Pending<T> {
    pub id: u64,
    method: String,
    response: PhantomData<T>,
}

/// A call's outcome and the messages that came before its response.
#[derive(Debug)]
pub struct Exchange<T> {
    pub result: Result<T, acp::Error>,
    pub before: Vec<Value>,
}

impl<T: std::fmt::Debug> Exchange<T> {
    /// The result; fails the test on an error response.
    pub fn ok(self) -> T {
        self.result
            .unwrap_or_else(|e| panic!("error response: {e:?}"))
    }

    /// The error; fails the test when the call succeeded.
    pub fn err(self) -> acp::Error {
        match self.result {
            Ok(result) => panic!("the call succeeded: {result:?}"),
            Err(error) => error,
        }
    }

    /// The session updates among [`Exchange::before`] that the schema
    /// knows, in order.
    pub fn updates(&self) -> Vec<acp::SessionUpdate> {
        session_updates(&self.before)
    }

    /// The agent's requests among [`Exchange::before`], typed.
    pub fn agent_requests(&self) -> Vec<acp::AgentRequest> {
        self.before.iter().filter_map(agent_request).collect()
    }

    /// The permission questions among [`Exchange::before`].
    pub fn permissions(&self) -> Vec<acp::RequestPermissionRequest> {
        self.agent_requests()
            .into_iter()
            .filter_map(|r| match r {
                acp::AgentRequest::RequestPermissionRequest(q) => Some(q),
                _ => None,
            })
            .collect()
    }

    /// The concatenated text of the agent's message chunks.
    pub fn agent_text(&self) -> String {
        texts::<AgentChunk>(&self.before).concat()
    }
}

/// What an [`Answerer`] sends back to an agent request.
pub enum Answer {
    Result(acp::ClientResponse),
    Error(acp::Error),
}

/// Answers the agent's requests during a call: `Some` to answer, `None`
/// to leave the request unanswered.
pub trait Answerer: FnMut(&acp::AgentRequest) -> Option<Answer> {}
impl<F: FnMut(&acp::AgentRequest) -> Option<Answer>> Answerer for F {}

/// Answers no request: any agent request during the call fails the test.
pub fn no_requests(request: &acp::AgentRequest) -> Option<Answer> {
    panic!("unexpected agent request: {request:?}")
}

/// A kind of session update [`Acp::expect`] can wait for.
pub trait UpdateKind: Sized {
    /// This kind's payload, when `update` is of it.
    fn pick(update: acp::SessionUpdate) -> Option<Self>;
}

macro_rules! update_kinds {
    ($($kind:ident => $variant:ident,)*) => {
        $(impl UpdateKind for $kind {
            fn pick(update: acp::SessionUpdate) -> Option<Self> {
                match update {
                    acp::SessionUpdate::$variant(payload) => Some(payload.into()),
                    _ => None,
                }
            }
        })*
    };
}

/// An `agent_message_chunk`.
#[derive(Debug, Clone)]
pub struct AgentChunk(pub acp::ContentChunk);
/// A `user_message_chunk` (the prompt echoed, or replayed by a load).
#[derive(Debug, Clone)]
pub struct UserChunk(pub acp::ContentChunk);

macro_rules! chunk_from {
    ($($kind:ident,)*) => {
        $(impl From<acp::ContentChunk> for $kind {
            fn from(chunk: acp::ContentChunk) -> Self {
                $kind(chunk)
            }
        }
        impl Chunk for $kind {
            fn chunk(&self) -> &acp::ContentChunk {
                &self.0
            }
        })*
    };
}

/// A content chunk of one of the kinds above.
pub trait Chunk: UpdateKind {
    fn chunk(&self) -> &acp::ContentChunk;

    /// The chunk's text (empty for non-text content).
    fn text(&self) -> String {
        match &self.chunk().content {
            acp::ContentBlock::Text(text) => text.text.clone(),
            _ => String::new(),
        }
    }
}

chunk_from! { AgentChunk, UserChunk, }

use acp::{
    AvailableCommandsUpdate, ConfigOptionUpdate, CurrentModeUpdate, Notice, Plan,
    SessionInfoUpdate, ToolCall, ToolCallUpdate, UsageUpdate,
};

update_kinds! {
    AgentChunk => AgentMessageChunk,
    UserChunk => UserMessageChunk,
    ToolCall => ToolCall,
    ToolCallUpdate => ToolCallUpdate,
    Plan => Plan,
    AvailableCommandsUpdate => AvailableCommandsUpdate,
    CurrentModeUpdate => CurrentModeUpdate,
    ConfigOptionUpdate => ConfigOptionUpdate,
    SessionInfoUpdate => SessionInfoUpdate,
    UsageUpdate => UsageUpdate,
    Notice => Notice,
}

impl UpdateKind for acp::SessionUpdate {
    fn pick(update: acp::SessionUpdate) -> Option<Self> {
        Some(update)
    }
}

/// The `session/update` notification `message` carries, typed; `None` for
/// any other message, or an update the schema does not know.
pub fn session_notification(message: &Value) -> Option<acp::SessionNotification> {
    if message["method"] != acp::CLIENT_METHOD_NAMES.session_update || message.get("id").is_some() {
        return None;
    }
    serde_json::from_value(message["params"].clone()).ok()
}

/// The session updates among `messages` that the schema knows, in order.
pub fn session_updates(messages: &[Value]) -> Vec<acp::SessionUpdate> {
    messages
        .iter()
        .filter_map(session_notification)
        .map(|n| n.update)
        .collect()
}

/// The updates of kind `U` among `messages`, in order.
pub fn updates_kind<U: UpdateKind>(messages: &[Value]) -> Vec<U> {
    session_updates(messages)
        .into_iter()
        .filter_map(U::pick)
        .collect()
}

/// The texts of the chunks of kind `C` among `messages`, in order.
pub fn texts<C: Chunk>(messages: &[Value]) -> Vec<String> {
    updates_kind::<C>(messages).iter().map(C::text).collect()
}

/// The agent's request `message` carries, typed; `None` for any other
/// message. A request the schema cannot read fails the test: what MAIA
/// asks an editor must be what the protocol says.
pub fn agent_request(message: &Value) -> Option<acp::AgentRequest> {
    let method = message.get("method")?.as_str()?;
    message.get("id")?;
    let request = acp::AgentRequest::from_method_and_params(method, &message["params"])
        .unwrap_or_else(|e| panic!("an agent request off the schema: {e}: {message}"));
    Some(request)
}

fn is_response_to(message: &Value, id: u64) -> bool {
    message.get("method").is_none() && message["id"] == json!(id)
}

/// The typed calls, waits and answers, on every [`Transport`].
pub trait Acp: Transport {
    /// Sends request `request` and waits for its response; the messages
    /// that came before it are kept for later reads, and an agent request
    /// among them fails the test (use [`Acp::exchange`] to answer one).
    fn send_request<R: Call>(
        &mut self,
        request: R,
    ) -> impl Future<Output = Result<R::Response, acp::Error>> {
        async move {
            let pending = self.start(request).await;
            let exchange = self.finish(pending, no_requests).await;
            self.hold(exchange.before);
            exchange.result
        }
    }

    /// Sends request `request` without waiting for its response.
    fn start<R: Call>(&mut self, request: R) -> impl Future<Output = Pending<R::Response>> {
        let params = serde_json::to_value(&request).expect("a request serializes");
        self.start_method(R::METHOD, params)
    }

    /// Sends request `method` (a MAIA extension such as `_session/rewind`,
    /// which the schema has no type for) with `params`, without waiting;
    /// its result is read as `T` (`Value` to read it as it is).
    fn start_method<T>(&mut self, method: &str, params: Value) -> impl Future<Output = Pending<T>> {
        let id = self.fresh_id();
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let method = method.to_owned();
        async move {
            self.write(&message).await;
            Pending {
                id,
                method,
                response: PhantomData,
            }
        }
    }

    /// Sends request `method` with `params` and waits for its response;
    /// like [`Acp::send_request`], for a method the schema has no type for.
    fn send_method(
        &mut self,
        method: &str,
        params: Value,
    ) -> impl Future<Output = Result<Value, acp::Error>> {
        async move {
            let pending = self.start_method::<Value>(method, params).await;
            let exchange = self.finish(pending, no_requests).await;
            self.hold(exchange.before);
            exchange.result
        }
    }

    /// Sends request `request` and waits for its response, answering the
    /// agent's requests meanwhile with `answer`; returns the response and
    /// the messages before it.
    fn exchange<R: Call>(
        &mut self,
        request: R,
        answer: impl Answerer,
    ) -> impl Future<Output = Exchange<R::Response>> {
        async move {
            let pending = self.start(request).await;
            self.finish(pending, answer).await
        }
    }

    /// Waits for the response to `pending`, answering the agent's requests
    /// meanwhile with `answer`; returns it and the messages before it.
    fn finish<T: DeserializeOwned>(
        &mut self,
        pending: Pending<T>,
        mut answer: impl Answerer,
    ) -> impl Future<Output = Exchange<T>> {
        async move {
            let mut before = Vec::new();
            loop {
                let message = self.read_within(WAIT).await.unwrap_or_else(|| {
                    panic!(
                        "no response to {} #{} in {WAIT:?}",
                        pending.method, pending.id
                    )
                });
                if is_response_to(&message, pending.id) {
                    let result = parse_response::<T>(&message, &pending.method);
                    return Exchange { result, before };
                }
                if let Some(request) = agent_request(&message)
                    && let Some(reply) = answer(&request)
                {
                    self.reply(&message["id"], reply).await;
                }
                before.push(message);
            }
        }
    }

    /// Sends `reply` to the agent's request `id`.
    fn reply(&mut self, id: &Value, reply: Answer) -> impl Future<Output = ()> {
        let message = match reply {
            Answer::Result(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Answer::Error(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
        };
        async move { self.write(&message).await }
    }

    /// Sends notification `method` with `params`.
    fn send_notification<P: Serialize>(
        &mut self,
        method: &str,
        params: P,
    ) -> impl Future<Output = ()> {
        let params = serde_json::to_value(params).expect("params serialize");
        let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        async move { self.write(&message).await }
    }

    /// Waits for the next session update of kind `U`; the messages before
    /// it are kept for later reads.
    fn expect<U: UpdateKind>(&mut self) -> impl Future<Output = U> {
        self.expect_where(|_: &U| true)
    }

    /// Waits for the next session update of kind `U` that `pred` accepts;
    /// the messages before it are kept for later reads.
    fn expect_where<U: UpdateKind>(
        &mut self,
        pred: impl Fn(&U) -> bool,
    ) -> impl Future<Output = U> {
        async move {
            let (found, passed) = self
                .scan(WAIT, |m| {
                    session_notification(m)
                        .and_then(|n| U::pick(n.update))
                        .filter(&pred)
                })
                .await;
            self.hold(passed);
            found.unwrap_or_else(|| panic!("no {} update in {WAIT:?}", std::any::type_name::<U>()))
        }
    }

    /// Waits for the agent's next request; the messages before it are
    /// kept for later reads. Returns its id and the request, typed.
    fn expect_request(&mut self) -> impl Future<Output = (Value, acp::AgentRequest)> {
        async move {
            let (found, passed) = self
                .scan(WAIT, |m| agent_request(m).map(|r| (m["id"].clone(), r)))
                .await;
            self.hold(passed);
            found.unwrap_or_else(|| panic!("no agent request in {WAIT:?}"))
        }
    }

    /// Reads until `pick` takes a message or `within` passes; returns what
    /// it took and the messages passed over, in order.
    fn scan<T>(
        &mut self,
        within: Duration,
        mut pick: impl FnMut(&Value) -> Option<T>,
    ) -> impl Future<Output = (Option<T>, Vec<Value>)> {
        async move {
            let deadline = tokio::time::Instant::now() + within;
            let mut passed = Vec::new();
            loop {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                let Some(message) = self.read_within(left).await else {
                    return (None, passed);
                };
                if let Some(found) = pick(&message) {
                    return (Some(found), passed);
                }
                passed.push(message);
            }
        }
    }
}

impl<T: Transport> Acp for T {}

/// The typed result of response `message` to a `method` request, or its
/// typed error. A result off the schema fails the test.
fn parse_response<T: DeserializeOwned>(message: &Value, method: &str) -> Result<T, acp::Error> {
    if let Some(error) = message.get("error") {
        let error: acp::Error = serde_json::from_value(error.clone())
            .unwrap_or_else(|e| panic!("an error off the schema: {e}: {message}"));
        return Err(error);
    }
    let result = message.get("result").cloned().unwrap_or(Value::Null);
    Ok(serde_json::from_value(result)
        .unwrap_or_else(|e| panic!("a {method} result off the schema: {e}: {message}")))
}
