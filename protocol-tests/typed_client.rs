//! The typed test client itself (`harness/client.rs`) through the binary:
//! a turn read as the schema's types, a typed wait that keeps what it
//! passes over for later reads, a failed call's typed error, and an
//! editor's `fs/read_text_file` answered typed.

use maia_test_support as mock;
use serde_json::json;

use crate::harness::client::{
    Acp, AgentChunk, Answer, Chunk, Exchange, acp, no_requests, updates_kind,
};
use crate::harness::flows::{Flows, init_request, prompt_request};
use crate::harness::{Maia, Options, last_tool_result};

#[tokio::test]
async fn a_typed_wait_keeps_what_it_passes_over_for_the_response() {
    let (mut maia, sid) = Maia::opened(Options {
        settings: json!({"permissions": {"allow": ["Read"]}}),
        ..Options::default()
    })
    .await;
    std::fs::write(maia.path("f.txt"), "one\n").unwrap();
    maia.mock.push(mock::tool_calls_reply(&[(
        "r",
        "Read",
        json!({"file_path": "f.txt"}),
    )]));
    maia.mock.push(mock::text_reply("read it"));
    let pending = maia.start(prompt_request(&sid, "go")).await;
    // The answer's text comes after the call: the wait passes the call over.
    let first = maia
        .expect_where(|c: &AgentChunk| !c.text().is_empty())
        .await;
    // ... and keeps it: a wait for it now finds it.
    let call = maia.expect::<acp::ToolCall>().await;
    assert_eq!(call.kind, acp::ToolKind::Read, "{call:?}");
    let turn: Exchange<acp::PromptResponse> = maia.finish(pending, no_requests).await;
    // The call's completion was passed over twice, and is read now.
    let completed = turn.updates().into_iter().any(|u| match u {
        acp::SessionUpdate::ToolCallUpdate(u) => {
            u.tool_call_id == call.tool_call_id
                && u.fields.status == Some(acp::ToolCallStatus::Completed)
        }
        _ => false,
    });
    assert!(completed, "{:?}", turn.before);
    // What the waits took is not read twice.
    assert_eq!(format!("{}{}", first.text(), turn.agent_text()), "read it");
    assert!(
        updates_kind::<acp::ToolCall>(&turn.before).is_empty(),
        "{:?}",
        turn.before
    );
    assert_eq!(turn.ok().stop_reason, acp::StopReason::EndTurn);
}

#[tokio::test]
async fn a_failed_call_gives_the_typed_error() {
    let (mut maia, _) = Maia::opened(Options::default()).await;
    let unknown = acp::SessionId::new("does-not-exist");
    let error = maia
        .exchange(prompt_request(&unknown, "hi"), no_requests)
        .await
        .err();
    assert_eq!(i32::from(error.code), -32002, "{error:?}");
    assert_eq!(error.data, Some(json!({"sessionId": "does-not-exist"})));
    // A MAIA extension method, read untyped, fails the same way.
    let error = maia
        .send_method(
            "_session/rewind",
            json!({"sessionId": "does-not-exist", "beforeMessage": {"messageId": "m"}}),
        )
        .await
        .unwrap_err();
    assert_eq!(i32::from(error.code), -32002, "{error:?}");
}

#[tokio::test]
async fn an_editor_read_is_asked_and_answered_typed() {
    let mut maia = Maia::start_with(Options::default()).await;
    let capabilities = acp::ClientCapabilities::new().fs(acp::FileSystemCapabilities::new()
        .read_text_file(true)
        .write_text_file(true));
    maia.send_request(init_request().client_capabilities(capabilities))
        .await
        .unwrap();
    let cwd = maia.cwd();
    let (sid, _) = maia.open_in(&cwd).await;
    std::fs::write(maia.path("r.txt"), "from disk\n").unwrap();
    let mut reads = Vec::new();
    let calls = [("r", "Read", json!({"file_path": "r.txt"}))];
    let turn = maia
        .scripted_tools(
            &sid,
            "go",
            &calls,
            |request: &acp::AgentRequest| match request {
                acp::AgentRequest::ReadTextFileRequest(read) => {
                    reads.push(read.clone());
                    Some(Answer::from(acp::ReadTextFileResponse::new(
                        "from editor buffer\n",
                    )))
                }
                acp::AgentRequest::RequestPermissionRequest(question) => {
                    Some(crate::harness::answers::pick_option(
                        question,
                        acp::PermissionOptionKind::AllowOnce,
                    ))
                }
                _ => None,
            },
        )
        .await;
    assert_eq!(turn.ok().stop_reason, acp::StopReason::EndTurn);
    assert_eq!(reads.len(), 1, "{reads:?}");
    assert_eq!(reads[0].session_id, sid);
    assert_eq!(reads[0].path, maia.path("r.txt"));
    let result = last_tool_result(&maia);
    assert!(result.contains("from editor buffer"), "{result}");
    assert!(!result.contains("from disk"), "{result}");
}

#[tokio::test]
async fn a_question_waited_for_typed_is_answered_cancelled_after_a_cancel() {
    let (mut maia, sid) = Maia::opened(Options::default()).await;
    maia.mock.push(mock::tool_calls_reply(&[(
        "w",
        "Write",
        json!({"file_path": "n.txt", "content": "x\n"}),
    )]));
    maia.mock.push(mock::text_reply("done"));
    let pending = maia.start(prompt_request(&sid, "go")).await;
    let (id, request) = maia.expect_request().await;
    let acp::AgentRequest::RequestPermissionRequest(question) = request else {
        panic!("not a permission question: {request:?}");
    };
    assert_eq!(question.session_id, sid);
    maia.send_notification(
        acp::AGENT_METHOD_NAMES.session_cancel,
        acp::CancelNotification::new(sid.clone()),
    )
    .await;
    let cancelled = acp::RequestPermissionResponse::new(acp::RequestPermissionOutcome::Cancelled);
    maia.reply(&id, cancelled.into()).await;
    let turn = maia.finish(pending, no_requests).await;
    assert_eq!(turn.ok().stop_reason, acp::StopReason::Cancelled);
    assert!(!maia.path("n.txt").exists());
}
