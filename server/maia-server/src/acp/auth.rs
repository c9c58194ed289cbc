//! ACP authentication: the methods `initialize` offers, `authenticate`,
//! and the `auth_required` (-32000) answer of `session/new` when the proxy
//! cannot be reached or refuses the key.
//!
//! - `agent` (always offered): `authenticate` re-reads the settings and
//!   asks the proxy for its models (afresh, whatever the engine kept); `{}` when it answers, else -32000 with
//!   what to put in which file or variable.
//! - `login`, of type `terminal` with `args: ["login"]`, only when the
//!   client sent `clientCapabilities.auth.terminal: true`: the client runs
//!   `maia login` in a terminal, then starts MAIA again. For Zed's older
//!   `_meta["terminal-auth"]` convention (client `_meta["terminal-auth"]:
//!   true` without `auth.terminal`), the same `login` entry is an agent
//!   method carrying that `_meta`; `authenticate` with it checks like
//!   `agent`.
//! - `logout` (advertised as `agentCapabilities.auth.logout`) removes the
//!   key `maia login` saved (`LiteLLM_API_Key` of `~/.maia/settings.json`,
//!   edited in place, every other byte kept) and forgets the models the
//!   proxy listed for it, so the next `session/new` asks the proxy again
//!   and answers `auth_required` when it wants a key. Running sessions
//!   keep the client they opened with.

use agent_client_protocol_schema::v1::{
    AuthMethod, AuthMethodAgent, AuthMethodTerminal, ClientCapabilities,
};
use maia_core::Engine;
use maia_rpc::{ErrorCode, RpcError};
use serde_json::json;

use crate::probe::Problem;

/// The method that checks the settings again.
pub const AGENT_METHOD: &str = "agent";
/// The terminal login (`maia login`).
pub const LOGIN_METHOD: &str = "login";

/// What to do when no client-side login is possible.
const BY_HAND: &str = "Run `maia login` in a terminal, or put \"LiteLLM_URL\" (the proxy, e.g. http://localhost:4000) and \"LiteLLM_API_Key\" in ~/.maia/settings.json (or set the LITELLM_API_KEY variable before the editor starts MAIA), then check again.";

/// The `authMethods` of `initialize` for a client with `caps`.
pub fn methods(caps: &ClientCapabilities) -> Vec<AuthMethod> {
    let mut methods = Vec::new();
    let login_description =
        "Opens a terminal running `maia login`: proxy URL, API key, default model.";
    if caps.auth.terminal {
        methods.push(AuthMethod::Terminal(
            AuthMethodTerminal::new(LOGIN_METHOD, "Log in with maia login")
                .description(login_description)
                .args(vec!["login".to_owned()]),
        ));
    } else if legacy_terminal(caps) {
        let command = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "maia".to_owned());
        let meta = json!({"terminal-auth": {
            "label": "maia login",
            "command": command,
            "args": ["login"],
            "env": {},
        }});
        methods.push(AuthMethod::Agent(
            AuthMethodAgent::new(LOGIN_METHOD, "Log in with maia login")
                .description(login_description)
                .meta(meta.as_object().cloned()),
        ));
    }
    methods.push(AuthMethod::Agent(
        AuthMethodAgent::new(AGENT_METHOD, "Check the MAIA settings again").description(format!(
            "Re-reads ~/.maia/settings.json and checks the LiteLLM proxy. {BY_HAND}"
        )),
    ));
    methods
}

/// Zed's pre-stabilization flag `_meta["terminal-auth"]: true`.
fn legacy_terminal(caps: &ClientCapabilities) -> bool {
    caps.meta
        .as_ref()
        .and_then(|m| m.get("terminal-auth"))
        .and_then(serde_json::Value::as_bool)
        == Some(true)
}

/// Whether `id` is one of the methods [`methods`] offered to a client
/// with `caps` (a method that was not offered is an unknown one).
pub fn known(id: &str, caps: &ClientCapabilities) -> bool {
    methods(caps).iter().any(|m| m.id().0.as_ref() == id)
}

/// `logout`: the saved key is removed from the user's settings file (no
/// file, or no key in it, is already logged out) and the model lists kept
/// for any key are forgotten.
pub fn logout(engine: &Engine) -> Result<serde_json::Value, RpcError> {
    let home = engine.home().ok_or_else(|| {
        RpcError::new(
            ErrorCode::InternalError,
            "HOME is not set, so there is no saved key to forget",
        )
    })?;
    let path = home.join(".maia").join("settings.json");
    let saved = std::fs::read_to_string(&path)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .is_some_and(|v| v.get("LiteLLM_API_Key").is_some());
    if saved {
        crate::settings_file::update(&path, &[("LiteLLM_API_Key", None)])
            .map_err(|e| RpcError::new(ErrorCode::InternalError, e.to_string()))?;
        tracing::info!("logged out: the saved API key was removed");
    }
    engine.forget_models();
    Ok(json!({}))
}

/// The `auth_required` error for `problem`.
pub fn required(problem: &Problem) -> RpcError {
    RpcError::new(
        ErrorCode::AuthRequired,
        format!(
            "MAIA cannot use its LiteLLM proxy: {problem}. Fix: {}. Or log in again with `maia login` in a terminal.",
            problem.fix()
        ),
    )
}
