//! `maia serve`'s web page through the binary on loopback: the login form
//! and its cookie (attributes, wrong tokens, foreign origins, logout,
//! revocation), the cookie accepted only on the page's own WebSocket, the
//! page's security headers, and the embedded bundle built from the current
//! sources of the VS Code panel's webview code.

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::remote_client::{Daemon, serve_command};

const PHONE: (&str, &[&str]) = ("phone", &[]);
const WATCHER: (&str, &[&str]) = ("watcher", &["--observer"]);

/// An HTTP/1.1 client that follows no redirect (as a browser's first hop).
fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .http1_only()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

fn page_url(daemon: &Daemon, path: &str) -> String {
    format!("http://{}{path}", daemon.addr)
}

fn origin(daemon: &Daemon) -> String {
    format!("http://{}", daemon.addr)
}

/// `POST /login` with `token` from `origin`.
async fn login(daemon: &Daemon, token: &str, origin: Option<&str>) -> reqwest::Response {
    let mut request = client()
        .post(page_url(daemon, "/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={token}"));
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    request.send().await.unwrap()
}

/// The login cookie (`maia_login=…`) a successful login sets.
async fn logged_in(daemon: &Daemon, name: &str) -> String {
    let response = login(daemon, &daemon.tokens[name], Some(&origin(daemon))).await;
    assert_eq!(response.status(), 303);
    let set = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    set.split(';').next().unwrap().to_owned()
}

/// A WebSocket upgrade on `/acp` with `cookie` and `origin`: the socket, or
/// the refusal's status.
async fn ws_with_cookie(
    daemon: &Daemon,
    cookie: &str,
    origin: Option<&str>,
) -> Result<crate::remote_client::Ws, u16> {
    let mut request = format!("ws://{}/acp", daemon.addr)
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("cookie", cookie.parse().unwrap());
    if let Some(origin) = origin {
        request
            .headers_mut()
            .insert("origin", origin.parse().unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((socket, _)) => Ok(crate::remote_client::Ws::from_socket(socket)),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            Err(response.status().as_u16())
        }
        Err(e) => panic!("{e}"),
    }
}

fn init_params() -> Value {
    json!({"protocolVersion": 1, "clientCapabilities": {},
           "clientInfo": {"name": "web-tests", "version": "1"}})
}

/// The headers every page and asset carries.
fn assert_locked_down(response: &reqwest::Response) {
    let h = response.headers();
    let csp = h["content-security-policy"].to_str().unwrap();
    for part in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
        "form-action 'self'",
        "base-uri 'none'",
    ] {
        assert!(csp.contains(part), "{part} missing from {csp}");
    }
    assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"));
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["referrer-policy"], "same-origin");
    assert_eq!(h["x-frame-options"], "DENY");
}

#[tokio::test]
async fn remote_web_login_sets_a_strict_cookie_and_refuses_wrong_tokens_and_origins() {
    let daemon = Daemon::start(&[PHONE], &[]).await;
    let token = daemon.tokens["phone"].clone();
    // The login form, locked down.
    let form = client().get(page_url(&daemon, "/")).send().await.unwrap();
    assert_eq!(form.status(), 200);
    assert_locked_down(&form);
    assert_eq!(form.headers()["cache-control"], "no-store");
    let body = form.text().await.unwrap();
    assert!(body.contains("action=\"/login\""), "{body}");
    assert!(
        !body.contains("<script"),
        "the login form runs no script: {body}"
    );
    // A wrong token: 401, the form again, no cookie.
    let wrong = login(
        &daemon,
        &format!("maia_{}", "0".repeat(64)),
        Some(&origin(&daemon)),
    )
    .await;
    assert_eq!(wrong.status(), 401);
    assert!(wrong.headers().get("set-cookie").is_none());
    assert!(
        wrong
            .text()
            .await
            .unwrap()
            .contains("Unknown or revoked token")
    );
    // The right token from another site, or from no page at all: refused.
    let foreign = login(&daemon, &token, Some("http://evil.example")).await;
    assert_eq!(foreign.status(), 403);
    assert!(foreign.headers().get("set-cookie").is_none());
    let other_port = format!("http://127.0.0.1:{}", free_port());
    let cross = login(&daemon, &token, Some(&other_port)).await;
    assert_eq!(cross.status(), 403, "another port is another origin");
    let blind = login(&daemon, &token, None).await;
    assert_eq!(blind.status(), 403);
    assert!(blind.headers().get("set-cookie").is_none());
    // The right one from the page: a redirect home with a strict cookie
    // that is not the token.
    let ok = login(&daemon, &token, Some(&origin(&daemon))).await;
    assert_eq!(ok.status(), 303);
    assert_eq!(ok.headers()["location"], "/");
    assert_locked_down(&ok);
    let set = ok.headers()["set-cookie"].to_str().unwrap().to_owned();
    let attributes: Vec<&str> = set.split(';').map(str::trim).collect();
    assert!(attributes[0].starts_with("maia_login="), "{set}");
    for wanted in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(attributes.contains(&wanted), "{wanted} missing: {set}");
    }
    assert!(
        !attributes.contains(&"Secure"),
        "plain loopback HTTP: {set}"
    );
    assert!(!set.contains(&token), "the cookie is not the token");
    // With the cookie: the page, naming the token (never the token itself).
    let cookie = attributes[0].to_owned();
    let page = client()
        .get(page_url(&daemon, "/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert_locked_down(&page);
    let body = page.text().await.unwrap();
    assert!(body.contains("data-token=\"phone\""), "{body}");
    assert!(body.contains("<script src=\"/web/app.js\"></script>"));
    assert!(!body.contains(&token));
    // The assets: same headers, the right types.
    for (path, kind) in [
        ("/web/app.js", "text/javascript"),
        ("/web/app.css", "text/css"),
    ] {
        let asset = client().get(page_url(&daemon, path)).send().await.unwrap();
        assert_eq!(asset.status(), 200);
        assert_locked_down(&asset);
        assert!(
            asset.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with(kind)
        );
        let tag = asset.headers()["etag"].to_str().unwrap().to_owned();
        assert!(asset.bytes().await.unwrap().len() > 1000);
        // Fetched again with its tag: 304, no body.
        let again = client()
            .get(page_url(&daemon, path))
            .header("if-none-match", &tag)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 304);
    }
    // A foreign Host (DNS rebinding) gets no page.
    let rebound = client()
        .get(page_url(&daemon, "/"))
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    // Nothing of the token in the daemon's stderr is checked by the audit
    // test; here: the token file still holds only hashes.
    let file = std::fs::read_to_string(daemon.home.path().join(".maia/serve-tokens.json")).unwrap();
    assert!(!file.contains(&token));
}

/// A port nothing listens on (another origin than the daemon's).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn remote_web_cookie_opens_only_the_page_websocket_from_its_own_origin_until_logout() {
    let daemon = Daemon::start(&[PHONE, WATCHER], &[]).await;
    let cookie = logged_in(&daemon, "phone").await;
    let own = origin(&daemon);
    // The page's own WebSocket: the token's role.
    let mut ws = ws_with_cookie(&daemon, &cookie, Some(&own))
        .await
        .unwrap_or_else(|status| panic!("refused: {status}"));
    let init = ws.call("initialize", init_params()).await;
    assert_eq!(
        init["result"]["_meta"]["maia"]["remote"]["role"], "controller",
        "{init}"
    );
    let created = ws
        .call(
            "session/new",
            json!({"cwd": daemon.cwd(), "mcpServers": []}),
        )
        .await;
    assert!(created["result"]["sessionId"].is_string(), "{created}");
    // The cookie from another site or another port (both refused by the
    // Origin check), or without an Origin: not accepted.
    assert_eq!(
        ws_with_cookie(&daemon, &cookie, Some("http://evil.example"))
            .await
            .err(),
        Some(403)
    );
    let other = format!("http://127.0.0.1:{}", free_port());
    assert_eq!(
        ws_with_cookie(&daemon, &cookie, Some(&other)).await.err(),
        Some(403)
    );
    assert_eq!(
        ws_with_cookie(&daemon, &cookie, None).await.err(),
        Some(401)
    );
    // Nor on Streamable HTTP: the cookie is the page's WebSocket's only.
    let post = client()
        .post(daemon.url())
        .header("cookie", &cookie)
        .header("origin", &own)
        .header("content-type", "application/json")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params()})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 401);
    // An observer's login is read-only on its socket too.
    let watcher = logged_in(&daemon, "watcher").await;
    let mut watching = ws_with_cookie(&daemon, &watcher, Some(&own)).await.unwrap();
    let init = watching.call("initialize", init_params()).await;
    assert_eq!(
        init["result"]["_meta"]["maia"]["remote"]["role"],
        "observer"
    );
    let refused = watching
        .call(
            "session/new",
            json!({"cwd": daemon.cwd(), "mcpServers": []}),
        )
        .await;
    assert_eq!(refused["error"]["data"]["reason"], "observer", "{refused}");
    // Logout from another site: refused; from the page: the cookie is cleared
    // and the login is over.
    let foreign = client()
        .post(page_url(&daemon, "/logout"))
        .header("cookie", &cookie)
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    assert!(ws_with_cookie(&daemon, &cookie, Some(&own)).await.is_ok());
    let out = client()
        .post(page_url(&daemon, "/logout"))
        .header("cookie", &cookie)
        .header("origin", &own)
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 303);
    let cleared = out.headers()["set-cookie"].to_str().unwrap();
    assert!(
        cleared.contains("Max-Age=0") && cleared.contains("HttpOnly"),
        "{cleared}"
    );
    assert_eq!(
        ws_with_cookie(&daemon, &cookie, Some(&own)).await.err(),
        Some(401)
    );
    let page = client()
        .get(page_url(&daemon, "/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("action=\"/login\""),
        "logged out: the form again"
    );
    // A revoked token's login ends with it.
    let (ok, _, err) = serve_command(daemon.home.path(), &["token", "revoke", "watcher"]);
    assert!(ok, "{err}");
    assert_eq!(
        ws_with_cookie(&daemon, &watcher, Some(&own)).await.err(),
        Some(401)
    );
}

/// The page the binary embeds (`server/maia-server/web/`) was built from
/// the sources as they are: `sources.txt` names every source file and the
/// SHA-256 over them that `npm run build:web` computed.
#[test]
fn remote_web_bundle_is_built_from_the_current_sources() {
    use sha2::{Digest, Sha256};
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let manifest =
        std::fs::read_to_string(repo.join("server/maia-server/web/sources.txt")).unwrap();
    let mut lines = manifest.lines();
    let recorded = lines
        .next()
        .and_then(|l| l.strip_prefix("sha256 "))
        .unwrap()
        .to_owned();
    let files: Vec<&str> = lines
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    assert!(files.contains(&"webview/panel.ts") && files.contains(&"web/host.ts"));
    // Only the repository's own files: dependencies are pinned by the
    // package lock, and a clean clone has no node_modules when this runs.
    for file in &files {
        assert!(
            !file.starts_with("..") && !file.split('/').any(|p| p == "node_modules"),
            "sources.txt names {file}, which a clean clone does not have: rebuild with `npm run build:web`"
        );
    }
    let base = repo.join("editors/vscode");
    let mut hash = Sha256::new();
    for file in &files {
        let text = std::fs::read(base.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        hash.update(file.as_bytes());
        hash.update([0]);
        hash.update(&text);
        hash.update([0]);
    }
    let now: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        now, recorded,
        "the web page's bundle is stale: run `npm run build:web` in editors/vscode and commit server/maia-server/web/"
    );
}

/// The user chunks a client saw, with their text.
fn asked(seen: &[Value]) -> Vec<&Value> {
    seen.iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "user_message_chunk")
        .collect()
}

#[tokio::test]
async fn remote_attached_clients_see_what_another_client_asked_numbered_once() {
    let daemon = Daemon::start(&[PHONE, WATCHER], &[]).await;
    let mut phone = daemon.ws("phone").await;
    phone.call("initialize", init_params()).await;
    let created = phone
        .call(
            "session/new",
            json!({"cwd": daemon.cwd(), "mcpServers": []}),
        )
        .await;
    let sid = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let mut watcher = daemon.ws("watcher").await;
    watcher.call("initialize", init_params()).await;
    let load = json!({"sessionId": sid, "cwd": daemon.cwd(), "mcpServers": []});
    watcher.call("session/load", load.clone()).await;
    daemon
        .mock
        .push(maia_test_support::text_reply("It is fine."));
    let answer = phone
        .call(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "How is it?"}]}),
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    watcher
        .wait_for(|m| m["method"] == "_session/turn_ended")
        .await;
    // The observer saw the question, marked as an echo, before the answer.
    let seen = asked(&watcher.seen);
    assert_eq!(seen.len(), 1, "{:?}", watcher.seen);
    assert_eq!(seen[0]["params"]["update"]["content"]["text"], "How is it?");
    assert_eq!(seen[0]["params"]["_meta"]["maia"]["echo"], true);
    let echo_seq = seen[0]["params"]["_meta"]["maia"]["seq"].as_u64().unwrap();
    let first_answer = watcher
        .seen
        .iter()
        .position(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .unwrap();
    let echo_at = watcher
        .seen
        .iter()
        .position(|m| m["params"]["update"]["sessionUpdate"] == "user_message_chunk")
        .unwrap();
    assert!(echo_at < first_answer);
    // The asker is not sent its own words, only their number: every
    // client's numbers stay contiguous.
    phone
        .wait_for(|m| m["method"] == "_session/turn_ended")
        .await;
    assert!(asked(&phone.seen).is_empty(), "{:?}", phone.seen);
    assert!(phone.seen.iter().any(|m| m["method"] == "_session/echoed"
        && m["params"]["_meta"]["maia"]["seq"].as_u64() == Some(echo_seq)));
    for client in [&phone, &watcher] {
        let numbers = crate::remote_client::seqs(&client.seen);
        assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{numbers:?}");
    }
    // A later attach replays it in its place.
    let mut late = daemon.ws("watcher").await;
    late.call("initialize", init_params()).await;
    late.call("session/load", load).await;
    let replayed = asked(&late.seen);
    assert_eq!(replayed.len(), 1);
    assert_eq!(
        replayed[0]["params"]["update"]["content"]["text"],
        "How is it?"
    );
}

#[tokio::test]
async fn remote_web_cookie_is_secure_over_tls_and_the_origin_is_checked_on_http2() {
    let fixture = |name: &str| {
        format!(
            "{}/../../protocol-tests/fixtures/tls/{name}",
            env!("CARGO_MANIFEST_DIR")
        )
    };
    let (cert, key) = (fixture("server.pem"), fixture("server.key"));
    let daemon = Daemon::start(&[PHONE], &["--tls-cert", &cert, "--tls-key", &key]).await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    let ca = std::fs::read_to_string(fixture("ca.pem")).unwrap();
    let der: Vec<u8> = {
        use base64::Engine;
        let body: String = ca.lines().filter(|l| !l.starts_with("-----")).collect();
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap()
    };
    roots.add(der.into()).unwrap();
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let client = reqwest::Client::builder()
        .tls_backend_preconfigured(config)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let own = format!("https://{}", daemon.addr);
    let login = |origin: String| {
        client
            .post(format!("https://{}/login", daemon.addr))
            .header("origin", origin)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("token={}", daemon.tokens["phone"]))
            .send()
    };
    // On HTTP/2 the page's origin is the request's `:authority`.
    let foreign = login(format!("https://127.0.0.1:{}", free_port()))
        .await
        .unwrap();
    assert_eq!(foreign.version(), reqwest::Version::HTTP_2);
    assert_eq!(foreign.status(), 403);
    let ok = login(own).await.unwrap();
    assert_eq!(ok.status(), 303);
    let set = ok.headers()["set-cookie"].to_str().unwrap();
    let attributes: Vec<&str> = set.split(';').map(str::trim).collect();
    for wanted in ["Secure", "HttpOnly", "SameSite=Strict"] {
        assert!(attributes.contains(&wanted), "{wanted} missing: {set}");
    }
}

#[tokio::test]
async fn remote_an_echo_reads_as_the_same_prompt_replayed_after_a_restart() {
    let mut daemon = Daemon::start(&[PHONE, WATCHER], &[]).await;
    let mut phone = daemon.ws("phone").await;
    phone.call("initialize", init_params()).await;
    let created = phone
        .call(
            "session/new",
            json!({"cwd": daemon.cwd(), "mcpServers": []}),
        )
        .await;
    let sid = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let mut watcher = daemon.ws("watcher").await;
    watcher.call("initialize", init_params()).await;
    let load = json!({"sessionId": sid, "cwd": daemon.cwd(), "mcpServers": []});
    watcher.call("session/load", load.clone()).await;
    std::fs::write(daemon.cwd().join("a.txt"), "a\n").unwrap();
    let link = format!("file://{}", daemon.cwd().join("a.txt").display());
    let embedded = format!("file://{}", daemon.cwd().join("b.txt").display());
    // Text, a link, text, an embedded resource: in that order.
    let prompt = json!([
        {"type": "text", "text": "Compare"},
        {"type": "resource_link", "name": "a.txt", "uri": link},
        {"type": "text", "text": "with"},
        {"type": "resource", "resource": {"uri": embedded, "text": "b\n", "mimeType": "text/plain"}},
    ]);
    daemon.mock.push(maia_test_support::text_reply("Same."));
    let answer = phone
        .call(
            "session/prompt",
            json!({"sessionId": sid, "prompt": prompt}),
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    watcher
        .wait_for(|m| m["method"] == "_session/turn_ended")
        .await;
    let echoed = asked(&watcher.seen)[0]["params"]["update"]["content"]["text"].clone();
    assert_eq!(
        echoed,
        format!(
            "Compare\n@{}\nwith\n@{embedded}",
            daemon.cwd().join("a.txt").display()
        )
    );
    // What the journal replays, in a process that never saw the echo.
    daemon.restart().await;
    let mut late = daemon.ws("watcher").await;
    late.call("initialize", init_params()).await;
    late.call("session/load", load).await;
    let replayed = asked(&late.seen);
    assert_eq!(replayed.len(), 1, "{:?}", late.seen);
    assert_eq!(replayed[0]["params"]["update"]["content"]["text"], echoed);
}
