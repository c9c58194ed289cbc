//! The README's quick start, run as written (issue 25), so the README
//! cannot drift: the commands of its "First run" block are parsed out of
//! README.md and run in order — a fresh HOME, a project folder, the mock
//! LLM standing in for the proxy, `maia login` answered through a pipe —
//! and then the Zed entry of "Add it to your editor" is started as Zed
//! starts it and opens a session.
//!
//! The `cargo install` line is checked here (it installs the crate that
//! builds `maia`); CI runs it for real (`.ci/run`) and points
//! `MAIA_QUICKSTART_BIN` at what it installed, so the commands then run
//! that binary. Without the variable they run the one `cargo test` built.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use maia_test_support::{self as mock, MockLlm};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use crate::harness::WAIT;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn readme() -> String {
    std::fs::read_to_string(repo().join("README.md")).unwrap()
}

/// The first fenced block of `lang` in the section `heading` (a `## ` line).
fn block(text: &str, heading: &str, lang: &str) -> String {
    let start = text
        .find(&format!("\n## {heading}"))
        .unwrap_or_else(|| panic!("README.md has no section `## {heading}`"));
    let section = &text[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    let fence = format!("```{lang}\n");
    let open = section
        .find(&fence)
        .unwrap_or_else(|| panic!("no ```{lang} block in `## {heading}`"));
    let body = &section[open + fence.len()..];
    body[..body.find("```").unwrap()].to_owned()
}

/// The quick start's commands, each split as the shell splits it.
fn quick_start() -> Vec<Vec<String>> {
    block(&readme(), "First run", "sh")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| shlex::split(l).unwrap_or_else(|| panic!("not a shell command: {l}")))
        .collect()
}

/// The binary the commands run: what CI installed, else `cargo test`'s.
fn maia_binary() -> PathBuf {
    match std::env::var_os("MAIA_QUICKSTART_BIN") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => PathBuf::from(env!("CARGO_BIN_EXE_maia")),
    }
}

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn run(binary: &Path, args: &[String], home: &Path, cwd: &Path, input: &str) -> Ran {
    let mut child = Command::new(binary)
        .args(args)
        .env("HOME", home)
        .env_remove("LITELLM_API_KEY")
        .env_remove("MAIA_MODEL")
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", binary.display()));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(WAIT * 2, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("`maia {}` did not finish", args.join(" ")))
        .unwrap();
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn the_install_line_installs_the_maia_binary_from_the_checkout() {
    let commands = quick_start();
    let install = &commands[0];
    assert_eq!(
        install[..2],
        ["cargo", "install"],
        "the quick start starts with the install: {install:?}"
    );
    // From the checkout, never the registry (MAIA is not published).
    let path = install
        .windows(2)
        .find(|w| w[0] == "--path")
        .map(|w| w[1].clone())
        .unwrap_or_else(|| panic!("`cargo install` without --path: {install:?}"));
    let manifest = std::fs::read_to_string(repo().join(&path).join("Cargo.toml"))
        .unwrap_or_else(|e| panic!("{path}/Cargo.toml: {e}"));
    assert!(
        manifest.contains("[[bin]]\nname = \"maia\""),
        "{path} does not build the `maia` binary"
    );
    // The lock file the install is held to is in the repository.
    assert!(install.iter().any(|a| a == "--locked"), "{install:?}");
    assert!(repo().join("Cargo.lock").exists());
}

#[tokio::test]
async fn the_quick_start_works_as_written() {
    let commands = quick_start();
    let binary = maia_binary();
    let mock = MockLlm::start().await;
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let mut ran = Vec::new();
    for argv in &commands[1..] {
        assert_eq!(
            argv[0], "maia",
            "a quick-start command that is not maia: {argv:?}"
        );
        let subcommand = argv[1].as_str();
        let (input, answer) = match subcommand {
            // The proxy's URL, no key, the first model offered.
            "login" => (format!("{}\n\n\n", mock.url()), None),
            "doctor" => (String::new(), None),
            "exec" => {
                mock.push(mock::text_reply("Hello from the mock proxy."));
                (String::new(), Some("Hello from the mock proxy.\n"))
            }
            other => panic!(
                "the quick start runs `maia {other}`, which this test does not know how to answer: teach it"
            ),
        };
        let out = run(&binary, &argv[1..], home.path(), project.path(), &input).await;
        assert_eq!(
            out.code,
            Some(0),
            "`{}` failed:\n{}\n{}",
            argv.join(" "),
            out.stdout,
            out.stderr
        );
        if let Some(answer) = answer {
            assert_eq!(out.stdout, answer, "{}", out.stderr);
        }
        ran.push(subcommand.to_owned());
    }
    assert_eq!(ran, ["login", "doctor", "exec"]);
    assert!(home.path().join(".maia/settings.json").exists());

    // Then the editor: Zed's entry, started as Zed starts it.
    let zed: Value = serde_json::from_str(&block(&readme(), "Add it to your editor", "json"))
        .expect("the Zed entry is JSON");
    let entry = &zed["agent_servers"]["MAIA"];
    assert_eq!(entry["command"], "maia", "{entry}");
    let args: Vec<String> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    let mut child = Command::new(&binary)
        .args(&args)
        .env("HOME", home.path())
        .env_remove("LITELLM_API_KEY")
        .env_remove("MAIA_MODEL")
        .current_dir(project.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
               "params": {"cwd": project.path(), "mcpServers": []}}),
    ];
    for request in requests {
        stdin
            .write_all(format!("{request}\n").as_bytes())
            .await
            .unwrap();
        let id = request["id"].clone();
        let response = tokio::time::timeout(WAIT, async {
            loop {
                let line = lines.next_line().await.unwrap().expect("maia acp ended");
                let message: Value = serde_json::from_str(&line).unwrap();
                if message["id"] == id {
                    return message;
                }
            }
        })
        .await
        .expect("no answer from maia acp");
        assert!(response.get("result").is_some(), "{response}");
    }
    drop(stdin);
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("maia acp did not end with its input")
        .unwrap();
    assert!(status.success(), "{status}");
}
