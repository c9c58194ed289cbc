//! Asks the LiteLLM proxy whether MAIA can work with it (its model list,
//! then `/model/info`) and turns every failure into the cause a user can
//! fix: nothing listening, TLS, an unknown host, a refused key, a wrong
//! path, an empty model list. Shared by `maia login`, `maia doctor` and
//! ACP authentication and `maia exec` ([`check_proxy`]). Nothing here prints
//! the key.

use std::collections::HashMap;
use std::time::Duration;

use maia_core::window::WindowSource;
use maia_llm::{ConnectFailure, LlmClient, LlmConfig, LlmError, ModelInfo};

/// How long one probe request may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a working proxy said.
#[derive(Debug, Clone)]
pub struct Probe {
    pub models: Vec<ModelInfo>,
    /// `/model/info`'s windows (`None`: the route failed; empty when the
    /// server has no such route).
    pub model_info: Option<HashMap<String, u64>>,
}

impl Probe {
    /// `model`'s context window and where it came from, in MAIA's order
    /// (the manual setting, `/model/info`, the model list), without asking
    /// the model. `None`: a session would ask the model itself.
    pub fn window(
        &self,
        model: &str,
        manual: &HashMap<String, u64>,
    ) -> Option<(u64, WindowSource)> {
        if let Some(&tokens) = manual.get(model).filter(|&&t| t > 0) {
            return Some((tokens, WindowSource::Manual));
        }
        if let Some(&tokens) = self.model_info.as_ref().and_then(|m| m.get(model)) {
            return Some((tokens, WindowSource::ModelInfo));
        }
        self.models
            .iter()
            .find(|m| m.id == model)
            .and_then(|m| m.max_input_tokens)
            .map(|tokens| (tokens, WindowSource::ModelList))
    }

    /// The ids of the models, in the proxy's order.
    pub fn ids(&self) -> Vec<String> {
        self.models.iter().map(|m| m.id.clone()).collect()
    }
}

/// Where a window came from, for people.
pub fn source_label(source: WindowSource) -> &'static str {
    match source {
        WindowSource::Manual => "contextWindows setting",
        WindowSource::ModelInfo => "/model/info",
        WindowSource::ModelList => "model list",
        WindowSource::AskedModel => "the model's own answer (windows cache)",
    }
}

/// `1047576` as `1,047,576`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Why MAIA cannot use the proxy. `Display` names the cause; [`Problem::fix`]
/// says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("`{url}` is not a usable URL ({message})")]
    BadUrl { url: String, message: String },
    #[error("nothing answers at {url} (connection refused)")]
    Refused { url: String },
    #[error("the host of {url} cannot be found ({message})")]
    UnknownHost { url: String, message: String },
    #[error("the TLS connection to {url} failed ({message})")]
    Tls { url: String, message: String },
    #[error("{url} did not answer in time ({message})")]
    Timeout { url: String, message: String },
    #[error("cannot connect to {url} ({message})")]
    Connection { url: String, message: String },
    #[error("the proxy refused the API key (HTTP {status}: {message})")]
    KeyRefused {
        status: u16,
        message: String,
        has_key: bool,
    },
    #[error("{url} has no model list (HTTP {status})")]
    WrongPath { url: String, status: u16 },
    #[error("{url} does not answer like an OpenAI-compatible proxy ({message})")]
    NotAProxy { url: String, message: String },
    #[error("the proxy at {url} failed (HTTP {status}: {message})")]
    ServerError {
        url: String,
        status: u16,
        message: String,
    },
    #[error("the proxy lists no models")]
    NoModels,
}

impl Problem {
    /// What the user can do about it, in one sentence.
    pub fn fix(&self) -> String {
        match self {
            Problem::BadUrl { .. } => {
                "give the proxy's root URL, e.g. http://localhost:4000 (`LiteLLM_URL` in ~/.maia/settings.json)".to_owned()
            }
            Problem::Refused { .. } => {
                "start the LiteLLM proxy (`litellm --config config.yaml`), or correct the URL and port (`LiteLLM_URL`)".to_owned()
            }
            Problem::UnknownHost { .. } => {
                "check the host name in the URL (`LiteLLM_URL`) and your network or VPN".to_owned()
            }
            Problem::Tls { url, .. } => {
                let plain = url.strip_prefix("https://").map(|rest| format!("http://{rest}"));
                match plain {
                    Some(plain) => format!(
                        "if the proxy serves plain HTTP use {plain}; otherwise its certificate must be valid for this host and trusted by the system"
                    ),
                    None => "check the proxy's TLS certificate".to_owned(),
                }
            }
            Problem::Timeout { .. } => {
                "check that the proxy is running and not overloaded, and that no firewall drops the connection".to_owned()
            }
            Problem::Connection { .. } => {
                "check the URL (`LiteLLM_URL`) and that the proxy is running".to_owned()
            }
            Problem::KeyRefused { has_key: true, .. } => {
                "use a valid LiteLLM key (a virtual key or the master key): run `maia login`, or set `LiteLLM_API_Key` in ~/.maia/settings.json or the LITELLM_API_KEY variable".to_owned()
            }
            Problem::KeyRefused { has_key: false, .. } => {
                "this proxy needs a key: run `maia login`, or set `LiteLLM_API_Key` in ~/.maia/settings.json or the LITELLM_API_KEY variable".to_owned()
            }
            Problem::WrongPath { .. } => {
                "the URL must be the proxy's root (e.g. http://localhost:4000, without /v1 or /chat/completions); a proxy with other routes sets `LiteLLM_Models` and `OpenAI_EndPoint`".to_owned()
            }
            Problem::NotAProxy { .. } => {
                "check that the URL points at the LiteLLM proxy and not at another web server".to_owned()
            }
            Problem::ServerError { .. } => "look at the proxy's own log".to_owned(),
            Problem::NoModels => {
                "add models to the proxy's `model_list`, or give this key access to some".to_owned()
            }
        }
    }

    /// [`Problem::fix`] for someone answering `maia login`'s questions.
    pub fn fix_in_login(&self) -> String {
        match self {
            Problem::KeyRefused { has_key: true, .. } => {
                "type a valid key (a LiteLLM virtual key, or the master key)".to_owned()
            }
            Problem::KeyRefused { has_key: false, .. } => {
                "this proxy needs a key: type it at the key question (or export LITELLM_API_KEY first)".to_owned()
            }
            other => other.fix(),
        }
    }

    /// The proxy cannot be reached or refuses the key: what ACP reports as
    /// `auth_required`, since logging in again fixes it. A missing model
    /// list is not: with a `model` set, prompts can still be answered.
    pub fn needs_login(&self) -> bool {
        matches!(
            self,
            Problem::BadUrl { .. }
                | Problem::Refused { .. }
                | Problem::UnknownHost { .. }
                | Problem::Tls { .. }
                | Problem::Connection { .. }
                | Problem::KeyRefused { .. }
        )
    }

    /// Reads a client error from asking the model list of `llm`.
    pub fn from_error(error: &LlmError, llm: &LlmConfig) -> Problem {
        let has_key = llm.api_key.is_some()
            || llm
                .headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("authorization"));
        Problem::classify(
            error,
            &maia_llm::redact_userinfo(&llm.join(&llm.models_endpoint)),
            &maia_llm::redact_userinfo(&llm.base_url),
            has_key,
        )
    }

    /// Reads a client error. `url` is the URL that was asked, `base` the
    /// configured root.
    fn classify(error: &LlmError, url: &str, base: &str, has_key: bool) -> Problem {
        let url = url.to_owned();
        match error {
            LlmError::Authentication { status, message } => Problem::KeyRefused {
                status: *status,
                message: short(message),
                has_key,
            },
            LlmError::BadRequest { status, .. } if matches!(status, 404 | 405) => {
                Problem::WrongPath {
                    url,
                    status: *status,
                }
            }
            LlmError::BadRequest { status, message } | LlmError::Server { status, message } => {
                Problem::ServerError {
                    url,
                    status: *status,
                    message: short(message),
                }
            }
            LlmError::InvalidResponse { message } | LlmError::StreamInterrupted { message } => {
                Problem::NotAProxy {
                    url,
                    message: short(message),
                }
            }
            LlmError::RateLimited { message, .. } => Problem::ServerError {
                url,
                status: 429,
                message: short(message),
            },
            LlmError::ContextWindowExceeded { message } => Problem::ServerError {
                url,
                status: 400,
                message: short(message),
            },
            LlmError::Connection { kind, message } => connection_problem(kind, url, base, message),
            LlmError::Cancelled => Problem::Timeout {
                url,
                message: "cancelled".to_owned(),
            },
        }
    }
}

fn short(message: &str) -> String {
    const MAX: usize = 200;
    match message.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &message[..i]),
        None => message.to_owned(),
    }
}

/// The problem behind a connection failure of kind `kind` (typed by
/// `maia-llm`; the message is only shown).
fn connection_problem(kind: &ConnectFailure, url: String, base: &str, message: &str) -> Problem {
    let message = short(message);
    match kind {
        ConnectFailure::BadUrl { reason } => Problem::BadUrl {
            url: base.to_owned(),
            message: short(reason),
        },
        ConnectFailure::Refused => Problem::Refused { url },
        ConnectFailure::Dns => Problem::UnknownHost { url, message },
        ConnectFailure::Timeout => Problem::Timeout { url, message },
        ConnectFailure::Tls => Problem::Tls { url, message },
        ConnectFailure::Other => Problem::Connection { url, message },
    }
}

/// Asks the proxy of `config` for its models, then for `/model/info`.
/// An empty model list is [`Problem::NoModels`].
pub async fn probe(config: &LlmConfig) -> Result<Probe, Problem> {
    let mut config = config.clone();
    config.request_timeout = PROBE_TIMEOUT;
    config.max_retries = 0;
    let client = LlmClient::new(config.clone()).map_err(|e| Problem::from_error(&e, &config))?;
    let models = client
        .list_models()
        .await
        .map_err(|e| Problem::from_error(&e, &config))?;
    if models.is_empty() {
        return Err(Problem::NoModels);
    }
    let model_info = client.model_info_windows().await.ok();
    Ok(Probe { models, model_info })
}

/// Asks the proxy a session in `cwd` would use for its models. `Ok` with
/// the list, or `Err` with the problem when the proxy cannot be reached
/// or refuses the key; other failures (a slow proxy, a 5xx) are not a
/// login matter and give an empty list. Once the proxy has answered for
/// these settings, its answer is reused without a request (the engine's
/// model catalogue, dropped when the key is refused); `fresh` asks again
/// whatever is kept (`authenticate`).
pub async fn check_proxy(
    engine: &maia_core::Engine,
    cwd: &std::path::Path,
    wait: std::time::Duration,
    fresh: bool,
) -> Result<Vec<String>, Problem> {
    let llm = engine.settings(cwd).llm;
    match tokio::time::timeout(wait, engine.probe_models(&llm, fresh)).await {
        Ok(Ok(models)) => Ok(models),
        Ok(Err(e)) => {
            let problem = Problem::from_error(&e, &llm);
            if problem.needs_login() {
                tracing::warn!("the proxy cannot be used: {problem}");
                Err(problem)
            } else {
                tracing::warn!("cannot list the models: {e}");
                Ok(Vec::new())
            }
        }
        Err(_) => {
            tracing::warn!("the model list did not arrive in time");
            Ok(Vec::new())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connection(kind: ConnectFailure, message: &str) -> LlmError {
        LlmError::Connection {
            kind,
            message: message.to_owned(),
        }
    }

    #[test]
    fn connection_failures_are_classified_by_kind() {
        let url = "http://127.0.0.1:9/v1/models";
        let base = "http://127.0.0.1:9";
        let classify =
            |kind, message| Problem::classify(&connection(kind, message), url, base, false);
        assert_eq!(
            classify(ConnectFailure::Refused, "whatever the text"),
            Problem::Refused { url: url.into() }
        );
        assert_eq!(
            classify(ConnectFailure::Dns, "lookup failed"),
            Problem::UnknownHost {
                url: url.into(),
                message: "lookup failed".into()
            }
        );
        assert!(matches!(
            classify(ConnectFailure::Timeout, "no response within 10 s"),
            Problem::Timeout { .. }
        ));
        // The kind decides, not the words: a TLS failure that mentions no TLS.
        assert!(matches!(
            classify(ConnectFailure::Tls, "received corrupt message"),
            Problem::Tls { .. }
        ));
        assert!(matches!(
            classify(ConnectFailure::Other, "connection refused, tls, dns error"),
            Problem::Connection { .. }
        ));
        let bad = classify(
            ConnectFailure::BadUrl {
                reason: "relative URL without a base".into(),
            },
            "invalid base URL \"x\": relative URL without a base",
        );
        assert_eq!(
            bad,
            Problem::BadUrl {
                url: base.into(),
                message: "relative URL without a base".into()
            }
        );
        assert_eq!(
            bad.to_string(),
            "`http://127.0.0.1:9` is not a usable URL (relative URL without a base)"
        );
        for kind in [
            ConnectFailure::Refused,
            ConnectFailure::Dns,
            ConnectFailure::Tls,
            ConnectFailure::Other,
        ] {
            assert!(classify(kind, "m").needs_login());
        }
        assert!(!classify(ConnectFailure::Timeout, "m").needs_login());
    }

    #[test]
    fn statuses_map_to_fixable_causes() {
        let url = "http://h/v1/models";
        let auth = LlmError::Authentication {
            status: 401,
            message: "bad key".into(),
        };
        let p = Problem::classify(&auth, url, "http://h", true);
        assert!(p.needs_login());
        assert!(p.fix().contains("LITELLM_API_KEY"));
        let missing = LlmError::BadRequest {
            status: 404,
            message: "not found".into(),
        };
        assert!(matches!(
            Problem::classify(&missing, url, "http://h", false),
            Problem::WrongPath { status: 404, .. }
        ));
        assert!(!Problem::NoModels.needs_login());
        assert!(
            Problem::Tls {
                url: "https://h:4000".into(),
                message: String::new()
            }
            .fix()
            .contains("http://h:4000")
        );
    }
}
