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
    h.session().set_mode(Mode::Bypass).unwrap();
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
    h.session().set_mode(Mode::ReadOnly).unwrap();
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
    h.session().set_mode(Mode::Bypass).unwrap();
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
    h.session().set_mode(Mode::Bypass).unwrap();
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

#[tokio::test]
async fn an_answer_with_usage_is_measured_by_the_meter() {
    let mut h = Harness::start(json!({})).await;
    h.mock.push(mock::text_reply("measured"));
    let events = h.prompt("hi").await;
    assert_eq!(stop_of(&events), StopReason::EndTurn);
    let context = agent_text(&h.prompt("/context").await);
    let last = format!(
        "last response: prompt {} + answer {} tokens",
        mock::MOCK_PROMPT_TOKENS,
        mock::MOCK_COMPLETION_TOKENS
    );
    assert!(context.contains(&last), "{context}");
    assert!(
        context.contains("measured: the server's last usage"),
        "{context}"
    );
    assert!(
        context.contains(
            "tool calls written as text: 0 run as calls, 0 corrections sent, 0 shown as text"
        ),
        "{context}"
    );
}

#[tokio::test]
async fn a_length_limited_answer_is_kept_and_ends_the_turn_at_max_tokens() {
    let mut h = Harness::start(json!({})).await;
    // Cut short: not taken for a tool call written as text, not retried.
    h.mock.push(mock::finish_reply("Read(file_path=", "length"));
    let events = h.prompt("hi").await;
    assert_eq!(stop_of(&events), StopReason::MaxTokens);
    assert_eq!(h.mock.requests().len(), 1);
    h.mock.push(mock::text_reply("again"));
    h.prompt("go on").await;
    let sent = message_texts(h.mock.requests().last().unwrap());
    let roles: Vec<_> = sent.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert_eq!(sent[2].1, "Read(file_path=");
}

#[tokio::test]
async fn a_mode_switch_from_the_client_mid_turn_rebuilds_the_round_s_tools() {
    let mut h = Harness::start(json!({})).await;
    h.session().set_mode(Mode::Bypass).unwrap();
    // The tool call streams slowly: the switch arrives while it does (a
    // call of no tool: nothing to ask, whatever the mode).
    let mock::Reply::Stream { pieces, .. } =
        mock::tool_calls_reply(&[("c1", "NoSuchTool", json!({}))])
    else {
        panic!("a streamed reply");
    };
    h.mock.push(mock::Reply::Stream {
        pieces,
        gap: std::time::Duration::from_millis(100),
    });
    h.mock.push(mock::text_reply("done"));
    h.session()
        .prompt(vec![maia_core::PromptPart::Text("read it".into())])
        .expect("session not busy");
    let started = std::time::Instant::now();
    while h.mock.requests().is_empty() {
        assert!(started.elapsed() < crate::harness::WAIT, "no request");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    h.session().set_mode(Mode::Plan).unwrap();
    let events = h.until_turn_ended().await;
    assert_eq!(stop_of(&events), StopReason::EndTurn);
    let offered = |index: usize| -> Vec<String> {
        h.mock.requests()[index]["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(offered(0).contains(&"Write".to_owned()));
    let next = offered(1);
    assert!(!next.contains(&"Write".to_owned()), "{next:?}");
    assert!(next.contains(&"ExitPlanMode".to_owned()), "{next:?}");
}
