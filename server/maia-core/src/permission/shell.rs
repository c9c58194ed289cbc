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

use brush_parser::ast;
use brush_parser::word::{WordPiece, WordPieceWithSource};

use super::catastrophe::{self, Place};
use super::options;

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

/// Shells: `-c` takes a script, stdin is a script otherwise.
const SHELLS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "mksh",
    "ash",
    "fish",
    "csh",
    "tcsh",
    "busybox-sh",
];

/// Interpreters that read a program from input when given no file.
const INTERPRETERS: &[&str] = &[
    "python",
    "python2",
    "python3",
    "pypy",
    "pypy3",
    "node",
    "nodejs",
    "perl",
    "ruby",
    "php",
    "lua",
    "Rscript",
    "tclsh",
    "wish",
    "osascript",
    "awk",
    "gawk",
    "bc",
    "dc",
    "deno",
    "bun",
    "irb",
    "jshell",
    "groovy",
    "julia",
    "guile",
    "racket",
    "sbcl",
    "expect",
];

/// How a wrapper reads its own options before the command it runs.
struct Wrapper {
    name: &'static str,
    /// Options that take a value (as the next word when not attached).
    valued: &'static [&'static str],
    /// Operands before the command (`timeout DURATION`, `chroot DIR`).
    positionals: usize,
    /// Its own words need no rule (it only adjusts how the command runs).
    transparent: bool,
    /// Options whose value is a shell script (`su -c`, `flock -c`).
    script_options: &'static [&'static str],
}

const fn w(
    name: &'static str,
    valued: &'static [&'static str],
    positionals: usize,
    transparent: bool,
) -> Wrapper {
    Wrapper {
        name,
        valued,
        positionals,
        transparent,
        script_options: &[],
    }
}

const WRAPPERS: &[Wrapper] = &[
    w("nohup", &[], 0, true),
    w("nice", &["-n", "--adjustment"], 0, true),
    w(
        "timeout",
        &["-s", "--signal", "-k", "--kill-after"],
        1,
        true,
    ),
    w("time", &["-f", "--format", "-o", "--output"], 0, true),
    w("command", &[], 0, true),
    w("builtin", &[], 0, true),
    w("exec", &["-a"], 0, true),
    w(
        "stdbuf",
        &["-i", "-o", "-e", "--input", "--output", "--error"],
        0,
        true,
    ),
    w("setsid", &[], 0, true),
    w(
        "ionice",
        &["-c", "-n", "-p", "-P", "-u", "--class", "--classdata"],
        0,
        true,
    ),
    w("chrt", &[], 1, true),
    w("taskset", &[], 1, true),
    w("unbuffer", &[], 0, true),
    w(
        "env",
        &[
            "-u",
            "--unset",
            "-C",
            "--chdir",
            "-S",
            "--split-string",
            "-P",
        ],
        0,
        true,
    ),
    w("busybox", &[], 0, true),
    w(
        "sudo",
        &[
            "-u",
            "-g",
            "-h",
            "-p",
            "-C",
            "-D",
            "-r",
            "-t",
            "-U",
            "-T",
            "--user",
            "--group",
            "--host",
            "--prompt",
            "--chdir",
            "--role",
            "--type",
            "--other-user",
            "--close-from",
            "--command-timeout",
        ],
        0,
        false,
    ),
    w("doas", &["-u", "-C"], 0, false),
    w("chroot", &["--userspec", "--groups"], 1, false),
    w(
        "unshare",
        &[
            "--map-user",
            "--map-group",
            "-S",
            "-G",
            "--setuid",
            "--setgid",
            "-R",
            "--root",
            "-w",
            "--wd",
        ],
        0,
        false,
    ),
    w("nsenter", &["-t", "--target", "-S", "-G"], 0, false),
    w(
        "strace",
        &[
            "-o", "-e", "-p", "-s", "-u", "-E", "-a", "-b", "-I", "-O", "-P", "-S", "-X",
        ],
        0,
        false,
    ),
    w(
        "ltrace",
        &[
            "-o", "-e", "-p", "-s", "-u", "-a", "-n", "-A", "-D", "-F", "-l", "-x",
        ],
        0,
        false,
    ),
    w(
        "xargs",
        &[
            "-a",
            "-d",
            "-E",
            "-e",
            "-I",
            "-i",
            "-L",
            "-l",
            "-n",
            "-P",
            "-s",
            "--arg-file",
            "--delimiter",
            "--eof",
            "--replace",
            "--max-lines",
            "--max-args",
            "--max-procs",
            "--max-chars",
            "--process-slot-var",
        ],
        0,
        false,
    ),
    w(
        "watch",
        &[
            "-n",
            "--interval",
            "-d",
            "--differences",
            "-q",
            "--equexit",
            "--errexit",
        ],
        0,
        false,
    ),
    w(
        "flock",
        &["-w", "--timeout", "-E", "--conflict-exit-code"],
        1,
        false,
    ),
    Wrapper {
        name: "su",
        valued: &["-s", "--shell", "-g", "--group", "-G", "--supp-group", "-w"],
        positionals: 0,
        transparent: false,
        script_options: &["-c", "--command", "--session-command"],
    },
    Wrapper {
        name: "runuser",
        valued: &["-u", "--user", "-g", "--group", "-s", "--shell"],
        positionals: 0,
        transparent: false,
        script_options: &["-c", "--command"],
    },
    Wrapper {
        name: "script",
        valued: &["-E", "--echo", "-I", "-O", "-B", "-T", "-m"],
        positionals: 0,
        transparent: false,
        script_options: &["-c", "--command"],
    },
    w(
        "systemd-run",
        &[
            "-p",
            "--property",
            "-u",
            "--unit",
            "-E",
            "--setenv",
            "--uid",
            "--gid",
            "-M",
            "--machine",
        ],
        0,
        false,
    ),
    w("parallel", &[], 0, false),
    w("entr", &[], 0, false),
    w("catchsegv", &[], 0, false),
    w("valgrind", &[], 0, false),
    w("gdb", &["-ex", "-x", "-p", "-iex"], 0, false),
];

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

/// Parses `command`, run in `cwd`, and lists its parts.
pub(crate) fn analyse(command: &str, cwd: &std::path::Path) -> Analysis {
    let mut out = Analysis {
        parsed: true,
        ..Default::default()
    };
    if command.trim().is_empty() {
        out.parsed = false;
        return out;
    }
    let place = Place::new(cwd);
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

impl Walker<'_> {
    /// Parses and walks a script; false when it does not parse.
    fn script(&mut self, text: &str) -> bool {
        if self.depth > MAX_DEPTH {
            return false;
        }
        let mut parser = brush_parser::Parser::new(std::io::Cursor::new(text), &self.options);
        // brush-parser can panic on hostile input (found by fuzzing: a
        // file-descriptor number too large for its type before a
        // redirection); a panic counts as "does not parse".
        let parsed =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| parser.parse_program()));
        match parsed.unwrap_or(Err(brush_parser::ParseError::ParsingAtEndOfInput)) {
            Ok(program) => {
                for list in &program.complete_commands {
                    self.list(list);
                }
                true
            }
            Err(_) => false,
        }
    }

    /// A hidden script (substitution body, `sh -c` argument): when it does
    /// not parse, its raw text is kept as one dynamic part so deny and ask
    /// rules still see it and nothing allows it.
    fn hidden_script(&mut self, text: &str) {
        let was = self.hidden;
        self.hidden = true;
        self.depth += 1;
        let before = self.out.parts.len();
        if !self.script(text) {
            self.out.parts.truncate(before);
            self.out.parts.push(Part::unreadable(text.trim()));
            self.out.risky = true;
        }
        self.depth -= 1;
        self.hidden = was;
    }

    fn list(&mut self, list: &ast::CompoundList) {
        for ast::CompoundListItem(and_or, separator) in &list.0 {
            let background = matches!(separator, ast::SeparatorOperator::Async);
            let calls_before = self.functions.last().map(|f| f.self_calls);
            self.pipeline(&and_or.first);
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p),
                }
            }
            if background
                && let Some(f) = self.functions.last_mut()
                && calls_before.is_some_and(|c| f.self_calls > c)
            {
                f.background = true;
            }
        }
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline) {
        for command in &pipeline.seq {
            self.command(command);
        }
    }

    fn command(&mut self, command: &ast::Command) {
        match command {
            ast::Command::Simple(simple) => self.simple(simple),
            ast::Command::Compound(compound, redirects) => {
                self.compound(compound);
                if let Some(list) = redirects {
                    for r in &list.0 {
                        self.redirect(r);
                    }
                }
            }
            ast::Command::Function(def) => {
                self.functions.push(Function {
                    name: def.fname.value.clone(),
                    self_calls: 0,
                    background: false,
                });
                self.compound(&def.body.0);
                if let Some(list) = &def.body.1 {
                    for r in &list.0 {
                        self.redirect(r);
                    }
                }
                if let Some(f) = self.functions.pop()
                    && (f.self_calls >= 2 || f.background)
                    && self.out.catastrophic.is_none()
                {
                    self.out.catastrophic = Some(format!(
                        "a fork bomb (the function `{}` spawns itself)",
                        f.name
                    ));
                }
            }
            ast::Command::ExtendedTest(test, redirects) => {
                self.out.risky = true;
                self.test_expr(&test.expr);
                if let Some(list) = redirects {
                    for r in &list.0 {
                        self.redirect(r);
                    }
                }
            }
        }
    }

    fn test_expr(&mut self, expr: &ast::ExtendedTestExpr) {
        match expr {
            ast::ExtendedTestExpr::And(a, b) | ast::ExtendedTestExpr::Or(a, b) => {
                self.test_expr(a);
                self.test_expr(b);
            }
            ast::ExtendedTestExpr::Not(a) | ast::ExtendedTestExpr::Parenthesized(a) => {
                self.test_expr(a)
            }
            ast::ExtendedTestExpr::UnaryTest(_, w) => {
                self.word(&w.value);
            }
            ast::ExtendedTestExpr::BinaryTest(_, a, b) => {
                self.word(&a.value);
                self.word(&b.value);
            }
        }
    }

    fn compound(&mut self, compound: &ast::CompoundCommand) {
        match compound {
            ast::CompoundCommand::Arithmetic(a) => {
                self.out.risky = true;
                self.word(&a.expr.value);
            }
            ast::CompoundCommand::ArithmeticForClause(f) => {
                self.out.risky = true;
                for e in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.word(&e.value);
                }
                self.list(&f.body.list);
            }
            ast::CompoundCommand::BraceGroup(b) => self.list(&b.list),
            ast::CompoundCommand::Subshell(s) => self.list(&s.list),
            ast::CompoundCommand::ForClause(f) => {
                for w in f.values.iter().flatten() {
                    self.word(&w.value);
                }
                self.list(&f.body.list);
            }
            ast::CompoundCommand::CaseClause(c) => {
                self.word(&c.value.value);
                for item in &c.cases {
                    for p in &item.patterns {
                        self.word(&p.value);
                    }
                    if let Some(cmd) = &item.cmd {
                        self.list(cmd);
                    }
                }
            }
            ast::CompoundCommand::IfClause(i) => {
                self.list(&i.condition);
                self.list(&i.then);
                for e in i.elses.iter().flatten() {
                    if let Some(c) = &e.condition {
                        self.list(c);
                    }
                    self.list(&e.body);
                }
            }
            ast::CompoundCommand::WhileClause(w) | ast::CompoundCommand::UntilClause(w) => {
                self.list(&w.0);
                self.list(&w.1.list);
            }
            ast::CompoundCommand::Coprocess(c) => {
                self.out.risky = true;
                self.command(&c.body);
            }
        }
    }

    /// Walks a redirection; records written files; returns what it feeds
    /// to standard input, when it does.
    fn redirect(&mut self, redirect: &ast::IoRedirect) -> Option<Stdin> {
        self.out.risky = true;
        match redirect {
            ast::IoRedirect::File(fd, kind, target) => {
                use ast::IoFileRedirectKind as K;
                match target {
                    ast::IoFileRedirectTarget::Filename(w)
                    | ast::IoFileRedirectTarget::Duplicate(w) => {
                        let word = self.word(&w.value);
                        let dup = matches!(target, ast::IoFileRedirectTarget::Duplicate(_));
                        let numeric = word.text == "-" || word.text.parse::<u32>().is_ok();
                        let writes = match kind {
                            K::Write | K::Append | K::Clobber | K::ReadAndWrite => true,
                            K::DuplicateOutput => dup && !numeric,
                            K::Read | K::DuplicateInput => false,
                        };
                        if writes {
                            self.out.writes.push(word.text.clone());
                        }
                        let stdin = fd.is_none_or(|fd| fd == 0);
                        if stdin && matches!(kind, K::Read | K::ReadAndWrite) {
                            return Some(Stdin {
                                text: String::new(),
                                known: false,
                            });
                        }
                        None
                    }
                    ast::IoFileRedirectTarget::Fd(_) => None,
                    ast::IoFileRedirectTarget::ProcessSubstitution(_, sub) => {
                        self.hidden_list(&sub.list);
                        Some(Stdin {
                            text: String::new(),
                            known: false,
                        })
                    }
                }
            }
            ast::IoRedirect::HereDocument(_, doc) => {
                let mut known = true;
                if doc.requires_expansion {
                    let parsed = std::panic::catch_unwind(|| {
                        brush_parser::word::parse_heredoc(&doc.doc.value, &self.options)
                    });
                    match parsed.ok().and_then(Result::ok) {
                        Some(pieces) => {
                            let mut word = Word::default();
                            self.pieces(&doc.doc.value, &pieces, &mut word, false);
                            known = !word.expansion;
                        }
                        None => {
                            self.unreadable_word(&doc.doc.value);
                            known = false;
                        }
                    }
                }
                Some(Stdin {
                    text: doc.doc.value.clone(),
                    known,
                })
            }
            ast::IoRedirect::HereString(_, w) => {
                let word = self.word(&w.value);
                Some(Stdin {
                    known: !word.expansion,
                    text: word.text,
                })
            }
            ast::IoRedirect::OutputAndError(w, _) => {
                let word = self.word(&w.value);
                self.out.writes.push(word.text);
                None
            }
        }
    }

    fn hidden_list(&mut self, list: &ast::CompoundList) {
        self.out.risky = true;
        let was = self.hidden;
        self.hidden = true;
        self.list(list);
        self.hidden = was;
    }

    fn simple(&mut self, simple: &ast::SimpleCommand) {
        let mut words: Vec<Word> = Vec::new();
        let mut assignments = 0usize;
        let mut stdin = None;
        let items = simple
            .prefix
            .iter()
            .flat_map(|p| p.0.iter())
            .map(Some)
            .chain(std::iter::once(None))
            .chain(simple.suffix.iter().flat_map(|s| s.0.iter()).map(Some));
        for item in items {
            let Some(item) = item else {
                if let Some(name) = &simple.word_or_name {
                    words.push(self.word(&name.value));
                }
                continue;
            };
            match item {
                ast::CommandPrefixOrSuffixItem::IoRedirect(r) => {
                    if let Some(s) = self.redirect(r) {
                        stdin = Some(s);
                    }
                }
                ast::CommandPrefixOrSuffixItem::Word(w) => words.push(self.word(&w.value)),
                ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w) => {
                    if words.len() == assignments {
                        assignments += 1;
                    }
                    words.push(self.word(&w.value));
                }
                ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, sub) => {
                    words.push(Word {
                        raw: "<(…)".to_owned(),
                        text: "<(…)".to_owned(),
                        expansion: true,
                        glob: false,
                    });
                    self.hidden_list(&sub.list);
                }
            }
        }
        if words.is_empty() {
            return;
        }
        let raw = join(words.iter().map(|w| w.raw.as_str()));
        let plain = join(words.iter().map(|w| w.text.as_str()));
        let command = &words[assignments.min(words.len())..];
        if words[..assignments.min(words.len())]
            .iter()
            .any(|w| sets_path(&w.text))
        {
            if command.is_empty() {
                self.path_set = true;
            } else {
                self.path_next = true;
            }
        }
        self.command_part(raw, plain, command, stdin, false);
    }

    /// Examines one command (its program first) and records it as a part,
    /// with the commands it runs as parts of their own. `opaque_args`: more
    /// arguments come at run time (`xargs`).
    fn command_part(
        &mut self,
        raw: String,
        plain: String,
        command: &[Word],
        stdin: Option<Stdin>,
        opaque_args: bool,
    ) {
        let mut part = Part {
            raw,
            plain,
            hidden: self.hidden,
            ..Default::default()
        };
        let own_path = std::mem::take(&mut self.path_next) || self.path_set;
        let Some(program) = command.first() else {
            self.out.parts.push(part);
            return;
        };
        // `time -- cmd`: bash's `time` takes `--`, which brush leaves as
        // the first word.
        if program.text == "--" && command.len() > 1 && !program.computed() {
            part.transparent = true;
            self.nested(&command[1..], opaque_args);
            self.out.parts.push(part);
            return;
        }
        let name = base(&program.text).to_owned();
        let args: Vec<String> = command[1..].iter().map(|w| w.text.clone()).collect();
        part.stripped = join(std::iter::once(name.as_str()).chain(args.iter().map(String::as_str)));
        part.dynamic = program.computed() || name.is_empty();
        if matches!(name.as_str(), "cd" | "pushd" | "popd") {
            self.out.changes_dir = true;
        }
        if let Some(f) = self.functions.iter_mut().find(|f| f.name == name) {
            f.self_calls += 1;
        }
        if self.out.catastrophic.is_none() {
            self.out.catastrophic = catastrophe::check(&name, &args, self.place, part.dynamic);
        }
        if !part.dynamic && self.depth <= MAX_DEPTH {
            self.depth += 1;
            self.inspect(&name, command, stdin, &mut part);
            self.depth -= 1;
            if options::known(&name) {
                let computed = opaque_args || command[1..].iter().any(Word::computed);
                if computed && part.unsafe_use.is_none() {
                    part.unsafe_use =
                        Some(format!("an argument of `{name}` is computed at run time"));
                }
                if part.unsafe_use.is_none() {
                    part.unsafe_use = options::unsafe_use(&name, &args);
                }
                self.out.writes.extend(options::written_files(&name, &args));
            }
        }
        if matches!(
            name.as_str(),
            "export" | "declare" | "typeset" | "readonly" | "local"
        ) && args.iter().any(|a| sets_path(a))
            || name == "hash" && args.iter().any(|a| a == "-p")
        {
            self.path_set = true;
        }
        if own_path && !program.text.contains('/') && part.unsafe_use.is_none() {
            part.unsafe_use = Some(format!(
                "`{name}` is looked up through a PATH the command sets itself"
            ));
        }
        self.out.parts.push(part);
    }

    /// The command positions inside one command.
    fn inspect(&mut self, name: &str, command: &[Word], stdin: Option<Stdin>, part: &mut Part) {
        let args = &command[1..];
        if let Some(wrapper) = WRAPPERS.iter().find(|w| w.name == name) {
            self.wrapper(wrapper, command, stdin, part);
            return;
        }
        if SHELLS.contains(&name) {
            self.shell(args, stdin, part);
            return;
        }
        match name {
            "eval" => {
                let args = match args.first() {
                    Some(a) if a.text == "--" => &args[1..],
                    _ => args,
                };
                self.script_words(args, part)
            }
            "source" | "." => {
                if let Some(file) = args.iter().find(|a| !a.text.starts_with('-')) {
                    self.script_file(file, stdin, part);
                }
            }
            "trap" => {
                let script = args.iter().find(|a| !a.text.starts_with('-'));
                if let Some(s) = script {
                    self.script_words(std::slice::from_ref(s), part);
                }
            }
            "alias" => {
                for a in args {
                    if let Some((_, value)) = a.text.split_once('=') {
                        if a.expansion {
                            part.dynamic = true;
                        } else {
                            self.hidden_script(value);
                        }
                    }
                }
            }
            "hash" => {
                // `hash -p /bin/rm r`: `r` now runs rm.
                let mut it = args.iter();
                while let Some(a) = it.next() {
                    if a.text == "-p"
                        && let Some(path) = it.next()
                    {
                        part.candidates.push(base(&path.text).to_owned());
                        if path.computed() {
                            part.dynamic = true;
                        }
                    }
                }
            }
            "find" => {
                let mut i = 0;
                while i < args.len() {
                    let a = args[i].text.as_str();
                    i += 1;
                    if matches!(a, "-exec" | "-execdir" | "-ok" | "-okdir") {
                        let start = i;
                        while i < args.len() && args[i].text != ";" && args[i].text != "+" {
                            i += 1;
                        }
                        self.nested(&args[start..i], false);
                        i += 1;
                    }
                }
            }
            _ if INTERPRETERS.contains(&name) => {
                // No program file: the program comes from input.
                let operand = args
                    .iter()
                    .any(|a| !a.text.starts_with('-') || a.text == "-");
                let inline = args.iter().any(|a| {
                    a.text.starts_with('-')
                        && !a.text.starts_with("--")
                        && a.text.contains(['c', 'e', 'E', 'm', 'p', 'r'])
                });
                if (!operand && !inline) || args.iter().any(|a| a.text == "-") {
                    match stdin {
                        Some(Stdin { known: true, .. }) if name == "awk" => {}
                        _ => part.dynamic = true,
                    }
                }
            }
            _ => {}
        }
    }

    /// `sh -c script`, `sh < file`, `sh <<EOF`, `… | sh`.
    fn shell(&mut self, args: &[Word], stdin: Option<Stdin>, part: &mut Part) {
        let mut i = 0;
        let mut operand = false;
        let mut at = 0;
        while i < args.len() {
            let a = &args[i];
            i += 1;
            let t = a.text.as_str();
            if t == "--" {
                operand = i < args.len();
                at = i;
                break;
            }
            let short = t.starts_with('-') && !t.starts_with("--") && t.len() > 1;
            if short && t[1..].contains('c') {
                match args.get(i) {
                    Some(script) if script.expansion => part.dynamic = true,
                    Some(script) => self.hidden_script(&script.text),
                    None => part.dynamic = true,
                }
                return;
            }
            if short && t[1..].contains(['o', 'O']) {
                i += 1; // -o option
                continue;
            }
            if t == "-s" || t.starts_with('-') || t.starts_with('+') {
                continue;
            }
            operand = true;
            at = i - 1;
            break;
        }
        if operand {
            // A script file: a program like any other, unless it is the
            // input or computed.
            if let Some(file) = args.get(at) {
                self.script_file(file, stdin, part);
            }
            return;
        }
        match stdin {
            Some(Stdin { text, known: true }) => self.hidden_script(&text),
            _ => part.dynamic = true,
        }
    }

    /// A script read from a file by a shell or `source`: the input
    /// (`/dev/stdin`, `/dev/fd/N`, a process substitution) or a computed
    /// name cannot be known; a known here-document on `/dev/stdin` is read.
    fn script_file(&mut self, file: &Word, stdin: Option<Stdin>, part: &mut Part) {
        let t = file.text.as_str();
        let input =
            t == "/dev/stdin" || t == "-" || t.starts_with("/dev/fd/") || t.starts_with("/proc/");
        if file.computed() {
            part.dynamic = true;
        } else if input {
            match stdin {
                Some(Stdin { text, known: true }) if t == "/dev/stdin" || t == "-" => {
                    self.hidden_script(&text)
                }
                _ => part.dynamic = true,
            }
        }
    }

    /// `eval words…` / `trap script`: the words joined are a script.
    fn script_words(&mut self, words: &[Word], part: &mut Part) {
        if words.is_empty() {
            return;
        }
        if words.iter().any(|w| w.expansion) {
            part.dynamic = true;
            return;
        }
        let text = join(words.iter().map(|w| w.text.as_str()));
        self.hidden_script(&text);
    }

    fn wrapper(&mut self, spec: &Wrapper, command: &[Word], stdin: Option<Stdin>, part: &mut Part) {
        let args = &command[1..];
        // Every non-option word may start the command, for deny and ask.
        for (i, a) in args.iter().enumerate() {
            if !a.text.starts_with('-') {
                let rest = join(
                    std::iter::once(base(&a.text))
                        .chain(args[i + 1..].iter().map(|w| w.text.as_str())),
                );
                part.candidates.push(rest);
            }
        }
        let mut i = 0;
        let mut positionals = spec.positionals;
        let mut understood = true;
        let mut scripted = false;
        while i < args.len() {
            let a = &args[i];
            let t = a.text.as_str();
            if a.computed() {
                understood = false;
                break;
            }
            if t == "--" {
                i += 1;
                break;
            }
            if spec.script_options.contains(&t) {
                if let Some(s) = args.get(i + 1) {
                    self.script_words(std::slice::from_ref(s), part);
                    scripted = true;
                }
                i = args.len();
                break;
            }
            if t.starts_with('-') && t.len() > 1 {
                let (opt, attached) = match t.split_once('=') {
                    Some((o, _)) => (o, true),
                    None => (t, false),
                };
                if (spec.name == "env") && (opt == "-S" || opt == "--split-string") {
                    let script = if attached {
                        t.split_once('=').map(|(_, v)| v.to_owned())
                    } else {
                        args.get(i + 1).map(|w| w.text.clone())
                    };
                    if let Some(s) = script {
                        self.hidden_script(&s);
                        scripted = true;
                    }
                    i = args.len();
                    break;
                }
                let valued = spec.valued.contains(&opt);
                i += if valued && !attached { 2 } else { 1 };
                continue;
            }
            if spec.name == "env" && t.contains('=') {
                self.path_next |= sets_path(t);
                i += 1;
                continue;
            }
            if positionals > 0 {
                positionals -= 1;
                i += 1;
                continue;
            }
            break;
        }
        if !understood {
            part.unsafe_use = Some(format!(
                "the command `{}` runs is computed at run time",
                spec.name
            ));
            part.dynamic = true;
            return;
        }
        // Transparent only when it runs a command that is checked itself
        // (`env` alone prints the environment: it needs its own rule).
        part.transparent = spec.transparent && (i < args.len() || scripted);
        if i < args.len() {
            if spec.name == "watch" {
                // watch joins its arguments and gives them to `sh -c`.
                self.script_words(&args[i..], part);
                return;
            }
            let inner_stdin = if spec.name == "xargs" { None } else { stdin };
            let inner = &args[i..];
            let raw = join(inner.iter().map(|w| w.raw.as_str()));
            let plain = join(inner.iter().map(|w| w.text.as_str()));
            self.command_part(raw, plain, inner, inner_stdin, spec.name == "xargs");
        }
    }

    /// A command given as arguments (`find -exec cmd … ;`).
    fn nested(&mut self, words: &[Word], opaque: bool) {
        if words.is_empty() {
            return;
        }
        let raw = join(words.iter().map(|w| w.raw.as_str()));
        let plain = join(words.iter().map(|w| w.text.as_str()));
        self.command_part(raw, plain, words, None, opaque);
    }

    /// Walks a word for hidden commands; returns its unquoted text and what
    /// it holds.
    fn word(&mut self, text: &str) -> Word {
        let mut word = Word {
            raw: text.to_owned(),
            ..Default::default()
        };
        let parsed = std::panic::catch_unwind(|| brush_parser::word::parse(text, &self.options));
        match parsed.ok().and_then(Result::ok) {
            Some(pieces) => {
                let plain = self.pieces(text, &pieces, &mut word, false);
                word.text = plain;
            }
            None => {
                self.unreadable_word(text);
                word.text = text.to_owned();
                word.expansion = true;
            }
        }
        word
    }

    fn unreadable_word(&mut self, text: &str) {
        self.out.risky = true;
        if text.contains("$(") || text.contains('`') {
            self.out.parts.push(Part::unreadable(text));
        }
    }

    fn pieces(
        &mut self,
        source: &str,
        pieces: &[WordPieceWithSource],
        word: &mut Word,
        quoted: bool,
    ) -> String {
        let mut out = String::new();
        for p in pieces {
            let slice = source.get(p.start_index..p.end_index).unwrap_or_default();
            match &p.piece {
                WordPiece::Text(t) => {
                    if !quoted && (t.contains(['*', '?', '[']) || brace_expansion(t)) {
                        word.glob = true;
                    }
                    out.push_str(t)
                }
                WordPiece::SingleQuotedText(t) | WordPiece::AnsiCQuotedText(t) => out.push_str(t),
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    let text = self.pieces(source, inner, word, true);
                    out.push_str(&text);
                }
                WordPiece::EscapeSequence(e) => out.push_str(e.strip_prefix('\\').unwrap_or(e)),
                WordPiece::TildeExpansion(_) => out.push_str(slice),
                WordPiece::ParameterExpansion(_) => {
                    word.expansion = true;
                    // `${x:-$(cmd)}`: the operands are words themselves.
                    let inner = slice
                        .strip_prefix("${")
                        .and_then(|s| s.strip_suffix('}'))
                        .unwrap_or("");
                    if inner.contains("$(") || inner.contains('`') || inner.contains("${") {
                        let _ = self.word(inner);
                    }
                    out.push_str(slice);
                }
                WordPiece::CommandSubstitution(body)
                | WordPiece::BackquotedCommandSubstitution(body) => {
                    word.expansion = true;
                    self.out.risky = true;
                    self.hidden_script(body);
                    out.push_str(slice);
                }
                WordPiece::ArithmeticExpression(expr) => {
                    word.expansion = true;
                    if expr.value.contains("$(") || expr.value.contains('`') {
                        self.out.risky = true;
                        let _ = self.word(&expr.value);
                    }
                    out.push_str(slice);
                }
            }
        }
        out
    }
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
