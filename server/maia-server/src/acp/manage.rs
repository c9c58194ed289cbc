//! Requests on an open session: prompt (the session decides whether it
//! runs; the request id is kept by its turn's id), mode and config options
//! (answered from the session's state), title,
//! close, delete, archive and list.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol_schema::v1::{
    ConfigOptionUpdate, CurrentModeUpdate, ListSessionsRequest, ListSessionsResponse,
    PromptRequest, SessionArchiveFilter, SessionInfo, SessionUpdate,
    SetSessionConfigOptionResponse, SetSessionTitleRequest, SetSessionTitleResponse,
};
use maia_rpc::{ErrorCode, Id, RpcError};
use serde_json::{Value, json};

use super::{
    Agent, CLOSE_WAIT, LIST_PAGE, SessionEntry, convert, invalid_params, to_value, unknown_session,
};

impl Agent {
    pub(super) fn set_mode(
        &self,
        req: &agent_client_protocol_schema::v1::SetSessionModeRequest,
    ) -> Result<Value, RpcError> {
        let session_id = req.session_id.0.to_string();
        let entry = self
            .entry(&session_id)
            .ok_or_else(|| unknown_session(&session_id))?;
        let mode = maia_core::Mode::from_id(&req.mode_id.0)
            .ok_or_else(|| invalid_params(format!("unknown mode `{}`", req.mode_id.0)))?;
        entry
            .handle
            .set_mode(mode)
            .map_err(|refusal| invalid_params(refusal.to_string()))?;
        // The mode config option as the session now has it.
        let options = entry.choices.lock().options(&entry.handle.state());
        self.send_update(
            &session_id,
            SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(options)),
        );
        Ok(json!({}))
    }

    pub(super) fn set_config_option(
        &self,
        req: &agent_client_protocol_schema::v1::SetSessionConfigOptionRequest,
    ) -> Result<Value, RpcError> {
        let session_id = req.session_id.0.to_string();
        let entry = self
            .entry(&session_id)
            .ok_or_else(|| unknown_session(&session_id))?;
        use agent_client_protocol_schema::v1::SessionConfigOptionValue;
        let config_id = req.config_id.0.to_string();
        let value = match &req.value {
            SessionConfigOptionValue::ValueId { value } => Ok(value.0.to_string()),
            SessionConfigOptionValue::Boolean { value } => Err(*value),
            _ => return Err(invalid_params("this option value is not understood")),
        };
        match (config_id.as_str(), value) {
            (convert::MODEL_OPTION, Ok(value)) => {
                // The policy's reason first: its models are not listed.
                if let Some(Err(refusal)) = entry.handle.policy().map(|p| p.check_model(&value)) {
                    return Err(invalid_params(refusal.to_string()));
                }
                let mut choices = entry.choices.lock();
                if !choices.models.contains(&value)
                    && entry.handle.state().model.as_deref() != Some(value.as_str())
                {
                    return Err(invalid_params(format!("unknown model `{value}`")));
                }
                entry
                    .handle
                    .set_model(value.clone())
                    .map_err(|refusal| invalid_params(refusal.to_string()))?;
                // A model that takes no effort is sent none.
                if !choices.takes_effort(Some(&value)) && choices.effort.take().is_some() {
                    entry
                        .handle
                        .set_option(maia_core::REASONING_EFFORT, Value::Null);
                }
            }
            (convert::MODE_OPTION, Ok(value)) => {
                let mode = maia_core::Mode::from_id(&value)
                    .ok_or_else(|| invalid_params(format!("unknown mode `{value}`")))?;
                entry
                    .handle
                    .set_mode(mode)
                    .map_err(|refusal| invalid_params(refusal.to_string()))?;
                self.send_update(
                    &session_id,
                    SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode.id())),
                );
            }
            (convert::EFFORT_OPTION, Ok(value))
                if entry
                    .choices
                    .lock()
                    .takes_effort(entry.handle.state().model.as_deref()) =>
            {
                let effort = if value == convert::EFFORT_DEFAULT {
                    None
                } else if convert::EFFORTS.contains(&value.as_str()) {
                    Some(value)
                } else {
                    return Err(invalid_params(format!(
                        "unknown reasoning effort `{value}`"
                    )));
                };
                entry.handle.set_option(
                    maia_core::REASONING_EFFORT,
                    effort.clone().map_or(Value::Null, Value::String),
                );
                entry.choices.lock().effort = effort;
            }
            (convert::THINKING_OPTION, Err(show)) if entry.choices.lock().booleans => {
                entry
                    .handle
                    .set_option(convert::THINKING_OPTION, Value::Bool(show));
                entry.choices.lock().show_thinking = show;
            }
            (convert::MODEL_OPTION | convert::MODE_OPTION | convert::EFFORT_OPTION, Err(_)) => {
                return Err(invalid_params(format!("`{config_id}` takes a value id")));
            }
            (other, _) => return Err(invalid_params(format!("unknown config option `{other}`"))),
        }
        let options = entry.choices.lock().options(&entry.handle.state());
        to_value(&SetSessionConfigOptionResponse::new(options))
    }

    /// `session/set_title` (unstable): the open session is renamed as by
    /// `/rename` (its title and its file name, told as a
    /// `session_info_update`); the answer is the title kept (the name
    /// `/rename` would take: characters a file name cannot hold become
    /// spaces). An empty title, or one with nothing a name can hold, is
    /// `-32602`.
    pub(super) fn set_title(self: &Arc<Self>, id: Id, req: SetSessionTitleRequest) {
        let session_id = req.session_id.0.to_string();
        if req.title.trim().is_empty() {
            self.conn
                .respond(id, Err(invalid_params("the title is empty")));
            return;
        }
        let Some(entry) = self.entry(&session_id) else {
            self.conn.respond(id, Err(unknown_session(&session_id)));
            return;
        };
        let answer = match entry.handle.rename(&req.title) {
            Ok(answer) => answer,
            Err(e) => {
                self.conn.respond(id, Err(invalid_params(e)));
                return;
            }
        };
        let conn = self.conn.clone();
        tokio::spawn(async move {
            let result = match answer.await {
                Ok(Ok(title)) => to_value(&SetSessionTitleResponse::new(title)),
                Ok(Err(e)) => Err(invalid_params(format!("cannot rename: {e}"))),
                Err(_) => Err(RpcError::new(ErrorCode::InternalError, "the session ended")),
            };
            conn.respond(id, result);
        });
    }

    /// `session/archive` / `session/unarchive` (unstable): the thread is
    /// marked in every folder that holds it (its journals untouched; an open
    /// session stays open). `-32002` when no folder holds it.
    pub(super) fn archive_session(
        &self,
        session_id: &str,
        archived: bool,
    ) -> Result<Value, RpcError> {
        let mut cwds = self.all_folders();
        if let Some(entry) = self.entry(session_id) {
            cwds.insert(entry.handle.cwd().to_path_buf());
        }
        let mut found = false;
        for cwd in cwds {
            found |= self
                .engine
                .archive_session(&cwd, session_id, archived)
                .map_err(|e| RpcError::new(ErrorCode::InternalError, e.to_string()))?;
        }
        if found {
            Ok(json!({}))
        } else {
            Err(unknown_session(session_id))
        }
    }

    /// Cancels a running turn and answers once the session has stopped, so
    /// a cancelled prompt is answered (`cancelled`) before the close.
    pub(super) fn close_session(&self, id: Id, session_id: &str) {
        let Some(entry) = self
            .lock_sessions()
            .remove(session_id)
            .and_then(|slot| slot.entry())
        else {
            self.conn.respond(id, Err(unknown_session(session_id)));
            return;
        };
        entry.handle.cancel();
        let done = entry.done.clone();
        // The entry holds the session's handle: dropping it ends the session
        // once its turn is over.
        drop(entry);
        let conn = self.conn.clone();
        tokio::spawn(async move {
            if tokio::time::timeout(CLOSE_WAIT, done.cancelled())
                .await
                .is_err()
            {
                tracing::warn!("the closed session did not stop in time");
            }
            conn.respond(id, Ok(json!({})));
        });
    }

    /// Deletes every file of a thread, in every folder that may hold it;
    /// `removed` is the live session it was, if any.
    pub(super) fn delete_session(
        &self,
        session_id: &str,
        removed: Option<Arc<SessionEntry>>,
    ) -> Result<Value, RpcError> {
        let mut cwds = self.all_folders();
        if let Some(entry) = removed {
            entry.handle.cancel();
            cwds.insert(entry.handle.cwd().to_path_buf());
        }
        for cwd in cwds {
            if let Err(e) = self.engine.delete_session(&cwd, session_id) {
                return Err(RpcError::new(ErrorCode::InternalError, e.to_string()));
            }
        }
        Ok(json!({}))
    }

    /// The folders this user's threads may be in: the index under
    /// `~/.maia` and every folder this process has seen.
    pub(super) fn all_folders(&self) -> BTreeSet<PathBuf> {
        let mut folders: BTreeSet<PathBuf> = self
            .known_cwds
            .lock()
            .map(|k| k.clone())
            .unwrap_or_default();
        folders.extend(self.engine.session_folders());
        folders
    }

    /// `session/list`: the folders are read one by one, and the walk stops
    /// (answered `-32800`) once `cancel` fires.
    pub(super) fn list_sessions(
        &self,
        req: &ListSessionsRequest,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<Value, RpcError> {
        let cwds: Vec<PathBuf> = match &req.cwd {
            Some(cwd) if !cwd.is_absolute() => {
                return Err(invalid_params("cwd must be an absolute path"));
            }
            Some(cwd) => {
                // `session/delete` (which has no cwd) searches the listed folders.
                if let Ok(mut known) = self.known_cwds.lock() {
                    known.insert(cwd.clone());
                }
                vec![cwd.clone()]
            }
            None => self.all_folders().into_iter().collect(),
        };
        let wanted = |archived: bool| match &req.archived {
            None | Some(SessionArchiveFilter::Exclude) => Ok(!archived),
            Some(SessionArchiveFilter::Include) => Ok(true),
            Some(SessionArchiveFilter::Only) => Ok(archived),
            Some(other) => Err(invalid_params(format!(
                "unknown archived filter {}",
                serde_json::to_string(other).unwrap_or_default()
            ))),
        };
        wanted(false)?;
        let start = match &req.cursor {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .map_err(|_| invalid_params(format!("invalid cursor `{cursor}`")))?,
        };
        let mut all: Vec<maia_core::SessionSummary> = Vec::new();
        for cwd in &cwds {
            if cancel.is_cancelled() {
                return Err(maia_rpc::cancelled());
            }
            for session in self.engine.list_sessions(cwd) {
                if wanted(session.archived)? {
                    all.push(session);
                }
            }
        }
        all.sort_by(|a, b| b.updated_at.cmp(&a.updated_at));
        let sessions: Vec<SessionInfo> = all
            .iter()
            .skip(start)
            .take(LIST_PAGE)
            .map(|s| {
                SessionInfo::new(s.id.clone(), s.cwd.clone())
                    .additional_directories(s.roots.clone())
                    .title(s.title.clone().unwrap_or_else(|| s.name.clone()))
                    .updated_at(s.updated_at.clone())
                    .archived(s.archived.then_some(true))
            })
            .collect();
        let mut response = ListSessionsResponse::new(sessions);
        if all.len() > start + LIST_PAGE {
            response.next_cursor = Some((start + LIST_PAGE).to_string());
        }
        to_value(&response)
    }

    pub(super) fn prompt(&self, id: &Id, req: PromptRequest) -> Result<(), RpcError> {
        let session_id = req.session_id.0.to_string();
        let entry = self
            .entry(&session_id)
            .ok_or_else(|| unknown_session(&session_id))?;
        let undone = super::undone::from_meta(req.meta.as_ref())?;
        let shown = entry
            .book
            .as_ref()
            .map(|_| serde_json::to_value(&req.prompt));
        let parts: Vec<_> = undone
            .into_iter()
            .chain(super::prompt::prompt_parts(req.prompt)?)
            .collect();
        // Held while the turn is claimed: the pump answers it only once
        // the request id is kept under the turn's id.
        let mut pending = super::forward::lock(&entry.pending);
        // Held too: the other connection reads the prompt at its turn's events.
        let mut book = entry.book.as_ref().map(|b| super::forward::lock(b));
        maia_otel::prompt(&session_id, req.meta.as_ref(), &parts);
        // The session alone decides whether a turn runs (and says why not).
        let turn = entry.handle.prompt(parts).map_err(|busy| {
            maia_otel::prompt_refused(&session_id);
            RpcError::new(ErrorCode::InvalidRequest, busy.to_string())
        })?;
        if let (Some(book), Some(Ok(shown))) = (book.as_mut(), shown) {
            super::mirror::note_prompt(book, turn, shown);
        }
        pending.insert(turn, id.clone());
        Ok(())
    }
}
