//! Firing an event: every matching hook (an identical command once) runs
//! at the same time with the event's JSON on stdin; each run is reported
//! ([`Event::Hook`]) and what they decided is combined into one
//! [`Verdict`]. A hook that fails is reported and changes nothing.

use std::path::PathBuf;
use std::sync::Arc;

use futures_util::future::join_all;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::run::{self, Ended, Place};
use super::verdict::{self, Verdict};
use super::{HookEvent, LoadedHooks};
use crate::event::{Event, HookReport, NoticeLevel};

/// What a session gives its hooks.
#[derive(Clone)]
pub(crate) struct Env {
    pub hooks: Arc<LoadedHooks>,
    pub session_id: String,
    pub cwd: PathBuf,
    /// The session's journal file (`None`: the conversation is not saved).
    pub transcript_path: Option<PathBuf>,
    /// The session's mode id (`permission_mode`).
    pub permission_mode: &'static str,
    pub sandbox: Option<Arc<maia_tools::sandbox::Sandbox>>,
    pub events: UnboundedSender<Event>,
}

/// Runs the hooks of `event` matching `subject`, with `fields` added to
/// the common input; `None` when no hook matched (nothing ran).
pub(crate) async fn fire(
    env: &Env,
    event: HookEvent,
    subject: Option<&str>,
    fields: Map<String, Value>,
    cancel: &CancellationToken,
) -> Option<Verdict> {
    let mut hooks = env.hooks.matching(event, subject);
    if hooks.is_empty() {
        return None;
    }
    let mut seen = std::collections::HashSet::new();
    hooks.retain(|h| seen.insert(h.command.clone()));
    let mut input = json!({
        "session_id": env.session_id,
        "transcript_path": env.transcript_path,
        "cwd": env.cwd,
        "hook_event_name": event.name(),
        "permission_mode": env.permission_mode,
    });
    if let Value::Object(map) = &mut input {
        map.extend(fields);
    }
    let input = format!("{input}\n");
    let place = Place {
        cwd: &env.cwd,
        sandbox: env.sandbox.as_deref(),
        session_id: &env.session_id,
    };
    let runs = join_all(hooks.iter().map(|hook| {
        let (input, place) = (&input, &place);
        async move {
            let result = run::run(&hook.command, input, hook.timeout, place, cancel).await;
            (*hook, result)
        }
    }))
    .await;
    let mut total = Verdict::default();
    for (hook, result) in runs {
        let verdict = verdict::read(event, &result, &hook.command);
        let suppress = serde_json::from_str::<Value>(result.stdout.trim())
            .ok()
            .and_then(|v| v.get("suppressOutput").and_then(Value::as_bool))
            .unwrap_or(false);
        let mut output = String::new();
        if !suppress && !result.stdout.trim().is_empty() {
            output.push_str(result.stdout.trim_end());
        }
        if !result.stderr.trim().is_empty() {
            if !output.is_empty() {
                output.push('\n');
            }
            output.push_str(result.stderr.trim_end());
        }
        let exit_code = match result.ended {
            Ended::Exited(code) => Some(code),
            _ => None,
        };
        let outcome = verdict::outcome_name(&verdict, &result.ended);
        tracing::info!(
            event = event.name(),
            command = %hook.command,
            ?exit_code,
            outcome,
            ms = result.elapsed.as_millis() as u64,
            "hook ran"
        );
        let _ = env.events.send(Event::Hook(HookReport {
            id: format!("hook-{}", uuid::Uuid::new_v4().simple()),
            event: event.name(),
            command: hook.command.clone(),
            subject: subject.map(str::to_owned),
            exit_code,
            outcome,
            duration_ms: result.elapsed.as_millis() as u64,
            output,
        }));
        for text in &verdict.to_user {
            let _ = env.events.send(Event::Notice {
                level: NoticeLevel::Warning,
                text: text.clone(),
            });
        }
        total.merge(verdict);
    }
    Some(total)
}
