//! `maia serve` through the binary: what a token's role and limits let a
//! connection do, and the bounds on connections that have not shown a
//! token yet.

use std::time::Duration;

use maia_test_support as mock;
use serde_json::{Value, json};

use crate::harness::{WAIT, eventually};
use crate::remote_client::{Daemon, Ws, init_message, serve_command};

const EDITOR: (&str, &[&str]) = ("editor", &[]);
const WATCHER: (&str, &[&str]) = ("watcher", &["--observer"]);

fn load_params(daemon: &Daemon, sid: &str) -> Value {
    json!({"sessionId": sid, "cwd": daemon.cwd(), "mcpServers": []})
}

/// A client of `token`, initialized.
async fn client(daemon: &Daemon, token: &str) -> Ws {
    daemon.client(token).await
}

/// A session of the editor with one answered prompt (saved).
async fn saved_session(daemon: &Daemon) -> (Ws, String) {
    let (ws, sid) = daemon.session_with_turn("editor", "saved").await;
    (ws, sid.to_string())
}

/// Adds a token on the running daemon's HOME; the daemon reads the file
/// on every request.
fn add_token(daemon: &mut Daemon, name: &str, extra: &[&str]) {
    let mut args = vec!["token", "add"];
    args.extend_from_slice(extra);
    args.push(name);
    let (ok, out, err) = serve_command(daemon.home.path(), &args);
    assert!(ok, "{err}");
    daemon.tokens.insert(name.to_owned(), out.trim().to_owned());
}

/// An MCP server whose start creates `marker`.
fn marking_server(marker: &std::path::Path) -> Value {
    json!({"name": "marker", "command": "/bin/sh",
           "args": ["-c", format!("touch '{}'", marker.display())], "env": []})
}

#[tokio::test]
async fn remote_an_observer_opening_a_saved_session_starts_no_process() {
    let mut daemon = Daemon::start(&[EDITOR, WATCHER], &[]).await;
    let (_editor, sid) = saved_session(&daemon).await;
    add_token(&mut daemon, "limited", &["--observer", "--session", &sid]);
    // After a restart no session is live: an attach opens it in the daemon.
    daemon.restart().await;
    let marks = tempfile::tempdir().unwrap();
    let observer_marker = marks.path().join("observer");
    for token in ["watcher", "limited"] {
        let mut watcher = client(&daemon, token).await;
        for method in ["session/load", "session/resume"] {
            let mut params = load_params(&daemon, &sid);
            params["mcpServers"] = json!([marking_server(&observer_marker)]);
            let refused = watcher.call(method, params).await;
            assert_eq!(
                refused["error"]["data"]["reason"], "observer",
                "{token} {method}: {refused}"
            );
            assert_eq!(refused["error"]["data"]["field"], "mcpServers");
            let mut params = load_params(&daemon, &sid);
            params["additionalDirectories"] = json!([marks.path()]);
            let refused = watcher.call(method, params).await;
            assert_eq!(
                refused["error"]["data"]["field"], "additionalDirectories",
                "{token} {method}: {refused}"
            );
        }
    }
    // A controller's open of the session starts its server: had an
    // observer's open gone to the agent first, its marker would be there.
    let controller_marker = marks.path().join("controller");
    let mut editor = client(&daemon, "editor").await;
    let mut params = load_params(&daemon, &sid);
    params["mcpServers"] = json!([marking_server(&controller_marker)]);
    let loaded = editor.call("session/load", params).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    assert!(
        eventually(WAIT, || controller_marker.exists()).await,
        "the controller's server did not start"
    );
    assert!(
        !observer_marker.exists(),
        "an observer's request started a process"
    );
    // Without those fields the observer watches it.
    let mut watcher = client(&daemon, "watcher").await;
    let attached = watcher
        .call("session/load", load_params(&daemon, &sid))
        .await;
    assert!(attached.get("result").is_some(), "{attached}");
}

/// An HTTP/1.1 client.
fn plain_http() -> reqwest::Client {
    plain_http_builder().build().unwrap()
}

fn plain_http_builder() -> reqwest::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
}

#[tokio::test]
async fn remote_a_rotated_token_leaves_no_open_connection_its_old_rights() {
    let mut daemon = Daemon::start(&[EDITOR, ("phone", &[])], &[]).await;
    let (_editor, sid) = saved_session(&daemon).await;
    let mut phone = client(&daemon, "phone").await;
    let attached = phone.call("session/load", load_params(&daemon, &sid)).await;
    assert!(attached.get("result").is_some(), "{attached}");
    // A Streamable HTTP connection of the old token too.
    let http = plain_http();
    let init = init_message();
    let opened = http
        .post(daemon.url())
        .bearer_auth(&daemon.tokens["phone"])
        .header("content-type", "application/json")
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), 200);
    let connection = opened.headers()["acp-connection-id"]
        .to_str()
        .unwrap()
        .to_owned();
    // The same name, another token, another role.
    let (ok, _, err) = serve_command(daemon.home.path(), &["token", "revoke", "phone"]);
    assert!(ok, "{err}");
    add_token(&mut daemon, "phone", &["--observer"]);
    let (closed, _) = phone.wait_for(|m| m.get("closed").is_some()).await;
    assert!(
        closed["closed"].as_str().unwrap().contains("revoked"),
        "{closed}"
    );
    // The new token does not reach the old token's connection.
    let prompt = json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
        "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}});
    let status = http
        .post(daemon.url())
        .bearer_auth(&daemon.tokens["phone"])
        .header("content-type", "application/json")
        .header("acp-connection-id", &connection)
        .header("acp-session-id", &sid)
        .body(prompt.to_string())
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 404, "the new token used the old one's connection");
    // The new token is an observer, on a connection of its own.
    let mut again = client(&daemon, "phone").await;
    let refused = again
        .call(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}),
        )
        .await;
    assert_eq!(refused["error"]["data"]["reason"], "observer", "{refused}");
}

#[tokio::test]
async fn remote_a_session_limited_controller_may_not_fork_its_session() {
    let mut daemon = Daemon::start(&[EDITOR], &[]).await;
    let (_editor, sid) = saved_session(&daemon).await;
    add_token(&mut daemon, "scoped", &["--session", &sid]);
    let mut scoped = client(&daemon, "scoped").await;
    let attached = scoped
        .call("session/load", load_params(&daemon, &sid))
        .await;
    assert!(attached.get("result").is_some(), "{attached}");
    let forked = scoped
        .call(
            "session/fork",
            json!({"sessionId": sid, "cwd": daemon.cwd(), "mcpServers": []}),
        )
        .await;
    assert!(forked.get("result").is_none(), "forked: {forked}");
    assert_eq!(forked["error"]["data"]["reason"], "session", "{forked}");
    // Its own session it still uses.
    daemon.mock.push(mock::text_reply("still mine"));
    let answer = scoped
        .call(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}),
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
}

/// `POST /acp` of an `initialize` with these headers: the status.
async fn initialize_with(daemon: &Daemon, headers: &[(&str, String)]) -> u16 {
    let init = init_message();
    let mut request = plain_http()
        .post(daemon.url())
        .header("content-type", "application/json")
        .body(init.to_string());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    request.send().await.unwrap().status().as_u16()
}

#[tokio::test]
async fn remote_the_bearer_scheme_is_case_insensitive_and_an_origin_names_the_port() {
    let daemon = Daemon::start(&[EDITOR], &[]).await;
    let token = &daemon.tokens["editor"];
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let status =
            initialize_with(&daemon, &[("authorization", format!("{scheme} {token}"))]).await;
        assert_eq!(status, 200, "{scheme}");
    }
    let bearer = ("authorization", format!("Bearer {token}"));
    let port = daemon.addr.rsplit_once(':').unwrap().1.to_owned();
    let own = format!("http://127.0.0.1:{port}");
    let status = initialize_with(&daemon, &[bearer.clone(), ("origin", own)]).await;
    assert_eq!(status, 200);
    let other_port = if port == "1" { "2" } else { "1" };
    for origin in [
        format!("http://127.0.0.1:{other_port}"),
        "http://127.0.0.1".to_owned(),
        format!("http://localhost:{other_port}"),
    ] {
        let status = initialize_with(&daemon, &[bearer.clone(), ("origin", origin.clone())]).await;
        assert_eq!(status, 403, "{origin}");
    }
}

#[tokio::test]
async fn remote_a_since_that_is_not_a_sequence_number_is_invalid_params() {
    let daemon = Daemon::start(&[EDITOR], &[]).await;
    let (_editor, sid) = saved_session(&daemon).await;
    let mut other = client(&daemon, "editor").await;
    for since in [json!(-1), json!("3"), json!(1.5), json!({})] {
        for method in ["session/load", "session/resume"] {
            let mut params = load_params(&daemon, &sid);
            params["_meta"] = json!({"maia": {"since": since}});
            let answer = other.call(method, params).await;
            assert_eq!(
                answer["error"]["code"], -32602,
                "{method} since {since}: {answer}"
            );
        }
    }
    assert!(
        !other.seen.iter().any(|m| m["method"] == "session/update"),
        "something was replayed"
    );
    let mut params = load_params(&daemon, &sid);
    params["_meta"] = json!({"maia": {"since": 0}});
    let answer = other.call("session/load", params).await;
    assert!(answer.get("result").is_some(), "{answer}");
}

#[tokio::test]
async fn remote_the_web_page_shows_no_folder_to_a_session_limited_observer() {
    let mut daemon = Daemon::start(&[EDITOR], &[]).await;
    let (_editor, sid) = saved_session(&daemon).await;
    add_token(&mut daemon, "glance", &["--observer", "--session", &sid]);
    let origin = format!("http://{}", daemon.addr);
    let http = plain_http_builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let page = |name: &'static str| {
        let (http, origin) = (http.clone(), origin.clone());
        let token = daemon.tokens[name].clone();
        let base = format!("http://{}", daemon.addr);
        async move {
            let login = http
                .post(format!("{base}/login"))
                .header("origin", &origin)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("token={token}"))
                .send()
                .await
                .unwrap();
            assert_eq!(login.status(), 303);
            let cookie = login.headers()["set-cookie"].to_str().unwrap().to_owned();
            let cookie = cookie.split(';').next().unwrap().to_owned();
            http.get(format!("{base}/"))
                .header("cookie", cookie)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
    let limited = page("glance").await;
    assert!(limited.contains("data-role=\"observer\""), "{limited}");
    assert!(limited.contains("data-cwd=\"\""), "{limited}");
    let full = page("editor").await;
    assert!(!full.contains("data-cwd=\"\""), "{full}");
}

#[tokio::test]
async fn remote_connections_that_never_finish_a_request_keep_no_authorized_client_out() {
    use tokio::io::AsyncWriteExt;
    // Few descriptors: without a bound, the idle connections take them all.
    let daemon = Daemon::start_limited(
        &[EDITOR],
        &["--max-unauthenticated", "16", "--header-timeout", "600"],
        128,
    )
    .await;
    let mut idle = Vec::new();
    for n in 0..300 {
        // A daemon that takes no more leaves the connection in its
        // listen queue, then unanswered: no more are opened.
        let connect = tokio::net::TcpStream::connect(&daemon.addr);
        let Ok(Ok(mut tcp)) = tokio::time::timeout(Duration::from_secs(2), connect).await else {
            break;
        };
        if n % 2 == 0 {
            // Half a request: headers that never end.
            let _ = tcp
                .write_all(b"GET /acp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                .await;
        }
        idle.push(tcp);
    }
    let mut editor = tokio::time::timeout(WAIT, client(&daemon, "editor"))
        .await
        .expect("an authorized client was kept out");
    let created = editor
        .call(
            "session/new",
            json!({"cwd": daemon.cwd(), "mcpServers": []}),
        )
        .await;
    assert!(created.get("result").is_some(), "{created}");
}

#[tokio::test]
async fn remote_a_connection_that_sends_no_request_is_closed_after_the_header_timeout() {
    use tokio::io::AsyncReadExt;
    let daemon = Daemon::start(&[EDITOR], &["--header-timeout", "1"]).await;
    let mut silent = tokio::net::TcpStream::connect(&daemon.addr).await.unwrap();
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(WAIT, silent.read(&mut byte)).await;
    assert!(
        matches!(read, Ok(Ok(0) | Err(_))),
        "the connection was not closed: {read:?}"
    );
    // An authorized client is not: it outlives the timeout.
    let mut editor = client(&daemon, "editor").await;
    let mut probe = tokio::net::TcpStream::connect(&daemon.addr).await.unwrap();
    let _ = tokio::time::timeout(WAIT, probe.read(&mut byte)).await;
    let listed = editor.call("session/list", json!({})).await;
    assert!(listed.get("result").is_some(), "{listed}");
}

#[tokio::test]
async fn remote_a_refusal_over_h2c_reaches_the_client_as_its_status() {
    // Refused before its body was read: the body is read first, so the
    // stream ends with the status. Before, the response came while the
    // body was still being sent and curl reported "Stream error in the
    // HTTP/2 framing layer" instead of the status.
    if !mock::require("curl", mock::on_path("curl")) {
        return;
    }
    let daemon = Daemon::start(&[("editor", &[])], &[]).await;
    let body = tempfile::NamedTempFile::new().unwrap();
    let text = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{{\"pad\":\"{}\"}}}}",
        "x".repeat(256 * 1024)
    );
    std::fs::write(body.path(), text).unwrap();
    let token = daemon.tokens["editor"].clone();
    for (auth, content_type, status) in [
        (None, "application/json", "401"),
        (Some(token), "text/plain", "415"),
    ] {
        let mut curl = std::process::Command::new("curl");
        curl.args(["-s", "-o", "/dev/null", "-w", "%{http_code} %{errormsg}"])
            .args(["--http2-prior-knowledge", "-X", "POST"])
            .arg("-H")
            .arg(format!("content-type: {content_type}"))
            .arg("--data-binary")
            .arg(format!("@{}", body.path().display()));
        if let Some(token) = &auth {
            curl.arg("-H").arg(format!("authorization: Bearer {token}"));
        }
        let out = curl.arg(daemon.url()).output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert_eq!(said, status, "curl said: {said}");
    }
}
