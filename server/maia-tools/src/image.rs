//! Images the model can be shown: recognised from their bytes, checked
//! against MAIA's limits, measured (from the header only, nothing is
//! decoded) and priced in tokens.
//!
//! Limits (docs/tools.md): PNG, JPEG, GIF and WebP only; at most 5 MB per
//! image and 8000 pixels per side (the strictest of the common providers,
//! so a request never fails on them); at most 20 images and 20 MB of
//! images per message. Larger images are refused with a message, not
//! downscaled: providers downscale what they accept themselves, and
//! resizing would need a full image codec.

use std::path::Path;
use std::sync::Arc;

/// Largest image, in bytes.
pub const MAX_IMAGE_BYTES: usize = 5 * 1024 * 1024;
/// Largest width or height, in pixels.
pub const MAX_IMAGE_SIDE: u32 = 8000;
/// Most images in one message (a prompt, or the results of one model response).
pub const MAX_IMAGES_PER_MESSAGE: usize = 20;
/// Most image bytes in one message.
pub const MAX_MESSAGE_IMAGE_BYTES: usize = 20 * 1024 * 1024;

/// The MIME types accepted.
pub const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// One image, checked and measured.
#[derive(Clone, PartialEq, Eq)]
pub struct ImageData {
    /// What the user or the model knows it by (a file name or path).
    pub name: String,
    /// One of [`IMAGE_TYPES`], from the bytes.
    pub mime_type: &'static str,
    pub bytes: Arc<[u8]>,
    pub width: u32,
    pub height: u32,
}

impl std::fmt::Debug for ImageData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageData")
            .field("name", &self.name)
            .field("mime_type", &self.mime_type)
            .field("bytes", &self.bytes.len())
            .field("width", &self.width)
            .field("height", &self.height)
            .finish()
    }
}

/// Why an image cannot be shown. `Display` is phrased for the user and the
/// model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    #[error("{} is larger than the {} MB limit per image", human_size(*.size), MAX_IMAGE_BYTES / 1024 / 1024)]
    TooLarge { size: u64 },
    #[error("{width}×{height} pixels is larger than the {MAX_IMAGE_SIDE}-pixel limit per side")]
    TooManyPixels { width: u32, height: u32 },
    #[error("{} is not a supported image (PNG, JPEG, GIF or WebP)", .0.as_deref().unwrap_or("the data"))]
    Unsupported(Option<String>),
    #[error("the image cannot be read: {0}")]
    Unreadable(String),
}

/// The image type of `bytes`, from their signature.
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// Whether `path` names an image by its extension (`.png`, `.jpg`,
/// `.jpeg`, `.gif`, `.webp`, any case).
pub fn is_image_path(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
        matches!(
            e.to_ascii_lowercase().as_str(),
            "png" | "jpg" | "jpeg" | "gif" | "webp"
        )
    })
}

/// Checks and measures `bytes` as an image called `name`. `declared` is the
/// type the sender gave, only used to say what was refused: the bytes
/// decide.
pub fn image(name: &str, bytes: Vec<u8>, declared: Option<&str>) -> Result<ImageData, ImageError> {
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(ImageError::TooLarge {
            size: bytes.len() as u64,
        });
    }
    let Some(mime_type) = sniff(&bytes) else {
        return Err(ImageError::Unsupported(declared.map(str::to_owned)));
    };
    let size = imagesize::blob_size(&bytes).map_err(|e| ImageError::Unreadable(e.to_string()))?;
    let (width, height) = (
        u32::try_from(size.width).unwrap_or(u32::MAX),
        u32::try_from(size.height).unwrap_or(u32::MAX),
    );
    if width == 0 || height == 0 {
        return Err(ImageError::Unreadable("it has no pixels".to_owned()));
    }
    if width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE {
        return Err(ImageError::TooManyPixels { width, height });
    }
    Ok(ImageData {
        name: name.to_owned(),
        mime_type,
        bytes: bytes.into(),
        width,
        height,
    })
}

/// Reads an image file from disk (its size is checked before it is read).
pub async fn read_image_file(path: &Path) -> Result<ImageData, ImageError> {
    let unreadable = |e: std::io::Error| ImageError::Unreadable(e.to_string());
    let meta = tokio::fs::metadata(path).await.map_err(unreadable)?;
    if !meta.is_file() {
        return Err(ImageError::Unreadable(
            "it is not a regular file".to_owned(),
        ));
    }
    if meta.len() > MAX_IMAGE_BYTES as u64 {
        return Err(ImageError::TooLarge { size: meta.len() });
    }
    let bytes = tokio::fs::read(path).await.map_err(unreadable)?;
    image(&path.display().to_string(), bytes, None)
}

/// Tokens an image costs a model, by OpenAI's rule for detailed images
/// (docs/tools.md): the image is fitted in 2048×2048, then its shorter
/// side brought down to 768 pixels; each 512-pixel tile costs 170 tokens,
/// plus 85. Never upscaled. Anthropic's rule (width × height / 750, after
/// fitting in 1568 pixels) gives figures of the same size.
pub fn token_cost(width: u32, height: u32) -> u64 {
    let (mut w, mut h) = (f64::from(width.max(1)), f64::from(height.max(1)));
    let fit = (2048.0 / w.max(h)).min(1.0);
    w *= fit;
    h *= fit;
    let short = (768.0 / w.min(h)).min(1.0);
    w *= short;
    h *= short;
    let tiles = (w / 512.0).ceil() * (h / 512.0).ceil();
    85 + 170 * tiles as u64
}

impl ImageData {
    /// Tokens this image costs ([`token_cost`]).
    pub fn tokens(&self) -> u64 {
        token_cost(self.width, self.height)
    }

    /// `image/png, 800×600, 52 KB`.
    pub fn describe(&self) -> String {
        format!(
            "{}, {}×{}, {}",
            self.mime_type,
            self.width,
            self.height,
            human_size(self.bytes.len() as u64)
        )
    }
}

/// `812 bytes`, `52 KB`, `1.4 MB`.
pub fn human_size(bytes: u64) -> String {
    if bytes < 1024 {
        format!("{bytes} bytes")
    } else if bytes < 1024 * 1024 {
        format!("{} KB", bytes.div_ceil(1024))
    } else {
        format!("{:.1} MB", bytes as f64 / (1024.0 * 1024.0))
    }
}

/// A valid PNG of `width`×`height` (header and one empty data chunk), for
/// tests: the dimensions are read from its header.
pub fn test_png(width: u32, height: u32) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    out.extend_from_slice(&13u32.to_be_bytes());
    out.extend_from_slice(b"IHDR");
    out.extend_from_slice(&width.to_be_bytes());
    out.extend_from_slice(&height.to_be_bytes());
    out.extend_from_slice(&[8, 6, 0, 0, 0]);
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(b"IEND");
    out.extend_from_slice(&[0xae, 0x42, 0x60, 0x82]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_measures_and_limits() {
        let png = image("a.png", test_png(800, 600), Some("image/png")).unwrap();
        assert_eq!(
            (png.mime_type, png.width, png.height),
            ("image/png", 800, 600)
        );
        assert!(png.describe().starts_with("image/png, 800×600, "));
        assert_eq!(sniff(b"GIF89a...."), Some("image/gif"));
        assert_eq!(sniff(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff(&[0xff, 0xd8, 0xff, 0xe0]), Some("image/jpeg"));
        assert_eq!(
            image("x.svg", b"<svg/>".to_vec(), Some("image/svg+xml")),
            Err(ImageError::Unsupported(Some("image/svg+xml".into())))
        );
        assert!(matches!(
            image("big", test_png(9000, 10), None),
            Err(ImageError::TooManyPixels { width: 9000, .. })
        ));
        let mut huge = test_png(10, 10);
        huge.resize(MAX_IMAGE_BYTES + 1, 0);
        assert!(matches!(
            image("huge", huge, None),
            Err(ImageError::TooLarge { .. })
        ));
        assert!(is_image_path(Path::new("/a/B.JPG")));
        assert!(!is_image_path(Path::new("/a/b.svg")));
    }

    #[test]
    fn token_costs_follow_the_tile_rule() {
        // 512×512: one tile.
        assert_eq!(token_cost(512, 512), 85 + 170);
        // 1024×1024 → 768×768: four tiles.
        assert_eq!(token_cost(1024, 1024), 85 + 170 * 4);
        // 4000×2000 → 2048×1024 → 1536×768: 3×2 tiles.
        assert_eq!(token_cost(4000, 2000), 85 + 170 * 6);
        // Small images are not upscaled.
        assert_eq!(token_cost(10, 10), 85 + 170);
    }
}
