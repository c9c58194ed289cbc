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
