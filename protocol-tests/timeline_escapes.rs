//! What git cannot hold never escapes `/undo` silently: ignored files are
//! captured (a turn that ignores its own new file cannot hide it), changes
//! in ignored folders, paths named `.git` and nested repositories are named
//! in the preview and the answer, and folders a turn created are removed
//! when its undo leaves them empty.

use serde_json::{Value, json};

use crate::harness::{Maia, agent_text, read};
use crate::timeline_files::{bash_turn, revert, write};

/// The dry run of reverting everything from `message` on.
async fn preview(maia: &mut Maia, sid: &str, message: &str) -> Value {
    let params = json!({"sessionId": sid, "beforeMessage": {"messageId": message}, "dryRun": true});
    revert(maia, params).await
}

fn not_restored(preview: &Value) -> Vec<(String, String)> {
    preview["result"]["_meta"]["maia"]["notRestored"]
        .as_array()
        .unwrap_or_else(|| panic!("{preview}"))
        .iter()
        .map(|n| {
            (
                n["path"].as_str().unwrap().to_owned(),
                n["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn an_ignored_file_the_turn_changed_is_restored() {
    let (mut maia, sid) = Maia::ready().await;
    write(&maia, ".gitignore", "*.env\n", 0o644);
    write(&maia, "secret.env", "KEY=old\n", 0o600);
    let (message, _) = bash_turn(&mut maia, &sid, "printf 'KEY=new\\n' > secret.env").await;
    let preview = preview(&mut maia, &sid, &message).await;
    let files = preview["result"]["_meta"]["maia"]["files"].to_string();
    assert!(files.contains("secret.env"), "{preview}");
    let (_, before) = maia.turn(&sid, "/undo").await;
    let text = agent_text(&before);
    assert!(text.contains("`secret.env`: restore"), "{text}");
    assert_eq!(read(&maia.path("secret.env")), "KEY=old\n");
}

#[tokio::test]
async fn a_turn_that_ignores_its_own_new_file_cannot_hide_it_from_undo() {
    let (mut maia, sid) = Maia::ready().await;
    write(&maia, ".gitignore", "target/\n", 0o644);
    write(&maia, "keep.txt", "k\n", 0o644);
    bash_turn(
        &mut maia,
        &sid,
        "echo hidden.txt >> .gitignore && echo sneaky > hidden.txt",
    )
    .await;
    let (_, before) = maia.turn(&sid, "/undo").await;
    let text = agent_text(&before);
    assert!(text.contains("`hidden.txt`: delete"), "{text}");
    assert_eq!(read(&maia.path(".gitignore")), "target/\n");
    assert!(!maia.path("hidden.txt").exists(), "{text}");
}

#[tokio::test]
async fn a_path_named_git_a_nested_repository_and_an_ignored_folder_are_named() {
    let (mut maia, sid) = Maia::ready().await;
    write(&maia, ".gitignore", "build/\n", 0o644);
    write(&maia, "build/out.o", "o1", 0o644);
    write(&maia, "vendor/lib/a.txt", "a1\n", 0o644);
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(maia.path("vendor/lib"))
        .output()
        .unwrap();
    assert!(git.status.success(), "{git:?}");
    write(&maia, "tracked.txt", "t1\n", 0o644);
    let (message, _) = bash_turn(
        &mut maia,
        &sid,
        "mkdir -p sub && echo 'gitdir: nowhere' > sub/.git && printf a2 > vendor/lib/a.txt && printf o2 > build/out.o && echo t2 > tracked.txt",
    )
    .await;
    let preview = preview(&mut maia, &sid, &message).await;
    let named = not_restored(&preview);
    let abs = |rel: &str| maia.path(rel).to_string_lossy().into_owned();
    for (path, reason) in [
        (abs("build/"), "ignored"),
        (abs("sub/.git"), "git_name"),
        (abs("vendor/lib/"), "nested_repository"),
    ] {
        assert!(
            named.contains(&(path.clone(), reason.to_owned())),
            "{path} {reason}: {preview}"
        );
    }
    let (_, before) = maia.turn(&sid, "/undo").await;
    let text = agent_text(&before);
    assert!(text.contains("Changed but not restored"), "{text}");
    for name in ["`build/`", "`sub/.git`", "`vendor/lib/`"] {
        assert!(text.contains(name), "{name}: {text}");
    }
    assert!(
        text.contains("git cannot store a path named .git"),
        "{text}"
    );
    assert_eq!(read(&maia.path("tracked.txt")), "t1\n");
}

#[tokio::test]
async fn folders_a_turn_created_go_with_its_undo_when_left_empty() {
    let (mut maia, sid) = Maia::ready().await;
    write(&maia, "a.txt", "a\n", 0o644);
    let (message, _) = bash_turn(
        &mut maia,
        &sid,
        "mkdir -p made/deeper/deepest empty && echo x > made/deeper/file.txt",
    )
    .await;
    let preview = preview(&mut maia, &sid, &message).await;
    assert_eq!(preview["result"]["canRevert"], true, "{preview}");
    // The user puts a file of theirs in one of them meanwhile.
    write(&maia, "empty/mine.txt", "mine\n", 0o644);
    let (_, before) = maia.turn(&sid, "/undo").await;
    let text = agent_text(&before);
    assert!(text.contains("`made/deeper/`"), "{text}");
    assert!(
        text.contains(
            "Removed the empty folders: `made/`, `made/deeper/`, `made/deeper/deepest/`."
        ),
        "{text}"
    );
    assert!(!maia.path("made").exists(), "{text}");
    assert_eq!(read(&maia.path("empty/mine.txt")), "mine\n");
}

#[tokio::test]
async fn the_revert_answer_names_what_it_did_not_restore_and_the_folders_it_removed() {
    let (mut maia, sid) = Maia::ready().await;
    write(&maia, "a.txt", "a\n", 0o644);
    let (message, _) = bash_turn(
        &mut maia,
        &sid,
        "mkdir -p made/deeper sub && echo x > made/deeper/f.txt && echo 'gitdir: nowhere' > sub/.git",
    )
    .await;
    let preview = preview(&mut maia, &sid, &message).await;
    let cwd = maia.cwd();
    let abs = |rel: &str| cwd.join(rel).to_string_lossy().into_owned();
    let folders = &preview["result"]["_meta"]["maia"]["folders"];
    for rel in ["made", "made/deeper", "sub"] {
        assert!(
            folders.as_array().unwrap().contains(&json!(abs(rel))),
            "{rel}: {preview}"
        );
    }
    let token = preview["result"]["previewToken"]
        .as_str()
        .unwrap()
        .to_owned();
    let params = json!({"sessionId": sid, "beforeMessage": {"messageId": message}, "dryRun": false, "previewToken": token});
    let applied = revert(&mut maia, params).await;
    let meta = &applied["result"]["_meta"]["maia"];
    assert_eq!(applied["result"]["reverted"], true, "{applied}");
    // `sub/` still holds the `.git` file the undo cannot restore: it stays.
    assert_eq!(
        meta["removedFolders"],
        json!([abs("made"), abs("made/deeper")]),
        "{applied}"
    );
    assert_eq!(
        meta["notRestored"],
        json!([{"path": abs("sub/.git"), "reason": "git_name"}]),
        "{applied}"
    );
    assert!(!maia.path("made").exists());
    assert!(maia.path("sub/.git").exists());
}
