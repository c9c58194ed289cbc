//! Shell command analysis for `Bash(...)` rules, on the AST of
//! `brush-parser`, never by string splitting. The grammar is the one of the
//! shell that runs the command (bash; POSIX when only `sh` exists — see
//! [`maia_tools::shell`]), so the checker and the shell read the same
//! commands.
//!
//! A command is broken into its simple commands ("parts"): those chained by
//! `&&`, `||`, `;`, `|`, `&` and newlines, those inside subshells, groups,
//! `if`/`for`/`while`/`case` and function bodies, the hidden ones run by
//! `$(…)`, backticks, process substitutions, here-documents, parameter
//! expansions and arithmetic, and every command position inside a command:
//! the commands run by wrappers (`timeout`, `env`, `sudo`, `xargs`…),
//! `find -exec`, the scripts of `sh -c`, `eval`, `trap`, `watch`, `su -c`,
//! `alias` definitions, and here-documents or here-strings fed to a shell.
//!
//! What cannot be known is marked, never guessed: a part whose program is
//! computed (`$X`, `$(…)`, a glob, a brace expansion) or that reads its
//! program from input (`… | sh`) is `dynamic`; a part using an option of
//! the built-in table ([`super::options`]) or a computed argument of a
//! program the table knows has an `unsafe_use`. The files a command writes
//! (redirections, `tee`, `dd of=`, `sort -o`…) are listed in `writes`.
//! `risky` records constructs no allow covers (any redirection, a
//! substitution, `[[ ]]`, `(( ))`, coprocesses).

mod command;
mod programs;
mod walk;

use super::catastrophe::{self, Place};

/// One simple command of a shell command line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Part {
    /// The words as written (quotes kept), joined by one space.
    pub raw: String,
    /// The same words with quoting removed (what the program receives,
    /// before variable expansion).
    pub plain: String,
    /// `plain` without leading assignments and with the program's folder
    /// dropped (`/bin/rm` → `rm`): used by deny and ask rules only.
    pub stripped: String,
    /// Run by a substitution or a nested script rather than directly.
    pub hidden: bool,
    /// The program is computed at run time or read from input: no rule can
    /// know what runs.
    pub dynamic: bool,
    /// Why no prefix allow rule covers this part (an option of the table,
    /// an argument computed at run time for a program the table knows).
    pub unsafe_use: Option<String>,
    /// A wrapper (`timeout 5`, `nice`, `env X=1`) whose own words need no
    /// rule: the command it runs is its own part, checked on its own.
    pub transparent: bool,
    /// Further readings deny and ask rules check: every word that may start
    /// the command a wrapper runs, with what follows.
    pub candidates: Vec<String>,
}

impl Part {
    /// Script text that could not be read as commands, kept whole as one
    /// hidden, dynamic part: deny and ask rules still see it, no allow rule
    /// covers it.
    fn unreadable(text: &str) -> Part {
        Part {
            raw: text.to_owned(),
            plain: text.to_owned(),
            stripped: text.to_owned(),
            hidden: true,
            dynamic: true,
            ..Default::default()
        }
    }
}

/// The analysis of a whole command line.
#[derive(Debug, Clone, Default)]
pub(crate) struct Analysis {
    /// False when the command could not be parsed: then only the raw text
    /// is known and no allow rule applies.
    pub parsed: bool,
    pub parts: Vec<Part>,
    /// A redirection, substitution or construct an allow never covers.
    pub risky: bool,
    /// Files written by redirection, `tee`, `dd of=` or an option, as
    /// written (unexpanded).
    pub writes: Vec<String>,
    /// Why the command is refused in every mode, whatever the rules.
    pub catastrophic: Option<String>,
    /// The command changes its folder (`cd`, `pushd`): relative write
    /// targets are then unknown.
    pub changes_dir: bool,
}

impl Analysis {
    /// Whether some part cannot be known by any rule.
    pub fn dynamic(&self) -> bool {
        self.parts.iter().any(|p| p.dynamic)
    }
}

/// Nesting limit for substitutions and nested scripts.
const MAX_DEPTH: usize = 16;

/// A word of a simple command.
#[derive(Debug, Clone, Default)]
struct Word {
    raw: String,
    text: String,
    /// Holds an expansion computed at run time (`$x`, `$(…)`, arithmetic).
    expansion: bool,
    /// Holds an unquoted glob or brace expansion.
    glob: bool,
}

impl Word {
    fn computed(&self) -> bool {
        self.expansion || self.glob
    }
}

/// What a command reads on standard input, when the command line says.
#[derive(Debug, Clone)]
struct Stdin {
    text: String,
    /// The text is known before the command runs.
    known: bool,
}

/// Parser options for the grammar of the shell that runs the commands.
fn options() -> brush_parser::ParserOptions {
    let posix = maia_tools::shell().posix;
    brush_parser::ParserOptions {
        // `!(…)`, `@(…)` only with `shopt -s extglob`, off by default in a
        // non-interactive bash: `(` always starts a subshell.
        enable_extended_globbing: false,
        posix_mode: posix,
        sh_mode: posix,
        ..Default::default()
    }
}

/// Parses `command`, run in `cwd` for a user whose home folder is `home`,
/// and lists its parts.
pub(crate) fn analyse(
    command: &str,
    cwd: &std::path::Path,
    home: Option<&std::path::Path>,
) -> Analysis {
    let mut out = Analysis {
        parsed: true,
        ..Default::default()
    };
    if command.trim().is_empty() {
        out.parsed = false;
        return out;
    }
    let place = Place::new(cwd, home);
    let mut walker = Walker {
        out: &mut out,
        depth: 0,
        hidden: false,
        place: &place,
        functions: Vec::new(),
        options: options(),
        path_set: false,
        path_next: false,
    };
    if !walker.script(command) {
        out.parsed = false;
        out.parts.clear();
        out.writes.clear();
        return out;
    }
    // Safety net: a `$(` or backtick the walk did not account for makes the
    // command unfit for an allow (it may be literal, e.g. in single quotes:
    // asking is the safe side).
    if command.contains("$(") || command.contains('`') || command.contains("<(") {
        out.risky = true;
    }
    if out.catastrophic.is_none()
        && let Some(t) = out.writes.iter().find(|t| catastrophe::is_device(t))
    {
        out.catastrophic = Some(format!("a write onto the device `{t}`"));
    }
    out
}

/// A function being walked, for fork bombs.
struct Function {
    name: String,
    self_calls: usize,
    background: bool,
}

struct Walker<'a> {
    out: &'a mut Analysis,
    depth: usize,
    hidden: bool,
    place: &'a Place,
    functions: Vec<Function>,
    options: brush_parser::ParserOptions,
    /// The script set its own `PATH` (`export PATH=…`, `PATH=…;`, `hash
    /// -p`): programs looked up from then on are not the ones named.
    path_set: bool,
    /// The next command is looked up through a `PATH` set for it alone
    /// (`PATH=… cmd`, `env PATH=… cmd`).
    path_next: bool,
}

/// An assignment to `PATH` (`PATH=…`, `PATH+=…`).
fn sets_path(word: &str) -> bool {
    word.starts_with("PATH=") || word.starts_with("PATH+=")
}

fn base(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// `{a,b}` or `{1..3}` in unquoted text.
fn brace_expansion(text: &str) -> bool {
    text.find('{').is_some_and(|open| {
        text[open..].find('}').is_some_and(|close| {
            let inner = &text[open + 1..open + close];
            inner.contains(',') || inner.contains("..")
        })
    })
}

fn join<'a>(words: impl Iterator<Item = &'a str>) -> String {
    words.collect::<Vec<_>>().join(" ")
}
