//! Writes keys of `~/.maia/settings.json` for `maia login`.
//!
//! A new file is created with mode 0600 (it may hold the API key). An
//! existing file is edited through `jsonc-parser`'s concrete syntax tree,
//! key by key: other keys, their order, indentation and comments are kept
//! byte for byte, and the file ends up with mode 0600 too. The new text is
//! written beside the file and renamed over it, so a crash never leaves
//! half a file.

use std::io::Write;
use std::path::{Path, PathBuf};

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstInputValue, CstRootNode};
use serde_json::Value;

/// Why the file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file exists but is not a JSON object; it is left untouched.
    #[error("{path} is not a valid JSON object ({message}); fix or remove it, then try again")]
    Invalid { path: PathBuf, message: String },
}

/// A change to one top-level key: a new value, or `None` to remove it.
pub type Change<'a> = (&'a str, Option<Value>);

/// Applies `changes` to the settings file at `path` (created if missing).
pub fn update(path: &Path, changes: &[Change<'_>]) -> Result<(), WriteError> {
    let io = |source| WriteError::Io {
        path: path.to_path_buf(),
        source,
    };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io(e)),
    };
    let new_text = edit(&text, changes).map_err(|message| WriteError::Invalid {
        path: path.to_path_buf(),
        message,
    })?;
    if let Some(dir) = path.parent() {
        create_private_dir(dir).map_err(io)?;
    }
    remove_stale_tmp(path);
    let tmp = path.with_extension(format!("json.tmp{}", std::process::id()));
    write_private(&tmp, new_text.as_bytes()).map_err(io)?;
    if let Err(e) = maia_core::fault_point!("settings.written") {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })
}

/// The file text with `changes` applied.
pub fn edit(text: &str, changes: &[Change<'_>]) -> Result<String, String> {
    if text.trim().is_empty() {
        let mut map = serde_json::Map::new();
        for (key, value) in changes {
            if let Some(value) = value {
                map.insert((*key).to_owned(), value.clone());
            }
        }
        let mut out =
            serde_json::to_string_pretty(&Value::Object(map)).map_err(|e| e.to_string())?;
        out.push('\n');
        return Ok(out);
    }
    // The settings loader reads strict JSON: refuse to build on anything else.
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(_)) => {}
        Ok(_) => return Err("the file is not a JSON object".to_owned()),
        Err(e) => return Err(e.to_string()),
    }
    let root = CstRootNode::parse(text, &ParseOptions::default()).map_err(|e| e.to_string())?;
    let Some(object) = root.object_value() else {
        return Err("the file is not a JSON object".to_owned());
    };
    for (key, value) in changes {
        match (object.get(key), value) {
            (Some(prop), Some(value)) => prop.set_value(input(value)),
            (Some(prop), None) => prop.remove(),
            (None, Some(value)) => {
                object.append(key, input(value));
            }
            (None, None) => {}
        }
    }
    Ok(root.to_string())
}

fn input(value: &Value) -> CstInputValue {
    match value {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(items) => CstInputValue::Array(items.iter().map(input).collect()),
        Value::Object(map) => {
            CstInputValue::Object(map.iter().map(|(k, v)| (k.clone(), input(v))).collect())
        }
    }
}

/// Removes what a write killed before its rename left beside `path`:
/// `<name>.tmp<pid>` files whose process is gone (a live one is writing).
/// Such a file may hold the API key, and its name would refuse a later
/// process with the same id.
pub fn remove_stale_tmp(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let prefix = format!("{}.tmp", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(Ok(pid @ 1..)) = file.strip_prefix(&prefix).map(str::parse::<i32>) else {
            continue;
        };
        let gone = matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
            Err(nix::errno::Errno::ESRCH)
        );
        if (gone || pid == std::process::id() as i32)
            && let Err(e) = std::fs::remove_file(entry.path())
        {
            tracing::warn!("cannot remove {}: {e}", entry.path().display());
        }
    }
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn edits_key_by_key_keeping_the_rest() {
        let text = "{\n    // my proxy\n    \"LiteLLM_URL\": \"http://old:4000\",\n    \"sandbox\": \"read-only\",\n    \"LiteLLM_API_Key\": \"sk-old\"\n}\n";
        let out = edit(
            text,
            &[
                ("LiteLLM_URL", Some(json!("http://new:4000"))),
                ("LiteLLM_API_Key", None),
                ("model", Some(json!("gpt-4.1"))),
            ],
        );
        // Comments are not JSON: the loader would ignore such a file.
        assert!(out.is_err());
        let text = "{\n    \"LiteLLM_URL\": \"http://old:4000\",\n    \"sandbox\": \"read-only\",\n    \"LiteLLM_API_Key\": \"sk-old\"\n}\n";
        let out = edit(
            text,
            &[
                ("LiteLLM_URL", Some(json!("http://new:4000"))),
                ("LiteLLM_API_Key", None),
                ("model", Some(json!("gpt-4.1"))),
            ],
        )
        .unwrap();
        assert!(
            out.starts_with(
                "{\n    \"LiteLLM_URL\": \"http://new:4000\",\n    \"sandbox\": \"read-only\""
            ),
            "{out}"
        );
        assert!(!out.contains("sk-old"), "{out}");
        let value: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(value["model"], "gpt-4.1");
        assert_eq!(value["sandbox"], "read-only");
    }

    #[test]
    fn a_new_file_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".maia/settings.json");
        update(&path, &[("LiteLLM_API_Key", Some(json!("sk-1")))]).unwrap();
        let value: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(value, json!({"LiteLLM_API_Key": "sk-1"}));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn an_invalid_file_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        std::fs::write(&path, "{ not json").unwrap();
        let err = update(&path, &[("model", Some(json!("m")))]).unwrap_err();
        assert!(err.to_string().contains("not a valid JSON object"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{ not json");
    }
}
