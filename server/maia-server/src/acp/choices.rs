//! What a session offers, as this front door knows it ([`Choices`]): the
//! models listed, the models that take a reasoning effort, the effort and
//! "Show thinking" chosen for the thread, and whether the client takes
//! boolean options. The session's model and mode are not here: they are
//! the session's ([`maia_core::SessionState`], asked of its handle or
//! followed by its [`maia_core::StateReader`]); the config options are made
//! of both.

use std::sync::{Arc, Mutex};

use maia_core::SessionState;
use serde_json::Value;

use super::convert;

/// The front door's choices for one session. Shared by the request
/// handlers and the session's pump.
#[derive(Debug, Clone)]
pub(super) struct Choices {
    /// The endpoint's models, and those the session switched to itself.
    pub(super) models: Vec<String>,
    /// The models that take a reasoning effort (`/model/info`, the
    /// `reasoningModels` setting).
    pub(super) reasoning_models: std::collections::HashSet<String>,
    /// The reasoning effort chosen for the thread (`None`: the model's own).
    pub(super) effort: Option<String>,
    /// Whether the client takes boolean config options
    /// (`session.configOptions.boolean`).
    pub(super) booleans: bool,
    /// Whether the model's reasoning is shown (`agent_thought_chunk`).
    pub(super) show_thinking: bool,
    /// The modes offered (the managed policy may leave `bypass` out).
    pub(super) modes: Vec<maia_core::Mode>,
}

impl Default for Choices {
    fn default() -> Self {
        Choices {
            models: Vec::new(),
            reasoning_models: Default::default(),
            effort: None,
            booleans: false,
            show_thinking: true,
            modes: maia_core::Mode::ALL.to_vec(),
        }
    }
}

impl Choices {
    /// The session's config options as the client sees them, for the
    /// session's `state`: the model, its reasoning effort (for a model
    /// that takes one), the mode, and "Show thinking" (for a client that
    /// takes boolean options).
    pub(super) fn options(
        &self,
        state: &SessionState,
    ) -> Vec<agent_client_protocol_schema::v1::SessionConfigOption> {
        let mut options =
            convert::config_options(state.model.clone(), &self.models, (state.mode, &self.modes));
        if self.takes_effort(state.model.as_deref()) {
            let at = usize::from(state.model.is_some());
            options.insert(at, convert::effort_option(self.effort.as_deref()));
        }
        if self.booleans {
            options.push(convert::thinking_option(self.show_thinking));
        }
        options
    }

    /// Whether `model` takes a reasoning effort.
    pub(super) fn takes_effort(&self, model: Option<&str>) -> bool {
        model.is_some_and(|m| self.reasoning_models.contains(m))
    }

    /// The thread's saved choices (`options` recorded in its journal).
    pub(super) fn restore(&mut self, saved: &maia_core::store::SessionOptions) {
        self.effort = saved
            .get(maia_core::REASONING_EFFORT)
            .and_then(Value::as_str)
            .filter(|e| convert::EFFORTS.contains(e))
            .map(str::to_owned);
        self.show_thinking = saved
            .get(convert::THINKING_OPTION)
            .and_then(Value::as_bool)
            .unwrap_or(true);
    }
}

#[derive(Debug, Clone, Default)]
pub(super) struct SharedChoices(Arc<Mutex<Choices>>);

impl SharedChoices {
    pub(super) fn new(choices: Choices) -> Self {
        SharedChoices(Arc::new(Mutex::new(choices)))
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Choices> {
        // Every change is one assignment: a panic cannot leave it half-made.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
