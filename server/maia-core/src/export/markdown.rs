//! An exported thread as Markdown that reads well where GitHub renders it
//! (a pull request comment, an issue): the messages as sections, each tool
//! call and each reasoning as a collapsed `<details>` section, its input as
//! a JSON block and its diffs as ```` ```diff ```` blocks.

use std::fmt::Write as _;

use super::document::{Content, Document, Entry, ToolCallEntry};

/// The Markdown of `doc`.
pub fn render(doc: &Document) -> String {
    let mut out = String::new();
    let heading = doc.thread.title.as_deref().unwrap_or(&doc.thread.name);
    let _ = writeln!(out, "# {}\n", one_line(heading));
    let _ = writeln!(
        out,
        "Thread `{}` (`{}`) in `{}`, exported {} by MAIA.\n",
        inline(&doc.thread.name),
        inline(&doc.thread.id),
        inline(&doc.thread.cwd.display().to_string()),
        doc.exported_at
    );
    for entry in &doc.entries {
        entry_md(&mut out, entry, &doc.thread.cwd);
    }
    if doc.omitted > 0 {
        let _ = writeln!(
            out,
            "_{} more entries were left out: the export reached its size limit._\n",
            doc.omitted
        );
    }
    out
}

fn entry_md(out: &mut String, entry: &Entry, cwd: &std::path::Path) {
    match entry {
        Entry::User { text, steer } => {
            let who = if *steer {
                "User (while the turn ran)"
            } else {
                "User"
            };
            let _ = writeln!(out, "## {who}\n\n{}\n", text.trim_end());
        }
        Entry::Image { name, mime_type } => {
            let _ = writeln!(out, "_Image `{}` ({mime_type})._\n", inline(name));
        }
        Entry::Thought { text } => {
            let _ = writeln!(
                out,
                "<details><summary>Reasoning</summary>\n\n{}\n</details>\n",
                fenced(text, "text")
            );
        }
        Entry::Answer { text } => {
            let _ = writeln!(out, "### Answer\n\n{}\n", text.trim_end());
        }
        Entry::ToolCall(call) => tool_call_md(out, call, cwd),
        Entry::Title { title } => {
            let _ = writeln!(out, "_Title: {}_\n", one_line(title));
        }
        Entry::Plan { todos } => {
            out.push_str("**Tasks**\n\n");
            for todo in todos {
                let mark = match todo.status {
                    crate::session_tools::TodoStatus::Completed => "x",
                    _ => " ",
                };
                let _ = writeln!(out, "- [{mark}] {}", one_line(&todo.content));
            }
            out.push('\n');
        }
        Entry::Subagent {
            agent,
            description,
            prompt,
            state,
            entries,
        } => {
            let _ = writeln!(
                out,
                "<details><summary>Subagent {}: {} ({})</summary>\n\n{}\n",
                html(agent),
                html(&one_line(description)),
                state.unwrap_or("unfinished"),
                fenced(prompt, "text")
            );
            for entry in entries {
                entry_md(out, entry, cwd);
            }
            out.push_str("</details>\n\n");
        }
    }
}

fn tool_call_md(out: &mut String, call: &ToolCallEntry, cwd: &std::path::Path) {
    let _ = writeln!(
        out,
        "<details><summary>{}: {} ({})</summary>\n",
        html(&call.name),
        html(&one_line(&call.title)),
        call.status
    );
    let input = serde_json::to_string_pretty(&call.input).unwrap_or_default();
    let _ = writeln!(out, "Input:\n\n{}\n", fenced(&input, "json"));
    for content in &call.content {
        match content {
            Content::Text { text } => {
                let _ = writeln!(out, "Result:\n\n{}\n", fenced(text, "text"));
            }
            Content::Diff {
                path,
                new_file,
                diff,
            } => {
                let shown = path.strip_prefix(cwd).unwrap_or(path);
                let what = if *new_file { "New file" } else { "Changes to" };
                let _ = writeln!(
                    out,
                    "{what} `{}`:\n\n{}\n",
                    inline(&shown.display().to_string()),
                    fenced(diff, "diff")
                );
            }
            Content::Terminal { terminal_id } => {
                let _ = writeln!(
                    out,
                    "_Ran in the editor's terminal `{}`._\n",
                    inline(terminal_id)
                );
            }
        }
    }
    out.push_str("</details>\n\n");
}

/// `text` in a fenced block whose fence is longer than any run of
/// backticks inside it (a fence in the text cannot close the block).
fn fenced(text: &str, lang: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}{lang}\n{}\n{fence}", text.trim_end_matches('\n'))
}

/// One line (for a heading or a summary).
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Text for inside a single-backtick code span.
fn inline(text: &str) -> String {
    one_line(text).replace('`', "'")
}

/// Text for inside an HTML element (`<summary>`).
fn html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_inside_the_text_cannot_close_its_block() {
        assert_eq!(fenced("a", "text"), "```text\na\n```");
        assert_eq!(fenced("x\n```\ny", "text"), "````text\nx\n```\ny\n````");
    }

    #[test]
    fn a_summary_cannot_open_markup() {
        assert_eq!(html("<b>&"), "&lt;b&gt;&amp;");
        assert_eq!(one_line("a\n\n b"), "a b");
    }
}
