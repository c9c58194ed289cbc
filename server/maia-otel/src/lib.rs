//! MAIA's OpenTelemetry exporter (docs/telemetry.md): the engine's events
//! of every session become spans (session → turn → model request, tool
//! call, hook, subagent) following the GenAI semantic conventions, and
//! metrics (tokens, cost, tool calls, lines changed, permission
//! decisions), exported over OTLP (HTTP/protobuf or gRPC) as the standard
//! `OTEL_*` variables say. Off unless an OTLP endpoint is configured.
//!
//! The front doors call the free functions below; each is a no-op while
//! telemetry is off. Recording never waits on the network: spans and
//! metrics are exported in the background, and an export that fails is a
//! log line, nothing more.

pub mod config;
mod export;
mod metrics;
mod names;
mod spans;
mod tools;

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;

use maia_core::{Event, PermissionChoice, PermissionReply, PromptPart};

pub use config::{Config, ConfigError, Protocol};
use spans::{Origin, Recorder};

/// The process's telemetry, once started.
struct Telemetry {
    recorder: Mutex<Recorder>,
    traces: SdkTracerProvider,
    metrics: SdkMeterProvider,
}

static TELEMETRY: OnceLock<Telemetry> = OnceLock::new();

/// The scope name of MAIA's tracer and meter.
const SCOPE: &str = "maia";

/// Starts telemetry if the environment configures it; returns whether it
/// is on. Call once, inside the Tokio runtime the process serves on; a
/// configuration that cannot be used is logged and leaves it off.
pub fn init() -> bool {
    init_with(&Enforced::default())
}

/// What an administrator's policy says of telemetry (`managed-settings.json`
/// `telemetry`): it wins over the process environment.
#[derive(Debug, Clone, Default)]
pub struct Enforced {
    /// Telemetry must be on: the user's `OTEL_SDK_DISABLED` and
    /// `OTEL_*_EXPORTER=none` are not read.
    pub on: bool,
    /// `OTEL_*` variables the policy sets.
    pub vars: std::collections::BTreeMap<String, String>,
    /// Whether contents are exported (`None`: the environment's choice).
    pub capture_content: Option<bool>,
}

impl Enforced {
    /// The value of `name`: the policy's, else the environment's (what
    /// would turn telemetry off is not read from the environment when the
    /// policy turns it on).
    fn var(&self, name: &str) -> Option<String> {
        if name == config::CAPTURE_CONTENT
            && let Some(capture) = self.capture_content
        {
            return Some(capture.to_string());
        }
        if let Some(value) = self.vars.get(name) {
            return Some(value.clone());
        }
        if self.on && (name == "OTEL_SDK_DISABLED" || name.ends_with("_EXPORTER")) {
            return None;
        }
        std::env::var(name).ok()
    }
}

/// [`init`], with what the managed policy enforces.
pub fn init_with(enforced: &Enforced) -> bool {
    let config = match Config::from_env(|name| enforced.var(name)) {
        Ok(Some(config)) => config,
        Ok(None) => {
            if enforced.on {
                tracing::error!(
                    "the managed policy turns telemetry on, but no OTLP endpoint is set (telemetry.otel.OTEL_EXPORTER_OTLP_ENDPOINT)"
                );
            }
            return false;
        }
        Err(e) => {
            tracing::error!("telemetry is off: {e}");
            return false;
        }
    };
    // The policy's endpoints are not in the environment the exporters read.
    let endpoints = export::Endpoints::from(|name| enforced.vars.get(name).cloned(), &config);
    let providers = match export::build(&config, &endpoints) {
        Ok(providers) => providers,
        Err(e) => {
            tracing::error!("telemetry is off: {e}");
            return false;
        }
    };
    // A signal not exported still gets a provider, with nothing behind it.
    let traces = providers
        .traces
        .unwrap_or_else(|| SdkTracerProvider::builder().build());
    let metrics = providers
        .metrics
        .unwrap_or_else(|| SdkMeterProvider::builder().build());
    install(traces, metrics, config.capture_content)
}

/// Installs `traces` and `metrics` as the process's telemetry.
fn install(traces: SdkTracerProvider, metrics: SdkMeterProvider, capture: bool) -> bool {
    let tracer = traces.tracer(SCOPE);
    let instruments = metrics::Instruments::new(&metrics.meter(SCOPE));
    let telemetry = Telemetry {
        recorder: Mutex::new(Recorder::new(tracer, instruments, capture)),
        traces,
        metrics,
    };
    let installed = TELEMETRY.set(telemetry).is_ok();
    if installed {
        tracing::info!(
            "telemetry on (OpenTelemetry over OTLP; contents {})",
            if capture { "captured" } else { "left out" }
        );
    }
    installed
}

fn with(f: impl FnOnce(&mut Recorder)) {
    if let Some(telemetry) = TELEMETRY.get() {
        // Recording is a few map operations; a panic cannot leave the
        // spans half-made in a way later events would trip on.
        let mut recorder = telemetry
            .recorder
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut recorder);
    }
}

/// Whether telemetry is on.
pub fn enabled() -> bool {
    TELEMETRY.get().is_some()
}

/// An event of session `session`, as the engine sent it.
pub fn observe(session: &str, event: &Event) {
    with(|r| r.observe(session, event));
}

/// The next turn of `session` is a client's prompt of `parts`: `meta` is
/// the request's `_meta` (its W3C `traceparent` and `tracestate` become
/// the turn's parent); the prompt's text is kept only when contents are
/// captured. Call before the prompt is handed to the session, and
/// [`prompt_refused`] if the session refuses it.
pub fn prompt(
    session: &str,
    meta: Option<&serde_json::Map<String, serde_json::Value>>,
    parts: &[PromptPart],
) {
    with(|r| {
        let parent = meta.and_then(parent_context);
        let prompt = r.capture.then(|| {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| match p {
                    PromptPart::Text(text) => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            texts.join("\n")
        });
        r.origin(session, Origin { parent, prompt });
    });
}

/// The prompt [`prompt`] announced was refused: no turn comes from it.
pub fn prompt_refused(session: &str) {
    with(|r| r.origin(session, Origin::default()));
}

/// The client's trace context in a request's `_meta`, if it has a valid one.
fn parent_context(
    meta: &serde_json::Map<String, serde_json::Value>,
) -> Option<opentelemetry::Context> {
    let mut carrier = HashMap::new();
    for key in ["traceparent", "tracestate"] {
        if let Some(value) = meta.get(key).and_then(serde_json::Value::as_str) {
            carrier.insert(key.to_owned(), value.to_owned());
        }
    }
    carrier.get("traceparent")?;
    let cx = TraceContextPropagator::new().extract(&carrier);
    cx.span().span_context().is_valid().then_some(cx)
}

/// The user answered a permission question about tool `tool` with `reply`
/// (one of `offered`).
pub fn decision(tool: &str, reply: &PermissionReply, offered: &[PermissionChoice]) {
    use maia_core::ChoiceKind;
    let decision = match reply {
        PermissionReply::Selected { option, .. } => {
            match offered.iter().find(|c| c.id == *option).map(|c| c.kind) {
                Some(ChoiceKind::AllowOnce) => "allow_once",
                Some(ChoiceKind::AllowAlways) => "allow_always",
                Some(ChoiceKind::RejectOnce) => "reject_once",
                Some(ChoiceKind::RejectAlways) => "reject_always",
                None => "reject",
            }
        }
        PermissionReply::Rejected { .. } => "reject",
        PermissionReply::Cancelled => "cancelled",
    };
    with(|r| r.instruments.decision(tool, decision));
}

/// Session `session` ended (its events stopped): its open spans end.
pub fn session_closed(session: &str) {
    with(|r| r.close(session));
}

/// The process stops: every open span ends and what is waiting is
/// exported, for at most `limit` in all (a collector that is down cannot
/// hold the exit longer).
pub fn shutdown(limit: Duration) {
    let Some(telemetry) = TELEMETRY.get() else {
        return;
    };
    with(Recorder::close_all);
    let (traces, metrics) = (telemetry.traces.clone(), telemetry.metrics.clone());
    let (done, wait) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("telemetry-flush".into())
        .spawn(move || {
            if let Err(e) = traces.shutdown_with_timeout(limit) {
                tracing::warn!("telemetry: traces not all exported at exit: {e}");
            }
            if let Err(e) = metrics.shutdown_with_timeout(limit) {
                tracing::warn!("telemetry: metrics not all exported at exit: {e}");
            }
            let _ = done.send(());
        });
    if spawned.is_ok() && wait.recv_timeout(limit).is_err() {
        tracing::warn!("telemetry: export at exit took longer than {limit:?}; left");
    }
}
