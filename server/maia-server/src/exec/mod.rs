//! `maia exec`: one prompt from a terminal or a script, without an editor —
//! the same engine as the editors' front doors, the answer streamed to
//! stdout, tool calls on stderr (or one JSON event per line, [`render`]).
//!
//! Nobody can answer a question here: a permission question is refused
//! (the model is told why and the turn goes on), `AskUser` is declined;
//! both are reported. `--mode` and `--allow RULE` say what runs without
//! one. A budget question is answered "stop": the run ends with exit 4. SIGINT cancels the turn (the model stream dropped, running commands
//! killed with their whole process trees) and exits 130; a second one
//! leaves at once. The thread is an ordinary saved thread: `--resume ID`,
//! `--continue`, or an editor's `session/load` go on with it.

mod render;

use std::collections::HashSet;
use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use maia_core::{
    Answer, Asker, ClientTools, Engine, EngineOptions, Event, PermissionReply, PromptPart,
    Question, SessionHandle, StopReason, ToolStatus, Unfinished,
};
use maia_tools::LocalFs;
use tokio::sync::mpsc;

use crate::cli::ExecArgs;
use crate::signals::Stop;
use render::Output;

/// Exit status: the turn ended normally.
const OK: u8 = 0;
/// Exit status: the turn or its start failed.
const FAILED: u8 = 1;
/// Exit status: the turn ended without doing its job ([`Unfinished`]): a
/// tool call written as text that could not be run, an empty answer, or a
/// refused call after which nothing ran.
const UNFINISHED: u8 = 3;
/// Exit status: the run stopped before a model request that would have
/// passed a budget (`--max-budget-usd`, `budget.sessionUsd`/`turnUsd`).
const BUDGET: u8 = 4;
/// How long the proxy's model list is waited for.
const MODEL_LIST_WAIT: Duration = Duration::from_secs(5);
/// How long a finished session may take to release its thread.
const END_WAIT: Duration = Duration::from_secs(5);

/// What runs without a flag: reading and searching inside the project
/// (the deny and ask rules of the settings still win; anything outside
/// the project would ask, so it is refused).
pub const PROJECT_READS: [&str; 3] = ["Read(./**)", "Glob(./**)", "Grep(./**)"];

/// What the model is told when its call was refused for want of a person.
const NO_ONE_TO_ASK: &str = "this is a non-interactive run (`maia exec`) and no one can answer \
permission questions; the call was refused. Go on without it, or end by saying what would need \
to be allowed (`--allow RULE` or `--mode`)";

/// Runs `maia exec`; returns the process's exit status.
pub fn main(args: ExecArgs, model: Option<String>) -> ExitCode {
    let mut out = Output::new(args.json);
    let prompt = match read_prompt(args.prompt.as_deref()) {
        Ok(prompt) => prompt,
        Err(e) => {
            out.error(&e);
            return ExitCode::from(FAILED);
        }
    };
    let mut options = match crate::cli::engine_options(model) {
        Ok(options) => options,
        Err(e) => {
            out.error(&e);
            return ExitCode::from(FAILED);
        }
    };
    // `--mode` is checked before anything starts.
    if let Some(mode) = args.mode
        && let Err(refusal) = options.check_mode(mode)
    {
        out.error(&format!("--mode {}: {refusal}", mode.id()));
        return ExitCode::from(FAILED);
    }
    options.allow = PROJECT_READS.iter().map(|r| (*r).to_owned()).collect();
    options.allow.extend(args.allow.iter().cloned());
    // A thread's saved queue is the editor's: exec neither runs nor empties it.
    options.no_queue = true;
    options.max_budget_usd = args.max_budget_usd;
    let code = match crate::runtime() {
        Ok(runtime) => {
            crate::telemetry_on(&runtime, &options);
            let code = runtime.block_on(run(&args, options, prompt, &mut out));
            maia_otel::shutdown(crate::TELEMETRY_EXIT);
            // Stray blocking work (a Grep walk) is not waited for.
            runtime.shutdown_timeout(Duration::from_millis(200));
            code
        }
        Err(e) => {
            out.error(&format!("{e:#}"));
            FAILED
        }
    };
    ExitCode::from(code)
}

/// The prompt: the argument, else all of stdin (`-` says so too).
fn read_prompt(arg: Option<&str>) -> Result<String, String> {
    let text = match arg {
        Some(text) if text != "-" => text.to_owned(),
        _ => {
            let stdin = std::io::stdin();
            if stdin.is_terminal() {
                return Err(
                    "no prompt: give it as an argument (maia exec \"…\") or on stdin".to_owned(),
                );
            }
            let mut text = String::new();
            stdin
                .lock()
                .read_to_string(&mut text)
                .map_err(|e| format!("cannot read the prompt from stdin: {e}"))?;
            text
        }
    };
    if text.trim().is_empty() {
        return Err("the prompt is empty".to_owned());
    }
    Ok(text)
}

/// The exit status of a run stopped by `signal`.
fn signal_status(signal: &str) -> u8 {
    match signal {
        "SIGHUP" => 129,
        "SIGTERM" => 143,
        _ => 130,
    }
}

async fn run(args: &ExecArgs, options: EngineOptions, prompt: String, out: &mut Output) -> u8 {
    let mut stop = match Stop::new() {
        Ok(stop) => stop,
        Err(e) => {
            out.error(&format!("cannot handle signals: {e}"));
            return FAILED;
        }
    };
    let engine = Engine::new(options);
    let opened = tokio::select! {
        biased;
        signal = stop.next() => return signal_status(signal),
        opened = open(&engine, args) => opened,
    };
    let (handle, events, listed, resumed) = match opened {
        Ok(opened) => opened,
        Err(e) => {
            out.error(&e);
            return FAILED;
        }
    };
    let (asks, asked) = mpsc::unbounded_channel();
    handle.use_client(ClientTools {
        terminals: None,
        asker: Some(Arc::new(Refuse(asks))),
    });
    if let Some(mode) = args.mode
        && let Err(refusal) = handle.set_mode(mode)
    {
        out.error(&format!("--mode {}: {refusal}", mode.id()));
        return FAILED;
    }
    let model = handle.default_model_from(&listed);
    out.started(handle.id(), handle.cwd(), model.as_deref(), resumed);
    let parts = vec![PromptPart::Text(prompt)];
    maia_otel::prompt(handle.id(), None, &parts);
    if handle.prompt(parts).is_err() {
        out.error("the session ended before the prompt could be sent");
        return FAILED;
    }
    let id = handle.id().to_owned();
    let cwd = handle.cwd().to_path_buf();
    let turn = pump(&handle, events, asked, &mut stop, out).await;
    // The thread is released (journal unlocked, MCP servers stopped)
    // before the process says it is done.
    let ended = handle.ended();
    drop(handle);
    let _ = tokio::time::timeout(END_WAIT, ended.cancelled()).await;
    let mut code = match turn {
        Turn::Stopped(signal) => signal_status(signal),
        Turn::Ended(StopReason::Cancelled) => 130,
        Turn::Ended(StopReason::EndTurn) => OK,
        Turn::Unfinished(Unfinished::Budget) => BUDGET,
        Turn::Unfinished(_) => UNFINISHED,
        Turn::Ended(_) | Turn::Failed | Turn::Lost => FAILED,
    };
    if let Some(path) = &args.export
        && let Err(e) = export(args, path, &cwd, &id, out).await
    {
        out.error(&e);
        if code == OK {
            code = FAILED;
        }
    }
    out.ended(&id, turn.stop_reason(), turn.unfinished(), code);
    code
}

/// `--export PATH`: the finished thread written to PATH (relative to the
/// current folder, as a shell user means it); where it went is said on
/// stderr.
async fn export(
    args: &ExecArgs,
    path: &std::path::Path,
    cwd: &std::path::Path,
    id: &str,
    out: &mut Output,
) -> Result<(), String> {
    let here = std::env::current_dir().map_err(|e| format!("no current folder: {e}"))?;
    let request = maia_core::export::Request {
        format: maia_core::export::Format::for_path(path),
        path: Some(here.join(path)),
        force: args.export_force,
    };
    let (cwd, id) = (cwd.to_path_buf(), id.to_owned());
    let written = tokio::task::spawn_blocking(move || {
        maia_core::export::export_saved(&cwd, &id, &request, maia_core::export::Place::Anywhere)
    })
    .await
    .map_err(|e| format!("cannot export: {e}"))?
    .map_err(|e| format!("not exported: {e}"))?;
    out.exported(&written.path);
    Ok(())
}

/// A session opened for the run: its handle, its events, the proxy's
/// models, and whether a saved thread was resumed.
type Opened = (
    SessionHandle,
    mpsc::UnboundedReceiver<Event>,
    Vec<String>,
    bool,
);

/// Checks the proxy and opens the session (new, `--resume ID` or
/// `--continue`).
async fn open(engine: &Engine, args: &ExecArgs) -> Result<Opened, String> {
    let cwd = match &args.cwd {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().map_err(|e| format!("no current folder: {e}"))?,
    };
    let cwd = std::path::absolute(&cwd).unwrap_or(cwd);
    if !cwd.is_dir() {
        return Err(format!("{} is not a folder", cwd.display()));
    }
    let listed = models(engine, &cwd).await?;
    let resume = match (&args.resume, args.continue_latest) {
        (Some(id), _) => Some(id.clone()),
        (None, true) => match engine.list_sessions(&cwd).first() {
            Some(latest) => Some(latest.id.clone()),
            None => {
                return Err(format!(
                    "no saved thread in {} to continue; leave out --continue to start one",
                    cwd.display()
                ));
            }
        },
        (None, false) => None,
    };
    let resumed = resume.is_some();
    let engine = engine.clone();
    // Settings, rules, skills and the journal are read off the runtime.
    let opened = tokio::task::spawn_blocking(move || open_session(&engine, cwd, resume))
        .await
        .map_err(|e| format!("cannot open the session: {e}"))??;
    Ok((opened.0, opened.1, listed, resumed))
}

fn open_session(
    engine: &Engine,
    cwd: PathBuf,
    resume: Option<String>,
) -> Result<(SessionHandle, mpsc::UnboundedReceiver<Event>), String> {
    let fs = Arc::new(LocalFs);
    match resume {
        None => Ok(engine.start_session(cwd, fs)),
        Some(id) => engine
            .load_session_with_mcp(cwd, fs, &id, Vec::new(), Vec::new())
            // The replay is what the thread said before: not printed again.
            .map(|(started, _replay)| started)
            .map_err(|e| e.to_string()),
    }
}

/// The proxy's models. A proxy that cannot be reached or refuses the key
/// stops the run with what to fix; a slow or failing one does not (the
/// turn then says what went wrong).
async fn models(engine: &Engine, cwd: &std::path::Path) -> Result<Vec<String>, String> {
    crate::probe::check_proxy(engine, cwd, MODEL_LIST_WAIT, false)
        .await
        .map_err(|problem| {
            format!(
                "MAIA cannot use its LiteLLM proxy: {problem}. Fix: {}. Or run `maia login`.",
                problem.fix()
            )
        })
}

/// How the turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    Ended(StopReason),
    /// It ended after saying it failed ([`Event::TurnFailed`]).
    Failed,
    /// It ended normally without doing its job.
    Unfinished(Unfinished),
    /// Cancelled by this signal.
    Stopped(&'static str),
    /// The session's events stopped before the turn ended.
    Lost,
}

impl Turn {
    fn stop_reason(self) -> &'static str {
        match self {
            Turn::Ended(stop) => render::stop_name(stop),
            Turn::Failed => "failed",
            Turn::Unfinished(_) => "end_turn",
            Turn::Stopped(_) => "cancelled",
            Turn::Lost => "lost",
        }
    }

    fn unfinished(self) -> Option<Unfinished> {
        match self {
            Turn::Unfinished(why) => Some(why),
            _ => None,
        }
    }
}

/// Reads the session's events until the turn ends, answering what would
/// ask a person, and cancels the turn on the first signal.
async fn pump(
    handle: &SessionHandle,
    mut events: mpsc::UnboundedReceiver<Event>,
    mut asked: mpsc::UnboundedReceiver<Question>,
    stop: &mut Stop,
    out: &mut Output,
) -> Turn {
    let mut tick = tokio::time::interval(render::TICK);
    let mut failed = false;
    let mut stopped = None;
    let mut unfinished = None;
    // Whether the last batch of calls had a call refused here and none
    // completed (decided per batch: its calls run in parallel, in any order).
    let mut batch = LastBatch::default();
    loop {
        tokio::select! {
            biased;
            signal = stop.next() => {
                if stopped.is_some() {
                    // A second signal: leave now (the guard of every
                    // command still kills what it started).
                    out.interrupted(signal, true);
                    return Turn::Stopped(signal);
                }
                out.interrupted(signal, false);
                stopped = Some(signal);
                handle.cancel();
            }
            // Events first: a question's tool call is shown before it.
            event = events.recv() => match event.inspect(|e| maia_otel::observe(handle.id(), e)) {
                None => {
                    maia_otel::session_closed(handle.id());
                    return stopped.map_or(Turn::Lost, Turn::Stopped);
                }
                Some(Event::TurnEnded(reason)) => {
                    if unfinished.is_none() && batch.refused_only() && reason == StopReason::EndTurn {
                        let text = "A call was refused (no one can answer permission questions in `maia exec`) and nothing ran after it: the task is likely not done.";
                        out.unfinished(Unfinished::Refused, text);
                        unfinished = Some(Unfinished::Refused);
                    }
                    return match (stopped, failed, unfinished) {
                        (Some(signal), _, _) => Turn::Stopped(signal),
                        (None, true, _) => Turn::Failed,
                        (None, false, Some(why)) if reason == StopReason::EndTurn => {
                            Turn::Unfinished(why)
                        }
                        (None, false, _) => Turn::Ended(reason),
                    };
                }
                Some(Event::TurnUnfinished { reason, text }) => {
                    out.unfinished(reason, &text);
                    unfinished.get_or_insert(reason);
                }
                Some(Event::TurnFailed(message)) => {
                    failed = true;
                    out.failed(&message);
                }
                // Nobody can raise a budget here: stop (the engine says so
                // with `TurnUnfinished`).
                Some(Event::Permission(request)) if request.tool_call.name == maia_core::budget::QUESTION => {
                    let _ = request.reply.send(PermissionReply::Selected {
                        option: maia_core::budget::STOP.to_owned(),
                        reason: None,
                    });
                }
                Some(Event::Permission(request)) => {
                    let rule = maia_core::permission::suggest_rule_value(
                        &request.tool_call.name,
                        &request.tool_call.raw_input,
                        handle.cwd(),
                    );
                    out.permission_refused(&request.tool_call, rule.map(|r| r.to_string()));
                    batch.refused.insert(request.tool_call.id.clone());
                    let _ = request.reply.send(PermissionReply::Rejected {
                        reason: Some(NO_ONE_TO_ASK.to_owned()),
                    });
                }
                Some(event) => {
                    batch.see(&event);
                    out.event(event);
                }
            },
            Some(question) = asked.recv() => {
                batch.refused.insert(question.tool_call_id.clone());
                out.question_refused(&question);
            }
            _ = tick.tick() => out.tick(),
        }
    }
}

/// The last batch of tool calls as `maia exec` saw it: a batch starts with
/// the first call announced while none is running. Its calls run in
/// parallel and their events come in any order, so what it did is decided
/// at the turn's end from sets, not from the order seen.
#[derive(Default)]
struct LastBatch {
    running: HashSet<String>,
    /// Calls refused here: a permission or a question nobody could answer.
    refused: HashSet<String>,
    completed: HashSet<String>,
}

impl LastBatch {
    fn see(&mut self, event: &Event) {
        match event {
            Event::ToolCall(call) => {
                if self.running.is_empty() {
                    *self = LastBatch::default();
                }
                self.running.insert(call.id.clone());
            }
            Event::ToolCallUpdate(patch) => match patch.status {
                Some(ToolStatus::Completed) => {
                    self.completed.insert(patch.id.clone());
                    self.running.remove(&patch.id);
                }
                Some(ToolStatus::Failed) => {
                    self.running.remove(&patch.id);
                }
                _ => {}
            },
            _ => {}
        }
    }

    /// A call was refused and no other call of the batch did its work.
    fn refused_only(&self) -> bool {
        !self.refused.is_empty() && self.completed.is_subset(&self.refused)
    }
}

/// `AskUser` in a run nobody answers: declined (the model is told to go
/// on without an answer), and reported.
struct Refuse(mpsc::UnboundedSender<Question>);

#[async_trait::async_trait]
impl Asker for Refuse {
    async fn ask(&self, question: &Question) -> Result<Answer, String> {
        let _ = self.0.send(question.clone());
        Ok(Answer::Declined)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_give_their_conventional_status() {
        assert_eq!(signal_status("SIGINT"), 130);
        assert_eq!(signal_status("SIGTERM"), 143);
        assert_eq!(signal_status("SIGHUP"), 129);
    }

    #[test]
    fn an_empty_prompt_is_refused() {
        assert!(read_prompt(Some("  \n")).is_err());
        assert_eq!(read_prompt(Some("hi")).unwrap(), "hi");
    }
}
