//! The MCP client manager (`maia-mcp`) against the mock MCP server
//! (`maia-mock-mcp`, built by Cargo for this test).

use std::time::{Duration, Instant};

use maia_mcp::{McpManager, McpServerConfig, McpTransport, ServerState};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const MOCK: &str = env!("CARGO_BIN_EXE_maia-mock-mcp");

fn stdio(name: &str, env: Vec<(String, String)>) -> McpServerConfig {
    McpServerConfig {
        name: name.to_owned(),
        transport: McpTransport::Stdio {
            command: MOCK.to_owned(),
            args: Vec::new(),
            env,
            cwd: None,
        },
        disabled_tools: Vec::new(),
    }
}

fn alive(pid: u32) -> bool {
    // A zombie counts as gone.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            let state = s.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z')
        })
        .unwrap_or(false)
}

async fn wait_until(mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    f()
}

#[tokio::test]
async fn stdio_tools_calls_errors_cancel_crash_and_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let log_file = dir.path().join("calls.log");
    let mut config = stdio(
        "mock",
        vec![
            ("MOCK_MCP_PID_FILE".into(), pid_file.display().to_string()),
            ("MOCK_MCP_LOG".into(), log_file.display().to_string()),
        ],
    );
    config.disabled_tools = vec!["fail".into()];
    let bad = stdio(
        "bad",
        vec![("MOCK_MCP_FAIL_START".into(), "no database".into())],
    );
    let started = Instant::now();
    let manager = McpManager::start(vec![config, bad]);
    assert!(
        started.elapsed() < Duration::from_millis(200),
        "start blocks"
    );
    manager.wait_ready(Duration::from_secs(20)).await;
    let status = manager.status();
    assert_eq!(
        status[0].state,
        ServerState::Connected {
            tools: vec!["echo".into(), "picture".into(), "slow".into()]
        }
    );
    match &status[1].state {
        ServerState::Failed(reason) => assert!(reason.contains("no database"), "{reason}"),
        other => panic!("{other:?}"),
    }
    let tools = manager.tools();
    let echo = tools
        .iter()
        .find(|t| t.full_name == "mcp__mock__echo")
        .unwrap();
    assert_eq!(echo.title, "Echo text");
    assert_eq!(echo.input_schema["required"], json!(["text"]));

    let never = CancellationToken::new();
    let out = manager
        .call("mcp__mock__echo", json!({"text": "hi"}), &never)
        .await;
    assert_eq!((out.content.as_str(), out.is_error), ("echo: hi", false));
    let out = manager
        .call("mcp__mock__fail", json!({"text": "x"}), &never)
        .await;
    assert!(out.is_error && out.content.contains("disabled"), "{out:?}");

    // Cancel during a slow call, once the server runs it, returns promptly
    // and the server is told.
    let slow = |event: &str| {
        std::fs::read_to_string(&log_file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .any(|l| l["tool"] == "slow" && l["event"] == event)
    };
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    let log = log_file.clone();
    let canceller = tokio::spawn(async move {
        let running =
            wait_until(|| std::fs::read_to_string(&log).is_ok_and(|l| l.contains("slow"))).await;
        c2.cancel();
        (running, Instant::now())
    });
    let out = tokio::time::timeout(
        Duration::from_secs(10),
        manager.call("mcp__mock__slow", json!({}), &cancel),
    )
    .await
    .expect("the cancel ends the call");
    let (running, cancelled_at) = canceller.await.unwrap();
    assert!(running, "the slow call never reached the server");
    assert!(
        out.is_error
            && out.content == "cancelled"
            && cancelled_at.elapsed() < Duration::from_secs(2),
        "{out:?}"
    );
    assert!(
        wait_until(|| slow("cancelled")).await,
        "the server was not told of the cancel"
    );
    assert!(!slow("end"), "the slow call ran to its end");

    // A crash is reported, and the server restarted once on its next use.
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid));
    nix_kill(pid);
    assert!(wait_until(|| !alive(pid)).await);
    // Reported while idle.
    assert!(
        wait_until(|| matches!(manager.status()[0].state, ServerState::Failed(_))).await,
        "{:?}",
        manager.status()
    );
    let out = manager
        .call("mcp__mock__echo", json!({"text": "again"}), &never)
        .await;
    assert_eq!(out.content, "echo: again", "{out:?}");
    let pid2: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_ne!(pid, pid2);
    assert!(alive(pid2));

    // Dropping the manager kills the server.
    drop(manager);
    assert!(wait_until(|| !alive(pid2)).await, "orphan server {pid2}");
}

fn nix_kill(pid: u32) {
    let _ = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status();
}

#[tokio::test]
async fn http_server() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, maia_test_support::mock_mcp::router())
            .await
            .unwrap();
    });
    let manager = McpManager::start(vec![McpServerConfig {
        name: "web".into(),
        transport: McpTransport::Http {
            url,
            headers: vec![("X-Test".into(), "1".into())],
        },
        disabled_tools: Vec::new(),
    }]);
    manager.wait_ready(Duration::from_secs(20)).await;
    assert!(
        matches!(manager.status()[0].state, ServerState::Connected { .. }),
        "{:?}",
        manager.status()
    );
    let never = CancellationToken::new();
    let out = manager
        .call("mcp__web__echo", json!({"text": "over http"}), &never)
        .await;
    assert_eq!(out.content, "echo: over http");
    let out = manager
        .call("mcp__web__fail", json!({"text": "x"}), &never)
        .await;
    assert!(out.is_error && out.content == "failed: x", "{out:?}");
    manager.shutdown();
}
