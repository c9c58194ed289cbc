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

#[path = "perf/checkpoint.rs"]
mod checkpoint;
#[path = "perf/harness.rs"]
mod harness;
#[path = "perf/lsp.rs"]
mod lsp;
#[path = "perf/remote.rs"]
mod remote;
#[path = "perf/remote_clients.rs"]
mod remote_clients;
#[path = "perf/search.rs"]
mod search;
#[path = "../../maia-core/benches/session_load.rs"]
mod session_load;
#[path = "perf/stats.rs"]
mod stats;
#[path = "perf/steer.rs"]
mod steer;

use std::time::{Duration, Instant};

use harness::{Maia, Table, env_usize, proc_kb, text_of};
use maia_llm::ChatMessage;
use maia_test_support::{self as mock, MockLlm};
use serde_json::json;
use stats::{Stats, best_of, ms};

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
        search::bench_search(&mut table);
    }
    if wants("steer") {
        eprintln!("steer…");
        steer::bench_steer(&mut table);
    }
    if wants("checkpoint") {
        eprintln!("checkpoint…");
        checkpoint::bench_checkpoint(&mut table);
    }
    if wants("remote") {
        eprintln!("remote…");
        remote::bench_remote(&mut table);
        remote_clients::bench_remote_clients(&mut table);
    }
    if wants("lsp") {
        eprintln!("lsp…");
        lsp::bench_lsp(&mut table);
    }
    table.print();
}
