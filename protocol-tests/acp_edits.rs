//! Edits that survive the editor, through the binary: an `Edit` whose file
//! another writer changed since the model read it applies when its
//! `old_string` still matches exactly once and says which lines changed;
//! it is refused when the match is gone.

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, Options, choose};

fn last_tool_result(maia: &Maia) -> String {
    let request = maia.mock.requests().last().cloned().unwrap();
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

async fn allowed() -> (Maia, String) {
    Maia::ready_with(Options {
        settings: json!({"permissions": {"allow": ["Read", "Edit", "Bash"]}}),
        ..Options::default()
    })
    .await
}

/// Read, then another writer (a command the model does not track, as a
/// formatter or the editor would) changes the file, then the Edit.
async fn read_write_edit(maia: &mut Maia, sid: &str, writer: &str, edit: Value) -> String {
    maia.mock.push(mock::tool_calls_reply(&[(
        "r",
        "Read",
        json!({"file_path": "f.txt"}),
    )]));
    maia.mock.push(mock::tool_calls_reply(&[(
        "w",
        "Bash",
        json!({"command": writer}),
    )]));
    maia.mock
        .push(mock::tool_calls_reply(&[("e", "Edit", edit)]));
    maia.mock.push(mock::text_reply("done"));
    let id = maia.prompt(sid, "edit it").await;
    let (resp, _) = maia.response_with(id, choose("allow_once")).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
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
