//! The built-in tools (Read, Write, Edit, MultiEdit, Glob, Grep, Bash, WebFetch) as
//! [`Tool`]s: one adapter over `maia_tools::{ToolInput, prepare, execute}`;
//! a file read is opened in its language servers, an edit's (or a Bash
//! command's) result gains the diagnostics it changed
//! ([`crate::langs::after_edit`]).

use std::path::Path;

use maia_llm::{ToolCall, ToolSpec};
use maia_tools::{Prepared, ToolContext, ToolDefinition, ToolInput, ToolOutput};
use serde_json::Value;

use super::registry::{CallEnv, CallPlan, Ran, Tool, ToolEffect};
use crate::event::ToolContent;
use crate::permission::{Effect, builtin_facts};

/// One built-in tool.
pub(crate) struct Builtin {
    definition: ToolDefinition,
    /// Where `Bash` with `run_in_background` starts its command.
    tasks: crate::background::Tasks,
}

/// Every built-in tool, in the order offered to the model.
pub(crate) fn all(tasks: &crate::background::Tasks) -> Vec<Builtin> {
    maia_tools::definitions()
        .into_iter()
        .map(|definition| Builtin {
            definition,
            tasks: tasks.clone(),
        })
        .collect()
}

/// A built-in call: read, then prepared (the diff computed).
enum State {
    Read(ToolInput),
    Prepared(Prepared),
}

#[async_trait::async_trait]
impl Tool for Builtin {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.definition.name.to_owned(),
            description: self.definition.description.clone(),
            parameters: self.definition.parameters.clone(),
        }
    }

    fn narrow_hint(&self) -> &'static str {
        self.definition.narrow_hint
    }

    fn result_on_disk(&self) -> bool {
        self.definition.name == "Read"
    }

    /// As `maia-tools` declares it for the tool.
    fn effect(&self) -> ToolEffect {
        match self.definition.changes {
            maia_tools::Changes::Nothing => ToolEffect::ReadOnly,
            maia_tools::Changes::Files => ToolEffect::Files,
            maia_tools::Changes::Process => ToolEffect::Process,
        }
    }

    fn plan(&self, call: &ToolCall, _raw: &Value, cwd: &Path) -> Result<CallPlan, String> {
        let input = ToolInput::parse(&call.name, &call.arguments).map_err(|e| e.to_string())?;
        let mut plan = CallPlan::new(input.title(cwd), builtin_facts(&input, cwd), ());
        plan.kind = Some(input.kind());
        plan.locations = input.paths(cwd);
        if matches!(input, ToolInput::Read(_)) || input.edited_file().is_some() {
            plan.keys = input.paths(cwd);
        }
        plan.sandbox_key = input.command().map(str::to_owned);
        plan.input = Box::new(State::Read(input));
        Ok(plan)
    }

    async fn prepare(
        &self,
        plan: &mut CallPlan,
        ctx: &ToolContext,
    ) -> Result<Option<ToolContent>, String> {
        let Some(State::Read(input)) = plan.input.downcast_ref::<State>() else {
            return Ok(None);
        };
        let prepared = maia_tools::prepare(input.clone(), ctx)
            .await
            .map_err(|e| e.to_string())?;
        // An edit the front door shows hunk by hunk is approved there.
        if let Effect::EditsFile(path) = &plan.gate.effect {
            let path = maia_tools::path::resolve(&ctx.cwd, path);
            plan.gate.edit_reviewed = ctx.fs.reviews_writes(&path);
        }
        let diff = prepared.diff.clone().map(|diff| ToolContent::Diff { diff });
        plan.input = Box::new(State::Prepared(prepared));
        Ok(diff)
    }

    async fn run(&self, plan: CallPlan, env: &CallEnv<'_>) -> Ran {
        let (title, kind, locations) = (plan.title.clone(), plan.kind, plan.locations.clone());
        let prepared = match plan.take::<State>() {
            Some(State::Prepared(Prepared {
                input: ToolInput::Bash(bash),
                ..
            })) if bash.run_in_background => {
                let view = crate::event::ToolCallView {
                    id: env.id.to_owned(),
                    name: self.definition.name.to_owned(),
                    title,
                    kind,
                    locations,
                    raw_input: serde_json::json!({"command": bash.command, "run_in_background": true}),
                    status: crate::event::ToolStatus::InProgress,
                    content: Vec::new(),
                };
                return self
                    .tasks
                    .start(&bash, env.ctx, view, env.batch.events.clone())
                    .into();
            }
            Some(State::Prepared(prepared)) => prepared,
            _ => return ToolOutput::error("internal error: the call was not prepared").into(),
        };
        let (ctx, lsp) = (env.ctx, &env.batch.lsp);
        let path = prepared.input.paths(&ctx.cwd).into_iter().next();
        let edits = prepared.input.edited_file().is_some();
        let reads = matches!(prepared.input, ToolInput::Read(_));
        // The language servers check an edit of a file they serve.
        let checked = path.filter(|p| (edits || reads) && lsp.serves(p));
        let old = match &checked {
            Some(p) if edits => ctx.fs.read_to_string(p).await.ok(),
            _ => None,
        };
        let mut output = maia_tools::execute(prepared, ctx).await;
        match checked {
            Some(path) if reads && !output.is_error => lsp.warm(&path),
            Some(path) if !output.is_error => {
                if let Ok(new) = ctx.fs.read_to_string(&path).await
                    && let Some(note) =
                        crate::langs::after_edit(lsp, &path, old.as_deref(), &new, &ctx.cwd).await
                {
                    output.content.push_str(&note);
                }
            }
            // A command may have changed files the servers have open.
            None if self.definition.changes == maia_tools::Changes::Process
                && !ctx.cancel.is_cancelled() =>
            {
                if let Some(note) = crate::langs::after_command(lsp, &ctx.cwd).await {
                    output.content.push_str(&note);
                }
            }
            _ => {}
        }
        output.into()
    }
}
