//! Text truncation helpers shared by the tools (and by @file injection).

/// Builds the note inserted where text was removed.
pub fn omission_note(dropped_chars: usize) -> String {
    format!("\n\n[... {dropped_chars} characters truncated ...]\n\n")
}

/// Returns `text` unchanged when it has at most `max_chars` characters;
/// otherwise keeps its head and tail and replaces the middle by a note saying
/// how many characters were dropped. The result has at most `max_chars`
/// characters whenever `max_chars` is larger than the note itself.
pub fn truncate_middle(text: &str, max_chars: usize) -> String {
    let total = text.chars().count();
    if total <= max_chars {
        return text.to_string();
    }
    let mid = char_offset(text, total / 2);
    join_truncated(&text[..mid], 0, &text[mid..], max_chars)
}

/// Like [`truncate_middle`] for a text of which only `head` and `tail` are
/// known and `dropped_middle` characters between them were already discarded.
pub(crate) fn join_truncated(
    head: &str,
    dropped_middle: usize,
    tail: &str,
    max_chars: usize,
) -> String {
    let head_chars = head.chars().count();
    let tail_chars = tail.chars().count();
    let total = head_chars + dropped_middle + tail_chars;
    if dropped_middle == 0 && total <= max_chars {
        return format!("{head}{tail}");
    }
    // The note's length depends on the number it carries; size it for the
    // worst case (dropping everything).
    let note_len = omission_note(total).chars().count();
    let keep = max_chars.saturating_sub(note_len);
    let head_keep = (keep / 2).min(head_chars);
    let tail_keep = (keep - head_keep).min(tail_chars);
    let dropped = total - head_keep - tail_keep;
    let head_end = char_offset(head, head_keep);
    let tail_start = char_offset(tail, tail_chars - tail_keep);
    let mut out = String::with_capacity(max_chars + 8);
    out.push_str(&head[..head_end]);
    out.push_str(&omission_note(dropped));
    out.push_str(&tail[tail_start..]);
    out
}

/// Byte offset of the `n`th character (or the end of `text`).
pub(crate) fn char_offset(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(i, _)| i)
}

/// Cuts `text` to at most `max_chars` characters, appending `suffix` when cut.
pub(crate) fn truncate_end(text: &str, max_chars: usize, suffix: &str) -> String {
    let end = char_offset(text, max_chars);
    if end == text.len() {
        text.to_string()
    } else {
        format!("{}{suffix}", &text[..end])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_unchanged() {
        assert_eq!(truncate_middle("hello", 5), "hello");
        assert_eq!(truncate_middle("", 0), "");
    }

    #[test]
    fn keeps_head_and_tail() {
        let text = format!(
            "{}{}{}",
            "x".repeat(1000),
            "m".repeat(10_000),
            "z".repeat(1000)
        );
        let out = truncate_middle(&text, 2000);
        assert!(out.chars().count() <= 2000);
        assert!(out.starts_with("xxxx"));
        assert!(out.ends_with("zzzz"));
        assert!(out.contains("characters truncated"));
        let kept = out.chars().filter(|c| matches!(c, 'x' | 'm' | 'z')).count();
        let note = out.split("[... ").nth(1).unwrap();
        let dropped: usize = note.split(' ').next().unwrap().parse().unwrap();
        assert_eq!(kept + dropped, 12_000);
    }

    #[test]
    fn respects_char_boundaries() {
        let text = "é".repeat(500);
        let out = truncate_middle(&text, 100);
        assert!(out.chars().count() <= 100);
        assert!(out.starts_with('é') && out.ends_with('é'));
    }

    #[test]
    fn join_counts_known_drop() {
        let out = join_truncated(&"a".repeat(100), 1000, &"z".repeat(100), 1000);
        assert_eq!(
            out,
            format!(
                "{}\n\n[... 1000 characters truncated ...]\n\n{}",
                "a".repeat(100),
                "z".repeat(100)
            )
        );
    }

    #[test]
    fn truncate_end_works() {
        assert_eq!(truncate_end("abcdef", 3, "…"), "abc…");
        assert_eq!(truncate_end("abc", 3, "…"), "abc");
    }
}

/// Bytes kept at each end of a process's output while it runs: enough for
/// 30,000 characters of UTF-8 either side.
const KEEP_BYTES: usize = 4 * 30_000 + 1024;

/// Output kept while a process runs: the head, the tail and how many bytes
/// were dropped between them, so memory stays bounded whatever it prints.
#[derive(Debug, Default)]
pub struct CappedOutput {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    dropped: usize,
    /// Where the whole output goes once it passes the head
    /// ([`CappedOutput::keeping`]).
    spill: Option<crate::kept::Spill>,
    total: u64,
    lines: u64,
}

impl CappedOutput {
    /// An output that is also kept whole in `path` when it is over its cap
    /// (streamed there once it passes the head kept in memory).
    pub fn keeping(path: std::path::PathBuf) -> Self {
        CappedOutput {
            spill: Some(crate::kept::Spill::new(path)),
            ..CappedOutput::default()
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        self.lines += bytes.iter().filter(|&&b| b == b'\n').count() as u64;
        if let Some(spill) = &mut self.spill {
            if spill.started() {
                spill.write(bytes);
            } else if self.head.len() + bytes.len() > KEEP_BYTES {
                spill.write(&self.head);
                spill.write(bytes);
            }
        }
        if self.head.len() < KEEP_BYTES {
            let room = (KEEP_BYTES - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..room]);
            bytes = &bytes[room..];
        }
        self.tail.extend(bytes);
        if self.tail.len() > KEEP_BYTES {
            let excess = self.tail.len() - KEEP_BYTES;
            self.tail.drain(..excess);
            self.dropped += excess;
        }
    }

    /// The text, at most about `max_chars` characters: when too long, a
    /// stub naming the file the whole output was kept in
    /// ([`CappedOutput::keeping`]), else the middle replaced by a note.
    pub fn finish_as(mut self, max_chars: usize, tool: &str) -> String {
        let Some(mut spill) = self.spill.take() else {
            return self.finish(max_chars);
        };
        let fits = self.dropped == 0
            && !spill.started()
            && String::from_utf8_lossy(&self.head).chars().count()
                + String::from_utf8_lossy(self.tail.make_contiguous())
                    .chars()
                    .count()
                <= max_chars;
        if fits {
            return self.finish(max_chars);
        }
        if !spill.started() {
            spill.write(&self.head);
            spill.write(self.tail.make_contiguous());
        }
        match spill.finish() {
            Ok((path, _, dropped)) => {
                let head = String::from_utf8_lossy(&self.head).into_owned();
                let tail = String::from_utf8_lossy(self.tail.make_contiguous()).into_owned();
                let tail = if tail.is_empty() { head.clone() } else { tail };
                crate::kept::stub(tool, &head, &tail, self.total, self.lines, &path, dropped)
            }
            Err(e) => {
                tracing::warn!(%e, "a big output could not be kept in a file");
                self.finish(max_chars)
            }
        }
    }

    /// The text, at most about `max_chars` characters, the middle replaced
    /// by a note when too long.
    pub fn finish(self, max_chars: usize) -> String {
        let tail: Vec<u8> = self.tail.into_iter().collect();
        if self.dropped == 0 {
            let mut all = self.head;
            all.extend_from_slice(&tail);
            return truncate_middle(&String::from_utf8_lossy(&all), max_chars);
        }
        let head = String::from_utf8_lossy(&self.head);
        let tail = String::from_utf8_lossy(&tail);
        let head_chars = head.chars().count();
        let tail_chars = tail.chars().count();
        let note_len = omission_note(head_chars + tail_chars + self.dropped)
            .chars()
            .count();
        let keep = max_chars.saturating_sub(note_len);
        let head_keep = (keep / 2).min(head_chars);
        let tail_keep = (keep - head_keep).min(tail_chars);
        let dropped = self.dropped + (head_chars - head_keep) + (tail_chars - tail_keep);
        let mut out: String = head.chars().take(head_keep).collect();
        out.push_str(&omission_note(dropped));
        out.extend(tail.chars().skip(tail_chars - tail_keep));
        out
    }
}
