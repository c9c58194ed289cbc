//! What the user undid of the agent's file changes after the fact (an
//! editor's hunk review: "Undo" on a change already written). The front
//! door turns its protocol's report into [`UndoneHunk`]s and sends them
//! with the next prompt or steer as [`crate::PromptPart::Undone`]; the user
//! message then starts with one note listing them, so the model hears each
//! report once, in the message it came with (and in the history after).

use std::path::PathBuf;

/// Characters of one side of a hunk quoted to the model.
const QUOTE_CHARS: usize = 2_000;
/// Hunks listed one by one; the rest are counted.
const MAX_LISTED: usize = 40;

/// One change of the agent the user undid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndoneHunk {
    /// The file (absolute).
    pub path: PathBuf,
    /// 1-based line in the file as it is now where the restored text starts.
    pub line: u32,
    /// The text the agent had written there (now gone).
    pub agent_text: String,
    /// The text put back in its place (empty when the agent's lines were
    /// only added).
    pub restored_text: String,
    /// The undo removed the file the agent had created.
    pub file_removed: bool,
}

/// `text` cut to [`QUOTE_CHARS`] on a character boundary, each line
/// prefixed with `mark`.
fn quote(text: &str, mark: &str) -> String {
    let cut = text
        .char_indices()
        .nth(QUOTE_CHARS)
        .map_or(text, |(i, _)| &text[..i]);
    let mut out: String = cut.lines().map(|l| format!("    {mark}{l}\n")).collect();
    if cut.len() < text.len() {
        out.push_str(&format!(
            "    … ({} more characters)\n",
            text[cut.len()..].chars().count()
        ));
    }
    out
}

/// The note the model is given for `hunks` (none for an empty list).
pub fn note(hunks: &[UndoneHunk]) -> Option<String> {
    if hunks.is_empty() {
        return None;
    }
    let mut out = format!(
        "[Since your last answer the user reviewed your file changes in the editor and undid {} of them. \
         The files hold the user's text there now; do not make these changes again unless asked.\n",
        hunks.len()
    );
    for (i, h) in hunks.iter().take(MAX_LISTED).enumerate() {
        let path = h.path.display();
        if h.file_removed {
            out.push_str(&format!(
                "{}. {path}: the file you created was removed.\n",
                i + 1
            ));
            continue;
        }
        out.push_str(&format!("{}. {path}, line {}:", i + 1, h.line));
        if h.agent_text.is_empty() {
            out.push_str(" the lines you removed were put back:\n");
        } else {
            out.push_str(" your lines were removed:\n");
            out.push_str(&quote(&h.agent_text, "- "));
            if !h.restored_text.is_empty() {
                out.push_str("  and the earlier lines restored:\n");
            }
        }
        out.push_str(&quote(&h.restored_text, "+ "));
    }
    if hunks.len() > MAX_LISTED {
        out.push_str(&format!("… and {} more.\n", hunks.len() - MAX_LISTED));
    }
    out.push(']');
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hunk(agent: &str, restored: &str) -> UndoneHunk {
        UndoneHunk {
            path: PathBuf::from("/p/a.txt"),
            line: 3,
            agent_text: agent.into(),
            restored_text: restored.into(),
            file_removed: false,
        }
    }

    #[test]
    fn the_note_lists_each_hunk_with_both_sides() {
        let text = note(&[
            hunk("new\n", "old\n"),
            hunk("", "kept\n"),
            UndoneHunk {
                file_removed: true,
                ..hunk("x\n", "")
            },
        ])
        .unwrap();
        assert!(text.contains("undid 3 of them"), "{text}");
        assert!(
            text.contains(
                "1. /p/a.txt, line 3: your lines were removed:\n    - new\n  and the earlier lines restored:\n    + old\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "2. /p/a.txt, line 3: the lines you removed were put back:\n    + kept\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("3. /p/a.txt: the file you created was removed."),
            "{text}"
        );
        assert!(note(&[]).is_none());
    }

    #[test]
    fn long_sides_are_cut() {
        let long = "é".repeat(QUOTE_CHARS + 10);
        let text = note(&[hunk(&long, "")]).unwrap();
        assert!(text.contains("… (10 more characters)"), "{text}");
    }
}
