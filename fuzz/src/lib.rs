//! The bodies of MAIA's fuzz targets, free of any fuzzing runtime so that
//! the normal test suite can replay the committed corpus through exactly
//! the same code (`protocol-tests/fuzz_replay.rs` includes this file).
//!
//! Each function must never panic, whatever the bytes; the assertions
//! inside are the properties the parsers promise.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use futures_util::FutureExt;
use futures_util::StreamExt;
use maia_core::permission::{Broker, Decision, Family, Rule, RuleSet};
use serde_json::{Value, json};

/// The body of one fuzz target.
pub type Target = fn(&[u8]);

/// The fuzz targets, by name (the folder names under `fuzz/corpus/`).
pub const TARGETS: &[(&str, Target)] = &[
    ("rpc_framing", rpc_framing),
    ("sse_decoder", sse_decoder),
    ("permission_rules", permission_rules),
    ("file_refs", file_refs),
];

/// JSON-RPC framing and classification: `data` is read as the server's
/// stdin with a small line cap, every frame classified; oversized lines
/// have their id sniffed from their prefix.
pub fn rpc_framing(data: &[u8]) {
    let max = 64 + data.first().map_or(0, |b| usize::from(*b));
    let capacity = 1 + data.get(1).map_or(0, |b| usize::from(*b % 32));
    let mut reader = tokio::io::BufReader::with_capacity(capacity, Cursor::new(data));
    let mut frames = 0;
    loop {
        let frame = maia_rpc::framing::read_frame(&mut reader, max)
            .now_or_never()
            .expect("an in-memory reader is always ready")
            .expect("an in-memory reader does not fail");
        frames += 1;
        assert!(frames <= data.len() + 1, "more frames than bytes");
        match frame {
            maia_rpc::framing::Frame::Eof => break,
            maia_rpc::framing::Frame::TooLong { prefix } => {
                assert!(prefix.len() <= 4096);
                let id = maia_rpc::message::sniff_id(&prefix);
                assert!(matches!(
                    id,
                    Value::Null | Value::Number(_) | Value::String(_)
                ));
            }
            maia_rpc::framing::Frame::Line(line) => {
                assert!(line.len() <= max);
                assert!(!line.contains(&b'\n'));
                classify(&line);
            }
        }
    }
    classify(data);
    let _ = maia_rpc::message::sniff_id(data);
}

fn classify(line: &[u8]) {
    use maia_rpc::message::Classified;
    match maia_rpc::message::classify(line) {
        Ok(Classified::Request { id, params, .. }) => {
            assert!(matches!(
                id,
                Value::Null | Value::Number(_) | Value::String(_)
            ));
            assert!(matches!(
                params,
                Value::Null | Value::Object(_) | Value::Array(_)
            ));
        }
        Ok(Classified::Notification { .. } | Classified::Response { .. }) => {}
        Err((id, error)) => {
            assert!(matches!(
                id,
                Value::Null | Value::Number(_) | Value::String(_)
            ));
            assert!(!error.message.contains('\n'));
            assert!(error.code < 0);
        }
    }
}

/// The SSE decoder and the chunk assembler: `data` is the HTTP body, cut
/// into network chunks at positions taken from its first byte.
pub fn sse_decoder(data: &[u8]) {
    let step = 1 + data.first().map_or(0, |b| usize::from(*b % 64));
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        data.chunks(step).map(|c| Ok(c.to_vec())).collect();
    let events: Vec<_> = maia_llm::sse_events(futures_util::stream::iter(chunks))
        .collect::<Vec<_>>()
        .now_or_never()
        .expect("an in-memory stream is always ready");
    let mut assembler = maia_llm::Assembler::new();
    let mut saw_done = false;
    for event in events {
        match event {
            Ok(maia_llm::SseEvent::Data(payload)) => {
                assert!(!payload.is_empty());
                if assembler.push(&payload).is_err() {
                    return;
                }
            }
            Ok(maia_llm::SseEvent::Done) => {
                saw_done = true;
                break;
            }
            Ok(maia_llm::SseEvent::Error(_)) | Err(_) => return,
        }
    }
    if let Ok(completion) = assembler.finish(saw_done) {
        for call in completion.tool_calls {
            assert!(!call.name.is_empty() && !call.id.is_empty());
        }
    }
}

/// A project folder that does not exist, so rules never see a symlink.
fn fuzz_cwd() -> &'static Path {
    Path::new("/nonexistent-maia-fuzz/project")
}

/// The permission rules and the shell splitter: the first line of `data`
/// is parsed as a rule, the rest is a command and a file path. Properties:
/// a `Bash` deny rule denies every command, no rule asks, an allow rule
/// `Bash(echo *)` never allows a command that does not start with `echo`
/// (after blank and comment lines),
/// and `Read(src/**)` never allows a path outside `<cwd>/src`.
pub fn permission_rules(data: &[u8]) {
    // libFuzzer's panic hook aborts on every panic, also on the ones the
    // checker catches on purpose (brush-parser panics on some input and the
    // checker reads that as "does not parse"). The hook set here stays
    // silent for panics raised inside brush-parser and hands every other
    // one (the properties below) to the hook it replaced.
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_parser = info
                .location()
                .is_some_and(|l| l.file().contains("brush-parser"));
            if !in_parser {
                previous(info);
            }
        }));
    });
    let text = String::from_utf8_lossy(data);
    let mut lines = text.splitn(2, '\n');
    let rule_text = lines.next().unwrap_or("");
    let rest = lines.next().unwrap_or("");
    let cwd = fuzz_cwd();
    let command = json!({ "command": rest });
    let file = json!({ "file_path": rest.lines().next().unwrap_or("") });

    if let Ok(rule) = Rule::parse(rule_text) {
        let shown = rule.to_string();
        let again = Rule::parse(&shown).expect("a shown rule parses again");
        assert_eq!(again.to_string(), shown);
        let mut set = RuleSet::default();
        set.add(Family::Allow, rule.clone());
        let broker = Broker::new(vec![set]);
        for (tool, input) in [("Bash", &command), ("Read", &file), ("Glob", &file)] {
            let _ = broker.decide_value(tool, input, cwd);
        }
        let _ = rule.matches_value("Bash", &command, cwd, true);
        let _ = rule.matches_value("Edit", &file, cwd, false);
    }

    let deny_all = broker_with(Family::Deny, &["Bash"]);
    // A catastrophic command is refused before any rule.
    assert!(matches!(
        deny_all.decide_value("Bash", &command, cwd),
        Decision::Deny(_) | Decision::Refuse(_)
    ));
    let none = Broker::new(Vec::new());
    assert!(matches!(
        none.decide_value("Bash", &command, cwd),
        Decision::Ask | Decision::Refuse(_)
    ));

    let echo = broker_with(Family::Allow, &["Bash(echo *)", "Read(src/**)"]);
    if echo.decide_value("Bash", &command, cwd) == Decision::Allow {
        // The first word of the first line that is not blank or a comment.
        let first = rest
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            // `echo;` is `echo` then `;`: the word ends at a separator too.
            .and_then(|l| {
                l.split(|c: char| c.is_whitespace() || ";&|()".contains(c))
                    .find(|w| !w.is_empty())
            })
            .unwrap_or("");
        // Wrappers that only adjust how a command runs need no rule.
        const WRAPPERS: &[&str] = &[
            "nohup", "nice", "timeout", "time", "command", "builtin", "exec", "stdbuf", "setsid",
            "ionice", "chrt", "taskset", "unbuffer", "env", "busybox",
        ];
        assert!(
            first == "echo" || WRAPPERS.contains(&first),
            "allowed by Bash(echo *): {rest:?}"
        );
    }
    if echo.decide_value("Read", &file, cwd) == Decision::Allow {
        let raw = file["file_path"].as_str().unwrap_or("");
        let resolved = maia_tools::path::resolve(cwd, raw);
        assert!(
            maia_tools::path::is_within(&cwd.join("src"), &resolved),
            "allowed by Read(src/**): {raw:?} → {}",
            resolved.display()
        );
    }
    let _ = maia_core::permission::has_shell_syntax(rest);
}

fn broker_with(family: Family, rules: &[&str]) -> Broker {
    let mut set = RuleSet::default();
    for rule in rules {
        set.add(family, Rule::parse(rule).expect("a valid rule"));
    }
    Broker::new(vec![set])
}

/// A project with a few files for the `@file` parser.
fn refs_cwd() -> &'static Path {
    static CWD: OnceLock<PathBuf> = OnceLock::new();
    CWD.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("maia-fuzz-refs-{}", std::process::id()));
        for (path, text) in [
            ("a.ts", "a"),
            ("src/lib.rs", "lib"),
            ("my folder/a b.txt", "ab"),
            ("docs/x.md", "x"),
        ] {
            let path = dir.join(path);
            if let Some(parent) = path.parent() {
                let _ = std::fs::create_dir_all(parent);
            }
            let _ = std::fs::write(path, text);
        }
        dir
    })
}

/// The `@file` parser and `!command` recogniser: spans lie in the text on
/// character boundaries, in order, and every reference is absolute.
pub fn file_refs(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let cwd = refs_cwd();
    let home = cwd.join("docs");
    let scan = maia_core::prompt_syntax::scan_file_refs(&text, cwd, Some(&home));
    let mut last = 0;
    for r in &scan.refs {
        assert!(r.span.start < r.span.end && r.span.end <= text.len());
        assert!(text.is_char_boundary(r.span.start) && text.is_char_boundary(r.span.end));
        assert_eq!(&text[r.span.start..r.span.start + 1], "@");
        assert!(r.span.start >= last, "references out of order");
        last = r.span.end;
        assert!(r.path.is_absolute());
    }
    for w in &scan.warnings {
        assert!(w.span.end <= text.len());
        assert!(text.is_char_boundary(w.span.start) && text.is_char_boundary(w.span.end));
        assert_eq!(&text[w.span.clone()], w.typed);
    }
    let parts = scan.prompt_parts(&text);
    assert_eq!(parts.len(), scan.refs.len() + 1);
    let _ = maia_core::prompt_syntax::scan_file_refs(&text, cwd, None);
    let _ = maia_core::prompt_syntax::parse_bang(&text);
}
