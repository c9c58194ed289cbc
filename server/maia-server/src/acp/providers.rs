//! The client-managed gateway (ACP "Configurable LLM Providers", unstable:
//! the schema crate's `unstable_llm_providers`, built in with this crate's
//! default feature `llm-providers`).
//!
//! MAIA has one provider, `main`, of kind `openai` (an OpenAI-compatible
//! proxy), and it is required. `providers/list` shows the base URL in use
//! and never a header or key; `providers/set` routes the sessions opened
//! afterwards through the client's base URL and headers (open sessions
//! keep their route, so no turn changes server midway); the headers are
//! secrets: never logged, echoed or written. `providers/disable` is
//! refused: MAIA cannot work without a model server.

use agent_client_protocol_schema::v1::{
    DisableProviderRequest, ListProvidersResponse, LlmProtocol, ProviderCurrentConfig,
    ProviderInfo, SetProviderRequest, SetProviderResponse,
};
use maia_core::Engine;
use maia_core::settings::LlmRoute;
use maia_llm::ApiKey;
use maia_rpc::{ErrorCode, RpcError};
use serde_json::Value;

/// The one provider's id.
pub const MAIN: &str = "main";

fn invalid(message: impl Into<String>) -> RpcError {
    RpcError::new(ErrorCode::InvalidParams, message)
}

fn unknown(id: &str) -> RpcError {
    RpcError::new(
        ErrorCode::ResourceNotFound,
        format!("unknown provider `{id}`; MAIA has one provider, `{MAIN}`"),
    )
}

/// `providers/list`: the route new sessions use, without any secret.
pub fn list(engine: &Engine) -> ListProvidersResponse {
    let base_url = match engine.route() {
        Some(route) => route.base_url,
        None => {
            let home = engine
                .home()
                .map(std::path::Path::to_path_buf)
                .unwrap_or_else(std::env::temp_dir);
            // The user's settings alone (no project folder is known here).
            engine.settings(&home.join(".maia")).llm.base_url
        }
    };
    ListProvidersResponse::new(vec![ProviderInfo::new(
        MAIN,
        vec![LlmProtocol::OpenAi],
        true,
        // Credentials in the URL are a secret like the headers.
        ProviderCurrentConfig::new(LlmProtocol::OpenAi, maia_llm::redact_userinfo(&base_url)),
    )])
}

/// `providers/set`.
pub fn set(engine: &Engine, req: SetProviderRequest) -> Result<SetProviderResponse, RpcError> {
    if req.provider_id.0.as_ref() != MAIN {
        return Err(unknown(&req.provider_id.0));
    }
    if req.api_type != LlmProtocol::OpenAi {
        return Err(invalid(
            "MAIA speaks only the OpenAI-compatible API: apiType must be \"openai\"",
        ));
    }
    let base_url = req.base_url.trim().trim_end_matches('/').to_owned();
    match url::Url::parse(&base_url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
        _ => {
            return Err(invalid(format!(
                "baseUrl must be an http:// or https:// URL, got `{}`",
                maia_llm::redact_userinfo(&base_url)
            )));
        }
    }
    let mut headers = Vec::with_capacity(req.headers.len());
    for (name, value) in req.headers {
        if !valid_header_name(&name) {
            return Err(invalid(format!("`{name}` is not a valid HTTP header name")));
        }
        // The value is never shown, even when it is refused.
        if !valid_header_value(&value) {
            return Err(invalid(format!(
                "the value of header `{name}` is not a valid HTTP header value"
            )));
        }
        headers.push((name, ApiKey::new(value)));
    }
    tracing::info!(
        base_url = %maia_llm::redact_userinfo(&base_url),
        headers = headers.len(),
        "model route set by the client"
    );
    engine.set_route(Some(LlmRoute { base_url, headers }));
    Ok(SetProviderResponse::new())
}

/// `providers/disable`: refused, the provider is required.
pub fn disable(req: &DisableProviderRequest) -> RpcError {
    if req.provider_id.0.as_ref() != MAIN {
        return unknown(&req.provider_id.0);
    }
    invalid(format!(
        "the provider `{MAIN}` is required: MAIA needs a model server to answer; set another route with providers/set instead"
    ))
}

/// Parse errors of `providers/*` params without the values (a header
/// value may be a key).
pub fn invalid_payload(method: &str, params: &Value) -> RpcError {
    let mut missing = Vec::new();
    if method != "providers/list" && params.get("providerId").is_none() {
        missing.push("providerId");
    }
    if method == "providers/set" {
        for key in ["apiType", "baseUrl"] {
            if params.get(key).is_none() {
                missing.push(key);
            }
        }
    }
    if missing.is_empty() {
        invalid(format!(
            "invalid params for {method}: a field has the wrong type (headers must map names to strings)"
        ))
    } else {
        invalid(format!(
            "invalid params for {method}: missing {}",
            missing.join(", ")
        ))
    }
}

fn valid_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn valid_header_value(value: &str) -> bool {
    value
        .bytes()
        .all(|b| b == b'\t' || (0x20..0x7f).contains(&b) || b >= 0x80)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_checks() {
        assert!(valid_header_name("Authorization"));
        assert!(valid_header_name("x-litellm-tag"));
        assert!(!valid_header_name("bad name"));
        assert!(!valid_header_name(""));
        assert!(valid_header_value("Bearer sk-1"));
        assert!(!valid_header_value("a\r\nX-Injected: 1"));
    }

    #[test]
    fn disable_is_refused_for_main() {
        let e = disable(&DisableProviderRequest::new(MAIN));
        assert_eq!(e.code, -32602);
        assert!(e.message.contains("required"), "{}", e.message);
        let e = disable(&DisableProviderRequest::new("other"));
        assert_eq!(e.code, -32002);
    }
}
