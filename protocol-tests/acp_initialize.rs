//! `initialize`: version negotiation, advertised capabilities, gating.

use serde_json::json;

use crate::harness::Maia;

#[tokio::test]
async fn answers_version_one_whatever_is_asked() {
    for asked in [1, 2, 0, 65535] {
        let mut maia = Maia::start().await;
        let id = maia
            .request("initialize", json!({"protocolVersion": asked}))
            .await;
        let (resp, _) = maia.response(id).await;
        let result = &resp["result"];
        assert_eq!(result["protocolVersion"], 1, "asked {asked}: {resp}");
        assert_eq!(result["agentInfo"]["name"], "maia");
        assert!(!result["agentInfo"]["version"].as_str().unwrap().is_empty());
        // Only what works end to end is advertised.
        let caps = &result["agentCapabilities"];
        assert_eq!(caps["loadSession"], true);
        for cap in ["list", "resume", "close", "delete"] {
            assert!(
                caps["sessionCapabilities"][cap].is_object(),
                "{cap}: {caps}"
            );
        }
        assert_eq!(caps["promptCapabilities"]["embeddedContext"], true);
        assert_eq!(caps["promptCapabilities"]["image"], true);
        assert_eq!(caps["promptCapabilities"]["audio"], false);
        // Always a way to check the settings again (issue 14).
        assert_eq!(result["authMethods"][0]["id"], "agent", "{result}");
    }
}

#[tokio::test]
async fn requests_before_initialize_fail_without_crashing() {
    let mut maia = Maia::start().await;
    let cwd = maia.cwd();
    let id = maia
        .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["error"]["code"], -32600, "{resp}");
    // Still usable afterwards.
    maia.initialize().await;
    let sid = maia.new_session().await;
    assert!(!sid.is_empty());
}

#[tokio::test]
async fn string_protocol_version_is_invalid_params() {
    let mut maia = Maia::start().await;
    let id = maia
        .request("initialize", json!({"protocolVersion": "1"}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["error"]["code"], -32602, "{resp}");
}

#[tokio::test]
async fn exits_promptly_when_stdin_closes() {
    let (mut maia, _sid) = Maia::ready().await;
    maia.close_stdin();
    let status = maia.wait_exit(std::time::Duration::from_secs(2)).await;
    assert!(status.success(), "{status:?}");
}

/// Without `MAIA_LOG`, nothing below a warning reaches stderr in
/// `maia acp`: editors show an agent's stderr to the user (agent-shell's
/// Notices showed the INFO lines, with module names and the settings path,
/// at every start).
#[tokio::test]
async fn by_default_stderr_gets_no_info_lines() {
    use std::io::Write;
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".maia")).unwrap();
    std::fs::write(
        home.path().join(".maia/settings.json"),
        r#"{"LiteLLM_URL": "http://127.0.0.1:9", "LiteLLM_API_Key": "sk-x", "model": "m"}"#,
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_maia"))
        .arg("acp")
        .env("HOME", home.path())
        .env_remove("MAIA_LOG")
        .env_remove("MAIA_LOG_FILE")
        .env_remove("LITELLM_API_KEY")
        .current_dir(project.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let cwd = project.path().display().to_string();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":1}}}}"#
    )
    .unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":2,"method":"session/new","params":{{"cwd":{cwd:?},"mcpServers":[]}}}}"#
    )
    .unwrap();
    // Wait for both answers before closing stdin.
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let mut answered = 0;
    while answered < 2 {
        let Some(Ok(line)) = lines.next() else { break };
        if line.contains(r#""id":1"#) || line.contains(r#""id":2"#) {
            answered += 1;
        }
    }
    assert_eq!(answered, 2, "both requests answered");
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains(" INFO ") && !stderr.contains(" DEBUG "),
        "{stderr}"
    );
}
