//! The session's hooks outside tool calls (docs/hooks.md):
//! `UserPromptSubmit` before a prompt is taken, `Stop` (`SubagentStop` in a
//! child) when the model is done, bounded by
//! [`crate::hooks::MAX_STOP_CONTINUATIONS`], `SessionStart` and
//! `SessionEnd`, `PreCompact` and `Notification`. A child of `session`.

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::event::{Event, NoticeLevel};
use crate::hooks::{Env, HookEvent, Verdict};
use crate::session::Session;

/// What the `UserPromptSubmit` hooks decided.
pub(crate) enum PromptVerdict {
    /// Go on, with this context for the model.
    Go(Vec<String>),
    /// The prompt is refused: why (already told to the user).
    Refused,
}

impl Session {
    /// What the session gives its hooks; `None` when it has none.
    pub(crate) fn hook_env(&self) -> Option<Env> {
        if self.project.hooks.commands.is_empty() {
            return None;
        }
        Some(Env {
            hooks: self.project.hooks.clone(),
            session_id: self.id.clone(),
            cwd: self.services.cwd.clone(),
            transcript_path: self.conversation.journal_path().map(|p| p.to_path_buf()),
            permission_mode: self.mode.id(),
            sandbox: self.project.sandbox.clone(),
            events: self.services.events.clone(),
        })
    }

    /// Fires `event` with `fields`; `None` when no hook ran.
    async fn fire_hooks(
        &self,
        event: HookEvent,
        subject: Option<&str>,
        fields: Map<String, Value>,
        cancel: &CancellationToken,
    ) -> Option<Verdict> {
        let env = self.hook_env()?;
        if !env.hooks.has(event) {
            return None;
        }
        crate::hooks::fire(&env, event, subject, fields, cancel).await
    }

    /// A hook said `continue: false`: the user is told why.
    pub(crate) fn hook_stopped(&self, reason: String) {
        self.turn.halt();
        self.emit(Event::Notice {
            level: NoticeLevel::Warning,
            text: format!("Stopped by a hook: {reason}"),
        });
    }

    /// `UserPromptSubmit`, before the prompt `text` is taken.
    pub(crate) async fn prompt_hooks(
        &self,
        text: &str,
        cancel: &CancellationToken,
    ) -> PromptVerdict {
        let mut fields = Map::new();
        fields.insert("prompt".into(), text.into());
        let Some(verdict) = self
            .fire_hooks(HookEvent::UserPromptSubmit, None, fields, cancel)
            .await
        else {
            return PromptVerdict::Go(Vec::new());
        };
        if let Some(reason) = verdict.block.or(verdict.stop) {
            self.say(format!("**Prompt refused by a hook**: {reason}\n"));
            return PromptVerdict::Refused;
        }
        PromptVerdict::Go(verdict.context)
    }

    /// `Stop` (`SubagentStop` in a child) once the model is done;
    /// `continued` continuations were made already in this turn. The text
    /// for the model when a hook sends it back to work.
    pub(crate) async fn stop_hooks(
        &self,
        continued: u32,
        cancel: &CancellationToken,
    ) -> Option<String> {
        let event = match self.role {
            Some(_) => HookEvent::SubagentStop,
            None => HookEvent::Stop,
        };
        let mut fields = Map::new();
        fields.insert("stop_hook_active".into(), (continued > 0).into());
        let verdict = self.fire_hooks(event, None, fields, cancel).await?;
        if cancel.is_cancelled() {
            return None;
        }
        if let Some(reason) = verdict.stop {
            self.hook_stopped(reason);
            return None;
        }
        let reason = verdict.block?;
        if continued >= crate::hooks::MAX_STOP_CONTINUATIONS {
            self.emit(Event::Notice {
                level: NoticeLevel::Warning,
                text: format!(
                    "A {} hook blocked the end again, after {} continuations; the turn ends anyway: {reason}",
                    event.name(),
                    crate::hooks::MAX_STOP_CONTINUATIONS
                ),
            });
            return None;
        }
        Some(reason)
    }

    /// `SessionStart` (`source`: `startup`, `resume`, `clear`, `compact`):
    /// what the hooks print is context for the next prompt.
    pub(crate) async fn session_start_hooks(&mut self, source: &str) {
        let mut fields = Map::new();
        fields.insert("source".into(), source.into());
        let cancel = CancellationToken::new();
        if let Some(verdict) = self
            .fire_hooks(HookEvent::SessionStart, Some(source), fields, &cancel)
            .await
        {
            self.hook_context.extend(verdict.context);
        }
    }

    /// `SessionEnd` as the session closes.
    pub(crate) async fn session_end_hooks(&self, reason: &str) {
        let mut fields = Map::new();
        fields.insert("reason".into(), reason.into());
        let cancel = CancellationToken::new();
        self.fire_hooks(HookEvent::SessionEnd, None, fields, &cancel)
            .await;
    }

    /// `PreCompact` (`trigger`: `manual` or `auto`) before a compaction.
    pub(crate) async fn pre_compact_hooks(&self, trigger: &str, cancel: &CancellationToken) {
        let mut fields = Map::new();
        fields.insert("trigger".into(), trigger.into());
        fields.insert("custom_instructions".into(), "".into());
        self.fire_hooks(HookEvent::PreCompact, Some(trigger), fields, cancel)
            .await;
    }

    /// A compaction between turns (`trigger`: `manual` for `/compact`,
    /// `auto` after a turn), its `PreCompact` hooks first.
    pub(crate) async fn compact_with_hooks(
        &mut self,
        trigger: &str,
        cancel: &CancellationToken,
    ) -> Result<(), crate::compaction::CompactError> {
        self.pre_compact_hooks(trigger, cancel).await;
        self.compact(crate::compaction::Trigger::Between, cancel)
            .await
    }

    /// Context the `SessionStart` hooks left, for the next prompt.
    pub(crate) fn take_hook_context(&mut self) -> Vec<String> {
        std::mem::take(&mut self.hook_context)
    }
}

/// `/hooks` (the list) and `/hooks trust` (the project's hooks as they
/// are now run from then on).
pub(crate) fn hooks_command(session: &mut Session, args: &str) -> String {
    if args.trim() != "trust" {
        return session.project.hooks.report();
    }
    let Some(home) = session.services.options.home.clone() else {
        return "Cannot trust the project's hooks: no home folder to record it in.".to_owned();
    };
    let Some(print) = session.project.hooks.project_fingerprint.clone() else {
        return "This project's .maia/settings.json configures no hooks.".to_owned();
    };
    let cwd = session.services.cwd.clone();
    if let Err(e) = crate::hooks::trust(&home, &cwd, &print) {
        return format!("Cannot record the trust: {e}");
    }
    session.reload_quietly();
    format!(
        "This project's hooks run from now on, as they are; a change to them needs /hooks trust again.\n\n{}",
        session.project.hooks.report()
    )
}
