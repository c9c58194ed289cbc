//! ACP prompt content turned into the engine's prompt parts.

use agent_client_protocol_schema::v1::{ContentBlock, EmbeddedResourceResource};
use maia_core::PromptPart;
use maia_rpc::RpcError;

use super::invalid_params;

/// Converts ACP prompt content into engine parts. An image comes as its
/// bytes (`data`) or, without them, as a `file://` `uri` read like a
/// linked file; its limits are the engine's.
pub(super) fn prompt_parts(blocks: Vec<ContentBlock>) -> Result<Vec<PromptPart>, RpcError> {
    let mut parts = Vec::with_capacity(blocks.len());
    let mut pasted = 0;
    let mut image_name = |uri: Option<&str>| match uri {
        Some(uri) => uri.to_owned(),
        None => {
            pasted += 1;
            format!("pasted-image-{pasted}")
        }
    };
    for block in blocks {
        match block {
            ContentBlock::Text(text) => parts.push(PromptPart::Text(text.text)),
            ContentBlock::ResourceLink(link) => match maia_core::prompt::uri_path(&link.uri) {
                Some(path) => parts.push(PromptPart::File(path)),
                None => parts.push(PromptPart::Note(format!(
                    "link {} was not read: only file:// links are supported",
                    link.uri
                ))),
            },
            ContentBlock::Resource(resource) => match resource.resource {
                EmbeddedResourceResource::TextResourceContents(text) => {
                    parts.push(PromptPart::Embedded {
                        uri: text.uri,
                        text: text.text,
                    });
                }
                EmbeddedResourceResource::BlobResourceContents(blob)
                    if blob
                        .mime_type
                        .as_deref()
                        .is_some_and(|m| m.starts_with("image/")) =>
                {
                    parts.push(PromptPart::Image {
                        name: blob.uri.clone(),
                        mime_type: blob.mime_type.clone().unwrap_or_default(),
                        data: decode_base64(&blob.blob, &blob.uri)?,
                    });
                }
                EmbeddedResourceResource::BlobResourceContents(blob) => parts.push(
                    PromptPart::Note(format!("binary resource {} skipped", blob.uri)),
                ),
                _ => parts.push(PromptPart::Note("unsupported resource skipped".into())),
            },
            ContentBlock::Image(image) if !image.data.is_empty() => {
                let name = image_name(image.uri.as_deref());
                let data = decode_base64(&image.data, &name)?;
                parts.push(PromptPart::Image {
                    name,
                    mime_type: image.mime_type,
                    data,
                });
            }
            ContentBlock::Image(image) => {
                match image.uri.as_deref().and_then(maia_core::prompt::uri_path) {
                    Some(path) => parts.push(PromptPart::File(path)),
                    None => {
                        return Err(invalid_params(
                            "an image block needs its base64 `data` or a file:// `uri`",
                        ));
                    }
                }
            }
            ContentBlock::Audio(_) => {
                return Err(invalid_params(
                    "audio content is not supported (promptCapabilities.audio is false)",
                ));
            }
            _ => return Err(invalid_params("unsupported content block")),
        }
    }
    Ok(parts)
}

/// Base64 bytes of a prompt block (an invalid encoding is the client's error).
fn decode_base64(data: &str, what: &str) -> Result<Vec<u8>, RpcError> {
    use base64::Engine;
    let compact: String = data.split_ascii_whitespace().collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact.as_bytes())
        .map_err(|e| invalid_params(format!("the data of {what} is not valid base64: {e}")))
}
