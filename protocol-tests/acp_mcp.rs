//! MCP servers (issue 6): servers from `session/new` (stdio and http) and
//! from settings, their tools offered to the model as
//! `mcp__<server>__<tool>` behind the permission broker, failures reported
//! as notices and in `/mcp`, cancellation of a slow call, and no server
//! process left behind after `session/close` or the agent's exit.
//!
//! The stdio server is `maia-mock-mcp` (maia-test-support). Cargo only
//! gives a package's own binaries to its tests, so it is found next to this
//! test's own executable (`target/<profile>/`), where `cargo test
//! --workspace` puts it (maia-test-support's `mcp_client` test needs it);
//! when it is missing it is built once with `cargo build`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, Options, agent_text, alive, choose, eventually, updates_of};

/// The `maia-mock-mcp` executable.
pub(crate) fn mock_mcp() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let mut dir = exe.parent().unwrap().to_path_buf();
        if dir.ends_with("deps") {
            dir.pop();
        }
        let path = dir.join("maia-mock-mcp");
        if !path.exists() {
            let profile = match dir.file_name().and_then(|n| n.to_str()) {
                Some("debug") | None => "dev".to_owned(),
                Some(other) => other.to_owned(),
            };
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let status = std::process::Command::new(cargo)
                .args(["build", "-p", "maia-test-support", "--bin", "maia-mock-mcp"])
                .args(["--profile", &profile])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .expect("run cargo build for maia-mock-mcp");
            assert!(status.success(), "cannot build maia-mock-mcp");
        }
        assert!(path.exists(), "no {}", path.display());
        path
    })
    .clone()
}

/// A stdio server entry for `session/new`; `env` as (name, value).
fn stdio_server(name: &str, env: &[(&str, &Path)]) -> Value {
    let env: Vec<Value> = env
        .iter()
        .map(|(k, v)| json!({"name": k, "value": v}))
        .collect();
    json!({"name": name, "command": mock_mcp(), "args": [], "env": env})
}

fn notices_caps() -> Value {
    json!({"session": {"notices": {}}})
}

/// Opens a session with `servers`; returns its id.
async fn open(maia: &mut Maia, servers: Value) -> String {
    let cwd = maia.cwd();
    let started = Instant::now();
    let id = maia
        .request("session/new", json!({"cwd": cwd, "mcpServers": servers}))
        .await;
    let (resp, _) = maia.response(id).await;
    // Connecting happens in the background.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "session/new waited for the servers"
    );
    resp["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no sessionId in {resp}"))
        .to_owned()
}

/// The notice seen so far whose title contains `text`.
fn seen_notice(maia: &Maia, text: &str) -> Option<Value> {
    updates_of(&maia.seen, "notice")
        .into_iter()
        .find(|u| u["title"].as_str().is_some_and(|t| t.contains(text)))
}

/// Waits for a notice whose title contains `text` (it may have arrived
/// already); returns the notice.
async fn notice_containing(maia: &mut Maia, text: &str) -> Value {
    loop {
        if let Some(notice) = seen_notice(maia, text) {
            return notice;
        }
        maia.next().await;
    }
}

/// The pid a mock wrote to `file`.
async fn pid_in(file: &Path) -> u32 {
    assert!(
        eventually(Duration::from_secs(10), || std::fs::read_to_string(file)
            .is_ok_and(|s| !s.trim().is_empty()))
        .await,
        "the mock MCP server did not start"
    );
    std::fs::read_to_string(file)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The `tool` message contents of model request `index`.
fn tool_results(maia: &Maia, index: usize) -> Vec<String> {
    maia.mock.requests()[index]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The tool names offered in model request `index`.
fn offered(maia: &Maia, index: usize) -> Vec<Value> {
    maia.mock.requests()[index]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn editor_stdio_server_tool_asks_permission_and_returns_the_result() {
    let mut maia = Maia::start().await;
    maia.initialize_with(notices_caps()).await;
    let log = maia.path("mcp.log");
    let sid = open(
        &mut maia,
        json!([stdio_server("mock", &[("MOCK_MCP_LOG", &log)])]),
    )
    .await;
    // Prompted at once: the turn waits (briefly) for the server to connect.
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_1",
        "mcp__mock__echo",
        json!({"text": "hello"}),
    )]));
    maia.mock.push(mock::text_reply("done"));
    let id = maia.prompt(&sid, "echo hello").await;
    let (resp, before) = maia.response_with(id, choose("allow_once")).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");

    // The model saw the tool with the server's schema.
    let echo = offered(&maia, 0)
        .into_iter()
        .find(|t| t["function"]["name"] == "mcp__mock__echo")
        .unwrap_or_else(|| panic!("no mcp__mock__echo in {:?}", offered(&maia, 0)));
    assert_eq!(echo["function"]["parameters"]["required"], json!(["text"]));

    // The call was announced with the server's title, and permission asked.
    let call = updates_of(&before, "tool_call");
    assert_eq!(call.len(), 1, "{call:?}");
    assert_eq!(call[0]["title"], "Echo text (mock)");
    // `other` is the default kind (left out on the wire).
    assert_eq!(call[0]["kind"].as_str().unwrap_or("other"), "other");
    let asked: Vec<&Value> = before
        .iter()
        .filter(|m| m["method"] == "session/request_permission")
        .collect();
    assert_eq!(asked.len(), 1, "permission asked once");
    assert_eq!(
        asked[0]["params"]["toolCall"]["toolCallId"],
        call[0]["toolCallId"]
    );
    // The result went back to the model.
    assert_eq!(tool_results(&maia, 1), ["echo: hello"]);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("\"hello\""), "{logged}");

    // Rejected: the server is not called and the model is told.
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_2",
        "mcp__mock__echo",
        json!({"text": "secret"}),
    )]));
    maia.mock.push(mock::text_reply("ok"));
    let id = maia.prompt(&sid, "again").await;
    maia.response_with(id, choose("reject_once")).await;
    let results = tool_results(&maia, 3);
    assert!(results[1].contains("refused"), "{results:?}");
    assert!(!std::fs::read_to_string(&log).unwrap().contains("secret"));
}

#[tokio::test]
async fn settings_server_with_disabled_tools_and_the_mcp_command() {
    let mut maia = Maia::start_with(Options {
        settings: json!({
            "mcpServers": {
                "conf": {"command": mock_mcp(), "args": [], "disabledTools": ["slow"]},
                "ed": {"command": "/nonexistent/settings-entry"}
            },
            "permissions": {"allow": ["mcp__conf__fail"]}
        }),
        ..Options::default()
    })
    .await;
    maia.initialize_with(notices_caps()).await;
    // The editor's `ed` wins over the settings entry of the same name.
    let sid = open(&mut maia, json!([stdio_server("ed", &[])])).await;
    notice_containing(&mut maia, "MCP server `conf` connected").await;
    notice_containing(&mut maia, "MCP server `ed` connected").await;

    let id = maia.prompt(&sid, "/mcp").await;
    let (_, before) = maia.response(id).await;
    let text = agent_text(&before);
    assert!(text.contains("`conf` — connected, 3 tools"), "{text}");
    assert!(text.contains("mcp__conf__echo"), "{text}");
    assert!(!text.contains("mcp__conf__slow"), "{text}");
    assert!(text.contains("disabled in the settings: slow"), "{text}");
    assert!(text.contains("`ed` — connected"), "{text}");

    // Allowed by a rule: no question; the server's error goes back to the model.
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_1",
        "mcp__conf__fail",
        json!({"text": "boom"}),
    )]));
    let (_, before) = maia.answered_turn(&sid, "fail", "done").await;
    let requests = maia.mock.requests();
    let last = requests.len() - 1;
    assert_eq!(tool_results(&maia, last), ["failed: boom"]);
    let names: Vec<Value> = offered(&maia, last - 1)
        .iter()
        .map(|t| t["function"]["name"].clone())
        .collect();
    assert!(names.contains(&json!("mcp__ed__echo")), "{names:?}");
    assert!(!names.contains(&json!("mcp__conf__slow")), "{names:?}");
    let failed = updates_of(&before, "tool_call_update");
    assert_eq!(failed.last().unwrap()["status"], "failed", "{failed:?}");
}

#[tokio::test]
async fn http_server_from_the_editor() {
    let url = mock::mock_mcp::spawn_http().await.unwrap();
    let mut maia = Maia::start().await;
    let init = maia.initialize_with(notices_caps()).await;
    assert_eq!(
        init["result"]["agentCapabilities"]["mcpCapabilities"]["http"],
        true
    );
    let sid = open(
        &mut maia,
        json!([{"type": "http", "name": "web", "url": url,
                "headers": [{"name": "X-Test", "value": "1"}]}]),
    )
    .await;
    notice_containing(&mut maia, "MCP server `web` connected").await;
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_1",
        "mcp__web__echo",
        json!({"text": "over http"}),
    )]));
    maia.mock.push(mock::text_reply("done"));
    let id = maia.prompt(&sid, "go").await;
    maia.response_with(id, choose("allow_once")).await;
    assert_eq!(tool_results(&maia, 1), ["echo: over http"]);
}

#[tokio::test]
async fn failing_servers_are_reported() {
    let mut maia = Maia::start().await;
    maia.initialize_with(notices_caps()).await;
    let bad = stdio_server(
        "bad",
        &[("MOCK_MCP_FAIL_START", Path::new("no database here"))],
    );
    let sid = open(
        &mut maia,
        json!([bad, {"name": "missing", "command": "/nonexistent/mcp-server", "args": [], "env": []}]),
    )
    .await;
    let notice = notice_containing(&mut maia, "MCP server `bad` failed").await;
    assert_eq!(notice["severity"], "warning");
    assert!(
        notice["title"]
            .as_str()
            .unwrap()
            .contains("no database here"),
        "{notice}"
    );
    notice_containing(&mut maia, "MCP server `missing` failed").await;

    let id = maia.prompt(&sid, "/mcp").await;
    let (_, before) = maia.response(id).await;
    let text = agent_text(&before);
    assert!(text.contains("`bad` — failed"), "{text}");
    assert!(text.contains("`missing` — failed: cannot start"), "{text}");

    // A call to a tool of a failed server goes back to the model as an error.
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_1",
        "mcp__bad__echo",
        json!({"text": "x"}),
    )]));
    let (resp, _) = maia.answered_turn(&sid, "go", "done").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn");
    let results = tool_results(&maia, 1);
    assert!(results[0].contains("not available"), "{results:?}");
}

#[tokio::test]
async fn cancel_during_a_slow_call() {
    let mut maia = Maia::start().await;
    maia.initialize_with(notices_caps()).await;
    let log = maia.path("mcp.log");
    let sid = open(
        &mut maia,
        json!([stdio_server("mock", &[("MOCK_MCP_LOG", &log)])]),
    )
    .await;
    notice_containing(&mut maia, "MCP server `mock` connected").await;
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_1",
        "mcp__mock__slow",
        json!({}),
    )]));
    maia.mock.push(mock::text_reply("never"));
    let id = maia.prompt(&sid, "slow").await;
    let mut answer = choose("allow_once");
    // Wait until the call runs on the server.
    loop {
        let m = maia.next().await;
        if m["method"] == "session/request_permission" {
            let result = answer(&m).unwrap();
            maia.respond(&m["id"], result).await;
        }
        if m["params"]["update"]["status"] == "in_progress" {
            break;
        }
    }
    assert!(
        eventually(Duration::from_secs(10), || std::fs::read_to_string(&log)
            .is_ok_and(|l| l.contains("\"start\"")))
        .await
    );
    let cancelled_at = Instant::now();
    maia.notify("session/cancel", json!({"sessionId": sid}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "cancelled", "{resp}");
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(3),
        "cancel took {:?}",
        cancelled_at.elapsed()
    );
    // The server was told to stop the request.
    assert!(
        eventually(Duration::from_secs(5), || std::fs::read_to_string(&log)
            .is_ok_and(|l| l.contains("\"cancelled\"")))
        .await,
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

#[tokio::test]
async fn no_server_process_outlives_its_session_or_the_agent() {
    let mut maia = Maia::start().await;
    maia.initialize_with(notices_caps()).await;
    let pid_a = maia.path("a.pid");
    let sid = open(
        &mut maia,
        json!([stdio_server("mock", &[("MOCK_MCP_PID_FILE", &pid_a)])]),
    )
    .await;
    notice_containing(&mut maia, "MCP server `mock` connected").await;
    let pid = pid_in(&pid_a).await;
    assert!(alive(pid));
    let id = maia
        .request("session/close", json!({"sessionId": sid}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"], json!({}), "{resp}");
    assert!(
        eventually(Duration::from_secs(5), || !alive(pid)).await,
        "MCP server {pid} outlived its closed session"
    );

    // The agent exits (its input closes): its servers go with it.
    let pid_b = maia.path("b.pid");
    open(
        &mut maia,
        json!([stdio_server("mock", &[("MOCK_MCP_PID_FILE", &pid_b)])]),
    )
    .await;
    notice_containing(&mut maia, "MCP server `mock` connected").await;
    let pid = pid_in(&pid_b).await;
    assert!(alive(pid));
    maia.close_stdin();
    maia.wait_exit(Duration::from_secs(10)).await;
    assert!(
        eventually(Duration::from_secs(5), || !alive(pid)).await,
        "MCP server {pid} outlived the agent"
    );
}

/// Interoperability with a real third-party server: the reference
/// `@modelcontextprotocol/server-everything` from npm, which `.ci/run`
/// installs and names in `MAIA_MCP_EVERYTHING`. Skipped (with a message)
/// when that variable is not set, e.g. on a developer machine without it;
/// a failure then with `MAIA_REQUIRE_ALL=1`.
#[tokio::test]
async fn reference_server_everything_echoes_through_maia() {
    let Some(server) = std::env::var("MAIA_MCP_EVERYTHING").ok() else {
        mock::require(
            "the reference MCP server: MAIA_MCP_EVERYTHING (.ci/run installs it from npm)",
            false,
        );
        return;
    };
    let mut maia = Maia::start().await;
    maia.initialize().await;
    let servers = json!([{
        "name": "everything",
        "command": server,
        "args": ["stdio"],
        "env": []
    }]);
    let sid = open(&mut maia, servers).await;
    maia.mock.push(mock::tool_calls_reply(&[(
        "e1",
        "mcp__everything__echo",
        json!({"message": "interop hello"}),
    )]));
    maia.mock.push(mock::text_reply("done"));
    let id = maia.prompt(&sid, "echo through the reference server").await;
    let (resp, before) = maia.response_with(id, choose("allow_once")).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    // The reference server's tools were offered with their schema.
    let tools = maia.mock.requests()[0]["tools"].to_string();
    assert!(tools.contains("mcp__everything__echo"), "{tools}");
    assert!(tools.contains("mcp__everything__get-sum"), "{tools}");
    // Permission was asked, and the result went back to the model.
    assert!(
        before
            .iter()
            .any(|m| m["method"] == "session/request_permission")
    );
    let results = tool_results(&maia, 1);
    assert!(
        results.iter().any(|r| r.contains("interop hello")),
        "{results:?}"
    );
}

#[tokio::test]
async fn image_results_pass_through_to_a_vision_model() {
    use base64::Engine;
    let mut maia = Maia::start().await;
    maia.initialize().await;
    maia.mock.set_model_info(json!({"data": [
        {"model_name": "mock-model", "model_info": {"supports_vision": true}}
    ]}));
    let sid = open(&mut maia, json!([stdio_server("mock", &[])])).await;
    let png = maia_tools::image::test_png(32, 16);
    let data = base64::engine::general_purpose::STANDARD.encode(&png);
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_p",
        "mcp__mock__picture",
        json!({"text": data}),
    )]));
    maia.mock.push(mock::text_reply("a picture"));
    let id = maia.prompt(&sid, "show me").await;
    let (resp, _) = maia.response_with(id, choose("allow_once")).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let result = &tool_results(&maia, 1)[0];
    assert!(
        result.starts_with("a picture\n[image #1: image/png, 32×16"),
        "{result}"
    );
    let request = &maia.mock.requests()[1];
    let last = request["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "user");
    assert_eq!(
        last["content"][1]["image_url"]["url"],
        format!("data:image/png;base64,{data}")
    );
}
