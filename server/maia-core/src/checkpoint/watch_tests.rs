//! Tests of the watch: what counts as a change, the paths a mark names,
//! an overflow and a watch that cannot be set up.

#![allow(clippy::unwrap_used)]

use super::*;

/// A project with its sessions folder and a markers folder in it.
fn project() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let sessions = root.join(".maia/.sessions");
    let markers = sessions.join(".checkpoints/marks/s");
    std::fs::create_dir_all(&markers).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/a.txt"), "a").unwrap();
    (dir, root, sessions, markers)
}

#[tokio::test]
async fn changes_move_the_count_and_reads_and_the_store_do_not() {
    let (_dir, root, sessions, markers) = project();
    let mut watch = Watch::start(&root, &sessions, &markers);
    assert!(watch.watching());
    let first = watch.mark().await.unwrap();
    assert_eq!(watch.mark().await, Some(first), "markers are not changes");
    // Reads, listings and the store's own files change nothing.
    let _ = std::fs::read_to_string(root.join("src/a.txt")).unwrap();
    let _ = std::fs::read_dir(root.join("src")).unwrap().count();
    std::fs::write(sessions.join("journal.jsonl"), "{}").unwrap();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    let settled = watch.mark().await.unwrap();
    std::fs::write(root.join(".git/index"), "i").unwrap();
    assert_eq!(watch.mark().await, Some(settled));
    // A write, a new folder's file, a mode change, a rename: each counted
    // before the mark answers.
    let mut last = settled;
    std::fs::write(root.join("src/a.txt"), "b").unwrap();
    let now = watch.mark().await.unwrap();
    assert_ne!(now, last, "a write");
    last = now;
    std::fs::create_dir_all(root.join("new/deeper")).unwrap();
    let now = watch.mark().await.unwrap();
    assert_ne!(now, last, "a new folder");
    last = now;
    std::fs::write(root.join("new/deeper/f"), "f").unwrap();
    let now = watch.mark().await.unwrap();
    assert_ne!(now, last, "a file in a folder made after the watch began");
    last = now;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        root.join("new/deeper/f"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let now = watch.mark().await.unwrap();
    assert_ne!(now, last, "a mode change");
    last = now;
    std::fs::rename(root.join("new"), root.join("renamed")).unwrap();
    let now = watch.mark().await.unwrap();
    assert_ne!(now, last, "a rename");
    assert!(watch.take_warning().is_none(), "nothing to say");
}

#[tokio::test]
async fn an_overflow_turns_the_watch_off_and_is_said_once() {
    let (_dir, root, sessions, markers) = project();
    let mut watch = Watch::start(&root, &sessions, &markers);
    assert!(watch.mark().await.is_some());
    let overflow = || Ok(Event::new(EventKind::Other).set_flag(notify::event::Flag::Rescan));
    watch.handler.handle(overflow());
    assert_eq!(watch.mark().await, None, "events were lost: full rescans");
    assert!(!watch.watching());
    let said = watch.take_warning().unwrap();
    assert!(said.contains("overflowed"), "{said}");
    watch.handler.handle(overflow());
    assert_eq!(watch.mark().await, None);
    assert!(watch.take_warning().is_none(), "said once");
}

#[tokio::test]
async fn a_watch_that_cannot_be_set_up_asks_for_full_rescans_and_says_so_once() {
    let (_dir, root, sessions, markers) = project();
    let mut watch = Watch::start_with(
        &root,
        &sessions,
        &markers,
        Box::new(|_, _, _| Err(notify::Error::new(notify::ErrorKind::MaxFilesWatch))),
        false,
    );
    assert!(!watch.watching());
    assert_eq!(watch.mark().await, None);
    assert_eq!(watch.mark().await, None);
    let said = watch.take_warning().unwrap();
    assert!(said.contains("cannot watch"), "{said}");
    assert!(watch.take_warning().is_none(), "said once");
}

#[tokio::test]
async fn an_error_of_the_watch_turns_it_off_said_once() {
    let (_dir, root, sessions, markers) = project();
    let mut watch = Watch::start(&root, &sessions, &markers);
    assert!(watch.mark().await.is_some());
    watch
        .handler
        .handle(Err(notify::Error::new(notify::ErrorKind::MaxFilesWatch)));
    assert_eq!(watch.mark().await, None);
    assert!(watch.take_warning().unwrap().contains("failed"));
    watch.handler.handle(Err(notify::Error::generic("again")));
    assert!(watch.take_warning().is_none(), "said once");
}

#[tokio::test]
async fn a_mark_names_the_paths_changed_since_the_previous_one() {
    let (_dir, root, sessions, markers) = project();
    let mut watch = Watch::start(&root, &sessions, &markers);
    watch.mark_paths().await.unwrap();
    std::fs::write(root.join("src/a.txt"), "b").unwrap();
    std::fs::create_dir_all(root.join("new")).unwrap();
    std::fs::write(sessions.join("journal.jsonl"), "{}").unwrap();
    let mark = watch.mark_paths().await.unwrap();
    let paths = mark.paths.unwrap();
    assert!(paths.contains(&root.join("src/a.txt")), "{paths:?}");
    assert!(paths.contains(&root.join("new")), "{paths:?}");
    assert!(paths.iter().all(|p| !p.starts_with(&sessions)), "{paths:?}");
    // Read and emptied: the next mark names only what came after.
    let next = watch.mark_paths().await.unwrap();
    assert_eq!(
        next,
        Mark {
            count: mark.count,
            paths: Some(Vec::new())
        }
    );
    std::fs::rename(root.join("new"), root.join("renamed")).unwrap();
    let paths = watch.mark_paths().await.unwrap().paths.unwrap();
    assert!(
        paths.contains(&root.join("new")) && paths.contains(&root.join("renamed")),
        "{paths:?}"
    );
}

#[tokio::test]
async fn too_many_paths_or_an_event_without_one_make_the_set_unknown_once() {
    let (_dir, root, sessions, markers) = project();
    let mut watch = Watch::start(&root, &sessions, &markers);
    watch.mark_paths().await.unwrap();
    watch.handler.handle(Ok(Event::new(EventKind::Any)));
    let mark = watch.mark_paths().await.unwrap();
    assert_eq!(mark.paths, None, "an event without a path");
    for i in 0..=MAX_PATHS {
        let event = Event::new(EventKind::Any).add_path(root.join(format!("f{i}")));
        watch.handler.handle(Ok(event));
    }
    let after = watch.mark_paths().await.unwrap();
    assert_eq!(after.paths, None, "too many paths");
    assert_eq!(after.count, mark.count + MAX_PATHS as u64 + 1);
    assert_eq!(watch.mark_paths().await.unwrap().paths, Some(Vec::new()));
    assert!(watch.watching(), "the watch itself goes on");
}

#[tokio::test]
async fn sessions_of_one_project_share_one_watcher_with_their_own_counts() {
    let (_dir, root, sessions, markers) = project();
    let mut one = Watch::start(&root, &sessions, &markers);
    // The second session's folder is made while the watcher runs, and its
    // first mark follows at once.
    let other_markers = sessions.join(".checkpoints/marks/t");
    std::fs::create_dir_all(&other_markers).unwrap();
    let mut two = Watch::start(&root, &sessions, &other_markers);
    assert!(one.shares_with(&two), "one watcher for the project");
    let (a, b) = (
        one.mark_paths().await.unwrap(),
        two.mark_paths().await.unwrap(),
    );
    std::fs::write(root.join("src/a.txt"), "b").unwrap();
    let a2 = one.mark_paths().await.unwrap();
    assert_ne!(a2.count, a.count);
    assert_eq!(a2.paths.unwrap(), vec![root.join("src/a.txt")]);
    // The other session's paths were not emptied by this one's mark, and
    // this one's markers are not its changes.
    let b2 = two.mark_paths().await.unwrap();
    assert_ne!(b2.count, b.count);
    assert_eq!(b2.paths.unwrap(), vec![root.join("src/a.txt")]);
    assert_eq!(two.mark().await, Some(b2.count));
    // The last session's watch goes on when the first one ends.
    drop(one);
    std::fs::write(root.join("src/b.txt"), "b").unwrap();
    let b3 = two.mark_paths().await.unwrap();
    assert_eq!(b3.paths.unwrap(), vec![root.join("src/b.txt")]);
    // A watcher that lost events is not given to a new session.
    let lost = Ok(Event::new(EventKind::Other).set_flag(notify::event::Flag::Rescan));
    two.watcher.as_ref().unwrap().consumers.dispatch(lost);
    assert_eq!(two.mark().await, None);
    let three = Watch::start(&root, &sessions, &markers);
    assert!(!three.shares_with(&two) && three.watching());
}
