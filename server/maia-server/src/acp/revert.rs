//! `_session/files/revert`: undo the file changes of one tool call, or of
//! every turn from a user message on (codex-acp's shape, extended with
//! MAIA's previews): a dry run answers the plan and its `previewToken`;
//! applying needs that token and answers what was reverted and which
//! files were kept because the user changed them after MAIA (`force`
//! overwrites them). Advertised as `initialize` `_meta.fileRevert`.

use std::path::Path;

use maia_core::checkpoint::{RevertError, RevertReport, RevertRequest, RevertTarget};
use maia_rpc::{Id, RpcError};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Agent, invalid_params, unknown_session};

/// The method name.
pub(super) const METHOD: &str = "_session/files/revert";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RevertParams {
    session_id: String,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    before_message: Option<BeforeMessage>,
    dry_run: bool,
    #[serde(default)]
    preview_token: Option<String>,
    #[serde(default)]
    force: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BeforeMessage {
    message_id: String,
}

/// What `initialize` adds to its `_meta`.
pub(super) fn capability() -> Value {
    json!({
        "version": 1,
        "method": METHOD,
        "dryRun": true,
        "previewTokenRequired": true,
    })
}

impl Agent {
    /// Hands the revert to the session and answers when it is done.
    pub(super) fn revert_files(&self, id: Id, params: Value) {
        let started = (|| {
            let params: RevertParams = serde_json::from_value(params)
                .map_err(|e| invalid_params(format!("invalid params for {METHOD}: {e}")))?;
            let target = match (&params.tool_call_id, &params.before_message) {
                (Some(call), None) => RevertTarget::ToolCall(call.clone()),
                (None, Some(before)) => RevertTarget::FromMessage(before.message_id.clone()),
                _ => {
                    return Err(invalid_params(
                        "give exactly one of `toolCallId` and `beforeMessage`",
                    ));
                }
            };
            if !params.dry_run && params.preview_token.is_none() {
                return Err(invalid_params(
                    "`previewToken` (from a dry run) is required to apply a revert",
                ));
            }
            let entry = self
                .entry(&params.session_id)
                .ok_or_else(|| unknown_session(&params.session_id))?;
            let request = RevertRequest {
                target,
                preview_token: params.preview_token,
                force: params.force,
                dry_run: params.dry_run,
            };
            let cwd = entry.handle.cwd().to_path_buf();
            Ok((params.dry_run, cwd, entry.handle.revert_files(request)))
        })();
        match started {
            Ok((dry_run, cwd, answer)) => {
                let conn = self.conn.clone();
                tokio::spawn(async move {
                    conn.respond(id, answer_of(dry_run, &cwd, answer.await));
                });
            }
            Err(e) => self.conn.respond(id, Err(e)),
        }
    }
}

/// A path of the engine's report (relative to the session's folder) as
/// ACP gives paths: absolute.
pub(super) fn absolute(cwd: &Path, path: &str) -> String {
    cwd.join(path).display().to_string()
}

/// Paths made absolute ([`absolute`]).
pub(super) fn absolutes(cwd: &Path, paths: &[String]) -> Vec<String> {
    paths.iter().map(|p| absolute(cwd, p)).collect()
}

/// The engine's answer on the wire.
fn answer_of(
    dry_run: bool,
    cwd: &Path,
    answer: Result<RevertReport, RevertError>,
) -> Result<Value, RpcError> {
    let report = match answer {
        Ok(report) => report,
        Err(e @ (RevertError::UnknownToolCall(_) | RevertError::UnknownMessage(_))) => {
            return Err(invalid_params(e.to_string()));
        }
        Err(RevertError::TurnRunning) => {
            // JSON-RPC's generic server error, as wire.md fixes it.
            return Err(RpcError {
                code: -32000,
                message: "a turn is running; cancel it first".into(),
                data: Some(json!({ "reason": "turn_running" })),
            });
        }
        Err(RevertError::StalePreview) => {
            return Ok(json!({ "reverted": false, "reason": "stale_preview" }));
        }
        Err(e) if dry_run => {
            return Ok(json!({ "canRevert": false, "paths": [], "reason": e.to_string() }));
        }
        Err(e) => return Ok(json!({ "reverted": false, "reason": e.to_string() })),
    };
    if dry_run {
        let files: Vec<Value> = report
            .files
            .iter()
            .map(|f| {
                let mut file = json!({
                    "path": absolute(cwd, &f.path),
                    "kind": f.kind.as_str(),
                    "conflict": f.conflict,
                });
                if f.old_text.is_some() || f.new_text.is_some() {
                    file["diff"] = json!({ "oldText": f.old_text, "newText": f.new_text });
                }
                file
            })
            .collect();
        let can = report.files.iter().any(|f| !f.conflict) || !report.folders.is_empty();
        let mut out = json!({
            "canRevert": can,
            "previewToken": report.token,
            "paths": report.files.iter().map(|f| absolute(cwd, &f.path)).collect::<Vec<_>>(),
            "_meta": { "maia": {
                "files": files,
                "notCaptured": absolutes(cwd, &report.not_captured),
                "notRestored": not_restored(cwd, &report),
                "folders": absolutes(cwd, &report.folders),
            } },
        });
        if !can {
            out["reason"] = json!(if report.files.is_empty() {
                "nothing to revert"
            } else {
                "every file was changed after MAIA (conflicts)"
            });
        }
        return Ok(out);
    }
    Ok(json!({
        "reverted": report.applied,
        "_meta": { "maia": {
            "reverted": absolutes(cwd, &report.reverted),
            "conflicts": absolutes(cwd, &report.conflicts),
            "notRestored": not_restored(cwd, &report),
            "removedFolders": absolutes(cwd, &report.folders),
        } },
    }))
}

/// What the revert cannot restore: `{path, reason, files?}`, the path
/// absolute, the reason `ignored`, `git_name`, `nested_repository` or
/// `outside_project`.
fn not_restored(cwd: &Path, report: &RevertReport) -> Vec<Value> {
    report
        .not_restored
        .iter()
        .map(|n| {
            let path = if n.path.starts_with('/') {
                n.path.clone()
            } else {
                absolute(cwd, &n.path)
            };
            let mut out = json!({ "path": path, "reason": n.why });
            if n.files > 1 {
                out["files"] = json!(n.files);
            }
            out
        })
        .collect()
}
