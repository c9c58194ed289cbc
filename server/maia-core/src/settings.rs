//! MAIA settings: `~/.maia/settings.json` then `<cwd>/.maia/settings.json`
//! (the second wins key by key; the parent folder is never read).
//!
//! Keys: `LiteLLM_URL`, `OpenAI_EndPoint`, `LiteLLM_Models`,
//! `LiteLLM_API_Key` (else the `LITELLM_API_KEY` environment variable),
//! `model`, `max_turn_requests`, `llm_max_retries`, `llm_retry_base_ms`,
//! `contextWindows` (`{"<model>": <tokens>}`).
//! A file that is not valid JSON is reported and ignored. The API key is
//! never logged.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use maia_llm::{ApiKey, LlmConfig};
use serde_json::{Map, Value};

/// Default cap on model requests in one turn.
pub const DEFAULT_MAX_TURN_REQUESTS: u32 = 50;

/// Settings in force for one session.
#[derive(Debug, Clone)]
pub struct Settings {
    pub llm: LlmConfig,
    pub model: Option<String>,
    pub max_turn_requests: u32,
    /// Manual context windows per model (`contextWindows`).
    pub context_windows: HashMap<String, u64>,
    /// Files that were read.
    pub loaded: Vec<PathBuf>,
    /// Problems found (unreadable files, bad values).
    pub warnings: Vec<String>,
}

/// The files read, most general first.
pub fn files(home: Option<&Path>, cwd: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(home) = home {
        out.push(home.join(".maia").join("settings.json"));
    }
    let local = cwd.join(".maia").join("settings.json");
    if !out.contains(&local) {
        out.push(local);
    }
    out
}

/// Loads the settings for a session in `cwd`.
pub fn load(home: Option<&Path>, cwd: &Path, env_api_key: Option<String>) -> Settings {
    let mut merged = Map::new();
    let mut loaded = Vec::new();
    let mut warnings = Vec::new();
    for file in files(home, cwd) {
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                warnings.push(format!("cannot read {}: {e}", file.display()));
                continue;
            }
        };
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(map)) => {
                merged.extend(map);
                loaded.push(file);
            }
            Ok(_) => warnings.push(format!("{} is not a JSON object; ignored", file.display())),
            Err(e) => warnings.push(format!(
                "{} is not valid JSON ({e}); ignored",
                file.display()
            )),
        }
    }
    for w in &warnings {
        tracing::warn!("{w}");
    }
    from_map(&merged, env_api_key, loaded, warnings)
}

fn from_map(
    map: &Map<String, Value>,
    env_api_key: Option<String>,
    loaded: Vec<PathBuf>,
    mut warnings: Vec<String>,
) -> Settings {
    let text = |key: &str| {
        map.get(key)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let mut number = |key: &str| match map.get(key) {
        None => None,
        Some(v) => match v.as_u64() {
            Some(n) => Some(n),
            None => {
                warnings.push(format!("setting {key} must be a whole number; ignored"));
                None
            }
        },
    };
    let mut llm = LlmConfig::default();
    if let Some(url) = text("LiteLLM_URL") {
        llm.base_url = url;
    }
    if let Some(endpoint) = text("OpenAI_EndPoint") {
        llm.chat_endpoint = endpoint;
    }
    if let Some(endpoint) = text("LiteLLM_Models") {
        llm.models_endpoint = endpoint;
    }
    llm.api_key = text("LiteLLM_API_Key")
        .or(env_api_key.filter(|k| !k.trim().is_empty()))
        .map(ApiKey::new);
    if let Some(n) = number("llm_max_retries") {
        llm.max_retries = u32::try_from(n).unwrap_or(u32::MAX).min(10);
    }
    if let Some(ms) = number("llm_retry_base_ms") {
        llm.retry_base = Duration::from_millis(ms);
    }
    let max_turn_requests = number("max_turn_requests")
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX).max(1))
        .unwrap_or(DEFAULT_MAX_TURN_REQUESTS);
    let mut context_windows = HashMap::new();
    match map.get("contextWindows") {
        None => {}
        Some(Value::Object(windows)) => {
            for (model, tokens) in windows {
                match tokens
                    .as_u64()
                    .or_else(|| tokens.as_f64().map(|f| f as u64))
                {
                    Some(tokens) if tokens > 0 => {
                        context_windows.insert(model.clone(), tokens);
                    }
                    _ => warnings.push(format!(
                        "contextWindows.{model} must be a positive number of tokens; ignored"
                    )),
                }
            }
        }
        Some(_) => warnings.push("contextWindows must be an object; ignored".to_owned()),
    }
    Settings {
        llm,
        model: text("model"),
        max_turn_requests,
        context_windows,
        loaded,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cwd_settings_win_key_by_key_and_bad_json_is_ignored() {
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".maia")).unwrap();
        std::fs::create_dir_all(cwd.path().join(".maia")).unwrap();
        std::fs::write(
            home.path().join(".maia/settings.json"),
            r#"{"LiteLLM_URL":"http://home:4000","model":"a","LiteLLM_API_Key":"sk-home"}"#,
        )
        .unwrap();
        std::fs::write(
            cwd.path().join(".maia/settings.json"),
            r#"{"model":"b","max_turn_requests":3}"#,
        )
        .unwrap();
        let s = load(Some(home.path()), cwd.path(), None);
        assert_eq!(s.llm.base_url, "http://home:4000");
        assert_eq!(s.model.as_deref(), Some("b"));
        assert_eq!(s.max_turn_requests, 3);
        assert_eq!(s.llm.api_key.as_ref().map(ApiKey::expose), Some("sk-home"));
        assert_eq!(s.loaded.len(), 2);

        std::fs::write(cwd.path().join(".maia/settings.json"), "{oops").unwrap();
        let s = load(Some(home.path()), cwd.path(), Some("sk-env".into()));
        assert_eq!(s.model.as_deref(), Some("a"));
        assert_eq!(s.warnings.len(), 1);
        assert!(!format!("{s:?}").contains("sk-home"));
    }

    #[test]
    fn defaults_and_env_key() {
        let cwd = tempfile::tempdir().unwrap();
        let s = load(None, cwd.path(), Some("sk-env".into()));
        assert_eq!(s.llm.base_url, "http://localhost:4000");
        assert_eq!(s.llm.chat_endpoint, "/v1/chat/completions");
        assert_eq!(s.llm.models_endpoint, "/v1/models");
        assert_eq!(s.llm.api_key.as_ref().map(ApiKey::expose), Some("sk-env"));
        assert_eq!(s.max_turn_requests, DEFAULT_MAX_TURN_REQUESTS);
    }
}
