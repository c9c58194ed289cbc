//! Spending limits: the `budget` setting (`{"sessionUsd": …, "turnUsd": …}`)
//! and `maia exec --max-budget-usd`. Before each model request the session
//! estimates what the request may cost and, when what was spent plus that
//! estimate would go past a limit, asks the user whether to raise the
//! limit or stop ([`Verdict::Over`]).
//!
//! What is spent is the sum of the charges [`crate::cost`] records (the
//! amounts MAIA shows), counted from when the session opened: the
//! session's own requests, its summaries and its subagents' requests (a
//! child shares its parent's [`Shared`] spend). The estimate of a request
//! is its input tokens (the meter's calibrated count of what is sent, at
//! the full input price: no cache discount is assumed) plus its reply
//! bound (the request's `max_tokens`, else [`DEFAULT_REPLY_BOUND`]) at the
//! output price, with the prices of the `prices` setting or `/model/info`.
//! Without a price the budget cannot be enforced ahead of a request: the
//! user is told once ([`Verdict::Unenforceable`]). A leaf: it imports
//! nothing of the crate.

use std::sync::{Arc, Mutex};

use maia_llm::Prices;
use serde_json::Value;

/// The name of the budget question's card (not a tool): front doors
/// that cannot ask a person (`maia exec`) answer it "stop" by this name.
pub const QUESTION: &str = "Budget";
/// The option of the question that raises the limit and goes on.
pub const RAISE: &str = "raise";
/// The option of the question that stops the turn.
pub const STOP: &str = "stop";

/// The reply bound assumed for a request that sets no `max_tokens`, in
/// tokens.
pub const DEFAULT_REPLY_BOUND: u64 = 4_096;

/// The limits in US dollars; `None`: no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Limits {
    /// `budget.sessionUsd` (or `maia exec --max-budget-usd`).
    pub session: Option<f64>,
    /// `budget.turnUsd`.
    pub turn: Option<f64>,
}

impl Limits {
    pub fn is_empty(&self) -> bool {
        self.session.is_none() && self.turn.is_none()
    }
}

/// Reads the `budget` setting; a bad value is reported in `warnings` and
/// ignored (no limit).
pub fn parse_setting(value: Option<&Value>, warnings: &mut Vec<String>) -> Limits {
    let mut limits = Limits::default();
    let entries = match value {
        None | Some(Value::Null) => return limits,
        Some(Value::Object(entries)) => entries,
        Some(_) => {
            warnings.push("budget must be an object (sessionUsd, turnUsd); ignored".to_owned());
            return limits;
        }
    };
    for (key, amount) in entries {
        let slot = match key.as_str() {
            "sessionUsd" => &mut limits.session,
            "turnUsd" => &mut limits.turn,
            other => {
                warnings.push(format!(
                    "budget.{other} is not a budget (sessionUsd, turnUsd); ignored"
                ));
                continue;
            }
        };
        match amount.as_f64() {
            Some(usd) if usd.is_finite() && usd > 0.0 => *slot = Some(usd),
            _ => warnings.push(format!(
                "budget.{key} must be a positive number of US dollars; ignored"
            )),
        }
    }
    limits
}

/// Which limit a request would pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Session,
    Turn,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Session => "session",
            Scope::Turn => "turn",
        }
    }
}

/// A request that would go past a limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Over {
    pub scope: Scope,
    pub limit: f64,
    pub spent: f64,
    /// The request's estimated cost (0 when it could not be estimated).
    pub estimate: f64,
    /// What the "raise" option adds to the limit.
    pub raise_by: f64,
}

impl Over {
    /// The question's title.
    pub fn title(&self) -> String {
        format!(
            "The next model request would pass the {} budget of {}",
            self.scope.name(),
            usd(self.limit)
        )
    }

    /// The question's text: what was spent and what the request may cost.
    pub fn text(&self) -> String {
        format!(
            "This {} has spent {}; the next request may cost up to {} (its input tokens and its reply bound), which would pass its budget of {}. Raise the budget by {} (to {}) and go on, or stop here.",
            self.scope.name(),
            usd(self.spent),
            usd(self.estimate),
            usd(self.limit),
            usd(self.raise_by),
            usd(self.limit + self.raise_by)
        )
    }

    /// The label of the "raise" option.
    pub fn raise_label(&self) -> String {
        format!(
            "Raise the {} budget by {} (to {})",
            self.scope.name(),
            usd(self.raise_by),
            usd(self.limit + self.raise_by)
        )
    }

    /// What the user is told when the turn stops at this budget.
    pub fn stopped(&self) -> String {
        format!(
            "Stopped before a model request that would pass the {} budget ({} spent of {}, the request estimated at up to {}).",
            self.scope.name(),
            usd(self.spent),
            usd(self.limit),
            usd(self.estimate)
        )
    }
}

/// What a request may do.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Within the limits (or none is set).
    Go,
    /// Go, after telling the user this, once: the budget cannot be
    /// enforced (no price known).
    Unenforceable(String),
    /// Ask the user first.
    Over(Over),
}

/// What was spent and what may be spent, shared by a session and its
/// subagents.
#[derive(Debug, Default)]
pub struct Spend {
    /// The limits in force (the settings', raised by the user).
    limits: Limits,
    /// The limits as set (a raise adds one of them; a turn's raise holds
    /// for that turn).
    base: Limits,
    session: f64,
    turn: f64,
    /// A charge without a price was counted: the spend is unknown.
    unpriced: bool,
    /// The user was told the budget cannot be enforced.
    told: bool,
}

/// A [`Spend`] a session shares with its subagents.
pub type Shared = Arc<Mutex<Spend>>;

impl Spend {
    pub fn new(limits: Limits) -> Self {
        Spend {
            limits,
            base: limits,
            ..Spend::default()
        }
    }

    pub fn shared(limits: Limits) -> Shared {
        Arc::new(Mutex::new(Spend::new(limits)))
    }

    /// Whether no limit is set.
    pub fn limits_empty(&self) -> bool {
        self.limits.is_empty()
    }

    /// A top session's turn starts: its spend starts again from nothing,
    /// and its limit from the setting.
    pub fn begin_turn(&mut self) {
        self.turn = 0.0;
        self.limits.turn = self.base.turn;
    }

    /// Whether the session's spend reached its limit: nothing the user did
    /// not ask for (a title) is spent any more.
    pub fn spent_out(&self) -> bool {
        self.limits
            .session
            .is_some_and(|limit| self.session >= limit)
    }

    /// Counts one response's cost (`None`: it had no price).
    pub fn add(&mut self, cost: Option<f64>) {
        match cost {
            Some(amount) => {
                self.session += amount;
                self.turn += amount;
            }
            None => self.unpriced = true,
        }
    }

    /// Raises the limit the user agreed to pass.
    pub fn raise(&mut self, over: &Over) {
        let slot = match over.scope {
            Scope::Session => &mut self.limits.session,
            Scope::Turn => &mut self.limits.turn,
        };
        *slot = Some(over.limit + over.raise_by);
    }

    /// Whether a request of `model` estimated at `estimate` (`None`: no
    /// price known) may go.
    pub fn check(&mut self, model: &str, estimate: Option<f64>) -> Verdict {
        if self.limits.is_empty() {
            return Verdict::Go;
        }
        if self.unpriced {
            return self.tell_once(
                "The budget cannot be enforced: a model response had no price (no `prices` setting, no `/model/info` price and no `x-litellm-response-cost` header), so what was spent is unknown."
                    .to_owned(),
            );
        }
        let go = if estimate.is_none() {
            self.tell_once(format!(
                "The budget cannot be enforced ahead of requests to `{model}`: its price per token is unknown (no `prices` setting and no `/model/info` price), so a request's cost cannot be estimated; only what was already spent is checked."
            ))
        } else {
            Verdict::Go
        };
        let estimate = estimate.unwrap_or(0.0);
        let over = [
            (Scope::Turn, self.limits.turn, self.turn),
            (Scope::Session, self.limits.session, self.session),
        ]
        .into_iter()
        .find_map(|(scope, limit, spent)| {
            let limit = limit?;
            (spent + estimate > limit).then(|| Over {
                scope,
                limit,
                spent,
                estimate,
                raise_by: raise_step(
                    self.base_of(scope).unwrap_or(limit),
                    spent + estimate - limit,
                ),
            })
        });
        match over {
            Some(over) => Verdict::Over(over),
            None => go,
        }
    }

    fn base_of(&self, scope: Scope) -> Option<f64> {
        match scope {
            Scope::Turn => self.base.turn,
            Scope::Session => self.base.session,
        }
    }

    fn tell_once(&mut self, text: String) -> Verdict {
        if self.told {
            return Verdict::Go;
        }
        self.told = true;
        Verdict::Unenforceable(text)
    }
}

/// What a raise adds: the original limit again, or as many times it as
/// the request needs.
fn raise_step(base: f64, missing: f64) -> f64 {
    if base <= 0.0 {
        return missing;
    }
    (missing / base).ceil().max(1.0) * base
}

/// What a request may cost: `input` tokens at the input price and `reply`
/// tokens at the output price.
pub fn estimate(prices: &Prices, input: u64, reply: u64) -> f64 {
    input as f64 * prices.input + reply as f64 * prices.output
}

/// An amount as the budget shows it: `$0.25`, `$0.0012` below a cent.
pub fn usd(amount: f64) -> String {
    if amount >= 0.01 || amount == 0.0 {
        format!("${amount:.2}")
    } else {
        format!("${amount:.4}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn limits(session: Option<f64>, turn: Option<f64>) -> Limits {
        Limits { session, turn }
    }

    #[test]
    fn the_setting_is_read_with_warnings() {
        let mut warnings = Vec::new();
        let read = parse_setting(
            Some(&json!({"sessionUsd": 2, "turnUsd": -1, "daily": 3})),
            &mut warnings,
        );
        assert_eq!(read, limits(Some(2.0), None));
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        let read = parse_setting(Some(&json!(5)), &mut warnings);
        assert!(read.is_empty());
        assert_eq!(warnings.len(), 3);
        assert!(parse_setting(None, &mut warnings).is_empty());
    }

    #[test]
    fn a_request_that_would_pass_a_limit_is_over_and_a_raise_lets_it_go() {
        let mut spend = Spend::new(limits(Some(1.0), Some(0.2)));
        assert_eq!(spend.check("m", Some(0.1)), Verdict::Go);
        spend.add(Some(0.15));
        let Verdict::Over(over) = spend.check("m", Some(0.1)) else {
            panic!("not over");
        };
        assert_eq!(over.scope, Scope::Turn);
        assert!((over.spent - 0.15).abs() < 1e-9);
        assert!((over.raise_by - 0.2).abs() < 1e-9);
        assert!(over.raise_label().contains("by $0.20 (to $0.40)"));
        spend.raise(&over);
        assert_eq!(spend.check("m", Some(0.1)), Verdict::Go);
        // The raise holds for the turn only.
        spend.begin_turn();
        spend.add(Some(0.15));
        assert!(matches!(spend.check("m", Some(0.1)), Verdict::Over(_)));
        // The session limit counts every turn.
        let mut spend = Spend::new(limits(Some(0.3), Some(0.2)));
        spend.add(Some(0.15));
        spend.begin_turn();
        spend.add(Some(0.1));
        let Verdict::Over(over) = spend.check("m", Some(0.1)) else {
            panic!("not over");
        };
        assert_eq!(over.scope, Scope::Session);
    }

    #[test]
    fn a_raise_covers_what_the_request_needs() {
        assert!((raise_step(0.1, 0.25) - 0.3).abs() < 1e-9);
        assert!((raise_step(1.0, 0.01) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn without_a_price_the_user_is_told_once() {
        let mut spend = Spend::new(limits(Some(1.0), None));
        assert!(matches!(spend.check("m", None), Verdict::Unenforceable(_)));
        assert_eq!(spend.check("m", None), Verdict::Go);
        // What was spent is still checked.
        spend.add(Some(1.5));
        assert!(matches!(spend.check("m", None), Verdict::Over(_)));

        let mut spend = Spend::new(limits(Some(1.0), None));
        spend.add(None);
        assert!(matches!(
            spend.check("m", Some(0.1)),
            Verdict::Unenforceable(_)
        ));
        assert_eq!(spend.check("m", Some(5.0)), Verdict::Go);
        // Without limits nothing is said.
        let mut free = Spend::new(Limits::default());
        free.add(None);
        assert_eq!(free.check("m", None), Verdict::Go);
    }

    #[test]
    fn an_estimate_is_input_and_reply_at_their_prices() {
        let prices = Prices {
            input: 0.001,
            output: 0.002,
            cache_read: None,
            cache_write: None,
        };
        assert!((estimate(&prices, 100, 10) - 0.12).abs() < 1e-9);
    }
}
