//! Asking about a selection: the code actions offered on a range, and the
//! `maia.ask` command that starts a turn and returns at once.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use maia_core::PromptPart;
use serde::Deserialize;
use serde_json::{Value, json};
use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::ls_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, CodeActionParams, Command, DiagnosticSeverity,
    Position, Range, Uri,
};

use crate::Inner;
use crate::docs::{offset_at, position_at, slice, uri_to_path};
use crate::turn::{self, Turn};

/// What the user wants done with the selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    Ask,
    Explain,
    Fix,
    Edit,
}

impl Intent {
    fn parse(text: Option<&str>) -> Result<Intent> {
        match text.unwrap_or("ask") {
            "ask" => Ok(Intent::Ask),
            "explain" => Ok(Intent::Explain),
            "fix" => Ok(Intent::Fix),
            "edit" => Ok(Intent::Edit),
            other => Err(Error::invalid_params(format!(
                "unknown intent `{other}` (ask, explain, fix or edit)"
            ))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Intent::Ask => "ask",
            Intent::Explain => "explain",
            Intent::Fix => "fix",
            Intent::Edit => "edit",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Intent::Ask => "MAIA: Ask",
            Intent::Explain => "MAIA: Explain",
            Intent::Fix => "MAIA: Fix",
            Intent::Edit => "MAIA: Edit",
        }
    }

    fn action_title(self) -> &'static str {
        match self {
            Intent::Ask => "MAIA: Ask about selection…",
            Intent::Explain => "MAIA: Explain",
            Intent::Fix => "MAIA: Fix",
            Intent::Edit => "MAIA: Edit selection…",
        }
    }

    fn kind(self) -> CodeActionKind {
        CodeActionKind::new(match self {
            Intent::Ask => "refactor.maia.ask",
            Intent::Explain => "refactor.maia.explain",
            Intent::Fix => "quickfix.maia.fix",
            Intent::Edit => "refactor.rewrite.maia",
        })
    }
}

const INTENTS: [Intent; 4] = [Intent::Ask, Intent::Explain, Intent::Fix, Intent::Edit];

/// The code action kinds advertised at `initialize`.
pub fn action_kinds() -> Vec<CodeActionKind> {
    INTENTS.iter().map(|i| i.kind()).collect()
}

/// Whether `kind` passes a `context.only` filter (kinds are hierarchical).
pub(crate) fn wanted(kind: &CodeActionKind, only: Option<&Vec<CodeActionKind>>) -> bool {
    only.is_none_or(|only| {
        only.iter().any(|o| {
            let (k, o) = (kind.as_str(), o.as_str());
            k == o || (k.starts_with(o) && k[o.len()..].starts_with('.'))
        })
    })
}

fn command(args: Value, title: &str) -> Command {
    Command {
        title: title.to_owned(),
        command: "maia.ask".to_owned(),
        arguments: Some(vec![args]),
    }
}

/// The four MAIA actions on `params.range` (an empty range stands for its
/// whole line). Computed from the request alone: never calls the model.
pub fn code_actions(inner: &Inner, params: &CodeActionParams) -> Vec<CodeActionOrCommand> {
    let uri = &params.text_document.uri;
    let doc = inner.docs.get(uri.as_str());
    let mut range = params.range;
    if range.start == range.end {
        range = Range::new(
            Position::new(range.start.line, 0),
            Position::new(range.start.line + 1, 0),
        );
        if let Some(doc) = &doc {
            // Clamp to the text (the last line has no line break).
            let end = offset_at(&doc.text, range.end);
            range.end = position_at(&doc.text, end);
        }
    }
    let version = doc.as_ref().map(|d| d.version);
    // The editor's own diagnostics for the range (not MAIA's review notes)
    // go with the question.
    let diagnostics: Vec<Value> = params
        .context
        .diagnostics
        .iter()
        .filter(|d| d.source.as_deref() != Some(crate::review::SOURCE))
        .take(MAX_DIAGNOSTICS)
        .map(|d| {
            json!({
                "line": d.range.start.line + 1,
                "severity": match d.severity {
                    Some(DiagnosticSeverity::WARNING) => "warning",
                    Some(DiagnosticSeverity::INFORMATION) => "info",
                    Some(DiagnosticSeverity::HINT) => "hint",
                    _ => "error",
                },
                "message": d.message.chars().take(500).collect::<String>(),
                "source": d.source,
            })
        })
        .collect();
    INTENTS
        .iter()
        .filter(|intent| wanted(&intent.kind(), params.context.only.as_ref()))
        .map(|intent| {
            let mut args = json!({
                "uri": uri.as_str(),
                "version": version,
                "range": range,
                "intent": intent.name(),
            });
            if !diagnostics.is_empty() {
                args["diagnostics"] = Value::Array(diagnostics.clone());
            }
            CodeActionOrCommand::CodeAction(CodeAction {
                title: intent.action_title().to_owned(),
                kind: Some(intent.kind()),
                command: Some(command(args.clone(), intent.action_title())),
                data: Some(args),
                ..CodeAction::default()
            })
        })
        .collect()
}

/// `codeAction/resolve`: the actions are complete already; one that lost
/// its command gets it back from `data`.
pub fn resolve(mut action: CodeAction) -> CodeAction {
    if action.command.is_none()
        && let Some(args) = action.data.clone()
    {
        action.command = Some(command(args, &action.title));
    }
    action
}

/// The argument of `maia.ask`.
#[derive(Debug, Deserialize)]
struct AskArgs {
    uri: String,
    #[serde(default)]
    version: Option<i32>,
    range: Range,
    #[serde(default)]
    intent: Option<String>,
    #[serde(default)]
    prompt: Option<String>,
    /// The editor's diagnostics for the range (from the code action's
    /// context).
    #[serde(default)]
    diagnostics: Vec<EditorDiagnostic>,
}

/// Diagnostics sent with one question.
const MAX_DIAGNOSTICS: usize = 20;

/// One diagnostic the editor showed for the range.
#[derive(Debug, Deserialize)]
struct EditorDiagnostic {
    line: u32,
    #[serde(default)]
    severity: Option<String>,
    message: String,
    #[serde(default)]
    source: Option<String>,
}

/// `maia.ask`: starts the turn and answers at once with
/// `{session, token, answer}`.
pub async fn ask(inner: &Arc<Inner>, arg: Value) -> Result<Value> {
    let args: AskArgs = serde_json::from_value(arg)
        .map_err(|e| Error::invalid_params(format!("invalid maia.ask argument: {e}")))?;
    let intent = Intent::parse(args.intent.as_deref())?;
    let prompt = args.prompt.filter(|p| !p.trim().is_empty());
    let uri: Uri = args
        .uri
        .parse()
        .map_err(|_| Error::invalid_params(format!("invalid uri `{}`", args.uri)))?;
    let path = uri_to_path(&uri)
        .ok_or_else(|| Error::invalid_params("only file: documents can be asked about"))?;
    let (text, open) = match inner.docs.get(uri.as_str()) {
        Some(doc) => {
            if args.version.is_some_and(|v| v != doc.version) {
                tracing::debug!(asked = ?args.version, now = doc.version, "selection from an older version");
            }
            (doc.text, true)
        }
        None => (
            tokio::fs::read_to_string(&path).await.map_err(|e| {
                Error::invalid_params(format!("cannot read {}: {e}", path.display()))
            })?,
            false,
        ),
    };
    let folder = inner.folder_for(&path);
    let mut parts = prompt_parts(
        intent,
        prompt.as_deref(),
        &folder,
        &path,
        &uri,
        &text,
        open,
        args.range,
    );
    if let Some(PromptPart::Text(message)) = parts.first_mut() {
        message.push_str(&editor_diagnostics(&args.diagnostics));
    }
    let answer = answer_path(&folder);
    let answer_uri = Uri::from_file_path(&answer).ok_or_else(Error::internal_error)?;
    let session = inner.session_for(&folder).await.map_err(|e| {
        tracing::error!(folder = %folder.display(), "cannot start a session: {e}");
        Error::internal_error()
    })?;
    let recording = inner.applied.begin(&folder);
    session.handle.prompt(parts).map_err(|_| {
        inner.applied.abandon(recording);
        Error::invalid_params(format!(
            "MAIA is already answering in {}; wait for it or run maia.cancel",
            folder.display()
        ))
    })?;
    let token = format!("maia/{}", inner.next());
    if let Ok(mut turns) = inner.turns.lock() {
        turns.insert(token.clone(), session.handle.clone());
    }
    let result = json!({
        "session": session.handle.id(),
        "token": token,
        "answer": answer_uri.as_str(),
    });
    let header = format!(
        "# {}\n\n`{}` {}{}\n\n",
        intent.title(),
        relative(&folder, &path),
        lines_label(args.range),
        prompt
            .map(|p| format!("\n\n> {}", p.replace('\n', "\n> ")))
            .unwrap_or_default()
    );
    let turn = Turn {
        token,
        title: intent.title().to_owned(),
        asked_uri: uri.as_str().to_owned(),
        range: args.range,
        answer_path: answer,
        answer_uri,
        header,
    };
    tokio::spawn(turn::run(inner.clone(), session, turn));
    Ok(result)
}

/// A new answer file: `.maia/answers/<timestamp>.md`.
fn answer_path(folder: &Path) -> PathBuf {
    let stamp = humantime::format_rfc3339_millis(std::time::SystemTime::now())
        .to_string()
        .replace(':', "-");
    let dir = folder.join(".maia").join("answers");
    let mut path = dir.join(format!("{stamp}.md"));
    let mut n = 1;
    while path.exists() {
        n += 1;
        path = dir.join(format!("{stamp}-{n}.md"));
    }
    path
}

fn relative(folder: &Path, path: &Path) -> String {
    path.strip_prefix(folder)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// `lines 3-7` (1-based; a range ending at column 0 stops on the line before).
fn lines_label(range: Range) -> String {
    let first = range.start.line + 1;
    let mut last = range.end.line + 1;
    if range.end.character == 0 && range.end.line > range.start.line {
        last -= 1;
    }
    if first == last {
        format!("line {first}")
    } else {
        format!("lines {first}-{last}")
    }
}

/// The editor's diagnostics for the selection, as the prompt lists them.
fn editor_diagnostics(diagnostics: &[EditorDiagnostic]) -> String {
    if diagnostics.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n\nThe editor reports these problems in the selection:");
    for d in diagnostics.iter().take(MAX_DIAGNOSTICS) {
        out.push_str(&format!(
            "\n- line {}: {}: {}{}",
            d.line,
            d.severity.as_deref().unwrap_or("error"),
            d.message,
            d.source
                .as_deref()
                .map(|s| format!(" ({s})"))
                .unwrap_or_default()
        ));
    }
    out
}

fn instruction(intent: Intent, prompt: Option<&str>) -> String {
    match (intent, prompt) {
        (Intent::Ask | Intent::Explain, None) => "Explain the selected code: what it does, how \
            it does it, and anything surprising or risky. Answer in Markdown; do not change any \
            file."
            .to_owned(),
        (Intent::Ask | Intent::Explain, Some(question)) => format!(
            "Answer this question about the selected code, in Markdown, without changing any \
             file unless asked to:\n{question}"
        ),
        (Intent::Fix, None) => "Fix the problems in the selected code. Make the change with the \
            Edit tool (Read the file first), keep it as small as possible, then say briefly what \
            you changed and why."
            .to_owned(),
        (Intent::Fix, Some(what)) => format!(
            "Fix the selected code: {what}\nMake the change with the Edit tool (Read the file \
             first), keep it as small as possible, then say briefly what you changed and why."
        ),
        (Intent::Edit, None) => "Improve the selected code (clarity and correctness, same \
            behaviour). Make the change with the Edit tool (Read the file first), then say \
            briefly what you changed."
            .to_owned(),
        (Intent::Edit, Some(what)) => format!(
            "Edit the selected code as follows: {what}\nMake the change with the Edit tool (Read \
             the file first), then say briefly what you changed."
        ),
    }
}

/// The turn's prompt: the instruction, the selection, and the file as
/// @file context (the editor's buffer when it is open).
#[allow(clippy::too_many_arguments)]
fn prompt_parts(
    intent: Intent,
    prompt: Option<&str>,
    folder: &Path,
    path: &Path,
    uri: &Uri,
    text: &str,
    open: bool,
    range: Range,
) -> Vec<PromptPart> {
    let lang = path
        .extension()
        .map(|e| e.to_string_lossy().into_owned())
        .unwrap_or_default();
    let selection = slice(text, range);
    let message = format!(
        "{}\n\nSelection: `{}` {} ({}):\n```{lang}\n{}\n```",
        instruction(intent, prompt),
        relative(folder, path),
        lines_label(range),
        path.display(),
        selection.strip_suffix('\n').unwrap_or(selection),
    );
    let file = if open {
        PromptPart::Embedded {
            uri: uri.as_str().to_owned(),
            text: text.to_owned(),
        }
    } else {
        PromptPart::File(path.to_path_buf())
    };
    vec![PromptPart::Text(message), file]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_filter_is_hierarchical() {
        let fix = Intent::Fix.kind();
        assert!(wanted(&fix, None));
        assert!(wanted(&fix, Some(&vec![CodeActionKind::new("quickfix")])));
        assert!(!wanted(&fix, Some(&vec![CodeActionKind::new("quick")])));
        assert!(!wanted(&fix, Some(&vec![CodeActionKind::new("refactor")])));
    }

    #[test]
    fn lines_are_one_based() {
        let r = |a, b, c, d| Range::new(Position::new(a, b), Position::new(c, d));
        assert_eq!(lines_label(r(2, 0, 5, 0)), "lines 3-5");
        assert_eq!(lines_label(r(2, 1, 2, 4)), "line 3");
        assert_eq!(lines_label(r(2, 0, 3, 0)), "line 3");
    }

    #[test]
    fn the_editors_diagnostics_join_the_question() {
        let args: AskArgs = serde_json::from_value(json!({
            "uri": "file:///a.py", "range": Range::default(),
            "diagnostics": [{"line": 3, "severity": "error", "message": "bad type", "source": "Pylance"}]
        }))
        .unwrap();
        assert_eq!(
            editor_diagnostics(&args.diagnostics),
            "\n\nThe editor reports these problems in the selection:\n- line 3: error: bad type (Pylance)"
        );
        assert_eq!(editor_diagnostics(&[]), "");
    }
}
