//! What the user types, routed: `!command` (run, its output joins the next
//! request), slash commands (`/help`, `/new`, …), `§skill` or `/skill`,
//! Markdown commands, else a turn with the model (`Session::run_turn`). An
//! unknown `/word` is ordinary text for the model.
//!
//! Functions over a [`Session`], not methods of it: they go through its
//! API (its state operations and the borrows of its parts it hands out),
//! never its fields. Each family of commands has its module: `!command`
//! (`bang`), the thread commands (`thread`), `/model` (`model`),
//! `/context` (`context`).

mod bang;
mod context;
mod model;
mod thread;

use tokio_util::sync::CancellationToken;

use crate::event::{Event, NoticeLevel, StopReason};
use crate::prompt::PromptPart;
use crate::prompt_syntax;
use crate::session::Session;
use crate::skills;
use crate::slash::CommandInfo;
pub use crate::slash::{COMMANDS, parse};
use crate::store;

/// Runs a prompt: a slash command, or a turn with the model.
pub(crate) async fn run_prompt(
    session: &mut Session,
    parts: Vec<PromptPart>,
    cancel: &CancellationToken,
) -> StopReason {
    if let [PromptPart::Text(text)] = parts.as_slice() {
        let text = text.clone();
        if let Some(bang) = prompt_syntax::parse_bang(&text) {
            return bang::run_bang(session, bang, &text, cancel).await;
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

/// `/export [md|json] [PATH] [--force]` ([`crate::export`]): the thread
/// as replayed, written to a file inside the session folder.
fn export_command(session: &mut Session, args: &str) {
    let request = match crate::export::parse_args(args) {
        Ok(request) => request,
        Err(e) => {
            return session.say(format!(
                "Not exported: {e}. Usage: `/export [md|json] [PATH] [--force]`."
            ));
        }
    };
    let services = session.services();
    let name = session.conversation().name().to_owned();
    let written = crate::blocking::off_runtime(|| {
        crate::export::export_thread(
            &services.cwd,
            &services.roots,
            &name,
            &request,
            crate::export::Place::InsideFolders,
        )
    });
    session.say(match written {
        Ok(w) => format!(
            "Exported the thread to `{}` ({}, {} entries, {} bytes{}).",
            w.path.display(),
            match request.format {
                crate::export::Format::Markdown => "Markdown",
                crate::export::Format::Json => "JSON",
            },
            w.entries,
            w.bytes,
            if w.truncated {
                "; long texts shortened"
            } else {
                ""
            }
        ),
        Err(e) => format!("Not exported: {e}."),
    });
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
                _ => crate::mcp::report(
                    &services.mcp,
                    &crate::mcp::Vouching {
                        home: services.options.home.as_deref(),
                        cwd: &services.cwd,
                        settings: &session.project().settings,
                    },
                    session.deferred_tools().describe(),
                ),
            };
            session.say(report);
        }
        "hooks" => {
            let report = crate::session::hooks_command(session, args);
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
            let name = thread::unused_name(session);
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
            session.session_start_hooks("clear").await;
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
        "load" => thread::load_command(session, args),
        "rewind" => thread::rewind_command(session, args).await,
        "fork" => thread::fork_command(session, args).await,
        "export" => export_command(session, args),
        "compact" => match session.compact_with_hooks("manual", cancel).await {
            Ok(()) => session.say(format!(
                "Conversation compacted; it continues as `{}`.",
                session.conversation().name()
            )),
            Err(crate::compaction::CompactError::Cancelled) => return StopReason::Cancelled,
            Err(e) => session.say(format!("Not compacted: {e}.")),
        },
        "model" => model::model_command(session, args, cancel).await,
        "context" => context::context_command(session),
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
