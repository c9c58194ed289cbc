//! The session timeline through the binary: `_session/rewind` (and edit
//! and resend), `session/fork` before a cursor, into a git worktree, and
//! `/rewind` / `/fork`.

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::fixtures::{
    RemoveOnDrop, commit, fork_folders, fork_records, git_ok, repository,
};
use crate::harness::*;

fn message_id(response: &Value) -> String {
    response["result"]["_meta"]["maia"]["userMessageId"]
        .as_str()
        .unwrap_or_else(|| panic!("no userMessageId in {response}"))
        .to_owned()
}

async fn rewind(maia: &mut Maia, sid: &str, before: Value) -> Value {
    maia.call(
        "_session/rewind",
        json!({"sessionId": sid, "beforeMessage": before}),
    )
    .await
    .0
}

#[tokio::test]
async fn initialize_advertises_rewind_and_fork() {
    let mut maia = Maia::start().await;
    let resp = maia.initialize().await;
    let result = &resp["result"];
    assert_eq!(
        result["_meta"]["sessionRewind"],
        json!({"version": 1, "method": "_session/rewind"}),
        "{resp}"
    );
    assert_eq!(
        result["agentCapabilities"]["sessionCapabilities"]["fork"],
        json!({}),
        "{resp}"
    );
}

#[tokio::test]
async fn rewind_survives_a_restart_and_the_next_prompt_is_edit_and_resend() {
    let (mut maia, sid) = Maia::ready().await;
    maia.answered_turn(&sid, "first question", "One.").await;
    let (second, _) = maia.answered_turn(&sid, "second question", "Two.").await;
    let second = message_id(&second);
    let resp = rewind(
        &mut maia,
        &sid,
        json!({
            "messageId": second,
            "messageFingerprint": maia_core::timeline::fingerprint("second question"),
            "messageOccurrence": 1,
        }),
    )
    .await;
    assert_eq!(resp["result"]["rewound"], true, "{resp}");

    // A new process: the journal says what was rewound.
    let mut maia = maia.restart().await;
    maia.initialize().await;
    let (resp, replay) = maia.load(&sid).await;
    assert!(resp["result"].is_object(), "{resp}");
    assert_eq!(user_texts(&replay), ["first question"]);
    let said = agent_text(&replay);
    assert!(said.contains("One.") && !said.contains("Two."), "{said}");

    // Edit and resend: the model sees the kept history, then the new text.
    maia.answered_turn(&sid, "second question, edited", "Edited.")
        .await;
    assert_eq!(
        history(&maia),
        [
            "user: first question",
            "assistant: One.",
            "user: second question, edited"
        ]
    );
    // The dropped messages are still in the journal (append-only).
    let files = session_files(&maia);
    let text: String = files
        .iter()
        .map(|f| read(&maia.path(&format!(".maia/.sessions/{f}"))))
        .collect();
    assert!(text.contains("Two.") && text.contains("\"type\":\"rewind\""));
}

#[tokio::test]
async fn rewind_refusals_and_errors_change_nothing() {
    let (mut maia, sid) = Maia::ready().await;
    let (first, _) = maia.answered_turn(&sid, "same", "A.").await;
    let (second, _) = maia.answered_turn(&sid, "same", "B.").await;
    let (first, second) = (message_id(&first), message_id(&second));

    let resp = rewind(&mut maia, "no-such-session", json!({"messageId": first})).await;
    assert_eq!(resp["error"]["code"], -32002, "{resp}");
    let resp = rewind(&mut maia, &sid, json!({"messageId": "no-such-message"})).await;
    assert_eq!(resp["error"]["code"], -32602, "{resp}");
    let resp = rewind(
        &mut maia,
        &sid,
        json!({"messageId": second, "messageFingerprint": maia_core::timeline::fingerprint("other")}),
    )
    .await;
    assert_eq!(
        resp["result"],
        json!({"rewound": false, "reason": "fingerprint_mismatch"})
    );
    // The second "same" is the second occurrence of its text, not the first.
    let resp = rewind(
        &mut maia,
        &sid,
        json!({"messageId": second, "messageFingerprint": maia_core::timeline::fingerprint("same"), "messageOccurrence": 1}),
    )
    .await;
    assert_eq!(resp["result"]["reason"], "fingerprint_mismatch", "{resp}");

    // A running turn (waiting on a permission question) refuses it.
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_w",
        "Write",
        json!({"file_path": maia.path("x.txt"), "content": "x"}),
    )]));
    maia.mock.push(mock::text_reply("written"));
    let prompt = maia.prompt(&sid, "write it").await;
    let (question, _) = maia.wait_for(is_permission).await;
    let resp = rewind(&mut maia, &sid, json!({"messageId": first})).await;
    assert_eq!(resp["error"]["code"], -32000, "{resp}");
    maia.respond(
        &question["id"],
        json!({"outcome": {"outcome": "cancelled"}}),
    )
    .await;
    maia.response(prompt).await;

    // Nothing was dropped by any of them.
    let (_, replay) = maia.load(&sid).await;
    assert_eq!(user_texts(&replay), ["same", "same", "write it"]);
}

#[tokio::test]
async fn a_message_before_a_compaction_or_a_clear_cannot_be_rewound_to() {
    let (mut maia, sid) = Maia::ready().await;
    let (hello, _) = maia.answered_turn(&sid, "hello", "answer").await;
    maia.mock.push(mock::text_reply("summary"));
    maia.turn(&sid, "/compact").await;
    let resp = rewind(&mut maia, &sid, json!({"messageId": message_id(&hello)})).await;
    assert_eq!(
        resp["result"],
        json!({"rewound": false, "reason": "before_compaction"}),
        "{resp}"
    );
    let (after, _) = maia.answered_turn(&sid, "after", "ok").await;
    maia.turn(&sid, "/clear").await;
    let resp = rewind(&mut maia, &sid, json!({"messageId": message_id(&after)})).await;
    assert_eq!(resp["result"]["reason"], "before_compaction", "{resp}");
}

#[tokio::test]
async fn fork_before_a_cursor_gives_each_branch_its_own_history() {
    let mut maia = Maia::start().await;
    maia.initialize_with(json!({"session": {"cursors": {}}}))
        .await;
    let sid = maia.new_session().await;
    let (alpha, _) = maia.answered_turn(&sid, "alpha", "A.").await;
    let (beta, before) = maia.answered_turn(&sid, "beta", "B.").await;
    let beta = message_id(&beta);
    // The cursor before each saved user message is announced live.
    let cursors = updates_of(&before, "cursor_update");
    assert_eq!(cursors.len(), 1, "{before:?}");
    assert_eq!(cursors[0]["cursorId"], beta.as_str());
    assert_eq!(
        cursors[0]["anchor"],
        json!({"type": "user_message", "messageId": beta, "position": "before"})
    );
    assert_eq!(cursors[0]["capabilities"], json!({"fork": {}}));

    let cwd = maia.cwd();
    let (resp, _) = maia
        .call(
            "session/fork",
            json!({"sessionId": sid, "cwd": cwd, "mcpServers": [], "cursorId": beta}),
        )
        .await;
    let fork = resp["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no sessionId in {resp}"))
        .to_owned();
    assert_ne!(fork, sid);
    assert!(resp["result"]["configOptions"].is_array(), "{resp}");
    assert!(resp["result"]["modes"].is_object(), "{resp}");

    maia.answered_turn(&fork, "gamma", "G.").await;
    assert_eq!(
        history(&maia),
        ["user: alpha", "assistant: A.", "user: gamma"]
    );
    maia.answered_turn(&sid, "delta", "D.").await;
    assert_eq!(
        history(&maia),
        [
            "user: alpha",
            "assistant: A.",
            "user: beta",
            "assistant: B.",
            "user: delta"
        ]
    );
    // A replay announces the cursors too, and the fork is listed with its title.
    let (_, replay) = maia.load(&sid).await;
    let announced: Vec<Value> = updates_of(&replay, "cursor_update")
        .iter()
        .map(|c| c["cursorId"].clone())
        .collect();
    assert_eq!(announced.len(), 3, "{replay:?}");
    assert_eq!(
        announced[0],
        alpha["result"]["_meta"]["maia"]["userMessageId"]
    );

    // Unknown cursor and unknown session: errors, no new session.
    let before_count = std::fs::read_dir(maia.path(".maia/.sessions"))
        .unwrap()
        .count();
    let (resp, _) = maia
        .call(
            "session/fork",
            json!({"sessionId": sid, "cwd": cwd, "mcpServers": [], "cursorId": "nope"}),
        )
        .await;
    assert_eq!(resp["error"]["code"], -32602, "{resp}");
    let (resp, _) = maia
        .call(
            "session/fork",
            json!({"sessionId": "no-such-session", "cwd": cwd, "mcpServers": []}),
        )
        .await;
    assert_eq!(resp["error"]["code"], -32002, "{resp}");
    let after_count = std::fs::read_dir(maia.path(".maia/.sessions"))
        .unwrap()
        .count();
    assert_eq!(before_count, after_count);
}

#[tokio::test]
async fn cursors_are_sent_only_to_clients_that_take_them() {
    let (mut maia, sid) = Maia::ready().await;
    let (_, before) = maia.answered_turn(&sid, "alpha", "A.").await;
    assert!(
        updates_of(&before, "cursor_update").is_empty(),
        "{before:?}"
    );
    let (_, replay) = maia.load(&sid).await;
    assert!(
        updates_of(&replay, "cursor_update").is_empty(),
        "{replay:?}"
    );
}

#[tokio::test]
async fn a_worktree_fork_writes_in_its_worktree_not_in_the_project() {
    let (mut maia, sid) = Maia::ready().await;
    let project = maia.cwd();
    repository(&project);
    maia.answered_turn(&sid, "alpha", "A.").await;
    let (resp, _) = maia.call(
        "session/fork",
        json!({"sessionId": sid, "cwd": project, "mcpServers": [], "_meta": {"maia": {"worktree": true}}}),
    )
    .await;
    let worktree = &resp["result"]["_meta"]["maia"]["worktree"];
    let path = std::path::PathBuf::from(
        worktree["path"]
            .as_str()
            .unwrap_or_else(|| panic!("{resp}")),
    );
    let _cleanup = RemoveOnDrop(Some(path.clone()));
    let name = project.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(path.parent(), project.parent());
    assert!(
        path.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(&format!("{name}.maia-fork-")),
        "{resp}"
    );
    let branch = worktree["branch"].as_str().unwrap();
    assert!(branch.starts_with("maia/fork-"), "{resp}");
    assert!(path.join("README.md").exists());
    let fork = resp["result"]["sessionId"].as_str().unwrap().to_owned();

    let (_, _) = maia
        .tool_turn(
            &fork,
            &[(
                "call_b",
                "Bash",
                json!({"command": "echo made > made-in-fork.txt"}),
            )],
            choose("allow_once"),
        )
        .await;
    assert_eq!(read(&path.join("made-in-fork.txt")), "made\n");
    assert!(!project.join("made-in-fork.txt").exists());
    // The fork's history is the source's.
    let requests = maia.mock.requests();
    let first_of_fork = &requests[requests.len() - 2]["messages"];
    assert!(
        first_of_fork.to_string().contains("alpha"),
        "{first_of_fork}"
    );
    git_ok(
        &project,
        &["worktree", "remove", "--force", &path.to_string_lossy()],
    );
}

#[tokio::test]
async fn a_worktree_fork_outside_a_git_repository_is_refused() {
    let (mut maia, sid) = Maia::ready().await;
    maia.answered_turn(&sid, "alpha", "A.").await;
    let cwd = maia.cwd();
    let (resp, _) = maia.call(
        "session/fork",
        json!({"sessionId": sid, "cwd": cwd, "mcpServers": [], "_meta": {"maia": {"worktree": true}}}),
    )
    .await;
    assert_eq!(resp["error"]["code"], -32602, "{resp}");
    let message = resp["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("not in a git repository"), "{resp}");
}

#[tokio::test]
async fn slash_rewind_lists_and_truncates_and_slash_fork_names_the_new_session() {
    let (mut maia, sid) = Maia::ready().await;
    maia.answered_turn(&sid, "first line\nmore", "One.").await;
    maia.answered_turn(&sid, "second", "Two.").await;
    let (_, before) = maia.turn(&sid, "/rewind").await;
    let listed = agent_text(&before);
    assert!(
        listed.contains("1. first line")
            && listed.contains("2. second")
            && !listed.contains("more"),
        "{listed}"
    );
    let (_, before) = maia.turn(&sid, "/rewind 9").await;
    assert!(agent_text(&before).contains("Usage"), "{before:?}");
    let (_, before) = maia.turn(&sid, "/rewind 2").await;
    assert!(agent_text(&before).contains("Rewound"), "{before:?}");
    maia.answered_turn(&sid, "again", "Again.").await;
    assert_eq!(
        history(&maia),
        ["user: first line\nmore", "assistant: One.", "user: again"]
    );
    let (_, before) = maia.turn(&sid, "/fork").await;
    let said = agent_text(&before);
    let listed = maia
        .request("session/list", json!({"cwd": maia.cwd()}))
        .await;
    let (resp, _) = maia.response(listed).await;
    let sessions = resp["result"]["sessions"].as_array().unwrap().clone();
    let fork = sessions
        .iter()
        .find(|s| s["sessionId"] != sid.as_str())
        .unwrap_or_else(|| panic!("no fork listed: {resp}"));
    assert!(said.contains(fork["sessionId"].as_str().unwrap()), "{said}");
    assert!(
        fork["title"]
            .as_str()
            .unwrap_or_default()
            .ends_with("(fork)"),
        "{fork}"
    );
}

#[tokio::test]
async fn a_worktree_fork_killed_while_it_is_made_leaves_nothing_after_a_restart() {
    let (mut maia, sid) = Maia::ready().await;
    let project = maia.cwd();
    git_ok(&project, &["init", "-q", "-b", "main"]);
    // Enough files that the checkout takes a while.
    for i in 0..3000 {
        let dir = project.join(format!("src/d{}", i % 30));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("f{i}.txt")), format!("{i}\n")).unwrap();
    }
    git_ok(&project, &["add", "-A"]);
    commit(&project);
    maia.answered_turn(&sid, "alpha", "A.").await;
    maia.request(
        "session/fork",
        json!({"sessionId": sid, "cwd": project, "mcpServers": [], "_meta": {"maia": {"worktree": true}}}),
    )
    .await;
    // SIGKILL the moment the worktree's folder appears: mid-checkout.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline && fork_folders(&project).is_empty() {
        tokio::task::yield_now().await;
    }
    let made = fork_folders(&project);
    assert_eq!(made.len(), 1, "{made:?}");
    let _cleanup = RemoveOnDrop(Some(made[0].clone()));
    maia = maia.restart().await;
    maia.initialize().await;
    // A session opening in the project undoes the half-made fork.
    maia.load(&sid).await;
    // The record goes last, once everything it names is undone.
    let records = || fork_records(&project);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline && records() > 0 {
        tokio::task::yield_now().await;
    }
    assert_eq!(records(), 0);
    assert_eq!(fork_folders(&project), Vec::<std::path::PathBuf>::new());
    let list = git_ok(&project, &["worktree", "list", "--porcelain"]);
    assert_eq!(list.matches("worktree ").count(), 1, "{list}");
    let branches = git_ok(&project, &["branch", "--list", "maia/*"]);
    assert_eq!(branches.trim(), "", "{branches}");
    // And a worktree fork made afterwards works.
    let (resp, _) = maia.call(
        "session/fork",
        json!({"sessionId": sid, "cwd": project, "mcpServers": [], "_meta": {"maia": {"worktree": true}}}),
    )
    .await;
    let path = std::path::PathBuf::from(
        resp["result"]["_meta"]["maia"]["worktree"]["path"]
            .as_str()
            .unwrap_or_else(|| panic!("{resp}")),
    );
    let _cleanup2 = RemoveOnDrop(Some(path.clone()));
    assert!(path.join("src/d0/f0.txt").exists());
    git_ok(
        &project,
        &["worktree", "remove", "--force", &path.to_string_lossy()],
    );
}
