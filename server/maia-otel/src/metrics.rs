//! The metric instruments: the GenAI client metrics of the semantic
//! conventions (`gen_ai.client.token.usage`,
//! `gen_ai.client.operation.duration`) and MAIA's own counters (tokens,
//! cost, tool calls by result, lines changed, permission decisions,
//! sessions). Names and attributes are listed in docs/telemetry.md.

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter};

use maia_core::telemetry::ModelRequest;

use crate::names::{
    ERROR_TYPE, OPERATION_NAME, PROVIDER, PROVIDER_NAME, REQUEST_MODEL, TOKEN_TYPE, TOOL_NAME,
};

/// The bucket boundaries the conventions give for token counts.
const TOKEN_BUCKETS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];

/// The bucket boundaries the conventions give for durations (seconds).
const DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/// Every instrument, made once.
pub(crate) struct Instruments {
    token_usage: Histogram<u64>,
    duration: Histogram<f64>,
    tokens: Counter<u64>,
    cost: Counter<f64>,
    tool_calls: Counter<u64>,
    lines: Counter<u64>,
    decisions: Counter<u64>,
    sessions: Counter<u64>,
}

impl Instruments {
    pub(crate) fn new(meter: &Meter) -> Self {
        Instruments {
            token_usage: meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Number of input and output tokens used")
                .with_boundaries(TOKEN_BUCKETS.to_vec())
                .build(),
            duration: meter
                .f64_histogram("gen_ai.client.operation.duration")
                .with_unit("s")
                .with_description("GenAI operation duration")
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            tokens: meter
                .u64_counter("maia.token.usage")
                .with_unit("{token}")
                .with_description(
                    "Tokens used, by type (input, output, cache_read, cache_creation) and model",
                )
                .build(),
            cost: meter
                .f64_counter("maia.cost.usage")
                .with_unit("USD")
                .with_description("Cost of the model requests, as the proxy reported it")
                .build(),
            tool_calls: meter
                .u64_counter("maia.tool_call.count")
                .with_unit("{call}")
                .with_description("Tool calls, by tool and result")
                .build(),
            lines: meter
                .u64_counter("maia.lines_of_code.count")
                .with_unit("{line}")
                .with_description("Lines added and removed by the edits of tool calls")
                .build(),
            decisions: meter
                .u64_counter("maia.permission.decision.count")
                .with_unit("{decision}")
                .with_description("Answers to permission questions, by tool and decision")
                .build(),
            sessions: meter
                .u64_counter("maia.session.count")
                .with_unit("{session}")
                .with_description("Sessions started")
                .build(),
        }
    }

    /// A model request's tokens, cost and duration.
    pub(crate) fn request(&self, report: &ModelRequest) {
        let mut common = vec![
            KeyValue::new(OPERATION_NAME, "chat"),
            KeyValue::new(PROVIDER_NAME, PROVIDER),
            KeyValue::new(REQUEST_MODEL, report.model.clone()),
        ];
        if let Some(usage) = &report.usage {
            for (kind, count) in [
                ("input", usage.prompt_tokens),
                ("output", usage.completion_tokens),
            ] {
                let mut attrs = common.clone();
                attrs.push(KeyValue::new(TOKEN_TYPE, kind));
                self.token_usage.record(count, &attrs);
            }
            for (kind, count) in [
                ("input", usage.prompt_tokens),
                ("output", usage.completion_tokens),
                ("cache_read", usage.cached_tokens),
                ("cache_creation", usage.cache_write_tokens),
            ] {
                if count > 0 {
                    let attrs = [
                        KeyValue::new("type", kind),
                        KeyValue::new(REQUEST_MODEL, report.model.clone()),
                    ];
                    self.tokens.add(count, &attrs);
                }
            }
        }
        if let Some(cost) = report.cost.filter(|c| c.is_finite() && *c >= 0.0) {
            self.cost
                .add(cost, &[KeyValue::new(REQUEST_MODEL, report.model.clone())]);
        }
        if let Some(error) = report.error {
            common.push(KeyValue::new(ERROR_TYPE, error));
        }
        self.duration.record(report.duration.as_secs_f64(), &common);
    }

    /// A tool call ended with `result` (`success`, `failure`, `cancelled`).
    pub(crate) fn tool_call(&self, tool: &str, result: &'static str) {
        self.tool_calls.add(
            1,
            &[
                KeyValue::new(TOOL_NAME, tool.to_owned()),
                KeyValue::new("result", result),
            ],
        );
    }

    /// Lines an edit added and removed.
    pub(crate) fn lines(&self, added: u64, removed: u64) {
        if added > 0 {
            self.lines.add(added, &[KeyValue::new("type", "added")]);
        }
        if removed > 0 {
            self.lines.add(removed, &[KeyValue::new("type", "removed")]);
        }
    }

    /// A permission question's answer.
    pub(crate) fn decision(&self, tool: &str, decision: &'static str) {
        self.decisions.add(
            1,
            &[
                KeyValue::new(TOOL_NAME, tool.to_owned()),
                KeyValue::new("decision", decision),
            ],
        );
    }

    pub(crate) fn session(&self) {
        self.sessions.add(1, &[]);
    }
}
