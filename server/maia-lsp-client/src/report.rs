//! What the model reads: an edit's diagnostics report, a list of
//! diagnostics, a list of places, each bounded.

use std::path::Path;

use crate::{Diag, EditReport, Place};

/// Diagnostics listed in full after an edit.
const MAX_AFTER_EDIT: usize = 20;
/// Lines of a list the tools return.
const MAX_LISTED: usize = 100;

fn shown(path: &Path, cwd: &Path) -> String {
    path.strip_prefix(cwd).unwrap_or(path).display().to_string()
}

fn line_of(d: &Diag) -> String {
    let code = d
        .code
        .as_deref()
        .map(|c| format!(" [{c}]"))
        .unwrap_or_default();
    format!(
        "line {}, col {}: {}: {}{code}",
        d.line,
        d.column,
        d.severity.label(),
        d.message.replace('\n', "\n    ")
    )
}

fn plural(n: usize, one: &str) -> String {
    format!("{n} {one}{}", if n == 1 { "" } else { "s" })
}

/// The text appended to the result of an edit (`what`: "edit", or
/// "command" for Bash), or `None` when nothing changed.
pub fn format_edit_report(report: &EditReport, cwd: &Path, what: &str) -> Option<String> {
    if !report.worth_telling() {
        return None;
    }
    match report {
        EditReport::Unavailable(why) => Some(format!(
            "Diagnostics unavailable: {why}. This {what} was not checked; do not take it as error-free."
        )),
        EditReport::Checked {
            servers,
            introduced,
            resolved,
            elsewhere,
        } => {
            let mut out = format!("Diagnostics after this {what} ({}):", servers.join(", "));
            let mut files: Vec<&Path> = Vec::new();
            for d in introduced {
                if !files.contains(&d.path.as_path()) {
                    files.push(&d.path);
                }
            }
            for file in files {
                out.push_str(&format!("\nNew in {}:", shown(file, cwd)));
                let here: Vec<&Diag> = introduced.iter().filter(|d| d.path == file).collect();
                for d in here.iter().take(MAX_AFTER_EDIT) {
                    out.push_str(&format!("\n  {}", line_of(d)));
                }
                if here.len() > MAX_AFTER_EDIT {
                    out.push_str(&format!("\n  … and {} more", here.len() - MAX_AFTER_EDIT));
                }
            }
            if !resolved.is_empty() {
                out.push_str(&format!(
                    "\nGone after this edit ({}):",
                    plural(resolved.len(), "problem")
                ));
                for d in resolved.iter().take(MAX_AFTER_EDIT) {
                    out.push_str(&format!("\n  was {} {}", shown(&d.path, cwd), line_of(d)));
                }
            }
            let (errors, files) = *elsewhere;
            if errors > 0 {
                out.push_str(&format!(
                    "\nElsewhere: {} in {} (the Diagnostics tool lists them).",
                    plural(errors, "error"),
                    plural(files, "other file")
                ));
            }
            Some(out)
        }
    }
}

/// A list of diagnostics, by file, bounded.
pub fn format_diags(diags: &[Diag], cwd: &Path) -> String {
    if diags.is_empty() {
        return "No errors or warnings.".to_owned();
    }
    let mut out = String::new();
    let mut file: Option<&Path> = None;
    for d in diags.iter().take(MAX_LISTED) {
        if file != Some(d.path.as_path()) {
            file = Some(d.path.as_path());
            out.push_str(&format!("{}:\n", shown(&d.path, cwd)));
        }
        out.push_str(&format!("  {}\n", line_of(d)));
    }
    if diags.len() > MAX_LISTED {
        out.push_str(&format!("… and {} more\n", diags.len() - MAX_LISTED));
    }
    out
}

/// A list of places as `path:line:col`, with the symbol or the line's
/// text, bounded.
pub fn format_places(
    places: &[Place],
    cwd: &Path,
    line_text: &dyn Fn(&Path, u32) -> Option<String>,
) -> String {
    if places.is_empty() {
        return "Nothing found.".to_owned();
    }
    let mut out = String::new();
    for p in places.iter().take(MAX_LISTED) {
        let what = p
            .label
            .clone()
            .or_else(|| line_text(&p.path, p.line).map(|t| t.trim().chars().take(200).collect()))
            .unwrap_or_default();
        out.push_str(&format!(
            "{}:{}:{}: {what}\n",
            shown(&p.path, cwd),
            p.line,
            p.column
        ));
    }
    if places.len() > MAX_LISTED {
        out.push_str(&format!("… and {} more\n", places.len() - MAX_LISTED));
    }
    out
}
