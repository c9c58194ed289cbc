//! The real LiteLLM proxy (PyPI `litellm[proxy]`) between `maia acp` and the
//! mock LLM: what users run. LiteLLM is started offline on loopback with a
//! generated config whose models point at the in-process mock; MAIA is
//! pointed at the proxy with its master key and no `model`.
//!
//! Checked through the proxy: the model list (first listed model used), the
//! window from `/model/info`, usage, text streamed in several chunks, a tool
//! call whose arguments arrive split, a 429 whose `Retry-After` LiteLLM
//! renames to `llm_provider-retry-after`, and an error event mid-stream.
//!
//! The proxy is found through `MAIA_LITELLM` (the `litellm` executable of a
//! virtual environment); without it the test prints SKIPPED and passes, or
//! fails with `MAIA_REQUIRE_ALL=1` (`mock::require`).
//! `.ci/run` installs LiteLLM into `.venv-litellm` and sets it, so CI runs it.
//! See ../shared/guides/llm-testing.md §1 for LiteLLM's shapes and quirks.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use maia_test_support::{self as mock, MockLlm};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

use crate::harness::{Maia, Options, agent_text, alive, choose, read, updates_of};

/// LiteLLM refuses to start without a master key, and refuses `sk-1234`.
pub(crate) const MASTER_KEY: &str = "sk-maia-protocol-test-5e2b";
/// What LiteLLM sends the mock as its API key.
const UPSTREAM_KEY: &str = "upstream-secret-91d0";
/// The first listed model, and its window (an unusual number on purpose).
const MODEL: &str = "upstream-model";
const WINDOW: u64 = 12_288;
const SECOND_MODEL: &str = "second-model";
/// How long LiteLLM may take to become live: 7–11 s on 2 idle cores, ~27 s
/// on 2 busy ones.
const READY_WITHIN: Duration = Duration::from_secs(90);

/// A running LiteLLM proxy; killed on drop.
pub(crate) struct Proxy {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: TempDir,
}

impl Proxy {
    /// Writes the config for `upstream`, starts `litellm` and waits until
    /// `/health/liveliness` answers 200.
    async fn start(litellm: &Path, upstream: &MockLlm) -> Proxy {
        Self::start_with(litellm, upstream, "").await
    }

    /// [`Proxy::start`] with `extra` appended to the config (top-level
    /// sections such as `search_tools:`).
    pub(crate) async fn start_with(litellm: &Path, upstream: &MockLlm, extra: &str) -> Proxy {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("litellm.yaml");
        let api_base = format!("{}/v1", upstream.url());
        std::fs::write(
            &config,
            format!(
                "model_list:
  - model_name: {MODEL}
    litellm_params:
      model: openai/{MODEL}
      api_base: {api_base}
      api_key: {UPSTREAM_KEY}
    model_info:
      max_input_tokens: {WINDOW}
      max_output_tokens: 1024
      supports_function_calling: true
  - model_name: {SECOND_MODEL}
    litellm_params:
      model: openai/{SECOND_MODEL}
      api_base: {api_base}
      api_key: {UPSTREAM_KEY}
    model_info:
      max_input_tokens: 4096
general_settings:
  master_key: {MASTER_KEY}
litellm_settings:
  drop_params: true
  num_retries: 0
router_settings:
  disable_cooldowns: true
{extra}"
            ),
        )
        .unwrap();
        let log = dir.path().join("litellm.log");
        let out = std::fs::File::create(&log).unwrap();
        let err = out.try_clone().unwrap();
        let port = free_port();
        let child = Command::new(litellm)
            .arg("--config")
            .arg(&config)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .current_dir(dir.path())
            // Offline: the bundled cost map and data, no fetches.
            .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            .env("LITELLM_LOCAL_BLOG_POSTS", "True")
            .env("LITELLM_LOCAL_POLICY_TEMPLATES", "True")
            .env("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")
            .env("LITELLM_LOCAL_AUTOROUTER_PRESETS", "True")
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env("no_proxy", "127.0.0.1,localhost")
            .env_remove("HTTP_PROXY")
            .env_remove("HTTPS_PROXY")
            .env_remove("http_proxy")
            .env_remove("https_proxy")
            .env_remove("DATABASE_URL")
            .env_remove("LITELLM_MASTER_KEY")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", litellm.display()));
        let mut proxy = Proxy {
            child,
            port,
            log,
            _dir: dir,
        };
        proxy.wait_live().await;
        proxy
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Polls `/health/liveliness` until 200; fails early if the proxy exits.
    async fn wait_live(&mut self) {
        let start = Instant::now();
        loop {
            if let Ok((200, _, _)) = http(self.port, "GET", "/health/liveliness", None).await {
                eprintln!("litellm live after {:?}", start.elapsed());
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "litellm exited ({status}) before it was live:\n{}",
                    self.log()
                );
            }
            assert!(
                start.elapsed() < READY_WITHIN,
                "litellm not live within {READY_WITHIN:?}:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Kills the proxy and reaps it.
    pub(crate) async fn stop(mut self) {
        let pid = self.child.id().unwrap();
        self.child.start_kill().unwrap();
        tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .expect("litellm did not die after SIGKILL")
            .unwrap();
        assert!(!alive(pid), "litellm {pid} still alive");
    }
}

/// A loopback port that was free a moment ago.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// One HTTP/1.1 request to the proxy with the master key; returns the status,
/// the header lines (lower-cased names) and the body (de-chunked).
async fn http(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> std::io::Result<(u16, Vec<(String, String)>, String)> {
    let mut socket = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let body = body.map(Value::to_string).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {MASTER_KEY}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(request.as_bytes()).await?;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), socket.read_to_end(&mut raw))
        .await
        .map_err(|_| std::io::Error::other("timed out"))??;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no header end: {text:?}")))?;
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status: {head:?}")))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    Ok((status, headers, body))
}

/// The payload of a `Transfer-Encoding: chunked` body.
fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
        else {
            break;
        };
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    out
}

pub(crate) async fn get_json(proxy: &Proxy, path: &str) -> Value {
    let (status, _, body) = http(proxy.port, "GET", path, None).await.unwrap();
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
}

/// Prompts and returns the updates before the `end_turn` response.
async fn turn(maia: &mut Maia, sid: &str, text: &str) -> Vec<Value> {
    let id = maia.prompt(sid, text).await;
    let (resp, before) = maia.response_with(id, choose("allow_once")).await;
    assert_eq!(resp["result"]["stopReason"], "end_turn", "{resp}");
    before
}

#[tokio::test]
async fn litellm_proxy_between_maia_and_the_model() {
    let Some(litellm) = mock::env_path("MAIA_LITELLM") else {
        mock::require(
            "the LiteLLM proxy: MAIA_LITELLM, the path of the `litellm` executable (.ci/run sets it)",
            false,
        );
        return;
    };
    assert!(
        litellm.is_file(),
        "MAIA_LITELLM={} is not a file",
        litellm.display()
    );
    let upstream = MockLlm::start().await;
    let proxy = Proxy::start(&litellm, &upstream).await;
    let started = Instant::now();

    // What the proxy itself reports: its list (config order) and window.
    let models = get_json(&proxy, "/v1/models").await;
    let ids: Vec<_> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].clone())
        .collect();
    assert_eq!(ids, [json!(MODEL), json!(SECOND_MODEL)], "{models}");
    let info = get_json(&proxy, "/model/info").await;
    let entry = info["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["model_name"] == MODEL)
        .unwrap_or_else(|| panic!("{MODEL} not in /model/info: {info}"));
    assert_eq!(entry["model_info"]["max_input_tokens"], json!(WINDOW));

    // MAIA with the proxy's URL and master key, and no model.
    let mut maia = Maia::start_with(Options {
        settings: json!({"LiteLLM_URL": proxy.url(), "LiteLLM_API_Key": MASTER_KEY, "model": null}),
        ..Default::default()
    })
    .await;
    maia.initialize().await;
    let id = maia
        .request("session/new", json!({"cwd": maia.cwd(), "mcpServers": []}))
        .await;
    let (resp, _) = maia.response(id).await;
    let sid = resp["result"]["sessionId"].as_str().unwrap().to_owned();
    let option = &resp["result"]["configOptions"][0];
    assert_eq!(option["id"], "model", "{resp}");
    assert_eq!(option["currentValue"], MODEL, "the first listed: {resp}");
    let values: Vec<_> = option["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["value"].clone())
        .collect();
    assert_eq!(values, [json!(MODEL), json!(SECOND_MODEL)]);
    maia.wait_for(|m| m["params"]["update"]["sessionUpdate"] == "available_commands_update")
        .await;

    // 1. Streamed text arrives in several chunks; usage against the window.
    let pieces = ["Hello ", "through ", "the ", "real ", "proxy."];
    upstream.push(mock::text_chunks(&pieces, Duration::from_millis(30)));
    let before = turn(&mut maia, &sid, "hi").await;
    assert_eq!(agent_text(&before), pieces.concat());
    let chunks = updates_of(&before, "agent_message_chunk");
    assert!(chunks.len() >= 3, "streamed, not buffered: {chunks:?}");
    eprintln!(
        "{} text pieces arrived as {} chunks",
        pieces.len(),
        chunks.len()
    );
    let usage = updates_of(&before, "usage_update");
    let last = usage
        .last()
        .unwrap_or_else(|| panic!("no usage_update: {before:?}"));
    assert_eq!(last["size"], json!(WINDOW), "the window from /model/info");
    assert_eq!(
        last["used"],
        json!(mock::MOCK_PROMPT_TOKENS + mock::MOCK_COMPLETION_TOKENS),
        "the upstream's usage, passed through"
    );
    let requests = upstream.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["model"], MODEL);

    assert_eq!(requests[0]["stream"], true);
    assert!(
        upstream.headers()[0].contains(&("authorization".into(), format!("Bearer {UPSTREAM_KEY}"))),
        "LiteLLM's own upstream key, not MAIA's: {:?}",
        upstream.headers()[0]
    );

    // 2. A Write whose arguments arrive split: LiteLLM keeps the split...
    let args = json!({"file_path": "out/proxy.txt", "content": "written through LiteLLM\n"});
    upstream.push(mock::tool_calls_reply(&[("call_w", "Write", args.clone())]));
    let (status, _, body) = http(
        proxy.port,
        "POST",
        "/v1/chat/completions",
        Some(&json!({"model": MODEL, "stream": true,
                     "messages": [{"role": "user", "content": "probe"}]})),
    )
    .await
    .unwrap();
    assert_eq!(status, 200, "{body}");
    let pieces: Vec<String> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| {
            c.pointer("/choices/0/delta/tool_calls/0/function/arguments")
                .and_then(Value::as_str)
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
        })
        .collect();
    assert!(pieces.len() >= 3, "arguments still split: {body}");
    assert_eq!(
        serde_json::from_str::<Value>(&pieces.concat()).unwrap(),
        args
    );
    assert!(body.contains("data: [DONE]"), "{body}");
    // ...and MAIA assembles the call and runs it.
    upstream.push(mock::tool_calls_reply(&[("call_w", "Write", args.clone())]));
    upstream.push(mock::text_reply("written"));
    let before = turn(&mut maia, &sid, "write it").await;
    let calls = updates_of(&before, "tool_call");
    assert_eq!(calls.len(), 1, "{before:?}");
    assert_eq!(calls[0]["rawInput"], args);
    assert!(
        before
            .iter()
            .any(|m| m["method"] == "session/request_permission"),
        "asked: {before:?}"
    );
    assert_eq!(
        read(&maia.path("out/proxy.txt")),
        "written through LiteLLM\n"
    );
    assert_eq!(agent_text(&before), "written");
    let requests = upstream.requests();
    assert_eq!(requests.len(), 4);
    let messages = requests[3]["messages"].as_array().unwrap();
    let result = messages
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap_or_else(|| panic!("no tool result sent back: {messages:?}"));
    assert_eq!(result["tool_call_id"], "call_w");

    // 3. A 429 with `Retry-After: 1` comes out of LiteLLM renamed...
    upstream.push(mock::rate_limited(1, false));
    let (status, headers, body) = http(
        proxy.port,
        "POST",
        "/v1/chat/completions",
        Some(&json!({"model": MODEL, "stream": true,
                     "messages": [{"role": "user", "content": "probe"}]})),
    )
    .await
    .unwrap();
    assert_eq!(status, 429, "{body}");
    assert!(
        headers.contains(&("llm_provider-retry-after".into(), "1".into())),
        "{headers:?}"
    );
    assert!(
        !headers.iter().any(|(n, _)| n == "retry-after"),
        "only the renamed header: {headers:?}"
    );
    // ...and MAIA waits it out (its own backoff would be 10 ms) and succeeds.
    upstream.push(mock::rate_limited(1, false));
    upstream.push(mock::text_reply("after the wait"));
    let start = Instant::now();
    let before = turn(&mut maia, &sid, "again").await;
    assert!(
        start.elapsed() >= Duration::from_millis(900),
        "llm_provider-retry-after honoured: waited {:?}",
        start.elapsed()
    );
    assert_eq!(agent_text(&before), "after the wait");
    assert_eq!(upstream.requests().len(), 4 + 1 + 2);

    // 4. An error mid-stream: LiteLLM forwards it as an `{"error":..}` event
    // without [DONE]; the partial text is kept and the failure explained.
    upstream.push(mock::mid_stream_error(
        "The answer is partial",
        "upstream overloaded mid-stream",
    ));
    upstream.push(mock::text_reply("never used"));
    let before = turn(&mut maia, &sid, "fail").await;
    let text = agent_text(&before);
    assert!(text.starts_with("The answer is partial"), "{text}");
    assert!(text.contains("Model request failed"), "{text}");
    assert!(text.contains(&proxy.url()), "names the endpoint: {text}");
    assert!(
        text.contains("upstream overloaded mid-stream"),
        "names the error: {text}"
    );
    assert_eq!(upstream.requests().len(), 8, "not retried after text");
    assert_eq!(upstream.pending_replies(), 1);

    eprintln!("litellm checks took {:?}", started.elapsed());
    maia.close_stdin();
    maia.wait_exit(Duration::from_secs(5)).await;
    proxy.stop().await;
}
