//! The built-in table of options that turn a well-known command into a
//! writer or an executor (`git diff --output=F`, `sort -o F`, `sed -i`,
//! `find -exec`, `make -C ../x`…). The table is data, in `options.json`
//! next to this file; this module reads it once and answers two questions
//! about one simple command: does it use such an option (then no prefix
//! allow rule covers it), and which files does it write (checked against
//! `Write`/`Edit` rules like a redirection target).

use std::sync::LazyLock;

use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Entry {
    programs: Vec<String>,
    why: String,
    long: Vec<String>,
    short: String,
    global_long: Vec<String>,
    global_short: String,
    words: Vec<String>,
    subcommands: Vec<String>,
    always: bool,
    assignments: bool,
    check: Option<String>,
    write_long: Vec<String>,
    write_short: String,
    write_operands: bool,
    write_assign: Vec<String>,
    stop_at_operand: bool,
}

#[derive(Debug, Default, Deserialize)]
struct Table {
    #[allow(dead_code)]
    about: String,
    entries: Vec<Entry>,
}

static TABLE: LazyLock<Table> = LazyLock::new(|| {
    serde_json::from_str(include_str!("options.json")).unwrap_or_else(|e| {
        // The file is part of the build; a test keeps it valid.
        tracing::error!(%e, "the built-in options table does not parse");
        Table::default()
    })
});

/// `python3.12` → `python`, `gawk` stays: a trailing version is dropped.
fn program_key(name: &str) -> &str {
    name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.')
}

fn entry(program: &str) -> Option<&'static Entry> {
    let key = program_key(program);
    TABLE
        .entries
        .iter()
        .find(|e| e.programs.iter().any(|p| p == program || p == key))
}

/// Whether the table knows `program` (its arguments matter).
pub(crate) fn known(program: &str) -> bool {
    entry(program).is_some()
}

/// `--name` or `--name=value` matches a listed long option when `name` is
/// an abbreviation of it (GNU tools accept unambiguous prefixes).
fn long_matches(arg: &str, names: &[String]) -> bool {
    let name = arg.trim_start_matches("--").split('=').next().unwrap_or("");
    !name.is_empty() && names.iter().any(|n| n.starts_with(name))
}

fn short_matches(arg: &str, letters: &str) -> bool {
    arg[1..].chars().any(|c| letters.contains(c))
}

/// Why `program args…` is a writer or executor no prefix rule covers, or
/// `None`.
pub(crate) fn unsafe_use(program: &str, args: &[String]) -> Option<String> {
    let e = entry(program)?;
    let why = || Some(e.why.clone());
    if e.always {
        return why();
    }
    let mut seen_operand = false;
    let mut end_of_options = false;
    for (i, arg) in args.iter().enumerate() {
        if e.words.iter().any(|w| w == arg) {
            return why();
        }
        if arg == "--" {
            end_of_options = true;
            continue;
        }
        let option = !end_of_options && arg.starts_with('-') && arg.len() > 1;
        if option && !(e.stop_at_operand && seen_operand) {
            let global = !seen_operand;
            if arg.starts_with("--") {
                if long_matches(arg, &e.long) || (global && long_matches(arg, &e.global_long)) {
                    return why();
                }
            } else if short_matches(arg, &e.short)
                || (global && short_matches(arg, &e.global_short))
            {
                return why();
            }
        } else if !option {
            let first = !seen_operand;
            seen_operand = true;
            if first && e.subcommands.iter().any(|s| s == arg) {
                return why();
            }
            if e.assignments && arg.contains('=') {
                return why();
            }
            if first && e.check.as_deref() == Some("tar") && i == 0 && short_matches_bundle(arg) {
                return why();
            }
        }
    }
    match e.check.as_deref() {
        Some("sed") if sed_unsafe(args) => why(),
        Some("awk") if awk_unsafe(args) => why(),
        _ => None,
    }
}

/// tar's old-style first argument (`xzf`, `cvf`) is a bundle of modes.
fn short_matches_bundle(arg: &str) -> bool {
    arg.chars().all(|c| c.is_ascii_alphabetic()) && arg.chars().any(|c| "cxruA".contains(c))
}

/// The files `program args…` writes by its options or operands (`tee F`,
/// `dd of=F`, `sort -o F`, `curl -o F`), as written.
pub(crate) fn written_files(program: &str, args: &[String]) -> Vec<String> {
    let Some(e) = entry(program) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut end_of_options = false;
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        let next = args.get(i + 1);
        i += 1;
        if arg == "--" {
            end_of_options = true;
            continue;
        }
        if !end_of_options && arg.starts_with("--") {
            if long_matches(arg, &e.write_long) {
                match arg.split_once('=') {
                    Some((_, v)) => out.push(v.to_owned()),
                    None => {
                        if let Some(v) = next {
                            out.push(v.clone());
                            i += 1;
                        }
                    }
                }
            }
            continue;
        }
        if !end_of_options && arg.starts_with('-') && arg.len() > 1 {
            if let Some(pos) = arg[1..].find(|c| e.write_short.contains(c)) {
                let value = &arg[pos + 2..];
                if !value.is_empty() {
                    out.push(value.to_owned());
                } else if let Some(v) = next {
                    out.push(v.clone());
                    i += 1;
                }
            }
            continue;
        }
        if let Some((name, value)) = arg.split_once('=')
            && e.write_assign.iter().any(|w| w == name)
        {
            out.push(value.to_owned());
            continue;
        }
        if e.write_operands {
            out.push(arg.clone());
        }
    }
    out
}

// ---------------------------------------------------------------- sed

/// The scripts of a sed call: the `-e`/`--expression` values, or else the
/// first operand. `--sandbox` (GNU) refuses `e`, `w` and `r` itself.
fn sed_unsafe(args: &[String]) -> bool {
    if args.iter().any(|a| a == "--sandbox") {
        return false;
    }
    let mut scripts = Vec::new();
    let mut operand = None;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "-e" || a == "--expression" {
            if let Some(v) = args.get(i) {
                scripts.push(v.clone());
                i += 1;
            }
        } else if let Some(v) = a.strip_prefix("--expression=") {
            scripts.push(v.to_owned());
        } else if let Some(v) = a.strip_prefix("-e").filter(|_| !a.starts_with("--")) {
            scripts.push(v.to_owned());
        } else if a == "-l" || a == "--line-length" {
            i += 1;
        } else if !a.starts_with('-') && operand.is_none() {
            operand = Some(a.clone());
        }
    }
    if scripts.is_empty() {
        scripts.extend(operand);
    }
    scripts.iter().any(|s| sed_script_unsafe(s))
}

/// A small reading of a sed script: true when it may write a file (`w`,
/// `W`, `s///w`) or run a command (`e`, `s///e`), or when it holds
/// anything this reading does not know (unsure means unsafe).
pub(crate) fn sed_script_unsafe(script: &str) -> bool {
    let c: Vec<char> = script.chars().collect();
    let mut i = 0;
    let skip_regex = |i: &mut usize, delim: char| -> bool {
        while *i < c.len() {
            match c[*i] {
                '\\' => *i += 2,
                ch if ch == delim => {
                    *i += 1;
                    return true;
                }
                _ => *i += 1,
            }
        }
        false
    };
    let to_eol = |i: &mut usize| {
        while *i < c.len() && c[*i] != '\n' {
            *i += 1;
        }
    };
    loop {
        while i < c.len() && (c[i].is_whitespace() || c[i] == ';') {
            i += 1;
        }
        if i >= c.len() {
            return false;
        }
        // Addresses: number, $, /re/, \cREc, first~step, addr,+N.
        for _ in 0..2 {
            match c.get(i) {
                Some(d) if d.is_ascii_digit() => {
                    while c.get(i).is_some_and(|d| d.is_ascii_digit() || *d == '~') {
                        i += 1;
                    }
                }
                Some('$') => i += 1,
                Some('/') => {
                    i += 1;
                    if !skip_regex(&mut i, '/') {
                        return true;
                    }
                    while c.get(i).is_some_and(|m| *m == 'I' || *m == 'M') {
                        i += 1;
                    }
                }
                Some('\\') => {
                    let Some(&d) = c.get(i + 1) else {
                        return true;
                    };
                    i += 2;
                    if !skip_regex(&mut i, d) {
                        return true;
                    }
                }
                _ => {}
            }
            if c.get(i) == Some(&',') {
                i += 1;
                if matches!(c.get(i), Some('+') | Some('~')) {
                    i += 1;
                }
            } else {
                break;
            }
        }
        while c.get(i).is_some_and(|x| x.is_whitespace() || *x == '!') {
            i += 1;
        }
        let Some(&cmd) = c.get(i) else {
            return true;
        };
        i += 1;
        match cmd {
            '{' | '}' => {}
            '#' | 'a' | 'i' | 'c' | 'r' | 'R' => to_eol(&mut i),
            ':' | 'b' | 't' | 'T' | 'v' => {
                while i < c.len() && c[i] != ';' && c[i] != '\n' {
                    i += 1;
                }
            }
            's' | 'y' => {
                let Some(&d) = c.get(i) else {
                    return true;
                };
                if d == '\n' || d == '\\' {
                    return true;
                }
                i += 1;
                if !skip_regex(&mut i, d) || !skip_regex(&mut i, d) {
                    return true;
                }
                if cmd == 's' {
                    while let Some(&f) = c.get(i) {
                        match f {
                            'w' | 'W' | 'e' => return true,
                            'g' | 'p' | 'i' | 'I' | 'm' | 'M' => i += 1,
                            d if d.is_ascii_digit() => i += 1,
                            _ => break,
                        }
                    }
                }
            }
            'q' | 'Q' | 'l' | 'L' => {
                while c.get(i).is_some_and(|d| d.is_ascii_digit() || *d == ' ') {
                    i += 1;
                }
            }
            'p' | 'P' | 'd' | 'D' | 'n' | 'N' | 'g' | 'G' | 'h' | 'H' | 'x' | '=' | 'z' | 'F' => {}
            // w, W, e and anything unknown.
            _ => return true,
        }
    }
}

// ---------------------------------------------------------------- awk

/// An awk program that may run a command (`system`, `|`) or write a file
/// (`>`); a program from a file (`-f`) is unknown. Conservative: a `>`
/// comparison also counts.
fn awk_unsafe(args: &[String]) -> bool {
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "-v" || a == "-F" {
            i += 1;
            continue;
        }
        if a == "--" {
            return args.get(i).is_some_and(|p| awk_program_unsafe(p));
        }
        if !a.starts_with('-') {
            return awk_program_unsafe(a);
        }
    }
    false
}

fn awk_program_unsafe(program: &str) -> bool {
    program.contains("system") || program.contains('|') || program.contains('>')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn the_table_parses() {
        let table: Table = serde_json::from_str(include_str!("options.json")).unwrap();
        assert!(table.entries.len() > 15);
        for e in &table.entries {
            assert!(!e.why.is_empty(), "{:?}", e.programs);
        }
    }

    #[test]
    fn unsafe_uses() {
        let u = |p: &str, a: &str| unsafe_use(p, &words(a)).is_some();
        assert!(u("git", "diff --output=x"));
        assert!(u("git", "diff --out=x"));
        assert!(u("git", "-c core.pager=x log"));
        assert!(!u("git", "log -c"));
        assert!(!u("git", "log --oneline -n 5"));
        assert!(!u("git", "status -s"));
        assert!(u("sort", "-uo out in"));
        assert!(!u("sort", "-u in"));
        assert!(u("find", ". -name x -exec rm {} ;"));
        assert!(u("find", ". -delete"));
        assert!(!u("find", ". -name x -print"));
        assert!(u("sed", "-n 1w out in"));
        assert!(u("sed", "-i s/a/b/ f"));
        assert!(u("sed", "1e id"));
        assert!(u("sed", "s/a/b/w out"));
        assert!(u("sed", "s/a/b/e"));
        assert!(!u("sed", "-n 1,5p f"));
        assert!(!u("sed", "s/hello/world/g f"));
        assert!(!u("sed", "-e s/a/b/ -e /x/d f"));
        assert!(u("tar", "xzf a.tar"));
        assert!(u("tar", "-cf a.tar x"));
        assert!(u("tar", "--checkpoint-action=exec=sh -tf a.tar"));
        assert!(!u("tar", "-tzf a.tar"));
        assert!(u("make", "-f ../x.mk"));
        assert!(u("make", "-C ../dir"));
        assert!(u("make", "SHELL=/tmp/x"));
        assert!(!u("make", "test"));
        assert!(u("npm", "test --prefix ../pkg"));
        assert!(u("npm", "test --node-options=--require=x"));
        assert!(!u("npm", "test -- --watch"));
        assert!(u("python3", "-c print(1)"));
        assert!(!u("python3", "script.py -c"));
        assert!(u("python3.12", "-m http.server"));
        assert!(u("awk", "{system(\"id\")}"));
        assert!(!u("awk", "-F: {print $1} f"));
        assert!(u("wget", "https://x"));
        assert!(u("tee", "f"));
    }

    #[test]
    fn written_files_are_found() {
        let w = |p: &str, a: &str| written_files(p, &words(a));
        assert_eq!(w("tee", "-a f g"), ["f", "g"]);
        assert_eq!(w("dd", "if=a of=b"), ["b"]);
        assert_eq!(w("sort", "-o out in"), ["out"]);
        assert_eq!(w("sort", "-uoout in"), ["out"]);
        assert_eq!(w("git", "diff --output=x"), ["x"]);
        assert_eq!(w("curl", "-o f https://x"), ["f"]);
        assert!(w("ls", "-la").is_empty());
    }
}
