//! Journals written by the released format still load, exactly: every
//! file under `fixtures/journal-v1/` (real journals written by MAIA's
//! binary, one for each kind of record: messages, titles, usage, tool
//! calls with text and diffs, plans, checkpoints, reverts, rewinds,
//! subagents completed and cancelled, thoughts, images, options, a
//! compaction with its carried costs and a `/clear`) loads with no line
//! skipped, and each record written back is the line it was read from.
//! A change to the record types that changes the file format fails here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use maia_core::store;
use serde_json::Value;

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/journal-v1");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    out.sort();
    out
}

#[test]
fn every_record_of_the_released_format_loads_and_writes_back_the_same() {
    let files = fixtures();
    assert!(files.len() >= 9, "{files:?}");
    let mut kinds = std::collections::BTreeSet::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let loaded = store::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(loaded.header.version, store::FORMAT_VERSION);
        assert_eq!(
            loaded.records.len(),
            lines.len() - 1,
            "{}: a line was not read",
            path.display()
        );
        for (record, line) in loaded.records.iter().zip(&lines[1..]) {
            let written = serde_json::to_value(record).unwrap();
            let read: Value = serde_json::from_str(line).unwrap();
            assert_eq!(written, read, "{}", path.display());
            kinds.insert(read["type"].as_str().unwrap().to_owned());
        }
    }
    let expected = [
        "checkpoint",
        "clear",
        "compaction",
        "costs",
        "message",
        "option",
        "plan",
        "reverted",
        "rewind",
        "subagent",
        "thought",
        "title",
        "tool_call",
        "usage",
        "user_display",
        "user_image",
    ];
    assert_eq!(
        kinds.iter().map(String::as_str).collect::<Vec<_>>(),
        expected,
        "the fixtures cover every kind of record"
    );
}
