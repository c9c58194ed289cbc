//! "Review in editor" on a permission card: the client shows the proposed
//! change as hunks, the user keeps some, and the answer that allows the
//! call carries the text kept (`_meta.maia.reviewedText`). That text is
//! what MAIA writes instead of the proposal; which hunks it holds is read
//! as LSP mode reads a reviewed document ([`maia_lsp::applied_hunks`]),
//! and the model is told which were kept and which were not
//! ([`maia_lsp::report`]), in the tool's result. Advertised as
//! `initialize` `_meta.permissionReview`. Shape: docs/acp.md.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use maia_core::{ChoiceKind, PermissionChoice, PermissionReply, ToolCallView, ToolContent};
use maia_tools::{FileSystem, FsError, WriteOutcome};
use serde_json::{Value, json};

/// What `initialize` adds to its `_meta`.
pub(super) fn capability() -> Value {
    json!({ "version": 1, "meta": "maia.reviewedText" })
}

/// The reviewed texts answered for the session's permission questions, by
/// path, until the allowed call writes (one write each).
#[derive(Clone, Default)]
pub struct Reviewed(Arc<Mutex<HashMap<PathBuf, Entry>>>);

struct Entry {
    /// The change the card proposed: the text kept applies to it only.
    proposed: String,
    reviewed: String,
}

impl Reviewed {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Entry>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps the text an allowing answer carries for the call's one diff.
    pub(super) fn note(
        &self,
        answer: &Value,
        reply: &PermissionReply,
        offered: &[PermissionChoice],
        call: &ToolCallView,
    ) {
        let Some(text) = answer
            .pointer("/_meta/maia/reviewedText")
            .and_then(Value::as_str)
        else {
            return;
        };
        let PermissionReply::Selected { option, .. } = reply else {
            return;
        };
        let allows = offered.iter().any(|c| {
            &c.id == option && matches!(c.kind, ChoiceKind::AllowOnce | ChoiceKind::AllowAlways)
        });
        let diffs: Vec<_> = call
            .content
            .iter()
            .filter_map(|c| match c {
                ToolContent::Diff { diff } => Some(diff),
                _ => None,
            })
            .collect();
        let [diff] = diffs.as_slice() else {
            tracing::warn!("a reviewed text for a call without exactly one diff: ignored");
            return;
        };
        if allows {
            self.map().insert(
                diff.path.clone(),
                Entry {
                    proposed: diff.new_text.clone(),
                    reviewed: text.to_owned(),
                },
            );
        }
    }

    /// The reviewed text for a write of `proposed` to `path`, once.
    fn take(&self, path: &Path, proposed: &str) -> Option<String> {
        let mut map = self.map();
        let entry = map.remove(path)?;
        (entry.proposed == proposed).then_some(entry.reviewed)
    }

    /// Writes `content` to `path` through `fs`, or the text the user kept
    /// of it, with the report for the model.
    pub(super) async fn write(
        &self,
        fs: &dyn FileSystem,
        path: &Path,
        content: &str,
    ) -> Result<WriteOutcome, FsError> {
        let Some(text) = self.take(path, content) else {
            return fs
                .write(path, content)
                .await
                .map(|()| WriteOutcome::Written);
        };
        let old = match fs.read_to_string(path).await {
            Ok(old) => Some(old),
            Err(FsError::NotFound(_)) => None,
            Err(e) => return Err(e),
        };
        let base = old.as_deref().unwrap_or_default();
        let hunks = maia_lsp::hunks(base, content);
        let kept = maia_lsp::applied_hunks(base, &hunks, &text);
        let (applied, report) = maia_lsp::report(path, &hunks, kept.as_deref());
        if old.as_deref() != Some(text.as_str()) {
            fs.write(path, &text).await?;
        }
        Ok(WriteOutcome::Reviewed {
            text,
            applied,
            report,
        })
    }
}
