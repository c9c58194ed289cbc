//! The watch only makes snapshots cheaper, never different: for random
//! changes (writes, deletes, renames of files and folders, mode changes,
//! links, changes made while a snapshot is being taken), a session that
//! trusts the watch and one that rescans every time take the same trees
//! and the same modes.

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
    /// Nothing: the watch answers.
    Nothing,
}

const DIRS: &[&str] = &["", "a", "a/b", "c"];
const NAMES: &[&str] = &["x", "y.txt", "z.sh"];

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
        1 => (slot.clone(), slot).prop_map(|(a, b)| Op::Link(a, b)),
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
}

fn check(steps: Vec<(Op, Option<Op>)>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let sessions = root.join(".maia/.sessions");
    std::fs::write(root.join("x"), "start").unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let watched_settings = Settings::default();
    let rescan_settings = Settings {
        watch: false,
        ..Settings::default()
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
            let w = watched.snapshot(&watched_settings).await.unwrap();
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
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn the_watched_snapshot_is_the_rescanned_one(
        steps in proptest::collection::vec((op(), proptest::option::weighted(0.3, op())), 1..8)
    ) {
        check(steps);
    }
}
