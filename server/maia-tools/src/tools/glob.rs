//! The Glob tool: find files by pattern, newest first.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use globset::GlobBuilder;
use tokio_util::sync::CancellationToken;

use crate::context::{ToolContext, ToolOutput};
use crate::error::ToolError;
use crate::input::GlobInput;
use crate::path::resolve;
use crate::tools::{Screen, existing_root, is_file_entry, mtime, walker};

/// Most paths returned.
pub const MAX_RESULTS: usize = 100;

#[derive(Debug, Clone, Copy)]
enum MatchOn {
    /// Pattern starts with `/`: match the absolute path.
    Absolute,
    /// Pattern contains `/`: match the path relative to the search root.
    Relative,
    /// Pattern without `/`: match the file name at any depth (or the
    /// relative path).
    NameOrRelative,
}

/// A compiled glob pattern with the repository's matching rules.
#[derive(Debug, Clone)]
pub(crate) struct Matcher {
    glob: globset::GlobMatcher,
    on: MatchOn,
}

impl Matcher {
    pub(crate) fn new(pattern: &str) -> Result<Self, ToolError> {
        let trimmed = pattern.strip_prefix("./").unwrap_or(pattern);
        let glob = GlobBuilder::new(trimmed)
            .literal_separator(true)
            .build()
            .map_err(|e| ToolError::InvalidPattern {
                what: "glob pattern",
                pattern: pattern.to_string(),
                message: e.kind().to_string(),
            })?
            .compile_matcher();
        let on = if trimmed.starts_with('/') {
            MatchOn::Absolute
        } else if trimmed.contains('/') {
            MatchOn::Relative
        } else {
            MatchOn::NameOrRelative
        };
        Ok(Self { glob, on })
    }

    /// Matches a file given by its path relative to the search root and its
    /// absolute path.
    pub(crate) fn is_match(&self, relative: &Path, absolute: &Path) -> bool {
        match self.on {
            MatchOn::Absolute => self.glob.is_match(absolute),
            MatchOn::Relative => self.glob.is_match(relative),
            MatchOn::NameOrRelative => {
                absolute
                    .file_name()
                    .is_some_and(|name| self.glob.is_match(name))
                    || self.glob.is_match(relative)
            }
        }
    }
}

pub(crate) async fn execute(input: &GlobInput, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let root = resolve(&ctx.cwd, input.path.as_deref().unwrap_or("."));
    let meta = existing_root(&root).await?;
    if !meta.is_dir() {
        return Err(ToolError::Other(format!(
            "{} is not a folder; Glob's `path` must be a folder.",
            root.display()
        )));
    }
    let matcher = Matcher::new(&input.pattern)?;
    if let Some(base) = literal_base(&input.pattern)
        && !base.starts_with(&root)
        && !root.starts_with(&base)
    {
        return Err(ToolError::Other(format!(
            "The absolute pattern {} lies outside the searched folder {}, so it matches nothing. Pass the folder to search as `path` (absolute for another workspace folder) and a pattern relative to it.",
            input.pattern,
            root.display()
        )));
    }
    let cancel = ctx.cancel.clone();
    let screen = Screen::new(&root, ctx.read_guard.clone());
    let (found, screen) = tokio::task::spawn_blocking(move || {
        collect(&root, &matcher, &screen, &cancel).map(|f| (f, screen))
    })
    .await
    .map_err(|e| ToolError::Other(format!("The file search failed: {e}")))??;
    let mut out = format_results(found);
    if let Some(note) = screen.note() {
        out.content = format!("{}\n{note}", out.content);
    }
    Ok(out)
}

/// The leading folders of an absolute pattern that hold no glob character
/// (`/w/lib` for `/w/lib/src/**/*.rs`); `None` for a relative pattern.
fn literal_base(pattern: &str) -> Option<PathBuf> {
    let path = Path::new(pattern);
    if !path.is_absolute() {
        return None;
    }
    let mut base = PathBuf::new();
    for part in path.components() {
        if part
            .as_os_str()
            .to_string_lossy()
            .contains(['*', '?', '[', '{'])
        {
            break;
        }
        base.push(part);
    }
    Some(crate::path::normalize(&base))
}

fn collect(
    root: &Path,
    matcher: &Matcher,
    screen: &Screen,
    cancel: &CancellationToken,
) -> Result<Vec<(SystemTime, PathBuf)>, ToolError> {
    let mut found = Vec::new();
    for entry in walker(root).build() {
        if cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        let Ok(entry) = entry else { continue };
        if !is_file_entry(&entry) {
            continue;
        }
        let absolute = entry.path();
        let relative = absolute.strip_prefix(root).unwrap_or(absolute);
        if matcher.is_match(relative, absolute) && screen.admits(absolute) {
            found.push((mtime(&entry), absolute.to_path_buf()));
        }
    }
    Ok(found)
}

fn format_results(mut found: Vec<(SystemTime, PathBuf)>) -> ToolOutput {
    if found.is_empty() {
        return ToolOutput::ok("No files found");
    }
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total = found.len();
    let mut out: Vec<String> = found
        .iter()
        .take(MAX_RESULTS)
        .map(|(_, p)| p.display().to_string())
        .collect();
    if total > MAX_RESULTS {
        out.push(format!(
            "(Showing the {MAX_RESULTS} most recently modified of {total} matching files. \
             Use a more specific pattern or path to see the others.)"
        ));
    }
    ToolOutput::ok(out.join("\n"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::tools::test_util::{ctx, run};

    fn touch(path: &Path, age_secs: u64) {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, "x").unwrap();
        let when = SystemTime::now() - Duration::from_secs(age_secs);
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(when)
            .unwrap();
    }

    #[tokio::test]
    async fn newest_first_and_gitignore() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        touch(&root.join("old.rs"), 300);
        touch(&root.join("src/new.rs"), 10);
        touch(&root.join("src/mid.rs"), 100);
        touch(&root.join("src/readme.md"), 5);
        touch(&root.join("target/gen.rs"), 1);
        touch(&root.join(".hidden/h.rs"), 1);
        std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
        let ctx = ctx(root);

        let out = run(&ctx, "Glob", json!({"pattern": "*.rs"})).await;
        let expected = [
            root.join("src/new.rs"),
            root.join("src/mid.rs"),
            root.join("old.rs"),
        ]
        .map(|p| p.display().to_string())
        .join("\n");
        assert_eq!(out.content, expected);

        let out = run(&ctx, "Glob", json!({"pattern": "src/*.rs"})).await;
        assert_eq!(out.content.lines().count(), 2);
        let out = run(&ctx, "Glob", json!({"pattern": "*.rs", "path": "src"})).await;
        assert_eq!(out.content.lines().count(), 2);
        let out = run(&ctx, "Glob", json!({"pattern": "**/*.md"})).await;
        assert_eq!(
            out.content,
            root.join("src/readme.md").display().to_string()
        );
        let out = run(&ctx, "Glob", json!({"pattern": "*.py"})).await;
        assert_eq!(out.content, "No files found");
    }

    #[tokio::test]
    async fn absolute_patterns_inside_or_outside_the_searched_folder() {
        let dir = tempfile::tempdir().unwrap();
        let (proj, lib) = (dir.path().join("proj"), dir.path().join("lib"));
        touch(&proj.join("a.rs"), 1);
        touch(&lib.join("src/b.rs"), 1);
        let ctx = ctx(&proj);
        let inside = format!("{}/*.rs", proj.display());
        let out = run(&ctx, "Glob", json!({"pattern": inside})).await;
        assert_eq!(out.content, proj.join("a.rs").display().to_string());
        let outside = format!("{}/src/*.rs", lib.display());
        let out = run(&ctx, "Glob", json!({"pattern": outside})).await;
        assert!(out.is_error && out.content.contains("`path`"), "{out:?}");
        let out = run(&ctx, "Glob", json!({"pattern": "src/*.rs", "path": lib})).await;
        assert_eq!(out.content, lib.join("src/b.rs").display().to_string());
        let out = run(&ctx, "Glob", json!({"pattern": outside, "path": lib})).await;
        assert_eq!(out.content, lib.join("src/b.rs").display().to_string());
    }

    #[tokio::test]
    async fn caps_results() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..120 {
            std::fs::write(dir.path().join(format!("f{i}.txt")), "").unwrap();
        }
        let ctx = ctx(dir.path());
        let out = run(&ctx, "Glob", json!({"pattern": "*.txt"})).await;
        assert_eq!(out.content.lines().count(), MAX_RESULTS + 1);
        assert!(out.content.contains("of 120 matching files"));
    }

    #[tokio::test]
    async fn bad_pattern_and_missing_root() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path());
        let input = crate::ToolInput::parse("Glob", r#"{"pattern":"a[b"}"#).unwrap();
        let err = crate::prepare(input, &ctx).await.unwrap_err();
        assert!(err.to_string().contains("Invalid glob pattern"), "{err}");
        let out = run(&ctx, "Glob", json!({"pattern": "*", "path": "nope"})).await;
        assert!(out.is_error && out.content.contains("not found"));
    }
}
