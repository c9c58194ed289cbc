//! MAIA's benchmark suite: `cargo bench -p maia-server --bench perf`.
//!
//! Prints one Markdown table (method and targets in docs/performance.md).
//! The `maia` binary under test is the release build of this package; the
//! model is `maia-test-support`'s in-process mock, whose streams record when
//! each piece was handed to the HTTP body: latencies are measured on one
//! clock, mock send → the line read from maia's stdout.
//!
//! `MAIA_BENCH_FILES` (Grep/Glob tree, default 100000), `MAIA_BENCH_CHUNKS` (default 2000).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "perf/lsp.rs"]
mod lsp;
#[path = "../../maia-core/benches/session_load.rs"]
mod session_load;
#[path = "perf/stats.rs"]
mod stats;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use maia_llm::ChatMessage;
use maia_test_support::{self as mock, MockLlm};
use serde_json::{Value, json};
use stats::{Stats, ms};

const WAIT: Duration = Duration::from_secs(30);

struct Row {
    measure: String,
    result: String,
    target: &'static str,
    verdict: &'static str,
}

#[derive(Default)]
struct Table(Vec<Row>);

impl Table {
    fn add(&mut self, measure: impl Into<String>, result: impl Into<String>) {
        self.check(measure, result, "", None);
    }

    fn check(
        &mut self,
        measure: impl Into<String>,
        result: impl Into<String>,
        target: &'static str,
        met: Option<bool>,
    ) {
        let row = Row {
            measure: measure.into(),
            result: result.into(),
            target,
            verdict: match met {
                Some(true) => "met",
                Some(false) => "**missed**",
                None => "",
            },
        };
        eprintln!("  {} = {}", row.measure, row.result);
        self.0.push(row);
    }

    fn print(&self) {
        println!("| measure | result | target | |");
        println!("| --- | --- | --- | --- |");
        for r in &self.0 {
            println!(
                "| {} | {} | {} | {} |",
                r.measure, r.result, r.target, r.verdict
            );
        }
    }
}

/// Sorted samples in ms.
/// A `maia acp` process driven synchronously; stdout lines are read on a
/// thread and timestamped there as they arrive.
struct Maia {
    child: Child,
    stdin: ChildStdin,
    rx: mpsc::Receiver<(Instant, Value)>,
    next_id: u64,
}

impl Maia {
    fn spawn(home: &Path) -> (Maia, Instant) {
        let started = Instant::now();
        let mut child = Command::new(env!("CARGO_BIN_EXE_maia"))
            .arg("acp")
            .env("HOME", home)
            .env_remove("LITELLM_API_KEY")
            .env_remove("MAIA_MODEL")
            .env("MAIA_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn maia");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            while let Some(Ok(line)) = lines.next() {
                let at = Instant::now();
                let value = serde_json::from_str(&line).unwrap_or(Value::Null);
                if tx.send((at, value)).is_err() {
                    return;
                }
            }
        });
        (
            Maia {
                child,
                stdin,
                rx,
                next_id: 1,
            },
            started,
        )
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn send(&mut self, v: &Value) -> Instant {
        let line = format!("{v}\n");
        let at = Instant::now();
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.flush().unwrap();
        at
    }

    fn request(&mut self, method: &str, params: Value) -> (u64, Instant) {
        let id = self.next_id;
        self.next_id += 1;
        let at =
            self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        (id, at)
    }

    fn next(&mut self) -> (Instant, Value) {
        self.rx.recv_timeout(WAIT).expect("no message from maia")
    }

    /// Messages up to and including the response to `id`.
    fn until_response(&mut self, id: u64) -> Vec<(Instant, Value)> {
        let mut out = Vec::new();
        loop {
            let (at, m) = self.next();
            let done = m.get("method").is_none() && m["id"] == json!(id);
            out.push((at, m));
            if done {
                return out;
            }
        }
    }

    fn initialize(&mut self) -> Instant {
        let (id, _) = self.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {},
                   "clientInfo": {"name": "bench", "version": "1"}}),
        );
        self.until_response(id).last().unwrap().0
    }

    /// Opens a session; returns its id and the request → response time.
    fn new_session(&mut self, cwd: &Path) -> (String, Duration) {
        let (id, sent) = self.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
        let (at, resp) = self.until_response(id).pop().unwrap();
        (
            resp["result"]["sessionId"].as_str().unwrap().to_owned(),
            at - sent,
        )
    }

    fn prompt(&mut self, sid: &str, text: &str) -> (u64, Instant) {
        self.request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
        )
    }

    fn cancel(&mut self, sid: &str) -> Instant {
        self.send(&json!({"jsonrpc": "2.0", "method": "session/cancel",
                          "params": {"sessionId": sid}}))
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text_of(m: &Value) -> Option<&str> {
    let u = &m["params"]["update"];
    (m["method"] == "session/update" && u["sessionUpdate"] == "agent_message_chunk")
        .then(|| u["content"]["text"].as_str())
        .flatten()
}

/// `VmHWM` / `VmRSS` of a process, in kB.
fn proc_kb(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Setup {
    rt: tokio::runtime::Runtime,
    mock: MockLlm,
    home: tempfile::TempDir,
    cwd: tempfile::TempDir,
}

fn setup() -> Setup {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mock = rt.block_on(MockLlm::start());
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".maia")).unwrap();
    std::fs::write(
        home.path().join(".maia/settings.json"),
        json!({"LiteLLM_URL": mock.url(), "model": "mock-model"}).to_string(),
    )
    .unwrap();
    Setup {
        rt,
        mock,
        home,
        cwd,
    }
}

fn bench_protocol(table: &mut Table) {
    let s = setup();
    let cwd = s.cwd.path().canonicalize().unwrap();

    // Spawn → initialize response.
    let mut spawn = Vec::new();
    for _ in 0..30 {
        let (mut maia, started) = Maia::spawn(s.home.path());
        let answered = maia.initialize();
        spawn.push(ms(answered - started));
        maia.kill();
    }
    let spawn = Stats::new(spawn);
    table.check(
        "spawn → `initialize` response (30 runs)",
        format!(
            "p50 {:.2} ms, p90 {:.2} ms, min {:.2} ms",
            spawn.pct(50.0),
            spawn.pct(90.0),
            spawn.min()
        ),
        "< 10 ms",
        Some(spawn.pct(50.0) < 10.0),
    );

    let (mut maia, _) = Maia::spawn(s.home.path());
    maia.initialize();
    maia.new_session(&cwd);
    std::thread::sleep(Duration::from_millis(200));
    let idle_kb = proc_kb(maia.pid(), "VmHWM:");
    table.check(
        "peak RSS idle (VmHWM after initialize + 1 session)",
        format!("{:.1} MB", idle_kb as f64 / 1024.0),
        "< 15 MB",
        Some(idle_kb < 15 * 1024),
    );
    let mut news = Vec::new();
    let mut sid = String::new();
    for _ in 0..20 {
        let (id, took) = maia.new_session(&cwd);
        news.push(ms(took));
        sid = id;
    }
    // Let the commands updates of the sessions arrive.
    std::thread::sleep(Duration::from_millis(200));
    while maia.rx.try_recv().is_ok() {}
    let news = Stats::new(news);
    table.add(
        "`session/new` request → response (20 sessions)",
        format!("p50 {:.2} ms, p90 {:.2} ms", news.pct(50.0), news.pct(90.0)),
    );
    let sessions_kb = proc_kb(maia.pid(), "VmHWM:");
    table.add(
        "peak RSS after 21 sessions (VmHWM)",
        format!("{:.1} MB", sessions_kb as f64 / 1024.0),
    );

    // Request size: system prompt + tool definitions of the first request.
    s.mock.push(mock::text_reply("ok"));
    let (id, _) = maia.prompt(&sid, "hello");
    maia.until_response(id);
    let request = s.mock.requests().pop().unwrap();
    let system = request["messages"][0]["content"]
        .as_str()
        .map_or(0, str::len);
    let tools = request["tools"].to_string().len();
    let body = request.to_string().len();
    let tool_count = request["tools"].as_array().map_or(0, Vec::len);
    table.add(
        "bytes per request: system prompt + tool definitions",
        format!(
            "{system} + {tools} = {} B ({tool_count} tools; whole first request {body} B)",
            system + tools
        ),
    );

    // First model byte → first agent_message_chunk: the first piece carries text.
    let mut first = Vec::new();
    for i in 0..30 {
        let word = format!("first{i}");
        s.mock.push(mock::stream(vec![
            mock::sse_chunk(&mock::chunk(
                json!({"role": "assistant", "content": word}),
                None,
            )),
            mock::sse_chunk(&mock::chunk(json!({}), Some("stop"))),
            mock::DONE.to_owned(),
        ]));
        let before = s.mock.piece_times().len();
        let (id, _) = maia.prompt(&sid, "again");
        let messages = maia.until_response(id);
        let at = messages
            .iter()
            .find(|(_, m)| text_of(m) == Some(word.as_str()))
            .expect("first chunk")
            .0;
        let sent = s.mock.piece_times()[before];
        first.push(ms(at - sent));
    }
    let first = Stats::new(first);
    table.check(
        "first model byte → first `agent_message_chunk` (30 turns)",
        format!(
            "p50 {:.3} ms, p90 {:.3} ms, max {:.3} ms",
            first.pct(50.0),
            first.pct(90.0),
            first.max()
        ),
        "< 1 ms",
        Some(first.pct(50.0) < 1.0),
    );

    // Per-chunk forwarding over a long stream, 1 ms apart.
    let n = env_usize("MAIA_BENCH_CHUNKS", 2000);
    let words: Vec<String> = (0..n).map(|i| format!("c{i} ")).collect();
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    s.mock
        .push(mock::text_chunks(&refs, Duration::from_millis(1)));
    let before = s.mock.piece_times().len();
    let (id, _) = maia.prompt(&sid, "stream");
    let messages = maia.until_response(id);
    let times = s.mock.piece_times();
    let mut lat = Vec::with_capacity(n);
    let mut next = 0;
    for (at, m) in &messages {
        if let Some(text) = text_of(m)
            && next < n
            && text == words[next]
        {
            lat.push(ms(*at - times[before + 1 + next]));
            next += 1;
        }
    }
    assert_eq!(next, n, "every chunk forwarded once, in order");
    let lat = Stats::new(lat);
    table.check(
        format!("per-chunk forwarding latency ({n} chunks, 1 ms apart)"),
        format!(
            "p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            lat.pct(50.0),
            lat.pct(99.0),
            lat.max()
        ),
        "p99 < 0.5 ms",
        Some(lat.pct(99.0) < 0.5),
    );
    // Same stream with no gap: throughput.
    s.mock.push(mock::text_chunks(&refs, Duration::ZERO));
    let (id, sent) = maia.prompt(&sid, "burst");
    let messages = maia.until_response(id);
    let took = messages.last().unwrap().0 - sent;
    table.add(
        format!("{n} chunks back to back: prompt → response"),
        format!(
            "{:.1} ms ({:.1} µs per chunk)",
            ms(took),
            ms(took) * 1000.0 / n as f64
        ),
    );
    let turn_kb = proc_kb(maia.pid(), "VmHWM:");
    table.add(
        "peak RSS after the streaming turns (VmHWM)",
        format!("{:.1} MB", turn_kb as f64 / 1024.0),
    );

    // Cancel → cancelled response, mid-stream.
    let mut cancels = Vec::new();
    for _ in 0..20 {
        s.mock
            .push(mock::slow_text(100_000, Duration::from_millis(2)));
        let (id, _) = maia.prompt(&sid, "long");
        loop {
            let (_, m) = maia.next();
            if text_of(&m).is_some() {
                break;
            }
        }
        let sent = maia.cancel(&sid);
        let (at, resp) = maia.until_response(id).pop().unwrap();
        assert_eq!(resp["result"]["stopReason"], "cancelled", "{resp}");
        cancels.push(ms(at - sent));
    }
    let cancels = Stats::new(cancels);
    table.add(
        "`session/cancel` → `cancelled` response, mid-stream (20 turns)",
        format!(
            "p50 {:.3} ms, p90 {:.3} ms, max {:.3} ms",
            cancels.pct(50.0),
            cancels.pct(90.0),
            cancels.max()
        ),
    );

    // Sixteen sessions streaming at once: per-delta latency over all of
    // them, matched by each delta's unique text.
    let mut sids = Vec::new();
    for _ in 0..16 {
        sids.push(maia.new_session(&cwd).0);
    }
    let per = 200;
    let mut all_words = Vec::new();
    for k in 0..16 {
        let words: Vec<String> = (0..per).map(|i| format!("s{k}w{i} ")).collect();
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        s.mock
            .push(mock::text_chunks(&refs, Duration::from_millis(2)));
        all_words.extend(words);
    }
    let before = s.mock.piece_log().len();
    let mut ids = Vec::new();
    for sid in &sids {
        ids.push(maia.prompt(sid, "together").0);
    }
    let mut arrived: std::collections::HashMap<String, Instant> = Default::default();
    let mut open: std::collections::HashSet<u64> = ids.iter().copied().collect();
    while !open.is_empty() {
        let (at, m) = maia.next();
        if m.get("method").is_none()
            && let Some(id) = m["id"].as_u64()
        {
            open.remove(&id);
        } else if let Some(text) = text_of(&m) {
            arrived.insert(text.to_owned(), at);
        }
    }
    let log = s.mock.piece_log();
    let mut lat = Vec::new();
    for (sent, piece) in &log[before..] {
        let Some(word) = all_words
            .iter()
            .find(|w| piece.contains(&format!("\"{w}\"")))
        else {
            continue;
        };
        if let Some(at) = arrived.get(word) {
            lat.push(ms(*at - *sent));
        }
    }
    assert_eq!(lat.len(), 16 * per, "every delta forwarded once");
    let lat = Stats::new(lat);
    table.add(
        format!("16 sessions streaming at once ({per} deltas each, 2 ms apart): per-delta latency"),
        format!(
            "p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            lat.pct(50.0),
            lat.pct(99.0),
            lat.max()
        ),
    );
    let kb = proc_kb(maia.pid(), "VmHWM:");
    table.add(
        "peak RSS after 16 concurrent streams (VmHWM)",
        format!("{:.1} MB", kb as f64 / 1024.0),
    );
    maia.kill();
    drop(s.rt);
}

/// Prompt caching end to end: the marks MAIA puts on a request for an
/// Anthropic-family model, and the cached prompt tokens the proxy reports
/// (`prompt_tokens_details.cached_tokens`) as `/context` shows them.
fn bench_caching(table: &mut Table) {
    let s = setup();
    let cwd = s.cwd.path().canonicalize().unwrap();
    s.mock
        .set_model_info(json!({"data": [{"model_name": "mock-model",
        "litellm_params": {"model": "anthropic/claude-sonnet-4-5"},
        "model_info": {"max_input_tokens": 200000, "litellm_provider": "anthropic"}}]}));
    let (mut maia, _) = Maia::spawn(s.home.path());
    maia.initialize();
    let (sid, _) = maia.new_session(&cwd);
    s.mock.push(mock::text_reply("first"));
    let (id, _) = maia.prompt(&sid, "hello");
    maia.until_response(id);
    let first = s.mock.requests().pop().unwrap();
    // The second request repeats the first one's prefix: a provider that
    // caches reads it back (the mock reports it as cached tokens).
    let prefix = (first["messages"].to_string().len() + first["tools"].to_string().len()) / 4;
    let usage = json!({"prompt_tokens": prefix + 20, "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": prefix}});
    s.mock.push(mock::stream(vec![
        mock::sse_chunk(&mock::chunk(
            json!({"role": "assistant", "content": "second"}),
            None,
        )),
        mock::sse_chunk(&mock::chunk(json!({}), Some("stop"))),
        mock::sse_chunk(
            &json!({"id": "c", "object": "chat.completion.chunk", "created": 1,
            "model": "mock-model", "choices": [], "usage": usage}),
        ),
        mock::DONE.to_owned(),
    ]));
    let (id, _) = maia.prompt(&sid, "again");
    maia.until_response(id);
    let second = s.mock.requests().pop().unwrap();
    let marks = second["messages"].as_array().map_or(0, |m| {
        m.iter()
            .filter(|m| m.to_string().contains("cache_control"))
            .count()
    });
    let (id, _) = maia.prompt(&sid, "/context");
    let shown = maia
        .until_response(id)
        .iter()
        .filter_map(|(_, m)| text_of(m).map(str::to_owned))
        .collect::<String>();
    let cached = shown
        .lines()
        .find(|l| l.contains("cached prompt tokens"))
        .unwrap_or("(not shown)")
        .trim_start_matches("- ")
        .to_owned();
    table.add(
        "prompt caching (Anthropic-family model): marks on the 2nd request; `/context`",
        format!(
            "{marks} messages marked; {cached} (of {} prompt tokens)",
            prefix + 20
        ),
    );
    maia.kill();
    drop(s.rt);
}

/// A tree of `count` small source files, 100 per folder; every 100th file
/// holds a `needle_<n>` line.
fn make_tree(root: &Path, count: usize) {
    let body: String = (0..12)
        .map(|i| format!("fn function_{i}(value: usize) -> usize {{ value * {i} + 1 }}\n"))
        .collect();
    for i in 0..count {
        let dir = root.join(format!("d{}/e{}", i / 1000, (i / 100) % 10));
        if i.is_multiple_of(100) {
            std::fs::create_dir_all(&dir).unwrap();
        }
        let ext = ["rs", "txt", "md", "json"][i % 4];
        let mut text = body.clone();
        if i % 100 == 7 {
            text.push_str(&format!("// needle_{i} here\n"));
        }
        std::fs::write(dir.join(format!("f{i}.{ext}")), text).unwrap();
    }
}

fn best_of(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..runs {
        let started = Instant::now();
        f();
        best = best.min(ms(started.elapsed()));
    }
    best
}

fn run_tool(rt: &tokio::runtime::Runtime, root: &Path, name: &str, args: Value) -> String {
    rt.block_on(async {
        let ctx = maia_tools::ToolContext::local(root);
        let input = maia_tools::ToolInput::parse(name, &args.to_string()).unwrap();
        let prepared = maia_tools::prepare(input, &ctx).await.unwrap();
        let out = maia_tools::execute(prepared, &ctx).await;
        assert!(!out.is_error, "{}", out.content);
        out.content
    })
}

fn rg(args: &[&str], root: &Path) -> Option<String> {
    let out = Command::new("rg").args(args).arg(root).output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn bench_search(table: &mut Table) {
    let count = env_usize("MAIA_BENCH_FILES", 100_000);
    let dir = tempfile::tempdir().unwrap();
    let root: PathBuf = dir.path().canonicalize().unwrap();
    let started = Instant::now();
    make_tree(&root, count);
    eprintln!(
        "  (tree of {count} files written in {:.1} s)",
        started.elapsed().as_secs_f64()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let rg_version = Command::new("rg").arg("--version").output().ok().map(|o| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .to_owned()
    });

    let cases: [(&str, &str, Value, Vec<&str>); 3] = [
        (
            "Grep `needle_[0-9]+`, files_with_matches",
            "Grep",
            json!({"pattern": "needle_[0-9]+"}),
            vec!["-l", "needle_[0-9]+"],
        ),
        (
            "Grep `needle_[0-9]+`, content",
            "Grep",
            json!({"pattern": "needle_[0-9]+", "output_mode": "content"}),
            vec!["-n", "needle_[0-9]+"],
        ),
        (
            "Glob `**/*.rs`",
            "Glob",
            json!({"pattern": "**/*.rs"}),
            vec!["--files", "-g", "*.rs"],
        ),
    ];
    for (label, tool, args, rg_args) in cases {
        // Warm the page cache once.
        let out = run_tool(&rt, &root, tool, args.clone());
        assert!(!out.starts_with("No matches"), "{label}: {out}");
        let maia = best_of(5, || {
            run_tool(&rt, &root, tool, args.clone());
        });
        let measure = format!("{label}, {count} files (best of 5)");
        match &rg_version {
            Some(version) => {
                rg(&rg_args, &root);
                let rg_ms = best_of(5, || {
                    rg(&rg_args, &root).unwrap();
                });
                let ratio = maia / rg_ms;
                let is_grep = tool == "Grep";
                table.check(
                    measure,
                    format!("MAIA {maia:.1} ms, {version} {rg_ms:.1} ms: {ratio:.2}×"),
                    if is_grep { "≤ 1.2× ripgrep" } else { "" },
                    is_grep.then_some(ratio <= 1.2),
                );
            }
            None => table.add(
                measure,
                format!("MAIA {maia:.1} ms (ripgrep not installed: no ratio)"),
            ),
        }
    }
}

fn bench_store(table: &mut Table) {
    let m = session_load::measure();
    table.check(
        "load a 10,000-message session (best of 5)",
        format!(
            "{:.1} ms ({:.1} MB journal; appending took {:.1} ms)",
            m.load_ms,
            m.size as f64 / 1e6,
            m.append_ms
        ),
        "< 100 ms",
        Some(m.load_ms < 100.0),
    );

    // Compaction planning on a 200k-token conversation: the size estimate
    // (`context_tokens` is crate-private; this is the same computation:
    // JSON length of every message / 4) after loading the journal.
    let dir = tempfile::tempdir().unwrap();
    let header = maia_core::store::new_header("bench-200k", dir.path());
    let mut journal = maia_core::store::Journal::create(dir.path(), "big", &header, &[]).unwrap();
    let line = "Some explanation of what the code does, with a path src/lib.rs:42. ";
    let mut i = 0u32;
    let mut chars = 0usize;
    while chars < 800_000 {
        let message = if i.is_multiple_of(2) {
            ChatMessage::user(format!("Question {i}: {}", line.repeat(3)))
        } else {
            ChatMessage::assistant(line.repeat(10))
        };
        chars += serde_json::to_string(&message).unwrap().len();
        journal
            .append(&maia_core::store::Record::Message { message })
            .unwrap();
        i += 1;
    }
    let mut history = Vec::new();
    let load = best_of(5, || {
        history = maia_core::store::load(journal.path()).unwrap().history();
    });
    let tools = serde_json::to_string(&maia_tools::definitions())
        .unwrap()
        .len();
    let mut tokens = 0;
    let estimate = best_of(5, || {
        let chars: usize = history
            .iter()
            .map(|m| serde_json::to_string(m).map(|s| s.len()).unwrap_or(0))
            .sum();
        tokens = (chars + tools).div_ceil(4);
    });
    table.add(
        format!(
            "200k-token conversation ({} messages): load / token estimate (best of 5)",
            history.len()
        ),
        format!("{load:.1} ms / {estimate:.2} ms ({tokens} tokens estimated)"),
    );
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument picks parts.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wants = |part: &str| filter.is_empty() || filter.iter().any(|f| part.contains(f.as_str()));
    let mut table = Table::default();
    if wants("protocol") {
        eprintln!("protocol…");
        bench_protocol(&mut table);
    }
    if wants("caching") {
        eprintln!("caching…");
        bench_caching(&mut table);
    }
    if wants("store") {
        eprintln!("store…");
        bench_store(&mut table);
    }
    if wants("search") {
        eprintln!("search…");
        bench_search(&mut table);
    }
    if wants("lsp") {
        eprintln!("lsp…");
        lsp::bench_lsp(&mut table);
    }
    table.print();
}
