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
//! exit code and stderr. This module loads and reads tools; running one is
//! in `tools/custom.rs`. A definition file is read by `definition`, the
//! `run` line split and filled in by `command`.

mod command;
mod definition;

use std::path::{Path, PathBuf};
use std::time::Duration;

use maia_llm::ToolSpec;
use serde_json::{Map, Value, json};

use definition::parse;

/// Definition file names tried in a tool folder, in order.
pub const FILE_NAMES: [&str; 2] = ["TOOL.json", "tool.json"];
/// Longest tool name.
pub const MAX_NAME_CHARS: usize = 64;
/// How long a custom tool may run.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// Most characters of output returned to the model.
pub const MAX_OUTPUT_CHARS: usize = 30_000;

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

#[cfg(test)]
mod tests {

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
}
