//! The language-server tools: `Diagnostics {path?}`, `References {path,
//! line, column}`, `Definition {path, line, column}` and `Symbols
//! {query}`, offered when a language server serves the project. Each is
//! read-only and gated like Read (its rules, protected paths, roots); the
//! places a server returns in files a Read rule denies are left out.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use maia_llm::{ToolCall, ToolSpec};
use maia_lsp_client::{LspManager, format_diags, format_places};
use maia_tools::ReadInput;
use maia_tools::{ToolContext, ToolInput, ToolKind, ToolOutput};
use serde::Deserialize;
use serde_json::{Value, json};

use super::registry::{CallEnv, CallPlan, Ran, Tool, ToolEffect};
use crate::permission::builtin_facts;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Which {
    Diagnostics,
    References,
    Definition,
    Symbols,
}

/// One of the language-server tools.
pub(crate) struct Lsp {
    which: Which,
    lsp: Arc<LspManager>,
}

/// The tools, when a server serves the project (else none).
pub(crate) fn all(lsp: &Arc<LspManager>) -> Vec<Arc<dyn Tool>> {
    if !lsp.offers_tools() {
        return Vec::new();
    }
    [
        Which::Diagnostics,
        Which::References,
        Which::Definition,
        Which::Symbols,
    ]
    .into_iter()
    .map(|which| {
        Arc::new(Lsp {
            which,
            lsp: lsp.clone(),
        }) as Arc<dyn Tool>
    })
    .collect()
}

#[derive(Deserialize)]
struct Args {
    #[serde(default, alias = "file_path")]
    path: Option<String>,
    #[serde(default)]
    line: Option<u32>,
    #[serde(default, alias = "character")]
    column: Option<u32>,
    #[serde(default)]
    query: Option<String>,
}

/// A read call: its file, or the workspace.
struct Input {
    args: Args,
    path: Option<PathBuf>,
}

fn position_schema(what: &str) -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "The file (absolute, or relative to the working folder)."},
            "line": {"type": "integer", "minimum": 1, "description": "1-based line, as Read numbers them."},
            "column": {"type": "integer", "minimum": 1, "description": format!("1-based column of the {what}.")},
        },
        "required": ["path", "line", "column"],
    })
}

impl Lsp {
    fn name(&self) -> &'static str {
        match self.which {
            Which::Diagnostics => "Diagnostics",
            Which::References => "References",
            Which::Definition => "Definition",
            Which::Symbols => "Symbols",
        }
    }

    async fn answer(&self, input: Input, ctx: &ToolContext) -> Result<String, String> {
        let allowed = |p: &Path| ctx.read_guard.as_ref().is_none_or(|guard| guard(p));
        let text = match &input.path {
            Some(path) if !allowed(path) => {
                return Err(format!("{} is denied by a Read rule", path.display()));
            }
            Some(path) => Some(
                ctx.fs
                    .read_to_string(path)
                    .await
                    .map_err(|e| e.to_string())?,
            ),
            None => None,
        };
        let cwd = &ctx.cwd;
        let at = (input.args.line.unwrap_or(1), input.args.column.unwrap_or(1));
        let places = match (self.which, &input.path, &text) {
            (Which::Diagnostics, Some(path), Some(text)) => {
                let diags = self.lsp.file_diagnostics(path, text).await?;
                return Ok(format_diags(&diags, cwd));
            }
            (Which::Diagnostics, _, _) => {
                let running = self.lsp.running();
                if running.is_empty() {
                    return Err(
                        "no language server has checked a file in this session yet; \
                         pass a `path` to check one"
                            .into(),
                    );
                }
                let diags: Vec<_> = self
                    .lsp
                    .known_diagnostics()
                    .into_iter()
                    .filter(|d| allowed(&d.path))
                    .collect();
                return Ok(format!(
                    "Errors and warnings in the files the language servers ({}) checked:\n{}",
                    running.join(", "),
                    format_diags(&diags, cwd)
                ));
            }
            (Which::References | Which::Definition, Some(path), Some(text)) => {
                self.lsp
                    .places(path, text, at, self.which == Which::References)
                    .await?
            }
            (Which::Symbols, _, _) => {
                self.lsp
                    .symbols(input.args.query.as_deref().unwrap_or_default())
                    .await?
            }
            _ => return Err("`path`, `line` and `column` are required".into()),
        };
        let places: Vec<_> = places.into_iter().filter(|p| allowed(&p.path)).collect();
        let files: RefCell<HashMap<PathBuf, Option<Vec<String>>>> = RefCell::default();
        let line_text = |path: &Path, line: u32| {
            let mut files = files.borrow_mut();
            let lines = files.entry(path.to_path_buf()).or_insert_with(|| {
                let meta = std::fs::metadata(path).ok()?;
                (meta.len() < 4 << 20)
                    .then(|| std::fs::read_to_string(path).ok())
                    .flatten()
                    .map(|t| t.lines().map(str::to_owned).collect())
            });
            lines.as_ref()?.get(line.checked_sub(1)? as usize).cloned()
        };
        Ok(format_places(&places, cwd, &line_text))
    }
}

#[async_trait::async_trait]
impl Tool for Lsp {
    fn spec(&self) -> ToolSpec {
        let (description, parameters) = match self.which {
            Which::Diagnostics => (
                "The errors and warnings a language server reports: for `path`, that file as it is now; without it, every file the servers have checked in this session. Edits already report the diagnostics they introduce.",
                json!({"type": "object", "properties": {
                    "path": {"type": "string", "description": "The file to check (optional)."}}}),
            ),
            Which::References => (
                "Every reference to the symbol at a position (its declaration included), from the language server: `path:line:column: text`.",
                position_schema("symbol"),
            ),
            Which::Definition => (
                "Where the symbol at a position is defined, from the language server.",
                position_schema("symbol"),
            ),
            Which::Symbols => (
                "Find symbols (functions, classes, types, …) by name across the project, from the language servers.",
                json!({"type": "object", "properties": {
                    "query": {"type": "string", "description": "All or part of the name."}},
                    "required": ["query"]}),
            ),
        };
        ToolSpec {
            name: self.name().to_owned(),
            description: description.to_owned(),
            parameters,
        }
    }

    /// Queries of the language servers.
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    fn plan(&self, call: &ToolCall, raw: &Value, cwd: &Path) -> Result<CallPlan, String> {
        let args: Args = serde_json::from_value(raw.clone())
            .map_err(|e| format!("{}: invalid arguments: {e}", self.name()))?;
        let path = args
            .path
            .as_deref()
            .map(|p| maia_tools::path::resolve(cwd, p));
        let shown = args.path.clone().unwrap_or_else(|| ".".to_owned());
        // Gated as a Read of the file (or of the working folder).
        let read = ToolInput::Read(ReadInput {
            file_path: shown.clone(),
            offset: None,
            limit: None,
        });
        let title = match (&self.which, &args.query) {
            (Which::Symbols, Some(q)) => format!("Symbols `{q}`"),
            _ => format!("{} {shown}", self.name()),
        };
        let _ = call;
        let mut plan = CallPlan::new(title, builtin_facts(&read, cwd), ());
        plan.kind = Some(match self.which {
            Which::Diagnostics => ToolKind::Read,
            _ => ToolKind::Search,
        });
        plan.locations = path.iter().cloned().collect();
        plan.input = Box::new(Input { args, path });
        Ok(plan)
    }

    async fn run(&self, plan: CallPlan, env: &CallEnv<'_>) -> Ran {
        let Some(input) = plan.take::<Input>() else {
            return ToolOutput::error("internal error: no input").into();
        };
        match self.answer(input, env.ctx).await {
            Ok(text) => ToolOutput::ok(text),
            Err(why) => ToolOutput::error(format!(
                "Language server unavailable: {why}. (This says nothing about whether the code has errors.)"
            )),
        }
        .into()
    }
}
