//! File checkpoints through the binary: a turn's changes (shell commands'
//! too) undone by `/undo` and by `_session/files/revert` (dry run → token →
//! apply), conflicts kept, per-call reverts, and the faults: stale tokens,
//! unknown ids and sessions, a running turn, a deleted store; the user's own
//! repository is never touched.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};

use crate::harness::{Maia, Options, agent_text, choose, read};

pub(crate) fn write(maia: &Maia, rel: &str, text: &str, mode: u32) {
    let path = maia.path(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

/// The files of the shell test, before the turn.
fn seed(maia: &Maia) {
    write(maia, "edit.txt", "one\n", 0o644);
    write(maia, "gone.txt", "bye\n", 0o644);
    write(maia, "old.txt", "moved\n", 0o644);
    write(maia, "secret.txt", "s\n", 0o644);
    write(maia, "run.sh", "echo hi\n", 0o644);
}

const SHELL: &str = "printf 'two\\n' > edit.txt && echo new > new.txt && rm gone.txt && mv old.txt renamed.txt && chmod 600 secret.txt && chmod +x run.sh";

/// A turn whose one Bash call runs `command` (allowed once); the prompt's
/// user message id and the tool call's id.
pub(crate) async fn bash_turn(maia: &mut Maia, sid: &str, command: &str) -> (String, String) {
    let (resp, before) = maia
        .tool_turn(
            sid,
            &[("call_1", "Bash", json!({ "command": command }))],
            choose("allow_once"),
        )
        .await;
    let message = resp["result"]["_meta"]["maia"]["userMessageId"]
        .as_str()
        .unwrap_or_else(|| panic!("no userMessageId in {resp}"))
        .to_owned();
    let call = before
        .iter()
        .find(|m| m["params"]["update"]["sessionUpdate"] == "tool_call")
        .map(|m| {
            m["params"]["update"]["toolCallId"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .expect("a tool call");
    (message, call)
}

fn assert_seed_restored(maia: &Maia) {
    assert_eq!(read(&maia.path("edit.txt")), "one\n");
    assert!(!maia.path("new.txt").exists());
    assert_eq!(read(&maia.path("gone.txt")), "bye\n");
    assert_eq!(read(&maia.path("old.txt")), "moved\n");
    assert!(!maia.path("renamed.txt").exists());
    assert_eq!(mode(&maia.path("secret.txt")), 0o644);
    assert_eq!(mode(&maia.path("run.sh")), 0o644);
}

pub(crate) async fn revert(maia: &mut Maia, params: Value) -> Value {
    let id = maia.request("_session/files/revert", params).await;
    maia.response(id).await.0
}

/// A path of the project as the wire gives it: absolute.
fn abs(maia: &Maia, name: &str) -> String {
    maia.path(name).display().to_string()
}

#[tokio::test]
async fn undo_restores_a_shell_turn_exactly_bytes_and_modes() {
    let (mut maia, sid) = Maia::ready().await;
    seed(&maia);
    bash_turn(&mut maia, &sid, SHELL).await;
    assert_eq!(read(&maia.path("edit.txt")), "two\n");
    assert_eq!(mode(&maia.path("secret.txt")), 0o600);
    assert_eq!(mode(&maia.path("run.sh")), 0o755);
    let (_, before) = maia.turn(&sid, "/undo").await;
    let text = agent_text(&before);
    assert!(text.contains("`new.txt`: delete"), "{text}");
    assert!(text.contains("`gone.txt`: recreate"), "{text}");
    assert!(text.contains("Undone"), "{text}");
    assert_seed_restored(&maia);
    // Nothing left: a second undo says so and changes nothing.
    let (_, before) = maia.turn(&sid, "/undo").await;
    assert!(
        agent_text(&before).contains("Nothing to undo"),
        "{}",
        agent_text(&before)
    );
    assert_seed_restored(&maia);
}

#[tokio::test]
async fn files_revert_previews_then_applies_with_its_token() {
    let (mut maia, sid) = Maia::ready().await;
    let init = &maia.seen[0];
    assert_eq!(
        init["result"]["_meta"]["fileRevert"],
        json!({"version": 1, "method": "_session/files/revert", "dryRun": true, "previewTokenRequired": true})
    );
    seed(&maia);
    let (message, _) = bash_turn(&mut maia, &sid, SHELL).await;
    let before_message = json!({ "messageId": message });
    let preview = revert(
        &mut maia,
        json!({"sessionId": sid, "beforeMessage": before_message, "dryRun": true}),
    )
    .await;
    let result = &preview["result"];
    assert_eq!(result["canRevert"], true, "{preview}");
    let files = result["_meta"]["maia"]["files"].as_array().unwrap();
    let kind = |path: &str| {
        files
            .iter()
            .find(|f| f["path"] == abs(&maia, path))
            .map(|f| f["kind"].as_str().unwrap().to_owned())
            .unwrap_or_else(|| panic!("{path} not in {preview}"))
    };
    assert_eq!(kind("new.txt"), "created");
    assert_eq!(kind("gone.txt"), "deleted");
    assert_eq!(kind("edit.txt"), "modified");
    assert_eq!(kind("renamed.txt"), "created");
    assert_eq!(kind("old.txt"), "deleted");
    assert_eq!(kind("secret.txt"), "modified");
    let edit = files
        .iter()
        .find(|f| f["path"] == abs(&maia, "edit.txt"))
        .unwrap();
    assert_eq!(
        edit["diff"],
        json!({"oldText": "two\n", "newText": "one\n"})
    );
    // A dry run changes nothing.
    assert!(maia.path("new.txt").exists());
    let token = result["previewToken"].as_str().unwrap();
    assert!(token.starts_with("sha256:") && token.len() == 71, "{token}");
    let applied = revert(
        &mut maia,
        json!({"sessionId": sid, "beforeMessage": before_message, "dryRun": false, "previewToken": token}),
    )
    .await;
    assert_eq!(applied["result"]["reverted"], true, "{applied}");
    assert_eq!(applied["result"]["_meta"]["maia"]["conflicts"], json!([]));
    assert_seed_restored(&maia);
}

#[tokio::test]
async fn a_user_edit_after_the_turn_is_a_conflict_kept_unless_forced() {
    let (mut maia, sid) = Maia::ready().await;
    write(&maia, "a.txt", "a1\n", 0o644);
    write(&maia, "b.txt", "b1\n", 0o644);
    let (message, _) = bash_turn(
        &mut maia,
        &sid,
        "printf 'a2\\n' > a.txt && printf 'b2\\n' > b.txt",
    )
    .await;
    write(&maia, "a.txt", "mine\n", 0o644);
    let params = |dry: bool, token: Option<&str>, force: bool| json!({"sessionId": sid, "beforeMessage": {"messageId": message}, "dryRun": dry, "previewToken": token, "force": force});
    let preview = revert(&mut maia, params(true, None, false)).await;
    let files = preview["result"]["_meta"]["maia"]["files"]
        .as_array()
        .unwrap()
        .clone();
    let a = files
        .iter()
        .find(|f| f["path"] == abs(&maia, "a.txt"))
        .unwrap();
    assert_eq!(a["conflict"], true, "{preview}");
    let token = preview["result"]["previewToken"]
        .as_str()
        .unwrap()
        .to_owned();
    // The files change after the preview: its token is stale, nothing changes.
    write(&maia, "b.txt", "b3\n", 0o644);
    let stale = revert(&mut maia, params(false, Some(&token), false)).await;
    assert_eq!(
        stale["result"],
        json!({"reverted": false, "reason": "stale_preview"})
    );
    assert_eq!(read(&maia.path("b.txt")), "b3\n");
    write(&maia, "b.txt", "b2\n", 0o644);
    let applied = revert(&mut maia, params(false, Some(&token), false)).await;
    assert_eq!(
        applied["result"]["_meta"]["maia"]["conflicts"],
        json!([abs(&maia, "a.txt")]),
        "{applied}"
    );
    assert_eq!(
        applied["result"]["_meta"]["maia"]["reverted"],
        json!([abs(&maia, "b.txt")])
    );
    assert_eq!(read(&maia.path("a.txt")), "mine\n");
    assert_eq!(read(&maia.path("b.txt")), "b1\n");
    // Undone already: forcing needs a message whose changes are not undone.
    let (message, _) = bash_turn(&mut maia, &sid, "printf 'c\\n' > a.txt").await;
    write(&maia, "a.txt", "mine again\n", 0o644);
    let forced_params = |dry: bool, token: Option<&str>| json!({"sessionId": sid, "beforeMessage": {"messageId": message}, "dryRun": dry, "previewToken": token, "force": true});
    let preview = revert(&mut maia, forced_params(true, None)).await;
    let token = preview["result"]["previewToken"]
        .as_str()
        .unwrap()
        .to_owned();
    let forced = revert(&mut maia, forced_params(false, Some(&token))).await;
    assert_eq!(forced["result"]["reverted"], true, "{forced}");
    assert_eq!(read(&maia.path("a.txt")), "mine\n");
}

#[tokio::test]
async fn a_conflict_an_undo_kept_can_be_forced_afterwards() {
    let (mut maia, sid) = Maia::ready().await;
    write(&maia, "a.txt", "a1\n", 0o644);
    write(&maia, "b.txt", "b1\n", 0o644);
    let (message, _) = bash_turn(
        &mut maia,
        &sid,
        "printf 'a2\\n' > a.txt && printf 'b2\\n' > b.txt",
    )
    .await;
    write(&maia, "a.txt", "mine\n", 0o644);
    let (_, before) = maia.turn(&sid, "/undo").await;
    let text = agent_text(&before);
    assert!(text.contains("conflicts): `a.txt`"), "{text}");
    assert_eq!(read(&maia.path("a.txt")), "mine\n");
    assert_eq!(read(&maia.path("b.txt")), "b1\n");
    // The kept conflict can still be forced: only it is left to restore.
    let params = |dry: bool, token: Option<&str>| json!({"sessionId": sid, "beforeMessage": {"messageId": message}, "dryRun": dry, "previewToken": token, "force": true});
    let preview = revert(&mut maia, params(true, None)).await;
    let files = preview["result"]["_meta"]["maia"]["files"]
        .as_array()
        .unwrap_or_else(|| panic!("{preview}"))
        .clone();
    assert_eq!(files.len(), 1, "{preview}");
    assert_eq!(files[0]["path"], abs(&maia, "a.txt"), "{preview}");
    let token = preview["result"]["previewToken"]
        .as_str()
        .unwrap()
        .to_owned();
    let forced = revert(&mut maia, params(false, Some(&token))).await;
    assert_eq!(forced["result"]["reverted"], true, "{forced}");
    assert_eq!(read(&maia.path("a.txt")), "a1\n");
    assert_eq!(read(&maia.path("b.txt")), "b1\n");
    // Forced, nothing is left: not even forcing finds more to do.
    let again = revert(&mut maia, params(true, None)).await;
    assert_eq!(again["result"]["canRevert"], false, "{again}");
}

#[tokio::test]
async fn one_edit_among_several_is_reverted_by_its_tool_call_id() {
    let (mut maia, sid) = Maia::ready().await;
    write(&maia, "x.txt", "x1\n", 0o644);
    write(&maia, "y.txt", "y1\n", 0o644);
    let x = maia.path("x.txt");
    let y = maia.path("y.txt");
    maia.mock.push(maia_test_support::tool_calls_reply(&[
        ("r1", "Read", json!({"file_path": x})),
        ("r2", "Read", json!({"file_path": y})),
    ]));
    maia.mock.push(maia_test_support::tool_calls_reply(&[
        (
            "e1",
            "Edit",
            json!({"file_path": x, "old_string": "x1", "new_string": "x2"}),
        ),
        (
            "e2",
            "Edit",
            json!({"file_path": y, "old_string": "y1", "new_string": "y2"}),
        ),
    ]));
    maia.mock.push(maia_test_support::text_reply("done"));
    let id = maia.prompt(&sid, "edit both").await;
    let (_, before) = maia.response_with(id, choose("allow_once")).await;
    assert_eq!(read(&x), "x2\n");
    assert_eq!(read(&y), "y2\n");
    let edit_y = before
        .iter()
        .find(|m| {
            m["params"]["update"]["sessionUpdate"] == "tool_call"
                && m["params"]["update"]["title"]
                    .as_str()
                    .is_some_and(|t| t.contains("y.txt"))
                && m["params"]["update"]["kind"] == "edit"
        })
        .map(|m| {
            m["params"]["update"]["toolCallId"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .expect("the Edit of y.txt");
    let preview = revert(
        &mut maia,
        json!({"sessionId": sid, "toolCallId": edit_y, "dryRun": true}),
    )
    .await;
    assert_eq!(
        preview["result"]["paths"],
        json!([abs(&maia, "y.txt")]),
        "{preview}"
    );
    let token = preview["result"]["previewToken"].clone();
    let applied = revert(
        &mut maia,
        json!({"sessionId": sid, "toolCallId": edit_y, "dryRun": false, "previewToken": token}),
    )
    .await;
    assert_eq!(applied["result"]["reverted"], true, "{applied}");
    assert_eq!(read(&x), "x2\n");
    assert_eq!(read(&y), "y1\n");
}

#[tokio::test]
async fn bad_requests_are_refused_and_change_nothing() {
    let (mut maia, sid) = Maia::ready().await;
    write(&maia, "a.txt", "a1\n", 0o644);
    let (message, _) = bash_turn(&mut maia, &sid, "printf 'a2\\n' > a.txt").await;
    let code = |r: &Value| r["error"]["code"].as_i64();
    let r = revert(
        &mut maia,
        json!({"sessionId": sid, "toolCallId": "tool-nope", "dryRun": true}),
    )
    .await;
    assert_eq!(code(&r), Some(-32602), "{r}");
    let r = revert(
        &mut maia,
        json!({"sessionId": sid, "beforeMessage": {"messageId": "nope"}, "dryRun": true}),
    )
    .await;
    assert_eq!(code(&r), Some(-32602), "{r}");
    let r = revert(&mut maia, json!({"sessionId": sid, "dryRun": true})).await;
    assert_eq!(code(&r), Some(-32602), "{r}");
    let r = revert(
        &mut maia,
        json!({"sessionId": sid, "toolCallId": "x", "beforeMessage": {"messageId": message}, "dryRun": true}),
    )
    .await;
    assert_eq!(code(&r), Some(-32602), "{r}");
    let r = revert(
        &mut maia,
        json!({"sessionId": "no-such-session", "beforeMessage": {"messageId": message}, "dryRun": true}),
    )
    .await;
    assert_eq!(code(&r), Some(-32002), "{r}");
    assert_eq!(read(&maia.path("a.txt")), "a2\n");

    // A running turn (waiting for a permission answer): refused.
    maia.mock.push(maia_test_support::tool_calls_reply(&[(
        "c2",
        "Bash",
        json!({"command": "true"}),
    )]));
    maia.mock.push(maia_test_support::text_reply("done"));
    let prompt = maia.prompt(&sid, "again").await;
    maia.wait_for(crate::harness::is_permission).await;
    let r = revert(
        &mut maia,
        json!({"sessionId": sid, "beforeMessage": {"messageId": message}, "dryRun": true}),
    )
    .await;
    assert_eq!(code(&r), Some(-32000), "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("a turn is running"),
        "{r}"
    );
    maia.notify("session/cancel", json!({"sessionId": sid}))
        .await;
    maia.response_with(prompt, |_| None).await;
    assert_eq!(read(&maia.path("a.txt")), "a2\n");

    // The store deleted: cannot restore, nothing changed.
    std::fs::remove_dir_all(maia.path(".maia/.sessions/.checkpoints")).unwrap();
    let r = revert(
        &mut maia,
        json!({"sessionId": sid, "beforeMessage": {"messageId": message}, "dryRun": true}),
    )
    .await;
    assert_eq!(r["result"]["canRevert"], false, "{r}");
    assert!(
        r["result"]["reason"]
            .as_str()
            .unwrap()
            .contains("cannot restore"),
        "{r}"
    );
    let (_, before) = maia.turn(&sid, "/undo").await;
    assert!(
        agent_text(&before).contains("cannot restore"),
        "{}",
        agent_text(&before)
    );
    assert_eq!(read(&maia.path("a.txt")), "a2\n");
}

#[tokio::test]
async fn the_users_repository_is_untouched_ignored_files_too_and_big_files_are_named() {
    let (mut maia, sid) = Maia::ready_with(Options {
        settings: json!({"checkpoints": {"maxFileBytes": 1000}}),
        ..Options::default()
    })
    .await;
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(maia.cwd())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    write(&maia, ".gitignore", "build/\n", 0o644);
    write(&maia, "tracked.txt", "t1\n", 0o644);
    write(&maia, "build/out.o", "o1", 0o644);
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-qm", "first"]);
    write(&maia, "tracked.txt", "t2\n", 0o644);
    git(&["add", "tracked.txt"]);
    let snapshot = |maia: &Maia| {
        let dot = maia.path(".git");
        let mut files = Vec::new();
        for rel in [
            "index",
            "HEAD",
            "refs/heads/master",
            "refs/heads/main",
            "packed-refs",
        ] {
            files.push(std::fs::read(dot.join(rel)).ok());
        }
        files
    };
    let repo_before = snapshot(&maia);
    bash_turn(
        &mut maia,
        &sid,
        "printf 't3\\n' > tracked.txt && printf o2 > build/out.o && head -c 2000 /dev/zero > big.bin",
    )
    .await;
    let (_, before) = maia.turn(&sid, "/undo").await;
    let text = agent_text(&before);
    assert!(
        text.contains("Not captured") && text.contains("`big.bin`"),
        "{text}"
    );
    assert_eq!(read(&maia.path("tracked.txt")), "t2\n");
    assert_eq!(
        read(&maia.path("build/out.o")),
        "o2",
        "ignored files are not restored"
    );
    assert!(maia.path("big.bin").exists(), "a file not captured is left");
    assert_eq!(
        snapshot(&maia),
        repo_before,
        "the user's index, HEAD and refs"
    );
}

#[tokio::test]
async fn a_reload_knows_what_was_undone_and_the_next_undo_goes_further_back() {
    let (mut maia, sid) = Maia::ready().await;
    write(&maia, "a.txt", "a0\n", 0o644);
    bash_turn(&mut maia, &sid, "printf 'a1\\n' > a.txt").await;
    bash_turn(&mut maia, &sid, "printf 'a2\\n' > a.txt").await;
    // A turn with read-only tools only takes no checkpoint.
    maia.mock.push(maia_test_support::tool_calls_reply(&[(
        "r",
        "Read",
        json!({"file_path": maia.path("a.txt")}),
    )]));
    maia.mock.push(maia_test_support::text_reply("read"));
    let id = maia.prompt(&sid, "read it").await;
    maia.response_with(id, choose("allow_once")).await;
    maia.turn(&sid, "/undo").await;
    assert_eq!(read(&maia.path("a.txt")), "a1\n");
    let mut maia = maia.restart().await;
    maia.initialize().await;
    maia.load(&sid).await;
    let (_, before) = maia.turn(&sid, "/undo").await;
    assert!(
        agent_text(&before).contains("Undone"),
        "{}",
        agent_text(&before)
    );
    assert_eq!(read(&maia.path("a.txt")), "a0\n");
    let (_, before) = maia.turn(&sid, "/undo").await;
    assert!(
        agent_text(&before).contains("Nothing to undo"),
        "{}",
        agent_text(&before)
    );
    assert_eq!(read(&maia.path("a.txt")), "a0\n");
    let journal = crate::harness::session_files(&maia)
        .into_iter()
        .map(|name| read(&maia.path(&format!(".maia/.sessions/{name}"))))
        .collect::<String>();
    assert_eq!(
        journal.matches("\"type\":\"checkpoint\"").count(),
        2,
        "{journal}"
    );
}

#[tokio::test]
async fn the_first_snapshot_is_taken_in_the_background_and_later_changes_are_still_seen() {
    let (mut maia, sid) = Maia::ready().await;
    write(&maia, "b.txt", "b\n", 0o644);
    // A first turn that runs no tool: the session's first snapshot is
    // taken in the background all the same.
    maia.answered_turn(&sid, "hello", "Hi.").await;
    let first = maia.path(&format!(".maia/.sessions/.checkpoints/refs/maia/{sid}/0"));
    assert!(
        crate::harness::eventually(crate::harness::WAIT, || first.is_file()).await,
        "no snapshot after the first turn: {}",
        first.display()
    );
    // The user writes after it: the turn's checkpoint starts from the
    // user's text, not from the first snapshot's.
    write(&maia, "a.txt", "user\n", 0o600);
    bash_turn(
        &mut maia,
        &sid,
        "printf 'maia\\n' > a.txt && chmod 644 a.txt",
    )
    .await;
    assert_eq!(read(&maia.path("a.txt")), "maia\n");
    let (_, before) = maia.turn(&sid, "/undo").await;
    assert!(
        agent_text(&before).contains("Undone"),
        "{}",
        agent_text(&before)
    );
    assert_eq!(read(&maia.path("a.txt")), "user\n");
    assert_eq!(mode(&maia.path("a.txt")), 0o600);
    // A turn that changes nothing records nothing.
    bash_turn(&mut maia, &sid, "true").await;
    let (_, before) = maia.turn(&sid, "/undo").await;
    assert!(
        agent_text(&before).contains("Nothing to undo"),
        "{}",
        agent_text(&before)
    );
}

#[tokio::test]
async fn deleting_the_thread_removes_its_checkpoints() {
    let (mut maia, sid) = Maia::ready().await;
    write(&maia, "a.txt", "a0\n", 0o644);
    bash_turn(&mut maia, &sid, "printf 'a1\\n' > a.txt").await;
    let store = maia.path(".maia/.sessions/.checkpoints");
    let refs = store.join("refs/maia").join(&sid);
    let index = store.join(format!("indexes/{sid}.index"));
    let packed = || std::fs::read_to_string(store.join("packed-refs")).unwrap_or_default();
    assert!(
        refs.is_dir() || packed().contains(&sid),
        "no refs for {sid}"
    );
    assert!(index.is_file());
    let id = maia
        .request("session/delete", json!({"sessionId": sid}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert!(resp.get("result").is_some(), "{resp}");
    let gone = crate::harness::eventually(crate::harness::WAIT, || {
        !index.exists()
            && !packed().contains(&sid)
            && std::fs::read_dir(&refs).map_or(true, |mut d| d.next().is_none())
    })
    .await;
    assert!(
        gone,
        "the thread's refs and index are still in {}",
        store.display()
    );
    assert_eq!(read(&maia.path("a.txt")), "a1\n");
}

#[tokio::test]
async fn checkpoints_off_say_why_disabled_or_too_many_files() {
    let (mut maia, sid) = Maia::ready_with(Options {
        settings: json!({"checkpoints.enabled": false}),
        ..Options::default()
    })
    .await;
    write(&maia, "a.txt", "a0\n", 0o644);
    let (message, _) = bash_turn(&mut maia, &sid, "printf 'a1\\n' > a.txt").await;
    assert!(!maia.path(".maia/.sessions/.checkpoints").exists());
    let (_, before) = maia.turn(&sid, "/undo").await;
    let text = agent_text(&before);
    assert!(text.contains("checkpoints.enabled"), "{text}");
    let r = revert(
        &mut maia,
        json!({"sessionId": sid, "beforeMessage": {"messageId": message}, "dryRun": true}),
    )
    .await;
    assert_eq!(r["result"]["canRevert"], false, "{r}");
    assert!(
        r["result"]["reason"]
            .as_str()
            .unwrap()
            .contains("checkpoints are off"),
        "{r}"
    );
    assert_eq!(read(&maia.path("a.txt")), "a1\n");

    let (mut maia, sid) = Maia::ready_with(Options {
        settings: json!({"checkpoints": {"maxFiles": 2}}),
        ..Options::default()
    })
    .await;
    for name in ["a", "b", "c"] {
        write(&maia, name, "x", 0o644);
    }
    bash_turn(&mut maia, &sid, "printf y > a").await;
    let (_, before) = maia.turn(&sid, "/undo").await;
    assert!(
        agent_text(&before).contains("more than 2 files"),
        "{}",
        agent_text(&before)
    );
}

#[tokio::test]
async fn a_rewind_with_restore_files_restores_them_as_a_revert_would() {
    let (mut maia, sid) = Maia::ready().await;
    write(&maia, "a.txt", "a0\n", 0o644);
    bash_turn(&mut maia, &sid, "printf 'a1\\n' > a.txt").await;
    let (second, _) = bash_turn(&mut maia, &sid, "printf 'a2\\n' > a.txt").await;
    let id = maia
        .request(
            "_session/rewind",
            json!({"sessionId": sid, "beforeMessage": {"messageId": second}, "restoreFiles": true}),
        )
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"]["rewound"], true, "{resp}");
    assert_eq!(
        resp["result"]["_meta"]["maia"]["reverted"],
        json!([abs(&maia, "a.txt")]),
        "{resp}"
    );
    assert_eq!(read(&maia.path("a.txt")), "a1\n");
    let (_, before) = maia.turn(&sid, "/rewind 1 --files").await;
    let text = agent_text(&before);
    assert!(
        text.contains("Rewound") && text.contains("Files restored: 1"),
        "{text}"
    );
    assert_eq!(read(&maia.path("a.txt")), "a0\n");
}

/// Every name under `dir`, recursively (links not followed).
fn names_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            names_under(&path, out);
        }
        out.push(path);
    }
}

/// Whether a file is being written: a name beside the files in `dir` or a
/// file in one of the staging folders.
fn mid_write(dir: &Path, staging: &Path) -> bool {
    let aside = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().contains("maia-restore"));
    aside
        || std::fs::read_dir(staging)
            .into_iter()
            .flatten()
            .flatten()
            .any(|folder| {
                std::fs::read_dir(folder.path())
                    .into_iter()
                    .flatten()
                    .flatten()
                    .any(|e| e.file_name().to_string_lossy().parse::<u64>().is_ok())
            })
}

#[tokio::test]
async fn a_revert_killed_at_any_point_leaves_nothing_behind_and_finishes_after_a_restart() {
    const FILES: usize = 500;
    let (mut maia, sid) = Maia::ready().await;
    // Files big enough that a kill lands while one is being written.
    let original = |i: usize| format!("orig {i}\n").repeat(8 * 1024);
    for i in 1..=FILES {
        write(&maia, &format!("d/f{i:03}.txt"), &original(i), 0o644);
    }
    let (message, _) = bash_turn(
        &mut maia,
        &sid,
        "for f in d/*.txt; do echo changed > \"$f\"; done",
    )
    .await;
    let is_restored = |maia: &Maia, i: usize| {
        std::fs::read(maia.path(&format!("d/f{i:03}.txt"))).is_ok_and(|b| b.starts_with(b"orig"))
    };
    let params = |dry: bool, token: Option<&str>| json!({"sessionId": sid, "beforeMessage": {"messageId": message}, "dryRun": dry, "previewToken": token});
    // Cut after the 1st, 150th, 300th and 450th file is back (in order).
    for cut in [1, 150, 300, 450] {
        let preview = revert(&mut maia, params(true, None)).await;
        let files = preview["result"]["_meta"]["maia"]["files"]
            .as_array()
            .unwrap_or_else(|| panic!("{preview}"))
            .clone();
        // What the cut revert restored is done, not a conflict.
        assert!(files.iter().all(|f| f["conflict"] == false), "{preview}");
        let token = preview["result"]["previewToken"]
            .as_str()
            .unwrap()
            .to_owned();
        maia.request("_session/files/revert", params(false, Some(&token)))
            .await;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::time::Instant::now() < deadline && !is_restored(&maia, cut) {
            tokio::task::yield_now().await;
        }
        // Then the moment a file is half-way (being written, not renamed
        // into place yet), or the revert's end.
        let staging = maia.path(".maia/.sessions/.checkpoints/restore");
        while std::time::Instant::now() < deadline
            && !mid_write(&maia.path("d"), &staging)
            && !is_restored(&maia, FILES)
        {
            tokio::task::yield_now().await;
        }
        // SIGKILL: no chance to clean up.
        maia = maia.restart().await;
        maia.initialize().await;
        maia.load(&sid).await;
    }
    // Nothing of the interrupted reverts is left anywhere in the project.
    let mut names = Vec::new();
    names_under(&maia.cwd(), &mut names);
    let left: Vec<_> = names
        .iter()
        .filter(|p| p.to_string_lossy().contains("maia-restore"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let staging = maia.path(".maia/.sessions/.checkpoints/restore");
    let staged: Vec<_> = std::fs::read_dir(&staging)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(staged.is_empty(), "staging folders left: {staged:?}");
    // The revert finishes.
    let preview = revert(&mut maia, params(true, None)).await;
    assert!(
        preview["result"]["_meta"]["maia"]["files"]
            .as_array()
            .unwrap_or_else(|| panic!("{preview}"))
            .iter()
            .all(|f| f["conflict"] == false),
        "{preview}"
    );
    let token = preview["result"]["previewToken"]
        .as_str()
        .unwrap()
        .to_owned();
    let applied = revert(&mut maia, params(false, Some(&token))).await;
    assert_eq!(applied["result"]["reverted"], true, "{applied}");
    for i in 1..=FILES {
        assert_eq!(read(&maia.path(&format!("d/f{i:03}.txt"))), original(i));
    }
}
