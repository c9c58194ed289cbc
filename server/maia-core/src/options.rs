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
    /// The managed policy read when the process started (`None`: no
    /// policy file); it bounds every session ([`crate::policy`]).
    pub policy: Option<std::sync::Arc<crate::policy::ManagedPolicy>>,
    /// A session budget in US dollars over the `budget.sessionUsd` setting
    /// (`maia exec --max-budget-usd`).
    pub max_budget_usd: Option<f64>,
}

impl EngineOptions {
    /// Whether the managed policy (if any) lets a session use `model`.
    pub fn check_model(&self, model: &str) -> Result<(), crate::policy::Refusal> {
        self.policy
            .as_ref()
            .map_or(Ok(()), |p| p.check_model(model))
    }

    /// Whether the managed policy (if any) lets a session switch to `mode`.
    pub fn check_mode(&self, mode: crate::Mode) -> Result<(), crate::policy::Refusal> {
        self.policy.as_ref().map_or(Ok(()), |p| p.check_mode(mode))
    }

    /// The modes a session may be switched to.
    pub fn modes(&self) -> Vec<crate::Mode> {
        self.policy
            .as_ref()
            .map_or_else(|| crate::Mode::ALL.to_vec(), |p| p.modes())
    }
}
