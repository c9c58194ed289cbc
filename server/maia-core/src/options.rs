//! The engine's process-wide options ([`EngineOptions`]), at the bottom of
//! the module graph: every session reads them, nothing here reads a session.

use std::path::PathBuf;

/// The thread option holding the reasoning effort sent to the model
/// (LiteLLM's `reasoning_effort`: `low`, `medium`, `high`; absent or not
/// a string: none sent).
pub const REASONING_EFFORT: &str = "reasoning_effort";

/// Process-wide options, fixed at start.
#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// The user's home folder (for `~/.maia`); `None` reads no user settings.
    pub home: Option<PathBuf>,
    /// A model forced by `--model` or `MAIA_MODEL`.
    pub model: Option<String>,
    /// The `LITELLM_API_KEY` environment variable.
    pub env_api_key: Option<String>,
    /// A route to the model server set by the front end (see
    /// [`Engine::set_route`]); it wins over the settings.
    pub route: Option<crate::settings::LlmRoute>,
    /// Allow rules (`Tool` or `Tool(pattern)`) given to this process only
    /// (`maia exec --allow`): every session adds them to its rules, below
    /// the deny and ask rules of the settings files; saved nowhere.
    pub allow: Vec<String>,
    /// Sessions leave the prompt queue saved beside a thread alone (neither
    /// run nor changed): `maia exec`, whose process ends with its turn, so
    /// a queued prompt it started would be cut short and lost.
    pub no_queue: bool,
    /// A session budget in US dollars over the `budget.sessionUsd` setting
    /// (`maia exec --max-budget-usd`).
    pub max_budget_usd: Option<f64>,
}
