//! The OTLP exporters and the SDK providers they feed: traces through a
//! batch processor, metrics through a periodic reader, both on the SDK's
//! own background threads, so recording never waits on the network. The
//! HTTP exporter sends through maia-http's client (the process's one TLS
//! configuration), run on the process's Tokio runtime.

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{MetricExporter, SpanExporter, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;

use crate::config::{Config, Protocol};

/// The providers of a configuration, built; `Err` says why not.
pub(crate) struct Providers {
    pub(crate) traces: Option<SdkTracerProvider>,
    pub(crate) metrics: Option<SdkMeterProvider>,
}

/// Where each signal goes when the managed policy names it (`None`: the
/// exporter reads the `OTEL_*` environment itself).
#[derive(Debug, Default)]
pub(crate) struct Endpoints {
    pub(crate) traces: Option<String>,
    pub(crate) metrics: Option<String>,
}

impl Endpoints {
    /// The OTLP rules: a signal's own endpoint as it is; the common one
    /// with `/v1/<signal>` added over HTTP, as it is over gRPC.
    pub(crate) fn from(var: impl Fn(&str) -> Option<String>, config: &Config) -> Endpoints {
        let one = |signal: &str, protocol: Option<Protocol>| {
            let own = var(&format!(
                "OTEL_EXPORTER_OTLP_{}_ENDPOINT",
                signal.to_uppercase()
            ));
            own.or_else(|| {
                var("OTEL_EXPORTER_OTLP_ENDPOINT").map(|base| match protocol {
                    Some(Protocol::Grpc) => base,
                    _ => format!("{}/v1/{signal}", base.trim_end_matches('/')),
                })
            })
        };
        Endpoints {
            traces: one("traces", config.traces),
            metrics: one("metrics", config.metrics),
        }
    }
}

/// Builds the exporters `config` asks for. Must run inside the Tokio
/// runtime the exports will use.
pub(crate) fn build(config: &Config, endpoints: &Endpoints) -> Result<Providers, String> {
    let resource = resource();
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|_| "telemetry needs a running Tokio runtime".to_owned())?;
    let traces = match config.traces {
        None => None,
        Some(protocol) => {
            let exporter = match protocol {
                Protocol::Grpc => match &endpoints.traces {
                    Some(url) => SpanExporter::builder()
                        .with_tonic()
                        .with_endpoint(url)
                        .build(),
                    None => SpanExporter::builder().with_tonic().build(),
                },
                Protocol::HttpProtobuf => {
                    let builder = SpanExporter::builder()
                        .with_http()
                        .with_http_client(OnRuntime::new(runtime.clone())?);
                    match &endpoints.traces {
                        Some(url) => builder.with_endpoint(url).build(),
                        None => builder.build(),
                    }
                }
            }
            .map_err(|e| format!("cannot build the trace exporter: {e}"))?;
            Some(
                SdkTracerProvider::builder()
                    .with_resource(resource.clone())
                    .with_batch_exporter(exporter)
                    .build(),
            )
        }
    };
    let metrics = match config.metrics {
        None => None,
        Some(protocol) => {
            let exporter = match protocol {
                Protocol::Grpc => match &endpoints.metrics {
                    Some(url) => MetricExporter::builder()
                        .with_tonic()
                        .with_endpoint(url)
                        .build(),
                    None => MetricExporter::builder().with_tonic().build(),
                },
                Protocol::HttpProtobuf => {
                    let builder = MetricExporter::builder()
                        .with_http()
                        .with_http_client(OnRuntime::new(runtime)?);
                    match &endpoints.metrics {
                        Some(url) => builder.with_endpoint(url).build(),
                        None => builder.build(),
                    }
                }
            }
            .map_err(|e| format!("cannot build the metric exporter: {e}"))?;
            Some(
                SdkMeterProvider::builder()
                    .with_resource(resource)
                    .with_periodic_exporter(exporter)
                    .build(),
            )
        }
    };
    Ok(Providers { traces, metrics })
}

/// The process's resource: what `OTEL_SERVICE_NAME` and
/// `OTEL_RESOURCE_ATTRIBUTES` say, with `service.name` `maia` unless they
/// name one, and MAIA's version.
fn resource() -> Resource {
    let named = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|v| !v.trim().is_empty())
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|v| v.contains("service.name="));
    let mut builder = Resource::builder();
    if !named {
        builder = builder.with_service_name("maia");
    }
    builder
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build()
}

/// maia-http's client, its requests run on the Tokio runtime whatever
/// thread the exporter calls from (the SDK's batch threads have none).
#[derive(Debug)]
struct OnRuntime {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl OnRuntime {
    fn new(runtime: tokio::runtime::Handle) -> Result<Self, String> {
        // The exporter leaves the timeout to its client: the standard
        // variable's, in milliseconds, else the standard 10 s.
        let timeout = std::env::var("OTEL_EXPORTER_OTLP_TIMEOUT")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(10_000);
        let client = maia_http::builder(None, Some("telemetry"))
            .map_err(|e| format!("cannot build the telemetry HTTP client: {e}"))?
            .timeout(std::time::Duration::from_millis(timeout))
            .build()
            .map_err(|e| format!("cannot build the telemetry HTTP client: {e}"))?;
        Ok(OnRuntime { client, runtime })
    }
}

#[async_trait::async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        self.runtime
            .spawn(async move { client.send_bytes(request).await })
            .await?
    }
}
