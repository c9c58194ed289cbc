//! MCP servers started the common ways, and who may configure what they
//! write (docs/permissions.md, "MCP servers: whose they are").
//!
//! - A server the user configured (`~/.maia/settings.json`, or the
//!   editor's `mcpServers` in `session/new`) runs as configured: a real
//!   `npx -y @modelcontextprotocol/server-everything` and a real PyPI
//!   server started by `uvx` fill their caches in the (test's) home folder.
//! - A server the project configured (`<project>/.maia/settings.json`)
//!   runs in the sandbox with its own package cache, so `npx` works there
//!   too, but it cannot write in the home folder until the user trusts it
//!   with `/mcp trust NAME` — for that command line only.
//!
//! The real servers come from the npm registry and PyPI. A test whose tool
//! (`npx`, `uvx`) is missing is skipped with a message, or fails when
//! `MAIA_REQUIRE_ALL=1` (CI). `uvx` is taken from `MAIA_UVX` (set by
//! `.ci/run`) or from `PATH`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::acp_mcp::mock_mcp;
use crate::harness::{Maia, Options, agent_text, choose, eventually, updates_of};

/// The reference server, pinned as in `.ci/run`.
const EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";

/// A cold `npx`/`uvx` start downloads the package first.
const START: Duration = Duration::from_secs(90);

/// `program` from `env_var` or `PATH`; `None` (skip) when missing, unless
/// `MAIA_REQUIRE_ALL=1`, where a missing tool fails the test.
fn tool(program: &str, env_var: Option<&str>) -> Option<PathBuf> {
    let found = env_var
        .and_then(std::env::var_os)
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .or_else(|| {
            std::env::var_os("PATH").and_then(|path| {
                std::env::split_paths(&path)
                    .map(|dir| dir.join(program))
                    .find(|p| p.is_file())
            })
        });
    mock::require(&format!("`{program}` on PATH"), found.is_some());
    found
}

/// Waits (at most [`START`]) for server `name` to connect; fails the test
/// with the server's failure notice if it fails.
async fn connected(maia: &mut Maia, name: &str) {
    let ok = format!("MCP server `{name}` connected");
    let failed = format!("MCP server `{name}` failed");
    let deadline = Instant::now() + START;
    loop {
        for notice in updates_of(&maia.seen, "notice") {
            let title = notice["title"].as_str().unwrap_or_default();
            if title.contains(&ok) {
                return;
            }
            assert!(!title.contains(&failed), "{title}");
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "MCP server `{name}` did not connect");
        maia.next_within(left).await;
    }
}

/// Waits for a notice of server `name` (connected or failed); returns its title.
async fn outcome(maia: &mut Maia, name: &str) -> String {
    let prefix = format!("MCP server `{name}` ");
    loop {
        let found = updates_of(&maia.seen, "notice").into_iter().find_map(|n| {
            n["title"]
                .as_str()
                .filter(|t| {
                    t.starts_with(&prefix) && (t.contains("connected") || t.contains("failed"))
                })
                .map(str::to_owned)
        });
        if let Some(title) = found {
            return title;
        }
        maia.next().await;
    }
}

async fn new_session(maia: &mut Maia, servers: Value) -> String {
    let cwd = maia.cwd();
    let id = maia
        .request("session/new", json!({"cwd": cwd, "mcpServers": servers}))
        .await;
    let (resp, _) = maia.response(id).await;
    resp["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no sessionId in {resp}"))
        .to_owned()
}

/// Calls `tool` with `args` through the model, allows it once and returns
/// the tool results the model got back.
async fn call(maia: &mut Maia, sid: &str, tool: &str, args: Value) -> Vec<String> {
    let before = maia.mock.requests().len();
    maia.mock
        .push(mock::tool_calls_reply(&[("c1", tool, args)]));
    maia.mock.push(mock::text_reply("done"));
    let id = maia.prompt(sid, "call the tool").await;
    let (resp, _) = maia.response_with(id, choose("allow_once")).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    let requests = maia.mock.requests();
    let tools = requests[before]["tools"].to_string();
    assert!(tools.contains(tool), "{tool} not offered: {tools}");
    requests[before + 1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Writes the project's `.maia/settings.json` with `servers`.
fn project_servers(maia: &Maia, servers: Value) {
    let file = maia.path(".maia/settings.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, json!({"mcpServers": servers}).to_string()).unwrap();
}

fn everything_entry(npx: &Path) -> Value {
    json!({"command": npx, "args": ["-y", EVERYTHING, "stdio"]})
}

/// `npx -y @modelcontextprotocol/server-everything` in the user's own
/// settings, with the default sandbox: it starts (npm writes its cache and
/// logs in ~/.npm), lists its tools and answers a call.
#[tokio::test]
async fn npx_server_from_the_user_settings_runs_as_configured() {
    let Some(npx) = tool("npx", None) else { return };
    let mut maia = Maia::start_with(Options {
        settings: json!({"mcpServers": {"everything": everything_entry(&npx)}}),
        ..Options::default()
    })
    .await;
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;
    let sid = new_session(&mut maia, json!([])).await;
    connected(&mut maia, "everything").await;
    let results = call(
        &mut maia,
        &sid,
        "mcp__everything__echo",
        json!({"message": "npx hello"}),
    )
    .await;
    assert!(
        results.iter().any(|r| r.contains("npx hello")),
        "{results:?}"
    );
    assert!(
        maia.home.path().join(".npm").is_dir(),
        "npm's cache is not in ~/.npm"
    );
}

/// A PyPI server started by `uvx` from the editor's `mcpServers`: uv
/// fills ~/.cache/uv and the server answers.
#[tokio::test]
async fn uvx_server_from_the_editor_runs_as_configured() {
    let Some(uvx) = tool("uvx", Some("MAIA_UVX")) else {
        return;
    };
    let mut maia = Maia::start().await;
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;
    let sid = new_session(
        &mut maia,
        json!([{"name": "time", "command": uvx,
                "args": ["--from", "mcp-server-time==2026.10.19", "mcp-server-time"],
                "env": []}]),
    )
    .await;
    connected(&mut maia, "time").await;
    let results = call(
        &mut maia,
        &sid,
        "mcp__time__get_current_time",
        json!({"timezone": "UTC"}),
    )
    .await;
    assert!(results.iter().any(|r| r.contains("UTC")), "{results:?}");
    assert!(
        maia.home.path().join(".cache/uv").is_dir(),
        "uv's cache is not in ~/.cache/uv"
    );
}

/// The same `npx` server configured by the project runs in the sandbox
/// with a package cache of its own: it works, and ~/.npm stays untouched.
#[tokio::test]
async fn npx_server_from_the_project_runs_in_the_sandbox_with_its_own_cache() {
    let Some(npx) = tool("npx", None) else { return };
    let mut maia = Maia::start().await;
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;
    project_servers(&maia, json!({"everything": everything_entry(&npx)}));
    let sid = new_session(&mut maia, json!([])).await;
    connected(&mut maia, "everything").await;
    let results = call(
        &mut maia,
        &sid,
        "mcp__everything__get-sum",
        json!({"a": 2, "b": 3}),
    )
    .await;
    assert!(results.iter().any(|r| r.contains('5')), "{results:?}");
    assert!(
        !maia.home.path().join(".npm").exists(),
        "a project's server wrote the user's npm cache"
    );
}

/// A project's server cannot write in the home folder (here a
/// `.bashrc`) until the user trusts it with `/mcp trust`; the trust holds
/// for that command line only: changed, it is back in the sandbox.
#[tokio::test]
async fn a_project_server_writes_outside_the_project_only_once_trusted() {
    let mut maia = Maia::start().await;
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;
    let bashrc = maia.home.path().join(".bashrc");
    let profile = maia.home.path().join(".profile");
    let entry = |file: &Path| json!({"command": mock_mcp(), "env": {"MOCK_MCP_PID_FILE": file}});
    project_servers(&maia, json!({"rc": entry(&bashrc)}));

    let sid = new_session(&mut maia, json!([])).await;
    let title = outcome(&mut maia, "rc").await;
    assert!(title.contains("failed"), "{title}");
    assert!(title.contains("/mcp trust rc"), "no hint: {title}");
    assert!(
        !bashrc.exists(),
        "an untrusted project server wrote ~/.bashrc"
    );

    let id = maia.prompt(&sid, "/mcp").await;
    let (_, before) = maia.response(id).await;
    let said = agent_text(&before);
    assert!(said.contains("runs in the sandbox"), "{said}");

    // The user trusts it; the next session runs it as configured.
    let id = maia.prompt(&sid, "/mcp trust rc").await;
    let (_, before) = maia.response(id).await;
    let said = agent_text(&before);
    assert!(said.contains("Trusted"), "{said}");
    maia.seen.clear();
    let _ = new_session(&mut maia, json!([])).await;
    let title = outcome(&mut maia, "rc").await;
    assert!(title.contains("connected"), "{title}");
    assert!(
        eventually(Duration::from_secs(10), || bashrc.exists()).await,
        "the trusted server did not run as configured"
    );

    // Another command line under the same name is not trusted.
    project_servers(&maia, json!({"rc": entry(&profile)}));
    maia.seen.clear();
    let _ = new_session(&mut maia, json!([])).await;
    let title = outcome(&mut maia, "rc").await;
    assert!(title.contains("failed"), "{title}");
    assert!(!profile.exists(), "a changed project server kept the trust");
}

/// With the sandbox off (`"sandbox": "off"` in the user's settings) a
/// project's untrusted server does not start at all; the user's do.
#[tokio::test]
async fn without_the_sandbox_a_projects_untrusted_server_does_not_start() {
    let mut maia = Maia::start_with(Options {
        settings: json!({"sandbox": "off",
                         "mcpServers": {"mine": {"command": mock_mcp()}}}),
        ..Options::default()
    })
    .await;
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;
    let marker = maia.path("started.pid");
    project_servers(
        &maia,
        json!({"proj": {"command": mock_mcp(), "env": {"MOCK_MCP_PID_FILE": marker}}}),
    );
    let _ = new_session(&mut maia, json!([])).await;
    let title = outcome(&mut maia, "proj").await;
    assert!(title.contains("failed"), "{title}");
    assert!(title.contains("which is off here"), "{title}");
    assert!(!marker.exists(), "the project's server was started");
    let title = outcome(&mut maia, "mine").await;
    assert!(title.contains("connected"), "{title}");
}
