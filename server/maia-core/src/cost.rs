//! What a thread cost: one [`Charge`] per model response, priced from the
//! `prices` setting, else LiteLLM's `x-litellm-response-cost` header, else
//! LiteLLM's `/model/info` prices; without any of them the charge is
//! *unpriced* and every total it enters is unknown, never a made-up number.
//!
//! The charges are journal records (the store's `Record::Usage`); the
//! [`Ledger`] that adds them up is derived from the journal by the
//! conversation that writes it, as a reload derives it, so a reloaded
//! thread shows the same cost. A compaction carries the ledger into the
//! new journal (`Record::Costs`).
//! Amounts are US dollars, the unit LiteLLM prices in.

use std::collections::{BTreeMap, HashMap};

use maia_llm::{Prices, Usage};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The currency of every amount (LiteLLM's prices are in US dollars).
pub const CURRENCY: &str = "USD";

/// Where the price of a charge came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PriceSource {
    /// The `prices` setting.
    Settings,
    /// The proxy's `x-litellm-response-cost` header.
    Header,
    /// LiteLLM's `/model/info` prices.
    ModelInfo,
}

/// One model response's usage and what it cost (`None`: unpriced).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Charge {
    pub model: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    #[serde(default)]
    pub cached_tokens: u64,
    #[serde(default)]
    pub cache_write_tokens: u64,
    pub cost: Option<f64>,
    #[serde(default)]
    pub source: Option<PriceSource>,
    /// The subagent that made the request (a `Task` call's child), charged
    /// to its parent's thread; `None`: the thread's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// The price of one response: the `prices` setting, else the header's
/// amount, else `/model/info`'s prices; `None` when none is known.
pub fn price(
    usage: &Usage,
    setting: Option<&Prices>,
    header: Option<f64>,
    model_info: Option<&Prices>,
) -> Option<(f64, PriceSource)> {
    if let Some(prices) = setting {
        return Some((prices.cost(usage), PriceSource::Settings));
    }
    if let Some(amount) = header {
        return Some((amount, PriceSource::Header));
    }
    model_info.map(|p| (p.cost(usage), PriceSource::ModelInfo))
}

impl Charge {
    pub fn new(model: &str, usage: &Usage, priced: Option<(f64, PriceSource)>) -> Self {
        Charge {
            model: model.to_owned(),
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            cached_tokens: usage.cached_tokens,
            cache_write_tokens: usage.cache_write_tokens,
            cost: priced.map(|(amount, _)| amount),
            source: priced.map(|(_, source)| source),
            agent: None,
        }
    }

    /// The line this charge is counted under: its model, with the
    /// subagent that made it.
    pub fn key(&self) -> String {
        match &self.agent {
            Some(agent) => format!("{}{SUBAGENT}{agent})", self.model),
            None => self.model.clone(),
        }
    }
}

/// How a ledger line of a subagent's charges is marked (after the model).
const SUBAGENT: &str = " (subagent ";

/// The subagent lines of `ledger`, as `/context` shows them: the agent,
/// its model, its requests, tokens and cost.
pub fn subagent_lines(ledger: &Ledger) -> Vec<String> {
    ledger
        .models
        .iter()
        .filter_map(|(key, cost)| {
            let (model, agent) = key.split_once(SUBAGENT)?;
            let agent = agent.strip_suffix(')')?;
            Some(format!(
                "subagent `{agent}` on `{model}`: {} requests, {} input tokens, {} output tokens, {}",
                cost.requests,
                cost.prompt_tokens,
                cost.completion_tokens,
                show(cost.known())
            ))
        })
        .collect()
}

/// What one model's responses cost in a thread.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelCost {
    pub requests: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
    /// The sum of the priced responses.
    pub amount: f64,
    /// Responses without a price.
    pub unpriced: u64,
}

impl ModelCost {
    fn add(&mut self, charge: &Charge) {
        self.requests += 1;
        self.prompt_tokens += charge.prompt_tokens;
        self.completion_tokens += charge.completion_tokens;
        self.cached_tokens += charge.cached_tokens;
        match charge.cost {
            Some(amount) => self.amount += amount,
            None => self.unpriced += 1,
        }
    }

    /// The amount, when every response was priced.
    pub fn known(&self) -> Option<f64> {
        (self.unpriced == 0).then_some(self.amount)
    }
}

/// A thread's charges added up per model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    pub models: BTreeMap<String, ModelCost>,
}

impl Ledger {
    pub fn add(&mut self, charge: &Charge) {
        self.models.entry(charge.key()).or_default().add(charge);
    }

    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    /// The thread's cost when every response was priced (`Some(0.0)` before
    /// any response); `None`: unknown.
    pub fn total(&self) -> Option<f64> {
        self.models.values().map(ModelCost::known).sum()
    }

    /// What was spent since `before` (per model), for a turn's cost.
    pub fn since(&self, before: &Ledger) -> Ledger {
        let mut out = Ledger::default();
        for (model, now) in &self.models {
            let was = before.models.get(model).cloned().unwrap_or_default();
            if now.requests > was.requests {
                out.models.insert(
                    model.clone(),
                    ModelCost {
                        requests: now.requests - was.requests,
                        prompt_tokens: now.prompt_tokens.saturating_sub(was.prompt_tokens),
                        completion_tokens: now
                            .completion_tokens
                            .saturating_sub(was.completion_tokens),
                        cached_tokens: now.cached_tokens.saturating_sub(was.cached_tokens),
                        amount: (now.amount - was.amount).max(0.0),
                        unpriced: now.unpriced.saturating_sub(was.unpriced),
                    },
                );
            }
        }
        out
    }
}

/// An amount as shown: `$0.0123`, or "unknown".
pub fn show(amount: Option<f64>) -> String {
    match amount {
        Some(a) if a >= 1.0 => format!("${a:.2}"),
        Some(a) => format!("${a:.4}"),
        None => "unknown".to_owned(),
    }
}

/// The `/cost` report: the thread per model, then the last turn.
pub fn report(thread: &Ledger, last_turn: Option<&Ledger>) -> String {
    let mut out = String::from("**Cost of this thread**");
    if thread.is_empty() {
        out.push_str(": nothing yet (no model response).\n");
        return out;
    }
    out.push_str(&format!(": {}\n\n", show(thread.total())));
    out.push_str("| model | requests | input tokens | cached | output tokens | cost |\n");
    out.push_str("| --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (model, cost) in &thread.models {
        let amount = match cost.known() {
            Some(a) => show(Some(a)),
            None if cost.unpriced < cost.requests => format!(
                "unknown (at least {}; {} of {} responses without a price)",
                show(Some(cost.amount)),
                cost.unpriced,
                cost.requests
            ),
            None => "unknown (no price)".to_owned(),
        };
        out.push_str(&format!(
            "| {model} | {} | {} | {} | {} | {amount} |\n",
            cost.requests, cost.prompt_tokens, cost.cached_tokens, cost.completion_tokens
        ));
    }
    if let Some(turn) = last_turn.filter(|t| !t.is_empty()) {
        out.push_str(&format!("\nLast turn: {}\n", show(turn.total())));
    }
    if thread.total().is_none() {
        out.push_str(
            "\nA price is unknown when the proxy sends no `x-litellm-response-cost` header, its `/model/info` has no prices for the model, and the `prices` setting names none.\n",
        );
    }
    out
}

/// The `prices` setting: `{"<model>": {"input_cost_per_token": …,
/// "output_cost_per_token": …, "cache_read_input_token_cost"?: …,
/// "cache_creation_input_token_cost"?: …}}` (LiteLLM's names, US dollars
/// per token); a bad entry is reported in `warnings` and ignored.
pub fn parse_setting(value: Option<&Value>, warnings: &mut Vec<String>) -> HashMap<String, Prices> {
    let mut out = HashMap::new();
    match value {
        None | Some(Value::Null) => {}
        Some(Value::Object(models)) => {
            for (model, entry) in models {
                match Prices::from_model_info(entry) {
                    Some(prices) => {
                        out.insert(model.clone(), prices);
                    }
                    None => warnings.push(format!(
                        "prices.{model} needs input_cost_per_token and output_cost_per_token (numbers); ignored"
                    )),
                }
            }
        }
        Some(_) => warnings.push("prices must be an object; ignored".to_owned()),
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn usage(prompt: u64, completion: u64, cached: u64) -> Usage {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            cached_tokens: cached,
            ..Usage::default()
        }
    }

    #[test]
    fn a_setting_beats_the_header_which_beats_model_info() {
        let prices = Prices {
            input: 0.001,
            output: 0.002,
            cache_read: Some(0.0001),
            cache_write: None,
        };
        let u = usage(1000, 100, 200);
        let (amount, source) = price(&u, None, None, Some(&prices)).unwrap();
        assert_eq!(source, PriceSource::ModelInfo);
        assert!((amount - (800.0 * 0.001 + 200.0 * 0.0001 + 100.0 * 0.002)).abs() < 1e-9);
        assert_eq!(
            price(&u, None, Some(0.5), Some(&prices)),
            Some((0.5, PriceSource::Header))
        );
        assert_eq!(
            price(&u, Some(&prices), Some(0.5), None).map(|p| p.1),
            Some(PriceSource::Settings)
        );
        assert_eq!(price(&u, None, None, None), None);
    }

    #[test]
    fn one_unpriced_response_makes_the_total_unknown() {
        let u = usage(10, 5, 0);
        let mut ledger = Ledger::default();
        assert_eq!(ledger.total(), Some(0.0));
        ledger.add(&Charge::new("a", &u, Some((0.25, PriceSource::Header))));
        let before = ledger.clone();
        ledger.add(&Charge::new("a", &u, Some((0.5, PriceSource::Header))));
        assert_eq!(ledger.total(), Some(0.75));
        assert_eq!(ledger.since(&before).total(), Some(0.5));
        ledger.add(&Charge::new("b", &u, None));
        assert_eq!(ledger.total(), None);
        let report = report(&ledger, None);
        assert!(
            report.contains("| a | 2 |") && report.contains("$0.7500"),
            "{report}"
        );
        assert!(report.contains("| b | 1 |") && report.contains("unknown (no price)"));
    }

    #[test]
    fn the_setting_is_read_with_warnings() {
        let mut warnings = Vec::new();
        let prices = parse_setting(
            Some(&json!({
                "m": {"input_cost_per_token": 1e-6, "output_cost_per_token": "2e-6"},
                "bad": {"input_cost_per_token": 1e-6}
            })),
            &mut warnings,
        );
        assert_eq!(prices["m"].output, 2e-6);
        assert!(!prices.contains_key("bad"));
        assert_eq!(warnings.len(), 1);
    }
}
