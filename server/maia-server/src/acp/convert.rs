//! Engine events and values in ACP v1 wire types.

use agent_client_protocol_schema::v1::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, ClientCapabilities,
    CompactionStatus, CompactionUpdate, ContentBlock, ContentChunk, Cost, Diff, ImageContent,
    MessageId, Notice, NoticeSeverity, PermissionOption, PermissionOptionKind, Plan, PlanEntry,
    PlanEntryPriority, PlanEntryStatus, PlanUpdate, PlanUpdateContent, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, SessionInfoUpdate, SessionNotification,
    SessionUpdate, StopReason, Terminal, ToolCall, ToolCallContent, ToolCallLocation,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind, UnstructuredCommandInput,
    Usage, UsageUpdate,
};
use maia_core::{
    ChoiceKind, CompactionState, Event, PermissionReply, PermissionRequest, ToolCallPatch,
    ToolCallView, ToolContent, ToolStatus,
};
use maia_rpc::RequestError;
use serde_json::Value;

pub use super::options::{
    EFFORT_DEFAULT, EFFORT_OPTION, EFFORTS, MODE_OPTION, MODEL_OPTION, THINKING_OPTION,
    config_options, effort_option, modes, thinking_option,
};

pub fn stop_reason(stop: maia_core::StopReason) -> StopReason {
    match stop {
        maia_core::StopReason::EndTurn => StopReason::EndTurn,
        maia_core::StopReason::MaxTokens => StopReason::MaxTokens,
        maia_core::StopReason::MaxTurnRequests => StopReason::MaxTurnRequests,
        maia_core::StopReason::Refusal => StopReason::Refusal,
        maia_core::StopReason::Cancelled => StopReason::Cancelled,
    }
}

fn kind(kind: Option<maia_tools::ToolKind>) -> ToolKind {
    match kind {
        Some(maia_tools::ToolKind::Read) => ToolKind::Read,
        Some(maia_tools::ToolKind::Edit) => ToolKind::Edit,
        Some(maia_tools::ToolKind::Execute) => ToolKind::Execute,
        Some(maia_tools::ToolKind::Search) => ToolKind::Search,
        Some(maia_tools::ToolKind::Fetch) => ToolKind::Fetch,
        None => ToolKind::Other,
    }
}

fn status(status: ToolStatus) -> ToolCallStatus {
    match status {
        ToolStatus::Pending => ToolCallStatus::Pending,
        ToolStatus::InProgress => ToolCallStatus::InProgress,
        ToolStatus::Completed => ToolCallStatus::Completed,
        ToolStatus::Failed => ToolCallStatus::Failed,
    }
}

fn content(items: &[ToolContent]) -> Vec<ToolCallContent> {
    items
        .iter()
        .map(|item| match item {
            ToolContent::Text { text } => ToolCallContent::from(ContentBlock::from(text.clone())),
            ToolContent::Diff { diff } => ToolCallContent::Diff(
                Diff::new(diff.path.clone(), diff.new_text.clone()).old_text(diff.old_text.clone()),
            ),
            ToolContent::Terminal { terminal_id } => {
                ToolCallContent::Terminal(Terminal::new(terminal_id.clone()))
            }
        })
        .collect()
}

fn locations(view: &ToolCallView) -> Vec<ToolCallLocation> {
    view.locations
        .iter()
        .map(|p| ToolCallLocation::new(p.clone()))
        .collect()
}

fn tool_call(view: &ToolCallView) -> ToolCall {
    ToolCall::new(view.id.clone(), view.title.clone())
        .name(view.name.clone())
        .kind(kind(view.kind))
        .status(status(view.status))
        .content(content(&view.content))
        .locations(locations(view))
        .raw_input(view.raw_input.clone())
}

/// A hook's run as a finished tool call (a collapsed card): which hook,
/// its exit code and time in the title, what it printed as its content,
/// the facts in `rawInput` and `_meta.maia.hook`.
fn hook_card(report: &maia_core::HookReport) -> ToolCall {
    let ended = match report.exit_code {
        Some(code) => format!("exit {code}"),
        None => report.outcome.to_owned(),
    };
    let on = report
        .subject
        .as_deref()
        .map(|s| format!(" ({s})"))
        .unwrap_or_default();
    let title = format!(
        "Hook {}{on}: {} — {ended}, {} ms",
        report.event, report.command, report.duration_ms
    );
    let status = match report.outcome {
        "ok" | "blocked" => ToolCallStatus::Completed,
        _ => ToolCallStatus::Failed,
    };
    let facts = serde_json::json!({
        "event": report.event,
        "command": report.command,
        "matched": report.subject,
        "exitCode": report.exit_code,
        "outcome": report.outcome,
        "durationMs": report.duration_ms,
    });
    let mut meta = serde_json::Map::new();
    meta.insert("maia".into(), serde_json::json!({ "hook": facts.clone() }));
    let content = match report.output.is_empty() {
        true => Vec::new(),
        false => vec![ToolCallContent::from(ContentBlock::from(
            report.output.clone(),
        ))],
    };
    ToolCall::new(report.id.clone(), title)
        .name("hook".to_owned())
        .kind(ToolKind::Other)
        .status(status)
        .content(content)
        .raw_input(facts)
        .meta(meta)
}

fn tool_call_update(patch: &ToolCallPatch) -> ToolCallUpdate {
    let mut fields = ToolCallUpdateFields::new();
    if let Some(s) = patch.status {
        fields = fields.status(status(s));
    }
    if let Some(items) = &patch.content {
        fields = fields.content(content(items));
    }
    if let Some(raw) = &patch.raw_output {
        fields = fields.raw_output(raw.clone());
    }
    ToolCallUpdate::new(patch.id.clone(), fields)
}

/// Whether the client accepts `notice` updates.
fn takes_notices(caps: &ClientCapabilities) -> bool {
    caps.session.as_ref().is_some_and(|s| s.notices.is_some())
}

/// The task list: `plan_update` for clients that advertise `plan`, else `plan`.
fn plan(todos: &[maia_core::session_tools::Todo], caps: &ClientCapabilities) -> SessionUpdate {
    use maia_core::session_tools::TodoStatus;
    let entries: Vec<PlanEntry> = todos
        .iter()
        .map(|t| {
            let status = match t.status {
                TodoStatus::Pending => PlanEntryStatus::Pending,
                TodoStatus::InProgress => PlanEntryStatus::InProgress,
                TodoStatus::Completed => PlanEntryStatus::Completed,
            };
            let content = match (&t.active_form, t.status) {
                (Some(active), TodoStatus::InProgress) => active.clone(),
                _ => t.content.clone(),
            };
            PlanEntry::new(content, PlanEntryPriority::Medium, status)
        })
        .collect();
    if caps.plan.is_some() {
        SessionUpdate::PlanUpdate(PlanUpdate::new(PlanUpdateContent::items(
            TODO_PLAN_ID,
            entries,
        )))
    } else {
        SessionUpdate::Plan(Plan::new(entries))
    }
}

/// The id of the task-list plan.
const TODO_PLAN_ID: &str = "maia-todos";

/// The `name` of the tool call a compaction is shown as (for a client
/// without `session.compaction`): every `tool_call` carries one.
pub const COMPACTION_TOOL: &str = "Compact";

/// Whether the client shows compactions itself.
fn takes_compaction(caps: &ClientCapabilities) -> bool {
    caps.session
        .as_ref()
        .is_some_and(|s| s.compaction.is_some())
}

/// A compaction as `compaction_update` when the client has the capability,
/// else as a visible "think" tool call with the context size before/after.
fn compaction(id: String, state: CompactionState, caps: &ClientCapabilities) -> SessionUpdate {
    if takes_compaction(caps) {
        let update = match state {
            CompactionState::Started => CompactionUpdate::new(id, CompactionStatus::InProgress),
            CompactionState::Completed { summary, .. } => {
                CompactionUpdate::new(id, CompactionStatus::Completed)
                    .summary(vec![ContentBlock::from(summary)])
            }
            CompactionState::Failed(error) => {
                CompactionUpdate::new(id, CompactionStatus::Failed).error(error)
            }
            CompactionState::Cancelled => CompactionUpdate::new(id, CompactionStatus::Cancelled),
        };
        return SessionUpdate::CompactionUpdate(update);
    }
    let text = |t: String| vec![ToolCallContent::from(ContentBlock::from(t))];
    match state {
        CompactionState::Started => SessionUpdate::ToolCall(
            ToolCall::new(id, "Compacting conversation…")
                .name(COMPACTION_TOOL.to_owned())
                .kind(ToolKind::Think)
                .status(ToolCallStatus::InProgress),
        ),
        CompactionState::Completed {
            summary,
            before,
            after,
        } => SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            id,
            ToolCallUpdateFields::new()
                .status(ToolCallStatus::Completed)
                .content(text(format!(
                    "Context: ~{before} → ~{after} tokens\n\n{summary}"
                ))),
        )),
        CompactionState::Failed(error) => SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            id,
            ToolCallUpdateFields::new()
                .status(ToolCallStatus::Failed)
                .content(text(error)),
        )),
        CompactionState::Cancelled => SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            id,
            ToolCallUpdateFields::new()
                .status(ToolCallStatus::Failed)
                .content(text("Cancelled; the conversation is unchanged.".to_owned())),
        )),
    }
}

/// The `cursor_update` announcing the cursor before user message
/// `message_id` (its id is the message's), for a client with
/// `session.cursors`; `session/fork` takes it as `cursorId`.
pub fn cursor_update(message_id: &str, caps: &ClientCapabilities) -> Option<SessionUpdate> {
    use agent_client_protocol_schema::v1::{
        CursorAnchor, CursorAnchorPosition, CursorCapabilities, CursorForkCapabilities, CursorId,
        CursorMessageAnchor, CursorUpdate,
    };
    caps.session.as_ref()?.cursors.as_ref()?;
    let anchor = CursorAnchor::UserMessage(CursorMessageAnchor::new(
        MessageId::new(message_id.to_owned()),
        CursorAnchorPosition::Before,
    ));
    Some(SessionUpdate::CursorUpdate(
        CursorUpdate::new(CursorId::new(message_id.to_owned()))
            .anchor(anchor)
            .capabilities(CursorCapabilities::new().fork(CursorForkCapabilities::new())),
    ))
}

/// The `session/update` for an event, if it has one for this client.
pub fn session_update(event: Event, caps: &ClientCapabilities) -> Option<SessionUpdate> {
    Some(match event {
        Event::UserMessage {
            message_id,
            text,
            steer,
        } => {
            let chunk =
                ContentChunk::new(ContentBlock::from(text)).message_id(MessageId::new(message_id));
            SessionUpdate::UserMessageChunk(if steer {
                // A message sent while a turn ran (`_session/steering`).
                let mut meta = serde_json::Map::new();
                meta.insert("steering".into(), serde_json::json!(true));
                chunk.meta(meta)
            } else {
                chunk
            })
        }
        Event::UserImage {
            message_id,
            mime_type,
            data,
            name,
        } => {
            use base64::Engine;
            let mut image = ImageContent::new(
                base64::engine::general_purpose::STANDARD.encode(&data),
                mime_type,
            );
            if name.contains("://") {
                image = image.uri(name);
            }
            SessionUpdate::UserMessageChunk(
                ContentChunk::new(ContentBlock::Image(image))
                    .message_id(MessageId::new(message_id)),
            )
        }
        Event::Title(title) => SessionUpdate::SessionInfoUpdate(
            SessionInfoUpdate::new()
                .title(title)
                .updated_at(maia_core::store::iso8601(maia_core::store::now_secs())),
        ),
        Event::Notice { level, text } => {
            if !takes_notices(caps) {
                return None;
            }
            let severity = match level {
                maia_core::NoticeLevel::Info => NoticeSeverity::Info,
                maia_core::NoticeLevel::Warning => NoticeSeverity::Warning,
            };
            SessionUpdate::Notice(Notice::new(severity, text))
        }
        // A turn that did not do its job: a warning notice.
        Event::TurnUnfinished { text, .. } => {
            takes_notices(caps).then_some(())?;
            SessionUpdate::Notice(Notice::new(NoticeSeverity::Warning, text))
        }
        Event::ModelChanged(_) | Event::ModeChanged(_) => return None,
        Event::PlanProposed { id, markdown } => {
            // Clients without `plan` see the plan in the permission question.
            caps.plan.as_ref()?;
            SessionUpdate::PlanUpdate(PlanUpdate::new(PlanUpdateContent::markdown(id, markdown)))
        }
        Event::Plan(todos) => plan(&todos, caps),
        Event::Findings { id, findings } => SessionUpdate::ToolCall(review_findings(id, &findings)),
        Event::Commands(commands) => {
            SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(
                commands
                    .into_iter()
                    .map(|c| {
                        AvailableCommand::new(c.name, c.description).input(c.hint.map(|h| {
                            AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(h))
                        }))
                    })
                    .collect(),
            ))
        }
        Event::Usage {
            used,
            size,
            cost,
            map,
        } => {
            let update = UsageUpdate::new(used, size);
            // No `cost` when it is unknown: never a made-up number.
            let update = match cost {
                Some(amount) => update.cost(Cost::new(amount, maia_core::cost::CURRENCY)),
                None => update,
            };
            // The map of the context: `_meta.maia.contextMap` (docs/acp.md).
            SessionUpdate::UsageUpdate(match map.and_then(|m| serde_json::to_value(m).ok()) {
                Some(map) => {
                    let mut meta = serde_json::Map::new();
                    meta.insert("maia".into(), serde_json::json!({"contextMap": map}));
                    update.meta(meta)
                }
                None => update,
            })
        }
        Event::Compaction { id, state } => compaction(id, state, caps),
        Event::AgentText { message_id, text } => SessionUpdate::AgentMessageChunk(
            ContentChunk::new(ContentBlock::from(text)).message_id(MessageId::new(message_id)),
        ),
        Event::Thought { message_id, text } => SessionUpdate::AgentThoughtChunk(
            ContentChunk::new(ContentBlock::from(text)).message_id(MessageId::new(message_id)),
        ),
        Event::ToolCall(view) => SessionUpdate::ToolCall(tool_call(&view)),
        Event::Hook(report) => SessionUpdate::ToolCall(hook_card(&report)),
        Event::ToolCallUpdate(patch) => SessionUpdate::ToolCallUpdate(tool_call_update(&patch)),
        // A command's output and file states: v2's (v1 has its result text).
        Event::Command { .. } | Event::FilesChanged { .. } => return None,
        Event::Permission(_)
        | Event::UserMessageSaved { .. }
        | Event::SteerTaken { .. }
        | Event::Subagent(_)
        | Event::TurnFailed(_)
        | Event::TurnUsage(_)
        | Event::ModelRequest(_)
        | Event::QueueChanged
        | Event::QueueTurn { .. }
        | Event::TurnStarted(_)
        | Event::TurnEnded(_) => return None,
    })
}

/// A review's findings as one completed `read` tool call: a location
/// (file and line) per finding, and the findings as its text.
fn review_findings(id: String, findings: &[maia_core::review::Finding]) -> ToolCall {
    let text: Vec<String> = findings.iter().map(|f| format!("- {}", f.text)).collect();
    ToolCall::new(id, format!("Review findings ({})", findings.len()))
        .kind(ToolKind::Read)
        .status(ToolCallStatus::Completed)
        .locations(
            findings
                .iter()
                .map(|f| ToolCallLocation::new(f.path.clone()).line(f.line))
                .collect(),
        )
        .content(vec![ToolCallContent::from(ContentBlock::from(
            text.join("\n"),
        ))])
}

/// The prompt response's `_meta` (`None` when empty): `maia.userMessageId`, the prompt's saved
/// id, and `maia.usage`, the turn's usage. The usage is not at the root (`PromptResponse.usage`):
/// that field is the Draft RFD's (`unstable_end_turn_token_usage`), not the stable v1 schema's,
/// and no shipped v1 client is known to read it (docs/acp.md, "Prompt turn").
pub fn prompt_meta(
    user_message: Option<String>,
    usage: Option<Usage>,
) -> Option<serde_json::Map<String, Value>> {
    let mut maia = serde_json::Map::new();
    if let Some(id) = user_message {
        maia.insert("userMessageId".into(), Value::String(id));
    }
    if let Some(usage) = usage.and_then(|u| serde_json::to_value(u).ok()) {
        maia.insert("usage".into(), usage);
    }
    if maia.is_empty() {
        return None;
    }
    let mut meta = serde_json::Map::new();
    meta.insert("maia".into(), Value::Object(maia));
    Some(meta)
}

/// A turn's usage in the shape of the Draft's `PromptResponse.usage`
/// (`unstable_end_turn_token_usage`), sent as `_meta.maia.usage`: the
/// parts the server did not report (zero) are left out.
pub fn turn_usage(usage: &maia_llm::Usage) -> Usage {
    let some = |n: u64| (n > 0).then_some(n);
    Usage::new(
        usage.total_tokens,
        usage.prompt_tokens,
        usage.completion_tokens,
    )
    .thought_tokens(some(usage.reasoning_tokens))
    .cached_read_tokens(some(usage.cached_tokens))
    .cached_write_tokens(some(usage.cache_write_tokens))
}

pub fn notification(session_id: &str, update: SessionUpdate) -> serde_json::Result<Value> {
    serde_json::to_value(SessionNotification::new(session_id.to_owned(), update))
}

/// The params of `session/request_permission` for a request.
pub fn permission_request(
    session_id: &str,
    request: &PermissionRequest,
) -> serde_json::Result<Value> {
    let view = &request.tool_call;
    let fields = ToolCallUpdateFields::new()
        .title(view.title.clone())
        .name(view.name.clone())
        .kind(kind(view.kind))
        .status(status(view.status))
        .content(content(&view.content))
        .locations(locations(view))
        .raw_input(view.raw_input.clone());
    let options = request
        .options
        .iter()
        .map(|o| {
            let kind = match o.kind {
                ChoiceKind::AllowOnce => PermissionOptionKind::AllowOnce,
                ChoiceKind::AllowAlways => PermissionOptionKind::AllowAlways,
                ChoiceKind::RejectOnce => PermissionOptionKind::RejectOnce,
                ChoiceKind::RejectAlways => PermissionOptionKind::RejectAlways,
            };
            PermissionOption::new(o.id.clone(), o.label.clone(), kind)
        })
        .collect();
    serde_json::to_value(RequestPermissionRequest::new(
        session_id.to_owned(),
        ToolCallUpdate::new(view.id.clone(), fields),
        options,
    ))
}

/// The engine's reading of the client's answer. A client error counts as a
/// rejection (the tool does not run, the turn goes on); a closed connection
/// as a cancellation.
pub fn permission_reply(answer: Result<Value, RequestError>) -> PermissionReply {
    let rejected = || PermissionReply::Rejected { reason: None };
    match answer {
        Ok(value) => {
            // A rejection may carry the user's reason (`_meta.reason`), on the
            // result or on the outcome.
            let reason = [
                &value["_meta"]["reason"],
                &value["outcome"]["_meta"]["reason"],
            ]
            .into_iter()
            .find_map(|r| r.as_str().map(str::to_owned));
            match serde_json::from_value::<RequestPermissionResponse>(value) {
                Ok(response) => match response.outcome {
                    RequestPermissionOutcome::Selected(selected) => PermissionReply::Selected {
                        option: selected.option_id.0.to_string(),
                        reason,
                    },
                    _ => PermissionReply::Cancelled,
                },
                Err(e) => {
                    tracing::warn!("unreadable permission answer ({e}); treated as a rejection");
                    rejected()
                }
            }
        }
        Err(RequestError::Rpc(e)) => {
            tracing::warn!(
                "the client failed the permission request ({e}); treated as a rejection"
            );
            rejected()
        }
        Err(RequestError::Closed) => PermissionReply::Cancelled,
    }
}

/// The session's MCP servers as engine configurations. Stdio servers start
/// in the session's folder.
pub fn mcp_servers(
    servers: Vec<agent_client_protocol_schema::v1::McpServer>,
    cwd: &std::path::Path,
) -> Vec<maia_core::McpServerConfig> {
    use agent_client_protocol_schema::v1::McpServer;
    use maia_core::{McpServerConfig, McpTransport};
    servers
        .into_iter()
        .filter_map(|server| match server {
            McpServer::Stdio(stdio) => Some(McpServerConfig {
                name: stdio.name,
                transport: McpTransport::Stdio {
                    command: stdio.command.to_string_lossy().into_owned(),
                    args: stdio.args,
                    env: stdio.env.into_iter().map(|e| (e.name, e.value)).collect(),
                    cwd: Some(cwd.to_path_buf()),
                },
                disabled_tools: Vec::new(),
            }),
            McpServer::Http(http) => Some(McpServerConfig {
                name: http.name,
                transport: McpTransport::Http {
                    url: http.url,
                    headers: http
                        .headers
                        .into_iter()
                        .map(|h| (h.name, h.value))
                        .collect(),
                },
                disabled_tools: Vec::new(),
            }),
            McpServer::Sse(sse) => Some(McpServerConfig {
                name: sse.name,
                transport: McpTransport::Sse {
                    url: sse.url,
                    headers: sse.headers.into_iter().map(|h| (h.name, h.value)).collect(),
                },
                disabled_tools: Vec::new(),
            }),
            _ => {
                tracing::warn!("an MCP server of an unknown transport was skipped");
                None
            }
        })
        .collect()
}
