//! The tee's permission split: one question becomes two, the first answer
//! is the engine's, and a connection that goes away never decides.

use maia_core::{
    ChoiceKind, Event, PermissionChoice, PermissionReply, PermissionRequest, ToolCallView,
    ToolStatus,
};
use tokio::sync::oneshot;

use super::tee;

fn question() -> (PermissionRequest, oneshot::Receiver<PermissionReply>) {
    let (reply, engine) = oneshot::channel();
    let request = PermissionRequest {
        tool_call: ToolCallView {
            id: "call_1".into(),
            name: "Write".into(),
            title: "Write out.txt".into(),
            kind: None,
            locations: Vec::new(),
            raw_input: serde_json::Value::Null,
            status: ToolStatus::Pending,
            content: Vec::new(),
        },
        options: vec![PermissionChoice {
            id: "allow".into(),
            label: "Allow once".into(),
            kind: ChoiceKind::AllowOnce,
        }],
        reply,
    };
    (request, engine)
}

fn chose(option: &str) -> PermissionReply {
    PermissionReply::Selected {
        option: option.into(),
        reason: None,
    }
}

fn asked(event: Event) -> PermissionRequest {
    match event {
        Event::Permission(request) => request,
        other => panic!("not a question: {other:?}"),
    }
}

#[tokio::test]
async fn the_first_answer_is_the_engines_and_the_second_changes_nothing() {
    let (tee, mut other) = tee();
    let (request, engine) = question();
    let ours = asked(tee.split(Event::Permission(request)));
    let theirs = asked(other.recv().await.unwrap());
    theirs.reply.send(chose("theirs")).unwrap();
    assert_eq!(engine.await.unwrap(), chose("theirs"));
    // The other question is withdrawn: its reply channel is closed.
    assert!(ours.reply.send(chose("ours")).is_err());
}

#[tokio::test]
async fn a_question_the_gone_connection_dropped_is_still_answered_here() {
    let (tee, mut other) = tee();
    let (request, engine) = question();
    let ours = asked(tee.split(Event::Permission(request)));
    // The other connection took the question and went away unanswered.
    drop(asked(other.recv().await.unwrap()));
    ours.reply.send(chose("ours")).unwrap();
    assert_eq!(engine.await.unwrap(), chose("ours"));
}

#[tokio::test]
async fn with_the_other_connection_gone_the_question_is_asked_here_alone() {
    let (tee, other) = tee();
    drop(other);
    let (request, engine) = question();
    let ours = asked(tee.split(Event::Permission(request)));
    ours.reply.send(chose("ours")).unwrap();
    assert_eq!(engine.await.unwrap(), chose("ours"));
}

#[tokio::test]
async fn both_connections_gone_give_the_engine_no_answer() {
    let (tee, mut other) = tee();
    let (request, engine) = question();
    let ours = asked(tee.split(Event::Permission(request)));
    drop(asked(other.recv().await.unwrap()));
    drop(ours);
    // Dropped unanswered, which the engine counts as cancelled.
    assert!(engine.await.is_err());
}
