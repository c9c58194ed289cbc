//! File checkpoints in a session: a snapshot before the first call of a
//! turn that may change files and after each batch of such calls, recorded
//! in the journal ([`crate::checkpoint`]), and reverting them (`/undo`,
//! `_session/files/revert`). A child of `session`, like `turn`.

use std::path::PathBuf;

use crate::checkpoint::{self, RevertError, RevertReport, RevertRequest, Snapshot};
use crate::event::{Event, NoticeLevel};
use crate::session::Session;
use crate::store::Record;

/// The session's checkpoint taker (its store in the project's sessions
/// folder). A top session opening also clears what interrupted operations
/// left: a revert's staging folders ([`checkpoint::restore::sweep`]) and,
/// in the background, a worktree fork's ([`crate::worktree::sweep`]); a
/// `Task` call's child (`top` false) takes no checkpoints and sweeps
/// nothing.
pub(super) fn checkpoints(cwd: &std::path::Path, id: &str, top: bool) -> checkpoint::Checkpoints {
    let sessions = crate::store::sessions_dir(cwd);
    let checkpoints = checkpoint::Checkpoints::new(&sessions, cwd, id);
    if top {
        crate::worktree::sweep_in_background(&sessions, cwd);
        let swept = checkpoint::restore::sweep(&checkpoints.repo().git_dir);
        if swept > 0 {
            tracing::info!("removed what {swept} interrupted revert(s) left");
        }
    }
    checkpoints
}

/// A revert the handle sent, with where its answer goes.
pub(crate) struct RevertCall {
    pub(crate) request: RevertRequest,
    pub(crate) reply: tokio::sync::oneshot::Sender<Result<RevertReport, RevertError>>,
}

impl RevertCall {
    /// Reached a running turn: refused, nothing changed.
    pub(crate) fn refuse(self) {
        let _ = self.reply.send(Err(RevertError::TurnRunning));
    }
}

impl Session {
    /// A turn or a `!command` starts: the next mutating call snapshots
    /// first. The session's first snapshot starts now, in the background,
    /// beside the model's answer ([`checkpoint::Checkpoints::start`]).
    pub(crate) fn begin_checkpoints(&mut self) {
        self.checkpoints.begin_turn();
        if self.role.is_none() {
            self.checkpoints.start(&self.project.checkpoints);
        }
    }

    /// The snapshot before mutating calls (the turn's latest, else a new
    /// one); `None` when checkpoints are off (the user told once).
    pub(crate) async fn checkpoint_before(&mut self) -> Option<Snapshot> {
        match self.checkpoints.before(&self.project.checkpoints).await {
            Ok(snapshot) => Some(snapshot),
            Err(text) => {
                self.tell_checkpoints_off(text);
                None
            }
        }
    }

    fn tell_checkpoints_off(&mut self, text: String) {
        if self.checkpoints.take_untold() {
            tracing::warn!("{text}");
            if self.project.checkpoints.enabled {
                self.emit(Event::Notice {
                    level: NoticeLevel::Warning,
                    text: format!("{text}; `/undo` cannot restore this session's file changes"),
                });
            }
        }
    }

    /// After mutating `calls` (id, paths named): a snapshot, and one
    /// checkpoint record per call when files changed.
    pub(crate) async fn checkpoint_after(
        &mut self,
        before: Snapshot,
        calls: &[(String, Vec<PathBuf>)],
    ) {
        let after = match self.checkpoints.snapshot(&self.project.checkpoints).await {
            Ok(after) => after,
            Err(text) => return self.tell_checkpoints_off(text),
        };
        let changed = match self.checkpoints.changed(&before, &after).await {
            Ok(changed) => changed,
            Err(e) => {
                tracing::warn!("cannot compare checkpoints: {e}");
                return;
            }
        };
        let message = self
            .conversation
            .user_messages()
            .last()
            .map(|m| m.id.clone())
            .unwrap_or_default();
        let records = checkpoint::records_of_batch(
            &message,
            calls,
            &before,
            &after,
            &changed,
            &self.services.cwd,
        );
        let not_restored: Vec<String> = records
            .iter()
            .flat_map(|r| &r.not_restored)
            // Build output in ignored folders is common: named at /undo only.
            .filter(|n| n.why != checkpoint::walk::Escape::Ignored)
            .map(checkpoint::NotRestored::describe)
            .collect();
        if !not_restored.is_empty() {
            self.emit(Event::Notice {
                level: NoticeLevel::Warning,
                text: format!(
                    "Changed, but not held by the checkpoint: {}; `/undo` cannot restore them",
                    not_restored.join(", ")
                ),
            });
        }
        if let Some(first) = records.first()
            && !first.not_captured.is_empty()
        {
            self.emit(Event::Notice {
                level: NoticeLevel::Warning,
                text: format!(
                    "Not captured by the checkpoint (over `checkpoints.maxFileBytes`): {}; `/undo` cannot restore them",
                    first.not_captured.join(", ")
                ),
            });
        }
        // Journaled first: the telling runs git, and a turn dropped or a
        // process killed meanwhile must not lose what `/undo` restores.
        for record in &records {
            self.record(&Record::Checkpoint(record.clone()));
        }
        self.tell_command_changes(&records, calls, (&before, &after))
            .await;
    }

    /// `/undo`: the last turn's file changes not undone yet are previewed
    /// and reverted; files the user changed since are named and kept. The
    /// answer is the preview and what was done.
    pub(crate) async fn undo(&mut self) -> String {
        let mut request = RevertRequest {
            target: checkpoint::RevertTarget::LastTurn,
            preview_token: None,
            force: false,
            dry_run: true,
        };
        let preview = match self.revert_files(&request).await {
            Ok(preview) => preview,
            Err(RevertError::NothingToRevert) => {
                return "Nothing to undo: no file changes of MAIA's are left to revert.".to_owned();
            }
            Err(RevertError::Off(off)) => return format!("Nothing to undo: {off}."),
            Err(e) => return format!("Cannot undo: {e}."),
        };
        request.dry_run = false;
        request.preview_token = Some(preview.token.clone());
        let mut text = checkpoint::plan::describe(&preview);
        match self.revert_files(&request).await {
            Ok(done) => {
                text.push_str(&format!(
                    "\n**Undone**: {} file(s) restored.",
                    done.reverted.len()
                ));
                if !done.folders.is_empty() {
                    text.push_str(&format!(
                        " Removed the empty folders: {}.",
                        done.folders
                            .iter()
                            .map(|p| format!("`{p}/`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                if !done.conflicts.is_empty() {
                    text.push_str(&format!(
                        " Kept as you changed them after MAIA (conflicts): {}.",
                        done.conflicts
                            .iter()
                            .map(|p| format!("`{p}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
            Err(e) => text.push_str(&format!("\n**Not undone**: {e}.")),
        }
        text
    }

    /// The preview of restoring the files as they were before user message
    /// `message_id` (`/rewind N --files`); `None` when nothing is to revert.
    pub(crate) async fn preview_restore(
        &mut self,
        message_id: &str,
    ) -> Result<Option<(RevertRequest, RevertReport)>, RevertError> {
        let request = RevertRequest {
            target: checkpoint::RevertTarget::FromMessage(message_id.to_owned()),
            preview_token: None,
            force: false,
            dry_run: true,
        };
        match self.revert_files(&request).await {
            Ok(preview) => Ok(Some((request, preview))),
            Err(RevertError::NothingToRevert) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Applies a [`Session::preview_restore`]; what was done.
    pub(crate) async fn restore(
        &mut self,
        (mut request, preview): (RevertRequest, RevertReport),
    ) -> Result<RevertReport, RevertError> {
        request.dry_run = false;
        request.preview_token = Some(preview.token);
        self.revert_files(&request).await
    }

    /// Applies a [`Session::preview_restore`]; what was done, as text.
    pub(crate) async fn apply_restore(&mut self, preview: (RevertRequest, RevertReport)) -> String {
        match self.restore(preview).await {
            Ok(done) if done.conflicts.is_empty() => {
                format!(" Files restored: {}.", done.reverted.len())
            }
            Ok(done) => format!(
                " Files restored: {}; kept as you changed them after MAIA (conflicts): {}.",
                done.reverted.len(),
                done.conflicts.join(", ")
            ),
            Err(e) => format!(" The files were not restored: {e}."),
        }
    }

    /// Reverts file changes ([`checkpoint::plan::revert`]): a preview with
    /// its token, or (with the preview's token) the files restored and a
    /// `Reverted` record written, so the next undo goes further back.
    pub(crate) async fn revert_files(
        &mut self,
        request: &RevertRequest,
    ) -> Result<RevertReport, RevertError> {
        let chosen = match self
            .conversation
            .file_checkpoints()
            .select_for(&request.target, request.force)
        {
            // Nothing recorded because checkpoints are off: say why.
            Err(RevertError::NothingToRevert) => {
                return Err(match self.checkpoints.off(&self.project.checkpoints) {
                    Some(off) => RevertError::Off(off.to_string()),
                    None => RevertError::NothingToRevert,
                });
            }
            other => other?,
        };
        if let Some(off @ checkpoint::Off::NoGit(_)) =
            self.checkpoints.off(&self.project.checkpoints)
        {
            return Err(RevertError::Off(off.to_string()));
        }
        let fs = self.services.fs.clone();
        let editor = fs.edits_through_editor().then_some(fs.as_ref());
        let report =
            checkpoint::plan::revert(self.checkpoints.repo(), &chosen, request, editor).await?;
        if report.applied {
            self.record(&Record::Reverted {
                ids: report.checkpoint_ids.clone(),
                paths: report.reverted.clone(),
                conflicts: report.conflicts.clone(),
            });
        }
        Ok(report)
    }
}
