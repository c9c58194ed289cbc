//! The real-model lane in the test suite: one task of the public suite
//! (`server/maia-test-support/real-model/tasks/`) done end to end by the
//! real binary (`maia exec`) with a real local model, Qwen2.5-Coder-1.5B
//! served by llama.cpp at temperature 0
//! (`server/maia-test-support/real-model/serve.sh`, which `.ci/run` starts
//! and which sets `MAIA_REAL_MODEL_URL` and `MAIA_REAL_MODEL`), and judged
//! by the task's own checker. The timeout is generous: speed is the
//! suite's business (`run.py`, docs/performance.md), not this test's.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::cli_login::maia_with_timeout;

/// The suite's folder.
fn suite() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../maia-test-support/real-model")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn git(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@localhost"])
        .args(args)
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

#[tokio::test]
async fn a_real_model_changes_one_line_through_maia_exec() {
    let url = std::env::var("MAIA_REAL_MODEL_URL").ok();
    if !maia_test_support::require(
        "a local model server (MAIA_REAL_MODEL_URL: server/maia-test-support/real-model/serve.sh)",
        url.is_some(),
    ) {
        return;
    }
    let model = std::env::var("MAIA_REAL_MODEL").unwrap_or_else(|_| "qwen2.5-coder-1.5b".into());
    let task = suite().join("tasks/one-line");
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    copy_dir(&task.join("repo"), work.path());
    git(work.path(), &["init", "-q"]);
    git(work.path(), &["add", "-A"]);
    git(work.path(), &["commit", "-qm", "start"]);
    std::fs::create_dir_all(home.path().join(".maia")).unwrap();
    std::fs::write(
        home.path().join(".maia/settings.json"),
        // A model marked local, as a user of a local server marks it
        // (README: `localModels`): text mode from the start.
        json!({"LiteLLM_URL": url, "LiteLLM_API_Key": "sk-local", "model": model,
               "localModels": true})
        .to_string(),
    )
    .unwrap();
    let prompt = std::fs::read_to_string(task.join("prompt.txt")).unwrap();
    let run = maia_with_timeout(
        home.path(),
        work.path(),
        &[
            "exec",
            "--json",
            "--mode",
            "accept-edits",
            "--allow",
            "Bash",
            prompt.trim(),
        ],
        Duration::from_secs(25 * 60),
    )
    .await;
    let events: Vec<Value> = run
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let ended = events.iter().find(|e| e["type"] == "turn_ended");
    let check = std::process::Command::new("python3")
        .arg(task.join("check.py"))
        .arg("/dev/null")
        .current_dir(work.path())
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "the task is not done: {}\nexit {:?}, {ended:?}\n{}\n{}",
        String::from_utf8_lossy(&check.stderr),
        run.code,
        run.stdout,
        run.stderr
    );
    assert_eq!(run.code, 0, "{ended:?}\n{}", run.stderr);
    // The edit went through MAIA's own tool path: a tool call with a diff.
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "tool_call" && e["kind"] == "edit"),
        "{}",
        run.stdout
    );
}
