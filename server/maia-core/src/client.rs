//! What the editor can do for a session's tools, in the engine's terms: run
//! Bash in its own terminals ([`maia_tools::Terminals`]) and put a question
//! with choices to the user ([`Asker`]). A front door implements them over
//! its protocol and gives them to the session with
//! [`crate::SessionHandle::use_client`]; without them Bash runs here and
//! `AskUser` shows its question as text.

use std::sync::Arc;

use maia_tools::Terminals;

/// A question the model puts to the user (the `AskUser` tool).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub question: String,
    /// What the user may pick (at least two).
    pub choices: Vec<String>,
    /// The tool call asking it.
    pub tool_call_id: String,
}

/// The user's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A choice, maybe with the user's own words.
    Chosen {
        choice: Option<String>,
        note: Option<String>,
    },
    /// The user declined to answer.
    Declined,
    /// The user dismissed the question.
    Cancelled,
}

/// Asks the user; `Err` says why the question could not be asked.
#[async_trait::async_trait]
pub trait Asker: Send + Sync {
    async fn ask(&self, question: &Question) -> Result<Answer, String>;
}

/// The editor's services a session's tools may use.
#[derive(Clone, Default)]
pub struct ClientTools {
    pub terminals: Option<Arc<dyn Terminals>>,
    pub asker: Option<Arc<dyn Asker>>,
}

impl std::fmt::Debug for ClientTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTools")
            .field("terminals", &self.terminals.is_some())
            .field("asker", &self.asker.is_some())
            .finish()
    }
}
