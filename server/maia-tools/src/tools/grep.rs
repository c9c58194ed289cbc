//! The Grep tool: regular-expression search over files.
//!
//! Uses the `regex` crate (linear time), walks in parallel with `ignore`
//! and runs on tokio's blocking pool.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::SystemTime;

use ignore::WalkState;
use regex::{Regex, RegexBuilder};
use tokio_util::sync::CancellationToken;

use crate::context::{ToolContext, ToolOutput};
use crate::error::ToolError;
use crate::input::{GrepInput, GrepMode};
use crate::path::resolve;
use crate::tools::glob::Matcher;
use crate::tools::{Screen, existing_root, is_file_entry, mtime, walker};
use crate::truncate::truncate_end;

/// Most files listed in files_with_matches mode.
pub const MAX_FILES: usize = 100;
/// Most lines shown in content mode.
pub const MAX_CONTENT_LINES: usize = 500;
/// Longer matching lines are cut.
pub const MAX_LINE_CHARS: usize = 500;
/// Files with a NUL byte in their first bytes are binary.
const BINARY_PROBE_BYTES: usize = 8 * 1024;
/// Stop collecting after this many matching lines (memory bound).
const MAX_COLLECTED_LINES: usize = 20_000;
/// Larger files are skipped.
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// A validated search.
#[derive(Debug, Clone)]
pub(crate) struct Query {
    regex: Regex,
    include: Option<Matcher>,
    mode: GrepMode,
    /// The thread's kept outputs ([`crate::kept`]): files there of any
    /// size are searched, line by line.
    kept: Option<std::path::PathBuf>,
}

impl Query {
    pub(crate) fn new(input: &GrepInput) -> Result<Self, ToolError> {
        let regex = RegexBuilder::new(&input.pattern)
            .case_insensitive(input.case_insensitive)
            .multi_line(true)
            .build()
            .map_err(|e| ToolError::InvalidPattern {
                what: "regular expression",
                pattern: input.pattern.clone(),
                message: e.to_string(),
            })?;
        let include = input.include.as_deref().map(Matcher::new).transpose()?;
        Ok(Self {
            regex,
            include,
            mode: input.output_mode,
            kept: None,
        })
    }
}

struct FileHit {
    path: PathBuf,
    mtime: SystemTime,
    lines: Vec<(usize, String)>,
}

struct Collected {
    hits: Vec<FileHit>,
    incomplete: bool,
}

pub(crate) async fn execute(input: &GrepInput, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let root = resolve(&ctx.cwd, input.path.as_deref().unwrap_or("."));
    existing_root(&root).await?;
    let mut query = Query::new(input)?;
    query.kept = ctx.outputs.clone();
    let cancel = ctx.cancel.clone();
    let screen = Screen::new(&root, ctx.read_guard.clone());
    let (collected, screen) = tokio::task::spawn_blocking(move || {
        let found = search(&root, &query, &screen, &cancel);
        found.map(|c| (c, screen))
    })
    .await
    .map_err(|e| ToolError::Other(format!("The search failed: {e}")))??;
    let mut out = match input.output_mode {
        GrepMode::FilesWithMatches => format_files(collected),
        GrepMode::Content => format_content(collected),
    };
    if let Some(note) = screen.note() {
        out.content = format!("{}\n{note}", out.content);
    }
    Ok(out)
}

fn search(
    root: &Path,
    query: &Query,
    screen: &Screen,
    cancel: &CancellationToken,
) -> Result<Collected, ToolError> {
    let hits = Mutex::new(Vec::new());
    let collected_lines = AtomicUsize::new(0);
    let incomplete = AtomicBool::new(false);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
    walker(root).threads(threads).build_parallel().run(|| {
        Box::new(|entry| {
            if cancel.is_cancelled() {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            if !is_file_entry(&entry) {
                return WalkState::Continue;
            }
            let path = entry.path();
            if let Some(include) = &query.include {
                let relative = match path.strip_prefix(root) {
                    Ok(rel) if !rel.as_os_str().is_empty() => rel,
                    _ => Path::new(path.file_name().unwrap_or_default()),
                };
                if !include.is_match(relative, path) {
                    return WalkState::Continue;
                }
            }
            if !screen.admits(path) {
                return WalkState::Continue;
            }
            let Some(lines) = search_file(path, query) else {
                return WalkState::Continue;
            };
            let found = collected_lines.fetch_add(lines.len().max(1), Ordering::Relaxed);
            hits.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(FileHit {
                    path: path.to_path_buf(),
                    mtime: mtime(&entry),
                    lines,
                });
            if found + 1 >= MAX_COLLECTED_LINES {
                incomplete.store(true, Ordering::Relaxed);
                return WalkState::Quit;
            }
            WalkState::Continue
        })
    });
    if cancel.is_cancelled() {
        return Err(ToolError::Cancelled);
    }
    Ok(Collected {
        hits: hits.into_inner().unwrap_or_else(|e| e.into_inner()),
        incomplete: incomplete.load(Ordering::Relaxed),
    })
}

/// Returns `None` when the file does not match (or is binary/unreadable);
/// otherwise the matching lines (empty in files_with_matches mode).
fn search_file(path: &Path, query: &Query) -> Option<Vec<(usize, String)>> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.len() > MAX_FILE_BYTES && query.kept.as_ref().is_some_and(|d| path.starts_with(d)) {
        return search_lines(path, query);
    }
    if meta.len() > MAX_FILE_BYTES {
        tracing::debug!(path = %path.display(), "grep: skipping large file");
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    if bytes[..bytes.len().min(BINARY_PROBE_BYTES)].contains(&0) {
        return None;
    }
    let text = String::from_utf8_lossy(&bytes);
    match query.mode {
        GrepMode::FilesWithMatches => query.regex.is_match(&text).then(Vec::new),
        GrepMode::Content => {
            let lines: Vec<(usize, String)> = text
                .lines()
                .enumerate()
                .filter(|(_, line)| query.regex.is_match(line))
                .map(|(i, line)| (i + 1, truncate_end(line, MAX_LINE_CHARS, "…")))
                .collect();
            (!lines.is_empty()).then_some(lines)
        }
    }
}

/// [`search_file`] of a big file, read line by line (a kept output).
fn search_lines(path: &Path, query: &Query) -> Option<Vec<(usize, String)>> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).ok()?;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
    let (mut line, mut index, mut out) = (Vec::new(), 0usize, Vec::new());
    while reader.read_until(b'\n', &mut line).ok()? > 0 {
        index += 1;
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        if query.regex.is_match(text) {
            if query.mode == GrepMode::FilesWithMatches {
                return Some(Vec::new());
            }
            out.push((index, truncate_end(text, MAX_LINE_CHARS, "…")));
            if out.len() >= MAX_COLLECTED_LINES {
                break;
            }
        }
        line.clear();
    }
    (!out.is_empty()).then_some(out)
}

fn format_files(mut collected: Collected) -> ToolOutput {
    if collected.hits.is_empty() {
        return ToolOutput::ok("No matches found");
    }
    collected
        .hits
        .sort_by(|a, b| b.mtime.cmp(&a.mtime).then_with(|| a.path.cmp(&b.path)));
    let total = collected.hits.len();
    let mut out: Vec<String> = collected
        .hits
        .iter()
        .take(MAX_FILES)
        .map(|h| h.path.display().to_string())
        .collect();
    if total > MAX_FILES || collected.incomplete {
        let more = if collected.incomplete {
            "more than "
        } else {
            ""
        };
        out.push(format!(
            "(Showing {} of {more}{total} matching files. Narrow the pattern, path or include to see the others.)",
            out.len()
        ));
    }
    ToolOutput::ok(out.join("\n"))
}

fn format_content(mut collected: Collected) -> ToolOutput {
    if collected.hits.is_empty() {
        return ToolOutput::ok("No matches found");
    }
    collected.hits.sort_by(|a, b| a.path.cmp(&b.path));
    let total: usize = collected.hits.iter().map(|h| h.lines.len()).sum();
    let mut out = Vec::with_capacity(total.min(MAX_CONTENT_LINES) + 1);
    'files: for hit in &collected.hits {
        for (number, line) in &hit.lines {
            if out.len() == MAX_CONTENT_LINES {
                break 'files;
            }
            out.push(format!("{}:{number}:{line}", hit.path.display()));
        }
    }
    if total > MAX_CONTENT_LINES || collected.incomplete {
        let more = if collected.incomplete {
            "more than "
        } else {
            ""
        };
        out.push(format!(
            "(Showing the first {} of {more}{total} matching lines. Narrow the pattern, path or include to see the others.)",
            out.len()
        ));
    }
    ToolOutput::ok(out.join("\n"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::test_util::{ctx, run};

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("build")).unwrap();
        std::fs::write(root.join("src/a.rs"), "fn main() {}\nlet Foo = 1;\n").unwrap();
        std::fs::write(root.join("src/b.txt"), "foo here\nnothing\nfoo again\n").unwrap();
        std::fs::write(root.join("build/c.rs"), "foo ignored\n").unwrap();
        std::fs::write(root.join("bin.dat"), b"foo\0bar").unwrap();
        std::fs::write(root.join(".gitignore"), "build/\n").unwrap();
        dir
    }

    #[tokio::test]
    async fn files_with_matches() {
        let dir = tree();
        let root = dir.path();
        let ctx = ctx(root);
        let out = run(&ctx, "Grep", json!({"pattern": "foo"})).await;
        assert!(!out.is_error);
        assert_eq!(out.content, root.join("src/b.txt").display().to_string());
        let out = run(
            &ctx,
            "Grep",
            json!({"pattern": "foo", "case_insensitive": true}),
        )
        .await;
        let mut lines: Vec<_> = out.content.lines().collect();
        lines.sort();
        let a = root.join("src/a.rs").display().to_string();
        let b = root.join("src/b.txt").display().to_string();
        assert_eq!(lines, vec![a.as_str(), b.as_str()]);
        let out = run(
            &ctx,
            "Grep",
            json!({"pattern": "foo", "include": "*.rs", "case_insensitive": true}),
        )
        .await;
        assert_eq!(out.content, a);
        let out = run(&ctx, "Grep", json!({"pattern": "zzz"})).await;
        assert_eq!(out.content, "No matches found");
    }

    #[tokio::test]
    async fn content_mode() {
        let dir = tree();
        let root = dir.path();
        let ctx = ctx(root);
        let out = run(
            &ctx,
            "Grep",
            json!({"pattern": "^foo", "output_mode": "content", "path": "src"}),
        )
        .await;
        let b = root.join("src/b.txt").display().to_string();
        assert_eq!(out.content, format!("{b}:1:foo here\n{b}:3:foo again"));
        // A file as the search root.
        let out = run(&ctx, "Grep", json!({"pattern": "again", "output_mode": "content", "path": "src/b.txt", "include": "*.txt"})).await;
        assert_eq!(out.content, format!("{b}:3:foo again"));
    }

    #[tokio::test]
    async fn content_cap_and_long_lines() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (0..600)
            .map(|i| format!("hit {i} {}\n", "x".repeat(600)))
            .collect();
        std::fs::write(dir.path().join("big.txt"), text).unwrap();
        let ctx = ctx(dir.path());
        let out = run(
            &ctx,
            "Grep",
            json!({"pattern": "hit", "output_mode": "content"}),
        )
        .await;
        let lines: Vec<_> = out.content.lines().collect();
        assert_eq!(lines.len(), MAX_CONTENT_LINES + 1);
        assert!(lines[MAX_CONTENT_LINES].contains("500 of 600"));
        assert!(lines[0].ends_with('…'));
    }

    #[tokio::test]
    async fn invalid_regex_fails_at_prepare() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path());
        let input = crate::ToolInput::parse("Grep", r#"{"pattern":"a(b"}"#).unwrap();
        let err = crate::prepare(input, &ctx).await.unwrap_err();
        assert!(
            err.to_string().contains("Invalid regular expression"),
            "{err}"
        );
    }
}
