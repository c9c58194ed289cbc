//! A command while it runs ([`Event::Command`]: its start, its output
//! before it ends, its exit) and what commands change on disk
//! ([`Event::FilesChanged`]: deletes, renames, modes, binaries), given to
//! the call that ran them.

use maia_core::{
    ChoiceKind, CommandProgress, Event, FileOperation, PermissionReply, PromptPart, ToolStatus,
};
use maia_test_support as mock;
use serde_json::json;

use crate::harness::{Harness, WAIT, message_texts};

/// The id the session gave the call of tool `name`.
fn call_of(events: &[Event], name: &str) -> String {
    events
        .iter()
        .find_map(|e| match e {
            Event::ToolCall(view) if view.name == name => Some(view.id.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no {name} call: {events:#?}"))
}

/// Answers a permission question with "allow once"; other events pass.
fn allow(event: Event) -> Event {
    match event {
        Event::Permission(request) => {
            let option = request
                .options
                .iter()
                .find(|o| o.kind == ChoiceKind::AllowOnce)
                .map(|o| o.id.clone())
                .unwrap_or_default();
            let shown = request.tool_call.clone();
            let _ = request.reply.send(PermissionReply::Selected {
                option,
                reason: None,
            });
            Event::ToolCall(shown)
        }
        other => other,
    }
}

#[tokio::test]
async fn a_command_streams_its_output_before_it_ends_and_its_result_is_unchanged() {
    let mut h = Harness::start(json!({})).await;
    let command = "echo one; until [ -e go ]; do sleep 0.02; done; echo two";
    h.mock.push(mock::tool_calls_reply(&[(
        "c1",
        "Bash",
        json!({ "command": command }),
    )]));
    h.mock.push(mock::text_reply("ran"));
    h.session()
        .prompt(vec![PromptPart::Text("run it".to_owned())])
        .expect("session not busy");
    let mut seen = Vec::new();
    let mut released = false;
    loop {
        let event = tokio::time::timeout(WAIT, h.events.recv())
            .await
            .unwrap_or_else(|_| panic!("the turn did not end: {seen:#?}"))
            .expect("the session runs");
        let event = allow(event);
        if let Event::Command {
            progress: CommandProgress::Output(bytes),
            ..
        } = &event
            && !released
        {
            // The first part arrived while the command waits for `go`.
            assert_eq!(bytes, b"one\n");
            assert!(
                !seen.iter().any(|e| matches!(
                    e,
                    Event::Command {
                        progress: CommandProgress::Exited { .. },
                        ..
                    }
                )),
                "{seen:#?}"
            );
            std::fs::write(h.path("go"), "").unwrap();
            released = true;
        }
        let ended = matches!(event, Event::TurnEnded(_));
        seen.push(event);
        if ended {
            break;
        }
    }
    assert!(released, "no output before the end: {seen:#?}");
    let call = call_of(&seen, "Bash");
    let progress: Vec<&CommandProgress> = seen
        .iter()
        .filter_map(|e| match e {
            Event::Command {
                tool_call_id,
                progress,
            } if *tool_call_id == call => Some(progress),
            _ => None,
        })
        .collect();
    assert_eq!(
        progress.first(),
        Some(&&CommandProgress::Started {
            command: command.to_owned(),
            cwd: h.cwd().to_path_buf(),
        })
    );
    let output: Vec<u8> = progress
        .iter()
        .filter_map(|p| match p {
            CommandProgress::Output(bytes) => Some(bytes.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(output, b"one\ntwo\n");
    assert_eq!(
        progress.last(),
        Some(&&CommandProgress::Exited {
            code: Some(0),
            signal: None
        })
    );
    // The exit comes before the call's end.
    let exited = seen
        .iter()
        .position(|e| {
            matches!(
                e,
                Event::Command {
                    progress: CommandProgress::Exited { .. },
                    ..
                }
            )
        })
        .unwrap();
    let completed = seen
        .iter()
        .position(
            |e| matches!(e, Event::ToolCallUpdate(p) if p.status == Some(ToolStatus::Completed)),
        )
        .unwrap();
    assert!(exited < completed);
    // The model sees what it saw before the stream existed.
    let results: Vec<String> = message_texts(&h.mock.requests()[1])
        .into_iter()
        .filter(|(role, _)| role == "tool")
        .map(|(_, text)| text)
        .collect();
    assert_eq!(results, vec!["one\ntwo\nExit code: 0".to_owned()]);
}

#[tokio::test]
async fn a_commands_file_changes_go_to_its_call_and_a_writes_do_not() {
    let mut h = Harness::start(json!({})).await;
    let lines: String = (1..=20).map(|n| format!("line {n}\n")).collect();
    std::fs::write(h.path("gone.txt"), "bye\n").unwrap();
    std::fs::write(h.path("old.txt"), &lines).unwrap();
    // One batch: a Write (its change is its own diff) and a command.
    h.mock.push(mock::tool_calls_reply(&[
        (
            "w1",
            "Write",
            json!({"file_path": "written.txt", "content": "mine\n"}),
        ),
        (
            "c1",
            "Bash",
            json!({"command": "rm gone.txt && mv old.txt new.txt && printf 'a\\000b' > blob.bin"}),
        ),
    ]));
    h.mock.push(mock::text_reply("done"));
    let events = h.prompt_answering("tidy", ChoiceKind::AllowOnce).await;
    assert!(h.path("blob.bin").exists() && h.path("written.txt").exists());
    let told: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::FilesChanged {
                tool_call_id,
                changes,
                patch,
            } => Some((tool_call_id, changes, patch)),
            _ => None,
        })
        .collect();
    assert_eq!(told.len(), 1, "{events:#?}");
    let (id, changes, patch) = &told[0];
    assert_eq!(**id, call_of(&events, "Bash"));
    let mut got: Vec<(String, FileOperation, bool)> = changes
        .iter()
        .map(|c| {
            let rel = c.path.strip_prefix(h.cwd()).unwrap();
            (
                rel.to_string_lossy().into_owned(),
                c.operation.clone(),
                c.binary,
            )
        })
        .collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        got,
        vec![
            ("blob.bin".to_owned(), FileOperation::Added, true),
            ("gone.txt".to_owned(), FileOperation::Deleted, false),
            (
                "new.txt".to_owned(),
                FileOperation::Moved {
                    from: h.path("old.txt")
                },
                false
            ),
        ]
    );
    let patch = patch.as_deref().unwrap();
    assert!(patch.contains("deleted file mode 100644"), "{patch}");
    assert!(patch.contains("similarity index 100%"), "{patch}");
    assert!(!patch.contains("written.txt"), "{patch}");
}

/// A command that makes more files than a command line can name (an
/// `npm install`), in a batch with a Write: its file states are still told.
#[tokio::test]
async fn a_command_that_changes_more_paths_than_a_command_line_holds_is_told() {
    let mut h = Harness::start(json!({})).await;
    // 11,000 names of about 200 bytes: over the 2 MiB of a command line.
    let script = "mkdir many && cd many && seq 1 11000 | sed 's/$/_'\"$(printf 'x%.0s' $(seq 1 190))\"'/' | xargs touch";
    h.mock.push(mock::tool_calls_reply(&[
        (
            "w1",
            "Write",
            json!({"file_path": "written.txt", "content": "mine\n"}),
        ),
        ("c1", "Bash", json!({"command": script})),
    ]));
    h.mock.push(mock::text_reply("done"));
    let events = h.prompt_answering("install", ChoiceKind::AllowOnce).await;
    assert_eq!(std::fs::read_dir(h.path("many")).unwrap().count(), 11_000);
    let told: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::FilesChanged {
                tool_call_id,
                changes,
                ..
            } => Some((tool_call_id, changes)),
            _ => None,
        })
        .collect();
    assert_eq!(told.len(), 1, "nothing told");
    assert_eq!(*told[0].0, call_of(&events, "Bash"));
    assert_eq!(told[0].1.len(), 11_000);
    assert!(
        told[0].1.iter().all(|c| c.path.starts_with(h.path("many"))),
        "the Write's file is the Write's"
    );
}
