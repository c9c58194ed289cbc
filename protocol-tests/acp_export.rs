//! `/export` (issue 43) through the binary: the thread as replayed written
//! to Markdown (collapsible tool calls, diff blocks) or JSON (the shape of
//! docs/sessions.md), where the user says or in `.maia/exports/`; an
//! existing file kept unless `--force`; paths outside the session folder,
//! through a link included, refused; huge tool inputs bounded; odd names.

use serde_json::{Value, json};

use crate::harness::{Maia, agent_text, choose, read, updates_of};

/// A slash command's reply text (the model is not asked).
async fn command(maia: &mut Maia, sid: &str, text: &str) -> String {
    let requests = maia.mock.requests().len();
    let (resp, before) = maia.turn(sid, text).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{text}: {resp}");
    assert_eq!(
        maia.mock.requests().len(),
        requests,
        "{text} reached the model"
    );
    agent_text(&before)
}

/// A thread with a question, a `Write` (a new file) then an `Edit` of it,
/// and the answers; returns the tool call ids the client saw.
async fn thread_with_edits(maia: &mut Maia, sid: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let (_, before) = maia
        .tool_turn(
            sid,
            &[(
                "w1",
                "Write",
                json!({"file_path": "notes.txt", "content": "one\ntwo\n"}),
            )],
            choose("allow_once"),
        )
        .await;
    ids.extend(
        updates_of(&before, "tool_call")
            .iter()
            .map(|u| u["toolCallId"].to_string()),
    );
    let (_, before) = maia
        .tool_turn(
            sid,
            &[(
                "e1",
                "Edit",
                json!({"file_path": "notes.txt", "old_string": "two", "new_string": "three"}),
            )],
            choose("allow_once"),
        )
        .await;
    ids.extend(
        updates_of(&before, "tool_call")
            .iter()
            .map(|u| u["toolCallId"].to_string()),
    );
    ids
}

/// The path a reply says it wrote to.
fn written_path(reply: &str) -> std::path::PathBuf {
    let start = reply
        .find('`')
        .unwrap_or_else(|| panic!("no path in {reply}"))
        + 1;
    let end = start + reply[start..].find('`').unwrap();
    std::path::PathBuf::from(&reply[start..end])
}

#[tokio::test]
async fn export_writes_the_replayed_thread_as_markdown_and_json() {
    let (mut maia, sid) = Maia::ready().await;
    let ids = thread_with_edits(&mut maia, &sid).await;
    assert_eq!(ids.len(), 2, "{ids:?}");

    let reply = command(&mut maia, &sid, "/export").await;
    assert!(reply.starts_with("Exported the thread to `"), "{reply}");
    let md_path = written_path(&reply);
    assert!(
        md_path.starts_with(maia.path(".maia/exports")),
        "{md_path:?}"
    );
    assert_eq!(md_path.extension().unwrap(), "md");
    let md = read(&md_path);
    assert!(md.contains("## User\n\ngo"), "{md}");
    assert!(md.contains("<details><summary>Write: "), "{md}");
    assert!(md.contains("<details><summary>Edit: "), "{md}");
    assert!(md.contains("```diff\n"), "{md}");
    assert!(md.contains("-two\n+three"), "{md}");
    assert!(md.contains("### Answer\n\ndone"), "{md}");
    assert_eq!(
        md.matches("<details>").count(),
        md.matches("</details>").count()
    );

    let reply = command(&mut maia, &sid, "/export json out/thread.json").await;
    let json_path = maia.path("out/thread.json");
    assert!(reply.contains(&json_path.display().to_string()), "{reply}");
    let doc: Value = serde_json::from_str(&read(&json_path)).unwrap();
    assert_eq!(doc["maia_export"], 1);
    assert_eq!(doc["thread"]["id"], sid.as_str());
    let entries = doc["entries"].as_array().unwrap();
    let types: Vec<&str> = entries
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "user",
            "title",
            "tool_call",
            "answer",
            "user",
            "tool_call",
            "answer"
        ],
        "{doc}"
    );
    // The same tool calls the client was shown, with their inputs and diffs.
    let calls: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "tool_call")
        .collect();
    let exported: Vec<String> = calls.iter().map(|c| c["id"].to_string()).collect();
    assert_eq!(exported, ids);
    assert_eq!(calls[1]["input"]["new_string"], "three");
    assert_eq!(calls[1]["status"], "completed");
    let diff = calls[1]["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "diff")
        .unwrap_or_else(|| panic!("no diff in {}", calls[1]));
    assert!(diff["diff"].as_str().unwrap().contains("+three"), "{diff}");
    assert_eq!(diff["new_file"], false);
    assert_eq!(doc["truncated"], false);
}

#[tokio::test]
async fn export_over_an_existing_file_is_refused_unless_forced() {
    let (mut maia, sid) = Maia::ready().await;
    maia.answered_turn(&sid, "hello", "hi there").await;
    let mine = maia.path("thread.md");
    std::fs::write(&mine, "my own notes\n").unwrap();

    let reply = command(&mut maia, &sid, "/export thread.md").await;
    assert!(reply.starts_with("Not exported:"), "{reply}");
    assert!(
        reply.contains("already exists") && reply.contains("--force"),
        "{reply}"
    );
    assert_eq!(read(&mine), "my own notes\n", "the file is kept");

    let reply = command(&mut maia, &sid, "/export thread.md --force").await;
    assert!(reply.starts_with("Exported"), "{reply}");
    assert!(read(&mine).contains("hi there"));
    // Nothing is left beside it (written aside, then renamed).
    let names: Vec<String> = std::fs::read_dir(maia.cwd())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("thread"))
        .collect();
    assert_eq!(names, ["thread.md"]);
}

#[tokio::test]
async fn export_outside_the_session_folder_is_refused() {
    let (mut maia, sid) = Maia::ready().await;
    maia.answered_turn(&sid, "hello", "hi").await;
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), maia.path("link")).unwrap();
    let absolute = elsewhere.path().join("abs.md");
    for typed in [
        "../up.md".to_owned(),
        absolute.display().to_string(),
        "link/through.md".to_owned(),
    ] {
        let reply = command(&mut maia, &sid, &format!("/export {typed}")).await;
        assert!(
            reply.starts_with("Not exported:") && reply.contains("outside the session folder"),
            "{typed}: {reply}"
        );
    }
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    assert!(!maia.cwd().parent().unwrap().join("up.md").exists());
    // An absolute path inside the folder is fine.
    let inside = maia.path("docs/in.md");
    let reply = command(&mut maia, &sid, &format!("/export {}", inside.display())).await;
    assert!(reply.starts_with("Exported"), "{reply}");
    assert!(inside.exists());
}

#[tokio::test]
async fn export_bounds_huge_tool_inputs_and_keeps_odd_names() {
    let (mut maia, sid) = Maia::ready().await;
    let huge = "x".repeat(2_000_000);
    maia.tool_turn(
        &sid,
        &[(
            "w1",
            "Write",
            json!({"file_path": "big.txt", "content": huge}),
        )],
        choose("allow_once"),
    )
    .await;
    let reply = command(&mut maia, &sid, "/export md notes/ünï `odd` name.md").await;
    assert!(reply.starts_with("Exported"), "{reply}");
    let path = maia.path("notes/ünï `odd` name.md");
    let md = read(&path);
    assert!(md.len() < 200_000, "{} bytes", md.len());
    assert!(md.contains("characters left out"), "bounded");
    assert!(reply.contains("long texts shortened"), "{reply}");

    let reply = command(&mut maia, &sid, "/export json").await;
    let doc: Value = serde_json::from_str(&read(&written_path(&reply))).unwrap();
    assert_eq!(doc["truncated"], true);
    let call = doc["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "tool_call")
        .unwrap();
    let input = call["input"]["content"].as_str().unwrap();
    assert!(input.len() < 20_000, "{}", input.len());
}

#[tokio::test]
async fn export_is_listed_and_bad_options_say_how() {
    let (mut maia, sid) = Maia::ready().await;
    let help = command(&mut maia, &sid, "/help").await;
    assert!(help.contains("`/export"), "{help}");
    let reply = command(&mut maia, &sid, "/export --overwrite").await;
    assert!(reply.contains("Usage: `/export"), "{reply}");
}
