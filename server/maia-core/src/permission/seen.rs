//! "Seen before": a project's `.maia/settings.json` may carry broad allow
//! rules (a cloned repository); the user is told about each allow rule of a
//! project file once.
//!
//! Being told is not enough: such a rule takes effect only once the user
//! confirms it (the first call it would allow is asked, and "Always allow"
//! confirms it); the user's own "always" answers are confirmed at once.
//!
//! Storage: `~/.maia/seen-rules.json`,
//! `{"version": 1, "files": {"<absolute settings path>": ["Bash(ls *)", …]},
//! "confirmed": {"<absolute settings path>": […]}}` (the settings path is
//! canonicalised when it exists). A rule counts as seen once reported;
//! editing the rule text makes it new again (and unconfirmed).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::LoadedRules;

/// The file, relative to the home folder.
pub const SEEN_FILE: &str = ".maia/seen-rules.json";

/// The allow rules of `<cwd>/.maia/settings.json` (as loaded in `rules`)
/// that the user has not been told about yet; they are recorded as seen in
/// `~/.maia/seen-rules.json`, so the next call returns only new ones.
/// Without a home folder nothing can be recorded and every allow rule of the
/// project file is returned. The home's own settings file is never reported.
pub fn unseen_allow_rules(home: Option<&Path>, cwd: &Path, rules: &LoadedRules) -> Vec<String> {
    let local = super::persist::local_settings_file(cwd);
    if home.is_some_and(|h| h.join(".maia").join("settings.json") == local) {
        return Vec::new();
    }
    let Some(set) = rules.file(&local) else {
        return Vec::new();
    };
    let allow: Vec<String> = set.allow.iter().map(ToString::to_string).collect();
    if allow.is_empty() {
        return Vec::new();
    }
    let Some(home) = home else {
        return allow;
    };
    let store = home.join(SEEN_FILE);
    let key = store_key(&local);
    let mut files = read_store(&store);
    let seen = files.entry(key).or_default();
    let unseen: Vec<String> = allow.into_iter().filter(|r| !seen.contains(r)).collect();
    if unseen.is_empty() {
        return unseen;
    }
    seen.extend(unseen.iter().cloned());
    if let Err(e) = write_store(&store, &files) {
        tracing::warn!(
            "cannot record seen permission rules in {}: {e}",
            store.display()
        );
    }
    unseen
}

/// The allow rules of `<cwd>/.maia/settings.json` the user has not
/// confirmed (see [`confirm_rule`]); nothing is recorded. The home's own
/// settings file needs no confirmation.
pub fn unconfirmed_allow_rules(
    home: Option<&Path>,
    cwd: &Path,
    rules: &LoadedRules,
) -> Vec<super::Rule> {
    let local = super::persist::local_settings_file(cwd);
    if home.is_some_and(|h| h.join(".maia").join("settings.json") == local) {
        return Vec::new();
    }
    let Some(set) = rules.file(&local) else {
        return Vec::new();
    };
    let confirmed = home
        .map(|h| read_section(&h.join(SEEN_FILE), "confirmed"))
        .unwrap_or_default()
        .remove(&store_key(&local))
        .unwrap_or_default();
    set.allow
        .iter()
        .filter(|r| !confirmed.contains(&r.to_string()))
        .cloned()
        .collect()
}

/// Records that the user confirmed the project rule `rule` of `cwd`.
pub fn confirm_rule(home: Option<&Path>, cwd: &Path, rule: &str) {
    let Some(home) = home else {
        return;
    };
    let store = home.join(SEEN_FILE);
    let key = store_key(&super::persist::local_settings_file(cwd));
    let files = read_section(&store, "files");
    let mut confirmed = read_section(&store, "confirmed");
    let list = confirmed.entry(key).or_default();
    if list.iter().any(|r| r == rule) {
        return;
    }
    list.push(rule.to_owned());
    if let Err(e) = write_sections(&store, &files, &confirmed) {
        tracing::warn!("cannot record a confirmed rule in {}: {e}", store.display());
    }
}

/// The custom tools of `cwd` (name and fingerprint) the user has not
/// confirmed since they appeared or last changed.
pub fn unconfirmed_tools(
    home: Option<&Path>,
    cwd: &Path,
    tools: &[(String, String)],
) -> Vec<String> {
    let confirmed = home
        .map(|h| read_section(&h.join(SEEN_FILE), "tools"))
        .unwrap_or_default()
        .remove(&store_key(&super::persist::local_settings_file(cwd)))
        .unwrap_or_default();
    tools
        .iter()
        .filter(|(name, print)| !confirmed.contains(&format!("{name}#{print}")))
        .map(|(name, _)| name.clone())
        .collect()
}

/// Records that the user confirmed the custom tool `name` as it is now.
pub fn confirm_tool(home: Option<&Path>, cwd: &Path, name: &str, fingerprint: &str) {
    let Some(home) = home else {
        return;
    };
    let store = home.join(SEEN_FILE);
    let key = store_key(&super::persist::local_settings_file(cwd));
    let mut tools = read_section(&store, "tools");
    let list = tools.entry(key).or_default();
    list.retain(|e| e.split('#').next() != Some(name));
    list.push(format!("{name}#{fingerprint}"));
    let files = read_section(&store, "files");
    let confirmed = read_section(&store, "confirmed");
    if let Err(e) = write_all(&store, &files, &confirmed, &tools) {
        tracing::warn!("cannot record a confirmed tool in {}: {e}", store.display());
    }
}

/// The project MCP servers of `cwd` the user trusts, as
/// `name#fingerprint` (`mcp_trust.rs`).
pub fn trusted_mcp_servers(home: Option<&Path>, cwd: &Path) -> Vec<String> {
    home.map(|h| read_section(&h.join(SEEN_FILE), MCP_SECTION))
        .unwrap_or_default()
        .remove(&store_key(&super::persist::local_settings_file(cwd)))
        .unwrap_or_default()
}

/// Records that the user trusts the project MCP server `name` with this
/// command line (`fingerprint`); an older trust of that name is replaced.
pub fn trust_mcp_server(
    home: &Path,
    cwd: &Path,
    name: &str,
    fingerprint: &str,
) -> std::io::Result<()> {
    let store = home.join(SEEN_FILE);
    let key = store_key(&super::persist::local_settings_file(cwd));
    let mut servers = read_section(&store, MCP_SECTION);
    let list = servers.entry(key).or_default();
    list.retain(|e| e.split('#').next() != Some(name));
    list.push(format!("{name}#{fingerprint}"));
    write_full(
        &store,
        [
            ("files", &read_section(&store, "files")),
            ("confirmed", &read_section(&store, "confirmed")),
            ("tools", &read_section(&store, "tools")),
            (MCP_SECTION, &servers),
        ],
    )
}

/// The section of the trusted project MCP servers.
const MCP_SECTION: &str = "mcpServers";

fn store_key(local: &Path) -> String {
    std::fs::canonicalize(local)
        .unwrap_or_else(|_| local.to_path_buf())
        .to_string_lossy()
        .into_owned()
}

fn read_store(store: &Path) -> BTreeMap<String, Vec<String>> {
    read_section(store, "files")
}

fn read_section(store: &Path, section: &str) -> BTreeMap<String, Vec<String>> {
    let Ok(text) = std::fs::read_to_string(store) else {
        return BTreeMap::new();
    };
    let Ok(value) = serde_json::from_str::<Value>(&text) else {
        tracing::warn!("{} is not valid JSON; starting afresh", store.display());
        return BTreeMap::new();
    };
    value
        .get(section)
        .and_then(Value::as_object)
        .map(|files| {
            files
                .iter()
                .map(|(k, v)| {
                    let rules = v
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(|r| r.as_str().map(str::to_owned))
                                .collect()
                        })
                        .unwrap_or_default();
                    (k.clone(), rules)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn write_store(store: &Path, files: &BTreeMap<String, Vec<String>>) -> std::io::Result<()> {
    write_sections(store, files, &read_section(store, "confirmed"))
}

fn write_sections(
    store: &Path,
    files: &BTreeMap<String, Vec<String>>,
    confirmed: &BTreeMap<String, Vec<String>>,
) -> std::io::Result<()> {
    write_all(store, files, confirmed, &read_section(store, "tools"))
}

fn write_all(
    store: &Path,
    files: &BTreeMap<String, Vec<String>>,
    confirmed: &BTreeMap<String, Vec<String>>,
    tools: &BTreeMap<String, Vec<String>>,
) -> std::io::Result<()> {
    write_full(
        store,
        [
            ("files", files),
            ("confirmed", confirmed),
            ("tools", tools),
            (MCP_SECTION, &read_section(store, MCP_SECTION)),
        ],
    )
}

fn write_full(
    store: &Path,
    sections: [(&str, &BTreeMap<String, Vec<String>>); 4],
) -> std::io::Result<()> {
    if let Some(dir) = store.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut value = json!({ "version": 1 });
    for (name, section) in sections {
        value[name] = json!(section);
    }
    let text = serde_json::to_string_pretty(&value).unwrap_or_default();
    let tmp: PathBuf = store.with_extension(format!("json.tmp{}", std::process::id()));
    std::fs::write(&tmp, text + "\n")?;
    std::fs::rename(&tmp, store)
}
