//! Shell command analysis for `Bash(...)` rules, on the AST of
//! `brush-parser` (a bash/POSIX parser), never by string splitting.
//!
//! A command is broken into its simple commands ("parts"): those chained by
//! `&&`, `||`, `;`, `|`, `&` and newlines, those inside subshells, brace
//! groups, `if`/`for`/`while`/`case` bodies and function bodies, and the
//! hidden ones run by `$(…)`, backticks, process substitutions
//! (`<(…)`, `>(…)`), here-document bodies, parameter expansions
//! (`${x:-$(…)}`) and arithmetic (`$((…))`). As a best effort, the scripts
//! given to `sh -c` / `bash -c` / `eval` are analysed as hidden parts too.
//!
//! `risky` records whatever an allow rule must never cover: a redirection
//! (any, including `2>&1` and here-documents), a substitution of any kind,
//! `[[ … ]]`, `(( … ))` and coprocesses.

use brush_parser::ast;
use brush_parser::word::{WordPiece, WordPieceWithSource};

/// One simple command of a shell command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Part {
    /// The words as written (quotes kept), joined by one space.
    pub raw: String,
    /// The same words with quoting removed (what the program receives,
    /// before variable expansion).
    pub plain: String,
    /// `plain` without leading wrappers (`sudo`, `env X=1`, `command`,
    /// `nohup`, `timeout 5`…) and with the program's folder dropped
    /// (`/bin/rm` → `rm`): used by deny and ask rules only.
    pub stripped: String,
    /// Run by a substitution or a nested script rather than directly.
    pub hidden: bool,
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
}

/// Nesting limit for substitutions inside substitutions.
const MAX_DEPTH: usize = 16;

fn options() -> brush_parser::ParserOptions {
    brush_parser::ParserOptions {
        // Extended globs change tokenisation of `!(…)`, `@(…)`: keep bash's
        // default interactive behaviour off so `(` always means a subshell.
        enable_extended_globbing: false,
        ..Default::default()
    }
}

/// Parses `command` and lists its parts.
pub(crate) fn analyse(command: &str) -> Analysis {
    let mut out = Analysis {
        parsed: true,
        ..Default::default()
    };
    if command.trim().is_empty() {
        out.parsed = false;
        return out;
    }
    let mut walker = Walker {
        out: &mut out,
        depth: 0,
        hidden: false,
    };
    if !walker.script(command) {
        out.parsed = false;
        out.parts.clear();
        return out;
    }
    // Safety net: a `$(` or backtick the walk did not account for makes the
    // command unfit for an allow (it may be literal, e.g. in single quotes:
    // asking is the safe side).
    if command.contains("$(") || command.contains('`') || command.contains("<(") {
        out.risky = true;
    }
    out
}

struct Walker<'a> {
    out: &'a mut Analysis,
    depth: usize,
    hidden: bool,
}

impl Walker<'_> {
    /// Parses and walks a script; false when it does not parse.
    fn script(&mut self, text: &str) -> bool {
        if self.depth > MAX_DEPTH {
            return false;
        }
        let mut parser = brush_parser::Parser::new(std::io::Cursor::new(text), &options());
        match parser.parse_program() {
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
    /// not parse, its raw text is kept as one hidden part so deny and ask
    /// rules still see it.
    fn hidden_script(&mut self, text: &str) {
        let was = self.hidden;
        self.hidden = true;
        self.depth += 1;
        let before = self.out.parts.len();
        if !self.script(text) {
            self.out.parts.truncate(before);
            let t = text.trim().to_owned();
            if !t.is_empty() {
                self.out.parts.push(Part {
                    raw: t.clone(),
                    plain: t.clone(),
                    stripped: t,
                    hidden: true,
                });
            }
            // A body we cannot read is never covered by an allow.
            self.out.risky = true;
        }
        self.depth -= 1;
        self.hidden = was;
    }

    fn list(&mut self, list: &ast::CompoundList) {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            self.pipeline(&and_or.first);
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p),
                }
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
                self.compound(&def.body.0);
                if let Some(list) = &def.body.1 {
                    for r in &list.0 {
                        self.redirect(r);
                    }
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

    fn redirect(&mut self, redirect: &ast::IoRedirect) {
        self.out.risky = true;
        match redirect {
            ast::IoRedirect::File(_, _, target) => match target {
                ast::IoFileRedirectTarget::Filename(w)
                | ast::IoFileRedirectTarget::Duplicate(w) => {
                    self.word(&w.value);
                }
                ast::IoFileRedirectTarget::Fd(_) => {}
                ast::IoFileRedirectTarget::ProcessSubstitution(_, sub) => {
                    self.hidden_list(&sub.list)
                }
            },
            ast::IoRedirect::HereDocument(_, doc) => {
                if doc.requires_expansion {
                    match brush_parser::word::parse_heredoc(&doc.doc.value, &options()) {
                        Ok(pieces) => {
                            self.pieces(&doc.doc.value, &pieces);
                        }
                        Err(_) => self.unreadable_word(&doc.doc.value),
                    }
                }
            }
            ast::IoRedirect::HereString(_, w) | ast::IoRedirect::OutputAndError(w, _) => {
                self.word(&w.value);
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
        let mut raw: Vec<String> = Vec::new();
        let mut plain: Vec<String> = Vec::new();
        let mut assignments = 0usize;
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
                    raw.push(name.value.clone());
                    plain.push(self.word(&name.value));
                }
                continue;
            };
            match item {
                ast::CommandPrefixOrSuffixItem::IoRedirect(r) => self.redirect(r),
                ast::CommandPrefixOrSuffixItem::Word(w) => {
                    raw.push(w.value.clone());
                    plain.push(self.word(&w.value));
                }
                ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w) => {
                    if raw.len() == assignments {
                        assignments += 1;
                    }
                    raw.push(w.value.clone());
                    plain.push(self.word(&w.value));
                }
                ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, sub) => {
                    raw.push("<(…)".to_owned());
                    plain.push("<(…)".to_owned());
                    self.hidden_list(&sub.list);
                }
            }
        }
        if raw.is_empty() {
            return;
        }
        let stripped_words = strip_wrappers(&plain[assignments.min(plain.len())..]);
        self.nested_scripts(&stripped_words);
        self.out.parts.push(Part {
            raw: raw.join(" "),
            plain: plain.join(" "),
            stripped: stripped_words.join(" "),
            hidden: self.hidden,
        });
    }

    /// `sh -c 'script'`, `bash -lc "script"`, `eval words…`: the script is
    /// analysed as hidden parts (deny and ask rules see inside).
    fn nested_scripts(&mut self, words: &[String]) {
        let Some(program) = words.first() else {
            return;
        };
        match program.as_str() {
            "sh" | "bash" | "zsh" | "dash" | "ksh" | "ash" | "fish" => {
                let mut args = words[1..].iter();
                while let Some(arg) = args.next() {
                    let is_c = arg.starts_with('-')
                        && !arg.starts_with("--")
                        && arg[1..].chars().all(|c| c.is_ascii_alphabetic())
                        && arg.contains('c');
                    if is_c {
                        if let Some(script) = args.next() {
                            self.hidden_script(&script.clone());
                        }
                        break;
                    }
                }
            }
            "eval" if words.len() > 1 => self.hidden_script(&words[1..].join(" ")),
            _ => {}
        }
    }

    /// Walks a word for hidden commands; returns its unquoted text.
    fn word(&mut self, text: &str) -> String {
        match brush_parser::word::parse(text, &options()) {
            Ok(pieces) => self.pieces(text, &pieces),
            Err(_) => {
                self.unreadable_word(text);
                text.to_owned()
            }
        }
    }

    fn unreadable_word(&mut self, text: &str) {
        if text.contains("$(") || text.contains('`') {
            self.out.risky = true;
            let t = text.to_owned();
            self.out.parts.push(Part {
                raw: t.clone(),
                plain: t.clone(),
                stripped: t,
                hidden: true,
            });
        }
    }

    fn pieces(&mut self, source: &str, pieces: &[WordPieceWithSource]) -> String {
        let mut out = String::new();
        for p in pieces {
            let slice = source.get(p.start_index..p.end_index).unwrap_or_default();
            match &p.piece {
                WordPiece::Text(t) => out.push_str(t),
                WordPiece::SingleQuotedText(t) | WordPiece::AnsiCQuotedText(t) => out.push_str(t),
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    out.push_str(&self.pieces(source, inner));
                }
                WordPiece::EscapeSequence(e) => out.push_str(e.strip_prefix('\\').unwrap_or(e)),
                WordPiece::TildeExpansion(_) => out.push_str(slice),
                WordPiece::ParameterExpansion(_) => {
                    // `${x:-$(cmd)}`: the operands are words themselves.
                    let inner = slice
                        .strip_prefix("${")
                        .and_then(|s| s.strip_suffix('}'))
                        .unwrap_or("");
                    if inner.contains("$(") || inner.contains('`') || inner.contains("${") {
                        self.word(inner);
                    }
                    out.push_str(slice);
                }
                WordPiece::CommandSubstitution(body)
                | WordPiece::BackquotedCommandSubstitution(body) => {
                    self.out.risky = true;
                    self.hidden_script(body);
                    out.push_str(slice);
                }
                WordPiece::ArithmeticExpression(expr) => {
                    if expr.value.contains("$(") || expr.value.contains('`') {
                        self.out.risky = true;
                        self.word(&expr.value);
                    }
                    out.push_str(slice);
                }
            }
        }
        out
    }
}

/// Programs that run the rest of their arguments as a command.
const WRAPPERS: &[&str] = &[
    "builtin", "command", "doas", "env", "exec", "nice", "nohup", "setsid", "stdbuf", "sudo",
    "time", "timeout", "xargs", "ionice", "chrt", "unbuffer",
];

/// Drops leading wrappers (with their options, `VAR=value` and numeric
/// arguments) and the folder of the program. Best effort, for deny/ask.
fn strip_wrappers(words: &[String]) -> Vec<String> {
    let base = |w: &str| w.rsplit('/').next().unwrap_or(w).to_owned();
    let mut i = 0;
    while i < words.len() && WRAPPERS.contains(&base(&words[i]).as_str()) {
        i += 1;
        while i < words.len() {
            let w = &words[i];
            let option = w.starts_with('-') && w.len() > 1;
            let assignment = w.contains('=') && !w.starts_with('=');
            let number = w
                .trim_end_matches(['s', 'm', 'h', 'd'])
                .parse::<f64>()
                .is_ok();
            if option || assignment || number {
                i += 1;
            } else {
                break;
            }
        }
    }
    let mut out: Vec<String> = words[i.min(words.len())..].to_vec();
    if let Some(first) = out.first_mut() {
        *first = base(first);
    }
    out
}
