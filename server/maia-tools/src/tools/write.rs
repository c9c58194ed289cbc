//! The Write tool: create or overwrite a whole file.

use crate::context::{FileDiff, ToolContext, ToolOutput};
use crate::error::ToolError;
use crate::input::WriteInput;
use crate::path::resolve;
use crate::tools::{read_optional, reviewed, verify_unchanged};

pub(crate) async fn prepare(input: &WriteInput, ctx: &ToolContext) -> Result<FileDiff, ToolError> {
    let path = resolve(&ctx.cwd, &input.file_path);
    let old_text = read_optional(ctx, &path).await?;
    Ok(FileDiff {
        path,
        old_text,
        new_text: input.content.clone(),
    })
}

pub(crate) async fn execute(
    input: &WriteInput,
    diff: Option<FileDiff>,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let diff = match diff {
        Some(diff) => diff,
        None => prepare(input, ctx).await?,
    };
    verify_unchanged(&diff, ctx).await?;
    let note = crate::tools::edit::outside_note(
        &diff,
        ctx,
        "your Write replaced the whole file, that change included",
    );
    let outcome = ctx.fs.write_reviewed(&diff.path, &diff.new_text).await?;
    if let Some(mut output) = reviewed(&diff, outcome, ctx) {
        output.content.push_str(&note);
        return Ok(output);
    }
    let verb = if diff.old_text.is_some() {
        "Overwrote"
    } else {
        "Created"
    };
    let lines = diff.new_text.lines().count();
    let unit = if lines == 1 { "line" } else { "lines" };
    Ok(ToolOutput::ok(format!(
        "{verb} {} ({lines} {unit}).{note}",
        diff.path.display()
    )))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::tools::test_util::{ctx, run};

    #[tokio::test]
    async fn creates_folders_then_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path());
        let out = run(
            &ctx,
            "Write",
            json!({"file_path": "a/b/c.txt", "content": "x\ny\n"}),
        )
        .await;
        assert!(!out.is_error, "{}", out.content);
        assert!(out.content.starts_with("Created") && out.content.contains("2 lines"));
        let path = dir.path().join("a/b/c.txt");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "x\ny\n");
        assert!(ctx.reads.check(&path, "x\ny\n").is_ok());

        let out = run(
            &ctx,
            "Write",
            json!({"file_path": "a/b/c.txt", "content": "z"}),
        )
        .await;
        assert!(out.content.starts_with("Overwrote") && out.content.contains("1 line"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "z");
    }

    #[tokio::test]
    async fn diff_and_changed_while_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path());
        let input =
            crate::ToolInput::parse("Write", r#"{"file_path":"n.txt","content":"new"}"#).unwrap();
        let prepared = crate::prepare(input, &ctx).await.unwrap();
        let diff = prepared.diff.clone().unwrap();
        assert_eq!(diff.old_text, None);
        assert_eq!(diff.path, dir.path().join("n.txt"));
        std::fs::write(dir.path().join("n.txt"), "someone else").unwrap();
        let out = crate::execute(prepared, &ctx).await;
        assert!(
            out.is_error && out.content.contains("Read it again"),
            "{}",
            out.content
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("n.txt")).unwrap(),
            "someone else"
        );
    }
}
