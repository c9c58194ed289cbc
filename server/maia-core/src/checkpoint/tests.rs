//! Tests of the checkpoint store and of reverting.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::*;

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

fn write(root: &Path, path: &str, text: &str, mode: u32) {
    let full = root.join(path);
    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
    std::fs::write(&full, text).unwrap();
    std::fs::set_permissions(&full, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn open(root: &Path, session: &str) -> Checkpoints {
    Checkpoints::new(&root.join(".maia/.sessions"), root, session)
}

fn timeline(records: &[Checkpoint]) -> Timeline {
    let mut t = Timeline::default();
    for c in records {
        t.add(c);
    }
    t
}

async fn changed(ck: &Checkpoints, before: &Snapshot, after: &Snapshot) -> Vec<String> {
    ck.changed(before, after).await.unwrap()
}

async fn revert_all(
    ck: &Checkpoints,
    t: &Timeline,
    target: RevertTarget,
    force: bool,
) -> RevertReport {
    let chosen = t.select(&target).unwrap();
    let mut request = RevertRequest {
        target,
        preview_token: None,
        force,
        dry_run: true,
    };
    let preview = plan::revert(ck.repo(), &chosen, &request, None)
        .await
        .unwrap();
    request.dry_run = false;
    request.preview_token = Some(preview.token.clone());
    plan::revert(ck.repo(), &chosen, &request, None)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_shell_like_turn_is_undone_exactly_and_the_users_repo_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // The user's own repository, with a staged change.
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(root)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    git(&["init", "-q"]);
    write(root, "keep.txt", "keep\n", 0o644);
    write(root, "edit.txt", "one\n", 0o644);
    write(root, "gone.txt", "bye\n", 0o644);
    write(root, "old-name.txt", "moved\n", 0o644);
    write(root, "mode.sh", "echo\n", 0o644);
    write(root, ".gitignore", "ignored/\n", 0o644);
    write(root, "ignored/cache", "v1", 0o644);
    git(&["add", "keep.txt"]);
    let index = std::fs::read(root.join(".git/index")).unwrap();
    let head = std::fs::read(root.join(".git/HEAD")).unwrap();

    let settings = Settings::default();
    let mut ck = open(root, "s1");
    ck.begin_turn();
    let before = ck.before(&settings).await.unwrap();
    // What a Bash call would do.
    write(root, "edit.txt", "two\n", 0o644);
    write(root, "new.txt", "new\n", 0o644);
    std::fs::remove_file(root.join("gone.txt")).unwrap();
    std::fs::rename(root.join("old-name.txt"), root.join("new-name.txt")).unwrap();
    std::fs::set_permissions(root.join("mode.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(
        root.join("keep.txt"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    write(root, "ignored/cache", "v2", 0o644);
    let after = ck.snapshot(&settings).await.unwrap();
    let paths = changed(&ck, &before, &after).await;
    let records = records_of_batch(
        "m1",
        &[("call-1".into(), vec![])],
        &before,
        &after,
        &paths,
        root,
    );
    assert_eq!(records.len(), 1);
    let t = timeline(&records);

    let report = revert_all(&ck, &t, RevertTarget::LastTurn, false).await;
    assert!(report.conflicts.is_empty(), "{report:?}");
    assert_eq!(
        std::fs::read_to_string(root.join("edit.txt")).unwrap(),
        "one\n"
    );
    assert!(!root.join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("gone.txt")).unwrap(),
        "bye\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("old-name.txt")).unwrap(),
        "moved\n"
    );
    assert!(!root.join("new-name.txt").exists());
    assert_eq!(mode(&root.join("mode.sh")), 0o644);
    assert_eq!(mode(&root.join("keep.txt")), 0o644);
    // Ignored: not captured, not restored.
    assert_eq!(
        std::fs::read_to_string(root.join("ignored/cache")).unwrap(),
        "v2"
    );
    assert_eq!(std::fs::read(root.join(".git/index")).unwrap(), index);
    assert_eq!(std::fs::read(root.join(".git/HEAD")).unwrap(), head);
}

#[tokio::test]
async fn a_user_edit_is_a_conflict_kept_unless_forced_and_a_stale_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.txt", "a1\n", 0o644);
    write(root, "b.txt", "b1\n", 0o644);
    let settings = Settings::default();
    let mut ck = open(root, "s2");
    ck.begin_turn();
    let before = ck.before(&settings).await.unwrap();
    write(root, "a.txt", "a2\n", 0o644);
    write(root, "b.txt", "b2\n", 0o644);
    let after = ck.snapshot(&settings).await.unwrap();
    let paths = changed(&ck, &before, &after).await;
    let t = timeline(&records_of_batch(
        "m1",
        &[("c".into(), vec![])],
        &before,
        &after,
        &paths,
        root,
    ));
    // The user edits a.txt after MAIA.
    write(root, "a.txt", "mine\n", 0o644);
    let chosen = t.select(&RevertTarget::LastTurn).unwrap();
    let mut request = RevertRequest {
        target: RevertTarget::LastTurn,
        preview_token: None,
        force: false,
        dry_run: true,
    };
    let preview = plan::revert(ck.repo(), &chosen, &request, None)
        .await
        .unwrap();
    assert_eq!(preview.conflicts, vec!["a.txt".to_owned()]);
    // A change after the preview makes its token stale.
    write(root, "b.txt", "b3\n", 0o644);
    request.dry_run = false;
    request.preview_token = Some(preview.token);
    assert_eq!(
        plan::revert(ck.repo(), &chosen, &request, None).await,
        Err(RevertError::StalePreview)
    );
    assert_eq!(std::fs::read_to_string(root.join("b.txt")).unwrap(), "b3\n");
    write(root, "b.txt", "b2\n", 0o644);
    let report = revert_all(&ck, &t, RevertTarget::LastTurn, false).await;
    assert_eq!(report.conflicts, vec!["a.txt".to_owned()]);
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "mine\n"
    );
    assert_eq!(std::fs::read_to_string(root.join("b.txt")).unwrap(), "b1\n");
    let forced = revert_all(&ck, &t, RevertTarget::LastTurn, true).await;
    assert_eq!(forced.reverted, vec!["a.txt".to_owned()]);
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "a1\n");
}

#[tokio::test]
async fn one_call_of_a_batch_is_reverted_alone_and_big_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "x.txt", "x1\n", 0o644);
    write(root, "y.txt", "y1\n", 0o644);
    let settings = Settings {
        max_file_bytes: 10,
        ..Settings::default()
    };
    let mut ck = open(root, "s3");
    ck.begin_turn();
    let before = ck.before(&settings).await.unwrap();
    write(root, "x.txt", "x2\n", 0o644);
    write(root, "y.txt", "y2\n", 0o644);
    write(root, "big.bin", "0123456789abcdef", 0o644);
    let after = ck.snapshot(&settings).await.unwrap();
    assert_eq!(after.not_captured(), vec!["big.bin".to_owned()]);
    let paths = changed(&ck, &before, &after).await;
    let calls = [
        ("edit-x".to_owned(), vec![root.join("x.txt")]),
        ("edit-y".to_owned(), vec![root.join("y.txt")]),
    ];
    let t = timeline(&records_of_batch(
        "m1", &calls, &before, &after, &paths, root,
    ));
    let report = revert_all(&ck, &t, RevertTarget::ToolCall("edit-y".into()), false).await;
    assert_eq!(report.reverted, vec!["y.txt".to_owned()]);
    assert_eq!(report.not_captured, vec!["big.bin".to_owned()]);
    assert_eq!(std::fs::read_to_string(root.join("x.txt")).unwrap(), "x2\n");
    assert_eq!(std::fs::read_to_string(root.join("y.txt")).unwrap(), "y1\n");
    assert!(root.join("big.bin").exists());
    assert_eq!(
        t.select(&RevertTarget::ToolCall("nope".into())),
        Err(RevertError::UnknownToolCall("nope".into()))
    );
    assert_eq!(
        t.select(&RevertTarget::FromMessage("nope".into())),
        Err(RevertError::UnknownMessage("nope".into()))
    );
}

#[tokio::test]
async fn a_deleted_store_says_so_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.txt", "a1\n", 0o644);
    let settings = Settings::default();
    let mut ck = open(root, "s4");
    ck.begin_turn();
    let before = ck.before(&settings).await.unwrap();
    write(root, "a.txt", "a2\n", 0o644);
    let after = ck.snapshot(&settings).await.unwrap();
    let paths = changed(&ck, &before, &after).await;
    let t = timeline(&records_of_batch(
        "m1",
        &[("c".into(), vec![])],
        &before,
        &after,
        &paths,
        root,
    ));
    std::fs::remove_dir_all(&ck.repo().git_dir).unwrap();
    let chosen = t.select(&RevertTarget::LastTurn).unwrap();
    let request = RevertRequest {
        target: RevertTarget::LastTurn,
        preview_token: None,
        force: true,
        dry_run: true,
    };
    let err = plan::revert(ck.repo(), &chosen, &request, None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, RevertError::StorePrunedOrUnreadable(_)),
        "{err:?}"
    );
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "a2\n");
}

#[tokio::test]
async fn symlinks_are_restored_as_links() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "target.txt", "t\n", 0o644);
    std::os::unix::fs::symlink("target.txt", root.join("link")).unwrap();
    let settings = Settings::default();
    let mut ck = open(root, "s5");
    ck.begin_turn();
    let before = ck.before(&settings).await.unwrap();
    std::fs::remove_file(root.join("link")).unwrap();
    std::os::unix::fs::symlink("elsewhere", root.join("link")).unwrap();
    let after = ck.snapshot(&settings).await.unwrap();
    let paths = changed(&ck, &before, &after).await;
    let t = timeline(&records_of_batch(
        "m1",
        &[("c".into(), vec![])],
        &before,
        &after,
        &paths,
        root,
    ));
    revert_all(&ck, &t, RevertTarget::LastTurn, false).await;
    assert_eq!(
        std::fs::read_link(root.join("link")).unwrap(),
        Path::new("target.txt")
    );
}

#[test]
fn settings_are_read_with_the_folder_winning() {
    let files = crate::settings::SettingsFiles::read_with(None, Path::new("/p"), &mut |_| {
        Ok(
            r#"{"checkpoints": {"maxFileBytes": 10, "maxFiles": 5, "watch": false}, "checkpoints.enabled": false}"#
                .into(),
        )
    });
    let (s, warnings) = settings(&files);
    assert!(warnings.is_empty());
    assert_eq!(
        s,
        Settings {
            enabled: false,
            max_file_bytes: 10,
            max_files: 5,
            watch: false,
        }
    );
}

#[tokio::test]
async fn a_user_edit_between_turns_is_kept_when_both_turns_are_undone() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.txt", "maia0\n", 0o644);
    let settings = Settings::default();
    let mut ck = open(root, "s6");
    let mut records = Vec::new();
    for (message, text) in [("m1", "maia1\n"), ("m2", "maia2\n")] {
        if message == "m2" {
            // The user's own edit between the turns.
            write(root, "a.txt", "user\n", 0o644);
        }
        ck.begin_turn();
        let before = ck.before(&settings).await.unwrap();
        write(root, "a.txt", text, 0o644);
        let after = ck.snapshot(&settings).await.unwrap();
        let paths = changed(&ck, &before, &after).await;
        records.extend(records_of_batch(
            message,
            &[(format!("call-{message}"), vec![])],
            &before,
            &after,
            &paths,
            root,
        ));
    }
    let t = timeline(&records);
    let report = revert_all(&ck, &t, RevertTarget::FromMessage("m1".into()), false).await;
    assert_eq!(report.conflicts, vec!["a.txt".to_owned()]);
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "user\n"
    );
}
