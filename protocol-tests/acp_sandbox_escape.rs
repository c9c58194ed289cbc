//! Escapes from the command sandbox, tried as a prompt-injected model
//! would: bypass mode with `Bash(*)` allowed, so only the sandbox stands in
//! the way. Each test plants something outside (a socket, a process, a
//! secret) and checks that the command could not reach it; the controls
//! check that ordinary work still runs. Tests that need `python3` or
//! `curl` skip without it, or fail with `MAIA_REQUIRE_ALL=1` (`mock::require`).

use std::time::Duration;

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{Maia, Options, WAIT, alive, eventually, last_tool_results};

/// A session in bypass mode with `Bash(*)` allowed and `settings` added.
async fn bypass(settings: Value) -> (Maia, String) {
    let mut all = json!({"permissions": {"allow": ["Bash(*)"]}});
    if let (Some(base), Some(extra)) = (all.as_object_mut(), settings.as_object()) {
        base.extend(extra.clone());
    }
    let (mut maia, sid) = Maia::ready_with(Options {
        settings: all,
        ..Default::default()
    })
    .await;
    let id = maia
        .request(
            "session/set_mode",
            json!({"sessionId": sid, "modeId": "bypass"}),
        )
        .await;
    maia.response(id).await;
    (maia, sid)
}

/// Runs `command` as one Bash call; returns what the model was told.
async fn bash(maia: &mut Maia, sid: &str, command: &str) -> String {
    maia.mock.push(mock::tool_calls_reply(&[(
        "c1",
        "Bash",
        json!({"command": command}),
    )]));
    let (resp, _) = maia.answered_turn(sid, "go", "ok").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    last_tool_results(maia).pop().unwrap_or_default()
}

fn python() -> bool {
    std::process::Command::new("python3")
        .arg("-c")
        .arg("pass")
        .status()
        .is_ok_and(|s| s.success())
}

#[tokio::test]
async fn a_udp_datagram_does_not_leave_the_sandbox() {
    if !mock::require("python3 on PATH", python()) {
        return;
    }
    let (mut maia, sid) = bypass(json!({})).await;
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_nonblocking(true).unwrap();
    let port = socket.local_addr().unwrap().port();
    let out = bash(
        &mut maia,
        &sid,
        &format!(
            "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b\"leak\", (\"127.0.0.1\", {port}))'; echo done"
        ),
    )
    .await;
    assert!(out.contains("done"), "{out}");
    // Loopback delivery is done by the time the command has exited.
    let mut buf = [0u8; 16];
    let received = socket.recv(&mut buf);
    assert!(received.is_err(), "a datagram got out: {out}");
}

#[tokio::test]
async fn a_process_outside_cannot_be_killed_but_the_commands_own_can() {
    let (mut maia, sid) = bypass(json!({})).await;
    let mut outside = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let pid = outside.id();
    let out = bash(&mut maia, &sid, &format!("kill -9 {pid}; echo \"kill $?\"")).await;
    let survived = alive(pid);
    let _ = outside.kill();
    let _ = outside.wait();
    assert!(survived, "the sandbox let a command kill {pid}: {out}");
    let out = bash(
        &mut maia,
        &sid,
        "sleep 30 & kill -9 $!; wait $!; echo \"status $?\"",
    )
    .await;
    assert!(out.contains("status 137"), "{out}");
}

/// A folder for a socket in the user's runtime folder (`$XDG_RUNTIME_DIR`,
/// else `/run/user/<uid>`, else `/run` when writable).
fn runtime_dir() -> Option<tempfile::TempDir> {
    let uid = nix::unistd::getuid();
    let candidates = [
        std::env::var_os("XDG_RUNTIME_DIR").map(std::path::PathBuf::from),
        Some(format!("/run/user/{uid}").into()),
        Some("/run".into()),
    ];
    candidates.into_iter().flatten().find_map(|dir| {
        tempfile::Builder::new()
            .prefix("maia-sock-")
            .tempdir_in(dir)
            .ok()
    })
}

#[tokio::test]
async fn unix_sockets_outside_cannot_be_connected() {
    if !mock::require("python3 on PATH", python()) {
        return;
    }
    let (mut maia, sid) = bypass(json!({})).await;
    let tmp = tempfile::tempdir().unwrap();
    let mut places = vec![tmp.path().join("s")];
    let runtime = runtime_dir();
    match &runtime {
        Some(dir) => places.push(dir.path().join("s")),
        None => eprintln!("no writable runtime folder here: only /tmp tried"),
    }
    for path in places {
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        listener.set_nonblocking(true).unwrap();
        let out = bash(
            &mut maia,
            &sid,
            &format!(
                "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"{}\"); print(\"connected\")'",
                path.display()
            ),
        )
        .await;
        let accepted = listener.accept();
        assert!(
            accepted.is_err() && !out.contains("connected\n"),
            "{}: {out}",
            path.display()
        );
    }
}

#[tokio::test]
async fn secrets_cannot_be_read() {
    let (mut maia, sid) = bypass(json!({})).await;
    let home = maia.home.path().to_path_buf();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE-KEY-MATERIAL").unwrap();
    let out = bash(
        &mut maia,
        &sid,
        "cat ~/.ssh/id_ed25519 ~/.maia/settings.json; echo \"key=${LITELLM_API_KEY-unset}\"",
    )
    .await;
    assert!(!out.contains("PRIVATE-KEY-MATERIAL"), "{out}");
    assert!(!out.contains("LiteLLM_URL"), "{out}");
    assert!(out.contains("key=unset"), "{out}");
}

#[tokio::test]
async fn git_hooks_cannot_be_planted() {
    let (mut maia, sid) = bypass(json!({})).await;
    // A repository without hooks (git does not need the folder).
    let git = maia.path(".git");
    std::fs::create_dir_all(&git).unwrap();
    std::fs::write(git.join("config"), "[core]\n").unwrap();
    for attempt in [
        "mkdir -p .git/hooks && echo 'touch /tmp/owned' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
        "mv .git .git-aside && cp -r .git-aside .git && mkdir -p .git/hooks && echo x > .git/hooks/post-checkout",
        "cp -r .git /tmp/g; rm -rf .git; mv /tmp/g .git; echo x > .git/hooks/pre-push",
        "echo '[core]\nhooksPath = /tmp' > .git/config",
        "mkdir -p .maia && echo '{\"permissions\":{\"allow\":[\"Bash(*)\"]}}' > .maia/settings.json",
        "mv .maia .maia-aside && mkdir .maia && echo '{}' > .maia/settings.json",
    ] {
        let out = bash(&mut maia, &sid, attempt).await;
        let hooks: Vec<_> = std::fs::read_dir(git.join("hooks"))
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(hooks.is_empty(), "{attempt}: {hooks:?}: {out}");
        assert!(!maia.path(".git-aside").exists(), "{attempt}: {out}");
        assert!(!maia.path(".maia-aside").exists(), "{attempt}: {out}");
        assert!(
            !maia.path(".maia/settings.json").exists(),
            "{attempt}: {out}"
        );
        assert_eq!(
            std::fs::read_to_string(git.join("config")).unwrap(),
            "[core]\n",
            "{attempt}: {out}"
        );
    }
}

#[tokio::test]
async fn build_like_work_still_runs() {
    let (mut maia, sid) = bypass(json!({})).await;
    let out = bash(
        &mut maia,
        &sid,
        "mkdir -p out && ls /usr/bin | head -3 > out/list && cat out/list | wc -l && echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"",
    )
    .await;
    assert!(
        out.contains("3\nt\n") && out.contains("Exit code: 0"),
        "{out}"
    );
    if python() {
        std::fs::write(
            maia.path("mp.py"),
            "import multiprocessing as m, socket\na, b = socket.socketpair(); a.send(b'x'); assert b.recv(1) == b'x'\ndef sq(q, x): q.put(x * x)\nif __name__ == '__main__':\n    q = m.Queue()\n    ps = [m.Process(target=sq, args=(q, x)) for x in range(10)]\n    for p in ps: p.start()\n    total = sum(q.get() for _ in ps)\n    for p in ps: p.join()\n    print('sum', total)\n",
        )
        .unwrap();
        let out = bash(&mut maia, &sid, "python3 mp.py").await;
        assert!(out.contains("sum 285"), "{out}");
    }
    let out = bash(
        &mut maia,
        &sid,
        "git init -q . && echo hi > f && git add f && git -c user.name=t -c user.email=t@t commit -qm m && git status --short && echo committed",
    )
    .await;
    assert!(out.contains("committed"), "{out}");
}

#[tokio::test]
async fn the_session_temp_folder_is_removed_even_after_kill_9() {
    let (mut maia, sid) = bypass(json!({})).await;
    let out = bash(
        &mut maia,
        &sid,
        "echo x > \"$TMPDIR/left\"; echo \"$TMPDIR\"",
    )
    .await;
    let temp = std::path::PathBuf::from(out.lines().next().unwrap_or_default());
    assert!(temp.join("left").is_file(), "{out}");
    // Killed: nothing could clean up; the next start does.
    let mut maia = maia.restart().await;
    maia.initialize().await;
    let _ = maia.new_session().await;
    assert!(
        eventually(WAIT, || !temp.exists()).await,
        "{} left behind",
        temp.display()
    );
    // A session's folder goes when MAIA exits.
    let sid = maia.new_session().await;
    let id = maia
        .request(
            "session/set_mode",
            json!({"sessionId": sid, "modeId": "bypass"}),
        )
        .await;
    maia.response(id).await;
    let out = bash(&mut maia, &sid, "echo \"$TMPDIR\"").await;
    let temp = std::path::PathBuf::from(out.lines().next().unwrap_or_default());
    assert!(temp.is_dir(), "{out}");
    maia.close_stdin();
    let _ = maia.wait_exit(WAIT).await;
    assert!(
        eventually(Duration::from_secs(5), || !temp.exists()).await,
        "{} left after exit",
        temp.display()
    );
}

/// A stdio MCP server the project configured runs under the same
/// file-system sandbox: it writes in the project, not outside (its first
/// act is writing its pid file; the mock stops when it cannot). The user's
/// own servers run as configured (`acp_mcp_trust.rs`).
#[tokio::test]
async fn a_project_stdio_mcp_server_cannot_write_outside_the_project() {
    let mut maia = Maia::start().await;
    maia.initialize_with(json!({"session": {"notices": {}}}))
        .await;
    let outside = maia.home.path().join("escape.pid");
    let inside = maia.path("inside.pid");
    let server = |pid: &std::path::Path| json!({"command": crate::acp_mcp::mock_mcp(), "env": {"MOCK_MCP_PID_FILE": pid}});
    let settings = maia.path(".maia/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(
        &settings,
        json!({"mcpServers": {"out": server(&outside), "in": server(&inside)}}).to_string(),
    )
    .unwrap();
    let cwd = maia.cwd();
    let id = maia
        .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert!(resp["result"]["sessionId"].is_string(), "{resp}");
    let failed = |m: &Value| {
        m["params"]["update"]["title"]
            .as_str()
            .is_some_and(|t| t.contains("MCP server `out` failed"))
    };
    if !maia.seen.iter().any(failed) {
        maia.wait_for(failed).await;
    }
    assert!(!outside.exists(), "an MCP server wrote outside the project");
    assert!(
        eventually(WAIT, || std::fs::read_to_string(&inside)
            .is_ok_and(|s| !s.trim().is_empty()))
        .await,
        "the server inside the project did not start"
    );
}

/// A local HTTP server answering `body`; counts its connections.
fn http_server(body: &'static str) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = hits.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, hits)
}

/// `sandbox.allowedDomains`: the listed name goes through MAIA's proxy,
/// another is refused with the reason, and around the proxy there is no
/// network. The names are an IP literal and `localhost`: nothing leaves
/// the machine, no DNS is asked.
#[tokio::test]
async fn only_allowed_domains_go_out_through_the_proxy() {
    if !mock::require("curl (the HTTP client) on PATH", curl()) {
        return;
    }
    let (allowed, _) = http_server("from-allowed");
    let (refused, refused_hits) = http_server("from-refused");
    let (mut maia, sid) = bypass(json!({"sandbox": {"allowedDomains": ["127.0.0.1"]}})).await;
    let out = bash(
        &mut maia,
        &sid,
        &format!("curl -s http://127.0.0.1:{allowed}/"),
    )
    .await;
    assert!(out.contains("from-allowed"), "{out}");
    let out = bash(
        &mut maia,
        &sid,
        &format!("curl -s -p http://127.0.0.1:{allowed}/"),
    )
    .await;
    assert!(out.contains("from-allowed"), "{out}");
    let out = bash(
        &mut maia,
        &sid,
        &format!("curl -s http://localhost:{refused}/"),
    )
    .await;
    assert!(
        out.contains("localhost is not in sandbox.allowedDomains") && out.contains("MAIA sandbox"),
        "{out}"
    );
    let out = bash(
        &mut maia,
        &sid,
        &format!("curl -s --noproxy '*' http://127.0.0.1:{refused}/; echo \"curl $?\""),
    )
    .await;
    assert!(!out.contains("from-refused"), "{out}");
    assert_eq!(refused_hits.load(std::sync::atomic::Ordering::SeqCst), 0);
}

/// A local server that keeps the first bytes of each connection (a request
/// head, or a ClientHello) and answers `body` to an HTTP request.
fn recording_server(body: &'static str) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
                if head.first() == Some(&0x16) {
                    break;
                }
            }
            let tls = head.first() == Some(&0x16);
            kept.lock().unwrap().push(head);
            if !tls {
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        }
    });
    (port, seen)
}

fn curl() -> bool {
    std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Domain fronting through the proxy: a plain request to an allowed host
/// whose `Host` header names another site is refused before anything is
/// sent; routing headers (`X-Forwarded-Host`, `Forwarded`) are dropped; a
/// kept-alive connection cannot carry a second, unchecked request.
#[tokio::test]
async fn the_proxy_checks_the_host_header_it_forwards() {
    if !mock::require("curl (the HTTP client) on PATH", curl()) {
        return;
    }
    let (port, seen) = recording_server("from-allowed");
    let (mut maia, sid) = bypass(json!({"sandbox": {"allowedDomains": ["127.0.0.1"]}})).await;
    for flags in ["", "-p "] {
        let out = bash(
            &mut maia,
            &sid,
            &format!("curl -s {flags}-H 'Host: evil.test' http://127.0.0.1:{port}/"),
        )
        .await;
        assert!(
            out.contains("MAIA sandbox") && out.contains("the Host header names evil.test"),
            "{flags}: {out}"
        );
    }
    // (A tunnel's connection is made before its first bytes are checked.)
    assert!(
        seen.lock().unwrap().iter().all(Vec::is_empty),
        "a fronted request was forwarded"
    );
    seen.lock().unwrap().clear();
    let out = bash(
        &mut maia,
        &sid,
        &format!(
            "curl -s -H 'X-Forwarded-Host: evil.test' -H 'Forwarded: host=evil.test' http://127.0.0.1:{port}/"
        ),
    )
    .await;
    assert!(out.contains("from-allowed"), "{out}");
    let heads = seen.lock().unwrap().clone();
    let head = heads.iter().find(|h| !h.is_empty()).unwrap();
    let head = String::from_utf8_lossy(head).to_ascii_lowercase();
    assert!(!head.contains("evil.test"), "{head}");
    assert!(head.contains(&format!("host: 127.0.0.1:{port}")), "{head}");
    assert!(head.contains("connection: close"), "{head}");
}

/// What the proxy does not parse strictly is refused, not sent on: a bare
/// LF that would add a `Host` header behind the checked one, and plain
/// HTTP in a tunnel after a leading space (once passed on as "another
/// protocol").
#[tokio::test]
async fn the_proxy_refuses_a_request_it_does_not_parse_strictly() {
    if !mock::require("python3 on PATH", python()) {
        return;
    }
    let (port, seen) = recording_server("from-allowed");
    let (mut maia, sid) = bypass(json!({"sandbox": {"allowedDomains": ["127.0.0.1"]}})).await;
    let script = format!(
        r#"
import os, socket
proxy = os.environ["HTTP_PROXY"].rstrip("/").rsplit("/", 1)[-1]
h, p = proxy.rsplit(":", 1)
def send(first, then=None):
    s = socket.create_connection((h, int(p)), timeout=10)
    s.sendall(first)
    if then is not None:
        reply = b""
        while b"\r\n\r\n" not in reply:
            reply += s.recv(1024)
        s.sendall(then)
    reply = b""
    while True:
        got = s.recv(4096)
        if not got:
            break
        reply += got
    print(reply.split(b"\r\n")[0].decode(), "|", reply.split(b"\r\n\r\n")[-1].decode().strip())
send(b"GET http://127.0.0.1:{port}/ HTTP/1.1\r\nX-A: 1\nHost: evil.test\r\n\r\n")
send(b"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n", b" GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n")
"#
    );
    std::fs::write(maia.cwd().join("raw.py"), script).unwrap();
    let out = bash(&mut maia, &sid, "python3 raw.py").await;
    let lines: Vec<&str> = out.lines().filter(|l| l.contains(" | ")).collect();
    assert_eq!(lines.len(), 2, "{out}");
    for line in lines {
        assert!(
            line.starts_with("HTTP/1.1 400") && line.contains("MAIA sandbox"),
            "{out}"
        );
    }
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .all(|h| !String::from_utf8_lossy(h).contains("evil")),
        "a request the proxy did not parse strictly was sent on"
    );
}

/// A CONNECT tunnel to an allowed host whose TLS names another server (SNI)
/// is closed with the TLS alert before the ClientHello reaches the server;
/// one that names the host goes through.
#[tokio::test]
async fn a_tunnel_whose_tls_names_another_server_is_closed() {
    if !mock::require("python3 on PATH", python()) {
        return;
    }
    let (port, seen) = recording_server("unused");
    let (mut maia, sid) = bypass(json!({"sandbox": {"allowedDomains": ["localhost"]}})).await;
    let script = format!(
        r#"
import os, socket, ssl, sys
proxy = os.environ["HTTPS_PROXY"].rstrip("/").rsplit("/", 1)[-1]
h, p = proxy.rsplit(":", 1)
s = socket.create_connection((h, int(p)), timeout=10)
s.sendall(b"CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n")
reply = b""
while b"\r\n\r\n" not in reply:
    reply += s.recv(1024)
print(reply.split(b"\r\n")[0].decode())
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
try:
    ctx.wrap_socket(s, server_hostname=sys.argv[1])
    print("handshake done")
except Exception as e:
    print("tls:", e)
"#
    );
    std::fs::write(maia.cwd().join("sni.py"), script).unwrap();
    let out = bash(&mut maia, &sid, "python3 sni.py evil.test").await;
    assert!(out.contains("200 Connection Established"), "{out}");
    assert!(
        out.to_ascii_uppercase().contains("UNRECOGNIZED_NAME"),
        "{out}"
    );
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .all(|h| h.first() != Some(&0x16)),
        "the mismatched ClientHello was forwarded"
    );
    let _ = bash(&mut maia, &sid, "python3 sni.py localhost").await;
    assert!(
        eventually(WAIT, || seen
            .lock()
            .unwrap()
            .iter()
            .any(|h| h.first() == Some(&0x16)))
        .await,
        "the matching ClientHello did not reach the server"
    );
}
