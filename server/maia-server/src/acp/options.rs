//! The session's config options and modes in ACP v1 wire types: the
//! model, the mode, the reasoning effort and the thinking switch.

use agent_client_protocol_schema::v1::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption, SessionMode,
    SessionModeState,
};

/// The id of the model config option.
pub const MODEL_OPTION: &str = "model";

/// The id of the mode config option.
pub const MODE_OPTION: &str = "mode";

/// The config options: the model (when known), then the mode (kept in
/// sync with ACP modes), offering `modes` (those the managed policy allows).
pub fn config_options(
    current: Option<String>,
    listed: &[String],
    (mode, offered): (maia_core::Mode, &[maia_core::Mode]),
) -> Vec<SessionConfigOption> {
    let mut out = Vec::new();
    let mut names: Vec<String> = listed.to_vec();
    if let Some(current) = current.or_else(|| names.first().cloned()) {
        if !names.contains(&current) {
            names.insert(0, current.clone());
        }
        let options: Vec<SessionConfigSelectOption> = names
            .iter()
            .map(|n| SessionConfigSelectOption::new(n.clone(), n.clone()))
            .collect();
        out.push(
            SessionConfigOption::select(MODEL_OPTION, "Model", current, options)
                .description("The model MAIA sends requests to".to_owned())
                .category(SessionConfigOptionCategory::Model),
        );
    }
    let modes: Vec<SessionConfigSelectOption> = offered
        .iter()
        .map(|m| {
            SessionConfigSelectOption::new(m.id(), m.name()).description(m.description().to_owned())
        })
        .collect();
    out.push(
        SessionConfigOption::select(MODE_OPTION, "Mode", mode.id(), modes)
            .description("How much MAIA may do without asking".to_owned())
            .category(SessionConfigOptionCategory::Mode),
    );
    out
}

/// The id of the reasoning-effort config option (and the thread option
/// it is saved under, [`maia_core::REASONING_EFFORT`]).
pub const EFFORT_OPTION: &str = "reasoning_effort";

/// The value of [`EFFORT_OPTION`] that sends no effort (the model's own).
pub const EFFORT_DEFAULT: &str = "default";

/// The efforts offered, as LiteLLM's `reasoning_effort` takes them.
pub const EFFORTS: [&str; 3] = ["low", "medium", "high"];

/// The id of the boolean "Show thinking" option (and the thread option it
/// is saved under).
pub const THINKING_OPTION: &str = "show_thinking";

/// The reasoning-effort option (`category: model_config`), `current`
/// `None` being the model's default.
pub fn effort_option(current: Option<&str>) -> SessionConfigOption {
    let mut values = vec![
        SessionConfigSelectOption::new(EFFORT_DEFAULT, "Default")
            .description("No effort sent: the model's own".to_owned()),
    ];
    values.extend(EFFORTS.iter().map(|e| {
        let mut name = (*e).to_owned();
        name[..1].make_ascii_uppercase();
        SessionConfigSelectOption::new(*e, name)
    }));
    SessionConfigOption::select(
        EFFORT_OPTION,
        "Reasoning effort",
        current.unwrap_or(EFFORT_DEFAULT).to_owned(),
        values,
    )
    .description(
        "How hard the model thinks before it answers (LiteLLM's reasoning_effort)".to_owned(),
    )
    .category(SessionConfigOptionCategory::ModelConfig)
}

/// The boolean "Show thinking" option: the model's reasoning is sent as
/// `agent_thought_chunk`s, or not at all.
pub fn thinking_option(show: bool) -> SessionConfigOption {
    SessionConfigOption::boolean(THINKING_OPTION, "Show thinking", show)
        .description("Show the model's reasoning as it thinks".to_owned())
        .category(SessionConfigOptionCategory::ModelConfig)
}

/// The ACP modes of a session: `offered` (those the managed policy allows).
pub fn modes(mode: maia_core::Mode, offered: &[maia_core::Mode]) -> SessionModeState {
    SessionModeState::new(
        mode.id(),
        offered
            .iter()
            .map(|m| SessionMode::new(m.id(), m.name()).description(m.description().to_owned()))
            .collect(),
    )
}
