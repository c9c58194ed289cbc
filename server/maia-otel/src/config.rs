//! When telemetry is on and how it exports, read from the standard
//! `OTEL_*` environment variables (docs/telemetry.md). Pure: it reads a
//! lookup function, so tests give their own environment.

/// How one signal (traces or metrics) is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP over HTTP with protobuf bodies (`http/protobuf`, the default).
    HttpProtobuf,
    /// OTLP over gRPC (`grpc`).
    Grpc,
}

/// What the environment asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Traces' protocol; `None`: traces are not exported.
    pub traces: Option<Protocol>,
    /// Metrics' protocol; `None`: metrics are not exported.
    pub metrics: Option<Protocol>,
    /// Prompts, answers, tool arguments and results go into the spans.
    pub capture_content: bool,
}

/// Why the environment's telemetry settings cannot be used.
#[derive(Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// A protocol this build does not speak (`http/json`, a typo).
    Protocol { variable: String, value: String },
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::Protocol { variable, value } => write!(
                f,
                "{variable}={value:?} is not supported (use \"http/protobuf\" or \"grpc\")"
            ),
        }
    }
}

/// The variable that turns content capture on (the one the OpenTelemetry
/// GenAI instrumentations read).
pub const CAPTURE_CONTENT: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";

impl Config {
    /// The configuration `var` describes; `Ok(None)` when telemetry is
    /// off: no OTLP endpoint set, `OTEL_SDK_DISABLED=true`, or both
    /// signals' exporters set to `none`.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Option<Config>, ConfigError> {
        let set = |name: &str| {
            var(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let signal = |name: &str| -> Result<Option<Protocol>, ConfigError> {
            let upper = name.to_ascii_uppercase();
            let exporter = set(&format!("OTEL_{upper}_EXPORTER"));
            if exporter.is_some_and(|e| e.eq_ignore_ascii_case("none")) {
                return Ok(None);
            }
            let endpoint = set(&format!("OTEL_EXPORTER_OTLP_{upper}_ENDPOINT"))
                .or_else(|| set("OTEL_EXPORTER_OTLP_ENDPOINT"));
            if endpoint.is_none() {
                return Ok(None);
            }
            let own = format!("OTEL_EXPORTER_OTLP_{upper}_PROTOCOL");
            let (variable, value) = match set(&own) {
                Some(value) => (own, value),
                None => match set("OTEL_EXPORTER_OTLP_PROTOCOL") {
                    Some(value) => ("OTEL_EXPORTER_OTLP_PROTOCOL".to_owned(), value),
                    None => return Ok(Some(Protocol::HttpProtobuf)),
                },
            };
            match value.as_str() {
                "http/protobuf" => Ok(Some(Protocol::HttpProtobuf)),
                "grpc" => Ok(Some(Protocol::Grpc)),
                _ => Err(ConfigError::Protocol { variable, value }),
            }
        };
        let traces = signal("traces")?;
        let metrics = signal("metrics")?;
        if traces.is_none() && metrics.is_none() {
            return Ok(None);
        }
        let capture_content =
            set(CAPTURE_CONTENT).is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
        Ok(Some(Config {
            traces,
            metrics,
            capture_content,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Result<Option<Config>, ConfigError> {
        Config::from_env(|name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn off_without_an_endpoint() {
        assert_eq!(config(&[]), Ok(None));
        assert_eq!(config(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]), Ok(None));
        assert_eq!(config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")]), Ok(None));
    }

    #[test]
    fn an_endpoint_turns_both_signals_on_over_http_protobuf() {
        let on = config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")]);
        assert_eq!(
            on,
            Ok(Some(Config {
                traces: Some(Protocol::HttpProtobuf),
                metrics: Some(Protocol::HttpProtobuf),
                capture_content: false,
            }))
        );
    }

    #[test]
    fn signal_variables_override_the_general_ones() {
        let on = config(&[
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://127.0.0.1:4317",
            ),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
            (CAPTURE_CONTENT, "true"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(on.traces, Some(Protocol::Grpc));
        assert_eq!(on.metrics, None);
        assert!(on.capture_content);
    }

    #[test]
    fn disabled_or_none_exporters_turn_it_off() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        assert_eq!(config(&[endpoint, ("OTEL_SDK_DISABLED", "true")]), Ok(None));
        let off = config(&[
            endpoint,
            ("OTEL_TRACES_EXPORTER", "none"),
            ("OTEL_METRICS_EXPORTER", "none"),
        ]);
        assert_eq!(off, Ok(None));
    }

    #[test]
    fn an_unknown_protocol_is_an_error_that_names_the_variable() {
        let err = config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ])
        .unwrap_err();
        assert!(
            err.to_string().contains("OTEL_EXPORTER_OTLP_PROTOCOL"),
            "{err}"
        );
    }
}
