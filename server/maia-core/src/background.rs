//! A session's background tasks: commands started by `Bash` with
//! `run_in_background` ([`maia_tools::background`]). Each keeps a bounded log
//! and a stop token; all are stopped when the session ends (the registry is
//! dropped), on `/clear`, and by MAIA's exit or death (the guard). When one
//! ends, its tool call is completed with the exit code and a note waits for
//! the model: taken at the next tool-round boundary, else at the next turn.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use maia_tools::background::{Ended, TaskLog};
use maia_tools::{BashInput, ToolContext, ToolOutput};
use tokio::sync::{Notify, mpsc::UnboundedSender};
use tokio_util::sync::CancellationToken;

use crate::event::{Event, ToolCallPatch, ToolCallView, ToolContent, ToolStatus};

/// How a started background call's result begins (the router keeps such a
/// call `in_progress`).
pub(crate) const STARTED: &str = "Started in the background as task ";

/// Characters of a finished task's output shown in its tool call.
const SHOWN_CHARS: usize = 2_000;

/// The tasks of one session (cheap to clone; one registry per session).
#[derive(Clone, Default)]
pub(crate) struct Tasks(Arc<Inner>);

#[derive(Default)]
struct Inner {
    tasks: Mutex<BTreeMap<String, Task>>,
    /// Notes on ended tasks, not yet told to the model.
    notes: Mutex<Vec<String>>,
    /// Final views of ended tasks' calls, not yet journaled.
    views: Mutex<Vec<ToolCallView>>,
    ended: Notify,
    all: CancellationToken,
    next: AtomicU64,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.all.cancel();
    }
}

struct Task {
    command: String,
    log: Arc<Mutex<TaskLog>>,
    stop: CancellationToken,
    /// `None` while it runs, else how it ended.
    ended: Option<String>,
}

impl Tasks {
    /// Starts `input` for the tool call `view` and returns the call's
    /// result at once; the call's final update follows when it ends.
    pub(crate) fn start(
        &self,
        input: &BashInput,
        ctx: &ToolContext,
        view: ToolCallView,
        events: UnboundedSender<Event>,
    ) -> ToolOutput {
        let started = match maia_tools::background::start(input, ctx) {
            Ok(started) => started,
            Err(message) => return ToolOutput::error(message),
        };
        let id = format!("bg-{}", self.0.next.fetch_add(1, Ordering::Relaxed) + 1);
        let log = Arc::new(Mutex::new(TaskLog::default()));
        let stop = self.0.all.child_token();
        if let Ok(mut tasks) = self.0.tasks.lock() {
            tasks.insert(
                id.clone(),
                Task {
                    command: input.command.clone(),
                    log: log.clone(),
                    stop: stop.clone(),
                    ended: None,
                },
            );
        }
        tracing::info!(task = %id, pid = ?started.pid(), "background task started");
        // Its output streams like a foreground command's, outside the turn.
        let observer = ctx.on_output.clone();
        if let Some(observer) = &observer {
            observer(maia_tools::runner::Progress::Started {
                command: &input.command,
                cwd: &ctx.cwd,
            });
        }
        let registry = Arc::downgrade(&self.0);
        let task_id = id.clone();
        tokio::spawn(async move {
            let ended = maia_tools::background::watch(started, log.clone(), stop, observer).await;
            let Some(inner) = registry.upgrade() else {
                return;
            };
            let (said, status) = match &ended {
                Ended::Exited { code: Some(0), .. } => {
                    ("exited with code 0".to_owned(), ToolStatus::Completed)
                }
                Ended::Exited {
                    code: Some(code), ..
                } => (format!("exited with code {code}"), ToolStatus::Failed),
                Ended::Exited {
                    killed: Some(killed),
                    ..
                } => (format!("exited with code {killed}"), ToolStatus::Failed),
                Ended::Exited { .. } => ("exited".to_owned(), ToolStatus::Failed),
                Ended::Stopped => ("was stopped".to_owned(), ToolStatus::Failed),
                Ended::Failed(e) => (format!("could not be waited for: {e}"), ToolStatus::Failed),
            };
            let tail = log.lock().map(|l| l.tail(SHOWN_CHARS)).unwrap_or_default();
            let content = vec![ToolContent::Text {
                text: format!(
                    "{tail}{}Task {task_id} {said}.",
                    if tail.is_empty() || tail.ends_with('\n') {
                        ""
                    } else {
                        "\n"
                    }
                ),
            }];
            let _ = events.send(Event::ToolCallUpdate(ToolCallPatch {
                id: view.id.clone(),
                status: Some(status),
                content: Some(content.clone()),
                raw_output: None,
            }));
            let note = format!(
                "[Background task {task_id} (`{}`) {said}. Read its output with TaskOutput.]",
                view.raw_input["command"].as_str().unwrap_or_default()
            );
            if let Ok(mut tasks) = inner.tasks.lock()
                && let Some(task) = tasks.get_mut(&task_id)
            {
                task.ended = Some(said);
            }
            if let Ok(mut notes) = inner.notes.lock() {
                notes.push(note);
            }
            if let Ok(mut views) = inner.views.lock() {
                views.push(ToolCallView {
                    status,
                    content,
                    ..view
                });
            }
            inner.ended.notify_one();
        });
        ToolOutput::ok(format!(
            "{STARTED}{id}. It runs on; read its new output with TaskOutput {{\"task_id\": \"{id}\"}}, stop it with TaskStop. You are told when it ends."
        ))
    }

    /// The output of `id` not read before, and whether it still runs.
    pub(crate) fn output(&self, id: &str) -> Result<String, String> {
        let tasks = self
            .0
            .tasks
            .lock()
            .map_err(|_| "the task list is unavailable".to_owned())?;
        let task = tasks
            .get(id)
            .ok_or_else(|| format!("no background task `{id}`"))?;
        let new = task.log.lock().map(|mut l| l.unread()).unwrap_or_default();
        let state = match &task.ended {
            None => "is still running".to_owned(),
            Some(said) => said.clone(),
        };
        Ok(format!(
            "{new}{}[Task {id} {state}.]",
            if new.is_empty() || new.ends_with('\n') {
                ""
            } else {
                "\n"
            }
        ))
    }

    /// Stops `id` (its whole process tree); `Ok(false)` when it had ended.
    pub(crate) fn stop(&self, id: &str) -> Result<bool, String> {
        let tasks = self
            .0
            .tasks
            .lock()
            .map_err(|_| "the task list is unavailable".to_owned())?;
        let task = tasks
            .get(id)
            .ok_or_else(|| format!("no background task `{id}`"))?;
        task.stop.cancel();
        Ok(task.ended.is_none())
    }

    /// Stops every task (`/clear`).
    pub(crate) fn stop_all(&self) {
        if let Ok(tasks) = self.0.tasks.lock() {
            for task in tasks.values() {
                task.stop.cancel();
            }
        }
    }

    /// `/tasks`: every task with its state.
    pub(crate) fn list(&self) -> String {
        let Ok(tasks) = self.0.tasks.lock() else {
            return String::new();
        };
        if tasks.is_empty() {
            return "No background tasks.".to_owned();
        }
        tasks
            .iter()
            .map(|(id, task)| {
                let state = task.ended.as_deref().unwrap_or("running");
                format!("- `{id}` {state}: `{}`", task.command)
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Notes on the tasks that ended since the last call, for the model.
    pub(crate) fn take_notes(&self) -> Vec<String> {
        self.0
            .notes
            .lock()
            .map(|mut n| std::mem::take(&mut *n))
            .unwrap_or_default()
    }

    /// The final views of the calls of tasks that ended, to journal.
    pub(crate) fn take_views(&self) -> Vec<ToolCallView> {
        self.0
            .views
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }

    /// Resolves when a task ends (or ended since the last wait).
    pub(crate) async fn ended(&self) {
        self.0.ended.notified().await;
    }
}
