//! The ACP v2 draft's shapes of what MAIA says about a session: each v1
//! `session/update` the front door builds (`convert`) turned into the v2
//! update(s) of the schema crate's `v2` module, and the permission request
//! with its `subject`.
//!
//! Where v1 and v2 spell a value the same (content blocks, session info,
//! usage, locations, plan entries) the v1 value is read back as its v2
//! type; where they differ it is rebuilt: commands are tagged `command`,
//! their hint a `text` input; config options say `configId`; message
//! chunks carry their required `messageId`; a `tool_call` and a
//! `tool_call_update` are both one `tool_call_update` upsert; a diff is a
//! file change (`add` / `modify`) with a `git_patch`; the task list is a
//! `plan_update` of items; the v1 mode update has no v2 counterpart (the
//! mode is a config option there). A v1 update v2 cannot read is dropped.

use agent_client_protocol_schema::MaybeUndefined;
use agent_client_protocol_schema::v1;
use agent_client_protocol_schema::v2::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, Command, ContentChunk, Diff,
    DiffChange, DiffFileType, PlanUpdate, PlanUpdateContent, RequestPermissionSubject,
    SessionUpdate, TextCommandInput, ToolCallCancelCapabilities, ToolCallCapabilities,
    ToolCallContent, ToolCallId, ToolCallStatus, ToolCallUpdate, ToolKind,
    UpdateSessionNotification,
};
use maia_core::PermissionRequest;
use serde_json::Value;

/// `value` read back as `T`: the same JSON in both versions.
fn same<T: serde::de::DeserializeOwned>(value: &impl serde::Serialize) -> Option<T> {
    let json = serde_json::to_value(value).ok()?;
    match serde_json::from_value(json) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::debug!("a v1 value has no v2 reading: {e}");
            None
        }
    }
}

/// The `session/update` params of `update` for `session_id`.
pub(crate) fn notification(session_id: &str, update: SessionUpdate) -> serde_json::Result<Value> {
    serde_json::to_value(UpdateSessionNotification::new(
        session_id.to_owned(),
        update,
    ))
}

/// What a v2 client is told for the v1 update `update` (nothing, one or two
/// updates).
pub(crate) fn updates(update: v1::SessionUpdate) -> Vec<SessionUpdate> {
    use v1::SessionUpdate as U1;
    let one = |u: Option<SessionUpdate>| u.into_iter().collect();
    match update {
        U1::UserMessageChunk(chunk) => one(chunk_of(&chunk).map(SessionUpdate::UserMessageChunk)),
        U1::AgentMessageChunk(chunk) => one(chunk_of(&chunk).map(SessionUpdate::AgentMessageChunk)),
        U1::AgentThoughtChunk(chunk) => one(chunk_of(&chunk).map(SessionUpdate::AgentThoughtChunk)),
        U1::ToolCall(call) => one(Some(SessionUpdate::ToolCallUpdate(tool_call(&call)))),
        U1::ToolCallUpdate(update) => one(Some(SessionUpdate::ToolCallUpdate(tool_call_update(
            &update,
        )))),
        U1::Plan(plan) => {
            let entries = plan.entries.iter().filter_map(same).collect();
            one(Some(SessionUpdate::PlanUpdate(PlanUpdate::new(
                PlanUpdateContent::items(TODO_PLAN_ID, entries),
            ))))
        }
        // The mode is the `mode` config option on v2 (its update follows).
        U1::CurrentModeUpdate(_) => Vec::new(),
        U1::AvailableCommandsUpdate(update) => one(Some(SessionUpdate::AvailableCommandsUpdate(
            AvailableCommandsUpdate::new(update.available_commands.iter().map(command).collect()),
        ))),
        U1::ConfigOptionUpdate(update) => {
            let mut json = serde_json::to_value(&update).unwrap_or_default();
            config_options(&mut json["configOptions"]);
            json["sessionUpdate"] = "config_option_update".into();
            one(serde_json::from_value(json).ok().filter(known))
        }
        other => one(same::<SessionUpdate>(&other).filter(known)),
    }
}

/// A v1 command as v2's (`type: "command"`, its hint a `text` input).
fn command(command: &v1::AvailableCommand) -> AvailableCommand {
    let input = match &command.input {
        Some(v1::AvailableCommandInput::Unstructured(input)) => Some(AvailableCommandInput::Text(
            TextCommandInput::new(input.hint.clone()),
        )),
        _ => None,
    };
    AvailableCommand::Command(
        Command::new(command.name.clone(), command.description.clone()).input(input),
    )
}

/// v1 config options (`id`) in v2's spelling (`configId`), in place.
pub(crate) fn config_options(options: &mut Value) {
    for option in options.as_array_mut().into_iter().flatten() {
        if let Some(object) = option.as_object_mut()
            && let Some(id) = object.remove("id")
        {
            object.insert("configId".into(), id);
        }
    }
}

/// The id of the task-list plan (as on v1 with `plan` updates).
const TODO_PLAN_ID: &str = "maia-todos";

/// Whether `update` is one the v2 schema names (not its catch-all).
fn known(update: &SessionUpdate) -> bool {
    !matches!(update, SessionUpdate::Other(_))
}

fn chunk_of(chunk: &v1::ContentChunk) -> Option<ContentChunk> {
    let content = same(&chunk.content)?;
    let id = chunk
        .message_id
        .as_ref()
        .map_or_else(|| "message".to_owned(), |id| id.0.to_string());
    let v2 = ContentChunk::new(content, id);
    Some(match &chunk.meta {
        Some(meta) => v2.meta(meta.clone()),
        None => v2,
    })
}

/// A v1 `tool_call` as the v2 upsert that creates it.
pub(crate) fn tool_call(call: &v1::ToolCall) -> ToolCallUpdate {
    let mut v2 = ToolCallUpdate::new(call.tool_call_id.0.to_string())
        .title(call.title.clone())
        .content(call.content.iter().filter_map(content).collect::<Vec<_>>())
        .locations(call.locations.iter().filter_map(same).collect::<Vec<_>>());
    if let Some(kind) = same::<ToolKind>(&call.kind) {
        v2 = v2.kind(kind);
    }
    if let Some(status) = same::<ToolCallStatus>(&call.status) {
        v2 = v2.capabilities(cancellable(&status));
        v2 = v2.status(status);
    }
    if let Some(name) = &call.name {
        v2 = v2.name(name.clone());
    }
    if let Some(raw) = &call.raw_input {
        v2 = v2.raw_input(raw.clone());
    }
    if let Some(raw) = &call.raw_output {
        v2 = v2.raw_output(raw.clone());
    }
    v2
}

/// What a call in `status` offers the client: `tool_call/cancel` while it
/// is pending or running, nothing once it ended (`null` clears it).
fn cancellable(status: &ToolCallStatus) -> MaybeUndefined<ToolCallCapabilities> {
    match status {
        ToolCallStatus::Pending | ToolCallStatus::InProgress => MaybeUndefined::Value(
            ToolCallCapabilities::new().cancel(ToolCallCancelCapabilities::new()),
        ),
        _ => MaybeUndefined::Null,
    }
}

/// A v1 `tool_call_update`: only the fields it sets.
fn tool_call_update(update: &v1::ToolCallUpdate) -> ToolCallUpdate {
    let fields = &update.fields;
    let mut v2 = ToolCallUpdate::new(update.tool_call_id.0.to_string());
    if let Some(title) = &fields.title {
        v2 = v2.title(title.clone());
    }
    if let Some(kind) = fields.kind.as_ref().and_then(same::<ToolKind>) {
        v2 = v2.kind(kind);
    }
    if let Some(status) = fields.status.as_ref().and_then(same::<ToolCallStatus>) {
        v2 = v2.capabilities(cancellable(&status));
        v2 = v2.status(status);
    }
    if let Some(items) = &fields.content {
        v2 = v2.content(items.iter().filter_map(content).collect::<Vec<_>>());
    }
    if let Some(locations) = &fields.locations {
        v2 = v2.locations(locations.iter().filter_map(same).collect::<Vec<_>>());
    }
    if let Some(raw) = &fields.raw_input {
        v2 = v2.raw_input(raw.clone());
    }
    if let Some(raw) = &fields.raw_output {
        v2 = v2.raw_output(raw.clone());
    }
    v2
}

fn content(item: &v1::ToolCallContent) -> Option<ToolCallContent> {
    match item {
        v1::ToolCallContent::Diff(diff) => Some(ToolCallContent::Diff(file_change(
            &diff.path,
            diff.old_text.as_deref(),
            &diff.new_text,
        ))),
        other => same(other),
    }
}

/// A text file's change as a v2 file change: `add` when it did not exist,
/// else `modify`, with its `git_patch`.
pub(crate) fn file_change(path: &std::path::Path, old: Option<&str>, new: &str) -> Diff {
    let change = match old {
        None => DiffChange::add(path.to_path_buf()),
        Some(_) => DiffChange::modify(path.to_path_buf()),
    };
    Diff::patch(
        git_patch(path, old, new),
        vec![change.file_type(DiffFileType::Text)],
    )
}

/// The change as `git diff` prints it (paths as git shows absolute ones:
/// `a/` and `b/` before the path without its leading `/`).
pub(crate) fn git_patch(path: &std::path::Path, old: Option<&str>, new: &str) -> String {
    let name = path.to_string_lossy();
    let name = name.trim_start_matches('/');
    let (a, b) = (format!("a/{name}"), format!("b/{name}"));
    let mut text = format!("diff --git {a} {b}\n");
    if old.is_none() {
        text.push_str("new file mode 100644\n");
    }
    let from = if old.is_some() { a } else { "/dev/null".into() };
    let body = similar::TextDiff::from_lines(old.unwrap_or(""), new)
        .unified_diff()
        .context_radius(3)
        .header(&from, &b)
        .to_string();
    text.push_str(&body);
    text
}

/// The v2 `session/request_permission` params for `request`: titled by
/// its tool call; a command's subject (a call of kind `execute` with a
/// `command`) is the command with the call's id, any other's the tool call
/// itself.
pub(crate) fn permission_request(
    session_id: &str,
    request: &PermissionRequest,
    cwd: &std::path::Path,
) -> serde_json::Result<Value> {
    use agent_client_protocol_schema::v2::{
        CommandPermissionSubject, PermissionOption, PermissionOptionKind, RequestPermissionRequest,
        ToolCallPermissionSubject,
    };
    let v1_params = super::super::convert::permission_request(session_id, request)?;
    let view = &request.tool_call;
    let call: v1::ToolCallUpdate = serde_json::from_value(v1_params["toolCall"].clone())?;
    let subject = match view.raw_input.get("command").and_then(Value::as_str) {
        Some(command) if view.kind == Some(maia_tools::ToolKind::Execute) => {
            RequestPermissionSubject::Command(
                CommandPermissionSubject::new(command, cwd.to_path_buf())
                    .tool_call_id(ToolCallId::new(view.id.clone())),
            )
        }
        _ => RequestPermissionSubject::ToolCall(Box::new(ToolCallPermissionSubject::new(
            tool_call_update(&call),
        ))),
    };
    let options = request
        .options
        .iter()
        .map(|o| {
            let kind = match o.kind {
                maia_core::ChoiceKind::AllowOnce => PermissionOptionKind::AllowOnce,
                maia_core::ChoiceKind::AllowAlways => PermissionOptionKind::AllowAlways,
                maia_core::ChoiceKind::RejectOnce => PermissionOptionKind::RejectOnce,
                maia_core::ChoiceKind::RejectAlways => PermissionOptionKind::RejectAlways,
            };
            PermissionOption::new(o.id.clone(), o.label.clone(), kind)
        })
        .collect();
    serde_json::to_value(
        RequestPermissionRequest::new(session_id.to_owned(), view.title.clone(), options)
            .subject(subject),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_is_an_add_with_a_git_patch() {
        let patch = git_patch(std::path::Path::new("/p/a.txt"), None, "x\n");
        assert!(patch.starts_with("diff --git a/p/a.txt b/p/a.txt\nnew file mode 100644\n"));
        assert!(patch.contains("--- /dev/null\n+++ b/p/a.txt\n"), "{patch}");
        assert!(patch.contains("+x\n"), "{patch}");
        let diff = serde_json::to_value(file_change(std::path::Path::new("/p/a.txt"), None, "x\n"))
            .unwrap();
        assert_eq!(diff["changes"][0]["operation"], "add", "{diff}");
        assert_eq!(diff["patch"]["format"], "git_patch", "{diff}");
    }

    #[test]
    fn a_changed_file_is_a_modify() {
        let patch = git_patch(std::path::Path::new("/p/a.txt"), Some("x\n"), "y\n");
        assert!(patch.contains("--- a/p/a.txt\n+++ b/p/a.txt\n"), "{patch}");
        assert!(patch.contains("-x\n+y\n"), "{patch}");
    }
}
