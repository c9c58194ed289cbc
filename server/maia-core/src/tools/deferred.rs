//! MCP tools on demand: which tool definitions a request carries. When the
//! MCP servers' tools weigh more than the `mcpToolSearch` setting allows
//! ([`McpToolSearch`]), each is offered by name with a one-line summary in
//! the description of the tool that loads them (`ToolSearch`,
//! [`super::tool_search`]) until it is loaded: found by a search, or called
//! by name. The thread keeps what was loaded (the conversation's
//! `loaded_tools`); [`DeferredTools`] tells what is deferred and loaded.

use std::collections::BTreeSet;

use maia_llm::ToolSpec;
use serde_json::json;

use super::registry::ToolRegistry;
use crate::settings::McpToolSearch;

/// The window assumed when the model's is not known, in tokens.
pub(crate) const ASSUMED_WINDOW: u64 = 32_768;

/// Bytes a tool definition is counted for a token (the setting's share
/// of the window is compared with the definitions' bytes).
const BYTES_PER_TOKEN: u64 = 4;

/// Characters of a deferred tool's summary line.
const SUMMARY_CHARS: usize = 100;

/// Deferred tools listed by name at most; the rest are found by a search.
const MAX_LISTED: usize = 300;

/// What a request carries of the tools that may be deferred, for the
/// context accounting and `/mcp`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeferredTools {
    /// The MCP tools are offered on demand in this request.
    pub on_demand: bool,
    /// Tools offered by name only, and what their definitions would weigh.
    pub deferred: usize,
    pub deferred_bytes: usize,
    /// MCP tools whose definitions are sent (loaded, or all when not on
    /// demand), and their bytes.
    pub loaded: usize,
    pub loaded_bytes: usize,
    /// The definition of the loading tool, with its list of names.
    pub search_bytes: usize,
    /// Past this many bytes of MCP definitions they go on demand (`None`:
    /// the setting decides alone).
    pub threshold_bytes: Option<usize>,
}

impl DeferredTools {
    /// What a request carries of the MCP tools, for `/mcp` (`None`: no
    /// MCP tool).
    pub(crate) fn describe(&self) -> Option<String> {
        if self.on_demand {
            Some(format!(
                "Tools on demand (`mcpToolSearch`): {} offered by name only ({} bytes of definitions not sent), \
                 {} loaded ({} bytes sent); the model loads them with ToolSearch.",
                self.deferred, self.deferred_bytes, self.loaded, self.loaded_bytes
            ))
        } else if self.loaded > 0 {
            Some(format!(
                "Their {} tool definitions are sent whole ({} bytes{}).",
                self.loaded,
                self.loaded_bytes,
                self.threshold_bytes
                    .map(|t| format!("; offered by name only past {t} bytes, `mcpToolSearch`"))
                    .unwrap_or_default()
            ))
        } else {
            None
        }
    }
}

/// The definitions one request carries, and the tally.
pub(crate) struct Offer {
    pub specs: Vec<ToolSpec>,
    pub tally: DeferredTools,
}

/// The bytes one definition takes in a request (as the OpenAI wire sends it).
pub(crate) fn spec_bytes(spec: &ToolSpec) -> usize {
    json!({"type": "function", "function": {
        "name": spec.name, "description": spec.description, "parameters": spec.parameters
    }})
    .to_string()
    .len()
}

/// The MCP definitions' weight past which they go on demand, for a model
/// of `window` tokens.
pub(crate) fn threshold(setting: McpToolSearch, window: Option<u64>) -> Option<usize> {
    match setting {
        McpToolSearch::Above(percent) => {
            let window = window.unwrap_or(ASSUMED_WINDOW);
            usize::try_from(window * BYTES_PER_TOKEN * u64::from(percent) / 100).ok()
        }
        McpToolSearch::Always | McpToolSearch::Never => None,
    }
}

/// The definitions a request carries from `registry`: all of them, or,
/// when the deferrable tools weigh too much, the others, the `loaded`
/// ones, and the loading tool listing the rest. Without a loading tool in
/// the registry (a subagent whose tools leave it out) everything is sent.
pub(crate) fn offer(
    registry: &ToolRegistry,
    setting: McpToolSearch,
    window: Option<u64>,
    loaded: &BTreeSet<String>,
) -> Offer {
    let threshold_bytes = threshold(setting, window);
    let deferrable: Vec<(&ToolSpec, usize)> = registry
        .entries()
        .filter(|(_, tool)| tool.deferrable())
        .map(|(spec, _)| (spec, spec_bytes(spec)))
        .collect();
    let total: usize = deferrable.iter().map(|(_, bytes)| bytes).sum();
    let can_load = registry.entries().any(|(_, tool)| tool.lists_deferred());
    let on_demand = can_load
        && !deferrable.is_empty()
        && match setting {
            McpToolSearch::Always => true,
            McpToolSearch::Never => false,
            McpToolSearch::Above(_) => threshold_bytes.is_some_and(|t| total > t),
        };
    let mut tally = DeferredTools {
        on_demand,
        threshold_bytes,
        ..DeferredTools::default()
    };
    let deferred: Vec<&(&ToolSpec, usize)> = deferrable
        .iter()
        .filter(|(spec, _)| on_demand && !loaded.contains(&spec.name))
        .collect();
    for (spec, bytes) in &deferrable {
        if deferred.iter().any(|(d, _)| d.name == spec.name) {
            tally.deferred += 1;
            tally.deferred_bytes += bytes;
        } else {
            tally.loaded += 1;
            tally.loaded_bytes += bytes;
        }
    }
    let mut specs = Vec::new();
    for (spec, tool) in registry.entries() {
        if tool.lists_deferred() {
            if !deferred.is_empty() {
                let listed = ToolSpec {
                    description: listing(&spec.description, deferred.iter().map(|(s, _)| *s)),
                    ..spec.clone()
                };
                tally.search_bytes = spec_bytes(&listed);
                specs.push(listed);
            }
        } else if !deferred.iter().any(|(d, _)| d.name == spec.name) {
            specs.push(spec.clone());
        }
    }
    Offer { specs, tally }
}

/// The loading tool's description followed by one line per deferred tool.
fn listing<'a>(intro: &str, deferred: impl Iterator<Item = &'a ToolSpec>) -> String {
    let deferred: Vec<&ToolSpec> = deferred.collect();
    let mut text = format!("{intro}\n\nTools offered by name only (load before use):");
    for spec in deferred.iter().take(MAX_LISTED) {
        text.push_str(&format!(
            "\n- {}: {}",
            spec.name,
            summary(&spec.description)
        ));
    }
    if deferred.len() > MAX_LISTED {
        text.push_str(&format!(
            "\n… and {} more: search for them by what they do.",
            deferred.len() - MAX_LISTED
        ));
    }
    text
}

/// The first sentence of a description's first line, at most
/// [`SUMMARY_CHARS`] characters.
pub(crate) fn summary(description: &str) -> String {
    let line = description
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("(no description)");
    let line = line.find(". ").map_or(line, |end| &line[..=end]);
    if line.chars().count() <= SUMMARY_CHARS {
        return line.to_owned();
    }
    let cut: String = line.chars().take(SUMMARY_CHARS - 1).collect();
    format!("{}…", cut.trim_end())
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use maia_llm::ToolCall;
    use maia_tools::ToolOutput;
    use serde_json::Value;

    use super::*;
    use crate::tools::registry::{CallEnv, CallPlan, Ran, Tool, ToolEffect};

    /// A tool of a given kind and size.
    struct Made {
        name: &'static str,
        deferrable: bool,
        loader: bool,
        padding: usize,
    }

    #[async_trait::async_trait]
    impl Tool for Made {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: self.name.to_owned(),
                description: format!(
                    "Does {}.\nMore about it.{}",
                    self.name,
                    "x".repeat(self.padding)
                ),
                parameters: json!({"type": "object"}),
            }
        }
        fn effect(&self) -> ToolEffect {
            ToolEffect::Process
        }
        fn plan(&self, call: &ToolCall, _: &Value, _: &Path) -> Result<CallPlan, String> {
            Ok(CallPlan::new(
                call.name.clone(),
                crate::permission::GateFacts::default(),
                (),
            ))
        }
        async fn run(&self, _: CallPlan, _: &CallEnv<'_>) -> Ran {
            ToolOutput::ok("").into()
        }
        fn deferrable(&self) -> bool {
            self.deferrable
        }
        fn lists_deferred(&self) -> bool {
            self.loader
        }
    }

    fn registry(padding: usize, with_loader: bool) -> ToolRegistry {
        let mut r = ToolRegistry::default();
        let tool = |name, deferrable, loader| {
            Arc::new(Made {
                name,
                deferrable,
                loader,
                padding: if deferrable { padding } else { 0 },
            })
        };
        r.register(tool("Read", false, false));
        r.register(tool("mcp__a__one", true, false));
        r.register(tool("mcp__a__two", true, false));
        if with_loader {
            r.register(tool("Loader", false, true));
        }
        r
    }

    fn names(offer: &Offer) -> Vec<&str> {
        offer.specs.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn small_definitions_are_sent_whole_without_the_loader() {
        let offer = offer(
            &registry(10, true),
            McpToolSearch::default(),
            Some(100_000),
            &BTreeSet::new(),
        );
        assert_eq!(names(&offer), ["Read", "mcp__a__one", "mcp__a__two"]);
        assert!(!offer.tally.on_demand);
        assert_eq!(offer.tally.loaded, 2);
        assert_eq!(offer.tally.deferred, 0);
        assert_eq!(offer.tally.threshold_bytes, Some(40_000));
    }

    #[test]
    fn past_the_share_of_the_window_tools_are_listed_by_name_until_loaded() {
        // 10 % of 1,000 tokens is 400 bytes; each tool weighs over 500.
        let r = registry(500, true);
        let offer_of = |loaded: &[&str]| {
            let loaded = loaded.iter().map(|s| (*s).to_owned()).collect();
            offer(&r, McpToolSearch::default(), Some(1_000), &loaded)
        };
        let none = offer_of(&[]);
        assert_eq!(names(&none), ["Read", "Loader"]);
        assert!(none.tally.on_demand);
        assert_eq!(none.tally.deferred, 2);
        let listing = &none.specs[1].description;
        assert!(
            listing.contains("\n- mcp__a__one: Does mcp__a__one.\n- mcp__a__two"),
            "{listing}"
        );
        assert!(!listing.contains("xxx"), "{listing}");
        let one = offer_of(&["mcp__a__one"]);
        assert_eq!(names(&one), ["Read", "mcp__a__one", "Loader"]);
        assert_eq!((one.tally.deferred, one.tally.loaded), (1, 1));
        assert!(one.tally.loaded_bytes > 500 && one.tally.deferred_bytes > 500);
        // Everything loaded: the loader has nothing left to list.
        let all = offer_of(&["mcp__a__one", "mcp__a__two"]);
        assert_eq!(names(&all), ["Read", "mcp__a__one", "mcp__a__two"]);
        assert_eq!(all.tally.search_bytes, 0);
    }

    #[test]
    fn the_setting_forces_either_way_and_no_loader_means_everything() {
        let empty = BTreeSet::new();
        let always = offer(&registry(0, true), McpToolSearch::Always, None, &empty);
        assert_eq!(names(&always), ["Read", "Loader"]);
        let never = offer(
            &registry(5_000, true),
            McpToolSearch::Never,
            Some(1_000),
            &empty,
        );
        assert_eq!(names(&never), ["Read", "mcp__a__one", "mcp__a__two"]);
        let no_loader = offer(&registry(0, false), McpToolSearch::Always, None, &empty);
        assert_eq!(names(&no_loader), ["Read", "mcp__a__one", "mcp__a__two"]);
        assert!(!no_loader.tally.on_demand);
        // An unknown window counts as 32k tokens.
        assert_eq!(threshold(McpToolSearch::default(), None), Some(13_107));
    }

    #[test]
    fn a_summary_is_the_first_line_cut_short() {
        assert_eq!(summary("\n  Echoes back.  \nMore."), "Echoes back.");
        assert_eq!(
            summary("Compresses a file. Depending on the type, returns more."),
            "Compresses a file."
        );
        assert_eq!(summary("Version 1.2 of it"), "Version 1.2 of it");
        assert_eq!(summary(""), "(no description)");
        let long = summary(&"é".repeat(300));
        assert_eq!(long.chars().count(), SUMMARY_CHARS);
        assert!(long.ends_with('…'));
    }
}
