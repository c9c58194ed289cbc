//! MCP tool results as text for the model, with their images (shown to a
//! model that accepts images; the engine decides).

use maia_tools::{ImageData, ImageError, ToolOutput, truncate_middle};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// Characters of one MCP result kept for the model.
pub const MAX_OUTPUT_CHARS: usize = 30_000;

/// The text the model gets for a result: text parts joined, images and
/// audio noted by type, resources and resource links listed; capped at
/// [`MAX_OUTPUT_CHARS`] (the middle is dropped). `isError` is kept.
pub fn render_result(result: &CallToolResult) -> ToolOutput {
    let mut parts: Vec<String> = Vec::new();
    let mut images = Vec::new();
    for block in &result.content {
        parts.push(match block {
            ContentBlock::Text(text) => text.text.clone(),
            ContentBlock::Image(image) => {
                match decode_image(&image.data, &image.mime_type, images.len() + 1) {
                    Ok(decoded) => {
                        let line = format!("[image {}: {}]", decoded.name, decoded.describe());
                        images.push(decoded);
                        line
                    }
                    Err(e) => format!("[image: {} not shown: {e}]", image.mime_type),
                }
            }
            ContentBlock::Audio(audio) => format!("[audio: {}]", audio.mime_type),
            ContentBlock::Resource(resource) => match &resource.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    format!("[resource: {uri}]\n{text}")
                }
                ResourceContents::BlobResourceContents { uri, mime_type, .. } => format!(
                    "[resource: {uri} ({})]",
                    mime_type.as_deref().unwrap_or("binary")
                ),
                #[allow(unreachable_patterns)]
                _ => "[resource]".to_owned(),
            },
            ContentBlock::ResourceLink(link) => {
                let mut line = format!("[resource link: {}", link.uri);
                if !link.name.is_empty() && link.name != link.uri {
                    line.push_str(&format!(" ({})", link.name));
                }
                if let Some(description) = &link.description {
                    line.push_str(&format!(" — {description}"));
                }
                line.push(']');
                line
            }
            #[allow(unreachable_patterns)]
            _ => "[unsupported content]".to_owned(),
        });
    }
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(structured.to_string());
    }
    let text = truncate_middle(&parts.join("\n"), MAX_OUTPUT_CHARS);
    let mut out = if result.is_error == Some(true) {
        ToolOutput::error(if text.is_empty() {
            "the tool failed".to_owned()
        } else {
            text
        })
    } else {
        ToolOutput::ok(text)
    };
    out.images = images;
    out
}

/// An MCP image block (base64 data), checked like any image.
fn decode_image(data: &str, mime_type: &str, n: usize) -> Result<ImageData, ImageError> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| ImageError::Unreadable(format!("its base64 data is invalid: {e}")))?;
    maia_tools::image::image(&format!("#{n}"), bytes, Some(mime_type))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(json: serde_json::Value) -> CallToolResult {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn joins_text_notes_images_and_links() {
        let out = render_result(&result(serde_json::json!({
            "content": [
                {"type": "text", "text": "one"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "resource_link", "uri": "file:///x.txt", "name": "x"},
                {"type": "text", "text": "two"}
            ]
        })));
        assert!(!out.is_error);
        assert_eq!(
            out.content,
            "one\n[image: image/png not shown: image/png is not a supported image (PNG, JPEG, GIF or WebP)]\n[resource link: file:///x.txt (x)]\ntwo"
        );
        use base64::Engine;
        let png = maia_tools::image::test_png(3, 2);
        let data = base64::engine::general_purpose::STANDARD.encode(&png);
        let out = render_result(&result(serde_json::json!({
            "content": [{"type": "image", "data": data, "mimeType": "image/png"}]
        })));
        assert_eq!(out.images.len(), 1);
        assert_eq!(&*out.images[0].bytes, png.as_slice());
        assert!(out.content.contains("image/png, 3×2"), "{}", out.content);
    }

    #[test]
    fn errors_and_caps() {
        let out = render_result(&result(serde_json::json!({
            "content": [{"type": "text", "text": "boom"}], "isError": true
        })));
        assert!(out.is_error);
        assert_eq!(out.content, "boom");
        let long = "x".repeat(MAX_OUTPUT_CHARS * 2);
        let out = render_result(&result(serde_json::json!({
            "content": [{"type": "text", "text": long}]
        })));
        assert!(out.content.chars().count() <= MAX_OUTPUT_CHARS);
        assert!(out.content.contains("characters truncated"));
    }
}
