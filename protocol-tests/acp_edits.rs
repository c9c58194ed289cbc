//! Edits that survive the editor, through the binary: an `Edit` whose file
//! another writer changed since the model read it applies when its
//! `old_string` still matches exactly once and says which lines changed;
//! it is refused when the match is gone. `MultiEdit`: several replacements,
//! all or none, one permission and one diff, under the same rules.

use serde_json::{Value, json};

use crate::harness::answers::{recording, select};
use crate::harness::client::acp::{self, PermissionOptionKind, StopReason, ToolCallContent};
use crate::harness::{Maia, Options, last_tool_result};

const ALLOW_ONCE: PermissionOptionKind = PermissionOptionKind::AllowOnce;

async fn allowed() -> (Maia, acp::SessionId) {
    Maia::opened(Options {
        settings: json!({"permissions": {"allow": ["Read", "Edit", "Bash"]}}),
        ..Options::default()
    })
    .await
}

/// Read, then another writer (a command the model does not track, as a
/// formatter or the editor would) changes the file, then the Edit.
async fn read_write_edit(
    maia: &mut Maia,
    sid: &acp::SessionId,
    writer: &str,
    edit: Value,
) -> String {
    let steps = [
        ("r", "Read", json!({"file_path": "f.txt"})),
        ("w", "Bash", json!({"command": writer})),
        ("e", "Edit", edit),
    ];
    let turn = maia
        .scripted_steps(sid, "edit it", &steps, select(ALLOW_ONCE))
        .await;
    assert_eq!(turn.ok().stop_reason, StopReason::EndTurn);
    last_tool_result(maia)
}

#[tokio::test]
async fn an_edit_racing_an_outside_writer_applies_on_a_unique_match_and_says_what_changed() {
    let (mut maia, sid) = allowed().await;
    let path = maia.path("f.txt");
    std::fs::write(&path, "fn a() {}\nfn b() {}\n").unwrap();
    let edit = json!({"file_path": "f.txt", "old_string": "fn b() {}", "new_string": "fn c() {}"});
    let result = read_write_edit(
        &mut maia,
        &sid,
        "printf '// header\\nfn a() {}\\nfn b() {}\\n' > f.txt",
        edit,
    )
    .await;
    assert!(result.starts_with("Edited"), "{result}");
    assert!(
        result.contains("changed outside") && result.contains("line 1 new or changed"),
        "{result}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "// header\nfn a() {}\nfn c() {}\n"
    );
}

#[tokio::test]
async fn an_edit_whose_match_an_outside_writer_removed_is_refused() {
    let (mut maia, sid) = allowed().await;
    let path = maia.path("f.txt");
    std::fs::write(&path, "fn a() {}\nfn b() {}\n").unwrap();
    let edit = json!({"file_path": "f.txt", "old_string": "fn b() {}", "new_string": "fn c() {}"});
    let result = read_write_edit(
        &mut maia,
        &sid,
        "printf 'fn b() {}\\nfn b() {}\\n' > f.txt",
        edit,
    )
    .await;
    assert!(result.contains("2 times"), "{result}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "fn b() {}\nfn b() {}\n"
    );
}

// ---------------------------------------------------------------- MultiEdit

/// Read `f.txt`, then one MultiEdit; answers every permission request
/// with `kind` and returns (the MultiEdit's result, permission requests
/// seen).
async fn read_then_multiedit(
    maia: &mut Maia,
    sid: &acp::SessionId,
    edits: Value,
    kind: PermissionOptionKind,
) -> (String, Vec<acp::RequestPermissionRequest>) {
    let steps = [
        ("r", "Read", json!({"file_path": "f.txt"})),
        (
            "m",
            "MultiEdit",
            json!({"file_path": "f.txt", "edits": edits}),
        ),
    ];
    let mut asked = Vec::new();
    let turn = maia
        .scripted_steps(sid, "edit it", &steps, recording(&mut asked, select(kind)))
        .await;
    assert_eq!(turn.ok().stop_reason, StopReason::EndTurn);
    (last_tool_result(maia), asked)
}

async fn with_rules(allow: &[&str], deny: &[&str]) -> (Maia, acp::SessionId) {
    Maia::opened(Options {
        settings: json!({"permissions": {"allow": allow, "deny": deny}}),
        ..Options::default()
    })
    .await
}

#[tokio::test]
async fn a_multiedit_asks_once_shows_one_diff_and_applies_every_edit() {
    let (mut maia, sid) = with_rules(&["Read"], &[]).await;
    let path = maia.path("f.txt");
    std::fs::write(&path, "one\ntwo\nthree\n").unwrap();
    let edits = json!([
        {"old_string": "one", "new_string": "ONE"},
        {"old_string": "three", "new_string": "THREE"},
    ]);
    let (result, asked) = read_then_multiedit(&mut maia, &sid, edits, ALLOW_ONCE).await;
    assert!(result.contains("applied 2 edits"), "{result}");
    assert_eq!(asked.len(), 1, "one permission: {asked:?}");
    let diffs: Vec<_> = asked[0]
        .tool_call
        .fields
        .content
        .iter()
        .flatten()
        .filter_map(|c| match c {
            ToolCallContent::Diff(diff) => Some(diff),
            _ => None,
        })
        .collect();
    assert_eq!(diffs.len(), 1, "{:?}", asked[0]);
    assert_eq!(diffs[0].old_text.as_deref(), Some("one\ntwo\nthree\n"));
    assert_eq!(diffs[0].new_text, "ONE\ntwo\nTHREE\n");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "ONE\ntwo\nTHREE\n");
    // The model is offered the tool.
    let tools = maia.mock.requests()[0]["tools"].to_string();
    assert!(tools.contains("\"MultiEdit\""), "{tools}");
}

#[tokio::test]
async fn a_multiedit_with_one_failing_edit_changes_nothing_and_asks_nothing() {
    let (mut maia, sid) = with_rules(&["Read"], &[]).await;
    let path = maia.path("f.txt");
    std::fs::write(&path, "one\ntwo\n").unwrap();
    let edits = json!([
        {"old_string": "one", "new_string": "ONE"},
        {"old_string": "missing", "new_string": "x"},
    ]);
    let (result, asked) = read_then_multiedit(&mut maia, &sid, edits, ALLOW_ONCE).await;
    assert!(
        result.contains("Edit 2 of 2") && result.contains("not found"),
        "{result}"
    );
    assert!(asked.is_empty(), "nothing to approve: {asked:?}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\ntwo\n");
}

#[tokio::test]
async fn edit_rules_cover_multiedit() {
    // An allow rule on Edit lets it through without a question.
    let (mut maia, sid) = with_rules(&["Read", "Edit(f.txt)"], &[]).await;
    std::fs::write(maia.path("f.txt"), "a\n").unwrap();
    let edits = json!([{"old_string": "a", "new_string": "b"}]);
    let (result, asked) = read_then_multiedit(&mut maia, &sid, edits, ALLOW_ONCE).await;
    assert!(result.starts_with("Edited"), "{result}");
    assert!(asked.is_empty(), "{asked:?}");
    assert_eq!(std::fs::read_to_string(maia.path("f.txt")).unwrap(), "b\n");

    // A deny rule on Edit refuses it.
    let (mut maia, sid) = with_rules(&["Read"], &["Edit(f.txt)"]).await;
    std::fs::write(maia.path("f.txt"), "a\n").unwrap();
    let edits = json!([{"old_string": "a", "new_string": "b"}]);
    let (result, asked) = read_then_multiedit(&mut maia, &sid, edits, ALLOW_ONCE).await;
    assert!(!result.starts_with("Edited"), "{result}");
    assert!(asked.is_empty(), "{asked:?}");
    assert_eq!(std::fs::read_to_string(maia.path("f.txt")).unwrap(), "a\n");

    // A MultiEdit rule names only MultiEdit.
    let (mut maia, sid) = with_rules(&["Read", "MultiEdit(f.txt)"], &[]).await;
    std::fs::write(maia.path("f.txt"), "a\n").unwrap();
    let edits = json!([{"old_string": "a", "new_string": "b"}]);
    let (_, asked) = read_then_multiedit(&mut maia, &sid, edits, ALLOW_ONCE).await;
    assert!(asked.is_empty(), "{asked:?}");
}

#[tokio::test]
async fn a_multiedit_racing_an_outside_writer_follows_the_edit_rules() {
    let (mut maia, sid) = allowed().await;
    let path = maia.path("f.txt");
    std::fs::write(&path, "fn a() {}\nfn b() {}\n").unwrap();
    let steps = [
        ("r", "Read", json!({"file_path": "f.txt"})),
        (
            "w",
            "Bash",
            json!({"command": "printf '// header\\nfn a() {}\\nfn b() {}\\n' > f.txt"}),
        ),
        (
            "m",
            "MultiEdit",
            json!({"file_path": "f.txt", "edits": [
                {"old_string": "fn a() {}", "new_string": "fn x() {}"},
                {"old_string": "fn b() {}", "new_string": "fn y() {}"},
            ]}),
        ),
    ];
    let turn = maia
        .scripted_steps(&sid, "edit it", &steps, select(ALLOW_ONCE))
        .await;
    assert_eq!(turn.ok().stop_reason, StopReason::EndTurn);
    let result = last_tool_result(&maia);
    assert!(
        result.contains("applied 2 edits") && result.contains("changed outside"),
        "{result}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "// header\nfn x() {}\nfn y() {}\n"
    );
}
