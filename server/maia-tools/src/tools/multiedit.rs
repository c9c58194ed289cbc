//! The MultiEdit tool: several exact replacements in one file, applied in
//! order (each to the result of the previous one), all or none: one diff,
//! one permission, one write. The same rules as Edit otherwise.

use crate::context::{FileDiff, ToolContext, ToolOutput};
use crate::error::ToolError;
use crate::input::MultiEditInput;
use crate::path::resolve;
use crate::reads::StaleRead;
use crate::tools::edit::{Written, apply, write_checked};

/// What applying every replacement gave: the new text, and per edit the
/// occurrences replaced and the line of the first (in the text it was
/// applied to).
struct AppliedAll {
    text: String,
    lines: Vec<(usize, usize)>,
}

/// Applies the edits in order to `content`; the first that fails fails
/// them all, naming which one.
fn apply_all(
    path: &std::path::Path,
    content: &str,
    input: &MultiEditInput,
) -> Result<AppliedAll, ToolError> {
    let total = input.edits.len();
    let mut text = content.to_owned();
    let mut lines = Vec::with_capacity(total);
    for (i, edit) in input.edits.iter().enumerate() {
        let applied = apply(
            path,
            &text,
            &edit.old_string,
            &edit.new_string,
            edit.replace_all,
        )
        .map_err(|e| ToolError::InMultiEdit {
            number: i + 1,
            total,
            source: Box::new(e),
        })?;
        lines.push((applied.count, applied.first_line));
        text = applied.text;
    }
    Ok(AppliedAll { text, lines })
}

pub(crate) async fn prepare(
    input: &MultiEditInput,
    ctx: &ToolContext,
) -> Result<FileDiff, ToolError> {
    let path = resolve(&ctx.cwd, &input.file_path);
    let content = ctx.fs.read_to_string(&path).await?;
    match ctx.reads.check(&path, &content) {
        Ok(()) => {}
        Err(StaleRead::NotRead) => return Err(ToolError::NotRead(path)),
        // As Edit: over an outside change only replacements that match
        // exactly once apply.
        Err(StaleRead::Changed) if !input.edits.iter().any(|e| e.replace_all) => {}
        Err(StaleRead::Changed) => return Err(ToolError::ChangedSinceRead(path)),
    }
    let applied = apply_all(&path, &content, input)?;
    if applied.text == content {
        return Err(ToolError::NoChange);
    }
    Ok(FileDiff {
        path,
        old_text: Some(content),
        new_text: applied.text,
    })
}

pub(crate) async fn execute(
    input: &MultiEditInput,
    diff: Option<FileDiff>,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let diff = match diff {
        Some(diff) => diff,
        None => prepare(input, ctx).await?,
    };
    let done = "your edits were made on top of that change";
    let note = match write_checked(&diff, ctx, done).await? {
        Written::Reviewed(output) => return Ok(output),
        Written::Whole { note } => note,
    };
    let summary = diff
        .old_text
        .as_deref()
        .and_then(|old| apply_all(&diff.path, old, input).ok());
    let text = match summary {
        Some(a) => {
            let replaced: usize = a.lines.iter().map(|(count, _)| count).sum();
            let at = a
                .lines
                .iter()
                .map(|(_, line)| line.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            format!(
                "Edited {}: applied {} edits ({replaced} replacements; first lines, each counted after the edits before it: {at}).",
                diff.path.display(),
                a.lines.len(),
            )
        }
        None => format!("Edited {}.", diff.path.display()),
    };
    Ok(ToolOutput::ok(text + &note))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::tools::test_util::{ctx, run};

    fn setup(content: &str) -> (tempfile::TempDir, crate::ToolContext, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        std::fs::write(&path, content).unwrap();
        let ctx = ctx(dir.path());
        ctx.reads.record(&path, content);
        (dir, ctx, path)
    }

    #[tokio::test]
    async fn applies_in_order_each_on_the_previous_result() {
        let (_d, ctx, path) = setup("alpha\nbeta\ngamma\n");
        let out = run(
            &ctx,
            "MultiEdit",
            json!({"file_path": "f.txt", "edits": [
                {"old_string": "alpha", "new_string": "one"},
                {"old_string": "one\nbeta", "new_string": "one\ntwo"},
                {"old_string": "a", "new_string": "A", "replace_all": true},
            ]}),
        )
        .await;
        assert!(!out.is_error, "{}", out.content);
        assert!(out.content.contains("applied 3 edits"), "{}", out.content);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\ntwo\ngAmmA\n");
    }

    #[tokio::test]
    async fn one_failing_edit_applies_none() {
        let (_d, ctx, path) = setup("x\ny\ny\n");
        for (edits, why) in [
            (
                json!([{"old_string": "x", "new_string": "z"}, {"old_string": "y", "new_string": "w"}]),
                "2 times",
            ),
            (
                json!([{"old_string": "x", "new_string": "z"}, {"old_string": "q", "new_string": "w"}]),
                "not found",
            ),
            (
                json!([{"old_string": "x", "new_string": "z"}, {"old_string": "", "new_string": "w"}]),
                "empty",
            ),
        ] {
            let out = run(
                &ctx,
                "MultiEdit",
                json!({"file_path": "f.txt", "edits": edits}),
            )
            .await;
            assert!(out.is_error, "{}", out.content);
            assert!(
                out.content.contains("Edit 2 of 2") && out.content.contains(why),
                "{}",
                out.content
            );
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "x\ny\ny\n");
        let out = run(
            &ctx,
            "MultiEdit",
            json!({"file_path": "f.txt", "edits": []}),
        )
        .await;
        assert!(
            out.is_error && out.content.contains("edits"),
            "{}",
            out.content
        );
        // Edits that undo each other change nothing.
        let out = run(
            &ctx,
            "MultiEdit",
            json!({"file_path": "f.txt", "edits": [
                {"old_string": "x", "new_string": "z"}, {"old_string": "z", "new_string": "x"}]}),
        )
        .await;
        assert!(
            out.is_error && out.content.contains("nothing to change"),
            "{}",
            out.content
        );
    }

    #[tokio::test]
    async fn edits_given_as_a_json_string_are_accepted() {
        let (_d, ctx, path) = setup("a b\n");
        let edits = json!([{"old_string": "a", "new_string": "c"}]).to_string();
        let out = run(
            &ctx,
            "MultiEdit",
            json!({"file_path": "f.txt", "edits": edits}),
        )
        .await;
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "c b\n");
    }

    #[tokio::test]
    async fn outside_changes_follow_the_edit_rules() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        std::fs::write(&path, "fn a() {}\n").unwrap();
        let ctx = ctx(dir.path());
        let args =
            json!({"file_path": "f.txt", "edits": [{"old_string": "fn a", "new_string": "fn b"}]});
        let out = run(&ctx, "MultiEdit", args.clone()).await;
        assert!(
            out.is_error && out.content.contains("must Read"),
            "{}",
            out.content
        );

        ctx.reads.record(&path, "fn a() {}\n");
        std::fs::write(&path, "// formatted\nfn a() {}\n").unwrap();
        let all = json!({"file_path": "f.txt", "edits": [{"old_string": "fn", "new_string": "pub fn", "replace_all": true}]});
        let out = run(&ctx, "MultiEdit", all).await;
        assert!(
            out.is_error && out.content.contains("changed since"),
            "{}",
            out.content
        );
        let out = run(&ctx, "MultiEdit", args).await;
        assert!(!out.is_error, "{}", out.content);
        assert!(out.content.contains("changed outside"), "{}", out.content);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "// formatted\nfn b() {}\n"
        );
    }
}
