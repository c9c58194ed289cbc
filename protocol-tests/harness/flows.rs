//! The pairs every protocol test repeats, typed, on every [`Transport`]:
//! the handshake, opening a session (and its command list), a prompt run
//! until it stops, with the model's answer scripted or not; and
//! [`Transport`] for the stdio process [`Maia`].

use std::path::Path;
use std::time::Duration;

use maia_test_support as mock;
use serde_json::Value;

use super::Maia;
use super::client::{Acp, Answerer, Exchange, Transport, acp, hold_in, no_requests};

/// The `initialize` request the tests send: protocol version 1, no client
/// capabilities, the tests' client info.
pub fn init_request() -> acp::InitializeRequest {
    acp::InitializeRequest::new(agent_client_protocol_schema::ProtocolVersion::V1)
        .client_info(acp::Implementation::new("protocol-tests", "1"))
}

/// A text prompt to session `sid`.
pub fn prompt_request(sid: &acp::SessionId, text: &str) -> acp::PromptRequest {
    acp::PromptRequest::new(
        sid.clone(),
        vec![acp::ContentBlock::Text(acp::TextContent::new(text))],
    )
}

/// The shared flows, on every [`Acp`] peer.
pub trait Flows: Acp {
    /// `initialize` with [`init_request`]; fails the test on an error.
    fn handshake(&mut self) -> impl Future<Output = acp::InitializeResponse> {
        async move {
            self.send_request(init_request())
                .await
                .unwrap_or_else(|e| panic!("initialize failed: {e:?}"))
        }
    }

    /// `session/new` in `cwd` with no MCP servers, then its command list
    /// (which always follows the response); the session's id and the
    /// whole response.
    fn open_in(
        &mut self,
        cwd: &Path,
    ) -> impl Future<Output = (acp::SessionId, acp::NewSessionResponse)> {
        async move {
            let response = self
                .send_request(acp::NewSessionRequest::new(cwd))
                .await
                .unwrap_or_else(|e| panic!("session/new failed: {e:?}"));
            let sid = response.session_id.clone();
            let (found, passed) = self
                .scan(super::WAIT, |m| {
                    let n = super::client::session_notification(m)?;
                    let commands =
                        <acp::AvailableCommandsUpdate as super::client::UpdateKind>::pick(
                            n.update,
                        )?;
                    Some((n.session_id, commands))
                })
                .await;
            self.hold(passed);
            let (of, _) = found.expect("no command list after session/new");
            assert_eq!(of, sid, "the command list is another session's");
            (sid, response)
        }
    }

    /// Prompts `sid` with `text` until the turn stops, answering the
    /// agent's requests with `answer`.
    fn prompt_with(
        &mut self,
        sid: &acp::SessionId,
        text: &str,
        answer: impl Answerer,
    ) -> impl Future<Output = Exchange<acp::PromptResponse>> {
        self.exchange(prompt_request(sid, text), answer)
    }

    /// Prompts `sid` with `text` until the turn stops; an agent request
    /// fails the test.
    fn prompt_turn(
        &mut self,
        sid: &acp::SessionId,
        text: &str,
    ) -> impl Future<Output = Exchange<acp::PromptResponse>> {
        self.prompt_with(sid, text, no_requests)
    }
}

impl<T: Acp> Flows for T {}

impl Transport for Maia {
    fn write(&mut self, message: &Value) -> impl Future<Output = ()> {
        self.send(message)
    }

    fn read_within(&mut self, within: Duration) -> impl Future<Output = Option<Value>> {
        self.next_within(within)
    }

    fn hold(&mut self, messages: Vec<Value>) {
        hold_in(&mut self.held, messages);
    }

    fn fresh_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }
}

impl Maia {
    /// Sends request `method` with `params`; its response and the messages
    /// before it (the untyped pair, for MAIA's extension methods and
    /// tests that check the raw JSON).
    pub async fn call(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        let id = self.request(method, params).await;
        self.response(id).await
    }

    /// Starts with `options`, initializes (typed) and opens a session in
    /// the test's folder.
    pub async fn opened(options: super::Options) -> (Maia, acp::SessionId) {
        let mut maia = Maia::start_with(options).await;
        maia.handshake().await;
        let cwd = maia.cwd();
        let (sid, _) = maia.open_in(&cwd).await;
        (maia, sid)
    }

    /// Scripts one model response with `calls`, then the text answer
    /// "done", and prompts `sid` with `text`, answering with `answer`.
    pub async fn scripted_tools(
        &mut self,
        sid: &acp::SessionId,
        text: &str,
        calls: &[(&str, &str, Value)],
        answer: impl Answerer,
    ) -> Exchange<acp::PromptResponse> {
        self.mock.push(mock::tool_calls_reply(calls));
        self.mock.push(mock::text_reply("done"));
        self.prompt_with(sid, text, answer).await
    }

    /// Scripts one model response a call in `steps` (one step at a time),
    /// then the text answer "done", and prompts `sid` with `text`,
    /// answering with `answer`.
    pub async fn scripted_steps(
        &mut self,
        sid: &acp::SessionId,
        text: &str,
        steps: &[(&str, &str, Value)],
        answer: impl Answerer,
    ) -> Exchange<acp::PromptResponse> {
        for step in steps {
            self.mock
                .push(mock::tool_calls_reply(std::slice::from_ref(step)));
        }
        self.mock.push(mock::text_reply("done"));
        self.prompt_with(sid, text, answer).await
    }
}
