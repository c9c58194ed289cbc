//! The walk over the parsed AST: scripts, lists, pipelines, compound
//! commands and redirections, down to each simple command.

use brush_parser::ast;

use super::{Function, MAX_DEPTH, Part, Stdin, Walker, Word};

/// Parentheses nested deeper than this are not parsed: brush-parser's
/// time grows fourfold with every two more (a 48-byte command took a
/// minute, found by fuzzing), and no real command nests so deep. Such a
/// command "does not parse", so it is asked about, never allowed.
const MAX_PARENS: usize = 10;

/// The deepest nesting of `(` in `text`, counted without regard to quotes
/// (which can only count more: asking, never allowing, more often).
fn paren_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for c in text.chars() {
        match c {
            '(' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

impl Walker<'_> {
    /// Parses and walks a script; false when it does not parse.
    pub(super) fn script(&mut self, text: &str) -> bool {
        if self.depth > MAX_DEPTH || paren_depth(text) > MAX_PARENS {
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
    pub(super) fn hidden_script(&mut self, text: &str) {
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

    pub(super) fn list(&mut self, list: &ast::CompoundList) {
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

    pub(super) fn pipeline(&mut self, pipeline: &ast::Pipeline) {
        for command in &pipeline.seq {
            self.command(command);
        }
    }

    pub(super) fn command(&mut self, command: &ast::Command) {
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

    pub(super) fn test_expr(&mut self, expr: &ast::ExtendedTestExpr) {
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

    pub(super) fn compound(&mut self, compound: &ast::CompoundCommand) {
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
    pub(super) fn redirect(&mut self, redirect: &ast::IoRedirect) -> Option<Stdin> {
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

    pub(super) fn hidden_list(&mut self, list: &ast::CompoundList) {
        self.out.risky = true;
        let was = self.hidden;
        self.hidden = true;
        self.list(list);
        self.hidden = was;
    }
}
