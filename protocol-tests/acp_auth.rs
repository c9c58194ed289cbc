//! ACP authentication (issue 14): the methods `initialize` offers,
//! `auth_required` (-32000) from `session/new` when the proxy cannot be
//! used, and the same request succeeding after `authenticate` or after a
//! restart that follows `maia login`. Also the client-managed gateway
//! (`providers/*`).

use maia_test_support::{self as mock, MockLlm};
use serde_json::{Value, json};

use crate::cli_login::{dead_port, maia as run_maia};
use crate::harness::{Maia, Options, agent_text};

fn with(settings: Value) -> Options {
    Options {
        settings,
        ..Default::default()
    }
}

fn method_ids(init: &Value) -> Vec<String> {
    init["result"]["authMethods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Opens a session and prompts it with `text`, the model answering
/// `reply`; returns the prompt response and the messages before it.
async fn turn_in_a_new_session(maia: &mut Maia, text: &str, reply: &str) -> (Value, Vec<Value>) {
    let sid = maia.new_session().await;
    maia.mock.push(mock::text_reply(reply));
    let id = maia.prompt(&sid, text).await;
    maia.response(id).await
}

#[tokio::test]
async fn terminal_login_is_offered_only_to_clients_that_can_run_it() {
    let mut maia = Maia::start().await;
    let init = maia.initialize().await;
    assert_eq!(method_ids(&init), ["agent"], "{init}");
    let agent = &init["result"]["authMethods"][0];
    assert!(agent.get("type").is_none(), "{agent}");
    assert!(
        agent["description"]
            .as_str()
            .unwrap()
            .contains("~/.maia/settings.json"),
        "{agent}"
    );

    // Only an offered method may be used: `login` was not offered here.
    let id = maia
        .request("authenticate", json!({"methodId": "login"}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["error"]["code"], -32602, "{resp}");
    assert!(
        resp["error"]["message"]
            .as_str()
            .unwrap()
            .contains("offered: `agent`"),
        "{resp}"
    );

    let mut maia = Maia::start().await;
    let init = maia
        .initialize_with(json!({"auth": {"terminal": true}}))
        .await;
    assert_eq!(method_ids(&init), ["login", "agent"], "{init}");
    let id = maia
        .request("authenticate", json!({"methodId": "login"}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"], json!({}), "{resp}");
    let login = &init["result"]["authMethods"][0];
    assert_eq!(login["type"], "terminal");
    assert_eq!(login["args"], json!(["login"]));

    // Zed's pre-stabilization convention.
    let mut maia = Maia::start().await;
    let init = maia
        .initialize_with(json!({"_meta": {"terminal-auth": true}}))
        .await;
    assert_eq!(method_ids(&init), ["login", "agent"], "{init}");
    let legacy = &init["result"]["authMethods"][0]["_meta"]["terminal-auth"];
    assert_eq!(legacy["args"], json!(["login"]), "{init}");
    assert!(
        legacy["command"].as_str().unwrap().ends_with("maia"),
        "{legacy}"
    );
}

async fn new_session_error(maia: &mut Maia) -> Value {
    let cwd = maia.cwd();
    let id = maia
        .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    maia.response(id).await.0
}

#[tokio::test]
async fn no_proxy_means_auth_required_until_login_and_authenticate() {
    let dead = format!("http://127.0.0.1:{}", dead_port().await);
    let mut maia = Maia::start_with(with(json!({"LiteLLM_URL": dead}))).await;
    let init = maia.initialize().await;
    assert!(!method_ids(&init).is_empty());
    let resp = new_session_error(&mut maia).await;
    assert_eq!(resp["error"]["code"], -32000, "{resp}");
    let message = resp["error"]["message"].as_str().unwrap();
    assert!(message.contains("connection refused"), "{message}");
    assert!(message.contains("maia login"), "{message}");

    // Still broken: authenticate says so, with the same code.
    let id = maia
        .request("authenticate", json!({"methodId": "agent"}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["error"]["code"], -32000, "{resp}");
    let id = maia
        .request("authenticate", json!({"methodId": "nope"}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["error"]["code"], -32602, "{resp}");

    // The user runs `maia login` in a terminal (same HOME).
    let url = maia.mock.url();
    let run = run_maia(
        maia.home.path(),
        maia.home.path(),
        &["login", "--url", &url, "--model", "mock-model"],
        &[],
        "",
    )
    .await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let id = maia
        .request("authenticate", json!({"methodId": "agent"}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"], json!({}), "{resp}");
    let (resp, before) = turn_in_a_new_session(&mut maia, "hello", "first answer").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_eq!(agent_text(&before), "first answer");
}

#[tokio::test]
async fn a_refused_key_means_auth_required_and_a_restart_after_login_works() {
    let mut maia = Maia::start_with(with(json!({"LiteLLM_API_Key": "sk-stale"}))).await;
    maia.mock.require_key(Some("sk-fresh"));
    maia.initialize_with(json!({"auth": {"terminal": true}}))
        .await;
    let resp = new_session_error(&mut maia).await;
    assert_eq!(resp["error"]["code"], -32000, "{resp}");
    let message = resp["error"]["message"].as_str().unwrap();
    assert!(message.contains("refused the API key"), "{message}");
    assert!(!message.contains("sk-stale"), "{message}");

    // The client runs the terminal method (`maia login`), then restarts.
    let url = maia.mock.url();
    let run = run_maia(
        maia.home.path(),
        maia.home.path(),
        &["login", "--url", &url, "--key-env", "FRESH"],
        &[("FRESH", "sk-fresh")],
        "",
    )
    .await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let mut maia = maia.restart().await;
    maia.initialize_with(json!({"auth": {"terminal": true}}))
        .await;
    let (resp, before) = turn_in_a_new_session(&mut maia, "hi", "with the new key").await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_eq!(agent_text(&before), "with the new key");
}

#[tokio::test]
async fn a_saved_session_still_opens_without_a_proxy() {
    let (mut maia, sid) = Maia::ready().await;
    maia.mock.push(mock::text_reply("kept"));
    let id = maia.prompt(&sid, "remember").await;
    maia.response(id).await;
    maia.mock.require_key(Some("sk-other"));
    let mut maia = maia.restart().await;
    maia.initialize().await;
    let (resp, before) = maia.load(&sid).await;
    assert!(resp.get("result").is_some(), "{resp}");
    assert!(agent_text(&before).contains("kept"));
}

#[tokio::test]
async fn providers_route_new_sessions_through_the_client_gateway() {
    let mut maia = Maia::start_capturing_stderr(Options::default(), "debug").await;
    let init = maia.initialize().await;
    assert!(
        init["result"]["agentCapabilities"]["providers"].is_object(),
        "{init}"
    );
    let id = maia.request("providers/list", json!({})).await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(
        resp["result"]["providers"],
        json!([{
            "providerId": "main",
            "supported": ["openai"],
            "required": true,
            "current": {"apiType": "openai", "baseUrl": maia.mock.url()}
        }]),
        "{resp}"
    );
    let before_set = maia.new_session().await;

    let gateway = MockLlm::start().await;
    gateway.require_key(Some("sk-gateway-secret"));
    let id = maia
        .request(
            "providers/set",
            json!({"providerId": "main", "apiType": "openai", "baseUrl": gateway.url(),
                   "headers": {"Authorization": "Bearer sk-gateway-secret", "x-gateway-tag": "t-77"}}),
        )
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"], json!({}), "{resp}");

    let sid = maia.new_session().await;
    gateway.push(mock::text_reply("via the gateway"));
    let id = maia.prompt(&sid, "hi").await;
    let (resp, before) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert_eq!(agent_text(&before), "via the gateway");
    let headers = gateway.headers();
    let sent = headers.last().unwrap();
    assert!(
        sent.iter()
            .any(|(k, v)| k == "x-gateway-tag" && v == "t-77"),
        "{sent:?}"
    );
    assert!(
        maia.mock.requests().is_empty(),
        "nothing went to the old proxy"
    );

    // The session opened before keeps its route.
    maia.mock.push(mock::text_reply("old route"));
    let id = maia.prompt(&before_set, "hi").await;
    let (_, before) = maia.response(id).await;
    assert_eq!(agent_text(&before), "old route");

    let id = maia.request("providers/list", json!({})).await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(
        resp["result"]["providers"][0]["current"],
        json!({"apiType": "openai", "baseUrl": gateway.url()})
    );

    let id = maia
        .request("providers/disable", json!({"providerId": "main"}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["error"]["code"], -32602, "{resp}");
    assert!(
        resp["error"]["message"]
            .as_str()
            .unwrap()
            .contains("required")
    );

    // Bad input: wrong type for a header value, unknown provider, bad URL.
    for params in [
        json!({"providerId": "main", "apiType": "openai", "baseUrl": gateway.url(), "headers": {"Authorization": ["sk-gateway-secret"]}}),
        json!({"providerId": "other", "apiType": "openai", "baseUrl": gateway.url()}),
        json!({"providerId": "main", "apiType": "openai", "baseUrl": "ftp://x"}),
        json!({"providerId": "main", "apiType": "anthropic", "baseUrl": gateway.url()}),
        json!({"providerId": "main", "apiType": "openai", "baseUrl": gateway.url(), "headers": {"X-Bad": "sk-gateway-secret\r\nX-Injected: 1"}}),
    ] {
        let id = maia.request("providers/set", params.clone()).await;
        let (resp, _) = maia.response(id).await;
        assert!(resp["error"]["code"].as_i64().is_some(), "{params}: {resp}");
    }

    // No header value anywhere on stdout or in the debug log.
    for m in &maia.seen {
        assert!(!m.to_string().contains("sk-gateway-secret"), "{m}");
        assert!(!m.to_string().contains("t-77"), "{m}");
    }
    maia.close_stdin();
    maia.wait_exit(crate::harness::WAIT).await;
    let log = maia.stderr.lock().unwrap().clone();
    assert!(!log.contains("sk-gateway-secret"), "{log}");
    assert!(!log.contains("t-77"), "{log}");
}

#[tokio::test]
async fn credentials_in_a_gateway_url_are_never_shown_or_logged() {
    let mut maia = Maia::start_capturing_stderr(Options::default(), "debug").await;
    maia.initialize().await;
    let port = dead_port().await;
    let secret = "pw-in-the-url-61";
    for (params, ok) in [
        // Refused: the URL is echoed in the error, its password is not.
        (
            json!({"providerId": "main", "apiType": "openai", "baseUrl": format!("ftp://me:{secret}@h/"), "headers": {}}),
            false,
        ),
        (
            json!({"providerId": "main", "apiType": "openai", "baseUrl": format!("http://me:{secret}@127.0.0.1:{port}/"), "headers": {}}),
            true,
        ),
    ] {
        let id = maia.request("providers/set", params).await;
        let (resp, _) = maia.response(id).await;
        assert_eq!(resp["result"].is_object(), ok, "{resp}");
    }
    let id = maia.request("providers/list", json!({})).await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(
        resp["result"]["providers"][0]["current"]["baseUrl"],
        format!("http://***@127.0.0.1:{port}"),
        "{resp}"
    );
    // Nothing answers there: auth_required names the URL without the password.
    let err = new_session_error(&mut maia).await;
    assert_eq!(err["error"]["code"], -32000, "{err}");
    let message = err["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("http://***@127.0.0.1:{port}")),
        "{message}"
    );
    for m in &maia.seen {
        assert!(!m.to_string().contains(secret), "{m}");
    }
    maia.close_stdin();
    maia.wait_exit(crate::harness::WAIT).await;
    let log = maia.stderr.lock().unwrap().clone();
    assert!(log.contains("model route set by the client"), "{log}");
    assert!(!log.contains(secret), "{log}");
}

/// An impolite client: everything in one write, nothing awaited. Each request is answered
/// exactly once, the gated ones with `auth_required`, the others as usual.
#[tokio::test]
async fn pipelined_requests_without_a_proxy_each_get_one_answer() {
    let dead = format!("http://127.0.0.1:{}", dead_port().await);
    let mut maia = Maia::start_with(with(json!({"LiteLLM_URL": dead}))).await;
    let cwd = maia.cwd();
    let cwd = cwd.to_str().unwrap();
    let burst = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": true}}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
               "params": {"cwd": cwd, "mcpServers": []}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "authenticate",
               "params": {"methodId": "agent"}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "session/new",
               "params": {"cwd": cwd, "mcpServers": []}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "session/list", "params": {"cwd": cwd}}),
        json!({"jsonrpc": "2.0", "id": 6, "method": "authenticate",
               "params": {"methodId": "login"}}),
    ];
    let text: String = burst.iter().map(|m| format!("{m}\n")).collect();
    maia.send_raw(&text).await;
    let mut answers: std::collections::BTreeMap<u64, Value> = Default::default();
    while answers.len() < burst.len() {
        let m = maia.next().await;
        if m.get("method").is_none() {
            let id = m["id"].as_u64().unwrap();
            assert!(
                answers.insert(id, m.clone()).is_none(),
                "answered twice: {m}"
            );
        }
    }
    assert_eq!(method_ids(&answers[&1]), ["login", "agent"]);
    // Both methods re-check the proxy, which still does not answer.
    for id in [2, 3, 4, 6] {
        assert_eq!(answers[&id]["error"]["code"], -32000, "{}", answers[&id]);
    }
    assert_eq!(
        answers[&5]["result"]["sessions"],
        json!([]),
        "{}",
        answers[&5]
    );
    // Nothing more comes: no session was made behind the errors.
    assert!(
        maia.next_within(std::time::Duration::from_millis(300))
            .await
            .is_none()
    );
}

/// Once the proxy has answered in this process, a new thread opens
/// without asking it again: one `GET /v1/models` for many `session/new`.
#[tokio::test]
async fn new_sessions_ask_the_proxy_for_its_models_once() {
    let (mut maia, _) = Maia::ready().await;
    for _ in 0..4 {
        let (_, result) = maia.new_session_result().await;
        // The model list still reaches the picker.
        assert!(
            result["configOptions"].to_string().contains("mock-model"),
            "{result}"
        );
    }
    assert_eq!(maia.mock.models_requests(), 1);
}

/// The kept answer does not hide a key refused later: the refused turn
/// drops it, and the next `session/new` asks and answers `auth_required`.
#[tokio::test]
async fn a_key_refused_after_sessions_opened_means_auth_required_again() {
    let (mut maia, sid) = Maia::ready().await;
    maia.new_session().await;
    assert_eq!(maia.mock.models_requests(), 1);
    maia.mock.require_key(Some("sk-revoked-elsewhere"));
    let id = maia.prompt(&sid, "hello").await;
    let (resp, before) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert!(agent_text(&before).contains("API key"), "{before:?}");
    let resp = new_session_error(&mut maia).await;
    assert_eq!(resp["error"]["code"], -32000, "{resp}");
    assert!(
        resp["error"]["message"]
            .as_str()
            .unwrap()
            .contains("refused the API key"),
        "{resp}"
    );
}
