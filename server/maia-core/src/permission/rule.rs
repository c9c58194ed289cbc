//! One rule, `Tool` or `Tool(pattern)`, and what it matches.

use std::path::{Component, Path, PathBuf};

use globset::GlobBuilder;
use maia_tools::ToolInput;
use serde_json::Value;

use super::shell;

/// One rule, `Tool` or `Tool(pattern)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub tool: String,
    pub pattern: Option<String>,
}

/// Why a rule could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed permission rule `{0}`")]
pub struct RuleError(pub String);

/// The three rule families, in evaluation order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    Deny,
    Ask,
    Allow,
}

impl Family {
    /// The key under `permissions` in settings files.
    pub fn key(self) -> &'static str {
        match self {
            Family::Allow => "allow",
            Family::Ask => "ask",
            Family::Deny => "deny",
        }
    }

    /// The badge shown by `/permissions`.
    pub fn badge(self) -> &'static str {
        match self {
            Family::Allow => "ALLOW",
            Family::Ask => "ASK",
            Family::Deny => "DENY",
        }
    }
}

/// How a tool's pattern is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bash,
    /// A file path (Read, Write, Edit, MultiEdit).
    File,
    /// A search root (Glob, Grep): `src/**` also covers `src` itself.
    Dir,
    WebFetch,
    /// Web search: `domain:` patterns match the call's `allowed_domains`.
    WebSearch,
    Skill,
    Other,
}

fn kind_of(tool: &str) -> Kind {
    match tool.to_ascii_lowercase().as_str() {
        "bash" => Kind::Bash,
        "read" | "write" | "edit" | "multiedit" => Kind::File,
        "glob" | "grep" => Kind::Dir,
        "webfetch" => Kind::WebFetch,
        "websearch" => Kind::WebSearch,
        "skill" => Kind::Skill,
        _ => Kind::Other,
    }
}

impl Rule {
    /// Parses `Tool` or `Tool(pattern)`. Tool names are letters, digits,
    /// `_` and `-` (MCP tools: `mcp__server__tool`); a pattern may not be
    /// empty; `WebFetch` and `WebSearch` patterns must be `domain:<host>`.
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        let text = text.trim();
        let bad = || RuleError(text.to_owned());
        let (tool, pattern) = match text.find('(') {
            None => (text, None),
            Some(open) => {
                let inner = text[open + 1..].strip_suffix(')').ok_or_else(bad)?;
                (&text[..open], Some(inner.to_owned()))
            }
        };
        let valid_name = !tool.is_empty()
            && tool
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_name || pattern.as_deref().is_some_and(|p| p.trim().is_empty()) {
            return Err(bad());
        }
        if let (Kind::WebFetch | Kind::WebSearch, Some(p)) = (kind_of(tool), &pattern) {
            let host = p.trim().strip_prefix("domain:").map(str::trim);
            let ok = host.is_some_and(|h| {
                !h.is_empty()
                    && !h.contains(['/', ':', '@', ' '])
                    && (h == "*" || !h[h.starts_with("*.") as usize * 2..].contains('*'))
            });
            if !ok {
                return Err(bad());
            }
        }
        if let (Kind::File | Kind::Dir, Some(p)) = (kind_of(tool), &pattern)
            && build_glob(&path_pattern_text(p, None)).is_none()
        {
            return Err(bad());
        }
        Ok(Rule {
            tool: tool.to_owned(),
            pattern,
        })
    }

    /// Whether the rule names `tool` (case-insensitively: `bash` = `Bash`).
    /// Whether the rule is about `tool`: its own name, or the tool whose
    /// rules cover it (`maia_tools::rule_parent`: an Edit rule covers
    /// MultiEdit; a MultiEdit rule names only MultiEdit).
    pub fn names(&self, tool: &str) -> bool {
        self.tool.eq_ignore_ascii_case(tool)
            || maia_tools::rule_parent(tool).is_some_and(|p| self.tool.eq_ignore_ascii_case(p))
    }

    /// Whether this rule covers a built-in call in a session rooted at
    /// `cwd`. `for_allow` is true for allow rules, which are stricter (see
    /// [`Rule::matches_value`]).
    pub fn matches(&self, input: &ToolInput, cwd: &Path, for_allow: bool) -> bool {
        self.matches_value(input.name(), &input_value(input), cwd, for_allow)
    }

    /// Whether this rule alone covers a call of `tool` with JSON `input`.
    ///
    /// For allow rules (`for_allow`): a shell command is covered only when
    /// it parses, has no redirection or substitution, and every part is
    /// matched; paths are matched only once resolved (`..` folded, symlinks
    /// followed). For deny and ask rules: one matching part (hidden ones
    /// included) is enough, and a path matches as written or as resolved.
    /// (The broker lets several allow rules cover the parts of one command
    /// together.)
    pub fn matches_value(&self, tool: &str, input: &Value, cwd: &Path, for_allow: bool) -> bool {
        self.matches_in(tool, input, (cwd, &[], None), for_allow)
    }

    /// [`Rule::matches_value`] in a session with additional workspace
    /// roots (relative patterns also apply inside each of them) and a home
    /// folder (what `~` is).
    pub(crate) fn matches_in(
        &self,
        tool: &str,
        input: &Value,
        (cwd, roots, home): (&Path, &[PathBuf], Option<&Path>),
        for_allow: bool,
    ) -> bool {
        if !self.names(tool) {
            return false;
        }
        let subject = Subject::in_roots(tool, input, (cwd, roots, home));
        match (&subject, for_allow) {
            (Subject::Bash { analysis, .. }, true) => {
                bash_allowable(analysis) && analysis.parts.iter().all(|p| self.covers_part(p))
            }
            _ => self.hits(&subject, for_allow),
        }
    }

    /// For an allow rule of Bash: whether it covers one part as written.
    ///
    /// A part whose program is computed is never covered. A pattern
    /// without `*` is an exact command and covers it as written; a prefix
    /// pattern (with `*`) never covers a part that uses an option of the
    /// built-in table ([`super::options`]).
    pub(crate) fn covers_part(&self, part: &shell::Part) -> bool {
        if part.dynamic {
            return false;
        }
        match self.pattern.as_deref().map(str::trim) {
            None => true,
            Some(p) if !p.contains('*') => p == part.raw || p == part.plain,
            Some(p) => part.unsafe_use.is_none() && wildcard(p, &part.raw, true),
        }
    }

    /// Whether the rule (already known to name the tool) matches `subject`;
    /// for Bash, the deny/ask reading (one part is enough).
    pub(crate) fn hits(&self, subject: &Subject<'_>, for_allow: bool) -> bool {
        let Some(pattern) = self.pattern.as_deref().map(str::trim) else {
            return true;
        };
        match subject {
            Subject::Bash { command, analysis } => {
                // Unsure means no: a command the checker cannot know (not
                // parsed, or a computed program) meets every deny and ask.
                !analysis.parsed
                    || analysis.dynamic()
                    || wildcard(pattern, command.trim(), true)
                    || analysis.parts.iter().any(|p| {
                        wildcard(pattern, &p.raw, true)
                            || wildcard(pattern, &p.plain, true)
                            || wildcard(pattern, &p.stripped, true)
                            || p.candidates.iter().any(|c| wildcard(pattern, c, true))
                    })
            }
            Subject::Path { path, dir } => path_matches(pattern, path, *dir, for_allow),
            Subject::Host(host) => host.as_deref().is_some_and(|h| domain_matches(pattern, h)),
            // A search kept to these domains: a deny or ask rule meets it
            // when one of them matches, an allow only when all do.
            Subject::Hosts(hosts) if for_allow => {
                !hosts.is_empty() && hosts.iter().all(|h| domain_matches(pattern, h))
            }
            Subject::Hosts(hosts) => hosts.iter().any(|h| domain_matches(pattern, h)),
            Subject::Skill(name) => name.as_deref().is_some_and(|n| wildcard(pattern, n, false)),
            Subject::Values(values) => values.iter().any(|v| wildcard(pattern, v, false)),
            Subject::Nothing => false,
        }
    }
}

/// A call, read once for all the rules.
#[derive(Debug)]
pub(crate) enum Subject<'a> {
    Bash {
        command: String,
        analysis: shell::Analysis,
    },
    Path {
        path: PathAt<'a>,
        dir: bool,
    },
    Host(Option<String>),
    /// The domains a web search is kept to (none: the whole web).
    Hosts(Vec<String>),
    Skill(Option<String>),
    Values(Vec<String>),
    /// No usable argument (a path tool without a path).
    Nothing,
}

/// A path (absolute, lexically normalised), the cwd of the session, its
/// additional workspace roots (relative patterns apply inside each) and
/// the home folder (what `~/` in a pattern is).
#[derive(Debug)]
pub(crate) struct PathAt<'a> {
    pub path: PathBuf,
    pub cwd: &'a Path,
    pub roots: &'a [PathBuf],
    pub home: Option<&'a Path>,
}

/// Whether an allow may apply to this command at all.
pub(crate) fn bash_allowable(analysis: &shell::Analysis) -> bool {
    analysis.parsed && !analysis.risky && !analysis.parts.is_empty()
}

impl<'a> Subject<'a> {
    /// A call in a session rooted at `cwd` with additional workspace
    /// `roots`, for a user whose home folder is `home` (the engine's).
    /// Relative paths still resolve against `cwd`.
    pub(crate) fn in_roots(
        tool: &str,
        input: &Value,
        (cwd, roots, home): (&'a Path, &'a [PathBuf], Option<&'a Path>),
    ) -> Self {
        let kind = kind_of(tool);
        match kind {
            Kind::Bash => {
                let command = input
                    .get("command")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                let analysis = shell::analyse(&command, cwd, home);
                Subject::Bash { command, analysis }
            }
            Kind::File | Kind::Dir => {
                let raw = if kind == Kind::File {
                    input
                        .get("file_path")
                        .or_else(|| input.get("path"))
                        .and_then(Value::as_str)
                } else {
                    match input.get("path") {
                        None | Some(Value::Null) => Some("."),
                        Some(v) => v.as_str(),
                    }
                };
                match raw {
                    Some(raw) => {
                        let raw = if raw.trim().is_empty() { "." } else { raw };
                        Subject::Path {
                            path: PathAt {
                                path: maia_tools::path::resolve(cwd, raw),
                                cwd,
                                roots,
                                home,
                            },
                            dir: kind == Kind::Dir,
                        }
                    }
                    None => Subject::Nothing,
                }
            }
            Kind::WebFetch => {
                Subject::Host(input.get("url").and_then(Value::as_str).and_then(url_host))
            }
            Kind::WebSearch => Subject::Hosts(
                input
                    .get("allowed_domains")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(|d| d.trim().trim_start_matches("*.").to_ascii_lowercase())
                    .filter(|d| !d.is_empty())
                    .collect(),
            ),
            Kind::Skill => Subject::Skill(
                input
                    .get("skill")
                    .or_else(|| input.get("name"))
                    .and_then(Value::as_str)
                    .map(|s| s.trim().to_owned()),
            ),
            Kind::Other => {
                let mut values = Vec::new();
                text_values(input, &mut values);
                Subject::Values(values)
            }
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.pattern {
            Some(p) => write!(f, "{}({p})", self.tool),
            None => f.write_str(&self.tool),
        }
    }
}

/// The JSON arguments of a built-in call, as the model sent them.
pub(crate) fn input_value(input: &ToolInput) -> Value {
    use serde_json::json;
    match input {
        ToolInput::Read(i) => json!({ "file_path": i.file_path }),
        ToolInput::Write(i) => json!({ "file_path": i.file_path }),
        ToolInput::Edit(i) => json!({ "file_path": i.file_path }),
        ToolInput::MultiEdit(i) => json!({ "file_path": i.file_path }),
        ToolInput::Glob(i) => json!({ "pattern": i.pattern, "path": i.path }),
        ToolInput::Grep(i) => json!({ "pattern": i.pattern, "path": i.path }),
        ToolInput::Bash(i) => json!({ "command": i.command }),
        ToolInput::WebFetch(i) => json!({ "url": i.url }),
    }
}

/// Every string and number in `value` (recursively), as text.
fn text_values(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(items) => items.iter().for_each(|v| text_values(v, out)),
        Value::Object(map) => map.values().for_each(|v| text_values(v, out)),
        Value::Null | Value::Bool(_) => {}
    }
}

// ---------------------------------------------------------------- Bash

/// `*` is any sequence. With `bash_style`, a pattern ending in ` *` also
/// covers the command alone (`npm test *` covers `npm test`, not
/// `npm testx`). Without `*`, the text must be equal.
pub(crate) fn wildcard(pattern: &str, text: &str, bash_style: bool) -> bool {
    let pattern = pattern.trim();
    let to_regex = |p: &str| {
        p.split('*')
            .map(regex::escape)
            .collect::<Vec<_>>()
            .join(".*")
    };
    let body = match pattern.strip_suffix(" *").filter(|_| bash_style) {
        Some(prefix) => format!("{}(?: .*)?", to_regex(prefix)),
        None => to_regex(pattern),
    };
    regex::Regex::new(&format!("^(?s:{body})$")).is_ok_and(|re| re.is_match(text))
}

// ---------------------------------------------------------------- paths

/// Gitignore-style: `./x` and `x/y` are anchored at the cwd, a bare name
/// (`.env`, `*.pem`) matches at any depth, a trailing `/` means the folder
/// and everything below it, `/abs/**` and `~/x` are absolute (`~` is
/// `home`, the engine's home folder; without one, `~/x` matches nothing
/// outside a folder literally named `~`).
fn path_pattern_text(pattern: &str, home: Option<&Path>) -> String {
    let mut p = pattern.trim().to_owned();
    if let Some(rest) = p.strip_prefix("~/")
        && let Some(home) = home
    {
        p = home.join(rest).to_string_lossy().into_owned();
    }
    // gitignore: a slash at the start or in the middle anchors the pattern
    // at the base folder; a pattern with no slash, or only a trailing one,
    // matches at any depth.
    let anchored = p.trim_end_matches('/').contains('/');
    if p.ends_with('/') && p.len() > 1 {
        p.push_str("**");
    }
    if Path::new(&p).is_absolute() {
        return p;
    }
    if let Some(rest) = p.strip_prefix("./") {
        return rest.trim_start_matches('/').to_owned();
    }
    if !anchored && p != "**" && !p.starts_with("**/") {
        return format!("**/{p}");
    }
    p
}

fn build_glob(pattern: &str) -> Option<globset::GlobMatcher> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .ok()
        .map(|g| g.compile_matcher())
}

/// Resolves symlinks in the longest existing ancestor of `path` (lexically
/// normalised first) and appends the rest. `None` for a dangling or looping
/// symlink (its target is unknown).
pub(crate) fn real_path(path: &Path) -> Option<PathBuf> {
    let path = maia_tools::path::normalize(path);
    let mut existing = path.clone();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        match std::fs::canonicalize(&existing) {
            Ok(mut real) => {
                for part in rest.iter().rev() {
                    real.push(part);
                }
                return Some(real);
            }
            Err(_) => {
                if std::fs::symlink_metadata(&existing).is_ok() {
                    return None;
                }
                rest.push(existing.file_name()?.to_os_string());
                if !existing.pop() {
                    return None;
                }
            }
        }
    }
}

/// The absolute pattern with the symlinks of its literal (glob-free)
/// leading folders resolved, so `/tmp/x/**` also matches the real path.
fn real_pattern(pattern: &str) -> String {
    let path = Path::new(pattern);
    let mut literal = PathBuf::new();
    let mut rest = PathBuf::new();
    let mut in_glob = false;
    for c in path.components() {
        let glob =
            matches!(c, Component::Normal(s) if s.to_string_lossy().contains(['*', '?', '[', '{']));
        in_glob |= glob;
        if in_glob {
            rest.push(c.as_os_str());
        } else {
            literal.push(c.as_os_str());
        }
    }
    match real_path(&literal) {
        Some(real) if rest.as_os_str().is_empty() => real.to_string_lossy().into_owned(),
        Some(real) => real.join(rest).to_string_lossy().into_owned(),
        None => pattern.to_owned(),
    }
}

fn path_matches(pattern: &str, at: &PathAt<'_>, dir: bool, for_allow: bool) -> bool {
    let (path, cwd) = (at.path.as_path(), at.cwd);
    let text = path_pattern_text(pattern, at.home);
    let absolute = Path::new(&text).is_absolute();
    let matcher = |p: &str| build_glob(p);
    let check = |m: &globset::GlobMatcher, candidate: &Path| {
        m.is_match(candidate) || (dir && m.is_match(candidate.join("_")))
    };
    // The workspace roots: the cwd first, then the additional ones.
    let bases = || std::iter::once(cwd).chain(at.roots.iter().map(PathBuf::as_path));
    let real = real_path(path);
    let mut candidates: Vec<(PathBuf, PathBuf)> = Vec::new(); // (absolute, root)
    if let Some(real) = real {
        for base in bases() {
            let real_base = real_path(base).unwrap_or_else(|| maia_tools::path::normalize(base));
            candidates.push((real.clone(), real_base));
        }
    } else if for_allow {
        // A dangling symlink: its target is unknown, never allowed.
        return false;
    }
    if !for_allow {
        for base in bases() {
            candidates.push((
                maia_tools::path::normalize(path),
                maia_tools::path::normalize(base),
            ));
        }
    }
    if absolute {
        let patterns = if for_allow {
            vec![real_pattern(&text)]
        } else {
            vec![text.clone(), real_pattern(&text)]
        };
        return patterns
            .iter()
            .filter_map(|p| matcher(p))
            .any(|m| candidates.iter().any(|(abs, _)| check(&m, abs)));
    }
    let Some(m) = matcher(&text) else {
        return false;
    };
    candidates.iter().any(|(abs, root)| {
        // A path outside every root never matches a relative pattern.
        match abs.strip_prefix(root) {
            Ok(rel) if rel.as_os_str().is_empty() => dir && m.is_match("_"),
            Ok(rel) => check(&m, rel),
            Err(_) => false,
        }
    })
}

// ---------------------------------------------------------------- WebFetch

/// The host of an http(s) URL, lower-case, without port or trailing dot.
pub(crate) fn url_host(raw: &str) -> Option<String> {
    let url = url::Url::parse(raw.trim()).ok()?;
    let host = match url.host()? {
        url::Host::Domain(d) => d.to_ascii_lowercase(),
        url::Host::Ipv4(ip) => ip.to_string(),
        url::Host::Ipv6(ip) => ip.to_string(),
    };
    Some(host.trim_end_matches('.').to_owned())
}

/// `domain:example.com` is that host only; `domain:*.example.org` is any
/// subdomain (`a.example.org`, `a.b.example.org`) but not `example.org`
/// itself; `domain:*` is any host. Case-insensitive; ports are ignored.
fn domain_matches(pattern: &str, host: &str) -> bool {
    let Some(want) = pattern.trim().strip_prefix("domain:") else {
        return false;
    };
    let want = want.trim().trim_end_matches('.').to_ascii_lowercase();
    let want = want
        .strip_prefix('[')
        .and_then(|w| w.strip_suffix(']'))
        .unwrap_or(&want);
    if want == "*" {
        return true;
    }
    match want.strip_prefix("*.") {
        Some(suffix) => host.len() > suffix.len() + 1 && host.ends_with(&format!(".{suffix}")),
        None => host == want,
    }
}
