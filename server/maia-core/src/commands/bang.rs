//! `!command`: a shell command the user typed, run in the working folder
//! without permission rules, shown as an `execute` tool call, its files
//! checkpointed around it; its output joins the user's next request.

use maia_tools::{BashInput, ToolInput};
use tokio_util::sync::CancellationToken;

use crate::event::{Event, StopReason, ToolCallPatch, ToolCallView, ToolContent, ToolStatus};
use crate::prompt_syntax;
use crate::session::Session;
use crate::store::Record;

/// Characters of a `!command`'s output kept for the next request.
const BANG_OUTPUT_CHARS: usize = 30_000;
/// `!command`: runs in the working folder without permission rules (the
/// user typed it), shown as an `execute` tool call; the output joins the
/// context of the user's next request.
pub(super) async fn run_bang(
    session: &mut Session,
    bang: prompt_syntax::BangCommand,
    typed: &str,
    cancel: &CancellationToken,
) -> StopReason {
    let command = match bang {
        prompt_syntax::BangCommand::Help => {
            session.say(prompt_syntax::BANG_HELP.to_owned());
            return StopReason::EndTurn;
        }
        prompt_syntax::BangCommand::Run(command) => command,
    };
    let message_id = uuid::Uuid::new_v4().to_string();
    session.record(&Record::UserDisplay {
        id: message_id.clone(),
        text: typed.to_owned(),
        steer: false,
    });
    session.emit(Event::UserMessageSaved { message_id });
    let input = ToolInput::Bash(BashInput {
        command: command.clone(),
        timeout_ms: None,
        description: None,
        run_in_background: false,
    });
    let mut view = ToolCallView {
        id: format!("tool-{}", uuid::Uuid::new_v4().simple()),
        name: input.name().to_owned(),
        title: format!("{} (typed by you)", input.title(&session.services().cwd)),
        kind: Some(maia_tools::ToolKind::Execute),
        locations: Vec::new(),
        raw_input: serde_json::json!({ "command": command }),
        status: ToolStatus::InProgress,
        content: Vec::new(),
    };
    session.emit(Event::ToolCall(view.clone()));
    session.begin_checkpoints();
    let before = session.checkpoint_before().await;
    let ctx = maia_tools::ToolContext {
        cwd: session.services().cwd.clone(),
        fs: session.services().fs.clone(),
        reads: session.tools().reads.clone(),
        cancel: cancel.clone(),
        read_guard: None,
        sandbox: session.project().sandbox.clone(),
        // Typed by the user: run here, never in the editor's terminal
        // (docs/tools.md says why).
        terminals: None,
        on_terminal: None,
        on_output: None,
        outputs: None,
    };
    let output = match maia_tools::prepare(input, &ctx).await {
        Ok(prepared) => maia_tools::execute(prepared, &ctx).await,
        Err(e) => maia_tools::ToolOutput::error(e.to_string()),
    };
    if let Some(before) = before {
        session
            .checkpoint_after(before, &[(view.id.clone(), Vec::new())])
            .await;
    }
    view.status = if output.is_error {
        ToolStatus::Failed
    } else {
        ToolStatus::Completed
    };
    view.content = vec![ToolContent::Text {
        text: output.content.clone(),
    }];
    session.emit(Event::ToolCallUpdate(ToolCallPatch {
        id: view.id.clone(),
        status: Some(view.status),
        content: Some(view.content.clone()),
        raw_output: None,
    }));
    session.record(&Record::tool_call(&view));
    if cancel.is_cancelled() {
        return StopReason::Cancelled;
    }
    session.add_bang_output(format!(
        "The user ran `{command}` in the working folder:\n{}",
        maia_tools::truncate_middle(&output.content, BANG_OUTPUT_CHARS)
    ));
    StopReason::EndTurn
}
