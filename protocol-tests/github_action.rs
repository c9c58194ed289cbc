//! The GitHub Action (`dist/github-action/`) outside GitHub: its
//! `install.sh` fetching a release made by `dist/release.sh` (served from a
//! `file://` folder laid out as a GitHub release, SHA256SUMS beside the
//! archive) and refusing an archive whose checksum differs; its `run.sh`
//! running the installed `maia exec --json` against the mock LLM with the
//! step's inputs as GitHub passes them, writing the step's outputs
//! (answer, events, exit code) and the job summary.
//!
//! Needs `curl` and `jq` (both on GitHub's runners); without them the test
//! prints SKIPPED, or fails with `MAIA_REQUIRE_ALL=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

use maia_test_support::{self as mock, MockLlm};
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `name=value` lines of a `$GITHUB_OUTPUT` file.
fn outputs(path: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// The last value written for `name`.
fn output(outputs: &[(String, String)], name: &str) -> String {
    outputs
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("no output {name}: {outputs:?}"))
}

#[tokio::test]
async fn the_action_installs_a_checked_release_and_runs_maia_exec() {
    if !mock::require(
        "curl and jq on PATH",
        mock::on_path("curl") && mock::on_path("jq"),
    ) {
        return;
    }
    let version = env!("CARGO_PKG_VERSION");
    let target = "x86_64-unknown-linux-gnu";
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        mock::require("an x86_64 Linux host (the release served here)", false);
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let releases = scratch.path().join("releases");
    let tag = releases.join(format!("v{version}"));
    let packed = Command::new("bash")
        .arg(repo().join("dist/release.sh"))
        .arg(target)
        .env("MAIA_RELEASE_BINARY", env!("CARGO_BIN_EXE_maia"))
        .env("MAIA_RELEASE_OUT", &tag)
        .output()
        .unwrap();
    assert!(packed.status.success(), "{packed:?}");
    let archive = format!("maia-{version}-{target}.tar.gz");
    let sums = Command::new("sha256sum")
        .arg(&archive)
        .current_dir(&tag)
        .output()
        .unwrap();
    std::fs::write(tag.join("SHA256SUMS"), &sums.stdout).unwrap();

    let runner_temp = scratch.path().join("runner-temp");
    std::fs::create_dir_all(&runner_temp).unwrap();
    let github_path = scratch.path().join("github-path");
    let install = |base: &Path| {
        Command::new("bash")
            .arg(repo().join("dist/github-action/install.sh"))
            .env("MAIA_RELEASE_BASE", format!("file://{}", base.display()))
            .env("RUNNER_TEMP", &runner_temp)
            .env("GITHUB_PATH", &github_path)
            .output()
            .unwrap()
    };
    let installed = install(&releases);
    assert!(installed.status.success(), "{installed:?}");
    assert_eq!(
        String::from_utf8_lossy(&installed.stdout).trim(),
        format!("maia {version}")
    );
    let bin_dir = std::fs::read_to_string(&github_path).unwrap();
    let bin_dir = PathBuf::from(bin_dir.trim());
    assert!(bin_dir.join("maia").is_file());

    // A release whose SHA256SUMS does not match is refused.
    let tampered = scratch.path().join("tampered");
    let tampered_tag = tampered.join(format!("v{version}"));
    std::fs::create_dir_all(&tampered_tag).unwrap();
    std::fs::copy(tag.join(&archive), tampered_tag.join(&archive)).unwrap();
    std::fs::write(
        tampered_tag.join("SHA256SUMS"),
        format!("{}  {archive}\n", "0".repeat(64)),
    )
    .unwrap();
    let refused = install(&tampered);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stdout).contains("does not match"),
        "{refused:?}"
    );

    // run.sh with the step's inputs, maia from the installed folder.
    let llm = MockLlm::start().await;
    llm.push(mock::text_reply("Looks good: one nit in lib.rs:3."));
    let home = scratch.path().join("home");
    let project = scratch.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(home.join(".maia")).unwrap();
    std::fs::write(
        home.join(".maia/settings.json"),
        r#"{"llm_retry_base_ms": 10}"#,
    )
    .unwrap();
    let github_output = scratch.path().join("github-output");
    let summary = scratch.path().join("summary.md");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let ran = tokio::process::Command::new("bash")
        .arg(repo().join("dist/github-action/run.sh"))
        .env("PATH", path)
        .env("HOME", &home)
        .env("RUNNER_TEMP", &runner_temp)
        .env("GITHUB_OUTPUT", &github_output)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .env("INPUT_PROMPT", "review the change")
        .env("INPUT_LITELLM_URL", llm.url())
        .env("INPUT_MODEL", "mock-model")
        .env("INPUT_MODE", "read-only")
        .env("INPUT_ALLOW", "  Bash(git diff *)\n\nBash(git log *)\n")
        .env("INPUT_WORKING_DIRECTORY", &project)
        .env("LITELLM_API_KEY", "sk-action-secret")
        .env_remove("MAIA_MODEL")
        .output()
        .await
        .unwrap();
    assert!(ran.status.success(), "{ran:?}");
    let outs = outputs(&github_output);
    assert_eq!(output(&outs, "exit-code"), "0");
    let answer = std::fs::read_to_string(output(&outs, "answer")).unwrap();
    assert_eq!(answer, "Looks good: one nit in lib.rs:3.");
    let events: Vec<Value> = std::fs::read_to_string(output(&outs, "events"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.first().unwrap()["type"], "session_started");
    assert_eq!(events.last().unwrap()["type"], "turn_ended");
    assert!(
        std::fs::read_to_string(&summary)
            .unwrap()
            .contains("Looks good")
    );
    // The settings gained the URL and model and kept what was there; the
    // key reached the proxy and no file.
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".maia/settings.json")).unwrap())
            .unwrap();
    assert_eq!(settings["LiteLLM_URL"], llm.url());
    assert_eq!(settings["model"], "mock-model");
    assert_eq!(settings["llm_retry_base_ms"], 10);
    assert!(
        llm.headers()[0].contains(&("authorization".into(), "Bearer sk-action-secret".into())),
        "{:?}",
        llm.headers()[0]
    );
    assert_eq!(llm.requests().len(), 1);

    // A failed run: its status is the step's, with the reason as an error.
    let failed = tokio::process::Command::new("bash")
        .arg(repo().join("dist/github-action/run.sh"))
        .env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display()))
        .env("HOME", &home)
        .env("RUNNER_TEMP", &runner_temp)
        .env("GITHUB_OUTPUT", &github_output)
        .env("INPUT_PROMPT", "again")
        .env("INPUT_LITELLM_URL", "http://127.0.0.1:9")
        .env("INPUT_WORKING_DIRECTORY", &project)
        .env_remove("GITHUB_STEP_SUMMARY")
        .output()
        .await
        .unwrap();
    assert_eq!(failed.status.code(), Some(1), "{failed:?}");
    assert!(
        String::from_utf8_lossy(&failed.stdout).contains("::error::maia exec exited with status 1"),
        "{failed:?}"
    );
    assert_eq!(output(&outputs(&github_output), "exit-code"), "1");
}
