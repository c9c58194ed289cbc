//! Custom tools: `<cwd>/.maia/tools/<folder>/TOOL.json` (or `tool.json`),
//! only in the working folder.
//!
//! ```json
//! {
//!   "name": "Addition",
//!   "description": "Adds three numbers and returns the sum",
//!   "command": {
//!     "parameters": {
//!       "a": { "type": "number", "description": "first" },
//!       "b": { "type": "number" },
//!       "c": { "type": "number", "default": 0 }
//!     },
//!     "run": "node ./add.js {{a}} {{b}} {{c}}"
//!   }
//! }
//! ```
//!
//! `name` is optional (the folder name by default; letters, digits, `_`, `-`,
//! at most 64; no clash with a built-in tool or another custom tool, case
//! ignored). Each parameter is a `"number"` or a `"string"`; one without
//! `default` is required. A trailing comma before `]` or `}` is tolerated.
//!
//! No shell is involved: `run` is split into words once (single and double
//! quotes group words) and each `{{param}}` is replaced inside its word, so
//! a value sent by the model is always exactly one argument (`; rm -rf /`
//! and `$(cmd)` reach the program verbatim). The program (first word) can
//! never be a parameter; a program starting with `./` is in the tool's
//! folder, which is also the working directory. The process gets
//! `MAIA_CWD` and `MAIA_TOOL_DIR`, no stdin, its own process group (killed
//! on cancellation and after 2 minutes); its stdout is returned (30,000
//! characters, middle dropped) and a non-zero exit is an error carrying the
//! exit code and stderr.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use maia_llm::ToolSpec;
use maia_tools::runner::{self, Outcome};
use maia_tools::{CappedOutput, ToolOutput, truncate_middle};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

/// Definition file names tried in a tool folder, in order.
pub const FILE_NAMES: [&str; 2] = ["TOOL.json", "tool.json"];
/// Longest tool name.
pub const MAX_NAME_CHARS: usize = 64;
/// How long a custom tool may run.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// Most characters of output returned to the model.
pub const MAX_OUTPUT_CHARS: usize = 30_000;
/// Most characters of stderr kept in an error.
const MAX_STDERR_CHARS: usize = 10_000;

/// The type of a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    Number,
    String,
}

impl ParamType {
    /// The JSON Schema / TOOL.json spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ParamType::Number => "number",
            ParamType::String => "string",
        }
    }
}

/// One parameter of a custom tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: String,
    pub kind: ParamType,
    /// Used when the model gives no value; without it the parameter is
    /// required. Always of the parameter's type.
    pub default: Option<Value>,
    pub description: Option<String>,
}

impl Param {
    /// Whether the model must give a value.
    pub fn required(&self) -> bool {
        self.default.is_none()
    }
}

/// A piece of a word of `command.run`.
#[derive(Debug, Clone, PartialEq)]
enum Segment {
    Text(String),
    /// Index into `parameters`.
    Param(usize),
}

/// One loaded custom tool.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomTool {
    pub name: String,
    pub description: String,
    /// The tool's folder (working directory of its program).
    pub dir: PathBuf,
    /// The definition file.
    pub path: PathBuf,
    /// Sorted by name.
    pub parameters: Vec<Param>,
    /// `command.run` split into words, each a sequence of text and
    /// parameters; the first word (the program) has no parameter.
    run_words: Vec<Vec<Segment>>,
    /// What the tool was when loaded ([`fingerprint`]): what the user
    /// confirms.
    pub fingerprint: String,
}

/// The result of [`load`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadedTools {
    /// Sorted by folder name.
    pub tools: Vec<CustomTool>,
    /// Problems found (each names the file or folder).
    pub warnings: Vec<String>,
}

impl LoadedTools {
    /// The tool called exactly `name`.
    pub fn get(&self, name: &str) -> Option<&CustomTool> {
        self.tools.iter().find(|t| t.name == name)
    }
}

/// The folder custom tools are read from.
pub fn root(cwd: &Path) -> PathBuf {
    cwd.join(".maia").join("tools")
}

/// Loads the custom tools of a session in `cwd`. `reserved` are the names
/// already taken (built-in tools); they are compared case-insensitively.
/// Invalid definitions are skipped with a warning (also logged).
pub fn load<S: AsRef<str>>(cwd: &Path, reserved: &[S]) -> LoadedTools {
    let mut out = LoadedTools::default();
    let root = root(cwd);
    let entries = match std::fs::read_dir(&root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return out,
        Err(e) => {
            out.warnings
                .push(format!("cannot read {}: {e}", root.display()));
            return out;
        }
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let Some(path) = FILE_NAMES.iter().map(|n| dir.join(n)).find(|p| p.is_file()) else {
            out.warnings.push(format!(
                "custom tool folder {} has no TOOL.json; skipped",
                dir.display()
            ));
            continue;
        };
        let result = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read it: {e}"))
            .and_then(|text| parse(&dir, &path, &text, reserved, &out.tools));
        match result {
            Ok(tool) => out.tools.push(tool),
            Err(e) => out
                .warnings
                .push(format!("custom tool {}: {e}; skipped", path.display())),
        }
    }
    for w in &out.warnings {
        tracing::warn!("{w}");
    }
    for t in &out.tools {
        tracing::info!(name = %t.name, path = %t.path.display(), "custom tool loaded");
    }
    out
}

/// Whether `name` is a valid tool name: letters, digits, `_` and `-`, one
/// to [`MAX_NAME_CHARS`] characters.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Parses one definition. `taken` are the custom tools already loaded.
fn parse<S: AsRef<str>>(
    dir: &Path,
    path: &Path,
    text: &str,
    reserved: &[S],
    taken: &[CustomTool],
) -> Result<CustomTool, String> {
    let value = parse_definition_json(text).map_err(|e| format!("invalid JSON ({e})"))?;
    let Value::Object(def) = value else {
        return Err("the definition must be a JSON object".into());
    };

    let description = match def.get("description") {
        Some(Value::String(d)) if !d.trim().is_empty() => d.trim().to_string(),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            return Err("`description` is missing".into());
        }
        Some(_) => return Err("`description` must be a string".into()),
    };

    let name = match def.get("name") {
        None | Some(Value::Null) => {
            let folder = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if !valid_name(folder) {
                return Err(format!(
                    "the folder name `{folder}` is not a valid tool name (letters, digits, `_`, `-`, at most {MAX_NAME_CHARS}); set `name`"
                ));
            }
            folder.to_string()
        }
        Some(Value::String(n)) => {
            if !valid_name(n) {
                return Err(format!(
                    "`name` `{n}` is invalid (letters, digits, `_`, `-`, at most {MAX_NAME_CHARS})"
                ));
            }
            n.clone()
        }
        Some(_) => return Err("`name` must be a string".into()),
    };
    if let Some(builtin) = reserved
        .iter()
        .map(AsRef::as_ref)
        .find(|r| r.eq_ignore_ascii_case(&name))
    {
        return Err(format!(
            "the name `{name}` is taken by the built-in tool `{builtin}`"
        ));
    }
    if let Some(other) = taken.iter().find(|t| t.name.eq_ignore_ascii_case(&name)) {
        return Err(format!(
            "the name `{name}` is already used by the custom tool `{}` ({})",
            other.name,
            other.path.display()
        ));
    }

    let command = match def.get("command") {
        Some(Value::Object(c)) => c,
        None | Some(Value::Null) => return Err("`command` is missing".into()),
        Some(_) => return Err("`command` must be an object".into()),
    };
    let parameters = parse_parameters(command.get("parameters"))?;
    let run = match command.get("run") {
        Some(Value::String(r)) if !r.trim().is_empty() => r,
        Some(Value::String(_)) | None | Some(Value::Null) => {
            return Err("`command.run` is missing".into());
        }
        Some(_) => return Err("`command.run` must be a string".into()),
    };
    let run_words = split_words(run)?
        .iter()
        .map(|w| parse_word(w, &parameters))
        .collect::<Result<Vec<_>, _>>()?;
    if run_words
        .first()
        .is_some_and(|w| w.iter().any(|s| matches!(s, Segment::Param(_))))
    {
        return Err("the program (first word of `command.run`) cannot be a parameter".into());
    }

    Ok(CustomTool {
        name,
        description,
        dir: dir.to_path_buf(),
        path: path.to_path_buf(),
        parameters,
        run_words,
        fingerprint: fingerprint(dir),
    })
}

fn parse_parameters(value: Option<&Value>) -> Result<Vec<Param>, String> {
    let map = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(map)) => map,
        Some(_) => return Err("`command.parameters` must be an object".into()),
    };
    let mut out = Vec::with_capacity(map.len());
    for (name, spec) in map {
        if !valid_name(name) {
            return Err(format!(
                "parameter name `{name}` is invalid (letters, digits, `_`, `-`, at most {MAX_NAME_CHARS})"
            ));
        }
        let Value::Object(spec) = spec else {
            return Err(format!("parameter `{name}` must be an object"));
        };
        let kind = match spec.get("type") {
            Some(Value::String(t)) if t == "number" => ParamType::Number,
            Some(Value::String(t)) if t == "string" => ParamType::String,
            Some(Value::String(t)) => {
                return Err(format!(
                    "parameter `{name}` has the unknown type `{t}` (expected \"number\" or \"string\")"
                ));
            }
            None => return Err(format!("parameter `{name}` has no `type`")),
            Some(other) => {
                return Err(format!(
                    "parameter `{name}` has the unknown type {other} (expected \"number\" or \"string\")"
                ));
            }
        };
        let default = match (spec.get("default"), kind) {
            (None, _) => None,
            (Some(v @ Value::Number(_)), ParamType::Number)
            | (Some(v @ Value::String(_)), ParamType::String) => Some(v.clone()),
            (Some(v), _) => {
                return Err(format!(
                    "parameter `{name}`: the default {v} is not a {}",
                    kind.as_str()
                ));
            }
        };
        let description = match spec.get("description") {
            None | Some(Value::Null) => None,
            Some(Value::String(d)) => Some(d.clone()),
            Some(_) => {
                return Err(format!(
                    "parameter `{name}`: `description` must be a string"
                ));
            }
        };
        out.push(Param {
            name: name.clone(),
            kind,
            default,
            description,
        });
    }
    Ok(out)
}

/// Reads a definition: JSON with trailing commas tolerated, nothing else
/// of JSONC or JSON5 (comments, single quotes, bare names are errors).
fn parse_definition_json(text: &str) -> Result<Value, String> {
    let options = jsonc_parser::ParseOptions {
        allow_comments: false,
        allow_loose_object_property_names: false,
        allow_trailing_commas: true,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    };
    jsonc_parser::parse_to_serde_value::<Value>(text, &options).map_err(|e| e.to_string())
}

/// Splits a command line into words: whitespace separates words; single
/// quotes keep everything literally; double quotes keep everything except
/// that `\"` and `\\` stand for `"` and `\`. Quotes group text into the
/// word around them (`a'b c'd` is one word `ab cd`; `''` is an empty word).
/// Backslashes outside quotes are literal (Windows paths). A `{{…}}`
/// outside quotes is kept whole, so `{{ param }}` is one reference.
fn split_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("`command.run` has an unclosed single quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') if matches!(chars.peek(), Some('"' | '\\')) => {
                            if let Some(c) = chars.next() {
                                word.push(c);
                            }
                        }
                        Some(c) => word.push(c),
                        None => return Err("`command.run` has an unclosed double quote".into()),
                    }
                }
            }
            '{' if chars.peek() == Some(&'{') => {
                // `{{ param }}` stays in one word even with spaces inside.
                in_word = true;
                word.push_str("{{");
                chars.next();
                let rest: String = chars.clone().collect();
                if let Some(close) = rest.find("}}") {
                    let inner = &rest[..close];
                    word.push_str(inner);
                    word.push_str("}}");
                    for _ in 0..inner.chars().count() + 2 {
                        chars.next();
                    }
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// Cuts a word into text and `{{param}}` references (spaces inside the
/// braces are allowed). A `{{` without a closing `}}` is text.
fn parse_word(word: &str, params: &[Param]) -> Result<Vec<Segment>, String> {
    let mut segments = Vec::new();
    let mut rest = word;
    let mut text = String::new();
    while let Some(open) = rest.find("{{") {
        let Some(close) = rest[open + 2..].find("}}") else {
            break;
        };
        let name = rest[open + 2..open + 2 + close].trim();
        let Some(index) = params.iter().position(|p| p.name == name) else {
            return Err(format!(
                "`{{{{{name}}}}}` in `command.run` is not a declared parameter"
            ));
        };
        text.push_str(&rest[..open]);
        if !text.is_empty() {
            segments.push(Segment::Text(std::mem::take(&mut text)));
        }
        segments.push(Segment::Param(index));
        rest = &rest[open + 2 + close + 2..];
    }
    text.push_str(rest);
    if !text.is_empty() || segments.is_empty() {
        segments.push(Segment::Text(text));
    }
    Ok(segments)
}

/// A number as JavaScript prints it (`5`, not `5.0`).
fn format_number(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    match n.as_f64() {
        Some(0.0) => "0".into(),
        Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{f:.0}"),
        _ => n.to_string(),
    }
}

impl CustomTool {
    /// The tool as offered to the model.
    pub fn definition(&self) -> ToolSpec {
        let mut properties = Map::new();
        for p in &self.parameters {
            let mut schema = Map::new();
            schema.insert("type".into(), json!(p.kind.as_str()));
            if let Some(d) = &p.description {
                schema.insert("description".into(), json!(d));
            }
            if let Some(d) = &p.default {
                schema.insert("default".into(), d.clone());
            }
            properties.insert(p.name.clone(), Value::Object(schema));
        }
        let required: Vec<&str> = self
            .parameters
            .iter()
            .filter(|p| p.required())
            .map(|p| p.name.as_str())
            .collect();
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: json!({
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": false,
            }),
        }
    }

    /// The parameter values for `input` (defaults applied), as text, in the
    /// order of [`CustomTool::parameters`]. Errors list every problem.
    pub fn values(&self, input: &Value) -> Result<Vec<String>, String> {
        let empty = Map::new();
        let map = match input {
            Value::Null => &empty,
            Value::Object(map) => map,
            _ => return Err(format!("The input of {} must be a JSON object.", self.name)),
        };
        let mut errors = Vec::new();
        for key in map.keys() {
            if !self.parameters.iter().any(|p| &p.name == key) {
                errors.push(format!("unknown parameter `{key}`"));
            }
        }
        let mut values = Vec::with_capacity(self.parameters.len());
        for p in &self.parameters {
            let value = match map.get(&p.name) {
                None | Some(Value::Null) => match &p.default {
                    Some(d) => d,
                    None => {
                        errors.push(format!(
                            "missing required {} parameter `{}`",
                            p.kind.as_str(),
                            p.name
                        ));
                        continue;
                    }
                },
                Some(v) => v,
            };
            match (p.kind, value) {
                (ParamType::Number, Value::Number(n)) => values.push(format_number(n)),
                (ParamType::String, Value::String(s)) => values.push(s.clone()),
                (kind, v) => errors.push(format!(
                    "parameter `{}` must be a {}, got {v}",
                    p.name,
                    kind.as_str()
                )),
            }
        }
        if errors.is_empty() {
            Ok(values)
        } else {
            Err(format!(
                "Invalid input for {}: {}.",
                self.name,
                errors.join("; ")
            ))
        }
    }

    /// The program and its arguments for `input`, as written in
    /// `command.run` with each `{{param}}` replaced inside its word. A value
    /// is never split or interpreted: it always stays within one argument.
    pub fn argv(&self, input: &Value) -> Result<Vec<String>, String> {
        let values = self.values(input)?;
        Ok(self
            .run_words
            .iter()
            .map(|word| {
                word.iter()
                    .map(|s| match s {
                        Segment::Text(t) => t.as_str(),
                        Segment::Param(i) => values[*i].as_str(),
                    })
                    .collect::<String>()
            })
            .collect())
    }

    /// The program to start for `argv[0]`: a relative path with a `/`
    /// (`./x.sh`, `bin/x`) is in the tool's folder; a bare name is looked
    /// up in `PATH`.
    fn program(&self, first: &str) -> PathBuf {
        let path = Path::new(first);
        if path.is_relative() && first.contains('/') {
            self.dir.join(first.strip_prefix("./").unwrap_or(first))
        } else {
            path.to_path_buf()
        }
    }

    /// Runs the tool for `input` with `cwd` as the session's working folder.
    /// Never panics; problems are error outputs for the model.
    pub async fn run(&self, input: &Value, cwd: &Path, cancel: &CancellationToken) -> ToolOutput {
        self.run_with_timeout(input, cwd, cancel, RUN_TIMEOUT, None)
            .await
    }

    /// [`CustomTool::run`] inside the session's sandbox.
    pub async fn run_sandboxed(
        &self,
        input: &Value,
        cwd: &Path,
        cancel: &CancellationToken,
        sandbox: Option<&maia_tools::sandbox::Sandbox>,
    ) -> ToolOutput {
        self.run_with_timeout(input, cwd, cancel, RUN_TIMEOUT, sandbox)
            .await
    }

    async fn run_with_timeout(
        &self,
        input: &Value,
        cwd: &Path,
        cancel: &CancellationToken,
        timeout: Duration,
        sandbox: Option<&maia_tools::sandbox::Sandbox>,
    ) -> ToolOutput {
        let argv = match self.argv(input) {
            Ok(argv) => argv,
            Err(e) => return ToolOutput::error(e),
        };
        if cancel.is_cancelled() {
            return ToolOutput::cancelled();
        }
        let Some((first, args)) = argv.split_first() else {
            return ToolOutput::error(format!("{}: `command.run` is empty", self.name));
        };
        let program = self.program(first);
        let mut child = match spawn(&program, args, &self.dir, cwd, sandbox).await {
            Ok(child) => child,
            Err(e) => {
                return ToolOutput::error(format!(
                    "Could not start `{first}` for the tool {}: {e}",
                    self.name
                ));
            }
        };
        tracing::debug!(tool = %self.name, ?argv, pid = ?child.id(), "custom tool started");
        let mut pipes: Vec<Box<dyn tokio::io::AsyncRead + Unpin + Send>> = Vec::new();
        if let Some(out) = child.stdout.take() {
            pipes.push(Box::new(out));
        }
        if let Some(err) = child.stderr.take() {
            pipes.push(Box::new(err));
        }
        let finished = runner::run(child, pipes, timeout, cancel).await;
        let outcome = finished.outcome;
        let mut outputs = finished.outputs.into_iter();
        let stdout = outputs.next().unwrap_or_default();
        let stderr = outputs.next().unwrap_or_default();

        let out = stdout.finish(MAX_OUTPUT_CHARS);
        match outcome {
            Outcome::Cancelled => ToolOutput::cancelled(),
            Outcome::Exited(status) if status.success() => {
                if out.is_empty() {
                    ToolOutput::ok("(no output)")
                } else {
                    ToolOutput::ok(out)
                }
            }
            Outcome::Exited(status) => {
                let code = match (status.code(), status.signal()) {
                    (Some(code), _) => format!("Exit code: {code}"),
                    (None, Some(signal)) => {
                        format!("Exit code: {} (killed by signal {signal})", 128 + signal)
                    }
                    (None, None) => "Exit code: unknown".into(),
                };
                ToolOutput::error(failure(&code, stderr, &out))
            }
            Outcome::TimedOut => {
                let what = format!(
                    "The tool {} timed out after {} s and was killed.",
                    self.name,
                    timeout.as_secs_f64()
                );
                ToolOutput::error(failure(&what, stderr, &out))
            }
            Outcome::WaitFailed(err) => {
                let what = format!("Waiting for the tool {} failed: {err}", self.name);
                ToolOutput::error(failure(&what, stderr, &out))
            }
        }
    }
}

/// What the tool in `dir` is: every file of its folder (definition, scripts),
/// names and contents, as a 64-bit FNV-1a digest in hex (bounded to
/// 500 files). A rewritten definition or script gets a new fingerprint.
pub fn fingerprint(dir: &Path) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                Ok(_) if files.len() < 500 => files.push(path),
                _ => {}
            }
        }
    }
    files.sort();
    for file in files {
        feed(file.to_string_lossy().as_bytes());
        feed(&[0]);
        feed(&std::fs::read(&file).unwrap_or_default());
        feed(&[0]);
    }
    format!("{hash:016x}")
}

/// An error message: the headline, then stderr, then stdout, within
/// [`MAX_OUTPUT_CHARS`].
fn failure(headline: &str, stderr: CappedOutput, stdout: &str) -> String {
    let mut text = headline.to_string();
    let stderr = stderr.finish(MAX_STDERR_CHARS);
    if !stderr.trim().is_empty() {
        text.push_str("\n\nstderr:\n");
        text.push_str(stderr.trim_end());
    }
    if !stdout.trim().is_empty() {
        text.push_str("\n\nstdout:\n");
        let room = MAX_OUTPUT_CHARS.saturating_sub(text.chars().count() + 10);
        text.push_str(truncate_middle(stdout, room).trim_end());
    }
    text
}

/// Starts the program, retrying briefly when the file is being written
/// (`ETXTBSY`, e.g. a script saved just before).
async fn spawn(
    program: &Path,
    args: &[String],
    dir: &Path,
    session_cwd: &Path,
    sandbox: Option<&maia_tools::sandbox::Sandbox>,
) -> std::io::Result<tokio::process::Child> {
    maia_tools::process::ensure_runnable(program.as_os_str(), Some(dir))?;
    let mut attempts = 0;
    loop {
        let mut command = maia_tools::process::command(program);
        command
            .args(args)
            .current_dir(dir)
            .env("MAIA_CWD", session_cwd)
            .env("MAIA_TOOL_DIR", dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(sandbox) = sandbox {
            sandbox
                .attach(&mut command)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
        }
        let result = command.spawn();
        match result {
            Err(e)
                if e.raw_os_error() == Some(nix::errno::Errno::ETXTBSY as i32) && attempts < 10 =>
            {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;
    use std::time::Instant;

    use super::*;

    const BUILTINS: [&str; 8] = [
        "Read",
        "Write",
        "Edit",
        "Glob",
        "Grep",
        "Bash",
        "Skill",
        "TodoWrite",
    ];

    /// Writes `<cwd>/.maia/tools/<folder>/<file>`.
    fn write_def(cwd: &Path, folder: &str, file: &str, text: &str) -> PathBuf {
        let dir = root(cwd).join(folder);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(file);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn write_script(cwd: &Path, folder: &str, file: &str, text: &str) {
        let path = root(cwd).join(folder).join(file);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// A single valid tool made from `run` and `parameters`.
    fn tool(cwd: &Path, run: &str, parameters: Value) -> CustomTool {
        write_def(
            cwd,
            "t",
            "TOOL.json",
            &json!({"description": "test", "command": {"parameters": parameters, "run": run}})
                .to_string(),
        );
        let loaded = load(cwd, &BUILTINS);
        assert_eq!(loaded.warnings, Vec::<String>::new());
        loaded.tools.into_iter().next().unwrap()
    }

    fn names(loaded: &LoadedTools) -> Vec<&str> {
        loaded.tools.iter().map(|t| t.name.as_str()).collect()
    }

    fn warned(loaded: &LoadedTools, path: &Path, what: &str) -> bool {
        loaded
            .warnings
            .iter()
            .any(|w| w.contains(&path.display().to_string()) && w.contains(what))
    }

    const ADDITION: &str = r#"{
        "name": "Addition",
        "description": "Adds three numbers",
        "command": {
            "parameters": {
                "param1": { "type": "number", "description": "first" },
                "param2": { "type": "number" },
                "param3": { "type": "number", "default": 0 },
            },
            "run": "node ./test.js {{param1}} {{param2}} {{param3}}",
        },
    }"#;

    #[test]
    fn loads_a_valid_tool_with_trailing_commas() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_def(dir.path(), "addition", "TOOL.json", ADDITION);
        let loaded = load(dir.path(), &BUILTINS);
        assert_eq!(loaded.warnings, Vec::<String>::new());
        let t = loaded.get("Addition").unwrap();
        assert_eq!(t.description, "Adds three numbers");
        assert_eq!(t.dir, root(dir.path()).join("addition"));
        assert_eq!(t.path, path);
        assert_eq!(
            t.parameters,
            vec![
                Param {
                    name: "param1".into(),
                    kind: ParamType::Number,
                    default: None,
                    description: Some("first".into())
                },
                Param {
                    name: "param2".into(),
                    kind: ParamType::Number,
                    default: None,
                    description: None
                },
                Param {
                    name: "param3".into(),
                    kind: ParamType::Number,
                    default: Some(json!(0)),
                    description: None
                },
            ]
        );
        let def = t.definition();
        assert_eq!(def.name, "Addition");
        assert_eq!(def.description, "Adds three numbers");
        assert_eq!(
            def.parameters,
            json!({
                "type": "object",
                "properties": {
                    "param1": {"type": "number", "description": "first"},
                    "param2": {"type": "number"},
                    "param3": {"type": "number", "default": 0},
                },
                "required": ["param1", "param2"],
                "additionalProperties": false,
            })
        );
        assert_eq!(
            t.argv(&json!({"param1": 5, "param2": 2.5})).unwrap(),
            ["node", "./test.js", "5", "2.5", "0"]
        );
    }

    #[test]
    fn lowercase_file_name_and_folder_name_default() {
        let dir = tempfile::tempdir().unwrap();
        write_def(
            dir.path(),
            "hello-world_2",
            "tool.json",
            r#"{"description": "d", "command": {"run": "echo hi"}}"#,
        );
        let loaded = load(dir.path(), &BUILTINS);
        assert_eq!(loaded.warnings, Vec::<String>::new());
        assert_eq!(names(&loaded), ["hello-world_2"]);
        let t = &loaded.tools[0];
        assert!(t.parameters.is_empty());
        assert_eq!(t.argv(&Value::Null).unwrap(), ["echo", "hi"]);
        assert_eq!(t.argv(&json!({})).unwrap(), ["echo", "hi"]);
        assert_eq!(t.definition().parameters["required"], json!([]));
    }

    #[test]
    fn nothing_to_load() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path(), &BUILTINS), LoadedTools::default());
        std::fs::create_dir_all(root(dir.path()).join("scripts")).unwrap();
        let loaded = load(dir.path(), &BUILTINS);
        assert!(loaded.tools.is_empty());
        assert_eq!(loaded.warnings.len(), 1);
        assert!(loaded.warnings[0].contains("has no TOOL.json"));
    }

    #[test]
    fn each_invalid_definition_is_skipped_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let cases: &[(&str, &str, &str)] = &[
            (
                "broken",
                r#"{"description": "d", "command": {"run": "echo"}"#,
                "invalid JSON",
            ),
            ("notobject", r#"["x"]"#, "must be a JSON object"),
            (
                "nodesc",
                r#"{"command": {"run": "echo"}}"#,
                "`description` is missing",
            ),
            (
                "emptydesc",
                r#"{"description": " ", "command": {"run": "echo"}}"#,
                "`description` is missing",
            ),
            (
                "numdesc",
                r#"{"description": 3, "command": {"run": "echo"}}"#,
                "`description` must be a string",
            ),
            (
                "nocommand",
                r#"{"description": "d"}"#,
                "`command` is missing",
            ),
            (
                "norun",
                r#"{"description": "d", "command": {}}"#,
                "`command.run` is missing",
            ),
            (
                "emptyrun",
                r#"{"description": "d", "command": {"run": "  "}}"#,
                "`command.run` is missing",
            ),
            (
                "badtype",
                r#"{"description": "d", "command": {"parameters": {"x": {"type": "boolean"}}, "run": "echo {{x}}"}}"#,
                "unknown type `boolean`",
            ),
            (
                "notype",
                r#"{"description": "d", "command": {"parameters": {"x": {}}, "run": "echo {{x}}"}}"#,
                "has no `type`",
            ),
            (
                "baddefault",
                r#"{"description": "d", "command": {"parameters": {"x": {"type": "number", "default": "0"}}, "run": "echo {{x}}"}}"#,
                "is not a number",
            ),
            (
                "undeclared",
                r#"{"description": "d", "command": {"parameters": {"x": {"type": "string"}}, "run": "echo {{x}} {{y}}"}}"#,
                "`{{y}}` in `command.run` is not a declared parameter",
            ),
            (
                "program",
                r#"{"description": "d", "command": {"parameters": {"x": {"type": "string"}}, "run": "{{x}} arg"}}"#,
                "cannot be a parameter",
            ),
            (
                "programpart",
                r#"{"description": "d", "command": {"parameters": {"x": {"type": "string"}}, "run": "./{{x}}.sh"}}"#,
                "cannot be a parameter",
            ),
            (
                "quote",
                r#"{"description": "d", "command": {"run": "echo 'unclosed"}}"#,
                "unclosed single quote",
            ),
            (
                "badname",
                r#"{"name": "my tool", "description": "d", "command": {"run": "echo"}}"#,
                "is invalid",
            ),
            (
                "numname",
                r#"{"name": 7, "description": "d", "command": {"run": "echo"}}"#,
                "`name` must be a string",
            ),
            (
                "bad folder",
                r#"{"description": "d", "command": {"run": "echo"}}"#,
                "not a valid tool name",
            ),
            (
                "params",
                r#"{"description": "d", "command": {"parameters": [], "run": "echo"}}"#,
                "must be an object",
            ),
        ];
        for (folder, text, _) in cases {
            write_def(cwd, folder, "TOOL.json", text);
        }
        write_def(
            cwd,
            "zz_valid",
            "TOOL.json",
            r#"{"description": "ok", "command": {"run": "true"}}"#,
        );
        let loaded = load(cwd, &BUILTINS);
        assert_eq!(names(&loaded), ["zz_valid"]);
        assert_eq!(loaded.warnings.len(), cases.len(), "{:#?}", loaded.warnings);
        for (folder, _, what) in cases {
            let path = root(cwd).join(folder).join("TOOL.json");
            assert!(
                warned(&loaded, &path, what),
                "{folder}: {:#?}",
                loaded.warnings
            );
        }
    }

    #[test]
    fn name_rules() {
        assert!(valid_name("Addition"));
        assert!(valid_name("a-b_c9"));
        assert!(valid_name(&"x".repeat(64)));
        assert!(!valid_name(&"x".repeat(65)));
        assert!(!valid_name(""));
        assert!(!valid_name("a.b"));
        assert!(!valid_name("a b"));
        assert!(!valid_name("été"));
        assert!(!valid_name("a/b"));
    }

    #[test]
    fn clash_with_builtins_and_between_tools() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let def = |name: &str| {
            format!(r#"{{"name": "{name}", "description": "d", "command": {{"run": "true"}}}}"#)
        };
        let bash = write_def(cwd, "a_bash", "TOOL.json", &def("bash"));
        let read = write_def(cwd, "b_read", "TOOL.json", &def("READ"));
        write_def(cwd, "c_first", "TOOL.json", &def("Deploy"));
        let dup = write_def(cwd, "d_second", "TOOL.json", &def("deploy"));
        // A folder named like a built-in, without `name`.
        let grep = write_def(
            cwd,
            "grep",
            "TOOL.json",
            r#"{"description": "d", "command": {"run": "true"}}"#,
        );
        // Default folder name clashing with an explicit name.
        write_def(cwd, "e_tool", "TOOL.json", &def("f_tool"));
        let folder_dup = write_def(
            cwd,
            "f_tool",
            "TOOL.json",
            r#"{"description": "d", "command": {"run": "true"}}"#,
        );
        let loaded = load(cwd, &BUILTINS);
        assert_eq!(names(&loaded), ["Deploy", "f_tool"]);
        assert_eq!(loaded.warnings.len(), 5, "{:#?}", loaded.warnings);
        assert!(warned(&loaded, &bash, "built-in tool `Bash`"));
        assert!(warned(&loaded, &read, "built-in tool `Read`"));
        assert!(warned(&loaded, &grep, "built-in tool `Grep`"));
        assert!(warned(
            &loaded,
            &dup,
            "already used by the custom tool `Deploy`"
        ));
        assert!(warned(
            &loaded,
            &folder_dup,
            "already used by the custom tool `f_tool`"
        ));
    }

    #[test]
    fn definitions_tolerate_trailing_commas_only() {
        assert_eq!(
            parse_definition_json(r#"{"a": [1, 2, ], }"#).unwrap(),
            serde_json::json!({"a": [1, 2]})
        );
        assert_eq!(
            parse_definition_json("[1,\n\t]").unwrap(),
            serde_json::json!([1])
        );
        assert_eq!(
            parse_definition_json(r#"{"a": ",}", "b": "x\",]"}"#).unwrap(),
            serde_json::json!({"a": ",}", "b": "x\",]"})
        );
        // Only one comma is tolerated, and nothing else of JSON5.
        assert!(parse_definition_json("[1,,]").is_err());
        assert!(parse_definition_json("{a: 1}").is_err());
        assert!(parse_definition_json("{\"a\": 1} // note").is_err());
        assert!(parse_definition_json("{'a': 1}").is_err());
    }

    #[test]
    fn word_splitting() {
        assert_eq!(split_words("a  b\tc").unwrap(), ["a", "b", "c"]);
        assert_eq!(
            split_words(r#"a 'b c' "d e""#).unwrap(),
            ["a", "b c", "d e"]
        );
        assert_eq!(split_words(r#"x'a b'y"c"z"#).unwrap(), ["xa bycz"]);
        assert_eq!(split_words(r#"'' """#).unwrap(), ["", ""]);
        assert_eq!(
            split_words(r#""say \"hi\" \\ \n""#).unwrap(),
            [r#"say "hi" \ \n"#]
        );
        assert!(split_words(r#"'it\'s'"#).is_err());
        assert_eq!(
            split_words(r"C:\tools\x.exe 'a\b'").unwrap(),
            [r"C:\tools\x.exe", r"a\b"]
        );
        assert_eq!(
            split_words(r#"echo "$HOME" | wc > f"#).unwrap(),
            ["echo", "$HOME", "|", "wc", ">", "f"]
        );
        assert!(split_words("\"open").is_err());
        assert_eq!(
            split_words("a {{ x }}b {{ c").unwrap(),
            ["a", "{{ x }}b", "{{", "c"]
        );
    }

    #[test]
    fn substitution_inside_words() {
        let dir = tempfile::tempdir().unwrap();
        let t = tool(
            dir.path(),
            r#"./run.sh --name={{ name }} "{{name}} and {{n}}" {{name}}{{n}} '{{n}}' {{ {{n"#,
            json!({"name": {"type": "string"}, "n": {"type": "number", "default": 1}}),
        );
        assert_eq!(
            t.argv(&json!({"name": "a b", "n": 2})).unwrap(),
            [
                "./run.sh",
                "--name=a b",
                "a b and 2",
                "a b2",
                "2",
                "{{",
                "{{n"
            ]
        );
        // A value is inserted once, never scanned again.
        assert_eq!(
            t.argv(&json!({"name": "{{n}}"})).unwrap()[1],
            "--name={{n}}"
        );
        // An empty value is still one (empty) argument.
        assert_eq!(t.argv(&json!({"name": ""})).unwrap()[4], "1");
        assert_eq!(t.argv(&json!({"name": ""})).unwrap().len(), 7);
    }

    #[test]
    fn validation_defaults_required_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let t = tool(
            dir.path(),
            "echo {{a}} {{s}} {{d}} {{ds}}",
            json!({
                "a": {"type": "number"},
                "s": {"type": "string"},
                "d": {"type": "number", "default": -1.5},
                "ds": {"type": "string", "default": "dflt"},
            }),
        );
        assert_eq!(
            t.argv(&json!({"a": 1, "s": "x"})).unwrap(),
            ["echo", "1", "x", "-1.5", "dflt"]
        );
        assert_eq!(
            t.argv(&json!({"a": 5.0, "s": "x", "d": 1e3, "ds": null}))
                .unwrap(),
            ["echo", "5", "x", "1000", "dflt"]
        );
        assert_eq!(
            t.argv(&json!({"a": -0.0, "s": "", "d": 0.25, "ds": "y"}))
                .unwrap(),
            ["echo", "0", "", "0.25", "y"]
        );
        let err = t.argv(&json!({"s": "x"})).unwrap_err();
        assert!(
            err.contains("missing required number parameter `a`"),
            "{err}"
        );
        let err = t.argv(&json!({"a": "5", "s": 3})).unwrap_err();
        assert!(err.contains("`a` must be a number, got \"5\""), "{err}");
        assert!(err.contains("`s` must be a string, got 3"), "{err}");
        let err = t.argv(&json!({"a": 1, "s": "x", "extra": 1})).unwrap_err();
        assert!(err.contains("unknown parameter `extra`"), "{err}");
        let err = t.argv(&json!([1])).unwrap_err();
        assert!(err.contains("must be a JSON object"), "{err}");
        let err = t.argv(&Value::Null).unwrap_err();
        assert!(err.contains("`a`") && err.contains("`s`"), "{err}");
    }

    #[tokio::test]
    async fn injection_attempts_arrive_verbatim_as_one_argument() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let t = tool(
            cwd,
            r#"./args.sh {{p}} "fixed two" pre-{{p}}-post"#,
            json!({"p": {"type": "string"}}),
        );
        write_script(
            cwd,
            "t",
            "args.sh",
            "#!/bin/sh\necho \"$#\"\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\n",
        );
        let payload = "; rm -rf / $(touch pwned) `touch pwned2` && touch pwned3 | cat > pwned4 *";
        let out = t
            .run(&json!({"p": payload}), cwd, &CancellationToken::new())
            .await;
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(
            out.content,
            format!("3\n[{payload}]\n[fixed two]\n[pre-{payload}-post]\n")
        );
        for place in [
            cwd.to_path_buf(),
            t.dir.clone(),
            std::env::current_dir().unwrap(),
        ] {
            for f in ["pwned", "pwned2", "pwned3", "pwned4"] {
                assert!(
                    !place.join(f).exists(),
                    "{} created",
                    place.join(f).display()
                );
            }
        }
        // A value that looks like an option or a newline-separated command
        // is one argument too.
        let out = t
            .run(
                &json!({"p": "--help\nrm -rf /"}),
                cwd,
                &CancellationToken::new(),
            )
            .await;
        assert_eq!(
            out.content,
            "3\n[--help\nrm -rf /]\n[fixed two]\n[pre---help\nrm -rf /-post]\n"
        );
    }

    #[tokio::test]
    async fn program_on_path_with_script_argument() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let t = tool(cwd, "sh ./count.sh {{p}}", json!({"p": {"type": "string"}}));
        write_script(cwd, "t", "count.sh", "echo \"$# [$1]\"\n");
        let out = t
            .run(&json!({"p": "a b $(id)"}), cwd, &CancellationToken::new())
            .await;
        assert_eq!(out, ToolOutput::ok("1 [a b $(id)]\n"));
    }

    #[tokio::test]
    async fn environment_and_working_directory() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let t = tool(cwd, "./env.sh", json!({}));
        write_script(
            cwd,
            "t",
            "env.sh",
            "#!/bin/sh\necho \"cwd=$MAIA_CWD\"\necho \"dir=$MAIA_TOOL_DIR\"\necho \"pwd=$(pwd)\"\nread x && echo \"stdin=$x\" || echo no-stdin\n",
        );
        let out = t.run(&json!({}), cwd, &CancellationToken::new()).await;
        assert!(!out.is_error, "{}", out.content);
        let tool_dir = t.dir.display();
        let pwd = t.dir.canonicalize().unwrap();
        assert_eq!(
            out.content,
            format!(
                "cwd={}\ndir={tool_dir}\npwd={}\nno-stdin\n",
                cwd.display(),
                pwd.display()
            )
        );
    }

    #[tokio::test]
    async fn non_zero_exit_is_an_error_with_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let t = tool(cwd, "./fail.sh", json!({}));
        write_script(
            cwd,
            "t",
            "fail.sh",
            "#!/bin/sh\necho partial output\necho 'something broke' >&2\nexit 3\n",
        );
        let out = t.run(&json!({}), cwd, &CancellationToken::new()).await;
        assert!(out.is_error);
        assert_eq!(
            out.content,
            "Exit code: 3\n\nstderr:\nsomething broke\n\nstdout:\npartial output"
        );
        // Success: stdout only, stderr left out.
        write_script(
            cwd,
            "t",
            "fail.sh",
            "#!/bin/sh\necho fine\necho noise >&2\n",
        );
        let out = t.run(&json!({}), cwd, &CancellationToken::new()).await;
        assert_eq!(out, ToolOutput::ok("fine\n"));
    }

    #[tokio::test]
    async fn empty_output_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let t = tool(cwd, "true", json!({}));
        let out = t.run(&json!({}), cwd, &CancellationToken::new()).await;
        assert_eq!(out, ToolOutput::ok("(no output)"));
        let t = tool(cwd, "false", json!({}));
        let out = t.run(&json!({}), cwd, &CancellationToken::new()).await;
        assert_eq!(out, ToolOutput::error("Exit code: 1"));
    }

    #[tokio::test]
    async fn invalid_input_and_missing_program_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let t = tool(cwd, "./missing.sh {{n}}", json!({"n": {"type": "number"}}));
        let out = t
            .run(&json!({"n": "x"}), cwd, &CancellationToken::new())
            .await;
        assert!(
            out.is_error && out.content.contains("must be a number"),
            "{}",
            out.content
        );
        let out = t
            .run(&json!({"n": 1}), cwd, &CancellationToken::new())
            .await;
        assert!(
            out.is_error && out.content.contains("Could not start `./missing.sh`"),
            "{}",
            out.content
        );
    }

    #[tokio::test]
    async fn timeout_kills_the_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let t = tool(cwd, "./slow.sh", json!({}));
        write_script(
            cwd,
            "t",
            "slow.sh",
            "#!/bin/sh\nsleep 30 &\necho $! > child.pid\necho started\nsleep 30\n",
        );
        let start = Instant::now();
        let out = t
            .run_with_timeout(
                &json!({}),
                cwd,
                &CancellationToken::new(),
                Duration::from_millis(500),
                None,
            )
            .await;
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(out.is_error);
        assert!(
            out.content
                .starts_with("The tool t timed out after 0.5 s and was killed."),
            "{}",
            out.content
        );
        assert!(out.content.contains("stdout:\nstarted"), "{}", out.content);
        let pid: i32 = std::fs::read_to_string(t.dir.join("child.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(wait_dead(pid).await, "background child {pid} survived");
    }

    #[tokio::test]
    async fn cancel_kills_promptly() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let t = tool(cwd, "sleep 30", json!({}));
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            c.cancel();
        });
        let start = Instant::now();
        let out = t.run(&json!({}), cwd, &cancel).await;
        assert!(start.elapsed() < Duration::from_secs(3));
        assert_eq!(out, ToolOutput::cancelled());
        // Already cancelled: nothing starts.
        let out = t.run(&json!({}), cwd, &cancel).await;
        assert_eq!(out, ToolOutput::cancelled());
    }

    #[tokio::test]
    async fn background_children_do_not_survive_success() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let t = tool(cwd, "./bg.sh", json!({}));
        write_script(
            cwd,
            "t",
            "bg.sh",
            "#!/bin/sh\nsleep 30 >/dev/null 2>&1 &\necho $!\n",
        );
        let start = Instant::now();
        let out = t.run(&json!({}), cwd, &CancellationToken::new()).await;
        assert!(start.elapsed() < Duration::from_secs(3));
        assert!(!out.is_error, "{}", out.content);
        let pid: i32 = out.content.trim().parse().unwrap();
        assert!(wait_dead(pid).await, "background child {pid} survived");
    }

    #[tokio::test]
    async fn huge_output_truncated_in_the_middle() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let t = tool(cwd, "seq 1 {{n}}", json!({"n": {"type": "number"}}));
        for n in [200_000, 20_000] {
            let out = t
                .run(&json!({"n": n}), cwd, &CancellationToken::new())
                .await;
            assert!(!out.is_error);
            assert!(out.content.starts_with("1\n2\n3\n"));
            assert!(out.content.ends_with(&format!("{}\n{n}\n", n - 1)));
            assert!(out.content.contains("characters truncated"));
            assert!(out.content.chars().count() <= MAX_OUTPUT_CHARS);
        }
    }

    #[test]
    fn capped_counts_dropped_characters() {
        let mut out = CappedOutput::default();
        for _ in 0..100 {
            out.push(&[b'x'; 10_000]);
        }
        let text = out.finish(MAX_OUTPUT_CHARS);
        assert!(text.chars().count() <= MAX_OUTPUT_CHARS);
        let kept = text.chars().filter(|&c| c == 'x').count();
        let note = text.split("[... ").nth(1).unwrap();
        let dropped: usize = note.split(' ').next().unwrap().parse().unwrap();
        assert_eq!(kept + dropped, 1_000_000);
    }

    fn is_dead(pid: i32) -> bool {
        if nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err() {
            return true;
        }
        // Not yet reaped by its new parent: a zombie is dead too.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|stat| {
                stat.rsplit(')')
                    .next()
                    .is_some_and(|rest| rest.trim_start().starts_with('Z'))
            })
            .unwrap_or(true)
    }

    async fn wait_dead(pid: i32) -> bool {
        for _ in 0..100 {
            if is_dead(pid) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }
}
