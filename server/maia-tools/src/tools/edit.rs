//! The Edit tool: exact string replacement in a file the agent has read.

use std::path::Path;

use crate::context::{FileDiff, ToolContext, ToolOutput};
use crate::error::ToolError;
use crate::input::EditInput;
use crate::path::resolve;
use crate::reads::StaleRead;
use crate::tools::{reviewed, verify_unchanged};

/// The result of applying an edit to a text.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Applied {
    pub text: String,
    pub count: usize,
    /// 1-based line of the first replacement.
    pub first_line: usize,
}

/// True when the file's first line ending is CRLF.
fn uses_crlf(text: &str) -> bool {
    text.find('\n')
        .is_some_and(|i| i > 0 && text.as_bytes()[i - 1] == b'\r')
}

fn to_crlf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\n', "\r\n")
}

/// Applies the replacement to `content`. `old` must occur exactly once unless
/// `replace_all`. In a CRLF file, LF line endings in `old`/`new` are turned
/// into CRLF so the file keeps its line endings.
pub(crate) fn apply(
    path: &Path,
    content: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<Applied, ToolError> {
    if old.is_empty() {
        return Err(ToolError::EmptyOldString);
    }
    if old == new {
        return Err(ToolError::NoChange);
    }
    let mut candidates = Vec::with_capacity(2);
    if uses_crlf(content) {
        let (crlf_old, crlf_new) = (to_crlf(old), to_crlf(new));
        if crlf_old != old || crlf_new != new {
            candidates.push((crlf_old, crlf_new));
        }
    }
    candidates.push((old.to_string(), new.to_string()));
    for (old, new) in &candidates {
        let Some(first) = content.find(old.as_str()) else {
            continue;
        };
        let count = content.matches(old.as_str()).count();
        if count > 1 && !replace_all {
            return Err(ToolError::OldStringNotUnique {
                path: path.to_path_buf(),
                count,
            });
        }
        let text = if replace_all {
            content.replace(old.as_str(), new)
        } else {
            content.replacen(old.as_str(), new, 1)
        };
        let first_line = content[..first].matches('\n').count() + 1;
        return Ok(Applied {
            text,
            count,
            first_line,
        });
    }
    Err(ToolError::OldStringNotFound(path.to_path_buf()))
}

pub(crate) async fn prepare(input: &EditInput, ctx: &ToolContext) -> Result<FileDiff, ToolError> {
    if input.old_string.is_empty() {
        return Err(ToolError::EmptyOldString);
    }
    if input.old_string == input.new_string {
        return Err(ToolError::NoChange);
    }
    let path = resolve(&ctx.cwd, &input.file_path);
    let content = ctx.fs.read_to_string(&path).await?;
    match ctx.reads.check(&path, &content) {
        Ok(()) => {}
        Err(StaleRead::NotRead) => return Err(ToolError::NotRead(path)),
        // Changed outside (a formatter, the user typing elsewhere): the edit
        // still applies where `old_string` matches exactly once; the model
        // is told what changed ([`outside_note`]).
        Err(StaleRead::Changed) if !input.replace_all => {}
        Err(StaleRead::Changed) => return Err(ToolError::ChangedSinceRead(path)),
    }
    let applied = apply(
        &path,
        &content,
        &input.old_string,
        &input.new_string,
        input.replace_all,
    )?;
    Ok(FileDiff {
        path,
        old_text: Some(content),
        new_text: applied.text,
    })
}

pub(crate) async fn execute(
    input: &EditInput,
    diff: Option<FileDiff>,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let diff = match diff {
        Some(diff) => diff,
        None => prepare(input, ctx).await?,
    };
    let note = match write_checked(&diff, ctx, "your edit was made on top of that change").await? {
        Written::Reviewed(output) => return Ok(output),
        Written::Whole { note } => note,
    };
    let summary = diff.old_text.as_deref().and_then(|old| {
        apply(
            &diff.path,
            old,
            &input.old_string,
            &input.new_string,
            input.replace_all,
        )
        .ok()
    });
    let text = match summary {
        Some(a) if a.count == 1 => format!(
            "Edited {}: replaced 1 occurrence at line {}.",
            diff.path.display(),
            a.first_line
        ),
        Some(a) => format!(
            "Edited {}: replaced {} occurrences (first at line {}).",
            diff.path.display(),
            a.count,
            a.first_line
        ),
        None => format!("Edited {}.", diff.path.display()),
    };
    Ok(ToolOutput::ok(text + &note))
}

/// What [`write_checked`] did.
pub(crate) enum Written {
    /// The user reviewed the change in the editor: the answer says what
    /// was kept (with the outside-change note).
    Reviewed(ToolOutput),
    /// Written as proposed; the outside-change note to add to the answer.
    Whole { note: String },
}

/// Writes an edit's diff (`Edit`, `MultiEdit`): refused when the file
/// changed since the permission question showed it, the note about an
/// outside change made before (`done` says how the edit relates to it).
pub(crate) async fn write_checked(
    diff: &FileDiff,
    ctx: &ToolContext,
    done: &str,
) -> Result<Written, ToolError> {
    verify_unchanged(diff, ctx).await?;
    let note = outside_note(diff, ctx, done);
    let outcome = ctx.fs.write_reviewed(&diff.path, &diff.new_text).await?;
    if let Some(mut output) = reviewed(diff, outcome, ctx) {
        output.content.push_str(&note);
        return Ok(Written::Reviewed(output));
    }
    Ok(Written::Whole { note })
}

/// The note told after a write to a file that changed outside since the
/// model last read it (empty when it did not): which lines, not the text.
pub(crate) fn outside_note(diff: &FileDiff, ctx: &ToolContext, done: &str) -> String {
    let Some(old) = diff.old_text.as_deref() else {
        return String::new();
    };
    match ctx.reads.outside_change(&diff.path, old) {
        Some(what) => format!(
            "\nNote: the file had changed outside since you last read it ({what}, in the file as it was before this write); {done}. Read those lines again if they matter."
        ),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::test_util::{ctx, run};

    fn setup(content: &str) -> (tempfile::TempDir, ToolContext, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        std::fs::write(&path, content).unwrap();
        let ctx = ctx(dir.path());
        ctx.reads.record(&path, content);
        (dir, ctx, path)
    }

    #[tokio::test]
    async fn replaces_exactly_once() {
        let (_d, ctx, path) = setup("a\nfoo\nb\n");
        let out = run(
            &ctx,
            "Edit",
            json!({"file_path": "f.txt", "old_string": "foo", "new_string": "bar"}),
        )
        .await;
        assert!(!out.is_error, "{}", out.content);
        assert!(out.content.contains("line 2"), "{}", out.content);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a\nbar\nb\n");
        // The write is recorded, so a second edit works without reading.
        let out = run(
            &ctx,
            "Edit",
            json!({"file_path": "f.txt", "old_string": "bar", "new_string": "baz"}),
        )
        .await;
        assert!(!out.is_error, "{}", out.content);
    }

    #[tokio::test]
    async fn refuses_ambiguous_missing_empty_and_same() {
        let (_d, ctx, path) = setup("x x x");
        let out = run(
            &ctx,
            "Edit",
            json!({"file_path": "f.txt", "old_string": "x", "new_string": "y"}),
        )
        .await;
        assert!(
            out.is_error && out.content.contains("3 times"),
            "{}",
            out.content
        );
        let out = run(
            &ctx,
            "Edit",
            json!({"file_path": "f.txt", "old_string": "q", "new_string": "y"}),
        )
        .await;
        assert!(
            out.is_error && out.content.contains("not found"),
            "{}",
            out.content
        );
        let out = run(
            &ctx,
            "Edit",
            json!({"file_path": "f.txt", "old_string": "", "new_string": "y"}),
        )
        .await;
        assert!(
            out.is_error && out.content.contains("empty"),
            "{}",
            out.content
        );
        let out = run(
            &ctx,
            "Edit",
            json!({"file_path": "f.txt", "old_string": "x", "new_string": "x"}),
        )
        .await;
        assert!(
            out.is_error && out.content.contains("identical"),
            "{}",
            out.content
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "x x x");
    }

    #[tokio::test]
    async fn replace_all() {
        let (_d, ctx, path) = setup("x x x");
        let out = run(&ctx, "Edit", json!({"file_path": "f.txt", "old_string": "x", "new_string": "yx", "replace_all": true})).await;
        assert!(
            !out.is_error && out.content.contains("3 occurrences"),
            "{}",
            out.content
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "yx yx yx");
    }

    #[tokio::test]
    async fn refuses_unread_and_changed_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        std::fs::write(&path, "hello").unwrap();
        let ctx = ctx(dir.path());
        let args = json!({"file_path": "f.txt", "old_string": "hello", "new_string": "bye"});
        let out = run(&ctx, "Edit", args.clone()).await;
        assert!(
            out.is_error && out.content.contains("must Read"),
            "{}",
            out.content
        );

        ctx.reads.record(&path, "hello\nx\n");
        std::fs::write(&path, "hello\nhello\n").unwrap();
        let out = run(&ctx, "Edit", args.clone()).await;
        assert!(
            out.is_error && out.content.contains("2 times"),
            "ambiguous after the change: {}",
            out.content
        );
        std::fs::write(&path, "bye\n").unwrap();
        let out = run(&ctx, "Edit", args).await;
        assert!(
            out.is_error && out.content.contains("not found"),
            "gone after the change: {}",
            out.content
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "bye\n");
    }

    /// A writer changes another line between the read and the edit: the
    /// edit applies on top of it and says which lines changed.
    #[tokio::test]
    async fn applies_over_an_outside_change_when_the_match_is_unique() {
        let (_d, ctx, path) = setup("fn a() {}\nfn b() {}\n");
        std::fs::write(&path, "// formatted\nfn a() {}\nfn b() {}\n").unwrap();
        let out = run(
            &ctx,
            "Edit",
            json!({"file_path": "f.txt", "old_string": "fn b() {}", "new_string": "fn c() {}"}),
        )
        .await;
        assert!(!out.is_error, "{}", out.content);
        assert!(
            out.content.contains("changed outside")
                && out.content.contains("line 1 new or changed"),
            "{}",
            out.content
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "// formatted\nfn a() {}\nfn c() {}\n"
        );
        // replace_all over an outside change is still refused.
        std::fs::write(&path, "x\nfn a() {}\nfn c() {}\n").unwrap();
        let out = run(&ctx, "Edit", json!({"file_path": "f.txt", "old_string": "fn", "new_string": "pub fn", "replace_all": true})).await;
        assert!(
            out.is_error && out.content.contains("changed since"),
            "{}",
            out.content
        );
    }

    #[tokio::test]
    async fn keeps_crlf() {
        let (_d, ctx, path) = setup("a\r\nb\r\nc\r\n");
        let out = run(
            &ctx,
            "Edit",
            json!({"file_path": "f.txt", "old_string": "a\nb\n", "new_string": "x\ny\nz\n"}),
        )
        .await;
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "x\r\ny\r\nz\r\nc\r\n"
        );
    }

    #[tokio::test]
    async fn refuses_change_while_waiting_for_permission() {
        let (_d, ctx, path) = setup("one\ntwo\n");
        let input = crate::ToolInput::parse(
            "Edit",
            r#"{"file_path":"f.txt","old_string":"two","new_string":"2"}"#,
        )
        .unwrap();
        let prepared = crate::prepare(input, &ctx).await.unwrap();
        let diff = prepared.diff.clone().unwrap();
        assert_eq!(diff.old_text.as_deref(), Some("one\ntwo\n"));
        assert_eq!(diff.new_text, "one\n2\n");
        std::fs::write(&path, "one\ntwo\nthree\n").unwrap();
        let out = crate::execute(prepared, &ctx).await;
        assert!(
            out.is_error && out.content.contains("while waiting"),
            "{}",
            out.content
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\ntwo\nthree\n");
    }

    #[test]
    fn apply_falls_back_to_given_endings() {
        // Mixed file: the LF text exists as is.
        let p = Path::new("/f");
        let a = apply(p, "a\r\nb\nc\n", "b\nc", "d", false).unwrap();
        assert_eq!(a.text, "a\r\nd\n");
        assert_eq!(a.first_line, 2);
    }
}
