//! The named fault points (`docs/architecture.md`, "Fault points") driven
//! through the binary: the process is killed (or a step made to fail) at
//! each point of a worktree fork, its sweep, a settings write and a token
//! file write in turn, and the next start must leave nothing behind.

use std::path::Path;

use serde_json::json;

use crate::cli_login::{maia as run_maia, mock_with_models};
use crate::harness::fixtures::{fork_folders, fork_records, git, repository};
use crate::harness::{Maia, WAIT, eventually};

/// Whether the repository is as before any fork: one worktree listed (the
/// command works), no fork branch, no fork folder, no record.
fn clean(project: &Path) -> bool {
    let listed = git(project, &["worktree", "list", "--porcelain"]);
    let branches = git(project, &["branch", "--list", "maia/*"]);
    listed.is_ok_and(|l| l.matches("worktree ").count() == 1)
        && branches.is_ok_and(|b| b.trim().is_empty())
        && fork_folders(project).is_empty()
        && fork_records(project) == 0
}

/// A session with one answered turn in a repository, in a process with
/// `fault` armed; asks for a worktree fork, which the fault cuts short:
/// the process is gone afterwards.
async fn fork_killed_at(fault: &str) -> Maia {
    let (maia, _) = Maia::ready().await;
    repository(&maia.cwd());
    let mut maia = maia.restart_with_fault(Some(fault)).await;
    maia.initialize().await;
    let sid = maia.new_session().await;
    maia.answered_turn(&sid, "alpha", "A.").await;
    let project = maia.cwd();
    maia.request(
        "session/fork",
        json!({"sessionId": sid, "cwd": project, "mcpServers": [], "_meta": {"maia": {"worktree": true}}}),
    )
    .await;
    let status = maia.wait_exit(WAIT).await;
    assert!(!status.success(), "killed at {fault}: {status:?}");
    maia
}

/// Starts again with `fault` (or nothing) armed and opens a session in the
/// project, which sweeps what interrupted forks left.
async fn reopen(maia: Maia, fault: Option<&str>) -> Maia {
    let mut maia = maia.restart_with_fault(fault).await;
    maia.initialize().await;
    let project = maia.cwd();
    maia.request("session/new", json!({"cwd": project, "mcpServers": []}))
        .await;
    maia
}

#[tokio::test]
async fn a_fork_killed_at_each_point_before_it_is_saved_is_undone_on_the_next_start() {
    for point in ["worktree.add.recorded", "worktree.add.added"] {
        let maia = fork_killed_at(point).await;
        let project = maia.cwd();
        assert_eq!(fork_records(&project), 1, "{point}: the record stays");
        let maia = reopen(maia, None).await;
        assert!(
            eventually(WAIT, || clean(&project)).await,
            "{point}: left {:?}, {} record(s), worktrees {:?}",
            fork_folders(&project),
            fork_records(&project),
            git(&project, &["worktree", "list"])
        );
        drop(maia);
    }
}

#[tokio::test]
async fn a_fork_killed_while_git_wrote_its_entry_leaves_the_repository_usable() {
    // Killed once git had made the entry; the entry then torn as a `git
    // worktree add` killed while writing it leaves it: locked while it
    // initializes, `commondir` empty. Every `git worktree list` and
    // `git branch -D` of the repository fails on it.
    let maia = fork_killed_at("worktree.add.added").await;
    let project = maia.cwd();
    let folder = fork_folders(&project).pop().expect("the fork's folder");
    // Git's name for the entry: the folder's, a leading `.` made `-` (the
    // test's folders are such), so found by the fork's tag.
    let name = folder.file_name().unwrap().to_string_lossy().into_owned();
    let tag = name.rsplit("maia-fork-").next().unwrap().to_owned();
    let entry = std::fs::read_dir(project.join(".git/worktrees"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(&tag))
        .expect("git's entry for the fork");
    std::fs::write(entry.join("locked"), "initializing").unwrap();
    std::fs::write(entry.join("commondir"), "").unwrap();
    assert!(git(&project, &["worktree", "list"]).is_err());
    let maia = reopen(maia, None).await;
    assert!(
        eventually(WAIT, || clean(&project)).await,
        "left {:?}, worktrees {:?}",
        fork_folders(&project),
        git(&project, &["worktree", "list"])
    );
    assert!(!entry.exists());
    drop(maia);
}

#[tokio::test]
async fn a_fork_killed_after_it_was_saved_keeps_its_worktree() {
    // Saved, killed before its record went: the worktree is the fork's.
    let maia = fork_killed_at("worktree.add.saved").await;
    let project = maia.cwd();
    let folder = fork_folders(&project).pop().expect("the fork's folder");
    let maia = reopen(maia, None).await;
    assert!(
        eventually(WAIT, || fork_records(&project) == 0).await,
        "the record stays"
    );
    assert!(
        folder.join("README.md").exists(),
        "the fork's worktree went"
    );
    let saved = std::fs::read_dir(folder.join(".maia/.sessions"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .count();
    assert_eq!(saved, 1);
    let branches = git(&project, &["branch", "--list", "maia/*"]).unwrap();
    assert!(!branches.trim().is_empty(), "the fork's branch went");
    git(
        &project,
        &["worktree", "remove", "--force", &folder.to_string_lossy()],
    )
    .unwrap();
    drop(maia);
}

#[tokio::test]
async fn a_sweep_killed_at_each_of_its_steps_is_finished_by_the_next() {
    for point in [
        "worktree.undo.entry",
        "worktree.undo.removed",
        "worktree.undo.pruned",
        "worktree.sweep.undone",
    ] {
        let maia = fork_killed_at("worktree.add.added").await;
        let project = maia.cwd();
        let mut maia = reopen(maia, Some(point)).await;
        let status = maia.wait_exit(WAIT).await;
        assert!(!status.success(), "the sweep was killed at {point}");
        let maia = reopen(maia, None).await;
        assert!(
            eventually(WAIT, || clean(&project)).await,
            "{point}: left {:?}, {} record(s), worktrees {:?}",
            fork_folders(&project),
            fork_records(&project),
            git(&project, &["worktree", "list"])
        );
        drop(maia);
    }
}

/// The files of `~/.maia` (names).
fn maia_files(home: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(home.join(".maia"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test]
async fn a_login_killed_or_failing_before_its_rename_leaves_no_key_behind() {
    let mock = mock_with_models().await;
    let home = tempfile::tempdir().unwrap();
    let url = mock.url();
    let login = ["login", "--url", &url, "--key-env", "K", "--model", "local"];
    let run = run_maia(
        home.path(),
        home.path(),
        &login,
        &[("K", "sk-1"), ("MAIA_FAULT", "settings.written=error")],
        "",
    )
    .await;
    assert_ne!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("fault injected"), "{}", run.stderr);
    assert!(!maia_files(home.path()).iter().any(|n| n.contains(".tmp")));
    let run = run_maia(
        home.path(),
        home.path(),
        &login,
        &[("K", "sk-1"), ("MAIA_FAULT", "settings.written")],
        "",
    )
    .await;
    assert_eq!(run.code, -1, "killed: {}", run.stderr);
    // Killed: the new text (with the key) waits beside the file.
    assert!(
        maia_files(home.path()).iter().any(|n| n.contains(".tmp")),
        "{:?}",
        maia_files(home.path())
    );
    let run = run_maia(home.path(), home.path(), &login, &[("K", "sk-1")], "").await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(maia_files(home.path()), vec!["settings.json".to_owned()]);
}

#[tokio::test]
async fn a_token_write_killed_before_its_rename_leaves_nothing_on_the_next() {
    let home = tempfile::tempdir().unwrap();
    let add = |name: &'static str, fault: Option<&'static str>| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_maia"));
        command
            .args(["serve", "token", "add", name])
            .env("HOME", home.path());
        if let Some(fault) = fault {
            command.env("MAIA_FAULT", fault);
        }
        command.output().unwrap()
    };
    let out = add("phone", Some("tokens.written"));
    assert_eq!(out.status.code(), None, "killed: {out:?}");
    assert!(
        maia_files(home.path()).iter().any(|n| n.contains(".tmp")),
        "{:?}",
        maia_files(home.path())
    );
    let out = add("laptop", None);
    assert!(out.status.success(), "{out:?}");
    let files: Vec<String> = maia_files(home.path())
        .into_iter()
        .filter(|n| n.starts_with("serve-tokens"))
        .collect();
    assert_eq!(files, vec!["serve-tokens.json".to_owned()]);
    let tokens = std::fs::read_to_string(home.path().join(".maia/serve-tokens.json")).unwrap();
    assert!(
        tokens.contains("laptop") && !tokens.contains("phone"),
        "{tokens}"
    );
}
