//! Whether a session offers web search, and with which of the proxy's
//! search tools: the `webSearchTool` setting (a tool name, or `false` for
//! none; unset: the first tool the proxy lists) checked against LiteLLM's
//! list (`GET /v1/search/tools`, [`maia_llm::LlmClient::search_tools`]).
//! Asked once per project load, before the first turn's tools are built
//! ([`probe`]); a proxy without search (no route, an empty list) or that
//! cannot be asked offers none, and a named tool the proxy does not list
//! is reported once. The tool itself is `tools/web_search.rs`.

use serde_json::Value;

/// The `webSearchTool` setting.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Choice {
    /// Unset: the first search tool the proxy lists.
    #[default]
    First,
    /// This search tool of the proxy's.
    Named(String),
    /// `false`: never offered.
    Off,
}

/// Reads `webSearchTool`: a non-empty string or `false`; anything else is
/// reported and treated as unset.
pub(crate) fn parse_setting(value: Option<&Value>, warnings: &mut Vec<String>) -> Choice {
    match value {
        None | Some(Value::Null) | Some(Value::Bool(true)) => Choice::First,
        Some(Value::Bool(false)) => Choice::Off,
        Some(Value::String(name)) if !name.trim().is_empty() => Choice::Named(name.trim().into()),
        Some(_) => {
            warnings.push(
                "webSearchTool must be the name of one of the proxy's search tools, or false; \
                 the first one the proxy lists is used"
                    .to_owned(),
            );
            Choice::First
        }
    }
}

/// What the probe found: the search tool to use, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Tool(String),
    /// `webSearchTool` is `false`.
    Off,
    /// The proxy lists no search tool (or has no search route).
    NoneListed,
    /// The named tool is not among those the proxy lists.
    NotListed {
        wanted: String,
        listed: Vec<String>,
    },
    /// The list could not be read.
    Failed(String),
}

impl Found {
    /// The tool to offer, if any.
    pub fn tool(&self) -> Option<&str> {
        match self {
            Found::Tool(name) => Some(name),
            _ => None,
        }
    }

    /// One line for `maia doctor` and the logs.
    pub fn describe(&self) -> String {
        match self {
            Found::Tool(name) => format!("web search through the proxy's search tool {name}"),
            Found::Off => "web search off (webSearchTool is false)".to_owned(),
            Found::NoneListed => "the proxy has no search tool: no web search".to_owned(),
            Found::NotListed { wanted, listed } => format!(
                "webSearchTool is {wanted}, which the proxy does not list ({}): no web search",
                if listed.is_empty() {
                    "it lists none".to_owned()
                } else {
                    format!("it lists {}", listed.join(", "))
                }
            ),
            Found::Failed(why) => format!("the proxy's search tools could not be listed: {why}"),
        }
    }
}

/// Asks the proxy which search tools it has and picks one for `choice`.
pub async fn find(llm: &maia_llm::LlmClient, choice: &Choice) -> Found {
    if *choice == Choice::Off {
        return Found::Off;
    }
    let listed = match llm.search_tools().await {
        Ok(listed) => listed,
        Err(e) => return Found::Failed(e.to_string()),
    };
    match choice {
        Choice::Named(wanted) if listed.contains(wanted) => Found::Tool(wanted.clone()),
        Choice::Named(wanted) => Found::NotListed {
            wanted: wanted.clone(),
            listed,
        },
        _ => listed
            .into_iter()
            .next()
            .map_or(Found::NoneListed, Found::Tool),
    }
}

/// Probes once per project load into `cell` (later calls return at
/// once; the project keeps the cell). A named tool the proxy does not
/// list, or a list that failed, is logged as a warning. Cancelled with
/// the turn (the next turn asks again).
pub(crate) async fn probe(
    llm: &maia_llm::LlmClient,
    choice: &Choice,
    cell: &tokio::sync::OnceCell<Found>,
    cancel: &tokio_util::sync::CancellationToken,
) {
    let asked = cell.get_or_init(|| async {
        let found = find(llm, choice).await;
        match &found {
            Found::NotListed { .. } | Found::Failed(_) => {
                tracing::warn!("{}", found.describe());
            }
            _ => tracing::debug!("{}", found.describe()),
        }
        found
    });
    tokio::select! {
        _ = asked => {}
        () = cancel.cancelled() => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_setting_names_a_tool_turns_search_off_or_leaves_the_choice_to_the_proxy() {
        let mut warnings = Vec::new();
        assert_eq!(parse_setting(None, &mut warnings), Choice::First);
        assert_eq!(
            parse_setting(Some(&json!(false)), &mut warnings),
            Choice::Off
        );
        assert_eq!(
            parse_setting(Some(&json!(" web ")), &mut warnings),
            Choice::Named("web".into())
        );
        assert!(warnings.is_empty());
        assert_eq!(parse_setting(Some(&json!(3)), &mut warnings), Choice::First);
        assert_eq!(
            parse_setting(Some(&json!("")), &mut warnings),
            Choice::First
        );
        assert_eq!(warnings.len(), 2);
        let missing = Found::NotListed {
            wanted: "web".into(),
            listed: vec!["news".into()],
        };
        assert_eq!(missing.tool(), None);
        assert!(
            missing.describe().contains("it lists news"),
            "{}",
            missing.describe()
        );
    }
}
