//! MAIA settings: `~/.maia/settings.json` then `<cwd>/.maia/settings.json`
//! (the second wins key by key; the parent folder is never read).
//!
//! Keys: `LiteLLM_URL`, `OpenAI_EndPoint`, `LiteLLM_Models`,
//! `LiteLLM_API_Key` (else the `LITELLM_API_KEY` environment variable),
//! `model`, `max_turn_requests`, `llm_max_retries`, `llm_retry_base_ms`,
//! `contextWindows` (`{"<model>": <tokens>}`), `smallModel` (the model that
//! writes compaction summaries; default: the session's), `promptCaching`
//! (`true`/`false`: mark requests for prompt caching; default: for
//! Anthropic-family models only, from `/model/info`), `toolResultShare`
//! (the share of the window one tool result may take, default 0.25), `visionModels`
//! (`["<model>", …]` or `{"<model>": true|false}`: whether a model is
//! shown images, over what the endpoint says), `mcpServers`
//! (`{"<name>": {"command", "args", "env", "disabledTools"}}` or
//! `{"<name>": {"url", "headers", "disabledTools"}}`; merged server by
//! server, the folder's entry winning), `prices` (`{"<model>":
//! {"input_cost_per_token", "output_cost_per_token", …}}`, see
//! [`crate::cost`]), `textToolCalls` (`false`, or `{"<model>": false}`:
//! whether a reply that is nothing but tool calls written as text is run as
//! those calls; default on for every model, see `text_tool_calls`),
//! `localModels` (`true`, `["<model>"]` or `{"<model>": true|false}`: models
//! served locally, offered the smaller tool set; default: models with a
//! context window of at most 16k tokens), `textEdits` (`true`, `false`,
//! or per model: edits as SEARCH/REPLACE text blocks instead of tools;
//! unset: only after a model's tool calls failed, see `session/text_mode`),
//! `webSearchTool` (the proxy's search tool `WebSearch` uses, or `false`;
//! unset: the first it lists, see [`crate::web_search`]), `mcpToolSearch`
//! (`"auto"`, `true`, `false` or a percentage of the window: when MCP tools
//! are offered by name only, see [`McpToolSearch`]), `titles` (`false`,
//! or `{"<model>": false}` for the model that writes them: whether a
//! thread is titled by a labelling call after its first answer; default
//! on, see [`crate::title`]).
//! A file that is not valid JSON is reported and ignored. The API key is
//! never logged.
//!
//! Here: reading the files and merging them into [`Settings`], key by key;
//! the sections with rules of their own have their modules: the sandbox
//! (`sandbox`) and the MCP servers (`mcp`).

mod mcp;
mod sandbox;

use mcp::mcp_servers;
pub use mcp::{DEFAULT_MCP_TOOL_SEARCH_PERCENT, McpToolSearch, merge_mcp_servers};
pub use sandbox::sandbox_policy;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use maia_llm::{ApiKey, LlmConfig};
use serde_json::{Map, Value};

/// Default share of the context window one tool result may take.
pub const DEFAULT_TOOL_RESULT_SHARE: f64 = 0.25;

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
    /// Prices per model over what the proxy says (`prices`, [`crate::cost`]).
    pub prices: HashMap<String, maia_llm::Prices>,
    /// The model that writes compaction summaries (`smallModel`).
    pub small_model: Option<String>,
    /// `promptCaching`: forced on or off; `None` decides by provider.
    pub prompt_caching: Option<bool>,
    /// The share of the context window one tool result may take
    /// (`toolResultShare`, 0 < share ≤ 1).
    pub tool_result_share: f64,
    /// Models known to accept images or not (`visionModels`).
    pub vision_models: HashMap<String, bool>,
    /// Models known to take a reasoning effort or not (`reasoningModels`),
    /// whatever `/model/info` says.
    pub reasoning_models: HashMap<String, bool>,
    /// Whether tool calls written as text are run, per model
    /// (`textToolCalls`; `"*"`: every model).
    pub text_tool_calls: HashMap<String, bool>,
    /// Whether a model edits with text blocks instead of tools, per model
    /// (`textEdits`; unset: only after its tool calls failed).
    pub text_edits: HashMap<String, bool>,
    /// Models marked local or not (`localModels`; `"*"`: every model).
    pub local_models: HashMap<String, bool>,
    /// Whether threads are titled by a labelling call, per title-writing
    /// model (`titles`; `"*"`: every model; unset: on).
    pub titles: HashMap<String, bool>,
    /// The proxy's search tool for web search (`webSearchTool`).
    pub web_search: crate::web_search::Choice,
    /// MCP servers configured in the settings (`mcpServers`).
    pub mcp_servers: Vec<maia_mcp::McpServerConfig>,
    /// `disabledTools` of entries that only name a server (to apply to a
    /// server of that name from the editor).
    pub mcp_disabled: HashMap<String, Vec<String>>,
    /// When the MCP tools are offered by name only (`mcpToolSearch`).
    pub mcp_tool_search: McpToolSearch,
    /// MCP servers whose `"network": false` keeps them off the network in
    /// the sandbox (the others may use it).
    pub mcp_offline: Vec<String>,
    /// MCP servers whose entry comes from the project's settings file (not
    /// the home folder's): they need the user's trust (`mcp_trust.rs`).
    pub mcp_project: Vec<String>,
    /// Spending limits (`budget`, [`crate::budget`]).
    pub budget: crate::budget::Limits,
    /// When the conversation is compacted by itself (`autoCompact`,
    /// [`crate::context_map`]).
    pub auto_compact: crate::context_map::AutoCompact,
    /// Models a request goes to, in order, when the chosen one is
    /// overloaded, rate limited or failing after its retries
    /// (`fallbackModels`).
    pub fallback_models: Vec<String>,
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

/// What one settings file held when it was read.
#[derive(Debug, Clone, PartialEq)]
pub enum FileContent {
    /// Valid JSON (not necessarily an object).
    Json(Value),
    /// The file exists but could not be read (the error).
    Unreadable(String),
    /// The file is not valid JSON (the parser's error).
    Invalid(String),
}

/// One settings file as read.
#[derive(Debug, Clone, PartialEq)]
pub struct SettingsFile {
    pub path: PathBuf,
    pub content: FileContent,
}

/// The settings files of a session ([`files`]), each read and parsed
/// once: the settings ([`from_files`]), the sandbox ([`sandbox_policy`])
/// and the permission rules (`permission::rules_from`) all take
/// their part from this one snapshot. A file that does not exist is left
/// out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SettingsFiles {
    home: Option<PathBuf>,
    files: Vec<SettingsFile>,
}

impl SettingsFiles {
    /// Reads the settings files of a session in `cwd`.
    pub fn read(home: Option<&Path>, cwd: &Path) -> Self {
        Self::read_with(home, cwd, &mut |path| std::fs::read_to_string(path))
    }

    /// Like [`SettingsFiles::read`], reading each file through `read`.
    pub fn read_with(
        home: Option<&Path>,
        cwd: &Path,
        read: &mut dyn FnMut(&Path) -> std::io::Result<String>,
    ) -> Self {
        let mut out = Vec::new();
        for path in files(home, cwd) {
            let content = match read(&path) {
                Ok(text) => match serde_json::from_str::<Value>(&text) {
                    Ok(value) => FileContent::Json(value),
                    Err(e) => FileContent::Invalid(e.to_string()),
                },
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => FileContent::Unreadable(e.to_string()),
            };
            out.push(SettingsFile { path, content });
        }
        SettingsFiles {
            home: home.map(Path::to_path_buf),
            files: out,
        }
    }

    /// The files that exist, most general first.
    pub fn files(&self) -> &[SettingsFile] {
        &self.files
    }

    /// The home folder the files were looked up in.
    pub fn home(&self) -> Option<&Path> {
        self.home.as_deref()
    }

    /// The user's own file (`~/.maia/settings.json`), if it exists.
    pub fn user(&self) -> Option<&SettingsFile> {
        let home = self.home.as_ref()?.join(".maia").join("settings.json");
        self.files.iter().find(|f| f.path == home)
    }
}

/// A route to the model server chosen by the front end for this process
/// (a client-managed gateway). It replaces `LiteLLM_URL`; its headers go
/// with every request, and the settings' API key is not sent (it belongs
/// to the user's own proxy, not to the client's gateway).
#[derive(Debug, Clone)]
pub struct LlmRoute {
    pub base_url: String,
    /// Header names and values; the values are secrets (never shown).
    pub headers: Vec<(String, ApiKey)>,
}

/// Loads the settings for a session in `cwd` with the process's options
/// (home, `LITELLM_API_KEY`, and the front end's route when one is set).
pub fn load_with(options: &crate::EngineOptions, cwd: &Path) -> Settings {
    from_files_with(
        options,
        &SettingsFiles::read(options.home.as_deref(), cwd),
        cwd,
    )
}

/// Like [`load_with`], from files already read.
pub fn from_files_with(
    options: &crate::EngineOptions,
    files: &SettingsFiles,
    cwd: &Path,
) -> Settings {
    let mut settings = from_files(files, cwd, options.env_api_key.clone());
    if let Some(route) = &options.route {
        settings.llm.base_url = route.base_url.clone();
        settings.llm.headers = route.headers.clone();
        settings.llm.api_key = None;
    }
    settings
}

/// Loads the settings for a session in `cwd`.
pub fn load(home: Option<&Path>, cwd: &Path, env_api_key: Option<String>) -> Settings {
    from_files(&SettingsFiles::read(home, cwd), cwd, env_api_key)
}

/// The settings of files already read (the folder's file winning key by
/// key; `mcpServers` merged server by server).
pub fn from_files(files: &SettingsFiles, cwd: &Path, env_api_key: Option<String>) -> Settings {
    let mut merged = Map::new();
    let mut mcp = Map::new();
    let mut mcp_project = Vec::new();
    let home_file = files
        .home
        .as_ref()
        .map(|h| h.join(".maia").join("settings.json"));
    let mut loaded = Vec::new();
    let mut warnings = Vec::new();
    for SettingsFile {
        path: file,
        content,
    } in files.files()
    {
        match content {
            FileContent::Unreadable(e) => {
                warnings.push(format!("cannot read {}: {e}", file.display()));
            }
            FileContent::Json(Value::Object(map)) => {
                let mut map = map.clone();
                // Servers merge one by one rather than as a whole object.
                match map.remove("mcpServers") {
                    Some(Value::Object(servers)) => {
                        let project = home_file.as_ref() != Some(file);
                        for name in servers.keys() {
                            mcp_project.retain(|n| n != name);
                            if project {
                                mcp_project.push(name.clone());
                            }
                        }
                        mcp.extend(servers)
                    }
                    Some(_) => warnings.push(format!(
                        "mcpServers in {} must be an object; ignored",
                        file.display()
                    )),
                    None => {}
                }
                merged.extend(map);
                loaded.push(file.clone());
            }
            FileContent::Json(_) => {
                warnings.push(format!("{} is not a JSON object; ignored", file.display()))
            }
            FileContent::Invalid(e) => warnings.push(format!(
                "{} is not valid JSON ({e}); ignored",
                file.display()
            )),
        }
    }
    let (mcp_servers, mcp_disabled) = mcp_servers(&mcp, cwd, &mut warnings);
    for w in &warnings {
        tracing::warn!("{w}");
    }
    let mut settings = from_map(&merged, env_api_key, loaded, warnings);
    settings.mcp_servers = mcp_servers;
    settings.mcp_disabled = mcp_disabled;
    settings.mcp_project = mcp_project;
    settings.mcp_offline = mcp
        .iter()
        .filter(|(_, entry)| entry.get("network").and_then(Value::as_bool) == Some(false))
        .map(|(name, _)| name.clone())
        .collect();
    settings
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
    let prompt_caching = match map.get("promptCaching") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => {
            warnings.push("promptCaching must be true or false; ignored".to_owned());
            None
        }
    };
    let tool_result_share = match map.get("toolResultShare") {
        None => DEFAULT_TOOL_RESULT_SHARE,
        Some(v) => match v.as_f64() {
            Some(share) if share > 0.0 && share <= 1.0 => share,
            _ => {
                warnings.push(
                    "toolResultShare must be a number above 0 and at most 1; 0.25 used".to_owned(),
                );
                DEFAULT_TOOL_RESULT_SHARE
            }
        },
    };
    let vision_models = model_flags(map, "visionModels", &mut warnings);
    let reasoning_models = model_flags(map, "reasoningModels", &mut warnings);
    let text_tool_calls = model_flags(map, "textToolCalls", &mut warnings);
    let local_models = model_flags(map, "localModels", &mut warnings);
    let text_edits = model_flags(map, "textEdits", &mut warnings);
    let titles = model_flags(map, "titles", &mut warnings);
    let prices = crate::cost::parse_setting(map.get("prices"), &mut warnings);
    let budget = crate::budget::parse_setting(map.get("budget"), &mut warnings);
    let auto_compact = crate::context_map::parse_setting(map.get("autoCompact"), &mut warnings);
    let fallback_models = model_list(map.get("fallbackModels"), "fallbackModels", &mut warnings);
    Settings {
        llm,
        model: text("model"),
        max_turn_requests,
        context_windows,
        prices,
        small_model: text("smallModel"),
        prompt_caching,
        tool_result_share,
        vision_models,
        reasoning_models,
        text_tool_calls,
        text_edits,
        local_models,
        titles,
        web_search: crate::web_search::parse_setting(map.get("webSearchTool"), &mut warnings),
        mcp_tool_search: mcp::mcp_tool_search(map.get("mcpToolSearch"), &mut warnings),
        mcp_servers: Vec::new(),
        mcp_disabled: HashMap::new(),
        mcp_offline: Vec::new(),
        mcp_project: Vec::new(),
        budget,
        auto_compact,
        fallback_models,
        loaded,
        warnings,
    }
}

/// A list of model names (`fallbackModels`); anything else is reported
/// and ignored.
pub fn model_list(value: Option<&Value>, key: &str, warnings: &mut Vec<String>) -> Vec<String> {
    match value {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(models)) => models
            .iter()
            .filter_map(|m| {
                let name = m.as_str().map(str::trim).filter(|n| !n.is_empty());
                if name.is_none() {
                    warnings.push(format!("{key} must list model names; an entry was ignored"));
                }
                name.map(str::to_owned)
            })
            .collect(),
        Some(_) => {
            warnings.push(format!("{key} must be a list of model names; ignored"));
            Vec::new()
        }
    }
}

/// A per-model flag of [`Settings`]: the model's own entry, else the one
/// for every model (`"*"`).
pub fn model_flag(flags: &HashMap<String, bool>, model: &str) -> Option<bool> {
    flags.get(model).or_else(|| flags.get("*")).copied()
}

/// A per-model flag setting (`visionModels`, `reasoningModels`, …): a list
/// of model names (each `true`), an object of `true`/`false`, or one
/// `true`/`false` for every model (kept as `"*"`).
fn model_flags(
    map: &Map<String, Value>,
    key: &str,
    warnings: &mut Vec<String>,
) -> HashMap<String, bool> {
    let mut flags = HashMap::new();
    match map.get(key) {
        None => {}
        Some(Value::Bool(all)) => {
            flags.insert("*".to_owned(), *all);
        }
        Some(Value::Array(models)) => {
            for model in models {
                match model.as_str() {
                    Some(name) => {
                        flags.insert(name.to_owned(), true);
                    }
                    None => {
                        warnings.push(format!("{key} must list model names; an entry was ignored"))
                    }
                }
            }
        }
        Some(Value::Object(models)) => {
            for (model, flag) in models {
                match flag.as_bool() {
                    Some(flag) => {
                        flags.insert(model.clone(), flag);
                    }
                    None => warnings.push(format!("{key}.{model} must be true or false; ignored")),
                }
            }
        }
        Some(_) => warnings.push(format!(
            "{key} must be a list of models or an object of true/false; ignored"
        )),
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_servers_may_be_kept_off_the_network() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".maia")).unwrap();
        std::fs::write(
            home.path().join(".maia/settings.json"),
            r#"{"mcpServers":{"local":{"command":"x","network":false},"web":{"command":"y"}}}"#,
        )
        .unwrap();
        let settings = load(Some(home.path()), Path::new("/p"), None);
        assert_eq!(settings.mcp_offline, vec!["local".to_owned()]);
    }

    #[test]
    fn sandbox_read_lists_and_home_reach_the_policy() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".maia")).unwrap();
        std::fs::write(
            home.path().join(".maia/settings.json"),
            r#"{"sandbox":{"mode":"workspace-write","denyRead":["~/notes"],"allowedDomains":["crates.io","*.npmjs.org"]},"sandbox.allowRead":["~/.config/gh"],"sandbox.writable":["/w"],"sandbox.network":true}"#,
        )
        .unwrap();
        let (policy, warnings) = sandbox_policy(
            &SettingsFiles::read(Some(home.path()), Path::new("/p")),
            Path::new("/p"),
            "s1",
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(policy.home.as_deref(), Some(home.path()));
        assert_eq!(policy.deny_read, vec![home.path().join("notes")]);
        assert_eq!(policy.allow_read, vec![home.path().join(".config/gh")]);
        assert_eq!(policy.writable, vec![PathBuf::from("/w")]);
        assert!(policy.network);
        assert_eq!(policy.allowed_domains, ["crates.io", "*.npmjs.org"]);
        let hidden = policy.hidden_paths();
        assert!(hidden.contains(&home.path().join(".ssh")));
        assert!(!hidden.contains(&home.path().join(".config/gh")));
    }

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
    fn mcp_servers_merge_by_name_and_editor_wins() {
        use maia_mcp::{McpServerConfig, McpTransport};
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".maia")).unwrap();
        std::fs::create_dir_all(cwd.path().join(".maia")).unwrap();
        std::fs::write(
            home.path().join(".maia/settings.json"),
            r#"{"mcpServers":{"a":{"command":"a-home"},"b":{"url":"http://b/mcp","headers":{"X":"1"}}}}"#,
        )
        .unwrap();
        std::fs::write(
            cwd.path().join(".maia/settings.json"),
            r#"{"mcpServers":{"a":{"command":"a-cwd","args":["-v",1],"env":{"K":"V"},"disabledTools":["drop"]},"ed":{"disabledTools":["x"]},"bad":{}}}"#,
        )
        .unwrap();
        let s = load(Some(home.path()), cwd.path(), None);
        assert_eq!(s.mcp_servers.len(), 2, "{:?}", s.mcp_servers);
        // The project's entry replaced the home's `a`: `a` is the project's.
        let mut project = s.mcp_project.clone();
        project.sort();
        assert_eq!(project, ["a", "bad", "ed"]);
        // In the home folder itself, the one file is the user's.
        let at_home = load(Some(home.path()), home.path(), None);
        assert!(at_home.mcp_project.is_empty(), "{:?}", at_home.mcp_project);
        let a = &s.mcp_servers[0];
        assert_eq!(
            a.transport,
            McpTransport::Stdio {
                command: "a-cwd".into(),
                args: vec!["-v".into(), "1".into()],
                env: vec![("K".into(), "V".into())],
                cwd: Some(cwd.path().to_path_buf()),
            }
        );
        assert_eq!(a.disabled_tools, vec!["drop".to_owned()]);
        assert!(
            matches!(&s.mcp_servers[1].transport, McpTransport::Http { url, .. } if url == "http://b/mcp")
        );
        assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);

        let editor = |name: &str| McpServerConfig {
            name: name.into(),
            transport: McpTransport::Http {
                url: "http://editor/mcp".into(),
                headers: Vec::new(),
            },
            disabled_tools: Vec::new(),
        };
        let merged = merge_mcp_servers(vec![editor("b"), editor("ed")], &s);
        let names: Vec<&str> = merged.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["b", "ed", "a"]);
        assert!(
            matches!(&merged[0].transport, McpTransport::Http { url, .. } if url == "http://editor/mcp")
        );
        assert_eq!(merged[1].disabled_tools, vec!["x".to_owned()]);
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

    #[test]
    fn context_settings() {
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let write = |text: &str| {
            std::fs::create_dir_all(cwd.path().join(".maia")).unwrap();
            std::fs::write(cwd.path().join(".maia/settings.json"), text).unwrap();
        };
        write(r#"{"smallModel":"mini","promptCaching":true,"toolResultShare":0.5}"#);
        let s = load(Some(home.path()), cwd.path(), None);
        assert_eq!(s.small_model.as_deref(), Some("mini"));
        assert_eq!(s.prompt_caching, Some(true));
        assert!((s.tool_result_share - 0.5).abs() < 1e-9);
        write(r#"{"promptCaching":"yes","toolResultShare":3}"#);
        let s = load(Some(home.path()), cwd.path(), None);
        assert_eq!(s.prompt_caching, None);
        assert!((s.tool_result_share - DEFAULT_TOOL_RESULT_SHARE).abs() < 1e-9);
        assert_eq!(s.warnings.len(), 2, "{:?}", s.warnings);
    }
}
