//! The Read tool: numbered file content like `cat -n`; a PNG, JPEG, GIF
//! or WebP file is returned as an image (the engine shows it to a model
//! that accepts images and tells one that does not).

use std::path::Path;

use crate::context::{ToolContext, ToolOutput};
use crate::error::ToolError;
use crate::fs::FsError;
use crate::image::{ImageError, is_image_path, read_image_file, sniff};
use crate::input::ReadInput;
use crate::path::resolve;
use crate::truncate::truncate_end;

/// Most lines returned by one call.
pub const MAX_LINES: usize = 2_000;
/// Most bytes of output returned by one call.
pub const MAX_OUTPUT_BYTES: usize = 100 * 1024;
/// Longer lines are cut.
pub const MAX_LINE_CHARS: usize = 2_000;

pub(crate) async fn execute(input: &ReadInput, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let path = resolve(&ctx.cwd, &input.file_path);
    // A kept output (crate::kept) may pass the size limit of other files:
    // its lines are read from disk, never the whole file.
    if let Some(dir) = &ctx.outputs
        && path.starts_with(dir)
        && !path
            .components()
            .any(|c| c == std::path::Component::ParentDir)
    {
        let (offset, limit) = (input.offset, input.limit);
        let out = tokio::task::spawn_blocking(move || read_kept(&path, offset, limit))
            .await
            .map_err(|e| ToolError::Other(e.to_string()))?;
        return out.map_err(|e| ToolError::Other(format!("cannot read the kept output: {e}")));
    }
    if is_image_path(&path) {
        return Ok(read_image(&path).await);
    }
    let content = match ctx.fs.read_to_string(&path).await {
        Ok(content) => content,
        // An image without an image extension.
        Err(FsError::Binary(_)) if sniffs_as_image(&path).await => {
            return Ok(read_image(&path).await);
        }
        Err(e) => return Err(e.into()),
    };
    ctx.reads.record(&path, &content);
    Ok(render(&path, &content, input.offset, input.limit))
}

async fn sniffs_as_image(path: &Path) -> bool {
    use tokio::io::AsyncReadExt;
    let mut head = [0u8; 12];
    match tokio::fs::File::open(path).await {
        Ok(mut file) => file
            .read_exact(&mut head)
            .await
            .is_ok_and(|_| sniff(&head).is_some()),
        Err(_) => false,
    }
}

/// An image file as an image output (read from disk: an editor serves
/// text only).
async fn read_image(path: &Path) -> ToolOutput {
    match read_image_file(path).await {
        Ok(image) => {
            let mut out = ToolOutput::ok(format!(
                "{} is an image ({}).",
                path.display(),
                image.describe()
            ));
            out.images.push(image);
            out
        }
        Err(ImageError::Unreadable(e)) if !path.exists() => {
            ToolOutput::error(format!("File not found: {} ({e})", path.display()))
        }
        Err(e) => ToolOutput::error(format!("{} cannot be shown: {e}", path.display())),
    }
}

/// Formats `content` from line `offset` (1-based) for at most `limit` lines.
/// The lines `offset..offset + limit` of a kept output, numbered as
/// [`render`] numbers them, read line by line.
fn read_kept(
    path: &Path,
    offset: Option<usize>,
    limit: Option<usize>,
) -> std::io::Result<ToolOutput> {
    use std::io::BufRead;
    let file = std::fs::File::open(path)?;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
    let start = offset.unwrap_or(1).max(1);
    let max_lines = limit.unwrap_or(MAX_LINES).clamp(1, MAX_LINES);
    let (mut out, mut index, mut line) = (String::new(), 0usize, Vec::new());
    let mut more = false;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        index += 1;
        if index < start {
            continue;
        }
        if index >= start + max_lines || out.len() > MAX_OUTPUT_BYTES {
            more = true;
            break;
        }
        let text = String::from_utf8_lossy(&line);
        let text = truncate_end(
            text.trim_end_matches(['\n', '\r']),
            MAX_LINE_CHARS,
            "… [line truncated]",
        );
        out.push_str(&format!("{index:>6}\t{text}\n"));
    }
    if index < start {
        return Ok(ToolOutput::error(format!(
            "offset {start} is past the end of {} ({index} lines).",
            path.display()
        )));
    }
    if more {
        let end = index - 1;
        out.push_str(&format!(
            "\n[Showing lines {start}-{end}. Use offset={index} to read more.]\n"
        ));
    }
    Ok(ToolOutput::ok(out))
}

pub(crate) fn render(
    path: &Path,
    content: &str,
    offset: Option<usize>,
    limit: Option<usize>,
) -> ToolOutput {
    if content.is_empty() {
        return ToolOutput::ok(format!("The file {} is empty.", path.display()));
    }
    let total = content.lines().count();
    let start = offset.unwrap_or(1).max(1);
    if start > total {
        return ToolOutput::error(format!(
            "offset {start} is past the end of {} ({total} lines).",
            path.display()
        ));
    }
    let max_lines = limit.unwrap_or(MAX_LINES).clamp(1, MAX_LINES);
    let mut out = String::new();
    let mut end = start - 1;
    let mut hit_byte_limit = false;
    for (index, line) in content.lines().enumerate().skip(start - 1).take(max_lines) {
        let line = truncate_end(line, MAX_LINE_CHARS, "… [line truncated]");
        let formatted = format!("{:>6}\t{line}\n", index + 1);
        if out.len() + formatted.len() > MAX_OUTPUT_BYTES && end >= start {
            hit_byte_limit = true;
            break;
        }
        out.push_str(&formatted);
        end = index + 1;
    }
    if end < total {
        let why = if hit_byte_limit {
            "Output limited to 100 KB. "
        } else {
            ""
        };
        out.push_str(&format!(
            "\n[{why}Showing lines {start}-{end} of {total}. Use offset={} to read more.]\n",
            end + 1
        ));
    }
    ToolOutput::ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::test_util::{ctx, run};

    #[tokio::test]
    async fn numbers_lines_and_records_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\r\nthree").unwrap();
        let ctx = ctx(dir.path());
        let out = run(&ctx, "Read", json!({"file_path": "a.txt"})).await;
        assert!(!out.is_error);
        assert_eq!(out.content, "     1\tone\n     2\ttwo\n     3\tthree\n");
        let path = dir.path().join("a.txt");
        assert!(ctx.reads.check(&path, "one\ntwo\r\nthree").is_ok());
    }

    #[tokio::test]
    async fn offset_and_limit() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (1..=10).map(|i| format!("l{i}\n")).collect();
        std::fs::write(dir.path().join("a.txt"), text).unwrap();
        let ctx = ctx(dir.path());
        let out = run(
            &ctx,
            "Read",
            json!({"file_path": "a.txt", "offset": 3, "limit": 2}),
        )
        .await;
        assert!(
            out.content.starts_with("     3\tl3\n     4\tl4\n"),
            "{}",
            out.content
        );
        assert!(
            out.content
                .contains("Showing lines 3-4 of 10. Use offset=5")
        );
        let out = run(&ctx, "Read", json!({"file_path": "a.txt", "offset": 9})).await;
        assert_eq!(out.content, "     9\tl9\n    10\tl10\n");
        let out = run(&ctx, "Read", json!({"file_path": "a.txt", "offset": 11})).await;
        assert!(out.is_error && out.content.contains("past the end"));
    }

    #[test]
    fn truncates_at_line_and_byte_limits() {
        let path = Path::new("/x");
        let text: String = (1..=2500).map(|i| format!("{i}\n")).collect();
        let out = render(path, &text, None, None);
        assert!(out.content.contains("  2000\t2000\n"));
        assert!(!out.content.contains("\t2001\n"));
        assert!(out.content.contains("Use offset=2001"));

        let long_line = "x".repeat(1000);
        let text: String = (0..500).map(|_| format!("{long_line}\n")).collect();
        let out = render(path, &text, None, None);
        assert!(out.content.len() <= MAX_OUTPUT_BYTES + 200);
        assert!(out.content.contains("Output limited to 100 KB"));

        let out = render(path, &"y".repeat(5000), None, None);
        assert!(out.content.contains("[line truncated]"));
    }

    #[tokio::test]
    async fn images_are_returned_as_images() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path());
        let png = crate::image::test_png(64, 32);
        std::fs::write(dir.path().join("a.png"), &png).unwrap();
        // Also without an image extension.
        std::fs::write(dir.path().join("shot"), &png).unwrap();
        for name in ["a.png", "shot"] {
            let out = run(&ctx, "Read", json!({"file_path": name})).await;
            assert!(!out.is_error, "{}", out.content);
            assert_eq!(out.images.len(), 1);
            assert_eq!(&*out.images[0].bytes, png.as_slice());
            assert!(out.content.contains("image/png, 64×32"), "{}", out.content);
        }
        std::fs::write(dir.path().join("bad.png"), b"not a png").unwrap();
        let out = run(&ctx, "Read", json!({"file_path": "bad.png"})).await;
        assert!(out.is_error && out.content.contains("not a supported image"));
        let out = run(&ctx, "Read", json!({"file_path": "missing.png"})).await;
        assert!(
            out.is_error && out.content.contains("not found"),
            "{}",
            out.content
        );
    }

    #[tokio::test]
    async fn missing_binary_empty() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path());
        let out = run(&ctx, "Read", json!({"file_path": "nope.txt"})).await;
        assert!(
            out.is_error && out.content.contains("not found"),
            "{}",
            out.content
        );
        std::fs::write(dir.path().join("b.bin"), b"\x00\x01").unwrap();
        let out = run(&ctx, "Read", json!({"file_path": "b.bin"})).await;
        assert!(out.is_error && out.content.contains("binary"));
        std::fs::write(dir.path().join("e.txt"), "").unwrap();
        let out = run(&ctx, "Read", json!({"file_path": "e.txt"})).await;
        assert!(!out.is_error && out.content.contains("empty"));
    }
}
