//! The turn loop and the permission sequence, in process: what the model
//! is sent, what runs, what the user is shown.

use maia_core::{ChoiceKind, Event, Mode, StopReason, ToolStatus};
use maia_test_support as mock;
use serde_json::json;

use crate::harness::{Harness, agent_text, message_texts, stop_of};

/// The final status of each tool call in `events`, in order of appearance.
fn final_statuses(events: &[Event]) -> Vec<(String, ToolStatus)> {
    let mut order: Vec<String> = Vec::new();
    let mut status = std::collections::HashMap::new();
    for event in events {
        match event {
            Event::ToolCall(view) => {
                if !order.contains(&view.id) {
                    order.push(view.id.clone());
                }
                status.insert(view.id.clone(), view.status);
            }
            Event::ToolCallUpdate(patch) => {
                if let Some(s) = patch.status {
                    status.insert(patch.id.clone(), s);
                }
            }
            _ => {}
        }
    }
    order
        .into_iter()
        .map(|id| {
            let s = status[&id];
            (id, s)
        })
        .collect()
}

#[tokio::test]
async fn a_streamed_answer_ends_the_turn_and_is_saved() {
    let mut h = Harness::start(json!({})).await;
    h.mock.push(mock::text_chunks(
        &["Hel", "lo ", "there"],
        std::time::Duration::ZERO,
    ));
    let events = h.prompt("hi").await;
    assert_eq!(agent_text(&events), "Hello there");
    assert_eq!(stop_of(&events), StopReason::EndTurn);
    h.restart().await;
    h.mock.push(mock::text_reply("again"));
    h.prompt("and?").await;
    let sent = message_texts(h.mock.requests().last().unwrap());
    let roles: Vec<_> = sent.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert_eq!(sent[2].1, "Hello there");
}

#[tokio::test]
async fn a_tool_result_goes_back_to_the_model() {
    let mut h = Harness::start(json!({})).await;
    std::fs::write(h.path("notes.txt"), "the secret is KIWI\n").unwrap();
    h.session().set_mode(Mode::Bypass);
    h.mock.push(mock::tool_calls_reply(&[(
        "c1",
        "Read",
        json!({"file_path": "notes.txt"}),
    )]));
    h.mock.push(mock::text_reply("it is KIWI"));
    let events = h.prompt("what is the secret?").await;
    assert_eq!(stop_of(&events), StopReason::EndTurn);
    assert_eq!(
        final_statuses(&events)
            .into_iter()
            .map(|(_, s)| s)
            .collect::<Vec<_>>(),
        [ToolStatus::Completed]
    );
    let second = message_texts(&h.mock.requests()[1]);
    assert!(
        second
            .iter()
            .any(|(role, text)| role == "tool" && text.contains("KIWI")),
        "{second:#?}"
    );
}

#[tokio::test]
async fn a_write_asked_and_allowed_once_runs() {
    let mut h = Harness::start(json!({})).await;
    h.mock.push(mock::tool_calls_reply(&[(
        "w1",
        "Write",
        json!({"file_path": "out.txt", "content": "written\n"}),
    )]));
    h.mock.push(mock::text_reply("done"));
    let events = h.prompt_answering("write it", ChoiceKind::AllowOnce).await;
    assert_eq!(stop_of(&events), StopReason::EndTurn);
    assert_eq!(
        std::fs::read_to_string(h.path("out.txt")).unwrap(),
        "written\n"
    );
}

#[tokio::test]
async fn a_rejected_write_does_not_run_and_the_model_is_told() {
    let mut h = Harness::start(json!({})).await;
    h.mock.push(mock::tool_calls_reply(&[(
        "w1",
        "Write",
        json!({"file_path": "out.txt", "content": "written\n"}),
    )]));
    h.mock.push(mock::text_reply("ok, not written"));
    let events = h.prompt_answering("write it", ChoiceKind::RejectOnce).await;
    assert_eq!(stop_of(&events), StopReason::EndTurn);
    assert!(!h.path("out.txt").exists(), "a rejected write ran");
    let second = message_texts(&h.mock.requests()[1]);
    let result = second
        .iter()
        .find(|(role, _)| role == "tool")
        .expect("the call got a result");
    assert!(result.1.contains("refused"), "{result:?}");
}

#[tokio::test]
async fn read_only_mode_refuses_a_write_without_asking() {
    let mut h = Harness::start(json!({})).await;
    h.session().set_mode(Mode::ReadOnly);
    h.mock.push(mock::tool_calls_reply(&[(
        "w1",
        "Write",
        json!({"file_path": "out.txt", "content": "x"}),
    )]));
    h.mock.push(mock::text_reply("cannot"));
    // A question would go unanswered and the wait time out.
    let events = h.prompt("write it").await;
    assert!(!events.iter().any(|e| matches!(e, Event::Permission(_))));
    assert!(!h.path("out.txt").exists());
    assert_eq!(
        final_statuses(&events)
            .into_iter()
            .map(|(_, s)| s)
            .collect::<Vec<_>>(),
        [ToolStatus::Failed]
    );
}

#[tokio::test]
async fn edits_of_one_file_in_one_batch_apply_in_order() {
    let mut h = Harness::start(json!({})).await;
    std::fs::write(h.path("f.txt"), "one\n").unwrap();
    h.session().set_mode(Mode::Bypass);
    h.mock.push(mock::tool_calls_reply(&[(
        "r",
        "Read",
        json!({"file_path": "f.txt"}),
    )]));
    h.mock.push(mock::tool_calls_reply(&[
        (
            "e1",
            "Edit",
            json!({"file_path": "f.txt", "old_string": "one", "new_string": "two"}),
        ),
        (
            "e2",
            "Edit",
            json!({"file_path": "f.txt", "old_string": "two", "new_string": "three"}),
        ),
    ]));
    h.mock.push(mock::text_reply("done"));
    let events = h.prompt("edit twice").await;
    assert_eq!(stop_of(&events), StopReason::EndTurn);
    assert_eq!(std::fs::read_to_string(h.path("f.txt")).unwrap(), "three\n");
}

/// The calls of one response run side by side: a command that waits for a
/// file finishes because the Write of the same batch that makes the file
/// is not queued behind it (run one after the other, the turn would hang).
#[tokio::test]
async fn a_waiting_call_does_not_hold_back_the_rest_of_its_batch() {
    let mut h = Harness::start(json!({})).await;
    h.session().set_mode(Mode::Bypass);
    h.mock.push(mock::tool_calls_reply(&[
        (
            "wait",
            "Bash",
            json!({"command": "while [ ! -f ready.flag ]; do sleep 0.05; done; echo saw it"}),
        ),
        (
            "make",
            "Write",
            json!({"file_path": "ready.flag", "content": "go\n"}),
        ),
    ]));
    h.mock.push(mock::text_reply("done"));
    let events = h.prompt("both at once").await;
    assert_eq!(stop_of(&events), StopReason::EndTurn);
    assert_eq!(
        final_statuses(&events)
            .into_iter()
            .map(|(_, s)| s)
            .collect::<Vec<_>>(),
        [ToolStatus::Completed, ToolStatus::Completed]
    );
    let second = message_texts(&h.mock.requests()[1]);
    assert!(
        second
            .iter()
            .any(|(role, text)| role == "tool" && text.contains("saw it")),
        "{second:#?}"
    );
}

#[tokio::test]
async fn a_failed_model_request_says_the_turn_failed_before_it_ends() {
    let mut h = Harness::start(json!({"llm_max_retries": 0})).await;
    h.mock.push(mock::error_reply(400, "no such model"));
    let events = h.prompt("hi").await;
    let n = events.len();
    assert!(
        matches!(&events[n - 2], Event::TurnFailed(m) if m.contains("Model request failed")),
        "{events:#?}"
    );
    assert!(agent_text(&events).contains("**Model request failed**"));
    assert_eq!(stop_of(&events), StopReason::EndTurn);
    // A turn that went well says nothing of the kind.
    h.mock.push(mock::text_reply("fine"));
    let events = h.prompt("again").await;
    assert!(
        !events.iter().any(|e| matches!(e, Event::TurnFailed(_))),
        "{events:#?}"
    );
}
