//! What the user types, routed: `!command` (run, its output joins the next
//! request), slash commands (`/help`, `/new`, …), `§skill` or `/skill`,
//! Markdown commands, else a turn with the model (`Session::run_turn`). An
//! unknown `/word` is ordinary text for the model.
//!
//! Functions over a [`Session`], not methods of it: they go through its
//! API (its state operations and the borrows of its parts it hands out),
//! never its fields.

use maia_tools::{BashInput, ToolInput};
use tokio_util::sync::CancellationToken;

use crate::event::{
    Event, NoticeLevel, StopReason, ToolCallPatch, ToolCallView, ToolContent, ToolStatus,
};
use crate::prompt::PromptPart;
use crate::prompt_syntax;
use crate::session::{Session, fresh_name, replay};
use crate::skills;
use crate::slash::CommandInfo;
pub use crate::slash::{COMMANDS, parse};
use crate::store;
use crate::store::Record;

/// Characters of a `!command`'s output kept for the next request.
const BANG_OUTPUT_CHARS: usize = 30_000;

/// Runs a prompt: a slash command, or a turn with the model.
pub(crate) async fn run_prompt(
    session: &mut Session,
    parts: Vec<PromptPart>,
    cancel: &CancellationToken,
) -> StopReason {
    if let [PromptPart::Text(text)] = parts.as_slice() {
        let text = text.clone();
        if let Some(bang) = prompt_syntax::parse_bang(&text) {
            return run_bang(session, bang, &text, cancel).await;
        }
        if let Some((command, args)) = parse(&text) {
            let args = args.to_owned();
            return run_command(session, command, &args, cancel).await;
        }
        let typed_skill = skills::parse_invocation(&text).or_else(|| {
            let rest = text.trim_start().strip_prefix('/')?;
            let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            Some((name, args.trim()))
        });
        if let Some((name, args)) = typed_skill
            && let Some(skill) = session.project().skills.get(name).cloned()
        {
            return run_as_typed(
                session,
                skills::typed_message(&skill, args)
                    .map_err(|e| format!("Cannot read the skill `{}`: {e}", skill.name)),
                &text,
                cancel,
            )
            .await;
        }
        if let Some(rest) = text.trim_start().strip_prefix('/') {
            let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            if let Some(command) = session.project().markdown_commands.get(name).cloned() {
                let message = crate::markdown_commands::message(&command, args.trim())
                    .map_err(|e| format!("Cannot read the command `/{}`: {e}", command.name));
                return run_as_typed(session, message, &text, cancel).await;
            }
            if name == crate::review::NAME {
                return run_review(session, args.trim(), &text, cancel).await;
            }
        }
    }
    let parts = expand_file_refs(session, parts);
    let stop = session.run_turn(parts, None, cancel).await;
    if stop == StopReason::Cancelled {
        session.report_estimate();
    }
    stop
}

/// `/review [BRANCH]` ([`crate::review`]): a read-only turn over the diff.
async fn run_review(
    session: &mut Session,
    base: &str,
    typed: &str,
    cancel: &CancellationToken,
) -> StopReason {
    let base = (!base.is_empty()).then_some(base);
    let cwd = session.services().cwd.clone();
    match crate::review::changes(&cwd, base).await {
        Ok(diff) if diff.trim().is_empty() => {
            session.say(match base {
                Some(base) => format!("Nothing to review: no change against `{base}`."),
                None => "Nothing to review: there are no uncommitted changes.".to_owned(),
            });
            StopReason::EndTurn
        }
        Ok(diff) => {
            let message = crate::review::prompt(&cwd, base, &diff);
            let stop = session.run_read_only_turn(message, typed, cancel).await;
            let answer = match session.conversation().history().last() {
                Some(maia_llm::ChatMessage::Assistant {
                    content: Some(text),
                    ..
                }) => crate::review::findings(text, &cwd),
                _ => Vec::new(),
            };
            if !answer.is_empty() {
                session.emit(Event::Findings {
                    id: format!("review-{}", uuid::Uuid::new_v4().simple()),
                    findings: answer,
                });
            }
            stop
        }
        Err(e) => {
            session.say(format!("Cannot review: {e}."));
            StopReason::EndTurn
        }
    }
}

/// Adds the files named by `@` references in typed text (MAIA's forms);
/// an `@` that looks like a path but names nothing gets a warning.
fn expand_file_refs(session: &Session, parts: Vec<PromptPart>) -> Vec<PromptPart> {
    let mut out = Vec::with_capacity(parts.len());
    for part in parts {
        let PromptPart::Text(text) = &part else {
            out.push(part);
            continue;
        };
        let scan = prompt_syntax::scan_file_refs_in(
            text,
            &session.services().cwd,
            &session.services().roots,
            session.services().options.home.as_deref(),
        );
        for warning in &scan.warnings {
            session.emit(Event::Notice {
                level: NoticeLevel::Warning,
                text: warning.to_string(),
            });
        }
        out.extend(scan.prompt_parts(text));
    }
    out
}

/// A message the user asked for by name (a skill, a Markdown command),
/// sent as if typed, shown as what they typed; or what kept it from being
/// read.
async fn run_as_typed(
    session: &mut Session,
    message: Result<String, String>,
    typed: &str,
    cancel: &CancellationToken,
) -> StopReason {
    match message {
        Ok(message) => {
            session
                .run_turn(
                    vec![PromptPart::Text(message)],
                    Some(typed.to_owned()),
                    cancel,
                )
                .await
        }
        Err(why) => {
            session.say(why);
            StopReason::EndTurn
        }
    }
}

/// `!command`: runs in the working folder without permission rules (the
/// user typed it), shown as an `execute` tool call; the output joins the
/// context of the user's next request.
async fn run_bang(
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

/// Runs a command; the turn then ends.
pub(crate) async fn run_command(
    session: &mut Session,
    command: &CommandInfo,
    args: &str,
    cancel: &tokio_util::sync::CancellationToken,
) -> StopReason {
    match command.name {
        "mcp" => {
            let services = session.services();
            let report = match args.strip_prefix("trust") {
                Some(name) if name.is_empty() || name.starts_with(char::is_whitespace) => {
                    crate::mcp_trust::trust(
                        services.options.home.as_deref(),
                        &services.cwd,
                        &services.mcp,
                        &session.project().settings,
                        name.trim(),
                    )
                }
                _ => crate::mcp::report(&services.mcp),
            };
            session.say(report);
        }
        "help" => {
            let mut text = String::from("Commands:\n\n");
            // Built-in commands, then skills and Markdown commands.
            for c in session.project().command_entries() {
                let arg = c.hint.map(|h| format!(" <{h}>")).unwrap_or_default();
                text.push_str(&format!("- `/{}{arg}` — {}\n", c.name, c.description));
            }
            session.say(text);
        }
        "new" => {
            // The old conversation's background commands end with it.
            session.tools().tasks.stop_all();
            let saved = (!session.conversation().is_empty())
                .then(|| session.conversation().name().to_owned());
            let name = unused_name(session);
            session.reset(name);
            session.say(match saved {
                Some(name) => format!(
                    "Started a new conversation. The previous one is saved as `{name}` (`/load {name}` brings it back)."
                ),
                None => "Started a new conversation.".to_owned(),
            });
            session.report_estimate();
        }
        "tasks" => {
            let list = session.tools().tasks.list();
            session.say(list);
        }
        "undo" => {
            let text = session.undo().await;
            session.say(text);
        }
        "clear" => {
            session.tools().tasks.stop_all();
            let dropped = session.conversation().len();
            session.clear();
            session.say(format!(
                "Context cleared ({dropped} messages dropped); settings, context file and rules reloaded."
            ));
            session.report_estimate();
        }
        "rename" => {
            if !store::valid_name(args) {
                session.say(
                    "Usage: `/rename NAME` (letters, digits, spaces, `-`, `_`, `.`).".to_owned(),
                );
            } else if store::session_path(&session.services().cwd, args).exists() {
                session.say(format!("A saved session named `{args}` already exists."));
            } else {
                let old = session.conversation().name().to_owned();
                // The journal is copied into its new file: off the runtime.
                match crate::blocking::off_runtime(|| session.rename(args.to_owned())) {
                    Ok(()) => session.say(format!("Renamed `{old}` to `{args}`.")),
                    Err(e) => session.say(format!("Cannot rename: {e}")),
                }
            }
        }
        "load" => load_command(session, args),
        "rewind" => rewind_command(session, args).await,
        "fork" => fork_command(session, args).await,
        "compact" => match session
            .compact(crate::compaction::Trigger::Between, cancel)
            .await
        {
            Ok(()) => session.say(format!(
                "Conversation compacted; it continues as `{}`.",
                session.conversation().name()
            )),
            Err(crate::compaction::CompactError::Cancelled) => return StopReason::Cancelled,
            Err(e) => session.say(format!("Not compacted: {e}.")),
        },
        "model" => model_command(session, args, cancel).await,
        "context" => context_command(session),
        "cost" => {
            let turn = session.conversation().turn_cost();
            let report = crate::cost::report(session.conversation().ledger(), Some(&turn));
            session.say(report);
        }
        "permissions" => {
            let text = session
                .project()
                .broker
                .lock()
                .map(|b| b.render())
                .unwrap_or_else(|_| "The rules cannot be read.".to_owned());
            session.say(text);
        }
        _ => session.say(format!("`/{}` is not available.", command.name)),
    }
    StopReason::EndTurn
}

/// A fresh name that is neither the current one nor a saved one (a
/// second `/new` within the same second must not overwrite anything).
fn unused_name(session: &Session) -> String {
    let base = fresh_name(session.id());
    let mut name = base.clone();
    let mut n = 2;
    while name == session.conversation().name()
        || store::session_path(&session.services().cwd, &name).exists()
    {
        name = format!("{base}-{n}");
        n += 1;
    }
    name
}

fn load_command(session: &mut Session, name: &str) {
    crate::blocking::off_runtime(|| load_saved(session, name));
}

fn load_saved(session: &mut Session, name: &str) {
    if !store::valid_name(name) {
        let saved: Vec<String> = store::list(&session.services().cwd)
            .into_iter()
            .map(|s| format!("`{}`", s.name))
            .collect();
        session.say(format!(
            "Usage: `/load NAME`. Saved sessions here: {}",
            if saved.is_empty() {
                "none".to_owned()
            } else {
                saved.join(", ")
            }
        ));
        return;
    }
    let path = store::session_path(&session.services().cwd, name);
    let loaded = match store::load(&path) {
        Ok(loaded) => loaded,
        Err(e) => {
            session.say(format!("Cannot load `{name}`: {e}"));
            return;
        }
    };
    // Another thread's conversation continues here as a copy: two
    // threads never write to one file, and that thread keeps its own.
    let (target, intro) = if loaded.header.id == session.id() {
        (name.to_owned(), format!("Loaded `{name}`:"))
    } else {
        let copy = unused_name(session);
        let intro = format!("Loaded `{name}` (continued here as `{copy}`):");
        (copy, intro)
    };
    if let Err(e) = session.adopt(target, &loaded) {
        session.say(format!("Cannot load `{name}`: {e}"));
        return;
    }
    session.say(intro);
    for event in replay(&crate::timeline::rewound(&loaded), &session.services().cwd) {
        session.emit(event);
    }
    session.report_estimate();
}

/// `/rewind`: lists the thread's user messages; `/rewind N` truncates the
/// thread before message N (`--files`: with the files as they were then).
async fn rewind_command(session: &mut Session, args: &str) {
    let mut words = args.split_whitespace();
    let number = words.next();
    let files = words.any(|w| w == "--files");
    let messages = session.conversation().user_messages().to_vec();
    let Some(number) = number else {
        if messages.is_empty() {
            session.say("No user message to rewind to.".to_owned());
            return;
        }
        let mut text =
            String::from("User messages (`/rewind N` drops message N and what follows it):\n\n");
        for (n, message) in messages.iter().enumerate() {
            let first = message.text.lines().next().unwrap_or("");
            text.push_str(&format!("{}. {first}\n", n + 1));
        }
        session.say(text);
        return;
    };
    let Some(message) = number
        .parse::<usize>()
        .ok()
        .and_then(|n| messages.get(n.checked_sub(1)?))
    else {
        session.say(format!(
            "Usage: `/rewind N [--files]`, N from 1 to {}.",
            messages.len()
        ));
        return;
    };
    // The files' preview first: a revert that cannot be done changes nothing.
    let preview = match files {
        true => match session.preview_restore(&message.id).await {
            Ok(preview) => preview,
            Err(e) => return session.say(format!("Not rewound: {e}.")),
        },
        false => None,
    };
    let point = crate::timeline::MessagePoint {
        message_id: message.id.clone(),
        ..Default::default()
    };
    let mut text = match session.rewind(&point) {
        Ok(done) => format!(
            "Rewound before message {number} (`{}`); it and what followed are gone from the conversation (the journal keeps them). Send a prompt to continue from there.",
            done.text.lines().next().unwrap_or("")
        ),
        Err(e) => return session.say(format!("Not rewound: {e}.")),
    };
    if let Some(preview) = preview {
        text.push_str(&session.apply_restore(preview).await);
    }
    session.say(text);
}

/// `/fork [--worktree]`: a new thread with this conversation, in this
/// folder or in a new git worktree beside the project.
async fn fork_command(session: &mut Session, args: &str) {
    let cwd = session.services().cwd.clone();
    let wants_worktree = match args.trim() {
        "" => false,
        "--worktree" => true,
        _ => {
            session.say("Usage: `/fork [--worktree]`.".to_owned());
            return;
        }
    };
    let source = session.id().to_owned();
    let fork = match crate::blocking::off_runtime(|| {
        crate::timeline::Fork::prepare(&cwd, &source, None)
    }) {
        Ok(fork) => fork,
        Err(e) => return session.say(format!("Not forked: {e}.")),
    };
    let worktree = match wants_worktree {
        false => None,
        true => match crate::worktree::add(&cwd, &crate::store::sessions_dir(&cwd)).await {
            Ok(made) => Some(made),
            Err(e) => return session.say(format!("Not forked: {e}.")),
        },
    };
    let target = worktree
        .as_ref()
        .map_or(cwd.clone(), |(w, _)| w.cwd.clone());
    let id = uuid::Uuid::new_v4().to_string();
    let name = fresh_name(&id);
    let home = session.services().options.home.clone();
    let saved = crate::blocking::off_runtime(|| fork.save((&target, &id, &name), home.as_deref()));
    // Saved: the worktree is the fork's; else it goes.
    let worktree = match (worktree, &saved) {
        (Some((w, making)), Ok(())) => {
            making.done();
            Some(w)
        }
        (Some((_, making)), Err(_)) => {
            making.undo().await;
            None
        }
        (None, _) => None,
    };
    session.say(match (saved, worktree) {
        (Err(e), _) => format!("Not forked: {e}."),
        (Ok(()), None) => format!(
            "Forked this conversation into the new session `{id}` (same folder); open it from the session list."
        ),
        (Ok(()), Some(w)) => format!(
            "Forked this conversation into the new session `{id}`, working in the git worktree `{}` on the new branch `{}`; open it from the session list of that folder. Remove it with `git worktree remove {}` when done.",
            w.path.display(),
            w.branch,
            w.path.display()
        ),
    });
}

async fn model_command(
    session: &mut Session,
    args: &str,
    cancel: &tokio_util::sync::CancellationToken,
) {
    let listed = match &session.project().llm {
        Ok(llm) => {
            // What the user asks to see is asked afresh (and kept for the rest).
            let listed = session
                .services()
                .windows
                .catalogue()
                .refresh(llm, cancel)
                .await;
            if cancel.is_cancelled() {
                return;
            }
            listed.map_err(|e| e.to_string())
        }
        Err(e) => Err(e.to_string()),
    };
    if args.is_empty() {
        let current_model = session.model().map(str::to_owned);
        let current = current_model
            .clone()
            .unwrap_or_else(|| "(not chosen yet)".into());
        let text = match listed {
            Ok(models) => {
                let lines: Vec<String> = models
                    .iter()
                    .map(|m| {
                        let mark = if Some(&m.id) == current_model.as_ref() {
                            " ← current"
                        } else {
                            ""
                        };
                        format!("- `{}`{mark}", m.id)
                    })
                    .collect();
                format!(
                    "Model in use: `{current}`\n\nAvailable:\n{}",
                    lines.join("\n")
                )
            }
            Err(e) => {
                format!("Model in use: `{current}`\n\nThe model list could not be read: {e}")
            }
        };
        session.say(text);
        return;
    }
    let known = listed
        .as_ref()
        .map(|models| models.iter().any(|m| m.id == args))
        .unwrap_or(true);
    if !known {
        session.say(format!(
            "`{args}` is not among the endpoint's models; see `/model`."
        ));
        return;
    }
    session.choose_model(args);
    session.say(format!("Now using `{args}`."));
}

fn context_command(session: &Session) {
    let system = session.system_prompt();
    let tools = session.tool_chars();
    let messages: usize = crate::meter::message_chars(session.conversation().history());
    let context_file = match &session.project().context_file {
        Some(f) => format!(
            "`{}` (~{} tokens)",
            f.path.display(),
            session.meter().calibrated(f.text.len())
        ),
        None => "none (no MAIA.md, CLAUDE.md or AGENTS.md here)".to_owned(),
    };
    let model = session.model().map(str::to_owned);
    // The meter's numbers: what the last usage_update said, or would say.
    let used = session.context_tokens();
    let meter = match session.meter().window() {
        Some(window) => format!(
            "{used} of {window} tokens ({:.0} %)",
            used as f64 * 100.0 / window.max(1) as f64
        ),
        None => format!("{used} tokens (window unknown: no meter)"),
    };
    let source = match session.context_source() {
        "measured" => {
            "measured: the server's last usage (prompt + answer, reasoning excluded), plus an estimate of what came since"
        }
        _ => "estimated: ~4 characters per token",
    };
    let window_source = match session.meter().window_source() {
        Some(source) => format!(" (from {source})"),
        None => String::new(),
    };
    let last = match session.meter().last_usage() {
        Some(u) => format!(
            "prompt {} + answer {} tokens ({} of them reasoning, not kept); cached: {} read, {} written",
            u.prompt_tokens,
            u.completion_tokens,
            u.reasoning_tokens,
            u.cached_tokens,
            u.cache_write_tokens
        ),
        None => "none yet".to_owned(),
    };
    let caching = model.as_deref().map_or("no model yet", |m| {
        if session.prompt_caching(m) {
            "on (cache_control marks on the system message and the last two messages)"
        } else {
            "off"
        }
    });
    let summary_model = session
        .project()
        .settings
        .small_model
        .clone()
        .or_else(|| model.clone())
        .unwrap_or_else(|| "(not chosen yet)".into());
    let text = format!(
        "Context of `{name}`:\n\n\
         - in use: {meter}, {source}\n\
         - calibration: {ratio:.2} real tokens per estimated token\n\
         - model: `{model}`, context window: {window}{window_source}\n\
         - system prompt: ~{sys} tokens\n\
         - context file: {context_file}\n\
         - tool definitions: ~{tools} tokens\n\
         - messages: {count} (~{msgs} tokens)\n\
         - pending items: {pending}\n\
         - last response: {last}\n\
         - cost: {cost} this thread, {turn_cost} the last turn (`/cost` for each model)\n\
         - cached prompt tokens this session: {cached}\n\
         - prompt caching: {caching}\n\
         - summaries written by: `{summary_model}`\n\
         - tool calls written as text: {retried} retried, {shown} shown as text",
        name = session.conversation().name(),
        ratio = session.meter().calibration(),
        sys = session.meter().calibrated(system.len()),
        tools = session.meter().calibrated(tools),
        count = session.conversation().len(),
        msgs = session.meter().calibrated(messages),
        pending = session.pending_bang_outputs(),
        model = model.unwrap_or_else(|| "(not chosen yet)".into()),
        window = session
            .meter()
            .window()
            .map_or_else(|| "unknown".to_owned(), |w| format!("{w} tokens")),
        cached = session.meter().cached_total(),
        cost = crate::cost::show(session.conversation().ledger().total()),
        turn_cost = crate::cost::show(session.conversation().turn_cost().total()),
        retried = session.meter().text_tool_calls().retried,
        shown = session.meter().text_tool_calls().shown,
    );
    let mut text = format!("{text}{}", workspace_report(session));
    let children = crate::cost::subagent_lines(session.conversation().ledger());
    if !children.is_empty() {
        text.push_str("\n- subagents (charged to this thread):");
        for line in children {
            text.push_str(&format!("\n  - {line}"));
        }
    }
    session.say(text);
}

/// The `/context` lines about the workspace folders.
fn workspace_report(session: &Session) -> String {
    let mut out = format!(
        "\n- working folder: `{}`\n- additional workspace folders:",
        session.services().cwd.display()
    );
    if session.services().roots.is_empty() {
        out.push_str(" none");
    }
    for root in &session.services().roots {
        out.push_str(&format!("\n  - `{}`", root.display()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_commands_only() {
        assert_eq!(parse("/help").map(|(c, a)| (c.name, a)), Some(("help", "")));
        assert_eq!(
            parse("  /rename my work ").map(|(c, a)| (c.name, a)),
            Some(("rename", "my work"))
        );
        assert!(parse("/unknown thing").is_none());
        assert!(parse("hello /help").is_none());
        assert!(parse("/").is_none());
    }
}
