//! Tidy tests in the style of rust-analyzer's: they read the sources and
//! hold the shape of the code in place.
//!
//! - `maia-core` has no module cycle: the `crate::` references between
//!   its top-level modules (a folder is one module; doc links count too)
//!   form a graph without cycles.
//! - No non-test source file under `server/` has more than 600 lines
//!   before its `#[cfg(test)]` tail (comments and blank lines count).
//! - Every source file starts with a `//!` header.
//! - `docs/architecture.md` names every module file of every crate, and
//!   every file, item path, type and function it names in backticks
//!   exists (a claim the code contradicts is a bug).
//! - No string literal equal to a tool's name outside the tools
//!   (`maia-core/src/tools/` and `maia-tools`): what a tool is or may do is
//!   asked of the tool, never decided by its name (exceptions listed, with
//!   their reasons).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_CODE_LINES: usize = 600;

fn repo_root() -> PathBuf {
    std::fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .expect("the repository root")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source of each crate's `src/` (and `benches/`) under `server/`.
fn server_sources() -> Vec<PathBuf> {
    let mut files = Vec::new();
    let server = repo_root().join("server");
    let mut crates: Vec<_> = std::fs::read_dir(&server)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("Cargo.toml").exists())
        .collect();
    crates.sort();
    for krate in crates {
        rust_files(&krate.join("src"), &mut files);
        rust_files(&krate.join("benches"), &mut files);
    }
    files
}

/// The file's text before its test module.
fn non_test_part(text: &str) -> &str {
    match text.find("\n#[cfg(test)]") {
        Some(at) => &text[..at],
        None => text,
    }
}

/// Lines before the test module, comments and blank lines included:
/// what a reader has to read.
fn code_lines(text: &str) -> usize {
    non_test_part(text).lines().count()
}

#[test]
fn no_source_file_is_over_600_lines_of_code() {
    let mut over = Vec::new();
    for file in server_sources() {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines = code_lines(&text);
        if lines > MAX_CODE_LINES && !file.ends_with("tests.rs") && !file.ends_with("attacks.rs") {
            over.push(format!("{} ({lines})", file.display()));
        }
    }
    assert!(
        over.is_empty(),
        "files over {MAX_CODE_LINES} lines of code; split them along their seams: {over:#?}"
    );
}

#[test]
fn every_source_file_has_a_module_header() {
    let missing: Vec<_> = server_sources()
        .into_iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            !text.trim_start().starts_with("//!")
        })
        .collect();
    assert!(missing.is_empty(), "no `//!` header: {missing:#?}");
}

/// The top-level module a file of `maia-core/src` belongs to
/// (`permission/gate.rs` → `permission`); `None` for `lib.rs`.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).ok()?.with_extension("");
    let first = relative
        .components()
        .next()?
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    (first != "lib").then_some(first)
}

/// `crate::` references between the top-level modules of `maia-core`, in
/// code and in doc links alike (a link names what a module leans on).
fn core_edges() -> BTreeMap<String, BTreeSet<String>> {
    let src = repo_root().join("server/maia-core/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| module_of(&src, f)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let name_chars = |c: &char| c.is_ascii_alphanumeric() || *c == '_';
    for file in &files {
        let Some(from) = module_of(&src, file) else {
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        let mut add = |name: &str| {
            if name != from && modules.contains(name) {
                edges
                    .entry(from.clone())
                    .or_default()
                    .insert(name.to_owned());
            }
        };
        for line in non_test_part(&text).lines() {
            for (at, _) in line.match_indices("crate::") {
                let rest = &line[at + "crate::".len()..];
                let name: String = rest.chars().take_while(name_chars).collect();
                add(&name);
                // `use crate::{a, b::c}`.
                if let Some(group) = rest.strip_prefix('{') {
                    let group = group.split('}').next().unwrap_or_default();
                    for item in group.split(',') {
                        let name: String = item.trim().chars().take_while(name_chars).collect();
                        add(&name);
                    }
                }
            }
        }
    }
    edges
}

/// A cycle in `edges`, if there is one.
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[at..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, stack, done) {
                return Some(cycle);
            }
        }
        stack.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    for node in edges.keys() {
        if let Some(cycle) = visit(node, edges, &mut Vec::new(), &mut done) {
            return Some(cycle);
        }
    }
    None
}

#[test]
fn maia_core_has_no_module_cycle() {
    let edges = core_edges();
    assert!(!edges.is_empty(), "the edges were read");
    if let Some(cycle) = find_cycle(&edges) {
        panic!(
            "a `crate::` edge goes back up: {}. Move the shared piece down (or pass it in) instead.",
            cycle.join(" → ")
        );
    }
}

#[test]
fn the_cycle_finder_finds_cycles() {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.entry("a".into()).or_default().insert("b".into());
    edges.entry("b".into()).or_default().insert("c".into());
    assert_eq!(find_cycle(&edges), None);
    edges.entry("c".into()).or_default().insert("a".into());
    assert_eq!(
        find_cycle(&edges),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}

#[test]
fn the_architecture_doc_names_every_module_file() {
    let doc = std::fs::read_to_string(repo_root().join("docs/architecture.md")).unwrap();
    let server = repo_root().join("server");
    let missing: Vec<_> = server_sources()
        .into_iter()
        .filter(|f| f.components().any(|c| c.as_os_str() == "src"))
        .filter_map(|f| {
            let relative = f.strip_prefix(&server).ok()?.to_string_lossy().into_owned();
            // Named with its crate: `maia-core/src/tools/router.rs`.
            let named = doc.contains(&format!("`{relative}`"));
            (!named).then_some(relative)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md's code map does not name: {missing:#?}"
    );
}

/// The names of the tools every session may offer: those a custom tool may
/// not take, and the language servers' queries.
fn tool_names() -> Vec<String> {
    let mut names = maia_core::reserved_tool_names();
    names.extend(
        ["Diagnostics", "References", "Definition", "Symbols"]
            .into_iter()
            .map(str::to_owned),
    );
    names
}

/// Where a literal tool name may stand outside the tools, and why: the
/// file (from `server/`), the name, the reason.
const NAMED_ON_PURPOSE: &[(&str, &str, &str)] = &[
    (
        "maia-core/src/session_tools.rs",
        "TodoWrite",
        "the definition the tool offers (tools/session.rs)",
    ),
    (
        "maia-core/src/session_tools.rs",
        "CurrentModel",
        "the definition the tool offers (tools/session.rs)",
    ),
    (
        "maia-core/src/session_tools.rs",
        "AskUser",
        "the definition the tool offers (tools/session.rs)",
    ),
    (
        "maia-core/src/skills.rs",
        "Skill",
        "the definition the tool offers (tools/skill.rs)",
    ),
    (
        "maia-core/src/plan_mode.rs",
        "ExitPlanMode",
        "the definition the tool offers (tools/plan.rs)",
    ),
    (
        "maia-core/src/permission/gate.rs",
        "Write",
        "the protected paths are rules of the permission language, `Write(path)`",
    ),
];

/// The string literals of `text` equal to one of `names`, as
/// `(line, name)`, outside comments.
fn named_literals(text: &str, names: &[String]) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        for name in names {
            let quoted = format!("\"{name}\"");
            let mut from = 0;
            while let Some(at) = code[from..].find(&quoted) {
                let at = from + at;
                // Not an escaped quote inside a longer string.
                if !code[..at].ends_with('\\') {
                    found.push((n + 1, name.clone()));
                }
                from = at + quoted.len();
            }
        }
    }
    found
}

#[test]
fn no_tool_is_named_outside_the_tools() {
    let names = tool_names();
    assert!(names.iter().any(|n| n == "Task"), "{names:?}");
    let server = repo_root().join("server");
    let mut named = Vec::new();
    for file in server_sources() {
        let rel = file
            .strip_prefix(&server)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        // Tests and benches play the model, which calls tools by name.
        if !rel.contains("/src/")
            || rel.starts_with("maia-core/src/tools/")
            || rel.starts_with("maia-tools/")
            || file.ends_with("tests.rs")
            || file.ends_with("attacks.rs")
        {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (line, name) in named_literals(non_test_part(&text), &names) {
            let allowed = NAMED_ON_PURPOSE
                .iter()
                .any(|(f, n, _)| *f == rel && *n == name);
            if !allowed {
                named.push(format!("{rel}:{line}: \"{name}\""));
            }
        }
    }
    assert!(
        named.is_empty(),
        "tool names outside the tools (ask the tool, e.g. `Tool::effect`):\n{}",
        named.join("\n")
    );
}

#[test]
fn named_literals_skips_comments_and_longer_strings() {
    let names = vec!["Read".to_owned()];
    let text = "/// \"Read\" in a doc\nlet a = \"Read\";\nlet b = \"say \\\"Read\\\" now\";\n";
    assert_eq!(named_literals(text, &names), [(2, "Read".to_owned())]);
}

/// The identifiers of a text (words of letters, digits and `_`).
fn identifiers(text: &str) -> BTreeSet<&str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| {
            w.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        })
        .collect()
}

/// What a backticked span of docs/architecture.md claims exists: a source
/// file (`hub/lineup.rs`), an item path (`Event::FilesChanged`,
/// `SessionHandle::cancel_call()`), a type (`StateCell`) or a function
/// (`run_batch`, `display_text()`); anything else (JSON, methods of the
/// wire, commands) claims nothing here.
enum Claim<'a> {
    File(&'a str),
    Path(Vec<&'a str>),
    Word(&'a str),
}

fn claim(span: &str) -> Option<Claim<'_>> {
    let ident = |s: &str| {
        !s.is_empty()
            && s.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if span.ends_with(".rs")
        && span
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c))
    {
        return Some(Claim::File(span));
    }
    let bare = span.strip_suffix("()").unwrap_or(span);
    if bare.contains("::") {
        let segments: Vec<&str> = bare.split("::").collect();
        return segments
            .iter()
            .all(|s| ident(s))
            .then_some(Claim::Path(segments));
    }
    let camel = bare.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && bare.chars().skip(1).any(|c| c.is_ascii_uppercase())
        && bare.chars().any(|c| c.is_ascii_lowercase());
    let function = bare.contains('_')
        && bare
            .chars()
            .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit());
    ((camel || function || span.ends_with("()")) && ident(bare)).then_some(Claim::Word(bare))
}

#[test]
fn every_item_docs_architecture_names_exists() {
    let root = repo_root();
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let mut files = Vec::new();
    rust_files(&root.join("server"), &mut files);
    rust_files(&root.join("protocol-tests"), &mut files);
    let texts: Vec<(String, String)> = files
        .iter()
        .map(|f| {
            let relative = f
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (relative, std::fs::read_to_string(f).unwrap_or_default())
        })
        .collect();
    let words: Vec<BTreeSet<&str>> = texts.iter().map(|(_, t)| identifiers(t)).collect();
    let mut false_claims = Vec::new();
    for span in doc.split('`').skip(1).step_by(2) {
        let holds = match claim(span) {
            None => continue,
            Some(Claim::File(path)) => texts.iter().any(|(relative, _)| {
                relative == path
                    || relative.ends_with(&format!("/{path}"))
                    || relative.strip_prefix("server/") == Some(path)
            }),
            // Every part named in one file (a type and its method or
            // variant are written together where they are defined or used).
            Some(Claim::Path(segments)) => {
                words.iter().any(|w| segments.iter().all(|s| w.contains(s)))
            }
            Some(Claim::Word(word)) => words.iter().any(|w| w.contains(word)),
        };
        if !holds {
            false_claims.push(span.to_owned());
        }
    }
    false_claims.sort();
    false_claims.dedup();
    assert!(
        false_claims.is_empty(),
        "docs/architecture.md names what the code does not have: {false_claims:#?}"
    );
}

#[test]
fn the_claim_reader_tells_items_from_the_rest() {
    assert!(matches!(claim("hub/lineup.rs"), Some(Claim::File(_))));
    assert!(matches!(claim("Event::FilesChanged"), Some(Claim::Path(p)) if p.len() == 2));
    assert!(matches!(
        claim("SessionHandle::cancel_call()"),
        Some(Claim::Path(_))
    ));
    assert!(matches!(claim("StateCell"), Some(Claim::Word("StateCell"))));
    assert!(matches!(claim("run_batch"), Some(Claim::Word("run_batch"))));
    assert!(claim("session/prompt").is_none());
    assert!(claim("_meta.maia.seq").is_none());
    assert!(claim("{sessionId}").is_none());
    assert!(claim("Cargo").is_none());
}
