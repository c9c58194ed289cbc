//! Simple commands: their words, the program they run, and the commands
//! hidden inside them (wrappers, `sh -c`, `find -exec`, substitutions).

use brush_parser::ast;
use brush_parser::word::{WordPiece, WordPieceWithSource};

use super::super::{catastrophe, options};
use super::programs::{INTERPRETERS, SHELLS, WRAPPERS, Wrapper};
use super::{MAX_DEPTH, Part, Stdin, Walker, Word, base, brace_expansion, join, sets_path};

impl Walker<'_> {
    pub(super) fn simple(&mut self, simple: &ast::SimpleCommand) {
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
    pub(super) fn command_part(
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
    pub(super) fn inspect(
        &mut self,
        name: &str,
        command: &[Word],
        stdin: Option<Stdin>,
        part: &mut Part,
    ) {
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
    pub(super) fn shell(&mut self, args: &[Word], stdin: Option<Stdin>, part: &mut Part) {
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
    pub(super) fn script_file(&mut self, file: &Word, stdin: Option<Stdin>, part: &mut Part) {
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
    pub(super) fn script_words(&mut self, words: &[Word], part: &mut Part) {
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

    pub(super) fn wrapper(
        &mut self,
        spec: &Wrapper,
        command: &[Word],
        stdin: Option<Stdin>,
        part: &mut Part,
    ) {
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
    pub(super) fn nested(&mut self, words: &[Word], opaque: bool) {
        if words.is_empty() {
            return;
        }
        let raw = join(words.iter().map(|w| w.raw.as_str()));
        let plain = join(words.iter().map(|w| w.text.as_str()));
        self.command_part(raw, plain, words, None, opaque);
    }

    /// Walks a word for hidden commands; returns its unquoted text and what
    /// it holds.
    pub(super) fn word(&mut self, text: &str) -> Word {
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

    pub(super) fn unreadable_word(&mut self, text: &str) {
        self.out.risky = true;
        if text.contains("$(") || text.contains('`') {
            self.out.parts.push(Part::unreadable(text));
        }
    }

    pub(super) fn pieces(
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
