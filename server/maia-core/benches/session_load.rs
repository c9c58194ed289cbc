//! Loading a saved session of 10,000 messages (run: `cargo bench -p maia-core`;
//! also part of the suite `cargo bench -p maia-server --bench perf`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::Instant;

use maia_core::store::{self, Journal, Record};
use maia_llm::{ChatMessage, ToolCall};

/// What [`measure`] found.
pub struct Measured {
    /// Time to append the 10,000 messages, in ms.
    pub append_ms: f64,
    /// Size of the journal, in bytes.
    pub size: u64,
    /// Best of 5 loads, in ms.
    pub load_ms: f64,
}

/// Writes a 10,000-message journal and loads it 5 times.
pub fn measure() -> Measured {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let header = store::new_header("bench-thread", cwd);
    let mut journal = Journal::create(cwd, "bench", &header, &[]).unwrap();
    let started = Instant::now();
    for i in 0..10_000u32 {
        let message = match i % 4 {
            0 => ChatMessage::user(format!("Question {i}: please look at src/module_{i}.rs")),
            1 => ChatMessage::Assistant {
                content: Some(format!("Reading module {i}.")),
                tool_calls: vec![ToolCall {
                    id: format!("call_{i}"),
                    name: "Read".into(),
                    arguments: format!("{{\"file_path\":\"src/module_{i}.rs\"}}"),
                }],
            },
            2 => ChatMessage::tool(
                format!("call_{}", i - 1),
                "     1\tfn main() {}\n".repeat(20),
            ),
            _ => ChatMessage::assistant(format!("Module {i} has a main function. ").repeat(5)),
        };
        journal.append(&Record::Message { message }).unwrap();
    }
    let append = started.elapsed();
    let size = std::fs::metadata(journal.path()).unwrap().len();
    let mut best = f64::MAX;
    for _ in 0..5 {
        let started = Instant::now();
        let loaded = store::load(journal.path()).unwrap();
        assert_eq!(loaded.history().len(), 10_000);
        best = best.min(started.elapsed().as_secs_f64() * 1000.0);
    }
    Measured {
        append_ms: append.as_secs_f64() * 1000.0,
        size,
        load_ms: best,
    }
}

#[allow(dead_code)] // unused where this file is included as a module
fn main() {
    let m = measure();
    println!("| measure | value |");
    println!("| --- | --- |");
    println!(
        "| append 10,000 messages | {:.1} ms ({:.1} µs each) |",
        m.append_ms,
        m.append_ms * 1000.0 / 10_000.0
    );
    println!("| journal size | {:.1} MB |", m.size as f64 / 1e6);
    println!("| load 10,000 messages (best of 5) | {:.1} ms |", m.load_ms);
}
