//! `maia serve` against the official ACP SDK clients, as their users run
//! them: the TypeScript SDK (`@agentclientprotocol/sdk` 2.4.0) over its
//! WebSocket and Streamable HTTP client transports, v1 and v2; the Python SDK
//! (`agent-client-protocol` 0.12.1) over `acp.ws` and `acp.http`; and
//! `acpremote mirror` (1.10.0) in front of the daemon as a stdio agent. The
//! client scripts are in `protocol-tests/sdk/`, the clients in the cache its
//! `setup.sh` fills (`$MAIA_SDK_CLIENTS`, default
//! `~/.cache/maia-sdk-clients`); without it the tests are skipped
//! (`maia_test_support::require`). Each script prints one JSON line per
//! check; every check must pass.

use std::path::{Path, PathBuf};
use std::time::Duration;

use maia_test_support as mock;
use serde_json::{Value, json};
use tokio::process::Command;

use crate::remote_client::{Daemon, serve_command};

const EDITOR: (&str, &[&str]) = ("editor", &[]);

/// The checks every v1 client script must report, live then after a restart.
const V1_LIVE: &[&str] = &[
    "initialize",
    "session/new",
    "prompt: streamed, a tool call, a permission",
    "cancel",
    "session/list",
    "session/load of a live session (a second client)",
    "session/set_title",
    "_session/queue",
    "session/close",
    "session/delete",
];
const V1_SAVED: &[&str] = &[
    "session/load of a saved session (after a restart)",
    "prompt after loading a saved session",
];
const V2: &[&str] = &[
    "initialize",
    "session/new",
    "prompt: streamed updates",
    "prompt: a tool call and a permission",
    "cancel",
    "session/resume with the replay (a second client)",
];
const MIRROR: &[&str] = &[
    "initialize",
    "session/new",
    "prompt: streamed, a tool call, a permission",
];

/// The cache `protocol-tests/sdk/setup.sh` fills, as it finds it.
fn clients_cache() -> PathBuf {
    mock::env_path("MAIA_SDK_CLIENTS").unwrap_or_else(|| {
        let home = std::env::var_os("HOME").unwrap_or_default();
        Path::new(&home).join(".cache/maia-sdk-clients")
    })
}

/// The cache, when it is filled and `node` is on PATH (else skipped, or a
/// failure under `MAIA_REQUIRE_ALL=1`).
fn clients() -> Option<PathBuf> {
    let cache = clients_cache();
    let ready = cache.join("ready").is_file() && mock::on_path("node");
    mock::require(
        &format!(
            "the SDK clients in {} (protocol-tests/sdk/setup.sh) and node",
            cache.display()
        ),
        ready,
    )
    .then_some(cache)
}

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../protocol-tests/sdk")
}

/// The text of the last user message of a chat request.
fn last_user_text(request: &Value) -> String {
    let Some(user) = request["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
    else {
        return String::new();
    };
    match &user["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The model the scripts talk to, led by their prompts' words:
/// `sdk:tool FILE` writes FILE (a permission), then says `wrote FILE`;
/// `sdk:slow` streams for a minute (to be cancelled); anything else is
/// echoed as `sdk echo: TEXT` (its last line).
fn script_model(daemon: &Daemon) {
    daemon.mock.set_rule(|request| {
        let said = last_user_text(request);
        let file = said
            .split("sdk:tool ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_owned);
        let after_tool = request["messages"]
            .as_array()
            .and_then(|m| m.last())
            .is_some_and(|m| m["role"] == "tool");
        Some(match (file, after_tool) {
            (Some(file), true) => mock::text_reply(&format!("sdk: wrote {file}")),
            (Some(file), false) => mock::tool_calls_reply(&[(
                "call_sdk",
                "Write",
                json!({"file_path": file, "content": format!("written by {file}\n")}),
            )]),
            (None, _) if said.contains("sdk:slow") => {
                mock::slow_text(1200, Duration::from_millis(50))
            }
            (None, _) => {
                let line = said.lines().rev().find(|l| !l.trim().is_empty());
                mock::text_reply(&format!("sdk echo: {}", line.unwrap_or("").trim()))
            }
        })
    });
}

/// One check a script reported.
#[derive(Debug, Clone)]
struct Check {
    client: String,
    transport: String,
    name: String,
    ok: bool,
    detail: String,
}

/// Runs a client script; its checks (a script that printed no line, or a
/// line that is not a check, is reported as a failed check).
async fn run_script(
    label: (&str, &str),
    program: &Path,
    args: &[&str],
    daemon: &Daemon,
    cache: &Path,
) -> Vec<Check> {
    run_script_with(label, program, args, daemon, cache, &[]).await
}

/// `run_script`, with `extra` set in the script's environment.
async fn run_script_with(
    label: (&str, &str),
    program: &Path,
    args: &[&str],
    daemon: &Daemon,
    cache: &Path,
    extra: &[(&str, &str)],
) -> Vec<Check> {
    let token = &daemon.tokens["editor"];
    let run = Command::new(program)
        .args(args)
        .envs(extra.iter().copied())
        .env("MAIA_URL", daemon.url())
        .env("MAIA_TOKEN", token)
        .env("MAIA_CWD", daemon.cwd())
        .env("MAIA_SDK_CLIENTS", cache)
        // No `__pycache__` in the clone.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .kill_on_drop(true)
        .output();
    let failed = |detail: String| Check {
        client: label.0.to_owned(),
        transport: label.1.to_owned(),
        name: "script".to_owned(),
        ok: false,
        detail,
    };
    let out = match tokio::time::timeout(Duration::from_secs(240), run).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => return vec![failed(format!("{}: {e}", program.display()))],
        Err(_) => return vec![failed(format!("{args:?} ran over 240 s"))],
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut checks = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            checks.push(failed(format!("not a check line: {line}")));
            continue;
        };
        checks.push(Check {
            client: v["client"].as_str().unwrap_or(label.0).to_owned(),
            transport: v["transport"].as_str().unwrap_or(label.1).to_owned(),
            name: v["check"].as_str().unwrap_or("?").to_owned(),
            ok: v["ok"] == true,
            detail: v["detail"]
                .as_str()
                .map_or_else(|| v["detail"].to_string(), str::to_owned),
        });
    }
    if checks.is_empty() || (!out.status.success() && checks.iter().all(|c| c.ok)) {
        checks.push(failed(format!(
            "{args:?} exited {}: {}",
            out.status,
            stderr
                .chars()
                .rev()
                .take(3000)
                .collect::<String>()
                .chars()
                .rev()
                .collect::<String>()
        )));
    }
    checks
}

/// Asserts that each `(client, transport)` reported every name in `names`
/// and that every check passed; prints the matrix.
fn assert_passed(checks: &[Check], expected: &[((&str, &str), &[&str])]) {
    let mut problems = Vec::new();
    for c in checks {
        eprintln!(
            "{} {:<4} {:<6} {:<52} {}",
            if c.ok { "pass" } else { "FAIL" },
            c.client,
            c.transport,
            c.name,
            c.detail
        );
        if !c.ok {
            problems.push(format!(
                "{} {} {}: {}",
                c.client, c.transport, c.name, c.detail
            ));
        }
    }
    for ((client, transport), names) in expected {
        for name in *names {
            let reported = checks
                .iter()
                .any(|c| c.client == *client && c.transport == *transport && c.name == *name);
            if !reported {
                problems.push(format!("{client} {transport} {name}: not reported"));
            }
        }
    }
    let passed = checks.iter().filter(|c| c.ok).count();
    eprintln!("SDK checks: {passed} of {} passed", checks.len());
    assert!(
        problems.is_empty(),
        "failed checks:\n{}",
        problems.join("\n")
    );
}

#[tokio::test]
async fn remote_sdk_v1_clients_over_websocket_and_streamable_http() {
    let Some(cache) = clients() else { return };
    let mut daemon = Daemon::start(&[EDITOR], &[]).await;
    script_model(&daemon);
    let state = tempfile::tempdir().unwrap();
    let node = PathBuf::from("node");
    let python = cache.join("venv/bin/python");
    let ts = scripts().join("ts/v1.mjs");
    let py = scripts().join("py/v1.py");
    let runs: Vec<((&str, &str), &Path, &Path)> = vec![
        (("ts", "ws"), &node, &ts),
        (("ts", "http"), &node, &ts),
        (("py", "ws"), &python, &py),
        (("py", "http"), &python, &py),
    ];
    let state_of = |(client, transport): (&str, &str)| {
        state
            .path()
            .join(format!("{client}-{transport}.json"))
            .display()
            .to_string()
    };
    let mut checks = Vec::new();
    for (label, program, script) in &runs {
        let file = state_of(*label);
        let args = [
            script.to_str().unwrap(),
            "--transport",
            label.1,
            "--phase",
            "live",
            "--state",
            &file,
        ];
        checks.extend(run_script(*label, program, &args, &daemon, &cache).await);
    }
    daemon.restart().await;
    for (label, program, script) in &runs {
        let file = state_of(*label);
        if !Path::new(&file).is_file() {
            continue;
        }
        let args = [
            script.to_str().unwrap(),
            "--transport",
            label.1,
            "--phase",
            "saved",
            "--state",
            &file,
        ];
        checks.extend(run_script(*label, program, &args, &daemon, &cache).await);
    }
    let all: Vec<&str> = V1_LIVE.iter().chain(V1_SAVED).copied().collect();
    let expected: Vec<((&str, &str), &[&str])> = runs
        .iter()
        .map(|(label, _, _)| (*label, all.as_slice()))
        .collect();
    assert_passed(&checks, &expected);
}

#[tokio::test]
async fn remote_sdk_v2_client_over_websocket_and_streamable_http() {
    let Some(cache) = clients() else { return };
    let daemon = Daemon::start(&[EDITOR], &["--protocol-v2"]).await;
    script_model(&daemon);
    let script = scripts().join("ts/v2.mjs");
    let mut checks = Vec::new();
    for transport in ["ws", "http"] {
        let args = [script.to_str().unwrap(), "--transport", transport];
        checks.extend(
            run_script(
                ("ts-v2", transport),
                Path::new("node"),
                &args,
                &daemon,
                &cache,
            )
            .await,
        );
    }
    assert_passed(&checks, &[(("ts-v2", "ws"), V2), (("ts-v2", "http"), V2)]);
}

#[tokio::test]
async fn remote_sdk_acpremote_mirror_is_a_stdio_agent_in_front_of_the_daemon() {
    let Some(cache) = clients() else { return };
    let daemon = Daemon::start(&[EDITOR], &[]).await;
    script_model(&daemon);
    let script = scripts().join("py/mirror.py");
    let checks = run_script(
        ("acpremote", "ws"),
        &cache.join("venv/bin/python"),
        &[script.to_str().unwrap()],
        &daemon,
        &cache,
    )
    .await;
    assert_passed(&checks, &[(("acpremote", "ws"), MIRROR)]);
}

/// What the roles script must report, for each transport.
const ROLES: &[&str] = &[
    "observer: initialize",
    "observer: session/list",
    "observer: session/load",
    "observer: session/load with mcpServers refused",
    "observer: session/prompt refused",
    "observer: session/set_title refused",
    "observer: _session/queue add refused",
    "observer: session/new refused",
    "observer: session/fork refused",
    "limited: initialize",
    "limited: session/load of its session",
    "limited: session/load of another session refused",
    "limited: session/new refused",
    "limited: session/fork refused",
    "limited: set_title of another session refused",
];

#[tokio::test]
async fn remote_sdk_observer_and_session_limited_tokens_are_held_to_their_role() {
    let Some(cache) = clients() else { return };
    let mut daemon = Daemon::start(&[EDITOR, ("watcher", &["--observer"])], &[]).await;
    let mut editor = daemon.ws("editor").await;
    editor
        .call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await;
    let mut open = async || {
        let made = editor
            .call(
                "session/new",
                json!({"cwd": daemon.cwd(), "mcpServers": []}),
            )
            .await;
        made["result"]["sessionId"].as_str().unwrap().to_owned()
    };
    let (sid, other) = (open().await, open().await);
    let (ok, limited, err) = serve_command(
        daemon.home.path(),
        &["token", "add", "--session", &sid, "limited"],
    );
    assert!(ok, "{err}");
    let marker = daemon.cwd().join("mcp-started");
    let python = cache.join("venv/bin/python");
    let script = scripts().join("py/roles.py");
    let extra = [
        ("MAIA_OBSERVER_TOKEN", daemon.tokens["watcher"].as_str()),
        ("MAIA_LIMITED_TOKEN", limited.trim()),
    ];
    let mut checks = Vec::new();
    for transport in ["ws", "http"] {
        let args = [
            script.to_str().unwrap(),
            "--transport",
            transport,
            "--session",
            &sid,
            "--other",
            &other,
            "--marker",
            marker.to_str().unwrap(),
        ];
        checks.extend(
            run_script_with(
                ("py-roles", transport),
                &python,
                &args,
                &daemon,
                &cache,
                &extra,
            )
            .await,
        );
    }
    assert!(!marker.exists(), "an observer's load started an MCP server");
    assert_passed(
        &checks,
        &[(("py-roles", "ws"), ROLES), (("py-roles", "http"), ROLES)],
    );
    daemon.tokens.clear();
}
