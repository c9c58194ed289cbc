//! What the tests set up and watch outside the protocol: git
//! repositories in a session's folder, files, processes, and conditions
//! polled until they hold.

use std::path::Path;
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

/// Makes `project` a repository on branch `main` with one commit
/// (`README.md`, "hello").
pub fn repository(project: &Path) {
    git(project, &["init", "-q", "-b", "main"]).unwrap();
    std::fs::write(project.join("README.md"), "hello\n").unwrap();
    git(project, &["add", "README.md"]).unwrap();
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
    git(project, &commit).unwrap();
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
