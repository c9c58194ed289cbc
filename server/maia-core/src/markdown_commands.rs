//! Markdown commands: `<name>.md` files in `.maia/commands` and
//! `.claude/commands` (of the home folder and of the working folder),
//! typed as `/name arguments`.
//!
//! The file's body (without its front matter) becomes the user's message,
//! with `$ARGUMENTS` replaced by what follows the name (when the body has
//! no `$ARGUMENTS`, non-empty arguments are appended). The optional front
//! matter gives `description` (else the body's first line) and
//! `argument-hint` (the editor's input hint); other keys are ignored.
//!
//! Precedence, lowest first ([`roots`]): `~/.claude/commands`,
//! `<cwd>/.claude/commands`, `~/.maia/commands`, `<cwd>/.maia/commands`: a
//! later folder wins a name, so MAIA's places win over `.claude` ones. MAIA's
//! built-in commands and skills win over a Markdown command of the same name.
//!
//! A command is text the user chose to send: it runs no program and its
//! `@` references and `` !`…` `` lines are not expanded (a cloned
//! repository's command file must not read `~/.ssh` into the context or
//! run anything unasked). For the same reason a command file of the
//! working folder must lie inside it once symlinks are followed (a link to
//! `~/.ssh/id_ed25519` named `review.md` is skipped), and no command file
//! is read beyond [`MAX_COMMAND_BYTES`].

use std::path::{Path, PathBuf};

use crate::md_files::{self, read_bounded};
use crate::skills::{self, ARGUMENTS_PLACEHOLDER};

/// Characters of a description taken from the body's first line.
const DESCRIPTION_CHARS: usize = 120;

/// The largest command file read (bigger ones are skipped with a warning).
pub const MAX_COMMAND_BYTES: u64 = md_files::MAX_FILE_BYTES;

/// One Markdown command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkdownCommand {
    /// The file name without `.md`.
    pub name: String,
    pub description: String,
    /// `argument-hint` of the front matter.
    pub hint: Option<String>,
    pub path: PathBuf,
    /// The body uses `$ARGUMENTS`.
    pub takes_arguments: bool,
    /// The folder the file must resolve inside (the working folder, for
    /// its own commands); `None` for the user's.
    pub inside: Option<PathBuf>,
}

/// The result of [`load`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadedCommands {
    /// Sorted by name.
    pub commands: Vec<MarkdownCommand>,
    /// Problems found (each names the file).
    pub warnings: Vec<String>,
}

impl LoadedCommands {
    /// The command called `name`, if any.
    pub fn get(&self, name: &str) -> Option<&MarkdownCommand> {
        self.commands.iter().find(|c| c.name == name)
    }
}

/// The folders read, lowest precedence first (duplicates removed).
pub fn roots(home: Option<&Path>, cwd: &Path) -> Vec<PathBuf> {
    md_files::unique([".claude", ".maia"].into_iter().flat_map(|family| {
        [home, Some(cwd)]
            .into_iter()
            .flatten()
            .map(move |base| base.join(family).join("commands"))
    }))
}

/// Loads the Markdown commands for a session in `cwd`. Problems are
/// returned as warnings (and logged), never errors.
pub fn load(home: Option<&Path>, cwd: &Path) -> LoadedCommands {
    let roots = roots(home, cwd).into_iter().map(|root| {
        let inside = root.starts_with(cwd).then(|| cwd.to_path_buf());
        (root, inside)
    });
    let (commands, warnings) = md_files::load_layered(roots, load_root, |c| &c.name);
    LoadedCommands { commands, warnings }
}

/// A name the user can type after `/`.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

fn load_root(
    root: &Path,
    inside: Option<&Path>,
    warnings: &mut Vec<String>,
) -> Vec<MarkdownCommand> {
    let files = md_files::list(root, warnings, |p| {
        p.extension().is_some_and(|e| e == "md") && p.is_file()
    });
    files
        .iter()
        .filter_map(|path| load_command(path, inside, warnings))
        .collect()
}

fn load_command(
    path: &Path,
    inside: Option<&Path>,
    warnings: &mut Vec<String>,
) -> Option<MarkdownCommand> {
    let name = path.file_stem().and_then(|n| n.to_str()).unwrap_or("");
    if !valid_name(name) {
        warnings.push(format!(
            "command {}: the name must be letters, digits, `-`, `_`, `.` or `:`; skipped",
            path.display()
        ));
        return None;
    }
    let text = match read_bounded(path, inside) {
        Ok(text) => text,
        Err(e) => {
            warnings.push(format!(
                "cannot read command {}: {e}; skipped",
                path.display()
            ));
            return None;
        }
    };
    let header = match skills::parse_front_matter(&text) {
        Ok(header) => header,
        Err(e) => {
            warnings.push(format!(
                "command {}: invalid front matter ({e}); skipped",
                path.display()
            ));
            return None;
        }
    };
    let body = skills::body_of(&text, ARGUMENTS_PLACEHOLDER);
    let description = header
        .description
        .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|d| !d.is_empty())
        .or_else(|| first_line(&body))
        .unwrap_or_else(|| format!("Run {}", path.display()));
    Some(MarkdownCommand {
        name: name.to_owned(),
        description,
        hint: header.argument_hint.filter(|h| !h.trim().is_empty()),
        path: path.to_path_buf(),
        takes_arguments: body.contains(ARGUMENTS_PLACEHOLDER),
        inside: inside.map(Path::to_path_buf),
    })
}

/// The body's first non-empty line, without Markdown heading marks,
/// shortened.
fn first_line(body: &str) -> Option<String> {
    let line = body
        .lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| !l.is_empty())?;
    let mut out: String = line.chars().take(DESCRIPTION_CHARS).collect();
    if line.chars().count() > DESCRIPTION_CHARS {
        out.push('…');
    }
    Some(out)
}

/// The message a command sends: its body with `$ARGUMENTS` replaced by
/// `arguments`, or the arguments appended when the body does not use them.
pub fn message(command: &MarkdownCommand, arguments: &str) -> std::io::Result<String> {
    let text = read_bounded(&command.path, command.inside.as_deref())?;
    Ok(skills::message_of(&text, arguments))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn loads_four_places_maia_wins() {
        let tmp = tempfile::tempdir().unwrap();
        let (home, cwd) = (tmp.path().join("home"), tmp.path().join("proj"));
        write(
            &home.join(".claude/commands/fix.md"),
            "---\ndescription: claude home\n---\nFix $ARGUMENTS",
        );
        write(
            &cwd.join(".claude/commands/fix.md"),
            "---\ndescription: claude project\nargument-hint: '[issue]'\n---\nFix issue $ARGUMENTS now",
        );
        write(
            &home.join(".maia/commands/review.md"),
            "# Review the diff\n\nLook at git diff.",
        );
        write(
            &cwd.join(".claude/commands/review.md"),
            "---\ndescription: claude review\n---\nx",
        );
        write(&cwd.join(".maia/commands/bad name.md"), "x");
        write(&cwd.join(".maia/commands/broken.md"), "---\n: : [\n---\nx");
        write(&cwd.join(".maia/commands/notes.txt"), "not a command");
        let loaded = load(Some(&home), &cwd);
        let names: Vec<&str> = loaded.commands.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["fix", "review"]);
        let fix = loaded.get("fix").unwrap();
        assert_eq!(fix.description, "claude project");
        assert_eq!(fix.hint.as_deref(), Some("[issue]"));
        assert!(fix.takes_arguments);
        assert_eq!(message(fix, "#42").unwrap(), "Fix issue #42 now");
        // MAIA's home folder wins over the project's .claude folder.
        let review = loaded.get("review").unwrap();
        assert_eq!(review.description, "Review the diff");
        assert!(!review.takes_arguments && review.hint.is_none());
        assert_eq!(
            message(review, "src/").unwrap(),
            "# Review the diff\n\nLook at git diff.\n\nArguments: src/"
        );
        assert_eq!(
            message(review, "").unwrap(),
            "# Review the diff\n\nLook at git diff."
        );
        assert_eq!(loaded.warnings.len(), 2, "{:?}", loaded.warnings);
    }

    #[test]
    fn no_folder_no_commands() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(load(None, tmp.path()), LoadedCommands::default());
        assert_eq!(roots(Some(tmp.path()), tmp.path()).len(), 2);
    }

    #[test]
    fn project_commands_stay_in_the_project_and_are_bounded() {
        let tmp = tempfile::tempdir().unwrap();
        let (home, cwd) = (tmp.path().join("home"), tmp.path().join("proj"));
        // A secret outside the project, linked from a cloned repository.
        write(
            &home.join(".ssh/id_ed25519"),
            "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret",
        );
        write(&cwd.join("docs/review.md"), "Review the diff");
        let commands = cwd.join(".claude/commands");
        std::fs::create_dir_all(&commands).unwrap();
        std::os::unix::fs::symlink(home.join(".ssh/id_ed25519"), commands.join("key.md")).unwrap();
        std::os::unix::fs::symlink(cwd.join("docs/review.md"), commands.join("review.md")).unwrap();
        write(
            &cwd.join(".maia/commands/huge.md"),
            &"x".repeat(MAX_COMMAND_BYTES as usize + 1),
        );
        // The user's own folder may link where it likes.
        std::fs::create_dir_all(home.join(".maia/commands")).unwrap();
        std::os::unix::fs::symlink(
            home.join(".ssh/id_ed25519"),
            home.join(".maia/commands/mine.md"),
        )
        .unwrap();
        let loaded = load(Some(&home), &cwd);
        let names: Vec<&str> = loaded.commands.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["mine", "review"], "{:?}", loaded.warnings);
        assert_eq!(loaded.warnings.len(), 2, "{:?}", loaded.warnings);
        assert!(
            loaded
                .warnings
                .iter()
                .any(|w| w.contains("key.md") && w.contains("outside the project folder"))
        );
        assert!(
            loaded
                .warnings
                .iter()
                .any(|w| w.contains("huge.md") && w.contains("larger than"))
        );
        assert!(!loaded.warnings.iter().any(|w| w.contains("secret")));
        // A link re-pointed after loading is refused when the command runs.
        let review = loaded.get("review").unwrap().clone();
        assert_eq!(message(&review, "").unwrap(), "Review the diff");
        std::fs::remove_file(commands.join("review.md")).unwrap();
        std::os::unix::fs::symlink(home.join(".ssh/id_ed25519"), commands.join("review.md"))
            .unwrap();
        assert!(message(&review, "").is_err());
    }
}
