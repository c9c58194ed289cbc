//! The revert's preview: the files that change (or would, forced) with
//! their kinds and diffs, the token that ties an apply to the preview the
//! user saw, and the preview as Markdown.

use sha2::{Digest, Sha256};

use super::{FileKind, Plan, PlannedFile, RevertReport, digest, hex, text};

impl Plan {
    pub(super) fn token(&self, force: bool) -> String {
        let mut h = Sha256::new();
        h.update(if force {
            b"force\n" as &[u8]
        } else {
            b"keep\n"
        });
        for (path, now) in &self.now {
            let target = if force { &self.forced } else { &self.target };
            h.update(path.as_bytes());
            h.update(b"\0");
            h.update(digest(now).as_bytes());
            h.update(b"\0");
            h.update(target.get(path).map(digest).unwrap_or_default().as_bytes());
            h.update(b"\n");
        }
        format!("sha256:{}", hex(&h.finalize()))
    }

    /// The files that change (or would, forced), with kinds and diffs.
    pub(super) fn files(&self) -> Vec<PlannedFile> {
        let mut out = Vec::new();
        for (path, now) in &self.now {
            let conflict = self.conflicts.contains(path);
            // A conflict that nothing newer undoes: shown as forcing would do it.
            let untouched = self.target.get(path) == Some(now);
            let Some(goal) = (if conflict && untouched {
                self.forced.get(path)
            } else {
                self.target.get(path)
            }) else {
                continue;
            };
            if goal == now {
                continue;
            }
            let kind = match (now, goal) {
                (Some(_), None) => FileKind::Created,
                (None, Some(_)) => FileKind::Deleted,
                _ => FileKind::Modified,
            };
            out.push(PlannedFile {
                path: path.clone(),
                kind,
                conflict,
                old_text: text(now),
                new_text: text(goal),
            });
        }
        out
    }
}

/// The preview as Markdown: each file, what the revert does to it, its
/// diff, the conflicts and the files that were not captured.
pub fn describe(report: &RevertReport) -> String {
    let mut text = String::from("**Reverting** the file changes:\n\n");
    if report.files.is_empty() {
        text.push_str("- no file differs from before the changes\n");
    }
    for file in &report.files {
        let what = match file.kind {
            FileKind::Created => "delete (MAIA created it)",
            FileKind::Modified => "restore",
            FileKind::Deleted => "recreate (MAIA deleted it)",
        };
        let conflict = if file.conflict {
            " — **conflict**: changed after MAIA, kept"
        } else {
            ""
        };
        text.push_str(&format!("- `{}`: {what}{conflict}\n", file.path));
        if file.conflict {
            continue;
        }
        let (old, new) = (
            file.old_text.as_deref().unwrap_or(""),
            file.new_text.as_deref().unwrap_or(""),
        );
        if file.old_text.is_some() || file.new_text.is_some() {
            let diff = similar::TextDiff::from_lines(old, new)
                .unified_diff()
                .header(&file.path, &file.path)
                .to_string();
            if !diff.is_empty() {
                text.push_str(&format!("\n```diff\n{}```\n", diff));
            }
        }
    }
    if !report.folders.is_empty() {
        text.push_str(&format!(
            "\nFolders MAIA created, removed when left empty: {}\n",
            report
                .folders
                .iter()
                .map(|p| format!("`{p}/`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !report.not_restored.is_empty() {
        text.push_str(&format!(
            "\nChanged but not restored: {}\n",
            report
                .not_restored
                .iter()
                .map(super::super::NotRestored::describe)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !report.not_captured.is_empty() {
        text.push_str(&format!(
            "\nNot captured (over `checkpoints.maxFileBytes`), not restored: {}\n",
            report
                .not_captured
                .iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    text
}
