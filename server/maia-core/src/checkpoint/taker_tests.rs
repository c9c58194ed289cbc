//! The watch only makes snapshots cheaper, never different: for random
//! changes (writes, deletes, renames of files and folders, mode changes,
//! links, ignored files and folders, files over the size bound, nested
//! repositories and files named `.git`, changes made while a snapshot is
//! being taken), a session that trusts the watch (and updates only the
//! paths it names) and one that rescans every time take the same trees
//! and the same walks.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use proptest::prelude::*;

use super::*;

#[derive(Debug, Clone)]
enum Op {
    Write(usize, u8),
    Delete(usize),
    Rename(usize, usize),
    Mode(usize, u32),
    RenameFolder(usize, usize),
    Link(usize, usize),
    /// A file over the size bound.
    Big(usize),
    /// A folder becomes a nested repository.
    Nested(usize),
    /// A file named `.git` in a folder.
    GitFile(usize),
    /// Nothing: the watch answers.
    Nothing,
}

/// `build/` and `*.log` are ignored.
const DIRS: &[&str] = &["", "a", "a/b", "c", "build"];
const NAMES: &[&str] = &["x", "y.txt", "z.sh", "w.log"];
/// The size bound of both sessions.
const MAX_BYTES: u64 = 64;

fn path(i: usize) -> String {
    let dir = DIRS[i % DIRS.len()];
    let name = NAMES[(i / DIRS.len()) % NAMES.len()];
    match dir {
        "" => name.to_owned(),
        _ => format!("{dir}/{name}"),
    }
}

fn op() -> impl Strategy<Value = Op> {
    let slot = 0..DIRS.len() * NAMES.len();
    prop_oneof![
        3 => (slot.clone(), any::<u8>()).prop_map(|(p, b)| Op::Write(p, b)),
        1 => slot.clone().prop_map(Op::Delete),
        1 => (slot.clone(), slot.clone()).prop_map(|(a, b)| Op::Rename(a, b)),
        1 => (slot.clone(), prop_oneof![Just(0o644u32), Just(0o755), Just(0o600)])
            .prop_map(|(p, m)| Op::Mode(p, m)),
        1 => (0..DIRS.len(), 0..DIRS.len()).prop_map(|(a, b)| Op::RenameFolder(a, b)),
        1 => (slot.clone(), slot.clone()).prop_map(|(a, b)| Op::Link(a, b)),
        1 => slot.prop_map(Op::Big),
        1 => (1..DIRS.len()).prop_map(Op::Nested),
        1 => (1..DIRS.len()).prop_map(Op::GitFile),
        2 => Just(Op::Nothing),
    ]
}

/// Applies an op; what cannot be done (a missing source) is skipped.
fn apply(root: &Path, op: &Op) {
    let full = |i: usize| root.join(path(i));
    match op {
        Op::Write(p, b) => {
            let f = full(*p);
            let _ = std::fs::create_dir_all(f.parent().unwrap());
            if f.is_dir() {
                return;
            }
            let _ = std::fs::write(&f, vec![*b; usize::from(*b % 7) + 1]);
        }
        Op::Delete(p) => {
            let _ = std::fs::remove_file(full(*p));
        }
        Op::Rename(a, b) => {
            let (a, b) = (full(*a), full(*b));
            if !b.is_dir() {
                let _ = std::fs::create_dir_all(b.parent().unwrap());
                let _ = std::fs::rename(a, b);
            }
        }
        Op::Mode(p, m) => {
            let f = full(*p);
            if f.symlink_metadata().is_ok_and(|m| m.is_file()) {
                let _ = std::fs::set_permissions(f, std::fs::Permissions::from_mode(*m));
            }
        }
        Op::RenameFolder(a, b) => {
            let (a, b) = (DIRS[*a], DIRS[*b]);
            if a.is_empty() || b.is_empty() || b.starts_with(a) || a.starts_with(b) {
                return;
            }
            let _ = std::fs::remove_dir_all(root.join(b));
            let _ = std::fs::rename(root.join(a), root.join(b));
        }
        Op::Link(a, b) => {
            let link = full(*b);
            let _ = std::fs::create_dir_all(link.parent().unwrap());
            if !link.exists() && link.symlink_metadata().is_err() {
                let _ = std::os::unix::fs::symlink(path(*a), link);
            }
        }
        Op::Big(p) => {
            let f = full(*p);
            let _ = std::fs::create_dir_all(f.parent().unwrap());
            if !f.is_dir() {
                let _ = std::fs::write(&f, vec![b'b'; MAX_BYTES as usize + 10]);
            }
        }
        Op::Nested(d) => {
            let git = root.join(DIRS[*d]).join(".git");
            if std::fs::create_dir_all(&git).is_ok() {
                let _ = std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n");
            }
        }
        Op::GitFile(d) => {
            let dir = root.join(DIRS[*d]);
            let _ = std::fs::create_dir_all(&dir);
            if !dir.join(".git").exists() {
                let _ = std::fs::write(dir.join(".git"), "not a repository");
            }
        }
        Op::Nothing => {}
    }
}

fn same(watched: &Snapshot, rescanned: &Snapshot, step: usize) {
    assert_eq!(
        watched.tree, rescanned.tree,
        "trees differ after step {step}"
    );
    assert_eq!(
        watched.modes(),
        rescanned.modes(),
        "modes after step {step}"
    );
    assert_eq!(
        watched.seen.dirs, rescanned.seen.dirs,
        "folders after step {step}"
    );
    // The whole walk (what is named as not restored, captured, left out),
    // its count of files an upper bound.
    assert!(watched.seen.files >= rescanned.seen.files, "step {step}");
    let mut walk = (*watched.seen).clone();
    walk.files = rescanned.seen.files;
    assert_eq!(&walk, &*rescanned.seen, "walks after step {step}");
}

fn check(steps: Vec<(Op, Option<Op>)>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let sessions = root.join(".maia/.sessions");
    std::fs::write(root.join("x"), "start").unwrap();
    std::fs::write(root.join(".gitignore"), "build/\n*.log\n").unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let watched_settings = Settings {
        max_file_bytes: MAX_BYTES,
        ..Settings::default()
    };
    let rescan_settings = Settings {
        watch: false,
        ..watched_settings.clone()
    };
    let mut watched = Checkpoints::new(&sessions, &root, "watched");
    let mut rescan = Checkpoints::new(&sessions, &root, "rescan");
    rt.block_on(async {
        watched.start(&watched_settings);
        for (step, (op, during)) in steps.iter().enumerate() {
            apply(&root, op);
            let taken = match during {
                // A change while the watched snapshot is being taken: the
                // snapshot may or may not hold it; the next one must.
                Some(during) => {
                    let (root, during) = (root.clone(), during.clone());
                    let changer = tokio::task::spawn_blocking(move || apply(&root, &during));
                    let taken = watched.snapshot(&watched_settings).await.unwrap();
                    changer.await.unwrap();
                    Some(taken)
                }
                None => None,
            };
            let cheap = watched.updated_answers() + watched.unchanged_answers();
            let w = watched.snapshot(&watched_settings).await.unwrap();
            if during.is_none() && matches!(op, Op::Write(..) | Op::Delete(_) | Op::Mode(..)) {
                assert_eq!(
                    watched.updated_answers() + watched.unchanged_answers(),
                    cheap + 1,
                    "step {step} ({op:?}) was not a full rescan"
                );
            }
            let r = rescan.snapshot(&rescan_settings).await.unwrap();
            same(&w, &r, step);
            if let Some(taken) = taken
                && taken.tree != w.tree
            {
                assert!(!watched.changed(&taken, &w).await.unwrap().is_empty());
            }
        }
        // Nothing changes: the watch answers, and still the same tree.
        let before = watched.unchanged_answers();
        let w = watched.snapshot(&watched_settings).await.unwrap();
        let r = rescan.snapshot(&rescan_settings).await.unwrap();
        same(&w, &r, steps.len());
        assert!(watched.watching());
        assert_eq!(
            watched.unchanged_answers(),
            before + 1,
            "the watch answered"
        );
        assert_eq!(
            rescan.unchanged_answers(),
            0,
            "the rescan never trusts a watch"
        );
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn the_watched_snapshot_is_the_rescanned_one(
        steps in proptest::collection::vec((op(), proptest::option::weighted(0.3, op())), 1..8)
    ) {
        check(steps);
    }
}

#[tokio::test]
async fn a_file_that_grows_past_the_size_bound_is_left_out_and_checkpoints_stay_on() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let sessions = root.join(".maia/.sessions");
    std::fs::write(root.join("f"), "small").unwrap();
    let settings = Settings {
        max_file_bytes: MAX_BYTES,
        watch: false,
        ..Settings::default()
    };
    let mut ck = Checkpoints::new(&sessions, &root, "s");
    let first = ck.snapshot(&settings).await.unwrap();
    std::fs::write(root.join("f"), vec![b'b'; MAX_BYTES as usize + 1]).unwrap();
    let second = ck.snapshot(&settings).await.unwrap();
    assert_eq!(second.not_captured(), ["f".to_owned()]);
    assert_eq!(ck.changed(&first, &second).await.unwrap(), ["f".to_owned()]);
}

#[tokio::test]
async fn forgetting_a_session_removes_a_marker_an_interrupted_mark_left() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let sessions = root.join(".maia/.sessions");
    std::fs::write(root.join("f"), "x").unwrap();
    let mut ck = Checkpoints::new(&sessions, &root, "s1");
    ck.snapshot(&Settings::default()).await.unwrap();
    let marks = sessions.join(".checkpoints/marks");
    // Left by a mark whose future was dropped between its write and its
    // remove; another session's marker stays.
    std::fs::write(marks.join("s1.mark-7"), "").unwrap();
    std::fs::write(marks.join("s2.mark-3"), "").unwrap();
    Checkpoints::forget(&sessions, &root, "s1").await;
    assert!(!marks.join("s1.mark-7").exists());
    assert!(marks.join("s2.mark-3").exists());
    assert!(!marks.join("s1").exists(), "no folder per session");
}
