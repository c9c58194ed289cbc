//! `session/fork` (ACP `unstable_session_fork`, with `cursorId` of
//! `unstable_session_cursors`): a new session whose history is the
//! source's, or the source's before a cursor (the cursors are the user
//! messages', announced by `cursor_update`). The fork shares the working
//! tree unless `_meta.maia.worktree` is `true`: then it works in a new git
//! worktree on a new branch beside the project (`maia_core::timeline`).
//! The answer is `session/new`'s, plus `_meta.maia.worktree {path,
//! branch}` for a worktree fork.

use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol_schema::v1::ForkSessionRequest;
use maia_core::timeline::{Fork, ForkError};
use maia_rpc::{ErrorCode, Id, RpcError};
use serde_json::{Value, json};

use super::open::{Open, check_cwd};
use super::{Agent, convert, invalid_params, unknown_session};

/// Whether the request asks for a worktree (`_meta.maia.worktree`).
fn wants_worktree(request: &ForkSessionRequest) -> bool {
    request
        .meta
        .as_ref()
        .and_then(|m| m.get("maia"))
        .and_then(|m| m.get("worktree"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn fork_error(e: ForkError, source: &str) -> RpcError {
    match e {
        ForkError::NotFound(_) => unknown_session(source),
        ForkError::UnknownCursor(ref cursor) => {
            invalid_params(e.to_string()).with_data(json!({ "cursorId": cursor }))
        }
        ForkError::Store(e) => RpcError::new(ErrorCode::InternalError, e.to_string()),
    }
}

impl Agent {
    /// Handles `session/fork`: checked, the fork saved, then opened as a
    /// load is (on a task: it may create a worktree and wait for the model
    /// list).
    pub(super) fn fork(self: &Arc<Self>, id: Id, request: ForkSessionRequest) {
        if let Err(e) = check_cwd(&request.cwd, request.system_prompt.is_some()) {
            return self.conn.respond(id, Err(e));
        }
        let source = request.session_id.0.to_string();
        // The source's folder: where its open session works, else the
        // request's. An open source first takes what the client wrote
        // before the fork (a rewind), so the fork sees its journal after.
        let open = self.entry(&source);
        let source_cwd = open
            .as_ref()
            .map_or_else(|| request.cwd.clone(), |e| e.handle.cwd().to_path_buf());
        let reached = open.map(|e| e.handle.reached());
        let agent = self.clone();
        let cancel = self.conn.cancellation(&id);
        tokio::spawn(async move {
            if let Some(reached) = reached {
                reached.await;
            }
            match agent.save_fork(&request, &source, source_cwd).await {
                Ok((cwd, opened, meta)) => {
                    let roots = maia_core::workspace::additional_roots(
                        &cwd,
                        &request.additional_directories,
                        agent.engine.home(),
                    )
                    .unwrap_or_default();
                    let mcp = convert::mcp_servers(request.mcp_servers, &cwd);
                    let generation = agent
                        .generations
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let how = Open::Fork { id: opened, meta };
                    agent
                        .open_session(id, (cwd, roots), how, mcp, (None, generation, cancel))
                        .await;
                }
                Err(e) => agent.conn.respond(id, Err(e)),
            }
        });
    }

    /// Saves the fork `request` asks for; its folder, its id and the
    /// answer's `_meta`.
    async fn save_fork(
        &self,
        request: &ForkSessionRequest,
        source: &str,
        source_cwd: PathBuf,
    ) -> Result<(PathBuf, String, Option<serde_json::Map<String, Value>>), RpcError> {
        let cursor = request.cursor_id.as_ref().map(|c| c.0.to_string());
        let (from, sid) = (source_cwd.clone(), source.to_owned());
        // The cursor is checked before a worktree is made.
        let fork =
            tokio::task::spawn_blocking(move || Fork::prepare(&from, &sid, cursor.as_deref()))
                .await
                .map_err(|e| RpcError::new(ErrorCode::InternalError, e.to_string()))?
                .map_err(|e| fork_error(e, source))?;
        let mut making_worktree = None;
        let (cwd, meta) = if wants_worktree(request) {
            let sessions = maia_core::store::sessions_dir(&source_cwd);
            let (worktree, making) = maia_core::worktree::add(&source_cwd, &sessions)
                .await
                .map_err(|e| invalid_params(format!("cannot fork into a worktree: {e}")))?;
            making_worktree = Some(making);
            let mut meta = serde_json::Map::new();
            meta.insert(
                "maia".into(),
                json!({ "worktree": {
                    "path": worktree.path,
                    "branch": worktree.branch,
                    "cwd": worktree.cwd,
                } }),
            );
            (worktree.cwd, Some(meta))
        } else {
            (request.cwd.clone(), None)
        };
        let (engine, target) = (self.engine.clone(), cwd.clone());
        let opened = tokio::task::spawn_blocking(move || engine.save_fork(&fork, &target))
            .await
            .map_err(|e| RpcError::new(ErrorCode::InternalError, e.to_string()))
            .and_then(|saved| saved.map_err(|e| fork_error(e, source)));
        // Saved: the worktree is the fork's; else it goes.
        let opened = match (opened, making_worktree) {
            (Ok(opened), making) => {
                if let Some(making) = making {
                    making.done();
                }
                opened
            }
            (Err(e), Some(making)) => {
                making.undo().await;
                return Err(e);
            }
            (Err(e), None) => return Err(e),
        };
        if let Ok(mut known) = self.known_cwds.lock() {
            known.insert(cwd.clone());
        }
        Ok((cwd, opened, meta))
    }
}
