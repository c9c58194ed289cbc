//! OpenTelemetry of every turn (docs/telemetry.md), through the binary:
//! an OTLP receiver built on the `opentelemetry-proto` types receives the
//! spans and metrics of a turn with a tool call, over HTTP/protobuf and
//! over gRPC; the attribute names are the GenAI semantic conventions';
//! the client's `traceparent` is the turn's parent; contents are absent
//! unless turned on; nothing is sent when telemetry is not configured; a
//! collector that is down changes nothing for the user.

use std::time::Duration;

use maia_test_support as mock;
use opentelemetry_proto::tonic::metrics::v1::Metric;
use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::json;

use crate::harness::{Maia, Options, agent_text, choose};
use crate::otlp_receiver::{Receiver, attr_int, attr_str};
use crate::remote_client::Daemon;

const WAIT: Duration = Duration::from_secs(20);

/// A W3C trace context as a client would send it.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";

/// The attribute keys of the GenAI semantic conventions (v1.37+) a span
/// or metric of MAIA may carry; any other `gen_ai.` key is a mistake.
const SEMCONV: &[&str] = &[
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.response.finish_reasons",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.conversation.id",
    "gen_ai.agent.name",
    "gen_ai.agent.id",
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "gen_ai.tool.type",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.token.type",
];

/// The content-bearing attributes, opt-in only.
const CONTENT: &[&str] = &[
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "maia.hook.command",
];

fn env(receiver: &Receiver, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut env = vec![
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT".to_owned(),
            receiver.endpoint(),
        ),
        ("OTEL_SERVICE_NAME".to_owned(), "maia-under-test".to_owned()),
        ("OTEL_BSP_SCHEDULE_DELAY".to_owned(), "100".to_owned()),
        ("OTEL_METRIC_EXPORT_INTERVAL".to_owned(), "200".to_owned()),
    ];
    env.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    env
}

/// A session whose one turn (prompted with a `traceparent`) writes a
/// file through `Write` (allowed once) and answers "written".
async fn turn_with_a_tool_call(env: Vec<(String, String)>) -> Maia {
    turn_under(env, None).await
}

/// [`turn_with_a_tool_call`] under a managed policy (`managed-settings.json`).
async fn turn_under(env: Vec<(String, String)>, policy: Option<&serde_json::Value>) -> Maia {
    let options = Options {
        env,
        ..Default::default()
    };
    let mut maia = match policy {
        Some(policy) => Maia::start_managed(options, policy).await,
        None => Maia::start_with(options).await,
    };
    maia.initialize().await;
    let sid = maia.new_session().await;
    maia.mock.set_stream_headers(vec![(
        "x-litellm-response-cost".to_owned(),
        "0.25".to_owned(),
    )]);
    maia.mock.push(mock::tool_calls_reply(&[(
        "call_w",
        "Write",
        json!({"file_path": "new.txt", "content": "one\ntwo\n"}),
    )]));
    maia.mock.push(mock::text_reply("written"));
    let id = maia
        .request(
            "session/prompt",
            json!({
                "sessionId": sid,
                "prompt": [{"type": "text", "text": "please write the secret file"}],
                "_meta": {"traceparent": format!("00-{TRACE_ID}-{PARENT_ID}-01")},
            }),
        )
        .await;
    let (resp, before) = maia.response_with(id, choose("allow_once")).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    assert!(agent_text(&before).contains("written"));
    assert_eq!(
        std::fs::read_to_string(maia.path("new.txt")).unwrap(),
        "one\ntwo\n"
    );
    maia
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| s.name == name).collect()
}

/// Checks the spans of [`turn_with_a_tool_call`]; returns them.
async fn check_trace(receiver: &Receiver) -> Vec<Span> {
    let complete = receiver
        .wait(WAIT, |spans, _| {
            !named(spans, "invoke_agent maia").is_empty()
                && !named(spans, "execute_tool Write").is_empty()
                && named(spans, "chat mock-model").len() >= 2
        })
        .await;
    let spans = receiver.spans();
    assert!(
        complete,
        "{:#?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let turn = named(&spans, "invoke_agent maia")[0];
    // The client's traceparent is the turn's parent.
    assert_eq!(hex(&turn.trace_id), TRACE_ID);
    assert_eq!(hex(&turn.parent_span_id), PARENT_ID);
    assert_eq!(
        attr_str(&turn.attributes, "gen_ai.operation.name"),
        Some("invoke_agent")
    );
    assert_eq!(
        attr_str(&turn.attributes, "gen_ai.agent.name"),
        Some("maia")
    );
    assert_eq!(
        attr_str(&turn.attributes, "gen_ai.request.model"),
        Some("mock-model")
    );
    assert!(attr_str(&turn.attributes, "gen_ai.conversation.id").is_some());
    // Two requests of 42 + 7 tokens each.
    assert_eq!(
        attr_int(&turn.attributes, "gen_ai.usage.input_tokens"),
        Some(84)
    );
    assert_eq!(
        attr_int(&turn.attributes, "gen_ai.usage.output_tokens"),
        Some(14)
    );
    for chat in named(&spans, "chat mock-model") {
        assert_eq!(
            chat.parent_span_id, turn.span_id,
            "a request under its turn"
        );
        assert_eq!(chat.kind, 3, "a client span");
        assert_eq!(
            attr_str(&chat.attributes, "gen_ai.operation.name"),
            Some("chat")
        );
        assert_eq!(
            attr_str(&chat.attributes, "gen_ai.provider.name"),
            Some("openai")
        );
        assert_eq!(
            attr_str(&chat.attributes, "gen_ai.request.model"),
            Some("mock-model")
        );
        assert_eq!(
            attr_int(&chat.attributes, "gen_ai.usage.input_tokens"),
            Some(42)
        );
        assert_eq!(
            attr_int(&chat.attributes, "gen_ai.usage.output_tokens"),
            Some(7)
        );
        assert!(chat.end_time_unix_nano >= chat.start_time_unix_nano);
    }
    let tool = named(&spans, "execute_tool Write")[0];
    assert_eq!(tool.parent_span_id, turn.span_id, "a call under its turn");
    assert_eq!(
        attr_str(&tool.attributes, "gen_ai.operation.name"),
        Some("execute_tool")
    );
    assert_eq!(
        attr_str(&tool.attributes, "gen_ai.tool.name"),
        Some("Write")
    );
    assert!(attr_str(&tool.attributes, "gen_ai.tool.call.id").is_some());
    // Every gen_ai attribute is one the conventions define.
    for span in &spans {
        for kv in &span.attributes {
            if kv.key.starts_with("gen_ai.") {
                assert!(
                    SEMCONV.contains(&kv.key.as_str()),
                    "{} on {}",
                    kv.key,
                    span.name
                );
            }
        }
    }
    spans
}

/// Checks the metrics of [`turn_with_a_tool_call`], as their latest
/// export has them (cumulative: the first exports may come before the
/// turn's end).
async fn check_metrics(receiver: &Receiver) {
    let complete = receiver
        .wait(WAIT, |_, metrics| metric_checks(metrics).is_ok())
        .await;
    if !complete && let Err(e) = metric_checks(&receiver.metrics()) {
        panic!("{e}");
    }
}

type Points = Vec<(Vec<(String, String)>, f64)>;

/// The points of the latest export of sum `name`.
fn sums(metrics: &[Metric], name: &str) -> Result<Points, String> {
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;
    use opentelemetry_proto::tonic::metrics::v1::number_data_point::Value;
    let metric = metrics
        .iter()
        .rev()
        .find(|m| m.name == name)
        .ok_or_else(|| format!("no {name}"))?;
    let Some(Data::Sum(sum)) = metric.data.as_ref() else {
        return Err(format!("{name} is not a sum"));
    };
    Ok(sum
        .data_points
        .iter()
        .map(|p| {
            let value = match p.value {
                Some(Value::AsInt(i)) => i as f64,
                Some(Value::AsDouble(d)) => d,
                None => f64::NAN,
            };
            let attrs = p
                .attributes
                .iter()
                .map(|kv| {
                    let v = attr_str(std::slice::from_ref(kv), &kv.key)
                        .unwrap_or_default()
                        .to_owned();
                    (kv.key.clone(), v)
                })
                .collect();
            (attrs, value)
        })
        .collect())
}

fn metric_checks(metrics: &[Metric]) -> Result<(), String> {
    for name in [
        "gen_ai.client.token.usage",
        "gen_ai.client.operation.duration",
    ] {
        let metric = metrics
            .iter()
            .find(|m| m.name == name)
            .ok_or_else(|| format!("no {name}"))?;
        let unit = if name.ends_with("usage") {
            "{token}"
        } else {
            "s"
        };
        if metric.unit != unit {
            return Err(format!("{name} in {}", metric.unit));
        }
    }
    let has = |name: &str, key: &str, value: &str, n: f64| -> Result<(), String> {
        let points = sums(metrics, name)?;
        let found = points.iter().any(|(attrs, v)| {
            (*v - n).abs() < 1e-9 && attrs.iter().any(|(k, x)| k == key && x == value)
        });
        if found {
            Ok(())
        } else {
            Err(format!("{name}: no {key}={value} at {n} in {points:?}"))
        }
    };
    has("maia.tool_call.count", "result", "success", 1.0)?;
    has("maia.tool_call.count", "gen_ai.tool.name", "Write", 1.0)?;
    has("maia.lines_of_code.count", "type", "added", 2.0)?;
    has(
        "maia.permission.decision.count",
        "decision",
        "allow_once",
        1.0,
    )?;
    has("maia.token.usage", "type", "input", 84.0)?;
    has("maia.token.usage", "type", "output", 14.0)?;
    has("maia.cost.usage", "gen_ai.request.model", "mock-model", 0.5)?;
    Ok(())
}

#[tokio::test]
async fn http_protobuf_gets_the_spans_and_metrics_of_a_turn_without_contents() {
    let receiver = Receiver::http().await;
    let mut maia = turn_with_a_tool_call(env(&receiver, &[])).await;
    let spans = check_trace(&receiver).await;
    check_metrics(&receiver).await;
    for span in &spans {
        for key in CONTENT {
            assert!(
                !span.attributes.iter().any(|kv| kv.key == *key),
                "{key} on {} though contents are off",
                span.name
            );
        }
    }
    let service = attr_str(&receiver.resource(), "service.name").map(str::to_owned);
    assert_eq!(service.as_deref(), Some("maia-under-test"));
    // The session's span ends (and is sent) when the process stops.
    maia.close_stdin();
    maia.wait_exit(WAIT).await;
    let session = receiver
        .wait(WAIT, |spans, _| !named(spans, "maia.session").is_empty())
        .await;
    assert!(session, "no session span at exit");
}

#[tokio::test]
async fn grpc_gets_them_too_with_contents_when_turned_on() {
    let receiver = Receiver::grpc().await;
    let extra = [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
    ];
    let _maia = turn_with_a_tool_call(env(&receiver, &extra)).await;
    let spans = check_trace(&receiver).await;
    check_metrics(&receiver).await;
    let turn = named(&spans, "invoke_agent maia")[0];
    let input = attr_str(&turn.attributes, "gen_ai.input.messages").unwrap();
    assert!(input.contains("please write the secret file"), "{input}");
    let output = attr_str(&turn.attributes, "gen_ai.output.messages").unwrap();
    assert!(output.contains("written"), "{output}");
    let tool = named(&spans, "execute_tool Write")[0];
    let arguments = attr_str(&tool.attributes, "gen_ai.tool.call.arguments").unwrap();
    assert!(arguments.contains("new.txt"), "{arguments}");
}

#[tokio::test]
async fn a_managed_policy_turns_telemetry_on_over_the_users_environment() {
    let receiver = Receiver::http().await;
    let policy = json!({"telemetry": {
        "enabled": true,
        "logPrompts": false,
        "otel": {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint(),
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        },
    }});
    // The user turns telemetry off and contents on: the policy wins on both.
    let user = vec![
        ("OTEL_SDK_DISABLED".to_owned(), "true".to_owned()),
        ("OTEL_TRACES_EXPORTER".to_owned(), "none".to_owned()),
        (
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT".to_owned(),
            "true".to_owned(),
        ),
    ];
    let mut maia = turn_under(user, Some(&policy)).await;
    let complete = receiver
        .wait(WAIT, |spans, _| {
            !named(spans, "execute_tool Write").is_empty()
        })
        .await;
    assert!(complete, "the policy's telemetry sent no span");
    for span in receiver.spans() {
        for a in &span.attributes {
            assert!(
                !CONTENT.contains(&a.key.as_str()),
                "{} carries {}",
                span.name,
                a.key
            );
        }
    }
    maia.close_stdin();
    maia.wait_exit(WAIT).await;
}

/// `maia serve` exports the turns of its clients (here a WebSocket
/// client's), turned on by the managed policy.
#[tokio::test]
async fn the_daemon_exports_its_clients_turns() {
    let receiver = Receiver::http().await;
    let policy = json!({"telemetry": {"enabled": true, "otel": {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint(),
    }}});
    let daemon = Daemon::start_managed(&[("editor", &[])], &policy).await;
    let (_ws, sid) = daemon
        .session_with_turn("editor", "hello from the daemon")
        .await;
    let sid = sid.to_string();
    let complete = receiver
        .wait(WAIT, |spans, _| {
            spans.iter().any(|s| {
                s.name == "invoke_agent maia"
                    && attr_str(&s.attributes, "gen_ai.conversation.id") == Some(sid.as_str())
            }) && !named(spans, "chat mock-model").is_empty()
        })
        .await;
    let names: Vec<String> = receiver.spans().iter().map(|s| s.name.clone()).collect();
    assert!(complete, "{names:?}");
}

#[tokio::test]
async fn nothing_is_sent_when_telemetry_is_turned_off() {
    let receiver = Receiver::http().await;
    for off in [
        vec![("OTEL_SDK_DISABLED", "true")],
        vec![
            ("OTEL_TRACES_EXPORTER", "none"),
            ("OTEL_METRICS_EXPORTER", "none"),
        ],
    ] {
        let mut maia = turn_with_a_tool_call(env(&receiver, &off)).await;
        maia.close_stdin();
        maia.wait_exit(WAIT).await;
    }
    // Without any endpoint: on by nothing.
    let mut maia = turn_with_a_tool_call(Vec::new()).await;
    maia.close_stdin();
    maia.wait_exit(WAIT).await;
    // Both processes exited (their exports would have been flushed).
    assert!(!receiver.anything(), "telemetry was sent while off");
}

#[tokio::test]
async fn a_collector_that_is_down_changes_nothing_for_the_user() {
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    for protocol in ["http/protobuf", "grpc"] {
        let env = vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT".to_owned(), endpoint.clone()),
            (
                "OTEL_EXPORTER_OTLP_PROTOCOL".to_owned(),
                protocol.to_owned(),
            ),
            ("OTEL_BSP_SCHEDULE_DELAY".to_owned(), "50".to_owned()),
        ];
        // The turn is answered as always (checked inside).
        let mut maia = turn_with_a_tool_call(env).await;
        // And the process still exits promptly.
        maia.close_stdin();
        let status = maia.wait_exit(Duration::from_secs(10)).await;
        assert!(status.success(), "{protocol}: {status:?}");
    }
}

#[tokio::test]
async fn a_cancelled_turn_ends_its_spans() {
    let receiver = Receiver::http().await;
    let mut maia = Maia::start_with(Options {
        env: env(&receiver, &[]),
        ..Default::default()
    })
    .await;
    maia.initialize().await;
    let sid = maia.new_session().await;
    maia.mock.push(mock::Reply::Hang);
    let id = maia.prompt(&sid, "hello?").await;
    maia.mock.wait_for_requests(1, WAIT).await;
    maia.notify("session/cancel", json!({"sessionId": sid}))
        .await;
    let (resp, _) = maia.response(id).await;
    assert_eq!(resp["result"]["stopReason"], "cancelled", "{resp}");
    // Both spans arrive while the process runs on: they ended.
    let ended = receiver
        .wait(WAIT, |spans, _| {
            !named(spans, "invoke_agent maia").is_empty()
                && !named(spans, "chat mock-model").is_empty()
        })
        .await;
    assert!(ended, "the cancelled turn's spans never ended");
    let spans = receiver.spans();
    let turn = named(&spans, "invoke_agent maia")[0];
    assert_eq!(attr_str(&turn.attributes, "error.type"), Some("cancelled"));
    assert_eq!(
        attr_str(&turn.attributes, "maia.turn.stop_reason"),
        Some("cancelled")
    );
    let chat = named(&spans, "chat mock-model")[0];
    assert_eq!(attr_str(&chat.attributes, "error.type"), Some("cancelled"));
    // Without a traceparent the turn is under the session's span.
    assert_ne!(hex(&turn.parent_span_id), "");
    assert!(
        named(&spans, "maia.session").is_empty(),
        "the session is still open"
    );
}
