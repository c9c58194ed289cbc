//! The documents the editor has open (full text sync) and conversions
//! between byte offsets and LSP positions (UTF-16 code units, the LSP
//! default encoding).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tower_lsp_server::ls_types::{Position, Range, Uri};

/// One open document.
#[derive(Debug, Clone)]
pub struct Doc {
    /// The URI exactly as the client sent it.
    pub uri: Uri,
    /// The file it shows, for `file:` URIs.
    pub path: Option<PathBuf>,
    pub version: i32,
    pub text: String,
}

/// Open documents by URI. Changes are applied synchronously, before any
/// await of the handler, and a change never replaces a newer version.
#[derive(Debug, Default)]
pub struct Documents {
    docs: Mutex<HashMap<String, Doc>>,
    changed: Notify,
}

pub fn uri_to_path(uri: &Uri) -> Option<PathBuf> {
    uri.to_file_path().map(|p| p.into_owned())
}

impl Documents {
    pub fn open(&self, uri: Uri, version: i32, text: String) {
        let path = uri_to_path(&uri);
        if let Ok(mut docs) = self.docs.lock() {
            docs.insert(
                uri.as_str().to_owned(),
                Doc {
                    uri,
                    path,
                    version,
                    text,
                },
            );
        }
        self.changed.notify_waiters();
    }

    pub fn change(&self, uri: &Uri, version: i32, text: String) {
        if let Ok(mut docs) = self.docs.lock()
            && let Some(doc) = docs.get_mut(uri.as_str())
            && version >= doc.version
        {
            doc.version = version;
            doc.text = text;
        }
        self.changed.notify_waiters();
    }

    pub fn close(&self, uri: &Uri) {
        if let Ok(mut docs) = self.docs.lock() {
            docs.remove(uri.as_str());
        }
        self.changed.notify_waiters();
    }

    pub fn get(&self, uri: &str) -> Option<Doc> {
        self.docs.lock().ok()?.get(uri).cloned()
    }

    /// The open document showing `path`.
    pub fn by_path(&self, path: &Path) -> Option<Doc> {
        let docs = self.docs.lock().ok()?;
        docs.values()
            .find(|d| d.path.as_deref() == Some(path))
            .cloned()
    }

    /// Waits until the document showing `path` is newer than `version`
    /// (or closed) for at most `within`; returns its state then.
    pub async fn wait_newer(&self, path: &Path, version: i32, within: Duration) -> Option<Doc> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let notified = self.changed.notified();
            let doc = self.by_path(path);
            match &doc {
                Some(d) if d.version <= version => {}
                _ => return doc,
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.by_path(path);
            }
        }
    }
}

/// The position of byte `offset` in `text`.
pub fn position_at(text: &str, offset: usize) -> Position {
    let offset = floor_char_boundary(text, offset.min(text.len()));
    let before = &text[..offset];
    let line = before.matches('\n').count();
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let character: usize = before[line_start..].chars().map(char::len_utf16).sum();
    Position::new(
        u32::try_from(line).unwrap_or(u32::MAX),
        u32::try_from(character).unwrap_or(u32::MAX),
    )
}

/// The byte offset of `pos` in `text`, clamped to the text and to the end of
/// its line (before the line break).
pub fn offset_at(text: &str, pos: Position) -> usize {
    let mut line_start = 0;
    for _ in 0..pos.line {
        match text[line_start..].find('\n') {
            Some(i) => line_start += i + 1,
            None => return text.len(),
        }
    }
    let line_end = text[line_start..]
        .find('\n')
        .map_or(text.len(), |i| line_start + i);
    let line_end = if text[line_start..line_end].ends_with('\r') {
        line_end - 1
    } else {
        line_end
    };
    let mut units = 0usize;
    for (i, c) in text[line_start..line_end].char_indices() {
        if units >= pos.character as usize {
            return line_start + i;
        }
        units += c.len_utf16();
    }
    line_end
}

/// The text `range` covers.
pub fn slice(text: &str, range: Range) -> &str {
    let start = offset_at(text, range.start);
    let end = offset_at(text, range.end).max(start);
    &text[start..end]
}

fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

/// Whether `pos` lies in `range` (ends included).
pub fn contains(range: &Range, pos: Position) -> bool {
    let key = |p: Position| (p.line, p.character);
    key(range.start) <= key(pos) && key(pos) <= key(range.end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_round_trip_in_utf16() {
        let text = "ab\né😀x\r\nlast";
        assert_eq!(position_at(text, 0), Position::new(0, 0));
        assert_eq!(position_at(text, 3), Position::new(1, 0));
        // é is 2 bytes / 1 unit, 😀 is 4 bytes / 2 units.
        assert_eq!(position_at(text, 3 + 2 + 4), Position::new(1, 3));
        assert_eq!(offset_at(text, Position::new(1, 3)), 9);
        assert_eq!(offset_at(text, Position::new(1, 99)), 10);
        assert_eq!(offset_at(text, Position::new(9, 0)), text.len());
        assert_eq!(position_at(text, text.len()), Position::new(2, 4));
        assert_eq!(
            slice(text, Range::new(Position::new(0, 1), Position::new(1, 1))),
            "b\né"
        );
    }
}
