//! Instruction files at every level, through the binary: the user's and
//! the project's in the system prompt broad to narrow, a sub-folder's added
//! to the first tool result that works there (once per thread) and shown
//! as a notice, hostile files skipped or cut with a warning, and
//! `/context` listing what was loaded and why.

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, Options, agent_text, updates_of};

fn system_of(request: &Value) -> String {
    request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn tool_contents(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

async fn started(files: &[(&str, &str)]) -> (Maia, String) {
    let mut maia = Maia::start_with(Options {
        settings: json!({"permissions": {"allow": ["Read"]}}),
        ..Options::default()
    })
    .await;
    std::fs::create_dir_all(maia.path(".git")).unwrap();
    std::fs::create_dir_all(maia.path("pkg/deep")).unwrap();
    std::fs::write(
        maia.home.path().join(".maia/MAIA.md"),
        "User rule: be brief.",
    )
    .unwrap();
    for (name, text) in files {
        std::fs::write(maia.path(name), text).unwrap();
    }
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;
    let sid = maia.new_session().await;
    (maia, sid)
}

#[tokio::test]
async fn every_level_is_read_and_a_sub_folders_file_joins_the_first_tool_result_there_once() {
    let (mut maia, sid) = started(&[
        ("AGENTS.md", "Root agents rule."),
        ("CLAUDE.md", "Root claude rule."),
        ("pkg/AGENTS.md", "Package rule: use tabs."),
        ("pkg/deep/a.txt", "alpha\n"),
        ("pkg/deep/b.txt", "beta\n"),
    ])
    .await;
    let read =
        |id: &str, file: &str| mock::tool_calls_reply(&[(id, "Read", json!({"file_path": file}))]);
    maia.mock.push(read("c1", "pkg/deep/a.txt"));
    maia.mock.push(read("c2", "pkg/deep/b.txt"));
    maia.mock.push(mock::text_reply("done"));
    let (resp, messages) = maia.turn(&sid, "read them").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let requests = maia.mock.requests();
    let system = system_of(&requests[0]);
    let at = |s: &str| {
        system
            .find(s)
            .unwrap_or_else(|| panic!("{s} not in {system}"))
    };
    assert!(at("User rule: be brief.") < at("Root agents rule."));
    assert!(at("Root agents rule.") < at("Root claude rule."));
    assert!(
        !system.contains("Package rule"),
        "not before a tool works there"
    );
    // The first Read in pkg/deep brings pkg/AGENTS.md; the second does not.
    let results = tool_contents(&requests[2]);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results[0].contains("Package rule: use tabs."),
        "{}",
        results[0]
    );
    assert!(!results[1].contains("Package rule"), "{}", results[1]);
    // The system prompt stayed the same (caching keeps working).
    assert_eq!(system_of(&requests[2]), system);
    let notices = updates_of(&messages, "notice");
    assert!(
        notices
            .iter()
            .any(|n| n.to_string().contains("pkg/AGENTS.md")),
        "{notices:?}"
    );

    // Once per thread: another turn reading there adds nothing.
    maia.mock.push(read("c3", "pkg/deep/a.txt"));
    maia.mock.push(mock::text_reply("done"));
    maia.turn(&sid, "again").await;
    let last = maia.mock.requests().last().cloned().unwrap();
    let results = tool_contents(&last);
    assert_eq!(
        results
            .iter()
            .filter(|r| r.contains("Package rule"))
            .count(),
        1,
        "{results:?}"
    );

    // `/context` lists each file and why.
    let (_, messages) = maia.turn(&sid, "/context").await;
    let text = agent_text(&messages);
    assert!(text.contains("MAIA.md` (user-level"), "{text}");
    assert!(text.contains("AGENTS.md` (repository root"), "{text}");
    assert!(text.contains("CLAUDE.md` (repository root"), "{text}");
    assert!(text.contains("pkg/AGENTS.md` (sub-folder"), "{text}");
}

#[tokio::test]
async fn hostile_instruction_files_are_skipped_or_cut_and_the_user_is_told() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.md"), "Secret outside text.").unwrap();
    let mut maia = Maia::start().await;
    std::fs::create_dir_all(maia.path(".git")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.md"), maia.path("MAIA.md")).unwrap();
    // 8 MB: read only up to the cap, never whole.
    let huge = "Huge rule line.\n".repeat(512 * 1024);
    std::fs::write(maia.path("AGENTS.md"), &huge).unwrap();
    // A FIFO would block a plain read forever.
    let fifo = maia.path("CLAUDE.md");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;
    let sid = maia.new_session().await;
    maia.mock.push(mock::text_reply("hi"));
    maia.turn(&sid, "hello").await;
    let system = system_of(&maia.mock.requests()[0]);
    assert!(!system.contains("Secret outside text."), "{system}");
    assert!(system.contains("Huge rule line."));
    assert!(system.len() < 70_000, "cut: {}", system.len());
    assert!(system.contains("kept the start of this instruction file"));
    let notices = updates_of(&maia.seen, "notice")
        .iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        notices.contains("MAIA.md skipped") && notices.contains("outside"),
        "{notices}"
    );
    assert!(notices.contains("CLAUDE.md skipped"), "{notices}");
}
