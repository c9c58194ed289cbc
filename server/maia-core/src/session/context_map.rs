//! A session's map of its context ([`crate::context_map`]): the parts of
//! what the next request carries, measured against the window, the output
//! reserve and the auto-compaction trigger. Built for each usage report and
//! for `/context`, from the same numbers the meter gives.

use tokio_util::sync::CancellationToken;

use super::Session;
use crate::context_map::{ContextMap, Frame, Parts};
use crate::meter::message_chars;

/// Characters of tool schemas as the meter counts them (none: 0).
pub(crate) fn schema_chars<'a>(specs: impl Iterator<Item = &'a maia_llm::ToolSpec>) -> usize {
    let specs: Vec<_> = specs
        .map(|t| (&t.name, &t.description, &t.parameters))
        .collect();
    if specs.is_empty() {
        return 0;
    }
    serde_json::to_string(&specs).map(|s| s.len()).unwrap_or(0)
}

/// Whether a tool comes from an MCP server (`mcp__<server>__<tool>`).
fn is_mcp(name: &str) -> bool {
    name.starts_with("mcp__")
}

impl Session {
    /// The window of `model` and the longest answer it writes, told to the
    /// meter (the answer's length from the proxy's model information, read
    /// once per process; only asked when the window is known).
    pub(crate) async fn learn_window(&mut self, model: &str, cancel: &CancellationToken) {
        let window = self.known_window(model, cancel).await;
        self.meter
            .know_window(window.map(|w| (w.tokens, w.source.as_str())));
        let max_output = match (&window, &self.project.llm) {
            (Some(_), Ok(llm)) => {
                crate::window::model_info_entry(&self.services.windows, llm, model, cancel)
                    .await
                    .and_then(|entry| entry.max_output_tokens)
            }
            _ => None,
        };
        self.meter.know_max_output(max_output);
    }

    /// The tokens kept free for the answer (0 while the window is unknown,
    /// [`crate::context_map::output_reserve`]).
    pub(crate) fn output_reserve(&self) -> u64 {
        self.meter.window().map_or(0, |w| {
            crate::context_map::output_reserve(w, self.meter.max_output())
        })
    }

    /// The context size above which the conversation is compacted by
    /// itself; `None` when the window is unknown or `autoCompact` is off.
    pub(crate) fn auto_compact_at(&self) -> Option<u64> {
        let window = self.meter.window()?;
        crate::context_map::trigger(
            window,
            self.output_reserve(),
            self.project.settings.auto_compact,
        )
    }

    /// Whether `autoCompact` lets the session compact by itself.
    pub(crate) fn auto_compact_enabled(&self) -> bool {
        self.project.settings.auto_compact.enabled
    }

    /// The map of a context of `used` tokens (what the meter says, from
    /// `source`: `measured` or `estimated`), with `answer_chars` of an
    /// answer not in the history yet; while the window is unknown its
    /// `window` is 0 (no reserve, nothing free).
    pub(crate) fn context_map(
        &self,
        used: u64,
        source: &'static str,
        answer_chars: usize,
    ) -> ContextMap {
        let window = self.meter.window().unwrap_or(0);
        let specs = self.tool_specs();
        let own = role_free(self);
        let parts = Parts {
            system_chars: self.system_prompt().len(),
            instructions: own.instructions,
            skills_chars: own.skills_chars,
            summary_chars: self.conversation.summary().map_or(0, str::len),
            tools_chars: schema_chars(specs.iter().filter(|s| !is_mcp(&s.name))),
            mcp_chars: schema_chars(specs.iter().filter(|s| is_mcp(&s.name))),
            conversation_chars: message_chars(self.conversation.history()) + answer_chars,
            extra_tokens: crate::images::overlay_tokens(&crate::images::within_request_limits(
                &self.turn.images,
            )),
        };
        crate::context_map::build(
            &parts,
            Frame {
                window,
                used,
                reserve: self.output_reserve(),
                auto_compact_at: self.auto_compact_at(),
                source,
            },
        )
    }
}

/// The parts of the system prompt a session of the main agent has (a
/// subagent's own prompt has neither).
struct PromptParts {
    instructions: Vec<(String, usize)>,
    skills_chars: usize,
}

fn role_free(session: &Session) -> PromptParts {
    if session.role.as_ref().is_some_and(|r| r.prompt.is_some()) {
        return PromptParts {
            instructions: Vec::new(),
            skills_chars: 0,
        };
    }
    // A compaction summary replaces the instruction files in the prompt.
    let instructions = if session.conversation.summary().is_some() {
        Vec::new()
    } else {
        session
            .project
            .context_files
            .files
            .iter()
            .map(|f| (f.path.display().to_string(), f.text.len()))
            .collect()
    };
    PromptParts {
        instructions,
        skills_chars: crate::skills::prompt_section(&session.project.skills.skills)
            .map_or(0, |s| s.len()),
    }
}
