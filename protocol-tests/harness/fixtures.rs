//! What the tests set up and watch outside the protocol: git
//! repositories in a session's folder, files, processes, and conditions
//! polled until they hold.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Runs `git ARGS` in `cwd`; its stdout, or its stderr when it failed.
pub fn git(cwd: &Path, args: &[&str]) -> Result<String, String> {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("git runs");
    match out.status.success() {
        true => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}

/// Runs `git ARGS` in `cwd`, which must succeed; its stdout.
pub fn git_ok(cwd: &Path, args: &[&str]) -> String {
    git(cwd, args).unwrap_or_else(|e| panic!("git {args:?}: {e}"))
}

/// Makes `project` a repository on branch `main` with one commit
/// (`README.md`, "hello").
pub fn repository(project: &Path) {
    git_ok(project, &["init", "-q", "-b", "main"]);
    std::fs::write(project.join("README.md"), "hello\n").unwrap();
    git_ok(project, &["add", "README.md"]);
    commit(project);
}

/// Commits what is staged in `project` ("start", by a test author).
pub fn commit(project: &Path) {
    let commit = [
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "-m",
        "start",
    ];
    git_ok(project, &commit);
}

/// The worktree fork folders beside `project` (`<name>.maia-fork-*`).
pub fn fork_folders(project: &Path) -> Vec<PathBuf> {
    let name = project.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::read_dir(project.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().is_some_and(|n| {
                n.to_string_lossy()
                    .starts_with(&format!("{name}.maia-fork-"))
            })
        })
        .collect()
}

/// The fork records waiting in `project`'s sessions folder.
pub fn fork_records(project: &Path) -> usize {
    std::fs::read_dir(project.join(".maia/.sessions/.forks")).map_or(0, |d| d.count())
}

/// Removes a folder a test made outside its temporary folders (a worktree
/// beside the project) when dropped.
pub struct RemoveOnDrop(pub Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

/// Whether a process is alive (not gone and not a zombie).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next());
            state != Some("Z")
        }
        Err(_) => false,
    }
}

/// Polls `pred` until it holds or `within` passes.
pub async fn eventually(within: Duration, mut pred: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if pred() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}
