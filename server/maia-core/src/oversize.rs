//! A tool result too large for the context window is cut in the middle
//! before it enters the history, with a note telling the model how to
//! read the rest.

/// `content` cut to at most about `max_chars` characters, keeping its head
/// and tail, with a note of what was cut and how to read it (`how`, the
/// tool's own hint); unchanged when it fits.
pub fn cap_tool_result(content: &str, max_chars: usize, tool: &str, how: &str) -> String {
    let total = content.chars().count();
    if total <= max_chars {
        return content.to_owned();
    }
    let keep = max_chars.saturating_sub(600) / 2;
    let head: String = content.chars().take(keep).collect();
    let tail: String = content.chars().skip(total - keep).collect();
    let head_lines = head.matches('\n').count();
    let cut_lines = content
        .chars()
        .skip(keep)
        .take(total - 2 * keep)
        .filter(|&c| c == '\n')
        .count();
    let first = head_lines + 1;
    let last = head_lines + cut_lines + 1;
    format!(
        "{head}\n\n[MAIA cut {} characters (about lines {first}–{last}) from the middle of this {tool} result: it was larger than the share of the context window one result may take. {how}.]\n\n{tail}",
        total - 2 * keep
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_the_middle_with_a_note() {
        let text: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        let out = cap_tool_result(
            &text,
            4_000,
            "Read",
            "Read the file again with `offset` and `limit` to see them",
        );
        assert!(out.chars().count() <= 4_400, "{}", out.len());
        assert!(out.starts_with("line 0\n") && out.ends_with("line 9999\n"));
        assert!(out.contains("offset") && out.contains("MAIA cut"));
        assert_eq!(cap_tool_result("short", 4_000, "Read", ""), "short");
    }
}
