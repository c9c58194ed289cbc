//! The session's state as a reader sees it (`SessionHandle::state`,
//! `StateReader`): it follows the session (a mode an approved plan
//! chose, a model `/model` chose, the changes the handle sent), and its
//! running turn is the one owner of "a turn is running": a prompt while
//! one runs is refused there.

use maia_core::{Busy, ChoiceKind, Event, Mode, PermissionReply, PromptPart, StopReason};
use maia_test_support as mock;
use serde_json::json;

use crate::harness::{Harness, WAIT, stop_of};

fn text(text: &str) -> Vec<PromptPart> {
    vec![PromptPart::Text(text.to_owned())]
}

#[tokio::test]
async fn a_reader_follows_the_mode_the_session_switches_to_itself() {
    let mut h = Harness::start(json!({})).await;
    let reader = h.session().state_reader();
    assert_eq!(reader.get().mode, Mode::Default);
    assert_eq!(reader.get().running, None);
    h.session().set_mode(Mode::Plan).unwrap();
    assert_eq!(reader.get().mode, Mode::Plan);
    h.mock.push(mock::tool_calls_reply(&[(
        "c1",
        "ExitPlanMode",
        json!({"plan": "1. write a.txt"}),
    )]));
    h.mock.push(mock::text_reply("planned"));
    // "Yes, and accept edits": the session switches the mode itself.
    let events = h.prompt_answering("plan it", ChoiceKind::AllowAlways).await;
    assert_eq!(stop_of(&events), StopReason::EndTurn);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::ModeChanged(Mode::AcceptEdits))),
        "{events:#?}"
    );
    let state = reader.get();
    assert_eq!(state.mode, Mode::AcceptEdits);
    assert_eq!(state.running, None);
    assert_eq!(h.session().state(), state);
}

#[tokio::test]
async fn a_reader_follows_the_model_the_session_chooses() {
    let mut h = Harness::start(json!({})).await;
    let mut reader = h.session().state_reader();
    assert_eq!(reader.get().model.as_deref(), Some("mock-model"));
    h.mock
        .set_models(vec![json!({"id": "mock-model"}), json!({"id": "other"})]);
    let events = h.prompt("/model other").await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::ModelChanged(m) if m == "other")),
        "{events:#?}"
    );
    assert_eq!(reader.get().model.as_deref(), Some("other"));
    // A change the handle sends shows at once, to every reader.
    h.session().set_model("mock-model".to_owned()).unwrap();
    assert!(tokio::time::timeout(WAIT, reader.changed()).await.unwrap());
    assert_eq!(reader.get().model.as_deref(), Some("mock-model"));
}

#[tokio::test]
async fn a_prompt_while_a_turn_runs_is_refused_by_the_session_state() {
    let mut h = Harness::start(json!({})).await;
    h.mock.push(mock::tool_calls_reply(&[(
        "w1",
        "Write",
        json!({"file_path": "out.txt", "content": "written\n"}),
    )]));
    h.mock.push(mock::text_reply("done"));
    let first = h.session().prompt(text("write it")).unwrap();
    assert_eq!(h.session().state().running, Some(first));
    assert!(h.session().is_busy());
    // The turn waits for the permission answer: it runs.
    let mut seen = Vec::new();
    let request = loop {
        let event = tokio::time::timeout(WAIT, h.events.recv())
            .await
            .unwrap()
            .unwrap();
        match event {
            Event::Permission(request) => break request,
            other => seen.push(other),
        }
    };
    // Its events are told as the prompt's turn (after the start-up notices).
    let started: Vec<_> = seen
        .iter()
        .filter_map(|e| match e {
            Event::TurnStarted(t) => Some(*t),
            _ => None,
        })
        .collect();
    assert_eq!(started, vec![first], "{seen:#?}");
    assert_eq!(h.session().prompt(text("and this")), Err(Busy));
    assert_eq!(h.session().state().running, Some(first));
    let option = request
        .options
        .iter()
        .find(|o| o.kind == ChoiceKind::AllowOnce)
        .unwrap()
        .id
        .clone();
    let _ = request.reply.send(PermissionReply::Selected {
        option,
        reason: None,
    });
    let events = h.until_turn_ended().await;
    assert_eq!(stop_of(&events), StopReason::EndTurn);
    // Idle once the turn's last event was sent: the next prompt is taken.
    assert_eq!(h.session().state().running, None);
    assert!(!h.session().is_busy());
    h.mock.push(mock::text_reply("again"));
    let second = h.session().prompt(text("again")).unwrap();
    assert!(second > first);
    let events = h.until_turn_ended().await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::TurnStarted(t) if *t == second)),
        "{events:#?}"
    );
}
