//! Typed tool inputs parsed from the model's JSON arguments.
//!
//! Field names are exactly the JSON argument names the model sends. Parsing
//! is a little lenient (numbers and booleans given as strings are accepted)
//! because models occasionally quote them.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer};

use crate::error::ToolError;
use crate::path::{display_relative, resolve};
use crate::truncate::truncate_end;

/// Names of the tools in their stable order.
pub const TOOL_NAMES: [&str; 8] = [
    "Read",
    "Write",
    "Edit",
    "MultiEdit",
    "Glob",
    "Grep",
    "Bash",
    "WebFetch",
];

/// Default Bash timeout in milliseconds.
pub const DEFAULT_BASH_TIMEOUT_MS: u64 = 120_000;
/// Largest Bash timeout in milliseconds.
pub const MAX_BASH_TIMEOUT_MS: u64 = 600_000;

/// Characters WebFetch returns when the model gives no `max_length`.
pub const DEFAULT_WEBFETCH_MAX_LENGTH: usize = 50_000;
/// Largest `max_length` WebFetch honours (larger values are capped).
pub const MAX_WEBFETCH_MAX_LENGTH: usize = 200_000;

/// How the tool is presented to the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    Read,
    Edit,
    Execute,
    Search,
    /// Retrieves content from the network (WebFetch).
    Fetch,
}

/// Arguments of the Read tool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ReadInput {
    #[serde(alias = "path")]
    pub file_path: String,
    /// 1-based first line.
    #[serde(default, deserialize_with = "lenient_opt_usize")]
    pub offset: Option<usize>,
    #[serde(default, deserialize_with = "lenient_opt_usize")]
    pub limit: Option<usize>,
}

/// Arguments of the Write tool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct WriteInput {
    #[serde(alias = "path")]
    pub file_path: String,
    pub content: String,
}

/// Arguments of the Edit tool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct EditInput {
    #[serde(alias = "path")]
    pub file_path: String,
    pub old_string: String,
    pub new_string: String,
    #[serde(default, deserialize_with = "lenient_bool")]
    pub replace_all: bool,
}

/// One replacement of a MultiEdit call.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct EditOp {
    pub old_string: String,
    pub new_string: String,
    #[serde(default, deserialize_with = "lenient_bool")]
    pub replace_all: bool,
}

/// Arguments of the MultiEdit tool: replacements applied in order, each
/// to the result of the previous one, all or none.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct MultiEditInput {
    #[serde(alias = "path")]
    pub file_path: String,
    /// An array; a JSON string holding the array is accepted too (models
    /// sometimes quote it).
    #[serde(deserialize_with = "lenient_edits")]
    pub edits: Vec<EditOp>,
}

fn lenient_edits<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<EditOp>, D::Error> {
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(s) => serde_json::from_str(&s).map_err(serde::de::Error::custom),
        other => serde_json::from_value(other).map_err(serde::de::Error::custom),
    }
}

/// Arguments of the Glob tool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GlobInput {
    pub pattern: String,
    #[serde(default)]
    pub path: Option<String>,
}

/// Output mode of the Grep tool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrepMode {
    #[default]
    FilesWithMatches,
    Content,
}

/// Arguments of the Grep tool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GrepInput {
    pub pattern: String,
    #[serde(default)]
    pub path: Option<String>,
    /// Glob on file names (or relative paths when it contains `/`).
    #[serde(default, alias = "glob")]
    pub include: Option<String>,
    #[serde(default, deserialize_with = "lenient_mode")]
    pub output_mode: GrepMode,
    #[serde(default, alias = "-i", deserialize_with = "lenient_bool")]
    pub case_insensitive: bool,
}

/// Arguments of the Bash tool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct BashInput {
    pub command: String,
    /// Capped at 600000; default 120000.
    #[serde(default, alias = "timeout", deserialize_with = "lenient_opt_u64")]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub description: Option<String>,
    /// Returns at once with a task id (`maia_tools::background`).
    #[serde(default)]
    pub run_in_background: bool,
}

impl BashInput {
    /// The effective timeout in milliseconds (default applied, capped).
    pub fn effective_timeout_ms(&self) -> u64 {
        self.timeout_ms
            .filter(|&t| t > 0)
            .unwrap_or(DEFAULT_BASH_TIMEOUT_MS)
            .min(MAX_BASH_TIMEOUT_MS)
    }
}

/// Arguments of the WebFetch tool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct WebFetchInput {
    pub url: String,
    /// Characters returned at most; default [`DEFAULT_WEBFETCH_MAX_LENGTH`].
    #[serde(default, deserialize_with = "lenient_opt_usize")]
    pub max_length: Option<usize>,
}

impl WebFetchInput {
    /// The effective character limit (default applied, capped at
    /// [`MAX_WEBFETCH_MAX_LENGTH`]; 0 means the default).
    pub fn effective_max_length(&self) -> usize {
        self.max_length
            .filter(|&n| n > 0)
            .unwrap_or(DEFAULT_WEBFETCH_MAX_LENGTH)
            .min(MAX_WEBFETCH_MAX_LENGTH)
    }

    /// The host name of the URL, lowercased (`None` when the URL does not
    /// parse or has no host). This is what `WebFetch(domain:…)` rules match.
    pub fn host(&self) -> Option<String> {
        let url = reqwest::Url::parse(self.url.trim()).ok()?;
        url.host_str().map(|h| {
            h.trim_start_matches('[')
                .trim_end_matches(']')
                .to_ascii_lowercase()
        })
    }
}

/// The tool whose permission rules also cover `tool`: Edit's cover
/// MultiEdit (both change part of a file, so a rule denying `Edit(.env)`
/// is not sidestepped by a MultiEdit).
pub fn rule_parent(tool: &str) -> Option<&'static str> {
    tool.eq_ignore_ascii_case("MultiEdit").then_some("Edit")
}

/// A parsed tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolInput {
    Read(ReadInput),
    Write(WriteInput),
    Edit(EditInput),
    MultiEdit(MultiEditInput),
    Glob(GlobInput),
    Grep(GrepInput),
    Bash(BashInput),
    WebFetch(WebFetchInput),
}

fn parse_args<T: serde::de::DeserializeOwned>(tool: &str, arguments: &str) -> Result<T, ToolError> {
    let trimmed = arguments.trim();
    let text = if trimmed.is_empty() { "{}" } else { trimmed };
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| ToolError::InvalidArguments {
            tool: tool.to_string(),
            message: format!("the arguments are not valid JSON ({e})"),
        })?;
    if !value.is_object() {
        return Err(ToolError::InvalidArguments {
            tool: tool.to_string(),
            message: "the arguments must be a JSON object".into(),
        });
    }
    serde_json::from_value(value).map_err(|e| ToolError::InvalidArguments {
        tool: tool.to_string(),
        message: e.to_string(),
    })
}

impl ToolInput {
    /// Unknown tool name, invalid JSON, missing/ill-typed fields → ToolError
    /// with a message the model can act on.
    pub fn parse(name: &str, arguments: &str) -> Result<ToolInput, ToolError> {
        let input = match name {
            "Read" => ToolInput::Read(parse_args(name, arguments)?),
            "Write" => ToolInput::Write(parse_args(name, arguments)?),
            "Edit" => ToolInput::Edit(parse_args(name, arguments)?),
            "MultiEdit" => ToolInput::MultiEdit(parse_args(name, arguments)?),
            "Glob" => ToolInput::Glob(parse_args(name, arguments)?),
            "Grep" => ToolInput::Grep(parse_args(name, arguments)?),
            "Bash" => ToolInput::Bash(parse_args(name, arguments)?),
            "WebFetch" => ToolInput::WebFetch(parse_args(name, arguments)?),
            other => return Err(ToolError::UnknownTool(other.to_string())),
        };
        input.validate()?;
        Ok(input)
    }

    fn validate(&self) -> Result<(), ToolError> {
        let empty = |field: &str| ToolError::InvalidArguments {
            tool: self.name().to_string(),
            message: format!("`{field}` must not be empty"),
        };
        match self {
            ToolInput::Read(i) if i.file_path.trim().is_empty() => Err(empty("file_path")),
            ToolInput::Write(i) if i.file_path.trim().is_empty() => Err(empty("file_path")),
            ToolInput::Edit(i) if i.file_path.trim().is_empty() => Err(empty("file_path")),
            ToolInput::MultiEdit(i) if i.file_path.trim().is_empty() => Err(empty("file_path")),
            ToolInput::MultiEdit(i) if i.edits.is_empty() => Err(empty("edits")),
            ToolInput::Glob(i) if i.pattern.is_empty() => Err(empty("pattern")),
            ToolInput::Grep(i) if i.pattern.is_empty() => Err(empty("pattern")),
            ToolInput::Bash(i) if i.command.trim().is_empty() => Err(empty("command")),
            ToolInput::WebFetch(i) if i.url.trim().is_empty() => Err(empty("url")),
            _ => Ok(()),
        }
    }

    /// "Read", "Write", ...
    pub fn name(&self) -> &'static str {
        match self {
            ToolInput::Read(_) => "Read",
            ToolInput::Write(_) => "Write",
            ToolInput::Edit(_) => "Edit",
            ToolInput::MultiEdit(_) => "MultiEdit",
            ToolInput::Glob(_) => "Glob",
            ToolInput::Grep(_) => "Grep",
            ToolInput::Bash(_) => "Bash",
            ToolInput::WebFetch(_) => "WebFetch",
        }
    }

    /// Read→Read, Write/Edit/MultiEdit→Edit, Glob/Grep→Search, Bash→Execute,
    /// WebFetch→Fetch.
    pub fn kind(&self) -> ToolKind {
        match self {
            ToolInput::Read(_) => ToolKind::Read,
            ToolInput::Write(_) | ToolInput::Edit(_) | ToolInput::MultiEdit(_) => ToolKind::Edit,
            ToolInput::Glob(_) | ToolInput::Grep(_) => ToolKind::Search,
            ToolInput::Bash(_) => ToolKind::Execute,
            ToolInput::WebFetch(_) => ToolKind::Fetch,
        }
    }

    /// Human title, paths shown relative to `cwd` when inside it.
    pub fn title(&self, cwd: &Path) -> String {
        let show = |raw: &str| display_relative(cwd, &resolve(cwd, raw));
        match self {
            ToolInput::Read(i) => format!("Read {}", show(&i.file_path)),
            ToolInput::Write(i) => format!("Write {}", show(&i.file_path)),
            ToolInput::Edit(i) => format!("Edit {}", show(&i.file_path)),
            ToolInput::MultiEdit(i) => match i.edits.len() {
                1 => format!("Edit {}", show(&i.file_path)),
                n => format!("Edit {} ({n} changes)", show(&i.file_path)),
            },
            ToolInput::Glob(i) => match &i.path {
                Some(p) => format!("Glob {} in {}", i.pattern, show(p)),
                None => format!("Glob {}", i.pattern),
            },
            ToolInput::Grep(i) => match &i.path {
                Some(p) => format!("Grep \"{}\" in {}", i.pattern, show(p)),
                None => format!("Grep \"{}\"", i.pattern),
            },
            ToolInput::Bash(i) => {
                let mut lines = i.command.trim().lines();
                let first = lines.next().unwrap_or_default();
                let more = if lines.next().is_some() { " …" } else { "" };
                let short = truncate_end(first, 100, "…");
                format!("Run `{short}{more}`")
            }
            ToolInput::WebFetch(i) => format!("Fetch {}", truncate_end(i.url.trim(), 200, "…")),
        }
    }

    /// Absolute resolved paths the call touches (file for Read/Write/Edit/MultiEdit;
    /// search root for Glob/Grep, default cwd; empty for Bash and WebFetch).
    pub fn paths(&self, cwd: &Path) -> Vec<PathBuf> {
        match self {
            ToolInput::Read(i) => vec![resolve(cwd, &i.file_path)],
            ToolInput::Write(i) => vec![resolve(cwd, &i.file_path)],
            ToolInput::Edit(i) => vec![resolve(cwd, &i.file_path)],
            ToolInput::MultiEdit(i) => vec![resolve(cwd, &i.file_path)],
            ToolInput::Glob(i) => vec![resolve(cwd, i.path.as_deref().unwrap_or("."))],
            ToolInput::Grep(i) => vec![resolve(cwd, i.path.as_deref().unwrap_or("."))],
            ToolInput::Bash(_) | ToolInput::WebFetch(_) => Vec::new(),
        }
    }

    /// Some(command) for Bash.
    pub fn command(&self) -> Option<&str> {
        match self {
            ToolInput::Bash(i) => Some(&i.command),
            _ => None,
        }
    }

    /// Write, Edit, MultiEdit, Bash.
    pub fn is_mutating(&self) -> bool {
        self.edited_file().is_some() || matches!(self, ToolInput::Bash(_))
    }

    /// The file a Write, Edit or MultiEdit changes, as the model gave it.
    pub fn edited_file(&self) -> Option<&str> {
        match self {
            ToolInput::Write(i) => Some(&i.file_path),
            ToolInput::Edit(i) => Some(&i.file_path),
            ToolInput::MultiEdit(i) => Some(&i.file_path),
            _ => None,
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum NumOrString {
    Num(u64),
    Str(String),
}

fn lenient_opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Option::<NumOrString>::deserialize(d)? {
        None => Ok(None),
        Some(NumOrString::Num(n)) => Ok(Some(n)),
        Some(NumOrString::Str(s)) if s.trim().is_empty() => Ok(None),
        Some(NumOrString::Str(s)) => s.trim().parse().map(Some).map_err(|_| {
            serde::de::Error::custom(format!("expected a non-negative integer, got {s:?}"))
        }),
    }
}

fn lenient_opt_usize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    lenient_opt_u64(d)?
        .map(|n| usize::try_from(n).map_err(|_| serde::de::Error::custom("number too large")))
        .transpose()
}

#[derive(Deserialize)]
#[serde(untagged)]
enum BoolOrString {
    Bool(bool),
    Str(String),
}

fn lenient_bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    match Option::<BoolOrString>::deserialize(d)? {
        None => Ok(false),
        Some(BoolOrString::Bool(b)) => Ok(b),
        Some(BoolOrString::Str(s)) => match s.trim() {
            "true" | "True" | "TRUE" => Ok(true),
            "false" | "False" | "FALSE" | "" => Ok(false),
            _ => Err(serde::de::Error::custom(format!(
                "expected true or false, got {s:?}"
            ))),
        },
    }
}

fn lenient_mode<'de, D: Deserializer<'de>>(d: D) -> Result<GrepMode, D::Error> {
    Ok(Option::<GrepMode>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_tool() {
        let r =
            ToolInput::parse("Read", r#"{"file_path":"a.rs","offset":"3","limit":10}"#).unwrap();
        assert_eq!(
            r,
            ToolInput::Read(ReadInput {
                file_path: "a.rs".into(),
                offset: Some(3),
                limit: Some(10)
            })
        );
        let e = ToolInput::parse(
            "Edit",
            r#"{"file_path":"a","old_string":"x","new_string":"y"}"#,
        )
        .unwrap();
        assert!(matches!(
            e,
            ToolInput::Edit(EditInput {
                replace_all: false,
                ..
            })
        ));
        let g = ToolInput::parse("Grep", r#"{"pattern":"x","output_mode":"content"}"#).unwrap();
        assert!(matches!(
            g,
            ToolInput::Grep(GrepInput {
                output_mode: GrepMode::Content,
                case_insensitive: false,
                ..
            })
        ));
        let b = ToolInput::parse("Bash", r#"{"command":"ls","timeout_ms":9999999}"#).unwrap();
        match b {
            ToolInput::Bash(b) => assert_eq!(b.effective_timeout_ms(), MAX_BASH_TIMEOUT_MS),
            _ => panic!(),
        }
        assert!(ToolInput::parse("Glob", r#"{"pattern":"*.rs","path":null}"#).is_ok());
        assert!(ToolInput::parse("Write", r#"{"file_path":"a","content":""}"#).is_ok());
    }

    #[test]
    fn helpful_errors() {
        let err = ToolInput::parse("Nope", "{}").unwrap_err().to_string();
        assert!(err.contains("Nope") && err.contains("Read"), "{err}");
        let err = ToolInput::parse("Read", "{").unwrap_err().to_string();
        assert!(err.contains("not valid JSON"), "{err}");
        let err = ToolInput::parse("Read", "{}").unwrap_err().to_string();
        assert!(err.contains("file_path"), "{err}");
        let err = ToolInput::parse("Read", r#"{"file_path": 3}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("Read"), "{err}");
        let err = ToolInput::parse("Bash", r#"{"command": "  "}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("command"), "{err}");
        assert!(ToolInput::parse("Grep", r#"{"pattern":"x","output_mode":"bogus"}"#).is_err());
    }

    #[test]
    fn metadata() {
        let cwd = Path::new("/w/p");
        let read = ToolInput::parse("Read", r#"{"file_path":"src/main.rs"}"#).unwrap();
        assert_eq!(read.title(cwd), "Read src/main.rs");
        assert_eq!(read.paths(cwd), vec![PathBuf::from("/w/p/src/main.rs")]);
        assert_eq!(read.kind(), ToolKind::Read);
        assert!(!read.is_mutating());
        let write =
            ToolInput::parse("Write", r#"{"file_path":"/w/p/src/a.rs","content":""}"#).unwrap();
        assert_eq!(write.title(cwd), "Write src/a.rs");
        assert!(write.is_mutating());
        let glob = ToolInput::parse("Glob", r#"{"pattern":"**/*.rs"}"#).unwrap();
        assert_eq!(glob.title(cwd), "Glob **/*.rs");
        assert_eq!(glob.paths(cwd), vec![PathBuf::from("/w/p")]);
        assert_eq!(glob.kind(), ToolKind::Search);
        let grep = ToolInput::parse("Grep", r#"{"pattern":"foo","path":"src"}"#).unwrap();
        assert_eq!(grep.title(cwd), "Grep \"foo\" in src");
        let bash = ToolInput::parse("Bash", r#"{"command":"npm test"}"#).unwrap();
        assert_eq!(bash.title(cwd), "Run `npm test`");
        let multi = ToolInput::parse("Bash", r#"{"command":"cd x\nmake"}"#).unwrap();
        assert_eq!(multi.title(cwd), "Run `cd x …`");
        let re = ToolInput::parse("Grep", r#"{"pattern":"\\bfoo"}"#).unwrap();
        assert_eq!(re.title(cwd), "Grep \"\\bfoo\"");
        assert_eq!(bash.command(), Some("npm test"));
        assert!(bash.paths(cwd).is_empty());
        assert_eq!(bash.kind(), ToolKind::Execute);
        let outside = ToolInput::parse(
            "Edit",
            r#"{"file_path":"/etc/x","old_string":"a","new_string":"b"}"#,
        )
        .unwrap();
        assert_eq!(outside.title(cwd), "Edit /etc/x");
    }

    #[test]
    fn webfetch_input() {
        let cwd = Path::new("/w/p");
        let fetch = ToolInput::parse(
            "WebFetch",
            r#"{"url":"https://Docs.Example.com:8443/a?b=1","max_length":"100"}"#,
        )
        .unwrap();
        assert_eq!(fetch.name(), "WebFetch");
        assert_eq!(fetch.kind(), ToolKind::Fetch);
        assert_eq!(
            fetch.title(cwd),
            "Fetch https://Docs.Example.com:8443/a?b=1"
        );
        assert!(fetch.paths(cwd).is_empty());
        assert!(!fetch.is_mutating());
        assert_eq!(fetch.command(), None);
        let ToolInput::WebFetch(input) = fetch else {
            panic!()
        };
        assert_eq!(input.max_length, Some(100));
        assert_eq!(input.effective_max_length(), 100);
        assert_eq!(input.host().as_deref(), Some("docs.example.com"));
        let default = WebFetchInput {
            url: "http://[::1]:80/".into(),
            max_length: Some(0),
        };
        assert_eq!(default.effective_max_length(), DEFAULT_WEBFETCH_MAX_LENGTH);
        assert_eq!(default.host().as_deref(), Some("::1"));
        let huge = WebFetchInput {
            url: "nonsense".into(),
            max_length: Some(10_000_000),
        };
        assert_eq!(huge.effective_max_length(), MAX_WEBFETCH_MAX_LENGTH);
        assert_eq!(huge.host(), None);
        let err = ToolInput::parse("WebFetch", r#"{"url":" "}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("url"), "{err}");
        assert!(ToolInput::parse("WebFetch", "{}").is_err());
        assert_eq!(
            serde_json::to_value(ToolKind::Fetch).unwrap(),
            serde_json::json!("fetch")
        );
    }
}
