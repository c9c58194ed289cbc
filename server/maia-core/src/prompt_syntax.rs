//! The syntax a user types in a prompt, as in MAIA: `!command` and `@file`.
//!
//! Pure parsing, independent of sessions: [`parse_bang`] recognises a shell
//! command typed by the user, [`scan_file_refs`] finds `@` file references
//! (it only asks the disk whether a candidate path exists).
//!
//! # `!command`
//! - `!cmd args` → [`BangCommand::Run`] with `cmd args` (the rest of the
//!   prompt, trimmed, possibly several lines), run by the shell as typed.
//! - `!'command with args'` → `command with args`: when everything after `!`
//!   is one single-quoted string, the quotes are removed (`\'` stands for a
//!   literal quote; a missing closing quote is tolerated). Otherwise the quotes
//!   are left for the shell (`!'ls' -l` runs `'ls' -l`).
//! - `!` alone (or `!''`) → [`BangCommand::Help`].
//! - Leading whitespace before `!` is ignored; any other prompt → `None`.
//!
//! # `@file`
//! - `@a.ts`, `@ b.ts` (spaces or tabs between `@` and the path),
//!   `@'my folder/a b.txt'` (single quotes; `\'` is a literal quote), `@docs`
//!   (a folder), `@/full/path.txt`, `@~/notes.md` (home folder; `@~` is the
//!   home folder itself). Relative paths resolve against the cwd; the result
//!   is absolute and lexically normalised (`.`/`..` folded), so `@./a.ts` and
//!   `@a.ts` give the same path.
//! - A file of an additional workspace root is named by its absolute path,
//!   or by the root's folder name followed by the path inside it
//!   (`@lib/src/a.rs` for the root `/w/lib`), which applies only when the
//!   path names nothing under the cwd ([`scan_file_refs_in`]).
//! - An `@` preceded by a letter, digit, `_` or a path character
//!   (`/ \ . - ~ @`) is not a reference (`jean@example.fr`).
//! - A bare path ends at the first whitespace; trailing punctuation
//!   (`. , ; : ! ? ) ] } > " ' `` ` ``) is dropped when the path with it does
//!   not exist (`see @a.ts.` → `a.ts`, `(@docs)` → `docs`).
//! - A reference must name an existing file or folder (symlinks followed).
//!   Otherwise it stays ordinary text (`@mention`, `@Override`), with a
//!   [`FileRefWarning`] only when it looks like a path: it contains `/` or ends
//!   with a file extension (a dot followed by 1–10 letters or digits, at least
//!   one letter), and has none of the characters ``( ) [ ] { } < > " = ; | * ? $ ` ``
//!   that mark code rather than a path (`@app.route("/x")` gives no warning).
//!   A quoted reference is explicitly a path: it always warns when missing, as
//!   does an unterminated `@'…`.
//! - Every occurrence is reported, in text order, with its byte span (from the
//!   `@` to the end of the path or closing quote). The same file cited twice
//!   appears twice; [`crate::prompt::build_user_message`] injects it once.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use maia_tools::path::{normalize, resolve};

use crate::prompt::PromptPart;

/// A `!` prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BangCommand {
    /// `!` alone: show [`BANG_HELP`].
    Help,
    /// The command line to run in the cwd.
    Run(String),
}

/// The help shown for `!` alone.
pub const BANG_HELP: &str = "Run a shell command in the working folder: `!command args` or \
`!'command with args'`. No permission is asked (you typed it). Output is shown as it arrives, \
with the exit code on failure; the command is stopped after 2 minutes or when you cancel. \
The output (up to 30,000 characters) is added to the context of your next request; `/clear` \
drops it. Interactive programs (editors, pagers, prompts) are not supported.";

/// Recognises `!command`, `!'command with args'` and `!` alone.
pub fn parse_bang(text: &str) -> Option<BangCommand> {
    let rest = text.trim_start().strip_prefix('!')?.trim();
    if rest.is_empty() {
        return Some(BangCommand::Help);
    }
    let command = match rest.strip_prefix('\'').and_then(whole_quote) {
        Some(inner) => inner.trim().to_string(),
        None => rest.to_string(),
    };
    Some(if command.is_empty() {
        BangCommand::Help
    } else {
        BangCommand::Run(command)
    })
}

/// The content of a single-quoted string (opening quote already removed)
/// when its closing quote ends `inner` or is missing; `None` when text
/// follows the closing quote.
fn whole_quote(inner: &str) -> Option<String> {
    let (content, end) = read_quoted(inner);
    match end {
        Some(end) if end != inner.len() => None,
        _ => Some(content),
    }
}

/// Reads a single-quoted string whose opening quote is already consumed:
/// `\'` is a literal quote, other characters are kept as they are. Returns
/// the content and the byte offset just past the closing quote (`None` when
/// the quote is not closed).
fn read_quoted(s: &str) -> (String, Option<usize>) {
    let mut out = String::new();
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' if chars.peek().is_some_and(|&(_, n)| n == '\'') => {
                chars.next();
                out.push('\'');
            }
            '\'' => return (out, Some(i + 1)),
            c => out.push(c),
        }
    }
    (out, None)
}

/// A file or folder referenced with `@`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRef {
    /// Absolute, lexically normalised path of an existing file or folder.
    pub path: PathBuf,
    /// Byte range in the text, from the `@` to the end of the reference.
    pub span: Range<usize>,
}

/// Why an `@` that looks like a path is not a reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileRefProblem {
    /// No file or folder at that path.
    NotFound(PathBuf),
    /// `@~/…` while the home folder is unknown.
    NoHome,
    /// `@'…` without its closing quote.
    UnterminatedQuote,
}

/// An `@` reference that was left as text but deserves a warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRefWarning {
    /// The reference as typed, e.g. `@src/x.ts`.
    pub typed: String,
    /// Byte range of `typed` in the text.
    pub span: Range<usize>,
    pub problem: FileRefProblem,
}

impl fmt::Display for FileRefWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.problem {
            FileRefProblem::NotFound(path) => write!(
                f,
                "{}: no such file or folder ({}); left as text",
                self.typed,
                path.display()
            ),
            FileRefProblem::NoHome => write!(
                f,
                "{}: the home folder is unknown; left as text",
                self.typed
            ),
            FileRefProblem::UnterminatedQuote => {
                write!(f, "{}: missing closing quote; left as text", self.typed)
            }
        }
    }
}

/// What [`scan_file_refs`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileRefScan {
    /// References to existing files and folders, in text order.
    pub refs: Vec<FileRef>,
    /// `@` forms that look like paths but name nothing, in text order.
    pub warnings: Vec<FileRefWarning>,
}

impl FileRefScan {
    /// The prompt as parts: the text as typed, then each referenced file
    /// (duplicates are removed later by the message builder).
    pub fn prompt_parts(&self, text: &str) -> Vec<PromptPart> {
        let mut parts = vec![PromptPart::Text(text.to_string())];
        parts.extend(self.refs.iter().map(|r| PromptPart::File(r.path.clone())));
        parts
    }
}

/// The `@` references of `text` (see the module documentation).
pub fn find_file_refs(text: &str, cwd: &Path, home: Option<&Path>) -> Vec<FileRef> {
    scan_file_refs(text, cwd, home).refs
}

/// The `@` references of `text` and the warnings for path-like `@` forms
/// that name nothing. `cwd` must be absolute; `home` expands `@~`.
pub fn scan_file_refs(text: &str, cwd: &Path, home: Option<&Path>) -> FileRefScan {
    scan_file_refs_in(text, cwd, &[], home)
}

/// [`scan_file_refs`] in a session with additional workspace `roots`: a
/// relative reference that names nothing under `cwd` and starts with a
/// root's folder name (`@lib/src/a.rs` for the root `/w/lib`) names that
/// root's file. Absolute references name any file, in a root or not.
pub fn scan_file_refs_in(
    text: &str,
    cwd: &Path,
    roots: &[PathBuf],
    home: Option<&Path>,
) -> FileRefScan {
    let mut scan = FileRefScan::default();
    let mut pos = 0;
    while let Some(offset) = text[pos..].find('@') {
        let at = pos + offset;
        pos = at + 1;
        if text[..at].chars().next_back().is_some_and(blocks_reference) {
            continue;
        }
        let Some(candidate) = read_candidate(text, at) else {
            continue;
        };
        match candidate {
            Candidate::Unterminated { end } => scan.warnings.push(FileRefWarning {
                typed: text[at..end].to_string(),
                span: at..end,
                problem: FileRefProblem::UnterminatedQuote,
            }),
            Candidate::Paths { variants, quoted } => {
                if let Some((path, end)) = variants.iter().find_map(|(raw, end)| {
                    let path = expand(raw, cwd, home)?;
                    if path_exists(&path) {
                        return Some((path, *end));
                    }
                    in_root(raw, roots).map(|p| (p, *end))
                }) {
                    scan.refs.push(FileRef {
                        path,
                        span: at..end,
                    });
                    pos = end;
                    continue;
                }
                // The shortest variant is what the user most likely meant.
                let Some((raw, end)) = variants.last() else {
                    continue;
                };
                if !quoted && !looks_like_path(raw) {
                    continue;
                }
                let problem = match expand(raw, cwd, home) {
                    Some(path) => FileRefProblem::NotFound(path),
                    None => FileRefProblem::NoHome,
                };
                scan.warnings.push(FileRefWarning {
                    typed: text[at..*end].to_string(),
                    span: at..*end,
                    problem,
                });
            }
        }
    }
    scan
}

/// A character just before `@` that makes it part of a word or path.
fn blocks_reference(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '/' | '\\' | '.' | '-' | '~' | '@')
}

/// Characters dropped from the end of a bare path when needed.
fn is_trailing_punctuation(c: char) -> bool {
    matches!(
        c,
        '.' | ',' | ';' | ':' | '!' | '?' | ')' | ']' | '}' | '>' | '"' | '\'' | '`'
    )
}

enum Candidate {
    /// Possible paths, longest first, each with the byte offset where it ends.
    Paths {
        variants: Vec<(String, usize)>,
        quoted: bool,
    },
    /// `@'…` with no closing quote, up to the end of the line.
    Unterminated { end: usize },
}

/// Reads what follows the `@` at byte `at`.
fn read_candidate(text: &str, at: usize) -> Option<Candidate> {
    let after = at + 1;
    let start = after + text[after..].len() - text[after..].trim_start_matches([' ', '\t']).len();
    let rest = &text[start..];
    if rest.starts_with('@') {
        // `@@x`: the second `@` follows an `@`, so neither is a reference.
        return None;
    }
    if let Some(inner) = rest.strip_prefix('\'') {
        let (content, end) = read_quoted(inner);
        return match end {
            Some(_) if content.is_empty() => None,
            Some(end) => Some(Candidate::Paths {
                variants: vec![(content, start + 1 + end)],
                quoted: true,
            }),
            None => {
                let line_end = rest.find('\n').unwrap_or(rest.len());
                Some(Candidate::Unterminated {
                    end: start + rest[..line_end].trim_end().len(),
                })
            }
        };
    }
    let token_len = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let mut token = &rest[..token_len];
    let mut variants = Vec::new();
    while !token.is_empty() {
        variants.push((token.to_string(), start + token.len()));
        match token.chars().next_back() {
            Some(c) if is_trailing_punctuation(c) => token = &token[..token.len() - c.len_utf8()],
            _ => break,
        }
    }
    (!variants.is_empty()).then_some(Candidate::Paths {
        variants,
        quoted: false,
    })
}

/// The absolute path a reference names; `None` for `~` without a home.
fn expand(raw: &str, cwd: &Path, home: Option<&Path>) -> Option<PathBuf> {
    if raw == "~" {
        return home.map(normalize);
    }
    if let Some(rest) = raw.strip_prefix("~/") {
        return home.map(|h| resolve(h, rest));
    }
    Some(resolve(cwd, raw))
}

/// `name/rest` (or `name`) under the additional root whose folder is
/// called `name`, when it exists; the first such root wins.
fn in_root(raw: &str, roots: &[PathBuf]) -> Option<PathBuf> {
    let relative = Path::new(raw);
    if relative.is_absolute() || raw.starts_with('~') {
        return None;
    }
    let mut parts = relative.components();
    let first = match parts.next()? {
        std::path::Component::Normal(first) => first,
        _ => return None,
    };
    let rest = parts.as_path();
    roots
        .iter()
        .filter(|root| root.file_name() == Some(first))
        .map(|root| (root, normalize(&root.join(rest))))
        // `..` does not climb out of the root.
        .find(|(root, path)| path.starts_with(root) && path_exists(path))
        .map(|(_, path)| path)
}

fn path_exists(path: &Path) -> bool {
    std::fs::metadata(path).is_ok()
}

/// Contains `/` or ends with a file extension, and has no code characters.
fn looks_like_path(raw: &str) -> bool {
    const CODE: &str = "()[]{}<>\"=;|*?$`";
    if raw.chars().any(|c| CODE.contains(c)) {
        return false;
    }
    if raw.contains('/') {
        return true;
    }
    let name = raw.rsplit('/').next().unwrap_or(raw);
    match name.rsplit_once('.') {
        Some((_, ext)) => {
            (1..=10).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && ext.chars().any(|c| c.is_ascii_alphabetic())
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cmd: &str) -> Option<BangCommand> {
        Some(BangCommand::Run(cmd.to_string()))
    }

    #[test]
    fn prompt_syntax_bang_forms() {
        let cases: &[(&str, Option<BangCommand>)] = &[
            ("!", Some(BangCommand::Help)),
            ("  !  \n", Some(BangCommand::Help)),
            ("!''", Some(BangCommand::Help)),
            ("! ' '", Some(BangCommand::Help)),
            ("!ls", run("ls")),
            ("!ls -la src", run("ls -la src")),
            ("! git status ", run("git status")),
            ("\n!pwd", run("pwd")),
            (
                "!'npm test -- --watch=false'",
                run("npm test -- --watch=false"),
            ),
            ("! 'ls -l'", run("ls -l")),
            ("!'echo it\\'s'", run("echo it's")),
            ("!'echo unterminated", run("echo unterminated")),
            ("!'ls' -l", run("'ls' -l")),
            ("!echo 'a b' | wc -c", run("echo 'a b' | wc -c")),
            ("!echo it\\'s", run("echo it\\'s")),
            ("!cd x\nmake", run("cd x\nmake")),
            ("!!", run("!")),
            ("ls", None),
            ("", None),
            ("run !ls", None),
            ("'!ls'", None),
        ];
        for (text, expected) in cases {
            assert_eq!(&parse_bang(text), expected, "{text:?}");
        }
        assert!(BANG_HELP.contains("!'command with args'"));
    }

    struct Tree {
        _dir: tempfile::TempDir,
        cwd: PathBuf,
        home: PathBuf,
    }

    fn tree() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("proj");
        let home = dir.path().join("home");
        for d in [
            cwd.join("docs"),
            cwd.join("src"),
            cwd.join("my folder"),
            home.clone(),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        for f in [
            cwd.join("a.ts"),
            cwd.join("b.ts"),
            cwd.join("src/main.rs"),
            cwd.join("my folder/a b.txt"),
            cwd.join("it's.txt"),
            cwd.join("v1.2"),
            cwd.join("README"),
            home.join("notes.md"),
        ] {
            std::fs::write(f, "x").unwrap();
        }
        Tree {
            _dir: dir,
            cwd,
            home,
        }
    }

    /// (path relative to the temp root, typed text) for each reference.
    fn refs(t: &Tree, text: &str) -> Vec<(String, String)> {
        let root = t.cwd.parent().unwrap();
        find_file_refs(text, &t.cwd, Some(&t.home))
            .into_iter()
            .map(|r| {
                let rel = r.path.strip_prefix(root).unwrap().display().to_string();
                (rel, text[r.span].to_string())
            })
            .collect()
    }

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn prompt_syntax_all_reference_forms() {
        let t = tree();
        let abs = t.cwd.join("src/main.rs").display().to_string();
        let cases: Vec<(String, Vec<(&str, &str)>)> = vec![
            ("@a.ts".into(), vec![("proj/a.ts", "@a.ts")]),
            (
                "compare @a.ts and @ b.ts".into(),
                vec![("proj/a.ts", "@a.ts"), ("proj/b.ts", "@ b.ts")],
            ),
            ("@\tb.ts".into(), vec![("proj/b.ts", "@\tb.ts")]),
            (
                "read @'my folder/a b.txt' please".into(),
                vec![("proj/my folder/a b.txt", "@'my folder/a b.txt'")],
            ),
            (
                "@ 'my folder/a b.txt'".into(),
                vec![("proj/my folder/a b.txt", "@ 'my folder/a b.txt'")],
            ),
            (
                "@'it\\'s.txt'".into(),
                vec![("proj/it's.txt", "@'it\\'s.txt'")],
            ),
            ("summarise @docs".into(), vec![("proj/docs", "@docs")]),
            (
                "@docs/ and @src".into(),
                vec![("proj/docs", "@docs/"), ("proj/src", "@src")],
            ),
            ("@~/notes.md".into(), vec![("home/notes.md", "@~/notes.md")]),
            ("@~".into(), vec![("home", "@~")]),
            (
                "@./src/../a.ts".into(),
                vec![("proj/a.ts", "@./src/../a.ts")],
            ),
            (
                "@../home/notes.md".into(),
                vec![("home/notes.md", "@../home/notes.md")],
            ),
            (
                "@v1.2 @README".into(),
                vec![("proj/v1.2", "@v1.2"), ("proj/README", "@README")],
            ),
            ("look at @a.ts.".into(), vec![("proj/a.ts", "@a.ts")]),
            (
                "(@a.ts), @b.ts: and @docs!".into(),
                vec![
                    ("proj/a.ts", "@a.ts"),
                    ("proj/b.ts", "@b.ts"),
                    ("proj/docs", "@docs"),
                ],
            ),
            (
                "`@src/main.rs`".into(),
                vec![("proj/src/main.rs", "@src/main.rs")],
            ),
            ("\"@a.ts\"".into(), vec![("proj/a.ts", "@a.ts")]),
            ("line one\n@a.ts\n".into(), vec![("proj/a.ts", "@a.ts")]),
            (
                "@a.ts @a.ts".into(),
                vec![("proj/a.ts", "@a.ts"), ("proj/a.ts", "@a.ts")],
            ),
            ("é@a.ts ça @b.ts".into(), vec![("proj/b.ts", "@b.ts")]),
            // Not references.
            ("ping @mention about @Override".into(), vec![]),
            ("mail jean@example.fr or x_@a.ts".into(), vec![]),
            (
                "node_modules/@a.ts .@a.ts -@a.ts ~@a.ts @@a.ts".into(),
                vec![],
            ),
            ("@ \n a.ts".into(), vec![]),
            ("@\na.ts".into(), vec![]),
            ("@".into(), vec![]),
            ("@''".into(), vec![]),
            ("meet @ 5pm".into(), vec![]),
            ("@a.tsx @A.ts".into(), vec![]),
        ];
        for (text, expected) in cases {
            assert_eq!(refs(&t, &text), pairs(&expected), "{text:?}");
        }
        let absolute = format!("see @{abs}");
        assert_eq!(
            refs(&t, &absolute),
            vec![("proj/src/main.rs".to_string(), format!("@{abs}"))]
        );
    }

    #[test]
    fn prompt_syntax_spans_are_byte_ranges() {
        let t = tree();
        let text = "é @a.ts et @ 'my folder/a b.txt'.";
        let found = find_file_refs(text, &t.cwd, Some(&t.home));
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].span, 3..8);
        assert_eq!(found[0].path, t.cwd.join("a.ts"));
        assert_eq!(&text[found[1].span.clone()], "@ 'my folder/a b.txt'");
        assert_eq!(found[1].path, t.cwd.join("my folder/a b.txt"));
    }

    #[test]
    fn prompt_syntax_warnings_only_for_path_like_words() {
        let t = tree();
        let text = "fix @@a.ts @src/x.ts, @missing.md and @mention, @Override, @v2.0, \
            jean@example.fr, @app.route(\"/x\"), @'gone file', @user/repo, @'open";
        let scan = scan_file_refs(text, &t.cwd, Some(&t.home));
        assert!(scan.refs.is_empty());
        let typed: Vec<_> = scan.warnings.iter().map(|w| w.typed.as_str()).collect();
        assert_eq!(
            typed,
            [
                "@src/x.ts",
                "@missing.md",
                "@'gone file'",
                "@user/repo",
                "@'open"
            ]
        );
        for w in &scan.warnings {
            assert_eq!(&text[w.span.clone()], w.typed);
        }
        assert_eq!(
            scan.warnings[0].problem,
            FileRefProblem::NotFound(t.cwd.join("src/x.ts"))
        );
        assert_eq!(scan.warnings[4].problem, FileRefProblem::UnterminatedQuote);
        let message = scan.warnings[0].to_string();
        assert!(
            message.starts_with("@src/x.ts: no such file or folder (")
                && message.ends_with("left as text"),
            "{message}"
        );
    }

    #[test]
    fn prompt_syntax_home_unknown() {
        let t = tree();
        let scan = scan_file_refs("@~/notes.md and @a.ts", &t.cwd, None);
        assert_eq!(
            scan.refs,
            vec![FileRef {
                path: t.cwd.join("a.ts"),
                span: 16..21
            }]
        );
        assert_eq!(scan.warnings.len(), 1);
        assert_eq!(scan.warnings[0].problem, FileRefProblem::NoHome);
        assert!(
            scan.warnings[0]
                .to_string()
                .contains("home folder is unknown")
        );
    }

    #[test]
    fn prompt_syntax_prompt_parts() {
        let t = tree();
        let text = "compare @a.ts and @ b.ts, again @a.ts";
        let scan = scan_file_refs(text, &t.cwd, Some(&t.home));
        assert_eq!(
            scan.prompt_parts(text),
            vec![
                PromptPart::Text(text.to_string()),
                PromptPart::File(t.cwd.join("a.ts")),
                PromptPart::File(t.cwd.join("b.ts")),
                PromptPart::File(t.cwd.join("a.ts")),
            ]
        );
    }

    #[test]
    fn prompt_syntax_path_heuristics() {
        for yes in [
            "src/x.ts",
            "a.md",
            ".env",
            "~/n",
            "x/",
            "Makefile.am",
            "a.tar.gz",
        ] {
            assert!(looks_like_path(yes), "{yes}");
        }
        for no in [
            "mention",
            "Override",
            "v2.0",
            "1.5",
            "app.route(\"/\")",
            "x.verylongextension",
            "a.",
            "foo=bar/baz",
        ] {
            assert!(!looks_like_path(no), "{no}");
        }
    }

    #[test]
    fn refs_in_additional_roots() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("proj");
        let lib = dir.path().join("lib");
        std::fs::create_dir_all(cwd.join("src")).unwrap();
        std::fs::create_dir_all(lib.join("src")).unwrap();
        std::fs::write(lib.join("src/a.rs"), "a").unwrap();
        std::fs::write(cwd.join("src/b.rs"), "b").unwrap();
        let roots = vec![lib.clone()];
        let found = |text: &str| -> Vec<PathBuf> {
            scan_file_refs_in(text, &cwd, &roots, None)
                .refs
                .into_iter()
                .map(|r| r.path)
                .collect()
        };
        assert_eq!(found("see @lib/src/a.rs"), vec![lib.join("src/a.rs")]);
        assert_eq!(found("@lib"), vec![lib.clone()]);
        let abs = format!("@{}", lib.join("src/a.rs").display());
        assert_eq!(found(&abs), vec![lib.join("src/a.rs")]);
        assert_eq!(found("@src/b.rs"), vec![cwd.join("src/b.rs")]);
        // `..` does not leave the root; unknown root names stay text.
        assert!(found("@lib/../proj/src/b.rs").is_empty());
        assert!(found("@other/src/a.rs").is_empty());
        // A folder of the cwd with the root's name wins.
        std::fs::create_dir_all(cwd.join("lib/src")).unwrap();
        std::fs::write(cwd.join("lib/src/a.rs"), "mine").unwrap();
        assert_eq!(found("@lib/src/a.rs"), vec![cwd.join("lib/src/a.rs")]);
        // Without roots, nothing changes.
        assert!(scan_file_refs("@lib/src/x.rs", &cwd, None).refs.is_empty());
    }
}
