//! `ToolSearch`: loads the definitions of tools offered by name only (the
//! MCP servers' tools when they weigh too much, [`super::deferred`]). The
//! query names tools (`select:NAME,NAME`, or the names alone) or describes
//! what is needed (words matched against names and descriptions); the
//! result gives each found tool's full definition, and the tools are sent
//! whole from the next request on ([`TurnEffect::ToolsLoaded`]).

use std::path::Path;
use std::sync::Arc;

use maia_llm::{ToolCall, ToolSpec};
use maia_mcp::McpManager;
use maia_tools::ToolOutput;
use serde_json::{Value, json};

use super::registry::{CallEnv, CallPlan, Ran, Tool, ToolEffect, TurnEffect};
use crate::permission::{GateFacts, suggest_rule_value};

/// Tools a word search loads unless told otherwise, and at most.
const DEFAULT_RESULTS: usize = 5;
const MAX_RESULTS: usize = 20;

/// The definition without its list of deferred tools (added per request).
pub(crate) fn definition() -> ToolSpec {
    ToolSpec {
        name: "ToolSearch".to_owned(),
        description: "Load the definitions of the tools listed below, which are offered by name only, \
so that you can call them with the right parameters. `query`: `select:NAME,NAME` loads those tools; \
other words search the tools' names and descriptions and load the best matches. A loaded tool can be \
called from your next step on, for the rest of the conversation."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "`select:NAME,NAME`, or words saying what the tool should do"},
                "max_results": {"type": "integer", "description": "At most this many tools for a word search (default 5)"}
            },
            "required": ["query"]
        }),
    }
}

/// A call's reading: what to look for.
#[derive(Debug, Clone, PartialEq)]
struct Query {
    text: String,
    max: usize,
}

fn parse(raw: &Value) -> Result<Query, String> {
    let text = match raw {
        Value::Object(map) => map.get("query").and_then(Value::as_str),
        Value::String(s) => Some(s.as_str()),
        _ => None,
    }
    .map(str::trim)
    .filter(|q| !q.is_empty())
    .ok_or("`query` is required: `select:NAME` or words saying what the tool should do")?;
    let max = raw
        .get("max_results")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_RESULTS, |n| (n as usize).clamp(1, MAX_RESULTS));
    Ok(Query {
        text: text.to_owned(),
        max,
    })
}

/// What a query found among `tools`: the tools, and the names it gave that
/// match none.
fn find<'a>(query: &Query, tools: &'a [ToolSpec]) -> (Vec<&'a ToolSpec>, Vec<String>) {
    let by_name = |name: &str| {
        let name = name.trim().trim_matches('`');
        tools
            .iter()
            .find(|t| t.name == name)
            .or_else(|| tools.iter().find(|t| t.name.eq_ignore_ascii_case(name)))
            .or_else(|| {
                // The server's own name for it, when only one server has it.
                let mut own = tools.iter().filter(|t| {
                    t.name
                        .rsplit("__")
                        .next()
                        .is_some_and(|n| n.eq_ignore_ascii_case(name))
                });
                match (own.next(), own.next()) {
                    (Some(one), None) => Some(one),
                    _ => None,
                }
            })
    };
    let names: Vec<&str> = match query.text.strip_prefix("select:") {
        Some(list) => list.split(',').filter(|n| !n.trim().is_empty()).collect(),
        None => query
            .text
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|n| !n.is_empty())
            .collect(),
    };
    let selected = query.text.starts_with("select:") || names.iter().all(|n| by_name(n).is_some());
    if selected {
        let mut found: Vec<&ToolSpec> = Vec::new();
        let mut unknown = Vec::new();
        for name in names {
            match by_name(name) {
                Some(t) if !found.iter().any(|f| f.name == t.name) => found.push(t),
                Some(_) => {}
                None => unknown.push(name.trim().to_owned()),
            }
        }
        return (found, unknown);
    }
    let words: Vec<String> = query
        .text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 1)
        .map(str::to_lowercase)
        .collect();
    let mut scored: Vec<(usize, &ToolSpec)> = tools
        .iter()
        .map(|t| {
            let name = t.name.to_lowercase();
            let description = t.description.to_lowercase();
            let score = words
                .iter()
                .map(|w| {
                    3 * usize::from(name.contains(w.as_str()))
                        + usize::from(description.contains(w.as_str()))
                })
                .sum();
            (score, t)
        })
        .filter(|(score, _)| *score > 0)
        .collect();
    scored.sort_by_key(|s| std::cmp::Reverse(s.0));
    let found = scored.into_iter().take(query.max).map(|(_, t)| t).collect();
    (found, Vec::new())
}

/// What the model is told: the found tools' definitions, one JSON object
/// a line, or what there is to look for.
fn answer(query: &Query, found: &[&ToolSpec], unknown: &[String], all: &[ToolSpec]) -> String {
    let mut text = String::new();
    if found.is_empty() {
        text.push_str(&format!("No tool matches `{}`.", query.text));
    } else {
        text.push_str(&format!(
            "Loaded {} tool{}; call {} from now on like any other tool:\n",
            found.len(),
            if found.len() == 1 { "" } else { "s" },
            if found.len() == 1 { "it" } else { "them" },
        ));
        for spec in found {
            let line = json!({"name": spec.name, "description": spec.description, "parameters": spec.parameters});
            text.push_str(&format!("\n{line}"));
        }
    }
    if !unknown.is_empty() {
        text.push_str(&format!("\n\nNo tool is called {}.", unknown.join(", ")));
    }
    if found.is_empty() || !unknown.is_empty() {
        let names: Vec<&str> = all.iter().map(|t| t.name.as_str()).collect();
        text.push_str(&format!(" The tools to load are: {}.", names.join(", ")));
    }
    text
}

/// The tool, searching the MCP servers' tools.
pub(crate) struct ToolSearch {
    pub manager: Arc<McpManager>,
}

#[async_trait::async_trait]
impl Tool for ToolSearch {
    fn spec(&self) -> ToolSpec {
        definition()
    }

    /// It only changes which definitions the conversation carries.
    fn effect(&self) -> ToolEffect {
        ToolEffect::Conversation
    }

    fn lists_deferred(&self) -> bool {
        true
    }

    fn plan(&self, call: &ToolCall, raw: &Value, cwd: &Path) -> Result<CallPlan, String> {
        let query = parse(raw)?;
        let facts = GateFacts {
            rule_name: call.name.clone(),
            rule_input: raw.clone(),
            side_effect_free: true,
            suggestion: suggest_rule_value(&call.name, raw, cwd),
            action: "run this tool call",
            ..GateFacts::default()
        };
        Ok(CallPlan::new(
            format!("Load tools: {}", query.text),
            facts,
            query,
        ))
    }

    async fn run(&self, plan: CallPlan, _env: &CallEnv<'_>) -> Ran {
        let Some(query) = plan.take::<Query>() else {
            return ToolOutput::error("no query").into();
        };
        let all: Vec<ToolSpec> = crate::mcp::offered_tools(&self.manager)
            .iter()
            .map(super::mcp::spec_of)
            .collect();
        let (found, unknown) = find(&query, &all);
        let text = answer(&query, &found, &unknown, &all);
        let names: Vec<String> = found.iter().map(|t| t.name.clone()).collect();
        let output = ToolOutput::ok(text);
        if names.is_empty() {
            output.into()
        } else {
            Ran::with(output, TurnEffect::ToolsLoaded(names))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Vec<ToolSpec> {
        [
            ("mcp__gh__create_issue", "Create an issue in a repository"),
            ("mcp__gh__list_issues", "List the issues of a repository"),
            ("mcp__db__query", "Run a read-only SQL query"),
            ("mcp__other__query", "Query the other thing"),
        ]
        .map(|(name, description)| ToolSpec {
            name: name.to_owned(),
            description: description.to_owned(),
            parameters: json!({"type": "object"}),
        })
        .to_vec()
    }

    fn names(found: &[&ToolSpec]) -> Vec<String> {
        found.iter().map(|t| t.name.clone()).collect()
    }

    fn query(text: &str) -> Query {
        parse(&json!({"query": text})).unwrap()
    }

    #[test]
    fn select_loads_the_named_tools_and_says_which_names_are_unknown() {
        let all = tools();
        let (found, unknown) = find(&query("select:mcp__db__query, create_issue,nope"), &all);
        assert_eq!(names(&found), ["mcp__db__query", "mcp__gh__create_issue"]);
        assert_eq!(unknown, ["nope"]);
        // The server's own name is ambiguous here: two servers have `query`.
        let (found, unknown) = find(&query("select:query"), &all);
        assert!(found.is_empty());
        assert_eq!(unknown, ["query"]);
        // Names alone, without `select:`, work too.
        let (found, _) = find(&query("mcp__gh__list_issues mcp__db__query"), &all);
        assert_eq!(names(&found), ["mcp__gh__list_issues", "mcp__db__query"]);
        let text = answer(&query("select:nope"), &[], &["nope".to_owned()], &all);
        assert!(
            text.contains("No tool is called nope. The tools to load are: mcp__gh__create_issue"),
            "{text}"
        );
    }

    #[test]
    fn words_find_the_best_matches_names_first() {
        let all = tools();
        let (found, unknown) = find(&query("issue repository"), &all);
        assert_eq!(
            names(&found),
            ["mcp__gh__create_issue", "mcp__gh__list_issues"]
        );
        assert!(unknown.is_empty());
        let (found, _) = find(
            &parse(&json!({"query": "sql query", "max_results": 1})).unwrap(),
            &all,
        );
        assert_eq!(names(&found), ["mcp__db__query"]);
        let (found, _) = find(&query("weather"), &all);
        assert!(found.is_empty());
    }

    #[test]
    fn the_answer_gives_each_definition_on_a_line_of_json() {
        let all = tools();
        let (found, unknown) = find(&query("select:mcp__db__query"), &all);
        let text = answer(&query("select:mcp__db__query"), &found, &unknown, &all);
        let line = text.lines().last().unwrap();
        let parsed: Value = serde_json::from_str(line).unwrap();
        assert_eq!(parsed["name"], "mcp__db__query");
        assert_eq!(parsed["parameters"]["type"], "object");
        assert!(text.starts_with("Loaded 1 tool; call it"), "{text}");
        assert!(parse(&json!({"query": "  "})).is_err());
        assert!(parse(&json!({})).is_err());
    }
}
