//! Typed answers to the agent's requests during a call ([`Answerer`]s):
//! a permission question answered with the option of a kind, the
//! questions recorded, and the typed responses (`fs/*`, `terminal/*`)
//! turned into an [`Answer`].

use super::client::{Answer, Answerer, acp};

macro_rules! answer_from {
    ($($response:ident,)*) => {
        $(impl From<acp::$response> for Answer {
            fn from(response: acp::$response) -> Self {
                Answer::Result(acp::ClientResponse::$response(response))
            }
        })*
    };
}

answer_from! {
    RequestPermissionResponse,
    ReadTextFileResponse,
    WriteTextFileResponse,
    CreateTerminalResponse,
    TerminalOutputResponse,
    ReleaseTerminalResponse,
    WaitForTerminalExitResponse,
    KillTerminalResponse,
}

impl From<acp::Error> for Answer {
    fn from(error: acp::Error) -> Self {
        Answer::Error(error)
    }
}

/// The answer choosing `question`'s option of `kind`; fails the test when
/// it offers none.
pub fn pick_option(
    question: &acp::RequestPermissionRequest,
    kind: acp::PermissionOptionKind,
) -> Answer {
    let option = question
        .options
        .iter()
        .find(|o| o.kind == kind)
        .unwrap_or_else(|| panic!("no {kind:?} option in {question:?}"));
    acp::RequestPermissionResponse::new(acp::RequestPermissionOutcome::Selected(
        acp::SelectedPermissionOutcome::new(option.option_id.clone()),
    ))
    .into()
}

/// Answers every permission question with its option of `kind`, and no
/// other request.
pub fn select(kind: acp::PermissionOptionKind) -> impl Answerer {
    move |request: &acp::AgentRequest| match request {
        acp::AgentRequest::RequestPermissionRequest(question) => Some(pick_option(question, kind)),
        _ => None,
    }
}

/// Records every permission question in `asked`, then answers as `inner`.
pub fn recording<'a>(
    asked: &'a mut Vec<acp::RequestPermissionRequest>,
    mut inner: impl Answerer + 'a,
) -> impl Answerer + 'a {
    move |request: &acp::AgentRequest| {
        if let acp::AgentRequest::RequestPermissionRequest(question) = request {
            asked.push(question.clone());
        }
        inner(request)
    }
}
