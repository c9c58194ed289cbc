//! An OTLP receiver for the telemetry tests, built on the
//! `opentelemetry-proto` types: HTTP/protobuf (`/v1/traces`,
//! `/v1/metrics`, on axum) or gRPC (tonic's collector services). It keeps
//! every span and metric it is sent.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
    metrics_service_server::{MetricsService, MetricsServiceServer},
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
    trace_service_server::{TraceService, TraceServiceServer},
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::Metric;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

/// What the receiver was sent.
#[derive(Clone, Default)]
pub struct Received {
    traces: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
    metrics: Arc<Mutex<Vec<ExportMetricsServiceRequest>>>,
}

pub struct Receiver {
    pub addr: SocketAddr,
    pub received: Received,
}

impl Receiver {
    /// A receiver of OTLP over HTTP with protobuf bodies.
    pub async fn http() -> Receiver {
        let received = Received::default();
        let (traces, metrics) = (received.clone(), received.clone());
        let app = axum::Router::new()
            .route(
                "/v1/traces",
                post(move |body: bytes::Bytes| async move {
                    let request = ExportTraceServiceRequest::decode(body).unwrap();
                    traces.traces.lock().unwrap().push(request);
                    ExportTraceServiceResponse::default().encode_to_vec()
                }),
            )
            .route(
                "/v1/metrics",
                post(move |body: bytes::Bytes| async move {
                    let request = ExportMetricsServiceRequest::decode(body).unwrap();
                    metrics.metrics.lock().unwrap().push(request);
                    ExportMetricsServiceResponse::default().encode_to_vec()
                }),
            );
        Self::serve(app, received).await
    }

    /// A receiver of OTLP over gRPC.
    pub async fn grpc() -> Receiver {
        let received = Received::default();
        let routes = tonic::service::Routes::new(TraceServiceServer::new(received.clone()))
            .add_service(MetricsServiceServer::new(received.clone()));
        Self::serve(routes.into_axum_router(), received).await
    }

    async fn serve(app: axum::Router, received: Received) -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { addr, received }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        let traces = self.received.traces.lock().unwrap();
        traces
            .iter()
            .flat_map(|r| &r.resource_spans)
            .flat_map(|r| &r.scope_spans)
            .flat_map(|s| s.spans.clone())
            .collect()
    }

    /// The resource attributes of the first batch of spans.
    pub fn resource(&self) -> Vec<KeyValue> {
        let traces = self.received.traces.lock().unwrap();
        traces
            .iter()
            .flat_map(|r| &r.resource_spans)
            .find_map(|r| r.resource.clone())
            .map(|r| r.attributes)
            .unwrap_or_default()
    }

    /// Every metric received so far (each export's copy).
    pub fn metrics(&self) -> Vec<Metric> {
        let metrics = self.received.metrics.lock().unwrap();
        metrics
            .iter()
            .flat_map(|r| &r.resource_metrics)
            .flat_map(|r| &r.scope_metrics)
            .flat_map(|s| s.metrics.clone())
            .collect()
    }

    /// Whether anything at all was received.
    pub fn anything(&self) -> bool {
        !self.received.traces.lock().unwrap().is_empty()
            || !self.received.metrics.lock().unwrap().is_empty()
    }

    /// Waits until `pred` holds of the received spans and metrics.
    pub async fn wait(&self, within: Duration, pred: impl Fn(&[Span], &[Metric]) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if pred(&self.spans(), &self.metrics()) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tonic::async_trait]
impl TraceService for Received {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.traces.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tonic::async_trait]
impl MetricsService for Received {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        self.metrics.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportMetricsServiceResponse::default()))
    }
}

/// The value of attribute `key`, if the list has it.
pub fn attr<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v: &AnyValue| v.value.as_ref())
}

/// The string value of attribute `key`.
pub fn attr_str<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a str> {
    match attr(attributes, key)? {
        any_value::Value::StringValue(s) => Some(s),
        _ => None,
    }
}

/// The integer value of attribute `key`.
pub fn attr_int(attributes: &[KeyValue], key: &str) -> Option<i64> {
    match attr(attributes, key)? {
        any_value::Value::IntValue(i) => Some(*i),
        _ => None,
    }
}
