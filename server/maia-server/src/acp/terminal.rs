//! The editor's terminals (`terminal/*`), for the Bash tool of a session
//! whose client advertised `clientCapabilities.terminal`. The engine
//! decides the sequence (`maia_tools::terminal`); this only speaks it.

use agent_client_protocol_schema::v1::{
    CreateTerminalRequest, CreateTerminalResponse, EnvVariable, KillTerminalRequest,
    ReleaseTerminalRequest, TerminalExitStatus, TerminalOutputRequest, TerminalOutputResponse,
    WaitForTerminalExitRequest, WaitForTerminalExitResponse,
};
use maia_tools::{TerminalError, TerminalExit, TerminalOutput, TerminalRequest, Terminals};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::peer::Peer;

#[derive(Clone)]
pub struct ClientTerminals {
    peer: Peer,
}

impl ClientTerminals {
    pub fn new(peer: Peer) -> Self {
        ClientTerminals { peer }
    }

    fn session(&self) -> String {
        self.peer.session()
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> Result<T, TerminalError> {
        self.peer
            .call(method, params, &format!("{method} failed"))
            .await
            .map_err(TerminalError)
    }
}

fn exit(status: TerminalExitStatus) -> TerminalExit {
    TerminalExit {
        exit_code: status.exit_code,
        signal: status.signal,
    }
}

/// The answer of `terminal/kill` and `terminal/release`: nothing in it
/// is used, so anything goes (a lax `true` does not fail a command).
type Empty = serde::de::IgnoredAny;

#[async_trait::async_trait]
impl Terminals for ClientTerminals {
    async fn create(&self, request: TerminalRequest) -> Result<String, TerminalError> {
        let env = request
            .env
            .into_iter()
            .map(|(name, value)| EnvVariable::new(name, value))
            .collect();
        let params = CreateTerminalRequest::new(self.session(), request.command)
            .args(request.args)
            .env(env)
            .cwd(request.cwd)
            .output_byte_limit(request.output_byte_limit);
        let created: CreateTerminalResponse = self.call("terminal/create", params).await?;
        Ok(created.terminal_id.0.to_string())
    }

    async fn wait_for_exit(&self, id: &str) -> Result<TerminalExit, TerminalError> {
        let params = WaitForTerminalExitRequest::new(self.session(), id.to_owned());
        let waited: WaitForTerminalExitResponse =
            self.call("terminal/wait_for_exit", params).await?;
        Ok(exit(waited.exit_status))
    }

    async fn output(&self, id: &str) -> Result<TerminalOutput, TerminalError> {
        let params = TerminalOutputRequest::new(self.session(), id.to_owned());
        let output: TerminalOutputResponse = self.call("terminal/output", params).await?;
        Ok(TerminalOutput {
            output: output.output,
            truncated: output.truncated,
            exit: output.exit_status.map(exit),
        })
    }

    async fn kill(&self, id: &str) -> Result<(), TerminalError> {
        let params = KillTerminalRequest::new(self.session(), id.to_owned());
        self.call::<Empty>("terminal/kill", params)
            .await
            .map(|_| ())
    }

    async fn release(&self, id: &str) -> Result<(), TerminalError> {
        let params = ReleaseTerminalRequest::new(self.session(), id.to_owned());
        self.call::<Empty>("terminal/release", params)
            .await
            .map(|_| ())
    }
}
