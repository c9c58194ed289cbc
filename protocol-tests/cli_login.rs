//! `maia login` and `maia doctor` (issue 14), run as a user runs them: the
//! real binary with an isolated HOME, questions answered through a pipe,
//! against the mock LLM. Every failure a user can fix is named.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use maia_test_support::MockLlm;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::harness::WAIT;

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `maia ARGS` with `home` as HOME, in `cwd`, `input` on stdin.
pub async fn maia(
    home: &Path,
    cwd: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    input: &str,
) -> Run {
    run_maia(home, cwd, args, env, input, WAIT * 2).await
}

/// [`maia`] with no input and a wait of its own (a real model's run).
pub async fn maia_with_timeout(home: &Path, cwd: &Path, args: &[&str], wait: Duration) -> Run {
    run_maia(home, cwd, args, &[], "", wait).await
}

async fn run_maia(
    home: &Path,
    cwd: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    input: &str,
    wait: Duration,
) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_maia"));
    command
        .args(args)
        .env("HOME", home)
        .env_remove("LITELLM_API_KEY")
        .env_remove("MAIA_MODEL")
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().expect("spawn maia");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(wait, child.wait_with_output())
        .await
        .expect("maia did not finish")
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A mock with two models: one with its window in `/model/info`, one in
/// the model list.
pub async fn mock_with_models() -> MockLlm {
    let mock = MockLlm::start().await;
    mock.set_models(vec![
        json!({"id": "gpt-4.1"}),
        json!({"id": "local", "max_input_tokens": 32768}),
    ]);
    mock.set_model_info(json!({"data": [
        {"model_name": "gpt-4.1", "model_info": {"max_input_tokens": 1047576}}
    ]}));
    mock
}

fn settings(home: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(home.join(".maia/settings.json")).unwrap())
        .unwrap()
}

/// A port nothing listens on.
pub async fn dead_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    port
}

#[tokio::test]
async fn scripted_login_writes_a_private_settings_file() {
    let mock = mock_with_models().await;
    mock.require_key(Some("sk-script-123"));
    let home = tempfile::tempdir().unwrap();
    let url = mock.url();
    let run = maia(
        home.path(),
        home.path(),
        &[
            "login",
            "--url",
            &url,
            "--key-env",
            "MY_PROXY_KEY",
            "--model",
            "local",
        ],
        &[("MY_PROXY_KEY", "sk-script-123")],
        "",
    )
    .await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let s = settings(home.path());
    assert_eq!(s["LiteLLM_URL"], url.as_str());
    assert_eq!(s["LiteLLM_API_Key"], "sk-script-123");
    assert_eq!(s["model"], "local");
    assert!(
        run.stdout.contains("1,047,576 tokens (/model/info)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("32,768 tokens (model list)"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("sk-script") && !run.stderr.contains("sk-script"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(home.path().join(".maia/settings.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // Without --model the saved one stays when listed; LITELLM_API_KEY is
    // read at every start, so it is not written (and the saved key goes).
    let run = maia(
        home.path(),
        home.path(),
        &["login", "--url", &url, "--key-env", "LITELLM_API_KEY"],
        &[("LITELLM_API_KEY", "sk-script-123")],
        "",
    )
    .await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let s = settings(home.path());
    assert_eq!(s["model"], "local");
    assert!(s.get("LiteLLM_API_Key").is_none(), "{s}");
}

#[tokio::test]
async fn an_existing_file_is_updated_key_by_key() {
    let mock = mock_with_models().await;
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".maia")).unwrap();
    let before = "{\n    \"sandbox\": \"read-only\",\n    \"LiteLLM_URL\": \"http://old:4000\",\n    \"contextWindows\": {\"local\": 8000}\n}\n";
    std::fs::write(home.path().join(".maia/settings.json"), before).unwrap();
    let url = mock.url();
    let run = maia(home.path(), home.path(), &["login", "--url", &url], &[], "").await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let after = std::fs::read_to_string(home.path().join(".maia/settings.json")).unwrap();
    assert!(
        after.starts_with(&format!(
            "{{\n    \"sandbox\": \"read-only\",\n    \"LiteLLM_URL\": \"{url}\",\n    \"contextWindows\": {{\"local\": 8000}}"
        )),
        "{after}"
    );
    // The first listed model, and the manual window wins over the list.
    assert_eq!(settings(home.path())["model"], "gpt-4.1");
    assert!(
        run.stdout.contains("8,000 tokens (contextWindows setting)"),
        "{}",
        run.stdout
    );
}

#[tokio::test]
async fn interactive_login_asks_and_retries_after_a_failure() {
    let mock = mock_with_models().await;
    mock.require_key(Some("sk-typed"));
    let home = tempfile::tempdir().unwrap();
    let dead = format!("http://127.0.0.1:{}", dead_port().await);
    // First a dead URL, then "try again", then the mock, a key, model 2.
    let input = format!("{dead}\n\n\n{}\nsk-typed\n2\n", mock.url());
    let run = maia(home.path(), home.path(), &["login"], &[], &input).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let out = &run.stdout;
    assert!(out.contains("Proxy URL [http://localhost:4000]: "), "{out}");
    assert!(
        out.contains("API key (not shown; Enter: no key): "),
        "{out}"
    );
    assert!(out.contains("connection refused"), "{out}");
    assert!(out.contains("Fix: start the LiteLLM proxy"), "{out}");
    assert!(out.contains("Try again? [Y/n] "), "{out}");
    // The second time the URL typed before is offered.
    assert!(out.contains(&format!("Proxy URL [{dead}]: ")), "{out}");
    assert!(out.contains("Default model [1]: "), "{out}");
    assert!(!out.contains("sk-typed"), "the key is never shown: {out}");
    let s = settings(home.path());
    assert_eq!(s["model"], "local");
    assert_eq!(s["LiteLLM_API_Key"], "sk-typed");
    assert_eq!(s["LiteLLM_URL"], mock.url().as_str());
}

#[tokio::test]
async fn interactive_login_ends_cleanly_when_the_input_does() {
    let home = tempfile::tempdir().unwrap();
    let run = maia(home.path(), home.path(), &["login"], &[], "").await;
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("nothing was saved"), "{}", run.stderr);
    assert!(!home.path().join(".maia/settings.json").exists());
}

/// Runs a scripted login against `url` and returns its stderr, checking
/// that it failed and wrote nothing.
async fn failing_login(url: &str, env: &[(&str, &str)], extra: &[&str]) -> String {
    let home = tempfile::tempdir().unwrap();
    let mut args = vec!["login", "--url", url];
    args.extend_from_slice(extra);
    let run = maia(home.path(), home.path(), &args, env, "").await;
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(!home.path().join(".maia/settings.json").exists());
    assert!(run.stderr.contains("Fix: "), "{}", run.stderr);
    run.stderr
}

#[tokio::test]
async fn each_failure_names_what_to_fix() {
    let mock = mock_with_models().await;
    let dead = format!("http://127.0.0.1:{}", dead_port().await);
    let err = failing_login(&dead, &[], &[]).await;
    assert!(err.contains("connection refused"), "{err}");

    // TLS spoken to a plain HTTP server.
    let tls = mock.url().replace("http://", "https://");
    let err = failing_login(&tls, &[], &[]).await;
    assert!(err.contains("TLS"), "{err}");
    assert!(err.contains(&format!("use {}", mock.url())), "{err}");

    mock.require_key(Some("sk-right"));
    let err = failing_login(&mock.url(), &[("K", "sk-wrong")], &["--key-env", "K"]).await;
    assert!(err.contains("refused the API key (HTTP 401"), "{err}");
    assert!(!err.contains("sk-wrong"), "{err}");
    let err = failing_login(&mock.url(), &[], &[]).await;
    assert!(err.contains("--key-env"), "{err}");
    mock.require_key(None);

    let err = failing_login(&format!("{}/v1", mock.url()), &[], &[]).await;
    assert!(err.contains("has no model list (HTTP 404)"), "{err}");
    assert!(err.contains("without /v1"), "{err}");

    let err = failing_login(&mock.url(), &[], &["--model", "nope"]).await;
    assert!(err.contains("does not list the model `nope`"), "{err}");
    assert!(err.contains("gpt-4.1, local"), "{err}");

    mock.set_models(vec![]);
    let err = failing_login(&mock.url(), &[], &[]).await;
    assert!(err.contains("lists no models"), "{err}");
    assert!(err.contains("model_list"), "{err}");

    let err = failing_login("not a url", &[], &[]).await;
    assert!(err.contains("not a usable URL"), "{err}");

    let home = tempfile::tempdir().unwrap();
    let url = mock.url();
    let run = maia(
        home.path(),
        home.path(),
        &["login", "--url", &url, "--key-env", "UNSET_VAR_X"],
        &[],
        "",
    )
    .await;
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("UNSET_VAR_X is not set"),
        "{}",
        run.stderr
    );
}

fn write_settings(home: &Path, value: &Value) {
    std::fs::create_dir_all(home.join(".maia")).unwrap();
    std::fs::write(
        home.join(".maia/settings.json"),
        serde_json::to_string_pretty(value).unwrap(),
    )
    .unwrap();
}

#[tokio::test]
async fn doctor_reports_every_check_and_exits_zero_when_ready() {
    let mock = mock_with_models().await;
    mock.require_key(Some("sk-doc"));
    // Two models whose windows only the models themselves know: one answered an earlier
    // session (kept in the windows cache), one could not tell.
    mock.set_models(vec![
        json!({"id": "gpt-4.1"}),
        json!({"id": "local", "max_input_tokens": 32768}),
        json!({"id": "mystery"}),
        json!({"id": "silent"}),
    ]);
    let mcp_url = maia_test_support::mock_mcp::spawn_http().await.unwrap();
    let fake_lsp = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../protocol-tests/fixtures/fake_lsp.py"
    );
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".maia/cache")).unwrap();
    std::fs::write(
        home.path().join(".maia/cache/windows.json"),
        json!({"version": 1, "windows": [
            {"server": mock.url(), "model": "mystery", "tokens": 65536,
             "source": "askedModel", "date": "2026-11-30T10:00:00Z"},
            {"server": mock.url(), "model": "silent", "tokens": null,
             "source": "askedModel", "date": "2026-11-30T10:00:01Z"}
        ]})
        .to_string(),
    )
    .unwrap();
    write_settings(
        home.path(),
        &json!({
            "LiteLLM_URL": mock.url(),
            "LiteLLM_API_Key": "sk-doc",
            "model": "local",
            "mcpServers": {
                "docs": {"url": mcp_url},
                "broken": {"command": "/nonexistent/mcp-server"}
            },
            "lsp": {
                "fake": {"command": "python3", "args": [fake_lsp, "crash"],
                         "fileTypes": ["py"], "rootMarkers": []},
                "nols": {"command": "/nonexistent/ls", "fileTypes": ["x"]}
            }
        }),
    );
    std::fs::write(project.path().join("MAIA.md"), "Be brief.").unwrap();
    let skill = project.path().join(".maia/skills/release");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\ndescription: Cut a release\n---\nSteps.",
    )
    .unwrap();
    let run = maia(home.path(), project.path(), &["doctor"], &[], "").await;
    let out = &run.stdout;
    // The broken MCP server is reported but does not stop prompts.
    assert_eq!(run.code, 0, "{out}{}", run.stderr);
    for line in [
        "✓ proxy answers at ",
        "✓ key accepted (key: LiteLLM_API_Key in the settings)",
        "✓ 4 models listed",
        "✓ default model local (from the `model` setting) is listed",
        "✓ gpt-4.1: 1,047,576 tokens, from /model/info",
        "✓ local (default): 32,768 tokens, from model list",
        "✓ mystery: 65,536 tokens, from the model's own answer (windows cache)",
        "- silent: window unknown; the model could not tell it (2026-11-30T10:00:01Z;",
        "✓ instruction file ",
        "✓ 1 skill: release",
        "- no custom tools",
        "✓ MCP server docs: ",
        "✗ MCP server broken: ",
        "✓ language server fake (`python3 ",
        "crash`) starts for ",
        ": fake 0",
        "✗ language server nols (`/nonexistent/ls`): cannot start",
        " sandbox: Landlock ABI ",
        " sandbox: unprivileged user and mount namespaces: ",
        "Ready: MAIA can answer a prompt here.",
    ] {
        assert!(out.contains(line), "missing {line:?} in\n{out}");
    }
    assert!(!out.contains("sk-doc"), "{out}");

    let run = maia(home.path(), project.path(), &["doctor", "--json"], &[], "").await;
    assert_eq!(run.code, 0);
    let report: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(report["ready"], true);
    let checks = report["checks"].as_array().unwrap();
    assert!(
        checks
            .iter()
            .any(|c| c["id"] == "mcp" && c["ok"] == false && c["blocking"] == false)
    );
    assert!(
        checks
            .iter()
            .any(|c| c["id"] == "model" && c["ok"] == true && c["blocking"] == true)
    );
    assert!(
        checks
            .iter()
            .any(|c| c["id"] == "lsp" && c["ok"] == false && c["blocking"] == false)
    );
}

#[tokio::test]
async fn doctor_exits_non_zero_with_the_fix_when_no_prompt_can_be_answered() {
    let mock = mock_with_models().await;
    let home = tempfile::tempdir().unwrap();
    let dead = format!("http://127.0.0.1:{}", dead_port().await);
    write_settings(home.path(), &json!({"LiteLLM_URL": dead}));
    let run = maia(home.path(), home.path(), &["doctor"], &[], "").await;
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.contains("✗ nothing answers at"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("fix: start the LiteLLM proxy"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("Not ready"), "{}", run.stdout);

    mock.require_key(Some("sk-right"));
    write_settings(
        home.path(),
        &json!({"LiteLLM_URL": mock.url(), "LiteLLM_API_Key": "sk-bad"}),
    );
    let run = maia(home.path(), home.path(), &["doctor", "--json"], &[], "").await;
    assert_eq!(run.code, 1, "{}", run.stdout);
    let report: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(report["ready"], false);
    let key = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "key")
        .unwrap();
    assert_eq!(key["ok"], false, "{report}");
    assert!(key["fix"].as_str().unwrap().contains("maia login"));

    mock.require_key(None);
    write_settings(
        home.path(),
        &json!({"LiteLLM_URL": mock.url(), "model": "gone"}),
    );
    let run = maia(home.path(), home.path(), &["doctor"], &[], "").await;
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("✗ default model gone (from the `model` setting) is not listed"),
        "{}",
        run.stdout
    );

    std::fs::write(home.path().join(".maia/settings.json"), "{ broken").unwrap();
    let run = maia(home.path(), home.path(), &["doctor"], &[], "").await;
    assert!(run.stdout.contains("not valid JSON"), "{}", run.stdout);
}

#[tokio::test]
async fn help_lists_the_commands() {
    let home = tempfile::tempdir().unwrap();
    let run = maia(home.path(), home.path(), &["--help"], &[], "").await;
    assert_eq!(run.code, 0);
    for word in ["acp", "lsp", "login", "doctor", "--model"] {
        assert!(run.stdout.contains(word), "{word}: {}", run.stdout);
    }
    assert!(!run.stdout.contains("__guard"));
    let run = maia(home.path(), home.path(), &["acp", "--bogus"], &[], "").await;
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--bogus"), "{}", run.stderr);
}

/// On a terminal the key is read with echo off: the typed key never shows
/// on the screen, the other answers do.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_terminal_the_key_is_not_echoed() {
    use std::io::{Read, Write};
    use std::sync::mpsc;
    use std::time::Duration;

    let mock = mock_with_models().await;
    mock.require_key(Some("sk-hidden-42"));
    let home = tempfile::tempdir().unwrap();
    let pty = nix::pty::openpty(None, None).unwrap();
    let slave = std::fs::File::from(pty.slave);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_maia"))
        .arg("login")
        .env("HOME", home.path())
        .env_remove("LITELLM_API_KEY")
        .stdin(slave.try_clone().unwrap())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave)
        .spawn()
        .unwrap();
    let master = std::fs::File::from(pty.master);
    let mut reader = master.try_clone().unwrap();
    let mut writer = master;
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        // Ends with EIO once the child has exited.
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut screen = String::new();
    let wait_for = |what: &str, screen: &mut String| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !screen.contains(what) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match rx.recv_timeout(left) {
                Ok(bytes) => screen.push_str(&String::from_utf8_lossy(&bytes)),
                Err(_) => panic!("no {what:?} on the screen:\n{screen}"),
            }
        }
    };
    wait_for("Proxy URL [", &mut screen);
    writer
        .write_all(format!("{}\r", mock.url()).as_bytes())
        .unwrap();
    wait_for("API key (not shown", &mut screen);
    writer.write_all(b"sk-hidden-42\r").unwrap();
    wait_for("Default model [1]: ", &mut screen);
    writer.write_all(b"2\r").unwrap();
    wait_for("Next:", &mut screen);
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{screen}");
    assert!(screen.contains(&mock.url()), "the URL is echoed: {screen}");
    assert!(!screen.contains("sk-hidden"), "the key is not: {screen}");
    assert_eq!(settings(home.path())["LiteLLM_API_Key"], "sk-hidden-42");
    assert_eq!(settings(home.path())["model"], "local");
}
