//! "What the user undid" on the wire: `_meta.maia.undoneHunks` on
//! `session/prompt` and `_session/steering` (an editor's hunk review undid
//! changes MAIA had written), turned into the engine's
//! [`maia_core::undone::UndoneHunk`]s. Advertised as `initialize`
//! `_meta.undoneHunks`. Shape: docs/acp.md.

use std::path::PathBuf;

use maia_core::PromptPart;
use maia_core::undone::UndoneHunk;
use maia_rpc::RpcError;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::invalid_params;

/// Hunks one message may report.
const MAX_HUNKS: usize = 500;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct WireHunk {
    path: String,
    #[serde(default)]
    line: u32,
    #[serde(default)]
    agent_text: String,
    #[serde(default)]
    restored_text: String,
    #[serde(default)]
    file_removed: bool,
}

/// What `initialize` adds to its `_meta`.
pub(super) fn capability() -> Value {
    json!({ "version": 1, "meta": "maia.undoneHunks", "methods": ["session/prompt", "_session/steering"] })
}

/// The report carried by a request's `_meta` (`None` without one); a
/// malformed report is the client's error, and nothing is started.
pub(super) fn from_meta(meta: Option<&Map<String, Value>>) -> Result<Option<PromptPart>, RpcError> {
    let Some(list) = meta
        .and_then(|m| m.get("maia"))
        .and_then(|m| m.get("undoneHunks"))
    else {
        return Ok(None);
    };
    let wire: Vec<WireHunk> = serde_json::from_value(list.clone())
        .map_err(|e| invalid_params(format!("invalid _meta.maia.undoneHunks: {e}")))?;
    if wire.len() > MAX_HUNKS {
        return Err(invalid_params(format!(
            "_meta.maia.undoneHunks lists {} hunks; at most {MAX_HUNKS}",
            wire.len()
        )));
    }
    let mut hunks = Vec::with_capacity(wire.len());
    for h in wire {
        let path = PathBuf::from(&h.path);
        if !path.is_absolute() {
            return Err(invalid_params(format!(
                "_meta.maia.undoneHunks: the path {:?} is not absolute",
                h.path
            )));
        }
        if h.line == 0 && !h.file_removed {
            return Err(invalid_params(format!(
                "_meta.maia.undoneHunks: the hunk of {} needs its 1-based `line`",
                h.path
            )));
        }
        hunks.push(UndoneHunk {
            path,
            line: h.line,
            agent_text: h.agent_text,
            restored_text: h.restored_text,
            file_removed: h.file_removed,
        });
    }
    Ok((!hunks.is_empty()).then_some(PromptPart::Undone(hunks)))
}
