//! Which language servers a session may run: the `lsp` setting (Crush's
//! shape: `command`, `args`, `env`, `fileTypes`, `rootMarkers`,
//! `initOptions`, plus `disabled`) over the defaults found on `PATH`, and
//! which one serves a file (its extension, then the nearest folder with a
//! root marker, inside the workspace).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

/// How long an edit waits for diagnostics by default.
pub const DEFAULT_WAIT: Duration = Duration::from_millis(3000);
/// The longest wait `lspWaitMs` may ask for.
pub const MAX_WAIT: Duration = Duration::from_millis(10_000);

/// One language server MAIA may start.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// File extensions it serves, without the dot.
    pub file_types: Vec<String>,
    /// Files or folders that mark a project root; none: the workspace.
    pub root_markers: Vec<String>,
    /// `initializationOptions` of its `initialize` request.
    pub init_options: Option<Value>,
}

/// The language-server settings of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct LspSettings {
    pub servers: Vec<ServerConfig>,
    /// How long an edit waits for diagnostics (`lspWaitMs`).
    pub wait: Duration,
}

impl Default for LspSettings {
    fn default() -> Self {
        LspSettings {
            servers: Vec::new(),
            wait: DEFAULT_WAIT,
        }
    }
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// The servers MAIA knows, found or not: (name, command, args, file types,
/// root markers). The first of a name whose command is found is used.
type Known = (
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
);
const KNOWN: &[Known] = &[
    (
        "rust-analyzer",
        "rust-analyzer",
        &[],
        &["rs"],
        &["Cargo.toml"],
    ),
    ("gopls", "gopls", &[], &["go"], &["go.mod", "go.work"]),
    (
        "pyright",
        "basedpyright-langserver",
        &["--stdio"],
        &["py", "pyi"],
        &[
            "pyproject.toml",
            "pyrightconfig.json",
            "setup.py",
            "setup.cfg",
            "requirements.txt",
        ],
    ),
    (
        "pyright",
        "pyright-langserver",
        &["--stdio"],
        &["py", "pyi"],
        &[
            "pyproject.toml",
            "pyrightconfig.json",
            "setup.py",
            "setup.cfg",
            "requirements.txt",
        ],
    ),
    (
        "typescript",
        "typescript-language-server",
        &["--stdio"],
        &["ts", "tsx", "js", "jsx", "mjs", "cjs", "mts", "cts"],
        &["tsconfig.json", "jsconfig.json", "package.json"],
    ),
    (
        "clangd",
        "clangd",
        &[],
        &["c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx"],
        &["compile_commands.json", "compile_flags.txt", ".clangd"],
    ),
];

/// The known servers whose command `found` says is installed.
pub fn defaults(found: &dyn Fn(&str) -> bool) -> Vec<ServerConfig> {
    let mut out: Vec<ServerConfig> = Vec::new();
    for (name, command, args, types, markers) in KNOWN {
        if out.iter().any(|s| s.name == *name) || !found(command) {
            continue;
        }
        out.push(ServerConfig {
            name: (*name).to_owned(),
            command: (*command).to_owned(),
            args: strings(args),
            env: Vec::new(),
            file_types: strings(types),
            root_markers: strings(markers),
            init_options: None,
        });
    }
    out
}

/// Whether `command` can be started (on `PATH`, or a runnable path).
pub fn on_path(command: &str) -> bool {
    maia_tools::process::ensure_runnable(command.as_ref(), None).is_ok()
}

/// The settings of the files' `lsp` and `lspWaitMs` values (most general
/// first; servers merge one by one, a later entry winning), over
/// `defaults`. `"lsp": false` turns every server off; an entry
/// `{"disabled": true}` turns off the server of its name. Returns the
/// settings and the problems found.
pub fn from_values(
    files: &[&Map<String, Value>],
    defaults: Vec<ServerConfig>,
) -> (LspSettings, Vec<String>) {
    let mut warnings = Vec::new();
    let mut entries: Map<String, Value> = Map::new();
    let mut off = false;
    let mut wait = DEFAULT_WAIT;
    for file in files {
        match file.get("lsp") {
            Some(Value::Object(servers)) => {
                off = false;
                entries.extend(servers.clone());
            }
            Some(Value::Bool(false)) => off = true,
            Some(Value::Bool(true)) | None => {}
            Some(_) => warnings.push("lsp must be an object of servers (or false); ignored".into()),
        }
        if let Some(v) = file.get("lspWaitMs") {
            match v.as_u64() {
                Some(ms) => wait = Duration::from_millis(ms).min(MAX_WAIT),
                None => warnings.push("lspWaitMs must be a number of milliseconds; ignored".into()),
            }
        }
    }
    if off {
        return (
            LspSettings {
                servers: Vec::new(),
                wait,
            },
            warnings,
        );
    }
    let mut servers = defaults;
    for (name, entry) in &entries {
        let Some(entry) = entry.as_object() else {
            warnings.push(format!("lsp.{name} must be an object; ignored"));
            continue;
        };
        let default = servers.iter().position(|s| &s.name == name);
        if entry.get("disabled").and_then(Value::as_bool) == Some(true) {
            if let Some(i) = default {
                servers.remove(i);
            }
            continue;
        }
        match server(name, entry, default.map(|i| &servers[i])) {
            Ok(config) => match default {
                Some(i) => servers[i] = config,
                None => servers.push(config),
            },
            Err(e) => warnings.push(format!("lsp.{name}: {e}; ignored")),
        }
    }
    (LspSettings { servers, wait }, warnings)
}

/// One `lsp` entry, over the default of its name.
fn server(
    name: &str,
    entry: &Map<String, Value>,
    base: Option<&ServerConfig>,
) -> Result<ServerConfig, String> {
    let list = |key: &str, trim_dot: bool| -> Result<Option<Vec<String>>, String> {
        match entry.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(|s| {
                            if trim_dot {
                                s.trim_start_matches('.')
                            } else {
                                s
                            }
                            .to_owned()
                        })
                        .ok_or_else(|| format!("{key} must be a list of strings"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(format!("{key} must be a list of strings")),
        }
    };
    let command = match (entry.get("command"), base) {
        (Some(Value::String(c)), _) if !c.trim().is_empty() => c.clone(),
        (None, Some(base)) => base.command.clone(),
        _ => return Err("needs a `command`".into()),
    };
    let args = match entry.get("args") {
        None => base.map(|b| b.args.clone()).unwrap_or_default(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned).ok_or("args must be strings"))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("args must be a list of strings".into()),
    };
    let env = match entry.get("env") {
        None => Vec::new(),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| {
                v.as_str()
                    .map(|v| (k.clone(), v.to_owned()))
                    .ok_or("env values must be strings")
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("env must be an object of strings".into()),
    };
    let file_types = match list("fileTypes", true)? {
        Some(types) => types,
        None => match base {
            Some(b) => b.file_types.clone(),
            None => return Err("needs `fileTypes` (extensions such as [\"py\"])".into()),
        },
    };
    // Markers are names: the leading dot of `.clangd` is kept.
    let root_markers = list("rootMarkers", false)?
        .or_else(|| base.map(|b| b.root_markers.clone()))
        .unwrap_or_default();
    Ok(ServerConfig {
        name: name.to_owned(),
        command,
        args,
        env,
        file_types,
        root_markers,
        init_options: entry
            .get("initOptions")
            .cloned()
            .or_else(|| base.and_then(|b| b.init_options.clone())),
    })
}

impl ServerConfig {
    /// Whether it serves files like `path`.
    pub fn serves(&self, path: &Path) -> bool {
        path.extension()
            .and_then(|e| e.to_str())
            .is_some_and(|ext| self.file_types.iter().any(|t| t.eq_ignore_ascii_case(ext)))
    }

    /// The root it would serve `path` from: the nearest folder at or above
    /// the file (and inside `workspace`) holding a root marker; the
    /// workspace when it has no markers; `None` when no marker is found.
    pub fn root_for(&self, path: &Path, workspace: &Path) -> Option<PathBuf> {
        if self.root_markers.is_empty() {
            return Some(workspace.to_path_buf());
        }
        let mut dir = path.parent();
        while let Some(d) = dir {
            if !d.starts_with(workspace) {
                break;
            }
            if self.root_markers.iter().any(|m| d.join(m).exists()) {
                return Some(d.to_path_buf());
            }
            dir = d.parent();
        }
        None
    }
}

/// The LSP language id of a file.
pub fn language_id(path: &Path) -> String {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
        .to_ascii_lowercase();
    match ext.as_str() {
        "rs" => "rust",
        "py" | "pyi" => "python",
        "ts" | "mts" | "cts" => "typescript",
        "tsx" => "typescriptreact",
        "js" | "mjs" | "cjs" => "javascript",
        "jsx" => "javascriptreact",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => "cpp",
        other => other,
    }
    .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn defaults_are_those_found_and_settings_override_them() {
        let found = |c: &str| c == "pyright-langserver" || c == "gopls";
        let d = defaults(&found);
        let names: Vec<&str> = d.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["gopls", "pyright"]);
        assert_eq!(d[1].command, "pyright-langserver");

        let user = obj(json!({"lspWaitMs": 500, "lsp": {"gopls": {"disabled": true}}}));
        let project = obj(json!({"lsp": {
            "pyright": {"args": ["--stdio", "-v"]},
            "fake": {"command": "fake-ls", "fileTypes": [".foo"], "rootMarkers": [".fakerc"],
                     "env": {"A": "1"}, "initOptions": {"x": 1}},
            "broken": {"fileTypes": ["x"]}
        }}));
        let (s, warnings) = from_values(&[&user, &project], d);
        assert_eq!(s.wait, Duration::from_millis(500));
        let names: Vec<&str> = s.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["pyright", "fake"]);
        assert_eq!(s.servers[0].args, ["--stdio", "-v"]);
        assert_eq!(s.servers[0].command, "pyright-langserver");
        assert_eq!(s.servers[1].file_types, ["foo"]);
        assert_eq!(s.servers[1].root_markers, [".fakerc"]);
        assert_eq!(s.servers[1].env, [("A".to_owned(), "1".to_owned())]);
        assert_eq!(warnings.len(), 1, "{warnings:?}");

        let (off, _) = from_values(&[&obj(json!({"lsp": false}))], defaults(&found));
        assert!(off.servers.is_empty());
    }

    #[test]
    fn a_root_is_the_nearest_marked_folder_inside_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::create_dir_all(ws.join("sub/pkg")).unwrap();
        std::fs::write(ws.join("sub/pyproject.toml"), "").unwrap();
        let (s, _) = from_values(&[], defaults(&|c| c == "pyright-langserver"));
        let py = &s.servers[0];
        assert!(py.serves(&ws.join("a.py")) && !py.serves(&ws.join("a.rs")));
        assert_eq!(
            py.root_for(&ws.join("sub/pkg/a.py"), ws),
            Some(ws.join("sub"))
        );
        assert_eq!(py.root_for(&ws.join("a.py"), ws), None);
    }
}
