//! What tools do, in process: the tools a turn offers and the checkpoints
//! it takes follow what each tool declares it may change, and what a call
//! did to its session (a mode switch, a new task list, a question shown as
//! text, a sandbox denial) is applied after its batch.

use maia_core::store::{self, Record};
use maia_core::{ChoiceKind, Event, Mode, PermissionReply, PromptPart, StopReason, ToolStatus};
use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Harness, WAIT, message_texts, stop_of};

/// The names of the tools offered in model request `index`.
fn offered(h: &Harness, index: usize) -> Vec<String> {
    h.mock.requests()[index]["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The tool results sent in model request `index`, in order.
fn tool_results(h: &Harness, index: usize) -> Vec<String> {
    message_texts(&h.mock.requests()[index])
        .into_iter()
        .filter(|(role, _)| role == "tool")
        .map(|(_, text)| text)
        .collect()
}

/// The session's journal as written so far.
fn records(h: &Harness) -> Vec<Record> {
    let id = h.session().id().to_owned();
    let path = store::find(h.cwd(), &id).expect("the thread is saved").path;
    store::load(&path).expect("the journal loads").records
}

fn checkpoints(h: &Harness) -> usize {
    records(h)
        .iter()
        .filter(|r| matches!(r, Record::Checkpoint(_)))
        .count()
}

fn todos(items: &[&str]) -> Value {
    json!({"todos": items
        .iter()
        .map(|c| json!({"content": c, "status": "pending"}))
        .collect::<Vec<_>>()})
}

#[tokio::test]
async fn plan_mode_offers_the_tools_that_declare_they_change_nothing_and_reads_take_no_checkpoint()
{
    let mut h = Harness::start(json!({})).await;
    std::fs::write(h.path("notes.txt"), "hello\n").unwrap();
    h.session().set_mode(Mode::Plan).unwrap();
    h.mock.push(mock::tool_calls_reply(&[
        ("c1", "Read", json!({"file_path": "notes.txt"})),
        ("c2", "Glob", json!({"pattern": "*.txt"})),
    ]));
    h.mock.push(mock::text_reply("read"));
    let events = h
        .prompt_answering("look around", ChoiceKind::AllowOnce)
        .await;
    assert_eq!(stop_of(&events), StopReason::EndTurn);
    let planning = offered(&h, 0);
    for name in ["Read", "Glob", "Grep", "WebFetch", "TodoWrite", "AskUser"] {
        assert!(planning.contains(&name.to_owned()), "{name}: {planning:?}");
    }
    assert!(
        planning.contains(&"ExitPlanMode".to_owned()),
        "{planning:?}"
    );
    for name in ["Write", "Edit", "Bash", "TaskStop", "CurrentModel"] {
        assert!(!planning.contains(&name.to_owned()), "{name}: {planning:?}");
    }
    // Reads declare they change nothing: no checkpoint around them.
    assert_eq!(checkpoints(&h), 0, "{:?}", records(&h));

    // A tool that declares it changes files takes one.
    h.session().set_mode(Mode::Bypass).unwrap();
    h.mock.push(mock::tool_calls_reply(&[(
        "c3",
        "Write",
        json!({"file_path": "a.txt", "content": "x"}),
    )]));
    h.mock.push(mock::text_reply("written"));
    let events = h.prompt("write it").await;
    assert_eq!(stop_of(&events), StopReason::EndTurn);
    let all = offered(&h, 2);
    assert!(all.contains(&"Write".to_owned()) && !all.contains(&"ExitPlanMode".to_owned()));
    assert_eq!(std::fs::read_to_string(h.path("a.txt")).unwrap(), "x");
    assert!(checkpoints(&h) >= 1, "{:?}", records(&h));
}

#[tokio::test]
async fn an_approved_plan_switches_the_mode_after_its_batch() {
    let mut h = Harness::start(json!({})).await;
    h.session().set_mode(Mode::Plan).unwrap();
    h.mock.push(mock::tool_calls_reply(&[
        ("c1", "ExitPlanMode", json!({"plan": "1. write a.txt"})),
        // Not offered while planning, in the same batch as the approval.
        (
            "c2",
            "Write",
            json!({"file_path": "a.txt", "content": "early"}),
        ),
    ]));
    h.mock.push(mock::tool_calls_reply(&[(
        "c3",
        "Write",
        json!({"file_path": "a.txt", "content": "planned"}),
    )]));
    h.mock.push(mock::text_reply("done"));
    // "Yes, and accept edits".
    let events = h.prompt_answering("plan it", ChoiceKind::AllowAlways).await;
    assert_eq!(stop_of(&events), StopReason::EndTurn);
    let first = tool_results(&h, 1);
    assert!(first[0].contains("approved the plan"), "{first:?}");
    assert!(first[1].contains("Unknown tool `Write`"), "{first:?}");
    assert!(!offered(&h, 0).contains(&"Write".to_owned()));
    let next = offered(&h, 1);
    assert!(next.contains(&"Write".to_owned()), "{next:?}");
    assert!(!next.contains(&"ExitPlanMode".to_owned()), "{next:?}");
    assert_eq!(std::fs::read_to_string(h.path("a.txt")).unwrap(), "planned");

    // The switch is told once, after every call of its batch ended and
    // before the next batch is announced.
    let batch: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCall(view) => Some(view.id.clone()),
            _ => None,
        })
        .take(2)
        .collect();
    let switched: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, Event::ModeChanged(Mode::AcceptEdits)))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(switched.len(), 1, "{events:#?}");
    let ended = events
        .iter()
        .rposition(|e| {
            matches!(e, Event::ToolCallUpdate(p)
                if batch.contains(&p.id)
                    && matches!(p.status, Some(ToolStatus::Completed | ToolStatus::Failed)))
        })
        .unwrap();
    let next_batch = events
        .iter()
        .position(|e| matches!(e, Event::ToolCall(v) if !batch.contains(&v.id)))
        .unwrap();
    assert!(
        ended < switched[0] && switched[0] < next_batch,
        "{events:#?}"
    );
}

#[tokio::test]
async fn the_task_list_is_kept_after_its_batch_and_recorded_once_per_change() {
    let mut h = Harness::start(json!({})).await;
    h.session().set_mode(Mode::Bypass).unwrap();
    h.mock.push(mock::tool_calls_reply(&[
        ("c1", "TodoWrite", todos(&["a"])),
        ("c2", "TodoWrite", todos(&["a", "b"])),
    ]));
    // The same list again: no change.
    h.mock.push(mock::tool_calls_reply(&[(
        "c3",
        "TodoWrite",
        todos(&["a", "b"]),
    )]));
    h.mock.push(mock::text_reply("listed"));
    let events = h.prompt("plan the work").await;
    assert_eq!(stop_of(&events), StopReason::EndTurn);
    // Each call shows its list at once.
    let shown: Vec<usize> = events
        .iter()
        .filter_map(|e| match e {
            Event::Plan(list) => Some(list.len()),
            _ => None,
        })
        .collect();
    assert_eq!(shown.len(), 3, "{events:#?}");
    // The journal keeps the batch's final list, once.
    let saved: Vec<Vec<String>> = records(&h)
        .into_iter()
        .filter_map(|r| match r {
            Record::Plan { todos } => Some(todos.into_iter().map(|t| t.content).collect()),
            _ => None,
        })
        .collect();
    assert_eq!(saved, [vec!["a".to_owned(), "b".to_owned()]]);
}

#[tokio::test]
async fn a_question_shown_as_text_ends_the_turn_after_its_batch() {
    let mut h = Harness::start(json!({})).await;
    std::fs::write(h.path("notes.txt"), "hello\n").unwrap();
    h.session().set_mode(Mode::Bypass).unwrap();
    h.mock.push(mock::tool_calls_reply(&[
        (
            "c1",
            "AskUser",
            json!({"question": "Which colour?", "choices": ["red", "blue"]}),
        ),
        ("c2", "Read", json!({"file_path": "notes.txt"})),
    ]));
    h.mock.push(mock::text_reply("never asked for"));
    let events = h.prompt("ask me").await;
    assert_eq!(stop_of(&events), StopReason::EndTurn);
    // The whole batch ran; the model was not asked again.
    let finished = events
        .iter()
        .filter(
            |e| matches!(e, Event::ToolCallUpdate(p) if p.status == Some(ToolStatus::Completed)),
        )
        .count();
    assert_eq!(finished, 2, "{events:#?}");
    assert_eq!(h.mock.requests().len(), 1);
    // The next turn asks the model again, as usual.
    h.mock.push(mock::text_reply("red it is"));
    let events = h.prompt("red").await;
    assert_eq!(stop_of(&events), StopReason::EndTurn);
    assert_eq!(h.mock.requests().len(), 2);
}

#[tokio::test]
async fn a_sandbox_denial_is_remembered_after_its_batch() {
    let mut h = Harness::start(json!({})).await;
    let name = h.cwd().file_name().unwrap().to_string_lossy().into_owned();
    let outside = h.cwd().join(format!("../{name}-sandbox-probe.txt"));
    let command = format!("echo x > '{}'", outside.display());
    h.mock.push(mock::tool_calls_reply(&[(
        "c1",
        "Bash",
        json!({ "command": command }),
    )]));
    h.mock.push(mock::tool_calls_reply(&[(
        "c2",
        "Bash",
        json!({ "command": command }),
    )]));
    h.mock.push(mock::text_reply("blocked"));
    h.session()
        .prompt(vec![PromptPart::Text("write outside".to_owned())])
        .expect("session not busy");
    let mut asked: Vec<Vec<String>> = Vec::new();
    loop {
        let event = tokio::time::timeout(WAIT, h.events.recv())
            .await
            .expect("the turn ends")
            .expect("the session runs");
        match event {
            Event::Permission(request) => {
                asked.push(request.options.iter().map(|o| o.id.clone()).collect());
                // The first run is allowed (in the sandbox), the second refused.
                let reply = match asked.len() {
                    1 => PermissionReply::Selected {
                        option: "allow_once".to_owned(),
                        reason: None,
                    },
                    _ => PermissionReply::Rejected { reason: None },
                };
                let _ = request.reply.send(reply);
            }
            Event::TurnEnded(stop) => {
                assert_eq!(stop, StopReason::EndTurn);
                break;
            }
            _ => {}
        }
    }
    let leaked = outside.exists();
    let _ = std::fs::remove_file(&outside);
    assert!(
        !leaked,
        "the sandbox let the command write out of the project"
    );
    let first = tool_results(&h, 1);
    assert!(first[0].contains("MAIA sandbox"), "{first:?}");
    // After the batch that was denied, the same command is asked with one
    // more choice: one run without the sandbox.
    assert_eq!(asked.len(), 2, "{asked:?}");
    let unsandboxed = |ids: &Vec<String>| ids.iter().any(|id| id.contains("unsandboxed"));
    assert!(
        !unsandboxed(&asked[0]) && unsandboxed(&asked[1]),
        "{asked:?}"
    );
}
