//! `maia lsp` sessions and process lifetime: a session starting in a new
//! folder blocks no other request and is shared by the asks waiting for
//! it; SIGTERM, SIGINT and SIGHUP end running turns (`cancelled`), kill
//! their commands and exit cleanly, as in ACP mode.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::{Duration, Instant};

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{WAIT, alive, eventually, is_response};
use crate::lsp::{Lsp, is_request, range, read, response, vscode_caps};

fn pid_file(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The session's start reads the folder's `.maia/SYSTEM.md`; as a FIFO it
/// holds the start until the test writes it. Meanwhile other requests are
/// answered, and the two asks waiting share the one session.
#[tokio::test]
async fn a_session_starting_blocks_no_request_and_is_shared() {
    let mut lsp = Lsp::start(json!({})).await;
    lsp.initialize(vscode_caps()).await;
    lsp.open("a.txt", "x\n").await;
    std::fs::create_dir_all(lsp.path(".maia")).unwrap();
    let fifo = lsp.path(".maia/SYSTEM.md");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    // Long enough that the second ask finds the first one running.
    lsp.mock
        .push(mock::slow_text(400, Duration::from_millis(25)));
    let first = lsp.start_ask("a.txt", range(0, 0, 0, 1), "explain").await;
    let second = lsp.start_ask("a.txt", range(0, 0, 0, 1), "explain").await;
    let uri = lsp.uri("a.txt");
    let hover = lsp
        .request(
            "textDocument/hover",
            json!({"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}),
        )
        .await;
    let seen = lsp.until(|m| is_response(m, hover), &mut |_| None).await;
    let answered = seen.last().unwrap();
    assert!(answered.get("error").is_none(), "{answered}");
    assert!(
        !seen
            .iter()
            .any(|m| is_response(m, first) || is_response(m, second)),
        "an ask was answered before its session started: {seen:?}"
    );
    // Let the start go on.
    let writer = fifo.clone();
    tokio::task::spawn_blocking(move || std::fs::write(writer, "Context."))
        .await
        .unwrap()
        .unwrap();
    let mut asks = Vec::new();
    while asks.len() < 2 {
        let m = lsp.next().await;
        if m.get("method").is_some() && m.get("id").is_some() {
            lsp.answer_request(&m, &mut |_| None).await;
        }
        if is_response(&m, first) || is_response(&m, second) {
            asks.push(m);
        }
    }
    let started: Vec<&Value> = asks.iter().filter(|m| m.get("error").is_none()).collect();
    let busy: Vec<&Value> = asks.iter().filter(|m| m.get("error").is_some()).collect();
    assert_eq!((started.len(), busy.len()), (1, 1), "{asks:?}");
    assert!(
        busy[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already answering"),
        "the second ask did not find the first one's session: {asks:?}"
    );
    let id = lsp
        .request(
            "workspace/executeCommand",
            json!({"command": "maia.cancel", "arguments": [{}]}),
        )
        .await;
    let r = lsp.response(id, &mut |_| None).await;
    assert_eq!(r["result"]["cancelled"], 1, "{r}");
    lsp.turn(&mut |_| None).await;
}

/// A turn whose Bash call runs `sleep 1000`; returns the answer document
/// and the sleeper's pid.
async fn busy_lsp(lsp: &mut Lsp) -> (String, u32) {
    lsp.initialize(vscode_caps()).await;
    lsp.open("a.txt", "x\n").await;
    let pid_path = lsp.path("sleep.pid");
    let command = format!("sleep 1000 & echo $! > {}; wait", pid_path.display());
    lsp.mock.push(mock::tool_calls_reply(&[(
        "b1",
        "Bash",
        json!({"command": command}),
    )]));
    lsp.mock.push(mock::text_reply("done"));
    let ask = lsp.start_ask("a.txt", range(0, 0, 0, 1), "explain").await;
    let mut allow = |m: &Value| {
        is_request(m, "window/showMessageRequest")
            .then(|| vec![response(&m["id"], json!({"title": "Allow once"}))])
    };
    let seen = lsp.until(|m| is_response(m, ask), &mut allow).await;
    let answer = seen.last().unwrap()["result"]["answer"]
        .as_str()
        .expect("maia.ask result")
        .strip_prefix("file://")
        .unwrap()
        .to_owned();
    // Answer the permission question, wherever it comes.
    let deadline = Instant::now() + WAIT;
    while pid_file(&pid_path).is_none() {
        assert!(Instant::now() < deadline, "the command did not start");
        if let Ok(m) = tokio::time::timeout(Duration::from_millis(50), lsp.next()).await
            && m.get("method").is_some()
            && m.get("id").is_some()
        {
            lsp.answer_request(&m, &mut allow).await;
        }
    }
    let pid = pid_file(&pid_path).unwrap();
    assert!(alive(pid));
    (answer, pid)
}

async fn signal_mid_command(signal: nix::sys::signal::Signal) {
    let mut lsp = Lsp::start(json!({})).await;
    let (answer, sleeper) = busy_lsp(&mut lsp).await;
    let pid = nix::unistd::Pid::from_raw(lsp.child.id().unwrap() as i32);
    let sent = Instant::now();
    nix::sys::signal::kill(pid, signal).unwrap();
    let status = tokio::time::timeout(Duration::from_secs(5), lsp.child.wait())
        .await
        .expect("maia lsp did not exit")
        .unwrap();
    assert!(
        status.success(),
        "{signal}: maia lsp did not shut down (status {status:?}, signal {:?})",
        status.signal()
    );
    assert!(
        sent.elapsed() < Duration::from_secs(3),
        "{signal}: shutdown took {:?}",
        sent.elapsed()
    );
    assert!(
        eventually(Duration::from_secs(2), || !alive(sleeper)).await,
        "{signal}: the command's sleeper {sleeper} was left behind"
    );
    let text = read(Path::new(&answer));
    assert!(
        text.ends_with("_(cancelled)_\n"),
        "{signal}: the answer was not ended: {text}"
    );
}

#[tokio::test]
async fn sigterm_mid_command_cancels_the_turn_and_exits() {
    signal_mid_command(nix::sys::signal::Signal::SIGTERM).await;
}

#[tokio::test]
async fn sigint_mid_command_cancels_the_turn_and_exits() {
    signal_mid_command(nix::sys::signal::Signal::SIGINT).await;
}

#[tokio::test]
async fn sighup_mid_command_cancels_the_turn_and_exits() {
    signal_mid_command(nix::sys::signal::Signal::SIGHUP).await;
}
