//! "Always allow" / "Always reject": the rule is written into
//! `<cwd>/.maia/settings.json` so it is visible, survives restarts and can
//! be removed by hand.
//!
//! The file is edited through the concrete syntax tree of `jsonc-parser`
//! (dprint's maintained JSONC parser, `cst` feature): only the new array
//! element is inserted, so indentation, key order, other keys and comments
//! of the rest of the file are kept byte for byte.

use std::path::{Path, PathBuf};

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstInputValue, CstRootNode};

use super::{Family, Rule};

/// Why a rule could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file exists but is not valid JSON (it is left untouched).
    #[error("{path} is not valid JSON ({message}); the rule was not saved")]
    InvalidJson { path: PathBuf, message: String },
    /// `permissions` or `permissions.<family>` has the wrong type.
    #[error("{path}: {message}; the rule was not saved")]
    Shape { path: PathBuf, message: String },
}

/// The settings file of `cwd`.
pub fn local_settings_file(cwd: &Path) -> PathBuf {
    cwd.join(".maia").join("settings.json")
}

/// Adds `rule` to `permissions.<family>` of `<cwd>/.maia/settings.json`
/// (file and folder created if missing; nothing written when the rule is
/// already there) and returns the file's path.
pub fn persist_rule(cwd: &Path, family: Family, rule: &Rule) -> Result<PathBuf, PersistError> {
    let path = local_settings_file(cwd);
    let io = |source| PersistError::Io {
        path: path.clone(),
        source,
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io(e)),
    };
    let new_text = if text.trim().is_empty() {
        fresh(family, rule)
    } else {
        match insert(&text, family, rule) {
            Ok(Some(t)) => t,
            Ok(None) => return Ok(path),
            Err(message) => return Err(message(path)),
        }
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    // Write beside it, then rename: a crash never leaves half a file.
    let tmp = path.with_extension(format!("json.tmp{}", std::process::id()));
    std::fs::write(&tmp, new_text).map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })?;
    Ok(path)
}

fn fresh(family: Family, rule: &Rule) -> String {
    let value = serde_json::json!({ "permissions": { family.key(): [rule.to_string()] } });
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
    text.push('\n');
    text
}

type Failure = Box<dyn FnOnce(PathBuf) -> PersistError>;

/// The file text with the rule added, `None` when already present.
fn insert(text: &str, family: Family, rule: &Rule) -> Result<Option<String>, Failure> {
    // The settings loader is strict JSON: refuse to build on anything else.
    if let Err(e) = serde_json::from_str::<serde_json::Value>(text) {
        let message = e.to_string();
        return Err(Box::new(move |path| PersistError::InvalidJson {
            path,
            message,
        }));
    }
    let shape = |message: String| -> Failure {
        Box::new(move |path| PersistError::Shape { path, message })
    };
    let root = CstRootNode::parse(text, &ParseOptions::default()).map_err(|e| {
        let message = e.to_string();
        Box::new(move |path| PersistError::InvalidJson { path, message }) as Failure
    })?;
    let Some(object) = root.object_value() else {
        return Err(shape("the file is not a JSON object".to_owned()));
    };
    let Some(permissions) = object.object_value_or_create("permissions") else {
        return Err(shape("`permissions` is not an object".to_owned()));
    };
    let key = family.key();
    let Some(list) = permissions.array_value_or_create(key) else {
        return Err(shape(format!("`permissions.{key}` is not a list")));
    };
    let wanted = rule.to_string();
    let present = list.elements().iter().any(|e| {
        e.as_string_lit()
            .and_then(|s| s.decoded_value().ok())
            .is_some_and(|s| s.trim() == wanted)
    });
    if present {
        return Ok(None);
    }
    list.append(CstInputValue::String(wanted));
    Ok(Some(root.to_string()))
}
